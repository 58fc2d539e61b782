/* Read and write pointers (seed 002 Figs. 6-8) into the frame pool that the
 * client maps, and the paging queue of requests waiting for a lock.
 *
 *   get pointer: owned here  -> lock now, [AllocateRead|AllocateWrite] mirror
 *                owned there -> [LockRequest, AllocateRead|AllocateWrite] to it
 *   release:     modified    -> [WritePage, ReleasePointer{modified}]
 *                unmodified  -> [ReleasePointer]
 *
 * Each is one partner round trip. A pointer belongs to the client connection
 * that got it; when the connection goes, its pointers are released (a write
 * pointer as modified: whatever the client wrote into the frame is mirrored,
 * so the two copies stay equal). */
#include "vmm_internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "crc32c.h"
#include "log.h"
#include "session.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct vmm_holding {
	struct vmm_holding *next;
	uint64_t client_id;
	char guid[128];
	uint64_t page;
	char owner[128];
	bool write;
};

/* A get-pointer request waiting in the paging queue. */
struct vmm_page_waiter {
	struct vmm_page_waiter *next;
	struct vmm *vmm;
	struct client_call *call;
	enum vmm_wait_kind kind;
	uint64_t client_id;
	char guid[128];
	uint64_t page;
	bool write;
	uint8_t *data; /* a whole-page write's bytes */
	size_t len;
	struct event *deadline;
};

struct pointer_op {
	struct vmm_op op;
	uint64_t client_id;
	char guid[128];
	uint64_t page;
	char owner[128];
	bool write;
	bool owned;
	bool wait;
	size_t lock_index;
};

struct release_op {
	struct vmm_op op;
	struct vmm_holding *h;
	bool modified;
	bool owned;
	uint64_t new_version;
	uint32_t crc;
};

static int lock_mode(bool write)
{
	return write ? FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE
		     : FTVM__PARTNER__LOCK_MODE__LOCK_MODE_READ;
}

static void grant(struct vmm *v, struct client_call *call, uint64_t client_id, const char *guid,
		  uint64_t page, bool write, bool wait);
static void release(struct vmm *v, struct client_call *call, struct vmm_holding *h, bool modified);

/* ---- the paging queue ---- */

static void waiter_unlink(struct vmm *v, struct vmm_page_waiter *w)
{
	struct vmm_page_waiter **p = &v->page_waiters;

	while (*p && *p != w)
		p = &(*p)->next;
	if (*p)
		*p = w->next;
	if (w->deadline)
		event_free(w->deadline);
	free(w->data);
	free(w);
}

static void on_waiter_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_page_waiter *w = arg;

	vmm_reply_error(w->call, FTVM__PARTNER__STATUS__STATUS_LOCKED,
			"%s page %llu stayed locked for %u ms", w->guid,
			(unsigned long long)w->page, w->vmm->config->request_timeout_ms);
	waiter_unlink(w->vmm, w);
}

void vmm_page_wait(struct vmm *v, struct client_call *call, enum vmm_wait_kind kind,
		   const char *guid, uint64_t page, bool write, const void *data, size_t len,
		   bool at_head)
{
	struct timeval tv = { .tv_sec = v->config->request_timeout_ms / 1000,
			      .tv_usec = (v->config->request_timeout_ms % 1000) * 1000 };
	struct vmm_page_waiter *w = calloc(1, sizeof(*w)), **tail = &v->page_waiters;
	uint64_t client_id = client_call_client_id(call);

	if (!w || !(w->deadline = evtimer_new(v->base, on_waiter_deadline, w)) ||
	    (len && !(w->data = malloc(len)))) {
		if (w && w->deadline)
			event_free(w->deadline);
		free(w);
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	if (len)
		memcpy(w->data, data, len);
	w->len = len;
	w->kind = kind;
	w->vmm = v;
	w->call = call;
	w->client_id = client_id;
	snprintf(w->guid, sizeof(w->guid), "%s", guid);
	w->page = page;
	w->write = write;
	evtimer_add(w->deadline, &tv);
	if (!at_head)
		while (*tail)
			tail = &(*tail)->next;
	w->next = *tail;
	*tail = w;
}

static bool blocked_behind(const struct vmm_page_waiter *first, const struct vmm_page_waiter *w)
{
	for (const struct vmm_page_waiter *x = first; x != w; x = x->next)
		if (x->page == w->page && strcmp(x->guid, w->guid) == 0)
			return true;
	return false;
}

/* Locks were let go: every waiter that can be granted now goes on, in order;
 * one still blocked keeps those behind it for the same page waiting. Runs
 * from its own event, never inside the handling of a partner batch, whose
 * answers must wait for their commit. */
void vmm_on_paging_kick(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *v = arg;
	struct vmm_page_waiter *w = v->page_waiters, *next;

	for (; w; w = next) {
		struct vmm_alloc *a = vmm_table_find(v->table, w->guid);
		struct client_call *call = w->call;
		uint64_t client_id = w->client_id, page = w->page;
		bool write = w->write;
		enum vmm_wait_kind kind = w->kind;
		char guid[sizeof(w->guid)];
		uint8_t *data = w->data;
		size_t len = w->len;

		next = w->next;
		if (blocked_behind(v->page_waiters, w) ||
		    (a && page < a->pages &&
		     vmm_page_conflict(a, &a->page[page], lock_mode(write))))
			continue;
		snprintf(guid, sizeof(guid), "%s", w->guid);
		w->data = NULL; /* ours now */
		waiter_unlink(v, w);
		if (kind == VMM_WAIT_POINTER)
			grant(v, call, client_id, guid, page, write, true);
		else
			vmm_page_retry(v, call, kind, guid, page, data, len);
		free(data);
		next = v->page_waiters; /* a grant may have queued or dropped some */
	}
}

int vmm_unlock(struct vmm *v, struct vmm_alloc *a, uint64_t page, const char *owner)
{
	int r = vmm_page_unlock(&a->page[page], owner);

	if (r == 0 && v->page_waiters)
		event_active(v->kick_event, EV_TIMEOUT, 0);
	return r;
}

uint64_t vmm_page_waiting(const struct vmm *v)
{
	uint64_t n = 0;

	for (const struct vmm_page_waiter *w = v->page_waiters; w; w = w->next)
		n++;
	return n;
}

void vmm_page_waiters_fail(struct vmm *v)
{
	while (v->page_waiters) {
		vmm_reply_error(v->page_waiters->call, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
				"node stopping");
		waiter_unlink(v, v->page_waiters);
	}
}

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

static void pointer_finish(struct vmm_op *base)
{
	struct pointer_op *op = (struct pointer_op *)base;
	struct vmm *v = op->op.vmm;
	struct vmm_alloc *a = vmm_table_find(v->table, op->guid);
	/* The partner recorded our lock unless the batch failed before it did. */
	bool partner_holds = op->op.status == FTVM__PARTNER__STATUS__STATUS_OK ||
			     op->op.failed_at > op->lock_index;
	struct vmm_holding *h;

	if (op->op.status == FTVM__PARTNER__STATUS__STATUS_OK && a) {
		h = calloc(1, sizeof(*h));
		/* Owned here, the lock is in our table already; otherwise the
		 * owner granted it and our mirror records it now. */
		if (h && (op->owned || vmm_page_lock(&a->page[op->page], lock_mode(op->write),
						     op->owner) == 0)) {
			h->client_id = op->client_id;
			snprintf(h->guid, sizeof(h->guid), "%s", op->guid);
			h->page = op->page;
			snprintf(h->owner, sizeof(h->owner), "%s", op->owner);
			h->write = op->write;
			if (client_call_client_gone(op->op.call)) {
				/* It went while the partner granted: nobody to hold it. */
				vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
						"client gone before the grant");
				release(v, NULL, h, h->write);
				free(op);
				return;
			}
			h->next = v->holdings;
			v->holdings = h;
			pointer_reply(v, op->op.call, a, op->page);
			free(op);
			return;
		}
		free(h);
		op->op.status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		snprintf(op->op.reason, sizeof(op->op.reason), "out of memory");
	}
	if (a && op->owned)
		vmm_unlock(v, a, op->page, op->owner);
	if (partner_holds)
		vmm_release_stray_lock(v, op->guid, op->page, op->owner);
	if (op->op.status == FTVM__PARTNER__STATUS__STATUS_LOCKED && op->wait && a)
		vmm_page_wait(v, op->op.call, VMM_WAIT_POINTER, op->guid, op->page, op->write, NULL,
			      0, true);
	else
		vmm_reply_error(op->op.call,
				a ? op->op.status : FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
				"%s page %llu: %s", op->guid, (unsigned long long)op->page,
				a ? op->op.reason : "allocation released meanwhile");
	free(op);
}

static void grant(struct vmm *v, struct client_call *call, uint64_t client_id, const char *guid,
		  uint64_t page, bool write, bool wait)
{
	struct vmm_msg msgs[2];
	Envelope *envs[2];
	struct vmm_alloc *a = vmm_client_page(v, call, guid, page);
	struct pointer_op *op;
	const char *conflict;
	size_t n = 0;

	if (!a)
		return;
	if (!vmm_partner_linked(v)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"partner unavailable: a pointer is mirrored before it is granted");
		return;
	}
	conflict = vmm_page_conflict(a, &a->page[page], lock_mode(write));
	if (conflict) {
		if (wait)
			vmm_page_wait(v, call, VMM_WAIT_POINTER, guid, page, write, NULL, 0, false);
		else
			vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_LOCKED,
					"%s page %llu is %s", guid, (unsigned long long)page,
					conflict);
		return;
	}
	op = calloc(1, sizeof(*op));
	if (!op) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	op->op.vmm = v;
	op->op.call = call;
	op->op.finish = pointer_finish;
	op->client_id = client_id;
	snprintf(op->guid, sizeof(op->guid), "%s", guid);
	op->page = page;
	op->write = write;
	op->wait = wait;
	op->owned = vmm_is_owner(v, a);
	vmm_lock_owner(v, call, op->owner, sizeof(op->owner));
	if (op->owned) {
		if (vmm_page_lock(&a->page[page], lock_mode(write), op->owner) < 0) {
			vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
					"out of memory");
			free(op);
			return;
		}
	} else {
		envs[n] = vmm_msg_lock_request(&msgs[n], a->guid, page, write);
		n++;
	}
	op->lock_index = n;
	envs[n] = vmm_msg_allocate(&msgs[n], a->guid, page, op->owner, write);
	n++;
	if (vmm_op_send(&op->op, envs, n) < 0) {
		if (op->owned)
			vmm_unlock(v, a, page, op->owner);
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, "%s",
				op->op.reason[0] ? op->op.reason : "cannot reach the partner");
		free(op);
	}
}

void vmm_op_get_pointer(struct vmm *v, struct client_call *call,
			const Ftvm__Client__GetPointerRequest *req)
{
	grant(v, call, client_call_client_id(call), req->guid, req->page, req->write, req->wait);
}

/* ---- release a pointer (Fig. 8) ---- */

static void release_replied(void *arg, int r)
{
	struct release_op *op = arg;
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__ReleasePointerReply rr = FTVM__CLIENT__RELEASE_POINTER_REPLY__INIT;

	if (r < 0) {
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
				"released but not committed: %s", strerror(-r));
	} else if (op->op.call) {
		rr.crc32c = op->crc;
		rr.version = op->new_version;
		reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_RELEASE_POINTER;
		reply.release_pointer = &rr;
		client_call_reply(op->op.call, &reply);
	}
	free(op->h);
	free(op);
}

static void unlink_holding(struct vmm *v, struct vmm_holding *h)
{
	struct vmm_holding **p = &v->holdings;

	while (*p && *p != h)
		p = &(*p)->next;
	if (*p)
		*p = h->next;
}

/* A client's pointer stays held, so it can release again once the partner
 * is back; a gone client's (call NULL) is let go here alone, and the partner
 * learns of it when the pair resyncs. */
static void release_failed(struct vmm *v, struct client_call *call, struct vmm_holding *h,
			   const char *reason)
{
	struct vmm_alloc *a = vmm_table_find(v->table, h->guid);

	if (call) {
		h->next = v->holdings;
		v->holdings = h;
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"%s page %llu: release failed, pointer still held: %s", h->guid,
				(unsigned long long)h->page, reason);
		return;
	}
	log_warning("%s page %llu: pointer of a gone client released here only: %s", h->guid,
		    (unsigned long long)h->page, reason);
	if (a)
		vmm_unlock(v, a, h->page, h->owner);
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
		release_failed(v, op->op.call, h, op->op.reason);
		free(op);
		return;
	}
	if (op->modified) {
		op->new_version = op->owned ? op->new_version : op->op.lock_version;
		vmm_page_modified(v, a, h->page, op->new_version, op->crc, &o);
	}
	vmm_unlock(v, a, h->page, h->owner);
	if (op->modified)
		vmm_after_commit(v, release_replied, op);
	else
		release_replied(op, 0);
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
	op->crc = vmm_block_crc(v, a, h->page);
	op->new_version = a->page[h->page].version + 1;
	if (modified) {
		op->op.lsn = pagetable_reserve_lsn(v->pt);
		envs[n] = vmm_msg_write_page(&msgs[n], h->guid, h->page,
					     vmm_block_addr(v, a, h->page), a->block_size, op->crc);
		n++;
	}
	envs[n] = vmm_msg_release_pointer(&msgs[n], h->guid, h->page, h->owner, modified,
					  op->new_version, op->crc);
	n++;
	if (vmm_op_send(&op->op, envs, n) < 0) {
		release_failed(v, call, h,
			       op->op.reason[0] ? op->op.reason : "cannot reach the partner");
		free(op);
	}
}

void vmm_op_release_pointer(struct vmm *v, struct client_call *call,
			    const Ftvm__Client__ReleasePointerRequest *req)
{
	uint64_t client_id = client_call_client_id(call);
	struct vmm_holding *h;

	for (h = v->holdings; h; h = h->next)
		if (h->client_id == client_id && h->page == req->page &&
		    strcmp(h->guid, req->guid) == 0)
			break;
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
	unlink_holding(v, h);
	release(v, call, h, req->modified);
}

void vmm_client_gone(struct vmm *v, uint64_t client_id)
{
	struct vmm_holding **p = &v->holdings;
	struct vmm_page_waiter **w = &v->page_waiters;

	while (*w) {
		if ((*w)->client_id == client_id) {
			vmm_reply_error((*w)->call, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
					"client gone");
			waiter_unlink(v, *w);
			w = &v->page_waiters; /* the list changed under us: start over */
			continue;
		}
		w = &(*w)->next;
	}
	while (*p) {
		struct vmm_holding *h = *p;

		if (h->client_id != client_id) {
			p = &h->next;
			continue;
		}
		*p = h->next;
		log_info("client gone: releasing its %s pointer to %s page %llu",
			 h->write ? "write" : "read", h->guid, (unsigned long long)h->page);
		release(v, NULL, h, h->write);
	}
}

void vmm_holdings_free(struct vmm *v)
{
	while (v->holdings) {
		struct vmm_holding *h = v->holdings;

		v->holdings = h->next;
		free(h);
	}
}

void vmm_op_map(struct vmm *v, struct client_call *call)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__MapReply mr = FTVM__CLIENT__MAP_REPLY__INIT;

	mr.size = frame_pool_total(v->pool) * frame_pool_page_size(v->pool);
	mr.page_size = frame_pool_page_size(v->pool);
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_MAP;
	reply.map = &mr;
	client_call_reply_fd(call, &reply, frame_pool_fd(v->pool));
}
