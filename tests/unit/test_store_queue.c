/* The backing store's queue (seed 004): what is written reads back at many
 * offsets; every completion arrives exactly once, with the right result, on
 * the loop thread; a fence and a barrier order what surrounds them; errors
 * come back as -errno completions; drain and free deliver everything
 * outstanding; depth counts. A real file in a fresh directory, real pool
 * threads, a real event_base. Ends with an out-of-order figure (printed, not
 * checked: completing out of order is allowed, not required). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <event2/event.h>

#include "check.h"
#include "store_queue.h"

#define THREADS 4
#define BLOCKS 256
#define BIG (8u << 20)

static char dir[256];
static char path[300];
static pthread_t loop_thread;
static struct event_base *base;
static struct event *tick;
/* Bumped by every delivery, so a completion records its place. */
static unsigned delivered;

/* One operation's completion as the test saw it. */
struct comp {
	unsigned calls;
	int result;
	unsigned order;
};

static void on_done(int result, void *arg)
{
	struct comp *c = arg;

	CHECK(pthread_equal(pthread_self(), loop_thread), "completion ran off the loop thread");
	c->calls++;
	c->result = result;
	c->order = ++delivered;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
}

static double now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Runs the loop until nothing is outstanding; the tick wakes it to look at
 * the deadline, so a lost completion fails instead of hanging. */
static bool run_until_idle(struct store_queue *q)
{
	double deadline = now() + 20;

	while (store_queue_depth(q) > 0) {
		if (now() > deadline) {
			FAIL("depth still %zu after 20 s", store_queue_depth(q));
			return false;
		}
		event_base_loop(base, EVLOOP_ONCE);
	}
	return true;
}

/* A queue that may write the whole file. */
static struct store_queue *new_or_die(int fd, unsigned threads)
{
	const struct store_range all = { 0, INT64_MAX };
	struct store_queue *q;
	int r = store_queue_new(base, fd, threads, &q);

	if (r < 0 || store_queue_set_writable(q, &all, 1) < 0) {
		fprintf(stderr, "ERROR store_queue_new: %s\n", strerror(-r));
		exit(99);
	}
	return q;
}

#define CHECK_POST(what, expr)                                                 \
	do {                                                                   \
		int r_ = (expr);                                               \
		checks++;                                                      \
		if (r_ < 0)                                                    \
			FAIL("%s: posting failed: %s", (what), strerror(-r_)); \
	} while (0)

/* Exactly once, with this result. */
static void check_comp(const char *what, const struct comp *c, int result)
{
	CHECK_INT(what, 1, c->calls);
	CHECK_INT(what, result, c->result);
}

static void fill(uint8_t *p, size_t len)
{
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rng();
}

static void reset_file(int fd)
{
	if (ftruncate(fd, 0) < 0)
		die("ftruncate");
}

/* BLOCKS pieces of odd sizes packed end to end, written in shuffled order and
 * read back in another; the file is also checked from outside the queue. */
static void test_write_read_many(int fd)
{
	struct store_queue *q = new_or_die(fd, THREADS);
	size_t len[BLOCKS], total = 0;
	uint64_t off[BLOCKS];
	uint8_t *data, *back;
	struct comp *wc = xcalloc(BLOCKS * sizeof(*wc)), *rc = xcalloc(BLOCKS * sizeof(*rc));
	unsigned perm[BLOCKS];

	reset_file(fd);
	for (unsigned i = 0; i < BLOCKS; i++) {
		len[i] = 1 + rng() % 9000;
		off[i] = total;
		total += len[i];
		perm[i] = i;
	}
	data = xmalloc(total);
	back = xcalloc(total);
	fill(data, total);

	for (unsigned i = BLOCKS - 1; i > 0; i--) {
		unsigned j = rng() % (i + 1), t = perm[i];

		perm[i] = perm[j];
		perm[j] = t;
	}
	for (unsigned k = 0; k < BLOCKS; k++) {
		unsigned i = perm[k];

		CHECK_POST("write",
			   store_queue_write(q, data + off[i], len[i], off[i], on_done, &wc[i]));
	}
	CHECK_INT("depth after posting the writes", BLOCKS, store_queue_depth(q));
	run_until_idle(q);
	for (unsigned i = 0; i < BLOCKS; i++)
		check_comp("write completion", &wc[i], (int)len[i]);

	for (unsigned k = 0; k < BLOCKS; k++) {
		unsigned i = perm[BLOCKS - 1 - k];

		CHECK_POST("read",
			   store_queue_read(q, back + off[i], len[i], off[i], on_done, &rc[i]));
	}
	run_until_idle(q);
	for (unsigned i = 0; i < BLOCKS; i++) {
		check_comp("read completion", &rc[i], (int)len[i]);
		CHECK(memcmp(data + off[i], back + off[i], len[i]) == 0,
		      "block %u (%zu bytes at %llu) read back different", i, len[i],
		      (unsigned long long)off[i]);
	}

	memset(back, 0, total);
	CHECK_INT("pread of the whole file from outside", (long long)total,
		  pread(fd, back, total, 0));
	CHECK(memcmp(data, back, total) == 0, "file differs from what was written");

	store_queue_free(q);
	free(data);
	free(back);
	free(wc);
	free(rc);
}

/* A big write then a small one: each completes once with its length; which
 * comes first is up to the pool. Returns whether the small one came first. */
static bool big_then_small(struct store_queue *q, const uint8_t *big, const uint8_t *small)
{
	struct comp bc = { 0 }, sc = { 0 };

	CHECK_POST("big write", store_queue_write(q, big, BIG, 0, on_done, &bc));
	CHECK_POST("small write", store_queue_write(q, small, 512, BIG + 4096, on_done, &sc));
	CHECK_INT("depth with two posted", 2, store_queue_depth(q));
	run_until_idle(q);
	check_comp("big write", &bc, BIG);
	check_comp("small write", &sc, 512);
	return sc.order < bc.order;
}

/* Before the fence: writes of pattern A over a region. After it (and free to
 * overlap each other): a read of the first half, which must see A, and a write
 * of pattern B over the second half, which must land last. The fence is
 * delivered after everything before it and before everything after it. */
static void test_fence(int fd, bool barrier)
{
	const char *name = barrier ? "barrier" : "fence";
	struct store_queue *q = new_or_die(fd, THREADS);
	enum {
		PIECES = 8,
		PIECE = 256 << 10,
		HALF = PIECES * PIECE / 2
	};
	uint8_t *a = xmalloc(PIECES * PIECE), *b = xmalloc(PIECES * PIECE);
	uint8_t *seen = xcalloc(PIECES * PIECE), *final = xcalloc(PIECES * PIECE);
	struct comp before[PIECES] = { { 0 } }, fc = { 0 }, after_r = { 0 }, after_w = { 0 };

	reset_file(fd);
	memset(a, 0xaa, PIECES * PIECE);
	memset(b, 0xbb, PIECES * PIECE);
	for (unsigned round = 0; round < 8; round++) {
		memset(before, 0, sizeof(before));
		fc = after_r = after_w = (struct comp){ 0 };
		for (unsigned i = 0; i < PIECES; i++)
			CHECK_POST("write before",
				   store_queue_write(q, a + i * PIECE, PIECE, (uint64_t)i * PIECE,
						     on_done, &before[i]));
		CHECK_POST(name, barrier ? store_queue_barrier(q, on_done, &fc)
					 : store_queue_fence(q, on_done, &fc));
		CHECK_POST("read after", store_queue_read(q, seen, HALF, 0, on_done, &after_r));
		CHECK_POST("write after",
			   store_queue_write(q, b + HALF, HALF, HALF, on_done, &after_w));
		CHECK_INT("depth", PIECES + 3, store_queue_depth(q));
		run_until_idle(q);

		check_comp(name, &fc, 0);
		for (unsigned i = 0; i < PIECES; i++) {
			check_comp("write before", &before[i], PIECE);
			CHECK(before[i].order < fc.order,
			      "%s delivered %u, before it an earlier write at %u", name, fc.order,
			      before[i].order);
		}
		check_comp("read after", &after_r, HALF);
		check_comp("write after", &after_w, HALF);
		CHECK(after_r.order > fc.order && after_w.order > fc.order,
		      "%s delivered %u, after a later op (read %u, write %u)", name, fc.order,
		      after_r.order, after_w.order);
		CHECK(memcmp(seen, a, HALF) == 0,
		      "round %u: the read after the %s missed a write before it", round, name);
		CHECK_INT("pread after", PIECES * PIECE, pread(fd, final, PIECES * PIECE, 0));
		CHECK(memcmp(final, a, HALF) == 0, "round %u: first half is not A", round);
		CHECK(memcmp(final + HALF, b + HALF, HALF) == 0,
		      "round %u: the write after the %s did not land last", round, name);
		/* The file now ends in B: the next round's writes put A back. */
		memset(seen, 0, HALF);
	}

	/* Nothing before it: completes at once with 0. */
	fc = (struct comp){ 0 };
	CHECK_POST(name, barrier ? store_queue_barrier(q, on_done, &fc)
				 : store_queue_fence(q, on_done, &fc));
	run_until_idle(q);
	check_comp("lone fence or barrier", &fc, 0);

	store_queue_free(q);
	free(a);
	free(b);
	free(seen);
	free(final);
}

static void test_eof(int fd)
{
	struct store_queue *q = new_or_die(fd, THREADS);
	uint8_t buf[200], data[1000];
	struct comp to_end = { 0 }, across = { 0 }, beyond = { 0 }, empty = { 0 };

	reset_file(fd);
	fill(data, sizeof(data));
	if (pwrite(fd, data, sizeof(data), 0) != (ssize_t)sizeof(data))
		die("pwrite");
	CHECK_POST("read to the end", store_queue_read(q, buf, 100, 900, on_done, &to_end));
	CHECK_POST("read across the end",
		   store_queue_read(q, buf + 100, 100, 950, on_done, &across));
	CHECK_POST("read beyond the end", store_queue_read(q, buf, 10, 5000, on_done, &beyond));
	CHECK_POST("empty read", store_queue_read(q, NULL, 0, 5000, on_done, &empty));
	run_until_idle(q);
	check_comp("read ending at EOF", &to_end, 100);
	check_comp("read across EOF", &across, -EIO);
	check_comp("read past EOF", &beyond, -EIO);
	check_comp("empty read", &empty, 0);
	CHECK(memcmp(buf, data + 900, 100) == 0, "read ending at EOF got other bytes");
	store_queue_free(q);
}

static void test_bad_fd(void)
{
	struct store_queue *q = new_or_die(-1, 2);
	uint8_t buf[64] = { 0 };
	struct comp r = { 0 }, w = { 0 }, f = { 0 }, b = { 0 };

	CHECK_POST("read", store_queue_read(q, buf, sizeof(buf), 0, on_done, &r));
	CHECK_POST("write", store_queue_write(q, buf, sizeof(buf), 0, on_done, &w));
	CHECK_POST("fence", store_queue_fence(q, on_done, &f));
	CHECK_POST("barrier", store_queue_barrier(q, on_done, &b));
	run_until_idle(q);
	check_comp("read on a bad fd", &r, -EBADF);
	check_comp("write on a bad fd", &w, -EBADF);
	check_comp("fence on a bad fd (touches no fd)", &f, 0);
	check_comp("barrier on a bad fd", &b, -EBADF);
	store_queue_free(q);
}

/* A completion that posts a follow-up, recording what posting returned. */
struct chain {
	struct comp first, second;
	struct store_queue *q;
	int post;
	bool posted;
};

static void on_chain(int result, void *arg)
{
	struct chain *c = arg;

	on_done(result, &c->first);
	c->post = store_queue_fence(c->q, on_done, &c->second);
	c->posted = true;
}

/* Without running the loop: nothing is delivered until drain, and drain
 * delivers everything posted before it (a follow-up posted meanwhile comes
 * later, exactly once). */
static void test_drain(int fd)
{
	struct store_queue *q = new_or_die(fd, THREADS);
	enum {
		N = 64
	};
	static uint8_t bufs[N][4096];
	struct comp c[N] = { { 0 } };
	struct chain ch = { .q = q };
	unsigned early = 0;

	reset_file(fd);
	for (unsigned i = 0; i < N; i++) {
		memset(bufs[i], (int)i, sizeof(bufs[i]));
		if (i == N / 2)
			CHECK_POST("fence", store_queue_fence(q, on_done, &c[i]));
		else
			CHECK_POST("write", store_queue_write(q, bufs[i], sizeof(bufs[i]),
							      (uint64_t)i * 4096, on_done, &c[i]));
	}
	CHECK_POST("chained write", store_queue_write(q, bufs[0], 10, 0, on_chain, &ch));
	CHECK_INT("depth before drain", N + 1, store_queue_depth(q));
	usleep(20000);
	for (unsigned i = 0; i < N; i++)
		early += c[i].calls;
	CHECK_INT("completions delivered before drain, loop not run", 0, early);

	store_queue_drain(q);
	for (unsigned i = 0; i < N; i++)
		check_comp("drained", &c[i], i == N / 2 ? 0 : 4096);
	check_comp("chained write", &ch.first, 10);
	CHECK(ch.posted, "the chained completion did not run");
	CHECK_INT("posting from a completion during drain", 0, ch.post);
	CHECK(store_queue_depth(q) <= 1, "depth %zu after drain, at most the follow-up",
	      store_queue_depth(q));
	run_until_idle(q);
	check_comp("follow-up fence", &ch.second, 0);

	store_queue_drain(q); /* nothing outstanding: returns at once */
	CHECK_INT("depth after an empty drain", 0, store_queue_depth(q));
	store_queue_free(q);
}

/* Free with everything outstanding and the loop never run: all delivered
 * first; a completion posting during free is refused. */
static void test_free_outstanding(int fd)
{
	struct store_queue *q = new_or_die(fd, THREADS);
	enum {
		N = 32
	};
	static uint8_t data[N][8192], back[N][8192];
	struct comp w[N] = { { 0 } }, r[N] = { { 0 } }, f = { 0 }, b = { 0 };
	struct chain ch = { .q = q };

	reset_file(fd);
	for (unsigned i = 0; i < N; i++) {
		fill(data[i], sizeof(data[i]));
		CHECK_POST("write", store_queue_write(q, data[i], sizeof(data[i]),
						      (uint64_t)i * 8192, on_done, &w[i]));
	}
	CHECK_POST("barrier", store_queue_barrier(q, on_done, &b));
	for (unsigned i = 0; i < N; i++)
		CHECK_POST("read", store_queue_read(q, back[i], sizeof(back[i]), (uint64_t)i * 8192,
						    on_done, &r[i]));
	CHECK_POST("fence", store_queue_fence(q, on_done, &f));
	CHECK_POST("chained write", store_queue_write(q, data[0], 1, 0, on_chain, &ch));
	CHECK_INT("depth before free", 2 * N + 3, store_queue_depth(q));

	store_queue_free(q);
	check_comp("barrier", &b, 0);
	check_comp("fence", &f, 0);
	for (unsigned i = 0; i < N; i++) {
		check_comp("write", &w[i], 8192);
		check_comp("read", &r[i], 8192);
		CHECK(w[i].order < b.order && b.order < r[i].order,
		      "barrier at %u not between write %u and read %u", b.order, w[i].order,
		      r[i].order);
		CHECK(memcmp(data[i], back[i], 8192) == 0, "block %u read back different", i);
	}
	check_comp("chained write", &ch.first, 1);
	CHECK_INT("posting from a completion during free", -ESHUTDOWN, ch.post);
	CHECK_INT("the refused follow-up never completes", 0, ch.second.calls);
}

static void test_depth_and_args(int fd)
{
	struct store_queue *q;
	uint8_t buf[16] = { 0 };
	struct comp c[3] = { { 0 } };

	CHECK_INT("new with no threads", -EINVAL, store_queue_new(base, fd, 0, &q));
	CHECK_INT("new with too many threads", -EINVAL,
		  store_queue_new(base, fd, STORE_QUEUE_MAX_THREADS + 1, &q));
	store_queue_free(NULL);

	q = new_or_die(fd, 1);
	CHECK_INT("depth of a new queue", 0, store_queue_depth(q));
	CHECK_INT("read without a callback", -EINVAL,
		  store_queue_read(q, buf, sizeof(buf), 0, NULL, NULL));
	CHECK_INT("write of more than INT_MAX", -EINVAL,
		  store_queue_write(q, buf, (size_t)INT_MAX + 1, 0, on_done, &c[0]));
	CHECK_INT("write ending past the largest offset", -EINVAL,
		  store_queue_write(q, buf, sizeof(buf), UINT64_MAX - 4, on_done, &c[0]));
	CHECK_INT("read into NULL", -EINVAL, store_queue_read(q, NULL, 4, 0, on_done, &c[0]));
	CHECK_INT("depth after refused posts", 0, store_queue_depth(q));

	CHECK_POST("write", store_queue_write(q, buf, sizeof(buf), 0, on_done, &c[0]));
	CHECK_INT("depth after one post", 1, store_queue_depth(q));
	CHECK_POST("fence", store_queue_fence(q, on_done, &c[1]));
	CHECK_POST("read", store_queue_read(q, buf, sizeof(buf), 0, on_done, &c[2]));
	CHECK_INT("depth after three posts", 3, store_queue_depth(q));
	run_until_idle(q);
	CHECK_INT("depth once delivered", 0, store_queue_depth(q));
	check_comp("write", &c[0], sizeof(buf));
	check_comp("fence", &c[1], 0);
	check_comp("read", &c[2], sizeof(buf));
	for (unsigned i = 0; i < 3; i++)
		c[i] = (struct comp){ 0 };
	CHECK_POST("write", store_queue_write(q, buf, sizeof(buf), 0, on_done, &c[0]));
	CHECK_POST("barrier", store_queue_barrier(q, on_done, &c[1]));
	CHECK_INT("depth before drain", 2, store_queue_depth(q));
	store_queue_drain(q);
	CHECK_INT("depth after drain", 0, store_queue_depth(q));
	check_comp("write", &c[0], sizeof(buf));
	check_comp("barrier", &c[1], 0);
	store_queue_free(q);
}

/* Writes only where the node may write: none at first, then inside the
 * ranges set, never across their ends; reads anywhere. */
static void test_access(int fd)
{
	const struct store_range ranges[] = { { 4096, 8192 }, { 65536, 4096 } },
				 too_many[STORE_QUEUE_MAX_RANGES + 1] = { { 0, 1 } };
	struct store_queue *q;
	uint8_t buf[4096], seen[4096];
	struct comp c[3] = { { 0 } };

	memset(buf, 0x11, sizeof(buf));
	CHECK(pwrite(fd, buf, sizeof(buf), 0) == (ssize_t)sizeof(buf), "the first page");
	memset(buf, 0xab, sizeof(buf));
	CHECK_INT("new queue", 0, store_queue_new(base, fd, 1, &q));
	CHECK_INT("a write before any range", -EACCES,
		  store_queue_write(q, buf, sizeof(buf), 4096, on_done, &c[0]));
	CHECK_INT("more ranges than the most", -EINVAL,
		  store_queue_set_writable(q, too_many, STORE_QUEUE_MAX_RANGES + 1));
	CHECK_INT("two ranges", 0, store_queue_set_writable(q, ranges, 2));
	CHECK_INT("a write before the first range", -EACCES,
		  store_queue_write(q, buf, sizeof(buf), 0, on_done, &c[0]));
	CHECK_INT("a write across the first range's end", -EACCES,
		  store_queue_write(q, buf, sizeof(buf), 8192 + 2048, on_done, &c[0]));
	CHECK_INT("a write across both", -EACCES,
		  store_queue_write(q, buf, 65536, 4096, on_done, &c[0]));
	CHECK_INT("refused so far", 4, store_queue_refused(q));
	CHECK_INT("nothing posted", 0, store_queue_depth(q));
	CHECK_POST("a write at the first range's end",
		   store_queue_write(q, buf, sizeof(buf), 8192, on_done, &c[0]));
	CHECK_POST("a write in the second",
		   store_queue_write(q, buf, 16, 65536 + 4080, on_done, &c[1]));
	CHECK_POST("a read outside them",
		   store_queue_read(q, seen, sizeof(seen), 0, on_done, &c[2]));
	run_until_idle(q);
	check_comp("write", &c[0], sizeof(buf));
	check_comp("write in the second", &c[1], 16);
	check_comp("read", &c[2], sizeof(seen));
	CHECK(seen[0] == 0x11 && seen[4095] == 0x11, "a refused write left its bytes");
	CHECK_INT("no ranges again", 0, store_queue_set_writable(q, NULL, 0));
	CHECK_INT("a write once the ranges went", -EACCES,
		  store_queue_write(q, buf, sizeof(buf), 8192, on_done, &c[0]));
	store_queue_free(q);
}

/* Many mixed posts; how often a later-posted op is delivered before an
 * earlier one (printed, not checked). */
static void figure_out_of_order(int fd)
{
	struct store_queue *q = new_or_die(fd, THREADS);
	uint8_t *big = xmalloc(BIG), small[512];
	unsigned rounds = 20, small_first = 0;
	enum {
		N = 200
	};
	struct comp *c = xcalloc(N * sizeof(*c));
	uint8_t *buf = xmalloc((size_t)N * 65536);
	unsigned inversions = 0;
	double t0;

	reset_file(fd);
	fill(big, BIG);
	fill(small, sizeof(small));
	fill(buf, (size_t)N * 65536);
	for (unsigned i = 0; i < rounds; i++)
		small_first += big_then_small(q, big, small);

	t0 = now();
	for (unsigned i = 0; i < N; i++)
		CHECK_POST("write", store_queue_write(q, buf + (size_t)i * 65536, 1 + rng() % 65536,
						      (uint64_t)i * 65536, on_done, &c[i]));
	run_until_idle(q);
	for (unsigned i = 0; i < N; i++) {
		CHECK_INT("mixed write delivered once", 1, c[i].calls);
		CHECK(c[i].result > 0, "mixed write %u: %d", i, c[i].result);
		if (i > 0 && c[i].order < c[i - 1].order)
			inversions++;
	}
	printf("out of order: small write first in %u of %u big+small rounds; %u of %u "
	       "neighbours inverted in %u mixed writes (%.1f ms) on %d threads\n",
	       small_first, rounds, inversions, N - 1, N, (now() - t0) * 1e3, THREADS);

	store_queue_free(q);
	free(big);
	free(buf);
	free(c);
}

int main(void)
{
	struct timeval ms10 = { .tv_sec = 0, .tv_usec = 10000 };
	const char *tmp = getenv("TMPDIR");
	int fd;

	rng_seed(0x5704e004);
	loop_thread = pthread_self();
	snprintf(dir, sizeof(dir), "%s/test_store_queue.XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (!mkdtemp(dir))
		die("mkdtemp");
	snprintf(path, sizeof(path), "%s/store", dir);
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	if (fd < 0)
		die("open store");
	base = event_base_new();
	if (!base)
		die("event_base_new");
	tick = event_new(base, -1, EV_PERSIST, on_tick, NULL);
	if (!tick || event_add(tick, &ms10) < 0)
		die("tick timer");

	test_write_read_many(fd);
	test_fence(fd, false);
	test_fence(fd, true);
	test_eof(fd);
	test_bad_fd();
	test_drain(fd);
	test_free_outstanding(fd);
	test_depth_and_args(fd);
	test_access(fd);
	figure_out_of_order(fd);

	event_free(tick);
	event_base_free(base);
	close(fd);
	unlink(path);
	rmdir(dir);
	printf("%d checks, %d failures\n", checks, failures);
	return failures ? 1 : 0;
}
