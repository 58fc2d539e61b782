/* ftvm-hold: takes one read or write pointer to a page and holds it for as
 * long as a test wants, so tests can drive the lock paths of VMM.md ("The
 * lock rule across the pair") from the shell.
 *
 *   ftvm-hold SOCKET GUID PAGE read|write [--wait] [--release-after-stdin]
 *             [--modify BYTE] [--modified]
 *   ftvm-hold SOCKET GUID PAGE release [--modified]
 *
 * read|write: connects, prints "asking ..." and asks for the pointer (with
 * --wait it waits in the node's paging queue), prints "held ..." once it has
 * it; with --release-after-stdin it then holds it until its standard input
 * reaches end of file (so the test decides how long), otherwise it lets go at
 * once. With --modify BYTE (write only) it fills the block with BYTE first and
 * releases it as modified; --modified releases as modified without writing
 * (for a read pointer the node must refuse that: ftvm-hold then reports the
 * refusal, releases the pointer plainly and exits 1). It prints "releasing
 * ..." just before the release and "released crc32c 0x..." after it.
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
			"[--release-after-stdin] [--modify BYTE] [--modified]\n"
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

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "wait", no_argument, NULL, 'w' },
		{ "release-after-stdin", no_argument, NULL, 's' },
		{ "modify", required_argument, NULL, 'm' },
		{ "modified", no_argument, NULL, 'M' },
		{ 0 },
	};
	bool wait = false, after_stdin = false, modify = false, modified = false, write;
	const char *sock, *guid, *mode;
	struct ftvm_client *c;
	uint64_t page, byte = 0;
	uint32_t crc = 0;
	char what[FTVM_GUID_MAX + 64];
	size_t len = 0;
	void *p = NULL;
	int opt, r, rc = EXIT_DONE;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'w':
			wait = true;
			break;
		case 's':
			after_stdin = true;
			break;
		case 'm':
			if (!parse_u64(optarg, &byte) || byte > 255) {
				fprintf(stderr,
					"ftvm-hold: --modify wants a byte, 0 to 255 "
					"(got '%s')\n",
					optarg);
				return usage();
			}
			modify = modified = true;
			break;
		case 'M':
			modified = true;
			break;
		default:
			return usage();
		}
	}
	if (argc - optind != 4)
		return usage();
	sock = argv[optind];
	guid = argv[optind + 1];
	mode = argv[optind + 3];
	if (!parse_u64(argv[optind + 2], &page)) {
		fprintf(stderr, "ftvm-hold: '%s' is not a page number\n", argv[optind + 2]);
		return usage();
	}
	if (strcmp(mode, "read") != 0 && strcmp(mode, "write") != 0 &&
	    strcmp(mode, "release") != 0) {
		fprintf(stderr, "ftvm-hold: '%s' is not read, write or release\n", mode);
		return usage();
	}
	write = strcmp(mode, "write") == 0;
	if (modify && !write) {
		fprintf(stderr, "ftvm-hold: --modify writes through a write pointer only\n");
		return usage();
	}
	if (strcmp(mode, "release") == 0 && (wait || after_stdin)) {
		fprintf(stderr, "ftvm-hold: release takes --modified alone\n");
		return usage();
	}

	r = ftvm_connect(sock, &c);
	if (r < 0) {
		fprintf(stderr, "ftvm-hold: cannot reach the node at %s: %s\n", sock,
			ftvm_strerror(r));
		return EXIT_UNREACHABLE;
	}

	if (strcmp(mode, "release") == 0) {
		snprintf(what, sizeof(what), "release %s page %" PRIu64 "%s", guid, page,
			 modified ? " as modified" : "");
		r = ftvm_release_pointer(c, guid, page, modified, &crc);
		if (r < 0) {
			rc = call_failed(c, what, r);
		} else {
			printf("released crc32c 0x%08x t=%" PRIu64 "\n", crc, now_ns());
			fflush(stdout);
		}
		ftvm_disconnect(c);
		return rc;
	}

	snprintf(what, sizeof(what), "get %s pointer to %s page %" PRIu64, mode, guid, page);
	printf("asking %s pointer to %s page %" PRIu64 "%s t=%" PRIu64 "\n", mode, guid, page,
	       wait ? " (wait)" : "", now_ns());
	fflush(stdout);
	if (write)
		r = ftvm_get_write_pointer(c, guid, page, wait, &p, &len);
	else
		r = ftvm_get_read_pointer(c, guid, page, wait, (const void **)&p, &len);
	if (r < 0) {
		rc = call_failed(c, what, r);
		ftvm_disconnect(c);
		return rc;
	}
	printf("held %s %s page %" PRIu64 ": %zu bytes, crc32c 0x%08x t=%" PRIu64 "\n", mode, guid,
	       page, len, crc32c(p, len), now_ns());
	fflush(stdout);

	if (after_stdin)
		wait_for_stdin_eof();
	if (modify)
		memset(p, (int)byte, len);

	snprintf(what, sizeof(what), "release %s page %" PRIu64 "%s", guid, page,
		 modified ? " as modified" : "");
	printf("releasing%s t=%" PRIu64 "\n", modified ? " modified" : "", now_ns());
	fflush(stdout);
	r = ftvm_release_pointer(c, guid, page, modified, &crc);
	if (r < 0) {
		rc = call_failed(c, what, r);
		if (rc == EXIT_UNREACHABLE || !modified || write) {
			ftvm_disconnect(c);
			return rc;
		}
		/* A read pointer released as modified: the node refused and the
		 * pointer is still held; let it go the right way. */
		r = ftvm_release_pointer(c, guid, page, false, &crc);
		if (r < 0) {
			call_failed(c, "plain release after the refusal", r);
			ftvm_disconnect(c);
			return EXIT_FAILED;
		}
	}
	printf("released crc32c 0x%08x t=%" PRIu64 "\n", crc, now_ns());
	fflush(stdout);
	ftvm_disconnect(c);
	return rc;
}
