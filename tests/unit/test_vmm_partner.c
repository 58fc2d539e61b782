/* The partner's message response method (seed 002 Fig. 10,
 * node/vmm/partner_response.c) on node a: each of the ten messages from b,
 * once as it should come and once as it should not, with the answer's status
 * and payload and what changed in a's tables (in memory and committed).
 * Where a message has no input to refuse (SpaceRequest, SenseRequest), the
 * wrong case is a batch whose earlier request failed: the rest of a batch is
 * answered ABORTED and not applied (vmm/VMM.md, "Batches").
 *
 * a owns A (two pages, made by a's client); b owns b-1 (two pages, made by
 * b's AllocateMemory). */
#include "check.h"
#include "crc32c.h"
#include "store.h"
#include "vmm.h"
#include "vmm_harness.h"
#include "vmm_msg.h"

#define MSG(x) FTVM__PARTNER__ENVELOPE__MESSAGE_##x
#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x
#define MODE(x) FTVM__PARTNER__LOCK_MODE__LOCK_MODE_##x
#define PAYLOAD(x) FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_##x

static struct harness h;
static char A[64];
static uint64_t a_extent;

static const CommandComplete *ask(Envelope *env)
{
	return harness_answer(&h, harness_deliver(&h, env));
}

/* The answer's status, or -1 when none came. */
static int status_of(const CommandComplete *cc)
{
	return cc ? (int)cc->status : -1;
}

static Envelope *allocate_memory(Envelope *env, Ftvm__Partner__AllocateMemory *m, const char *guid,
				 uint64_t store_offset)
{
	ftvm__partner__envelope__init(env);
	ftvm__partner__allocate_memory__init(m);
	m->guid = (char *)guid;
	m->size = 2 * HARNESS_PAGE;
	m->block_size = HARNESS_PAGE;
	m->policy = "default";
	m->home = "b";
	m->store_offset = store_offset;
	m->uid = 1000;
	m->client = "app.1";
	m->header.data = (uint8_t *)"hdr";
	m->header.len = 3;
	env->message_case = MSG(ALLOCATE_MEMORY);
	env->allocate_memory = m;
	return env;
}

/* ReadHeader or ReleaseMemory: each message is a guid alone. */
struct of_guid {
	Envelope env;
	Ftvm__Partner__ReadHeader rh;
	Ftvm__Partner__ReleaseMemory rm;
};

static Envelope *of_guid(struct of_guid *g, int message_case, const char *guid)
{
	ftvm__partner__envelope__init(&g->env);
	ftvm__partner__read_header__init(&g->rh);
	ftvm__partner__release_memory__init(&g->rm);
	g->rh.guid = g->rm.guid = (char *)guid;
	g->env.message_case = message_case;
	if (message_case == MSG(READ_HEADER))
		g->env.read_header = &g->rh;
	else
		g->env.release_memory = &g->rm;
	return &g->env;
}

static void test_allocate_memory(void)
{
	Envelope env;
	Ftvm__Partner__AllocateMemory m;
	struct peek_page pk;
	struct pt_row row;
	char owner[16];
	uint64_t b_start = STORE_HEADER_SPACE + h.partition, seq;
	const CommandComplete *cc;

	/* The answer is held until the allocation is committed. */
	seq = harness_deliver(&h, allocate_memory(&env, &m, "b-1", b_start));
	CHECK(!fake_session_completion(h.s, seq), "answered before the commit");
	cc = harness_answer(&h, seq);
	CHECK_INT("AllocateMemory", STATUS(OK), status_of(cc));
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk), "b-1 not in the table");
	CHECK(harness_pt_alloc(&h, "b-1", owner, sizeof(owner)), "b-1 not committed");
	CHECK_STR("owner", "b", owner);
	CHECK(harness_pt_page(&h, "b-1", 1, &row) && row.version == 0, "page 1's row");

	CHECK_INT("AllocateMemory again", STATUS(BAD_REQUEST),
		  status_of(ask(allocate_memory(&env, &m, "b-1", b_start))));
	/* An extent from the wire must lie in its home's partition. */
	CHECK_INT("AllocateMemory in a's partition", STATUS(BAD_REQUEST),
		  status_of(ask(allocate_memory(&env, &m, "b-2", STORE_HEADER_SPACE))));
	CHECK(!vmm_peek_page(h.v, "b-2", 0, &pk), "b-2 made");
	CHECK(!harness_pt_alloc(&h, "b-2", NULL, 0), "b-2 committed");
	/* So must its client's name be one. */
	allocate_memory(&env, &m, "b-3", b_start + 65536);
	m.client = "two words";
	cc = ask(&env);
	CHECK_INT("AllocateMemory with a bad client name", STATUS(BAD_REQUEST), status_of(cc));
	CHECK(cc && cc->reason && strstr(cc->reason, "client name 'two words' is not one"),
	      "reason: %s", cc && cc->reason ? cc->reason : "(none)");
	CHECK(!vmm_peek_page(h.v, "b-3", 0, &pk), "b-3 made");
}

static void test_space_and_sense(void)
{
	struct of_guid g;
	Envelope env[2], *envs[] = { &g.env, &env[0], &env[1] };
	Ftvm__Partner__SpaceRequest sr = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Ftvm__Partner__SenseRequest sense = FTVM__PARTNER__SENSE_REQUEST__INIT;
	const CommandComplete *cc;
	size_t found = 0;

	ftvm__partner__envelope__init(&env[0]);
	env[0].message_case = MSG(SPACE_REQUEST);
	env[0].space_request = &sr;
	cc = ask(&env[0]);
	CHECK_INT("SpaceRequest", STATUS(OK), status_of(cc));
	CHECK(cc && cc->payload_case == PAYLOAD(SPACE), "no SpaceStatus");
	if (cc && cc->space) {
		CHECK_INT("total", h.partition, cc->space->total_bytes);
		CHECK_INT("free", h.partition - store_extent_size(HARNESS_PAGE, 2, HARNESS_PAGE),
			  cc->space->free_bytes);
	}

	sense.page_table = true;
	ftvm__partner__envelope__init(&env[1]);
	env[1].message_case = MSG(SENSE_REQUEST);
	env[1].sense_request = &sense;
	cc = ask(&env[1]);
	CHECK_INT("SenseRequest", STATUS(OK), status_of(cc));
	CHECK(cc && cc->payload_case == PAYLOAD(SENSE), "no SenseInformation");
	for (size_t i = 0; cc && cc->sense && i < cc->sense->n_allocations; i++)
		found += strcmp(cc->sense->allocations[i]->header->guid, A) == 0 ||
			 strcmp(cc->sense->allocations[i]->header->guid, "b-1") == 0;
	CHECK_INT("allocations in the digest", 2, found);

	/* After a request that fails, the rest of its batch is not applied. */
	of_guid(&g, MSG(READ_HEADER), "no-such");
	fake_session_deliver(h.s, h.v, envs, 3);
	harness_settle(&h);
	CHECK_INT("ReadHeader of no-such", STATUS(NOT_FOUND),
		  status_of(fake_session_completion(h.s, g.env.seq)));
	cc = fake_session_completion(h.s, env[0].seq);
	CHECK_INT("SpaceRequest behind it", STATUS(ABORTED), status_of(cc));
	CHECK(cc && cc->payload_case != PAYLOAD(SPACE), "an aborted SpaceRequest answered");
	cc = fake_session_completion(h.s, env[1].seq);
	CHECK_INT("SenseRequest behind it", STATUS(ABORTED), status_of(cc));
	CHECK(cc && cc->payload_case != PAYLOAD(SENSE), "an aborted SenseRequest answered");
}

static void test_read_header(void)
{
	struct of_guid g;
	const CommandComplete *cc = ask(of_guid(&g, MSG(READ_HEADER), "b-1"));

	CHECK_INT("ReadHeader", STATUS(OK), status_of(cc));
	CHECK(cc && cc->payload_case == PAYLOAD(HEADER), "no Header");
	if (cc && cc->header) {
		CHECK_STR("guid", "b-1", cc->header->guid);
		CHECK_INT("pages", 2, cc->header->pages);
		CHECK_STR("home", "b", cc->header->home);
		CHECK_INT("uid", 1000, cc->header->uid);
		CHECK_STR("client", "app.1", cc->header->client);
		CHECK(cc->header->header.len == 3 && memcmp(cc->header->header.data, "hdr", 3) == 0,
		      "the header blob");
	}
	CHECK_INT("ReadHeader of no-such", STATUS(NOT_FOUND),
		  status_of(ask(of_guid(&g, MSG(READ_HEADER), "no-such"))));
}

/* LockRequest, AllocateRead and AllocateWrite; a's client holds the write
 * lock on A's page 0 (a arbitrates A's locks). */
static void test_locks(void)
{
	struct vmm_msg msg;
	struct peek_page pk;
	const CommandComplete *cc;
	char writer[128];

	cc = ask(vmm_msg_lock_request(&msg, A, 0, true, 0, 0));
	CHECK_INT("LockRequest, A page 0 free", STATUS(OK), status_of(cc));
	CHECK(cc && cc->payload_case == PAYLOAD(LOCK) && cc->lock->mode == MODE(NONE),
	      "its LockStatus");
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.n_owners == 0, "a LockRequest took the lock");
	CHECK_INT("LockRequest past A's pages", STATUS(BAD_REQUEST),
		  status_of(ask(vmm_msg_lock_request(&msg, A, 2, true, 0, 0))));

	harness_pointer(&h, NULL, A, 0, true);
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.owner0, "no writer");
	snprintf(writer, sizeof(writer), "%s", pk.owner0 ? pk.owner0 : "?");
	cc = ask(vmm_msg_lock_request(&msg, A, 0, false, 0, 0));
	CHECK_INT("LockRequest, A page 0 written here", STATUS(LOCKED), status_of(cc));
	CHECK(cc && cc->payload_case == PAYLOAD(LOCK) && cc->lock->mode == MODE(WRITE) &&
		      cc->lock->n_owners == 1 && strcmp(cc->lock->owners[0], writer) == 0,
	      "its LockStatus names %s", writer);
	CHECK_INT("AllocateRead, A page 0 written here", STATUS(LOCKED),
		  status_of(ask(vmm_msg_allocate(&msg, A, 0, "b/7/9", false, false))));
	CHECK_INT("AllocateWrite, A page 0 written here", STATUS(LOCKED),
		  status_of(ask(vmm_msg_allocate(&msg, A, 0, "b/7/9", true, false))));
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.n_owners == 1, "a refused lock taken");

	/* b's own pages: b granted them, a mirrors. */
	CHECK_INT("AllocateRead", STATUS(OK),
		  status_of(ask(vmm_msg_allocate(&msg, "b-1", 0, "b/7/1", false, false))));
	CHECK(vmm_peek_page(h.v, "b-1", 0, &pk) && pk.lock_mode == MODE(READ) && pk.owner0 &&
		      strcmp(pk.owner0, "b/7/1") == 0,
	      "b-1 page 0 not read-locked by b/7/1");
	CHECK_INT("AllocateRead without an owner", STATUS(BAD_REQUEST),
		  status_of(ask(vmm_msg_allocate(&msg, "b-1", 0, "", false, false))));
	CHECK_INT("AllocateWrite", STATUS(OK),
		  status_of(ask(vmm_msg_allocate(&msg, "b-1", 1, "b/7/2", true, false))));
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && pk.lock_mode == MODE(WRITE) && pk.owner0 &&
		      strcmp(pk.owner0, "b/7/2") == 0,
	      "b-1 page 1 not write-locked by b/7/2");
	CHECK_INT("AllocateWrite of no-such", STATUS(NOT_FOUND),
		  status_of(ask(vmm_msg_allocate(&msg, "no-such", 0, "b/7/3", true, false))));
}

/* WritePage and ReleasePointer, under the locks test_locks left: b/7/1
 * reads b-1's page 0, b/7/2 writes its page 1. */
static void test_write_and_release(void)
{
	static uint8_t block[HARNESS_PAGE];
	uint32_t crc;
	struct vmm_msg msg;
	struct peek_page pk;
	struct pt_row row;
	const CommandComplete *cc;

	memset(block, 0x5a, sizeof(block));
	crc = crc32c(0, block, sizeof(block));
	CHECK_INT("WritePage under a read lock", STATUS(BAD_REQUEST),
		  status_of(ask(vmm_msg_write_page(&msg, "b-1", 0, block, HARNESS_PAGE, crc))));
	CHECK_INT("WritePage with a wrong CRC", STATUS(BAD_REQUEST),
		  status_of(ask(vmm_msg_write_page(&msg, "b-1", 1, block, HARNESS_PAGE, crc + 1))));
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && !pk.resident, "a refused block taken");
	CHECK_INT("WritePage", STATUS(OK),
		  status_of(ask(vmm_msg_write_page(&msg, "b-1", 1, block, HARNESS_PAGE, crc))));
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && pk.resident, "b-1 page 1 not resident");
	CHECK(pk.resident && memcmp((uint8_t *)vmm_pool_base(h.v) + pk.frame * HARNESS_PAGE, block,
				    HARNESS_PAGE) == 0,
	      "the block is not in the page's frame");

	CHECK_INT("ReleasePointer of a lock not held", STATUS(BAD_REQUEST),
		  status_of(ask(vmm_msg_release_pointer(&msg, "b-1", 1, "b/7/8", false, 0, 0))));
	cc = ask(vmm_msg_release_pointer(&msg, "b-1", 1, "b/7/2", true, 1, crc));
	CHECK_INT("ReleasePointer, modified", STATUS(OK), status_of(cc));
	CHECK(cc && cc->payload_case == PAYLOAD(LOCK) && cc->lock->version == 1,
	      "its LockStatus at version 1");
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && pk.n_owners == 0 && pk.version == 1 &&
		      pk.dirty && pk.crc32c == crc,
	      "b-1 page 1: %zu owners, version %llu, dirty %d", pk.n_owners,
	      (unsigned long long)pk.version, pk.dirty);
	CHECK(harness_pt_page(&h, "b-1", 1, &row) && row.version == 1 && row.dirty &&
		      row.crc32c == crc,
	      "b-1 page 1's committed row: version %llu, dirty %d", (unsigned long long)row.version,
	      row.dirty);

	CHECK_INT("ReleasePointer of a read lock", STATUS(OK),
		  status_of(ask(vmm_msg_release_pointer(&msg, "b-1", 0, "b/7/1", false, 0, 0))));
	CHECK(vmm_peek_page(h.v, "b-1", 0, &pk) && pk.n_owners == 0, "b-1 page 0 still locked");
	CHECK_INT("AllocateRead", STATUS(OK),
		  status_of(ask(vmm_msg_allocate(&msg, "b-1", 1, "b/7/4", false, false))));
	CHECK_INT("ReleasePointer of a read lock as modified", STATUS(BAD_REQUEST),
		  status_of(ask(vmm_msg_release_pointer(&msg, "b-1", 1, "b/7/4", true, 2, crc))));
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && pk.version == 1, "a reader made version %llu",
	      (unsigned long long)pk.version);
	CHECK(pk.n_owners == 1 && strcmp(pk.owner0, "b/7/4") == 0,
	      "the refused release let go of b/7/4's read lock (%zu owners)", pk.n_owners);
	CHECK_INT("ReleasePointer of that read lock", STATUS(OK),
		  status_of(ask(vmm_msg_release_pointer(&msg, "b-1", 1, "b/7/4", false, 0, 0))));
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && pk.n_owners == 0, "b-1 page 1 still locked");

	/* A whole-page write, [AllocateWrite, WritePage, ReleasePointer] in one
	 * batch: the release records the CRC of the block the WritePage put
	 * in the frames (taken from it, not read again). */
	CHECK_INT("a whole-page write of b-1 page 1", 0,
		  harness_partner_writes(&h, "b-1", 1, 0xa7, 2));
	memset(block, 0xa7, sizeof(block));
	crc = crc32c(0, block, sizeof(block));
	CHECK(vmm_peek_page(h.v, "b-1", 1, &pk) && pk.version == 2 && pk.crc32c == crc,
	      "b-1 page 1 after the batch: version %llu, crc 0x%x, not 2, 0x%x",
	      (unsigned long long)pk.version, pk.crc32c, crc);
	CHECK(harness_pt_page(&h, "b-1", 1, &row) && row.version == 2 && row.crc32c == crc,
	      "b-1 page 1's committed row: version %llu, crc 0x%x", (unsigned long long)row.version,
	      row.crc32c);
}

/* The answers of a turn go down together after its commit, and hold what
 * they said when they were made: here the ReadHeader's answer outlives the
 * allocation it read, released by the next request of the same turn. */
static void test_answers_outlive_what_they_read(void)
{
	struct of_guid read, release;
	Envelope *first[] = { of_guid(&read, MSG(READ_HEADER), "b-1") };
	Envelope *second[] = { of_guid(&release, MSG(RELEASE_MEMORY), "b-1") };
	unsigned calls = fake_session_answer_calls(h.s);
	const CommandComplete *cc;

	fake_session_deliver(h.s, h.v, first, 1);
	fake_session_deliver(h.s, h.v, second, 1);
	CHECK(!fake_session_completion(h.s, read.env.seq), "answered before the commit");
	harness_settle(&h);
	CHECK_INT("calls down with the turn's answers", calls + 1, fake_session_answer_calls(h.s));
	CHECK_INT("ReleaseMemory", STATUS(OK),
		  status_of(fake_session_completion(h.s, release.env.seq)));
	cc = fake_session_completion(h.s, read.env.seq);
	CHECK_INT("ReadHeader", STATUS(OK), status_of(cc));
	CHECK(cc && cc->payload_case == PAYLOAD(HEADER), "no Header");
	if (cc && cc->header) {
		CHECK_STR("guid", "b-1", cc->header->guid);
		CHECK_STR("home", "b", cc->header->home);
		CHECK(cc->header->header.len == 3 && memcmp(cc->header->header.data, "hdr", 3) == 0,
		      "the header blob");
	}
}

static void test_release_memory(void)
{
	struct of_guid g;
	struct peek_page pk;

	CHECK_INT("ReleaseMemory of no-such", STATUS(NOT_FOUND),
		  status_of(ask(of_guid(&g, MSG(RELEASE_MEMORY), "no-such"))));
	/* A's page 0 is write-locked by a's client (test_locks). */
	CHECK_INT("ReleaseMemory of A, locked here", STATUS(LOCKED),
		  status_of(ask(of_guid(&g, MSG(RELEASE_MEMORY), A))));
	CHECK(harness_pt_alloc(&h, A, NULL, 0), "A went");
	test_answers_outlive_what_they_read();
	CHECK(!vmm_peek_page(h.v, "b-1", 0, &pk), "b-1 still in the table");
	CHECK(!harness_pt_alloc(&h, "b-1", NULL, 0), "b-1 still committed");
}

/* SessionQuery: whether a connection here is bound to the session. */
static void test_session_query(void)
{
	static const char id[] = "00112233445566778899aabbccddeeff";
	Ftvm__Partner__SessionQuery m = FTVM__PARTNER__SESSION_QUERY__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	struct fake_call *call;

	m.session = (char *)id;
	env.message_case = MSG(SESSION_QUERY);
	env.session_query = &m;
	CHECK_INT("SessionQuery, nobody bound", STATUS(NOT_FOUND), status_of(ask(&env)));
	call = harness_session_call(&h, "not-hex");
	CHECK(RUN_UNTIL(&h, call->answered), "no reply to a bad SessionRequest");
	CHECK_INT("a bad session id", STATUS(BAD_REQUEST), harness_status(call));
	call = harness_session_call(&h, id);
	CHECK(RUN_UNTIL(&h, call->answered) && harness_status(call) == STATUS(OK),
	      "SessionRequest");
	CHECK_INT("SessionQuery, a connection bound", STATUS(OK), status_of(ask(&env)));
}

/* The node asks the partner something while its answers to a batch of the
 * partner's wait for the open transaction: they are committed and go first,
 * and the request goes at once. */
static void test_answers_go_before_a_request(void)
{
	Ftvm__Partner__SpaceRequest m = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, *envs[] = { &env };
	size_t sent = fake_session_requests(h.s);
	struct fake_call *call;

	env.message_case = MSG(SPACE_REQUEST);
	env.space_request = &m;
	fake_session_deliver(h.s, h.v, envs, 1);
	CHECK(!fake_session_completion(h.s, env.seq), "the answer went before its commit");
	call = harness_alloc_call(&h, HARNESS_PAGE, NULL, false);
	CHECK(fake_session_completion(h.s, env.seq) != NULL,
	      "the answer did not go ahead of the node's request");
	CHECK_INT("requests sent ahead of the answer", sent,
		  fake_session_requests_before(h.s, env.seq));
	CHECK_INT("the allocation's requests sent", sent + 2, fake_session_requests(h.s));
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, call->answered) && harness_status(call) == STATUS(OK),
	      "the allocation was answered OK");
}

int main(void)
{
	harness_start(&h, "vmm-partner", "64K", "1M", "");
	a_extent = harness_alloc(&h, 2 * HARNESS_PAGE, A, sizeof(A));
	test_allocate_memory();
	test_space_and_sense();
	test_read_header();
	test_locks();
	test_write_and_release();
	test_release_memory();
	test_answers_go_before_a_request();
	test_session_query();
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
