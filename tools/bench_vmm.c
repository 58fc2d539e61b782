/* ftvm-bench-vmm: what a controller sees of the mirrored memory manager,
 * measured through libftvm against references taken in the same run.
 *
 *  1. references: a bare blocking TCP ping-pong on loopback (4 KiB and 64 KiB
 *     out, a small answer back: the floor of a mirrored write), and Redis
 *     synchronous replication (SET of 4 KiB then WAIT 1, a primary and a
 *     replica on loopback), skipped when redis-server is not installed;
 *  2. latency, p50 and p99, of each operation from a client of node a of a
 *     pair of ftvmd this program starts: alloc+free, header, whole-page write
 *     on a page node a owns and on one node b owns (b arbitrates the lock),
 *     whole-page read, and the pointer path: get a write pointer, fill the
 *     block, release it modified (on a page of each owner), get and release
 *     a read pointer;
 *  3. page-write throughput with 1, 4 and 16 clients, each on its own
 *     connection writing its own pages, split between the two nodes;
 *  4. 4 KiB reads below the frames (node/vmm/MEDIA.md), in a second pair
 *     with small pools and a flash file on node a only: a page paged in from
 *     flash (node a) and from the store (node b), by ftvm_read_page() and by
 *     a read pointer, the same reads of a resident page (warm) and of a page
 *     resting in DRAM, and as floors a bare 4 KiB pread of a file beside the
 *     flash file, with O_DIRECT and through the page cache; all interleaved,
 *     each page-in checked against the node's status counters;
 *  5. the write path of issue 24 (bench_write.c): 4 KiB writes from 1, 4 and
 *     16 clients and at queue depths 1, 8 and 32, ftvm at each [node] ack
 *     level in a pair of its own beside bare TCP, a relay doing no work and
 *     Redis SET + WAIT 1, taking turns, with the aims.
 * --only ops (1-3), media (4), write (5) runs some of them. --data-dir DIR
 * keeps the write table's latency samples and figures in DIR/write, as the
 * top of bench_write.c says, for tools/bench_plot.sh to draw.
 *
 * Everything runs on 127.0.0.1 (the pair's channel on --addr, with
 * --transport when given) in a temporary directory; every process it
 * starts dies with it (PR_SET_PDEATHSIG) and is stopped at the end (SIGTERM,
 * SIGKILL after 5 s). Figures are printed, never asserted. */
#define _GNU_SOURCE /* nftw */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_pair.h"
#include "bench_redis.h"
#include "bench_write.h"
#include "clock.h"
#include "ftvm.h"

#define KIB 1024u
#define SMALL_REPLY 64u	   /* bytes: about a write's answer on the wire */
#define PAGES_PER_ALLOC 16 /* pages cycled through by each writer */

static const unsigned thread_counts[] = { 1, 4, 16 };
static const size_t block_sizes[] = { 4 * KIB, 64 * KIB };

/* One line of the latency table. floor_p50 == 0: no ratio printed. */
struct row {
	char name[48];
	uint64_t p50, p99;
	double sleeps; /* the times this process blocked per operation */
	uint64_t floor_p50;
	const char *note; /* printed instead of figures when set */
	/* the media table's: the floor's name, and page-ins per sample (counted) */
	const char *floor_name;
	bool counted;
	double from_flash, from_store;
};

#define MEDIA_ROWS_MAX 12

struct bench {
	unsigned count, warmup, seconds;
	struct bench_pair_env env; /* what every pair of the run shares */
	char ftvmd[PATH_MAX];
	char dir[200]; /* short: the unix sockets live in it */
	struct bench_pair pair;
	uint64_t *samples;
	long sleeps_before; /* this process's voluntary context switches */
	struct row rows[24];
	size_t n_rows;
	uint64_t floor_4k, floor_64k, relay_4k, redis_p50;
	struct {
		size_t block;
		unsigned clients;
		double mb_s, writes_s;
	} tput[6];
	size_t n_tput;
	/* Each node's page blocks after the run: how they crossed the link. */
	struct ftvm_node_status after[2];
	bool have_after;
	/* Page-ins from flash and from the store, in a pair of their own. */
	struct row media_rows[MEDIA_ROWS_MAX];
	unsigned media_odd[MEDIA_ROWS_MAX]; /* samples with other page-ins than they should */
	bool media_direct;		    /* the floor's pread has O_DIRECT */
	bool media_flash_buffered;	    /* node a's log: its flash uses the page cache */
	bool have_media;
};

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	return remove(path) < 0 ? -1 : 0;
}

/* ---- the table ---- */

__attribute__((format(printf, 2, 3))) static struct row *row_add(struct bench *b, const char *fmt,
								 ...)
{
	struct row *row = &b->rows[b->n_rows++];
	va_list ap;

	memset(row, 0, sizeof(*row));
	va_start(ap, fmt);
	vsnprintf(row->name, sizeof(row->name), fmt, ap);
	va_end(ap);
	return row;
}

static long voluntary_switches(void)
{
	struct rusage ru;

	return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_nvcsw : 0;
}

/* Called before an operation's warm-up: row_set() then counts how often
 * this process blocked per operation, which shows a wakeup that found
 * nothing to do (a whole-page write blocks once, waiting for its reply). */
static void sleeps_start(struct bench *b)
{
	b->sleeps_before = voluntary_switches();
}

static void row_set(struct bench *b, struct row *row, uint64_t floor_p50)
{
	bench_percentiles(b->samples, b->count, &row->p50, &row->p99);
	row->sleeps = (double)(voluntary_switches() - b->sleeps_before) / (b->warmup + b->count);
	row->floor_p50 = floor_p50;
}

static const char *size_name(size_t bytes)
{
	return bytes == 4 * KIB ? "4 KiB" : "64 KiB";
}

/* ---- references ---- */

static int bench_floors(struct bench *b)
{
	struct row *row;
	int r;

	for (size_t k = 0; k < 2; k++) {
		size_t bytes = block_sizes[k];

		row = row_add(b, "bare TCP %s ping-pong (floor)", size_name(bytes));
		sleeps_start(b);
		r = bench_floor_run(BENCH_FLOOR_TCP, bytes, SMALL_REPLY, b->warmup, b->count,
				    b->samples);
		if (r < 0) {
			fprintf(stderr, "floor %s: %s\n", size_name(bytes), strerror(-r));
			return r;
		}
		row_set(b, row, 0);
		if (bytes == 4 * KIB)
			b->floor_4k = row->p50;
		else
			b->floor_64k = row->p50;
	}
	row = row_add(b, "relay: unix + TCP 4 KiB (design floor)");
	sleeps_start(b);
	r = bench_floor_run(BENCH_FLOOR_RELAY, 4 * KIB, SMALL_REPLY, b->warmup, b->count,
			    b->samples);
	if (r < 0) {
		fprintf(stderr, "relay floor: %s\n", strerror(-r));
		return r;
	}
	row_set(b, row, b->floor_4k);
	b->relay_4k = row->p50;
	return 0;
}

/* Redis synchronous replication: a primary and a replica on loopback, no
 * persistence on either (ftvm's pages are not on disk yet either). */
static int bench_redis(struct bench *b)
{
	struct row *row = row_add(b, "redis SET 4 KiB + WAIT 1");
	struct bench_redis redis;
	struct bench_redis_conn conn = { .fd = -1 };
	int r = bench_redis_start(&redis, b->dir);

	if (r == -ENOENT) {
		row->note = "skipped (redis-server not installed)";
		printf("redis: skipped (redis-server not installed)\n");
		return 0;
	}
	if (r == 0)
		r = bench_redis_open(&redis, "key", 4 * KIB, &conn);
	if (r < 0)
		goto out;
	sleeps_start(b);
	for (unsigned i = 0; i < b->warmup + b->count; i++) {
		uint64_t t0 = clock_now_us();

		r = bench_redis_write(&conn, 1, i);
		if (r < 0)
			goto out;
		if (i >= b->warmup)
			b->samples[i - b->warmup] = clock_now_us() - t0;
	}
	row_set(b, row, b->floor_4k);
	b->redis_p50 = row->p50;
out:
	bench_redis_close(&conn);
	bench_redis_stop(&redis);
	if (r < 0)
		fprintf(stderr, "redis: logs in %s\n", b->dir);
	return r;
}

/* ---- ftvm latency ---- */

struct op {
	struct ftvm_client *c;
	const char *guid;
	uint64_t pages;
	uint8_t *buf;
	size_t len;
};

typedef int (*op_fn)(struct op *op, unsigned i);

static int op_alloc_free(struct op *op, unsigned i)
{
	struct ftvm_alloc_info info;
	int r = ftvm_alloc(op->c, 4 * KIB, NULL, true, NULL, 0, &info);

	return r < 0 ? r : ftvm_free(op->c, info.guid);
}

static int op_header(struct op *op, unsigned i)
{
	struct ftvm_header h;

	return ftvm_header(op->c, op->guid, &h);
}

static int op_write(struct op *op, unsigned i)
{
	memcpy(op->buf, &i, sizeof(i)); /* each write new contents */
	return ftvm_write_page(op->c, op->guid, i % op->pages, op->buf, op->len, NULL);
}

static int op_read(struct op *op, unsigned i)
{
	size_t got;

	return ftvm_read_page(op->c, op->guid, i % op->pages, op->buf, op->len, &got, NULL);
}

/* The pointer path: get a write pointer, fill the block in the pool the
 * client maps, release it modified (two partner round trips). */
static int op_pointer_write(struct op *op, unsigned i)
{
	uint64_t page = i % op->pages;
	size_t len;
	void *p;
	int r = ftvm_get_write_pointer(op->c, op->guid, page, true, &p, &len);

	if (r < 0)
		return r;
	memcpy(op->buf, &i, sizeof(i));
	memcpy(p, op->buf, len < op->len ? len : op->len);
	return ftvm_release_pointer(op->c, op->guid, page, true, NULL);
}

static int op_pointer_read(struct op *op, unsigned i)
{
	uint64_t page = i % op->pages;
	const void *p;
	size_t len;
	int r = ftvm_get_read_pointer(op->c, op->guid, page, true, &p, &len);

	if (r < 0)
		return r;
	memcpy(op->buf, p, len < op->len ? len : op->len);
	return ftvm_release_pointer(op->c, op->guid, page, false, NULL);
}

static int measure(struct bench *b, struct row *row, op_fn fn, struct op *op, uint64_t floor_p50)
{
	sleeps_start(b);
	for (unsigned i = 0; i < b->warmup + b->count; i++) {
		uint64_t t0 = clock_now_us();
		int r = fn(op, i);

		if (r < 0) {
			fprintf(stderr, "%s: %s: %s\n", row->name, ftvm_strerror(r),
				ftvm_last_error(op->c));
			return r;
		}
		if (i >= b->warmup)
			b->samples[i - b->warmup] = clock_now_us() - t0;
	}
	row_set(b, row, floor_p50);
	return 0;
}

static int alloc_pages(struct ftvm_client *c, size_t block, uint64_t pages,
		       struct ftvm_alloc_info *ret)
{
	int r = ftvm_alloc(c, block * pages, block == 4 * KIB ? NULL : "big", true, NULL, 0, ret);

	if (r < 0)
		fprintf(stderr, "alloc of %llu pages of %zu bytes: %s: %s\n",
			(unsigned long long)pages, block, ftvm_strerror(r), ftvm_last_error(c));
	else if (ret->block_size != block)
		fprintf(stderr, "alloc: block size %u, wanted %zu\n", ret->block_size, block);
	return r < 0 ? r : ret->block_size == block ? 0 : -EPROTO;
}

static int bench_latency(struct bench *b)
{
	struct ftvm_client *a = NULL, *bc = NULL;
	struct ftvm_alloc_info here[2], there[2];
	uint8_t *buf = malloc(64 * KIB);
	struct op op = { .buf = buf, .pages = PAGES_PER_ALLOC };
	int r, n_here = 0, n_there = 0;

	if (!buf)
		return -ENOMEM;
	memset(buf, 0x5a, 64 * KIB);
	r = ftvm_connect(b->pair.sock[0], &a);
	if (r == 0)
		r = ftvm_connect(b->pair.sock[1], &bc);
	if (r < 0) {
		fprintf(stderr, "connect: %s\n", ftvm_strerror(r));
		goto out;
	}
	op.c = a;
	for (; n_here < 2; n_here++) {
		r = alloc_pages(a, block_sizes[n_here], PAGES_PER_ALLOC, &here[n_here]);
		if (r < 0)
			goto out;
	}
	for (; n_there < 2; n_there++) {
		r = alloc_pages(bc, block_sizes[n_there], PAGES_PER_ALLOC, &there[n_there]);
		if (r < 0)
			goto out;
	}

	r = measure(b, row_add(b, "alloc + free 4 KiB"), op_alloc_free, &op, 0);
	if (r < 0)
		goto out;
	op.guid = here[0].guid;
	r = measure(b, row_add(b, "header"), op_header, &op, 0);
	if (r < 0)
		goto out;
	for (size_t k = 0; k < 2; k++) {
		uint64_t floor_p50 = k == 0 ? b->floor_4k : b->floor_64k;

		op.len = block_sizes[k];
		op.guid = here[k].guid;
		r = measure(b, row_add(b, "write_page %s, owned here", size_name(op.len)), op_write,
			    &op, floor_p50);
		if (r < 0)
			goto out;
		op.guid = there[k].guid;
		r = measure(b, row_add(b, "write_page %s, owned by partner", size_name(op.len)),
			    op_write, &op, floor_p50);
		if (r < 0)
			goto out;
	}
	for (size_t k = 0; k < 2; k++) {
		op.len = block_sizes[k];
		op.guid = here[k].guid;
		r = measure(b, row_add(b, "read_page %s", size_name(op.len)), op_read, &op,
			    k == 0 ? b->floor_4k : b->floor_64k);
		if (r < 0)
			goto out;
	}
	op.len = 4 * KIB;
	op.guid = here[0].guid;
	r = measure(b, row_add(b, "pointer write 4 KiB, owned here"), op_pointer_write, &op,
		    b->floor_4k);
	if (r == 0) {
		op.guid = there[0].guid;
		r = measure(b, row_add(b, "pointer write 4 KiB, owned by partner"),
			    op_pointer_write, &op, b->floor_4k);
	}
	if (r == 0) {
		op.guid = here[0].guid;
		r = measure(b, row_add(b, "pointer read 4 KiB, owned here"), op_pointer_read, &op,
			    b->floor_4k);
	}
out:
	while (n_there-- > 0)
		ftvm_free(bc, there[n_there].guid);
	while (n_here-- > 0)
		ftvm_free(a, here[n_here].guid);
	ftvm_disconnect(bc);
	ftvm_disconnect(a);
	free(buf);
	return r;
}

/* --node SOCKET: only the whole-page 4 KiB write of bench_latency(), on the
 * node serving at SOCKET (its pair started by someone else), of pages that
 * node owns, with nothing else of the run. tools/bench_nbd.sh interleaves it
 * with its NBD rounds on the same pair, so that the block path is held
 * against this figure taken on the same nodes in the same minutes. */
static int bench_node_write_page(struct bench *b, const char *sock)
{
	struct ftvm_client *c = NULL;
	struct ftvm_alloc_info here;
	uint8_t buf[4 * KIB];
	struct op op = { .buf = buf, .len = sizeof(buf), .pages = PAGES_PER_ALLOC };
	struct row *row;
	int r = ftvm_connect(sock, &c);

	if (r < 0) {
		fprintf(stderr, "ftvm-bench-vmm: connect to %s: %s\n", sock, ftvm_strerror(r));
		return r;
	}
	memset(buf, 0x5a, sizeof(buf));
	r = alloc_pages(c, 4 * KIB, PAGES_PER_ALLOC, &here);
	if (r < 0)
		goto out;
	op.c = c;
	op.guid = here.guid;
	row = row_add(b, "write_page 4 KiB, owned here");
	r = measure(b, row, op_write, &op, 0);
	ftvm_free(c, here.guid);
	if (r == 0)
		printf("%-38s %8llu %8llu %7.2f\n", row->name, (unsigned long long)row->p50,
		       (unsigned long long)row->p99, row->sleeps);
out:
	ftvm_disconnect(c);
	return r;
}

/* ---- ftvm throughput ---- */

struct writer {
	pthread_t thread;
	const char *sock;
	size_t block;
	unsigned seconds;
	pthread_barrier_t *start;
	uint64_t writes, t_start, t_end;
	int r;
	char error[256];
};

static void *writer_run(void *arg)
{
	struct writer *w = arg;
	struct ftvm_client *c = NULL;
	struct ftvm_alloc_info info = { .guid = "" };
	uint8_t *buf = malloc(w->block);
	uint64_t deadline;

	if (!buf)
		w->r = -ENOMEM;
	else if ((w->r = ftvm_connect(w->sock, &c)) < 0)
		snprintf(w->error, sizeof(w->error), "connect %s: %s", w->sock,
			 ftvm_strerror(w->r));
	else if ((w->r = ftvm_alloc(c, w->block * PAGES_PER_ALLOC,
				    w->block == 4 * KIB ? NULL : "big", true, NULL, 0, &info)) < 0)
		snprintf(w->error, sizeof(w->error), "alloc: %s: %s", ftvm_strerror(w->r),
			 ftvm_last_error(c));
	if (buf)
		memset(buf, 0xa5, w->block);
	/* Everyone meets here, also after a failure, so nobody waits forever. */
	pthread_barrier_wait(w->start);
	w->t_start = clock_now_us();
	deadline = w->t_start + (uint64_t)w->seconds * 1000000;
	while (w->r == 0) {
		uint64_t now;

		memcpy(buf, &w->writes, sizeof(w->writes));
		w->r = ftvm_write_page(c, info.guid, w->writes % PAGES_PER_ALLOC, buf, w->block,
				       NULL);
		if (w->r < 0) {
			snprintf(w->error, sizeof(w->error), "write_page %s: %s: %s", info.guid,
				 ftvm_strerror(w->r), ftvm_last_error(c));
			break;
		}
		w->writes++;
		now = clock_now_us();
		if (now >= deadline) {
			w->t_end = now;
			break;
		}
	}
	if (info.guid[0])
		ftvm_free(c, info.guid);
	ftvm_disconnect(c);
	free(buf);
	return NULL;
}

static int bench_throughput_one(struct bench *b, size_t block, unsigned clients)
{
	struct writer *w = calloc(clients, sizeof(*w));
	pthread_barrier_t start;
	uint64_t writes = 0, t0 = UINT64_MAX, t1 = 0;
	unsigned started = 0;
	int r = 0;

	if (!w)
		return -ENOMEM;
	pthread_barrier_init(&start, NULL, clients);
	for (; started < clients; started++) {
		struct writer *x = &w[started];

		x->sock = b->pair.sock[clients > 1 ? started % 2 : 0];
		x->block = block;
		x->seconds = b->seconds;
		x->start = &start;
		r = -pthread_create(&x->thread, NULL, writer_run, x);
		if (r < 0) {
			/* The barrier counts on every thread: none can be missing. */
			fprintf(stderr, "pthread_create: %s\n", strerror(-r));
			exit(1);
		}
	}
	for (unsigned i = 0; i < clients; i++) {
		pthread_join(w[i].thread, NULL);
		if (w[i].r < 0 && r == 0) {
			fprintf(stderr, "throughput %s, %u clients, client %u: %s\n",
				size_name(block), clients, i, w[i].error);
			r = w[i].r;
		}
		writes += w[i].writes;
		t0 = w[i].t_start < t0 ? w[i].t_start : t0;
		t1 = w[i].t_end > t1 ? w[i].t_end : t1;
	}
	pthread_barrier_destroy(&start);
	free(w);
	if (r == 0) {
		double secs = (double)(t1 - t0) / 1e6;

		b->tput[b->n_tput].block = block;
		b->tput[b->n_tput].clients = clients;
		b->tput[b->n_tput].writes_s = (double)writes / secs;
		b->tput[b->n_tput].mb_s = (double)writes * (double)block / secs / 1e6;
		b->n_tput++;
	}
	return r;
}

static int bench_throughput(struct bench *b)
{
	for (size_t k = 0; k < 2; k++)
		for (size_t t = 0; t < sizeof(thread_counts) / sizeof(thread_counts[0]); t++) {
			int r = bench_throughput_one(b, block_sizes[k], thread_counts[t]);
			if (r < 0)
				return r;
		}
	return 0;
}

/* Both nodes' counters once the runs are done: whether the page blocks went
 * one-sided (RDMA WRITE into landings) or inline, which the figures depend on. */
static int bench_page_paths(struct bench *b)
{
	uint64_t deadline = clock_now_ms() + BENCH_START_DEADLINE_MS;

	for (int i = 0; i < 2; i++) {
		struct ftvm_client *c;
		int r = bench_pair_connect(&b->pair, i, deadline, &c);

		if (r < 0)
			return r;
		r = ftvm_status(c, &b->after[i]);
		if (r < 0)
			fprintf(stderr, "status of node %s: %s: %s\n", b->pair.nodes[i].name,
				ftvm_strerror(r), ftvm_last_error(c));
		ftvm_disconnect(c);
		if (r < 0)
			return r;
	}
	b->have_after = true;
	return 0;
}

/* ---- media: page-ins from flash and from the store (node/vmm/MEDIA.md) ---- */

/* A pair of its own: node a has a flash file, node b none, so a capacity
 * allocation rests on flash on a and in the store on b. Its pools are
 * MEDIA_POOL_PAGES frames, and a cold read cycles through twice as many
 * pages of one allocation: the pages read since it last read a page took
 * every frame the least recently used pages had, that page's among them, so
 * each cold read is a page-in. The status counters of the node asked, read
 * after every sample, say whether it was. */
#define MEDIA_POOL "1M"
#define MEDIA_POOL_PAGES 256u
#define MEDIA_COLD_PAGES (2 * MEDIA_POOL_PAGES)
#define MEDIA_CONFIG                                              \
	"[store]\nsize = 32M\n"                                   \
	"[policy cap]\nblock_size = 4K\nperformance = capacity\n" \
	"[policy fast]\nblock_size = 4K\nperformance = high\n"

enum media_op {
	MEDIA_PREAD_DIRECT,
	MEDIA_PREAD_CACHED,
	MEDIA_POINTER_WARM,
	MEDIA_READ_WARM,
	MEDIA_POINTER_DRAM,
	MEDIA_POINTER_FLASH,
	MEDIA_POINTER_STORE,
	MEDIA_READ_FLASH,
	MEDIA_READ_STORE,
	MEDIA_OPS,
	/* Not run: each sample the sum of two run in the same round. */
	MEDIA_FLOOR_POINTER = MEDIA_OPS, /* pread O_DIRECT + warm pointer read */
	MEDIA_FLOOR_READ,		 /* pread O_DIRECT + warm read_page */
	MEDIA_SERIES,
};
_Static_assert(MEDIA_SERIES <= MEDIA_ROWS_MAX, "struct bench's media rows");

static const struct media_op_info {
	const char *name;
	int node;	 /* whose client runs it: 0 node a, 1 node b; -1 no node */
	bool whole_page; /* ftvm_read_page(), else a read pointer got and released */
	bool cold;	 /* each sample should be one page-in */
	int floor;	 /* the series its ratio is held against, or -1 */
} media_ops[MEDIA_SERIES] = {
	[MEDIA_PREAD_DIRECT] = { .name = "pread 4 KiB, O_DIRECT (floor)", .node = -1, .floor = -1 },
	[MEDIA_PREAD_CACHED] = { .name = "pread 4 KiB, page cache", .node = -1, .floor = -1 },
	[MEDIA_POINTER_WARM] = { .name = "pointer read 4 KiB, flash, warm",
				 .node = 0,
				 .floor = -1 },
	[MEDIA_READ_WARM] = { .name = "read_page 4 KiB, flash, warm",
			      .node = 0,
			      .whole_page = true,
			      .floor = -1 },
	[MEDIA_POINTER_DRAM] = { .name = "pointer read 4 KiB, DRAM (high)",
				 .node = 0,
				 .floor = MEDIA_POINTER_WARM },
	[MEDIA_FLOOR_POINTER] = { .name = "pread + warm pointer read (floor)", .floor = -1 },
	[MEDIA_FLOOR_READ] = { .name = "pread + warm read_page (floor)", .floor = -1 },
	[MEDIA_POINTER_FLASH] = { .name = "pointer read 4 KiB, flash, cold",
				  .node = 0,
				  .cold = true,
				  .floor = MEDIA_FLOOR_POINTER },
	[MEDIA_POINTER_STORE] = { .name = "pointer read 4 KiB, store, cold",
				  .node = 1,
				  .cold = true,
				  .floor = MEDIA_FLOOR_POINTER },
	[MEDIA_READ_FLASH] = { .name = "read_page 4 KiB, flash, cold",
			       .node = 0,
			       .whole_page = true,
			       .cold = true,
			       .floor = MEDIA_FLOOR_READ },
	[MEDIA_READ_STORE] = { .name = "read_page 4 KiB, store, cold",
			       .node = 1,
			       .whole_page = true,
			       .cold = true,
			       .floor = MEDIA_FLOOR_READ },
};

/* The order of the table: floors first, then what is held against them. */
static const enum media_op media_order[] = {
	MEDIA_PREAD_DIRECT,  MEDIA_PREAD_CACHED,  MEDIA_POINTER_WARM, MEDIA_READ_WARM,
	MEDIA_POINTER_DRAM,  MEDIA_FLOOR_POINTER, MEDIA_FLOOR_READ,   MEDIA_POINTER_FLASH,
	MEDIA_POINTER_STORE, MEDIA_READ_FLASH,	  MEDIA_READ_STORE,
};

struct media {
	struct bench_pair pair;
	struct ftvm_client *c[2];
	/* on a: flash (cold reads), warm (one page read every round), dram;
	 * on b: store (cold reads) */
	struct ftvm_alloc_info flash, warm, dram, store;
	int fd_direct, fd_cached; /* the floor's file, beside the flash file */
	uint8_t *block;		  /* page-aligned, as O_DIRECT wants */
	uint64_t next_cold[2];	  /* the next cold page: of flash on a, of store on b */
	uint64_t seen[2][2];	  /* each node's page-ins so far: from flash, from the store */
	uint64_t *samples[MEDIA_SERIES];
};

/* Page-ins of node i since the last call: from flash, from the store. */
static int media_page_ins(struct media *m, int i, uint64_t ret[2])
{
	struct ftvm_node_status st;
	int r = ftvm_status(m->c[i], &st);

	if (r < 0) {
		fprintf(stderr, "status of %s: %s: %s\n", m->pair.nodes[i].name, ftvm_strerror(r),
			ftvm_last_error(m->c[i]));
		return r;
	}
	ret[0] = st.flash_page_ins - m->seen[i][0];
	ret[1] = st.page_ins - st.flash_page_ins - m->seen[i][1];
	m->seen[i][0] = st.flash_page_ins;
	m->seen[i][1] = st.page_ins - st.flash_page_ins;
	return 0;
}

/* One sample of op in round i: *ret_us is its time alone. */
static int media_run(struct media *m, enum media_op op, unsigned i, uint64_t *ret_us)
{
	const struct media_op_info *info = &media_ops[op];
	struct op o = { .buf = m->block, .len = 4 * KIB, .pages = 1 };
	op_fn fn = info->whole_page ? op_read : op_pointer_read;
	unsigned at = 0;
	uint64_t t0;
	int r;

	if (op == MEDIA_PREAD_DIRECT || op == MEDIA_PREAD_CACHED) {
		off_t off = (off_t)(i % MEDIA_COLD_PAGES) * 4 * KIB;
		ssize_t n;

		t0 = clock_now_us();
		n = pread(op == MEDIA_PREAD_DIRECT ? m->fd_direct : m->fd_cached, m->block, 4 * KIB,
			  off);
		*ret_us = clock_now_us() - t0;
		r = n == 4 * KIB ? 0 : n < 0 ? -errno : -EIO;
		if (r < 0)
			fprintf(stderr, "%s: %s\n", info->name, strerror(-r));
		return r;
	}
	o.c = m->c[info->node];
	if (info->cold) {
		o.guid = info->node == 0 ? m->flash.guid : m->store.guid;
		o.pages = MEDIA_COLD_PAGES;
		at = (unsigned)(m->next_cold[info->node]++ % MEDIA_COLD_PAGES);
	} else {
		o.guid = op == MEDIA_POINTER_DRAM ? m->dram.guid : m->warm.guid;
	}
	t0 = clock_now_us();
	r = fn(&o, at);
	*ret_us = clock_now_us() - t0;
	if (r < 0)
		fprintf(stderr, "%s: %s: %s\n", info->name, ftvm_strerror(r), ftvm_last_error(o.c));
	return r;
}

static int media_alloc(struct ftvm_client *c, const char *policy, uint64_t pages,
		       const char *want_media, struct ftvm_alloc_info *ret)
{
	struct ftvm_mapping map;
	int r = ftvm_alloc(c, pages * 4 * KIB, policy, true, NULL, 0, ret);

	if (r == 0)
		r = ftvm_mapping_of(c, ret->guid, &map);
	if (r < 0) {
		fprintf(stderr, "media: alloc of %llu pages, policy %s: %s: %s\n",
			(unsigned long long)pages, policy, ftvm_strerror(r), ftvm_last_error(c));
		return r;
	}
	if (strcmp(map.media, want_media) != 0) {
		fprintf(stderr, "media: %s (policy %s) rests on %s on the node asked, not %s\n",
			ret->guid, policy, map.media, want_media);
		return -EPROTO;
	}
	return 0;
}

/* Every page gets contents (a page never written is zeroes, no page-in). */
static int media_fill(struct media *m, int i, const struct ftvm_alloc_info *a)
{
	for (uint64_t p = 0; p < a->pages; p++) {
		int r;

		memset(m->block, (int)(p & 0xff), 4 * KIB);
		memcpy(m->block, &p, sizeof(p));
		r = ftvm_write_page(m->c[i], a->guid, p, m->block, 4 * KIB, NULL);
		if (r < 0) {
			fprintf(stderr, "media: writing page %llu of %s: %s: %s\n",
				(unsigned long long)p, a->guid, ftvm_strerror(r),
				ftvm_last_error(m->c[i]));
			return r;
		}
	}
	return 0;
}

/* The floor's file: as many pages as a cold read cycles through, beside
 * the flash file, read with O_DIRECT (or, where the file system has none,
 * through the page cache, which is said) and through the page cache. */
static int media_floor_file(struct bench *b, struct media *m)
{
	char path[PATH_MAX];
	int fd, r = 0;

	snprintf(path, sizeof(path), "%s/floor.data", m->pair.dir);
	fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		return -errno;
	for (unsigned p = 0; p < MEDIA_COLD_PAGES && r == 0; p++) {
		ssize_t n;

		memset(m->block, (int)p, 4 * KIB);
		n = pwrite(fd, m->block, 4 * KIB, (off_t)p * 4 * KIB);
		if (n != 4 * KIB)
			r = n < 0 ? -errno : -EIO;
	}
	if (r == 0 && fdatasync(fd) < 0)
		r = -errno;
	if (r < 0) {
		close(fd);
		return r;
	}
	m->fd_cached = fd;
	m->fd_direct = open(path, O_RDONLY | O_CLOEXEC | O_DIRECT);
	if (m->fd_direct >= 0 && pread(m->fd_direct, m->block, 4 * KIB, 0) != 4 * KIB) {
		close(m->fd_direct);
		m->fd_direct = -1;
	}
	b->media_direct = m->fd_direct >= 0;
	if (!b->media_direct)
		m->fd_direct = open(path, O_RDONLY | O_CLOEXEC);
	return m->fd_direct >= 0 ? 0 : -errno;
}

/* Whether node a's log says its flash goes through the page cache
 * (store_open_flash logs it when O_DIRECT does not take its pages). */
static bool flash_buffered(const struct bench_pair *pair)
{
	FILE *f = fopen(pair->nodes[0].log, "re");
	char *line = NULL;
	size_t len = 0;
	bool found = false;

	if (!f)
		return false;
	while (!found && getline(&line, &len, f) >= 0)
		found = strstr(line, "flash") && strstr(line, "the page cache is used");
	free(line);
	fclose(f);
	return found;
}

static int media_setup(struct bench *b, struct media *m)
{
	uint64_t deadline, ins[2];
	int r;

	if (mkdir(m->pair.dir, 0700) < 0) {
		fprintf(stderr, "media: mkdir %s: %s\n", m->pair.dir, strerror(errno));
		return -errno;
	}
	r = media_floor_file(b, m);
	if (r < 0) {
		fprintf(stderr, "media: the floor's file in %s: %s\n", m->pair.dir, strerror(-r));
		return r;
	}
	r = bench_pair_start(&b->env, &m->pair);
	if (r < 0)
		return r;
	deadline = clock_now_ms() + BENCH_START_DEADLINE_MS;
	for (int i = 0; i < 2 && r == 0; i++)
		r = bench_pair_connect(&m->pair, i, deadline, &m->c[i]);
	if (r == 0)
		r = media_alloc(m->c[0], "cap", MEDIA_COLD_PAGES, "flash", &m->flash);
	if (r == 0)
		r = media_alloc(m->c[0], "cap", 1, "flash", &m->warm);
	if (r == 0)
		r = media_alloc(m->c[0], "fast", 1, "dram", &m->dram);
	if (r == 0)
		r = media_alloc(m->c[1], "cap", MEDIA_COLD_PAGES, "store", &m->store);
	if (r == 0)
		r = media_fill(m, 0, &m->flash);
	if (r == 0)
		r = media_fill(m, 0, &m->warm);
	if (r == 0)
		r = media_fill(m, 0, &m->dram);
	if (r == 0)
		r = media_fill(m, 1, &m->store);
	/* One pass over the cold pages, in the order the rounds take them, so
	 * that the replacement queue holds them in that order. */
	for (uint64_t p = 0; p < MEDIA_COLD_PAGES && r == 0; p++)
		for (int i = 0; i < 2 && r == 0; i++) {
			size_t got;

			r = ftvm_read_page(m->c[i], i == 0 ? m->flash.guid : m->store.guid, p,
					   m->block, 4 * KIB, &got, NULL);
			if (r < 0)
				fprintf(stderr, "media: reading page %llu on %s: %s: %s\n",
					(unsigned long long)p, m->pair.nodes[i].name,
					ftvm_strerror(r), ftvm_last_error(m->c[i]));
		}
	for (int i = 0; i < 2 && r == 0; i++)
		r = media_page_ins(m, i, ins);
	b->media_flash_buffered = flash_buffered(&m->pair);
	return r;
}

static void media_rows(struct bench *b, struct media *m)
{
	unsigned n = b->count;

	/* The sums first: the percentiles sort each series in place. */
	for (unsigned i = 0; i < n; i++) {
		m->samples[MEDIA_FLOOR_POINTER][i] =
			m->samples[MEDIA_PREAD_DIRECT][i] + m->samples[MEDIA_POINTER_WARM][i];
		m->samples[MEDIA_FLOOR_READ][i] =
			m->samples[MEDIA_PREAD_DIRECT][i] + m->samples[MEDIA_READ_WARM][i];
	}
	for (size_t k = 0; k < sizeof(media_order) / sizeof(media_order[0]); k++) {
		struct row *row = &b->media_rows[media_order[k]];

		snprintf(row->name, sizeof(row->name), "%s", media_ops[media_order[k]].name);
		if (media_order[k] == MEDIA_PREAD_DIRECT && !b->media_direct)
			snprintf(row->name, sizeof(row->name), "pread 4 KiB, no O_DIRECT (floor)");
		bench_percentiles(m->samples[media_order[k]], n, &row->p50, &row->p99);
	}
	for (size_t k = 0; k < MEDIA_SERIES; k++) {
		struct row *row = &b->media_rows[k];

		if (media_ops[k].floor >= 0) {
			row->floor_p50 = b->media_rows[media_ops[k].floor].p50;
			row->floor_name = b->media_rows[media_ops[k].floor].name;
		}
	}
}

/* A round's order: every operation once, shuffled (Fisher-Yates on
 * xorshift64). */
static void media_shuffle(enum media_op order[MEDIA_OPS], uint64_t *seed)
{
	for (unsigned k = 0; k < MEDIA_OPS; k++)
		order[k] = (enum media_op)k;
	for (unsigned k = MEDIA_OPS - 1; k > 0; k--) {
		unsigned j;
		enum media_op x;

		*seed ^= *seed << 13;
		*seed ^= *seed >> 7;
		*seed ^= *seed << 17;
		j = (unsigned)(*seed % (k + 1));
		x = order[k];
		order[k] = order[j];
		order[j] = x;
	}
}

static int bench_media(struct bench *b)
{
	struct media m = {
		.pair = { .label = "media pair",
			  .memory = MEDIA_POOL,
			  .extra = { MEDIA_CONFIG "[flash]\npath = a.flash\nsize = 16M\n",
				     MEDIA_CONFIG },
			  .nodes = { { .name = "ftvmd a (media pair)", .pid = -1 },
				     { .name = "ftvmd b (media pair)", .pid = -1 } } },
		.fd_direct = -1,
		.fd_cached = -1,
	};
	uint64_t seed = 0x9e3779b97f4a7c15ull; /* the same orders in every run */
	int r = 0;

	snprintf(m.pair.dir, sizeof(m.pair.dir), "%s/media", b->dir);
	if (posix_memalign((void **)&m.block, 4 * KIB, 4 * KIB))
		return -ENOMEM;
	for (size_t k = 0; k < MEDIA_SERIES && r == 0; k++) {
		m.samples[k] = calloc(b->count, sizeof(uint64_t));
		if (!m.samples[k])
			r = -ENOMEM;
	}
	if (r == 0)
		r = media_setup(b, &m);
	/* Each round runs every operation once, in an order of its own, so
	 * that what the machine does meanwhile falls on all of them alike.
	 * Shuffled, not rotated: a rotation keeps each read behind the same
	 * one, and a read behind the two preads finds both nodes idle and
	 * pays their wakeups (40 us more at p50 here for the same call). */
	for (unsigned i = 0; i < b->warmup + b->count && r == 0; i++) {
		enum media_op order[MEDIA_OPS];

		media_shuffle(order, &seed);
		for (unsigned k = 0; k < MEDIA_OPS && r == 0; k++) {
			enum media_op op = order[k];
			const struct media_op_info *info = &media_ops[op];
			uint64_t us, ins[2] = { 0, 0 };

			r = media_run(&m, op, i, &us);
			if (r == 0 && info->node >= 0)
				r = media_page_ins(&m, info->node, ins);
			if (r < 0 || i < b->warmup)
				continue;
			m.samples[op][i - b->warmup] = us;
			b->media_rows[op].from_flash += (double)ins[0] / b->count;
			b->media_rows[op].from_store += (double)ins[1] / b->count;
			b->media_rows[op].counted = info->node >= 0;
			if (ins[0] + ins[1] != (info->cold ? 1u : 0u))
				b->media_odd[op]++;
		}
	}
	if (r == 0) {
		media_rows(b, &m);
		b->have_media = true;
	}
	if (m.c[1] && m.store.guid[0])
		ftvm_free(m.c[1], m.store.guid);
	for (size_t k = 0; k < 3 && m.c[0]; k++) {
		const char *guid = k == 0 ? m.flash.guid : k == 1 ? m.warm.guid : m.dram.guid;

		if (guid[0])
			ftvm_free(m.c[0], guid);
	}
	for (int i = 0; i < 2; i++)
		ftvm_disconnect(m.c[i]);
	bench_pair_stop(&m.pair);
	if (m.fd_direct >= 0)
		close(m.fd_direct);
	if (m.fd_cached >= 0)
		close(m.fd_cached);
	for (size_t k = 0; k < MEDIA_SERIES; k++)
		free(m.samples[k]);
	free(m.block);
	return r;
}

/* ---- output ---- */

static void print_page_paths(const struct bench *b)
{
	printf("\npage blocks sent to the partner (transport %s):\n", b->after[0].transport);
	for (int i = 0; i < 2; i++) {
		const struct ftvm_node_status *st = &b->after[i];

		printf("  node %c: %llu one-sided, %llu inline; the partner's taken %llu, "
		       "refused %llu\n",
		       'a' + i, (unsigned long long)st->pages_one_sided,
		       (unsigned long long)st->pages_inline,
		       (unsigned long long)st->landings_adopted,
		       (unsigned long long)st->landings_refused);
	}
}

/* The floor of the design itself: a client in its own process reaches its
 * node, which reaches the partner, with nothing else done. A whole-page
 * write is one such relay, the pointer path two (get the pointer, release
 * it); what the operation costs above that is the node's own work. */
static void print_design_floor(const struct bench *b, const struct row *own4,
			       const struct row *pointer_own)
{
	double relay = (double)b->relay_4k;

	printf("design floor (relay through a unix socket and TCP, no work): %.2fx the floor;\n",
	       relay / (double)b->floor_4k);
	printf("  whole-page 4 KiB write owned here %.2fx the relay", (double)own4->p50 / relay);
	if (pointer_own)
		printf(", pointer write %.2fx two relays", (double)pointer_own->p50 / (2 * relay));
	printf("\n");
}

static void print_table(const struct bench *b)
{
	const struct row *own4 = NULL, *partner4 = NULL, *pointer_own = NULL,
			 *pointer_partner = NULL;

	printf("\n%-38s %8s %8s %7s   %s\n", "operation", "p50 us", "p99 us", "sleeps",
	       "vs floor(p50)");
	for (size_t i = 0; i < b->n_rows; i++) {
		const struct row *row = &b->rows[i];

		if (row->note) {
			printf("%-38s %s\n", row->name, row->note);
			continue;
		}
		printf("%-38s %8llu %8llu %7.2f", row->name, (unsigned long long)row->p50,
		       (unsigned long long)row->p99, row->sleeps);
		if (row->floor_p50)
			printf("   %6.2fx", (double)row->p50 / (double)row->floor_p50);
		printf("\n");
		if (strcmp(row->name, "write_page 4 KiB, owned here") == 0)
			own4 = row;
		if (strcmp(row->name, "write_page 4 KiB, owned by partner") == 0)
			partner4 = row;
		if (strcmp(row->name, "pointer write 4 KiB, owned here") == 0)
			pointer_own = row;
		if (strcmp(row->name, "pointer write 4 KiB, owned by partner") == 0)
			pointer_partner = row;
	}
	printf("(%u samples per operation after %u warm-up; client on node a; writes and reads\n"
	       " compare with the floor of their own size, Redis with the 4 KiB floor; sleeps:\n"
	       " the times the client blocked per operation, a voluntary context switch)\n",
	       b->count, b->warmup);

	printf("\n%-10s %7s %8s %10s %10s\n", "throughput", "block", "clients", "MB/s", "writes/s");
	for (size_t i = 0; i < b->n_tput; i++)
		printf("%-10s %7s %8u %10.1f %10.0f\n", "", size_name(b->tput[i].block),
		       b->tput[i].clients, b->tput[i].mb_s, b->tput[i].writes_s);
	printf("(whole-page writes for %u s, each client its own connection and pages, "
	       "clients alternating\n between node a and node b; MB = 10^6 bytes)\n",
	       b->seconds);
	if (b->have_after)
		print_page_paths(b);

	if (!own4 || !partner4 || !b->floor_4k)
		return;
	printf("\naims (issue), whole-page 4 KiB write at p50:\n");
	printf("  within 1.5x the floor:  owned here %.2fx, owned by partner %.2fx: %s\n",
	       (double)own4->p50 / (double)b->floor_4k, (double)partner4->p50 / (double)b->floor_4k,
	       own4->p50 * 2 <= b->floor_4k * 3 && partner4->p50 * 2 <= b->floor_4k * 3
		       ? "met"
		       : "not met");
	if (b->redis_p50)
		printf("  faster than Redis:      owned here %llu us, owned by partner %llu us, "
		       "Redis %llu us: %s\n",
		       (unsigned long long)own4->p50, (unsigned long long)partner4->p50,
		       (unsigned long long)b->redis_p50,
		       own4->p50 < b->redis_p50 && partner4->p50 < b->redis_p50 ? "met"
										: "not met");
	else
		printf("  faster than Redis:      not measured (redis-server not installed)\n");
	if (pointer_own && pointer_partner)
		printf("pointer write 4 KiB at p50, within 2.5x the floor: owned here %.2fx, owned by "
		       "partner %.2fx: %s\n",
		       (double)pointer_own->p50 / (double)b->floor_4k,
		       (double)pointer_partner->p50 / (double)b->floor_4k,
		       pointer_own->p50 * 2 <= b->floor_4k * 5 &&
				       pointer_partner->p50 * 2 <= b->floor_4k * 5
			       ? "met"
			       : "not met");
	if (b->relay_4k)
		print_design_floor(b, own4, pointer_own);
}

/* Page-ins beside their floors, each cold read held against a bare read of
 * the same file system plus the same call on a resident page. */
static void print_media(const struct bench *b)
{
	const struct row *rows = b->media_rows;

	printf("\n%-38s %8s %8s %6s %6s   %s\n", "media: 4 KiB reads", "p50 us", "p99 us", "flash",
	       "store", "vs floor(p50)");
	for (size_t k = 0; k < sizeof(media_order) / sizeof(media_order[0]); k++) {
		const struct row *row = &rows[media_order[k]];

		printf("%-38s %8llu %8llu", row->name, (unsigned long long)row->p50,
		       (unsigned long long)row->p99);
		if (row->counted)
			printf(" %6.2f %6.2f", row->from_flash, row->from_store);
		else
			printf(" %6s %6s", "-", "-");
		if (row->floor_p50)
			printf("   %6.2fx %s", (double)row->p50 / (double)row->floor_p50,
			       row->floor_name);
		printf("\n");
	}
	printf("(%u rounds after %u warm-up, each running every read above once, shuffled;\n"
	       " flash, store: page-ins per sample, from the status counters of the node asked;\n"
	       " a pair of its own with pools of %s: node a has a flash file, read %s, and\n"
	       " node b none, its copy resting in the store, read through the page cache; cold\n"
	       " reads cycle through %u pages, twice the pool; pread reads a file beside the\n"
	       " flash file; each ratio is against the floor named after it)\n",
	       b->count, b->warmup, MEDIA_POOL,
	       b->media_flash_buffered ? "through the page cache (its log says)" : "with O_DIRECT",
	       MEDIA_COLD_PAGES);
	for (size_t k = 0; k < MEDIA_OPS; k++)
		if (b->media_odd[k])
			printf("  %u of %u samples of '%s' made %s\n", b->media_odd[k], b->count,
			       rows[k].name,
			       media_ops[k].cold ? "other than one page-in" : "page-ins");
	if (rows[MEDIA_POINTER_FLASH].p50 && rows[MEDIA_READ_FLASH].p50)
		printf("page-in from the store / from flash at p50: pointer read %.2fx, read_page "
		       "%.2fx\n",
		       (double)rows[MEDIA_POINTER_STORE].p50 /
			       (double)rows[MEDIA_POINTER_FLASH].p50,
		       (double)rows[MEDIA_READ_STORE].p50 / (double)rows[MEDIA_READ_FLASH].p50);
	if (rows[MEDIA_POINTER_WARM].p50 && rows[MEDIA_READ_WARM].p50)
		printf("flash, cold / warm at p50: pointer read %.2fx, read_page %.2fx\n",
		       (double)rows[MEDIA_POINTER_FLASH].p50 / (double)rows[MEDIA_POINTER_WARM].p50,
		       (double)rows[MEDIA_READ_FLASH].p50 / (double)rows[MEDIA_READ_WARM].p50);
}

/* ---- main ---- */

static void usage(FILE *out)
{
	fprintf(out,
		"Usage: ftvm-bench-vmm [--count N] [--seconds S] [--only PARTS] [--levels LEVELS]\n"
		"                      [--rounds R] [--cell-ms MS] [--data-dir DIR] [--ftvmd PATH]\n"
		"                      [--trace] [--transport T] [--addr ADDR] [--node SOCKET]\n"
		"Starts a pair of ftvmd on loopback and measures libftvm's latency and page-write\n"
		"throughput against a bare TCP ping-pong and Redis synchronous replication (ops);\n"
		"then a second pair, small pools and flash on one node, for 4 KiB reads paged in\n"
		"from flash and from the store, cold and warm, against a bare pread with O_DIRECT\n"
		"(media); then the write path of issue 24 (write): 4 KiB writes from 1, 4 and 16\n"
		"clients and at queue depths 1, 8 and 32, ftvm at each [node] ack level in a pair\n"
		"of its own beside a bare TCP ping-pong, a relay doing no work over the same hops\n"
		"and Redis SET + WAIT 1, taking turns round after round, and the issue's aims.\n"
		"  --count N      latency samples per operation, and rounds of the reads of the\n"
		"                 media pair (default 2000)\n"
		"  --seconds S    duration of each throughput run (default 3), and of each cell of\n"
		"                 the write table over all its rounds (S * 1000 / R ms a round)\n"
		"  --only PARTS   run only these, comma-separated: ops, media, write (default all)\n"
		"  --levels L     the write table's ack levels, comma-separated: mirror, commit,\n"
		"                 durable (default all three)\n"
		"  --rounds R     rounds of the write table (default 3)\n"
		"  --cell-ms MS   each write-table cell's time in each round (default from\n"
		"                 --seconds and --rounds)\n"
		"  --data-dir DIR the write table's figures also as files: DIR/write/summary.csv\n"
		"                 (row,clients,depth,subject,p50_us,p99_us,writes_per_s,samples),\n"
		"                 DIR/write/ROW/SUBJECT.samples (each write's latency in us, one a\n"
		"                 line, sorted) and DIR/write/machine.txt (nproc, load, date);\n"
		"                 tools/bench_plot.sh draws them\n"
		"  --ftvmd PATH   the daemon to start (default: ../node/ftvmd from this binary's "
		"directory)\n"
		"  --trace        both nodes record every message to a trace meanwhile, as\n"
		"                 [trace] path does (to measure what recording costs)\n"
		"  --transport T  the pairs' transport: auto, tcp or rdma (default: the config's, "
		"auto)\n"
		"  --addr ADDR    where the pairs' channel listens (default 127.0.0.1; for rdma an\n"
		"                 address on an RDMA device)\n"
		"  --node SOCKET  no pair of its own and no references: only --count whole-page\n"
		"                 4 KiB writes of pages owned by the node serving at SOCKET, one\n"
		"                 row printed (p50 us, p99 us, sleeps); tools/bench_nbd.sh uses it\n"
		"  --help         this text\n");
}

enum part {
	PART_OPS = 1u << 0,
	PART_MEDIA = 1u << 1,
	PART_WRITE = 1u << 2,
};

static int parse_parts(const char *s, unsigned *ret)
{
	unsigned parts = 0;

	for (const char *p = s; *p;) {
		size_t n = strcspn(p, ",");

		if (n == 3 && strncmp(p, "ops", n) == 0)
			parts |= PART_OPS;
		else if (n == 5 && strncmp(p, "media", n) == 0)
			parts |= PART_MEDIA;
		else if (n == 5 && strncmp(p, "write", n) == 0)
			parts |= PART_WRITE;
		else
			break;
		p += n + (p[n] == ',');
		if (!*p) {
			*ret = parts;
			return 0;
		}
	}
	fprintf(stderr, "ftvm-bench-vmm: --only '%s': want ops, media or write, comma-separated\n",
		s);
	return -EINVAL;
}

static int parse_unsigned(const char *opt, const char *s, unsigned max, unsigned *ret)
{
	char *end;
	unsigned long v;

	errno = 0;
	v = strtoul(s, &end, 10);
	if (errno || end == s || *end || s[0] == '-' || v == 0 || v > max) {
		fprintf(stderr, "ftvm-bench-vmm: %s wants a whole number from 1 to %u, not '%s'\n",
			opt, max, s);
		return -EINVAL;
	}
	*ret = (unsigned)v;
	return 0;
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "seconds", required_argument, NULL, 's' },
		{ "ftvmd", required_argument, NULL, 'd' },
		{ "trace", no_argument, NULL, 'T' },
		{ "transport", required_argument, NULL, 't' },
		{ "addr", required_argument, NULL, 'a' },
		{ "node", required_argument, NULL, 'N' },
		{ "only", required_argument, NULL, 'o' },
		{ "levels", required_argument, NULL, 'l' },
		{ "rounds", required_argument, NULL, 'r' },
		{ "cell-ms", required_argument, NULL, 'c' },
		{ "data-dir", required_argument, NULL, 'D' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct bench b = {
		.count = 2000,
		.seconds = 3,
		.env = { .addr = "127.0.0.1" },
		.pair = { .label = "pair",
			  .memory = "128M",
			  .nodes = { { .name = "ftvmd a", .pid = -1 },
				     { .name = "ftvmd b", .pid = -1 } } },
	};
	struct bench_write_opts wo = {
		.env = &b.env,
		.dir = b.dir,
		.rounds = 3,
		.levels = BENCH_ACK_ALL,
		.argc = argc,
		.argv = argv,
	};
	const char *tmp = getenv("TMPDIR"), *node = NULL;
	unsigned parts = PART_OPS | PART_MEDIA | PART_WRITE;
	int c, r = 0, media_r = 0;

	while ((c = getopt_long(argc, argv, "n:s:d:t:a:N:o:l:r:c:D:Th", options, NULL)) != -1) {
		switch (c) {
		case 'o':
			if (parse_parts(optarg, &parts) < 0)
				return 2;
			break;
		case 'l':
			if (bench_write_parse_levels(optarg, &wo.levels) < 0) {
				fprintf(stderr,
					"ftvm-bench-vmm: --levels '%s': want mirror, commit or "
					"durable, comma-separated\n",
					optarg);
				return 2;
			}
			break;
		case 'r':
			if (parse_unsigned("--rounds", optarg, 1000, &wo.rounds) < 0)
				return 2;
			break;
		case 'c':
			if (parse_unsigned("--cell-ms", optarg, 3600000, &wo.cell_ms) < 0)
				return 2;
			break;
		case 'D':
			wo.data_dir = optarg;
			break;
		case 'T':
			b.env.trace = true;
			break;
		case 'n':
			if (parse_unsigned("--count", optarg, 10000000, &b.count) < 0)
				return 2;
			break;
		case 's':
			if (parse_unsigned("--seconds", optarg, 3600, &b.seconds) < 0)
				return 2;
			break;
		case 'd':
			if (snprintf(b.ftvmd, sizeof(b.ftvmd), "%s", optarg) >=
			    (int)sizeof(b.ftvmd)) {
				fprintf(stderr, "ftvm-bench-vmm: --ftvmd path too long\n");
				return 2;
			}
			break;
		case 't':
			if (strcmp(optarg, "auto") && strcmp(optarg, "tcp") &&
			    strcmp(optarg, "rdma")) {
				fprintf(stderr,
					"ftvm-bench-vmm: --transport '%s': want auto, tcp or rdma\n",
					optarg);
				return 2;
			}
			b.env.transport = optarg;
			break;
		case 'a':
			b.env.addr = optarg;
			break;
		case 'N':
			node = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind < argc) {
		fprintf(stderr, "ftvm-bench-vmm: unexpected argument '%s'\n", argv[optind]);
		usage(stderr);
		return 2;
	}
	b.warmup = b.count / 10 ? b.count / 10 : 1;
	if (!wo.cell_ms)
		wo.cell_ms = b.seconds * 1000 / wo.rounds ? b.seconds * 1000 / wo.rounds : 1;
	if (node) {
		b.samples = calloc(b.count, sizeof(*b.samples));
		r = b.samples ? bench_node_write_page(&b, node) : -ENOMEM;
		free(b.samples);
		return r == 0 ? 0 : 1;
	}
	if (!b.ftvmd[0])
		bench_default_ftvmd(argv[0], b.ftvmd, sizeof(b.ftvmd));
	if (access(b.ftvmd, X_OK) < 0) {
		fprintf(stderr, "ftvm-bench-vmm: no ftvmd at %s (%s); name it with --ftvmd PATH\n",
			b.ftvmd, strerror(errno));
		return 1;
	}
	b.env.ftvmd = b.ftvmd;
	b.samples = calloc(b.count, sizeof(*b.samples));
	if (!b.samples)
		return 1;
	if (snprintf(b.dir, sizeof(b.dir), "%s/ftvm-bench-vmm.XXXXXX",
		     tmp && *tmp ? tmp : "/tmp") >= (int)sizeof(b.dir)) {
		fprintf(stderr, "ftvm-bench-vmm: TMPDIR is too long for unix socket paths\n");
		free(b.samples);
		return 1;
	}
	if (!mkdtemp(b.dir)) {
		fprintf(stderr, "ftvm-bench-vmm: mkdtemp %s: %s\n", b.dir, strerror(errno));
		free(b.samples);
		return 1;
	}
	snprintf(b.pair.dir, sizeof(b.pair.dir), "%s", b.dir);
	signal(SIGPIPE, SIG_IGN);

	if (parts & PART_OPS) {
		r = bench_floors(&b);
		if (r == 0)
			r = bench_redis(&b);
		if (r == 0)
			r = bench_pair_start(&b.env, &b.pair);
		if (r == 0)
			r = bench_latency(&b);
		if (r == 0)
			r = bench_throughput(&b);
		if (r == 0)
			r = bench_page_paths(&b);
		bench_pair_stop(&b.pair);
	}
	/* A media pair that fails does not take the first pair's table with it. */
	if (r == 0 && (parts & PART_MEDIA) && (media_r = bench_media(&b)) < 0)
		fprintf(stderr, "ftvm-bench-vmm: the media pair failed; its logs are in %s/media\n",
			b.dir);
	if (r == 0 && (parts & PART_OPS))
		print_table(&b);
	if (r == 0 && b.have_media)
		print_media(&b);
	fflush(stdout);
	if (r == 0 && (parts & PART_WRITE))
		r = bench_write_run(&wo);
	r = r < 0 ? r : media_r;
	if (r == 0) {
		nftw(b.dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	} else {
		fprintf(stderr, "ftvm-bench-vmm: failed; configs and logs kept in %s\n", b.dir);
	}
	free(b.samples);
	return r == 0 ? 0 : 1;
}
