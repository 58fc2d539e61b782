/* Frames on demand and the replacement queue (vmm/VMM.md, "Replacement"): a
 * page takes frames when it is first needed, from the free pool or by
 * evicting the least recently used clean, unlocked page; a locked page is
 * never evicted, nor a dirty one unless this node's flash holds it, nor one
 * of a copy resting in DRAM (node/vmm/MEDIA.md). */
#include "vmm_state.h"

#include <assert.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "log.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

static bool evictable(const struct vmm_page *p)
{
	return p->resident && p->alloc->media != VMM_MEDIA_DRAM &&
	       (!p->dirty || vmm_page_on_flash(p)) && !p->destaging && !p->flashing &&
	       p->n_owners == 0 && p->pins == 0;
}

static struct vmm_lru *lru_of(struct vmm *v, const struct vmm_page *p)
{
	return &v->lru[vmm_alloc_partition(p->alloc)];
}

static void lru_unlink(struct vmm *v, struct vmm_page *p)
{
	struct vmm_lru *q = lru_of(v, p);

	*(p->lru_prev ? &p->lru_prev->lru_next : &q->head) = p->lru_next;
	*(p->lru_next ? &p->lru_next->lru_prev : &q->tail) = p->lru_prev;
	p->lru_prev = p->lru_next = NULL;
	p->in_lru = false;
	q->length--;
}

static void lru_append(struct vmm *v, struct vmm_page *p)
{
	struct vmm_lru *q = lru_of(v, p);

	p->lru_prev = q->tail;
	p->lru_next = NULL;
	*(q->tail ? &q->tail->lru_next : &q->head) = p;
	q->tail = p;
	p->in_lru = true;
	q->length++;
}

void vmm_replace_update(struct vmm *v, struct vmm_page *p)
{
	bool want = evictable(p);

	if (want && !p->in_lru)
		lru_append(v, p);
	else if (!want && p->in_lru)
		lru_unlink(v, p);
}

void vmm_replace_touch(struct vmm *v, struct vmm_page *p)
{
	if (!p->in_lru || p == lru_of(v, p)->tail)
		return;
	lru_unlink(v, p);
	lru_append(v, p);
}

void vmm_pin(struct vmm *v, struct vmm_page *p)
{
	p->pins++;
	vmm_replace_update(v, p);
}

void vmm_unpin(struct vmm *v, struct vmm_page *p)
{
	assert(p->pins > 0);
	p->pins--;
	vmm_replace_update(v, p);
}

void vmm_frames_give(struct vmm *v, uint64_t frame, uint32_t block_size)
{
	frame_pool_give(v->pool, frame, block_size / frame_pool_page_size(v->pool));
}

void vmm_page_attach(struct vmm *v, struct vmm_page *p, uint64_t frame)
{
	assert(!p->resident);
	p->frame = frame;
	p->resident = true;
	v->resident_pages++;
	vmm_replace_update(v, p);
	/* A flash-resting copy keeps every page there, not only those written
	 * here: one paged in from the store, or landed by a resync, goes too. */
	vmm_flash_page(v, p->alloc, vmm_page_index(p));
}

/* p is not resident any more; its frames are still taken. */
static void leave_frames(struct vmm *v, struct vmm_page *p)
{
	p->resident = false;
	vmm_replace_update(v, p);
	v->resident_pages--;
}

void vmm_page_detach(struct vmm *v, struct vmm_page *p)
{
	if (!p->resident)
		return;
	leave_frames(v, p);
	vmm_frames_give(v, p->frame, p->alloc->block_size);
}

uint64_t vmm_page_take_frames(struct vmm *v, struct vmm_page *p)
{
	assert(p->resident);
	leave_frames(v, p);
	return p->frame;
}

/* The page at the head of the replacement queue goes: its frames are the
 * caller's now. */
static uint64_t evict(struct vmm *v, struct vmm_page *p)
{
	log_debug("evicted %s page %llu (version %llu): its frames were wanted", p->alloc->guid,
		  (unsigned long long)vmm_page_index(p), (unsigned long long)p->version);
	leave_frames(v, p);
	v->counted.evictions++;
	v->counted.dirty_evictions += p->dirty;
	if (p->read_ahead) {
		p->read_ahead = false;
		v->counted.readahead_wasted++;
	}
	return p->frame;
}

static int short_of_frames(struct vmm *v, enum frame_partition part, uint32_t n, char *reason,
			   size_t reason_len)
{
	const char *where = part == FRAME_CACHE ? " in its storage cache" : "";
	uint64_t free_frames = part == FRAME_CACHE ? frame_pool_cache_free_count(v->pool)
						   : frame_pool_free_count(v->pool);

	if (!frame_pool_cache_frames(v->pool) && part == FRAME_CACHE)
		snprintf(reason, reason_len, "%s has no storage cache ([memory] cache = 0%%)",
			 vmm_node_id(v));
	else if (n == 1)
		snprintf(reason, reason_len,
			 "no frame free on %s%s: %llu resident pages, all dirty or locked",
			 vmm_node_id(v), where, (unsigned long long)v->resident_pages);
	else
		snprintf(reason, reason_len,
			 "no run of %u frames free on %s%s (%llu frames free): %llu resident "
			 "pages, all dirty or locked",
			 n, vmm_node_id(v), where, (unsigned long long)free_frames,
			 (unsigned long long)v->resident_pages);
	return -ENOSPC;
}

int vmm_frames_take(struct vmm *v, const struct vmm_alloc *a, uint64_t *ret_frame, char *reason,
		    size_t reason_len)
{
	uint32_t block_size = a->block_size, n = block_size / frame_pool_page_size(v->pool);
	enum frame_partition part = vmm_alloc_partition(a);

	while (frame_pool_take_from(v->pool, part, n, ret_frame) < 0) {
		struct vmm_page *victim = v->lru[part].head;
		uint64_t frame;

		if (!victim) {
			if (part == FRAME_SERVER) /* the partner's grants come back */
				pagedata_grants_revoke(v->pagedata);
			return short_of_frames(v, part, n, reason, reason_len);
		}
		frame = evict(v, victim);
		if (victim->alloc->block_size == block_size) {
			*ret_frame = frame; /* a run of the right length, as it is */
			return 0;
		}
		vmm_frames_give(v, frame, victim->alloc->block_size);
	}
	return 0;
}

int vmm_page_fill(struct vmm *v, struct vmm_alloc *a, uint64_t page, const void *data, char *reason,
		  size_t reason_len)
{
	struct vmm_page *p = &a->page[page];
	uint64_t frame;
	int r;

	if (!p->resident) {
		p->pagein = NULL; /* a read of the store in flight gives its own frames back */
		r = vmm_frames_take(v, a, &frame, reason, reason_len);
		if (r < 0)
			return r;
		vmm_page_attach(v, p, frame);
	}
	memcpy(vmm_block_addr(v, a, page), data, a->block_size);
	vmm_replace_touch(v, p);
	return 0;
}

void vmm_alloc_give_frames(struct vmm *v, struct vmm_alloc *a)
{
	/* A page-in's frames stay its read's until it completes: it then finds
	 * the allocation gone and gives them back. */
	for (uint64_t i = 0; i < a->pages; i++)
		vmm_page_detach(v, &a->page[i]);
	pagedata_landings_close_alloc(v->pagedata, a->guid);
}
