/* Landing grants on the receiving node P of a whole-page write
 * (replica/RDMA.md, "Whole-page write"; vmm/VMM.md, "Landings"): runs of free
 * frames granted to the partner ahead, so that its whole-page write goes
 * one-sided in its one round trip.
 *
 *   link up, one-sided           -> GRANTS_PER_SIZE runs per block size in
 *                                   use, in one LandingGrant
 *   WritePage{landed = a grant}  -> check it, adopt it as the page's frames;
 *                                   a fresh run goes in the answer's grants
 *   refused WritePage            -> the run stays granted (O may reuse it)
 *   short of frames              -> LandingRevoke; the runs come back with
 *                                   the partner's answer
 *   link down                    -> every run back to the pool
 *
 * Grants never take more than 1/GRANT_SHARE of the free frames: they are an
 * optimisation, never a reason for a page-in or a write to wait. */
#include "vmm_core.h"

#include "pagedata_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM
#define GRANTS_PER_SIZE 2
#define GRANT_SHARE 32
#define GRANTS_MAX (GRANTS_PER_SIZE * (CONFIG_POLICIES_MAX + 1))

struct vmm_grant {
	struct vmm_grant *next;
	struct repl_landing at;
	/* In a LandingRevoke not answered yet: a WritePage may still land in
	 * it (O answers once none is in flight). */
	bool revoking;
};

static uint64_t frames_granted(const struct pagedata *pd)
{
	uint64_t n = 0;

	for (const struct vmm_grant *g = pd->grants; g; g = g->next)
		n += g->at.frames;
	return n;
}

/* A run of frames more for the partner, from free frames only, while the
 * grants stay within their share of what is free. */
static int grant_take(struct pagedata *pd, uint32_t frames, struct vmm_grant **ret)
{
	uint64_t granted = frames_granted(pd) + frames;
	struct vmm_grant *g;
	uint64_t first;
	int r;

	if (frame_pool_free_count(pd->pool) < granted * GRANT_SHARE)
		return -ENOSPC;
	r = frame_pool_take(pd->pool, frames, &first);
	if (r < 0)
		return r;
	g = calloc(1, sizeof(*g));
	r = g ? repl_session_landing_open(pd->session, first, frames, &g->at) : -ENOMEM;
	if (r < 0) {
		frame_pool_give(pd->pool, first, frames);
		free(g);
		return r;
	}
	g->next = pd->grants;
	pd->grants = g;
	pd->counted.landings_granted++;
	*ret = g;
	return 0;
}

static void landing_of(const struct vmm_grant *g, Ftvm__Partner__Landing *ret)
{
	ftvm__partner__landing__init(ret);
	ret->frame = g->at.frame;
	ret->frames = g->at.frames;
	ret->generation = g->at.generation;
}

/* The runs of a LandingGrant or a LandingRevoke, as they are sent. */
struct runs {
	Ftvm__Partner__Landing landing[GRANTS_MAX], *ptr[GRANTS_MAX];
	size_t n;
};

static void runs_add(struct runs *rs, const struct vmm_grant *g)
{
	landing_of(g, &rs->landing[rs->n]);
	rs->ptr[rs->n] = &rs->landing[rs->n];
	rs->n++;
}

/* Sends rs to the partner, in a LandingRevoke when revoke, else in a
 * LandingGrant; its answer goes to done(arg). */
static int send_runs(struct pagedata *pd, bool revoke, struct runs *rs, pending_done_fn done,
		     void *arg)
{
	Ftvm__Partner__LandingGrant grant = FTVM__PARTNER__LANDING_GRANT__INIT;
	Ftvm__Partner__LandingRevoke revocation = FTVM__PARTNER__LANDING_REVOKE__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;

	if (revoke) {
		revocation.n_landings = rs->n;
		revocation.landings = rs->ptr;
		env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_REVOKE;
		env.landing_revoke = &revocation;
	} else {
		grant.n_landings = rs->n;
		grant.landings = rs->ptr;
		env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_GRANT;
		env.landing_grant = &grant;
	}
	return vmm_partner_send(pd->vmm, (Envelope *[]){ &env }, 1, NULL, 0, done, &arg);
}

static void give_back(struct pagedata *pd, struct vmm_grant **g)
{
	struct vmm_grant *gone = *g;

	*g = gone->next;
	frame_pool_give(pd->pool, gone->at.frame, gone->at.frames);
	free(gone);
}

static void on_grant_answer(const CommandComplete *cc, void *arg)
{
	struct pagedata *pd = arg;
	int status = cc->status;

	if (status == FTVM__PARTNER__STATUS__STATUS_OK)
		return;
	log_debug("LandingGrant to %s: %s", vmm_partner_id(pd->vmm),
		  cc->reason && cc->reason[0] ? cc->reason : codec_status_name(status));
	/* Refused (an older epoch, say): the partner took none, so the runs come
	 * back. Unanswered, it may have taken them: they stay out of the pool
	 * until the link goes (link down gives them back already). At shutdown
	 * this state is gone already. */
	if (status != FTVM__PARTNER__STATUS__STATUS_TIMEOUT &&
	    status != FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE &&
	    status != FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN)
		pagedata_grants_drop(pd);
}

/* The block sizes of the policies, and the default policy's (a page). */
static size_t block_sizes(const struct pagedata *pd, uint32_t *sizes)
{
	const struct ftvm_config *c = pd->config;
	size_t n = 0;

	sizes[n++] = c->page_size;
	for (size_t i = 0; i < c->n_policies; i++) {
		size_t k = 0;

		while (k < n && sizes[k] != c->policies[i].block_size)
			k++;
		if (k == n)
			sizes[n++] = c->policies[i].block_size;
	}
	return n;
}

void pagedata_grants_offer(struct pagedata *pd)
{
	struct runs rs = { .n = 0 };
	uint32_t sizes[CONFIG_POLICIES_MAX + 1];
	size_t n_sizes = block_sizes(pd, sizes);
	int r;

	if (!repl_session_one_sided(pd->session) || pd->grants)
		return;
	for (size_t i = 0; i < n_sizes; i++)
		for (int k = 0; k < GRANTS_PER_SIZE; k++) {
			struct vmm_grant *g;

			if (grant_take(pd, sizes[i] / pd->config->page_size, &g) < 0)
				break;
			runs_add(&rs, g);
		}
	if (!rs.n)
		return;
	r = send_runs(pd, false, &rs, on_grant_answer, pd);
	if (r < 0) {
		log_debug("LandingGrant to %s not sent: %s", vmm_partner_id(pd->vmm), strerror(-r));
		pagedata_grants_drop(pd);
		return;
	}
	log_debug("granted %zu landing runs to %s", rs.n, vmm_partner_id(pd->vmm));
}

static struct vmm_grant **find(struct pagedata *pd, const Ftvm__Partner__Landing *l)
{
	struct vmm_grant **g = &pd->grants;

	while (*g && ((*g)->at.frame != l->frame || (*g)->at.frames != l->frames))
		g = &(*g)->next;
	return g;
}

bool pagedata_grant_named(struct pagedata *pd, const Ftvm__Partner__Landing *l)
{
	return *find(pd, l) != NULL;
}

/* Why the granted run m names cannot be adopted, in reason; 0 when it can. */
static int grant_refusal(struct pagedata *pd, const struct vmm_alloc *a,
			 const Ftvm__Partner__WritePage *m, const struct vmm_grant *g, char *reason,
			 size_t len)
{
	size_t n = pagedata_landed_reason_start(reason, len, "WritePage to", m->guid, m->page,
						"granted frame", m->landed);

	reason += n;
	len -= n;
	if (m->data.len) {
		snprintf(reason, len, "it carries %zu bytes of data as well", m->data.len);
		return -EINVAL;
	}
	return pagedata_landed_run_check(pd, a, &g->at, m->landed, "granted", m->crc32c, reason,
					 len);
}

int pagedata_grant_adopt(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
			 const Ftvm__Partner__WritePage *m, Ftvm__Partner__Landing *ret_fresh,
			 bool *ret_has_fresh, char *reason, size_t len)
{
	struct vmm_grant **g = find(pd, m->landed), *used, *fresh;
	int r;

	*ret_has_fresh = false;
	if (!*g) {
		snprintf(reason, len, "WritePage to %s page %llu: frame %llu is not granted",
			 m->guid, (unsigned long long)page, (unsigned long long)m->landed->frame);
		pd->counted.landings_refused++;
		return -EINVAL;
	}
	r = grant_refusal(pd, a, m, *g, reason, len);
	if (r < 0) {
		pd->counted.landings_refused++; /* the grant stays: nothing names it now */
		return r;
	}
	used = *g;
	*g = used->next; /* its frames are the page's now */
	pagedata_landed_adopt(pd, a, page, used->at.frame);
	free(used);
	/* A grant consumed, a grant returned, while frames last. */
	if (grant_take(pd, a->block_size / frame_pool_page_size(pd->pool), &fresh) == 0) {
		landing_of(fresh, ret_fresh);
		*ret_has_fresh = true;
	}
	return 0;
}

struct revoke {
	struct pagedata *pd;
	size_t n;
	struct repl_landing at[];
};

static void on_revoke_answer(const CommandComplete *cc, void *arg)
{
	struct revoke *rv = arg;
	struct pagedata *pd = rv->pd;

	/* Without the partner's OK it may still write there: the runs stay out
	 * of the pool until the link goes (and at shutdown pd is gone). */
	if (cc->status != FTVM__PARTNER__STATUS__STATUS_OK) {
		free(rv);
		return;
	}
	for (size_t i = 0; i < rv->n; i++) {
		Ftvm__Partner__Landing l = { .frame = rv->at[i].frame, .frames = rv->at[i].frames };
		struct vmm_grant **g = find(pd, &l);

		if (*g) /* not adopted meanwhile */
			give_back(pd, g);
	}
	vmm_paging_kick(pd->vmm); /* requests waiting for frames */
	free(rv);
}

/* Sent from its own event: a shortage is found deep inside other work (a
 * partner's batch being applied), where a request must not go. */
static void send_revoke(evutil_socket_t fd, short what, void *arg)
{
	struct runs rs = { .n = 0 };
	struct pagedata *pd = arg;
	struct revoke *rv = calloc(1, sizeof(*rv) + GRANTS_MAX * sizeof(rv->at[0]));
	int r;

	if (!rv)
		return;
	rv->pd = pd;
	for (struct vmm_grant *g = pd->grants; g && rs.n < GRANTS_MAX; g = g->next) {
		if (g->revoking)
			continue;
		g->revoking = true;
		rv->at[rs.n] = g->at;
		runs_add(&rs, g);
	}
	rv->n = rs.n;
	if (!rs.n) {
		free(rv);
		return;
	}
	r = send_runs(pd, true, &rs, on_revoke_answer, rv);
	if (r < 0) {
		/* Not sent (link down): tried again at the next shortage. */
		for (struct vmm_grant *g = pd->grants; g; g = g->next)
			g->revoking = false;
		free(rv);
		return;
	}
	log_info("short of frames: revoking %zu landing runs granted to %s", rs.n,
		 vmm_partner_id(pd->vmm));
}

void pagedata_grants_revoke(struct pagedata *pd)
{
	if (!pd->grants)
		return;
	if (!pd->revoke_event)
		pd->revoke_event = event_new(pd->base, -1, 0, send_revoke, pd);
	if (pd->revoke_event)
		event_active(pd->revoke_event, EV_TIMEOUT, 0);
}

void pagedata_grants_drop(struct pagedata *pd)
{
	while (pd->grants)
		give_back(pd, &pd->grants);
	if (pd->revoke_event) /* a revoke not sent yet has nothing to revoke */
		event_free(pd->revoke_event);
	pd->revoke_event = NULL;
}

void pagedata_grants_link_changed(struct pagedata *pd, bool up)
{
	if (up) {
		pagedata_grants_offer(pd);
		return;
	}
	pagedata_grants_drop(pd);
	pagedata_granted_forget(pd);
}
