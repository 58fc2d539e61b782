/* Whole-page write and read: lock, copy, release in one step (vmm/VMM.md,
 * "Batches"). A write costs one partner round trip; a read none. A write
 * needs frames for the page, never its old contents; a read of a page that
 * is not resident waits for its page-in. */
#include "vmm_state.h"

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
	uint64_t incarnation; /* of the allocation whose page it pins or locks */
	uint64_t page;
	char owner[128];
	bool owned; /* this node owns the allocation: it arbitrates */
	bool wait;  /* the client waits for the lock, and for frames */
	uint64_t deadline_ms;
	uint64_t ticket; /* its place in the owner's queue (not owned here) */
	uint32_t wait_ms;
	uint64_t new_version; /* when owned */
	/* The bytes as the client sent them, in its call's request, which stays
	 * until the call is answered (client_server.h); the whole block: those
	 * bytes, or, when they are fewer, a copy padded with zeroes in room. */
	const void *data;
	size_t len;
	const uint8_t *block;
	uint32_t crc;
	size_t lock_index; /* of AllocateWrite in the batch; WritePage follows it */
	uint32_t block_size;
	/* Owned here: the page as it was, put back when the partner refuses. */
	uint64_t old_version;
	uint32_t old_crc;
	bool old_dirty, old_stale;
	uint8_t *old_block; /* NULL when it was not resident */
	uint8_t *old_room;  /* in room, for it */
	/* Not owned here, and not resident: frames taken for it (counted in its
	 * `filling`), which get the block once the owner acknowledged. */
	bool fills, has_frames;
	uint64_t frame;
	/* Not owned here: the row of the page's expected state journalled as
	 * the request left (early_version, in transaction early_txn), and the
	 * page's row count after it. */
	bool early;
	uint64_t early_version, early_txn;
	unsigned early_rows;
	/* Owned here: the transaction that holds its row, applied as the
	 * request left. */
	uint64_t owned_txn;
	/* The block on its way to the partner (pagedata/), held until the
	 * answer. */
	struct pagedata_outgoing out;
	uint8_t room[]; /* the padded block, if any; then the old block, if owned */
};

static void write_replied(struct write_op *op)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__WritePageReply wr = FTVM__CLIENT__WRITE_PAGE_REPLY__INIT;

	wr.crc32c = op->crc;
	wr.version = op->new_version;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_WRITE_PAGE;
	reply.write_page = &wr;
	client_call_reply(op->op.call, &reply);
	free(op);
}

/* Both nodes have it, as [node] ack asks (vmm_page_write_acked()), or the
 * wait for the store failed: the write happened, but not as durably as
 * asked. */
static void write_acked(void *arg, int status, const char *reason)
{
	struct write_op *op = arg;

	if (status == FTVM__PARTNER__STATUS__STATUS_OK) {
		write_replied(op);
		return;
	}
	vmm_reply_error(op->op.call, status, "%s page %llu: written, but %s", op->guid,
			(unsigned long long)op->page, reason);
	free(op);
}

/* The partner answered and did not apply the WritePage (a timeout or a lost
 * link say nothing of what it did). */
static bool partner_refused(const struct write_op *op)
{
	int status = op->op.status;

	return status != FTVM__PARTNER__STATUS__STATUS_OK &&
	       status != FTVM__PARTNER__STATUS__STATUS_TIMEOUT &&
	       status != FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE &&
	       op->op.failed_at <= op->lock_index + 1;
}

/* A row of the page as it is in memory, putting back a write that did not
 * happen: a change of this node's own even when the page is clean (op
 * "undo", not a destage's "clean"). */
static void put_back(struct vmm *v, struct vmm_alloc *a, uint64_t page, const struct pt_origin *o)
{
	struct pt_page pp;

	vmm_page_state(a, page, &pp);
	pp.undo = true;
	vmm_journal_page(v, a, &pp, o);
}

/* Owned here, the write was applied as the request left: the partner refused
 * it, so the page is put back as it was (the write lock hid it meanwhile). */
static void undo_owned_write(struct vmm *v, struct vmm_alloc *a, struct write_op *op)
{
	struct vmm_page *p = &a->page[op->page];
	struct pt_origin o = { .node = vmm_node_id(v),
			       .lsn = pagetable_reserve_lsn(v->pt),
			       .own = true };

	if (op->old_block)
		memcpy(vmm_block_addr(v, a, op->page), op->old_block, a->block_size);
	else
		vmm_page_detach(v, p);
	p->version = op->old_version;
	p->crc32c = op->old_crc;
	p->dirty = op->old_dirty;
	p->stale = op->old_stale;
	put_back(v, a, op->page, &o);
}

/* Not owned here: the page's expected state is journalled as the request
 * leaves, under the op's LSN, so this node's commit runs while the owner's
 * does. The frames and the page in memory wait for the answer (read
 * pointers point into the frames, and the owner may refuse). */
static void journal_expected(struct vmm *v, struct vmm_alloc *a, struct write_op *op)
{
	struct vmm_page *p = &a->page[op->page];
	struct pt_origin o = { .node = vmm_node_id(v), .lsn = op->op.lsn, .own = true };
	struct pt_page pp;

	vmm_page_state(a, op->page, &pp);
	pp.version++;
	pp.crc32c = op->crc;
	pp.dirty = true;
	if (vmm_journal_page(v, a, &pp, &o) < 0)
		return;
	op->early = true;
	op->early_version = pp.version;
	op->early_txn = pagetable_change_mark(v->pt);
	op->early_rows = p->rows;
}

/* Not owned here: the block goes into the page's frames once the owner
 * acknowledged; frames taken for it are the page's then, or given back.
 * Returns whether the change is committed already: the early row says what
 * the owner answered, nothing was journalled for the page since, and its
 * transaction committed. Otherwise a row of its own goes into this turn's
 * commit (a fresh LSN when the early row took the op's): after an OK the
 * new state, else the page as it is in memory, which undoes the early row
 * (vmm/VMM.md, "The whole-page write of a page owned by the partner"). */
static bool settle_mirror_write(struct vmm *v, struct vmm_alloc *a, struct write_op *op, bool ok)
{
	struct vmm_page *p = &a->page[op->page];
	struct pt_origin o = { .node = vmm_node_id(v), .lsn = op->op.lsn, .own = true };
	bool committed = ok && op->early && op->new_version == op->early_version &&
			 p->rows == op->early_rows && pagetable_committed(v->pt, op->early_txn);

	if (op->early && !committed)
		o.lsn = pagetable_reserve_lsn(v->pt);
	if (ok && !p->resident && op->has_frames) {
		vmm_page_attach(v, p, op->frame);
		op->has_frames = false;
	}
	if (ok) {
		memcpy(vmm_block_addr(v, a, op->page), op->block, a->block_size);
		if (committed)
			vmm_page_set_modified(v, a, op->page, op->new_version, op->crc);
		else
			vmm_page_modified(v, a, op->page, op->new_version, op->crc, &o);
	} else if (op->early) {
		/* This node's last own LSN must not stay the early row's, which
		 * the owner may have noted (a lost link). */
		put_back(v, a, op->page, &o);
	}
	if (op->fills) {
		p->filling--;
		vmm_paging_kick(v); /* readers waiting for its contents */
	}
	vmm_unpin(v, p);
	return committed;
}

static void requeue_write(struct vmm *v, struct write_op *op, uint32_t block_size,
			  enum vmm_wait_reason why)
{
	struct vmm_page_request req = {
		.call = op->op.call,
		.kind = VMM_WAIT_WRITE_PAGE,
		.guid = op->guid,
		.page = op->page,
		.write = true,
		.wait = true,
		.again = true,
		.deadline_ms = op->deadline_ms,
		.ticket = op->ticket,
		.data = op->data,
		.len = op->len,
	};

	vmm_page_wait(v, &req, why, op->op.reason);
}

/* Owned here, the write stays applied when the lost link fails the
 * partner's answer: the pair's decision says what the client is told. This
 * node took over: its copy is the pair's, the write happened. The link came
 * back with the pair whole: the partner may lack it, its outcome is unknown
 * (the old answer). Fenced, or no decision in time: as the window says. */
static void owned_write_decided(struct vmm *v, void *arg, int status, const char *reason)
{
	struct write_op *op = arg;

	if (status == FTVM__PARTNER__STATUS__STATUS_OK &&
	    (vmm_mode(v) == VMM_MODE_SOLO || vmm_mode(v) == VMM_MODE_SOLO_READ)) {
		struct vmm_alloc *a =
			vmm_table_find_incarnation(v->table, op->guid, op->incarnation);

		if (!a)
			write_replied(op);
		else
			vmm_page_write_acked(v, a, op->page, op->new_version,
					     pagetable_committed(v->pt, op->owned_txn),
					     op->op.call ? client_call_client_id(op->op.call) : 0,
					     write_acked, op);
		return;
	}
	if (status == FTVM__PARTNER__STATUS__STATUS_OK)
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"%s page %llu: %s", op->guid, (unsigned long long)op->page,
				op->op.reason);
	else
		vmm_reply_error(op->op.call, status, "%s page %llu: %s", op->guid,
				(unsigned long long)op->page, reason);
	free(op);
}

/* The lost link failed the partner's answer in the failover window: the
 * write waits for the pair's decision instead of failing. Not owned here,
 * nothing of it stayed (settle_mirror_write put the page back): it is
 * written again once decided, by whichever node owns the page then. */
static bool wait_for_decision(struct vmm *v, struct vmm_alloc *a, struct write_op *op)
{
	if (op->op.status != FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE ||
	    !vmm_window_open(v))
		return false;
	if (!op->owned) {
		requeue_write(v, op, a->block_size, VMM_WAIT_PARTNER);
		free(op);
		return true;
	}
	return vmm_window_wait(v, op->op.call ? client_call_client_id(op->op.call) : 0,
			       owned_write_decided, op) == 0;
}

static void write_finish(struct vmm_op *base)
{
	struct write_op *op = (struct write_op *)base;
	struct vmm *v = op->op.vmm;
	/* A resync may have replaced the allocation meanwhile: its page is
	 * not the one this write pinned or locked (node/ha/HA.md, "Requests in
	 * flight across a resync"). */
	struct vmm_alloc *a = vmm_table_find_incarnation(v->table, op->guid, op->incarnation);
	int status = op->op.status;
	bool ok = status == FTVM__PARTNER__STATUS__STATUS_OK, committed = false;

	if (a && op->owned) {
		if (partner_refused(op))
			undo_owned_write(v, a, op);
		vmm_unlock(v, a, op->page, op->owner);
	} else if (a) {
		op->new_version = op->op.lock_version; /* the owner's answer to ReleasePointer */
		committed = settle_mirror_write(v, a, op, ok);
	}
	if (op->has_frames)
		vmm_frames_give(v, op->frame, op->block_size);
	pagedata_sent(v->pagedata, &op->out, !partner_refused(op));
	if (ok && a) {
		/* Owned here, its row went into a commit as the request left,
		 * which has usually run by now. */
		if (op->owned)
			committed = pagetable_committed(v->pt, op->owned_txn);
		vmm_page_write_acked(v, a, op->page, op->new_version, committed,
				     op->op.call ? client_call_client_id(op->op.call) : 0,
				     write_acked, op);
		return;
	}
	if (op->op.failed_at > op->lock_index)
		vmm_release_stray_lock(v, op->guid, op->page, op->owner);
	if (a && wait_for_decision(v, a, op))
		return;
	if (a && op->wait && status == FTVM__PARTNER__STATUS__STATUS_LOCKED)
		requeue_write(v, op, a->block_size, VMM_WAIT_LOCK); /* lost the race */
	else if (a && op->wait && status == FTVM__PARTNER__STATUS__STATUS_NO_SPACE)
		requeue_write(v, op, a->block_size, VMM_WAIT_FRAMES);
	else
		vmm_reply_error(op->op.call, a ? status : FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
				"%s page %llu: %s", op->guid, (unsigned long long)op->page,
				a ? op->op.reason : "allocation released or resynced meanwhile");
	free(op);
}

/* The owner applies its own write as the request leaves, so its commit runs
 * while the partner applies and commits the same change: the client's answer
 * waits for both, but the two commits overlap instead of following each
 * other. The write lock hides the new contents from readers (and from
 * destage) until then. Should the partner refuse it (no frames there), the
 * page is put back as it was; should it not answer, the client is told so
 * and the page stays as written here, which is then the newer copy: a write
 * that was not acknowledged may or may not have happened, and the rejoin's
 * resync makes the partner equal (ha/HA.md). */
static void write_owned_page(struct vmm *v, struct vmm_alloc *a, struct write_op *op)
{
	struct pt_origin o = { .node = vmm_node_id(v), .lsn = op->op.lsn, .own = true };

	vmm_page_modified(v, a, op->page, op->new_version, op->crc, &o);
	op->owned_txn = pagetable_change_mark(v->pt);
}

/* Owned here: frames for the page (its old block kept), then the write lock. */
static int prepare_owned(struct vmm *v, const struct vmm_page_request *req, struct vmm_alloc *a,
			 struct write_op *op)
{
	struct vmm_page *p = &a->page[req->page];
	char reason[256];
	uint64_t frame;

	op->old_version = p->version;
	op->old_crc = p->crc32c;
	op->old_dirty = p->dirty;
	op->old_stale = p->stale;
	if (p->resident) {
		op->old_block = op->old_room;
		memcpy(op->old_block, vmm_block_addr(v, a, req->page), a->block_size);
	} else if (vmm_frames_take(v, a, &frame, reason, sizeof(reason)) < 0) {
		vmm_frames_short(v, req, reason);
		return -ENOSPC;
	} else {
		vmm_page_attach(v, p, frame);
	}
	if (vmm_lock(v, p, FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE, op->owner) < 0) {
		if (!op->old_block)
			vmm_page_detach(v, p);
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return -ENOMEM;
	}
	op->new_version = p->version + 1;
	return 0;
}

/* Not owned here: the page stays where it is until the owner answers, and a
 * page that is not resident gets frames now, so the answer has a place. */
static int prepare_mirror(struct vmm *v, const struct vmm_page_request *req, struct vmm_alloc *a,
			  struct write_op *op)
{
	struct vmm_page *p = &a->page[req->page];
	char reason[256];

	if (!p->resident) {
		if (vmm_frames_take(v, a, &op->frame, reason, sizeof(reason)) < 0) {
			vmm_frames_short(v, req, reason);
			return -ENOSPC;
		}
		op->has_frames = op->fills = true;
		p->filling++;
	}
	vmm_pin(v, p);
	return 0;
}

static void unprepare(struct vmm *v, struct vmm_alloc *a, struct write_op *op)
{
	struct vmm_page *p = &a->page[op->page];

	if (op->owned) {
		vmm_unlock(v, a, op->page, op->owner);
		if (op->old_block) /* the new block was copied in before the send */
			memcpy(vmm_block_addr(v, a, op->page), op->old_block, a->block_size);
		else
			vmm_page_detach(v, p);
		return;
	}
	settle_mirror_write(v, a, op, false);
	if (op->has_frames)
		vmm_frames_give(v, op->frame, a->block_size);
}

static struct write_op *write_op_new(struct vmm *v, const struct vmm_page_request *req,
				     const struct vmm_alloc *a)
{
	bool owned = vmm_is_owner(v, a), padded = req->len != a->block_size;
	size_t room = ((padded ? 1 : 0) + (owned ? 1 : 0)) * (size_t)a->block_size;
	struct write_op *op = malloc(sizeof(*op) + room);

	if (!op)
		return NULL;
	/* The room is written before it is read (a short page's tail zeroed
	 * below, the old block copied in whole): only the fields start zero. */
	memset(op, 0, sizeof(*op));
	op->op.vmm = v;
	op->op.call = req->call;
	op->op.finish = write_finish;
	op->op.lsn = pagetable_reserve_lsn(v->pt);
	snprintf(op->guid, sizeof(op->guid), "%s", a->guid);
	op->incarnation = a->incarnation;
	op->page = req->page;
	vmm_lock_owner(v, req->call, op->owner, sizeof(op->owner));
	op->data = req->data;
	op->len = req->len;
	op->block = padded ? op->room : req->data;
	if (padded && req->len) /* an empty write is all zeroes, and data may be NULL */
		memcpy(op->room, req->data, req->len);
	if (padded)
		memset(op->room + req->len, 0, a->block_size - req->len);
	if (owned)
		op->old_room = op->room + (padded ? a->block_size : 0);
	op->block_size = a->block_size;
	op->crc = crc32c(0, op->block, a->block_size);
	op->owned = owned;
	op->wait = req->wait;
	op->deadline_ms = req->deadline_ms;
	if (!owned)
		op->ticket = vmm_lock_request_ticket(v, req, &op->wait_ms);
	return op;
}

/* [LockRequest,] AllocateWrite, WritePage, ReleasePointer; the WritePage is
 * pagedata_send's: the block goes one-sided into a run the partner granted,
 * or inline, from the client's request as it came (the one copy of it on
 * the way is its unpacking). Owned here, an RDMA WRITE reads it from the
 * page's frames, where the write is applied as the request leaves (before
 * the send); otherwise from the frames that will be the page's once the
 * owner answers, or a staging slab (a resident page's frames keep the old
 * version until then). */
static void send_write(struct vmm *v, struct vmm_alloc *a, struct write_op *op)
{
	void *frames = op->owned	? vmm_block_addr(v, a, op->page)
		       : op->has_frames ? frame_pool_addr(v->pool, op->frame)
					: NULL;
	struct vmm_msg msgs[4];
	Envelope *envs[4];
	size_t n = 0;
	int r;

	if (op->owned)
		memcpy(frames, op->block, a->block_size);
	op->out = (struct pagedata_outgoing){
		.guid = op->guid,
		.page = op->page,
		.block_size = a->block_size,
		.crc32c = op->crc,
		.block = op->block,
		.frames = frames,
		.frames_filled = op->owned,
		.grant_ok = true,
	};
	if (!op->owned) {
		envs[n] = vmm_msg_lock_request(&msgs[n], a->guid, op->page, true, op->ticket,
					       op->wait_ms);
		n++;
	}
	op->lock_index = n;
	envs[n] = vmm_msg_allocate(&msgs[n], a->guid, op->page, op->owner, true, false);
	n += 2; /* and the WritePage, pagedata_send's */
	envs[n] = vmm_msg_release_pointer(&msgs[n], a->guid, op->page, op->owner, true,
					  op->new_version, op->crc);
	n++;
	r = pagedata_send(v->pagedata, &op->op, msgs, envs, n, op->lock_index + 1, &op->out);
	if (r < 0) {
		unprepare(v, a, op);
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"%s",
				op->op.reason[0] ? op->op.reason : "cannot reach the partner");
		free(op);
		return;
	}
	if (op->owned)
		write_owned_page(v, a, op);
	else
		journal_expected(v, a, op);
}

/* Whether req's page can be locked in mode now; if not, req waits in the
 * paging queue (req->wait) or is answered LOCKED. A new write goes behind
 * the requests already waiting for the page; a read holds its lock only
 * inside this call, so it delays nobody and need not. */
static bool lock_free(struct vmm *v, const struct vmm_page_request *req, struct vmm_alloc *a,
		      int mode)
{
	const char *conflict = vmm_page_conflict(a, &a->page[req->page], mode);
	char queued[64];

	if (!conflict && req->kind == VMM_WAIT_WRITE_PAGE && !req->again)
		conflict = vmm_page_queued(v, req->guid, req->page, queued, sizeof(queued));

	if (!conflict)
		return true;
	if (req->wait)
		vmm_page_wait(v, req, VMM_WAIT_LOCK, NULL);
	else
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_LOCKED,
				"%s page %llu is %s", a->guid, (unsigned long long)req->page,
				conflict);
	return false;
}

static void page_write(struct vmm *v, const struct vmm_page_request *req)
{
	struct vmm_alloc *a = vmm_client_page(v, req->call, req->guid, req->page, "write");
	struct vmm_page *p;
	struct write_op *op;

	if (!a || vmm_refuses_change(v, req->call))
		return;
	p = &a->page[req->page];
	if (req->len > a->block_size) {
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"%zu bytes are longer than the block (%u bytes)", req->len,
				a->block_size);
		return;
	}
	if (!vmm_can_complete(v)) {
		vmm_partner_wait(
			v, req,
			"partner unavailable: a page write is mirrored before it completes");
		return;
	}
	/* Owned here: the decision is ours. Otherwise our mirror can already
	 * tell of a lock the owner granted; the owner decides the rest. */
	if (!lock_free(v, req, a, FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE))
		return;
	/* Frames being filled are not ours to write into: after them. */
	if (p->pagein || p->filling) {
		vmm_page_wait(v, req, VMM_WAIT_CONTENTS, NULL);
		return;
	}
	op = write_op_new(v, req, a);
	if (!op) {
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	if ((op->owned ? prepare_owned : prepare_mirror)(v, req, a, op) < 0) {
		free(op);
		return;
	}
	send_write(v, a, op);
}

void vmm_op_write_page(struct vmm *v, struct client_call *call,
		       const Ftvm__Client__WritePageRequest *req)
{
	struct vmm_page_request r = {
		.call = call,
		.kind = VMM_WAIT_WRITE_PAGE,
		.guid = req->guid,
		.page = req->page,
		.write = true,
		.wait = req->wait,
		.data = req->data.data,
		.len = req->data.len,
	};

	page_write(v, &r);
}

/* Nothing can run between the check and the copy (one event loop), so the
 * read lock lives inside this call and needs no mirror. */
static void page_read(struct vmm *v, const struct vmm_page_request *req)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__ReadPageReply rr = FTVM__CLIENT__READ_PAGE_REPLY__INIT;
	struct vmm_alloc *a = vmm_client_page(v, req->call, req->guid, req->page, "read");

	if (!a)
		return;
	if (!lock_free(v, req, a, FTVM__PARTNER__LOCK_MODE__LOCK_MODE_READ))
		return;
	if (!vmm_page_contents(v, req, a))
		return;
	vmm_read_ahead_used(v, &a->page[req->page]);
	rr.data.data = vmm_block_addr(v, a, req->page);
	rr.data.len = a->block_size;
	rr.crc32c = crc32c(0, rr.data.data, rr.data.len);
	rr.version = a->page[req->page].version;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_READ_PAGE;
	reply.read_page = &rr;
	client_call_reply(req->call, &reply);
}

void vmm_op_read_page(struct vmm *v, struct client_call *call,
		      const Ftvm__Client__ReadPageRequest *req)
{
	struct vmm_page_request r = {
		.call = call,
		.kind = VMM_WAIT_READ_PAGE,
		.guid = req->guid,
		.page = req->page,
		.wait = req->wait,
	};

	page_read(v, &r);
}

void vmm_page_retry(struct vmm *v, const struct vmm_page_request *req)
{
	if (req->kind == VMM_WAIT_WRITE_PAGE)
		page_write(v, req);
	else
		page_read(v, req);
}
