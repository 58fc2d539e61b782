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

#include "pagedata_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

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

int pagedata_granted_on_grant(struct pagedata *pd, const Ftvm__Partner__LandingGrant *m,
			      char *reason, size_t len)
{
	if (!repl_session_one_sided(pd->session)) {
		snprintf(reason, len,
			 "LandingGrant on a link that does not take page data one-sided");
		return -EINVAL;
	}
	return pagedata_granted_add(pd, m->landings, m->n_landings, reason, len);
}

bool pagedata_granted_from_answer(struct pagedata *pd, const CommandComplete *cc,
				  struct repl_landing *ret_landing)
{
	char reason[128];

	if (cc->n_grants &&
	    pagedata_granted_add(pd, cc->grants, cc->n_grants, reason, sizeof(reason)) < 0)
		log_warning("grants from %s ignored: %s", vmm_partner_id(pd->vmm), reason);
	if (cc->payload_case != FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LANDING)
		return false;
	ret_landing->frame = cc->landing->frame;
	ret_landing->frames = cc->landing->frames;
	ret_landing->generation = cc->landing->generation;
	return true;
}

int pagedata_granted_add(struct pagedata *pd, Ftvm__Partner__Landing *const *ls, size_t n,
			 char *reason, size_t len)
{
	uint32_t page_size = frame_pool_page_size(pd->pool);

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
		g->next = pd->granted;
		pd->granted = g;
	}
	return 0;
}

bool pagedata_granted_take(struct pagedata *pd, uint32_t frames, struct repl_landing *ret)
{
	for (struct vmm_granted *g = pd->granted; g; g = g->next)
		if (!g->in_flight && g->at.frames == frames) {
			g->in_flight = true;
			*ret = g->at;
			return true;
		}
	return false;
}

static bool revoked_in_flight(const struct pagedata *pd)
{
	for (const struct vmm_granted *g = pd->granted; g; g = g->next)
		if (g->revoked)
			return true;
	return false;
}

static void answer_held_revokes(struct pagedata *pd)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

	if (revoked_in_flight(pd))
		return;
	cc.applied_lsn = pagetable_partner_applied_lsn(pd->pt);
	while (pd->revokes_held) {
		struct vmm_revoke_held *h = pd->revokes_held;

		pd->revokes_held = h->next;
		vmm_answer(pd->vmm, h->seq, &cc);
		free(h);
	}
}

void pagedata_granted_done(struct pagedata *pd, const struct repl_landing *at, bool spent)
{
	struct vmm_granted **g = &pd->granted;

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
	answer_held_revokes(pd);
}

bool pagedata_granted_revoke(struct pagedata *pd, const Ftvm__Partner__LandingRevoke *m,
			     uint64_t seq)
{
	struct vmm_revoke_held *h;

	for (size_t i = 0; i < m->n_landings; i++) {
		struct vmm_granted **g = &pd->granted;

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
	if (!revoked_in_flight(pd))
		return false;
	h = calloc(1, sizeof(*h));
	if (!h)
		return false; /* out of memory: answered now, the best left */
	h->seq = seq;
	h->next = pd->revokes_held;
	pd->revokes_held = h;
	return true;
}

void pagedata_granted_forget(struct pagedata *pd)
{
	while (pd->granted) {
		struct vmm_granted *gone = pd->granted;

		pd->granted = gone->next;
		free(gone);
	}
	/* Their requests failed with the link on the partner's side. */
	while (pd->revokes_held) {
		struct vmm_revoke_held *gone = pd->revokes_held;

		pd->revokes_held = gone->next;
		free(gone);
	}
}
