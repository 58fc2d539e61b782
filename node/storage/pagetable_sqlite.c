/* The page table in SQLite (vmm/VMM.md, "The page table in SQLite").
 *
 * One connection, WAL, every statement prepared once at open and kept. Values
 * only ever reach SQL through bindings; the only SQL text not in stmt_sql[] is
 * the fixed PRAGMAs and the migration steps.
 *
 * Transactions: the first change opens one (BEGIN IMMEDIATE, so a lock
 * conflict shows at the start and not halfway), pagetable_commit() ends it.
 * A change of more than one statement runs inside SAVEPOINT change, so a
 * change that fails halfway (a duplicate guid, a full disk on the 500th page
 * row) is undone alone and the group's earlier changes stay. A page write is
 * one statement, its journal row: pages takes it later, at a fold.
 *
 * Folds (vmm/VMM.md, "The page table in SQLite"): page rows carry seq, their
 * order of call; pages holds every page row up to the fold mark (meta
 * folded_seq). A fold runs before anything reads pages or changes which
 * pages there are, before a trim, at open and close, and at a commit when
 * FOLD_ROWS rows wait; the caller folds too, when idle (pagetable_fold()), so
 * that the commit seldom has to.
 *
 * Counters: guid numbers and LSNs leave this node (in envelopes, in guids a
 * client holds) possibly before the transaction they were taken in commits, so
 * they come from leases: meta holds the first number not leased yet, written
 * and committed before any number below it is handed out. A restart resumes at
 * that bound and so skips what was leased and unused; nothing repeats.
 *
 *     open:    next = durable = meta bound; lease [next, next + block), commit
 *     take:    next < durable ? next++ : commit a new lease first
 *     commit:  less than half a lease left? write a new bound into this commit
 */
#define _GNU_SOURCE /* sync_file_range */
#include "pagetable_sqlite.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sqlite3.h>

#include "clock.h"
#include "fold_map.h"
#include "log.h"
#include "wal_vfs.h"

#define LOG_SUBSYSTEM "pagetable"

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

#define BUSY_TIMEOUT_MS 5000
#define GUID_LEASE 64
#define LSN_LEASE 65536
#define LSN_WRITE_INTERVAL_MS 1000
/* A commit folds when this many page rows wait: the backstop for a caller
 * never idle long enough to fold (pagetable_fold()). The fold is a pause for
 * the one commit that does it, linear in the rows on distinct pages (a row
 * costs about as much as the UPDATE a page write used to run, less when
 * rows repeat a page): about 4.5 ms for 1024, 1.5 for 256. Now that idle
 * folds do most of the work, 1024 rather than 256: a burst of up to 1024
 * rows pays none, and a steady writer pays a fold a quarter as often, for
 * fewer slow writes overall (vmm/VMM.md has the figures). */
#define FOLD_ROWS 1024
/* A fold of rows on more pages than this is left to SQL (fold_by_page()):
 * the map takes about 200 bytes a page (two slots of 104). */
#define FOLD_MAP_PAGES 4096
/* SQLite's automatic WAL checkpoint (at 1000 frames) is off: it ran inside
 * whichever commit crossed it, a pause of fdatasync calls for the clients
 * waiting on that commit. The caller checkpoints when idle
 * (pagetable_checkpoint()); a commit checkpoints only when the WAL holds
 * this many frames, the backstop for a caller never idle (vmm/VMM.md, "WAL
 * checkpoints"). 4096 frames of 1 KiB pages, about 4 MiB of WAL. */
#define CHECKPOINT_FRAMES 4096
/* With synchronous=NORMAL no commit syncs the WAL: the checkpoint's first
 * fdatasync writes back every frame since the last checkpoint, in one pause
 * that grows with them (on the test host about 1.7 ms per 1000 frames, 7 ms
 * at 4096). So the table starts the writeback of what the WAL holds each
 * time it has grown by this many frames (sync_file_range, which does not
 * wait for the disk), and the kernel writes it behind while the node serves:
 * the checkpoint's fdatasync then finds little left to write. */
#define WRITEBACK_FRAMES 256

/* Step i takes schema i to i + 1 inside one transaction; the caller then sets
 * schema_version. Append only: a step, once released, never changes. */
static const struct migration {
	const char *what;
	const char *sql;
} migrations[] = {
	{ "create the page table",
	  "CREATE TABLE meta(key TEXT PRIMARY KEY, value INTEGER NOT NULL);"
	  "CREATE TABLE allocations(guid TEXT PRIMARY KEY, home TEXT NOT NULL,"
	  " owner TEXT NOT NULL, size INTEGER NOT NULL, block_size INTEGER NOT NULL,"
	  " pages INTEGER NOT NULL, policy TEXT NOT NULL, header BLOB NOT NULL);"
	  "CREATE TABLE pages(guid TEXT NOT NULL REFERENCES allocations(guid) ON DELETE CASCADE,"
	  " page INTEGER NOT NULL, version INTEGER NOT NULL, crc32c INTEGER NOT NULL,"
	  " dirty INTEGER NOT NULL, PRIMARY KEY (guid, page)) WITHOUT ROWID;"
	  "CREATE TABLE journal(lsn INTEGER PRIMARY KEY, origin TEXT NOT NULL,"
	  " origin_lsn INTEGER NOT NULL, op TEXT NOT NULL, guid TEXT NOT NULL,"
	  " page INTEGER, version INTEGER, crc32c INTEGER);"
	  "INSERT INTO meta(key, value) VALUES ('next_guid', 1), ('next_lsn', 1),"
	  " ('partner_applied_lsn', 0), ('applied_by_partner_lsn', 0), ('schema_version', 0);" },
	{ "add each allocation's extent in the store",
	  "ALTER TABLE allocations ADD COLUMN store_offset INTEGER NOT NULL DEFAULT 0;" },
	/* Rows already there keep seq NULL: the old code updated pages with
	 * each of them, so they are folded. */
	{ "fold pages from the journal in call order",
	  "ALTER TABLE journal ADD COLUMN seq INTEGER;"
	  "INSERT INTO meta(key, value) VALUES ('folded_seq', 0);" },
	/* Nothing to change: the step keeps an older ftvm, whose fold skips
	 * "undo" rows, from opening a table that may hold them. */
	{ "journal op 'undo' (a clean page put back)", "" },
	/* Allocations made before uids were recorded become root's: admin_group
	 * and root may still act on them, nobody else could tell them apart. */
	{ "record the client uid each allocation belongs to",
	  "ALTER TABLE allocations ADD COLUMN uid INTEGER NOT NULL DEFAULT 0;" },
	/* No foreign key: the report outlives the allocation. */
	{ "list the pages that went back to an older version (node/ha/HA.md, \"Recovery\")",
	  "CREATE TABLE recovered(id INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL,"
	  " guid TEXT NOT NULL, page INTEGER NOT NULL, from_version INTEGER NOT NULL,"
	  " to_version INTEGER NOT NULL, why TEXT NOT NULL);" },
	/* Allocations made before names were recorded have none. */
	{ "record the name of each allocation's client (seed 003's allocate table)",
	  "ALTER TABLE allocations ADD COLUMN client TEXT NOT NULL DEFAULT '';" },
	/* Allocations made before sessions stay until freed. */
	{ "record the session a session allocation lives as long as",
	  "ALTER TABLE allocations ADD COLUMN session TEXT NOT NULL DEFAULT '';" },
	/* Allocations made before media rest in the store, as they did. */
	{ "record where each allocation's pages rest here, and its extent on flash",
	  "ALTER TABLE allocations ADD COLUMN media TEXT NOT NULL DEFAULT 'store';"
	  "ALTER TABLE allocations ADD COLUMN flash_offset INTEGER NOT NULL DEFAULT 0;" },
	/* A table with no rows: the node records its split at its next start. */
	{ "record the memory partition table (seed 003 Fig. 12)",
	  "CREATE TABLE partitions(media TEXT NOT NULL, type TEXT NOT NULL,"
	  " start INTEGER NOT NULL, length INTEGER NOT NULL, PRIMARY KEY (media, type));" },
	/* Allocations made before volumes are none. */
	{ "record the name of each block volume (node/vmm/VMM.md, \"Volumes\")",
	  "ALTER TABLE allocations ADD COLUMN volume TEXT NOT NULL DEFAULT '';" },
};

#define SCHEMA_VERSION ((int64_t)ARRAY_SIZE(migrations))

enum stmt {
	ST_BEGIN,
	ST_COMMIT,
	ST_ROLLBACK,
	ST_SAVEPOINT,
	ST_RELEASE,
	ST_ROLLBACK_TO,
	ST_META_GET,
	ST_META_SET,
	ST_ALLOC_INSERT,
	ST_PAGE_INSERT,
	ST_ALLOC_DELETE,
	ST_ALLOC_SET_OWNER,
	ST_PAGE_EXISTS,
	ST_FOLD,
	ST_FOLD_SCAN,
	ST_PAGE_SET,
	ST_JOURNAL_INSERT,
	ST_JOURNAL_MAX,
	ST_JOURNAL_MAX_SEQ,
	ST_JOURNAL_COUNT,
	ST_JOURNAL_TRIM,
	ST_JOURNAL_OWN_MAX,
	ST_JOURNAL_PARTNER_MAX,
	ST_JOURNAL_GUIDS_AFTER,
	ST_ALLOC_SELECT,
	ST_PAGE_SELECT,
	ST_RECOVERED_INSERT,
	ST_RECOVERED_SELECT,
	ST_RECOVERED_NEWEST,
	ST_RECOVERED_COUNT,
	ST_PARTITION_PUT,
	ST_PARTITION_SELECT,
	ST__MAX
};

static const char *const stmt_sql[ST__MAX] = {
	[ST_BEGIN] = "BEGIN IMMEDIATE",
	[ST_COMMIT] = "COMMIT",
	[ST_ROLLBACK] = "ROLLBACK",
	[ST_SAVEPOINT] = "SAVEPOINT change",
	[ST_RELEASE] = "RELEASE change",
	[ST_ROLLBACK_TO] = "ROLLBACK TO change",
	[ST_META_GET] = "SELECT value FROM meta WHERE key = ?1",
	[ST_META_SET] = "INSERT INTO meta(key, value) VALUES (?1, ?2)"
			" ON CONFLICT(key) DO UPDATE SET value = excluded.value",
	[ST_ALLOC_INSERT] = "INSERT INTO allocations(guid, home, owner, size, block_size, pages,"
			    " policy, header, store_offset, uid, client, session, media,"
			    " flash_offset, volume)"
			    " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14,"
			    " ?15)",
	[ST_PAGE_INSERT] = "INSERT INTO pages(guid, page, version, crc32c, dirty)"
			   " VALUES (?1, ?2, 0, ?3, 0)",
	[ST_ALLOC_DELETE] = "DELETE FROM allocations WHERE guid = ?1",
	[ST_ALLOC_SET_OWNER] = "UPDATE allocations SET owner = ?2 WHERE guid = ?1",
	[ST_PAGE_EXISTS] = "SELECT 1 FROM pages WHERE guid = ?1 AND page = ?2",
	/* Each page takes its row of highest seq above the fold mark ?1: with
	 * one max(), SQLite's bare columns come from that row. ?2 bounds the
	 * scan: no row above the mark has a lower LSN. */
	[ST_FOLD] = "UPDATE pages SET version = j.version, crc32c = j.crc32c,"
		    " dirty = (j.op = 'page')"
		    " FROM (SELECT guid, page, version, crc32c, op, max(seq) FROM journal"
		    " WHERE lsn >= ?2 AND seq > ?1 AND op IN ('page', 'clean', 'undo')"
		    " GROUP BY guid, page) AS j"
		    " WHERE pages.guid = j.guid AND pages.page = j.page",
	/* The fold by page (fold_by_page()): the rows ST_FOLD takes, and each
	 * page's newest set in pages. */
	[ST_FOLD_SCAN] = "SELECT guid, page, version, crc32c, op = 'page', seq FROM journal"
			 " WHERE lsn >= ?2 AND seq > ?1 AND op IN ('page', 'clean', 'undo')",
	[ST_PAGE_SET] = "UPDATE pages SET version = ?3, crc32c = ?4, dirty = ?5"
			" WHERE guid = ?1 AND page = ?2",
	[ST_JOURNAL_INSERT] = "INSERT INTO journal(lsn, origin, origin_lsn, op, guid, page,"
			      " version, crc32c, seq)"
			      " VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
	[ST_JOURNAL_MAX] = "SELECT coalesce(max(lsn), 0) FROM journal",
	[ST_JOURNAL_MAX_SEQ] = "SELECT coalesce(max(seq), 0) FROM journal",
	[ST_JOURNAL_COUNT] = "SELECT count(*) FROM journal",
	[ST_JOURNAL_OWN_MAX] = "SELECT coalesce(max(lsn), 0) FROM journal"
			       " WHERE origin = ?1 AND op != 'clean'",
	[ST_JOURNAL_PARTNER_MAX] = "SELECT coalesce(max(origin_lsn), 0) FROM journal"
				   " WHERE origin != ?1",
	[ST_JOURNAL_GUIDS_AFTER] =
		"SELECT DISTINCT guid FROM journal"
		" WHERE origin = ?1 AND lsn > ?2 AND op != 'clean' ORDER BY guid",
	/* The rows that may go, at most ?3 of them in LSN order: a range of
	 * the rowid, up to the ?3rd such row, and not a list of LSNs first
	 * ("lsn IN (SELECT ... LIMIT ?3)" built one, a B-tree insert per row,
	 * about 40% of the trim's time). */
	[ST_JOURNAL_TRIM] = "DELETE FROM journal WHERE lsn <= coalesce((SELECT lsn FROM journal"
			    " WHERE (origin = ?1 AND lsn <= ?2) OR origin != ?1"
			    " ORDER BY lsn LIMIT 1 OFFSET ?3 - 1), 9223372036854775807)"
			    " AND (origin != ?1 OR lsn <= ?2)",
	[ST_ALLOC_SELECT] = "SELECT guid, home, owner, size, block_size, pages, policy, header,"
			    " store_offset, uid, client, session, media, flash_offset, volume"
			    " FROM allocations ORDER BY guid",
	[ST_PAGE_SELECT] = "SELECT page, version, crc32c, dirty FROM pages WHERE guid = ?1"
			   " ORDER BY page",
	[ST_RECOVERED_INSERT] = "INSERT INTO recovered(at_ms, guid, page, from_version,"
				" to_version, why) VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
	[ST_RECOVERED_SELECT] = "SELECT id, at_ms, guid, page, from_version, to_version, why"
				" FROM recovered WHERE id > ?1 ORDER BY id LIMIT ?2",
	[ST_RECOVERED_NEWEST] = "SELECT id, at_ms, guid, page, from_version, to_version, why"
				" FROM recovered ORDER BY id DESC LIMIT ?2",
	[ST_RECOVERED_COUNT] = "SELECT count(*) FROM recovered",
	[ST_PARTITION_PUT] = "INSERT OR REPLACE INTO partitions(media, type, start, length)"
			     " VALUES (?1, ?2, ?3, ?4)",
	[ST_PARTITION_SELECT] = "SELECT media, type, start, length FROM partitions"
				" ORDER BY media, start",
};

/* An allocation whose page rows 0 .. pages - 1 are known to be in pages, as
 * the open transaction (or, outside one, the file) has them: a page write
 * checks that its page's row is there (pagetable_page_put) with a lookup
 * here instead of a SELECT, which was about as much of each node's CPU as
 * the journal row's INSERT (7-9% under 16 clients' page writes). Page rows
 * come and go only with their allocation (pagetable_alloc_put, the cascade
 * of pagetable_alloc_delete), so an allocation known is known whole: learnt
 * when it is made and when the table is loaded, forgotten when it is
 * deleted, and all of them when a transaction ends without a commit (it
 * may have made some). A guid not known, or too long for a slot, is looked
 * up in SQL as before. */
#define KNOWN_ALLOCS 256
struct known_alloc {
	char guid[56]; /* "": empty slot */
	uint64_t pages;
};

/* Numbers below durable may have been handed out, and meta says so on disk;
 * next is the next one to hand out (next <= durable). */
struct lease {
	const char *key; /* its meta row */
	uint64_t block;
	uint64_t next;
	uint64_t durable;
};

/* Where pages stands against the journal (vmm/VMM.md, "The page table in
 * SQLite"): page rows up to the fold mark are in pages, the rest only in the
 * journal. */
struct fold {
	uint64_t next_seq;	 /* the next page row's */
	uint64_t mark;		 /* as the open transaction has it (or the file, if none) */
	uint64_t mark_committed; /* as the file has it */
	/* No row above mark_committed has an LSN below floor (0: not known,
	 * scan it all); floor_after_fold is the same for the rows since the
	 * open transaction's fold, which become the floor when it commits. */
	uint64_t floor, floor_after_fold;
};

struct pagetable {
	sqlite3 *db;
	sqlite3_stmt *stmt[ST__MAX];
	bool ready; /* every statement prepared and the counters loaded */
	struct lease guid, lsn;
	struct fold fold;
	uint64_t partner_applied_lsn, applied_by_partner_lsn;
	/* Set since the last commit: written once, by the commit, rather than
	 * by every message of a batch. */
	bool partner_applied_changed;
	/* Noted (journalled with its change), not written: trim and close
	 * write it. */
	bool partner_applied_unwritten;
	/* Set since last written; written by a commit at most once a second
	 * (and at close), as it changes with every acknowledgement. */
	bool applied_by_partner_changed;
	uint64_t applied_by_partner_written_ms;
	uint32_t checkpoint_frames; /* the commit's backstop */
	struct pt_stats stats;
	bool synchronous_full;
	/* The WAL file, opened a second time to start its writeback (-1 until
	 * the first writeback; the WAL holds no lock of SQLite's, so closing
	 * this descriptor releases none), and wal_frames at the last one. */
	char *wal_path;
	int wal_fd;
	uint64_t wal_frames_written_back;
	/* Transactions are numbered as they begin: the open (or last) one, the
	 * last committed, the last that ended without a commit. */
	uint64_t txn, txn_committed, txn_lost;
	void (*commit_failed)(void *arg, int r);
	void *commit_failed_arg;
	/* Allocations whose page rows are known to be there (known_*). */
	struct known_alloc known[KNOWN_ALLOCS];
	char err[512];
};

static _Thread_local char open_error[512];

static int fail(struct pagetable *pt, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Records why, and returns r. The arguments may include pt->err itself. */
static int fail(struct pagetable *pt, int r, const char *fmt, ...)
{
	char buf[sizeof(pt->err)];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(buf, sizeof(buf), fmt, ap);
	va_end(ap);
	memcpy(pt->err, buf, sizeof(buf));
	log_debug("%s", pt->err);
	return r;
}

/* SQLite's result code as -errno. */
static int sql_errno(sqlite3 *db, int rc)
{
	int e;

	switch (rc & 0xff) {
	case SQLITE_BUSY:
	case SQLITE_LOCKED:
		return -EBUSY;
	case SQLITE_FULL:
		return -ENOSPC;
	case SQLITE_CONSTRAINT:
		return -EEXIST;
	case SQLITE_NOTADB:
	case SQLITE_CORRUPT:
		return -EBADMSG;
	case SQLITE_NOMEM:
		return -ENOMEM;
	case SQLITE_CANTOPEN:
	case SQLITE_IOERR:
		/* The system's reason (EACCES, ENOSPC, ...) says more than EIO. */
		e = db ? sqlite3_system_errno(db) : 0;
		return e > 0 ? -e : -EIO;
	default:
		return -EIO;
	}
}

/* Records "<what>: <SQLite's message>" and returns rc as -errno. Call before
 * resetting the statement that failed, which keeps the message anyway. */
static int sql_fail(struct pagetable *pt, int rc, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int sql_fail(struct pagetable *pt, int rc, const char *fmt, ...)
{
	char what[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return fail(pt, sql_errno(pt->db, rc), "%s: %s (SQLite code %d)", what,
		    pt->db ? sqlite3_errmsg(pt->db) : sqlite3_errstr(rc), rc);
}

/* ---- Statements --------------------------------------------------------- */

static void done(sqlite3_stmt *st)
{
	sqlite3_reset(st);
	sqlite3_clear_bindings(st);
}

/* Steps a cached statement to its end, ignoring rows, and resets it. */
static int run(struct pagetable *pt, enum stmt s, const char *what)
{
	sqlite3_stmt *st = pt->stmt[s];
	int rc, r = 0;

	while ((rc = sqlite3_step(st)) == SQLITE_ROW)
		;
	if (rc != SQLITE_DONE)
		r = sql_fail(pt, rc, "%s", what);
	done(st);
	return r;
}

/* Steps a cached statement for one integer; *ret = 0 when there is no row. */
static int run_int(struct pagetable *pt, enum stmt s, const char *what, int64_t *ret)
{
	sqlite3_stmt *st = pt->stmt[s];
	int rc, r = 0;

	*ret = 0;
	rc = sqlite3_step(st);
	if (rc == SQLITE_ROW)
		*ret = sqlite3_column_int64(st, 0);
	else if (rc != SQLITE_DONE)
		r = sql_fail(pt, rc, "%s", what);
	done(st);
	return r;
}

/* Binding fails only on a programmer's error or a value too big for SQLite. */
static int bind_check(struct pagetable *pt, sqlite3_stmt *st, int rc, const char *what)
{
	int r;

	if (rc == SQLITE_OK)
		return 0;
	r = sql_fail(pt, rc, "%s: binding a value", what);
	done(st);
	return r;
}

static int bind_text(sqlite3_stmt *st, int i, const char *s)
{
	return sqlite3_bind_text(st, i, s, -1, SQLITE_STATIC);
}

/* SQLite integers are signed 64 bits: a uint64_t goes in and comes back out
 * bit for bit. */
static int bind_u64(sqlite3_stmt *st, int i, uint64_t v)
{
	return sqlite3_bind_int64(st, i, (sqlite3_int64)v);
}

/* Runs fixed SQL text (PRAGMAs, migrations); with ret, the first column of
 * the first row as text. */
static int exec_fixed(struct pagetable *pt, const char *sql, char *ret, size_t ret_len)
{
	sqlite3_stmt *st;
	const char *tail = sql;
	int rc, r = 0;

	if (ret)
		ret[0] = '\0';
	while (*tail) {
		rc = sqlite3_prepare_v2(pt->db, tail, -1, &st, &tail);
		if (rc != SQLITE_OK)
			return sql_fail(pt, rc, "%.60s", sql);
		if (!st) /* trailing blanks */
			break;
		while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
			const unsigned char *t = sqlite3_column_text(st, 0);

			if (ret && !ret[0] && t)
				snprintf(ret, ret_len, "%s", (const char *)t);
		}
		if (rc != SQLITE_DONE)
			r = sql_fail(pt, rc, "%.60s", sql);
		sqlite3_finalize(st);
		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- Transactions ------------------------------------------------------- */

bool pagetable_in_transaction(const struct pagetable *pt)
{
	return !sqlite3_get_autocommit(pt->db);
}

uint64_t pagetable_change_mark(const struct pagetable *pt)
{
	return pt->txn;
}

bool pagetable_committed(const struct pagetable *pt, uint64_t mark)
{
	return pt->txn_committed >= mark && pt->txn_lost < mark;
}

/* A transaction that ended without a commit took its fold with it. */
static void fold_forget_uncommitted(struct pagetable *pt)
{
	pt->fold.mark = pt->fold.mark_committed;
}

static void fold_committed(struct pagetable *pt)
{
	/* A fold moves the mark past at least one row: marks apart means the
	 * transaction folded. */
	if (pt->fold.mark == pt->fold.mark_committed)
		return;
	pt->fold.mark_committed = pt->fold.mark;
	pt->fold.floor = pt->fold.floor_after_fold;
}

static void known_check_lost(struct pagetable *pt);

static int begin(struct pagetable *pt)
{
	if (pagetable_in_transaction(pt))
		return 0;
	fold_forget_uncommitted(pt);
	known_check_lost(pt);
	if (pt->txn != pt->txn_committed)
		pt->txn_lost = pt->txn;
	pt->txn++;
	return run(pt, ST_BEGIN, "begin a transaction");
}

static int meta_get(struct pagetable *pt, const char *key, uint64_t *ret);

static int meta_set(struct pagetable *pt, const char *key, uint64_t value)
{
	sqlite3_stmt *st = pt->stmt[ST_META_SET];
	int r;

	r = begin(pt);
	if (r < 0)
		return r;
	r = bind_check(pt, st, bind_text(st, 1, key), key);
	if (r == 0)
		r = bind_check(pt, st, bind_u64(st, 2, value), key);
	if (r < 0)
		return r;
	return run(pt, ST_META_SET, key);
}

static uint64_t fold_unfolded_rows(const struct pagetable *pt)
{
	return pt->fold.next_seq - 1 - pt->fold.mark;
}

uint64_t pagetable_fold_waiting(const struct pagetable *pt)
{
	/* Outside a transaction a fold not committed is gone with it. */
	uint64_t mark = pagetable_in_transaction(pt) ? pt->fold.mark : pt->fold.mark_committed;

	return pt->fold.next_seq - 1 - mark;
}

static int set_page(const struct fold_row *row, void *arg)
{
	struct pagetable *pt = arg;
	sqlite3_stmt *st = pt->stmt[ST_PAGE_SET];
	int rc;

	rc = bind_text(st, 1, row->guid);
	rc = rc ?: bind_u64(st, 2, row->page);
	rc = rc ?: bind_u64(st, 3, row->version);
	rc = rc ?: sqlite3_bind_int64(st, 4, row->crc32c);
	rc = rc ?: sqlite3_bind_int(st, 5, row->dirty);
	if (rc != SQLITE_OK)
		return bind_check(pt, st, rc, "fold: a page");
	return run(pt, ST_PAGE_SET, "fold: a page");
}

/* The rows to fold, each page's newest kept in a map, then one UPDATE per
 * page: what ST_FOLD does, in about half of its instructions (its GROUP BY
 * sorts every row; 1024 rows over 256 pages, SQLite alone: 3.7k against
 * 8.7k instructions a row). -ENOSPC, with nothing changed, when the rows
 * are on more than FOLD_MAP_PAGES pages, a guid does not fit the map or
 * there is no memory for it: ST_FOLD does it then. */
static int fold_by_page(struct pagetable *pt)
{
	sqlite3_stmt *st = pt->stmt[ST_FOLD_SCAN];
	uint64_t rows = fold_unfolded_rows(pt);
	struct fold_map *map;
	int rc, r;

	if (fold_map_new(rows < FOLD_MAP_PAGES ? rows : FOLD_MAP_PAGES, &map) < 0)
		return -ENOSPC; /* no memory for the map: the query needs none */
	rc = bind_u64(st, 1, pt->fold.mark);
	rc = rc ?: bind_u64(st, 2, pt->fold.floor);
	r = bind_check(pt, st, rc, "fold");
	while (r == 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		const char *guid = (const char *)sqlite3_column_text(st, 0);
		struct fold_row row = {
			.guid = guid ? guid : "",
			.page = (uint64_t)sqlite3_column_int64(st, 1),
			.version = (uint64_t)sqlite3_column_int64(st, 2),
			.crc32c = (uint32_t)sqlite3_column_int64(st, 3),
			.dirty = sqlite3_column_int(st, 4) != 0,
			.seq = (uint64_t)sqlite3_column_int64(st, 5),
		};

		if (fold_map_put(map, &row) < 0)
			r = -ENOSPC; /* not an error: folded the other way */
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sql_fail(pt, rc, "fold: read the journal");
	done(st);
	if (r == 0)
		r = fold_map_each(map, set_page, pt);
	fold_map_free(map);
	return r;
}

/* Brings pages up to date with the journal's page rows above the fold mark
 * and moves the mark past them, in the open transaction (opening one if
 * there is something to fold). A fold is idempotent: if it fails halfway
 * (pages updated, the mark not), the next one does the same again. */
static int fold(struct pagetable *pt)
{
	sqlite3_stmt *st = pt->stmt[ST_FOLD];
	uint64_t last = pt->fold.next_seq - 1;
	int rc, r;

	if (!pagetable_in_transaction(pt))
		fold_forget_uncommitted(pt);
	if (fold_unfolded_rows(pt) == 0)
		return 0;
	r = begin(pt);
	if (r < 0)
		return r;
	r = fold_by_page(pt);
	if (r == -ENOSPC) {
		pt->stats.folds_by_sql++;
		rc = bind_u64(st, 1, pt->fold.mark);
		rc = rc ?: bind_u64(st, 2, pt->fold.floor);
		r = bind_check(pt, st, rc, "fold");
		if (r == 0)
			r = run(pt, ST_FOLD, "fold the journal into pages");
	}
	if (r == 0)
		r = meta_set(pt, "folded_seq", last);
	if (r < 0)
		return r;
	pt->fold.mark = last;
	pt->fold.floor_after_fold = UINT64_MAX;
	return 0;
}

int pagetable_fold(struct pagetable *pt)
{
	bool waiting = pagetable_fold_waiting(pt) > 0;
	int r = fold(pt);

	if (r == 0 && waiting)
		pt->stats.folds_asked++;
	return r;
}

/* ---- WAL checkpoints ---------------------------------------------------- */

/* After every commit that wrote frames: how many the WAL holds now. */
static int on_wal_commit(void *arg, sqlite3 *db, const char *name, int frames)
{
	struct pagetable *pt = arg;

	pt->stats.wal_frames = frames > 0 ? (uint64_t)frames : 0;
	if (pt->stats.wal_frames < pt->wal_frames_written_back)
		pt->wal_frames_written_back = 0; /* the WAL started again */
	if (pt->stats.wal_frames > pt->stats.wal_frames_peak)
		pt->stats.wal_frames_peak = pt->stats.wal_frames;
	return SQLITE_OK;
}

/* PASSIVE: with locking_mode=EXCLUSIVE no other connection reads, so it
 * copies every frame, as RESTART or TRUNCATE would, and the next commit
 * writes the WAL from its start again. TRUNCATE would also shrink the file
 * to nothing, and each commit after it would grow the file again (a size
 * change for every fdatasync to write back); journal_size_limit bounds the
 * file instead (pagetable_set_checkpoint_frames()). Returns the frames
 * copied. */
static int checkpoint(struct pagetable *pt, uint64_t *counter)
{
	int frames = 0, copied = 0, rc;

	if (pagetable_in_transaction(pt))
		return fail(pt, -EBUSY, "checkpoint: a transaction is open");
	if (pt->stats.wal_frames == 0)
		return 0;
	rc = sqlite3_wal_checkpoint_v2(pt->db, NULL, SQLITE_CHECKPOINT_PASSIVE, &frames, &copied);
	if (rc != SQLITE_OK)
		return sql_fail(pt, rc, "checkpoint the WAL");
	pt->stats.wal_frames = frames > copied ? (uint64_t)(frames - copied) : 0;
	pt->wal_frames_written_back = 0;
	(*counter)++;
	return copied;
}

/* WRITEBACK_FRAMES. Best effort: where it fails (no such call on this file
 * system), the checkpoint's fdatasync does it all, as it would anyway. */
static void wal_writeback(struct pagetable *pt)
{
	if (pt->synchronous_full ||
	    pt->stats.wal_frames < pt->wal_frames_written_back + WRITEBACK_FRAMES)
		return;
	pt->wal_frames_written_back = pt->stats.wal_frames;
	if (pt->wal_fd < 0)
		pt->wal_fd = open(pt->wal_path, O_RDONLY | O_CLOEXEC);
	if (pt->wal_fd >= 0 && sync_file_range(pt->wal_fd, 0, 0, SYNC_FILE_RANGE_WRITE) == 0)
		pt->stats.wal_writebacks++;
}

int pagetable_checkpoint(struct pagetable *pt)
{
	return checkpoint(pt, &pt->stats.checkpoints_asked);
}

int pagetable_set_checkpoint_frames(struct pagetable *pt, uint32_t frames)
{
	char size[32], sql[64];
	uint64_t limit;
	int r;

	frames = frames ?: CHECKPOINT_FRAMES;
	r = exec_fixed(pt, "PRAGMA page_size", size, sizeof(size));
	if (r < 0)
		return r;
	/* When the next commit starts the WAL again after a checkpoint, SQLite
	 * shrinks the file to journal_size_limit: a WAL that one large
	 * transaction grew does not keep its size on disk. The limit: a WAL
	 * at the backstop (a frame is a page and its 24-byte header, after
	 * the 32-byte file header) and a quarter more for the commit that
	 * crosses it, so that a node at the backstop does not cut the file to
	 * grow it again. */
	limit = 32 + ((uint64_t)frames + frames / 4) * (strtoull(size, NULL, 10) + 24);
	snprintf(sql, sizeof(sql), "PRAGMA journal_size_limit=%" PRIu64, limit);
	r = exec_fixed(pt, sql, NULL, 0);
	if (r == 0)
		pt->checkpoint_frames = frames;
	return r;
}

void pagetable_get_stats(const struct pagetable *pt, struct pt_stats *ret)
{
	*ret = pt->stats;
	ret->fold_waiting = pagetable_fold_waiting(pt);
	ret->checkpoint_frames = pt->checkpoint_frames;
}

/* Commits the open transaction (opening one when force_lease is set and none
 * is), first writing a new bound for each lease that is below half full or is
 * force_lease. */
static int commit_leases(struct pagetable *pt, struct lease *force_lease)
{
	struct lease *leases[] = { &pt->guid, &pt->lsn };
	uint64_t bound[ARRAY_SIZE(leases)] = { 0 };
	bool write_applied_by_partner;
	int r;

	if (!force_lease && !pagetable_in_transaction(pt))
		return 0;
	if (fold_unfolded_rows(pt) >= FOLD_ROWS) {
		r = fold(pt);
		if (r < 0)
			return r;
		pt->stats.folds_backstop++;
	}
	write_applied_by_partner =
		pt->applied_by_partner_changed &&
		clock_now_ms() - pt->applied_by_partner_written_ms >= LSN_WRITE_INTERVAL_MS;
	if (pt->partner_applied_changed) {
		r = meta_set(pt, "partner_applied_lsn", pt->partner_applied_lsn);
		if (r < 0)
			return r;
	}
	if (write_applied_by_partner) {
		r = meta_set(pt, "applied_by_partner_lsn", pt->applied_by_partner_lsn);
		if (r < 0)
			return r;
	}
	for (size_t i = 0; i < ARRAY_SIZE(leases); i++) {
		struct lease *l = leases[i];

		if (l != force_lease && l->durable - l->next >= l->block / 2)
			continue;
		bound[i] = l->next + l->block;
		r = meta_set(pt, l->key, bound[i]);
		if (r < 0)
			return r;
	}
	r = run(pt, ST_COMMIT, "commit");
	if (r < 0)
		return r;
	pt->txn_committed = pt->txn;
	pt->stats.commits++;
	fold_committed(pt);
	if (pt->partner_applied_changed)
		pt->partner_applied_unwritten = false;
	pt->partner_applied_changed = false;
	if (write_applied_by_partner) {
		pt->applied_by_partner_changed = false;
		pt->applied_by_partner_written_ms = clock_now_ms();
	}
	for (size_t i = 0; i < ARRAY_SIZE(leases); i++)
		if (bound[i] > leases[i]->durable)
			leases[i]->durable = bound[i];
	/* The commit stands whatever the checkpoint does: one that fails is
	 * tried again by the next commit (the reason stays in pt->err). */
	if (pt->stats.wal_frames >= pt->checkpoint_frames)
		checkpoint(pt, &pt->stats.checkpoints_backstop);
	else
		wal_writeback(pt);
	return 0;
}

static int commit(struct pagetable *pt, struct lease *force_lease)
{
	int r = commit_leases(pt, force_lease);

	if (r < 0 && pt->commit_failed)
		pt->commit_failed(pt->commit_failed_arg, r);
	return r;
}

int pagetable_commit(struct pagetable *pt)
{
	return commit(pt, NULL);
}

void pagetable_on_commit_failed(struct pagetable *pt, void (*fn)(void *arg, int r), void *arg)
{
	pt->commit_failed = fn;
	pt->commit_failed_arg = arg;
}

static int lease_take(struct pagetable *pt, struct lease *l, uint64_t *ret)
{
	int r;

	if (l->next >= l->durable) {
		log_debug("%s: lease used up inside one transaction; committing it early", l->key);
		r = commit(pt, l);
		if (r < 0)
			return r;
	}
	*ret = l->next++;
	return 0;
}

uint64_t pagetable_next_guid(struct pagetable *pt)
{
	uint64_t v;

	return lease_take(pt, &pt->guid, &v) < 0 ? 0 : v;
}

uint64_t pagetable_reserve_lsn(struct pagetable *pt)
{
	uint64_t v;

	return lease_take(pt, &pt->lsn, &v) < 0 ? 0 : v;
}

/* ---- Changes ------------------------------------------------------------ */

static bool empty(const char *s)
{
	return !s || !*s;
}

/* Checks the origin and works out the journal row's LSN. */
static int change_lsn(struct pagetable *pt, const struct pt_origin *o, const char *guid,
		      uint64_t *ret_lsn)
{
	if (!o || empty(o->node))
		return fail(pt, -EINVAL, "%s: a change needs an origin node", guid);
	if (o->own) {
		if (o->lsn == 0 || o->lsn >= pt->lsn.next)
			return fail(pt, -EINVAL,
				    "%s: own LSN %" PRIu64 " was not reserved by this table", guid,
				    o->lsn);
		*ret_lsn = o->lsn;
		return 0;
	}
	/* Before the transaction's changes: a new lease may commit. */
	return lease_take(pt, &pt->lsn, ret_lsn);
}

/* change_lsn, then opens the change's savepoint (and the transaction when
 * none is open). */
static int change_begin(struct pagetable *pt, const struct pt_origin *o, const char *guid,
			uint64_t *ret_lsn)
{
	int r;

	r = change_lsn(pt, o, guid, ret_lsn);
	if (r < 0)
		return r;
	r = begin(pt);
	if (r < 0)
		return r;
	return run(pt, ST_SAVEPOINT, "savepoint");
}

/* Keeps the change when r >= 0, undoes it otherwise; returns r or the error
 * releasing it. SQLite may have rolled the whole transaction back by itself
 * (a full disk, an I/O error): then there is nothing left to undo. */
static int change_end(struct pagetable *pt, int r)
{
	if (r >= 0)
		return run(pt, ST_RELEASE, "release the savepoint");
	if (pagetable_in_transaction(pt)) {
		char keep[sizeof(pt->err)];

		/* The first error is the one reported. */
		memcpy(keep, pt->err, sizeof(keep));
		if (run(pt, ST_ROLLBACK_TO, "roll back the change") == 0)
			run(pt, ST_RELEASE, "release the savepoint");
		memcpy(pt->err, keep, sizeof(keep));
	}
	return r;
}

/* A page row (p not NULL) takes the next seq. */
static int journal_append(struct pagetable *pt, uint64_t lsn, const struct pt_origin *o,
			  const char *op, const char *guid, const struct pt_page *p)
{
	sqlite3_stmt *st = pt->stmt[ST_JOURNAL_INSERT];
	int rc;

	rc = bind_u64(st, 1, lsn);
	rc = rc ?: bind_text(st, 2, o->node);
	rc = rc ?: bind_u64(st, 3, o->lsn);
	rc = rc ?: bind_text(st, 4, op);
	rc = rc ?: bind_text(st, 5, guid);
	if (p) {
		rc = rc ?: bind_u64(st, 6, p->page);
		rc = rc ?: bind_u64(st, 7, p->version);
		rc = rc ?: sqlite3_bind_int64(st, 8, p->crc32c);
		rc = rc ?: bind_u64(st, 9, pt->fold.next_seq);
	}
	if (rc != SQLITE_OK)
		return bind_check(pt, st, rc, "journal");
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		int r = sql_fail(pt, rc, "%s: journal row LSN %" PRIu64, guid, lsn);

		done(st);
		return r;
	}
	done(st);
	if (p) {
		pt->fold.next_seq++;
		if (lsn < pt->fold.floor)
			pt->fold.floor = lsn;
		if (lsn < pt->fold.floor_after_fold)
			pt->fold.floor_after_fold = lsn;
	}
	return 0;
}

/* ---- Allocations known whole (struct known_alloc) ---------------------- */

static struct known_alloc *known_slot(struct pagetable *pt, const char *guid)
{
	uint32_t h = 2166136261u; /* FNV-1a */

	for (const char *c = guid; *c; c++)
		h = (h ^ (uint8_t)*c) * 16777619u;
	return &pt->known[h % KNOWN_ALLOCS];
}

static void known_add(struct pagetable *pt, const char *guid, uint64_t pages)
{
	struct known_alloc *k = known_slot(pt, guid);

	if (strlen(guid) >= sizeof(k->guid))
		return;
	strcpy(k->guid, guid);
	k->pages = pages;
}

static void known_forget(struct pagetable *pt, const char *guid)
{
	struct known_alloc *k = known_slot(pt, guid);

	if (strcmp(k->guid, guid) == 0)
		k->guid[0] = '\0';
}

/* The last transaction ended without a commit (SQLite rolls one back by
 * itself on a full disk or an I/O error): what it made may be gone. */
static void known_check_lost(struct pagetable *pt)
{
	if (pt->txn == pt->txn_committed || pagetable_in_transaction(pt))
		return;
	memset(pt->known, 0, sizeof(pt->known));
}

static bool known_page(struct pagetable *pt, const struct pt_page *p)
{
	const struct known_alloc *k;

	known_check_lost(pt);
	k = known_slot(pt, p->guid);
	return p->page < k->pages && strcmp(k->guid, p->guid) == 0;
}

/* -ENOENT unless the page row is there. A read by primary key: no page of
 * the file changes. */
static int page_exists(struct pagetable *pt, const struct pt_page *p)
{
	sqlite3_stmt *st = pt->stmt[ST_PAGE_EXISTS];
	int64_t found;
	int rc, r;

	if (known_page(pt, p))
		return 0;
	rc = bind_text(st, 1, p->guid);
	rc = rc ?: bind_u64(st, 2, p->page);
	r = bind_check(pt, st, rc, p->guid);
	if (r == 0)
		r = run_int(pt, ST_PAGE_EXISTS, "look up a page", &found);
	if (r == 0 && !found)
		r = fail(pt, -ENOENT, "page %" PRIu64 " of %s: no such row", p->page, p->guid);
	return r;
}

/* Steps a cached statement that changes rows; -ENOENT when it changed none. */
static int run_change(struct pagetable *pt, sqlite3_stmt *st, int rc, const char *what,
		      const char *guid)
{
	if (rc != SQLITE_OK)
		return bind_check(pt, st, rc, what);
	rc = sqlite3_step(st);
	if (rc != SQLITE_DONE) {
		int r = sql_fail(pt, rc, "%s %s", what, guid);

		done(st);
		return r;
	}
	done(st);
	if (sqlite3_changes(pt->db) == 0)
		return fail(pt, -ENOENT, "%s %s: no such row", what, guid);
	return 0;
}

int pagetable_alloc_put(struct pagetable *pt, const struct pt_alloc *a, uint32_t zero_crc,
			const struct pt_origin *o)
{
	sqlite3_stmt *st;
	uint64_t lsn;
	int rc, r;

	if (!a || empty(a->guid) || !a->home || !a->owner || !a->policy ||
	    (a->header_len && !a->header))
		return fail(pt, -EINVAL, "%s: an allocation needs guid, home, owner and policy",
			    a && a->guid ? a->guid : "(no guid)");
	/* The journal's unfolded rows then all belong to allocations as they
	 * are now, not to one deleted and made again under the same guid. */
	r = fold(pt);
	if (r == 0)
		r = change_begin(pt, o, a->guid, &lsn);
	if (r < 0)
		return r;

	st = pt->stmt[ST_ALLOC_INSERT];
	rc = bind_text(st, 1, a->guid);
	rc = rc ?: bind_text(st, 2, a->home);
	rc = rc ?: bind_text(st, 3, a->owner);
	rc = rc ?: bind_u64(st, 4, a->size);
	rc = rc ?: sqlite3_bind_int64(st, 5, a->block_size);
	rc = rc ?: bind_u64(st, 6, a->pages);
	rc = rc ?: bind_text(st, 7, a->policy);
	/* A NULL blob would bind SQL NULL, which header NOT NULL refuses. */
	rc = rc
		     ?: (a->header_len ? sqlite3_bind_blob64(st, 8, a->header, a->header_len,
							     SQLITE_STATIC)
				       : sqlite3_bind_zeroblob(st, 8, 0));
	rc = rc ?: bind_u64(st, 9, a->store_offset);
	rc = rc ?: sqlite3_bind_int64(st, 10, a->uid);
	rc = rc ?: bind_text(st, 11, a->client ? a->client : "");
	rc = rc ?: bind_text(st, 12, a->session ? a->session : "");
	rc = rc ?: bind_text(st, 13, a->media ? a->media : "store");
	rc = rc ?: bind_u64(st, 14, a->flash_offset);
	rc = rc ?: bind_text(st, 15, a->volume ? a->volume : "");
	r = run_change(pt, st, rc, "insert allocation", a->guid);

	st = pt->stmt[ST_PAGE_INSERT];
	for (uint64_t i = 0; r == 0 && i < a->pages; i++) {
		rc = bind_text(st, 1, a->guid);
		rc = rc ?: bind_u64(st, 2, i);
		rc = rc ?: sqlite3_bind_int64(st, 3, zero_crc);
		r = run_change(pt, st, rc, "insert page of", a->guid);
	}
	if (r == 0)
		r = journal_append(pt, lsn, o, "alloc", a->guid, NULL);
	r = change_end(pt, r);
	if (r == 0)
		known_add(pt, a->guid, a->pages);
	return r;
}

int pagetable_alloc_delete(struct pagetable *pt, const char *guid, const struct pt_origin *o)
{
	sqlite3_stmt *st = pt->stmt[ST_ALLOC_DELETE];
	uint64_t lsn;
	int r;

	if (empty(guid))
		return fail(pt, -EINVAL, "delete: no guid");
	r = fold(pt); /* as for pagetable_alloc_put */
	if (r == 0)
		r = change_begin(pt, o, guid, &lsn);
	if (r < 0)
		return r;
	known_forget(pt, guid);
	/* The pages go with it: ON DELETE CASCADE. */
	r = run_change(pt, st, bind_text(st, 1, guid), "delete allocation", guid);
	if (r == 0)
		r = journal_append(pt, lsn, o, "free", guid, NULL);
	return change_end(pt, r);
}

int pagetable_alloc_set_owner(struct pagetable *pt, const char *guid, const char *owner,
			      const struct pt_origin *o)
{
	sqlite3_stmt *st = pt->stmt[ST_ALLOC_SET_OWNER];
	uint64_t lsn;
	int rc, r;

	if (empty(guid) || empty(owner))
		return fail(pt, -EINVAL, "set owner: no guid or no owner");
	r = change_begin(pt, o, guid, &lsn);
	if (r < 0)
		return r;
	rc = bind_text(st, 1, guid);
	rc = rc ?: bind_text(st, 2, owner);
	r = run_change(pt, st, rc, "set the owner of", guid);
	if (r == 0)
		r = journal_append(pt, lsn, o, "owner", guid, NULL);
	return change_end(pt, r);
}

/* Only the journal row: pages takes it at the next fold. One statement, so
 * atomic without a savepoint. */
int pagetable_page_put(struct pagetable *pt, const struct pt_page *p, const struct pt_origin *o)
{
	uint64_t lsn = 0;
	int r;

	if (!p || empty(p->guid))
		return fail(pt, -EINVAL, "page: no guid");
	r = change_lsn(pt, o, p->guid, &lsn);
	if (r == 0)
		r = page_exists(pt, p);
	if (r == 0)
		r = begin(pt);
	if (r < 0)
		return r;
	/* "clean": only the dirty flag went (a destage), which a resync may miss
	 * without harm (node/ha/HA.md, "Solo and rejoin"); "undo" is clean too, but
	 * a change like "page". */
	return journal_append(pt, lsn, o,
			      p->dirty	? "page"
			      : p->undo ? "undo"
					: "clean",
			      p->guid, p);
}

/* ---- Partner LSNs ------------------------------------------------------- */

int pagetable_set_partner_applied_lsn(struct pagetable *pt, uint64_t lsn)
{
	int r = begin(pt);

	if (r == 0) {
		pt->partner_applied_lsn = lsn;
		pt->partner_applied_changed = true;
	}
	return r;
}

int pagetable_epoch(struct pagetable *pt, uint64_t *ret)
{
	int r = meta_get(pt, "epoch", ret);

	if (r == 0 && *ret == 0)
		*ret = 1; /* a table from before epochs, or a new one */
	return r;
}

int pagetable_set_epoch(struct pagetable *pt, uint64_t epoch)
{
	return meta_set(pt, "epoch", epoch);
}

int pagetable_solo(struct pagetable *pt, bool *ret)
{
	uint64_t v = 0;
	int r = meta_get(pt, "solo", &v);

	*ret = v != 0;
	return r;
}

int pagetable_set_solo(struct pagetable *pt, bool solo)
{
	return meta_set(pt, "solo", solo);
}

int pagetable_store_id(struct pagetable *pt, uint64_t ret_id[2])
{
	int r = meta_get(pt, "store_id_hi", &ret_id[0]);

	return r < 0 ? r : meta_get(pt, "store_id_lo", &ret_id[1]);
}

int pagetable_set_store_id(struct pagetable *pt, const uint64_t id[2])
{
	int r = meta_set(pt, "store_id_hi", id[0]);

	return r < 0 ? r : meta_set(pt, "store_id_lo", id[1]);
}

void pagetable_note_partner_applied_lsn(struct pagetable *pt, uint64_t lsn)
{
	pt->partner_applied_lsn = lsn;
	pt->partner_applied_unwritten = true;
}

int pagetable_recover_partner_applied_lsn(struct pagetable *pt, const char *self)
{
	sqlite3_stmt *st = pt->stmt[ST_JOURNAL_PARTNER_MAX];
	int64_t n = 0;
	int r;

	if (empty(self))
		return fail(pt, -EINVAL, "partner LSNs: no node id");
	r = bind_check(pt, st, bind_text(st, 1, self), "partner LSNs");
	if (r == 0)
		r = run_int(pt, ST_JOURNAL_PARTNER_MAX, "the last partner LSN", &n);
	if (r == 0 && (uint64_t)n > pt->partner_applied_lsn)
		pt->partner_applied_lsn = (uint64_t)n;
	return r;
}

uint64_t pagetable_partner_applied_lsn(const struct pagetable *pt)
{
	return pt->partner_applied_lsn;
}

int pagetable_set_applied_by_partner_lsn(struct pagetable *pt, uint64_t lsn)
{
	pt->applied_by_partner_lsn = lsn;
	pt->applied_by_partner_changed = true;
	return 0;
}

uint64_t pagetable_applied_by_partner_lsn(const struct pagetable *pt)
{
	return pt->applied_by_partner_lsn;
}

/* ---- Reading back ------------------------------------------------------- */

int pagetable_journal_trim(struct pagetable *pt, const char *self, uint64_t own_below,
			   unsigned max_rows)
{
	sqlite3_stmt *st = pt->stmt[ST_JOURNAL_TRIM];
	int rc, r;

	if (empty(self))
		return fail(pt, -EINVAL, "journal trim: no node id");
	/* No row goes before pages has it. */
	r = fold(pt);
	if (r == 0)
		r = begin(pt);
	if (r < 0)
		return r;
	/* Rows go only below a mark that is on disk with them: after a crash,
	 * the last own LSN this table reports (pagetable_last_own_lsn) must not
	 * fall below rows it no longer has. */
	if (own_below > pt->applied_by_partner_lsn)
		own_below = pt->applied_by_partner_lsn;
	r = meta_set(pt, "applied_by_partner_lsn", pt->applied_by_partner_lsn);
	/* The partner's rows all go: the mark they carried goes to meta. */
	if (r == 0)
		r = meta_set(pt, "partner_applied_lsn", pt->partner_applied_lsn);
	if (r < 0)
		return r;
	pt->partner_applied_unwritten = false;
	if (max_rows == 0) /* OFFSET -1 would be 0: one row */
		return 0;
	rc = bind_text(st, 1, self);
	rc = rc ?: bind_u64(st, 2, own_below);
	rc = rc ?: sqlite3_bind_int(st, 3, (int)max_rows);
	if (rc != SQLITE_OK)
		return bind_check(pt, st, rc, "journal trim");
	rc = sqlite3_step(st);
	done(st);
	if (rc != SQLITE_DONE)
		return sql_fail(pt, rc, "journal trim");
	return sqlite3_changes(pt->db);
}

uint64_t pagetable_last_own_lsn(struct pagetable *pt, const char *self)
{
	sqlite3_stmt *st = pt->stmt[ST_JOURNAL_OWN_MAX];
	int64_t n = 0;

	if (bind_check(pt, st, bind_text(st, 1, self), "own LSNs") < 0 ||
	    run_int(pt, ST_JOURNAL_OWN_MAX, "the last own LSN", &n) < 0)
		return UINT64_MAX; /* unknown: a resync then sends everything */
	return (uint64_t)n > pt->applied_by_partner_lsn ? (uint64_t)n : pt->applied_by_partner_lsn;
}

int pagetable_journal_guids_after(struct pagetable *pt, const char *self, uint64_t after,
				  int (*cb)(const char *guid, void *arg), void *arg)
{
	sqlite3_stmt *st = pt->stmt[ST_JOURNAL_GUIDS_AFTER];
	int rc, r = 0;

	rc = bind_text(st, 1, self);
	rc = rc ?: bind_u64(st, 2, after);
	if (rc != SQLITE_OK)
		return bind_check(pt, st, rc, "journal guids");
	while ((rc = sqlite3_step(st)) == SQLITE_ROW && r >= 0)
		r = cb((const char *)sqlite3_column_text(st, 0), arg);
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = sql_fail(pt, rc, "journal guids");
	done(st);
	return r < 0 ? r : 0;
}

uint64_t pagetable_journal_count(struct pagetable *pt)
{
	int64_t n;

	return run_int(pt, ST_JOURNAL_COUNT, "count the journal", &n) < 0 ? 0 : (uint64_t)n;
}

int pagetable_recovered_add(struct pagetable *pt, const struct pt_recovered *rec)
{
	sqlite3_stmt *st = pt->stmt[ST_RECOVERED_INSERT];
	int rc, r;

	if (!rec || empty(rec->guid) || !rec->why)
		return fail(pt, -EINVAL, "recovered: no guid or no reason");
	r = begin(pt);
	if (r < 0)
		return r;
	rc = bind_u64(st, 1, rec->at_ms);
	rc = rc ?: bind_text(st, 2, rec->guid);
	rc = rc ?: bind_u64(st, 3, rec->page);
	rc = rc ?: bind_u64(st, 4, rec->from_version);
	rc = rc ?: bind_u64(st, 5, rec->to_version);
	rc = rc ?: bind_text(st, 6, rec->why);
	return run_change(pt, st, rc, "note the recovery of", rec->guid);
}

int pagetable_recovered_list(struct pagetable *pt, uint64_t after, unsigned limit, bool newest,
			     int (*cb)(const struct pt_recovered *rec, void *arg), void *arg)
{
	sqlite3_stmt *st = pt->stmt[newest ? ST_RECOVERED_NEWEST : ST_RECOVERED_SELECT];
	int rc, r = 0;

	rc = newest ? SQLITE_OK : bind_u64(st, 1, after);
	rc = rc ?: sqlite3_bind_int64(st, 2, limit);
	if (rc != SQLITE_OK)
		return bind_check(pt, st, rc, "recovered pages");
	while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct pt_recovered rec = {
			.id = (uint64_t)sqlite3_column_int64(st, 0),
			.at_ms = (uint64_t)sqlite3_column_int64(st, 1),
			.guid = (const char *)sqlite3_column_text(st, 2),
			.page = (uint64_t)sqlite3_column_int64(st, 3),
			.from_version = (uint64_t)sqlite3_column_int64(st, 4),
			.to_version = (uint64_t)sqlite3_column_int64(st, 5),
			.why = (const char *)sqlite3_column_text(st, 6),
		};

		r = cb(&rec, arg);
	}
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = sql_fail(pt, rc, "recovered pages");
	done(st);
	return r < 0 ? r : 0;
}

int pagetable_partition_put(struct pagetable *pt, const struct pt_partition *part)
{
	sqlite3_stmt *st = pt->stmt[ST_PARTITION_PUT];
	int rc, r;

	if (!part || empty(part->media) || empty(part->type))
		return fail(pt, -EINVAL, "partition: no media or no type");
	r = begin(pt);
	if (r < 0)
		return r;
	rc = bind_text(st, 1, part->media);
	rc = rc ?: bind_text(st, 2, part->type);
	rc = rc ?: bind_u64(st, 3, part->start);
	rc = rc ?: bind_u64(st, 4, part->length);
	return run_change(pt, st, rc, "record the partition of", part->media);
}

int pagetable_partition_list(struct pagetable *pt,
			     int (*cb)(const struct pt_partition *part, void *arg), void *arg)
{
	sqlite3_stmt *st = pt->stmt[ST_PARTITION_SELECT];
	int rc, r = 0;

	while (r >= 0 && (rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct pt_partition part = {
			.media = (const char *)sqlite3_column_text(st, 0),
			.type = (const char *)sqlite3_column_text(st, 1),
			.start = (uint64_t)sqlite3_column_int64(st, 2),
			.length = (uint64_t)sqlite3_column_int64(st, 3),
		};

		r = cb(&part, arg);
	}
	if (r >= 0 && rc != SQLITE_DONE && rc != SQLITE_ROW)
		r = sql_fail(pt, rc, "partitions");
	done(st);
	return r < 0 ? r : 0;
}

uint64_t pagetable_recovered_count(struct pagetable *pt)
{
	int64_t n;

	return run_int(pt, ST_RECOVERED_COUNT, "count the recovered pages", &n) < 0 ? 0
										    : (uint64_t)n;
}

static int load_pages(struct pagetable *pt, const struct pt_alloc *a,
		      int (*page_cb)(const struct pt_page *p, void *arg), void *arg)
{
	sqlite3_stmt *st = pt->stmt[ST_PAGE_SELECT];
	uint64_t expect = 0;
	int rc, r = 0;

	rc = bind_text(st, 1, a->guid);
	if (rc != SQLITE_OK)
		return bind_check(pt, st, rc, a->guid);
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		struct pt_page p = {
			.guid = a->guid,
			.page = (uint64_t)sqlite3_column_int64(st, 0),
			.version = (uint64_t)sqlite3_column_int64(st, 1),
			.dirty = sqlite3_column_int64(st, 3) != 0,
		};
		int64_t crc = sqlite3_column_int64(st, 2);

		if (p.page != expect) {
			r = fail(pt, -EBADMSG,
				 "allocation %s: page row %" PRIu64 " where %" PRIu64
				 " was expected (a page row is missing)",
				 a->guid, p.page, expect);
			break;
		}
		if (crc < 0 || crc > UINT32_MAX) {
			r = fail(pt, -EBADMSG,
				 "allocation %s page %" PRIu64 ": crc32c %" PRId64 " out of range",
				 a->guid, p.page, (int64_t)crc);
			break;
		}
		p.crc32c = (uint32_t)crc;
		expect++;
		if (page_cb) {
			r = page_cb(&p, arg);
			if (r < 0)
				break;
		}
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sql_fail(pt, rc, "read the pages of %s", a->guid);
	if (r == 0 && expect != a->pages)
		r = fail(pt, -EBADMSG, "allocation %s has %" PRIu64 " page rows, expected %" PRIu64,
			 a->guid, expect, a->pages);
	done(st);
	return r;
}

int pagetable_load(struct pagetable *pt, int (*alloc_cb)(const struct pt_alloc *a, void *arg),
		   int (*page_cb)(const struct pt_page *p, void *arg), void *arg)
{
	sqlite3_stmt *st = pt->stmt[ST_ALLOC_SELECT];
	int rc, r;

	r = fold(pt);
	if (r < 0)
		return r;
	while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
		/* Column pointers stay valid until the next step of st. */
		struct pt_alloc a = {
			.guid = (const char *)sqlite3_column_text(st, 0),
			.home = (const char *)sqlite3_column_text(st, 1),
			.owner = (const char *)sqlite3_column_text(st, 2),
			.size = (uint64_t)sqlite3_column_int64(st, 3),
			.pages = (uint64_t)sqlite3_column_int64(st, 5),
			.policy = (const char *)sqlite3_column_text(st, 6),
			.header = sqlite3_column_blob(st, 7),
			.header_len = (size_t)sqlite3_column_bytes(st, 7),
			.store_offset = (uint64_t)sqlite3_column_int64(st, 8),
			.client = (const char *)sqlite3_column_text(st, 10),
			.session = (const char *)sqlite3_column_text(st, 11),
			.media = (const char *)sqlite3_column_text(st, 12),
			.flash_offset = (uint64_t)sqlite3_column_int64(st, 13),
			.volume = (const char *)sqlite3_column_text(st, 14),
		};
		int64_t block_size = sqlite3_column_int64(st, 4);
		int64_t uid = sqlite3_column_int64(st, 9);

		if (!a.guid || !a.home || !a.owner || !a.policy || !a.client || !a.session ||
		    !a.media || !a.volume) {
			r = fail(pt, -EBADMSG, "allocation %s: a text column is NULL",
				 a.guid ? a.guid : "(NULL)");
			break;
		}
		if (block_size < 0 || block_size > UINT32_MAX) {
			r = fail(pt, -EBADMSG, "allocation %s: block_size %" PRId64 " out of range",
				 a.guid, (int64_t)block_size);
			break;
		}
		a.block_size = (uint32_t)block_size;
		if (uid < 0 || uid > UINT32_MAX) {
			r = fail(pt, -EBADMSG, "allocation %s: uid %" PRId64 " out of range",
				 a.guid, uid);
			break;
		}
		a.uid = (uint32_t)uid;
		if (!a.header)
			a.header = (const uint8_t *)"";
		if (alloc_cb) {
			r = alloc_cb(&a, arg);
			if (r < 0)
				break;
		}
		r = load_pages(pt, &a, page_cb, arg);
		if (r < 0)
			break;
		known_add(pt, a.guid, a.pages); /* load_pages counted its rows */
	}
	if (r == 0 && rc != SQLITE_DONE)
		r = sql_fail(pt, rc, "read the allocations");
	done(st);
	return r;
}

/* ---- Open and close ----------------------------------------------------- */

const char *pagetable_last_error(const struct pagetable *pt)
{
	return pt ? pt->err : open_error;
}

/* The marks a commit may have left unwritten, and the fold of what the
 * journal has beyond pages (the next open would do it, this makes that open
 * quick), in one last transaction. */
static void write_at_close(struct pagetable *pt)
{
	int r = fold(pt);

	if (r == 0 && (pt->applied_by_partner_changed || pt->partner_applied_unwritten))
		r = meta_set(pt, "applied_by_partner_lsn", pt->applied_by_partner_lsn);
	if (r == 0 && (pt->applied_by_partner_changed || pt->partner_applied_unwritten))
		r = meta_set(pt, "partner_applied_lsn", pt->partner_applied_lsn);
	if (!pagetable_in_transaction(pt))
		return;
	if (r == 0)
		run(pt, ST_COMMIT, "commit at close");
	else
		run(pt, ST_ROLLBACK, "roll back at close");
}

void pagetable_close(struct pagetable *pt)
{
	if (!pt)
		return;
	if (pt->db && pagetable_in_transaction(pt) && pt->stmt[ST_ROLLBACK])
		run(pt, ST_ROLLBACK, "roll back at close");
	if (pt->ready)
		write_at_close(pt);
	for (size_t i = 0; i < ST__MAX; i++)
		sqlite3_finalize(pt->stmt[i]);
	if (pt->wal_fd >= 0)
		close(pt->wal_fd);
	/* Every statement is finalized, so this closes (and checkpoints). */
	sqlite3_close(pt->db);
	free(pt->wal_path);
	free(pt);
}

/* schema_version, or 0 for a database with nothing in it. */
static int read_schema_version(struct pagetable *pt, const char *path, int64_t *ret)
{
	static const char meta_sql[] = "SELECT value FROM meta WHERE key = 'schema_version'";
	char buf[32];
	int r;

	r = exec_fixed(pt,
		       "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'meta'",
		       buf, sizeof(buf));
	if (r < 0)
		return r;
	if (strcmp(buf, "0") == 0) {
		r = exec_fixed(pt, "SELECT count(*) FROM sqlite_master", buf, sizeof(buf));
		if (r < 0)
			return r;
		if (strcmp(buf, "0") != 0)
			return fail(
				pt, -EBADMSG,
				"%s is an SQLite database but not an ftvm page table (no meta table)",
				path);
		*ret = 0;
		return 0;
	}
	r = exec_fixed(pt, meta_sql, buf, sizeof(buf));
	if (r < 0)
		return r;
	if (!buf[0])
		return fail(pt, -EBADMSG, "%s: the meta table has no schema_version", path);
	*ret = strtoll(buf, NULL, 10);
	if (*ret <= 0)
		return fail(pt, -EBADMSG, "%s: schema_version %s is not a version", path, buf);
	return 0;
}

/* Before the cached statements exist. */
static int set_schema_version(struct pagetable *pt, int64_t v)
{
	sqlite3_stmt *st;
	int rc, r = 0;

	rc = sqlite3_prepare_v2(pt->db, "UPDATE meta SET value = ?1 WHERE key = 'schema_version'",
				-1, &st, NULL);
	if (rc != SQLITE_OK)
		return sql_fail(pt, rc, "prepare the schema_version update");
	rc = sqlite3_bind_int64(st, 1, v);
	if (rc == SQLITE_OK)
		rc = sqlite3_step(st);
	if (rc != SQLITE_DONE)
		r = sql_fail(pt, rc, "set schema_version %" PRId64, v);
	else if (sqlite3_changes(pt->db) == 0)
		r = fail(pt, -EBADMSG, "the meta table has no schema_version row to update");
	sqlite3_finalize(st);
	return r;
}

/* Brings the schema to SCHEMA_VERSION, one step per transaction; the version
 * is read again inside each, so two processes opening at once do not both
 * migrate. */
static int migrate(struct pagetable *pt, const char *path)
{
	for (;;) {
		int64_t v = 0;
		int r;

		r = exec_fixed(pt, "BEGIN IMMEDIATE", NULL, 0);
		if (r < 0)
			return r;
		r = read_schema_version(pt, path, &v);
		if (r == 0 && v > SCHEMA_VERSION)
			r = fail(pt, -EPROTONOSUPPORT,
				 "%s: the page table's schema version is %" PRId64
				 "; this build knows versions up to %" PRId64
				 " (a newer ftvm wrote it)",
				 path, v, SCHEMA_VERSION);
		if (r == 0 && v == SCHEMA_VERSION)
			return exec_fixed(pt, "COMMIT", NULL, 0);
		if (r == 0) {
			r = exec_fixed(pt, migrations[v].sql, NULL, 0);
			if (r < 0)
				r = fail(pt, r,
					 "%s: schema step %" PRId64 " -> %" PRId64 " (%s): %.300s",
					 path, v, v + 1, migrations[v].what, pt->err);
		}
		if (r == 0)
			r = set_schema_version(pt, v + 1);
		if (r == 0)
			r = exec_fixed(pt, "COMMIT", NULL, 0);
		if (r < 0) {
			if (pagetable_in_transaction(pt)) {
				char keep[sizeof(pt->err)];

				memcpy(keep, pt->err, sizeof(keep));
				exec_fixed(pt, "ROLLBACK", NULL, 0);
				memcpy(pt->err, keep, sizeof(keep));
			}
			return r;
		}
		log_debug("%s: schema %" PRId64 " -> %" PRId64 ": %s", path, v, v + 1,
			  migrations[v].what);
	}
}

static int meta_get(struct pagetable *pt, const char *key, uint64_t *ret)
{
	sqlite3_stmt *st = pt->stmt[ST_META_GET];
	int64_t v;
	int r;

	r = bind_check(pt, st, bind_text(st, 1, key), key);
	if (r < 0)
		return r;
	r = run_int(pt, ST_META_GET, key, &v);
	*ret = (uint64_t)v;
	return r;
}

static int load_counters(struct pagetable *pt)
{
	uint64_t guid_bound, lsn_bound, folded_seq;
	int64_t journal_max, journal_max_seq;
	int r;

	r = meta_get(pt, "next_guid", &guid_bound);
	if (r == 0)
		r = meta_get(pt, "next_lsn", &lsn_bound);
	if (r == 0)
		r = meta_get(pt, "partner_applied_lsn", &pt->partner_applied_lsn);
	if (r == 0)
		r = meta_get(pt, "applied_by_partner_lsn", &pt->applied_by_partner_lsn);
	if (r == 0)
		r = run_int(pt, ST_JOURNAL_MAX, "the journal's last LSN", &journal_max);
	if (r == 0)
		r = meta_get(pt, "folded_seq", &folded_seq);
	if (r == 0)
		r = run_int(pt, ST_JOURNAL_MAX_SEQ, "the journal's last seq", &journal_max_seq);
	if (r < 0)
		return r;
	/* A trim may have taken every row up to the mark. */
	pt->fold = (struct fold){
		.next_seq = ((uint64_t)journal_max_seq > folded_seq ? (uint64_t)journal_max_seq
								    : folded_seq) +
			    1,
		.mark = folded_seq,
		.mark_committed = folded_seq,
		.floor = (uint64_t)journal_max_seq > folded_seq ? 0 : UINT64_MAX,
		.floor_after_fold = UINT64_MAX,
	};
	if ((uint64_t)journal_max >= lsn_bound)
		lsn_bound = (uint64_t)journal_max + 1;
	pt->guid = (struct lease){ .key = "next_guid",
				   .block = GUID_LEASE,
				   .next = guid_bound ?: 1,
				   .durable = guid_bound ?: 1 };
	pt->lsn = (struct lease){ .key = "next_lsn",
				  .block = LSN_LEASE,
				  .next = lsn_bound ?: 1,
				  .durable = lsn_bound ?: 1 };
	/* Before anything reads pages: a crash may have left rows unfolded. */
	r = fold(pt);
	if (r < 0)
		return r;
	/* Lease now, outside any caller's transaction: both leases are empty,
	 * so this one commit renews both (and the fold). */
	return commit_leases(pt, &pt->guid);
}

/* SQLite counts every allocation it makes under a global mutex, unless it
 * is told not to before its first use; nothing here reads the counts
 * (sqlite3_memory_used() and the soft heap limit need them). Off, a
 * journal row costs about 5% fewer instructions (SQLite alone, 8 rows a
 * commit). Once SQLite is up (a second table in one process) the call is
 * refused, and the first call's setting stays. */
static void sqlite_setup(void)
{
	static bool done;

	if (!done)
		sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
	done = true;
}

int pagetable_open(const char *path, bool synchronous_full, struct pagetable **ret)
{
	int flags = SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX;
	struct pagetable *pt;
	char mode[32];
	int rc, r;

	*ret = NULL;
	open_error[0] = '\0';
	pt = calloc(1, sizeof(*pt));
	if (!pt) {
		snprintf(open_error, sizeof(open_error), "%s: out of memory", path);
		return -ENOMEM;
	}
	pt->wal_fd = -1;
	pt->synchronous_full = synchronous_full;
	pt->wal_path = malloc(strlen(path) + sizeof("-wal"));
	if (!pt->wal_path) {
		r = fail(pt, -ENOMEM, "%s: out of memory", path);
		goto fail;
	}
	sprintf(pt->wal_path, "%s-wal", path);
#ifdef SQLITE_OPEN_EXRESCODE
	flags |= SQLITE_OPEN_EXRESCODE;
#endif
	sqlite_setup();
	/* A commit's WAL frames in one write (wal_vfs.c). */
	r = wal_vfs_register();
	if (r < 0) {
		r = fail(pt, r, "%s: cannot register the page table's SQLite VFS", path);
		goto fail;
	}
	rc = sqlite3_open_v2(path, &pt->db, flags, WAL_VFS_NAME);
	if (rc != SQLITE_OK) {
		r = sql_fail(pt, rc, "%s: cannot open", path);
		goto fail;
	}
	sqlite3_extended_result_codes(pt->db, 1);
	sqlite3_busy_timeout(pt->db, BUSY_TIMEOUT_MS);

	/* One process uses the table (ftvmd holds state_dir's flock while it
	 * runs): set before the first WAL access, SQLite keeps the wal-index
	 * in its heap instead of a shared -shm file and takes the file's locks
	 * once, rather than six fcntl() per transaction. Nothing else can open
	 * the file until pagetable_close(), not even to read. */
	r = exec_fixed(pt, "PRAGMA locking_mode=EXCLUSIVE", mode, sizeof(mode));
	/* For a new file only (an existing one keeps its page size), and
	 * before journal_mode=WAL writes the first page. Each commit of a page
	 * write adds one journal row and so writes (and checksums) one WAL
	 * frame of a page: 1 KiB rather than the default 4 KiB. */
	if (r == 0)
		r = exec_fixed(pt, "PRAGMA page_size=1024", NULL, 0);
	if (r < 0)
		goto fail;
	/* The first statement that reads the file: where a file that is not a
	 * database shows. */
	r = exec_fixed(pt, "PRAGMA journal_mode=WAL", mode, sizeof(mode));
	if (r == -EBADMSG) {
		r = fail(pt, r, "%s is not an SQLite database, or a damaged one: %.300s", path,
			 pt->err);
		goto fail;
	}
	if (r < 0)
		goto fail;
	if (strcmp(mode, "wal") != 0) {
		r = fail(pt, -ENOTSUP, "%s: journal_mode is \"%s\", not \"wal\"", path, mode);
		goto fail;
	}
	/* The hook replaces SQLite's automatic checkpoint (CHECKPOINT_FRAMES). */
	sqlite3_wal_hook(pt->db, on_wal_commit, pt);
	r = pagetable_set_checkpoint_frames(pt, 0);
	if (r < 0)
		goto fail;
	r = exec_fixed(pt,
		       synchronous_full ? "PRAGMA synchronous=FULL" : "PRAGMA synchronous=NORMAL",
		       NULL, 0);
	if (r == 0)
		r = exec_fixed(pt, "PRAGMA foreign_keys=ON", NULL, 0);
	if (r == 0)
		r = exec_fixed(pt, "PRAGMA foreign_keys", mode, sizeof(mode));
	if (r < 0)
		goto fail;
	if (strcmp(mode, "1") != 0) {
		r = fail(pt, -ENOTSUP, "%s: this SQLite has no foreign keys", path);
		goto fail;
	}

	r = migrate(pt, path);
	if (r < 0)
		goto fail;
	for (size_t i = 0; i < ST__MAX; i++) {
		rc = sqlite3_prepare_v3(pt->db, stmt_sql[i], -1, SQLITE_PREPARE_PERSISTENT,
					&pt->stmt[i], NULL);
		if (rc != SQLITE_OK) {
			r = sql_fail(pt, rc, "%s: prepare \"%s\"", path, stmt_sql[i]);
			goto fail;
		}
	}
	r = load_counters(pt);
	if (r < 0)
		goto fail;
	pt->ready = true;
	*ret = pt;
	return 0;

fail:
	snprintf(open_error, sizeof(open_error), "%s", pt->err);
	pagetable_close(pt);
	return r;
}
