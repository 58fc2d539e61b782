/* Flush (node/vmm/flush.c; vmm/VMM.md, "Flush") on node a over the fake
 * partner session. a owns A; b owns b-1.
 * - nothing changed: answered at once;
 * - a's own pages written: answered once the destage round has them in the
 *   store (its records say their versions), not before, and a page written
 *   after the flush is not waited for;
 * - a range: only its pages are waited for;
 * - b's page, written by b (dirty here): answered by b's Destaged, not
 *   before; a Destaged of an older version does not;
 * - none in time: TIMEOUT, naming the page; A freed meanwhile: NOT_FOUND. */
#include <string.h>

#include "check.h"
#include "crc32c.h"
#include "vmm.h"
#include "vmm_core.h"
#include "vmm_harness.h"

#define MSG(x) FTVM__PARTNER__ENVELOPE__MESSAGE_##x
#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x

static struct harness h;
static char A[64];
static uint64_t extent;

static void write_page(const char *guid, uint64_t page, uint8_t byte)
{
	static uint8_t block[HARNESS_PAGE];
	struct fake_call *w;

	memset(block, byte, sizeof(block));
	w = harness_write_call(&h, guid, page, block, sizeof(block), false);
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, w->answered) && harness_status(w) == STATUS(OK), "write %s page %llu",
	      guid, (unsigned long long)page);
}

static uint64_t store_version(uint64_t page)
{
	uint64_t version;
	uint32_t crc;

	harness_store_record(&h, extent, page, &version, &crc);
	return version;
}

/* b's Destaged of b-1 page 0 at version, with the crc32c of byte. */
static void b_destaged(uint64_t version, uint8_t byte)
{
	static uint8_t block[HARNESS_PAGE];
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__Destaged m = FTVM__PARTNER__DESTAGED__INIT;

	memset(block, byte, sizeof(block));
	m.guid = "b-1";
	m.page = 0;
	m.version = version;
	m.crc32c = crc32c(0, block, sizeof(block));
	env.message_case = MSG(DESTAGED);
	env.destaged = &m;
	harness_answer(&h, harness_deliver(&h, &env));
}

static bool answered_ok(struct fake_call *call)
{
	return RUN_UNTIL(&h, call->answered) && harness_status(call) == STATUS(OK);
}

static void test_own_pages(void)
{
	struct fake_call *f;

	f = harness_flush_call(&h, A, 0, 0);
	CHECK(f->answered && harness_status(f) == STATUS(OK), "nothing changed: answered at once");

	write_page(A, 0, 0x11);
	write_page(A, 1, 0x12);
	f = harness_flush_call(&h, A, 0, 0);
	CHECK(!f->answered, "answered with pages 0 and 1 not in the store");
	write_page(A, 2, 0x13); /* after the flush: not waited for */
	CHECK(answered_ok(f), "flush of A");
	CHECK_INT("page 0 in the store at", 1, store_version(0));
	CHECK_INT("page 1 in the store at", 1, store_version(1));
	fake_session_answer_all(h.s); /* the Destaged */

	write_page(A, 3, 0x14);
	f = harness_flush_call(&h, A, 0, 3);
	CHECK(f->answered && harness_status(f) == STATUS(OK),
	      "pages 0 to 2 are in the store: answered at once, page 3 not waited for");
	CHECK(RUN_UNTIL(&h, store_version(3) == 1), "page 3 never destaged");
	fake_session_answer_all(h.s);
}

static void test_partner_pages(void)
{
	struct fake_call *f;

	CHECK_INT("b writes b-1", 0, harness_partner_writes(&h, "b-1", 0, 0xb1, 1));
	CHECK_INT("b writes b-1 again", 0, harness_partner_writes(&h, "b-1", 0, 0xb2, 2));
	f = harness_flush_call(&h, "b-1", 0, 0);
	harness_settle(&h);
	CHECK(!f->answered, "answered before b destaged b-1");
	b_destaged(1, 0xb1);
	harness_settle(&h);
	CHECK(!f->answered, "answered by the Destaged of an older version");
	b_destaged(2, 0xb2);
	CHECK(answered_ok(f), "b's Destaged of version 2 did not answer the flush");
}

static void test_timeout_and_free(void)
{
	struct fake_call *f, *fr;

	CHECK_INT("b writes b-1", 0, harness_partner_writes(&h, "b-1", 0, 0xb3, 3));
	f = harness_flush_call(&h, "b-1", 0, 0);
	CHECK(RUN_UNTIL(&h, f->answered), "no answer in time");
	CHECK_INT("no Destaged: the flush", STATUS(TIMEOUT), harness_status(f));
	CHECK(f->reply && strstr(f->reply->reason, "page 0 (version 3)"), "reason: %s",
	      f->reply ? f->reply->reason : "(none)");

	write_page(A, 0, 0x21);
	f = harness_flush_call(&h, A, 0, 0);
	fr = harness_free_call(&h, A);
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, fr->answered) && harness_status(fr) == STATUS(OK), "free A");
	CHECK(RUN_UNTIL(&h, f->answered), "the flush of a freed allocation");
	CHECK(harness_status(f) == STATUS(NOT_FOUND) || harness_status(f) == STATUS(OK),
	      "the flush of a freed allocation: %d", harness_status(f));
}

int main(void)
{
	harness_start(&h, "vmm-flush", "64K", "1M", "[failover]\nrequest_timeout_ms = 300\n");
	extent = harness_alloc(&h, 4 * HARNESS_PAGE, A, sizeof(A));
	harness_partner_alloc(&h, "b-1", 1, 0);
	test_own_pages();
	test_partner_pages();
	test_timeout_and_free();
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
