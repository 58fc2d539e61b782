/* replay_failover.h. What a failover leaves to the node's clock, and how
 * this waits for it, is TRACE.md's "Failover and resync". */
#include "replay_failover.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "ftvm.h"
#include "sbd.h"
#include "store.h"
#include "trace_replay_state.h"
#include "trace_rules.h"

/* The fence thread reports each round to an event loop; the replayer runs
 * none and needs no report: this base is never dispatched. */
struct replay_slot {
	struct event_base *base;
	struct sbd *sbd;
};

static void ignore_report(const struct sbd_report *r, void *arg)
{
}

static int slot_failed(struct replay *rp, const char *where, const char *why, int r)
{
	replay_diverge(rp, where, "cannot keep the partner's fence slot in the store", NULL, NULL,
		       why);
	return r;
}

int replay_slot_start(struct replay *rp, const char *where, uint32_t state)
{
	struct replay_slot *s = calloc(1, sizeof(*s));
	char path[PATH_MAX + 16], err[256];
	struct store *store;
	unsigned index;
	int r;

	if (!s)
		return slot_failed(rp, where, "out of memory", -ENOMEM);
	snprintf(path, sizeof(path), "%s/shared/store", rp->env.dir);
	/* The node made the store when it started: no size to give. */
	r = store_open(path, 0, rp->page_size, rp->partner_id, false, &store, err, sizeof(err));
	if (r < 0) {
		free(s);
		return slot_failed(rp, where, err, r);
	}
	index = store_partition_index(store);
	store_close(store);
	s->base = event_base_new();
	r = s->base ? sbd_start(s->base, path, index, rp->partner_id, rp->heartbeat_ms, state,
				rp->partner_epoch, ignore_report, NULL, &s->sbd)
		    : -ENOMEM;
	if (r < 0) {
		if (s->base)
			event_base_free(s->base);
		free(s);
		snprintf(err, sizeof(err), "the fence thread does not start: %s", strerror(-r));
		return slot_failed(rp, where, err, r);
	}
	rp->slot = s;
	return 0;
}

void replay_slot_set(struct replay_slot *s, uint32_t state, uint64_t epoch)
{
	sbd_set(s->sbd, state, epoch);
}

void replay_slot_kill(struct replay_slot *s)
{
	if (!s)
		return;
	sbd_stop(s->sbd, SBD_STATE_EMPTY); /* EMPTY: no last write */
	event_base_free(s->base);
	free(s);
}

/* Between two looks at the node: what comes from its clients is read. */
static void idle(struct replay *rp)
{
	replay_pump(rp, clock_now_ms() + 20);
}

/* The node took over: its new epoch is written (that comes first) and it
 * serves alone (once its own slot said so, a fence round later). */
static bool took_over(const struct replay *rp, uint64_t *epoch)
{
	struct ftvm_node_status st;

	if (replay_node_status(&rp->env.node[0], &st) < 0)
		return false;
	*epoch = st.epoch;
	return st.epoch > rp->node_epoch && strcmp(st.state, "solo") == 0;
}

static int destage_queue(const struct replay *rp, uint64_t *ret)
{
	struct ftvm_client *c;
	struct ftvm_sense sense;
	int r = ftvm_connect(rp->env.node[0].socket, &c);

	if (r < 0)
		return r;
	r = ftvm_sense(c, &sense);
	ftvm_disconnect(c);
	if (r == 0)
		*ret = sense.destage_queue;
	return r;
}

void replay_partner_dies(struct replay *rp, const struct rec *r)
{
	/* The node sees the store heartbeat silent for dead_after_ms, as of
	 * its last slot round (heartbeat_ms old at most), decides on its next
	 * round and serves once its own slot said so, a round later. */
	uint32_t bound = rp->dead_after_ms + 3 * rp->heartbeat_ms + ANSWER_MARGIN_MS;
	uint64_t deadline = clock_now_ms() + bound, epoch = rp->node_epoch;
	char where[40], got[96];

	replay_slot_kill(rp->slot);
	rp->slot = NULL;
	close(rp->partner.fd);
	rp->partner.fd = -1;
	/* What the node sent it and the trace does not show: lost with it. */
	for (size_t i = 0; i < rp->n_from_node; i++)
		codec_envelope_free(rp->from_node[i]);
	rp->n_from_node = 0;
	while (!took_over(rp, &epoch)) {
		if (rp->diverged || clock_now_ms() > deadline) {
			replay_where_of(where, sizeof(where), r, 0, false);
			snprintf(got, sizeof(got),
				 "not solo at a later epoch after %u ms (at %" PRIu64 ")", bound,
				 epoch);
			replay_diverge(rp, where,
				       "the partner is gone after this record, and the node did "
				       "not take over",
				       NULL, NULL, got);
			return;
		}
		idle(rp);
	}
	rp->node_epoch = epoch;
}

/* The partner's Hello on the link record i opens, or NULL. */
static Envelope *recorded_hello(struct replay *rp, size_t i)
{
	for (; i < rp->n_recs; i++) {
		const struct rec *r = &rp->recs[i];
		Envelope *env = (Envelope *)r->msg;

		if (r->channel != TRACE_CHANNEL_PARTNER || replay_is_auth(env))
			continue;
		if (env->message_case != FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO)
			return NULL;
		if (r->direction == TRACE_IN)
			return env;
	}
	return NULL;
}

/* A resync sends the pages that are dirty as dirty: played before the
 * node's destage round ran, it would send what the recorded one did not.
 * So a restarted partner comes back once the queue is empty, and so do the
 * library's paths (tests/traces/paths.sh). */
static bool destage_done(struct replay *rp, const char *where)
{
	uint32_t bound = rp->request_timeout_ms + ANSWER_MARGIN_MS;
	uint64_t deadline = clock_now_ms() + bound, depth = 1;
	char got[96];

	while (destage_queue(rp, &depth) < 0 || depth > 0) {
		if (rp->diverged || clock_now_ms() > deadline) {
			snprintf(got, sizeof(got), "%" PRIu64 " pages still queued after %u ms",
				 depth, bound);
			replay_diverge(rp, where,
				       "the node's destage queue did not empty before the partner "
				       "came back",
				       NULL, NULL, got);
			return false;
		}
		idle(rp);
	}
	return true;
}

void replay_partner_restarts(struct replay *rp, size_t i)
{
	uint64_t deadline, lsn, recorded_epoch;
	Envelope *env = recorded_hello(rp, i);
	char where[40];
	int r;

	replay_where_of(where, sizeof(where), &rp->recs[i], 0, false);
	if (!env) {
		replay_diverge(rp, where, "a new link without the partner's Hello in the trace",
			       NULL, NULL, "nothing to say as the restarted partner");
		return;
	}
	if (!destage_done(rp, where))
		return;
	/* The restarted partner is at the epoch it recorded, mapped: the one
	 * it died at. Where the node had applied the node's LSNs to is in the
	 * node's numbering; its own LSNs go as recorded. */
	recorded_epoch = env->hello->epoch;
	trace_rewrite(rp->maps, &env->base);
	if (!trace_maps_epoch(rp->maps, recorded_epoch))
		env->hello->epoch = rp->partner_epoch;
	lsn = trace_maps_node_lsn(rp->maps, env->hello->applied_lsn);
	if (lsn)
		env->hello->applied_lsn = lsn;
	rp->partner_epoch = env->hello->epoch;
	env->epoch = rp->partner_epoch;
	if (replay_slot_start(rp, where, STATE(STARTING)) < 0)
		return;
	r = replay_dial_node(rp);
	if (r < 0) {
		replay_diverge(rp, where, "cannot dial the node as the restarted partner",
			       &env->base, NULL, strerror(-r));
		return;
	}
	deadline = clock_now_ms() + LINK_TIMEOUT_MS;
	while (!rp->diverged && !rp->node_hello) {
		if (clock_now_ms() > deadline) {
			replay_diverge(rp, where,
				       "the node never said Hello to the restarted partner",
				       &env->base, NULL, "nothing");
			return;
		}
		replay_pump(rp, clock_now_ms() + 20);
	}
	replay_send_partner(rp, env);
	replay_send_heartbeat(rp);
}
