/* A copy resting on flash (node/vmm/MEDIA.md; node/vmm/flash.c) on node a,
 * whose pool has 16 frames, over the fake partner session. b's allocation of
 * 32 pages, which b owns and never destages here, rests on a's flash:
 * - each page b writes is written to flash in a round, and only then may its
 *   frame go though it is dirty: 32 dirty pages live in 16 frames;
 * - a page whose frame went is read back from flash, whole, and stays dirty
 *   (the store does not have it) until b's Destaged;
 * - a's status counts the pages written to flash and the page-ins from it;
 *   its flash's room shrinks by the allocation's extent;
 * - a policy of performance high rests in DRAM: its pages take their frames
 *   at once, are never evicted, and one that would pass the pool is
 *   refused. */
#include "check.h"
#include "crc32c.h"
#include "status_counts.h"
#include "vmm.h"
#include "vmm_harness.h"
#include "vmm_msg.h"

#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x
#define PAGES 32

/* b writes its page as b does ([AllocateWrite, WritePage, ReleasePointer]
 * at version 1); a mirrors it, dirty. The status of the first that failed. */
static int partner_writes(struct harness *h, const char *guid, uint64_t page, uint8_t byte)
{
	static uint8_t block[HARNESS_PAGE];
	struct vmm_msg msg[3];
	Envelope *envs[3];
	const CommandComplete *cc;
	uint32_t crc;

	memset(block, byte, sizeof(block));
	crc = crc32c(0, block, sizeof(block));
	envs[0] = vmm_msg_allocate(&msg[0], guid, page, "b/7/1", true);
	envs[1] = vmm_msg_write_page(&msg[1], guid, page, block, HARNESS_PAGE, crc);
	envs[2] = vmm_msg_release_pointer(&msg[2], guid, page, "b/7/1", true, 1, crc);
	fake_session_deliver(h->s, h->v, envs, 3);
	harness_settle(h);
	for (int i = 0; i < 3; i++) {
		cc = fake_session_completion(h->s, envs[i]->seq);
		if (!cc || cc->status)
			return cc ? (int)cc->status : -1;
	}
	return 0;
}

static bool on_flash(struct harness *h, const char *guid, uint64_t page)
{
	struct peek_page pk;

	return vmm_peek_page(h->v, guid, page, &pk) && pk.on_flash;
}

static void counts(struct harness *h, struct status_counts *ret)
{
	vmm_get_counts(h->v, ret);
}

static void test_flash_copy(void)
{
	struct harness h;
	struct status_counts before, after;
	struct peek_page pk;
	struct fake_call *read;
	uint8_t want[HARNESS_PAGE];
	unsigned evicted_dirty = 0;

	harness_start(&h, "vmm-flash", "64K", "1M", "[flash]\npath = flash\nsize = 1M\n");
	counts(&h, &before);
	CHECK(before.flash_capacity > 0 && before.flash_free == before.flash_capacity,
	      "flash: %llu bytes, %llu free before any allocation",
	      (unsigned long long)before.flash_capacity, (unsigned long long)before.flash_free);
	harness_partner_alloc(&h, "b-1", PAGES, 0);
	CHECK(vmm_peek_page(h.v, "b-1", 0, &pk) && strcmp(pk.media, "flash") == 0,
	      "b-1 rests on '%s' here, wanted flash", pk.media);
	counts(&h, &after);
	CHECK(after.flash_free < before.flash_free, "flash free did not drop: %llu",
	      (unsigned long long)after.flash_free);

	for (uint64_t p = 0; p < PAGES; p++) {
		CHECK_INT("b writes a page", 0, partner_writes(&h, "b-1", p, (uint8_t)(0x40 + p)));
		CHECK(RUN_UNTIL(&h, on_flash(&h, "b-1", p)), "page %llu never reached flash",
		      (unsigned long long)p);
	}
	for (uint64_t p = 0; p < PAGES; p++) {
		CHECK(vmm_peek_page(h.v, "b-1", p, &pk) && pk.dirty && pk.on_flash,
		      "page %llu: dirty %d, on flash %d", (unsigned long long)p, pk.dirty,
		      pk.on_flash);
		evicted_dirty += !pk.resident;
	}
	CHECK(evicted_dirty >= PAGES - 16, "only %u dirty pages gave their frames back",
	      evicted_dirty);

	/* Page 0 went first: read it back from flash. */
	CHECK(vmm_peek_page(h.v, "b-1", 0, &pk) && !pk.resident, "page 0 still resident");
	read = harness_read_call(&h, "b-1", 0, true);
	CHECK(RUN_UNTIL(&h, read->answered) && harness_status(read) == STATUS(OK),
	      "reading page 0: status %d", harness_status(read));
	memset(want, 0x40, sizeof(want));
	CHECK(read->reply && read->reply->read_page &&
		      read->reply->read_page->data.len == sizeof(want) &&
		      memcmp(read->reply->read_page->data.data, want, sizeof(want)) == 0,
	      "page 0 read back is not what b wrote");
	CHECK(vmm_peek_page(h.v, "b-1", 0, &pk) && pk.resident && pk.dirty,
	      "page 0 paged in from flash: resident %d, dirty %d (the store does not have it)",
	      pk.resident, pk.dirty);
	counts(&h, &after);
	CHECK(after.flash_writes >= PAGES, "%llu pages written to flash, wanted %d",
	      (unsigned long long)after.flash_writes, PAGES);
	CHECK(after.flash_page_ins >= 1, "no page-in from flash counted");
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

static void test_dram_copy(void)
{
	struct harness h;
	struct fake_call *call;
	struct peek_page pk;
	char A[64];

	harness_start(&h, "vmm-dram", "64K", "1M",
		      "[policy fast]\nblock_size = 4K\nperformance = high\n");
	call = harness_alloc_call(&h, 8 * HARNESS_PAGE, "fast", true);
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, call->answered) && harness_status(call) == STATUS(OK),
	      "a high allocation of 8 pages: status %d", harness_status(call));
	snprintf(A, sizeof(A), "%s",
		 call->reply && call->reply->alloc ? call->reply->alloc->guid : "");
	for (uint64_t p = 0; p < 8; p++)
		CHECK(vmm_peek_page(h.v, A, p, &pk) && pk.resident && strcmp(pk.media, "dram") == 0,
		      "page %llu of %s: resident %d, media %s", (unsigned long long)p, A,
		      pk.resident, pk.media);
	/* 8 of 16 frames are promised: 9 more are not there. */
	call = harness_alloc_call(&h, 9 * HARNESS_PAGE, "fast", true);
	CHECK(RUN_UNTIL(&h, call->answered) && harness_status(call) == STATUS(DENIED),
	      "a high allocation past the pool: status %d", harness_status(call));
	CHECK(call->reply && strstr(call->reply->reason, "a's DRAM has 8 of its 16 frames"),
	      "the refusal: %s", call->reply ? call->reply->reason : "(none)");
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

int main(void)
{
	test_flash_copy();
	test_dram_copy();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
