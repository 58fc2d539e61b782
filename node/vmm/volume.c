/* Block volumes (vmm/VMM.md, "Volumes"): allocations of the pair whose
 * pages are a volume's blocks, cached in the storage cache partition and
 * resting in their home's partition of the store; served over NBD. */
#include "vmm_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

bool vmm_volume_name_taken(struct vmm *v, const char *name)
{
	if (vmm_table_find_volume(v->table, name))
		return true;
	for (size_t i = 0; i < v->n_extents_reserved; i++)
		if (strcmp(v->extents_reserved[i]->volume, name) == 0)
			return true;
	return false;
}

bool vmm_volume_request_valid(struct vmm *v, struct client_call *call,
			      const Ftvm__Client__AllocRequest *req)
{
	if (!config_volume_name_valid(req->volume)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"volume name '%.80s%s': want 1 to %d of [A-Za-z0-9._-], not "
				"starting with '-' or '.'",
				req->volume, strlen(req->volume) > 80 ? "..." : "",
				CONFIG_CLIENT_NAME_MAX);
		return false;
	}
	if (req->policy[0] || req->session[0]) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"volume %s: a volume has no policy and no session", req->volume);
		return false;
	}
	if (vmm_volume_name_taken(v, req->volume)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_DENIED, "volume %s exists",
				req->volume);
		return false;
	}
	if (!frame_pool_cache_frames(v->pool)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_DENIED,
				"%s has no storage cache to serve volume %s from: set [memory] "
				"cache = N%% (node/vmm/MEDIA.md)",
				vmm_node_id(v), req->volume);
		return false;
	}
	return true;
}

void vmm_op_free_volume(struct vmm *v, struct client_call *call, const char *name)
{
	struct vmm_alloc *a = vmm_table_find_volume(v->table, name);

	if (!a) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND, "no volume %.80s",
				name);
		return;
	}
	vmm_op_free(v, call, a->guid);
}

int vmm_volume_info(struct vmm *v, const char *name, struct vmm_volume_info *ret)
{
	struct vmm_alloc *a = vmm_table_find_volume(v->table, name);

	if (!a)
		return -ENOENT;
	snprintf(ret->guid, sizeof(ret->guid), "%s", a->guid);
	ret->size = a->size;
	ret->block_size = a->block_size;
	return 0;
}

void vmm_volume_names(struct vmm *v, void (*fn)(void *ctx, const char *name), void *ctx)
{
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);

	for (size_t i = 0; all && i < n; i++)
		if (vmm_alloc_is_volume(all[i]))
			fn(ctx, all[i]->volume);
	free(all);
}

uint64_t vmm_volume_read_ahead(struct vmm *v, const char *guid, uint64_t first, uint64_t n)
{
	struct vmm_alloc *a = vmm_table_find(v->table, guid);
	enum vmm_mode mode = vmm_mode(v);
	uint64_t staged = 0;
	char why[200];

	if (!a || !vmm_alloc_is_volume(a) ||
	    (mode != VMM_MODE_MIRRORED && mode != VMM_MODE_SOLO && mode != VMM_MODE_SOLO_READ))
		return 0;
	for (uint64_t i = first; i < a->pages && i - first < n; i++) {
		struct vmm_page *p = &a->page[i];

		if (p->resident || p->pagein || p->filling || p->stale)
			continue;
		if (vmm_page_make_resident(v, a, i, why, sizeof(why)) < 0)
			break; /* no frames, or the store refuses: a hint, dropped */
		p->read_ahead = true;
		staged++;
	}
	v->counted.readahead_pages += staged;
	return staged;
}
