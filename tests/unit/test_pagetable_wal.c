/* The page table's housekeeping (node/vmm/VMM.md, "WAL checkpoints"): SQLite's
 * automatic checkpoint is off, a commit checkpoints only at the frames
 * bound, pagetable_checkpoint() copies the whole WAL into the database file
 * and the next commit starts the WAL again, the WAL's writeback starts
 * every 256 frames with synchronous NORMAL, close leaves no WAL, and the
 * counters status reports (pagetable_get_stats()) count what happened. Real
 * files in a fresh directory, with synchronous NORMAL and FULL. */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <sqlite3.h>

#include "check.h"
#include "pagetable_sqlite.h"

#define PAGES 64
/* A frame of the WAL: a 1 KiB page of a new table and its 24-byte header. */
#define FRAME_BYTES (1024 + 24)

static char dir[256];

static char *path_in_dir(char *buf, size_t len, const char *name)
{
	snprintf(buf, len, "%s/%s", dir, name);
	return buf;
}

#define CHECK_OK(what, expr)                                                                     \
	do {                                                                                     \
		int r_ = (expr);                                                                 \
		checks++;                                                                        \
		if (r_ < 0)                                                                      \
			FAIL("%s: expected success, got %d (%s): %s", (what), r_, strerror(-r_), \
			     pagetable_last_error(pt));                                          \
	} while (0)

/* A fresh table with one allocation of PAGES pages, committed; or dies. */
static struct pagetable *open_fresh(const char *path, bool synchronous_full)
{
	static const struct pt_alloc a = { .guid = "w-1",
					   .home = "node-a",
					   .owner = "node-a",
					   .policy = "default",
					   .size = PAGES * 4096,
					   .block_size = 4096,
					   .pages = PAGES };
	struct pagetable *pt;
	struct pt_origin o;
	int r;

	r = pagetable_open(path, synchronous_full, &pt);
	if (r < 0) {
		fprintf(stderr, "ERROR pagetable_open %s: %s (%s)\n", path, strerror(-r),
			pagetable_last_error(NULL));
		exit(99);
	}
	o = (struct pt_origin){ .node = "node-a", .lsn = pagetable_reserve_lsn(pt), .own = true };
	if (pagetable_alloc_put(pt, &a, 0, &o) < 0 || pagetable_commit(pt) < 0) {
		fprintf(stderr, "ERROR allocation in %s: %s\n", path, pagetable_last_error(pt));
		exit(99);
	}
	return pt;
}

/* n page writes, a commit each, as a node serving one client at a time;
 * calls each(pt, arg) after every commit when given. */
static int write_pages(struct pagetable *pt, int n, void (*each)(struct pagetable *pt, void *arg),
		       void *arg)
{
	static uint64_t version;

	for (int i = 0; i < n; i++) {
		uint64_t v = ++version;
		struct pt_page p = { .guid = "w-1",
				     .page = (uint64_t)i % PAGES,
				     .version = v,
				     .crc32c = (uint32_t)v,
				     .dirty = true };
		struct pt_origin o = { .node = "node-a",
				       .lsn = pagetable_reserve_lsn(pt),
				       .own = true };
		int r = pagetable_page_put(pt, &p, &o);

		if (r == 0)
			r = pagetable_commit(pt);
		if (r < 0)
			return r;
		if (each)
			each(pt, arg);
	}
	return 0;
}

static struct pt_stats stats(const struct pagetable *pt)
{
	struct pt_stats st;

	pagetable_get_stats(pt, &st);
	return st;
}

/* The file's size, -1 when there is none. */
static long long file_size(const char *path)
{
	struct stat sb;

	return stat(path, &sb) == 0 ? (long long)sb.st_size : -1;
}

static long long wal_size(const char *path)
{
	char wal[320];

	snprintf(wal, sizeof(wal), "%s-wal", path);
	return file_size(wal);
}

/* The journal rows a copy of the database file alone (no WAL) holds: what
 * checkpoints copied there. */
static long long rows_in_file_alone(const char *path)
{
	char copy[320], cmd[700];
	sqlite3_stmt *st;
	long long n = -1;
	sqlite3 *db;

	snprintf(copy, sizeof(copy), "%s.alone", path);
	snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, copy);
	if (system(cmd) != 0)
		die("copy the database file");
	if (sqlite3_open_v2(copy, &db, SQLITE_OPEN_READONLY, NULL) != SQLITE_OK)
		die("open the copy");
	if (sqlite3_prepare_v2(db, "SELECT count(*) FROM journal", -1, &st, NULL) == SQLITE_OK &&
	    sqlite3_step(st) == SQLITE_ROW)
		n = sqlite3_column_int64(st, 0);
	sqlite3_finalize(st);
	sqlite3_close(db);
	unlink(copy);
	return n;
}

/* ---- The tests ------------------------------------------------------------ */

/* 2000 commits of a frame or more each, below the default bound of 4096:
 * nothing checkpoints them, SQLite's automatic checkpoint (1000) included,
 * so the WAL file holds them all. */
static void test_no_automatic_checkpoint(void)
{
	char path[300];
	struct pagetable *pt;
	struct pt_stats st;

	path_in_dir(path, sizeof(path), "auto.db");
	pt = open_fresh(path, false);
	CHECK_OK("2000 page writes", write_pages(pt, 2000, NULL, NULL));
	st = stats(pt);
	CHECK_INT("checkpoints by a commit", 0, st.checkpoints_backstop);
	CHECK_INT("the bound", 4096, st.checkpoint_frames);
	CHECK(st.wal_frames >= 2000, "the WAL holds every commit: %llu frames",
	      (unsigned long long)st.wal_frames);
	CHECK(wal_size(path) >= 2000LL * FRAME_BYTES,
	      "the WAL file holds 2000 frames or more: %lld bytes", wal_size(path));
	CHECK(st.wal_writebacks >= st.wal_frames / 256 - 1 &&
		      st.wal_writebacks <= st.wal_frames / 256,
	      "the WAL's writeback started every 256 frames: %llu times for %llu frames",
	      (unsigned long long)st.wal_writebacks, (unsigned long long)st.wal_frames);
	pagetable_close(pt);
}

struct peak {
	uint64_t bound, most;
};

static void note_frames(struct pagetable *pt, void *arg)
{
	struct peak *p = arg;
	uint64_t now = stats(pt).wal_frames;

	if (now > p->most)
		p->most = now;
}

/* With a bound of 100 frames, 1000 commits: every commit that reaches it
 * checkpoints, so the WAL never holds the bound after a commit, and its file
 * is no bigger than the bound and a quarter. */
static void test_backstop(bool synchronous_full)
{
	char path[300];
	struct pagetable *pt;
	struct peak p = { .bound = 100 };
	struct pt_stats st;

	path_in_dir(path, sizeof(path), synchronous_full ? "backstop_full.db" : "backstop.db");
	pt = open_fresh(path, synchronous_full);
	CHECK_OK("bound 100", pagetable_set_checkpoint_frames(pt, 100));
	CHECK_OK("1000 page writes", write_pages(pt, 1000, note_frames, &p));
	st = stats(pt);
	CHECK(p.most < p.bound, "after each commit the WAL held fewer than %llu frames: %llu",
	      (unsigned long long)p.bound, (unsigned long long)p.most);
	CHECK(st.checkpoints_backstop >= 1000 / 100 - 1 && st.checkpoints_backstop <= 1000,
	      "checkpoints by a commit: %llu", (unsigned long long)st.checkpoints_backstop);
	CHECK(st.wal_frames_peak >= p.bound && st.wal_frames_peak < p.bound + 10,
	      "the most frames: %llu, the bound and a commit's",
	      (unsigned long long)st.wal_frames_peak);
	CHECK_INT("checkpoints asked for", 0, st.checkpoints_asked);
	CHECK(wal_size(path) <= 32 + (100 + 25) * FRAME_BYTES, "the WAL file: %lld bytes",
	      wal_size(path));
	CHECK_INT("writebacks started (never 256 frames)", 0, st.wal_writebacks);
	pagetable_close(pt);
}

/* pagetable_checkpoint(): refused inside a transaction; outside, copies
 * every frame into the database file (a copy of that file alone has every
 * row), the WAL then holds none and the next commit writes it from its
 * start. Killed at the end, so that no close checkpoints. */
static void checkpoint_when_asked(const char *path, bool synchronous_full)
{
	struct pagetable *pt = open_fresh(path, synchronous_full);
	long long before;
	struct pt_stats st;
	int r;

	CHECK_OK("500 page writes", write_pages(pt, 500, NULL, NULL));
	before = rows_in_file_alone(path);
	CHECK(before < 500, "before the checkpoint the file alone lacks rows: %lld", before);
	st = stats(pt);
	CHECK(st.wal_frames >= 500, "frames waiting: %llu", (unsigned long long)st.wal_frames);

	CHECK_OK("fold", pagetable_fold(pt));
	CHECK_INT("checkpoint in a transaction", -EBUSY, pagetable_checkpoint(pt));
	CHECK_OK("commit the fold", pagetable_commit(pt));
	r = pagetable_checkpoint(pt);
	CHECK(r >= 500, "frames copied: %d", r);
	st = stats(pt);
	CHECK_INT("frames left", 0, st.wal_frames);
	CHECK_INT("checkpoints asked for", 1, st.checkpoints_asked);
	CHECK_INT("checkpoints by a commit", 0, st.checkpoints_backstop);
	CHECK_INT("the file alone has every row", 501, rows_in_file_alone(path));
	CHECK_INT("nothing left: nothing done", 0, pagetable_checkpoint(pt));
	CHECK_INT("... and not counted", 1, stats(pt).checkpoints_asked);

	CHECK_OK("a page write after", write_pages(pt, 1, NULL, NULL));
	st = stats(pt);
	CHECK(st.wal_frames >= 1 && st.wal_frames <= 3,
	      "the next commit starts the WAL again: %llu frames",
	      (unsigned long long)st.wal_frames);
}

static void test_checkpoint_when_asked(bool synchronous_full)
{
	char path[300];
	int status;
	pid_t pid;

	path_in_dir(path, sizeof(path), synchronous_full ? "asked_full.db" : "asked.db");
	pid = fork();
	if (pid < 0)
		die("fork");
	if (pid == 0) {
		checkpoint_when_asked(path, synchronous_full);
		if (failures)
			_exit(1);
		kill(getpid(), SIGKILL);
		_exit(1);
	}
	if (waitpid(pid, &status, 0) != pid)
		die("waitpid");
	CHECK(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
	      "%s: the checks before the kill failed: status %d",
	      synchronous_full ? "synchronous FULL" : "synchronous NORMAL", status);
	CHECK(wal_size(path) > 0, "killed: the WAL is there, %lld bytes", wal_size(path));
	CHECK_INT("after the kill, the file alone", 501, rows_in_file_alone(path));
}

/* Close checkpoints and removes the WAL, as it did with SQLite's automatic
 * checkpoint. */
static void test_close(void)
{
	char path[300];
	struct pagetable *pt;

	path_in_dir(path, sizeof(path), "close.db");
	pt = open_fresh(path, false);
	CHECK_OK("300 page writes", write_pages(pt, 300, NULL, NULL));
	pagetable_close(pt);
	CHECK_INT("no WAL after close", -1, wal_size(path));
	CHECK_INT("the file alone has every row", 301, rows_in_file_alone(path));
}

/* Folds counted by who asked: pagetable_fold() when rows wait (not when
 * none do), a commit when 1024 wait; fold_waiting as pagetable_fold_waiting. */
static void test_fold_counts(void)
{
	char path[300];
	struct pagetable *pt;
	struct pt_stats st;

	path_in_dir(path, sizeof(path), "folds.db");
	pt = open_fresh(path, false);
	CHECK_OK("10 page writes", write_pages(pt, 10, NULL, NULL));
	CHECK_INT("waiting", 10, stats(pt).fold_waiting);
	CHECK_OK("fold", pagetable_fold(pt));
	CHECK_OK("commit", pagetable_commit(pt));
	CHECK_OK("fold with none waiting", pagetable_fold(pt));
	st = stats(pt);
	CHECK_INT("folds asked for", 1, st.folds_asked);
	CHECK_INT("waiting after", 0, st.fold_waiting);
	CHECK_OK("1100 page writes", write_pages(pt, 1100, NULL, NULL));
	st = stats(pt);
	CHECK_INT("folds by a commit", 1, st.folds_backstop);
	CHECK_INT("waiting after it", 1100 - 1024, st.fold_waiting);
	CHECK_INT("folds asked for, still", 1, st.folds_asked);
	pagetable_close(pt);
}

/* ---- Setup ---------------------------------------------------------------- */

int main(void)
{
	scratch_dir_make(dir, sizeof(dir), "ftvm-test-pagetable-wal");

	test_no_automatic_checkpoint();
	test_backstop(false);
	test_backstop(true);
	test_checkpoint_when_asked(false);
	test_checkpoint_when_asked(true);
	test_close();
	test_fold_counts();

	scratch_dir_remove(dir);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("pagetable_wal: all %d checks passed\n", checks);
	return 0;
}
