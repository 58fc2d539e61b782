/* Room for allocations on this node's devices: an extent (records, then
 * blocks: storage/store.h) in its partition of the store for each
 * allocation homed here, and one on its flash for each allocation whose
 * copy here rests there (node/vmm/MEDIA.md): in flash's server memory, or
 * for a volume in its storage cache. First fit, between the extents of the
 * table's allocations and of those still being made. */
#include "vmm_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "store.h"
#include "store_queue.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct extent {
	uint64_t start, end;
};

static uint64_t extent_size(const struct vmm *v, const struct vmm_alloc *a)
{
	return store_extent_size(v->config->page_size, a->pages, a->block_size);
}

/* a's extent on device, if it has one there. */
static bool extent_of(const struct vmm *v, const struct vmm_alloc *a, enum vmm_device device,
		      struct extent *ret)
{
	uint64_t at;

	if (device == VMM_DEVICE_STORE && strcmp(a->home, vmm_node_id(v)) != 0)
		return false;
	if (device != VMM_DEVICE_STORE && a->media != VMM_MEDIA_FLASH)
		return false;
	at = device == VMM_DEVICE_STORE ? a->store_offset : a->flash_offset;
	*ret = (struct extent){ at, at + extent_size(v, a) };
	return true;
}

static int by_start(const void *x, const void *y)
{
	const struct extent *a = x, *b = y;

	return a->start < b->start ? -1 : a->start > b->start;
}

/* The extents in use on device, sorted (on flash, those a resync keeps
 * for its copies too). NULL on ENOMEM. */
static struct extent *used_extents(struct vmm *v, enum vmm_device device, size_t *ret_n)
{
	size_t n = 0, n_used = 0;
	size_t n_kept = device != VMM_DEVICE_STORE ? vmm_flash_kept_extents(v, NULL) : 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);
	struct extent *used = calloc(n + v->n_extents_reserved + n_kept + 1, sizeof(*used));
	struct store_range *kept = calloc(n_kept + 1, sizeof(*kept));

	if (!all || !used || !kept) {
		free(all);
		free(used);
		free(kept);
		return NULL;
	}
	for (size_t i = 0; i < n; i++)
		n_used += extent_of(v, all[i], device, &used[n_used]);
	for (size_t i = 0; i < v->n_extents_reserved; i++)
		n_used += extent_of(v, v->extents_reserved[i], device, &used[n_used]);
	vmm_flash_kept_extents(v, n_kept ? kept : NULL);
	for (size_t i = 0; i < n_kept; i++)
		used[n_used++] = (struct extent){ kept[i].start, kept[i].start + kept[i].length };
	free(kept);
	qsort(used, n_used, sizeof(*used), by_start);
	free(all);
	*ret_n = n_used;
	return used;
}

/* Where extents go: this node's partition of the store, or its flash's
 * server memory or storage cache (vmm/partitions.c). */
static void device_range(const struct vmm *v, enum vmm_device device, uint64_t *ret_start,
			 uint64_t *ret_length)
{
	uint64_t server;

	store_partition_range(device == VMM_DEVICE_STORE ? v->store : v->flash, false, ret_start,
			      ret_length);
	if (device == VMM_DEVICE_STORE)
		return;
	server = v->flash_server_length < *ret_length ? v->flash_server_length : *ret_length;
	if (device == VMM_DEVICE_FLASH) {
		*ret_length = server;
	} else {
		*ret_start += server;
		*ret_length -= server;
	}
}

int vmm_extent_find(struct vmm *v, enum vmm_device device, const struct vmm_alloc *a,
		    uint64_t *ret_offset)
{
	uint64_t at, length, end, size = extent_size(v, a);
	size_t n_used = 0;
	struct extent *used = used_extents(v, device, &n_used);
	int r = -ENOSPC;

	if (!used)
		return -ENOMEM;
	device_range(v, device, &at, &length);
	end = at + length;
	/* Flash's two partitions share the list: extents past the range end it. */
	for (size_t i = 0; i <= n_used; i++) {
		uint64_t next = i < n_used && used[i].start < end ? used[i].start : end;

		if (next >= at && next - at >= size) {
			*ret_offset = at;
			r = 0;
			break;
		}
		if (next == end)
			break;
		if (used[i].end > at)
			at = used[i].end;
	}
	free(used);
	return r;
}

void vmm_extent_space(struct vmm *v, enum vmm_device device, uint64_t *ret_free,
		      uint64_t *ret_total)
{
	size_t n_used = 0;
	struct extent *used = used_extents(v, device, &n_used);
	uint64_t in_use = 0, start, end;

	device_range(v, device, &start, ret_total);
	end = start + *ret_total;
	for (size_t i = 0; used && i < n_used; i++) {
		uint64_t from = used[i].start > start ? used[i].start : start;
		uint64_t to = used[i].end < end ? used[i].end : end;

		in_use += to > from ? to - from : 0;
	}
	*ret_free = used && in_use < *ret_total ? *ret_total - in_use : 0;
	free(used);
}

int vmm_store_extent(struct vmm *v, struct vmm_alloc *a)
{
	struct vmm_alloc **grown;
	int r;

	grown = realloc(v->extents_reserved, (v->n_extents_reserved + 1) * sizeof(*grown));
	if (!grown)
		return -ENOMEM;
	v->extents_reserved = grown;
	r = vmm_extent_find(v, VMM_DEVICE_STORE, a, &a->store_offset);
	if (r < 0)
		return r;
	v->extents_reserved[v->n_extents_reserved++] = a;
	log_debug("allocation %s: extent at %llu, %llu bytes, in %s's partition", a->guid,
		  (unsigned long long)a->store_offset, (unsigned long long)extent_size(v, a),
		  vmm_node_id(v));
	return 0;
}

void vmm_store_space(struct vmm *v, uint64_t *ret_free, uint64_t *ret_total)
{
	vmm_extent_space(v, VMM_DEVICE_STORE, ret_free, ret_total);
}

void vmm_store_extent_done(struct vmm *v, struct vmm_alloc *a)
{
	for (size_t i = 0; i < v->n_extents_reserved; i++)
		if (v->extents_reserved[i] == a) {
			v->extents_reserved[i] = v->extents_reserved[--v->n_extents_reserved];
			return;
		}
}
