/* The memory manager's in-memory page table: every allocation of the pair
 * with its pages, frames and locks. SQLite (storage/pagetable_sqlite.c) keeps what
 * must survive a restart; this is what the event loop reads and decides on.
 * The lock rule it serves is in vmm/VMM.md. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "partner.pb-c.h"

#define VMM_HEADER_MAX 4096u

struct vmm_alloc;
struct vmm_pagein;

/* Where an allocation's pages rest on this node when they are not in a
 * frame (node/vmm/MEDIA.md, "Where a page rests"). Each node places its
 * own copy. */
enum vmm_media {
	VMM_MEDIA_STORE, /* only the store: frames on demand, as before media */
	VMM_MEDIA_FLASH, /* this node's flash, then the store */
	VMM_MEDIA_DRAM,	 /* frames of its own, never evicted, then the store */
};
const char *vmm_media_name(enum vmm_media m); /* "store", "flash", "dram" */
/* The two partitions of DRAM and of flash (vmm/partitions.c). */
#define VMM_PARTITION_SERVER "server-memory"
#define VMM_PARTITION_CACHE "storage-cache"
/* -EINVAL for a name that is none of them. */
int vmm_media_parse(const char *s);

/* A page is resident (it has frames in this node's pool) or not; one that is
 * not is clean: the store holds its version, or it was never written (version
 * 0, zeroes). vmm/VMM.md, "Replacement", has the rules. */
struct vmm_page {
	struct vmm_alloc *alloc;
	uint64_t frame; /* first of the page's frames in this node's pool, when resident */
	uint64_t version;
	uint32_t crc32c;
	int lock_mode; /* Ftvm__Partner__LockMode */
	char **owners; /* one writer, or the readers */
	size_t n_owners;
	bool dirty;	/* newer than the backing store */
	bool destaging; /* in the destage queue or being written */
	bool resident;
	/* Not resident, and the store is behind the page table: its contents are
	 * only on the partner until a resync (or the owner's destage) brings them. */
	bool stale;
	unsigned pins;		   /* requests in flight that need its frames where they are */
	unsigned filling;	   /* whole-page writes in flight that bring its contents */
	unsigned rows;		   /* its page-table rows journalled (vmm_journal_page) */
	struct vmm_pagein *pagein; /* its read from the store (or flash), in flight */
	/* What this node's flash holds of it (a flash-resting allocation's):
	 * the version and CRC-32C its record there says, 0 for none; a page
	 * whose flash_version is its version may give its frames back though
	 * dirty (vmm_page_on_flash). */
	uint64_t flash_version;
	uint32_t flash_crc;
	/* The newest version known to be in the store behind a barrier (its
	 * owner's destage, here or told by Destaged; or the store's record at
	 * start): what a flush waits for (vmm/flush.c). */
	uint64_t durable_version;
	bool flashing; /* in the flash queue or being written there */
	/* Staged by read-ahead and not read since (vmm/volume.c): a read
	 * counts it a hit, an eviction wasted. */
	bool read_ahead;
	/* The replacement queue (least recently used first). */
	struct vmm_page *lru_prev, *lru_next;
	bool in_lru;
};

struct vmm_alloc {
	struct vmm_alloc *next; /* hash chain */
	char *guid;
	char *home;  /* the node it was made on */
	char *owner; /* the node serving it, which arbitrates its locks */
	char *policy;
	uint64_t size;
	uint32_t block_size;
	uint64_t pages;
	uint8_t *header;
	size_t header_len;
	bool freeing;	       /* a release memory is in flight: no new locks */
	bool moving;	       /* being handed to its home node: no new locks */
	uint64_t store_offset; /* its extent in the backing store */
	enum vmm_media media;  /* this node's copy's */
	uint64_t flash_offset; /* its extent on this node's flash, media flash */
	uint32_t uid;	       /* the client uid it belongs to */
	char *client;	       /* the name its client gave, "" for none */
	char *session;	       /* its client's session id, "" unless a session allocation */
	/* A block volume's name, "" for a client's allocation: its pages take
	 * the storage cache's frames (vmm/VMM.md, "Volumes"). */
	char *volume;
	/* This record came through a resync and the owner has not confirmed
	 * it since: read header asks the owner (vmm/read_header.c). */
	bool unconfirmed;
	/* Numbers its insertion into the table: a resync replaces an
	 * allocation by another of the same guid, which a request in flight
	 * since before must tell from its own. */
	uint64_t incarnation;
	struct vmm_page *page;
};

struct vmm_table;

int vmm_table_new(struct vmm_table **ret);
/* Frees every allocation (not their frames: the pool goes with the node). */
void vmm_table_free(struct vmm_table *t);

struct vmm_alloc *vmm_table_find(const struct vmm_table *t, const char *guid);
/* The volume of that name, NULL for none. */
struct vmm_alloc *vmm_table_find_volume(const struct vmm_table *t, const char *name);
/* guid's allocation if it is still the one of that incarnation, else NULL. */
struct vmm_alloc *vmm_table_find_incarnation(const struct vmm_table *t, const char *guid,
					     uint64_t incarnation);
/* a's page; NULL when a is NULL (an allocation freed meanwhile) or the page
 * is past its end. */
struct vmm_page *vmm_alloc_page(struct vmm_alloc *a, uint64_t page);
/* A new allocation whose pages are unlocked, not resident, at version 0 with
 * the checksum of a zeroed block; NULL on ENOMEM. */
struct vmm_alloc *vmm_alloc_new(const char *guid, const char *home, const char *owner,
				const char *policy, uint64_t size, uint32_t block_size,
				const uint8_t *header, size_t header_len);
void vmm_alloc_free(struct vmm_alloc *a);
/* a's client name (config_client_name_valid): -EINVAL, naming nothing,
 * for a name that is not one; -ENOMEM. */
int vmm_alloc_set_client(struct vmm_alloc *a, const char *client);
/* a's session id (config_session_id_valid): -EINVAL, -ENOMEM. */
int vmm_alloc_set_session(struct vmm_alloc *a, const char *session);
/* a's volume name ("" or config_volume_name_valid): -EINVAL, -ENOMEM. */
int vmm_alloc_set_volume(struct vmm_alloc *a, const char *volume);
/* Whether a is a volume, whose pages take the storage cache's frames. */
static inline bool vmm_alloc_is_volume(const struct vmm_alloc *a)
{
	return a->volume[0] != '\0';
}
void vmm_table_insert(struct vmm_table *t, struct vmm_alloc *a);
/* Unlinks a from t (the caller frees it). */
void vmm_table_remove(struct vmm_table *t, struct vmm_alloc *a);
size_t vmm_table_size(const struct vmm_table *t);
/* Allocations whose owner is (owned) or is not (!owned) node. */
size_t vmm_table_count(const struct vmm_table *t, const char *node, bool owned);
/* Allocations node owns that are homed on another node (adopted). */
size_t vmm_table_count_adopted(const struct vmm_table *t, const char *node);
/* Every allocation, sorted by guid; the caller frees the array. */
struct vmm_alloc **vmm_table_sorted(const struct vmm_table *t, size_t *ret_n);

/* The lock a request for mode by owner would conflict with, as a reason; NULL
 * when it can be granted now. */
const char *vmm_page_conflict(const struct vmm_alloc *a, const struct vmm_page *p, int mode);
int vmm_page_lock(struct vmm_page *p, int mode, const char *owner);
/* -ENOENT when owner holds no lock on p. */
int vmm_page_unlock(struct vmm_page *p, const char *owner);
/* Whether owner holds a lock (read or write) on p. */
bool vmm_page_locked_by(const struct vmm_page *p, const char *owner);
bool vmm_alloc_locked(const struct vmm_alloc *a);
bool vmm_page_write_locked(const struct vmm_page *p);
/* Lock owners are "<node>/<client pid>/<op>": whether lock_owner is one of
 * node's; whether p is write-locked by one of node's. */
bool vmm_lock_owner_of(const char *lock_owner, const char *node);
bool vmm_page_write_locked_by(const struct vmm_page *p, const char *node);
uint64_t vmm_page_index(const struct vmm_page *p);
/* CRC-32C of block_size zero bytes: a page never written. */
uint32_t vmm_zero_crc(uint32_t block_size);

/* Whether this node's flash holds p at its version: its frames may go
 * though it is dirty, and a page-in reads it there. */
bool vmm_page_on_flash(const struct vmm_page *p);

/* Fills h from a; h points into a (valid while a lives). */
void vmm_alloc_header(const struct vmm_alloc *a, Ftvm__Partner__Header *h);
