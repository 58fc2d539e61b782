/* Pointers (seed 002 Figs. 6-8, node/vmm/pointer.c) on node a, over the fake
 * partner session:
 * - a page a owns: a decides at once on its own lock table, mirrors the lock
 *   to b ([AllocateWrite]) and grants when b acknowledged; a second writer
 *   is refused LOCKED at once, or waits and gets its pointer when the first
 *   goes;
 * - a page b owns: a asks b ([LockRequest, AllocateWrite]); b's LOCKED reaches
 *   the client and no lock is left on b; granted, a's mirror records it;
 * - a write pointer released modified: [WritePage, ReleasePointer] with the
 *   bytes the client wrote into the pool, a new version (a's own + 1 where a
 *   owns the page, the owner's where b does), dirty, committed before the
 *   reply. */
#include "check.h"
#include "client_server.h"
#include "crc32c.h"
#include "vmm.h"
#include "vmm_harness.h"
#include "vmm_msg.h"

#define MSG(x) FTVM__PARTNER__ENVELOPE__MESSAGE_##x
#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x
#define MODE(x) FTVM__PARTNER__LOCK_MODE__LOCK_MODE_##x

static uint8_t *pool_at(struct harness *h, const struct fake_call *pointer)
{
	return (uint8_t *)vmm_pool_base(h->v) + pointer->reply->pointer->offset;
}

static void test_owned(void)
{
	struct harness h;
	struct fake_client *other;
	struct fake_call *first, *refused, *waiting, *rel;
	struct fake_request *aw, *wp, *rp;
	struct peek_page pk;
	struct pt_row row;
	char A[64];
	size_t sent;
	uint32_t crc;

	harness_start(&h, "vmm-pointer", "64K", "1M", "");
	harness_alloc(&h, 2 * HARNESS_PAGE, A, sizeof(A));
	other = fake_client_new(2, 0, 4343, CLIENT_RIGHT_POINTERS);
	sent = fake_session_requests(h.s);

	/* Granted: locked here at once, mirrored, then answered. */
	first = harness_pointer_call(&h, NULL, A, 0, true, false);
	CHECK_INT("requests", sent + 1, fake_session_requests(h.s));
	aw = fake_session_pending(h.s, MSG(ALLOCATE_WRITE));
	CHECK(aw, "no AllocateWrite");
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.lock_mode == MODE(WRITE) && pk.owner0 && aw &&
		      strcmp(pk.owner0, aw->env->allocate_write->owner) == 0,
	      "not write-locked here by the AllocateWrite's owner");
	{
		unsigned long long pid = 0, op = 0;
		char node[8] = "", end = 0;

		CHECK(pk.owner0 &&
			      sscanf(pk.owner0, "%7[^/]/%llu/%llu%c", node, &pid, &op, &end) == 3 &&
			      strcmp(node, "a") == 0 && pid == 4242 && op > 0,
		      "lock owner %s, not node/pid/op as a/4242/N (the harness client)",
		      pk.owner0 ? pk.owner0 : "(none)");
	}
	harness_settle(&h);
	CHECK(!first->answered, "granted before b acknowledged");

	/* A second writer meanwhile: refused at once, or waits. */
	refused = harness_pointer_call(&h, other, A, 0, true, false);
	CHECK_INT("second writer", STATUS(LOCKED), harness_status(refused));
	waiting = harness_pointer_call(&h, other, A, 0, false, true);
	harness_settle(&h);
	CHECK(!waiting->answered, "a reader beside the writer");
	CHECK_INT("requests", sent + 1, fake_session_requests(h.s));

	fake_session_answer_status(h.s, aw, STATUS(OK), NULL);
	CHECK(RUN_UNTIL(&h, first->answered), "not granted");
	CHECK_INT("status", STATUS(OK), harness_status(first));
	CHECK(first->reply->pointer && first->reply->pointer->length == HARNESS_PAGE &&
		      first->reply->pointer->version == 0,
	      "its PointerReply");
	if (!first->reply->pointer)
		goto out;

	/* The client writes through its mapping, then releases modified. */
	memset(pool_at(&h, first), 0xab, HARNESS_PAGE);
	crc = crc32c(0, pool_at(&h, first), HARNESS_PAGE);
	rel = harness_release_call(&h, NULL, A, 0, true);
	wp = fake_session_pending(h.s, MSG(WRITE_PAGE));
	rp = fake_session_pending(h.s, MSG(RELEASE_POINTER));
	CHECK(wp && rp && wp->batch == rp->batch && wp->seq < rp->seq,
	      "no [WritePage, ReleasePointer] batch");
	if (wp && rp) {
		CHECK(wp->env->write_page->data.len == HARNESS_PAGE &&
			      memcmp(wp->env->write_page->data.data, pool_at(&h, first),
				     HARNESS_PAGE) == 0,
		      "the WritePage does not carry what the client wrote");
		CHECK_HEX32("WritePage.crc32c", crc, wp->env->write_page->crc32c);
		CHECK(rp->env->release_pointer->modified, "ReleasePointer not modified");
		CHECK_INT("ReleasePointer.version", 1, rp->env->release_pointer->version);
		CHECK_HEX32("ReleasePointer.crc32c", crc, rp->env->release_pointer->crc32c);
	}
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.version == 0, "a new version before b took it");
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, rel->answered), "release not answered");
	CHECK_INT("release", STATUS(OK), harness_status(rel));
	CHECK(!vmm_peek_uncommitted(h.v), "release answered before its commit");
	CHECK(rel->reply->release_pointer && rel->reply->release_pointer->version == 1 &&
		      rel->reply->release_pointer->crc32c == crc,
	      "its ReleasePointerReply");
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.version == 1 && pk.dirty && pk.crc32c == crc,
	      "A page 0: version %llu, dirty %d", (unsigned long long)pk.version, pk.dirty);
	CHECK(harness_pt_page(&h, A, 0, &row) && row.version == 1 && row.crc32c == crc,
	      "A page 0's committed row: version %llu", (unsigned long long)row.version);

	/* The writer went: the waiting reader is mirrored and granted. */
	CHECK(RUN_UNTIL(&h, fake_session_pending(h.s, MSG(ALLOCATE_READ))),
	      "the waiting reader did not go on");
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, waiting->answered), "the waiting reader not granted");
	CHECK_INT("waiting reader", STATUS(OK), harness_status(waiting));
	CHECK(waiting->reply->pointer && waiting->reply->pointer->version == 1,
	      "the reader sees version 1");
	/* A plain release of a read pointer: [ReleasePointer], not modified. */
	rel = harness_release_call(&h, other, A, 0, false);
	rp = fake_session_pending(h.s, MSG(RELEASE_POINTER));
	CHECK(rp && !rp->env->release_pointer->modified, "no plain ReleasePointer");
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, rel->answered) && harness_status(rel) == STATUS(OK), "plain release");
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.n_owners == 0 && pk.version == 1,
	      "A page 0 after the reader");
out:
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
	CHECK_INT("other's calls unanswered", 0, fake_client_unanswered(other));
	fake_client_free(other);
}

static void test_partner_owned(void)
{
	struct harness h;
	struct fake_call *call, *rel;
	struct fake_request *lr, *aw, *wp, *rp;
	Ftvm__Partner__LockStatus ls = FTVM__PARTNER__LOCK_STATUS__INIT;
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	struct peek_page pk;
	size_t sent;

	harness_start(&h, "vmm-pointer", "64K", "1M", "");
	harness_partner_alloc(&h, "b-1", 2, 0);
	sent = fake_session_requests(h.s);

	/* b refuses: LOCKED reaches the client; b recorded nothing to undo. */
	call = harness_pointer_call(&h, NULL, "b-1", 1, true, false);
	lr = fake_session_pending(h.s, MSG(LOCK_REQUEST));
	aw = fake_session_pending(h.s, MSG(ALLOCATE_WRITE));
	CHECK(lr && aw && lr->batch == aw->batch && lr->seq < aw->seq,
	      "no [LockRequest, AllocateWrite] batch");
	CHECK(lr && lr->env->lock_request->mode == MODE(WRITE), "LockRequest's mode");
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && pk.n_owners == 0, "locked here before b");
	if (!lr || !aw)
		goto out;
	fake_session_answer_status(h.s, lr, STATUS(LOCKED), "b-1 page 1 is write-locked on b");
	fake_session_answer_status(h.s, aw, STATUS(ABORTED), NULL);
	CHECK(RUN_UNTIL(&h, call->answered), "not answered");
	CHECK_INT("status", STATUS(LOCKED), harness_status(call));
	harness_settle(&h);
	CHECK_INT("requests after the refusal", sent + 2, fake_session_requests(h.s));

	/* b grants: a's mirror records the lock. */
	call = harness_pointer_call(&h, NULL, "b-1", 1, true, false);
	lr = fake_session_pending(h.s, MSG(LOCK_REQUEST));
	aw = fake_session_pending(h.s, MSG(ALLOCATE_WRITE));
	if (!lr || !aw)
		goto out;
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, call->answered), "not granted");
	CHECK_INT("status", STATUS(OK), harness_status(call));
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && pk.lock_mode == MODE(WRITE) && pk.owner0 &&
		      strcmp(pk.owner0, aw->env->allocate_write->owner) == 0,
	      "the mirror does not record the lock");

	/* Released modified: the version is the owner's, from its answer. */
	rel = harness_release_call(&h, NULL, "b-1", 1, true);
	wp = fake_session_pending(h.s, MSG(WRITE_PAGE));
	rp = fake_session_pending(h.s, MSG(RELEASE_POINTER));
	CHECK(wp && rp && wp->batch == rp->batch, "no [WritePage, ReleasePointer] batch");
	if (!wp || !rp)
		goto out;
	fake_session_answer_status(h.s, wp, STATUS(OK), NULL);
	ls.mode = MODE(NONE);
	ls.version = 7;
	cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LOCK;
	cc.lock = &ls;
	fake_session_answer(h.s, rp, &cc);
	CHECK(RUN_UNTIL(&h, rel->answered), "release not answered");
	CHECK_INT("release", STATUS(OK), harness_status(rel));
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && pk.version == 7 && pk.dirty && pk.n_owners == 0,
	      "b-1 page 1: version %llu (b said 7), dirty %d, %zu owners",
	      (unsigned long long)pk.version, pk.dirty, pk.n_owners);
out:
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

int main(void)
{
	test_owned();
	test_partner_owned();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
