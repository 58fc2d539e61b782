/* Read and write pointers (seed 002 Figs. 6-8) into the frame pool that the
 * client maps.
 *
 *   get pointer: owned here  -> lock now, [AllocateRead|AllocateWrite] mirror
 *                owned there -> [LockRequest, AllocateRead|AllocateWrite] to it
 *   release:     modified    -> [WritePage, ReleasePointer{modified}]
 *                unmodified  -> [ReleasePointer]
 *
 * Each is one partner round trip. A pointer needs the page resident (paged
 * in first when it is not) and keeps it so: the lock keeps it out of the
 * replacement queue. A pointer belongs to the client connection that got it;
 * when the connection goes, its pointers are released (a write pointer as
 * modified: whatever the client wrote into the frame is mirrored, so the two
 * copies stay equal). What becomes of the pointers held across a failover
 * (mirrored at a resync, revoked at a fence) is ha/holdings.c's. */
#include "vmm_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "clock.h"
#include "crc32c.h"
#include "log.h"
#include "session.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct pointer_op {
	struct vmm_op op;
	uint64_t client_id;
	char guid[128];
	uint64_t incarnation; /* of the allocation whose page it pins or locks */
	uint64_t page;
	char owner[128];
	bool write;
	bool owned;
	bool wait;
	uint64_t deadline_ms;
	uint64_t ticket;
	size_t lock_index;
	uint64_t snapshots; /* vmm_holdings_snapshots() as the request left */
};

struct release_op {
	struct vmm_op op;
	struct vmm_holding *h;
	bool modified;
	bool owned;
	uint64_t new_version;
	uint32_t crc;
	uint64_t snapshots; /* vmm_holdings_snapshots() as the request left */
};

static void release(struct vmm *v, struct client_call *call, struct vmm_holding *h, bool modified);

/* ---- obtain a pointer (Figs. 6 and 7) ---- */

static void pointer_reply(struct vmm *v, struct client_call *call, const struct vmm_alloc *a,
			  uint64_t page)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__PointerReply pr = FTVM__CLIENT__POINTER_REPLY__INIT;

	pr.offset = a->page[page].frame * frame_pool_page_size(v->pool);
	pr.length = a->block_size;
	pr.version = a->page[page].version;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_POINTER;
	reply.pointer = &pr;
	client_call_reply(call, &reply);
}

/* The grant came: the client holds the pointer (or, gone meanwhile, it is
 * let go at once). false when out of memory. */
static bool hold(struct vmm *v, struct pointer_op *op, struct vmm_alloc *a)
{
	struct vmm_page *p = &a->page[op->page];
	struct vmm_holding *h = calloc(1, sizeof(*h));

	/* Owned here, the lock is in our table already; otherwise the owner
	 * granted it and our mirror records it now. */
	if (!h || (!op->owned && vmm_lock(v, p, vmm_lock_mode(op->write), op->owner) < 0)) {
		free(h);
		return false;
	}
	if (!op->owned)
		vmm_unpin(v, p); /* the lock keeps it resident now */
	h->vmm = v;
	h->client_id = op->client_id;
	snprintf(h->guid, sizeof(h->guid), "%s", op->guid);
	h->page = op->page;
	snprintf(h->owner, sizeof(h->owner), "%s", op->owner);
	h->write = op->write;
	h->landing = op->op.landing;
	h->has_landing = op->write && op->op.has_landing;
	if (client_call_client_gone(op->op.call)) {
		/* It went while the partner granted: nobody to hold it. */
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
				"client gone before the grant");
		h->deadline_ms = clock_now_ms() + v->config->request_timeout_ms;
		vmm_holding_mirror_since(v, h, op->snapshots); /* ahead of the release */
		release(v, NULL, h, h->write);
		return true;
	}
	vmm_holding_add_after(v, h, op->snapshots);
	pointer_reply(v, op->op.call, a, op->page);
	return true;
}

static enum vmm_wait_reason pointer_wait_reason(int status)
{
	switch (status) {
	case FTVM__PARTNER__STATUS__STATUS_LOCKED:
		return VMM_WAIT_LOCK;
	case FTVM__PARTNER__STATUS__STATUS_NO_SPACE:
		return VMM_WAIT_FRAMES;
	default:
		return VMM_WAIT_PARTNER;
	}
}

static void pointer_finish(struct vmm_op *base)
{
	struct pointer_op *op = (struct pointer_op *)base;
	struct vmm *v = op->op.vmm;
	/* Not one a resync put in its place meanwhile (as write_finish). */
	struct vmm_alloc *a = vmm_table_find_incarnation(v->table, op->guid, op->incarnation);
	/* The partner recorded our lock unless the batch failed before it did. */
	bool partner_holds = op->op.status == FTVM__PARTNER__STATUS__STATUS_OK ||
			     op->op.failed_at > op->lock_index;

	if (op->op.status == FTVM__PARTNER__STATUS__STATUS_OK && a) {
		if (hold(v, op, a)) {
			free(op);
			return;
		}
		op->op.status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		snprintf(op->op.reason, sizeof(op->op.reason), "out of memory");
	}
	if (a && op->owned)
		vmm_unlock(v, a, op->page, op->owner);
	else if (a)
		vmm_unpin(v, &a->page[op->page]);
	if (partner_holds)
		vmm_release_stray_lock(v, op->guid, op->page, op->owner);
	/* Lost the race to the owner's lock, found the partner without frames
	 * for its copy (Fig. 7 step 755), or lost the link (the failover
	 * window: asked again once the pair decided, ha/HA.md). */
	if (a && (((op->op.status == FTVM__PARTNER__STATUS__STATUS_LOCKED ||
		    op->op.status == FTVM__PARTNER__STATUS__STATUS_NO_SPACE) &&
		   op->wait) ||
		  (op->op.status == FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE &&
		   vmm_window_open(v)))) {
		struct vmm_page_request req = {
			.call = op->op.call,
			.kind = VMM_WAIT_POINTER,
			.guid = op->guid,
			.page = op->page,
			.write = op->write,
			.wait = op->wait,
			.again = true,
			.deadline_ms = op->deadline_ms,
			.ticket = op->ticket,
		};

		vmm_page_wait(v, &req, pointer_wait_reason(op->op.status),
			      op->op.status == FTVM__PARTNER__STATUS__STATUS_NO_SPACE
				      ? op->op.reason
				      : NULL);
	} else {
		vmm_reply_error(op->op.call,
				a ? op->op.status : FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
				"%s page %llu: %s", op->guid, (unsigned long long)op->page,
				a ? op->op.reason : "allocation released or resynced meanwhile");
	}
	free(op);
}

/* Locks the page (owned here) or pins it until the owner answers. */
static int take_page(struct vmm *v, struct pointer_op *op, struct vmm_page *p)
{
	if (op->owned)
		return vmm_lock(v, p, vmm_lock_mode(op->write), op->owner);
	vmm_pin(v, p);
	return 0;
}

static void let_page_go(struct vmm *v, struct pointer_op *op, struct vmm_alloc *a)
{
	if (op->owned)
		vmm_unlock(v, a, op->page, op->owner);
	else
		vmm_unpin(v, &a->page[op->page]);
}

void vmm_pointer_retry(struct vmm *v, const struct vmm_page_request *req)
{
	struct vmm_msg msgs[2];
	Envelope *envs[2];
	struct vmm_alloc *a = vmm_client_page(v, req->call, req->guid, req->page,
					      req->write ? "take a write pointer into"
							 : "take a read pointer into");
	struct pointer_op *op;
	const char *conflict;
	char queued[64];
	uint32_t wait_ms = 0;
	size_t n = 0;

	if (!a || (req->write && vmm_refuses_change(v, req->call)))
		return;
	if (!vmm_can_complete(v)) {
		vmm_partner_wait(v, req,
				 "partner unavailable: a pointer is mirrored before it is "
				 "granted");
		return;
	}
	conflict = vmm_page_conflict(a, &a->page[req->page], vmm_lock_mode(req->write));
	if (!conflict && !req->again)
		conflict = vmm_page_queued(v, req->guid, req->page, queued, sizeof(queued));
	if (conflict) {
		if (req->wait)
			vmm_page_wait(v, req, VMM_WAIT_LOCK, NULL);
		else
			vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_LOCKED,
					"%s page %llu is %s", req->guid,
					(unsigned long long)req->page, conflict);
		return;
	}
	if (!vmm_page_contents(v, req, a))
		return;
	op = calloc(1, sizeof(*op));
	if (!op) {
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	op->op.vmm = v;
	op->op.call = req->call;
	op->op.finish = pointer_finish;
	op->client_id = client_call_client_id(req->call);
	snprintf(op->guid, sizeof(op->guid), "%s", req->guid);
	op->incarnation = a->incarnation;
	op->page = req->page;
	op->write = req->write;
	op->wait = req->wait;
	op->deadline_ms = req->deadline_ms;
	op->owned = vmm_is_owner(v, a);
	op->ticket = op->owned ? 0 : vmm_lock_request_ticket(v, req, &wait_ms);
	vmm_lock_owner(v, req->call, op->owner, sizeof(op->owner));
	if (take_page(v, op, &a->page[req->page]) < 0) {
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		free(op);
		return;
	}
	if (!op->owned) {
		envs[n] = vmm_msg_lock_request(&msgs[n], a->guid, req->page, req->write, op->ticket,
					       wait_ms);
		n++;
	}
	op->lock_index = n;
	envs[n] = vmm_msg_allocate(&msgs[n], a->guid, req->page, op->owner, req->write, req->write);
	n++;
	op->snapshots = vmm_holdings_snapshots(v);
	if (vmm_op_send(&op->op, envs, n) < 0) {
		let_page_go(v, op, a);
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, "%s",
				op->op.reason[0] ? op->op.reason : "cannot reach the partner");
		free(op);
	}
}

void vmm_op_get_pointer(struct vmm *v, struct client_call *call,
			const Ftvm__Client__GetPointerRequest *req)
{
	struct vmm_page_request r = {
		.call = call,
		.kind = VMM_WAIT_POINTER,
		.guid = req->guid,
		.page = req->page,
		.write = req->write,
		.wait = req->wait,
	};

	if (vmm_client_may(v, call, CLIENT_RIGHT_POINTERS, "hold pointers"))
		vmm_pointer_retry(v, &r);
}

/* ---- release a pointer (Fig. 8) ---- */

static void release_replied(void *arg)
{
	struct release_op *op = arg;
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__ReleasePointerReply rr = FTVM__CLIENT__RELEASE_POINTER_REPLY__INIT;

	if (op->op.call) {
		rr.crc32c = op->crc;
		rr.version = op->new_version;
		reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_RELEASE_POINTER;
		reply.release_pointer = &rr;
		client_call_reply(op->op.call, &reply);
	}
	free(op->h);
	free(op);
}

/* As write_acked (whole_page.c): the release happened, the pointer is let
 * go; only the wait for the store failed. */
static void release_acked(void *arg, int status, const char *reason)
{
	struct release_op *op = arg;

	if (status == FTVM__PARTNER__STATUS__STATUS_OK) {
		release_replied(op);
		return;
	}
	if (op->op.call)
		vmm_reply_error(op->op.call, status, "%s page %llu: released, but %s", op->h->guid,
				(unsigned long long)op->h->page, reason);
	free(op->h);
	free(op);
}

static void on_release_retry(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_holding *h = arg;

	vmm_holding_unlink(h->vmm, h);
	event_free(h->retry);
	h->retry = NULL;
	release(h->vmm, NULL, h, h->write);
}

/* A gone client's release the partner did not take, for want of frames or
 * because it cannot be reached now (a failover may be under way): it is
 * tried again, the holding and its lock kept meanwhile, so that what the
 * client wrote is not taken for the page's version. Back, the partner
 * takes it; taken over, this node completes it alone; fenced, the holding
 * goes (vmm_holdings_revoke). false when its time is up. */
static bool release_later(struct vmm *v, struct vmm_holding *h, int status, uint64_t snapshots)
{
	if ((status != FTVM__PARTNER__STATUS__STATUS_NO_SPACE &&
	     status != FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE) ||
	    clock_now_ms() >= h->deadline_ms)
		return false;
	h->retry = evtimer_new(v->base, on_release_retry, h);
	if (!h->retry)
		return false;
	vmm_timer_add_ms(h->retry, VMM_RETRY_MS);
	vmm_holding_add_after(v, h, snapshots);
	return true;
}

/* A client's pointer stays held, so it can release again (once the partner
 * is back, or has frames); a gone client's (call NULL) is let go here alone
 * once the partner cannot take it, and the partner learns of it when the pair
 * resyncs. */
static void release_failed(struct vmm *v, struct client_call *call, struct vmm_holding *h,
			   int status, const char *reason, uint64_t snapshots)
{
	struct vmm_alloc *a = vmm_table_find(v->table, h->guid);

	if (call) {
		vmm_holding_add_after(v, h, snapshots);
		vmm_reply_error(call, status,
				"%s page %llu: release failed, pointer still held: %s", h->guid,
				(unsigned long long)h->page, reason);
		return;
	}
	if (a && release_later(v, h, status, snapshots))
		return;
	log_warning("%s page %llu: pointer of a gone client released here only: %s", h->guid,
		    (unsigned long long)h->page, reason);
	vmm_holding_let_go(v, h);
	free(h);
}

static void release_finish(struct vmm_op *base)
{
	struct release_op *op = (struct release_op *)base;
	struct vmm *v = op->op.vmm;
	struct vmm_holding *h = op->h;
	struct vmm_alloc *a = vmm_table_find(v->table, h->guid);
	struct pt_origin o = { .node = vmm_node_id(v), .lsn = op->op.lsn, .own = true };

	if (op->op.status != FTVM__PARTNER__STATUS__STATUS_OK || !a) {
		release_failed(v, op->op.call, h,
			       a ? op->op.status : FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
			       a ? op->op.reason : "allocation released meanwhile", op->snapshots);
		free(op);
		return;
	}
	/* The partner applied it, then a resync replaced its table with the
	 * page as it was here, without its block (the client had written into
	 * it) and without the lock: the lock goes again, and the release
	 * behind it. */
	if (op->modified && vmm_holding_mirror_since(v, h, op->snapshots)) {
		release(v, op->op.call, h, true);
		free(op);
		return;
	}
	if (op->modified) {
		op->new_version = op->owned ? op->new_version : op->op.lock_version;
		vmm_page_modified(v, a, h->page, op->new_version, op->crc, &o);
	}
	vmm_unlock(v, a, h->page, h->owner);
	if (op->modified)
		vmm_page_write_acked(v, a, h->page, op->new_version, false,
				     op->op.call ? client_call_client_id(op->op.call) : 0,
				     release_acked, op);
	else
		release_replied(op);
}

/* The release batch, with the block (envs[0], when op->modified) written
 * one-sided into the landing the partner gave with the lock when it gave
 * one, inline otherwise (pagedata_send). The landing serves once: a release
 * tried again goes inline. Nothing is held past the send: the block is in
 * the page's frames, and no granted run is used. */
static int send_release(struct vmm *v, struct release_op *op, struct vmm_alloc *a,
			struct vmm_msg *msgs, Envelope **envs, size_t n)
{
	struct vmm_holding *h = op->h;
	struct pagedata_outgoing out = {
		.guid = h->guid, .page = h->page, .block_size = a->block_size, .crc32c = op->crc
	};

	if (!op->modified)
		return vmm_op_send(&op->op, envs, n);
	out.block = out.frames = vmm_block_addr(v, a, h->page);
	if (h->has_landing)
		out.landing = &h->landing;
	h->has_landing = false;
	return pagedata_send(v->pagedata, &op->op, msgs, envs, n, 0, &out);
}

/* Releases h (already out of the holdings list); call may be NULL. */
static void release(struct vmm *v, struct client_call *call, struct vmm_holding *h, bool modified)
{
	struct vmm_msg msgs[2];
	struct vmm_alloc *a = vmm_table_find(v->table, h->guid);
	struct release_op *op = calloc(1, sizeof(*op));
	Envelope *envs[2];
	size_t n = 0;

	if (!op || !a) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "%s",
				op ? "allocation gone" : "out of memory");
		free(op);
		free(h);
		return;
	}
	op->op.vmm = v;
	op->op.call = call;
	op->op.finish = release_finish;
	op->h = h;
	op->modified = modified;
	op->owned = vmm_is_owner(v, a);
	op->snapshots = vmm_holdings_snapshots(v);
	/* A plain release leaves the block as the page has it (for a write
	 * pointer, vmm_op_release_pointer has checked): no checksum to take. */
	op->crc = modified ? vmm_block_crc(v, a, h->page) : a->page[h->page].crc32c;
	/* Only a modified release makes a new version. */
	op->new_version = a->page[h->page].version + modified;
	if (modified) {
		op->op.lsn = pagetable_reserve_lsn(v->pt);
		n++; /* the WritePage, built by send_release */
	}
	envs[n] = vmm_msg_release_pointer(&msgs[n], h->guid, h->page, h->owner, modified,
					  op->new_version, op->crc);
	n++;
	if (send_release(v, op, a, msgs, envs, n) < 0) {
		release_failed(v, call, h, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
			       op->op.reason[0] ? op->op.reason : "cannot reach the partner",
			       op->snapshots);
		free(op);
	}
}

/* A write pointer released as not modified whose block changed is refused
 * (true): the write is in place, so the page's acknowledged contents are
 * gone here, and a plain release would leave this node serving bytes the
 * page table and the partner know nothing of. The pointer stays held:
 * release it as modified (or write the old contents back first). */
static bool changed_block_refused(struct vmm *v, struct client_call *call,
				  const struct vmm_holding *h)
{
	struct vmm_alloc *a = vmm_table_find(v->table, h->guid);
	struct vmm_page *p = vmm_alloc_page(a, h->page);
	uint32_t crc;

	if (!p || !p->resident)
		return false;
	crc = vmm_block_crc(v, a, h->page);
	if (crc == p->crc32c)
		return false;
	vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
			"%s page %llu: write pointer released as not modified, but its block "
			"changed (crc32c 0x%08x, the page's 0x%08x): release it as modified",
			h->guid, (unsigned long long)h->page, crc, p->crc32c);
	return true;
}

void vmm_op_release_pointer(struct vmm *v, struct client_call *call,
			    const Ftvm__Client__ReleasePointerRequest *req)
{
	struct vmm_holding *h = vmm_holding_find(v, call, req->guid, req->page);

	if (vmm_holding_revoked_reply(v, call, h))
		return;
	if (!h) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"this client holds no pointer to %s page %llu", req->guid,
				(unsigned long long)req->page);
		return;
	}
	if (req->modified && !h->write) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"%s page %llu: a read pointer cannot be released as modified",
				req->guid, (unsigned long long)req->page);
		return;
	}
	if (!req->modified && h->write && changed_block_refused(v, call, h))
		return;
	vmm_holding_unlink(v, h);
	release(v, call, h, req->modified);
}

void vmm_client_gone(struct vmm *v, uint64_t client_id)
{
	struct vmm_holding *h;

	vmm_window_client_gone(v, client_id);
	vmm_sessions_client_gone(v, client_id);
	vmm_space_waiters_client_gone(v, client_id);
	vmm_flushes_client_gone(v, client_id);
	vmm_page_waiters_client_gone(v, client_id);
	/* A release tried again later comes back into the list waiting
	 * (h->retry): taken no more. */
	while ((h = vmm_holding_take_client(v, client_id))) {
		if (h->revoked) {
			log_info("client gone: its revoked %s pointer to %s page %llu dropped",
				 h->write ? "write" : "read", h->guid, (unsigned long long)h->page);
			vmm_holding_free(v, h);
			continue;
		}
		log_info("client gone: releasing its %s pointer to %s page %llu",
			 h->write ? "write" : "read", h->guid, (unsigned long long)h->page);
		h->deadline_ms = clock_now_ms() + v->config->request_timeout_ms;
		release(v, NULL, h, h->write);
	}
}

void vmm_op_map(struct vmm *v, struct client_call *call)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__MapReply mr = FTVM__CLIENT__MAP_REPLY__INIT;

	if (!vmm_client_may(v, call, CLIENT_RIGHT_POINTERS, "map the frame pool"))
		return;
	mr.size = frame_pool_total(v->pool) * frame_pool_page_size(v->pool);
	mr.page_size = frame_pool_page_size(v->pool);
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_MAP;
	reply.map = &mr;
	client_call_reply_fd(call, &reply, frame_pool_fd(v->pool));
}
