/* The page table in SQLite: what is committed comes back field for field
 * after a reopen, what is not committed is gone, journal LSNs and guid numbers
 * never repeat, each failing change leaves the table as it was, and files
 * that are not (or not yet) this build's page table are refused with a reason.
 * Page writes, journalled first and folded into pages later, come back in
 * the order they were called, also after a kill between a commit and a fold.
 * Real files in a fresh directory; a second SQLite connection looks at them
 * from the outside. Ends with a group-commit figure (printed, not checked). */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check.h"
#include "pagetable_sqlite.h"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

static char dir[256];

static char *path_in_dir(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
	return buf;
}

/* Opens or dies: a test that cannot open its table cannot run. */
static struct pagetable *open_or_die(const char *path)
{
	struct pagetable *pt;
	int r = pagetable_open(path, false, &pt);

	if (r < 0) {
		fprintf(stderr, "ERROR pagetable_open %s: %s (%s)\n", path, strerror(-r),
			pagetable_last_error(NULL));
		exit(99);
	}
	return pt;
}

static struct pt_origin own(struct pagetable *pt)
{
	return (struct pt_origin){ .node = "node-a",
				   .lsn = pagetable_reserve_lsn(pt),
				   .own = true };
}

static struct pt_origin mirrored(uint64_t partner_lsn)
{
	return (struct pt_origin){ .node = "node-b", .lsn = partner_lsn, .own = false };
}

#define CHECK_OK(what, expr)                                                                     \
	do {                                                                                     \
		int r_ = (expr);                                                                 \
		checks++;                                                                        \
		if (r_ < 0)                                                                      \
			FAIL("%s: expected success, got %d (%s): %s", (what), r_, strerror(-r_), \
			     pagetable_last_error(pt));                                          \
	} while (0)

/* ---- A model of what the table should hold, and what load gives ---------- */

#define MAX_ALLOCS 8
#define MAX_PAGES 16

struct model_alloc {
	char guid[64], home[32], owner[32], policy[32], client[72], session[40], media[8];
	char volume[72];
	uint64_t size, pages, store_offset, flash_offset;
	uint32_t block_size, uid;
	uint8_t header[64];
	size_t header_len;
	uint64_t version[MAX_PAGES];
	uint32_t crc[MAX_PAGES];
	bool dirty[MAX_PAGES];
	uint64_t pages_seen;
};

struct model {
	struct model_alloc a[MAX_ALLOCS];
	size_t n;
};

static int load_alloc(const struct pt_alloc *a, void *arg)
{
	struct model *m = arg;
	struct model_alloc *x;

	if (m->n == MAX_ALLOCS) {
		FAIL("load: more than %d allocations", MAX_ALLOCS);
		return -E2BIG;
	}
	x = &m->a[m->n++];
	memset(x, 0, sizeof(*x));
	snprintf(x->guid, sizeof(x->guid), "%s", a->guid);
	snprintf(x->home, sizeof(x->home), "%s", a->home);
	snprintf(x->owner, sizeof(x->owner), "%s", a->owner);
	snprintf(x->policy, sizeof(x->policy), "%s", a->policy);
	x->size = a->size;
	x->pages = a->pages;
	x->block_size = a->block_size;
	x->store_offset = a->store_offset;
	x->uid = a->uid;
	snprintf(x->client, sizeof(x->client), "%s", a->client ? a->client : "(NULL)");
	snprintf(x->session, sizeof(x->session), "%s", a->session ? a->session : "(NULL)");
	snprintf(x->media, sizeof(x->media), "%s", a->media ? a->media : "(NULL)");
	x->flash_offset = a->flash_offset;
	snprintf(x->volume, sizeof(x->volume), "%s", a->volume ? a->volume : "(NULL)");
	if (a->header_len > sizeof(x->header) || (a->header_len && !a->header)) {
		FAIL("load %s: header of %zu bytes at %p", a->guid, a->header_len,
		     (const void *)a->header);
		return -EINVAL;
	}
	if (a->header_len)
		memcpy(x->header, a->header, a->header_len);
	x->header_len = a->header_len;
	return 0;
}

static int load_page(const struct pt_page *p, void *arg)
{
	struct model *m = arg;
	struct model_alloc *x = m->n ? &m->a[m->n - 1] : NULL;

	if (!x || strcmp(x->guid, p->guid) != 0) {
		FAIL("load: page %" PRIu64 " of %s came outside its allocation", p->page, p->guid);
		return -EINVAL;
	}
	if (p->page != x->pages_seen || p->page >= MAX_PAGES) {
		FAIL("load %s: page %" PRIu64 " came where %" PRIu64 " was due", p->guid, p->page,
		     x->pages_seen);
		return -EINVAL;
	}
	x->version[p->page] = p->version;
	x->crc[p->page] = p->crc32c;
	x->dirty[p->page] = p->dirty;
	x->pages_seen++;
	return 0;
}

static void load_model(struct pagetable *pt, struct model *got)
{
	memset(got, 0, sizeof(*got));
	CHECK_OK("pagetable_load", pagetable_load(pt, load_alloc, load_page, got));
}

static void compare(const char *ctx, const struct model *e, const struct model *g)
{
	if (e->n != g->n) {
		FAIL("%s: expected %zu allocations, got %zu", ctx, e->n, g->n);
		return;
	}
	for (size_t i = 0; i < e->n; i++) {
		const struct model_alloc *x = &e->a[i], *y = &g->a[i];

		checks++;
		if (strcmp(x->guid, y->guid) || strcmp(x->home, y->home) ||
		    strcmp(x->owner, y->owner) || strcmp(x->policy, y->policy))
			FAIL("%s: allocation %zu: expected %s/%s/%s/%s, got %s/%s/%s/%s", ctx, i,
			     x->guid, x->home, x->owner, x->policy, y->guid, y->home, y->owner,
			     y->policy);
		CHECK_INT("size", x->size, y->size);
		CHECK_INT("store_offset", x->store_offset, y->store_offset);
		CHECK_INT("uid", x->uid, y->uid);
		CHECK_STR("client", x->client, y->client);
		CHECK_STR("session", x->session, y->session);
		CHECK_STR("media", x->media, y->media);
		CHECK_INT("flash_offset", x->flash_offset, y->flash_offset);
		CHECK_STR("volume", x->volume, y->volume);
		CHECK_INT("block_size", x->block_size, y->block_size);
		CHECK_INT("pages", x->pages, y->pages);
		CHECK_INT("pages loaded", x->pages, y->pages_seen);
		CHECK_INT("header_len", x->header_len, y->header_len);
		CHECK(memcmp(x->header, y->header, x->header_len) == 0,
		      "%s: %s: header bytes differ", ctx, x->guid);
		for (uint64_t p = 0; p < x->pages && p < MAX_PAGES; p++) {
			checks++;
			if (x->version[p] != y->version[p] || x->crc[p] != y->crc[p] ||
			    x->dirty[p] != y->dirty[p])
				FAIL("%s: %s page %" PRIu64 ": expected version %" PRIu64
				     " crc 0x%08x dirty %d, got %" PRIu64 " 0x%08x %d",
				     ctx, x->guid, p, x->version[p], x->crc[p], x->dirty[p],
				     y->version[p], y->crc[p], y->dirty[p]);
		}
	}
}

/* Puts an allocation into the table and the model, in guid order. */
static int model_put(struct pagetable *pt, struct model *m, const char *guid, uint64_t size,
		     uint32_t block_size, uint64_t pages, const uint8_t *header, size_t header_len,
		     uint32_t zero_crc, const struct pt_origin *o)
{
	struct pt_alloc a = {
		.guid = guid,
		.home = o->own ? "node-a" : "node-b",
		.owner = "node-b",
		.policy = header_len ? "default" : "immediate",
		.size = size,
		.block_size = block_size,
		.pages = pages,
		.header = header,
		.header_len = header_len,
		.store_offset = 65536 + size * 3,   /* any value, distinct per allocation */
		.uid = (uint32_t)(size * 7) + 1000, /* any value, distinct per allocation */
		.client = header_len ? "app.client-1" : NULL, /* NULL: the default, "" */
		.session = header_len ? NULL : "00112233445566778899aabbccddeeff",
		.media = header_len ? "flash" : NULL, /* NULL: the default, "store" */
		.flash_offset = header_len ? 65536 + size * 5 : 0,
		.volume = header_len ? NULL : "vol-1", /* NULL: the default, "" */
	};
	struct model_alloc *x;
	size_t at = 0;
	int r;

	r = pagetable_alloc_put(pt, &a, zero_crc, o);
	if (r < 0)
		return r;
	while (at < m->n && strcmp(m->a[at].guid, guid) < 0)
		at++;
	memmove(&m->a[at + 1], &m->a[at], (m->n - at) * sizeof(m->a[0]));
	m->n++;
	x = &m->a[at];
	memset(x, 0, sizeof(*x));
	snprintf(x->guid, sizeof(x->guid), "%s", guid);
	snprintf(x->home, sizeof(x->home), "%s", a.home);
	snprintf(x->owner, sizeof(x->owner), "%s", a.owner);
	snprintf(x->policy, sizeof(x->policy), "%s", a.policy);
	x->size = size;
	snprintf(x->client, sizeof(x->client), "%s", a.client ? a.client : "");
	snprintf(x->session, sizeof(x->session), "%s", a.session ? a.session : "");
	snprintf(x->media, sizeof(x->media), "%s", a.media ? a.media : "store");
	x->flash_offset = a.flash_offset;
	snprintf(x->volume, sizeof(x->volume), "%s", a.volume ? a.volume : "");
	x->store_offset = a.store_offset;
	x->uid = a.uid;
	x->block_size = block_size;
	x->pages = x->pages_seen = pages;
	if (header_len)
		memcpy(x->header, header, header_len);
	x->header_len = header_len;
	for (uint64_t p = 0; p < pages; p++)
		x->crc[p] = zero_crc;
	return 0;
}

static int model_page(struct pagetable *pt, struct model *m, const char *guid, uint64_t page,
		      uint64_t version, uint32_t crc, bool dirty, const struct pt_origin *o)
{
	struct pt_page p = {
		.guid = guid, .page = page, .version = version, .crc32c = crc, .dirty = dirty
	};
	int r = pagetable_page_put(pt, &p, o);

	if (r < 0)
		return r;
	for (size_t i = 0; i < m->n; i++)
		if (strcmp(m->a[i].guid, guid) == 0) {
			m->a[i].version[page] = version;
			m->a[i].crc[page] = crc;
			m->a[i].dirty[page] = dirty;
		}
	return 0;
}

/* ---- Looking from outside ------------------------------------------------ */

static sqlite3 *raw_open(const char *path)
{
	sqlite3 *db;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE, NULL) != SQLITE_OK) {
		fprintf(stderr, "ERROR sqlite3_open %s: %s\n", path, sqlite3_errmsg(db));
		exit(99);
	}
	sqlite3_busy_timeout(db, 5000);
	return db;
}

/* The first column of the first row as text, "" when there is none. */
static void raw_query(sqlite3 *db, const char *sql, char *buf, size_t len)
{
	sqlite3_stmt *st;

	buf[0] = '\0';
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "ERROR %s: %s\n", sql, sqlite3_errmsg(db));
		exit(99);
	}
	if (sqlite3_step(st) == SQLITE_ROW && sqlite3_column_text(st, 0))
		snprintf(buf, len, "%s", (const char *)sqlite3_column_text(st, 0));
	sqlite3_finalize(st);
}

static void raw_exec(sqlite3 *db, const char *sql)
{
	char *err = NULL;

	if (sqlite3_exec(db, sql, NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "ERROR %s: %s\n", sql, err);
		exit(99);
	}
}

struct journal_row {
	uint64_t lsn, origin_lsn, page, version;
	int64_t crc32c;
	char origin[16], op[8], guid[32];
	bool has_page;
};

static size_t raw_journal(const char *path, struct journal_row *rows, size_t max)
{
	sqlite3 *db = raw_open(path);
	sqlite3_stmt *st;
	size_t n = 0;

	if (sqlite3_prepare_v2(db,
			       "SELECT lsn, origin, origin_lsn, op, guid, page, version, crc32c"
			       " FROM journal ORDER BY lsn",
			       -1, &st, NULL) != SQLITE_OK) {
		fprintf(stderr, "ERROR reading the journal: %s\n", sqlite3_errmsg(db));
		exit(99);
	}
	while (sqlite3_step(st) == SQLITE_ROW && n < max) {
		struct journal_row *j = &rows[n++];

		j->lsn = (uint64_t)sqlite3_column_int64(st, 0);
		snprintf(j->origin, sizeof(j->origin), "%s", sqlite3_column_text(st, 1));
		j->origin_lsn = (uint64_t)sqlite3_column_int64(st, 2);
		snprintf(j->op, sizeof(j->op), "%s", sqlite3_column_text(st, 3));
		snprintf(j->guid, sizeof(j->guid), "%s", sqlite3_column_text(st, 4));
		j->has_page = sqlite3_column_type(st, 5) != SQLITE_NULL;
		j->page = (uint64_t)sqlite3_column_int64(st, 5);
		j->version = (uint64_t)sqlite3_column_int64(st, 6);
		j->crc32c = sqlite3_column_int64(st, 7);
	}
	sqlite3_finalize(st);
	sqlite3_close(db);
	return n;
}

/* ---- The tests ----------------------------------------------------------- */

static const uint8_t header_a[] = { 0x00, 0xff, 'h', 'd', 'r', 0x00, 0x80, 0x7f };
static const uint8_t header_c[40] = { [0] = 0x01, [39] = 0xfe };

/* Three allocations of different shapes, pages changed by both origins,
 * committed, closed, reopened, loaded: every field as it was put. */
static void test_round_trip(void)
{
	char path[300];
	struct pagetable *pt;
	struct model want = { 0 }, got;
	struct pt_origin o;

	path_in_dir(path, sizeof(path), "round_trip.db");
	pt = open_or_die(path);
	/* The first table of the process: SQLite was told before its first
	 * use not to count its allocations, so it says it holds none. */
	CHECK_INT("SQLite's allocations not counted", 0, sqlite3_memory_used());
	CHECK(!pagetable_in_transaction(pt), "a fresh table has no open transaction");
	CHECK_INT("journal rows of a new table", 0, pagetable_journal_count(pt));

	o = own(pt);
	CHECK_OK("put node-a-10",
		 model_put(pt, &want, "node-a-10", 0xfffffffffffff000ull, 0x80001000u, 5, header_a,
			   sizeof(header_a), 0xdeadbeefu, &o));
	CHECK(pagetable_in_transaction(pt), "a change opens a transaction");
	o = mirrored(7);
	CHECK_OK("put node-b-2", model_put(pt, &want, "node-b-2", 4096, 4096, 1, NULL, 0, 0, &o));
	o = own(pt);
	CHECK_OK("put node-a-1", model_put(pt, &want, "node-a-1", 3 * 65536, 65536, 3, header_c,
					   sizeof(header_c), 0xffffffffu, &o));
	o = own(pt);
	CHECK_OK("page 4 of node-a-10", model_page(pt, &want, "node-a-10", 4, 0x8000000000000001ull,
						   0x80000000u, true, &o));
	o = mirrored(8);
	CHECK_OK("page 0 of node-a-1",
		 model_page(pt, &want, "node-a-1", 0, 1, 0x12345678u, false, &o));
	o = mirrored(9);
	CHECK_OK("page 0 of node-b-2",
		 model_page(pt, &want, "node-b-2", 0, 0xffffffffffffffffull, 0, true, &o));

	/* Read back before the commit too: the open transaction is visible. */
	load_model(pt, &got);
	compare("before commit", &want, &got);
	CHECK_OK("commit", pagetable_commit(pt));
	CHECK(!pagetable_in_transaction(pt), "commit closes the transaction");
	CHECK_OK("commit with nothing open", pagetable_commit(pt));
	CHECK_INT("journal rows", 6, pagetable_journal_count(pt));
	pagetable_close(pt);

	pt = open_or_die(path);
	load_model(pt, &got);
	compare("after reopen", &want, &got);
	CHECK_STR("first in guid (text) order", "node-a-1", got.a[0].guid);
	CHECK_STR("second in guid (text) order", "node-a-10", got.a[1].guid);
	CHECK_INT("journal rows after reopen", 6, pagetable_journal_count(pt));
	pagetable_close(pt);
}

/* What is not committed when the table closes is gone. */
static void test_uncommitted(void)
{
	char path[300];
	struct pagetable *pt;
	struct model want = { 0 }, scratch = { 0 }, got;
	struct pt_origin o;

	path_in_dir(path, sizeof(path), "uncommitted.db");
	pt = open_or_die(path);
	o = own(pt);
	CHECK_OK("put x", model_put(pt, &want, "x", 8192, 4096, 2, header_a, 3, 7, &o));
	CHECK_OK("set partner_applied_lsn", pagetable_set_partner_applied_lsn(pt, 41));
	CHECK_OK("commit", pagetable_commit(pt));

	o = own(pt);
	CHECK_OK("put y", model_put(pt, &scratch, "y", 4096, 4096, 1, NULL, 0, 7, &o));
	o = mirrored(3);
	CHECK_OK("page 1 of x", model_page(pt, &scratch, "x", 1, 9, 9, true, &o));
	o = own(pt);
	CHECK_OK("delete x", pagetable_alloc_delete(pt, "x", &o));
	CHECK_OK("set partner_applied_lsn", pagetable_set_partner_applied_lsn(pt, 42));
	CHECK(pagetable_in_transaction(pt), "the changes are in an open transaction");
	CHECK_INT("journal rows inside the transaction", 4, pagetable_journal_count(pt));
	pagetable_close(pt);

	pt = open_or_die(path);
	load_model(pt, &got);
	compare("after closing with a transaction open", &want, &got);
	CHECK_INT("journal rows", 1, pagetable_journal_count(pt));
	CHECK_INT("partner_applied_lsn", 41, pagetable_partner_applied_lsn(pt));
	pagetable_close(pt);
}

static int commit_failures, commit_failure_r;

static void on_commit_failed(void *arg, int r)
{
	commit_failures++;
	commit_failure_r = r;
}

/* A commit that cannot write its WAL fails, calls the hook set with
 * pagetable_on_commit_failed() once, with the failure, and rolls the
 * transaction back: reopened, the table has what was committed before. The
 * file size limit stands in for a full disk (SQLite's write gets EFBIG
 * where it would get ENOSPC). */
static void test_commit_failed(void)
{
	char path[300], wal[310];
	uint8_t header[4000];
	struct pagetable *pt;
	struct model want = { 0 }, got;
	/* Its header is larger than the model keeps: never loaded, only put. */
	struct pt_alloc y = { .guid = "y",
			      .home = "node-a",
			      .owner = "node-b",
			      .policy = "default",
			      .size = 4096,
			      .block_size = 4096,
			      .pages = 1,
			      .header = header,
			      .header_len = sizeof(header),
			      .store_offset = 1 << 20 };
	struct pt_origin o;
	struct rlimit unlimited, limit;
	struct stat st;
	int r;

	memset(header, 0x5a, sizeof(header));
	path_in_dir(path, sizeof(path), "commit_failed.db");
	snprintf(wal, sizeof(wal), "%s-wal", path);
	pt = open_or_die(path);
	pagetable_on_commit_failed(pt, on_commit_failed, NULL);
	o = own(pt);
	CHECK_OK("put x", model_put(pt, &want, "x", 8192, 4096, 2, header_a, 3, 7, &o));
	CHECK_OK("commit x", pagetable_commit(pt));
	CHECK_INT("no failure yet", 0, commit_failures);

	o = own(pt);
	CHECK_OK("put y", pagetable_alloc_put(pt, &y, 7, &o));
	if (stat(wal, &st) < 0 || getrlimit(RLIMIT_FSIZE, &unlimited) < 0) {
		FAIL("stat %s or getrlimit: %s", wal, strerror(errno));
		pagetable_close(pt);
		return;
	}
	limit = unlimited;
	limit.rlim_cur = (rlim_t)st.st_size; /* the WAL may not grow */
	signal(SIGXFSZ, SIG_IGN);
	setrlimit(RLIMIT_FSIZE, &limit);
	r = pagetable_commit(pt);
	setrlimit(RLIMIT_FSIZE, &unlimited);
	CHECK(r < 0, "the commit failed: %d", r);
	CHECK_INT("the hook ran once", 1, commit_failures);
	CHECK_INT("with the failure", r, commit_failure_r);
	CHECK(!pagetable_in_transaction(pt), "the transaction was rolled back");
	/* y went with it, though it was known whole when it was made (known_alloc
	 * in pagetable_sqlite.c): a write of its page is refused; x's stands. */
	o = own(pt);
	CHECK_INT("a page of y once its transaction was lost", -ENOENT,
		  pagetable_page_put(pt, &(struct pt_page){ .guid = "y", .version = 1 }, &o));
	o = own(pt);
	CHECK_OK("a page of x", model_page(pt, &want, "x", 1, 2, 0x22u, true, &o));
	CHECK_OK("commit x's page", pagetable_commit(pt));
	pagetable_close(pt);

	pt = open_or_die(path);
	load_model(pt, &got);
	compare("reopened after the failed commit", &want, &got);
	pagetable_close(pt);
}

/* Journal rows: own ones at their reserved LSN, mirrored ones at a fresh
 * local LSN keeping the partner's; LSNs increase and survive reopen, also
 * past reservations whose transaction never committed. */
static void test_journal(void)
{
	char path[300];
	struct pagetable *pt;
	struct model m = { 0 }, got;
	struct journal_row rows[16];
	struct pt_origin o1, o2, o3;
	uint64_t lsn, last;
	size_t n;

	path_in_dir(path, sizeof(path), "journal.db");
	pt = open_or_die(path);
	o1 = own(pt);
	CHECK_INT("first LSN", 1, o1.lsn);
	CHECK_OK("put g", model_put(pt, &m, "g", 4096, 4096, 2, NULL, 0, 0x1111u, &o1));
	o2 = mirrored(0x7000000000000000ull);
	CHECK_OK("page 1 of g", model_page(pt, &m, "g", 1, 5, 0xabcdef01u, true, &o2));
	o3 = own(pt);
	CHECK_OK("delete g", pagetable_alloc_delete(pt, "g", &o3));
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);

	n = raw_journal(path, rows, ARRAY_SIZE(rows));
	CHECK_INT("journal rows", 3, n);
	if (n == 3) {
		CHECK_INT("row 0 lsn (reserved)", o1.lsn, rows[0].lsn);
		CHECK_STR("row 0 op", "alloc", rows[0].op);
		CHECK_STR("row 0 origin", "node-a", rows[0].origin);
		CHECK_INT("row 0 origin_lsn", o1.lsn, rows[0].origin_lsn);
		CHECK_STR("row 0 guid", "g", rows[0].guid);
		CHECK(!rows[0].has_page, "an alloc row has no page");
		CHECK_STR("row 1 op", "page", rows[1].op);
		CHECK_STR("row 1 origin", "node-b", rows[1].origin);
		CHECK_INT("row 1 origin_lsn (the partner's)", 0x7000000000000000ull,
			  rows[1].origin_lsn);
		CHECK(rows[1].lsn > o1.lsn && rows[1].lsn < o3.lsn,
		      "row 1's local LSN %" PRIu64 " lies between %" PRIu64 " and %" PRIu64,
		      rows[1].lsn, o1.lsn, o3.lsn);
		CHECK(rows[1].has_page, "a page row has a page");
		CHECK_INT("row 1 page", 1, rows[1].page);
		CHECK_INT("row 1 version", 5, rows[1].version);
		CHECK_INT("row 1 crc32c", 0xabcdef01u, rows[1].crc32c);
		CHECK_INT("row 2 lsn (reserved)", o3.lsn, rows[2].lsn);
		CHECK_STR("row 2 op", "free", rows[2].op);
	}

	/* Reserved, never used, never committed: still never again. */
	pt = open_or_die(path);
	lsn = pagetable_reserve_lsn(pt);
	CHECK(lsn > o3.lsn, "LSN after reopen %" PRIu64 " > %" PRIu64, lsn, o3.lsn);
	last = pagetable_reserve_lsn(pt);
	CHECK(last > lsn, "LSNs increase: %" PRIu64 " then %" PRIu64, lsn, last);
	CHECK(!pagetable_in_transaction(pt), "reserving opens no transaction");
	pagetable_close(pt);

	/* A mirrored change's fresh LSN, in a transaction that is lost. */
	pt = open_or_die(path);
	lsn = pagetable_reserve_lsn(pt);
	CHECK(lsn > last, "LSN after reopen %" PRIu64 " > %" PRIu64, lsn, last);
	o2 = mirrored(1);
	CHECK_OK("put h", model_put(pt, &m, "h", 4096, 4096, 1, NULL, 0, 0, &o2));
	pagetable_close(pt);
	n = raw_journal(path, rows, ARRAY_SIZE(rows));
	CHECK_INT("journal rows after the lost transaction", 3, n);
	pt = open_or_die(path);
	last = pagetable_reserve_lsn(pt);
	CHECK(last > lsn + 1, "LSN after reopen %" PRIu64 " > %" PRIu64, last, lsn + 1);

	/* An own change must bring an LSN this table reserved. */
	o1 = (struct pt_origin){ .node = "node-a", .lsn = last + 1000000, .own = true };
	CHECK_INT("own change with an LSN never reserved", -EINVAL,
		  model_put(pt, &m, "i", 4096, 4096, 1, NULL, 0, 0, &o1));
	o1.lsn = 0;
	CHECK_INT("own change with LSN 0", -EINVAL,
		  model_put(pt, &m, "i", 4096, 4096, 1, NULL, 0, 0, &o1));
	/* The same reserved LSN twice: the second journal row is refused. */
	o1.lsn = last;
	CHECK_OK("put i", model_put(pt, &m, "i", 4096, 4096, 1, NULL, 0, 0, &o1));
	CHECK_INT("an own LSN used twice", -EEXIST,
		  model_put(pt, &m, "j", 4096, 4096, 1, NULL, 0, 0, &o1));
	CHECK(strstr(pagetable_last_error(pt), "journal") != NULL,
	      "the reason names the journal: \"%s\"", pagetable_last_error(pt));
	/* j's allocation and page rows went in before its journal row failed:
	 * they are undone with it. */
	load_model(pt, &got);
	CHECK_INT("allocations after the refused j", 1, got.n);
	CHECK_STR("the one there", "i", got.a[0].guid);
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);
}

/* Guid numbers start at 1 and never repeat across reopen, committed or not,
 * and across leases used up inside one transaction. */
static void test_guids(void)
{
	enum {
		TAKE = 300
	};
	static uint64_t seen[6 * TAKE];
	size_t n = 0;
	char path[300];
	struct model m = { 0 };
	int dups = 0;

	path_in_dir(path, sizeof(path), "guids.db");
	for (int round = 0; round < 6; round++) {
		struct pagetable *pt = open_or_die(path);
		/* Rounds 0 and 3 take few, the others more than a lease. */
		int take = round % 3 == 0 ? 3 : TAKE;

		if (round % 2) {
			struct pt_origin o = own(pt);
			char guid[32];

			/* Some rounds hold an open transaction that never commits. */
			snprintf(guid, sizeof(guid), "r%d", round);
			CHECK_OK("put", model_put(pt, &m, guid, 4096, 4096, 1, NULL, 0, 0, &o));
		}
		for (int i = 0; i < take; i++) {
			uint64_t g = pagetable_next_guid(pt);

			CHECK(g != 0, "pagetable_next_guid failed: %s", pagetable_last_error(pt));
			if (n == 0)
				CHECK_INT("the first guid number", 1, g);
			else if (g <= seen[n - 1])
				FAIL("round %d: guid %" PRIu64 " after %" PRIu64, round, g,
				     seen[n - 1]);
			seen[n++] = g;
		}
		if (round == 4)
			CHECK_OK("commit", pagetable_commit(pt));
		pagetable_close(pt);
	}
	for (size_t i = 1; i < n; i++)
		dups += seen[i] <= seen[i - 1];
	CHECK_INT("guid numbers out of order or repeated", 0, dups);
	printf("pagetable: %zu guid numbers over 6 opens, the last %" PRIu64 "\n", n, seen[n - 1]);
}

/* The table holds the file for itself (locking_mode EXCLUSIVE): another
 * connection cannot even read it while the table is open, and can once it is
 * closed. */
static void test_wal_and_cascade(void)
{
	char path[300], buf[64];
	struct pagetable *pt;
	struct model m = { 0 }, got;
	struct pt_origin o;
	sqlite3_stmt *st;
	sqlite3 *db;
	int rc;

	path_in_dir(path, sizeof(path), "cascade.db");
	pt = open_or_die(path);
	o = own(pt);
	CHECK_OK("put c", model_put(pt, &m, "c", 4 * 4096, 4096, 4, NULL, 0, 0, &o));
	o = own(pt);
	CHECK_OK("put d", model_put(pt, &m, "d", 4096, 4096, 1, NULL, 0, 0, &o));
	CHECK_OK("commit", pagetable_commit(pt));

	db = raw_open(path);
	sqlite3_busy_timeout(db, 0);
	rc = sqlite3_prepare_v2(db, "SELECT count(*) FROM pages", -1, &st, NULL);
	if (rc == SQLITE_OK) {
		rc = sqlite3_step(st);
		sqlite3_finalize(st);
	}
	CHECK((rc & 0xff) == SQLITE_BUSY,
	      "another connection reads the open table: SQLite code %d, wanted SQLITE_BUSY", rc);
	sqlite3_close(db);
	pagetable_close(pt);

	db = raw_open(path);
	raw_query(db, "PRAGMA journal_mode", buf, sizeof(buf));
	CHECK_STR("journal_mode", "wal", buf);
	raw_query(db, "SELECT count(*) FROM pages WHERE guid = 'c'", buf, sizeof(buf));
	CHECK_STR("page rows of c", "4", buf);
	raw_query(db, "SELECT value FROM meta WHERE key = 'schema_version'", buf, sizeof(buf));
	CHECK_STR("schema_version", "11", buf);
	sqlite3_close(db);

	pt = open_or_die(path);
	o = own(pt);
	CHECK_OK("delete c", pagetable_alloc_delete(pt, "c", &o));
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);
	db = raw_open(path);
	raw_query(db, "SELECT count(*) FROM pages WHERE guid = 'c'", buf, sizeof(buf));
	CHECK_STR("page rows of c after its delete", "0", buf);
	raw_query(db, "SELECT count(*) FROM pages", buf, sizeof(buf));
	CHECK_STR("page rows left (d's)", "1", buf);
	sqlite3_close(db);

	pt = open_or_die(path);
	load_model(pt, &got);
	CHECK_INT("allocations left", 1, got.n);
	CHECK_STR("the one left", "d", got.a[0].guid);
	o = own(pt);
	CHECK_INT("delete c again", -ENOENT, pagetable_alloc_delete(pt, "c", &o));
	CHECK(strstr(pagetable_last_error(pt), "c") != NULL, "the reason names the guid: \"%s\"",
	      pagetable_last_error(pt));
	pagetable_close(pt);
}

/* Each failing change leaves the table as it was; the changes before it in
 * the same transaction stay. */
static void test_refused_changes(void)
{
	char path[300];
	struct pagetable *pt;
	struct model want = { 0 }, other = { 0 }, got;
	struct pt_origin o;
	struct pt_page p = { .guid = "nope", .page = 0, .version = 1 };
	uint64_t rows;

	path_in_dir(path, sizeof(path), "refused.db");
	pt = open_or_die(path);
	o = own(pt);
	CHECK_OK("put e",
		 model_put(pt, &want, "e", 8192, 4096, 2, header_a, sizeof(header_a), 0x55u, &o));
	o = own(pt);
	CHECK_OK("page 1 of e", model_page(pt, &want, "e", 1, 3, 0x66u, true, &o));
	rows = pagetable_journal_count(pt);

	o = own(pt);
	CHECK_INT("page of an unknown guid", -ENOENT, pagetable_page_put(pt, &p, &o));
	CHECK(strstr(pagetable_last_error(pt), "nope") != NULL, "the reason names the guid: \"%s\"",
	      pagetable_last_error(pt));
	p.guid = "e";
	p.page = 2;
	o = mirrored(77);
	CHECK_INT("page past the end", -ENOENT, pagetable_page_put(pt, &p, &o));
	/* Different fields, more pages: none of it may land. */
	o = own(pt);
	CHECK_INT("e again", -EEXIST,
		  model_put(pt, &other, "e", 12 * 4096, 4096, 12, header_c, sizeof(header_c), 0x99u,
			    &o));
	CHECK(strstr(pagetable_last_error(pt), "e") != NULL, "the reason names the guid: \"%s\"",
	      pagetable_last_error(pt));
	CHECK_INT("journal rows after three refusals", rows, pagetable_journal_count(pt));
	CHECK(pagetable_in_transaction(pt), "the transaction with e is still open");
	CHECK_INT("an allocation with no guid", -EINVAL,
		  pagetable_alloc_put(pt, &(struct pt_alloc){ .home = "a" }, 0, &o));
	CHECK_INT("a change with no origin", -EINVAL, pagetable_alloc_delete(pt, "e", NULL));
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);

	pt = open_or_die(path);
	load_model(pt, &got);
	compare("after the refusals", &want, &got);
	pagetable_close(pt);
}

static void test_partner_lsns(void)
{
	char path[300];
	struct pagetable *pt;

	path_in_dir(path, sizeof(path), "partner.db");
	pt = open_or_die(path);
	CHECK_INT("partner_applied_lsn of a new table", 0, pagetable_partner_applied_lsn(pt));
	CHECK_INT("applied_by_partner_lsn of a new table", 0, pagetable_applied_by_partner_lsn(pt));
	CHECK_OK("set partner_applied_lsn",
		 pagetable_set_partner_applied_lsn(pt, 0x8000000000000005ull));
	CHECK_OK("set applied_by_partner_lsn", pagetable_set_applied_by_partner_lsn(pt, 12345));
	CHECK(pagetable_in_transaction(pt), "setting opens a transaction");
	CHECK_INT("partner_applied_lsn as set", 0x8000000000000005ull,
		  pagetable_partner_applied_lsn(pt));
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);

	pt = open_or_die(path);
	CHECK_INT("partner_applied_lsn after reopen", 0x8000000000000005ull,
		  pagetable_partner_applied_lsn(pt));
	CHECK_INT("applied_by_partner_lsn after reopen", 12345,
		  pagetable_applied_by_partner_lsn(pt));
	/* Set again within the second: the commit skips it, close writes it. */
	CHECK_OK("set applied_by_partner_lsn", pagetable_set_applied_by_partner_lsn(pt, 12346));
	CHECK(!pagetable_in_transaction(pt), "applied_by_partner_lsn alone opens no transaction");
	CHECK_OK("set applied_by_partner_lsn", pagetable_set_applied_by_partner_lsn(pt, 12347));
	pagetable_close(pt);
	pt = open_or_die(path);
	CHECK_INT("applied_by_partner_lsn written at close", 12347,
		  pagetable_applied_by_partner_lsn(pt));
	pagetable_close(pt);
}

/* A takeover makes the survivor the owner; reopened, the table says so, and
 * the journal has the change. */
static void test_set_owner(void)
{
	char path[300];
	struct pagetable *pt;
	struct pt_alloc a = { .guid = "b-1",
			      .home = "b",
			      .owner = "b",
			      .policy = "default",
			      .size = 4096,
			      .block_size = 4096,
			      .pages = 1 };
	struct pt_origin mirrored = { .node = "b", .lsn = 5, .own = false };
	struct pt_origin own = { .node = "a", .own = true };
	struct model *got = xmalloc(sizeof(*got));
	uint64_t before;

	path_in_dir(path, sizeof(path), "owner.db");
	pt = open_or_die(path);
	CHECK_OK("mirror b's allocation", pagetable_alloc_put(pt, &a, 0, &mirrored));
	before = pagetable_journal_count(pt);
	own.lsn = pagetable_reserve_lsn(pt);
	CHECK_OK("take it over", pagetable_alloc_set_owner(pt, "b-1", "a", &own));
	CHECK_INT("journalled", before + 1, pagetable_journal_count(pt));
	own.lsn = pagetable_reserve_lsn(pt);
	CHECK_INT("unknown guid", -ENOENT, pagetable_alloc_set_owner(pt, "b-9", "a", &own));
	CHECK_INT("no owner", -EINVAL, pagetable_alloc_set_owner(pt, "b-1", "", &own));
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);

	pt = open_or_die(path);
	memset(got, 0, sizeof(*got));
	CHECK_OK("load", pagetable_load(pt, load_alloc, load_page, got));
	CHECK_INT("allocations", 1, got->n);
	CHECK_STR("owner after reopen", "a", got->a[0].owner);
	CHECK_STR("home unchanged", "b", got->a[0].home);
	pagetable_close(pt);
	free(got);
}

static int guids_seen;

static int count_guid(const char *guid, void *arg)
{
	guids_seen += strcmp(guid, "a-1") == 0;
	return 0;
}

/* Trimming keeps this node's rows the partner has not applied, and nothing
 * else; in bounded steps. */
static void test_journal_trim(void)
{
	char path[300];
	struct pagetable *pt;
	struct pt_alloc a = { .guid = "a-1",
			      .home = "a",
			      .owner = "a",
			      .policy = "default",
			      .size = 4096,
			      .block_size = 4096,
			      .pages = 1 };
	struct pt_page pg = { .guid = "a-1", .page = 0, .crc32c = 1, .dirty = true };
	struct pt_origin own = { .node = "a", .own = true }, theirs = { .node = "b", .own = false };
	uint64_t lsn[6];

	path_in_dir(path, sizeof(path), "trim.db");
	pt = open_or_die(path);
	own.lsn = lsn[0] = pagetable_reserve_lsn(pt);
	CHECK_OK("alloc", pagetable_alloc_put(pt, &a, 0, &own));
	for (int i = 1; i < 6; i++) {
		pg.version = (uint64_t)i;
		own.lsn = lsn[i] = pagetable_reserve_lsn(pt);
		CHECK_OK("page", pagetable_page_put(pt, &pg, &own));
	}
	for (int i = 0; i < 3; i++) {
		theirs.lsn = 100 + (uint64_t)i;
		pg.version = 10 + (uint64_t)i;
		CHECK_OK("mirrored page", pagetable_page_put(pt, &pg, &theirs));
	}
	CHECK_OK("commit", pagetable_commit(pt));
	CHECK_INT("rows", 9, pagetable_journal_count(pt));
	CHECK_INT("last own LSN", lsn[5], pagetable_last_own_lsn(pt, "a"));
	guids_seen = 0;
	CHECK_OK("guids after lsn[4]",
		 pagetable_journal_guids_after(pt, "a", lsn[4], count_guid, NULL));
	CHECK_INT("a-1 once", 1, guids_seen);
	guids_seen = 0;
	CHECK_OK("guids after lsn[5]",
		 pagetable_journal_guids_after(pt, "a", lsn[5], count_guid, NULL));
	CHECK_INT("none after the last", 0, guids_seen);
	/* A destage's row (only the dirty flag) moves neither. */
	pg.dirty = false;
	own.lsn = pagetable_reserve_lsn(pt);
	CHECK_OK("clean", pagetable_page_put(pt, &pg, &own));
	CHECK_INT("a clean row is not a change of its own", lsn[5],
		  pagetable_last_own_lsn(pt, "a"));
	guids_seen = 0;
	CHECK_OK("guids after lsn[5]",
		 pagetable_journal_guids_after(pt, "a", lsn[5], count_guid, NULL));
	CHECK_INT("a clean row touches nothing", 0, guids_seen);
	CHECK_OK("the partner applied up to lsn[2]",
		 pagetable_set_applied_by_partner_lsn(pt, lsn[2]));
	CHECK_INT("a bounded step", 2, pagetable_journal_trim(pt, "a", lsn[5], 2));
	/* lsn[2] and b's first row: the step's range holds lsn[3] to lsn[5],
	 * which stay. */
	CHECK_INT("a bounded step past rows that stay", 2,
		  pagetable_journal_trim(pt, "a", lsn[5], 2));
	CHECK_INT("a step of none", 0, pagetable_journal_trim(pt, "a", lsn[5], 0));
	CHECK_INT("the rest up to the mark, not beyond, and b's", 2,
		  pagetable_journal_trim(pt, "a", lsn[5], 100));
	CHECK_OK("commit", pagetable_commit(pt));
	CHECK_INT("rows the partner has not applied stay", 4, pagetable_journal_count(pt));
	/* A crash right now: the mark went to disk with the trim, so the table
	 * still says its own last LSN. */
	pagetable_close(pt);
	pt = open_or_die(path);
	CHECK_INT("last own LSN after reopen", lsn[5], pagetable_last_own_lsn(pt, "a"));
	CHECK_INT("the mark after reopen", lsn[2], pagetable_applied_by_partner_lsn(pt));
	CHECK_OK("set applied_by_partner", pagetable_set_applied_by_partner_lsn(pt, lsn[5] + 10));
	CHECK_INT("the mark when it is above the rows", lsn[5] + 10,
		  pagetable_last_own_lsn(pt, "a"));
	CHECK_INT("nothing more below lsn[2]", 0, pagetable_journal_trim(pt, "a", lsn[2], 100));
	CHECK_INT("no node id", -EINVAL, pagetable_journal_trim(pt, "", lsn[5], 100));
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);
}

/* A page put back after a write that did not happen ("undo") is clean once
 * folded, yet a change of this node's own, unlike a destage's "clean" row
 * (vmm/VMM.md, "The whole-page write of a page owned by the partner"); and
 * pagetable_committed says when a change's transaction committed. */
static void test_undo_and_commit_marks(void)
{
	char path[300];
	struct pagetable *pt;
	struct pt_alloc a = { .guid = "a-1",
			      .home = "b",
			      .owner = "b",
			      .policy = "default",
			      .size = 4096,
			      .block_size = 4096,
			      .pages = 1 };
	struct pt_page pg = { .guid = "a-1", .page = 0, .version = 1, .crc32c = 9, .dirty = true };
	struct pt_origin own = { .node = "a", .own = true };
	struct model got;
	uint64_t early, undo, mark;

	path_in_dir(path, sizeof(path), "undo.db");
	pt = open_or_die(path);
	own.lsn = pagetable_reserve_lsn(pt);
	CHECK_OK("alloc", pagetable_alloc_put(pt, &a, 0, &own));
	CHECK_OK("commit", pagetable_commit(pt));
	own.lsn = early = pagetable_reserve_lsn(pt);
	CHECK_OK("the expected state", pagetable_page_put(pt, &pg, &own));
	mark = pagetable_change_mark(pt);
	CHECK(!pagetable_committed(pt, mark), "not committed while its transaction is open");
	CHECK_OK("commit", pagetable_commit(pt));
	CHECK(pagetable_committed(pt, mark), "committed with its transaction");

	pg.version = 0;
	pg.crc32c = 0;
	pg.dirty = false;
	pg.undo = true;
	own.lsn = undo = pagetable_reserve_lsn(pt);
	CHECK_OK("put back", pagetable_page_put(pt, &pg, &own));
	CHECK(!pagetable_committed(pt, pagetable_change_mark(pt)),
	      "the next transaction's change is not committed yet");
	CHECK(pagetable_committed(pt, mark), "the earlier one stays committed");
	CHECK_INT("an undo row is a change of its own", undo, pagetable_last_own_lsn(pt, "a"));
	guids_seen = 0;
	CHECK_OK("guids after the early row",
		 pagetable_journal_guids_after(pt, "a", early, count_guid, NULL));
	CHECK_INT("the undo row touches a-1", 1, guids_seen);
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);

	pt = open_or_die(path);
	load_model(pt, &got);
	CHECK_INT("allocations", 1, got.n);
	CHECK_INT("the version put back", 0, got.a[0].version[0]);
	CHECK(!got.a[0].dirty[0], "the page put back is clean");
	pagetable_close(pt);
}

static void test_epoch(void)
{
	char path[300];
	struct pagetable *pt;
	uint64_t epoch = 0;

	path_in_dir(path, sizeof(path), "epoch.db");
	pt = open_or_die(path);
	CHECK_OK("epoch", pagetable_epoch(pt, &epoch));
	CHECK_INT("epoch of a new table", 1, epoch);
	CHECK_OK("set epoch", pagetable_set_epoch(pt, 7));
	CHECK(pagetable_in_transaction(pt), "setting the epoch opens a transaction");
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);
	pt = open_or_die(path);
	CHECK_OK("epoch", pagetable_epoch(pt, &epoch));
	CHECK_INT("epoch after reopen", 7, epoch);
	{
		bool solo = true;

		CHECK_OK("solo", pagetable_solo(pt, &solo));
		CHECK(!solo, "a table is not solo until set");
		CHECK_OK("set solo", pagetable_set_solo(pt, true));
		CHECK_OK("commit", pagetable_commit(pt));
		pagetable_close(pt);
		pt = open_or_die(path);
		CHECK_OK("solo", pagetable_solo(pt, &solo));
		CHECK(solo, "solo after reopen");
	}
	pagetable_close(pt);
}

/* Files this build must not use: refused, with a reason, and left alone. */

/* A table made by schema version 1 (before extents) is migrated to version 2
 * when opened, and keeps what it held; its allocations have extent 0. */
static void test_migration_from_v1(void)
{
	char path[PATH_MAX], buf[64];
	struct pagetable *pt;
	struct model got;
	sqlite3 *db;

	path_in_dir(path, sizeof(path), "v1.db");
	if (sqlite3_open(path, &db) != SQLITE_OK)
		die("sqlite3_open v1.db");
	raw_exec(db,
		 "PRAGMA journal_mode=WAL;"
		 "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
		 "CREATE TABLE allocations(guid TEXT PRIMARY KEY, home TEXT NOT NULL,"
		 " owner TEXT NOT NULL, size INTEGER NOT NULL, block_size INTEGER NOT NULL,"
		 " pages INTEGER NOT NULL, policy TEXT NOT NULL, header BLOB NOT NULL);"
		 "CREATE TABLE pages(guid TEXT NOT NULL REFERENCES allocations(guid)"
		 " ON DELETE CASCADE, page INTEGER NOT NULL, version INTEGER NOT NULL,"
		 " crc32c INTEGER NOT NULL, dirty INTEGER NOT NULL, PRIMARY KEY (guid, page))"
		 " WITHOUT ROWID;"
		 "CREATE TABLE journal(lsn INTEGER PRIMARY KEY, origin TEXT NOT NULL,"
		 " origin_lsn INTEGER NOT NULL, op TEXT NOT NULL, guid TEXT NOT NULL,"
		 " page INTEGER, version INTEGER, crc32c INTEGER);"
		 "INSERT INTO meta(key, value) VALUES ('next_guid', 1), ('next_lsn', 1),"
		 " ('partner_applied_lsn', 0), ('applied_by_partner_lsn', 0),"
		 " ('schema_version', 1);"
		 "INSERT INTO allocations VALUES ('a-1', 'a', 'a', 4096, 4096, 1, 'default', x'');"
		 "INSERT INTO pages VALUES ('a-1', 0, 3, 7, 1);");
	sqlite3_close(db);

	pt = open_or_die(path);
	load_model(pt, &got);
	CHECK_INT("allocations after the migration", 1, got.n);
	if (got.n == 1) {
		CHECK_STR("guid", "a-1", got.a[0].guid);
		CHECK_INT("store_offset of an old allocation", 0, got.a[0].store_offset);
		CHECK_INT("uid of an old allocation (root's)", 0, got.a[0].uid);
		CHECK_STR("media of an old allocation (the store)", "store", got.a[0].media);
		CHECK_STR("an old allocation is no volume", "", got.a[0].volume);
		CHECK_INT("page version kept", 3, got.a[0].version[0]);
	}
	pagetable_close(pt);
	db = raw_open(path);
	raw_query(db, "SELECT value FROM meta WHERE key = 'schema_version'", buf, sizeof(buf));
	CHECK_STR("schema_version after the migration", "11", buf);
	sqlite3_close(db);
}

/* A table made by schema version 2 (pages written with each change, no seq)
 * is migrated to 3: its rows stay, its old journal rows count as folded (one
 * that disagrees with pages, as an older write does, changes nothing), and
 * page writes after it fold. */
static void test_migration_from_v2(void)
{
	char path[PATH_MAX], buf[64];
	struct pagetable *pt;
	struct model *got = xmalloc(sizeof(*got));
	struct pt_origin o;
	struct pt_page p = { .guid = "a-1", .page = 1, .version = 9, .crc32c = 0x99u };
	sqlite3 *db;

	path_in_dir(path, sizeof(path), "v2.db");
	if (sqlite3_open(path, &db) != SQLITE_OK)
		die("sqlite3_open v2.db");
	raw_exec(db,
		 "PRAGMA journal_mode=WAL;"
		 "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
		 "CREATE TABLE allocations(guid TEXT PRIMARY KEY, home TEXT NOT NULL,"
		 " owner TEXT NOT NULL, size INTEGER NOT NULL, block_size INTEGER NOT NULL,"
		 " pages INTEGER NOT NULL, policy TEXT NOT NULL, header BLOB NOT NULL,"
		 " store_offset INTEGER NOT NULL DEFAULT 0);"
		 "CREATE TABLE pages(guid TEXT NOT NULL REFERENCES allocations(guid)"
		 " ON DELETE CASCADE, page INTEGER NOT NULL, version INTEGER NOT NULL,"
		 " crc32c INTEGER NOT NULL, dirty INTEGER NOT NULL, PRIMARY KEY (guid, page))"
		 " WITHOUT ROWID;"
		 "CREATE TABLE journal(lsn INTEGER PRIMARY KEY, origin TEXT NOT NULL,"
		 " origin_lsn INTEGER NOT NULL, op TEXT NOT NULL, guid TEXT NOT NULL,"
		 " page INTEGER, version INTEGER, crc32c INTEGER);"
		 "INSERT INTO meta(key, value) VALUES ('next_guid', 2), ('next_lsn', 10),"
		 " ('partner_applied_lsn', 0), ('applied_by_partner_lsn', 0),"
		 " ('schema_version', 2);"
		 "INSERT INTO allocations VALUES ('a-1', 'a', 'a', 8192, 4096, 2, 'default', x'',"
		 " 65536);"
		 "INSERT INTO pages VALUES ('a-1', 0, 3, 7, 1), ('a-1', 1, 5, 8, 0);"
		 "INSERT INTO journal VALUES (1, 'node-a', 1, 'alloc', 'a-1', NULL, NULL, NULL),"
		 " (2, 'node-a', 2, 'page', 'a-1', 0, 3, 7),"
		 " (3, 'node-b', 40, 'page', 'a-1', 1, 4, 6),"
		 " (4, 'node-a', 3, 'clean', 'a-1', 1, 5, 8),"
		 " (5, 'node-a', 4, 'page', 'a-1', 0, 2, 2);");
	sqlite3_close(db);

	pt = open_or_die(path);
	memset(got, 0, sizeof(*got));
	CHECK_OK("load", pagetable_load(pt, load_alloc, load_page, got));
	CHECK_INT("allocations after the migration", 1, got->n);
	if (got->n == 1) {
		CHECK_INT("store_offset kept", 65536, got->a[0].store_offset);
		CHECK_INT("page 0 as pages had it, not as its last journal row", 3,
			  got->a[0].version[0]);
		CHECK(got->a[0].dirty[0], "page 0 still dirty");
		CHECK_INT("page 1 kept", 5, got->a[0].version[1]);
	}
	CHECK_INT("journal rows kept", 5, pagetable_journal_count(pt));
	o = own(pt);
	CHECK(o.lsn >= 10, "LSNs go on from the old bound: %" PRIu64, o.lsn);
	CHECK_OK("a page write after the migration", pagetable_page_put(pt, &p, &o));
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_close(pt);

	db = raw_open(path);
	raw_query(db, "SELECT value FROM meta WHERE key = 'schema_version'", buf, sizeof(buf));
	CHECK_STR("schema_version after the migration", "11", buf);
	raw_query(db, "SELECT count(*) FROM journal WHERE seq IS NULL", buf, sizeof(buf));
	CHECK_STR("old rows without a seq", "5", buf);
	raw_query(db, "SELECT value FROM meta WHERE key = 'folded_seq'", buf, sizeof(buf));
	CHECK_STR("the new row folded at close", "1", buf);
	sqlite3_close(db);
	pt = open_or_die(path);
	memset(got, 0, sizeof(*got));
	CHECK_OK("load", pagetable_load(pt, load_alloc, load_page, got));
	CHECK_INT("page 1 after a write on the migrated table", 9, got->a[0].version[1]);
	CHECK_INT("page 0 unchanged", 3, got->a[0].version[0]);
	pagetable_close(pt);
	free(got);
}

static void test_refused_files(void)
{
	char path[300], buf[64];
	struct pagetable *pt;
	uint8_t junk[8192], back[sizeof(junk)];
	sqlite3 *db;
	FILE *f;
	int r;

	/* A newer schema. */
	path_in_dir(path, sizeof(path), "newer.db");
	pt = open_or_die(path);
	pagetable_close(pt);
	db = raw_open(path);
	raw_exec(db, "UPDATE meta SET value = 12 WHERE key = 'schema_version'");
	sqlite3_close(db);
	pt = (struct pagetable *)&pt; /* must come back NULL */
	r = pagetable_open(path, false, &pt);
	CHECK_INT("open a newer schema", -EPROTONOSUPPORT, r);
	CHECK(pt == NULL, "no table comes back with an error");
	CHECK(strstr(pagetable_last_error(NULL), "schema version is 12") &&
		      strstr(pagetable_last_error(NULL), "up to 11"),
	      "the reason names both versions: \"%s\"", pagetable_last_error(NULL));
	db = raw_open(path);
	raw_query(db, "SELECT value FROM meta WHERE key = 'schema_version'", buf, sizeof(buf));
	CHECK_STR("schema_version left as it was", "12", buf);
	sqlite3_close(db);

	/* Not SQLite at all. */
	path_in_dir(path, sizeof(path), "garbage.db");
	for (size_t i = 0; i < sizeof(junk); i++)
		junk[i] = (uint8_t)rng();
	f = fopen(path, "wb");
	if (!f || fwrite(junk, 1, sizeof(junk), f) != sizeof(junk) || fclose(f) != 0)
		die("writing garbage.db");
	r = pagetable_open(path, false, &pt);
	CHECK_INT("open garbage", -EBADMSG, r);
	CHECK(pt == NULL, "no table comes back with an error");
	CHECK(strstr(pagetable_last_error(NULL), "not an SQLite database") != NULL,
	      "the reason says what the file is not: \"%s\"", pagetable_last_error(NULL));
	f = fopen(path, "rb");
	if (!f || fread(back, 1, sizeof(back), f) != sizeof(back) || fclose(f) != 0)
		die("reading garbage.db back");
	CHECK(memcmp(junk, back, sizeof(junk)) == 0, "the garbage file was changed");

	/* SQLite, but someone else's. */
	path_in_dir(path, sizeof(path), "other.db");
	if (sqlite3_open(path, &db) != SQLITE_OK)
		die("creating other.db");
	raw_exec(db, "CREATE TABLE t(x)");
	sqlite3_close(db);
	r = pagetable_open(path, false, &pt);
	CHECK_INT("open another program's database", -EBADMSG, r);
	CHECK(strstr(pagetable_last_error(NULL), "not an ftvm page table") != NULL,
	      "the reason says so: \"%s\"", pagetable_last_error(NULL));

	/* An empty file is an empty database: it becomes a page table. */
	path_in_dir(path, sizeof(path), "empty.db");
	f = fopen(path, "wb");
	if (!f || fclose(f) != 0)
		die("creating empty.db");
	r = pagetable_open(path, false, &pt);
	CHECK_INT("open an empty file", 0, r);
	pagetable_close(pt);

	/* A directory that is not there. */
	path_in_dir(path, sizeof(path), "no/such/dir.db");
	r = pagetable_open(path, false, &pt);
	CHECK(r < 0, "open in a missing directory: got %d", r);
	CHECK(pagetable_last_error(NULL)[0] != '\0', "a reason comes with it");
	pagetable_close(NULL);
}

/* A process that dies without closing: its commits stay, its open
 * transaction goes, and the numbers it took are not handed out again. */
static void test_crash(void)
{
	char path[300];
	struct pagetable *pt;
	struct model m = { 0 }, got;
	uint64_t taken[2];
	int fds[2], status;
	pid_t pid;

	path_in_dir(path, sizeof(path), "crash.db");
	if (pipe(fds) < 0)
		die("pipe");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		struct pt_origin o;

		pt = open_or_die(path);
		o = own(pt);
		if (model_put(pt, &m, "k", 4096, 4096, 1, NULL, 0, 0, &o) < 0 ||
		    pagetable_commit(pt) < 0)
			_exit(1);
		o = own(pt);
		if (model_put(pt, &m, "l", 4096, 4096, 1, NULL, 0, 0, &o) < 0)
			_exit(1);
		taken[0] = pagetable_next_guid(pt);
		taken[1] = pagetable_reserve_lsn(pt);
		if (write(fds[1], taken, sizeof(taken)) != sizeof(taken))
			_exit(1);
		_exit(0); /* no close, no commit: as if killed */
	}
	close(fds[1]);
	if (read(fds[0], taken, sizeof(taken)) != sizeof(taken))
		memset(taken, 0xff, sizeof(taken));
	close(fds[0]);
	if (waitpid(pid, &status, 0) != pid)
		die("waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: status %d", status);

	pt = open_or_die(path);
	load_model(pt, &got);
	CHECK_INT("allocations after the crash", 1, got.n);
	CHECK_STR("the committed one", "k", got.a[0].guid);
	CHECK(pagetable_next_guid(pt) > taken[0], "a guid number after the crash is new");
	CHECK(pagetable_reserve_lsn(pt) > taken[1], "an LSN after the crash is new");
	pagetable_close(pt);
}

/* Runs step(path) in a child that then dies without closing (or committing
 * anything it left open), as if killed. */
static void crash_after(void (*step)(const char *path), const char *path)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		step(path);
		_exit(failures ? 1 : 0);
	}
	if (waitpid(pid, &status, 0) != pid)
		die("waitpid");
	CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child failed: status %d", status);
}

static void mirror_three_pages(const char *path)
{
	struct pagetable *pt = open_or_die(path);
	struct pt_alloc a = { .guid = "b-1",
			      .home = "node-b",
			      .owner = "node-b",
			      .policy = "default",
			      .size = 4096,
			      .block_size = 4096,
			      .pages = 1 };
	struct pt_page pg = { .guid = "b-1", .page = 0, .crc32c = 1, .dirty = true };
	struct pt_origin o = mirrored(100);

	CHECK_OK("mirrored alloc", pagetable_alloc_put(pt, &a, 0, &o));
	pagetable_note_partner_applied_lsn(pt, 100);
	for (uint64_t lsn = 101; lsn <= 102; lsn++) {
		o = mirrored(lsn);
		pg.version = lsn;
		CHECK_OK("mirrored page", pagetable_page_put(pt, &pg, &o));
		pagetable_note_partner_applied_lsn(pt, lsn);
	}
	/* A lock: applied, nothing that lasts, so nothing journalled. */
	pagetable_note_partner_applied_lsn(pt, 103);
	CHECK_OK("commit", pagetable_commit(pt));
}

static void trim_after_a_lock(const char *path)
{
	struct pagetable *pt = open_or_die(path);

	CHECK_OK("recover", pagetable_recover_partner_applied_lsn(pt, "node-a"));
	pagetable_note_partner_applied_lsn(pt, 105);
	CHECK_INT("the partner's three rows trimmed", 3,
		  pagetable_journal_trim(pt, "node-a", 0, 100));
	CHECK_OK("commit", pagetable_commit(pt));
}

static void check_meta_partner_applied(const char *path, const char *want, const char *what)
{
	sqlite3 *db = raw_open(path);
	char got[64];

	raw_query(db, "SELECT value FROM meta WHERE key = 'partner_applied_lsn'", got, sizeof(got));
	sqlite3_close(db);
	CHECK_STR(what, want, got);
}

/* The node that mirrors writes no partner_applied_lsn with each commit (a
 * page of every commit saved): after a crash the mark comes back from the
 * journal's partner rows, or from meta once a trim took them; close writes it
 * too. */
static void test_partner_applied_recovered(void)
{
	char path[300];
	struct pagetable *pt;

	path_in_dir(path, sizeof(path), "applied.db");
	crash_after(mirror_three_pages, path);
	check_meta_partner_applied(path, "0", "the commits wrote no partner_applied_lsn");
	pt = open_or_die(path);
	CHECK_INT("before recovery: meta's", 0, pagetable_partner_applied_lsn(pt));
	CHECK_INT("no node id", -EINVAL, pagetable_recover_partner_applied_lsn(pt, ""));
	CHECK_OK("recover", pagetable_recover_partner_applied_lsn(pt, "node-a"));
	CHECK_INT("recovered from the journal (the lock left no trace)", 102,
		  pagetable_partner_applied_lsn(pt));
	pagetable_close(pt);

	crash_after(trim_after_a_lock, path);
	check_meta_partner_applied(path, "105", "the trim wrote the mark its rows carried");
	pt = open_or_die(path);
	CHECK_OK("recover", pagetable_recover_partner_applied_lsn(pt, "node-a"));
	CHECK_INT("recovered from meta after the trim", 105, pagetable_partner_applied_lsn(pt));
	pagetable_note_partner_applied_lsn(pt, 110);
	pagetable_close(pt);

	pt = open_or_die(path);
	CHECK_INT("written at close", 110, pagetable_partner_applied_lsn(pt));
	pagetable_close(pt);
}

/* ---- Folds: page writes reach pages later, in call order ----------------- */

/* Runs step(path) in a child that then sends itself SIGKILL (no close, no
 * exit handlers), and checks that it got that far. */
static void killed_after(void (*step)(const char *path), const char *path)
{
	int status;
	pid_t pid = fork();

	if (pid < 0)
		die("fork");
	if (pid == 0) {
		step(path);
		if (failures)
			_exit(1);
		kill(getpid(), SIGKILL);
		_exit(1);
	}
	if (waitpid(pid, &status, 0) != pid)
		die("waitpid");
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	      "the child failed before its kill: status %d", status);
}

static const struct pt_alloc fold_alloc = { .guid = "f-1",
					    .home = "node-a",
					    .owner = "node-a",
					    .policy = "default",
					    .size = 3 * 4096,
					    .block_size = 4096,
					    .pages = 3 };

static int fold_put(struct pagetable *pt, uint64_t page, uint64_t version, uint32_t crc, bool dirty,
		    const struct pt_origin *o)
{
	struct pt_page p = {
		.guid = "f-1", .page = page, .version = version, .crc32c = crc, .dirty = dirty
	};

	return pagetable_page_put(pt, &p, o);
}

/* What fold_in_call_order leaves, page by page. */
static const struct {
	uint64_t version;
	uint32_t crc;
	bool dirty;
} fold_want[3] = { { 4, 0x44u, true }, { 7, 0x77u, false }, { 9, 0x99u, true } };

static void check_fold_want(struct pagetable *pt, const char *ctx)
{
	struct model *got = xmalloc(sizeof(*got));

	memset(got, 0, sizeof(*got));
	CHECK_OK(ctx, pagetable_load(pt, load_alloc, load_page, got));
	CHECK_INT("allocations", 1, got->n);
	for (size_t i = 0; got->n == 1 && i < ARRAY_SIZE(fold_want); i++) {
		checks++;
		if (got->a[0].version[i] != fold_want[i].version ||
		    got->a[0].crc[i] != fold_want[i].crc ||
		    got->a[0].dirty[i] != fold_want[i].dirty)
			FAIL("%s: page %zu: expected version %" PRIu64 " crc 0x%x dirty %d,"
			     " got %" PRIu64 " 0x%x %d",
			     ctx, i, fold_want[i].version, fold_want[i].crc, fold_want[i].dirty,
			     got->a[0].version[i], got->a[0].crc[i], got->a[0].dirty[i]);
	}
	free(got);
}

/* Page 0: an own change reserves its LSN, a mirrored change on the same page
 * is applied (a higher LSN, a higher version), then the own one: the own one
 * was called last and wins, LSN and version notwithstanding. Page 1: dirty,
 * then clean (a destage). Page 2: three writes in two transactions. */
static void fold_in_call_order(const char *path)
{
	struct pagetable *pt = open_or_die(path);
	struct pt_origin o = own(pt), first;

	CHECK_OK("alloc", pagetable_alloc_put(pt, &fold_alloc, 0x11u, &o));
	CHECK_OK("commit", pagetable_commit(pt));
	first = own(pt);
	o = mirrored(500);
	CHECK_OK("mirrored page 0", fold_put(pt, 0, 5, 0x55u, true, &o));
	CHECK_OK("own page 0, its LSN the lower", fold_put(pt, 0, 4, 0x44u, true, &first));
	o = own(pt);
	CHECK_OK("page 1 dirty", fold_put(pt, 1, 7, 0x77u, true, &o));
	o = own(pt);
	CHECK_OK("page 2", fold_put(pt, 2, 8, 0x88u, true, &o));
	CHECK_OK("commit", pagetable_commit(pt));
	o = own(pt);
	CHECK_OK("page 1 clean", fold_put(pt, 1, 7, 0x77u, false, &o));
	o = mirrored(501);
	CHECK_OK("page 2 again", fold_put(pt, 2, 9, 0x99u, true, &o));
	CHECK_OK("commit", pagetable_commit(pt));
}

static void raw_value(const char *path, const char *sql, char *buf, size_t len)
{
	sqlite3 *db = raw_open(path);

	raw_query(db, sql, buf, len);
	sqlite3_close(db);
}

/* Killed between its commits and any fold after them: the file's pages
 * still have the state the last fold left, and the next open folds. */
static void test_fold_after_a_kill(void)
{
	char path[300], buf[64];
	struct pagetable *pt;

	path_in_dir(path, sizeof(path), "fold_kill.db");
	killed_after(fold_in_call_order, path);
	raw_value(path, "SELECT max(version) FROM pages WHERE guid = 'f-1'", buf, sizeof(buf));
	CHECK_STR("pages in the file after the kill (the writes only journalled)", "0", buf);
	raw_value(path, "SELECT count(*) FROM journal WHERE seq IS NOT NULL", buf, sizeof(buf));
	CHECK_STR("page rows with a seq", "6", buf);
	pt = open_or_die(path);
	check_fold_want(pt, "after the kill");
	CHECK(!pagetable_in_transaction(pt), "open folded and committed; load had nothing to do");
	pagetable_close(pt);
	raw_value(path, "SELECT value FROM meta WHERE key = 'folded_seq'", buf, sizeof(buf));
	CHECK_STR("fold mark: the last page row's seq", "6", buf);
}

enum {
	MANY_ROWS = 2500 /* commits fold at 1024 and 2048 rows */
};

static void many_commits(const char *path)
{
	struct pagetable *pt = open_or_die(path);
	struct pt_origin o = own(pt);

	CHECK_OK("alloc", pagetable_alloc_put(pt, &fold_alloc, 0, &o));
	for (uint64_t i = 1; i <= MANY_ROWS; i++) {
		o = own(pt);
		CHECK_OK("page", fold_put(pt, i % 3, i, (uint32_t)i, true, &o));
		CHECK_OK("commit", pagetable_commit(pt));
	}
}

/* More page rows than a commit leaves waiting: commits fold them (no close
 * did), and the mark moves with pages. */
static void test_fold_at_commit(void)
{
	char path[300], buf[64];
	struct pagetable *pt;
	uint64_t mark;

	path_in_dir(path, sizeof(path), "fold_commit.db");
	killed_after(many_commits, path);
	raw_value(path, "SELECT value FROM meta WHERE key = 'folded_seq'", buf, sizeof(buf));
	mark = strtoull(buf, NULL, 10);
	CHECK(mark >= MANY_ROWS / 2 && mark < MANY_ROWS,
	      "commits folded part of the %d rows: mark %" PRIu64, MANY_ROWS, mark);
	raw_value(path, "SELECT max(version) FROM pages", buf, sizeof(buf));
	CHECK_INT("pages as far as the mark", mark, strtoull(buf, NULL, 10));
	pt = open_or_die(path);
	pagetable_close(pt);
	raw_value(path, "SELECT max(version) FROM pages", buf, sizeof(buf));
	CHECK_INT("open folded the rest", MANY_ROWS, strtoull(buf, NULL, 10));
}

/* ---- A fold by page and a fold by SQL leave the same pages ------------- */

/* What a page holds after the rows test_fold_both_ways wrote, by call. */
struct fold_pages {
	uint64_t n;
	uint64_t *version;
	uint32_t *crc;
	bool *dirty;
};

static void fold_pages_alloc(struct fold_pages *f, uint64_t n)
{
	f->n = n;
	f->version = xcalloc(n * sizeof(*f->version));
	f->crc = xcalloc(n * sizeof(*f->crc));
	f->dirty = xcalloc(n * sizeof(*f->dirty));
}

static void fold_pages_free(struct fold_pages *f)
{
	free(f->version);
	free(f->crc);
	free(f->dirty);
}

static int fold_pages_load_alloc(const struct pt_alloc *a, void *arg)
{
	return 0;
}

static int fold_pages_load_page(const struct pt_page *p, void *arg)
{
	struct fold_pages *f = arg;

	if (p->page >= f->n)
		return -EINVAL;
	f->version[p->page] = p->version;
	f->crc[p->page] = p->crc32c;
	f->dirty[p->page] = p->dirty;
	return 0;
}

static void fold_pages_compare(struct pagetable *pt, const struct fold_pages *want, const char *ctx)
{
	struct fold_pages got;
	uint64_t wrong = 0, first = 0;

	fold_pages_alloc(&got, want->n);
	CHECK_OK(ctx, pagetable_load(pt, fold_pages_load_alloc, fold_pages_load_page, &got));
	for (uint64_t i = 0; i < want->n; i++)
		if (got.version[i] != want->version[i] || got.crc[i] != want->crc[i] ||
		    got.dirty[i] != want->dirty[i])
			first = wrong++ ? first : i;
	checks++;
	if (wrong)
		FAIL("%s: %" PRIu64 " pages not as written, the first %" PRIu64 ": version %" PRIu64
		     " crc 0x%x dirty %d, written %" PRIu64 " 0x%x %d",
		     ctx, wrong, first, got.version[first], got.crc[first], got.dirty[first],
		     want->version[first], want->crc[first], want->dirty[first]);
	fold_pages_free(&got);
}

/* n_rows random page rows on an allocation of pages pages (each page
 * written at least once when every_page), committed every commit_every
 * rows (0: never), then folded: the rows' last call per page must be what
 * pages holds, and the fold must have gone by SQL or not, as want_sql says.
 * A quarter of the rows are own rows whose LSN was reserved before a
 * mirrored row of the same page: the fold's scan meets them out of call
 * order. */
static void fold_both_ways(const char *name, uint64_t pages, bool every_page, unsigned n_rows,
			   unsigned commit_every, bool want_sql)
{
	char path[300], guid[] = "w-1", ctx[128];
	struct pt_alloc a = { .guid = guid,
			      .home = "node-a",
			      .owner = "node-a",
			      .policy = "default",
			      .size = pages * 4096,
			      .block_size = 4096,
			      .pages = pages };
	struct fold_pages want;
	struct pagetable *pt;
	struct pt_origin o;
	struct pt_stats st;
	uint64_t version = 0, partner_lsn = 1000;

	path_in_dir(path, sizeof(path), name);
	pt = open_or_die(path);
	fold_pages_alloc(&want, pages);
	o = own(pt);
	CHECK_OK("alloc", pagetable_alloc_put(pt, &a, 0, &o));
	CHECK_OK("commit", pagetable_commit(pt));
	for (unsigned i = 0; i < n_rows; i++) {
		uint64_t page = every_page && i < pages ? (i * 7919) % pages : rng() % pages;
		struct pt_page p = { .guid = guid,
				     .page = page,
				     .version = ++version,
				     .crc32c = rng(),
				     .dirty = rng() % 3 != 0 };
		struct pt_origin early;

		if (rng() % 4 == 0) {
			struct pt_page m = p;

			early = own(pt);
			m.version = ++version;
			o = mirrored(++partner_lsn);
			CHECK_OK("mirrored row", pagetable_page_put(pt, &m, &o));
			p.version = ++version;
			CHECK_OK("own row, its LSN the lower", pagetable_page_put(pt, &p, &early));
		} else {
			o = rng() % 2 ? own(pt) : mirrored(++partner_lsn);
			CHECK_OK("row", pagetable_page_put(pt, &p, &o));
		}
		want.version[page] = p.version;
		want.crc[page] = p.crc32c;
		want.dirty[page] = p.dirty;
		if (commit_every && i % commit_every == commit_every - 1)
			CHECK_OK("commit", pagetable_commit(pt));
	}
	CHECK_OK("fold", pagetable_fold(pt));
	CHECK_OK("commit", pagetable_commit(pt));
	pagetable_get_stats(pt, &st);
	snprintf(ctx, sizeof(ctx), "%s: folded by %s", name, want_sql ? "SQL" : "page");
	CHECK(want_sql ? st.folds_by_sql > 0 : st.folds_by_sql == 0,
	      "%s: %" PRIu64 " folds left to SQL", ctx, st.folds_by_sql);
	fold_pages_compare(pt, &want, ctx);
	pagetable_close(pt);
	pt = open_or_die(path);
	snprintf(ctx, sizeof(ctx), "%s: reopened", name);
	fold_pages_compare(pt, &want, ctx);
	pagetable_close(pt);
	fold_pages_free(&want);
}

static void test_fold_both_ways(void)
{
	/* 64 pages, commits folding at the backstop as they go: the map. */
	fold_both_ways("fold_map.db", 64, false, 3000, 50, false);
	/* Every one of 5000 pages and more in one transaction: one fold of
	 * rows on more pages than the map takes, left to SQL. */
	fold_both_ways("fold_sql.db", 5000, true, 6000, 0, true);
}

static void fold_then_new_incarnation(const char *path)
{
	struct pagetable *pt = open_or_die(path);
	struct pt_origin o = own(pt);

	CHECK_OK("alloc", pagetable_alloc_put(pt, &fold_alloc, 0x11u, &o));
	o = own(pt);
	CHECK_OK("page 0", fold_put(pt, 0, 3, 0x33u, true, &o));
	CHECK_OK("commit", pagetable_commit(pt));
	o = mirrored(600);
	CHECK_OK("page 1", fold_put(pt, 1, 6, 0x66u, true, &o));
	/* A resync deletes it and makes it again under the same guid. */
	o = mirrored(601);
	CHECK_OK("delete", pagetable_alloc_delete(pt, "f-1", &o));
	o = mirrored(602);
	CHECK_OK("alloc again", pagetable_alloc_put(pt, &fold_alloc, 0x12u, &o));
	o = mirrored(603);
	CHECK_OK("page 2 of the new one", fold_put(pt, 2, 1, 0x21u, true, &o));
	CHECK_OK("commit", pagetable_commit(pt));
}

/* The old allocation's page writes never reach the new one's pages. */
static void test_fold_new_incarnation(void)
{
	char path[300];
	struct pagetable *pt;
	struct model *got = xmalloc(sizeof(*got));

	path_in_dir(path, sizeof(path), "fold_incarnation.db");
	killed_after(fold_then_new_incarnation, path);
	pt = open_or_die(path);
	memset(got, 0, sizeof(*got));
	CHECK_OK("load", pagetable_load(pt, load_alloc, load_page, got));
	CHECK_INT("allocations", 1, got->n);
	if (got->n == 1) {
		CHECK_INT("page 0 of the new one: version", 0, got->a[0].version[0]);
		CHECK_HEX32("page 0 of the new one: crc32c (a zeroed block's)", 0x12u,
			    got->a[0].crc[0]);
		CHECK_INT("page 1 of the new one: version", 0, got->a[0].version[1]);
		CHECK(!got->a[0].dirty[1], "page 1 of the new one is clean");
		CHECK_INT("page 2 of the new one: version", 1, got->a[0].version[2]);
	}
	pagetable_close(pt);
	free(got);
}

static void fold_then_trim(const char *path)
{
	struct pagetable *pt = open_or_die(path);
	struct pt_origin o = own(pt);
	uint64_t last;

	CHECK_OK("alloc", pagetable_alloc_put(pt, &fold_alloc, 0x11u, &o));
	o = own(pt);
	CHECK_OK("page 0", fold_put(pt, 0, 4, 0x44u, true, &o));
	o = mirrored(700);
	CHECK_OK("page 1", fold_put(pt, 1, 7, 0x77u, false, &o));
	o = own(pt);
	CHECK_OK("page 2", fold_put(pt, 2, 9, 0x99u, true, &o));
	CHECK_OK("commit", pagetable_commit(pt));
	last = pagetable_reserve_lsn(pt);
	CHECK_OK("the partner has it all", pagetable_set_applied_by_partner_lsn(pt, last));
	CHECK_INT("every row trimmed", 4, pagetable_journal_trim(pt, "node-a", last, 100));
	CHECK_OK("commit", pagetable_commit(pt));
}

static void write_after_trim(const char *path)
{
	struct pagetable *pt = open_or_die(path);
	struct pt_origin o = own(pt);

	CHECK_OK("page 2 once more", fold_put(pt, 2, 10, 0xaau, true, &o));
	CHECK_OK("commit", pagetable_commit(pt));
}

/* A trim takes only folded rows; with the journal empty, new rows still
 * number above the mark. */
static void test_fold_before_trim(void)
{
	char path[300], buf[64];
	struct pagetable *pt;
	struct model *got = xmalloc(sizeof(*got));

	path_in_dir(path, sizeof(path), "fold_trim.db");
	killed_after(fold_then_trim, path);
	raw_value(path, "SELECT count(*) FROM journal", buf, sizeof(buf));
	CHECK_STR("journal rows after the trim", "0", buf);
	raw_value(path, "SELECT value FROM meta WHERE key = 'folded_seq'", buf, sizeof(buf));
	CHECK_STR("the trim's fold moved the mark", "3", buf);
	pt = open_or_die(path);
	check_fold_want(pt, "after the trim");
	pagetable_close(pt);

	killed_after(write_after_trim, path);
	raw_value(path, "SELECT seq FROM journal", buf, sizeof(buf));
	CHECK_STR("the next row's seq follows the mark", "4", buf);
	pt = open_or_die(path);
	memset(got, 0, sizeof(*got));
	CHECK_OK("load", pagetable_load(pt, load_alloc, load_page, got));
	CHECK_INT("page 2 after a write past the trim", 10, got->a[0].version[2]);
	pagetable_close(pt);
	free(got);
}

/* A page write to a page that is not there: -ENOENT, naming it, and no row,
 * no transaction, nothing in pages. */
static void test_page_put_unknown(void)
{
	char path[300];
	struct pagetable *pt;
	struct pt_origin o;
	uint64_t rows;

	path_in_dir(path, sizeof(path), "unknown_page.db");
	pt = open_or_die(path);
	o = own(pt);
	CHECK_OK("alloc", pagetable_alloc_put(pt, &fold_alloc, 0x11u, &o));
	o = own(pt);
	CHECK_OK("page 0", fold_put(pt, 0, 4, 0x44u, true, &o));
	o = own(pt);
	CHECK_OK("page 1", fold_put(pt, 1, 7, 0x77u, false, &o));
	o = own(pt);
	CHECK_OK("page 2", fold_put(pt, 2, 9, 0x99u, true, &o));
	CHECK_OK("commit", pagetable_commit(pt));
	rows = pagetable_journal_count(pt);
	o = own(pt);
	CHECK_INT("page 3 of a 3-page allocation", -ENOENT, fold_put(pt, 3, 1, 1, true, &o));
	CHECK(strstr(pagetable_last_error(pt), "page 3 of f-1") != NULL,
	      "the reason names the page: \"%s\"", pagetable_last_error(pt));
	o = mirrored(800);
	CHECK_INT("a mirrored write past the end", -ENOENT, fold_put(pt, 9, 1, 1, false, &o));
	o = own(pt);
	CHECK_INT("an unknown guid", -ENOENT,
		  pagetable_page_put(pt, &(struct pt_page){ .guid = "f-2", .version = 1 }, &o));
	CHECK_INT("journal rows", rows, pagetable_journal_count(pt));
	CHECK(!pagetable_in_transaction(pt), "a refused page write opens no transaction");
	check_fold_want(pt, "after the refusals");
	pagetable_close(pt);
	pt = open_or_die(path);
	check_fold_want(pt, "after the refusals and a reopen");
	pagetable_close(pt);
}

/* A page write to an allocation deleted in the same transaction, or to a
 * page past its end, is refused as one to a guid never seen: the lookup
 * that saves the SQL (known_alloc in pagetable_sqlite.c) forgets with the
 * delete, and knows the allocation's length. */
static void test_page_put_deleted(void)
{
	char path[300];
	struct pagetable *pt;
	struct pt_origin o;

	path_in_dir(path, sizeof(path), "deleted_page.db");
	pt = open_or_die(path);
	o = own(pt);
	CHECK_OK("alloc", pagetable_alloc_put(pt, &fold_alloc, 0x11u, &o));
	o = own(pt);
	CHECK_OK("its last page", fold_put(pt, 2, 4, 0x44u, true, &o));
	o = own(pt);
	CHECK_INT("past its end", -ENOENT, fold_put(pt, 3, 4, 0x44u, true, &o));
	o = own(pt);
	CHECK_OK("delete", pagetable_alloc_delete(pt, "f-1", &o));
	o = own(pt);
	CHECK_INT("a page of the deleted allocation", -ENOENT, fold_put(pt, 0, 5, 0x55u, true, &o));
	CHECK(strstr(pagetable_last_error(pt), "page 0 of f-1") != NULL,
	      "the reason names the page: \"%s\"", pagetable_last_error(pt));
	CHECK_OK("commit", pagetable_commit(pt));
	o = own(pt);
	CHECK_INT("after the commit", -ENOENT, fold_put(pt, 1, 5, 0x55u, true, &o));
	o = own(pt);
	CHECK_OK("made again", pagetable_alloc_put(pt, &fold_alloc, 0x11u, &o));
	o = own(pt);
	CHECK_OK("a page of it", fold_put(pt, 1, 1, 0x11u, true, &o));
	CHECK_OK("commit again", pagetable_commit(pt));
	pagetable_close(pt);
}

/* pagetable_fold(): what waits goes into the open transaction (one opened
 * if none), for the caller to commit; nothing waiting, nothing done. */
static void fold_when_asked(const char *path)
{
	struct pagetable *pt = open_or_die(path);
	struct pt_origin o = own(pt);

	CHECK_OK("alloc", pagetable_alloc_put(pt, &fold_alloc, 0x11u, &o));
	CHECK_OK("commit", pagetable_commit(pt));
	CHECK_INT("waiting after an alloc", 0, pagetable_fold_waiting(pt));
	o = own(pt);
	CHECK_OK("page 0", fold_put(pt, 0, 4, 0x44u, true, &o));
	o = own(pt);
	CHECK_OK("page 1", fold_put(pt, 1, 7, 0x77u, false, &o));
	o = own(pt);
	CHECK_OK("page 2", fold_put(pt, 2, 8, 0x88u, true, &o));
	CHECK_OK("commit", pagetable_commit(pt));
	CHECK_INT("waiting after three page writes", 3, pagetable_fold_waiting(pt));
	CHECK_OK("fold outside a transaction", pagetable_fold(pt));
	CHECK_INT("waiting after the fold", 0, pagetable_fold_waiting(pt));
	CHECK(pagetable_in_transaction(pt), "the fold opened a transaction");
	CHECK_OK("commit the fold", pagetable_commit(pt));
	CHECK_OK("fold again", pagetable_fold(pt));
	CHECK(!pagetable_in_transaction(pt), "nothing waiting: no transaction");
	o = own(pt);
	CHECK_OK("page 2 again", fold_put(pt, 2, 9, 0x99u, true, &o));
	CHECK_INT("waiting in the transaction", 1, pagetable_fold_waiting(pt));
	CHECK_OK("fold in the transaction", pagetable_fold(pt));
	CHECK_INT("waiting after it", 0, pagetable_fold_waiting(pt));
	CHECK(pagetable_in_transaction(pt), "the caller's transaction stays open");
	CHECK_OK("commit", pagetable_commit(pt));
	CHECK_INT("waiting after the commit", 0, pagetable_fold_waiting(pt));
}

/* Killed after folds it asked for and committed: the file's pages have every
 * write without any open or close folding them. */
static void test_fold_when_asked(void)
{
	char path[300], buf[64];
	struct pagetable *pt;

	path_in_dir(path, sizeof(path), "fold_asked.db");
	killed_after(fold_when_asked, path);
	raw_value(path,
		  "SELECT group_concat(version) FROM (SELECT version FROM pages"
		  " WHERE guid = 'f-1' ORDER BY page)",
		  buf, sizeof(buf));
	CHECK_STR("pages in the file, folded before the kill", "4,7,9", buf);
	raw_value(path, "SELECT value FROM meta WHERE key = 'folded_seq'", buf, sizeof(buf));
	CHECK_STR("fold mark: the last page row's seq", "4", buf);
	pt = open_or_die(path);
	check_fold_want(pt, "after the folds asked for");
	pagetable_close(pt);
}

/* ---- The group-commit figure ---------------------------------------------- */

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void bench(bool synchronous_full)
{
	enum {
		GROUPED = 10000,
		SINGLE = 1000
	};
	char path[300];
	struct pagetable *pt;
	struct pt_origin o;
	struct pt_alloc a = { .guid = "bench",
			      .home = "node-a",
			      .owner = "node-a",
			      .policy = "default",
			      .size = (uint64_t)GROUPED * 4096,
			      .block_size = 4096,
			      .pages = GROUPED };
	double t0, grouped, single;
	int r;

	path_in_dir(path, sizeof(path), synchronous_full ? "bench_full.db" : "bench_normal.db");
	r = pagetable_open(path, synchronous_full, &pt);
	if (r < 0) {
		FAIL("bench: open: %s", pagetable_last_error(NULL));
		return;
	}
	o = own(pt);
	CHECK_OK("bench: put", pagetable_alloc_put(pt, &a, 0, &o));
	CHECK_OK("bench: commit", pagetable_commit(pt));

	t0 = now_s();
	for (uint64_t i = 0; i < GROUPED; i++) {
		struct pt_page p = {
			.guid = "bench", .page = i, .version = 1, .crc32c = (uint32_t)i
		};

		o = own(pt);
		r = pagetable_page_put(pt, &p, &o);
		if (r < 0) {
			FAIL("bench: page_put: %s", pagetable_last_error(pt));
			break;
		}
	}
	CHECK_OK("bench: commit", pagetable_commit(pt));
	grouped = now_s() - t0;

	t0 = now_s();
	for (uint64_t i = 0; i < SINGLE; i++) {
		struct pt_page p = {
			.guid = "bench", .page = i, .version = 2, .crc32c = (uint32_t)i
		};

		o = own(pt);
		r = pagetable_page_put(pt, &p, &o);
		if (r == 0)
			r = pagetable_commit(pt);
		if (r < 0) {
			FAIL("bench: page_put + commit: %s", pagetable_last_error(pt));
			break;
		}
	}
	single = now_s() - t0;
	pagetable_close(pt);

	printf("pagetable: synchronous=%s: %d page_put in one transaction %.1f ms (%.2f us each); "
	       "%d page_put with a commit each %.1f ms (%.2f us each)\n",
	       synchronous_full ? "FULL" : "NORMAL", GROUPED, grouped * 1e3,
	       grouped * 1e6 / GROUPED, SINGLE, single * 1e3, single * 1e6 / SINGLE);
}

/* ---- Setup ---------------------------------------------------------------- */

/* What pagetable_recovered_list() hands back, as text. */
static int note_recovered(const struct pt_recovered *rec, void *arg)
{
	char *out = arg;
	size_t len = strlen(out);

	snprintf(out + len, 512 - len, "%s/%" PRIu64 ":%" PRIu64 "->%" PRIu64 "@%" PRIu64 "(%s);",
		 rec->guid, rec->page, rec->from_version, rec->to_version, rec->at_ms, rec->why);
	return 0;
}

/* The pages that went back (node/ha/HA.md, "Recovery") are kept across a
 * reopen and after their allocation is freed, listed in order from an id
 * or newest first. */
static int partition_line(const struct pt_partition *part, void *arg)
{
	char *out = arg;
	size_t at = strlen(out);

	snprintf(out + at, 512 - at, "%s %s %llu+%llu;", part->media, part->type,
		 (unsigned long long)part->start, (unsigned long long)part->length);
	return 0;
}

/* The memory partition table: rows put (one replaced), listed by media and
 * start, kept across a close, and never journalled. */
static void test_partitions(void)
{
	char path[300], out[512] = "";
	struct pagetable *pt;
	uint64_t journal;

	path_in_dir(path, sizeof(path), "partitions.db");
	pt = open_or_die(path);
	journal = pagetable_journal_count(pt);
	CHECK_OK("dram server",
		 pagetable_partition_put(
			 pt, &(struct pt_partition){ "dram", "server-memory", 0, 4096 }));
	CHECK_OK("dram cache",
		 pagetable_partition_put(
			 pt, &(struct pt_partition){ "dram", "storage-cache", 4096, 0 }));
	CHECK_OK("flash server",
		 pagetable_partition_put(
			 pt, &(struct pt_partition){ "flash", "server-memory", 65536, 1024 }));
	CHECK_OK("dram server again",
		 pagetable_partition_put(
			 pt, &(struct pt_partition){ "dram", "server-memory", 0, 2048 }));
	CHECK_INT("no media", -EINVAL,
		  pagetable_partition_put(pt, &(struct pt_partition){ "", "server-memory", 0, 1 }));
	CHECK_OK("commit", pagetable_commit(pt));
	CHECK_INT("journal rows", journal, pagetable_journal_count(pt));
	pagetable_close(pt);
	pt = open_or_die(path);
	CHECK_OK("list", pagetable_partition_list(pt, partition_line, out));
	CHECK_STR("partitions",
		  "dram server-memory 0+2048;dram storage-cache 4096+0;"
		  "flash server-memory 65536+1024;",
		  out);
	pagetable_close(pt);
}

static void test_recovered(void)
{
	struct pt_recovered rec = { .at_ms = 1700000000000ull, .why = "forced takeover" };
	struct pt_alloc a = { .guid = "a-1",
			      .home = "node-a",
			      .owner = "node-a",
			      .policy = "default",
			      .size = 16384,
			      .block_size = 4096,
			      .pages = 4 };
	char path[300], out[512] = "";
	struct pagetable *pt;
	struct pt_origin o;

	path_in_dir(path, sizeof(path), "recovered.db");
	pt = open_or_die(path);
	CHECK_INT("none at first", 0, pagetable_recovered_count(pt));
	o = own(pt);
	CHECK_OK("put a-1", pagetable_alloc_put(pt, &a, 7, &o));
	for (uint64_t page = 0; page < 3; page++) {
		rec.guid = "a-1";
		rec.page = page;
		rec.from_version = 10 + page;
		rec.to_version = page;
		CHECK_INT("noted", 0, pagetable_recovered_add(pt, &rec));
	}
	CHECK_INT("a row without a guid", -EINVAL,
		  pagetable_recovered_add(pt, &(struct pt_recovered){ .why = "x" }));
	o = own(pt);
	CHECK_OK("free the allocation", pagetable_alloc_delete(pt, "a-1", &o));
	CHECK_INT("commit", 0, pagetable_commit(pt));
	pagetable_close(pt);

	pt = open_or_die(path);
	CHECK_INT("kept across a reopen and the free", 3, pagetable_recovered_count(pt));
	CHECK_INT("list", 0, pagetable_recovered_list(pt, 0, 10, false, note_recovered, out));
	CHECK_STR("in order",
		  "a-1/0:10->0@1700000000000(forced takeover);"
		  "a-1/1:11->1@1700000000000(forced takeover);"
		  "a-1/2:12->2@1700000000000(forced takeover);",
		  out);
	out[0] = '\0';
	CHECK_INT("list after id 1, 1 of them", 0,
		  pagetable_recovered_list(pt, 1, 1, false, note_recovered, out));
	CHECK_STR("from the id on", "a-1/1:11->1@1700000000000(forced takeover);", out);
	out[0] = '\0';
	CHECK_INT("the newest 2", 0, pagetable_recovered_list(pt, 0, 2, true, note_recovered, out));
	CHECK_STR("newest first",
		  "a-1/2:12->2@1700000000000(forced takeover);"
		  "a-1/1:11->1@1700000000000(forced takeover);",
		  out);
	pagetable_close(pt);
}

int main(void)
{
	rng_seed(0x9a6e7ab1u);
	scratch_dir_make(dir, sizeof(dir), "ftvm-test-pagetable");

	test_round_trip();
	test_fold_both_ways();
	test_uncommitted();
	test_commit_failed();
	test_journal();
	test_guids();
	test_wal_and_cascade();
	test_refused_changes();
	test_partner_lsns();
	test_epoch();
	test_set_owner();
	test_journal_trim();
	test_undo_and_commit_marks();
	test_refused_files();
	test_migration_from_v1();
	test_migration_from_v2();
	test_crash();
	test_partner_applied_recovered();
	test_fold_after_a_kill();
	test_fold_at_commit();
	test_fold_new_incarnation();
	test_fold_before_trim();
	test_page_put_unknown();
	test_page_put_deleted();
	test_fold_when_asked();
	test_recovered();
	test_partitions();
	bench(false);
	bench(true);

	scratch_dir_remove(dir);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("pagetable: all %d checks passed\n", checks);
	return 0;
}
