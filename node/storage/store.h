/* The backing store shared by both nodes (a file or a block device), after
 * seed 004: a header that names the pair, and one partition per node, made
 * by `ftvmctl store init` or, on a first start without it, with defaults.
 *
 *   0                  header (storage/store_layout.h): magic, version, page
 *                      size, store id, the partition table with each one's
 *                      access, CRC-32C
 *   4096               the fence slots and mailboxes (node/ha/HA.md, storage/sbd.h):
 *                      slot 0, slot 1, mailbox 0, mailbox 1, a sector each
 *   STORE_HEADER_SPACE the partitions: by default the first node's to open
 *                      the store, then the second's
 *
 * An allocation's extent lives in its home node's partition: a record per
 * page (version, CRC-32C of what was destaged), rounded up to a page, then
 * the pages' blocks. So the store says by itself which version of a page it
 * holds, and a node coming back reads each page with its version.
 * storage/STORAGE.md says who may write which partition. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "store_layout.h"

struct store;

#define STORE_SECTOR 4096u
#define STORE_SLOT_AREA 4096u

struct store_page_record {
	uint64_t version; /* 0: never destaged */
	uint32_t crc32c;
	uint32_t reserved;
};

/* Opens the store at path (creating and initialising it when new, if
 * may_create), checks that it is this pair's (page size, and a partition
 * named node_id or a free one, which this node then claims) and returns it.
 * Errors name the store and what does not match; err gets one line. */
int store_open(const char *path, uint64_t size, uint32_t page_size, const char *node_id,
	       bool may_create, struct store **ret, char *err, size_t err_len);
void store_close(struct store *s);
/* This node's flash device ([flash] path, node/vmm/MEDIA.md): the same
 * header with kind flash, made with one partition on a first start, and
 * the partition named node_id (or the first free one, claimed). Its queue
 * reads and writes with O_DIRECT where the file system allows runs of whole
 * pages so (store_direct), else through the page cache, which is logged. */
int store_open_flash(const char *path, uint64_t size, uint32_t page_size, const char *node_id,
		     struct store **ret, char *err, size_t err_len);
bool store_direct(const struct store *s);

/* `ftvmctl store show`: the header of the store (or flash device) at path,
 * read and checked. Errors name path and what is wrong in err. */
int store_read_layout(const char *path, struct store_layout *ret, char *err, size_t err_len);
/* `ftvmctl store init`: writes l (checked) as path's header, clears the
 * fence slots and reserves l->size bytes for a file. -EEXIST, saying so,
 * when path holds a header already, unless force; -EAGAIN while a
 * node has it open. */
int store_init(const char *path, const struct store_layout *l, bool force, char *err,
	       size_t err_len);

/* The fd the queue reads and writes (never closed by it). */
int store_fd(const struct store *s);
/* The store's random id, made when it was initialised: the pair's store. */
void store_id(const struct store *s, uint64_t ret_id[2]);
/* This node's partition: [start, start + length). */
uint64_t store_partition_start(const struct store *s);
uint64_t store_partition_length(const struct store *s);
/* Whether [offset, offset + length) lies in this node's partition, or in
 * its partner's (the other writable one; its place is fixed when the store
 * is made, claimed or not). */
bool store_extent_fits(const struct store *s, bool partner, uint64_t offset, uint64_t length);
/* This node's partition (or its partner's): start and length. */
void store_partition_range(const struct store *s, bool partner, uint64_t *ret_start,
			   uint64_t *ret_length);
/* 0 or 1: whether this node's partition is the first or the second
 * writable one of the table, and so which fence slot is its. */
unsigned store_partition_index(const struct store *s);

/* The sector each node writes its fence slot to (index: its partition's), and
 * the one its partner writes fence requests to. */
uint64_t store_slot_offset(unsigned index);
uint64_t store_mailbox_offset(unsigned index);

/* Bytes an extent for pages blocks of block_size takes. */
uint64_t store_extent_size(uint32_t page_size, uint64_t pages, uint32_t block_size);
/* Offsets inside an extent that starts at extent. */
uint64_t store_record_offset(uint64_t extent, uint64_t page);
uint64_t store_block_offset(uint64_t extent, uint32_t page_size, uint64_t pages,
			    uint32_t block_size, uint64_t page);
