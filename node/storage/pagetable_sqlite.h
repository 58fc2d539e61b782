/* The page table of a node, persisted in SQLite (STATE_DIR/pagetable.db, WAL):
 * allocations, their pages' versions and checksums, a journal of every change
 * with this node's LSN, and the counters that must outlive a restart (the next
 * guid number, the LSNs exchanged with the partner). vmm/VMM.md, "The page table in
 * SQLite", is the design.
 *
 * Transactions are grouped: the first change opens one, pagetable_commit() ends
 * it, and the caller commits once per event-loop turn. Each change is atomic on
 * its own (a change that fails leaves the table as it was before that change,
 * earlier changes of the open transaction stay), except that after -ENOSPC,
 * -ENOMEM or an I/O error SQLite may have rolled back the whole open
 * transaction: pagetable_in_transaction() then says false.
 *
 * Every function returning int returns >= 0 on success or -errno: -EBUSY
 * (database locked), -ENOSPC (disk full), -EEXIST (already there), -ENOENT
 * (not there), -EBADMSG (not a page table, or a damaged one),
 * -EPROTONOSUPPORT (written by a newer ftvm), -EINVAL (bad argument),
 * -ENOMEM, -ENOTSUP (this SQLite or file system cannot do WAL or foreign
 * keys), the system's errno where SQLite knows it (-EACCES, -ENOENT for a path
 * it cannot open), -EIO (anything else). The reason is kept for pagetable_last_error(); this module
 * logs at debug level only, the caller logs the error once. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pagetable;

struct pt_alloc {
	const char *guid, *home, *owner, *policy;
	uint64_t size;
	uint32_t block_size;
	uint64_t pages;
	const uint8_t *header; /* may be NULL when header_len is 0 */
	size_t header_len;
	uint64_t store_offset; /* its extent in the backing store (node/storage/store.h) */
	uint32_t uid;	       /* the client uid it belongs to */
	const char *client;    /* the name its client gave; NULL is "" */
	const char *session;   /* its client's session id; NULL is "" (none) */
	/* Where its pages rest on this node (node/vmm/MEDIA.md): "store",
	 * "flash" or "dram"; NULL is "store". Its extent on this node's flash,
	 * when there. Neither is mirrored: each node places its own copy. */
	const char *media;
	uint64_t flash_offset;
	const char *volume; /* a block volume's name; NULL is "" (an allocation) */
};

struct pt_page {
	const char *guid;
	uint64_t page;
	uint64_t version;
	uint32_t crc32c;
	bool dirty;
	/* pagetable_page_put: the row puts back a change that did not happen:
	 * when clean, it is journalled "undo", a change like "page" (it counts
	 * as this node's last own LSN), not a destage's "clean". */
	bool undo;
};

/* Who made a change. Own changes (own = true): node is this node and lsn came
 * from pagetable_reserve_lsn() on this table; it becomes the journal row's
 * LSN. Mirrored changes (own = false): node is the partner and lsn is the
 * partner's LSN for the change; the journal row gets a fresh local LSN and
 * keeps lsn as its origin_lsn. */
struct pt_origin {
	const char *node;
	uint64_t lsn;
	bool own;
};

/* Opens (creating or migrating) the page table at path. synchronous_full
 * selects PRAGMA synchronous=FULL (a commit survives power loss) instead of
 * NORMAL (a commit survives a crash of the process; WAL). On failure *ret is
 * NULL and pagetable_last_error(NULL) says why. */
int pagetable_open(const char *path, bool synchronous_full, struct pagetable **ret);

/* Rolls back an open transaction and closes. NULL is fine. */
void pagetable_close(struct pagetable *pt);

/* Why the last failing call on pt failed (kept until the next failure), or,
 * with pt NULL, why the last pagetable_open() of this thread failed. "" when
 * nothing failed. */
const char *pagetable_last_error(const struct pagetable *pt);

/* Inserts the allocation and its pages rows 0 .. a->pages - 1, each at
 * version 0, clean, with crc32c zero_crc (the checksum of a zeroed block).
 * -EEXIST when the guid is there already (and nothing changes). Journal op
 * "alloc". */
int pagetable_alloc_put(struct pagetable *pt, const struct pt_alloc *a, uint32_t zero_crc,
			const struct pt_origin *o);

/* Deletes the allocation and its pages; -ENOENT if absent. Journal op "free". */
int pagetable_alloc_delete(struct pagetable *pt, const char *guid, const struct pt_origin *o);

/* Makes owner the node serving the allocation (a takeover, a failback);
 * -ENOENT if absent. Journal op "owner". */
int pagetable_alloc_set_owner(struct pagetable *pt, const char *guid, const char *owner,
			      const struct pt_origin *o);

/* Sets a page's version, crc32c and dirty flag; -ENOENT if absent. Journal op
 * "page", or when the page is clean "clean" (a destage made it so) or "undo"
 * (p->undo). Only the
 * journal row is written; the pages row takes it at the next fold, which
 * comes before anything here reads it (vmm/VMM.md, "The page table in SQLite"):
 * a later call on the same page wins, as if each call wrote it. */
int pagetable_page_put(struct pagetable *pt, const struct pt_page *p, const struct pt_origin *o);

/* Commits the open transaction; 0 and nothing done when none is open. */
int pagetable_commit(struct pagetable *pt);

/* fn(arg, r) runs when a commit fails, pagetable_commit()'s or one a lease
 * forces (below), before the failure is returned: SQLite rolled the
 * transaction back, so what the caller applied to memory meanwhile is no
 * longer in the file. Without one (the default), the failure is only
 * returned. */
void pagetable_on_commit_failed(struct pagetable *pt, void (*fn)(void *arg, int r), void *arg);

bool pagetable_in_transaction(const struct pagetable *pt);

/* Right after a change: a mark of the transaction that holds it, for
 * pagetable_committed(), which says whether that transaction was committed
 * (false while it is open, and once it was lost). */
uint64_t pagetable_change_mark(const struct pagetable *pt);
bool pagetable_committed(const struct pagetable *pt, uint64_t mark);

/* Page writes wait in the journal until a fold brings pages up to date
 * (vmm/VMM.md, "The page table in SQLite"). The table folds by itself where it
 * must, and at a commit that finds many rows waiting: a pause for that
 * commit. pagetable_fold() folds what waits now, in the open transaction
 * (opening one if rows wait; none and nothing done when none wait), for the
 * caller to commit: a caller that is idle folds, so its busy commits need
 * not. pagetable_fold_waiting() is the number of page rows a fold would take
 * (0 after a fold, committed or in the open transaction). */
int pagetable_fold(struct pagetable *pt);
uint64_t pagetable_fold_waiting(const struct pagetable *pt);

/* WAL checkpoints (vmm/VMM.md, "WAL checkpoints") copy the WAL's frames into the
 * database file, with an fdatasync of each: a pause, so SQLite's automatic
 * one, inside whichever commit crossed 1000 frames, is off. The caller
 * checkpoints when idle: pagetable_checkpoint(), outside a transaction
 * (-EBUSY inside one), returns the frames copied (0 when the WAL holds none).
 * A commit checkpoints when it leaves the WAL at frames or more, the
 * backstop for a caller never idle; pagetable_set_checkpoint_frames() sets
 * it (0: the default, 4096) and bounds the WAL file kept on disk to match;
 * a checkpoint that fails there leaves the commit standing and is tried
 * again by the next. Close checkpoints too, and removes the WAL. With
 * synchronous NORMAL, every 256 frames a commit starts the writeback of the
 * WAL without waiting for it, so that a checkpoint's sync finds little to
 * write. */
int pagetable_checkpoint(struct pagetable *pt);
int pagetable_set_checkpoint_frames(struct pagetable *pt, uint32_t frames);

/* The page table's housekeeping since open, for status. */
struct pt_stats {
	uint64_t folds_asked;	       /* by pagetable_fold(), rows waiting */
	uint64_t folds_backstop;       /* by a commit that found 1024 rows waiting */
	uint64_t folds_by_sql;	       /* any fold of rows on too many pages for the map */
	uint64_t fold_waiting;	       /* pagetable_fold_waiting() */
	uint64_t checkpoints_asked;    /* by pagetable_checkpoint(), frames waiting */
	uint64_t checkpoints_backstop; /* by a commit at the frames bound */
	uint64_t wal_frames;	       /* in the WAL, not yet copied to the database */
	uint64_t wal_frames_peak;      /* the most wal_frames was */
	uint32_t checkpoint_frames;    /* the backstop's bound */
	uint64_t wal_writebacks;       /* of the WAL started ahead of a checkpoint */
	uint64_t commits;	       /* transactions committed */
};
void pagetable_get_stats(const struct pagetable *pt, struct pt_stats *ret);

/* The counters hand out numbers from leases kept durable ahead of use: a
 * number is never handed out again, across reopen, whether or not the
 * transaction it was taken in was committed; a restart skips the rest of the
 * lease (up to 64 guids, 65536 LSNs). Taking a new lease when a transaction
 * is open commits that transaction (this happens only when one transaction
 * takes more than half a lease; pagetable_commit() renews leases as it
 * goes). Both return 0 on failure (pagetable_last_error() says why). */

/* 1, 2, 3 ... for guids "<node>-<n>". */
uint64_t pagetable_next_guid(struct pagetable *pt);

/* This node's next LSN: greater than every journal row's LSN and every LSN
 * reserved before, across reopen. */
uint64_t pagetable_reserve_lsn(struct pagetable *pt);

/* The last partner LSN this node applied, and the last LSN of this node's
 * that the partner says it applied. Setting the first opens a transaction if
 * none is open; the commit that ends it writes it to meta once (not once
 * per call: a batch sets them for every message). Setting the second opens
 * none: a commit writes it at most once a second, and close writes it, as
 * losing the latest value in a crash only makes the node think the partner
 * has less, which is safe (it sends more and trims less). The getters return
 * what was set last. */
int pagetable_set_partner_applied_lsn(struct pagetable *pt, uint64_t lsn);
uint64_t pagetable_partner_applied_lsn(const struct pagetable *pt);
/* The partner's change that carried lsn is journalled with it (origin_lsn)
 * in the open transaction, or changed nothing that lasts: the mark needs no
 * write of its own, which saves a page of every commit on the node that
 * mirrors. A journal trim and close write it; after a crash,
 * pagetable_recover_partner_applied_lsn finds it again in the journal. */
void pagetable_note_partner_applied_lsn(struct pagetable *pt, uint64_t lsn);
/* Once after open, with this node's id: the mark becomes the larger of what
 * meta holds and the last partner LSN journalled. */
int pagetable_recover_partner_applied_lsn(struct pagetable *pt, const char *self);
/* The pair's epoch as this node last knew it (node/ha/HA.md, "Epochs"): 1 until
 * the first takeover. Setting writes meta in the open transaction (opening one
 * if none); commit it before acting on the new epoch. */
int pagetable_epoch(struct pagetable *pt, uint64_t *ret);
int pagetable_set_epoch(struct pagetable *pt, uint64_t epoch);
/* Whether the node was serving alone when it last ran (false until set). */
int pagetable_solo(struct pagetable *pt, bool *ret);
int pagetable_set_solo(struct pagetable *pt, bool solo);
/* The id of the store this table's extents are in ({0, 0} before the first
 * one was recorded); set in the open transaction. */
int pagetable_store_id(struct pagetable *pt, uint64_t ret_id[2]);
int pagetable_set_store_id(struct pagetable *pt, const uint64_t id[2]);
int pagetable_set_applied_by_partner_lsn(struct pagetable *pt, uint64_t lsn);
uint64_t pagetable_applied_by_partner_lsn(const struct pagetable *pt);

/* Reads everything back (at start): each allocation in guid order (text
 * order), then each of its pages in page order. The structs and their strings
 * are valid only during the callback. Either callback may be NULL. A
 * callback's negative return stops the load and is returned. -EBADMSG when the
 * stored table is inconsistent (a page row missing, a value out of range).
 * Page writes not folded yet are folded first, in the open transaction
 * (opening one if none). */
int pagetable_load(struct pagetable *pt, int (*alloc_cb)(const struct pt_alloc *a, void *arg),
		   int (*page_cb)(const struct pt_page *p, void *arg), void *arg);

/* Deletes up to max_rows of the oldest journal rows both nodes have applied
 * (node/ha/HA.md, "Solo and rejoin"): this node's own (origin self) up to LSN
 * own_below (what the partner said it applied), and the partner's, which
 * this node applied when it wrote them; own_below is held to the applied mark
 * (pagetable_set_applied_by_partner_lsn), which is written with the rows'
 * removal. In the open transaction (opening one if none). Returns the rows
 * deleted. */
int pagetable_journal_trim(struct pagetable *pt, const char *self, uint64_t own_below,
			   unsigned max_rows);

/* This node's last own LSN that the table holds: the journal's last own row
 * other than "clean", or the partner's applied mark when those rows were
 * trimmed (UINT64_MAX when it cannot tell). */
uint64_t pagetable_last_own_lsn(struct pagetable *pt, const char *self);

/* Calls cb(guid) once for each allocation this node's own journal rows
 * above LSN after name ("clean" rows aside), in guid order; a negative cb
 * return stops and is returned. */
int pagetable_journal_guids_after(struct pagetable *pt, const char *self, uint64_t after,
				  int (*cb)(const char *guid, void *arg), void *arg);

/* Rows in the journal (for tests and status; counts them). */
uint64_t pagetable_journal_count(struct pagetable *pt);

/* A page that went back to an older version because no node held its newer
 * ones (node/ha/HA.md, "Recovery"): kept for the operator, in the open
 * transaction, for as long as the page table lives. */
struct pt_recovered {
	uint64_t id;	/* in the order they were noted (set by the table) */
	uint64_t at_ms; /* wall clock, ms since the epoch */
	const char *guid;
	uint64_t page;
	uint64_t from_version, to_version;
	const char *why; /* the occasion: "forced takeover", ... */
};

int pagetable_recovered_add(struct pagetable *pt, const struct pt_recovered *rec);
/* cb for each noted page: with newest, the last limit of them, newest first;
 * otherwise up to limit with an id above after, in order. A negative cb
 * return stops and is returned. */
int pagetable_recovered_list(struct pagetable *pt, uint64_t after, unsigned limit, bool newest,
			     int (*cb)(const struct pt_recovered *rec, void *arg), void *arg);
uint64_t pagetable_recovered_count(struct pagetable *pt);

/* One partition of this node's DRAM or flash (node/vmm/MEDIA.md, "The memory
 * partition table"): a node's own, never mirrored, so never journalled. */
struct pt_partition {
	const char *media;	/* "dram", "flash" */
	const char *type;	/* "server-memory", "storage-cache" */
	uint64_t start, length; /* bytes: from the pool's first frame, or the flash
				 * device's first byte */
};

/* Records part (replacing its media and type's row), in the open transaction. */
int pagetable_partition_put(struct pagetable *pt, const struct pt_partition *part);
/* cb for each recorded partition, by media and start; a negative cb return
 * stops and is returned. */
int pagetable_partition_list(struct pagetable *pt,
			     int (*cb)(const struct pt_partition *part, void *arg), void *arg);
