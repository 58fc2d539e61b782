/* example: a controller program using libftvm, start to finish.
 *
 *   example SOCKET                 allocate 3 pages with a header, write each
 *                                  page, read them back and compare, print the
 *                                  header, free
 *   example SOCKET --partner PSOCKET
 *                                  then write a page through a write pointer
 *                                  (Figs. 7, 8) and read the same bytes on the
 *                                  partner node, through a read pointer there
 *   example SOCKET --threads N     then N threads share one client, each
 *                                  writing and reading its own page 200 times
 *
 * SOCKET is the node's client socket (the `socket` key of its config). Exits 0
 * when everything checked out, 1 when a call failed or data differed, 2 on a
 * usage error. tests/e2e/test_example.sh runs it against a real pair;
 * node/libftvm/LIBFTVM.md quotes run_pages(). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ftvm.h>

#define PAGES 3
#define THREAD_ROUNDS 200
#define THREADS_MAX 64

static const char journal_header[] = "controller-7 journal v1";

/* What went wrong, in the library's words: the meaning of r, and the details
 * (the node's reason when it refused). Returns -1 for the caller to pass on. */
static int failed(struct ftvm_client *c, const char *what, int r)
{
	fprintf(stderr, "example: %s: %s (%s)\n", what, ftvm_strerror(r), ftvm_last_error(c));
	return -1;
}

/* A recognisable pattern: which page, which round, which byte. */
static void fill(uint8_t *buf, size_t len, uint64_t page, unsigned round)
{
	size_t i;

	for (i = 0; i < len; i++)
		buf[i] = (uint8_t)(i * 31 + page * 7 + round);
}

static int run_pages(struct ftvm_client *c, uint32_t page_size)
{
	struct ftvm_alloc_info alloc;
	struct ftvm_header hdr;
	uint8_t *out = NULL, *in = NULL;
	int r, ret = -1;

	r = ftvm_alloc(c, (uint64_t)PAGES * page_size, NULL, false, journal_header,
		       sizeof(journal_header) - 1, &alloc);
	if (r < 0)
		return failed(c, "alloc", r);
	printf("example: allocated %s: %" PRIu64 " pages of %" PRIu32 " bytes\n", alloc.guid,
	       alloc.pages, alloc.block_size);

	out = malloc(alloc.block_size);
	in = malloc(alloc.block_size);
	if (!out || !in) {
		fprintf(stderr, "example: out of memory\n");
		goto out;
	}
	for (uint64_t p = 0; p < alloc.pages; p++) {
		size_t len;

		fill(out, alloc.block_size, p, 0);
		r = ftvm_write_page(c, alloc.guid, p, out, alloc.block_size, NULL);
		if (r < 0) {
			failed(c, "write", r);
			goto out;
		}
		r = ftvm_read_page(c, alloc.guid, p, in, alloc.block_size, &len, NULL);
		if (r < 0) {
			failed(c, "read", r);
			goto out;
		}
		if (len != alloc.block_size || memcmp(in, out, len) != 0) {
			fprintf(stderr, "example: %s page %" PRIu64 " reads back different\n",
				alloc.guid, p);
			goto out;
		}
	}
	printf("example: wrote and read back %" PRIu64 " pages\n", alloc.pages);
	/* A page past the end is a bad argument, named in the reason. */
	r = ftvm_write_page(c, alloc.guid, alloc.pages, out, alloc.block_size, NULL);
	if (r != -EINVAL || !strstr(ftvm_last_error(c), "has pages 0..")) {
		fprintf(stderr, "example: writing page %" PRIu64 " gave %d (%s), wanted -EINVAL\n",
			alloc.pages, r, ftvm_last_error(c));
		goto out;
	}

	r = ftvm_header(c, alloc.guid, &hdr);
	if (r < 0) {
		failed(c, "header", r);
		goto out;
	}
	printf("example: %s: home %s, owner %s, policy %s, header '%.*s'\n", hdr.guid, hdr.home,
	       hdr.owner, hdr.policy, (int)hdr.header_len, (const char *)hdr.header);
	ret = 0;
out:
	/* Give the memory back on both nodes, also after a failure. */
	r = ftvm_free(c, alloc.guid);
	if (r < 0)
		ret = failed(c, "free", r);
	else
		printf("example: freed %s\n", alloc.guid);
	free(out);
	free(in);
	return ret;
}

/* --partner: a page written in place through a write pointer on this node,
 * mirrored when it is released, reads back the same on the partner. */
static int run_pointer(struct ftvm_client *c, struct ftvm_client *partner, uint32_t page_size)
{
	struct ftvm_alloc_info alloc;
	const void *theirs;
	uint8_t *expected;
	void *mine;
	size_t len;
	int r, ret = -1;

	r = ftvm_alloc(c, page_size, NULL, false, NULL, 0, &alloc);
	if (r < 0)
		return failed(c, "alloc", r);
	r = ftvm_get_write_pointer(c, alloc.guid, 0, true, &mine, &len);
	if (r < 0) {
		failed(c, "write pointer", r);
		goto out;
	}
	fill(mine, len, 0, 42); /* the block itself, in the node's frame pool */
	r = ftvm_release_pointer(c, alloc.guid, 0, true, NULL); /* mirrored here */
	if (r < 0) {
		failed(c, "release", r);
		goto out;
	}
	r = ftvm_get_read_pointer(partner, alloc.guid, 0, true, &theirs, &len);
	if (r < 0) {
		failed(partner, "read pointer on the partner", r);
		goto out;
	}
	expected = malloc(len);
	if (expected)
		fill(expected, len, 0, 42);
	if (!expected || memcmp(theirs, expected, len) != 0)
		fprintf(stderr, "example: %s page 0 differs on the partner\n", alloc.guid);
	else
		ret = 0;
	free(expected);
	r = ftvm_release_pointer(partner, alloc.guid, 0, false, NULL);
	if (r < 0)
		ret = failed(partner, "release on the partner", r);
	if (ret == 0)
		printf("example: wrote %s page 0 through a write pointer, read it on the partner\n",
		       alloc.guid);
out:
	r = ftvm_free(c, alloc.guid);
	if (r < 0)
		ret = failed(c, "free", r);
	return ret;
}

/* --threads: one client shared by all threads; libftvm serialises their calls
 * and keeps each thread's last error apart. */
struct worker {
	pthread_t thread;
	struct ftvm_client *c; /* the same for every worker */
	const char *guid;
	uint64_t page; /* this worker's own page */
	uint32_t block_size;
	int result;
};

static void *worker_run(void *arg)
{
	struct worker *w = arg;
	uint8_t *out = malloc(w->block_size), *in = malloc(w->block_size);
	char what[160], nosuch[FTVM_GUID_MAX];
	uint32_t crc_out, crc_in;
	size_t len;
	int r;

	w->result = -1;
	if (!out || !in) {
		fprintf(stderr, "example: thread %" PRIu64 ": out of memory\n", w->page);
		goto out;
	}
	snprintf(nosuch, sizeof(nosuch), "nosuch-%" PRIu64, w->page);
	for (unsigned round = 0; round < THREAD_ROUNDS; round++) {
		snprintf(what, sizeof(what), "thread %" PRIu64 " round %u: %s page %" PRIu64,
			 w->page, round, w->guid, w->page);
		fill(out, w->block_size, w->page, round);
		r = ftvm_write_page(w->c, w->guid, w->page, out, w->block_size, &crc_out);
		if (r < 0) {
			failed(w->c, what, r);
			goto out;
		}
		r = ftvm_read_page(w->c, w->guid, w->page, in, w->block_size, &len, &crc_in);
		if (r < 0) {
			failed(w->c, what, r);
			goto out;
		}
		if (len != w->block_size || crc_in != crc_out || memcmp(in, out, len) != 0) {
			fprintf(stderr, "example: %s: read back different bytes\n", what);
			goto out;
		}
		if (round % 25 != 0)
			continue;
		/* A refusal now and then, while the other threads succeed: the
		 * reason this thread reads must be its own. */
		r = ftvm_read_page(w->c, nosuch, 0, in, w->block_size, NULL, NULL);
		if (r != -ENOENT || !strstr(ftvm_last_error(w->c), nosuch)) {
			fprintf(stderr,
				"example: %s: reading %s gave %d (%s), wanted -ENOENT naming it\n",
				what, nosuch, r, ftvm_last_error(w->c));
			goto out;
		}
	}
	w->result = 0;
out:
	free(out);
	free(in);
	return NULL;
}

static int run_threads(struct ftvm_client *c, uint32_t page_size, unsigned n)
{
	struct worker workers[THREADS_MAX];
	struct ftvm_alloc_info alloc;
	unsigned i, started = 0;
	int r, ret = 0;

	r = ftvm_alloc(c, (uint64_t)n * page_size, NULL, false, NULL, 0, &alloc);
	if (r < 0)
		return failed(c, "alloc for the threads", r);
	for (i = 0; i < n; i++) {
		workers[i] = (struct worker){
			.c = c, .guid = alloc.guid, .page = i, .block_size = alloc.block_size
		};
		r = pthread_create(&workers[i].thread, NULL, worker_run, &workers[i]);
		if (r != 0) {
			fprintf(stderr, "example: cannot start thread %u: %s\n", i, strerror(r));
			ret = -1;
			break;
		}
		started++;
	}
	for (i = 0; i < started; i++) {
		pthread_join(workers[i].thread, NULL);
		if (workers[i].result < 0)
			ret = -1;
	}
	if (ret == 0)
		printf("example: %u threads on one client, %d writes and reads each: ok\n", n,
		       THREAD_ROUNDS);
	r = ftvm_free(c, alloc.guid);
	if (r < 0)
		ret = failed(c, "free", r);
	return ret;
}

static int usage(void)
{
	fprintf(stderr,
		"usage: example SOCKET [--partner PSOCKET | --threads N]   (N from 1 to %d)\n",
		THREADS_MAX);
	return 2;
}

int main(int argc, char **argv)
{
	struct ftvm_node_status st;
	struct ftvm_client *c, *partner = NULL;
	const char *partner_socket = NULL;
	unsigned threads = 0;
	int r;

	if (argc == 4 && strcmp(argv[2], "--partner") == 0) {
		partner_socket = argv[3];
	} else if (argc == 4 && strcmp(argv[2], "--threads") == 0) {
		char *end;
		unsigned long v = strtoul(argv[3], &end, 10);

		if (*end != '\0' || v < 1 || v > THREADS_MAX)
			return usage();
		threads = (unsigned)v;
	} else if (argc != 2) {
		return usage();
	}

	r = ftvm_connect(argv[1], &c);
	if (r < 0) {
		fprintf(stderr, "example: cannot connect to %s: %s\n", argv[1], ftvm_strerror(r));
		return 1;
	}
	r = ftvm_status(c, &st);
	if (r < 0) {
		failed(c, "status", r);
		goto fail;
	}
	printf("example: node %s (%s), partner %s link %s, %" PRIu32 " byte pages\n", st.node,
	       st.state, st.partner_id, st.partner_link, st.page_size);

	if (run_pages(c, st.page_size) < 0)
		goto fail;
	if (partner_socket) {
		r = ftvm_connect(partner_socket, &partner);
		if (r < 0) {
			fprintf(stderr, "example: cannot connect to %s: %s\n", partner_socket,
				ftvm_strerror(r));
			goto fail;
		}
		r = run_pointer(c, partner, st.page_size);
		ftvm_disconnect(partner);
		if (r < 0)
			goto fail;
	}
	if (threads > 0 && run_threads(c, st.page_size, threads) < 0)
		goto fail;
	ftvm_disconnect(c);
	printf("example: ok\n");
	return 0;
fail:
	ftvm_disconnect(c);
	return 1;
}
