/* Failback (node/ha/HA.md, "Failback"): the allocations this node adopted in a
 * takeover go back to their home node, one OwnerChange each. While one is on
 * its way no lock on it is granted here; the home takes it on when the
 * message arrives, and this node lets go when the answer does, which the link
 * orders before anything the home then asks about it. */
#include "vmm_core.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct failback {
	struct vmm *vmm;
	struct client_call *call;
	unsigned outstanding;
	uint64_t handed_back, busy, failed;
	char reason[512]; /* of the first failure */
};

struct failback_op {
	struct vmm_op op;
	struct failback *fb;
	char guid[128];
};

static void failback_replied(void *arg)
{
	struct failback *fb = arg;
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__FailbackReply fr = FTVM__CLIENT__FAILBACK_REPLY__INIT;

	if (fb->failed) {
		vmm_reply_error(fb->call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"%llu of %llu allocations not handed back: %s",
				(unsigned long long)fb->failed,
				(unsigned long long)(fb->failed + fb->handed_back), fb->reason);
	} else {
		fr.handed_back = fb->handed_back;
		fr.busy = fb->busy;
		reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_FAILBACK;
		reply.failback = &fr;
		client_call_reply(fb->call, &reply);
	}
	free(fb);
}

static void one_done(struct failback *fb)
{
	if (--fb->outstanding == 0) {
		char handed[24], failed[24];

		snprintf(handed, sizeof(handed), "%llu", (unsigned long long)fb->handed_back);
		snprintf(failed, sizeof(failed), "%llu", (unsigned long long)fb->failed);
		vmm_tell(fb->vmm, "failback", fb->failed ? "failed" : "done",
			 fb->failed ? fb->reason : NULL,
			 (const char *const[]){ "handed_back", handed, "not_handed_back", failed,
						NULL });
		vmm_store_access(fb->vmm); /* read-only again once all went home */
		vmm_after_commit(fb->vmm, failback_replied, fb);
	}
}

static int set_owner(struct vmm *v, struct vmm_alloc *a, const char *owner,
		     const struct pt_origin *o)
{
	char *copy = strdup(owner);
	int r;

	if (!copy)
		return -ENOMEM;
	r = pagetable_alloc_set_owner(vmm_pagetable(v), a->guid, owner, o);
	if (r < 0) {
		free(copy);
		return log_error_errno(r, "page table: owner of %s: %s", a->guid,
				       pagetable_last_error(vmm_pagetable(v)));
	}
	free(a->owner);
	a->owner = copy;
	vmm_changed(v);
	vmm_tickets_drop(v); /* the new owner keeps its own queue */
	/* Waiters on its pages ask the new owner now. */
	vmm_paging_kick(v);
	return 0;
}

static void failback_finish(struct vmm_op *base)
{
	struct failback_op *op = (struct failback_op *)base;
	struct failback *fb = op->fb;
	struct vmm *v = op->op.vmm;
	struct vmm_alloc *a = vmm_table_find(vmm_allocations(v), op->guid);
	struct pt_origin o = { .node = vmm_node_id(v), .lsn = op->op.lsn, .own = true };

	if (a)
		a->moving = false;
	if (a && op->op.status == FTVM__PARTNER__STATUS__STATUS_OK &&
	    set_owner(v, a, a->home, &o) == 0) {
		fb->handed_back++;
		log_info("failback: %s is %s's again", a->guid, a->home);
	} else {
		if (a)
			vmm_paging_kick(v);
		if (!fb->failed++)
			snprintf(fb->reason, sizeof(fb->reason), "%s: %s", op->guid,
				 op->op.reason[0] ? op->op.reason : "gone meanwhile");
	}
	free(op);
	one_done(fb);
}

static void hand_back(struct failback *fb, struct vmm_alloc *a)
{
	struct vmm *v = fb->vmm;
	struct failback_op *op = calloc(1, sizeof(*op));
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__OwnerChange oc = FTVM__PARTNER__OWNER_CHANGE__INIT;
	Envelope *envs[] = { &env };

	if (!op) {
		if (!fb->failed++)
			snprintf(fb->reason, sizeof(fb->reason), "out of memory");
		return;
	}
	op->op.vmm = v;
	op->op.finish = failback_finish;
	op->op.lsn = pagetable_reserve_lsn(vmm_pagetable(v));
	op->fb = fb;
	snprintf(op->guid, sizeof(op->guid), "%s", a->guid);
	oc.guid = a->guid;
	oc.owner = a->home;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_OWNER_CHANGE;
	env.owner_change = &oc;
	a->moving = true;
	fb->outstanding++;
	if (vmm_op_send(&op->op, envs, 1) < 0) {
		a->moving = false;
		if (!fb->failed++)
			snprintf(fb->reason, sizeof(fb->reason), "%s", op->op.reason);
		free(op);
		fb->outstanding--;
	}
}

void vmm_op_failback(struct vmm *v, struct client_call *call)
{
	struct failback *fb;
	struct vmm_alloc **all;
	size_t n = 0;

	if (vmm_mode(v) != VMM_MODE_MIRRORED || !vmm_can_complete(v)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"failback needs the pair whole: node %s is not mirrored with its "
				"partner (%s)",
				vmm_node_id(v), vmm_mode_reason(v));
		return;
	}
	fb = calloc(1, sizeof(*fb));
	all = vmm_table_sorted(vmm_allocations(v), &n);
	if (!fb || (!all && n)) {
		free(fb);
		free(all);
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	fb->vmm = v;
	fb->call = call;
	fb->outstanding = 1; /* held until every OwnerChange is out */
	for (size_t i = 0; i < n; i++) {
		struct vmm_alloc *a = all[i];

		if (!vmm_is_owner(v, a) || strcmp(a->home, vmm_node_id(v)) == 0)
			continue; /* not adopted */
		if (a->freeing || a->moving || vmm_alloc_locked(a))
			fb->busy++;
		else
			hand_back(fb, a);
	}
	free(all);
	one_done(fb);
}

int vmm_owner_changed(struct vmm *v, const char *guid, const char *owner, const struct pt_origin *o,
		      char *reason, size_t len)
{
	struct vmm_alloc *a = vmm_table_find(vmm_allocations(v), guid);

	if (!a) {
		snprintf(reason, len, "no allocation %s", guid);
		return FTVM__PARTNER__STATUS__STATUS_NOT_FOUND;
	}
	if (strcmp(owner, vmm_node_id(v)) != 0 && strcmp(owner, o->node) != 0) {
		snprintf(reason, len, "%s cannot be owned by '%s', not a node of this pair", guid,
			 owner);
		return FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST;
	}
	if (set_owner(v, a, owner, o) < 0) {
		snprintf(reason, len, "page table: %s", pagetable_last_error(vmm_pagetable(v)));
		return FTVM__PARTNER__STATUS__STATUS_INTERNAL;
	}
	/* Ours now: what is not in the store yet, we write there. */
	if (vmm_is_owner(v, a) && strcmp(a->home, vmm_node_id(v)) != 0)
		vmm_store_access(v);
	for (uint64_t i = 0; vmm_is_owner(v, a) && i < a->pages; i++)
		if (a->page[i].dirty)
			vmm_destage_page(v, a, i);
	return 0;
}
