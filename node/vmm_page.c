/* Whole-page write and read: lock, copy, release in one step (VMM.md,
 * "Batches"). A write costs one partner round trip; a read none. */
#include "vmm_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "crc32c.h"
#include "log.h"
#include "session.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct write_op {
	struct vmm_op op;
	char guid[128];
	uint64_t page;
	char owner[128];
	bool owned;	      /* this node owns the allocation: it arbitrates */
	bool wait;	      /* the client waits for the lock */
	uint64_t new_version; /* when owned */
	uint32_t crc;
	size_t lock_index; /* of AllocateWrite in the batch */
	uint8_t block[];
};

static void write_replied(void *arg, int r)
{
	struct write_op *op = arg;
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__WritePageReply wr = FTVM__CLIENT__WRITE_PAGE_REPLY__INIT;

	if (r < 0) {
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
				"%s page %llu written but not committed: %s", op->guid,
				(unsigned long long)op->page, strerror(-r));
	} else {
		wr.crc32c = op->crc;
		wr.version = op->new_version;
		reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_WRITE_PAGE;
		reply.write_page = &wr;
		client_call_reply(op->op.call, &reply);
	}
	free(op);
}

static void write_finish(struct vmm_op *base)
{
	struct write_op *op = (struct write_op *)base;
	struct vmm *v = op->op.vmm;
	struct vmm_alloc *a = vmm_table_find(v->table, op->guid);
	struct pt_origin o = { .node = vmm_node_id(v), .lsn = op->op.lsn, .own = true };
	struct vmm_page *p = a && op->page < a->pages ? &a->page[op->page] : NULL;

	if (op->owned && p)
		vmm_unlock(v, a, op->page, op->owner);
	if (op->op.status == FTVM__PARTNER__STATUS__STATUS_LOCKED && op->wait && p) {
		/* The owner's lock lost us the race: back to the head of the queue. */
		vmm_page_wait(v, op->op.call, VMM_WAIT_WRITE_PAGE, op->guid, op->page, true,
			      op->block, a->block_size, true);
		free(op);
		return;
	}
	if (op->op.status != FTVM__PARTNER__STATUS__STATUS_OK || !p) {
		if (op->op.failed_at > op->lock_index)
			vmm_release_stray_lock(v, op->guid, op->page, op->owner);
		vmm_reply_error(op->op.call,
				p ? op->op.status : FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
				"%s page %llu: %s", op->guid, (unsigned long long)op->page,
				p ? op->op.reason : "allocation released meanwhile");
		free(op);
		return;
	}
	/* Acknowledged by the partner. Owned here, the page was written as the
	 * request left; otherwise it is ours now, under the version the owner
	 * gave it (its answer to ReleasePointer carries the page's lock status). */
	if (!op->owned) {
		op->new_version = op->op.lock_version;
		memcpy(vmm_block_addr(v, a, op->page), op->block, a->block_size);
		vmm_page_modified(v, a, op->page, op->new_version, op->crc, &o);
	}
	vmm_after_commit(v, write_replied, op);
}

/* The owner applies its own write as the request leaves, so its commit runs
 * while the partner applies and commits the same change: the client's answer
 * waits for both, but the two commits overlap instead of following each
 * other. The write lock hides the new contents from readers until then. Should
 * the partner not acknowledge, the client is told so and the page stays as
 * written here, which is then the newer copy: a write that was not
 * acknowledged may or may not have happened, and the rejoin's resync makes
 * the partner equal (HA.md). */
static void write_owned_page(struct vmm *v, struct vmm_alloc *a, struct write_op *op)
{
	struct pt_origin o = { .node = vmm_node_id(v), .lsn = op->op.lsn, .own = true };

	memcpy(vmm_block_addr(v, a, op->page), op->block, a->block_size);
	vmm_page_modified(v, a, op->page, op->new_version, op->crc, &o);
}

void vmm_op_write_page(struct vmm *v, struct client_call *call,
		       const Ftvm__Client__WritePageRequest *req)
{
	struct vmm_msg msgs[4];
	Envelope *envs[4];
	struct vmm_alloc *a = vmm_client_page(v, call, req->guid, req->page);
	struct vmm_page *p;
	const char *conflict;
	struct write_op *op;
	size_t n = 0;

	if (!a)
		return;
	p = &a->page[req->page];
	if (req->data.len > a->block_size) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"%zu bytes are longer than the block (%u bytes)", req->data.len,
				a->block_size);
		return;
	}
	if (!vmm_partner_linked(v)) {
		vmm_reply_error(
			call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
			"partner unavailable: a page write is mirrored before it completes");
		return;
	}
	/* Owned here: the decision is ours. Otherwise our mirror can already
	 * tell of a lock the owner granted; the owner decides the rest. */
	conflict = vmm_page_conflict(a, p, FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE);
	if (conflict && req->wait) {
		vmm_page_wait(v, call, VMM_WAIT_WRITE_PAGE, a->guid, req->page, true,
			      req->data.data, req->data.len, false);
		return;
	}
	if (conflict) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_LOCKED, "%s page %llu is %s",
				a->guid, (unsigned long long)req->page, conflict);
		return;
	}
	op = calloc(1, sizeof(*op) + a->block_size);
	if (!op) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	op->op.vmm = v;
	op->op.call = call;
	op->op.finish = write_finish;
	op->op.lsn = pagetable_reserve_lsn(v->pt);
	snprintf(op->guid, sizeof(op->guid), "%s", a->guid);
	op->page = req->page;
	vmm_lock_owner(v, call, op->owner, sizeof(op->owner));
	if (req->data.len) /* an empty write is all zeroes, and data may be NULL */
		memcpy(op->block, req->data.data, req->data.len);
	op->crc = crc32c(0, op->block, a->block_size);
	op->owned = vmm_is_owner(v, a);
	op->wait = req->wait;

	if (op->owned) {
		if (vmm_page_lock(p, FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE, op->owner) < 0) {
			vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
					"out of memory");
			free(op);
			return;
		}
		op->new_version = p->version + 1;
	} else {
		envs[n] = vmm_msg_lock_request(&msgs[n], a->guid, req->page, true);
		n++;
	}
	op->lock_index = n;
	envs[n] = vmm_msg_allocate(&msgs[n], a->guid, req->page, op->owner, true);
	n++;
	envs[n] =
		vmm_msg_write_page(&msgs[n], a->guid, req->page, op->block, a->block_size, op->crc);
	n++;
	envs[n] = vmm_msg_release_pointer(&msgs[n], a->guid, req->page, op->owner, true,
					  op->new_version, op->crc);
	n++;
	if (vmm_op_send(&op->op, envs, n) < 0) {
		if (op->owned)
			vmm_unlock(v, a, req->page, op->owner);
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, "%s",
				op->op.reason[0] ? op->op.reason : "cannot reach the partner");
		free(op);
		return;
	}
	if (op->owned)
		write_owned_page(v, a, op);
}

/* Nothing can run between the check and the copy (one event loop), so the
 * read lock lives inside this call and needs no mirror. */
void vmm_op_read_page(struct vmm *v, struct client_call *call,
		      const Ftvm__Client__ReadPageRequest *req)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__ReadPageReply rr = FTVM__CLIENT__READ_PAGE_REPLY__INIT;
	struct vmm_alloc *a = vmm_client_page(v, call, req->guid, req->page);
	const char *conflict;

	if (!a)
		return;
	conflict =
		vmm_page_conflict(a, &a->page[req->page], FTVM__PARTNER__LOCK_MODE__LOCK_MODE_READ);
	if (conflict && req->wait) {
		vmm_page_wait(v, call, VMM_WAIT_READ_PAGE, a->guid, req->page, false, NULL, 0,
			      false);
		return;
	}
	if (conflict) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_LOCKED, "%s page %llu is %s",
				a->guid, (unsigned long long)req->page, conflict);
		return;
	}
	rr.data.data = vmm_block_addr(v, a, req->page);
	rr.data.len = a->block_size;
	rr.crc32c = crc32c(0, rr.data.data, rr.data.len);
	rr.version = a->page[req->page].version;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_READ_PAGE;
	reply.read_page = &rr;
	client_call_reply(call, &reply);
}

void vmm_page_retry(struct vmm *v, struct client_call *call, enum vmm_wait_kind kind,
		    const char *guid, uint64_t page, const void *data, size_t len)
{
	if (kind == VMM_WAIT_WRITE_PAGE) {
		Ftvm__Client__WritePageRequest req = FTVM__CLIENT__WRITE_PAGE_REQUEST__INIT;

		req.guid = (char *)guid;
		req.page = page;
		req.data.data = (uint8_t *)data;
		req.data.len = len;
		req.wait = true;
		vmm_op_write_page(v, call, &req);
	} else {
		Ftvm__Client__ReadPageRequest req = FTVM__CLIENT__READ_PAGE_REQUEST__INIT;

		req.guid = (char *)guid;
		req.page = page;
		req.wait = true;
		vmm_op_read_page(v, call, &req);
	}
}
