/* ftvm-async-basic: libftvm's asynchronous page calls (ftvm.h, "Asynchronous
 * calls") on one connection to a real node, for tests/e2e/test_async.sh.
 *
 *   ftvm-async-basic SOCKET
 *
 * In order, each a line "ok: ..." when it holds:
 *  - with nothing submitted, a reap returns 0 at once (timeout 0 or -1) and
 *    the completion descriptor is not readable;
 *  - 32 writes in flight, the first to a page another client holds a write
 *    pointer to: the other 31 complete, each once, with the CRC-32C of their
 *    block, while the first waits; a reap with timeout 0 returns 0 and the
 *    descriptor stays unreadable; the holder lets go, the descriptor becomes
 *    readable and the first completes, last;
 *  - FTVM_SUBMIT_MAX writes (two rounds over 64 pages) are taken, one more is
 *    refused -EAGAIN; all complete once, and every page holds its second
 *    round's bytes, read back with ftvm_read_page() and with submitted reads;
 *  - failures complete as the blocking calls return them, with the same
 *    reason: no such allocation, a page past the end, a block too long, a
 *    buffer too short (-ENOBUFS with the block size); a bad GUID, a NULL
 *    buffer, a short completion row are refused at the call;
 *  - blocking calls between submits on the same client take nothing from
 *    the completions, and a row longer than this library's struct gets
 *    zeros past it.
 *
 * Exit 0 when everything held, 1 otherwise ("FAIL: ..." says what), 3 when
 * the node cannot be reached. */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "crc32c.h"
#include "ftvm.h"

#define PAGES 64
#define FIRST_ROUND 32

static struct ftvm_client *c, *holder;
static struct ftvm_alloc_info alloc;
static uint8_t *expected[PAGES]; /* each page's bytes as last written */

static void fail(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

static void fail(const char *fmt, ...)
{
	va_list ap;

	fputs("FAIL: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	exit(1);
}

static void ok(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void ok(const char *fmt, ...)
{
	va_list ap;

	fputs("ok: ", stdout);
	va_start(ap, fmt);
	vprintf(fmt, ap);
	va_end(ap);
	putchar('\n');
	fflush(stdout);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* The bytes of write seq: every 8 bytes say seq and where they are. */
static void fill(uint8_t *buf, size_t len, uint64_t seq)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t word = (seq << 32) ^ (i / 8) ^ 0xa5a5f00du;

		memcpy(buf + i, &word, len - i < 8 ? len - i : 8);
	}
}

static bool readable(int fd, int ms)
{
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

static void submit_write(uint64_t page, uint64_t seq, uint64_t cookie)
{
	int r;

	fill(expected[page], alloc.block_size, seq);
	r = ftvm_submit_write_page(c, alloc.guid, page, expected[page], alloc.block_size, cookie);
	if (r < 0)
		fail("submit write of page %" PRIu64 ": %s (%s)", page, ftvm_strerror(r),
		     ftvm_last_error(c));
}

/* Reaps until want completions came, within ms; returns how many came. */
static unsigned reap_n(struct ftvm_completion *out, unsigned want, int ms)
{
	uint64_t deadline = now_ms() + (uint64_t)ms;
	unsigned got = 0;
	int r;

	while (got < want && now_ms() < deadline) {
		r = ftvm_reap(c, out + got, want - got, (int)(deadline - now_ms()));
		if (r < 0)
			fail("reap: %s (%s)", ftvm_strerror(r), ftvm_last_error(c));
		got += (unsigned)r;
	}
	return got;
}

/* The completion for cookie among n: exactly one. */
static const struct ftvm_completion *one(const struct ftvm_completion *out, unsigned n,
					 uint64_t cookie)
{
	const struct ftvm_completion *found = NULL;

	for (unsigned i = 0; i < n; i++) {
		if (out[i].cookie != cookie)
			continue;
		if (found)
			fail("cookie %" PRIu64 " completed twice", cookie);
		found = &out[i];
	}
	if (!found)
		fail("cookie %" PRIu64 " did not complete", cookie);
	return found;
}

static void nothing_submitted(int fd)
{
	struct ftvm_completion out[4];
	uint64_t t0 = now_ms();
	int r;

	if (readable(fd, 0))
		fail("the completion descriptor is readable with nothing submitted");
	r = ftvm_reap(c, out, 4, 0);
	if (r != 0)
		fail("reap with nothing submitted, timeout 0: %d", r);
	r = ftvm_reap(c, out, 4, -1);
	if (r != 0 || now_ms() - t0 > 1000)
		fail("reap with nothing submitted, timeout -1: %d after %" PRIu64 " ms", r,
		     now_ms() - t0);
	ok("nothing submitted: reap returns 0 at once, the descriptor is not readable");
}

/* 32 in flight; the first waits for a page another client holds. */
static void out_of_order(int fd)
{
	struct ftvm_completion out[FIRST_ROUND];
	const struct ftvm_completion *x;
	void *held;
	unsigned got;
	int r;

	r = ftvm_get_write_pointer(holder, alloc.guid, 0, true, &held, NULL);
	if (r < 0)
		fail("the holder's write pointer: %s (%s)", ftvm_strerror(r),
		     ftvm_last_error(holder));
	for (uint64_t p = 0; p < FIRST_ROUND; p++)
		submit_write(p, p, 1000 + p);
	got = reap_n(out, FIRST_ROUND - 1, 10000);
	if (got != FIRST_ROUND - 1)
		fail("%u of the %d writes to free pages completed", got, FIRST_ROUND - 1);
	for (uint64_t p = 1; p < FIRST_ROUND; p++) {
		x = one(out, got, 1000 + p);
		if (x->result != 0)
			fail("write of page %" PRIu64 ": %d (%s)", p, x->result, x->error);
		if (x->crc32c != crc32c(0, expected[p], alloc.block_size) || x->len != 0 ||
		    x->error[0] || x->from_node)
			fail("write of page %" PRIu64 ": crc32c 0x%08x len %zu error '%s'", p,
			     x->crc32c, x->len, x->error);
	}
	r = ftvm_reap(c, out, FIRST_ROUND, 0);
	if (r != 0)
		fail("reap with timeout 0 while page 0's write waits: %d (cookie %" PRIu64 ")", r,
		     out[0].cookie);
	if (readable(fd, 200))
		fail("the completion descriptor is readable while page 0's write waits");
	ok("32 writes in flight: 31 completed once each with their CRC-32C while the write "
	   "of a held page waits; a reap with timeout 0 returns 0, the descriptor is not "
	   "readable");

	r = ftvm_release_pointer(holder, alloc.guid, 0, false, NULL);
	if (r < 0)
		fail("the holder's release: %s (%s)", ftvm_strerror(r), ftvm_last_error(holder));
	if (!readable(fd, 5000))
		fail("the completion descriptor did not become readable once page 0 was free");
	got = reap_n(out, 1, 5000);
	if (got != 1 || out[0].cookie != 1000 || out[0].result != 0)
		fail("page 0's write: %u completions, cookie %" PRIu64 " result %d (%s)", got,
		     out[0].cookie, out[0].result, out[0].error);
	ok("the held page let go: the descriptor became readable, its write completed, last");
}

static void full_queue(void)
{
	struct ftvm_completion *out = calloc(FTVM_SUBMIT_MAX, sizeof(*out));
	uint8_t *buf = malloc(alloc.block_size);
	char why[512];
	unsigned got;
	size_t len;
	int r;

	if (!out || !buf)
		fail("out of memory");
	/* Two rounds over the pages: the second of each page, submitted later,
	 * must be what stays. */
	for (uint64_t s = 0; s < FTVM_SUBMIT_MAX; s++)
		submit_write(s % PAGES, 100 + s, 2000 + s);
	r = ftvm_submit_write_page(c, alloc.guid, 0, buf, alloc.block_size, 9999);
	if (r != -EAGAIN)
		fail("submit past FTVM_SUBMIT_MAX: %d, want -EAGAIN", r);
	snprintf(why, sizeof(why), "%s", ftvm_last_error(c));
	if (!strstr(why, "reap first"))
		fail("the -EAGAIN says '%s'", why);
	got = reap_n(out, FTVM_SUBMIT_MAX, 20000);
	if (got != FTVM_SUBMIT_MAX)
		fail("%u of %d writes completed", got, FTVM_SUBMIT_MAX);
	for (uint64_t s = 0; s < FTVM_SUBMIT_MAX; s++)
		if (one(out, got, 2000 + s)->result != 0)
			fail("write %" PRIu64 ": %s", s, one(out, got, 2000 + s)->error);
	if (ftvm_reap(c, out, 1, 0) != 0)
		fail("a completion more than was submitted");
	ok("%d writes taken, one more refused -EAGAIN ('%s'); all completed once", FTVM_SUBMIT_MAX,
	   why);

	for (uint64_t p = 0; p < PAGES; p++) {
		r = ftvm_read_page(c, alloc.guid, p, buf, alloc.block_size, &len, NULL);
		if (r < 0)
			fail("read page %" PRIu64 ": %s (%s)", p, ftvm_strerror(r),
			     ftvm_last_error(c));
		if (len != alloc.block_size || memcmp(buf, expected[p], len) != 0)
			fail("page %" PRIu64 " reads back other bytes than its last write", p);
	}
	ok("ftvm_read_page(): each of %d pages holds its last write's bytes", PAGES);
	free(out);
	free(buf);
}

static void submitted_reads(void)
{
	struct ftvm_completion out[PAGES];
	uint8_t *bufs[PAGES];
	const struct ftvm_completion *x;
	unsigned got;
	int r;

	for (uint64_t p = 0; p < PAGES; p++) {
		bufs[p] = malloc(alloc.block_size);
		if (!bufs[p])
			fail("out of memory");
		memset(bufs[p], 0xee, alloc.block_size);
		r = ftvm_submit_read_page(c, alloc.guid, p, bufs[p], alloc.block_size, 3000 + p);
		if (r < 0)
			fail("submit read of page %" PRIu64 ": %s (%s)", p, ftvm_strerror(r),
			     ftvm_last_error(c));
	}
	got = reap_n(out, PAGES, 10000);
	if (got != PAGES)
		fail("%u of %d reads completed", got, PAGES);
	for (uint64_t p = 0; p < PAGES; p++) {
		x = one(out, got, 3000 + p);
		if (x->result != 0)
			fail("read of page %" PRIu64 ": %d (%s)", p, x->result, x->error);
		if (x->len != alloc.block_size || memcmp(bufs[p], expected[p], x->len) != 0)
			fail("submitted read of page %" PRIu64 ": other bytes (len %zu)", p,
			     x->len);
		if (x->crc32c != crc32c(0, expected[p], alloc.block_size))
			fail("submitted read of page %" PRIu64 ": crc32c 0x%08x", p, x->crc32c);
		free(bufs[p]);
	}
	ok("%d submitted reads: each page's bytes, length and CRC-32C", PAGES);
}

/* A submitted request fails as its blocking call: the same result and reason. */
static void same_failure(const char *what, const char *guid, uint64_t page, size_t len, bool read,
			 int want)
{
	struct ftvm_completion out[1];
	uint8_t *buf = calloc(1, len ? len : 1);
	char blocking[512];
	size_t got_len = 0;
	bool from_node;
	int r, sync;

	if (!buf)
		fail("out of memory");
	if (read)
		sync = ftvm_read_page(c, guid, page, buf, len, &got_len, NULL);
	else
		sync = ftvm_write_page(c, guid, page, buf, len, NULL);
	snprintf(blocking, sizeof(blocking), "%s", ftvm_last_error(c));
	from_node = ftvm_last_error_from_node(c);
	if (read)
		r = ftvm_submit_read_page(c, guid, page, buf, len, 4000);
	else
		r = ftvm_submit_write_page(c, guid, page, buf, len, 4000);
	if (r < 0)
		fail("%s: submit: %s (%s)", what, ftvm_strerror(r), ftvm_last_error(c));
	if (reap_n(out, 1, 10000) != 1)
		fail("%s: no completion", what);
	if (sync != want || out[0].result != want || strcmp(out[0].error, blocking) != 0 ||
	    out[0].from_node != from_node)
		fail("%s: blocking %d '%s' (from node %d), submitted %d '%s' (from node %d), want "
		     "%d",
		     what, sync, blocking, from_node, out[0].result, out[0].error, out[0].from_node,
		     want);
	if (read && want == -ENOBUFS && (out[0].len != alloc.block_size || got_len != out[0].len))
		fail("%s: len %zu, the blocking call's %zu, want %u", what, out[0].len, got_len,
		     alloc.block_size);
	ok("%s: %s, '%s', as the blocking call", what, ftvm_strerror(want), out[0].error);
	free(buf);
}

static void refused_at_call(void)
{
	struct ftvm_completion out[2];
	int r;

	r = ftvm_submit_write_page(c, "", 0, NULL, 0, 1);
	if (r != -EINVAL)
		fail("an empty GUID: %d", r);
	r = ftvm_submit_write_page(c, alloc.guid, 0, NULL, 8, 1);
	if (r != -EINVAL)
		fail("NULL data of 8 bytes: %d", r);
	r = ftvm_submit_read_page(c, alloc.guid, 0, NULL, 8, 1);
	if (r != -EINVAL)
		fail("a NULL buffer of 8 bytes: %d", r);
	r = ftvm_reap_sized(c, out, 2, 0, 8);
	if (r != -EINVAL)
		fail("a completion row of 8 bytes: %d", r);
	r = ftvm_reap(c, out, 0, 0);
	if (r != -EINVAL)
		fail("room for no completion: %d", r);
	if (ftvm_reap(c, out, 2, 0) != 0)
		fail("a refused submit left a completion");
	ok("refused at the call, with no completion: a bad GUID, NULL data or buffer, a short "
	   "row, no room");
}

/* Blocking calls between submits: the replies they read for the submitted
 * requests stay completions, and a longer row gets zeros past the struct. */
static void mixed(void)
{
	struct {
		struct ftvm_completion c;
		uint8_t tail[24];
	} rows[16];
	struct ftvm_node_status st;
	uint8_t *buf = malloc(alloc.block_size);
	uint64_t seen = 0;
	unsigned got = 0;
	size_t len;
	int r;

	if (!buf)
		fail("out of memory");
	for (uint64_t s = 0; s < 16; s++)
		submit_write(s, 500 + s, 5000 + s);
	r = ftvm_status(c, &st);
	if (r == 0)
		r = ftvm_write_page(c, alloc.guid, PAGES - 1, expected[0], alloc.block_size, NULL);
	if (r == 0)
		r = ftvm_read_page(c, alloc.guid, PAGES - 1, buf, alloc.block_size, &len, NULL);
	if (r < 0)
		fail("blocking calls among submitted ones: %s (%s)", ftvm_strerror(r),
		     ftvm_last_error(c));
	if (memcmp(buf, expected[0], alloc.block_size) != 0)
		fail("the blocking read got other bytes than the blocking write's");
	memset(rows, 0xff, sizeof(rows));
	while (got < 16) {
		r = ftvm_reap_sized(c, &rows[got].c, 16 - got, 10000, sizeof(rows[0]));
		if (r <= 0)
			fail("reap after blocking calls: %d (%s), %u of 16", r, ftvm_last_error(c),
			     got);
		got += (unsigned)r;
	}
	for (unsigned i = 0; i < got; i++) {
		uint64_t k = rows[i].c.cookie - 5000;

		if (k >= 16 || (seen & (UINT64_C(1) << k)))
			fail("cookie %" PRIu64 " unknown or twice", rows[i].c.cookie);
		seen |= UINT64_C(1) << k;
		if (rows[i].c.result != 0)
			fail("write %" PRIu64 ": %s", k, rows[i].c.error);
		for (size_t b = sizeof(rows[i].c); b < sizeof(rows[i]); b++)
			if (((uint8_t *)&rows[i])[b] != 0)
				fail("byte %zu of a %zu byte row is not zero", b, sizeof(rows[i]));
	}
	ok("blocking status, write and read among 16 submitted writes: all 16 completed once; "
	   "a %zu byte row has zeros past the struct",
	   sizeof(rows[0]));
	free(buf);
}

int main(int argc, char **argv)
{
	struct ftvm_node_status st;
	int r, fd, fd2;

	if (argc != 2) {
		fprintf(stderr, "usage: ftvm-async-basic SOCKET\n");
		return 2;
	}
	if (ftvm_connect(argv[1], &c) < 0 || ftvm_connect(argv[1], &holder) < 0) {
		fprintf(stderr, "ftvm-async-basic: cannot connect to %s\n", argv[1]);
		return 3;
	}
	r = ftvm_status(c, &st);
	if (r == 0)
		r = ftvm_alloc(c, (uint64_t)PAGES * st.page_size, NULL, false, NULL, 0, &alloc);
	if (r < 0)
		fail("status or alloc: %s (%s)", ftvm_strerror(r), ftvm_last_error(c));
	for (int p = 0; p < PAGES; p++)
		if (!(expected[p] = calloc(1, alloc.block_size)))
			fail("out of memory");
	fd = ftvm_completion_fd(c);
	if (fd < 0)
		fail("completion fd: %s (%s)", ftvm_strerror(fd), ftvm_last_error(c));

	nothing_submitted(fd);
	out_of_order(fd);
	full_queue();
	submitted_reads();
	same_failure("no such allocation", "no-such-allocation", 0, alloc.block_size, false,
		     -ENOENT);
	same_failure("a page past the end", alloc.guid, PAGES + 5, alloc.block_size, false,
		     -EINVAL);
	same_failure("a block too long", alloc.guid, 1, alloc.block_size + 1, false, -EINVAL);
	same_failure("a read into a short buffer", alloc.guid, 1, 100, true, -ENOBUFS);
	refused_at_call();
	mixed();
	fd2 = ftvm_completion_fd(c);
	if (fd2 != fd)
		fail("the completion descriptor changed: %d, then %d", fd, fd2);
	ok("the completion descriptor stayed %d", fd);

	r = ftvm_free(c, alloc.guid);
	if (r < 0)
		fail("free: %s (%s)", ftvm_strerror(r), ftvm_last_error(c));
	for (int p = 0; p < PAGES; p++)
		free(expected[p]);
	ftvm_disconnect(holder);
	ftvm_disconnect(c);
	printf("async: ok\n");
	return 0;
}
