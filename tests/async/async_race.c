/* ftvm-async-race: threads sharing one client mix asynchronous page calls
 * and blocking ones (ftvm.h, "Asynchronous calls", "Threads"), for
 * tests/e2e/test_async_race.sh; built and run under ASan and UBSan too.
 *
 *   ftvm-async-race SOCKET [--threads N] [--seconds S]
 *
 * Each thread (default 4, for 3 s) owns PAGES pages of one allocation for
 * its submitted writes and reads, and one page more for blocking calls. In
 * random turns it submits a burst of writes or reads of its pages, reaps up to
 * 8 completions of any thread (any thread may reap any completion), waits on
 * the completion descriptor and reaps, or writes its blocking page with
 * ftvm_write_page() and reads it back with ftvm_read_page(), which must give
 * the same bytes. A submit refused -EAGAIN (the client's FTVM_SUBMIT_MAX
 * taken) makes it reap instead. Every block says which page and which write
 * it is, in each of its words: a submitted read must find a whole block of
 * its page, a write's completion the block's CRC-32C. At the end the
 * threads reap until nothing is outstanding.
 *
 * Exit 0 when every submitted request completed exactly once with success
 * and the right bytes, no completion came for a request never submitted, and
 * every blocking call succeeded with the right bytes; 1 otherwise (the first
 * few faults are printed), 3 when the node cannot be reached. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "crc32c.h"
#include "ftvm.h"

#define PAGES 8		      /* a thread's pages for submitted requests */
#define PER_THREAD_MAX 200000 /* requests a thread may submit */
#define THREADS_MAX 16
#define DRAIN_FOR_MS 60000

/* A submitted request, found by its cookie (thread << 32 | index). */
struct pending {
	bool read;
	uint64_t page;
	uint8_t *buf; /* a read's: freed by whoever reaps it */
	uint32_t crc; /* a write's block's */
	atomic_uint completions;
};

struct worker {
	int id;
	pthread_t thread;
	unsigned seed;
	uint64_t n; /* submitted */
	struct pending *pending;
	uint64_t writes, reads, reaps, blocking, again;
	uint64_t version;
};

static struct ftvm_client *c;
static struct ftvm_alloc_info alloc;
static struct worker workers[THREADS_MAX];
static unsigned n_threads = 4, seconds = 3;
static atomic_bool stop;
static atomic_uint_fast64_t faults, completed_total, submitted_total;

static void fault(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void fault(const char *fmt, ...)
{
	va_list ap;

	if (atomic_fetch_add(&faults, 1) >= 10)
		return;
	fputs("fault: ", stdout);
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

/* Every word of a block: its page, the write that made it, and where. */
static void fill(uint8_t *buf, uint64_t page, uint64_t version)
{
	for (size_t i = 0; i + 8 <= alloc.block_size; i += 8) {
		uint64_t word = (page << 44) ^ (version << 12) ^ (i / 8);

		memcpy(buf + i, &word, 8);
	}
}

/* Whether buf is one whole block of page, as some write made it. */
static bool whole(const uint8_t *buf, uint64_t page)
{
	uint64_t word, version;

	memcpy(&word, buf, 8);
	if (word >> 44 != page)
		return false;
	version = (word >> 12) & ((UINT64_C(1) << 32) - 1);
	for (size_t i = 0; i + 8 <= alloc.block_size; i += 8) {
		memcpy(&word, buf + i, 8);
		if (word != ((page << 44) ^ (version << 12) ^ (i / 8)))
			return false;
	}
	return true;
}

static void check(const struct ftvm_completion *x)
{
	unsigned t = (unsigned)(x->cookie >> 32);
	uint64_t k = x->cookie & 0xffffffffu;
	struct pending *p;

	if (t >= n_threads || k >= PER_THREAD_MAX) {
		fault("a completion for cookie 0x%" PRIx64 ", never submitted", x->cookie);
		return;
	}
	p = &workers[t].pending[k];
	if (atomic_fetch_add(&p->completions, 1) != 0) {
		fault("thread %u request %" PRIu64 " completed twice", t, k);
		return;
	}
	atomic_fetch_add(&completed_total, 1);
	if (x->result != 0) {
		fault("thread %u request %" PRIu64 " (%s page %" PRIu64 "): %d (%s)", t, k,
		      p->read ? "read" : "write", p->page, x->result, x->error);
	} else if (p->read) {
		if (x->len != alloc.block_size || !whole(p->buf, p->page) ||
		    x->crc32c != crc32c(0, p->buf, alloc.block_size))
			fault("thread %u read %" PRIu64 " of page %" PRIu64
			      ": not a whole block of "
			      "it (len %zu)",
			      t, k, p->page, x->len);
	} else if (x->crc32c != p->crc) {
		fault("thread %u write %" PRIu64 " of page %" PRIu64 ": crc32c 0x%08x, want 0x%08x",
		      t, k, p->page, x->crc32c, p->crc);
	}
	free(p->buf);
	p->buf = NULL;
}

static int reap(struct worker *w, int timeout_ms)
{
	struct ftvm_completion out[8];
	int r = ftvm_reap(c, out, 8, timeout_ms);

	if (r < 0) {
		fault("thread %d: reap: %s (%s)", w->id, ftvm_strerror(r), ftvm_last_error(c));
		return r;
	}
	w->reaps++;
	for (int i = 0; i < r; i++)
		check(&out[i]);
	return r;
}

static void submit(struct worker *w, bool read)
{
	uint64_t page = (uint64_t)w->id * (PAGES + 1) + (uint64_t)rand_r(&w->seed) % PAGES;
	uint64_t cookie = (uint64_t)w->id << 32 | w->n;
	struct pending *p = &w->pending[w->n];
	uint8_t *buf;
	int r;

	if (w->n == PER_THREAD_MAX)
		return;
	buf = malloc(alloc.block_size);
	if (!buf) {
		fault("out of memory");
		return;
	}
	p->read = read;
	p->page = page;
	if (read) {
		memset(buf, 0xee, alloc.block_size);
		p->buf = buf;
		r = ftvm_submit_read_page(c, alloc.guid, page, buf, alloc.block_size, cookie);
	} else {
		fill(buf, page, ++w->version);
		p->crc = crc32c(0, buf, alloc.block_size);
		/* Copied at submit: the buffer is not the library's after. */
		r = ftvm_submit_write_page(c, alloc.guid, page, buf, alloc.block_size, cookie);
		free(buf);
	}
	if (r == -EAGAIN) {
		if (read)
			free(buf);
		p->buf = NULL;
		w->again++;
		reap(w, 100);
		return;
	}
	if (r < 0) {
		if (read)
			free(buf);
		p->buf = NULL;
		fault("thread %d: submit: %s (%s)", w->id, ftvm_strerror(r), ftvm_last_error(c));
		return;
	}
	w->n++;
	atomic_fetch_add(&submitted_total, 1);
	if (read)
		w->reads++;
	else
		w->writes++;
}

/* The thread's own page, through blocking calls among the others' requests. */
static void blocking(struct worker *w, uint8_t *out, uint8_t *in)
{
	uint64_t page = (uint64_t)w->id * (PAGES + 1) + PAGES;
	size_t len = 0;
	int r;

	fill(out, page, ++w->version);
	r = ftvm_write_page(c, alloc.guid, page, out, alloc.block_size, NULL);
	if (r == 0)
		r = ftvm_read_page(c, alloc.guid, page, in, alloc.block_size, &len, NULL);
	if (r < 0)
		fault("thread %d: blocking call: %s (%s)", w->id, ftvm_strerror(r),
		      ftvm_last_error(c));
	else if (len != alloc.block_size || memcmp(in, out, len) != 0)
		fault("thread %d: ftvm_read_page() gave other bytes than its ftvm_write_page()",
		      w->id);
	else if (ftvm_last_error(c)[0])
		fault("thread %d: a call that succeeded left the reason '%s'", w->id,
		      ftvm_last_error(c));
	w->blocking++;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	uint8_t *out = malloc(alloc.block_size), *in = malloc(alloc.block_size);
	struct pollfd pfd = { .fd = ftvm_completion_fd(c), .events = POLLIN };
	uint64_t until;

	if (!out || !in || pfd.fd < 0) {
		fault("thread %d: setup", w->id);
		goto out;
	}
	while (!atomic_load(&stop)) {
		switch (rand_r(&w->seed) % 8) {
		case 0:
		case 1:
		case 2:
			/* Bursts: together the threads pass FTVM_SUBMIT_MAX. */
			for (int k = rand_r(&w->seed) % 48; k >= 0; k--)
				submit(w, false);
			break;
		case 3:
		case 4:
			for (int k = rand_r(&w->seed) % 16; k >= 0; k--)
				submit(w, true);
			break;
		case 5:
			reap(w, 0);
			break;
		case 6:
			if (poll(&pfd, 1, 5) > 0)
				reap(w, 0);
			break;
		default:
			blocking(w, out, in);
			break;
		}
	}
	/* Everyone's leftovers, by every thread at once. */
	until = now_ms() + DRAIN_FOR_MS;
	while (atomic_load(&completed_total) < atomic_load(&submitted_total) && now_ms() < until)
		if (reap(w, 50) < 0)
			break;
out:
	free(out);
	free(in);
	return NULL;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "threads", required_argument, NULL, 't' },
		{ "seconds", required_argument, NULL, 's' },
		{ 0 },
	};
	struct ftvm_node_status st;
	uint64_t never = 0, twice = 0;
	uint8_t *block;
	int opt, r;

	while ((opt = getopt_long(argc, argv, "", options, NULL)) != -1) {
		switch (opt) {
		case 't':
			n_threads = (unsigned)atoi(optarg);
			break;
		case 's':
			seconds = (unsigned)atoi(optarg);
			break;
		default:
			return 2;
		}
	}
	if (argc - optind != 1 || n_threads == 0 || n_threads > THREADS_MAX || seconds == 0) {
		fprintf(stderr,
			"usage: ftvm-async-race SOCKET [--threads N (1-%d)] [--seconds S]\n",
			THREADS_MAX);
		return 2;
	}
	r = ftvm_connect(argv[optind], &c);
	if (r < 0) {
		fprintf(stderr, "ftvm-async-race: cannot connect: %s\n", ftvm_strerror(r));
		return 3;
	}
	r = ftvm_status(c, &st);
	if (r == 0)
		r = ftvm_alloc(c, (uint64_t)n_threads * (PAGES + 1) * st.page_size, NULL, false,
			       NULL, 0, &alloc);
	block = r == 0 ? malloc(alloc.block_size) : NULL;
	if (r < 0 || !block) {
		fprintf(stderr, "ftvm-async-race: setup: %s (%s)\n", ftvm_strerror(r),
			ftvm_last_error(c));
		return 1;
	}
	/* Each page holds a whole block of itself before the race. */
	for (uint64_t p = 0; p < alloc.pages && r == 0; p++) {
		fill(block, p, 0);
		r = ftvm_write_page(c, alloc.guid, p, block, alloc.block_size, NULL);
	}
	free(block);
	if (r < 0) {
		fprintf(stderr, "ftvm-async-race: first writes: %s (%s)\n", ftvm_strerror(r),
			ftvm_last_error(c));
		return 1;
	}

	for (unsigned i = 0; i < n_threads; i++) {
		workers[i].id = (int)i;
		workers[i].seed = 4242 + i;
		workers[i].pending = calloc(PER_THREAD_MAX, sizeof(*workers[i].pending));
		if (!workers[i].pending) {
			fprintf(stderr, "ftvm-async-race: out of memory\n");
			return 1;
		}
	}
	for (unsigned i = 0; i < n_threads; i++)
		pthread_create(&workers[i].thread, NULL, worker_main, &workers[i]);
	sleep(seconds);
	atomic_store(&stop, true);
	for (unsigned i = 0; i < n_threads; i++)
		pthread_join(workers[i].thread, NULL);

	for (unsigned i = 0; i < n_threads; i++) {
		struct worker *w = &workers[i];

		for (uint64_t k = 0; k < w->n; k++) {
			unsigned n = atomic_load(&w->pending[k].completions);

			never += n == 0;
			twice += n > 1;
			free(w->pending[k].buf);
		}
		printf("thread %d: %" PRIu64 " writes, %" PRIu64 " reads submitted, %" PRIu64
		       " reaps, %" PRIu64 " blocking rounds, %" PRIu64 " submits refused -EAGAIN\n",
		       w->id, w->writes, w->reads, w->reaps, w->blocking, w->again);
		free(w->pending);
	}
	r = ftvm_free(c, alloc.guid);
	if (r < 0)
		fault("free: %s (%s)", ftvm_strerror(r), ftvm_last_error(c));
	ftvm_disconnect(c);
	printf("%" PRIuFAST64 " submitted, %" PRIuFAST64 " completed; never completed %" PRIu64
	       ", completed twice %" PRIu64 ", faults %" PRIuFAST64 "\n",
	       atomic_load(&submitted_total), atomic_load(&completed_total), never, twice,
	       atomic_load(&faults));
	return never || twice || atomic_load(&faults) ? 1 : 0;
}
