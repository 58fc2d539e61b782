/* The memory manager's allocate method (seed 002 Fig. 5, node/vmm/allocate.c)
 * on node a, over the fake partner session: with space in a's partition of
 * the store the allocation goes to the partner ([SpaceRequest,
 * AllocateMemory] in one batch) and is answered only once b acknowledged it
 * and a committed it; when the partition is short it waits, or with
 * `immediate` is refused at once, and a release makes room for the waiting
 * one. */
#include "check.h"
#include "store.h"
#include "vmm.h"
#include "vmm_harness.h"

#define MSG(x) FTVM__PARTNER__ENVELOPE__MESSAGE_##x
#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x

static uint64_t extent(uint64_t pages)
{
	return store_extent_size(HARNESS_PAGE, pages, HARNESS_PAGE);
}

static void test_space_here(void)
{
	struct harness h;
	struct fake_call *call;
	struct fake_request *space, *am;
	struct pt_row row;
	char owner[16], guid[64], second[64];
	uint64_t offset;

	harness_start(&h, "vmm-alloc", "64K", "1M", "");
	call = harness_alloc_call(&h, 2 * HARNESS_PAGE, NULL, false);
	space = fake_session_request(h.s, 0);
	am = fake_session_request(h.s, 1);
	CHECK_INT("requests sent", 2, fake_session_requests(h.s));
	CHECK(space && am && space->batch == am->batch, "one batch");
	CHECK_INT("first", MSG(SPACE_REQUEST), space->env->message_case);
	CHECK_INT("SpaceRequest.bytes", 2 * HARNESS_PAGE, space->env->space_request->bytes);
	CHECK_INT("second", MSG(ALLOCATE_MEMORY), am->env->message_case);
	CHECK_STR("home", "a", am->env->allocate_memory->home);
	CHECK_INT("size", 2 * HARNESS_PAGE, am->env->allocate_memory->size);
	CHECK_INT("block_size", HARNESS_PAGE, am->env->allocate_memory->block_size);
	offset = am->env->allocate_memory->store_offset;
	CHECK(offset >= STORE_HEADER_SPACE &&
		      offset + extent(2) <= STORE_HEADER_SPACE + h.partition,
	      "extent at %llu in a's partition", (unsigned long long)offset);
	snprintf(guid, sizeof(guid), "%s", am->env->allocate_memory->guid);

	/* Nothing is answered or committed before b acknowledged it. */
	harness_settle(&h);
	CHECK(!call->answered, "answered before the partner");
	CHECK(!harness_pt_alloc(&h, guid, NULL, 0), "%s committed before the partner", guid);

	fake_session_answer_status(h.s, space, STATUS(OK), NULL);
	fake_session_answer_status(h.s, am, STATUS(OK), NULL);
	CHECK(RUN_UNTIL(&h, call->answered), "no reply");
	CHECK_INT("status", STATUS(OK), harness_status(call));
	CHECK(call->reply->alloc, "no AllocReply");
	if (call->reply->alloc) {
		CHECK_STR("guid", guid, call->reply->alloc->guid);
		CHECK_INT("pages", 2, call->reply->alloc->pages);
		CHECK_INT("block_size", HARNESS_PAGE, call->reply->alloc->block_size);
	}
	/* Answered means committed here. */
	CHECK(!vmm_peek_uncommitted(h.v), "answered before its commit");
	CHECK(harness_pt_alloc(&h, guid, owner, sizeof(owner)), "%s not in the page table", guid);
	CHECK_STR("owner", "a", owner);
	for (uint64_t p = 0; p < 2; p++) {
		CHECK(harness_pt_page(&h, guid, p, &row), "no row for page %llu",
		      (unsigned long long)p);
		CHECK_INT("version", 0, row.version);
		CHECK(!row.dirty, "a new page is dirty");
	}

	/* The next one has another guid and an extent after this one's. */
	CHECK(harness_alloc(&h, HARNESS_PAGE, second, sizeof(second)) >= offset + extent(2),
	      "extents overlap");
	CHECK(strcmp(guid, second) != 0, "guid %s twice", guid);

	/* Refused by the partner: the client hears why, nothing is kept. */
	call = harness_alloc_call(&h, HARNESS_PAGE, NULL, false);
	am = fake_session_pending(h.s, MSG(ALLOCATE_MEMORY));
	snprintf(guid, sizeof(guid), "%s", am ? am->env->allocate_memory->guid : "?");
	fake_session_answer_status(h.s, fake_session_pending(h.s, MSG(SPACE_REQUEST)), STATUS(OK),
				   NULL);
	fake_session_answer_status(h.s, am, STATUS(BAD_REQUEST), "refused by the test");
	CHECK(RUN_UNTIL(&h, call->answered), "no reply");
	CHECK_INT("status", STATUS(BAD_REQUEST), harness_status(call));
	CHECK(strstr(call->reply->reason, "refused by the test"), "reason: %s",
	      call->reply->reason);
	harness_settle(&h);
	CHECK(!harness_pt_alloc(&h, guid, NULL, 0), "refused %s kept", guid);
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

static void test_space_short(void)
{
	struct harness h;
	struct fake_call *waiting, *immediate, *freed;
	struct fake_request *rm, *space, *am;
	uint64_t pages = 0, first;
	size_t sent;
	char full[64];

	harness_start(&h, "vmm-alloc", "64K", "1M", "");
	/* The largest allocation a's partition holds: nothing fits beside it. */
	while (extent(pages + 1) <= h.partition)
		pages++;
	first = harness_alloc(&h, pages * HARNESS_PAGE, full, sizeof(full));
	sent = fake_session_requests(h.s);

	waiting = harness_alloc_call(&h, HARNESS_PAGE, NULL, false);
	harness_settle(&h);
	CHECK(!waiting->answered, "answered with no room: status %d", harness_status(waiting));
	CHECK_INT("requests sent for it", sent, fake_session_requests(h.s));

	immediate = harness_alloc_call(&h, HARNESS_PAGE, NULL, true);
	CHECK(immediate->answered, "immediate, not answered at once");
	CHECK_INT("immediate: status", STATUS(DENIED), harness_status(immediate));
	CHECK_INT("requests sent for it", sent, fake_session_requests(h.s));

	/* The release makes room: the waiting allocation goes on, into the
	 * extent let go. */
	freed = harness_free_call(&h, full);
	rm = fake_session_pending(h.s, MSG(RELEASE_MEMORY));
	CHECK(rm, "no ReleaseMemory");
	if (rm) {
		CHECK_STR("ReleaseMemory.guid", full, rm->env->release_memory->guid);
		fake_session_answer_status(h.s, rm, STATUS(OK), NULL);
	}
	CHECK(RUN_UNTIL(&h, freed->answered), "free not answered");
	CHECK_INT("free: status", STATUS(OK), harness_status(freed));
	CHECK(!harness_pt_alloc(&h, full, NULL, 0), "%s still in the page table", full);
	space = fake_session_pending(h.s, MSG(SPACE_REQUEST));
	am = fake_session_pending(h.s, MSG(ALLOCATE_MEMORY));
	CHECK(space && am, "the waiting allocation did not go on");
	if (space && am) {
		CHECK_INT("its extent", first, am->env->allocate_memory->store_offset);
		fake_session_answer_status(h.s, space, STATUS(OK), NULL);
		fake_session_answer_status(h.s, am, STATUS(OK), NULL);
	}
	CHECK(RUN_UNTIL(&h, waiting->answered), "the waiting allocation not answered");
	CHECK_INT("waiting: status", STATUS(OK), harness_status(waiting));
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

/* The name the client gave goes with its allocation to the partner; a name
 * that is not one is refused with nothing sent. */
static void test_client_name(void)
{
	struct harness h;
	struct fake_call *call;
	struct fake_request *am;

	harness_start(&h, "vmm-alloc-name", "64K", "1M", "");
	call = harness_named_alloc_call(&h, HARNESS_PAGE, "db.main_2");
	am = fake_session_pending(h.s, MSG(ALLOCATE_MEMORY));
	CHECK(am && strcmp(am->env->allocate_memory->client, "db.main_2") == 0,
	      "AllocateMemory.client: %s", am ? am->env->allocate_memory->client : "(none sent)");
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, call->answered) && harness_status(call) == STATUS(OK), "named alloc");

	call = harness_named_alloc_call(&h, HARNESS_PAGE, "semi;colon");
	CHECK(RUN_UNTIL(&h, call->answered), "no reply to a bad name");
	CHECK_INT("a bad name", STATUS(BAD_REQUEST), harness_status(call));
	CHECK(call->reply && strstr(call->reply->reason, "client name 'semi;colon'"), "reason: %s",
	      call->reply ? call->reply->reason : "(none)");
	CHECK_INT("nothing sent for it", 0, fake_session_pending_count(h.s));
	call = harness_session_alloc_call(&h, HARNESS_PAGE, "0123456789abcdef0123456789ABCDEF");
	CHECK(RUN_UNTIL(&h, call->answered), "no reply to a bad session");
	CHECK_INT("a bad session id", STATUS(BAD_REQUEST), harness_status(call));
	CHECK(call->reply && strstr(call->reply->reason, "is not one (32 lowercase hex digits)"),
	      "reason: %s", call->reply ? call->reply->reason : "(none)");
	call = harness_session_alloc_call(&h, HARNESS_PAGE, "0123456789abcdef0123456789abcdef");
	am = fake_session_pending(h.s, MSG(ALLOCATE_MEMORY));
	CHECK(am && strcmp(am->env->allocate_memory->session, "0123456789abcdef0123456789abcdef") ==
			      0,
	      "AllocateMemory.session: %s", am ? am->env->allocate_memory->session : "(none sent)");
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, call->answered) && harness_status(call) == STATUS(OK), "session alloc");
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

int main(void)
{
	test_space_here();
	test_space_short();
	test_client_name();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
