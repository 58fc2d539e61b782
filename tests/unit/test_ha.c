/* ha/ha.c's state machine: every row of its transition table driven through
 * the code that takes it, with the memory manager's mode checked at every
 * state change against this test's own copy of the table, and the table
 * itself compared with that copy for every state, mode and event.
 *
 * And ha/ha.c's rejoin decisions (node/ha/HA.md, "Solo and rejoin") over fakes of the
 * memory manager, the session and the fence slots: a survivor serving solo
 * resyncs a partner behind it; a partner at its own epoch that does not
 * serve (it took the epoch from a resync whose end never reached the
 * survivor) is moved behind by a new epoch and resynced, instead of both
 * waiting for ever; a partner at that epoch saying solo is left alone; an
 * operator's forced takeover is refused while the partner may live, and
 * otherwise takes an epoch above the partner's and answers once done; a
 * partner that stays starting with the link up (the Hellos crossed) is
 * taken over and resynced, one that goes active is left alone. The
 * real vmm, session and slots are tested in test_session, test_sbd and the
 * e2e failover tests. */
#include <event2/event.h>

#include "check.h"
#include "clock.h"
#include "codec.h"
#include "ha.h"
#include "node_state.h"
#include "session.h"
#include "vmm.h"

/* ---- the fakes ---- */
static uint64_t fake_epoch;
static bool fake_was_solo;
static enum vmm_mode fake_mode;
static struct repl_session_stats fake_link;
static unsigned resyncs_sent;
static uint64_t resync_sent_at_epoch;
static void (*slot_report)(const struct sbd_report *r, void *arg);
static void *slot_report_arg;
static uint32_t slot_state;
static uint64_t slot_epoch;
static unsigned mode_sets; /* vmm_set_mode() calls */
static char mode_reason[256];
static int set_epoch_error;   /* vmm_set_epoch() fails with it */
static int resync_send_error; /* vmm_resync_send() fails with it */
static vmm_resync_done_fn resync_done;
static void *resync_done_arg;
static vmm_resync_observer_fn resync_observer;
static void *resync_observer_arg;

uint64_t vmm_epoch(const struct vmm *v)
{
	return fake_epoch;
}

int vmm_set_epoch(struct vmm *v, uint64_t epoch)
{
	if (set_epoch_error)
		return set_epoch_error;
	fake_epoch = epoch;
	return 0;
}

void vmm_set_mode(struct vmm *v, enum vmm_mode mode, const char *reason)
{
	fake_mode = mode;
	mode_sets++;
	snprintf(mode_reason, sizeof(mode_reason), "%s", reason);
}

enum vmm_mode vmm_mode(const struct vmm *v)
{
	return fake_mode;
}

const char *vmm_mode_name(enum vmm_mode mode)
{
	static const char *const names[] = { "offline", "mirrored", "solo", "solo, reads only",
					     "fenced" };

	return (unsigned)mode < 5 ? names[mode] : "unknown";
}

bool vmm_was_solo(struct vmm *v)
{
	return fake_was_solo;
}

unsigned vmm_store_index(const struct vmm *v)
{
	return 0;
}

int vmm_takeover(struct vmm *v, struct vmm_takeover *ret)
{
	memset(ret, 0, sizeof(*ret));
	return 0;
}

int64_t vmm_recover_lost_pages(struct vmm *v, const char *why)
{
	return 0;
}

void vmm_set_resync_observer(struct vmm *v, vmm_resync_observer_fn fn, void *arg)
{
	resync_observer = fn;
	resync_observer_arg = arg;
}

int vmm_resync_send(struct vmm *v, uint64_t partner_applied_lsn, uint64_t partner_own_lsn,
		    vmm_resync_done_fn done, void *arg)
{
	if (resync_send_error)
		return resync_send_error;
	resyncs_sent++;
	resync_sent_at_epoch = fake_epoch;
	resync_done = done;
	resync_done_arg = arg;
	return 0;
}

void repl_session_get_stats(const struct repl_session *s, struct repl_session_stats *ret)
{
	*ret = fake_link;
}

const char *repl_session_partner_id(const struct repl_session *s)
{
	return fake_link.partner_id;
}

int sbd_start(struct event_base *base, const char *path, unsigned index, const char *node_id,
	      uint32_t interval_ms, uint32_t state, uint64_t epoch,
	      void (*changed)(const struct sbd_report *r, void *arg), void *arg, struct sbd **ret)
{
	slot_report = changed;
	slot_report_arg = arg;
	slot_state = state;
	slot_epoch = epoch;
	*ret = (struct sbd *)&slot_report; /* never dereferenced */
	return 0;
}

void sbd_set(struct sbd *s, uint32_t state, uint64_t epoch)
{
	slot_state = state;
	slot_epoch = epoch;
}

void sbd_request_fence(struct sbd *s, uint64_t epoch)
{
}

const char *sbd_state_name(uint32_t state)
{
	return codec_node_state_name((int)state);
}

void sbd_stop(struct sbd *s, uint32_t final_state)
{
}

/* ---- the table, as this test expects it ---- */
#define S(x) (1u << STATE(x))
#define ANY (S(STARTING) | S(ACTIVE) | S(SOLO) | S(RESYNCING) | S(FENCED))
#define M(x) (1u << VMM_MODE_##x)
#define KEEP (-1)
#define SOLO_STAR (-2) /* VMM_MODE_SOLO, or SOLO_READ with [failover] solo = refuse */

/* Written out again on purpose, not read from ha.c: a change to either that
 * the other does not follow fails test_table(). Per state, the modes it
 * allows (M(SOLO): solo*); per event, the states it may happen in, the state
 * it leads to and the mode it sets, or KEEP. */
static const unsigned spec_modes[] = {
	[STATE(STARTING)] = M(OFFLINE) | M(FENCED),
	[STATE(ACTIVE)] = M(MIRRORED),
	[STATE(SOLO)] = M(SOLO),
	[STATE(RESYNCING)] = M(OFFLINE) | M(MIRRORED) | M(SOLO) | M(FENCED),
	[STATE(FENCED)] = M(FENCED),
};

static const struct {
	unsigned from;
	int to, mode;
} spec[HA_EVENT_COUNT] = {
	[HA_WAIT] = { S(STARTING), STATE(STARTING), KEEP },
	[HA_LINKED] = { S(STARTING) | S(ACTIVE) | S(RESYNCING), STATE(ACTIVE), VMM_MODE_MIRRORED },
	[HA_RESUME] = { S(STARTING), STATE(SOLO), SOLO_STAR },
	[HA_TOOK_OVER] = { ANY, STATE(SOLO), SOLO_STAR },
	[HA_FENCE] = { ANY & ~S(FENCED), STATE(FENCED), VMM_MODE_FENCED },
	[HA_RESYNC_SEND] = { S(SOLO), STATE(RESYNCING), KEEP },
	[HA_RESYNC_SENT] = { S(RESYNCING), STATE(ACTIVE), VMM_MODE_MIRRORED },
	[HA_RESYNC_SEND_FAILED] = { S(RESYNCING), STATE(SOLO), SOLO_STAR },
	[HA_RESYNC_UNSTARTED] = { S(SOLO) | S(RESYNCING), STATE(SOLO), KEEP },
	[HA_RESYNC_RECEIVE] = { ANY, STATE(RESYNCING), KEEP },
	[HA_RESYNC_RECEIVED] = { ANY, STATE(ACTIVE), VMM_MODE_MIRRORED },
	[HA_RESYNC_RECEIVE_FAILED] = { ANY, STATE(STARTING), KEEP },
	[HA_RESYNC_CUT] = { ANY, STATE(STARTING), VMM_MODE_OFFLINE },
};

static bool spec_allows(int state, int mode, bool solo_refuse)
{
	unsigned modes;

	if (state < STATE(STARTING) || state > STATE(FENCED))
		return false;
	modes = spec_modes[state];
	if (modes & M(SOLO))
		modes = (modes & ~M(SOLO)) | (solo_refuse ? M(SOLO_READ) : M(SOLO));
	return modes & (1u << mode);
}

/* ha_transition_lookup() and ha_state_allows_mode() against the copy, for
 * every state (unknown ones too), mode, event and both solo settings. */
static void test_table(void)
{
	for (int refuse = 0; refuse < 2; refuse++)
		for (int from = 0; from <= STATE(FENCED) + 1; from++)
			for (int mode = VMM_MODE_OFFLINE; mode <= VMM_MODE_FENCED; mode++) {
				CHECK(ha_state_allows_mode(from, mode, refuse) ==
					      spec_allows(from, mode, refuse),
				      "state %s, mode %s, solo %s: allowed in ha.c's table %d",
				      codec_node_state_name(from), vmm_mode_name(mode),
				      refuse ? "refuse" : "serve",
				      ha_state_allows_mode(from, mode, refuse));
				for (int ev = 0; ev < HA_EVENT_COUNT; ev++) {
					bool in = from >= STATE(STARTING) &&
						  from <= STATE(FENCED) &&
						  (spec[ev].from & (1u << from));
					int want_mode = spec[ev].mode == SOLO_STAR
								? (refuse ? VMM_MODE_SOLO_READ
									  : VMM_MODE_SOLO)
							: spec[ev].mode == KEEP ? mode
										: spec[ev].mode;
					int to = -1;
					enum vmm_mode got_mode = VMM_MODE_OFFLINE;
					int r = ha_transition_lookup(from, mode, ev, refuse, &to,
								     &got_mode);

					if (in && spec[ev].mode == KEEP &&
					    !spec_allows(spec[ev].to, mode, refuse))
						in = false; /* the mode kept would not fit */
					if (!in) {
						CHECK(r == -EINVAL,
						      "\"%s\" from %s in mode %s: refused, got %d",
						      ha_event_name(ev),
						      codec_node_state_name(from),
						      vmm_mode_name(mode), r);
						continue;
					}
					CHECK(r == (spec[ev].mode == KEEP ? 0 : 1) &&
						      to == spec[ev].to &&
						      (int)got_mode == want_mode,
					      "\"%s\" from %s in mode %s (solo %s): expected %d, %s, "
					      "%s; got %d, %s, %s",
					      ha_event_name(ev), codec_node_state_name(from),
					      vmm_mode_name(mode), refuse ? "refuse" : "serve",
					      spec[ev].mode == KEEP ? 0 : 1,
					      codec_node_state_name(spec[ev].to),
					      vmm_mode_name(want_mode), r,
					      codec_node_state_name(to), vmm_mode_name(got_mode));
				}
			}
	CHECK_INT("an event past the table: refused", -EINVAL,
		  ha_transition_lookup(STATE(ACTIVE), VMM_MODE_MIRRORED, HA_EVENT_COUNT, false,
				       &(int){ 0 }, &(enum vmm_mode){ 0 }));
	CHECK_STR("... and named so", "unknown", ha_event_name(HA_EVENT_COUNT));
}

/* ---- the scene ---- */
static int node_state;
static bool solo_refuse; /* the config's, for the check below */
static unsigned state_changes;
static char state_reason[256];
static bool exercised[HA_EVENT_COUNT];

/* Every state change: the mode already goes with it. */
static void on_state(int state, const char *step, const char *reason, void *arg)
{
	node_state = state;
	state_changes++;
	snprintf(state_reason, sizeof(state_reason), "%s", reason);
	CHECK(spec_allows(state, fake_mode, solo_refuse),
	      "state %s with the memory manager %s (%s)", codec_node_state_name(state),
	      vmm_mode_name(fake_mode), reason);
}

/* What a step did: the state, the mode, whether the mode was set (and
 * why) or kept; then notes the event as exercised. */
static void check_step(enum ha_event event, int state, enum vmm_mode mode, unsigned sets_before,
		       const char *why)
{
	const char *name = ha_event_name(event);

	CHECK(node_state == state, "\"%s\": state %s, expected %s", name,
	      codec_node_state_name(node_state), codec_node_state_name(state));
	CHECK(fake_mode == mode, "\"%s\": mode %s, expected %s", name, vmm_mode_name(fake_mode),
	      vmm_mode_name(mode));
	if (why) {
		CHECK(mode_sets == sets_before + 1, "\"%s\": the mode set once, %u times", name,
		      mode_sets - sets_before);
		CHECK(strstr(mode_reason, why), "\"%s\": the mode's reason \"%s\" says \"%s\"",
		      name, mode_reason, why);
	} else {
		CHECK(mode_sets == sets_before, "\"%s\": the mode kept, set %u times", name,
		      mode_sets - sets_before);
	}
	exercised[event] = true;
}

/* A node a that ran solo at epoch 5 before it restarted, its first slot
 * round read (the partner's slot fresh and valid), the link still down. */
static struct ha *start_solo_survivor(struct event_base *base, const struct ftvm_config *config)
{
	struct sbd_report report = { .own_written = true, .partner_valid = true };
	struct ha *h;

	fake_epoch = 5;
	fake_was_solo = true;
	fake_mode = VMM_MODE_OFFLINE; /* as vmm_new() starts it */
	solo_refuse = config->solo_refuse;
	resyncs_sent = 0;
	resync_done = NULL;
	memset(&fake_link, 0, sizeof(fake_link));
	if (ha_new(base, config, NULL, NULL, on_state, NULL, &h) < 0)
		die("ha_new");
	snprintf(report.partner.node, sizeof(report.partner.node), "b");
	report.partner.state = SBD_STATE_FENCED;
	report.partner.epoch = 5;
	slot_report(&report, slot_report_arg);
	return h;
}

/* The partner's Hello came: at epoch, in state. */
static void link_up(struct ha *h, uint64_t epoch, int state)
{
	fake_link.link_up = true;
	snprintf(fake_link.partner_id, sizeof(fake_link.partner_id), "b");
	fake_link.partner_epoch = epoch;
	fake_link.partner_state = state;
	ha_link_changed(h, true, "");
}

/* The fence thread's round, just now: the partner's slot as given, silent
 * for silent_ms; our own slot as ha last asked it to be written. */
static void slot_round(uint32_t partner_state, uint64_t partner_epoch, uint64_t silent_ms)
{
	struct sbd_report report = { .own_written = true, .partner_valid = true };

	report.round_ms = clock_now_ms() + 1; /* after any link loss */
	report.partner_changed_ms = report.round_ms - silent_ms;
	report.own.state = slot_state;
	report.own.epoch = slot_epoch;
	snprintf(report.partner.node, sizeof(report.partner.node), "b");
	report.partner.state = partner_state;
	report.partner.epoch = partner_epoch;
	slot_report(&report, slot_report_arg);
}

static int forced_result = -1;
static char forced_reason[256];

static void on_forced(bool ok, const char *reason, void *arg)
{
	forced_result = ok;
	snprintf(forced_reason, sizeof(forced_reason), "%s", reason);
}

/* A node started at epoch 2 while its partner was away (starting: it did
 * not serve last), the partner's slot at epoch 3. */
static struct ha *start_waiting(struct event_base *base, const struct ftvm_config *config)
{
	struct ha *h;

	fake_epoch = 2;
	fake_was_solo = false;
	fake_mode = VMM_MODE_OFFLINE;
	solo_refuse = config->solo_refuse;
	forced_result = -1;
	resync_done = NULL;
	memset(&fake_link, 0, sizeof(fake_link));
	if (ha_new(base, config, NULL, NULL, on_state, NULL, &h) < 0)
		die("ha_new");
	return h;
}

/* `ftvmctl takeover --force` (ha/HA.md, "Forced takeover"). */
static void test_forced_takeover(struct event_base *base, const struct ftvm_config *config)
{
	char why[320];
	struct ha *h = start_waiting(base, config);

	CHECK_INT("forced before the slots were read: refused", -EBUSY,
		  ha_force_takeover(h, on_forced, NULL, why, sizeof(why)));
	slot_round(SBD_STATE_SOLO, 3, 100);
	CHECK_INT("forced while the partner's store heartbeat moves: refused", -EBUSY,
		  ha_force_takeover(h, on_forced, NULL, why, sizeof(why)));
	CHECK(strstr(why, "still for only 100 ms"), "the refusal says why: %s", why);
	link_up(h, 3, STATE(SOLO));
	slot_round(SBD_STATE_SOLO, 3, 600);
	CHECK_INT("forced with the link up: refused", -EBUSY,
		  ha_force_takeover(h, on_forced, NULL, why, sizeof(why)));
	CHECK(strstr(why, "link to b is up"), "the refusal says why: %s", why);
	fake_link.link_up = false;
	ha_link_changed(h, false, "gone");
	CHECK_INT("nothing changed meanwhile: epoch", 2, fake_epoch);
	CHECK_INT("... state", STATE(STARTING), node_state);

	CHECK_INT("forced, the partner silent for dead_after_ms: taken", 0,
		  ha_force_takeover(h, on_forced, NULL, why, sizeof(why)));
	CHECK_INT("... above the partner's epoch", 4, fake_epoch);
	CHECK_INT("... our slot says solo first", STATE(SOLO), slot_state);
	CHECK_INT("... and the epoch", 4, slot_epoch);
	CHECK_INT("... not serving before the slot is written", VMM_MODE_OFFLINE, fake_mode);
	CHECK_INT("... not answered yet", -1, forced_result);
	CHECK_INT("a second one meanwhile: refused", -EBUSY,
		  ha_force_takeover(h, on_forced, NULL, why, sizeof(why)));
	slot_round(SBD_STATE_SOLO, 3, 700);
	CHECK_INT("the slot written: answered, done", 1, forced_result);
	CHECK_INT("... serving alone", STATE(SOLO), node_state);
	CHECK_INT("... in solo mode", VMM_MODE_SOLO, fake_mode);
	CHECK_INT("forced again while solo: refused", -EALREADY,
		  ha_force_takeover(h, on_forced, NULL, why, sizeof(why)));
	ha_free(h, true);

	/* The partner's slot says stopped: no need to wait for its silence. */
	h = start_waiting(base, config);
	slot_round(SBD_STATE_STOPPED, 2, 0);
	CHECK_INT("forced, the partner's slot says stopped: taken", 0,
		  ha_force_takeover(h, on_forced, NULL, why, sizeof(why)));
	/* ... but the partner comes back and takes over first. */
	slot_round(SBD_STATE_SOLO, 5, 0);
	CHECK_INT("the partner took a later epoch first: answered, not done", 0, forced_result);
	CHECK_INT("... fenced", STATE(FENCED), node_state);
	ha_free(h, true);

	/* A node stopping with a forced takeover under way answers it. */
	h = start_waiting(base, config);
	slot_round(SBD_STATE_FENCED, 2, 0);
	ha_force_takeover(h, on_forced, NULL, why, sizeof(why));
	ha_free(h, true);
	CHECK_INT("stopping meanwhile: answered, not done", 0, forced_result);
	CHECK(strstr(forced_reason, "stopping"), "the answer says why: %s", forced_reason);
}

/* A node started as start_waiting() does, its first slot round read: it
 * waits, then the partner, new too, links at its epoch. */
static struct ha *start_active(struct event_base *base, const struct ftvm_config *config)
{
	struct ha *h = start_waiting(base, config);
	unsigned sets = mode_sets;

	slot_round(SBD_STATE_STARTING, 2, 0);
	check_step(HA_WAIT, STATE(STARTING), VMM_MODE_OFFLINE, sets, NULL);
	sets = mode_sets;
	link_up(h, 2, STATE(STARTING));
	check_step(HA_LINKED, STATE(ACTIVE), VMM_MODE_MIRRORED, sets, "partner linked");
	return h;
}

/* The rows the failover e2e tests walk, each through the code that takes
 * it: starting -> active -> solo (a takeover) and back through a resync,
 * and the fences. */
static void test_takeover_and_back(struct event_base *base, const struct ftvm_config *config)
{
	struct vmm_resync_stats stats = { .pages = 1 };
	struct ha *h = start_active(base, config);
	enum vmm_mode solo = config->solo_refuse ? VMM_MODE_SOLO_READ : VMM_MODE_SOLO;
	unsigned sets, changes;

	/* The link goes and comes back before anything is decided: mirrored
	 * again, which closes the failover window (vmm_set_mode()). */
	fake_link.link_up = false;
	ha_link_changed(h, false, "reset");
	sets = mode_sets;
	link_up(h, 2, STATE(ACTIVE));
	check_step(HA_LINKED, STATE(ACTIVE), VMM_MODE_MIRRORED, sets, "partner linked");

	/* The link goes and the partner's store heartbeat stops. */
	fake_link.link_up = false;
	ha_link_changed(h, false, "reset");
	slot_round(SBD_STATE_ACTIVE, 2, 600);
	CHECK_INT("the partner silent: the slot says solo at the next epoch", STATE(SOLO),
		  slot_state);
	CHECK_INT("... epoch", 3, slot_epoch);
	CHECK_INT("... the node still active until it is written", STATE(ACTIVE), node_state);
	CHECK_INT("... mirrored", VMM_MODE_MIRRORED, fake_mode);
	sets = mode_sets;
	slot_round(SBD_STATE_ACTIVE, 2, 700);
	check_step(HA_TOOK_OVER, STATE(SOLO), solo, sets, "took over");
	CHECK(strstr(state_reason, "took over from b at epoch 3"), "the reason says it: %s",
	      state_reason);

	/* It comes back, restarted: resynced. */
	sets = mode_sets;
	link_up(h, 2, STATE(STARTING));
	check_step(HA_RESYNC_SEND, STATE(RESYNCING), solo, sets, NULL);
	CHECK(resync_done, "a resync was sent");
	fake_mode = VMM_MODE_MIRRORED; /* as resync.c does in the snapshot's turn */
	sets = mode_sets;
	resync_done(FTVM__PARTNER__STATUS__STATUS_OK, "", &stats, resync_done_arg);
	check_step(HA_RESYNC_SENT, STATE(ACTIVE), VMM_MODE_MIRRORED, sets, "resynced");

	/* The partner takes a later epoch in the store: this node fences. */
	sets = mode_sets;
	slot_round(SBD_STATE_SOLO, 4, 0);
	check_step(HA_FENCE, STATE(FENCED), VMM_MODE_FENCED, sets, "took over");

	/* ... and is resynced by it: fenced until its ResyncBegin. */
	sets = mode_sets;
	resync_observer(true, 0, "", resync_observer_arg);
	check_step(HA_RESYNC_RECEIVE, STATE(RESYNCING), VMM_MODE_FENCED, sets, NULL);
	sets = mode_sets;
	resync_observer(false, 0, "", resync_observer_arg);
	check_step(HA_RESYNC_RECEIVED, STATE(ACTIVE), VMM_MODE_MIRRORED, sets, "resynced");

	/* Fenced again, and the partner's resync fails: fenced still, starting. */
	fake_epoch = 4;
	slot_round(SBD_STATE_SOLO, 5, 0);
	CHECK_INT("fenced again", STATE(FENCED), node_state);
	resync_observer(true, 0, "", resync_observer_arg);
	sets = mode_sets;
	resync_observer(false, -EIO, "resync incomplete: ResyncPage a-1 page 3: checksum differs",
			resync_observer_arg);
	check_step(HA_RESYNC_RECEIVE_FAILED, STATE(STARTING), VMM_MODE_FENCED, sets, NULL);

	/* The next one is cut by the link: offline, starting. */
	resync_observer(true, 0, "", resync_observer_arg);
	sets = mode_sets;
	ha_link_changed(h, false, "reset");
	check_step(HA_RESYNC_CUT, STATE(STARTING), VMM_MODE_OFFLINE, sets, "the resync was cut");

	/* Not in the table: a resync received while active (a ResyncBegin at
	 * a later epoch is taken in any state) keeps the node mirrored, and
	 * its failure would make it starting and mirrored. Refused. */
	ha_free(h, true);
	h = start_active(base, config);
	resync_observer(true, 0, "", resync_observer_arg);
	CHECK_INT("receiving while active: resyncing", STATE(RESYNCING), node_state);
	sets = mode_sets;
	changes = state_changes;
	resync_observer(false, -EIO, "resync incomplete", resync_observer_arg);
	CHECK_INT("... its failure, starting while mirrored, refused: the state stays",
		  STATE(RESYNCING), node_state);
	CHECK_INT("... the mode stays", VMM_MODE_MIRRORED, fake_mode);
	CHECK_INT("... the mode not set", sets, mode_sets);
	CHECK_INT("... nobody told", changes, state_changes);
	CHECK_INT("... nor the slot", STATE(RESYNCING), slot_state);
	ha_free(h, true);
}

/* Slot rounds, as the fence thread makes them, until ms have passed or our
 * slot says solo (a takeover began). */
static void slot_rounds_for(uint64_t ms, uint32_t partner_state)
{
	uint64_t start = clock_now_ms();
	struct timespec tick = { 0, 20 * 1000 * 1000 };

	while (clock_now_ms() - start < ms && slot_state != STATE(SOLO)) {
		slot_round(partner_state, 2, 0);
		nanosleep(&tick, NULL);
	}
}

/* Hellos that cross (ha/HA.md): this node linked with its partner starting
 * and went active, but the partner took a Hello sent after that and waits,
 * starting, for a resync. Past dead_after_ms of it the node takes over
 * (a new epoch) and resyncs it; a partner that goes active meanwhile, as
 * one linking at the same time does, is left alone. */
/* The partner fenced itself with the link up: taken over when its slot says
 * so at our epoch; a fenced slot from before our last takeover is not news. */
static void test_partner_fenced_linked(struct event_base *base, const struct ftvm_config *config)
{
	struct vmm_resync_stats stats = { .pages = 1 };
	struct ha *h = start_active(base, config);

	slot_round(SBD_STATE_FENCED, 2, 0);
	CHECK_INT("the partner fenced at our epoch, linked: our slot says solo", STATE(SOLO),
		  slot_state);
	CHECK_INT("... at the next epoch", 3, slot_epoch);
	slot_round(SBD_STATE_FENCED, 2, 0);
	CHECK_INT("written: resyncing the partner", STATE(RESYNCING), node_state);
	CHECK(resync_done, "a resync was sent");
	fake_mode = VMM_MODE_MIRRORED; /* as resync.c does in the snapshot's turn */
	resync_done(FTVM__PARTNER__STATUS__STATUS_OK, "", &stats, resync_done_arg);
	CHECK_INT("resynced: active", STATE(ACTIVE), node_state);

	/* The partner is active now, its slot says fenced at 2 until its next
	 * heartbeat. */
	resyncs_sent = 0;
	slot_round(SBD_STATE_FENCED, 2, 0);
	CHECK_INT("its slot still fenced at the old epoch: still active", STATE(ACTIVE),
		  node_state);
	CHECK_INT("... our slot too", STATE(ACTIVE), slot_state);
	CHECK_INT("... at our epoch", 3, slot_epoch);
	CHECK_INT("... no new resync", 0, resyncs_sent);
	slot_round(SBD_STATE_FENCED, 3, 0);
	CHECK_INT("fenced again, at our epoch: taken over", STATE(SOLO), slot_state);
	CHECK_INT("... at the next epoch", 4, slot_epoch);
	ha_free(h, true);
}

static void test_crossed_hellos(struct event_base *base, const struct ftvm_config *config)
{
	struct ha *h = start_active(base, config);
	unsigned sets;

	resyncs_sent = 0;
	slot_rounds_for(config->dead_after_ms / 2, SBD_STATE_STARTING);
	CHECK_INT("the partner starting for half of dead_after_ms: still active", STATE(ACTIVE),
		  node_state);
	fake_link.partner_state = STATE(ACTIVE); /* its heartbeat says it went active */
	slot_rounds_for(config->dead_after_ms + 100, SBD_STATE_ACTIVE);
	CHECK_INT("a partner that went active: still active", STATE(ACTIVE), node_state);
	CHECK_INT("... at its epoch", 2, fake_epoch);
	ha_free(h, true);

	h = start_active(base, config);
	resyncs_sent = 0;
	slot_rounds_for(config->dead_after_ms / 2, SBD_STATE_STARTING);
	CHECK_INT("half of dead_after_ms: still active", STATE(ACTIVE), node_state);
	slot_rounds_for(config->dead_after_ms, SBD_STATE_STARTING);
	CHECK_INT("the partner starting past dead_after_ms: our slot says solo", STATE(SOLO),
		  slot_state);
	CHECK_INT("... at a new epoch", 3, slot_epoch);
	CHECK_INT("... active until it is written", STATE(ACTIVE), node_state);
	sets = mode_sets;
	slot_round(SBD_STATE_STARTING, 2, 0);
	CHECK_INT("written: resyncing the partner", STATE(RESYNCING), node_state);
	CHECK_INT("... one resync", 1, resyncs_sent);
	CHECK_INT("... from the new epoch", 3, resync_sent_at_epoch);
	CHECK(mode_sets > sets, "the mode was set");
	ha_free(h, true);
}

/* A resync that cannot start, the fake *fail failing with err: the partner,
 * at partner_epoch, is left as it is and the node serves alone on; its
 * reason says so. */
static void unstarted(struct event_base *base, const struct ftvm_config *config, int *fail, int err,
		      uint64_t partner_epoch, const char *says)
{
	struct ha *h;
	unsigned sets;

	*fail = err;
	h = start_solo_survivor(base, config);
	sets = mode_sets;
	link_up(h, partner_epoch, STATE(STARTING));
	check_step(HA_RESYNC_UNSTARTED, STATE(SOLO), VMM_MODE_SOLO, sets, NULL);
	CHECK(strstr(state_reason, says), "the reason says \"%s\": %s", says, state_reason);
	CHECK_INT("... no resync", 0, resyncs_sent);
	*fail = 0;
	ha_free(h, true);
}

/* The sender's other ends: the resync fails, or cannot start. */
static void test_resync_send_ends(struct event_base *base, const struct ftvm_config *config)
{
	unsigned sets = mode_sets;
	struct ha *h = start_solo_survivor(base, config);

	check_step(HA_RESUME, STATE(SOLO), VMM_MODE_SOLO, sets, "ran alone before it stopped");
	link_up(h, 4, STATE(STARTING));
	CHECK_INT("resyncing", STATE(RESYNCING), node_state);
	fake_mode = VMM_MODE_MIRRORED; /* the snapshot went */
	sets = mode_sets;
	resync_done(FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, "the link went", NULL,
		    resync_done_arg);
	check_step(HA_RESYNC_SEND_FAILED, STATE(SOLO), VMM_MODE_SOLO, sets, "the resync failed");
	ha_free(h, true);

	unstarted(base, config, &resync_send_error, -EBUSY, 4, "cannot start the resync");
	unstarted(base, config, &set_epoch_error, -EIO, 5, "cannot record epoch 6");
}

int main(void)
{
	struct ftvm_config config = { .id = "a", .heartbeat_ms = 100, .dead_after_ms = 500 };
	struct event_base *base = event_base_new();
	struct ha *h;

	if (!base)
		die("event_base_new");

	h = start_solo_survivor(base, &config);
	CHECK_INT("a node that ran solo serves solo again", STATE(SOLO), node_state);
	CHECK_INT("... in solo mode", VMM_MODE_SOLO, fake_mode);
	link_up(h, 4, STATE(STARTING));
	CHECK_INT("a partner behind: resynced", 1, resyncs_sent);
	CHECK_INT("... at our own epoch", 5, resync_sent_at_epoch);
	CHECK_INT("... resyncing", STATE(RESYNCING), node_state);
	ha_free(h, true);

	/* The stranded pair: b took epoch 5 from a ResyncEnd whose answer never
	 * reached a, then restarted (starting) or fenced itself. */
	for (int i = 0; i < 2; i++) {
		int partner_state = i ? STATE(FENCED) : STATE(STARTING);

		h = start_solo_survivor(base, &config);
		link_up(h, 5, partner_state);
		CHECK_INT("a partner at our epoch, not serving: resynced", 1, resyncs_sent);
		CHECK_INT("... from the next epoch", 6, resync_sent_at_epoch);
		CHECK_INT("... recorded", 6, fake_epoch);
		CHECK_INT("... our slot says it", 6, slot_epoch);
		CHECK_INT("... resyncing", STATE(RESYNCING), node_state);
		CHECK_INT("... in the slot", STATE(RESYNCING), slot_state);
		ha_free(h, true);
	}

	h = start_solo_survivor(base, &config);
	link_up(h, 5, STATE(SOLO));
	CHECK_INT("a partner at our epoch saying solo: no resync", 0, resyncs_sent);
	CHECK_INT("... the epoch kept", 5, fake_epoch);
	CHECK_INT("... still solo", STATE(SOLO), node_state);
	ha_free(h, true);

	h = start_solo_survivor(base, &config);
	link_up(h, 6, STATE(SOLO));
	CHECK_INT("a partner ahead of us: no resync", 0, resyncs_sent);
	CHECK_INT("... we fenced ourselves", STATE(FENCED), node_state);
	ha_free(h, true);

	test_forced_takeover(base, &config);

	test_table();
	test_takeover_and_back(base, &config);
	test_resync_send_ends(base, &config);
	test_crossed_hellos(base, &config);
	test_partner_fenced_linked(base, &config);
	{
		struct ftvm_config refuse = config;

		refuse.solo_refuse = true; /* [failover] solo = refuse: solo reads only */
		test_takeover_and_back(base, &refuse);
	}
	for (int ev = 0; ev < HA_EVENT_COUNT; ev++)
		CHECK(exercised[ev], "the table's \"%s\" was never taken", ha_event_name(ev));

	event_base_free(base);
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
