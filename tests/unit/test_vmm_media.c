/* Where copies rest (node/vmm/MEDIA.md; node/vmm/media.c, flash.c) on node
 * a, whose pool has 16 frames, over the fake partner session.
 *
 * Flash: b's allocation of 32 pages, which b owns and never destages here,
 * rests on a's flash:
 * - each page b writes is written to flash in a round, and only then may its
 *   frame go though it is dirty: 32 dirty pages live in 16 frames;
 * - a page whose frame went is read back from flash, whole, and stays dirty
 *   (the store does not have it) until b's Destaged;
 * - a's status counts the pages written to flash and the page-ins from it;
 *   its flash's room shrinks by the allocation's extent;
 * - a policy of performance high rests in DRAM: its pages take their frames
 *   at once, are never evicted, and one that would pass the pool is
 *   refused.
 *
 * Space between the nodes (Fig. 5 step 520):
 * - b's SpaceRequest is answered with the room a's copy would take, where
 *   a's policy puts it, or NO_SPACE naming a's media; taking nothing;
 * - a's own SpaceRequest carries its policy and shape; b's NO_SPACE denies
 *   an immediate allocation, and makes another wait until an allocation is
 *   freed, then go. */
#include "check.h"
#include "status_counts.h"
#include "vmm.h"
#include "vmm_harness.h"

#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x
#define PAGES 32

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
		CHECK_INT("b writes a page", 0,
			  harness_partner_writes(&h, "b-1", p, (uint8_t)(0x40 + p), 1));
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

/* b asks a for room: the answer's status; its SpaceStatus in ret. */
static int space_request(struct harness *h, const char *policy, uint64_t pages,
			 Ftvm__Partner__SpaceStatus *ret, char *reason, size_t len)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SpaceRequest m = FTVM__PARTNER__SPACE_REQUEST__INIT;
	const CommandComplete *cc;

	m.bytes = pages * HARNESS_PAGE;
	m.policy = (char *)policy;
	m.pages = pages;
	m.block_size = policy[0] ? HARNESS_PAGE : 0;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &m;
	cc = harness_answer(h, harness_deliver(h, &env));
	if (!cc)
		return -1;
	snprintf(reason, len, "%s", cc->reason ? cc->reason : "");
	if (cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE) {
		*ret = *cc->space;
		snprintf(reason, len, "%s", cc->space->media);
	}
	return (int)cc->status;
}

static void test_space_answered(void)
{
	struct harness h;
	Ftvm__Partner__SpaceStatus st = FTVM__PARTNER__SPACE_STATUS__INIT;
	char said[300];

	harness_start(&h, "vmm-space-answer", "64K", "1M",
		      "[policy fast]\nblock_size = 4K\nperformance = high\n");
	CHECK_INT("20 pages of high in 16 frames", STATUS(NO_SPACE),
		  space_request(&h, "fast", 20, &st, said, sizeof(said)));
	CHECK(strstr(said, "a's DRAM has 16 of its 16 frames not promised to other dram "
			   "allocations; it needs 20; policy 'fast' asks for high"),
	      "the refusal: %s", said);
	CHECK_INT("4 pages of high", STATUS(OK),
		  space_request(&h, "fast", 4, &st, said, sizeof(said)));
	CHECK(strcmp(said, "dram") == 0 && st.free_bytes == 16 * HARNESS_PAGE &&
		      st.total_bytes == 16 * HARNESS_PAGE,
	      "4 pages of high: media %s, %llu of %llu bytes free", said,
	      (unsigned long long)st.free_bytes, (unsigned long long)st.total_bytes);
	CHECK_INT("2 pages of default (capacity, no flash)", STATUS(OK),
		  space_request(&h, "default", 2, &st, said, sizeof(said)));
	CHECK(strcmp(said, "store") == 0 && st.total_bytes == h.partition,
	      "default: media %s, %llu bytes", said, (unsigned long long)st.total_bytes);
	CHECK_INT("an older node's request (no policy)", STATUS(OK),
		  space_request(&h, "", 0, &st, said, sizeof(said)));
	CHECK(said[0] == '\0' && st.total_bytes == h.partition, "no policy: media '%s'", said);
	CHECK_INT("a shape that cannot be", STATUS(BAD_REQUEST),
		  space_request(&h, "fast", 0, &st, said, sizeof(said)));
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

/* The allocation's SpaceRequest, which a sent b: its policy and shape. */
static bool space_asked(struct harness *h, const char *policy, uint64_t pages)
{
	struct fake_request *r =
		fake_session_pending(h->s, FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST);

	return r && strcmp(r->env->space_request->policy, policy) == 0 &&
	       r->env->space_request->pages == pages &&
	       r->env->space_request->block_size == HARNESS_PAGE;
}

/* b refuses both of the allocation's requests, as a b without room does. */
static void refuse_room(struct harness *h)
{
	struct fake_request *r;

	while ((r = fake_session_pending(h->s, FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST)))
		fake_session_answer_status(h->s, r, STATUS(NO_SPACE), "no room on b");
	while ((r = fake_session_pending(h->s, FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY)))
		fake_session_answer_status(h->s, r, STATUS(NO_SPACE), "no room on b");
}

static void test_partner_short(void)
{
	struct harness h;
	struct fake_call *denied, *waiting, *freed;
	char other[64];

	harness_start(&h, "vmm-partner-short", "64K", "1M", "");
	harness_alloc(&h, HARNESS_PAGE, other, sizeof(other));

	denied = harness_alloc_call(&h, 2 * HARNESS_PAGE, NULL, true);
	CHECK(space_asked(&h, "default", 2), "the SpaceRequest names no policy and shape");
	refuse_room(&h);
	CHECK(RUN_UNTIL(&h, denied->answered) && harness_status(denied) == STATUS(DENIED),
	      "immediate, refused by b: status %d", harness_status(denied));
	CHECK(denied->reply && strstr(denied->reply->reason, "partner: no room on b; immediate"),
	      "the denial: %s", denied->reply ? denied->reply->reason : "(none)");

	waiting = harness_alloc_call(&h, 2 * HARNESS_PAGE, NULL, false);
	refuse_room(&h);
	harness_settle(&h);
	CHECK(!waiting->answered && fake_session_pending_count(h.s) == 0,
	      "refused by b, it did not wait: answered %d", waiting->answered);
	freed = harness_free_call(&h, other);
	CHECK(RUN_UNTIL(&h,
			fake_session_pending(h.s, FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_MEMORY)),
	      "no ReleaseMemory");
	fake_session_answer_status(
		h.s, fake_session_pending(h.s, FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_MEMORY),
		STATUS(OK), "");
	CHECK(RUN_UNTIL(&h, freed->answered && space_asked(&h, "default", 2)),
	      "the waiting allocation did not ask again once one was freed: free answered %d, "
	      "%zu requests pending",
	      freed->answered, fake_session_pending_count(h.s));
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, waiting->answered) && harness_status(waiting) == STATUS(OK),
	      "the waiting allocation: status %d", harness_status(waiting));
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

int main(void)
{
	test_flash_copy();
	test_dram_copy();
	test_space_answered();
	test_partner_short();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
