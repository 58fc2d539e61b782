/* Landing runs on the receiving node P of a one-sided pointer write
 * (replica/RDMA.md, "One-sided page writes"; vmm/VMM.md, "Landings"):
 *
 *   AllocateWrite (write lock)   -> take a run of free frames in one
 *                                   registration block, open it, answer it
 *   WritePage{landed}            -> check it, adopt it: the run becomes the
 *                                   page's frames, the old ones go back
 *   unlock without adoption,
 *   a refused WritePage, the
 *   allocation gone, link down   -> the run goes back to the pool
 *
 * A run is held with the partner's write lock, so no client of this node
 * can hold a pointer into the page meanwhile: moving the page to the run is
 * safe. Until adoption the page's own frames hold its last whole version. */
#include "vmm_core.h"

#include "pagedata_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct vmm_landing {
	struct vmm_landing *next;
	char guid[128];
	uint64_t page;
	char owner[128]; /* of the write lock it is held with */
	struct repl_landing at;
};

static uint64_t gcd(uint64_t a, uint64_t b)
{
	while (b) {
		uint64_t t = a % b;

		a = b;
		b = t;
	}
	return a;
}

/* [memory] pool_block_size (64 MiB by default: few registrations even for a
 * large pool, each quick enough to make on first use). Rounded up to a
 * multiple of every policy's block (the largest one's, when they are powers
 * of two) so that no frames are stranded at a block's end where no landing
 * run fits. A pool smaller than that is one block. */
uint64_t pagedata_landing_block_frames(const struct ftvm_config *c)
{
	uint64_t total = c->memory_size / c->page_size;
	uint64_t want = c->pool_block_size / c->page_size, unit = 1;

	for (size_t i = 0; i < c->n_policies && unit < total; i++) {
		uint64_t frames = c->policies[i].block_size / c->page_size;

		if (frames)
			unit = unit / gcd(unit, frames) * frames;
	}
	want = (want + unit - 1) / unit * unit;
	if (want > total)
		want = total;
	return want ? want : 1;
}

static struct vmm_landing **find(struct pagedata *pd, const char *guid, uint64_t page)
{
	struct vmm_landing **l = &pd->landings;

	while (*l && ((*l)->page != page || strcmp((*l)->guid, guid) != 0))
		l = &(*l)->next;
	return l;
}

static void give_back(struct pagedata *pd, struct vmm_landing **l)
{
	struct vmm_landing *gone = *l;

	*l = gone->next;
	frame_pool_give(pd->pool, gone->at.frame, gone->at.frames);
	free(gone);
}

bool pagedata_landing_open(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
			   const char *owner, Ftvm__Partner__Landing *ret)
{
	uint32_t frames = a->block_size / frame_pool_page_size(pd->pool);
	struct vmm_landing **old = find(pd, a->guid, page), *l;
	uint64_t first;
	int r;

	if (!repl_session_one_sided(pd->session))
		return false;
	if (*old) /* a lock the owner granted over our mirror's: its run is void */
		give_back(pd, old);
	/* Free frames only: a pointer write never waits nor evicts for a landing,
	 * it goes inline without one. */
	if (frame_pool_take_from(pd->pool, vmm_alloc_partition(a), frames, &first) < 0)
		return false;
	l = calloc(1, sizeof(*l));
	r = l ? repl_session_landing_open(pd->session, first, frames, &l->at) : -ENOMEM;
	if (r < 0) {
		log_debug("%s page %llu: no landing (%s), the block will come inline", a->guid,
			  (unsigned long long)page, strerror(-r));
		frame_pool_give(pd->pool, first, frames);
		free(l);
		return false;
	}
	snprintf(l->guid, sizeof(l->guid), "%s", a->guid);
	l->page = page;
	snprintf(l->owner, sizeof(l->owner), "%s", owner);
	l->next = pd->landings;
	pd->landings = l;
	ftvm__partner__landing__init(ret);
	ret->frame = l->at.frame;
	ret->frames = l->at.frames;
	ret->generation = l->at.generation;
	return true;
}

/* Why the landing m names cannot be adopted, in reason; 0 when it can. */
static int landing_refusal(struct pagedata *pd, const struct vmm_alloc *a,
			   const Ftvm__Partner__WritePage *m, struct vmm_landing *held,
			   char *reason, size_t len)
{
	const Ftvm__Partner__Landing *named = m->landed;
	size_t n = pagedata_landed_reason_start(reason, len, "WritePage to", m->guid, m->page,
						"frame", named);

	reason += n;
	len -= n;
	if (m->data.len) {
		snprintf(reason, len, "it carries %zu bytes of data as well", m->data.len);
		return -EINVAL;
	}
	if (!repl_session_one_sided(pd->session)) {
		snprintf(reason, len, "the link to %s does not take page data one-sided",
			 vmm_partner_id(pd->vmm));
		return -EINVAL;
	}
	if (!held) {
		snprintf(reason, len, "%s holds no landing for that page", vmm_node_id(pd->vmm));
		return -EINVAL;
	}
	if (held->at.frame != named->frame || held->at.frames != named->frames) {
		snprintf(reason, len,
			 "not the landing held for its write lock (frame %llu, %u frames)",
			 (unsigned long long)held->at.frame, held->at.frames);
		return -EINVAL;
	}
	if (held->at.generation != named->generation) {
		snprintf(
			reason, len,
			"landing frame %llu at generation %llu is stale: it was given at generation %llu",
			(unsigned long long)named->frame, (unsigned long long)named->generation,
			(unsigned long long)held->at.generation);
		return -ESTALE;
	}
	return pagedata_landed_bytes_check(pd, &held->at, a->block_size, m->crc32c, reason, len);
}

int pagedata_landing_adopt(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
			   const Ftvm__Partner__WritePage *m, char *reason, size_t len)
{
	struct vmm_landing **l = find(pd, a->guid, page), *held = *l;
	int r = landing_refusal(pd, a, m, held, reason, len);

	/* Adopted, or refused and back to the pool: the batch fails then, and
	 * the partner sends this page inline from now on. */
	if (held)
		*l = held->next;
	r = pagedata_landed_settle(pd, a, page, held ? &held->at : NULL, r);
	free(held);
	return r;
}

void pagedata_landing_close(struct pagedata *pd, const char *guid, uint64_t page, const char *owner)
{
	struct vmm_landing **l = find(pd, guid, page);

	if (*l && (!owner || strcmp((*l)->owner, owner) == 0))
		give_back(pd, l);
}

void pagedata_landings_close_alloc(struct pagedata *pd, const char *guid)
{
	struct vmm_landing **l = &pd->landings;

	while (*l)
		if (strcmp((*l)->guid, guid) == 0)
			give_back(pd, l);
		else
			l = &(*l)->next;
}

void pagedata_landings_drop(struct pagedata *pd)
{
	while (pd->landings)
		give_back(pd, &pd->landings);
	vmm_holdings_forget_landings(pd->vmm);
}
