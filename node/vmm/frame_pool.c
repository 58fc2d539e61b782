#define _GNU_SOURCE /* memfd_create, fallocate */
#include "frame_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

/* A block's states (replica/RDMA.md, "The pool grows and shrinks"):
 *
 *   in use  --frame_pool_shrink: wholly free, enough free elsewhere-->  out
 *   out     --frame_pool_take: no run free in the blocks in use------>  in use
 *
 * Out, a block has no frame taken and its memory was punched out of the
 * memfd; it comes back as zeroes. */
struct pool_block {
	bool in_use;
	uint64_t n_free[FRAME_PARTITIONS];
};

struct frame_pool {
	int fd;
	uint8_t *base;
	uint64_t size;
	uint32_t page_size;
	uint64_t total;
	/* Frames below it are server memory; those from it on are the storage
	 * cache's (vmm/MEDIA.md, "The memory partition table"). */
	uint64_t limit;
	uint64_t n_free[FRAME_PARTITIONS]; /* in every block, in use or not */
	uint64_t *used;			   /* one bit per frame */
	uint64_t block_frames;
	uint32_t n_blocks;
	struct pool_block *block;
	uint64_t grown, shrunk;
	frame_pool_block_fn block_fn;
	void *block_arg;
};

static bool is_used(const struct frame_pool *p, uint64_t f)
{
	return p->used[f / 64] >> (f % 64) & 1;
}

static void mark(struct frame_pool *p, uint64_t first, uint32_t n, bool used)
{
	for (uint64_t f = first; f < first + n; f++) {
		if (used)
			p->used[f / 64] |= 1ull << (f % 64);
		else
			p->used[f / 64] &= ~(1ull << (f % 64));
	}
}

/* The frames of partition part: [first, end) of the pool. */
static void partition_range(const struct frame_pool *p, enum frame_partition part, uint64_t *first,
			    uint64_t *end)
{
	*first = part == FRAME_SERVER ? 0 : p->limit;
	*end = part == FRAME_SERVER ? p->limit : p->total;
}

/* Block b's frames of partition part: [*first, *end), empty when it has none. */
static void block_range(const struct frame_pool *p, uint32_t b, enum frame_partition part,
			uint64_t *first, uint64_t *end)
{
	uint64_t lo, hi, b_lo = (uint64_t)b * p->block_frames, b_hi = b_lo + p->block_frames;

	partition_range(p, part, &lo, &hi);
	*first = b_lo > lo ? b_lo : lo;
	*end = b_hi < hi ? b_hi : hi;
	if (*end < *first)
		*end = *first;
}

static uint64_t block_len(const struct frame_pool *p, uint32_t b, enum frame_partition part)
{
	uint64_t first, end;

	block_range(p, b, part, &first, &end);
	return end - first;
}

enum frame_partition frame_pool_partition_of(const struct frame_pool *p, uint64_t frame)
{
	return frame < p->limit ? FRAME_SERVER : FRAME_CACHE;
}

/* Counts every frame free, by partition. */
static void count_free(struct frame_pool *p)
{
	for (int part = 0; part < FRAME_PARTITIONS; part++) {
		p->n_free[part] = 0;
		for (uint32_t b = 0; b < p->n_blocks; b++) {
			p->block[b].n_free[part] = block_len(p, b, part);
			p->n_free[part] += p->block[b].n_free[part];
		}
	}
}

int frame_pool_new(uint64_t size, uint32_t page_size, uint64_t block_frames,
		   struct frame_pool **ret)
{
	struct frame_pool *p = calloc(1, sizeof(*p));
	int r;

	if (!p)
		return -ENOMEM;
	p->fd = -1;
	p->size = size;
	p->page_size = page_size;
	p->total = size / page_size;
	p->limit = p->total;
	p->block_frames = block_frames && block_frames < p->total ? block_frames : p->total;
	if (p->total == 0 || (p->total - 1) / p->block_frames >= UINT32_MAX) {
		r = -EINVAL;
		goto fail;
	}
	p->n_blocks = (uint32_t)((p->total - 1) / p->block_frames + 1);
	p->used = calloc((p->total + 63) / 64, sizeof(uint64_t));
	p->block = calloc(p->n_blocks, sizeof(*p->block));
	if (!p->used || !p->block) {
		r = -ENOMEM;
		goto fail;
	}
	count_free(p);
	p->block[0].in_use = true;
	p->fd = memfd_create("ftvm-frames", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (p->fd < 0) {
		r = -errno;
		goto fail;
	}
	/* Clients are passed this fd (to map the pool): sealed, none of them
	 * can change its size, which would take the node down with SIGBUS, nor
	 * add seals of its own. Punching holes (frame_pool_shrink) changes no
	 * size and stays allowed. */
	if (ftruncate(p->fd, (off_t)size) < 0 ||
	    fcntl(p->fd, F_ADD_SEALS, F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL) < 0) {
		r = -errno;
		goto fail;
	}
	p->base = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, p->fd, 0);
	if (p->base == MAP_FAILED) {
		p->base = NULL;
		r = -errno;
		goto fail;
	}
	*ret = p;
	return 0;
fail:
	frame_pool_free(p);
	return r;
}

void frame_pool_free(struct frame_pool *p)
{
	if (!p)
		return;
	if (p->base)
		munmap(p->base, p->size);
	if (p->fd >= 0)
		close(p->fd);
	free(p->used);
	free(p->block);
	free(p);
}

int frame_pool_set_cache(struct frame_pool *p, uint64_t cache_frames)
{
	if (cache_frames >= p->total)
		return -EINVAL;
	if (p->n_free[FRAME_SERVER] + p->n_free[FRAME_CACHE] != p->total)
		return -EBUSY;
	p->limit = p->total - cache_frames;
	count_free(p);
	return 0;
}

void frame_pool_set_block_fn(struct frame_pool *p, frame_pool_block_fn fn, void *arg)
{
	p->block_fn = fn;
	p->block_arg = arg;
}

/* First fit of n frames of partition part in block b. */
static int take_in(struct frame_pool *p, uint32_t b, enum frame_partition part, uint32_t n,
		   uint64_t *ret_first)
{
	uint64_t first, end, run = 0, start = 0;

	block_range(p, b, part, &first, &end);
	if (p->block[b].n_free[part] < n)
		return -ENOSPC;
	for (uint64_t f = first; f < end; f++) {
		if (f % 64 == 0 && f + 64 <= end && p->used[f / 64] == UINT64_MAX) {
			run = 0;
			f += 63; /* a word of taken frames at once */
			continue;
		}
		if (is_used(p, f)) {
			run = 0;
			continue;
		}
		if (run++ == 0)
			start = f;
		if (run == n) {
			mark(p, start, n, true);
			p->block[b].n_free[part] -= n;
			p->n_free[part] -= n;
			*ret_first = start;
			return 0;
		}
	}
	return -ENOSPC;
}

int frame_pool_take_from(struct frame_pool *p, enum frame_partition part, uint32_t n,
			 uint64_t *ret_first)
{
	if (n == 0 || n > p->block_frames)
		return -EINVAL;
	for (uint32_t b = 0; b < p->n_blocks; b++)
		if (p->block[b].in_use && take_in(p, b, part, n, ret_first) == 0)
			return 0;
	/* Grow before anyone evicts: the lowest block not in use that holds n. */
	for (uint32_t b = 0; b < p->n_blocks; b++) {
		if (p->block[b].in_use || block_len(p, b, part) < n)
			continue;
		p->block[b].in_use = true;
		p->grown++;
		if (p->block_fn)
			p->block_fn(b, true, p->block_arg);
		return take_in(p, b, part, n, ret_first);
	}
	return -ENOSPC;
}

int frame_pool_take(struct frame_pool *p, uint32_t n, uint64_t *ret_first)
{
	return frame_pool_take_from(p, FRAME_SERVER, n, ret_first);
}

void frame_pool_give(struct frame_pool *p, uint64_t first, uint32_t n)
{
	enum frame_partition part = frame_pool_partition_of(p, first);

	mark(p, first, n, false);
	p->block[first / p->block_frames].n_free[part] += n;
	p->n_free[part] += n;
}

int frame_pool_shrink(struct frame_pool *p, uint32_t *ret_block)
{
	uint64_t in_use_free = 0;

	for (uint32_t b = 0; b < p->n_blocks; b++)
		if (p->block[b].in_use)
			in_use_free +=
				p->block[b].n_free[FRAME_SERVER] + p->block[b].n_free[FRAME_CACHE];
	for (uint32_t b = p->n_blocks - 1; b > 0; b--) {
		uint64_t len = block_len(p, b, FRAME_SERVER) + block_len(p, b, FRAME_CACHE);

		if (!p->block[b].in_use ||
		    p->block[b].n_free[FRAME_SERVER] + p->block[b].n_free[FRAME_CACHE] != len ||
		    in_use_free - len < p->block_frames)
			continue;
		p->block[b].in_use = false;
		p->shrunk++;
		*ret_block = b;
		if (p->block_fn)
			p->block_fn(b, false, p->block_arg);
		if (fallocate(p->fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
			      (off_t)((uint64_t)b * p->block_frames * p->page_size),
			      (off_t)(len * p->page_size)) < 0)
			return -errno;
		return 1;
	}
	return 0;
}

void *frame_pool_addr(const struct frame_pool *p, uint64_t frame)
{
	return p->base + frame * p->page_size;
}

uint64_t frame_pool_total(const struct frame_pool *p)
{
	return p->total;
}

uint64_t frame_pool_server_frames(const struct frame_pool *p)
{
	return p->limit;
}

uint64_t frame_pool_free_count(const struct frame_pool *p)
{
	return p->n_free[FRAME_SERVER];
}

uint64_t frame_pool_cache_frames(const struct frame_pool *p)
{
	return p->total - p->limit;
}

uint64_t frame_pool_cache_free_count(const struct frame_pool *p)
{
	return p->n_free[FRAME_CACHE];
}

uint32_t frame_pool_page_size(const struct frame_pool *p)
{
	return p->page_size;
}

uint64_t frame_pool_block_frames(const struct frame_pool *p)
{
	return p->block_frames;
}

bool frame_pool_block_in_use(const struct frame_pool *p, uint32_t block)
{
	return block < p->n_blocks && p->block[block].in_use;
}

void frame_pool_get_stats(const struct frame_pool *p, struct frame_pool_stats *ret)
{
	*ret = (struct frame_pool_stats){
		.blocks = p->n_blocks,
		.block_frames = p->block_frames,
		.grown = p->grown,
		.shrunk = p->shrunk,
	};
	for (uint32_t b = 0; b < p->n_blocks; b++)
		ret->blocks_in_use += p->block[b].in_use;
}

int frame_pool_fd(const struct frame_pool *p)
{
	return p->fd;
}
