/* ftvm-failover-client: a libftvm client that follows its pair through a
 * failover (ftvm_connect_pair()), writing pages with known contents and
 * checking at the end that every acknowledged write reads back.
 *
 *   ftvm-failover-client [--pace-ms MS] [--go-on-stdin] [--pointer]
 *                        [--cut-at SEQ --cut-ms MS] [--kill PID]...
 *                        SOCKET_A SOCKET_B COUNT
 *
 * It connects with ftvm_connect_pair(), allocates COUNT + 1 pages, and writes
 * page 0 to COUNT - 1 in order, one write per sequence number (seq N writes
 * page N, filled with a pattern of N), MS milliseconds apart (default 0). A
 * failed write is written again, same seq and bytes (a write of the same
 * bytes is safe to repeat): at once when the library moved the client, after
 * RETRY_PAUSE_MS otherwise, for up to RETRY_FOR_MS. At the end every
 * acknowledged page is read back and compared, with the same retries.
 *
 * --go-on-stdin: after the allocation, wait for a line (or end of file) on
 * standard input before the first write, so a test can set the stage; with
 * --pointer, wait for another one before the pointer checks at the end.
 * --pointer: hold a read pointer to page COUNT (never written) from before
 * the first write. After the writes are checked, release it: if the client
 * moved, the node it talks to now must refuse (it holds no such pointer),
 * otherwise it must take it back. Then take a read pointer to page 0 there,
 * which maps that node's frame pool, and check it shows seq 0's bytes.
 * --cut-at SEQ --cut-ms MS: before the write of SEQ, have the node the client
 * talks to cut its partner link for MS (ftvm_drill_cut_link(), on a
 * connection of its own): node/ha/HA.md has one of the two nodes fence itself.
 * --kill PID (up to 4 times): right after the last write is acknowledged,
 * SIGKILL each PID (both nodes, say) and exit 0 without the read-back: the
 * last page is then in the nodes' memory alone, its destage tens of ms
 * away, however slowly this process or the host runs.
 *
 * Lines on stdout, one per event, flushed at once:
 *   connected to SOCKET
 *   alloc GUID pages N block B
 *   pointer held on SOCKET page P
 *   cut link of SOCKET for MS ms
 *   acked seq N page P
 *   killed N processes after seq S              (with --kill)
 *   error seq N: r=-ERRNO (MEANING): LAST_ERROR
 *   now on SOCKET t=REALTIME_MS call_ms=MS      (after any call that moved)
 *   stale pointer release refused: r=-ERRNO (MEANING): LAST_ERROR
 *   stale pointer release accepted              (wrong)
 *   pointer released on SOCKET                  (no move)
 *   pointer on SOCKET page 0: seq 0's bytes | wrong bytes
 *   lost seq N page P: REASON
 *   checked N lost M
 *
 * Exit: 0 when nothing was lost (and, with --pointer, the pointer checks
 * held), 1 otherwise, 2 usage, 3 no node could be reached. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftvm.h"

#define RETRY_FOR_MS 30000
#define RETRY_PAUSE_MS 100
#define KILL_MAX 4

enum {
	EXIT_DONE = 0,
	EXIT_FAILED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3
};

struct run {
	struct ftvm_client *c;
	const char *socket; /* the one the client talked to after the last call */
	struct ftvm_alloc_info alloc;
	uint8_t *out, *in; /* block_size bytes each */
	bool moved;
};

static uint64_t clock_ms(clockid_t id)
{
	struct timespec ts;

	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* The bytes of seq's write: every 8 bytes say seq and where they are. */
static void fill(uint8_t *buf, size_t len, uint64_t seq)
{
	for (size_t i = 0; i < len; i += 8) {
		uint64_t word = (seq << 32) ^ (i / 8) ^ 0x5eedfa11u;

		memcpy(buf + i, &word, len - i < 8 ? len - i : 8);
	}
}

/* Notes a move after a call that started at started; true when it moved. */
static bool after_call(struct run *run, uint64_t started)
{
	const char *now = ftvm_connected_socket(run->c);

	if (now == run->socket || (now && run->socket && strcmp(now, run->socket) == 0))
		return false;
	run->moved = true;
	run->socket = now;
	printf("now on %s t=%" PRIu64 " call_ms=%" PRIu64 "\n", now ? now : "no node",
	       clock_ms(CLOCK_REALTIME), clock_ms(CLOCK_MONOTONIC) - started);
	fflush(stdout);
	return true;
}

/* After a failed call: whether to try again, pausing first when the client
 * stayed where it was (its node may be deciding who serves). */
static bool again(struct run *run, uint64_t first, uint64_t started)
{
	if (clock_ms(CLOCK_MONOTONIC) - first >= RETRY_FOR_MS)
		return false;
	if (!after_call(run, started))
		sleep_ms(RETRY_PAUSE_MS);
	return true;
}

static int write_seq(struct run *run, uint64_t seq)
{
	uint64_t first = clock_ms(CLOCK_MONOTONIC), started;
	int r;

	fill(run->out, run->alloc.block_size, seq);
	do {
		started = clock_ms(CLOCK_MONOTONIC);
		r = ftvm_write_page(run->c, run->alloc.guid, seq, run->out, run->alloc.block_size,
				    NULL);
		if (r == 0) {
			after_call(run, started);
			printf("acked seq %" PRIu64 " page %" PRIu64 "\n", seq, seq);
			fflush(stdout);
			return 0;
		}
		printf("error seq %" PRIu64 ": r=%d (%s): %s\n", seq, r, ftvm_strerror(r),
		       ftvm_last_error(run->c));
		fflush(stdout);
	} while (again(run, first, started));
	return r;
}

/* Reads seq's page back; a failed read is tried again like a write. */
static bool check_seq(struct run *run, uint64_t seq)
{
	uint64_t first = clock_ms(CLOCK_MONOTONIC), started;
	size_t len = 0;
	int r;

	fill(run->out, run->alloc.block_size, seq);
	do {
		started = clock_ms(CLOCK_MONOTONIC);
		r = ftvm_read_page(run->c, run->alloc.guid, seq, run->in, run->alloc.block_size,
				   &len, NULL);
		if (r == 0) {
			after_call(run, started);
			break;
		}
	} while (again(run, first, started));
	if (r < 0) {
		printf("lost seq %" PRIu64 " page %" PRIu64 ": unreadable: %s (%s)\n", seq, seq,
		       ftvm_strerror(r), ftvm_last_error(run->c));
		return false;
	}
	if (len != run->alloc.block_size || memcmp(run->in, run->out, len) != 0) {
		printf("lost seq %" PRIu64 " page %" PRIu64 ": other bytes\n", seq, seq);
		return false;
	}
	return true;
}

/* --pointer, at the end: the old pointer is refused after a move, a new one
 * shows the acknowledged bytes. */
static bool check_pointers(struct run *run, uint64_t held_page, bool seq0_acked)
{
	const void *p;
	size_t len;
	bool good;
	int r;

	r = ftvm_release_pointer(run->c, run->alloc.guid, held_page, false, NULL);
	if (!run->moved && r < 0) {
		printf("pointer release failed: r=%d (%s): %s\n", r, ftvm_strerror(r),
		       ftvm_last_error(run->c));
		return false;
	}
	if (!run->moved) {
		printf("pointer released on %s\n", run->socket);
	} else if (r == 0) {
		printf("stale pointer release accepted\n");
		return false;
	} else {
		printf("stale pointer release refused: r=%d (%s): %s\n", r, ftvm_strerror(r),
		       ftvm_last_error(run->c));
	}
	fflush(stdout);
	if (!seq0_acked)
		return true;
	r = ftvm_get_read_pointer(run->c, run->alloc.guid, 0, true, &p, &len);
	if (r < 0) {
		printf("pointer on %s page 0: r=%d (%s): %s\n", run->socket, r, ftvm_strerror(r),
		       ftvm_last_error(run->c));
		return false;
	}
	fill(run->out, run->alloc.block_size, 0);
	good = len == run->alloc.block_size && memcmp(p, run->out, len) == 0;
	printf("pointer on %s page 0: %s\n", run->socket, good ? "seq 0's bytes" : "wrong bytes");
	r = ftvm_release_pointer(run->c, run->alloc.guid, 0, false, NULL);
	if (r < 0) {
		printf("pointer release on %s failed: r=%d (%s): %s\n", run->socket, r,
		       ftvm_strerror(r), ftvm_last_error(run->c));
		return false;
	}
	return good;
}

/* --cut-at: the node the client talks to cuts its partner link. */
static int cut_link(struct run *run, uint64_t ms)
{
	struct ftvm_client *cut;
	int r;

	r = ftvm_connect(run->socket, &cut);
	if (r < 0) {
		fprintf(stderr, "ftvm-failover-client: cannot reach %s to cut: %s\n", run->socket,
			ftvm_strerror(r));
		return r;
	}
	r = ftvm_drill_cut_link(cut, (uint32_t)ms);
	if (r < 0)
		fprintf(stderr, "ftvm-failover-client: cut: %s (%s)\n", ftvm_strerror(r),
			ftvm_last_error(cut));
	else
		printf("cut link of %s for %" PRIu64 " ms\n", run->socket, ms);
	fflush(stdout);
	ftvm_disconnect(cut);
	return r;
}

static int usage(void)
{
	fprintf(stderr, "usage: ftvm-failover-client [--pace-ms MS] [--go-on-stdin] [--pointer] "
			"[--cut-at SEQ --cut-ms MS] [--kill PID]... SOCKET_A SOCKET_B COUNT\n");
	return EXIT_USAGE;
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
		{ "pace-ms", required_argument, NULL, 'p' },
		{ "go-on-stdin", no_argument, NULL, 'g' },
		{ "pointer", no_argument, NULL, 'P' },
		{ "cut-at", required_argument, NULL, 'c' },
		{ "cut-ms", required_argument, NULL, 'm' },
		{ "kill", required_argument, NULL, 'k' },
		{ 0 },
	};
	uint64_t kill_pids[KILL_MAX];
	size_t n_kill = 0;
	struct run run = { 0 };
	struct ftvm_node_status st;
	uint64_t pace = 0, count, seq, checked = 0, lost = 0, cut_at = UINT64_MAX, cut_ms = 0;
	bool go_on_stdin = false, pointer = false, *acked = NULL;
	const void *held;
	int opt, r, rc = EXIT_FAILED;
	char line[64];

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'p':
			if (!parse_u64(optarg, &pace))
				return usage();
			break;
		case 'g':
			go_on_stdin = true;
			break;
		case 'P':
			pointer = true;
			break;
		case 'c':
			if (!parse_u64(optarg, &cut_at))
				return usage();
			break;
		case 'm':
			if (!parse_u64(optarg, &cut_ms) || cut_ms == 0 || cut_ms > 600000)
				return usage();
			break;
		case 'k':
			if (n_kill == KILL_MAX || !parse_u64(optarg, &kill_pids[n_kill]) ||
			    kill_pids[n_kill] < 2 || kill_pids[n_kill] > INT32_MAX)
				return usage();
			n_kill++;
			break;
		default:
			return usage();
		}
	}
	if (argc - optind != 3 || !parse_u64(argv[optind + 2], &count) || count == 0 ||
	    count > 1000000 || (cut_at != UINT64_MAX) != (cut_ms != 0))
		return usage();

	r = ftvm_connect_pair(argv[optind], argv[optind + 1], &run.c);
	if (r < 0) {
		fprintf(stderr, "ftvm-failover-client: no node serves: %s (%s)\n", ftvm_strerror(r),
			ftvm_last_error(NULL));
		return EXIT_UNREACHABLE;
	}
	run.socket = ftvm_connected_socket(run.c);
	printf("connected to %s\n", run.socket);
	fflush(stdout);

	r = ftvm_status(run.c, &st);
	if (r == 0)
		r = ftvm_alloc(run.c, (count + 1) * st.page_size, NULL, false, NULL, 0, &run.alloc);
	if (r < 0) {
		fprintf(stderr, "ftvm-failover-client: status or alloc: %s (%s)\n",
			ftvm_strerror(r), ftvm_last_error(run.c));
		goto out;
	}
	printf("alloc %s pages %" PRIu64 " block %u\n", run.alloc.guid, run.alloc.pages,
	       run.alloc.block_size);
	fflush(stdout);
	run.out = malloc(run.alloc.block_size);
	run.in = malloc(run.alloc.block_size);
	acked = calloc(count, sizeof(*acked));
	if (!run.out || !run.in || !acked) {
		fprintf(stderr, "ftvm-failover-client: out of memory\n");
		goto out;
	}
	if (pointer) {
		r = ftvm_get_read_pointer(run.c, run.alloc.guid, count, true, &held, NULL);
		if (r < 0) {
			fprintf(stderr, "ftvm-failover-client: read pointer: %s (%s)\n",
				ftvm_strerror(r), ftvm_last_error(run.c));
			goto out;
		}
		printf("pointer held on %s page %" PRIu64 "\n", run.socket, count);
		fflush(stdout);
	}
	if (go_on_stdin && !fgets(line, sizeof(line), stdin) && ferror(stdin)) {
		fprintf(stderr, "ftvm-failover-client: cannot read stdin\n");
		goto out;
	}

	for (seq = 0; seq < count; seq++) {
		if (seq > 0 && pace > 0)
			sleep_ms(pace);
		if (seq == cut_at && cut_link(&run, cut_ms) < 0)
			break;
		if (write_seq(&run, seq) < 0) {
			fprintf(stderr, "ftvm-failover-client: seq %" PRIu64 " failed for %d s\n",
				seq, RETRY_FOR_MS / 1000);
			break;
		}
		acked[seq] = true;
	}
	if (n_kill && seq == count) {
		for (size_t i = 0; i < n_kill; i++)
			kill((pid_t)kill_pids[i], SIGKILL);
		printf("killed %zu processes after seq %" PRIu64 "\n", n_kill, count - 1);
		fflush(stdout);
		rc = EXIT_DONE;
		goto out;
	}
	for (uint64_t i = 0; i < count; i++) {
		if (!acked[i])
			continue;
		checked++;
		if (!check_seq(&run, i))
			lost++;
	}
	printf("checked %" PRIu64 " lost %" PRIu64 "\n", checked, lost);
	fflush(stdout);
	rc = lost == 0 && seq == count ? EXIT_DONE : EXIT_FAILED;
	if (pointer && go_on_stdin && !fgets(line, sizeof(line), stdin) && ferror(stdin)) {
		fprintf(stderr, "ftvm-failover-client: cannot read stdin\n");
		rc = EXIT_FAILED;
	} else if (pointer && !check_pointers(&run, count, acked[0])) {
		rc = EXIT_FAILED;
	}
out:
	free(acked);
	free(run.out);
	free(run.in);
	ftvm_disconnect(run.c);
	return rc;
}
