/* What the unit tests of landed blocks (pagedata/pointer_landings.c, pagedata/grants_to_partner.c,
 * pagedata/resync_landings.c, each with pagedata/landed_block.c) fake below them:
 * - the session's landing calls (replica/session.h): one-sided or not, one
 *   generation for every registration block of BLOCK_FRAMES frames (which
 *   the test defines first), a run refused when it crosses a block or
 *   fake_open_error is set; the real calls are tested in test_session and,
 *   on a verbs device, test_rdma_session;
 * - the vmm's frame calls pagedata_landed_adopt makes: frames back to the real
 *   pool, a page attached or filled (frames of its allocation's partition of
 *   the real pool, never evicting), no replacement queue.
 * Included once, by one test file. */
#ifndef FTVM_TESTS_UNIT_FAKE_LANDED_H
#define FTVM_TESTS_UNIT_FAKE_LANDED_H

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "pagedata_state.h"
#include "session.h"
#include "vmm_core.h"

/* The component under test: its handles are the test's to set. */
static struct pagedata pd;

static bool fake_one_sided __attribute__((unused)) = true;
static uint64_t fake_generation __attribute__((unused)) = 1;
static int fake_open_error __attribute__((unused));

bool repl_session_one_sided(const struct repl_session *s)
{
	return fake_one_sided;
}

int repl_session_landing_open(struct repl_session *s, uint64_t frame, uint32_t frames,
			      struct repl_landing *ret)
{
	if (fake_open_error)
		return fake_open_error;
	if (frame / BLOCK_FRAMES != (frame + frames - 1) / BLOCK_FRAMES)
		return -ERANGE;
	ret->frame = frame;
	ret->frames = frames;
	ret->generation = fake_generation;
	return 0;
}

int repl_session_landing_check(const struct repl_session *s, const struct repl_landing *l,
			       char *reason, size_t reason_len)
{
	if (l->generation == fake_generation)
		return 0;
	snprintf(reason, reason_len,
		 "landing frame %llu at generation %llu is stale: block %llu is at %llu",
		 (unsigned long long)l->frame, (unsigned long long)l->generation,
		 (unsigned long long)(l->frame / BLOCK_FRAMES),
		 (unsigned long long)fake_generation);
	return -ESTALE;
}

void vmm_frames_give(struct vmm *v, uint64_t frame, uint32_t block_size)
{
	frame_pool_give(pd.pool, frame, block_size / frame_pool_page_size(pd.pool));
}

void vmm_page_attach(struct vmm *v, struct vmm_page *p, uint64_t frame)
{
	p->frame = frame;
	p->resident = true;
}

void vmm_replace_touch(struct vmm *v, struct vmm_page *p)
{
}

int vmm_page_fill(struct vmm *v, struct vmm_alloc *a, uint64_t page, const void *data, char *reason,
		  size_t reason_len)
{
	struct vmm_page *p = &a->page[page];
	uint64_t frame;

	if (!p->resident) {
		if (frame_pool_take_from(pd.pool, vmm_alloc_partition(a),
					 a->block_size / frame_pool_page_size(pd.pool),
					 &frame) < 0) {
			snprintf(reason, reason_len, "no frames");
			return -ENOSPC;
		}
		vmm_page_attach(v, p, frame);
	}
	memcpy(frame_pool_addr(pd.pool, p->frame), data, a->block_size);
	return 0;
}

#endif
