/* Landing runs the partner granted this node, the originator O of whole-page
 * writes (replica/RDMA.md, "Whole-page write"; vmm/VMM.md, "Landings"):
 *
 *   LandingGrant, an answer's grants -> free
 *   a whole-page write takes one     -> in flight until the batch's answers
 *   answered, WritePage not applied  -> free again (its bytes are garbage
 *                                       nothing names)
 *   WritePage applied, or no answer  -> gone (P consumed it, or may have)
 *   LandingRevoke                    -> gone; answered once none of its runs
 *                                       is in flight
 *   link down                        -> all gone */
#include "vmm_core.h"
#include "vmm_state.h" /* still reads struct vmm: to go */

#include "pagedata_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "session.h"

struct vmm_granted {
	struct vmm_granted *next;
	struct repl_landing at;
	bool in_flight;
	bool revoked; /* in flight when the partner revoked it */
};

/* A LandingRevoke whose answer waits for writes in flight. */
struct vmm_revoke_held {
	struct vmm_revoke_held *next;
	uint64_t seq;
};

int vmm_granted_add(struct vmm *v, Ftvm__Partner__Landing *const *ls, size_t n, char *reason,
		    size_t len)
{
	uint32_t page_size = frame_pool_page_size(v->pool);

	for (size_t i = 0; i < n; i++)
		if (ls[i]->frames == 0 || (uint64_t)ls[i]->frames * page_size > UINT32_MAX) {
			snprintf(reason, len, "granted landing at frame %llu has %u frames",
				 (unsigned long long)ls[i]->frame, ls[i]->frames);
			return -EINVAL;
		}
	for (size_t i = 0; i < n; i++) {
		struct vmm_granted *g = calloc(1, sizeof(*g));

		if (!g) {
			snprintf(reason, len, "out of memory");
			return -ENOMEM;
		}
		g->at.frame = ls[i]->frame;
		g->at.frames = ls[i]->frames;
		g->at.generation = ls[i]->generation;
		g->next = v->pagedata->granted;
		v->pagedata->granted = g;
	}
	return 0;
}

bool vmm_granted_take(struct vmm *v, uint32_t frames, struct repl_landing *ret)
{
	for (struct vmm_granted *g = v->pagedata->granted; g; g = g->next)
		if (!g->in_flight && g->at.frames == frames) {
			g->in_flight = true;
			*ret = g->at;
			return true;
		}
	return false;
}

static bool revoked_in_flight(const struct vmm *v)
{
	for (const struct vmm_granted *g = v->pagedata->granted; g; g = g->next)
		if (g->revoked)
			return true;
	return false;
}

static void answer_held_revokes(struct vmm *v)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

	if (revoked_in_flight(v))
		return;
	cc.applied_lsn = pagetable_partner_applied_lsn(v->pt);
	while (v->pagedata->revokes_held) {
		struct vmm_revoke_held *h = v->pagedata->revokes_held;

		v->pagedata->revokes_held = h->next;
		repl_session_complete(v->session, h->seq, &cc);
		free(h);
	}
}

void vmm_granted_done(struct vmm *v, const struct repl_landing *at, bool spent)
{
	struct vmm_granted **g = &v->pagedata->granted;

	while (*g && ((*g)->at.frame != at->frame || (*g)->at.frames != at->frames ||
		      (*g)->at.generation != at->generation || !(*g)->in_flight))
		g = &(*g)->next;
	if (!*g)
		return; /* forgotten with the link it came on */
	if (spent || (*g)->revoked) {
		struct vmm_granted *gone = *g;

		*g = gone->next;
		free(gone);
	} else {
		(*g)->in_flight = false;
	}
	answer_held_revokes(v);
}

bool vmm_granted_revoke(struct vmm *v, const Ftvm__Partner__LandingRevoke *m, uint64_t seq)
{
	struct vmm_revoke_held *h;

	for (size_t i = 0; i < m->n_landings; i++) {
		struct vmm_granted **g = &v->pagedata->granted;

		while (*g && ((*g)->at.frame != m->landings[i]->frame ||
			      (*g)->at.frames != m->landings[i]->frames))
			g = &(*g)->next;
		if (!*g)
			continue; /* spent already */
		if ((*g)->in_flight) {
			(*g)->revoked = true;
		} else {
			struct vmm_granted *gone = *g;

			*g = gone->next;
			free(gone);
		}
	}
	if (!revoked_in_flight(v))
		return false;
	h = calloc(1, sizeof(*h));
	if (!h)
		return false; /* out of memory: answered now, the best left */
	h->seq = seq;
	h->next = v->pagedata->revokes_held;
	v->pagedata->revokes_held = h;
	return true;
}

void vmm_granted_forget(struct vmm *v)
{
	while (v->pagedata->granted) {
		struct vmm_granted *gone = v->pagedata->granted;

		v->pagedata->granted = gone->next;
		free(gone);
	}
	/* Their requests failed with the link on the partner's side. */
	while (v->pagedata->revokes_held) {
		struct vmm_revoke_held *gone = v->pagedata->revokes_held;

		v->pagedata->revokes_held = gone->next;
		free(gone);
	}
}
