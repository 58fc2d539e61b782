/* The node's frame pool: memory_size bytes in page_size frames, in one memfd
 * so that local clients can map it (read and write pointers are real
 * pointers). A page of block_size bytes takes a run of contiguous frames. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct frame_pool;

int frame_pool_new(uint64_t size, uint32_t page_size, struct frame_pool **ret);
void frame_pool_free(struct frame_pool *p);

/* The first frame of a free run of n frames (first fit); -ENOSPC when no run
 * that long is free. */
int frame_pool_take(struct frame_pool *p, uint32_t n, uint64_t *ret_first);
/* frame_pool_take, with the run inside one block of boundary_frames frames
 * (frames [k * boundary_frames, (k + 1) * boundary_frames)): a landing run
 * must lie in one registration block (replica/RDMA.md). -EINVAL when n is
 * larger than a block (or boundary_frames is 0), -ENOSPC when no such run is
 * free. */
int frame_pool_take_within(struct frame_pool *p, uint32_t n, uint64_t boundary_frames,
			   uint64_t *ret_first);
void frame_pool_give(struct frame_pool *p, uint64_t first, uint32_t n);

void *frame_pool_addr(const struct frame_pool *p, uint64_t frame);
uint64_t frame_pool_total(const struct frame_pool *p);
uint64_t frame_pool_free_count(const struct frame_pool *p);
uint32_t frame_pool_page_size(const struct frame_pool *p);
int frame_pool_fd(const struct frame_pool *p);
