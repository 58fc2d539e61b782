/* The resync a survivor sends (node/ha/resync.c) waits for the operations
 * it completed alone to finish their turn before it takes its snapshot. It
 * then goes mirrored, but only if it still serves alone: a node fenced while
 * the snapshot waited must neither send it nor go mirrored, which would have
 * it serve again (node/ha/HA.md, "Self-fencing").
 *
 * Node a owns A (two pages). Each case puts a in solo, writes a page (an
 * operation completed alone, a turn from done) and asks for the resync at
 * once, so that it has to wait.
 *
 * And a pointer's grant (its client there, or gone before the answer) and a
 * modified release whose requests left before the snapshot: the partner
 * took each, then the resync undid it; at the answer the lock is mirrored
 * again, and the release sent again behind it (node/ha/HA.md, "Solo and
 * rejoin"). */
#include "check.h"
#include "client_server.h"
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

/* Taken over with the link up: the resync's snapshot goes, behind what is
 * in flight. */
static void snapshot_now(struct sent *s)
{
	size_t begins = sent_count(MSG(RESYNC_BEGIN));

	vmm_set_mode(h.v, VMM_MODE_SOLO, "test: took over, the link up");
	CHECK(vmm_resync_send(h.v, 0, 0, on_sent, s) == 0, "the resync is asked for");
	CHECK(RUN_UNTIL(&h, sent_count(MSG(RESYNC_BEGIN)) == begins + 1), "the snapshot went");
}

/* A grant in flight across a resync: the partner took the pointer's lock
 * (its AllocateWrite came before ResyncBegin), then the resync replaced its
 * table, and the holding here came with the answer, after the holdings
 * were mirrored behind the snapshot. The partner must get the lock again,
 * or the pointer's release finds none there and the page stays newer here
 * than on the partner (e2e-drill_load: "WritePage to a-14 page 0, which
 * nobody has write-locked", verify unequal). */
static void test_grant_across_snapshot(void)
{
	struct fake_client *c = fake_client_new(7, 0, 4747, CLIENT_RIGHT_POINTERS);
	size_t before, after = 0;
	struct fake_request *aw;
	struct sent s = { 0 };
	struct fake_call *p;

	vmm_set_mode(h.v, VMM_MODE_MIRRORED, "test: linked");
	p = harness_pointer_call(&h, c, A, 1, true, false);
	aw = fake_session_pending(h.s, MSG(ALLOCATE_WRITE));
	CHECK(aw != NULL, "the grant's AllocateWrite went to the partner");
	snapshot_now(&s);
	before = fake_session_requests(h.s);
	fake_session_answer_status(h.s, aw, STATUS(OK), "");
	CHECK(RUN_UNTIL(&h, harness_status(p) != -1), "the pointer is granted");
	CHECK_INT("granted", STATUS(OK), harness_status(p));
	for (size_t i = before; i < fake_session_requests(h.s); i++) {
		const Envelope *env = fake_session_request(h.s, i)->env;

		after += env->message_case == MSG(ALLOCATE_WRITE) &&
			 env->allocate_write->page == 1 &&
			 strcmp(env->allocate_write->guid, A) == 0;
	}
	CHECK_INT("the lock mirrored again after the snapshot", 1, after);
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, s.done), "the resync ends");
	CHECK_INT("the resync's status", STATUS(OK), s.status);
	harness_release_call(&h, c, A, 1, false);
	fake_session_answer_all(h.s);
	harness_settle(&h);
	fake_client_free(c);
}

/* The grant's client gone before the answer: the pointer is released at
 * once, the lock mirrored again ahead of the release. */
static void test_gone_grant_across_snapshot(void)
{
	struct fake_client *c = fake_client_new(9, 0, 4949, CLIENT_RIGHT_POINTERS);
	struct fake_request *aw;
	struct sent s = { 0 };
	size_t before, lock_at = 0, release_at = 0;

	vmm_set_mode(h.v, VMM_MODE_MIRRORED, "test: linked");
	harness_pointer_call(&h, c, A, 1, true, false);
	aw = fake_session_pending(h.s, MSG(ALLOCATE_WRITE));
	CHECK(aw != NULL, "the grant's AllocateWrite went to the partner");
	snapshot_now(&s);
	fake_client_close(c, h.v);
	before = fake_session_requests(h.s);
	fake_session_answer_status(h.s, aw, STATUS(OK), "");
	harness_settle(&h);
	for (size_t i = before; i < fake_session_requests(h.s); i++) {
		const Envelope *env = fake_session_request(h.s, i)->env;

		if (env->message_case == MSG(ALLOCATE_WRITE) && !lock_at)
			lock_at = i;
		if (env->message_case == MSG(RELEASE_POINTER) && !release_at)
			release_at = i;
	}
	CHECK(lock_at && release_at && lock_at < release_at,
	      "the lock mirrored again (request %zu) ahead of the release (%zu)", lock_at,
	      release_at);
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, s.done), "the resync ends");
	harness_settle(&h);
	fake_client_free(c);
}

/* The same for a write pointer's release, modified: the partner applied it
 * (its [WritePage, ReleasePointer] came before ResyncBegin), then the resync
 * replaced its table with the page as it was here, without its block (the
 * client had written into it) and without the lock. At the answer the lock
 * goes again and the release behind it, and only then is the client told. */
static void test_release_across_snapshot(void)
{
	struct fake_client *c = fake_client_new(8, 0, 4848, CLIENT_RIGHT_POINTERS);
	size_t before;
	struct peek_page pk;
	struct fake_request *rel;
	struct sent s = { 0 };
	struct fake_call *p, *r;
	uint64_t version;
	unsigned locks = 0, writes = 0, releases = 0;

	vmm_set_mode(h.v, VMM_MODE_MIRRORED, "test: linked");
	p = harness_pointer(&h, c, A, 0, true);
	CHECK(vmm_peek_page(h.v, A, 0, &pk), "page 0 is there");
	version = pk.version;
	memset((uint8_t *)vmm_pool_base(h.v) + p->reply->pointer->offset, 0x77, HARNESS_PAGE);
	r = harness_release_call(&h, c, A, 0, true);
	rel = fake_session_pending(h.s, MSG(RELEASE_POINTER));
	CHECK(rel != NULL, "the release went to the partner");
	snapshot_now(&s);
	/* What went until now is answered, the release and the resync; what
	 * those answers send is not, yet. */
	before = fake_session_requests(h.s);
	for (size_t i = 0; i < before; i++)
		if (!fake_session_request(h.s, i)->answered)
			fake_session_answer_status(h.s, fake_session_request(h.s, i), STATUS(OK),
						   NULL);
	harness_settle(&h);
	for (size_t i = before; i < fake_session_requests(h.s); i++) {
		const Envelope *env = fake_session_request(h.s, i)->env;

		locks += env->message_case == MSG(ALLOCATE_WRITE) && env->allocate_write->page == 0;
		writes += env->message_case == MSG(WRITE_PAGE) && env->write_page->page == 0;
		releases += env->message_case == MSG(RELEASE_POINTER) &&
			    env->release_pointer->page == 0 && env->release_pointer->modified &&
			    env->release_pointer->version == version + 1;
	}
	CHECK_INT("the lock mirrored again after the snapshot", 1, locks);
	CHECK_INT("... the block again", 1, writes);
	CHECK_INT("... and the release at the next version", 1, releases);
	CHECK_INT("the client waits for the second answer", -1, harness_status(r));
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, harness_status(r) != -1 && s.done), "the release is answered");
	CHECK_INT("released", STATUS(OK), harness_status(r));
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.version == version + 1 && pk.n_owners == 0,
	      "page 0 at version %llu, unlocked", (unsigned long long)pk.version);
	fake_client_free(c);
}

int main(void)
{
	harness_start(&h, "vmm-resync", "64K", "1M", "");
	harness_alloc(&h, 2 * HARNESS_PAGE, A, sizeof(A));
	test_waits_then_sends();
	test_fenced_while_waiting();
	test_grant_across_snapshot();
	test_gone_grant_across_snapshot();
	test_release_across_snapshot();
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
