/* The resync a survivor sends (node/ha/resync.c) waits for the operations
 * it completed alone to finish their turn before it takes its snapshot. It
 * then goes mirrored, but only if it still serves alone: a node fenced while
 * the snapshot waited must neither send it nor go mirrored, which would have
 * it serve again (node/ha/HA.md, "Self-fencing").
 *
 * Node a owns A (two pages). Each case puts a in solo, writes a page (an
 * operation completed alone, a turn from done) and asks for the resync at
 * once, so that it has to wait. */
#include "check.h"
#include "failover.h"
#include "vmm.h"
#include "vmm_harness.h"

#define MSG(x) FTVM__PARTNER__ENVELOPE__MESSAGE_##x
#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x

static struct harness h;
static char A[64];

struct sent {
	bool done;
	int status;
	char reason[256];
};

static void on_sent(int status, const char *reason, const struct vmm_resync_stats *stats, void *arg)
{
	struct sent *s = arg;

	(void)stats;
	s->done = true;
	s->status = status;
	snprintf(s->reason, sizeof(s->reason), "%s", reason ? reason : "");
}

/* Requests of message_case sent so far. */
static size_t sent_count(int message_case)
{
	size_t n = 0;

	for (size_t i = 0; i < fake_session_requests(h.s); i++)
		n += (int)fake_session_request(h.s, i)->env->message_case == message_case;
	return n;
}

/* Solo, a page written alone and the resync asked for in the same turn:
 * the snapshot has to wait. */
static void solo_write_then_resync(struct sent *s)
{
	uint8_t block[HARNESS_PAGE];
	struct fake_call *w;
	size_t begins = sent_count(MSG(RESYNC_BEGIN));

	vmm_set_mode(h.v, VMM_MODE_SOLO, "test: the partner is gone");
	memset(block, 0x5a, sizeof(block));
	w = harness_write_call(&h, A, 0, block, sizeof(block), false);
	CHECK(harness_status(w) == -1, "the write alone is answered a turn later, not at once");
	CHECK(vmm_resync_send(h.v, 0, 0, on_sent, s) == 0, "the resync is asked for");
	CHECK(vmm_resync_busy(h.v), "a resync is under way");
	CHECK_INT("ResyncBegin before the write's turn", begins, sent_count(MSG(RESYNC_BEGIN)));
	CHECK(RUN_UNTIL(&h, harness_status(w) != -1), "the write alone is answered");
	CHECK_INT("the write's status", STATUS(OK), harness_status(w));
}

/* The control: nothing happens meanwhile; the resync goes out and a goes
 * mirrored. */
static void test_waits_then_sends(void)
{
	struct sent s = { 0 };

	solo_write_then_resync(&s);
	CHECK(RUN_UNTIL(&h, sent_count(MSG(RESYNC_BEGIN)) == 1), "ResyncBegin sent once it waited");
	CHECK_INT("mode once the snapshot is out", VMM_MODE_MIRRORED, vmm_mode(h.v));
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, s.done), "the resync ends once answered");
	CHECK_INT("the resync's status", STATUS(OK), s.status);
	CHECK(!vmm_resync_busy(h.v), "no resync under way");
}

/* Fenced while the snapshot waited: no resync goes out, the node stays
 * fenced, and whoever asked is told why. */
static void test_fenced_while_waiting(void)
{
	struct sent s = { 0 };
	size_t begins = sent_count(MSG(RESYNC_BEGIN));

	solo_write_then_resync(&s);
	vmm_set_mode(h.v, VMM_MODE_FENCED, "test: the partner took over");
	CHECK(RUN_UNTIL(&h, s.done), "the resync ends");
	CHECK_INT("the resync's status", STATUS(FENCED), s.status);
	CHECK(strstr(s.reason, "no longer serves alone") != NULL, "reason: %s", s.reason);
	CHECK_INT("mode", VMM_MODE_FENCED, vmm_mode(h.v));
	harness_settle(&h);
	CHECK_INT("ResyncBegin sent by a fenced node", begins, sent_count(MSG(RESYNC_BEGIN)));
	CHECK(!vmm_resync_busy(h.v), "no resync under way");
}

int main(void)
{
	harness_start(&h, "vmm-resync", "64K", "1M", "");
	harness_alloc(&h, 2 * HARNESS_PAGE, A, sizeof(A));
	test_waits_then_sends();
	test_fenced_while_waiting();
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
