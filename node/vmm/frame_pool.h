/* The node's frame pool: memory_size bytes in page_size frames, in one memfd
 * so that local clients can map it (read and write pointers are real
 * pointers). A page of block_size bytes takes a run of contiguous frames.
 *
 * The memfd keeps memory_size bytes (the ceiling), but frames are taken only
 * from the registration blocks in use (seed 000 on the pool, vmm/VMM.md "The pool
 * grows before it evicts"): a take that finds no free run in them brings in
 * the lowest block not in use, and frame_pool_shrink() lets a wholly free
 * block go, its memory punched out of the memfd. A run never crosses a
 * block, so a landing run has one registration. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct frame_pool;

/* The two partitions of the pool (vmm/MEDIA.md, "The memory partition
 * table"): a take from one never takes the other's frames. */
enum frame_partition {
	FRAME_SERVER, /* clients' allocations */
	FRAME_CACHE,  /* the storage cache: volumes' pages */
	FRAME_PARTITIONS
};

/* Told of every block that comes into use (in) or leaves it, as it happens
 * (inside frame_pool_take or frame_pool_shrink). */
typedef void (*frame_pool_block_fn)(uint32_t block, bool in, void *arg);

struct frame_pool_stats {
	uint32_t blocks;	/* the ceiling, in blocks (the last may be shorter) */
	uint32_t blocks_in_use; /* frames are taken from these only */
	uint64_t block_frames;
	uint64_t grown;	 /* blocks that came into use since the pool was made */
	uint64_t shrunk; /* ... and that left it */
};

/* size bytes in frames of page_size, in blocks of block_frames frames (0 or
 * more than the pool: one block). Block 0 is in use. */
int frame_pool_new(uint64_t size, uint32_t page_size, uint64_t block_frames,
		   struct frame_pool **ret);
void frame_pool_free(struct frame_pool *p);

void frame_pool_set_block_fn(struct frame_pool *p, frame_pool_block_fn fn, void *arg);

/* The last cache_frames frames are the storage cache's partition, taken
 * only by frame_pool_take_from(FRAME_CACHE); the rest is server memory.
 * Before any take: -EBUSY after one, -EINVAL when it would leave no server
 * memory. */
int frame_pool_set_cache(struct frame_pool *p, uint64_t cache_frames);

/* The first frame of a free run of n frames of server memory inside one
 * block: first fit in the blocks in use, else in the lowest block not in
 * use, which comes into use. -ENOSPC when no block has such a run, -EINVAL
 * when n is 0 or longer than a block. */
int frame_pool_take(struct frame_pool *p, uint32_t n, uint64_t *ret_first);
/* As frame_pool_take, from partition part (-ENOSPC always for an empty one). */
int frame_pool_take_from(struct frame_pool *p, enum frame_partition part, uint32_t n,
			 uint64_t *ret_first);
/* The partition frame lies in. */
enum frame_partition frame_pool_partition_of(const struct frame_pool *p, uint64_t frame);
/* Back to the partition the run lies in. */
void frame_pool_give(struct frame_pool *p, uint64_t first, uint32_t n);

/* Lets one block go, if one should: the highest block in use but block 0
 * that is wholly free, when the other blocks in use have at least a block's
 * worth of free frames between them (hysteresis: the next takes do not bring
 * it straight back). Its memory goes back to the OS. Returns 1 and the block
 * in *ret_block when one left, 0 when none should; -errno (the block left
 * anyway, *ret_block says which) when the OS did not take its memory. */
int frame_pool_shrink(struct frame_pool *p, uint32_t *ret_block);

void *frame_pool_addr(const struct frame_pool *p, uint64_t frame);
/* Frames up to the ceiling (what clients map), those of server memory
 * (frame_pool_set_cache), and those of server memory not taken (blocks not
 * in use count: they are memory the node may still take). */
uint64_t frame_pool_total(const struct frame_pool *p);
uint64_t frame_pool_server_frames(const struct frame_pool *p);
uint64_t frame_pool_free_count(const struct frame_pool *p);
/* The storage cache's frames, and those of them not taken. */
uint64_t frame_pool_cache_frames(const struct frame_pool *p);
uint64_t frame_pool_cache_free_count(const struct frame_pool *p);
uint32_t frame_pool_page_size(const struct frame_pool *p);
uint64_t frame_pool_block_frames(const struct frame_pool *p);
bool frame_pool_block_in_use(const struct frame_pool *p, uint32_t block);
void frame_pool_get_stats(const struct frame_pool *p, struct frame_pool_stats *ret);
int frame_pool_fd(const struct frame_pool *p);
