/* ftvm-hold: takes one read or write pointer to a page and holds it for as
 * long as a test wants, so tests can drive the lock paths of vmm/VMM.md ("The
 * lock rule across the pair") from the shell.
 *
 *   ftvm-hold SOCKET GUID PAGE read|write [--wait] [--release-after-stdin]
 *             [--modify BYTE] [--scribble BYTE] [--modified] [--count N]
 *   ftvm-hold SOCKET GUID PAGE release [--modified]
 *
 * read|write: connects, prints "asking ..." and asks for the pointer (with
 * --wait it waits in the node's paging queue), prints "held ..." once it has
 * it; with --release-after-stdin it then holds it until its standard input
 * reaches end of file (so the test decides how long), otherwise it lets go at
 * once. With --modify BYTE (write only) it fills the block with BYTE first and
 * releases it as modified; --modified releases as modified without writing
 * (for a read pointer the node must refuse that: ftvm-hold then reports the
 * refusal, releases the pointer plainly and exits 1). With --scribble BYTE
 * (write only) it fills the block with BYTE as soon as it holds it, before
 * its "held" line, as a client half way through its write: the release is
 * still plain unless --modified is given too (the node must refuse a plain
 * one: ftvm-hold then reports the refusal, releases the pointer as
 * modified and exits 1). --scribble on a read pointer writes through it,
 * which libftvm's read-only view of the pool must stop: ftvm-hold dies of
 * SIGSEGV before its "held" line. It prints "releasing
 * ..." just before the release and "released crc32c 0x..." after it. With
 * --count N it takes pointers to pages PAGE .. PAGE + N - 1 in turn (a "held"
 * line each, then "holding N pointers"), and releases them all the same way
 * (a "releasing" and a "released" line each).
 *
 * release: only calls ftvm_release_pointer() on a fresh connection, which
 * holds no pointer, so the node must refuse it (exit 1).
 *
 * Each line ends with t=NANOSECONDS of CLOCK_MONOTONIC, taken after a grant
 * arrived or before a release left, so lines of several ftvm-hold processes
 * can be put in order. Nothing printed depends on the frame offset, which
 * differs between the nodes. Lines go to stdout, flushed at once; errors to
 * stderr with ftvm_last_error().
 *
 * Exit: 0 done, 1 the node refused or a call failed, 2 usage, 3 the node
 * cannot be reached. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftvm.h"

enum {
	EXIT_DONE = 0,
	EXIT_FAILED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3
};

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* CRC-32C (Castagnoli, reflected), as the node computes it: a pure libftvm
 * client does not link the daemon's common library. */
static uint32_t crc32c(const uint8_t *p, size_t len)
{
	uint32_t crc = 0xFFFFFFFFu;

	for (size_t i = 0; i < len; i++) {
		crc ^= p[i];
		for (int k = 0; k < 8; k++)
			crc = crc & 1 ? (crc >> 1) ^ 0x82F63B78u : crc >> 1;
	}
	return crc ^ 0xFFFFFFFFu;
}

static int usage(void)
{
	fprintf(stderr, "usage: ftvm-hold SOCKET GUID PAGE read|write [--wait] "
			"[--release-after-stdin] [--modify BYTE] [--scribble BYTE] [--modified]\n"
			"                 [--count N]\n"
			"       ftvm-hold SOCKET GUID PAGE release [--modified]\n");
	return EXIT_USAGE;
}

/* Like ftvmctl: the node's refusal is 1, a node gone or silent is 3. */
static int call_failed(struct ftvm_client *c, const char *what, int r)
{
	const char *detail = ftvm_last_error(c);

	fprintf(stderr, "ftvm-hold: %s: %s (%s)\n", what, ftvm_strerror(r),
		detail[0] ? detail : "no details");
	if (!ftvm_last_error_from_node(c) &&
	    (r == -ETIMEDOUT || r == -ECONNRESET || r == -ENOTCONN || r == -EPIPE))
		return EXIT_UNREACHABLE;
	return EXIT_FAILED;
}

static void wait_for_stdin_eof(void)
{
	char buf[256];
	ssize_t n;

	do
		n = read(STDIN_FILENO, buf, sizeof(buf));
	while (n > 0 || (n < 0 && errno == EINTR));
}

static bool parse_u64(const char *s, uint64_t *ret)
{
	char *end;

	if (!*s || *s == '-')
		return false;
	errno = 0;
	*ret = strtoull(s, &end, 0);
	return errno == 0 && !*end;
}

/* A byte option's value (0 to 255); false, with a message, when it is not. */
static bool parse_byte(const char *opt, const char *s, uint8_t *ret)
{
	uint64_t byte;

	if (!parse_u64(s, &byte) || byte > 255) {
		fprintf(stderr, "ftvm-hold: --%s wants a byte, 0 to 255 (got '%s')\n", opt, s);
		return false;
	}
	*ret = (uint8_t)byte;
	return true;
}

struct holder {
	const char *guid, *mode;
	bool write, wait, modify, modified, scribble;
	uint8_t byte, scribble_byte;
};

struct block {
	void *p;
	size_t len;
};

static int take(struct ftvm_client *c, const struct holder *h, uint64_t page, struct block *b)
{
	char what[FTVM_GUID_MAX + 64];
	int r;

	snprintf(what, sizeof(what), "get %s pointer to %s page %" PRIu64, h->mode, h->guid, page);
	printf("asking %s pointer to %s page %" PRIu64 "%s t=%" PRIu64 "\n", h->mode, h->guid, page,
	       h->wait ? " (wait)" : "", now_ns());
	fflush(stdout);
	if (h->write)
		r = ftvm_get_write_pointer(c, h->guid, page, h->wait, &b->p, &b->len);
	else
		r = ftvm_get_read_pointer(c, h->guid, page, h->wait, (const void **)&b->p, &b->len);
	if (r < 0)
		return call_failed(c, what, r);
	if (h->scribble) {
		if (!h->write) {
			printf("scribbling through the read pointer t=%" PRIu64 "\n", now_ns());
			fflush(stdout);
		}
		memset(b->p, h->scribble_byte, b->len);
	}
	printf("held %s %s page %" PRIu64 ": %zu bytes, crc32c 0x%08x t=%" PRIu64 "\n", h->mode,
	       h->guid, page, b->len, crc32c(b->p, b->len), now_ns());
	fflush(stdout);
	return EXIT_DONE;
}

static int let_go(struct ftvm_client *c, const struct holder *h, uint64_t page, struct block *b)
{
	char what[FTVM_GUID_MAX + 64];
	uint32_t crc = 0;
	int r, rc = EXIT_DONE;

	if (h->modify)
		memset(b->p, h->byte, b->len);
	snprintf(what, sizeof(what), "release %s page %" PRIu64 "%s", h->guid, page,
		 h->modified ? " as modified" : "");
	printf("releasing%s t=%" PRIu64 "\n", h->modified ? " modified" : "", now_ns());
	fflush(stdout);
	r = ftvm_release_pointer(c, h->guid, page, h->modified, &crc);
	if (r < 0) {
		rc = call_failed(c, what, r);
		if (rc == EXIT_UNREACHABLE || r != -EINVAL || h->modified == h->write)
			return rc;
		/* A read pointer released as modified, or a write pointer
		 * written into released as not: the node refused and the
		 * pointer is still held; let it go the right way. */
		r = ftvm_release_pointer(c, h->guid, page, !h->modified, &crc);
		if (r < 0) {
			call_failed(c,
				    h->write ? "release as modified after the refusal"
					     : "plain release after the refusal",
				    r);
			return EXIT_FAILED;
		}
	}
	printf("released crc32c 0x%08x t=%" PRIu64 "\n", crc, now_ns());
	fflush(stdout);
	return rc;
}

/* The options into h (and the rest); a usage exit code, or -1 to go on. */
static int parse(int argc, char **argv, struct holder *h, const char **ret_sock, uint64_t *ret_page,
		 uint64_t *ret_count, bool *ret_after_stdin)
{
	static const struct option options[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "release-after-stdin", no_argument, NULL, 's' },
		{ "modify", required_argument, NULL, 'm' },
		{ "scribble", required_argument, NULL, 'S' },
		{ "modified", no_argument, NULL, 'M' },
		{ "count", required_argument, NULL, 'c' },
		{ 0 },
	};
	int opt;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'w':
			h->wait = true;
			break;
		case 's':
			*ret_after_stdin = true;
			break;
		case 'm':
			if (!parse_byte("modify", optarg, &h->byte))
				return usage();
			h->modify = h->modified = true;
			break;
		case 'S':
			if (!parse_byte("scribble", optarg, &h->scribble_byte))
				return usage();
			h->scribble = true;
			break;
		case 'M':
			h->modified = true;
			break;
		case 'c':
			if (!parse_u64(optarg, ret_count) || *ret_count == 0 ||
			    *ret_count > 65536) {
				fprintf(stderr, "ftvm-hold: --count wants 1 to 65536 (got '%s')\n",
					optarg);
				return usage();
			}
			break;
		default:
			return usage();
		}
	}
	if (argc - optind != 4)
		return usage();
	*ret_sock = argv[optind];
	h->guid = argv[optind + 1];
	h->mode = argv[optind + 3];
	if (!parse_u64(argv[optind + 2], ret_page)) {
		fprintf(stderr, "ftvm-hold: '%s' is not a page number\n", argv[optind + 2]);
		return usage();
	}
	if (strcmp(h->mode, "read") != 0 && strcmp(h->mode, "write") != 0 &&
	    strcmp(h->mode, "release") != 0) {
		fprintf(stderr, "ftvm-hold: '%s' is not read, write or release\n", h->mode);
		return usage();
	}
	h->write = strcmp(h->mode, "write") == 0;
	if (h->modify && !h->write) {
		fprintf(stderr, "ftvm-hold: --modify writes through a write pointer only\n");
		return usage();
	}
	if (strcmp(h->mode, "release") == 0 && (h->wait || *ret_after_stdin || *ret_count > 1)) {
		fprintf(stderr, "ftvm-hold: release takes --modified alone\n");
		return usage();
	}
	return -1;
}

/* release: a fresh connection holds no pointer, so the node must refuse. */
static int release_unheld(struct ftvm_client *c, const struct holder *h, uint64_t page)
{
	char what[FTVM_GUID_MAX + 64];
	uint32_t crc = 0;
	int r;

	snprintf(what, sizeof(what), "release %s page %" PRIu64 "%s", h->guid, page,
		 h->modified ? " as modified" : "");
	r = ftvm_release_pointer(c, h->guid, page, h->modified, &crc);
	if (r < 0)
		return call_failed(c, what, r);
	printf("released crc32c 0x%08x t=%" PRIu64 "\n", crc, now_ns());
	fflush(stdout);
	return EXIT_DONE;
}

int main(int argc, char **argv)
{
	struct holder h = { 0 };
	bool after_stdin = false;
	const char *sock = NULL;
	struct ftvm_client *c;
	uint64_t page = 0, count = 1, i;
	struct block *blocks;
	int r, rc = parse(argc, argv, &h, &sock, &page, &count, &after_stdin);

	if (rc >= 0)
		return rc;
	rc = EXIT_DONE;
	r = ftvm_connect(sock, &c);
	if (r < 0) {
		fprintf(stderr, "ftvm-hold: cannot reach the node at %s: %s\n", sock,
			ftvm_strerror(r));
		return EXIT_UNREACHABLE;
	}
	if (strcmp(h.mode, "release") == 0) {
		rc = release_unheld(c, &h, page);
		ftvm_disconnect(c);
		return rc;
	}
	blocks = calloc(count, sizeof(*blocks));
	if (!blocks) {
		fprintf(stderr, "ftvm-hold: out of memory\n");
		ftvm_disconnect(c);
		return EXIT_FAILED;
	}
	for (i = 0; i < count && rc == EXIT_DONE; i++)
		rc = take(c, &h, page + i, &blocks[i]);
	if (rc != EXIT_DONE)
		i--; /* the one that failed is not held */
	if (rc == EXIT_DONE && count > 1) {
		printf("holding %" PRIu64 " pointers t=%" PRIu64 "\n", count, now_ns());
		fflush(stdout);
	}
	if (rc == EXIT_DONE && after_stdin)
		wait_for_stdin_eof();
	/* What was taken is let go, whatever failed meanwhile. */
	for (uint64_t k = 0; k < i && rc != EXIT_UNREACHABLE; k++) {
		int released = let_go(c, &h, page + k, &blocks[k]);

		if (rc == EXIT_DONE)
			rc = released;
	}
	free(blocks);
	ftvm_disconnect(c);
	return rc;
}
