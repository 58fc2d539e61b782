/* The page table's VFS (wal_vfs.h): SQLite's own, but for the WAL.
 *
 * SQLite writes each WAL frame as two writes, its 24-byte header and then
 * the page (wal.c, walWriteOneFrame), so a commit of k frames made 2k
 * pwrite() calls: with a commit per loop turn, 1.2 per page write on the
 * node that owns the page and 0.75 on the other, about a third of the
 * system calls a page write still makes.
 *
 * Here a frame's header and the page after it, at the next offset, are
 * kept in a buffer instead, frame behind frame, and the buffer goes in one
 * write of the VFS below when the page of a commit frame (its header's
 * "database size after commit" is not zero) is added, or when it holds
 * FLUSH_BYTES. That write is made inside the xWrite call that SQLite makes
 * for the commit frame's page, and what it returns is that call's return:
 * a full disk or an I/O error shows where SQLite expects it, before it
 * takes the commit as done, and it fails the commit as it always did. No
 * committed frame ever waits here after its commit returned.
 *
 * Any other write to the WAL (its file header, or anything not in that
 * pattern, as a later SQLite might write a frame in one call) and every
 * other call on it (read, sync, truncate, size, lock, file control, close)
 * first writes out what is buffered, then goes to the VFS below as it is.
 * Other files (the database) go straight through. */
#define _GNU_SOURCE
#include "wal_vfs.h"

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <sqlite3.h>

#define FRAME_HEADER 24
/* A transaction larger than this (a fold's) goes out before its commit
 * frame, in FLUSH_BYTES at a time. */
#define FLUSH_BYTES (256u << 10)
/* The largest write given to the VFS below: unix's takes up to 128 KiB a
 * call (seekAndWriteFd masks the length with 0x1ffff), and a longer one
 * fails as a full disk. */
#define WRITE_MAX (64u << 10)

struct wal_file {
	sqlite3_file base; /* pMethods: wal_methods */
	sqlite3_file *real;
	bool wal;
	/* Frames not written yet: len bytes for offset at on. */
	uint8_t *buf;
	size_t len, cap;
	sqlite3_int64 at;
	bool page_due;	 /* buf ends with a frame header; its page comes next */
	bool commit_due; /* and that header is a commit frame's */
};

static int flush(struct wal_file *w)
{
	int rc = SQLITE_OK;

	w->page_due = w->commit_due = false;
	for (size_t done = 0; done < w->len && rc == SQLITE_OK;) {
		size_t n = w->len - done < WRITE_MAX ? w->len - done : WRITE_MAX;

		rc = w->real->pMethods->xWrite(w->real, w->buf + done, (int)n,
					       w->at + (sqlite3_int64)done);
		done += n;
	}
	w->len = 0;
	return rc;
}

static int append(struct wal_file *w, const void *data, int amt, sqlite3_int64 off)
{
	if (!w->len)
		w->at = off;
	if (w->len + (size_t)amt > w->cap) {
		size_t cap = w->cap ? 2 * w->cap : 64u << 10;
		uint8_t *grown;

		while (cap < w->len + (size_t)amt)
			cap *= 2;
		grown = realloc(w->buf, cap);
		if (!grown)
			return SQLITE_NOMEM;
		w->buf = grown;
		w->cap = cap;
	}
	memcpy(w->buf + w->len, data, (size_t)amt);
	w->len += (size_t)amt;
	return SQLITE_OK;
}

static bool next_in_buf(const struct wal_file *w, sqlite3_int64 off)
{
	return !w->len || off == w->at + (sqlite3_int64)w->len;
}

static int wal_write(sqlite3_file *f, const void *data, int amt, sqlite3_int64 off)
{
	struct wal_file *w = (struct wal_file *)f;
	const uint8_t *h = data;
	int rc;

	if (!w->wal)
		return w->real->pMethods->xWrite(w->real, data, amt, off);
	if (amt == FRAME_HEADER && !w->page_due && next_in_buf(w, off)) {
		rc = append(w, data, amt, off);
		if (rc != SQLITE_OK)
			return rc;
		w->page_due = true;
		w->commit_due = (h[4] | h[5] | h[6] | h[7]) != 0;
		return SQLITE_OK;
	}
	if (w->page_due && next_in_buf(w, off)) {
		bool commit = w->commit_due;

		rc = append(w, data, amt, off);
		w->page_due = w->commit_due = false;
		if (rc != SQLITE_OK) {
			w->len = 0; /* the frame's header went with it */
			return rc;
		}
		return commit || w->len >= FLUSH_BYTES ? flush(w) : SQLITE_OK;
	}
	rc = flush(w);
	if (rc != SQLITE_OK)
		return rc;
	return w->real->pMethods->xWrite(w->real, data, amt, off);
}

static int wal_close(sqlite3_file *f)
{
	struct wal_file *w = (struct wal_file *)f;
	int rc = flush(w), rc2 = w->real->pMethods->xClose(w->real);

	free(w->buf);
	w->buf = NULL;
	w->cap = 0;
	return rc != SQLITE_OK ? rc : rc2;
}

/* The rest: what is buffered goes first, then the call goes below. */
#define REAL(f) (((struct wal_file *)(f))->real)
#define FLUSHED(f)                                       \
	do {                                             \
		int rc_ = flush((struct wal_file *)(f)); \
		if (rc_ != SQLITE_OK)                    \
			return rc_;                      \
	} while (0)

static int wal_read(sqlite3_file *f, void *data, int amt, sqlite3_int64 off)
{
	FLUSHED(f);
	return REAL(f)->pMethods->xRead(REAL(f), data, amt, off);
}

static int wal_truncate(sqlite3_file *f, sqlite3_int64 size)
{
	FLUSHED(f);
	return REAL(f)->pMethods->xTruncate(REAL(f), size);
}

static int wal_sync(sqlite3_file *f, int flags)
{
	FLUSHED(f);
	return REAL(f)->pMethods->xSync(REAL(f), flags);
}

static int wal_file_size(sqlite3_file *f, sqlite3_int64 *ret)
{
	FLUSHED(f);
	return REAL(f)->pMethods->xFileSize(REAL(f), ret);
}

static int wal_lock(sqlite3_file *f, int level)
{
	FLUSHED(f);
	return REAL(f)->pMethods->xLock(REAL(f), level);
}

static int wal_unlock(sqlite3_file *f, int level)
{
	FLUSHED(f);
	return REAL(f)->pMethods->xUnlock(REAL(f), level);
}

static int wal_check_reserved(sqlite3_file *f, int *ret)
{
	return REAL(f)->pMethods->xCheckReservedLock(REAL(f), ret);
}

static int wal_file_control(sqlite3_file *f, int op, void *arg)
{
	FLUSHED(f);
	return REAL(f)->pMethods->xFileControl(REAL(f), op, arg);
}

static int wal_sector_size(sqlite3_file *f)
{
	return REAL(f)->pMethods->xSectorSize(REAL(f));
}

static int wal_device_characteristics(sqlite3_file *f)
{
	return REAL(f)->pMethods->xDeviceCharacteristics(REAL(f));
}

static int wal_shm_map(sqlite3_file *f, int page, int size, int extend, void volatile **ret)
{
	return REAL(f)->pMethods->xShmMap(REAL(f), page, size, extend, ret);
}

static int wal_shm_lock(sqlite3_file *f, int offset, int n, int flags)
{
	return REAL(f)->pMethods->xShmLock(REAL(f), offset, n, flags);
}

static void wal_shm_barrier(sqlite3_file *f)
{
	REAL(f)->pMethods->xShmBarrier(REAL(f));
}

static int wal_shm_unmap(sqlite3_file *f, int delete_flag)
{
	return REAL(f)->pMethods->xShmUnmap(REAL(f), delete_flag);
}

static int wal_fetch(sqlite3_file *f, sqlite3_int64 off, int amt, void **ret)
{
	FLUSHED(f);
	return REAL(f)->pMethods->xFetch(REAL(f), off, amt, ret);
}

static int wal_unfetch(sqlite3_file *f, sqlite3_int64 off, void *p)
{
	return REAL(f)->pMethods->xUnfetch(REAL(f), off, p);
}

/* Version 3, for a file below of version 3 (unix's); the calls a lower
 * version lacks are left out for one below of that version (methods_of). */
/* The calls of version 1, which every version has. */
#define WAL_METHODS_V1                                                                           \
	.xClose = wal_close, .xRead = wal_read, .xWrite = wal_write, .xTruncate = wal_truncate,  \
	.xSync = wal_sync, .xFileSize = wal_file_size, .xLock = wal_lock, .xUnlock = wal_unlock, \
	.xCheckReservedLock = wal_check_reserved, .xFileControl = wal_file_control,              \
	.xSectorSize = wal_sector_size, .xDeviceCharacteristics = wal_device_characteristics
/* And those version 2 added. */
#define WAL_METHODS_V2                                                                    \
	.xShmMap = wal_shm_map, .xShmLock = wal_shm_lock, .xShmBarrier = wal_shm_barrier, \
	.xShmUnmap = wal_shm_unmap

static const sqlite3_io_methods wal_methods[3] = {
	{ .iVersion = 1, WAL_METHODS_V1 },
	{ .iVersion = 2, WAL_METHODS_V1, WAL_METHODS_V2 },
	{ .iVersion = 3,
	  WAL_METHODS_V1,
	  WAL_METHODS_V2,
	  .xFetch = wal_fetch,
	  .xUnfetch = wal_unfetch },
};

static const sqlite3_io_methods *methods_of(const sqlite3_file *real)
{
	int v = real->pMethods->iVersion;

	return &wal_methods[v < 1 ? 0 : v > 3 ? 2 : v - 1];
}

static int wal_open(sqlite3_vfs *vfs, const char *name, sqlite3_file *f, int flags, int *ret_flags)
{
	sqlite3_vfs *root = vfs->pAppData;
	struct wal_file *w = (struct wal_file *)f;
	int rc;

	memset(w, 0, sizeof(*w));
	w->real = (sqlite3_file *)(w + 1);
	rc = root->xOpen(root, name, w->real, flags, ret_flags);
	/* SQLite calls xClose when pMethods is set, also after a failed open. */
	w->base.pMethods = w->real->pMethods ? methods_of(w->real) : NULL;
	w->wal = (flags & SQLITE_OPEN_WAL) != 0;
	return rc;
}

#define ROOT(vfs) ((sqlite3_vfs *)(vfs)->pAppData)

static int wal_delete(sqlite3_vfs *vfs, const char *name, int sync_dir)
{
	return ROOT(vfs)->xDelete(ROOT(vfs), name, sync_dir);
}

static int wal_access(sqlite3_vfs *vfs, const char *name, int flags, int *ret)
{
	return ROOT(vfs)->xAccess(ROOT(vfs), name, flags, ret);
}

static int wal_full_pathname(sqlite3_vfs *vfs, const char *name, int n, char *out)
{
	return ROOT(vfs)->xFullPathname(ROOT(vfs), name, n, out);
}

static void *wal_dl_open(sqlite3_vfs *vfs, const char *name)
{
	return ROOT(vfs)->xDlOpen(ROOT(vfs), name);
}

static void wal_dl_error(sqlite3_vfs *vfs, int n, char *msg)
{
	ROOT(vfs)->xDlError(ROOT(vfs), n, msg);
}

static void (*wal_dl_sym(sqlite3_vfs *vfs, void *lib, const char *sym))(void)
{
	return ROOT(vfs)->xDlSym(ROOT(vfs), lib, sym);
}

static void wal_dl_close(sqlite3_vfs *vfs, void *lib)
{
	ROOT(vfs)->xDlClose(ROOT(vfs), lib);
}

static int wal_randomness(sqlite3_vfs *vfs, int n, char *out)
{
	return ROOT(vfs)->xRandomness(ROOT(vfs), n, out);
}

static int wal_sleep(sqlite3_vfs *vfs, int us)
{
	return ROOT(vfs)->xSleep(ROOT(vfs), us);
}

static int wal_current_time(sqlite3_vfs *vfs, double *ret)
{
	return ROOT(vfs)->xCurrentTime(ROOT(vfs), ret);
}

static int wal_last_error(sqlite3_vfs *vfs, int n, char *msg)
{
	return ROOT(vfs)->xGetLastError ? ROOT(vfs)->xGetLastError(ROOT(vfs), n, msg) : 0;
}

static int wal_current_time_int64(sqlite3_vfs *vfs, sqlite3_int64 *ret)
{
	return ROOT(vfs)->xCurrentTimeInt64(ROOT(vfs), ret);
}

int wal_vfs_register_as(const char *name, const char *root_name)
{
	sqlite3_vfs *root, *vfs;
	int rc;

	if (sqlite3_vfs_find(name))
		return 0;
	root = sqlite3_vfs_find(root_name);
	if (!root)
		return -EIO;
	vfs = calloc(1, sizeof(*vfs)); /* registered for the process' life */
	if (!vfs)
		return -ENOMEM;
	*vfs = (sqlite3_vfs){
		.iVersion = root->iVersion < 2 ? root->iVersion : 2,
		.szOsFile = (int)sizeof(struct wal_file) + root->szOsFile,
		.mxPathname = root->mxPathname,
		.zName = name,
		.pAppData = root,
		.xOpen = wal_open,
		.xDelete = wal_delete,
		.xAccess = wal_access,
		.xFullPathname = wal_full_pathname,
		.xDlOpen = wal_dl_open,
		.xDlError = wal_dl_error,
		.xDlSym = wal_dl_sym,
		.xDlClose = wal_dl_close,
		.xRandomness = wal_randomness,
		.xSleep = wal_sleep,
		.xCurrentTime = wal_current_time,
		.xGetLastError = wal_last_error,
		.xCurrentTimeInt64 = root->iVersion >= 2 ? wal_current_time_int64 : NULL,
	};
	rc = sqlite3_vfs_register(vfs, 0);
	if (rc != SQLITE_OK) {
		free(vfs);
		return rc == SQLITE_NOMEM ? -ENOMEM : -EIO;
	}
	return 0;
}

int wal_vfs_register(void)
{
	sqlite3_vfs *root = sqlite3_vfs_find(NULL);

	return root ? wal_vfs_register_as(WAL_VFS_NAME, root->zName) : -EIO;
}
