/* ha/ha.c's rejoin decisions (node/ha/HA.md, "Solo and rejoin") over fakes of the
 * memory manager, the session and the fence slots: a survivor serving solo
 * resyncs a partner behind it; a partner at its own epoch that does not
 * serve (it took the epoch from a resync whose end never reached the
 * survivor) is moved behind by a new epoch and resynced, instead of both
 * waiting for ever; a partner at that epoch saying solo is left alone; an
 * operator's forced takeover is refused while the partner may live, and
 * otherwise takes an epoch above the partner's and answers once done. The
 * real vmm, session and slots are tested in test_session, test_sbd and the
 * e2e failover tests. */
#include <event2/event.h>

#include "check.h"
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

uint64_t vmm_epoch(const struct vmm *v)
{
	return fake_epoch;
}

int vmm_set_epoch(struct vmm *v, uint64_t epoch)
{
	fake_epoch = epoch;
	return 0;
}

void vmm_set_mode(struct vmm *v, enum vmm_mode mode, const char *reason)
{
	fake_mode = mode;
}

enum vmm_mode vmm_mode(const struct vmm *v)
{
	return fake_mode;
}

const char *vmm_mode_name(enum vmm_mode mode)
{
	return "(a mode)";
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
}

int vmm_resync_send(struct vmm *v, uint64_t partner_applied_lsn, uint64_t partner_own_lsn,
		    vmm_resync_done_fn done, void *arg)
{
	resyncs_sent++;
	resync_sent_at_epoch = fake_epoch;
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

/* ---- the scene ---- */
static int node_state;

static void on_state(int state, const char *reason, void *arg)
{
	node_state = state;
}

/* A node a that ran solo at epoch 5 before it restarted, its first slot
 * round read (the partner's slot fresh and valid), the link still down. */
static struct ha *start_solo_survivor(struct event_base *base, const struct ftvm_config *config)
{
	struct sbd_report report = { .own_written = true, .partner_valid = true };
	struct ha *h;

	fake_epoch = 5;
	fake_was_solo = true;
	resyncs_sent = 0;
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

/* The fence thread's round: the partner's slot as given, silent for
 * silent_ms; our own slot as ha last asked it to be written. */
static void slot_round(uint32_t partner_state, uint64_t partner_epoch, uint64_t silent_ms)
{
	struct sbd_report report = { .own_written = true, .partner_valid = true };

	report.round_ms = 1000000;
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
	forced_result = -1;
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

	event_base_free(base);
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
