/* Where an allocation's copy on this node rests (node/vmm/MEDIA.md, "Where
 * a page rests"), chosen by its policy's performance and this node's room:
 *
 *   high      dram: a frame for every page, taken now and never evicted
 *   standard  dram when it has room, else flash, else (no flash) the store
 *   capacity  flash, else (no flash) the store
 *
 * DRAM's room is the frame pool: the frames promised to dram-resting copies
 * (every page of each) never pass the pool's ceiling, and a new one takes
 * its frames at once (evicting other pages), zeroed, as its pages are
 * version 0. A copy that comes with contents (a resync) is only promised its
 * frames: its pages take them when first used, and keep them. */
#include "vmm_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

static uint64_t frames_of(const struct vmm *v, const struct vmm_alloc *a)
{
	return a->pages * (a->block_size / frame_pool_page_size(v->pool));
}

/* Frames promised to dram-resting copies: those in the table and those
 * being made (not a, which is being placed). */
static uint64_t dram_promised(struct vmm *v, const struct vmm_alloc *a)
{
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);
	uint64_t sum = 0;

	for (size_t i = 0; all && i < n; i++)
		if (all[i]->media == VMM_MEDIA_DRAM && all[i] != a)
			sum += frames_of(v, all[i]);
	for (size_t i = 0; i < v->n_extents_reserved; i++)
		if (v->extents_reserved[i]->media == VMM_MEDIA_DRAM && v->extents_reserved[i] != a)
			sum += frames_of(v, v->extents_reserved[i]);
	free(all);
	return sum;
}

/* Every page of a new copy (version 0: zeroes) in frames of its own. */
static int take_frames(struct vmm *v, struct vmm_alloc *a, char *reason, size_t reason_len)
{
	uint64_t frame;

	for (uint64_t i = 0; i < a->pages; i++) {
		if (vmm_frames_take(v, a, &frame, reason, reason_len) < 0) {
			for (uint64_t k = 0; k < i; k++)
				vmm_page_detach(v, &a->page[k]);
			return -ENOSPC;
		}
		memset(frame_pool_addr(v->pool, frame), 0, a->block_size);
		vmm_page_attach(v, &a->page[i], frame);
	}
	return 0;
}

static int place_dram(struct vmm *v, struct vmm_alloc *a, enum vmm_place how, char *reason,
		      size_t reason_len)
{
	uint64_t total = frame_pool_server_frames(v->pool), promised = dram_promised(v, a);
	uint64_t need = frames_of(v, a);
	char why[200];

	if (promised > total || need > total - promised) {
		snprintf(reason, reason_len,
			 "%s's DRAM has %llu of its %llu frames not promised to other dram "
			 "allocations; %s needs %llu",
			 vmm_node_id(v),
			 (unsigned long long)(promised < total ? total - promised : 0),
			 (unsigned long long)total, a->guid, (unsigned long long)need);
		return -ENOSPC;
	}
	a->media = VMM_MEDIA_DRAM; /* promised from here: a later take counts it */
	if (how == VMM_PLACE_NEW && take_frames(v, a, why, sizeof(why)) < 0) {
		a->media = VMM_MEDIA_STORE;
		snprintf(reason, reason_len, "%s's DRAM: %s; %s needs %llu frames", vmm_node_id(v),
			 why, a->guid, (unsigned long long)need);
		return -ENOSPC;
	}
	return 0;
}

static int place_flash(struct vmm *v, struct vmm_alloc *a, enum vmm_place how, const char *perf,
		       char *reason, size_t reason_len)
{
	uint64_t free_bytes, total;
	int r;

	if (how != VMM_PLACE_CHECK) {
		r = vmm_flash_place(v, a);
	} else {
		r = vmm_extent_find(v, VMM_DEVICE_FLASH, a, &a->flash_offset);
		if (r == 0)
			a->media = VMM_MEDIA_FLASH;
	}

	if (r == -ENOSPC) {
		vmm_extent_space(v, VMM_DEVICE_FLASH, &free_bytes, &total);
		snprintf(reason, reason_len,
			 "%llu pages of %u bytes do not fit on %s's flash: %llu of %llu bytes "
			 "free; policy '%s' asks for %s",
			 (unsigned long long)a->pages, a->block_size, vmm_node_id(v),
			 (unsigned long long)free_bytes, (unsigned long long)total, a->policy,
			 perf);
	} else if (r < 0) {
		snprintf(reason, reason_len, "%s's flash: %s", vmm_node_id(v), strerror(-r));
	}
	return r;
}

static int place(struct vmm *v, struct vmm_alloc *a, enum vmm_place how, char *reason,
		 size_t reason_len)
{
	struct config_policy pol;
	enum config_performance perf = CONFIG_PERFORMANCE_CAPACITY;
	char dram_reason[256] = "";

	if (config_policy_find(v->config, a->policy, &pol))
		perf = pol.performance;
	a->media = VMM_MEDIA_STORE;
	/* A volume's pages take the storage cache's frames on demand and rest
	 * in the store; on flash's storage cache too when the whole volume
	 * fits there (fast destage, vmm/VMM.md "Volumes"), else in the store
	 * alone. */
	if (vmm_alloc_is_volume(a)) {
		if (!frame_pool_cache_frames(v->pool)) {
			snprintf(reason, reason_len,
				 "%s has no storage cache for a volume's pages: set [memory] "
				 "cache = N%%",
				 vmm_node_id(v));
			return -ENOSPC;
		}
		if (how == VMM_PLACE_RESYNC && vmm_flash_recall(v, a))
			return 0;
		if (how != VMM_PLACE_CHECK && v->flash && vmm_flash_place(v, a) < 0)
			a->media = VMM_MEDIA_STORE;
		return 0;
	}
	/* A copy a resync replaces keeps its place on flash, and what is
	 * there. */
	if (how == VMM_PLACE_RESYNC && perf != CONFIG_PERFORMANCE_HIGH && vmm_flash_recall(v, a))
		return 0;
	if (perf != CONFIG_PERFORMANCE_CAPACITY &&
	    place_dram(v, a, how, dram_reason, sizeof(dram_reason)) == 0)
		return 0;
	if (perf == CONFIG_PERFORMANCE_HIGH) {
		snprintf(reason, reason_len, "%s; policy '%s' asks for high", dram_reason,
			 a->policy);
		return -ENOSPC;
	}
	/* standard spills; capacity starts here. Without flash, the store. */
	if (!v->flash)
		return 0;
	return place_flash(v, a, how, config_performance_name(perf), reason, reason_len);
}

int vmm_media_place(struct vmm *v, struct vmm_alloc *a, enum vmm_place how, char *reason,
		    size_t reason_len)
{
	int r = place(v, a, how, reason, reason_len);

	if (r == -ENOSPC && how == VMM_PLACE_RESYNC) {
		log_warning("%s: %s: its copy rests in the store here", a->guid, reason);
		a->media = VMM_MEDIA_STORE;
		return 0;
	}
	if (r == 0 && how != VMM_PLACE_CHECK)
		log_debug("allocation %s rests on %s here", a->guid, vmm_media_name(a->media));
	return r;
}

int vmm_media_room(struct vmm *v, const char *policy, bool volume, uint64_t pages,
		   uint32_t block_size, enum vmm_media *ret_media, uint64_t *ret_free,
		   uint64_t *ret_total, char *reason, size_t reason_len)
{
	/* The shape of the copy, as place() reads it: nothing is taken. */
	struct vmm_alloc shape = { .guid = (char *)"it",
				   .policy = (char *)policy,
				   .volume = (char *)(volume ? "it" : ""),
				   .pages = pages,
				   .block_size = block_size };
	uint64_t page_size = frame_pool_page_size(v->pool);
	uint64_t total = frame_pool_server_frames(v->pool), promised;
	int r = vmm_media_place(v, &shape, VMM_PLACE_CHECK, reason, reason_len);

	if (r < 0)
		return r;
	*ret_media = shape.media;
	if (shape.media == VMM_MEDIA_DRAM) {
		promised = dram_promised(v, &shape);
		*ret_total = total * page_size;
		*ret_free = promised < total ? (total - promised) * page_size : 0;
	} else {
		vmm_extent_space(
			v, shape.media == VMM_MEDIA_FLASH ? VMM_DEVICE_FLASH : VMM_DEVICE_STORE,
			ret_free, ret_total);
	}
	return 0;
}
