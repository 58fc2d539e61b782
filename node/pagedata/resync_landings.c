/* Landing runs on the node a resync brings up to date, R (node/ha/HA.md, "Solo
 * and rejoin"; replica/RDMA.md, "Resync"):
 *
 *   ResyncLandings{frames...}       -> a run of free frames per entry, in
 *                                      order, while they last; opened, held
 *   ResyncPage{state, landed}       -> a newer version here: dropped, the run
 *                                      back; else checked and adopted as the
 *                                      page's frames (refused: the run back)
 *   ResyncEnd, ResyncBegin, link
 *   down                            -> every run still held back to the pool
 *
 * A change the survivor mirrored after its snapshot may reach this node
 * before the snapshot's block of the same page (the landed blocks go a
 * round trip later): the page's version decides which is kept. */
#include "vmm_core.h"

#include "pagedata_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct vmm_resync_landing {
	struct vmm_resync_landing *next;
	struct repl_landing at;
};

static void give_back(struct pagedata *pd, struct vmm_resync_landing **l)
{
	struct vmm_resync_landing *gone = *l;

	*l = gone->next;
	frame_pool_give(pd->pool, gone->at.frame, gone->at.frames);
	free(gone);
}

static struct vmm_resync_landing **find(struct pagedata *pd, const Ftvm__Partner__Landing *named)
{
	struct vmm_resync_landing **l = &pd->resync_landings;

	while (*l && ((*l)->at.frame != named->frame || (*l)->at.frames != named->frames))
		l = &(*l)->next;
	return l;
}

size_t pagedata_resync_landings_open(struct pagedata *pd, const uint32_t *frames, size_t n,
				     Ftvm__Partner__Landing *ret)
{
	/* Free frames only, and at most half of them: the changes mirrored
	 * meanwhile need frames too, and a block without a run comes inline. */
	uint64_t budget = frame_pool_free_count(pd->pool) / 2;
	size_t k = 0;

	if (!repl_session_one_sided(pd->session))
		return 0;
	if (n > VMM_RESYNC_CHUNK)
		n = VMM_RESYNC_CHUNK;
	for (; k < n && frames[k] && frames[k] <= budget; k++) {
		struct vmm_resync_landing *l = calloc(1, sizeof(*l));
		uint64_t first;
		int r = l ? frame_pool_take(pd->pool, frames[k], &first) : -ENOMEM;

		if (r == 0) {
			r = repl_session_landing_open(pd->session, first, frames[k], &l->at);
			if (r < 0)
				frame_pool_give(pd->pool, first, frames[k]);
		}
		if (r < 0) {
			log_debug("resync: %zu of %zu landing runs (%s); the rest come inline", k,
				  n, strerror(-r));
			free(l);
			break;
		}
		budget -= frames[k];
		l->next = pd->resync_landings;
		pd->resync_landings = l;
		ftvm__partner__landing__init(&ret[k]);
		ret[k].frame = l->at.frame;
		ret[k].frames = l->at.frames;
		ret[k].generation = l->at.generation;
	}
	return k;
}

int pagedata_resync_page_order(const struct vmm_alloc *a, uint64_t page,
			       const Ftvm__Partner__PageState *state, char *reason, size_t len)
{
	const struct vmm_page *p = &a->page[page];

	if (p->version > state->version)
		return 1; /* a change mirrored after the snapshot came first */
	if (p->version < state->version) {
		snprintf(reason, len,
			 "ResyncPage %s page %llu is of version %llu, ahead of its page state's "
			 "%llu",
			 a->guid, (unsigned long long)page, (unsigned long long)state->version,
			 (unsigned long long)p->version);
		return -EINVAL;
	}
	if (p->crc32c != state->crc32c) {
		snprintf(reason, len,
			 "ResyncPage %s page %llu version %llu: CRC-32C 0x%08x, its page state "
			 "says 0x%08x",
			 a->guid, (unsigned long long)page, (unsigned long long)state->version,
			 state->crc32c, p->crc32c);
		return -EINVAL;
	}
	return 0;
}

int pagedata_resync_landing_adopt(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
				  const Ftvm__Partner__Landing *named, uint32_t crc32c,
				  char *reason, size_t len)
{
	struct vmm_resync_landing **l = find(pd, named), *held = *l;
	size_t n = pagedata_landed_reason_start(reason, len, "ResyncPage", a->guid, page, "frame",
						named);
	int r;

	reason += n;
	len -= n;
	if (!held) {
		snprintf(reason, len, "%s holds no resync landing there", vmm_node_id(pd->vmm));
		r = -EINVAL;
	} else {
		r = pagedata_landed_run_check(pd, a, &held->at, named, "given", crc32c, reason,
					      len);
		*l = held->next; /* adopted, or refused and back to the pool */
	}
	r = pagedata_landed_settle(pd, a, page, held ? &held->at : NULL, r);
	if (r == 0)
		a->page[page].stale = false;
	free(held);
	return r;
}

void pagedata_resync_landing_close(struct pagedata *pd, const Ftvm__Partner__Landing *named)
{
	struct vmm_resync_landing **l = find(pd, named);

	if (*l)
		give_back(pd, l);
}

void pagedata_resync_landings_drop(struct pagedata *pd)
{
	while (pd->resync_landings)
		give_back(pd, &pd->resync_landings);
}
