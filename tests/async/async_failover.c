/* ftvm-async-failover: a ftvm_connect_pair() client that keeps many page
 * writes in flight with the asynchronous calls (ftvm.h, "Asynchronous
 * calls") while a test kills its node, then checks what each write's
 * completion said against what the survivor holds. For
 * tests/e2e/test_async_failover.sh.
 *
 *   ftvm-async-failover [--window W] [--pages P] [--policy NAME --block-size B]
 *                       [--total N | --after-move M] [--go-on-stdin]
 *                       SOCKET_A SOCKET_B
 *
 * It allocates P pages (default 256; of B bytes each under --policy, else of
 * the node's page size) and writes seq 0, 1, 2... to page seq % P, each block
 * filled with a pattern of its seq, keeping W writes (default 32) submitted
 * and not reaped. With --total it submits N writes, with --after-move it goes
 * on until it saw the client move and M writes completed OK after that. It
 * then reaps what is left and reads every page back from the node it talks
 * to (ftvm_read_page(), tried again for up to 30 s while the survivor
 * settles): a page must hold the bytes of its last write that completed OK,
 * or of a later write of it whose outcome is unknown (it may have applied),
 * never those of a write that failed as not applied, nor older ones.
 * --go-on-stdin: after the allocation, wait for a line (or end of file) on
 * standard input before the first write, so the test can set the stage.
 *
 * Lines on stdout, one per event, flushed at once:
 *   connected to SOCKET
 *   alloc GUID pages N block B
 *   submitted N                                   (with --total, all of them)
 *   progress completed N                          (every 100)
 *   now on SOCKET t=REALTIME_MS completed=N       (a move was seen)
 *   failed seq N page P: r=-ERRNO (MEANING) from_node=0|1: REASON
 *   wrong: WHAT                                   (a completion broke a rule)
 *   summary submitted N ok K failed F unknown U ok_before_move B ok_after_move A
 *   lost page P: WHY
 *   checked N pages lost M
 *   fd same | fd changed
 *
 * Exit 0 when every write completed exactly once, every failure gave a
 * reason, nothing was lost and the completion descriptor stayed the same; 1
 * otherwise, 2 usage, 3 no node could be reached. */
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

#include "crc32c.h"
#include "ftvm.h"

#define SEQS_MAX 1000000
#define RUN_FOR_MS 120000
#define RETRY_FOR_MS 30000
#define MAGIC 0x0fa11a7eu

struct run {
	struct ftvm_client *c;
	const char *socket;
	struct ftvm_alloc_info alloc;
	uint64_t pages, submitted, completed, ok, failed, unknown, ok_before, ok_after;
	int *result;	       /* per seq */
	uint8_t *count;	       /* completions per seq */
	bool *outcome_unknown; /* per seq: failed, and said it may have applied */
	uint8_t *block;	       /* scratch, for a write's CRC-32C */
	bool moved, wrong;
};

static uint64_t clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void fill(uint8_t *buf, size_t len, uint64_t seq)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t word = (seq << 32) ^ (i / 8) ^ MAGIC;

		memcpy(buf + i, &word, len - i < 8 ? len - i : 8);
	}
}

static void after_reap(struct run *run)
{
	const char *now = ftvm_connected_socket(run->c);

	if (now == run->socket || (now && run->socket && strcmp(now, run->socket) == 0))
		return;
	run->moved = true;
	run->socket = now;
	printf("now on %s t=%" PRIu64 " completed=%" PRIu64 "\n", now ? now : "no node",
	       clock_ms(CLOCK_REALTIME), run->completed);
	fflush(stdout);
}

static void wrong(struct run *run, const char *what, uint64_t seq)
{
	printf("wrong: %s (seq %" PRIu64 ")\n", what, seq);
	fflush(stdout);
	run->wrong = true;
}

static void record(struct run *run, const struct ftvm_completion *x)
{
	uint64_t seq = x->cookie;

	if (seq >= run->submitted) {
		wrong(run, "a completion for a write never submitted", seq);
		return;
	}
	if (run->count[seq]++ > 0) {
		wrong(run, "a second completion", seq);
		return;
	}
	run->completed++;
	run->result[seq] = x->result;
	if (x->result == 0) {
		fill(run->block, run->alloc.block_size, seq);
		if (x->crc32c != crc32c(0, run->block, run->alloc.block_size))
			wrong(run, "the CRC-32C of an OK write is not its block's", seq);
		run->ok++;
		if (run->moved)
			run->ok_after++;
		else
			run->ok_before++;
	} else {
		run->failed++;
		run->outcome_unknown[seq] = strstr(x->error, "outcome is unknown") != NULL;
		run->unknown += run->outcome_unknown[seq];
		printf("failed seq %" PRIu64 " page %" PRIu64 ": r=%d (%s) from_node=%d: %s\n", seq,
		       seq % run->pages, x->result, ftvm_strerror(x->result), x->from_node,
		       x->error);
		if (!x->error[0])
			wrong(run, "a failure without a reason", seq);
	}
	if (run->completed % 100 == 0)
		printf("progress completed %" PRIu64 "\n", run->completed);
	fflush(stdout);
}

/* Page p, read back: whose bytes it holds, as the rules above allow. */
static bool check_page(struct run *run, uint64_t p, uint8_t *in, uint8_t *want)
{
	uint64_t first = clock_ms(CLOCK_MONOTONIC), word, seq, last_ok = UINT64_MAX;
	size_t len = 0;
	int r;

	for (uint64_t s = p; s < run->submitted; s += run->pages)
		if (run->result[s] == 0)
			last_ok = s;
	if (last_ok == UINT64_MAX)
		return true; /* no write of it completed OK: any bytes will do */
	do {
		r = ftvm_read_page(run->c, run->alloc.guid, p, in, run->alloc.block_size, &len,
				   NULL);
		if (r == 0)
			break;
		usleep(100 * 1000);
	} while (clock_ms(CLOCK_MONOTONIC) - first < RETRY_FOR_MS);
	after_reap(run);
	if (r < 0) {
		printf("lost page %" PRIu64 ": unreadable: %s (%s)\n", p, ftvm_strerror(r),
		       ftvm_last_error(run->c));
		return false;
	}
	memcpy(&word, in, sizeof(word));
	seq = (word ^ MAGIC) >> 32;
	fill(want, run->alloc.block_size, seq);
	if (len != run->alloc.block_size || memcmp(in, want, len) != 0 || seq >= run->submitted ||
	    seq % run->pages != p) {
		printf("lost page %" PRIu64
		       ": holds no write's bytes (%zu bytes, first word 0x%016" PRIx64
		       "; seq %" PRIu64 " acknowledged last)\n",
		       p, len, word, last_ok);
		return false;
	}
	if (seq < last_ok) {
		printf("lost page %" PRIu64 ": holds seq %" PRIu64 ", older than seq %" PRIu64
		       " acknowledged\n",
		       p, seq, last_ok);
		return false;
	}
	if (run->result[seq] != 0 && !run->outcome_unknown[seq]) {
		printf("lost page %" PRIu64 ": holds seq %" PRIu64 ", whose write failed as not "
		       "applied\n",
		       p, seq);
		return false;
	}
	return true;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: ftvm-async-failover [--window W] [--pages P] [--policy NAME --block-size B] "
		"[--total N | --after-move M] [--go-on-stdin] SOCKET_A SOCKET_B\n");
	return 2;
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
		{ "window", required_argument, NULL, 'w' },
		{ "pages", required_argument, NULL, 'p' },
		{ "policy", required_argument, NULL, 'P' },
		{ "block-size", required_argument, NULL, 'b' },
		{ "total", required_argument, NULL, 't' },
		{ "after-move", required_argument, NULL, 'm' },
		{ "go-on-stdin", no_argument, NULL, 'g' },
		{ 0 },
	};
	struct ftvm_completion cqe[64];
	struct ftvm_node_status st;
	struct run run = { .pages = 256 };
	uint64_t window = 32, total = 0, after_move = 0, block = 0, started, checked = 0, lost = 0;
	const char *policy = NULL;
	bool go_on_stdin = false, done;
	uint8_t *out = NULL, *in = NULL, *want = NULL;
	int opt, r, fd, rc = 1;
	char line[64];

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'w':
			if (!parse_u64(optarg, &window) || window == 0 || window > FTVM_SUBMIT_MAX)
				return usage();
			break;
		case 'p':
			if (!parse_u64(optarg, &run.pages) || run.pages == 0 || run.pages > 65536)
				return usage();
			break;
		case 'P':
			policy = optarg;
			break;
		case 'b':
			if (!parse_u64(optarg, &block) || block == 0 || block > (64u << 20))
				return usage();
			break;
		case 't':
			if (!parse_u64(optarg, &total) || total == 0 || total > SEQS_MAX)
				return usage();
			break;
		case 'm':
			if (!parse_u64(optarg, &after_move) || after_move == 0)
				return usage();
			break;
		case 'g':
			go_on_stdin = true;
			break;
		default:
			return usage();
		}
	}
	if (argc - optind != 2 || !total == !after_move || !policy != !block)
		return usage();

	r = ftvm_connect_pair(argv[optind], argv[optind + 1], &run.c);
	if (r < 0) {
		fprintf(stderr, "ftvm-async-failover: no node serves: %s (%s)\n", ftvm_strerror(r),
			ftvm_last_error(NULL));
		return 3;
	}
	run.socket = ftvm_connected_socket(run.c);
	printf("connected to %s\n", run.socket);
	r = ftvm_status(run.c, &st);
	if (r == 0)
		r = ftvm_alloc(run.c, run.pages * (block ? block : st.page_size), policy, false,
			       NULL, 0, &run.alloc);
	if (r < 0) {
		fprintf(stderr, "ftvm-async-failover: status or alloc: %s (%s)\n", ftvm_strerror(r),
			ftvm_last_error(run.c));
		goto out;
	}
	printf("alloc %s pages %" PRIu64 " block %u\n", run.alloc.guid, run.alloc.pages,
	       run.alloc.block_size);
	fflush(stdout);
	fd = ftvm_completion_fd(run.c);
	out = malloc(run.alloc.block_size);
	in = malloc(run.alloc.block_size);
	want = malloc(run.alloc.block_size);
	run.block = malloc(run.alloc.block_size);
	run.result = calloc(SEQS_MAX, sizeof(*run.result));
	run.count = calloc(SEQS_MAX, sizeof(*run.count));
	run.outcome_unknown = calloc(SEQS_MAX, sizeof(*run.outcome_unknown));
	if (fd < 0 || !out || !in || !want || !run.block || !run.result || !run.count ||
	    !run.outcome_unknown) {
		fprintf(stderr, "ftvm-async-failover: setup: %s\n",
			ftvm_strerror(fd < 0 ? fd : -ENOMEM));
		goto out;
	}
	if (go_on_stdin && !fgets(line, sizeof(line), stdin) && ferror(stdin)) {
		fprintf(stderr, "ftvm-async-failover: cannot read stdin\n");
		goto out;
	}

	started = clock_ms(CLOCK_MONOTONIC);
	for (;;) {
		done = total ? run.submitted == total : run.moved && run.ok_after >= after_move;
		while (!done && run.submitted - run.completed < window) {
			if (run.submitted == SEQS_MAX) {
				fprintf(stderr, "ftvm-async-failover: %d writes and no move\n",
					SEQS_MAX);
				goto out;
			}
			fill(out, run.alloc.block_size, run.submitted);
			r = ftvm_submit_write_page(run.c, run.alloc.guid, run.submitted % run.pages,
						   out, run.alloc.block_size, run.submitted);
			if (r < 0) {
				printf("wrong: submit of seq %" PRIu64 ": %s (%s)\n", run.submitted,
				       ftvm_strerror(r), ftvm_last_error(run.c));
				goto out;
			}
			run.submitted++;
			if (total && run.submitted == total) {
				printf("submitted %" PRIu64 "\n", total);
				fflush(stdout);
				done = true;
			}
		}
		if (done && run.completed == run.submitted)
			break;
		if (clock_ms(CLOCK_MONOTONIC) - started > RUN_FOR_MS) {
			printf("wrong: stuck: submitted %" PRIu64 " completed %" PRIu64 "\n",
			       run.submitted, run.completed);
			goto out;
		}
		r = ftvm_reap(run.c, cqe, 64, 1000);
		if (r < 0) {
			printf("wrong: reap: %s (%s)\n", ftvm_strerror(r), ftvm_last_error(run.c));
			goto out;
		}
		after_reap(&run);
		for (int i = 0; i < r; i++)
			record(&run, &cqe[i]);
	}
	if (ftvm_reap(run.c, cqe, 64, 0) != 0)
		wrong(&run, "a completion after all of them", run.submitted);
	printf("summary submitted %" PRIu64 " ok %" PRIu64 " failed %" PRIu64 " unknown %" PRIu64
	       " ok_before_move %" PRIu64 " ok_after_move %" PRIu64 "\n",
	       run.submitted, run.ok, run.failed, run.unknown, run.ok_before, run.ok_after);
	fflush(stdout);

	for (uint64_t p = 0; p < run.pages; p++) {
		checked++;
		if (!check_page(&run, p, in, want))
			lost++;
	}
	printf("checked %" PRIu64 " pages lost %" PRIu64 "\n", checked, lost);
	r = ftvm_completion_fd(run.c);
	printf("fd %s\n", r == fd ? "same" : "changed");
	rc = lost == 0 && !run.wrong && r == fd ? 0 : 1;
out:
	fflush(stdout);
	free(out);
	free(in);
	free(want);
	free(run.block);
	free(run.result);
	free(run.count);
	free(run.outcome_unknown);
	ftvm_disconnect(run.c);
	return rc;
}
