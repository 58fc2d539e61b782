/* The originating node's release memory method (seed 002 Fig. 9): the
 * partner drops the allocation first, then this node; its frames go back to
 * the pool and its extent to the home node's partition, where an allocation
 * waiting for space may take it (allocate.c). */
#include "vmm_state.h"

#include <stdio.h>
#include <stdlib.h>

#include "log.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct free_op {
	struct vmm_op op;
	char guid[128];
};

static void free_replied(void *arg)
{
	struct free_op *op = arg;
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

	if (op->op.call)
		client_call_reply(op->op.call, &reply);
	else
		log_info("%s freed: its session is gone", op->guid);
	free(op);
}

static void free_finish(struct vmm_op *base)
{
	struct free_op *op = (struct free_op *)base;
	struct vmm *v = op->op.vmm;
	struct vmm_alloc *a = vmm_table_find(v->table, op->guid);
	struct pt_origin o = { .node = vmm_node_id(v), .lsn = op->op.lsn, .own = true };

	if (op->op.status != FTVM__PARTNER__STATUS__STATUS_OK) {
		if (a)
			a->freeing = false;
		if (!op->op.call)
			log_warning("%s, whose session is gone, not freed: %s", op->guid,
				    op->op.reason);
		vmm_reply_error(op->op.call, op->op.status, "%s", op->op.reason);
		free(op);
		return;
	}
	if (a) {
		pagetable_alloc_delete(v->pt, a->guid, &o);
		vmm_tell_volume(v, a, "deleted");
		vmm_table_remove(v->table, a);
		vmm_alloc_give_frames(v, a);
		vmm_alloc_free(a);
		vmm_space_freed(v);
	}
	vmm_after_commit(v, free_replied, op);
}

void vmm_op_free(struct vmm *v, struct client_call *call, const char *guid)
{
	struct vmm_alloc *a = vmm_table_find(v->table, guid);
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__ReleaseMemory rm = FTVM__PARTNER__RELEASE_MEMORY__INIT;
	Envelope *envs[] = { &env };
	struct free_op *op;

	if (!a) {
		/* Seed 003 Fig. 17 step S164: a free of what is not allocated. */
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
				"memory violation: no allocation %s to free (never made here or on "
				"the partner, or freed already); nothing changed",
				guid);
		return;
	}
	if (!vmm_client_owns(v, call, a, "free"))
		return;
	if (a->freeing || (vmm_is_owner(v, a) && vmm_alloc_locked(a))) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_LOCKED, "%s %s", guid,
				a->freeing ? "is being freed" : "has pages locked");
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	op->op.vmm = v;
	op->op.call = call;
	op->op.finish = free_finish;
	op->op.lsn = pagetable_reserve_lsn(v->pt);
	snprintf(op->guid, sizeof(op->guid), "%s", guid);
	/* The owner takes no new locks on it while the release is in flight. */
	if (vmm_is_owner(v, a))
		a->freeing = true;
	rm.guid = a->guid;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_MEMORY;
	env.release_memory = &rm;
	if (vmm_op_send(&op->op, envs, 1) < 0) {
		a->freeing = false;
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, "%s",
				op->op.reason[0] ? op->op.reason : "cannot reach the partner");
		free(op);
	}
}
