/* Failover decisions, as node/ha/HA.md writes them down. Everything here runs
 * on the event loop; the store is read and written by the fence thread
 * (storage/sbd.c), whose report arrives every heartbeat_ms.
 *
 * The node's state (NodeState: its Hello, heartbeats and fence slot say it)
 * and the memory manager's mode (vmm.h: what its calls complete in) move
 * together, in change() only: it looks the step up in transitions[] below,
 * sets the mode the row says, then the state, and logs each that changed
 * ("memory manager: solo -> mirrored: resynced", "resyncing -> active: ...").
 * A step the table lacks is a bug: logged as one and refused, the node left
 * in the state and mode it had, a pair the table allows.
 *
 *                         wait
 *                        +----+
 *                        v    |
 *      ha_new ----> STARTING -+ <------- receive failed (mode kept), cut -------+
 *                   offline                                                      |
 *                    |  |     resume, took over (forced)                         |
 *             linked |  +-----------------------------------+                    |
 *                    v                                      v                    |
 *      linked +-> ACTIVE ----------- took over ---------->  SOLO -+ unstarted    |
 *             +-- mirrored                                  solo* <+             |
 *                    ^                                      |   ^                |
 *                    |                                 send |   | send failed,   |
 *                    |                                      v   | unstarted      |
 *                    +---------- sent, received -------- RESYNCING --------------+
 *                                                        sending: solo*, then mirrored
 *                                                        receiving: the mode it had
 *                                                           ^
 *                                                           | receive (from STARTING
 *      FENCED ----------------------------------------------+  too, as a rule)
 *      fenced  <---- fence, from every other state
 *
 * solo* is VMM_MODE_SOLO, or VMM_MODE_SOLO_READ with [failover] solo = refuse.
 * The drawing shows each step where it usually starts; transitions[] says
 * every state it may start in, and why. Three things set the mode without
 * the state, and the table allows what they make:
 * - vmm_new() starts the memory manager offline (STARTING, as ha_new());
 * - a resync's sender goes mirrored itself in the snapshot's turn
 *   (ha/resync.c, start(): every change after the snapshot is mirrored),
 *   while this node stays RESYNCING until the answer to ResyncEnd;
 * - a node that receives a resync keeps the mode it had (offline, or fenced;
 *   a ResyncBegin at a later epoch is taken in any state), and a fenced one
 *   whose resync failed stays fenced in STARTING until the next one.
 * When this node stops, ha_free() writes "stopped" (or "fenced") in its slot:
 * the slot's last word, not a state the node serves in. */
#include "ha.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "clock.h"
#include "codec.h"
#include "log.h"
#include "node_state.h"
#include "session.h"
#include "vmm.h"

#define LOG_SUBSYSTEM "ha"

#define RESYNC_RETRY_MS 250

#define S(x) (1u << STATE(x))
#define ANY_STATE (S(STARTING) | S(ACTIVE) | S(SOLO) | S(RESYNCING) | S(FENCED))
#define M(x) (1u << VMM_MODE_##x)

/* The modes each state allows; M(SOLO) stands for the configured solo mode
 * (solo*). */
static const unsigned state_modes[] = {
	[STATE(STARTING)] = M(OFFLINE) | M(FENCED),
	[STATE(ACTIVE)] = M(MIRRORED),
	[STATE(SOLO)] = M(SOLO),
	[STATE(RESYNCING)] = M(OFFLINE) | M(MIRRORED) | M(SOLO) | M(FENCED),
	[STATE(FENCED)] = M(FENCED),
};

struct transition {
	const char *name;
	unsigned from; /* S() of each state it may happen in */
	int to;
	bool keep_mode;		 /* the mode stays: it must be one `to` allows */
	enum vmm_mode mode;	 /* else set to this; VMM_MODE_SOLO is solo* */
	const char *mode_reason; /* what refused calls say; NULL: the state's reason */
};

/* A row's from is every state its caller may run in (what its guards let
 * through, not only the usual one: a narrower row would refuse a step the
 * code makes, and so change what a node does). */
static const struct transition transitions[HA_EVENT_COUNT] = {
	/* wait_for_partner() at the first slot round, link_up() behind or
	 * with the partner serving. */
	[HA_WAIT] = { .name = "wait",
		      .from = S(STARTING),
		      .to = STATE(STARTING),
		      .keep_mode = true },
	/* link_up(): two new processes at one epoch, or active with the link
	 * back (the failover window closes), or resyncing it with the link back
	 * on a new connection. Never fenced (ha_link_changed()) nor solo. */
	[HA_LINKED] = { .name = "linked",
			.from = S(STARTING) | S(ACTIVE) | S(RESYNCING),
			.to = STATE(ACTIVE),
			.mode = VMM_MODE_MIRRORED,
			.mode_reason = "partner linked" },
	[HA_RESUME] = { .name = "resume",
			.from = S(STARTING),
			.to = STATE(SOLO),
			.mode = VMM_MODE_SOLO,
			.mode_reason = "ran alone before it stopped" },
	/* finish_takeover(): a takeover begins active (decided), starting or
	 * fenced (forced), and ends a fence round later in whatever state the
	 * node reached meanwhile; fence() cancels it. */
	[HA_TOOK_OVER] = { .name = "took over",
			   .from = ANY_STATE,
			   .to = STATE(SOLO),
			   .mode = VMM_MODE_SOLO,
			   .mode_reason = "took over" },
	[HA_FENCE] = { .name = "fence",
		       .from = ANY_STATE & ~S(FENCED),
		       .to = STATE(FENCED),
		       .mode = VMM_MODE_FENCED },
	/* maybe_resync(): the mode stays solo* until the snapshot's turn. */
	[HA_RESYNC_SEND] = { .name = "send",
			     .from = S(SOLO),
			     .to = STATE(RESYNCING),
			     .keep_mode = true },
	[HA_RESYNC_SENT] = { .name = "sent",
			     .from = S(RESYNCING),
			     .to = STATE(ACTIVE),
			     .mode = VMM_MODE_MIRRORED,
			     .mode_reason = "resynced" },
	[HA_RESYNC_SEND_FAILED] = { .name = "send failed",
				    .from = S(RESYNCING),
				    .to = STATE(SOLO),
				    .mode = VMM_MODE_SOLO,
				    .mode_reason = "the resync failed" },
	/* maybe_resync(): no new epoch, or the resync did not start: still
	 * solo*. */
	[HA_RESYNC_UNSTARTED] = { .name = "unstarted",
				  .from = S(SOLO) | S(RESYNCING),
				  .to = STATE(SOLO),
				  .keep_mode = true },
	/* on_resync_received(): the memory manager takes a ResyncBegin at a
	 * later epoch whatever this node's state. */
	[HA_RESYNC_RECEIVE] = { .name = "receive",
				.from = ANY_STATE,
				.to = STATE(RESYNCING),
				.keep_mode = true },
	[HA_RESYNC_RECEIVED] = { .name = "received",
				 .from = ANY_STATE,
				 .to = STATE(ACTIVE),
				 .mode = VMM_MODE_MIRRORED,
				 .mode_reason = "resynced" },
	/* Offline or fenced, as it was: it serves nothing until resynced. */
	[HA_RESYNC_RECEIVE_FAILED] = { .name = "receive failed",
				       .from = ANY_STATE,
				       .to = STATE(STARTING),
				       .keep_mode = true },
	/* link_lost() while receiving: the table is half replaced. */
	[HA_RESYNC_CUT] = { .name = "cut",
			    .from = ANY_STATE,
			    .to = STATE(STARTING),
			    .mode = VMM_MODE_OFFLINE,
			    .mode_reason = "the resync was cut" },
};

const char *ha_event_name(enum ha_event event)
{
	if ((unsigned)event >= HA_EVENT_COUNT)
		return "unknown";
	return transitions[event].name;
}

static bool known_state(int state)
{
	return state >= 0 && (size_t)state < sizeof(state_modes) / sizeof(state_modes[0]) &&
	       state_modes[state];
}

bool ha_state_allows_mode(int state, enum vmm_mode mode, bool solo_refuse)
{
	unsigned modes;

	if (!known_state(state))
		return false;
	modes = state_modes[state];
	if (modes & M(SOLO))
		modes = (modes & ~M(SOLO)) | (solo_refuse ? M(SOLO_READ) : M(SOLO));
	return (unsigned)mode < 32 && (modes & (1u << mode));
}

int ha_transition_lookup(int from, enum vmm_mode mode, enum ha_event event, bool solo_refuse,
			 int *ret_to, enum vmm_mode *ret_mode)
{
	const struct transition *t;

	if ((unsigned)event >= HA_EVENT_COUNT || !known_state(from))
		return -EINVAL;
	t = &transitions[event];
	if (!(t->from & (1u << from)))
		return -EINVAL;
	*ret_to = t->to;
	if (t->keep_mode) {
		if (!ha_state_allows_mode(t->to, mode, solo_refuse))
			return -EINVAL;
		*ret_mode = mode;
		return 0;
	}
	*ret_mode = t->mode == VMM_MODE_SOLO && solo_refuse ? VMM_MODE_SOLO_READ : t->mode;
	/* The table itself: a row sets a mode its own state allows. */
	assert(ha_state_allows_mode(t->to, *ret_mode, solo_refuse));
	return 1;
}

struct ha {
	const struct ftvm_config *config;
	struct vmm *vmm;
	struct repl_session *session;
	struct sbd *sbd;
	ha_state_fn state_changed;
	void *arg;

	int state;
	char reason[256];
	struct sbd_report last; /* the fence thread's last report */
	bool have_report;
	/* A fence request in our mailbox from before we started is history. */
	uint64_t old_mailbox_counter;

	bool link_up;
	/* Active and linked: since when the partner says starting (0: it does
	 * not), for partner_left_waiting(). */
	uint64_t partner_starting_ms;
	bool deciding;		 /* the link is lost and nobody took over yet */
	uint64_t link_lost_ms;	 /* when */
	bool fence_requested;	 /* we asked the partner to fence itself */
	uint64_t takeover_epoch; /* a takeover waits for our slot to say it */
	char taking_over[CONFIG_ID_MAX + 1];
	uint64_t takeovers, last_takeover_ms;
	uint64_t resyncs, last_resync_pages, last_resync_ms;
	bool receiving;		    /* a resync from the partner is under way */
	struct event *resync_retry; /* after a resync failed with the link up */
	/* An operator's forced takeover waits for its end (ha_force_takeover). */
	ha_forced_fn forced_done;
	void *forced_arg;
};

static int change(struct ha *h, enum ha_event event, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The one place the node's state and the memory manager's mode change
 * (the table above). The state's reason goes to the log, status, sd_notify
 * and, for a row with no mode_reason of its own, to the mode. 0, or -EINVAL
 * when the table has no such step: nothing changed. */
static int change(struct ha *h, enum ha_event event, const char *fmt, ...)
{
	enum vmm_mode mode = vmm_mode(h->vmm);
	char reason[sizeof(h->reason)];
	const char *mode_reason;
	va_list ap;
	int to, r;

	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	r = ha_transition_lookup(h->state, mode, event, h->config->solo_refuse, &to, &mode);
	if (r < 0) {
		log_error("bug: no transition \"%s\" from %s with the memory manager %s in the "
			  "table; staying so (%s)",
			  ha_event_name(event), codec_node_state_name(h->state),
			  vmm_mode_name(vmm_mode(h->vmm)), reason);
		return r;
	}
	if (r > 0) {
		mode_reason = transitions[event].mode_reason;
		vmm_set_mode(h->vmm, mode, mode_reason ? mode_reason : reason);
	}
	snprintf(h->reason, sizeof(h->reason), "%s", reason);
	if (h->state != to)
		log_info("%s -> %s: %s", codec_node_state_name(h->state), codec_node_state_name(to),
			 h->reason);
	h->state = to;
	if (h->sbd)
		sbd_set(h->sbd, (uint32_t)to, vmm_epoch(h->vmm));
	h->state_changed(to, ha_event_name(event), h->reason, h->arg);
	return 0;
}

static const char *partner_name(const struct ha *h)
{
	const char *id = repl_session_partner_id(h->session);

	if (id && id[0])
		return id;
	return h->last.partner_valid ? h->last.partner.node : "the partner";
}

/* An operator's forced takeover ended: done, or this node fenced instead. */
static void forced_end(struct ha *h, bool ok, const char *reason)
{
	ha_forced_fn done = h->forced_done;

	h->forced_done = NULL;
	if (done)
		done(ok, reason, h->forced_arg);
}

/* This node acknowledges nothing more: another node serves (ha/HA.md,
 * "Self-fencing"). It stays fenced until the survivor resyncs it (the link
 * stays open for that: the survivor's epoch is later, so nothing it sends is
 * refused, and a fenced node sends nothing of its own). */
static void fence(struct ha *h, const char *why)
{
	h->deciding = false;
	h->takeover_epoch = 0;
	forced_end(h, false, why);
	if (h->state == STATE(FENCED))
		return;
	log_error("fencing this node: %s", why);
	change(h, HA_FENCE, "%s", why);
}

static void on_resync_sent(int status, const char *reason, const struct vmm_resync_stats *st,
			   void *arg)
{
	struct ha *h = arg;

	if (h->state != STATE(RESYNCING))
		return; /* fenced meanwhile */
	if (status != FTVM__PARTNER__STATUS__STATUS_OK) {
		struct timeval again = { 0, RESYNC_RETRY_MS * 1000 };

		change(h, HA_RESYNC_SEND_FAILED, "resync of %s failed (%s): serving alone",
		       partner_name(h), reason);
		/* A connection replaced under it, say: while linked, try again. */
		evtimer_add(h->resync_retry, &again);
		return;
	}
	h->resyncs++;
	h->last_resync_pages = st->pages;
	h->last_resync_ms = st->ms;
	change(h, HA_RESYNC_SENT,
	       "%s resynced (%s): %llu allocations, %llu pages (%llu bytes) in %llu ms",
	       partner_name(h), st->incremental ? "incremental" : "full",
	       (unsigned long long)st->allocations, (unsigned long long)st->pages,
	       (unsigned long long)st->bytes, (unsigned long long)st->ms);
}

/* Serving alone with the partner back and behind: bring it up to date. A
 * partner at our own epoch and not solo took it from a resync whose end
 * never reached us: it lacks what we served alone since, and a new epoch
 * puts it behind again (ha/HA.md, "Solo and rejoin"). */
static void maybe_resync(struct ha *h)
{
	struct repl_session_stats st;
	uint64_t epoch = vmm_epoch(h->vmm);
	int r;

	repl_session_get_stats(h->session, &st);
	if (h->state != STATE(SOLO) || !st.link_up || st.partner_epoch > epoch)
		return;
	if (st.partner_epoch == epoch) {
		if (st.partner_state == STATE(SOLO))
			return;
		log_warning("%s is at our epoch %llu but %s: its resync ended there and not here; "
			    "moving to epoch %llu to resync it",
			    st.partner_id, (unsigned long long)epoch,
			    codec_node_state_name(st.partner_state), (unsigned long long)epoch + 1);
		if (vmm_set_epoch(h->vmm, epoch + 1) < 0) {
			change(h, HA_RESYNC_UNSTARTED, "cannot record epoch %llu to resync %s",
			       (unsigned long long)epoch + 1, st.partner_id);
			return;
		}
	}
	change(h, HA_RESYNC_SEND, "sending %s everything (it is at epoch %llu, we at %llu)",
	       st.partner_id, (unsigned long long)st.partner_epoch,
	       (unsigned long long)vmm_epoch(h->vmm));
	r = vmm_resync_send(h->vmm, st.partner_applied_lsn, st.partner_own_lsn, on_resync_sent, h);
	if (r < 0)
		change(h, HA_RESYNC_UNSTARTED, "cannot start the resync: %s", strerror(-r));
}

static void on_resync_retry(evutil_socket_t fd, short what, void *arg)
{
	maybe_resync(arg);
}

/* The receiving side: the survivor's resync began or ended. */
static void on_resync_received(bool begin, int r, const char *reason, void *arg)
{
	struct ha *h = arg;

	h->receiving = begin;
	if (begin) {
		change(h, HA_RESYNC_RECEIVE, "receiving everything from %s", partner_name(h));
		return;
	}
	if (r < 0) {
		change(h, HA_RESYNC_RECEIVE_FAILED, "%s", reason);
		return;
	}
	h->resyncs++;
	change(h, HA_RESYNC_RECEIVED, "resynced by %s at epoch %llu", partner_name(h),
	       (unsigned long long)vmm_epoch(h->vmm));
}

/* About to serve knowing that no partner holds what this node lost (ha/HA.md,
 * "Recovery"): its stale pages go back to the store's copy. Says how many
 * in note, for the state's reason ("" when none). */
static void recover(struct ha *h, const char *why, char *note, size_t len)
{
	int64_t n = vmm_recover_lost_pages(h->vmm, why);

	note[0] = '\0';
	if (n > 0)
		snprintf(note, len, "; %lld pages went back to the store's copy (ftvmctl recovery)",
			 (long long)n);
	else if (n < 0)
		snprintf(note, len, "; the recovery of lost pages failed: %s", strerror((int)-n));
}

/* The slot says our new epoch and solo: now, and only now, serve alone. */
static void finish_takeover(struct ha *h)
{
	struct vmm_takeover t;
	char note[128] = "";
	int r;

	if (h->last.partner_valid && h->last.partner.epoch >= h->takeover_epoch) {
		fence(h, "the partner took over first");
		return;
	}
	h->takeover_epoch = 0;
	/* The partner, gone for good, takes what only it held along. */
	if (h->forced_done)
		recover(h, "forced takeover", note, sizeof(note));
	r = vmm_takeover(h->vmm, &t);
	if (r < 0) {
		fence(h, "the takeover failed in the page table");
		return;
	}
	h->takeovers++;
	h->last_takeover_ms = clock_now_ms();
	change(h, HA_TOOK_OVER,
	       "took over from %s at epoch %llu%s: %llu allocations adopted, %llu locks "
	       "released, %llu dirty pages to destage%s",
	       h->taking_over, (unsigned long long)vmm_epoch(h->vmm),
	       h->forced_done ? " (forced by an operator)" : "", (unsigned long long)t.allocations,
	       (unsigned long long)t.locks_released, (unsigned long long)t.dirty_pages, note);
	forced_end(h, true, h->reason);
	maybe_resync(h); /* the partner may be back already (a quick restart) */
}

/* The new epoch, in SQLite and then in our slot, before anything is
 * served. */
static void begin_takeover_at(struct ha *h, uint64_t epoch, const char *why)
{
	log_warning("taking over from %s: %s", partner_name(h), why);
	snprintf(h->taking_over, sizeof(h->taking_over), "%s", partner_name(h));
	h->deciding = false;
	if (vmm_set_epoch(h->vmm, epoch) < 0) {
		fence(h, "cannot record the new epoch");
		return;
	}
	h->takeover_epoch = epoch;
	sbd_set(h->sbd, STATE(SOLO), epoch);
}

static void begin_takeover(struct ha *h, const char *why)
{
	begin_takeover_at(h, vmm_epoch(h->vmm) + 1, why);
}

static uint64_t since(uint64_t then)
{
	uint64_t now = clock_now_ms();

	return now > then ? now - then : 0;
}

/* The link is lost while we were active (ha/HA.md, "Who survives"). */
static void decide(struct ha *h)
{
	const struct sbd_slot *p = &h->last.partner;
	uint64_t silent = sbd_partner_silent_ms(&h->last);
	uint32_t dead_after = h->config->dead_after_ms;
	char why[200];

	/* Only what the store said after the link was lost counts: this
	 * process may have been stopped, and the last round read before that
	 * would show every partner silent. */
	if (h->last.round_ms <= h->link_lost_ms)
		return;

	if (h->last.partner_valid && p->epoch <= vmm_epoch(h->vmm) &&
	    (p->state == SBD_STATE_STOPPED || p->state == SBD_STATE_FENCED)) {
		snprintf(why, sizeof(why), "its slot in the store says %s",
			 sbd_state_name(p->state));
		begin_takeover(h, why);
	} else if (silent >= dead_after) {
		snprintf(why, sizeof(why), "its store heartbeat stopped %llu ms ago",
			 (unsigned long long)silent);
		begin_takeover(h, why);
	} else if (strcmp(h->config->id, partner_name(h)) < 0) {
		if (!h->fence_requested) {
			log_warning("link to %s lost while it lives on the store: asking it to "
				    "fence itself (the smaller node id survives)",
				    partner_name(h));
			sbd_request_fence(h->sbd, vmm_epoch(h->vmm));
			h->fence_requested = true;
		}
	} else if (since(h->link_lost_ms) > 2ull * dead_after + 2ull * h->config->heartbeat_ms) {
		fence(h, "the link is lost, the partner lives on the store and did not "
			 "take over: it survives (its node id is the smaller)");
	}
}

/* The store says this node must stop (ha/HA.md, "Self-fencing"); true when it
 * fenced. */
static bool must_fence(struct ha *h)
{
	const struct sbd_report *r = &h->last;
	uint64_t epoch = vmm_epoch(h->vmm);
	char why[256];

	if (!r->own_written && since(r->own_ok_ms) > h->config->dead_after_ms) {
		snprintf(why, sizeof(why), "cannot write our slot in the store for %llu ms (%s)",
			 (unsigned long long)since(r->own_ok_ms), r->error);
		fence(h, why);
		return true;
	}
	if (r->mailbox_valid && r->mailbox.counter != h->old_mailbox_counter &&
	    r->mailbox.epoch >= epoch) {
		snprintf(why, sizeof(why), "%s asked us to fence ourselves (epoch %llu)",
			 r->mailbox.from, (unsigned long long)r->mailbox.epoch);
		fence(h, why);
		return true;
	}
	if (r->partner_valid && r->partner.epoch > epoch) {
		snprintf(why, sizeof(why), "%s took over: it is at epoch %llu, we at %llu",
			 r->partner.node, (unsigned long long)r->partner.epoch,
			 (unsigned long long)epoch);
		fence(h, why);
		return true;
	}
	return false;
}

/* A node that did not serve last waits for its partner, whose copy may be
 * newer; status says so (and `takeover --force` is the way out). */
static void wait_for_partner(struct ha *h)
{
	const struct sbd_slot *p = &h->last.partner;

	if (h->last.partner_valid && p->epoch > vmm_epoch(h->vmm))
		change(h, HA_WAIT,
		       "behind: %s is at epoch %llu, we at %llu; waiting for it to resync us",
		       p->node, (unsigned long long)p->epoch,
		       (unsigned long long)vmm_epoch(h->vmm));
	else
		change(h, HA_WAIT,
		       "waiting for %s: this node did not serve alone when it stopped, so its "
		       "copy may be behind its partner's",
		       partner_name(h));
}

/* A node that ran alone before it stopped holds the newest copy of
 * everything: it serves alone again, unless the partner has since moved on. */
static void resume(struct ha *h)
{
	const struct sbd_slot *p = &h->last.partner;
	char note[128];

	if (h->last.partner_valid && p->epoch > vmm_epoch(h->vmm)) {
		wait_for_partner(h);
		return;
	}
	/* What it held in memory alone went with the old process. */
	recover(h, "restarted after serving alone", note, sizeof(note));
	change(h, HA_RESUME, "serving alone, as before the restart (epoch %llu)%s",
	       (unsigned long long)vmm_epoch(h->vmm), note);
	maybe_resync(h);
}

/* Active and linked, with the partner starting for dead_after_ms: it took
 * a Hello of ours sent after we went active, and waits for a resync, while
 * we linked with it starting and wait for nothing (ha/HA.md, "Hellos that
 * cross"). A partner that links starting goes active in the same exchange,
 * and one that restarts is taken over as its link comes up; one left
 * starting otherwise (this, or its side of a resync failed) needs a resync
 * all the same. */
static bool partner_left_waiting(struct ha *h)
{
	struct repl_session_stats st;
	uint64_t now = clock_now_ms();

	repl_session_get_stats(h->session, &st);
	if (h->state != STATE(ACTIVE) || !h->link_up || h->deciding || h->takeover_epoch ||
	    st.partner_state != STATE(STARTING)) {
		h->partner_starting_ms = 0;
		return false;
	}
	if (!h->partner_starting_ms)
		h->partner_starting_ms = now;
	return now - h->partner_starting_ms >= h->config->dead_after_ms;
}

static void on_report(const struct sbd_report *r, void *arg)
{
	struct ha *h = arg;
	bool first = !h->have_report;

	h->last = *r;
	h->have_report = true;
	if (first) {
		h->old_mailbox_counter = r->mailbox_valid ? r->mailbox.counter : 0;
		if (h->state == STATE(STARTING) && vmm_was_solo(h->vmm))
			resume(h);
		else if (h->state == STATE(STARTING) && !h->link_up)
			wait_for_partner(h);
	}
	if (r->error[0])
		log_warning("fence slots: %s", r->error);
	if (h->takeover_epoch) {
		if (r->own_written && r->own.epoch == h->takeover_epoch &&
		    r->own.state == STATE(SOLO))
			finish_takeover(h);
		else if (must_fence(h))
			return;
		return;
	}
	if (h->state == STATE(ACTIVE) || h->state == STATE(SOLO)) {
		if (must_fence(h))
			return;
	}
	if (partner_left_waiting(h)) {
		begin_takeover(h, "it has stayed starting with the link up: it waits for a resync "
				  "that only a new epoch sends");
		return;
	}
	/* The partner fenced itself with the link up (it read a fence request
	 * of ours after the link came back): it serves nothing, we serve all.
	 * At our epoch only: both active means both at it, so a fenced slot at
	 * an older one was written before our last takeover, whose resync made
	 * the partner active, and says so at its next heartbeat. */
	if (h->state == STATE(ACTIVE) && !h->deciding && r->partner_valid &&
	    r->partner.state == SBD_STATE_FENCED && r->partner.epoch == vmm_epoch(h->vmm)) {
		begin_takeover(h, "its slot in the store says fenced");
		return;
	}
	if (h->deciding)
		decide(h);
}

static void link_lost(struct ha *h, const char *reason)
{
	if (h->receiving) {
		h->receiving = false;
		change(h, HA_RESYNC_CUT, "the resync from %s was cut: %s", partner_name(h), reason);
		return;
	}
	if (h->state != STATE(ACTIVE) || h->takeover_epoch)
		return; /* solo or resyncing: the resync fails and we serve alone */
	h->deciding = true;
	h->fence_requested = false;
	h->link_lost_ms = clock_now_ms();
	log_warning("link to %s lost (%s): deciding who serves", partner_name(h), reason);
	if (h->have_report)
		decide(h);
}

/* ha/HA.md, "Solo and rejoin": what the partner's Hello says decides. */
static void link_up(struct ha *h)
{
	struct repl_session_stats st;
	uint64_t epoch = vmm_epoch(h->vmm);
	char note[128] = "";

	repl_session_get_stats(h->session, &st);
	if (st.partner_epoch > epoch) {
		if (h->state == STATE(STARTING))
			change(h, HA_WAIT,
			       "behind: %s is at epoch %llu, we at %llu; waiting for it to resync us",
			       st.partner_id, (unsigned long long)st.partner_epoch,
			       (unsigned long long)epoch);
		else
			fence(h, "the partner is at a later epoch: it took over");
		return;
	}
	if (h->state == STATE(SOLO)) {
		maybe_resync(h);
		return;
	}
	if (h->state == STATE(ACTIVE) &&
	    (st.partner_state == STATE(STARTING) || st.partner_state == STATE(FENCED))) {
		/* A new process (the old one and the mirror it held are gone), or
		 * one that fenced itself: it serves nothing, we serve it all. */
		begin_takeover(h, st.partner_state == STATE(FENCED)
					  ? "it fenced itself"
					  : "it restarted, and its copy went with the old process");
		return;
	}
	if (h->state == STATE(STARTING) && st.partner_epoch < epoch) {
		resume(h); /* we are ahead: we serve, then resync it */
		return;
	}
	if (h->state == STATE(STARTING) && st.partner_state != STATE(STARTING)) {
		change(h, HA_WAIT, "%s serves (%s): waiting for it to resync us", st.partner_id,
		       codec_node_state_name(st.partner_state));
		return;
	}
	/* Both new processes at one epoch, neither served alone: both lost
	 * their memory, so a version newer than the store is nowhere. Each
	 * settles the same pages on the same store. */
	if (h->state == STATE(STARTING) && st.partner_state == STATE(STARTING))
		recover(h, "both nodes restarted", note, sizeof(note));
	h->deciding = false;
	change(h, HA_LINKED, "partner %s linked at epoch %llu%s", st.partner_id,
	       (unsigned long long)epoch, note);
}

void ha_link_changed(struct ha *h, bool up, const char *reason)
{
	h->link_up = up;
	if (h->state == STATE(FENCED)) {
		if (up && !h->receiving)
			log_info("fenced; %s is linked and will resync us", partner_name(h));
		else if (!up && h->receiving)
			link_lost(h, reason);
		return;
	}
	if (up)
		link_up(h);
	else
		link_lost(h, reason);
}

int ha_new(struct event_base *base, const struct ftvm_config *config, struct vmm *vmm,
	   struct repl_session *session, ha_state_fn state_changed, void *arg, struct ha **ret)
{
	struct ha *h = calloc(1, sizeof(*h));
	int r;

	if (!h)
		return -ENOMEM;
	h->config = config;
	h->vmm = vmm;
	h->session = session;
	h->state_changed = state_changed;
	h->arg = arg;
	h->state = STATE(STARTING);
	h->resync_retry = evtimer_new(base, on_resync_retry, h);
	if (!h->resync_retry) {
		free(h);
		return -ENOMEM;
	}
	vmm_set_resync_observer(vmm, on_resync_received, h);
	r = sbd_start(base, config->store_path, vmm_store_index(vmm), config->id,
		      config->heartbeat_ms, STATE(STARTING), vmm_epoch(vmm), on_report, h, &h->sbd);
	if (r < 0) {
		event_free(h->resync_retry);
		free(h);
		return r;
	}
	*ret = h;
	return 0;
}

/* Why the partner may not be taken for gone for good, or NULL when it may:
 * the link is down and the store says it is stopped, fenced or silent for
 * dead_after_ms (ha/HA.md, "Forced takeover"). */
static const char *partner_not_gone(const struct ha *h, char *why, size_t len)
{
	const struct sbd_slot *p = &h->last.partner;
	uint64_t silent = sbd_partner_silent_ms(&h->last);

	if (h->link_up) {
		snprintf(why, len, "the link to %s is up: it is not gone", partner_name(h));
		return why;
	}
	if (!h->have_report) {
		snprintf(why, len, "the fence slots have not been read yet: try again in %u ms",
			 h->config->heartbeat_ms);
		return why;
	}
	if (h->last.partner_valid &&
	    (p->state == SBD_STATE_STOPPED || p->state == SBD_STATE_FENCED))
		return NULL;
	if (silent < h->config->dead_after_ms) {
		snprintf(why, len,
			 "%s's slot in the store has been still for only %llu ms (a partner is "
			 "taken for gone after dead_after_ms, %u ms, of it): it may be alive",
			 partner_name(h), (unsigned long long)silent, h->config->dead_after_ms);
		return why;
	}
	return NULL;
}

int ha_force_takeover(struct ha *h, ha_forced_fn done, void *arg, char *why, size_t len)
{
	uint64_t epoch = vmm_epoch(h->vmm);
	char reason[320];

	if (h->state == STATE(SOLO) || h->state == STATE(RESYNCING)) {
		snprintf(why, len, "this node serves already (%s)",
			 codec_node_state_name(h->state));
		return -EALREADY;
	}
	if (h->takeover_epoch || h->forced_done) {
		snprintf(why, len, "a takeover is under way (epoch %llu)",
			 (unsigned long long)h->takeover_epoch);
		return -EBUSY;
	}
	if (partner_not_gone(h, why, len))
		return -EBUSY;
	/* Above the partner's last epoch too: should it ever come back, it is
	 * behind and is resynced, whatever it served alone. */
	if (h->last.partner_valid && h->last.partner.epoch > epoch)
		epoch = h->last.partner.epoch;
	snprintf(reason, sizeof(reason),
		 "forced by an operator (%s was %s at epoch %llu in the store): what it "
		 "acknowledged alone is given up",
		 partner_name(h),
		 h->last.partner_valid ? sbd_state_name(h->last.partner.state) : "never seen",
		 (unsigned long long)h->last.partner.epoch);
	h->forced_done = done;
	h->forced_arg = arg;
	begin_takeover_at(h, epoch + 1, reason);
	return 0;
}

void ha_get_status(const struct ha *h, struct ha_status *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->state = h->state;
	snprintf(ret->reason, sizeof(ret->reason), "%s", h->reason);
	ret->store = h->last;
	ret->takeovers = h->takeovers;
	ret->last_takeover_ms = h->last_takeover_ms;
	ret->resyncs = h->resyncs;
	ret->last_resync_pages = h->last_resync_pages;
	ret->last_resync_ms = h->last_resync_ms;
}

void ha_free(struct ha *h, bool clean)
{
	if (!h)
		return;
	forced_end(h, false, "this node is stopping");
	sbd_stop(h->sbd, clean ? SBD_STATE_STOPPED : SBD_STATE_FENCED);
	event_free(h->resync_retry);
	free(h);
}
