/* The transfer planner (seed 001): coalescing of contiguous remote bytes,
 * division at the message size and the scatter-gather limit, and a plan that
 * stops when the send queue is full and goes on where it stopped. Every plan
 * is replayed into a byte map of the partner's memory: each byte of each
 * transfer must land once, in order, from the right local address, under the
 * right keys. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rdma_planner.h"

#define PAGE 4096u
#define LOCAL_SIZE (4u << 20)
#define REMOTE_BASE 0x7f0000000000ull
#define REMOTE_SIZE (4u << 20)
#define MAX_WRS 20000
#define MAX_XFERS 64

static uint8_t *local_mem; /* random bytes the transfers read */
static uint8_t remote_mem[REMOTE_SIZE];
static uint8_t remote_hits[REMOTE_SIZE];

static uint64_t local_at(uint64_t offset)
{
	return (uint64_t)(uintptr_t)(local_mem + offset);
}

static struct rdma_xfer xfer(uint64_t local_offset, uint64_t length, uint64_t remote_offset)
{
	return (struct rdma_xfer){
		.local_addr = local_at(local_offset),
		.lkey = 0x11,
		.length = length,
		.remote_addr = REMOTE_BASE + remote_offset,
		.rkey = 0x22,
	};
}

/* The plan of xfers under limits, all of it, into wrs; how many. */
static size_t plan_all(const struct rdma_xfer *xfers, size_t n, uint32_t max_msg, uint32_t max_sge,
		       struct rdma_wr *wrs)
{
	struct rdma_limits limits = { .max_msg_size = max_msg, .max_sge = max_sge };
	struct rdma_plan plan;
	char reason[256] = "";
	int r = rdma_plan_init(&plan, xfers, n, &limits, reason, sizeof(reason));
	size_t total;

	CHECK_INT("rdma_plan_init", 0, r);
	if (r < 0) {
		fprintf(stderr, "  reason: %s\n", reason);
		return 0;
	}
	total = rdma_plan_next(&plan, wrs, MAX_WRS);
	CHECK(rdma_plan_done(&plan), "the plan is done after %zu work requests", total);
	CHECK_INT("nothing left to plan", 0, rdma_plan_remaining(&plan));
	return total;
}

/* Replays wrs as the device would and checks every byte against the request
 * state it must follow: transfer by transfer, offset by offset. */
static void replay(const struct rdma_xfer *xfers, size_t n, uint32_t max_msg, uint32_t max_sge,
		   const struct rdma_wr *wrs, size_t n_wrs)
{
	uint32_t sge_limit = max_sge < RDMA_PLAN_SGE_MAX ? max_sge : RDMA_PLAN_SGE_MAX;
	size_t elem = 0;
	uint64_t off = 0;
	int bad = 0;

	memset(remote_hits, 0, sizeof(remote_hits));
	for (size_t w = 0; w < n_wrs && bad < 5; w++) {
		const struct rdma_wr *wr = &wrs[w];
		uint64_t sum = 0, pos = wr->remote_addr - REMOTE_BASE;

		if (wr->length == 0 || wr->length > max_msg || wr->n_sge == 0 ||
		    wr->n_sge > sge_limit || wr->first != elem) {
			FAIL("wr %zu: %llu bytes (max %u), %u entries (max %u), first %zu (expected "
			     "%zu)",
			     w, (unsigned long long)wr->length, max_msg, wr->n_sge, sge_limit,
			     wr->first, elem);
			bad++;
		}
		for (uint32_t s = 0; s < wr->n_sge; s++) {
			const struct rdma_sge *sge = &wr->sge[s];

			sum += sge->length;
			for (uint32_t i = 0; i < sge->length && bad < 5; i++, pos++) {
				const struct rdma_xfer *x = &xfers[elem];

				if (elem >= n || sge->addr + i != x->local_addr + off ||
				    sge->lkey != x->lkey || wr->rkey != x->rkey ||
				    REMOTE_BASE + pos != x->remote_addr + off ||
				    pos >= REMOTE_SIZE) {
					FAIL("wr %zu entry %u byte %u is not transfer %zu offset "
					     "%llu",
					     w, s, i, elem, (unsigned long long)off);
					bad++;
					break;
				}
				remote_mem[pos] = *(const uint8_t *)(uintptr_t)(sge->addr + i);
				remote_hits[pos]++;
				if (++off == x->length) {
					elem++;
					off = 0;
				}
			}
		}
		CHECK(sum == wr->length, "wr %zu: entries add up to %llu, length says %llu", w,
		      (unsigned long long)sum, (unsigned long long)wr->length);
		/* last is where its final byte came from */
		CHECK(wr->last == (off ? elem : elem - 1), "wr %zu: last %zu", w, wr->last);
	}
	CHECK(elem == n && off == 0, "the plan covers up to transfer %zu offset %llu of %zu", elem,
	      (unsigned long long)off, n);
	/* The byte map: each destination byte once, equal to its source. */
	for (size_t k = 0; k < n && !bad; k++) {
		uint64_t pos = xfers[k].remote_addr - REMOTE_BASE;

		for (uint64_t i = 0; i < xfers[k].length; i++) {
			if (remote_hits[pos + i] != 1 ||
			    remote_mem[pos + i] !=
				    *(const uint8_t *)(uintptr_t)(xfers[k].local_addr + i)) {
				FAIL("transfer %zu byte %llu: written %u times, or not its source",
				     k, (unsigned long long)i, remote_hits[pos + i]);
				bad++;
				break;
			}
		}
	}
}

static struct rdma_wr wrs[MAX_WRS];

static void test_coalesce_contiguous_remote(void)
{
	/* Four pages scattered in local memory, to four consecutive pages there:
	 * one work request with four entries. */
	struct rdma_xfer x[4] = { xfer(3 * PAGE, PAGE, 0), xfer(0, PAGE, PAGE),
				  xfer(7 * PAGE, PAGE, 2 * PAGE), xfer(5 * PAGE, PAGE, 3 * PAGE) };
	size_t n = plan_all(x, 4, 1 << 20, 16, wrs);

	CHECK_INT("work requests", 1, n);
	CHECK_INT("entries", 4, wrs[0].n_sge);
	CHECK_INT("length", 4 * PAGE, wrs[0].length);
	CHECK_INT("first", 0, wrs[0].first);
	CHECK_INT("last", 3, wrs[0].last);
	CHECK_INT("remote address", REMOTE_BASE, wrs[0].remote_addr);
	replay(x, 4, 1 << 20, 16, wrs, n);
}

static void test_merge_contiguous_local(void)
{
	/* Contiguous on both sides: one entry. */
	struct rdma_xfer x[4] = { xfer(0, PAGE, 0), xfer(PAGE, PAGE, PAGE),
				  xfer(2 * PAGE, PAGE, 2 * PAGE), xfer(3 * PAGE, PAGE, 3 * PAGE) };
	size_t n = plan_all(x, 4, 1 << 20, 16, wrs);

	CHECK_INT("work requests", 1, n);
	CHECK_INT("entries", 1, wrs[0].n_sge);
	CHECK_INT("entry length", 4 * PAGE, wrs[0].sge[0].length);
	replay(x, 4, 1 << 20, 16, wrs, n);

	/* Contiguous too, but the second half under another lkey: two entries. */
	x[2].lkey = x[3].lkey = 0x33;
	n = plan_all(x, 4, 1 << 20, 16, wrs);
	CHECK_INT("work requests, two lkeys", 1, n);
	CHECK_INT("entries, two lkeys", 2, wrs[0].n_sge);
	CHECK_INT("second entry's lkey", 0x33, wrs[0].sge[1].lkey);
	replay(x, 4, 1 << 20, 16, wrs, n);
}

static void test_no_coalescing_across_a_gap(void)
{
	/* A page's gap between the second and the third: two work requests. */
	struct rdma_xfer x[4] = { xfer(0, PAGE, 0), xfer(4 * PAGE, PAGE, PAGE),
				  xfer(8 * PAGE, PAGE, 3 * PAGE), xfer(12 * PAGE, PAGE, 4 * PAGE) };
	size_t n = plan_all(x, 4, 1 << 20, 16, wrs);

	CHECK_INT("work requests across a gap", 2, n);
	CHECK_INT("first one's entries", 2, wrs[0].n_sge);
	CHECK_INT("second one's remote address", REMOTE_BASE + 3 * PAGE, wrs[1].remote_addr);
	CHECK_INT("second one's first transfer", 2, wrs[1].first);
	replay(x, 4, 1 << 20, 16, wrs, n);

	/* Contiguous addresses under another rkey are another region. */
	x[2].remote_addr = REMOTE_BASE + 2 * PAGE;
	x[3].remote_addr = REMOTE_BASE + 3 * PAGE;
	x[2].rkey = x[3].rkey = 0x44;
	n = plan_all(x, 4, 1 << 20, 16, wrs);
	CHECK_INT("work requests across an rkey change", 2, n);
	CHECK_INT("second one's rkey", 0x44, wrs[1].rkey);
	replay(x, 4, 1 << 20, 16, wrs, n);

	/* Contiguous only backwards: transfers are not reordered. */
	struct rdma_xfer back[2] = { xfer(0, PAGE, PAGE), xfer(4 * PAGE, PAGE, 0) };
	n = plan_all(back, 2, 1 << 20, 16, wrs);
	CHECK_INT("work requests for pages in reverse order", 2, n);
	replay(back, 2, 1 << 20, 16, wrs, n);
}

static void test_max_sge(void)
{
	struct rdma_xfer x[20];
	size_t n;

	/* Eight scattered pages to consecutive ones, three entries a request. */
	for (unsigned i = 0; i < 8; i++)
		x[i] = xfer(2 * i * PAGE, PAGE, i * PAGE);
	n = plan_all(x, 8, 1 << 20, 3, wrs);
	CHECK_INT("work requests at 3 entries", 3, n);
	CHECK_INT("first's entries", 3, wrs[0].n_sge);
	CHECK_INT("second's entries", 3, wrs[1].n_sge);
	CHECK_INT("third's entries", 2, wrs[2].n_sge);
	CHECK_INT("second's remote address", REMOTE_BASE + 3 * PAGE, wrs[1].remote_addr);
	CHECK_INT("third's first transfer", 6, wrs[2].first);
	replay(x, 8, 1 << 20, 3, wrs, n);

	/* One entry a request: a request per scattered page. */
	n = plan_all(x, 8, 1 << 20, 1, wrs);
	CHECK_INT("work requests at 1 entry", 8, n);
	replay(x, 8, 1 << 20, 1, wrs, n);

	/* A device allowing more entries than the planner uses gets its own
	 * maximum. */
	for (unsigned i = 0; i < 20; i++)
		x[i] = xfer(2 * i * PAGE, PAGE, i * PAGE);
	n = plan_all(x, 20, 1 << 20, 40, wrs);
	CHECK_INT("work requests at 40 entries allowed", 2, n);
	CHECK_INT("first's entries", RDMA_PLAN_SGE_MAX, wrs[0].n_sge);
	CHECK_INT("second's entries", 20 - RDMA_PLAN_SGE_MAX, wrs[1].n_sge);
	replay(x, 20, 1 << 20, 40, wrs, n);
}

static void test_max_msg_size(void)
{
	struct rdma_xfer x[16];
	size_t n;

	/* A 68 KiB block, contiguous, at an MTU-sized limit: 68 requests. */
	x[0] = xfer(0, 68 * 1024, 0);
	n = plan_all(x, 1, 1024, 16, wrs);
	CHECK_INT("work requests for 68 KiB at 1024", 68, n);
	for (size_t i = 0; i < n; i++)
		if (wrs[i].length != 1024 || wrs[i].n_sge != 1 ||
		    wrs[i].remote_addr != REMOTE_BASE + i * 1024)
			FAIL("wr %zu: %llu bytes in %u entries at 0x%llx", i,
			     (unsigned long long)wrs[i].length, wrs[i].n_sge,
			     (unsigned long long)wrs[i].remote_addr);
	replay(x, 1, 1024, 16, wrs, n);

	/* A 64 KiB block as 16 scattered pages, same limit: 64 requests. */
	for (unsigned i = 0; i < 16; i++)
		x[i] = xfer((31 - 2 * i) * PAGE, PAGE, i * PAGE);
	n = plan_all(x, 16, 1024, 16, wrs);
	CHECK_INT("work requests for 16 scattered pages at 1024", 64, n);
	replay(x, 16, 1024, 16, wrs, n);

	/* Seed 001 Fig. 8: the first buffer is divided, its rest coalesced with
	 * the next buffer. */
	x[0] = xfer(0, PAGE, 0);
	x[1] = xfer(8 * PAGE, 2000, PAGE);
	n = plan_all(x, 2, 3000, 16, wrs);
	CHECK_INT("work requests, Fig. 8", 3, n);
	CHECK_INT("first's length", 3000, wrs[0].length);
	CHECK_INT("second's entries", 2, wrs[1].n_sge);
	CHECK_INT("second's first entry", PAGE - 3000, wrs[1].sge[0].length);
	CHECK_INT("second's second entry", 3000 - (PAGE - 3000), wrs[1].sge[1].length);
	CHECK_INT("second's remote address", REMOTE_BASE + 3000, wrs[1].remote_addr);
	CHECK_INT("second's first transfer", 0, wrs[1].first);
	CHECK_INT("second's last transfer", 1, wrs[1].last);
	CHECK_INT("third's length", PAGE + 2000 - 6000, wrs[2].length);
	replay(x, 2, 3000, 16, wrs, n);

	/* Both limits at once: 512-byte pieces, 2 entries and 1024 bytes a
	 * request. */
	for (unsigned i = 0; i < 8; i++)
		x[i] = xfer(i * PAGE, 512, i * 512);
	n = plan_all(x, 8, 1024, 2, wrs);
	CHECK_INT("work requests, 512-byte pieces", 4, n);
	replay(x, 8, 1024, 2, wrs, n);
}

static bool same_wr(const struct rdma_wr *a, const struct rdma_wr *b)
{
	if (a->remote_addr != b->remote_addr || a->rkey != b->rkey || a->n_sge != b->n_sge ||
	    a->length != b->length || a->first != b->first || a->last != b->last)
		return false;
	for (uint32_t s = 0; s < a->n_sge; s++)
		if (a->sge[s].addr != b->sge[s].addr || a->sge[s].length != b->sge[s].length ||
		    a->sge[s].lkey != b->sge[s].lkey)
			return false;
	return true;
}

/* Random transfers: consecutive remote ranges with gaps now and then, local
 * bytes sometimes following the previous transfer's, keys changing now and
 * then. */
static size_t random_xfers(struct rdma_xfer *x)
{
	size_t n = 1 + rng() % MAX_XFERS;
	uint64_t remote = 0, local = 0;

	for (size_t i = 0; i < n; i++) {
		uint64_t len = rng() % 4 == 0 ? 1 + rng() % 70000 : 1 + rng() % PAGE;

		if (rng() % 3 == 0)
			remote += 1 + rng() % 100; /* a gap */
		if (rng() % 2)
			local = rng() % (LOCAL_SIZE - 70000);
		x[i] = xfer(local, len, remote);
		x[i].lkey = rng() % 8 == 0 ? 0x55 : 0x11;
		x[i].rkey = rng() % 8 == 0 ? 0x66 : 0x22;
		remote += len;
		local += len;
		if (remote > REMOTE_SIZE - 70000 - 100 || local > LOCAL_SIZE - 70000)
			return i + 1;
	}
	return n;
}

static void test_resume(void)
{
	static const uint32_t msg_sizes[] = { 1, 7, 512, 1024, 4096, 65536, 1u << 31 };
	static struct rdma_wr step_wrs[MAX_WRS];
	struct rdma_xfer x[MAX_XFERS];

	for (int round = 0; round < 300 && !failures; round++) {
		size_t n = random_xfers(x), all, got = 0, calls = 0;
		uint32_t max_msg = msg_sizes[rng() % (sizeof(msg_sizes) / sizeof(msg_sizes[0]))];
		uint32_t max_sge = 1 + rng() % 20;
		struct rdma_limits limits = { .max_msg_size = max_msg, .max_sge = max_sge };
		struct rdma_plan plan;

		if (max_msg < 512) { /* a work request every few bytes: keep it short */
			n = n < 4 ? n : 4;
			for (size_t i = 0; i < n; i++)
				if (x[i].length > 1000)
					x[i].length = 1 + x[i].length % 1000;
		}
		all = plan_all(x, n, max_msg, max_sge, wrs);
		if (all >= MAX_WRS) {
			FAIL("round %d: %zu work requests do not fit the test's array", round, all);
			break;
		}
		CHECK_INT("rdma_plan_init", 0, rdma_plan_init(&plan, x, n, &limits, NULL, 0));
		CHECK_INT("remaining before any", all, rdma_plan_remaining(&plan));
		/* Send-queue slots freeing a few at a time, sometimes none. */
		while (!rdma_plan_done(&plan) && calls++ < 2 * MAX_WRS) {
			unsigned slots = rng() % 4, made;
			struct rdma_plan before = plan;

			made = rdma_plan_next(&plan, step_wrs + got, slots);
			if (slots == 0)
				CHECK(made == 0 && plan.element == before.element &&
					      plan.offset == before.offset,
				      "no slot, and still %u made or the state moved", made);
			CHECK(made == slots || rdma_plan_done(&plan),
			      "%u of %u slots used and the plan is not done", made, slots);
			got += made;
			if (rng() % 32 == 0) /* it replans the rest: not every step */
				CHECK_INT("remaining after a step", all - got,
					  rdma_plan_remaining(&plan));
		}
		CHECK_INT("work requests, step by step and at once", all, got);
		for (size_t i = 0; i < all && i < got; i++)
			if (!same_wr(&wrs[i], &step_wrs[i])) {
				FAIL("round %d: wr %zu differs when planned step by step", round,
				     i);
				break;
			}
		replay(x, n, max_msg, max_sge, step_wrs, got);
		CHECK_INT("nothing more once done", 0, rdma_plan_next(&plan, step_wrs, 4));
	}
}

static void expect_refused(const char *what, const struct rdma_xfer *x, size_t n,
			   const struct rdma_limits *limits, const char *reason_has)
{
	struct rdma_plan plan;
	char reason[256] = "";
	int r = rdma_plan_init(&plan, x, n, limits, reason, sizeof(reason));

	CHECK(r == -EINVAL, "%s: expected -EINVAL, got %d", what, r);
	CHECK(strstr(reason, reason_has) != NULL, "%s: the reason \"%s\" does not say \"%s\"", what,
	      reason, reason_has);
}

static void test_bad_input(void)
{
	struct rdma_limits ok = { .max_msg_size = 4096, .max_sge = 4 };
	struct rdma_limits no_msg = { .max_msg_size = 0, .max_sge = 4 };
	struct rdma_limits no_sge = { .max_msg_size = 4096, .max_sge = 0 };
	struct rdma_xfer x[3] = { xfer(0, PAGE, 0), xfer(PAGE, PAGE, PAGE),
				  xfer(2 * PAGE, PAGE, 2 * PAGE) };

	expect_refused("no transfers", x, 0, &ok, "nothing to transfer");
	expect_refused("NULL transfers", NULL, 3, &ok, "nothing to transfer");
	expect_refused("no limits", x, 3, NULL, "device limits");
	expect_refused("max_msg_size 0", x, 3, &no_msg, "max_msg_size 0");
	expect_refused("max_sge 0", x, 3, &no_sge, "max_sge 0");
	x[2].length = 0;
	expect_refused("zero length", x, 3, &ok, "transfer 2 has no bytes");
	x[2] = xfer(2 * PAGE, PAGE, 2 * PAGE);
	x[1].local_addr = 0;
	expect_refused("no local address", x, 3, &ok, "transfer 1 has no local address");
	x[1] = xfer(PAGE, PAGE, PAGE);
	x[0].remote_addr = 0;
	expect_refused("no remote address", x, 3, &ok, "transfer 0 has no remote address");
	x[0] = xfer(0, PAGE, 0);
	x[1].remote_addr = UINT64_MAX - 100;
	expect_refused("remote wrap", x, 3, &ok, "transfer 1 (4096 bytes");
	x[1] = xfer(PAGE, PAGE, PAGE);
	x[2].length = UINT64_MAX;
	expect_refused("local wrap", x, 3, &ok, "wraps around");
}

int main(void)
{
	rng_seed(0x5eed0001u);
	local_mem = xmalloc(LOCAL_SIZE);
	for (size_t i = 0; i < LOCAL_SIZE; i++)
		local_mem[i] = (uint8_t)rng();
	test_coalesce_contiguous_remote();
	test_merge_contiguous_local();
	test_no_coalescing_across_a_gap();
	test_max_sge();
	test_max_msg_size();
	test_resume();
	test_bad_input();
	free(local_mem);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("rdma_planner: all %d checks passed\n", checks);
	return 0;
}
