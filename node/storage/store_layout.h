/* The header at offset 0 of a shared store or of a node's flash device: what
 * the device is, its page size, and its partition table with each
 * partition's access (seed 004's management interface; the format, the
 * rules and why are in storage/STORAGE.md). Only bytes in memory here: the
 * files are store.c's. Everything read is checked before it is believed, as
 * it comes from a disk another process wrote. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#define STORE_PARTITIONS_MAX 16u
/* What is read and written at offset 0 (the header sector). */
#define STORE_HEADER_SECTOR 4096u
/* Version 1's header: two partitions, no access, no kind (a store). */
#define STORE_HEADER_V1_SIZE 160u

enum store_kind {
	STORE_KIND_STORE = 1, /* shared by the pair: a partition per node */
	STORE_KIND_FLASH = 2, /* one node's own */
};

enum store_access {
	STORE_ACCESS_RW = 0, /* written by the node it names (STORAGE.md, "Access") */
	STORE_ACCESS_RO = 1, /* never written */
};

struct store_layout_partition {
	char id[CONFIG_ID_MAX + 1]; /* "" while no node has claimed it */
	uint64_t start, length;
	enum store_access access;
};

struct store_layout {
	uint32_t version; /* the format it was read in, and is written back in */
	enum store_kind kind;
	uint32_t page_size;
	uint8_t id[16]; /* random, made at init: this pair's store */
	uint64_t size;	/* bytes, the header's included */
	unsigned n;
	struct store_layout_partition part[STORE_PARTITIONS_MAX];
};

/* A new device of size bytes, what a first start without `ftvmctl store
 * init` (or `flash init`) makes: a store has two partitions of equal size, a
 * flash device one of all its space, unclaimed. */
void store_layout_default(struct store_layout *l, enum store_kind kind, uint64_t size,
			  uint32_t page_size);

/* Whether buf (len bytes from offset 0) begins as a header does. */
#define STORE_MAGIC_SIZE 8u
bool store_layout_is_header(const void *buf, size_t len);

/* Reads and checks len bytes read at offset 0 of path (named in errors):
 * -EBADMSG (not a header, a bad checksum, partitions that overlap or leave
 * the device...), -EPROTONOSUPPORT (a version this build does not know).
 * err names path and what is wrong. */
int store_layout_decode(const void *buf, size_t len, const char *path, struct store_layout *ret,
			char *err, size_t err_len);
/* Writes l in its version's format into buf (STORE_HEADER_SECTOR bytes,
 * zeroed past the header). l must pass store_layout_check. */
void store_layout_encode(const struct store_layout *l, void *buf);
/* The rules every layout keeps, read or made (STORAGE.md, "The header"). */
int store_layout_check(const struct store_layout *l, const char *path, char *err, size_t err_len);

/* The partition node_id writes: the writable one it names, else the first
 * writable one nobody claimed, which is then claimed in l (*ret_claimed).
 * -EPERM, naming the nodes that have them, when there is none. */
int store_layout_claim(struct store_layout *l, const char *path, const char *node_id,
		       bool *ret_claimed, char *err, size_t err_len);
/* A store's other writable partition: its partner's (claimed or not). */
unsigned store_layout_partner(const struct store_layout *l, unsigned mine);

/* `ftvmctl store init`'s settings: the device's size and page size, then
 * each partition as "ID=SIZE[@OFFSET]" (SIZE in bytes with K, M or G, or
 * N% of the space after the header; placed after the one before it unless
 * OFFSET says where) and access as "ID=rw|ro". No partitions: the default
 * two. err says which setting is wrong and why. */
struct store_settings {
	enum store_kind kind;
	uint64_t size;
	uint32_t page_size;
	const char *const *partitions;
	size_t n_partitions;
	const char *const *access;
	size_t n_access;
};
int store_layout_from_settings(const struct store_settings *s, struct store_layout *ret, char *err,
			       size_t err_len);

const char *store_kind_name(enum store_kind kind);	 /* "store", "flash" */
const char *store_access_name(enum store_access access); /* "rw", "ro" */
