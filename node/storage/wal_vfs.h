/* An SQLite VFS over another that writes a transaction's WAL frames with one
 * write per commit instead of two per frame (wal_vfs.c says how, and why
 * that keeps a commit's failure where SQLite sees it). */
#pragma once

/* The name the page table opens its file with (sqlite3_open_v2's zVfs). */
#define WAL_VFS_NAME "ftvm-wal"

/* Registers WAL_VFS_NAME over SQLite's default VFS, once per process (later
 * calls do nothing). 0, or -ENOMEM / -EIO when SQLite refused it. */
int wal_vfs_register(void);

/* The same under name, over the VFS named root (a test's). */
int wal_vfs_register_as(const char *name, const char *root);
