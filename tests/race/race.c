/* ftvm-race: clients on both nodes race for the same few pages with read and
 * write pointers (vmm/VMM.md, "The lock rule across the pair").
 *
 * Every writer fills the whole block with its own token while it holds the
 * write pointer and checks, just before releasing, that the block still holds
 * only its token; every reader checks the block holds one token throughout.
 * Each grant and release is logged with the monotonic time taken after the
 * grant arrived and before the release left, so each logged interval lies
 * inside the time the lock was really held: two logged intervals that
 * overlap, with a writer among them, would be two holders at once.
 *
 *   ftvm-race SOCKET_A SOCKET_B [--clients N] [--pages K] [--seconds S]
 *             [--writes PERCENT]
 *
 * --writes: the share of rounds that take a write pointer (default 33). Each
 * client's longest wait for a grant is printed, and each node's grants and
 * longest wait: the paging queue serves both nodes in order (vmm/VMM.md,
 * "Fairness across the pair"), which those figures show; they are printed,
 * not judged.
 *
 * Exit 0 when no overlap, no torn page and every client got pointers. The
 * allocation raced on is left for the caller to verify and free. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ftvm.h"

struct interval {
	uint64_t from_ns, to_ns;
	int client;
	uint64_t page;
	bool write;
};

struct client {
	int id;
	const char *socket;
	pthread_t thread;
	unsigned seed;
	uint64_t grants, writes, torn, errors;
	uint64_t longest_wait_ns;
	struct interval *log;
	size_t n_log, cap_log;
	char error[256];
};

static const char *guid;
static uint64_t n_pages = 3;
static unsigned seconds = 3;
static unsigned write_percent = 33;
static atomic_bool stop;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void record(struct client *c, uint64_t from, uint64_t to, uint64_t page, bool write)
{
	if (c->n_log == c->cap_log) {
		c->cap_log = c->cap_log ? 2 * c->cap_log : 1024;
		c->log = realloc(c->log, c->cap_log * sizeof(*c->log));
		if (!c->log) {
			perror("ftvm-race");
			exit(99);
		}
	}
	c->log[c->n_log++] = (struct interval){ from, to, c->id, page, write };
}

/* The block holds one 8-byte token everywhere (0 before any write). */
static bool uniform(const uint8_t *block, size_t len, uint64_t *ret_token)
{
	uint64_t first;

	memcpy(&first, block, sizeof(first));
	for (size_t off = 0; off + 8 <= len; off += 8)
		if (memcmp(block + off, &first, 8) != 0)
			return false;
	*ret_token = first;
	return true;
}

static int one_round(struct client *c, struct ftvm_client *fc, uint64_t *counter)
{
	uint64_t page = (uint64_t)rand_r(&c->seed) % n_pages, token = 0, seen = 0, t0, t1;
	bool write = (unsigned)rand_r(&c->seed) % 100 < write_percent;
	uint64_t asked = now_ns();
	size_t len;
	void *p;
	int r;

	if (write)
		r = ftvm_get_write_pointer(fc, guid, page, true, &p, &len);
	else
		r = ftvm_get_read_pointer(fc, guid, page, true, (const void **)&p, &len);
	if (r == -EBUSY)
		return 0; /* waited the node's whole deadline: not an error here */
	if (r < 0) {
		snprintf(c->error, sizeof(c->error), "get %s pointer to page %" PRIu64 ": %s",
			 write ? "write" : "read", page, ftvm_last_error(fc));
		return r;
	}
	t0 = now_ns();
	c->grants++;
	if (t0 - asked > c->longest_wait_ns)
		c->longest_wait_ns = t0 - asked;
	if (write) {
		token = (uint64_t)c->id << 48 | ++*counter;
		for (size_t off = 0; off + 8 <= len; off += 8)
			memcpy((uint8_t *)p + off, &token, 8);
		usleep(200);
		if (!uniform(p, len, &seen) || seen != token)
			c->torn++;
		c->writes++;
	} else {
		if (!uniform(p, len, &seen))
			c->torn++;
		usleep(100);
		if (!uniform(p, len, &token) || token != seen)
			c->torn++;
	}
	t1 = now_ns();
	record(c, t0, t1, page, write);
	r = ftvm_release_pointer(fc, guid, page, write, NULL);
	if (r < 0) {
		snprintf(c->error, sizeof(c->error), "release page %" PRIu64 ": %s", page,
			 ftvm_last_error(fc));
		return r;
	}
	return 0;
}

static void *client_main(void *arg)
{
	struct client *c = arg;
	struct ftvm_client *fc;
	uint64_t counter = 0;
	int r;

	r = ftvm_connect(c->socket, &fc);
	if (r < 0) {
		snprintf(c->error, sizeof(c->error), "connect %s: %s", c->socket, ftvm_strerror(r));
		c->errors++;
		return NULL;
	}
	while (!atomic_load(&stop))
		if (one_round(c, fc, &counter) < 0) {
			c->errors++;
			break;
		}
	ftvm_disconnect(fc);
	return NULL;
}

static int by_page_then_start(const void *x, const void *y)
{
	const struct interval *a = x, *b = y;

	if (a->page != b->page)
		return a->page < b->page ? -1 : 1;
	return a->from_ns < b->from_ns ? -1 : a->from_ns > b->from_ns;
}

/* Sorted by page and start: an interval overlaps an earlier one when it
 * starts before the latest end seen so far for its page. */
static size_t overlaps(struct interval *all, size_t n)
{
	uint64_t latest_end = 0, latest_write_end = 0, page = UINT64_MAX;
	size_t bad = 0;

	qsort(all, n, sizeof(*all), by_page_then_start);
	for (size_t i = 0; i < n; i++) {
		if (all[i].page != page) {
			page = all[i].page;
			latest_end = latest_write_end = 0;
		}
		if (all[i].from_ns < latest_write_end ||
		    (all[i].write && all[i].from_ns < latest_end)) {
			if (bad < 5)
				fprintf(stderr, "overlap on page %" PRIu64 ": client %d's %s\n",
					page, all[i].client, all[i].write ? "write" : "read");
			bad++;
		}
		if (all[i].to_ns > latest_end)
			latest_end = all[i].to_ns;
		if (all[i].write && all[i].to_ns > latest_write_end)
			latest_write_end = all[i].to_ns;
	}
	return bad;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "clients", required_argument, NULL, 'c' },
		{ "pages", required_argument, NULL, 'p' },
		{ "seconds", required_argument, NULL, 's' },
		{ "writes", required_argument, NULL, 'w' },
		{ 0 },
	};
	struct ftvm_alloc_info info;
	struct ftvm_client *setup;
	struct client *clients;
	struct interval *all;
	size_t n_all = 0, bad;
	unsigned per_node = 2;
	uint64_t torn = 0, errors = 0, min_grants = UINT64_MAX, writes = 0;
	uint64_t node_grants[2] = { 0 }, node_longest_ns[2] = { 0 };
	int opt, r;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 'c':
			per_node = (unsigned)atoi(optarg);
			break;
		case 'p':
			n_pages = (uint64_t)atoi(optarg);
			break;
		case 's':
			seconds = (unsigned)atoi(optarg);
			break;
		case 'w':
			write_percent = (unsigned)atoi(optarg);
			break;
		default:
			return 2;
		}
	}
	if (argc - optind != 2 || per_node == 0 || n_pages == 0 || seconds == 0 ||
	    write_percent > 100) {
		fprintf(stderr, "usage: ftvm-race SOCKET_A SOCKET_B [--clients N] [--pages K] "
				"[--seconds S] [--writes PERCENT (0-100)]\n");
		return 2;
	}
	r = ftvm_connect(argv[optind], &setup);
	if (r < 0 || (r = ftvm_alloc(setup, n_pages * 4096, NULL, false, NULL, 0, &info)) < 0) {
		fprintf(stderr, "ftvm-race: setup: %s\n", ftvm_strerror(r));
		return 1;
	}
	guid = info.guid;

	clients = calloc(2 * per_node, sizeof(*clients));
	for (unsigned i = 0; i < 2 * per_node; i++) {
		clients[i].id = (int)i + 1;
		clients[i].socket = argv[optind + (i % 2)];
		clients[i].seed = 1000 + i;
		pthread_create(&clients[i].thread, NULL, client_main, &clients[i]);
	}
	sleep(seconds);
	atomic_store(&stop, true);
	for (unsigned i = 0; i < 2 * per_node; i++) {
		pthread_join(clients[i].thread, NULL);
		n_all += clients[i].n_log;
	}

	all = calloc(n_all ? n_all : 1, sizeof(*all));
	n_all = 0;
	for (unsigned i = 0; i < 2 * per_node; i++) {
		struct client *c = &clients[i];

		if (c->n_log) /* a client whose every round failed logged nothing: log is NULL */
			memcpy(all + n_all, c->log, c->n_log * sizeof(*all));
		n_all += c->n_log;
		torn += c->torn;
		errors += c->errors;
		writes += c->writes;
		if (c->grants < min_grants)
			min_grants = c->grants;
		node_grants[i % 2] += c->grants;
		if (c->longest_wait_ns > node_longest_ns[i % 2])
			node_longest_ns[i % 2] = c->longest_wait_ns;
		printf("client %d on %s: %" PRIu64 " grants (%" PRIu64
		       " writes), longest wait %.1f ms%s%s\n",
		       c->id, i % 2 ? "b" : "a", c->grants, c->writes, c->longest_wait_ns / 1e6,
		       c->error[0] ? ", error: " : "", c->error);
	}
	for (int node = 0; node < 2; node++)
		printf("node %s: %" PRIu64 " grants, longest wait %.1f ms\n", node ? "b" : "a",
		       node_grants[node], node_longest_ns[node] / 1e6);
	bad = overlaps(all, n_all);
	printf("%zu grants, %" PRIu64 " writes on %" PRIu64 " pages by %u clients: %zu overlaps, "
	       "%" PRIu64 " torn pages, %" PRIu64 " errors, fewest grants %" PRIu64 "\n",
	       n_all, writes, n_pages, 2 * per_node, bad, torn, errors, min_grants);
	/* The allocation stays, so the caller can compare the two nodes. */
	printf("allocation %s\n", guid);
	/* Freed before the leak check of a sanitized build, which would fail
	 * the run (exit 23, stdout unflushed) when the pointers it scans for
	 * are gone from the stack. */
	for (unsigned i = 0; i < 2 * per_node; i++)
		free(clients[i].log);
	free(clients);
	free(all);
	ftvm_disconnect(setup);
	return bad || torn || errors || min_grants == 0 ? 1 : 0;
}
