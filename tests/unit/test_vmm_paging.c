/* Frames on demand and the backing store (vmm/VMM.md "Replacement";
 * node/vmm/replacement.c, node/vmm/destage.c) on node a, over the fake
 * partner session:
 * - eviction order: with the pool full, a page that needs frames takes those
 *   of the least recently used page that is clean and unlocked; a dirty page
 *   (here: b's, which a never destages) and a locked one stay, and a page
 *   used again goes to the back of the queue;
 * - destage rounds: the dirty pages of an allocation a owns are written to
 *   its extent in the store, blocks and records, in a round behind one
 *   barrier; only then is each clean, in the page table too, and b told in
 *   one batch of Destaged. A page written again goes in a later round, a
 *   write-locked page waits for its unlock, and b's pages are b's to destage
 *   (its Destaged makes them clean here);
 * - the partner pages in: b's write pointer on a page not resident here
 *   (AllocateWrite with page_in) pages it in from the store under b's lock;
 *   with every frame dirty it is refused NO_SPACE and leaves no lock, where
 *   a lock without page_in is granted. */
#include "check.h"
#include "crc32c.h"
#include "vmm.h"
#include "vmm_harness.h"
#include "vmm_msg.h"

#define MSG(x) FTVM__PARTNER__ENVELOPE__MESSAGE_##x
#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x

#define FRAMES 16 /* [memory] size = 64K */

static int ask(struct harness *h, Envelope *env)
{
	const CommandComplete *cc = harness_answer(h, harness_deliver(h, env));

	return cc ? (int)cc->status : -1;
}

/* A whole-page read of a page a owns: no round trip. Its status. */
static int read_page(struct harness *h, const char *guid, uint64_t page)
{
	return harness_status(harness_read_call(h, guid, page, false));
}

static bool resident(struct harness *h, const char *guid, uint64_t page)
{
	struct peek_page pk;

	return vmm_peek_page(h->v, guid, page, &pk) && pk.resident;
}

static void test_eviction_order(void)
{
	struct harness h;
	struct peek_page pk;
	struct status_counts counts;
	uint64_t frame2;
	char A[64];

	harness_start(&h, "vmm-evict", "64K", "1M", "");
	/* b's page takes the first frame, dirty: never evicted here. */
	harness_partner_alloc(&h, "b-1", 1, 0);
	CHECK_INT("b writes b-1", 0, harness_partner_writes(&h, "b-1", 0, 0xb1, 1));
	harness_alloc(&h, (FRAMES + 1) * HARNESS_PAGE, A, sizeof(A));
	for (uint64_t p = 0; p < FRAMES - 1; p++)
		CHECK_INT("read", STATUS(OK), read_page(&h, A, p));
	vmm_get_counts(h.v, &counts);
	CHECK_INT("frames free", 0, counts.frames_free);
	/* Page 1 read-locked; then 2 to 14 and 0 used again, in that order:
	 * were page 1 in the queue, it would be the least recently used. */
	harness_pointer(&h, NULL, A, 1, false);
	for (uint64_t p = 2; p < FRAMES - 1; p++)
		CHECK_INT("read again", STATUS(OK), read_page(&h, A, p));
	CHECK_INT("read page 0 again", STATUS(OK), read_page(&h, A, 0));
	CHECK(vmm_peek_page(h.v, A, 2, &pk) && pk.resident, "page 2 not resident");
	frame2 = pk.frame;

	/* Queue: 2, 3, ..., 14, 0. */
	CHECK_INT("read page 15", STATUS(OK), read_page(&h, A, FRAMES - 1));
	CHECK(!resident(&h, A, 2), "page 2, the least recently used, stayed");
	CHECK(resident(&h, A, 0), "page 0, used again, evicted");
	CHECK(resident(&h, A, 1), "page 1, read-locked, evicted");
	CHECK(resident(&h, "b-1", 0), "b-1 page 0, dirty, evicted");
	CHECK(vmm_peek_page(h.v, A, FRAMES - 1, &pk) && pk.frame == frame2,
	      "page 15 did not take page 2's frame");
	CHECK_INT("read page 16", STATUS(OK), read_page(&h, A, FRAMES));
	CHECK(!resident(&h, A, 3), "page 3, next in the queue, stayed");
	CHECK(resident(&h, A, 4) && resident(&h, A, 0), "evicted past the head of the queue");
	CHECK(resident(&h, A, 1) && resident(&h, "b-1", 0), "a locked or dirty page evicted");
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

static bool destaged_pending(struct harness *h)
{
	return fake_session_pending(h->s, MSG(DESTAGED)) != NULL;
}

/* The Destaged requests of the next round (one batch), answered OK; how
 * many, each checked against the store and the page table. version[p] is
 * what page p of A should be destaged at (0: not in this round). */
static size_t destage_round(struct harness *h, const char *A, uint64_t extent, uint64_t pages,
			    const uint64_t *version, const uint8_t *bytes)
{
	static uint8_t block[HARNESS_PAGE], want[HARNESS_PAGE];
	struct fake_request *d;
	size_t n = 0;
	unsigned batch;

	if (!RUN_UNTIL(h, destaged_pending(h))) {
		FAIL("no Destaged came");
		return 0;
	}
	batch = fake_session_pending(h->s, MSG(DESTAGED))->batch;
	while ((d = fake_session_pending(h->s, MSG(DESTAGED)))) {
		const Ftvm__Partner__Destaged *m = d->env->destaged;
		uint64_t rec_version;
		uint32_t rec_crc;
		struct pt_row row;
		struct peek_page pk;

		CHECK_INT("one batch", batch, d->batch);
		CHECK_STR("Destaged.guid", A, m->guid);
		if (strcmp(m->guid, A) != 0 || m->page >= pages) {
			fake_session_answer_status(h->s, d, STATUS(OK), NULL);
			continue;
		}
		n++;
		CHECK_INT("Destaged.version", version[m->page], m->version);
		memset(want, bytes[m->page], sizeof(want));
		CHECK_HEX32("Destaged.crc32c", crc32c(0, want, sizeof(want)), m->crc32c);
		/* In the store before b is told. */
		harness_store_record(h, extent, m->page, &rec_version, &rec_crc);
		CHECK_INT("the store's record: version", m->version, rec_version);
		CHECK_HEX32("the store's record: crc32c", m->crc32c, rec_crc);
		harness_store_block(h, extent, pages, m->page, block);
		CHECK(memcmp(block, want, sizeof(block)) == 0,
		      "page %llu: the store's block differs", (unsigned long long)m->page);
		CHECK(vmm_peek_page(h->v, A, m->page, &pk) && !pk.dirty && !pk.destaging,
		      "page %llu: still dirty", (unsigned long long)m->page);
		CHECK(harness_pt_page(h, A, m->page, &row) && !row.dirty &&
			      row.version == m->version,
		      "page %llu: the committed row is dirty or at %llu",
		      (unsigned long long)m->page, (unsigned long long)row.version);
		fake_session_answer_status(h->s, d, STATUS(OK), NULL);
	}
	return n;
}

/* A whole-page write of A's page by a's client, every byte byte; b's
 * answers are the test's. */
static struct fake_call *client_write(struct harness *h, const char *A, uint64_t page, uint8_t byte)
{
	static uint8_t block[HARNESS_PAGE];

	memset(block, byte, sizeof(block));
	return harness_write_call(h, A, page, block, sizeof(block), false);
}

/* The version call's reply gives, once it came. */
static uint64_t written(struct harness *h, struct fake_call *call)
{
	if (!RUN_UNTIL(h, call->answered) || harness_status(call) != 0 ||
	    !call->reply->write_page) {
		FAIL("write: %s", call->reply ? call->reply->reason : "no reply");
		return 0;
	}
	return call->reply->write_page->version;
}

static void test_destage_rounds(void)
{
	struct harness h;
	struct fake_call *w0, *w1, *pointer, *rel;
	struct peek_page pk;
	struct pt_row row;
	uint64_t extent, version[3] = { 0 }, v;
	uint32_t crc;
	uint8_t bytes[3] = { 0 };
	char A[64];

	harness_start(&h, "vmm-destage", "64K", "1M", "");
	extent = harness_alloc(&h, 3 * HARNESS_PAGE, A, sizeof(A));
	harness_partner_alloc(&h, "b-1", 1, 0);

	/* Round 1: pages 0 and 1, together (both acknowledged by b before the
	 * loop turns: one round for both, however slow the machine). */
	w0 = client_write(&h, A, 0, bytes[0] = 0x11);
	w1 = client_write(&h, A, 1, bytes[1] = 0x22);
	fake_session_answer_all(h.s);
	version[0] = written(&h, w0);
	version[1] = written(&h, w1);
	CHECK(version[0] == 1 && version[1] == 1, "versions %llu, %llu",
	      (unsigned long long)version[0], (unsigned long long)version[1]);
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.dirty, "page 0 clean before its destage");
	CHECK(harness_pt_page(&h, A, 0, &row) && row.dirty,
	      "page 0's row clean before its destage");
	CHECK_INT("b writes b-1", 0, harness_partner_writes(&h, "b-1", 0, 0xb1, 1));
	CHECK_INT("round 1", 2, destage_round(&h, A, extent, 3, version, bytes));
	harness_store_record(&h, extent, 2, &v, &crc);
	CHECK_INT("page 2, never written: its record", 0, v);

	/* Round 2: page 0 again, alone. */
	w0 = client_write(&h, A, 0, bytes[0] = 0x33);
	fake_session_answer_all(h.s);
	version[0] = written(&h, w0);
	version[1] = 0;
	CHECK_INT("page 0's version", 2, version[0]);
	CHECK_INT("round 2", 1, destage_round(&h, A, extent, 3, version, bytes));

	/* A write-locked dirty page waits for its unlock: the write pointer
	 * is taken before the loop turns again, so before any round. */
	w0 = client_write(&h, A, 0, bytes[0] = 0x44);
	fake_session_answer_all(h.s);
	pointer = harness_pointer_call(&h, NULL, A, 0, true, false);
	version[0] = written(&h, w0);
	CHECK(RUN_UNTIL(&h, vmm_peek_page(h.v, A, 0, &pk) && !pk.destaging),
	      "the round never passed page 0");
	CHECK(pk.dirty && !destaged_pending(&h), "a write-locked page destaged");
	harness_store_record(&h, extent, 0, &v, &crc);
	CHECK_INT("page 0's record while write-locked", 2, v);
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, pointer->answered) && harness_status(pointer) == STATUS(OK),
	      "no write pointer");
	rel = harness_release_call(&h, NULL, A, 0, false);
	fake_session_answer_all(h.s);
	CHECK(RUN_UNTIL(&h, rel->answered) && harness_status(rel) == STATUS(OK), "no release");
	CHECK_INT("after the unlock", 1, destage_round(&h, A, extent, 3, version, bytes));

	/* b's page: never destaged here; b's Destaged makes it clean. */
	CHECK(vmm_peek_page(h.v, "b-1", 0, &pk) && pk.dirty, "b-1 page 0 clean without b");
	{
		Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
		Ftvm__Partner__Destaged m = FTVM__PARTNER__DESTAGED__INIT;

		m.guid = "b-1";
		m.page = 0;
		m.version = 1;
		m.crc32c = pk.crc32c;
		env.message_case = MSG(DESTAGED);
		env.destaged = &m;
		CHECK_INT("b's Destaged", STATUS(OK), ask(&h, &env));
	}
	CHECK(vmm_peek_page(h.v, "b-1", 0, &pk) && !pk.dirty,
	      "b-1 page 0 dirty after b's Destaged");
	CHECK(harness_pt_page(&h, "b-1", 0, &row) && !row.dirty, "b-1 page 0's row dirty");
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

static int allocate_write(struct harness *h, const char *guid, uint64_t page, bool page_in)
{
	struct vmm_msg msg;

	return ask(h, vmm_msg_allocate(&msg, guid, page, "b/7/1", true, page_in));
}

static int release_unmodified(struct harness *h, const char *guid, uint64_t page)
{
	struct vmm_msg msg;

	return ask(h, vmm_msg_release_pointer(&msg, guid, page, "b/7/1", false, 0, 0));
}

static void test_partner_page_in(void)
{
	struct harness h;
	struct peek_page pk;
	struct status_counts counts;
	struct fake_call *w;
	uint64_t extent, version[1];
	uint8_t bytes[1];
	char A[64];

	harness_start(&h, "vmm-partner-page-in", "64K", "1M", "");
	extent = harness_alloc(&h, (FRAMES + 1) * HARNESS_PAGE, A, sizeof(A));
	w = client_write(&h, A, 0, bytes[0] = 0x5a);
	fake_session_answer_all(h.s);
	version[0] = written(&h, w);
	CHECK_INT("page 0 destaged", 1, destage_round(&h, A, extent, 1, version, bytes));
	for (uint64_t p = 1; p <= FRAMES; p++)
		CHECK_INT("read", STATUS(OK), read_page(&h, A, p));
	CHECK(!resident(&h, A, 0), "page 0, clean and least recently used, stayed");

	CHECK_INT("b's write pointer", STATUS(OK), allocate_write(&h, A, 0, true));
	CHECK(RUN_UNTIL(&h, resident(&h, A, 0)), "page 0 not paged in for b's pointer");
	CHECK(vmm_peek_page(h.v, A, 0, &pk) && pk.version == 1 &&
		      pk.lock_mode == FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE,
	      "page 0 after the page-in: version %llu, lock %d", (unsigned long long)pk.version,
	      pk.lock_mode);
	vmm_get_counts(h.v, &counts);
	CHECK_INT("partner page-ins", 1, counts.partner_page_ins);
	CHECK_INT("b's release", STATUS(OK), release_unmodified(&h, A, 0));

	/* Every frame dirty with b's pages: none to take. */
	harness_partner_alloc(&h, "b-1", FRAMES, 0);
	for (uint64_t p = 0; p < FRAMES; p++)
		CHECK_INT("b writes b-1", 0, harness_partner_writes(&h, "b-1", p, 0xb1, 1));
	CHECK(!resident(&h, A, 0), "page 0 kept its frame");
	CHECK_INT("b's write pointer, no frames", STATUS(NO_SPACE), allocate_write(&h, A, 0, true));
	CHECK(vmm_peek_page(h.v, A, 0, &pk) &&
		      pk.lock_mode == FTVM__PARTNER__LOCK_MODE__LOCK_MODE_NONE,
	      "a refused page-in left lock %d", pk.lock_mode);
	CHECK_INT("a lock without page_in", STATUS(OK), allocate_write(&h, A, 0, false));
	CHECK(!resident(&h, A, 0), "paged in without page_in");
	CHECK_INT("b's release", STATUS(OK), release_unmodified(&h, A, 0));
	vmm_get_counts(h.v, &counts);
	CHECK_INT("partner page-ins", 1, counts.partner_page_ins);
	CHECK_INT("calls unanswered", 0, harness_stop(&h));
}

int main(void)
{
	test_eviction_order();
	test_destage_rounds();
	test_partner_page_in();
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
