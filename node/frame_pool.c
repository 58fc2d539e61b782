#define _GNU_SOURCE /* memfd_create */
#include "frame_pool.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

struct frame_pool {
	int fd;
	uint8_t *base;
	uint64_t size;
	uint32_t page_size;
	uint64_t total;
	uint64_t n_free;
	uint64_t *used; /* one bit per frame */
	uint64_t hint;	/* where the next search starts */
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

int frame_pool_new(uint64_t size, uint32_t page_size, struct frame_pool **ret)
{
	struct frame_pool *p = calloc(1, sizeof(*p));
	int r;

	if (!p)
		return -ENOMEM;
	p->size = size;
	p->page_size = page_size;
	p->total = size / page_size;
	p->n_free = p->total;
	p->used = calloc((p->total + 63) / 64, sizeof(uint64_t));
	p->fd = memfd_create("ftvm-frames", MFD_CLOEXEC);
	if (!p->used || p->fd < 0) {
		r = p->used ? -errno : -ENOMEM;
		goto fail;
	}
	if (ftruncate(p->fd, (off_t)size) < 0) {
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
	free(p);
}

/* First fit from the hint, wrapping once. A run never crosses a multiple of
 * boundary frames (the end of the pool is one). */
static int take_run(struct frame_pool *p, uint32_t n, uint64_t boundary, uint64_t *ret_first)
{
	uint64_t run = 0, start = 0;

	if (n == 0 || n > p->n_free)
		return -ENOSPC;
	for (uint64_t i = 0; i < p->total; i++) {
		uint64_t f = (p->hint + i) % p->total;
		if (f % boundary == 0)
			run = 0; /* a run never wraps around the end, nor crosses a boundary */
		if (is_used(p, f)) {
			run = 0;
			continue;
		}
		if (run++ == 0)
			start = f;
		if (run == n) {
			mark(p, start, n, true);
			p->n_free -= n;
			p->hint = (start + n) % p->total;
			*ret_first = start;
			return 0;
		}
	}
	return -ENOSPC;
}

int frame_pool_take(struct frame_pool *p, uint32_t n, uint64_t *ret_first)
{
	return take_run(p, n, p->total, ret_first);
}

int frame_pool_take_within(struct frame_pool *p, uint32_t n, uint64_t boundary_frames,
			   uint64_t *ret_first)
{
	if (boundary_frames == 0 || n > boundary_frames)
		return -EINVAL;
	return take_run(p, n, boundary_frames, ret_first);
}

void frame_pool_give(struct frame_pool *p, uint64_t first, uint32_t n)
{
	mark(p, first, n, false);
	p->n_free += n;
}

void *frame_pool_addr(const struct frame_pool *p, uint64_t frame)
{
	return p->base + frame * p->page_size;
}

uint64_t frame_pool_total(const struct frame_pool *p)
{
	return p->total;
}

uint64_t frame_pool_free_count(const struct frame_pool *p)
{
	return p->n_free;
}

uint32_t frame_pool_page_size(const struct frame_pool *p)
{
	return p->page_size;
}

int frame_pool_fd(const struct frame_pool *p)
{
	return p->fd;
}
