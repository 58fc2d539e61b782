/* node/storage/wal_vfs.c over a VFS that counts what reaches it (and can
 * fail a write): a commit's WAL frames arrive in one write, a large
 * transaction's in writes of at most 64 KiB, in order and whole (the file,
 * reopened through SQLite's own VFS, holds every committed row); a write
 * that fails fails the commit that made it, whose rows are then nowhere,
 * and the commits before it stand; with synchronous=FULL the WAL is synced
 * as often as without the layer. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#include "check.h"
#include "wal_vfs.h"

static char dir[256];

/* ---- The VFS below: unix's, counting the WAL's writes and syncs ---------- */

static struct {
	unsigned writes, syncs;
	size_t largest;
	bool fail_next; /* the next WAL write fails, as a full disk would */
} below;

struct cfile {
	sqlite3_file base;
	sqlite3_file *real;
	bool wal;
};

#define R(f) (((struct cfile *)(f))->real)

static int c_close(sqlite3_file *f)
{
	return R(f)->pMethods->xClose(R(f));
}

static int c_read(sqlite3_file *f, void *b, int n, sqlite3_int64 o)
{
	return R(f)->pMethods->xRead(R(f), b, n, o);
}

static int c_write(sqlite3_file *f, const void *b, int n, sqlite3_int64 o)
{
	if (((struct cfile *)f)->wal) {
		if (below.fail_next) {
			below.fail_next = false;
			return SQLITE_FULL;
		}
		below.writes++;
		if ((size_t)n > below.largest)
			below.largest = (size_t)n;
	}
	return R(f)->pMethods->xWrite(R(f), b, n, o);
}

static int c_truncate(sqlite3_file *f, sqlite3_int64 s)
{
	return R(f)->pMethods->xTruncate(R(f), s);
}

static int c_sync(sqlite3_file *f, int flags)
{
	if (((struct cfile *)f)->wal)
		below.syncs++;
	return R(f)->pMethods->xSync(R(f), flags);
}

static int c_size(sqlite3_file *f, sqlite3_int64 *s)
{
	return R(f)->pMethods->xFileSize(R(f), s);
}

static int c_lock(sqlite3_file *f, int l)
{
	return R(f)->pMethods->xLock(R(f), l);
}

static int c_unlock(sqlite3_file *f, int l)
{
	return R(f)->pMethods->xUnlock(R(f), l);
}

static int c_reserved(sqlite3_file *f, int *r)
{
	return R(f)->pMethods->xCheckReservedLock(R(f), r);
}

static int c_fcntl(sqlite3_file *f, int op, void *a)
{
	return R(f)->pMethods->xFileControl(R(f), op, a);
}

static int c_sector(sqlite3_file *f)
{
	return R(f)->pMethods->xSectorSize(R(f));
}

static int c_device(sqlite3_file *f)
{
	return R(f)->pMethods->xDeviceCharacteristics(R(f));
}

static int c_shm_map(sqlite3_file *f, int p, int s, int e, void volatile **r)
{
	return R(f)->pMethods->xShmMap(R(f), p, s, e, r);
}

static int c_shm_lock(sqlite3_file *f, int o, int n, int fl)
{
	return R(f)->pMethods->xShmLock(R(f), o, n, fl);
}

static void c_shm_barrier(sqlite3_file *f)
{
	R(f)->pMethods->xShmBarrier(R(f));
}

static int c_shm_unmap(sqlite3_file *f, int d)
{
	return R(f)->pMethods->xShmUnmap(R(f), d);
}

static const sqlite3_io_methods c_methods = {
	.iVersion = 2,
	.xClose = c_close,
	.xRead = c_read,
	.xWrite = c_write,
	.xTruncate = c_truncate,
	.xSync = c_sync,
	.xFileSize = c_size,
	.xLock = c_lock,
	.xUnlock = c_unlock,
	.xCheckReservedLock = c_reserved,
	.xFileControl = c_fcntl,
	.xSectorSize = c_sector,
	.xDeviceCharacteristics = c_device,
	.xShmMap = c_shm_map,
	.xShmLock = c_shm_lock,
	.xShmBarrier = c_shm_barrier,
	.xShmUnmap = c_shm_unmap,
};

static sqlite3_vfs counting;

static int c_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *out)
{
	sqlite3_vfs *root = vfs->pAppData;
	struct cfile *c = (struct cfile *)f;
	int rc;

	memset(c, 0, sizeof(*c));
	c->real = (sqlite3_file *)(c + 1);
	rc = root->xOpen(root, name, c->real, flags, out);
	c->base.pMethods = c->real->pMethods ? &c_methods : NULL;
	c->wal = (flags & SQLITE_OPEN_WAL) != 0;
	return rc;
}

/* "counting": unix's, with xOpen of our own. */
static void counting_register(void)
{
	sqlite3_vfs *root = sqlite3_vfs_find(NULL);

	counting = *root;
	counting.iVersion = 2;
	counting.zName = "counting";
	counting.szOsFile = (int)sizeof(struct cfile) + root->szOsFile;
	counting.pAppData = root;
	counting.xOpen = c_open;
	counting.pNext = NULL;
	if (sqlite3_vfs_register(&counting, 0) != SQLITE_OK ||
	    wal_vfs_register_as("wal-test", "counting") < 0)
		die("registering the test's VFS");
}

/* ---- Tests ------------------------------------------------------------- */

static sqlite3 *db_open(const char *path, const char *vfs, bool full)
{
	sqlite3 *db;
	char *err = NULL;

	if (sqlite3_open_v2(path, &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, vfs) !=
	    SQLITE_OK)
		die("sqlite3_open_v2");
	if (sqlite3_exec(db,
			 full ? "PRAGMA page_size=1024; PRAGMA journal_mode=WAL;"
				"PRAGMA synchronous=FULL;"
			      : "PRAGMA page_size=1024; PRAGMA journal_mode=WAL;"
				"PRAGMA synchronous=NORMAL;",
			 NULL, NULL, &err) != SQLITE_OK) {
		fprintf(stderr, "pragmas: %s\n", err);
		exit(99);
	}
	return db;
}

static int exec(sqlite3 *db, const char *sql)
{
	return sqlite3_exec(db, sql, NULL, NULL, NULL);
}

/* rows rows of about 200 bytes each (a page takes four), numbered from first. */
static int insert(sqlite3 *db, int first, int rows)
{
	char sql[160];
	int rc = exec(db, "BEGIN");

	for (int i = 0; i < rows && rc == SQLITE_OK; i++) {
		snprintf(sql, sizeof(sql), "INSERT INTO t VALUES (%d, randomblob(200))", first + i);
		rc = exec(db, sql);
	}
	return rc == SQLITE_OK ? exec(db, "COMMIT") : rc;
}

static long long count_rows(sqlite3 *db, const char *where)
{
	char sql[128];
	sqlite3_stmt *st;
	long long n = -1;

	snprintf(sql, sizeof(sql), "SELECT count(*) FROM t %s", where);
	if (sqlite3_prepare_v2(db, sql, -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	return n;
}

static void test_one_write_per_commit(bool full)
{
	char path[300];
	unsigned syncs[2];
	sqlite3 *db;

	snprintf(path, sizeof(path), "%s/%s.db", dir, full ? "full" : "normal");
	/* The same commits through the plain counting VFS, then through the
	 * layer: as many syncs, far fewer writes. */
	for (int layer = 0; layer < 2; layer++) {
		char p[310];

		snprintf(p, sizeof(p), "%s%d", path, layer);
		db = db_open(p, layer ? "wal-test" : "counting", full);
		CHECK_INT("create", SQLITE_OK,
			  exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)"));
		below.writes = below.syncs = 0;
		for (int c = 0; c < 20; c++)
			CHECK_INT("a commit of 12 rows", SQLITE_OK, insert(db, 12 * c, 12));
		syncs[layer] = below.syncs;
		if (layer)
			CHECK(below.writes == 20, "%s: 20 commits, %u writes of the WAL",
			      full ? "FULL" : "NORMAL", below.writes);
		else
			CHECK(below.writes >= 2 * 20 * 3, "without the layer, %u writes",
			      below.writes);
		sqlite3_close(db);
		db = db_open(p, NULL, full);
		CHECK_INT("the rows, reopened without the layer", 240, count_rows(db, ""));
		sqlite3_close(db);
	}
	CHECK(syncs[0] == syncs[1], "%s: the WAL synced %u times without the layer, %u with it",
	      full ? "FULL" : "NORMAL", syncs[0], syncs[1]);
}

static void test_large_transaction(void)
{
	char path[300];
	sqlite3 *db;

	snprintf(path, sizeof(path), "%s/large.db", dir);
	db = db_open(path, "wal-test", false);
	CHECK_INT("create", SQLITE_OK, exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)"));
	below.writes = 0;
	below.largest = 0;
	CHECK_INT("a commit of 4000 rows", SQLITE_OK, insert(db, 0, 4000));
	CHECK(below.writes > 4 && below.largest <= 64 * 1024,
	      "%u writes of at most %zu bytes for a transaction of about 1 MiB", below.writes,
	      below.largest);
	sqlite3_close(db);
	db = db_open(path, NULL, false);
	CHECK_INT("the rows, reopened without the layer", 4000, count_rows(db, ""));
	sqlite3_close(db);
}

static void test_failed_write(void)
{
	char path[300];
	sqlite3 *db;
	int rc;

	snprintf(path, sizeof(path), "%s/failed.db", dir);
	db = db_open(path, "wal-test", false);
	CHECK_INT("create", SQLITE_OK, exec(db, "CREATE TABLE t(id INTEGER PRIMARY KEY, v)"));
	CHECK_INT("a commit", SQLITE_OK, insert(db, 0, 10));
	below.fail_next = true;
	rc = insert(db, 100, 10);
	CHECK(rc != SQLITE_OK, "the commit whose write failed said %d", rc);
	CHECK(sqlite3_get_autocommit(db), "and its transaction is over");
	CHECK_INT("its rows, in this connection", 0, count_rows(db, "WHERE id >= 100"));
	CHECK_INT("the next commit", SQLITE_OK, insert(db, 200, 10));
	sqlite3_close(db);
	db = db_open(path, NULL, false);
	CHECK_INT("reopened: the rows committed", 20, count_rows(db, ""));
	CHECK_INT("reopened: none of the failed commit's", 0,
		  count_rows(db, "WHERE id >= 100 "
				 "AND id < 200"));
	sqlite3_close(db);
}

int main(void)
{
	scratch_dir_make(dir, sizeof(dir), "ftvm-test-wal-vfs");
	counting_register();
	test_one_write_per_commit(false);
	test_one_write_per_commit(true);
	test_large_transaction();
	test_failed_write();
	scratch_dir_remove(dir);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("wal_vfs: all %d checks passed\n", checks);
	return 0;
}
