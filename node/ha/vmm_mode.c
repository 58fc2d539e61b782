/* The memory manager's side of failover (node/ha/HA.md): the mode the methods
 * complete in, the epoch, and the takeover of the partner's allocations. The
 * decisions themselves are node/ha/ha.c's. */
#include "vmm_core.h"

#include "failover_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

const char *vmm_mode_name(enum vmm_mode mode)
{
	switch (mode) {
	case VMM_MODE_OFFLINE:
		return "offline";
	case VMM_MODE_MIRRORED:
		return "mirrored";
	case VMM_MODE_SOLO:
		return "solo";
	case VMM_MODE_SOLO_READ:
		return "solo, reads only";
	case VMM_MODE_FENCED:
		return "fenced";
	}
	return "unknown";
}

void vmm_set_mode(struct vmm *v, enum vmm_mode mode, const char *reason)
{
	struct failover_state *f = vmm_failover(v);
	bool solo = mode == VMM_MODE_SOLO || mode == VMM_MODE_SOLO_READ;
	bool was_solo = vmm_was_solo(v);

	if (f->mode != mode)
		log_info("memory manager: %s -> %s: %s", vmm_mode_name(f->mode),
			 vmm_mode_name(mode), reason);
	f->mode = mode;
	snprintf(f->mode_reason, sizeof(f->mode_reason), "%s", reason);
	if (mode == VMM_MODE_MIRRORED)
		vmm_journal_caught_up(v); /* the partner has it all again */
	/* Offline and fenced keep what was recorded: it tells a restart. */
	if (mode != VMM_MODE_FENCED && mode != VMM_MODE_OFFLINE && solo != was_solo) {
		struct pagetable *pt = vmm_pagetable(v);
		int r = pagetable_set_solo(pt, solo);

		if (r == 0)
			r = pagetable_commit(pt);
		if (r < 0)
			log_error_errno(r, "page table: cannot record solo: %s",
					pagetable_last_error(pt));
	}
	if (mode == VMM_MODE_FENCED) {
		char why[320];

		snprintf(why, sizeof(why), "node %s is fenced (%s): its partner serves",
			 vmm_node_id(v), reason);
		vmm_space_waiters_fail(v);
		vmm_page_waiters_fail(v, FTVM__PARTNER__STATUS__STATUS_FENCED, why);
		vmm_holdings_revoke(v);
	}
	vmm_window_check(v);
}

void vmm_mode_mirrored_at_snapshot(struct vmm *v)
{
	vmm_failover(v)->mode = VMM_MODE_MIRRORED;
}

enum vmm_mode vmm_mode(const struct vmm *v)
{
	return vmm_failover(v)->mode;
}

const char *vmm_mode_reason(const struct vmm *v)
{
	return vmm_failover(v)->mode_reason;
}

uint64_t vmm_epoch(const struct vmm *v)
{
	return vmm_failover(v)->epoch;
}

int vmm_epoch_load(struct vmm *v)
{
	return pagetable_epoch(vmm_pagetable(v), &vmm_failover(v)->epoch);
}

int vmm_set_epoch(struct vmm *v, uint64_t epoch)
{
	struct pagetable *pt = vmm_pagetable(v);
	int r = pagetable_set_epoch(pt, epoch);

	if (r == 0)
		r = pagetable_commit(pt);
	if (r < 0)
		return log_error_errno(r, "page table: cannot record epoch %llu: %s",
				       (unsigned long long)epoch, pagetable_last_error(pt));
	vmm_failover(v)->epoch = epoch;
	if (vmm_session(v))
		repl_session_set_epoch(vmm_session(v), epoch);
	return 0;
}

bool vmm_was_solo(struct vmm *v)
{
	struct pagetable *pt = vmm_pagetable(v);
	bool solo = false;

	if (pagetable_solo(pt, &solo) < 0)
		log_warning("page table: cannot tell whether this node ran solo: %s",
			    pagetable_last_error(pt));
	return solo;
}

static uint64_t release_partner_locks(struct vmm *v, struct vmm_alloc *a)
{
	uint64_t released = 0;

	for (uint64_t i = 0; i < a->pages; i++) {
		struct vmm_page *p = &a->page[i];
		size_t k = 0;

		while (k < p->n_owners) {
			if (vmm_lock_owner_of(p->owners[k], vmm_node_id(v))) {
				k++;
				continue;
			}
			vmm_unlock(v, a, i, p->owners[k]); /* the last owner moves to k */
			released++;
		}
	}
	return released;
}

static int adopt(struct vmm *v, struct vmm_alloc *a, struct vmm_takeover *ret)
{
	struct pt_origin o = { .node = vmm_node_id(v),
			       .lsn = pagetable_reserve_lsn(vmm_pagetable(v)),
			       .own = true };
	char *owner = strdup(vmm_node_id(v));
	int r;

	if (!owner)
		return -ENOMEM;
	r = pagetable_alloc_set_owner(vmm_pagetable(v), a->guid, owner, &o);
	if (r < 0) {
		free(owner);
		return log_error_errno(r, "page table: cannot adopt %s: %s", a->guid,
				       pagetable_last_error(vmm_pagetable(v)));
	}
	free(a->owner);
	a->owner = owner;
	ret->allocations++;
	for (uint64_t i = 0; i < a->pages; i++)
		if (a->page[i].dirty) {
			vmm_destage_page(v, a, i);
			ret->dirty_pages++;
		}
	return 0;
}

/* Whatever is not this node's is the partner's: a forced takeover may not
 * know the partner's id (it never linked since this start). */
int vmm_takeover(struct vmm *v, struct vmm_takeover *ret)
{
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(vmm_allocations(v), &n);
	int r = 0;

	memset(ret, 0, sizeof(*ret));
	if (!all && n)
		return -ENOMEM;
	for (size_t i = 0; i < n && r == 0; i++) {
		ret->locks_released += release_partner_locks(v, all[i]);
		if (strcmp(all[i]->owner, vmm_node_id(v)) != 0)
			r = adopt(v, all[i], ret);
	}
	free(all);
	vmm_changed(v);
	vmm_store_access(v);	  /* the partner's partition is this node's to write now */
	vmm_sessions_orphaned(v); /* the partner's clients may come here */
	return r;
}
