/* Page locks and the paging queue of requests that cannot go on now.
 *
 * A request waits for a lock (LOCK), for its page's contents to arrive
 * (CONTENTS: a page-in, or a whole-page write bringing them), for the end of
 * the failover window (PARTNER: ha/failover_window.c) or for frames (FRAMES: tried again every
 * VMM_RETRY_MS), in order per page, until its deadline. On the owner of an allocation it also holds
 * the partner's waiting requests as tickets, in the same order (vmm/VMM.md, "Fairness across the
 * pair"). */
#include "vmm_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "session.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

/* A request waiting in the paging queue; req's guid points into it, and a
 * write's data into its call's request, which stays until the call is
 * answered (client_server.h). */
struct vmm_page_waiter {
	struct vmm_page_waiter *next;
	struct vmm *vmm;
	struct vmm_page_request req;
	enum vmm_wait_reason why;
	uint64_t client_id;
	char guid[128];
	char reason[256]; /* why frames are short */
	bool due;	  /* FRAMES: time to try again */
	bool held;	  /* TICKET: its turn came, the page is kept for it */
	/* retry: FRAMES, when to try again; LOCK on a page the partner owns,
	 * when to ask again; TICKET, the end of its hold. */
	struct event *deadline, *retry;
};

static void waiter_free(struct vmm_page_waiter *w)
{
	if (w->deadline)
		event_free(w->deadline);
	if (w->retry)
		event_free(w->retry);
	free(w);
}

static void waiter_unlink(struct vmm *v, struct vmm_page_waiter *w)
{
	struct vmm_page_waiter **p = &v->page_waiters;

	while (*p && *p != w)
		p = &(*p)->next;
	if (*p)
		*p = w->next;
	waiter_free(w);
}

static void on_waiter_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_page_waiter *w = arg;
	struct vmm *v = w->vmm;
	unsigned ms = v->config->request_timeout_ms;
	unsigned long long page = w->req.page;

	switch (w->why) {
	case VMM_WAIT_LOCK:
		if (w->req.kind == VMM_WAIT_TICKET)
			log_debug("%s page %llu: the partner's ticket %llu ran out", w->guid, page,
				  (unsigned long long)w->req.ticket);
		vmm_reply_error(w->req.call, FTVM__PARTNER__STATUS__STATUS_LOCKED,
				"%s page %llu stayed locked for %u ms", w->guid, page, ms);
		break;
	case VMM_WAIT_CONTENTS:
		vmm_reply_error(w->req.call, FTVM__PARTNER__STATUS__STATUS_TIMEOUT,
				"%s page %llu: its page-in did not complete within %u ms", w->guid,
				page, ms);
		break;
	case VMM_WAIT_FRAMES:
		vmm_reply_error(w->req.call, FTVM__PARTNER__STATUS__STATUS_NO_SPACE,
				"%s page %llu: %s, for %u ms", w->guid, page, w->reason, ms);
		break;
	case VMM_WAIT_PARTNER:
		vmm_reply_error(w->req.call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"%s page %llu: partner unavailable for %u ms (request_timeout_ms): "
				"the link is down and neither its return nor a takeover came",
				w->guid, page, ms);
		break;
	}
	waiter_unlink(v, w);
	vmm_paging_kick(v); /* those behind it for the page may go on */
}

static void on_waiter_retry(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_page_waiter *w = arg;

	w->due = true;
	vmm_paging_kick(w->vmm);
}

/* The owner's queue may keep the page for an earlier request while our
 * mirror shows it free: a request for a page the partner owns asks again at
 * this pace as long as the mirror shows it free. */
static void on_lock_poll(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_page_waiter *w = arg;

	vmm_paging_kick(w->vmm);
}

static void on_ticket_hold_over(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_page_waiter *w = arg;
	struct vmm *v = w->vmm;

	log_debug("%s page %llu: the partner did not ask again for ticket %llu within %u ms",
		  w->guid, (unsigned long long)w->req.page, (unsigned long long)w->req.ticket,
		  VMM_TICKET_HOLD_MS);
	waiter_unlink(v, w);
	vmm_paging_kick(v);
}

/* The timer w needs besides its deadline (see struct vmm_page_waiter); true
 * when it needs none or has it. */
static bool waiter_timer(struct vmm *v, struct vmm_page_waiter *w)
{
	struct vmm_alloc *a = vmm_table_find(v->table, w->guid);

	if (w->req.kind == VMM_WAIT_TICKET)
		w->retry = evtimer_new(v->base, on_ticket_hold_over, w);
	else if (w->why == VMM_WAIT_FRAMES)
		w->retry = evtimer_new(v->base, on_waiter_retry, w);
	else if (w->why == VMM_WAIT_LOCK && a && !vmm_is_owner(v, a))
		w->retry = event_new(v->base, -1, EV_PERSIST, on_lock_poll, w);
	else
		return true;
	return w->retry != NULL;
}

static void on_ticket_answer(const CommandComplete *cc, void *arg)
{
	if (cc->status != FTVM__PARTNER__STATUS__STATUS_OK &&
	    cc->status != FTVM__PARTNER__STATUS__STATUS_LOCKED)
		log_debug("asking the owner for a place in its queue: %s", cc->reason);
}

/* A request for a page the partner owns that starts to wait here before it
 * asked the owner (our mirror shows the lock taken, or earlier requests wait
 * here) asks for its place in the owner's queue now, with a lone
 * LockRequest: the owner queues its ticket, or answers that nothing is ahead
 * of it. Either way it asks again, with the same ticket, when its turn
 * seems to have come. */
static void ask_for_ticket(struct vmm *v, struct vmm_page_waiter *w)
{
	struct vmm_alloc *a = vmm_table_find(v->table, w->guid);
	struct vmm_msg msg;
	uint32_t wait_ms;
	Envelope *env;

	if (w->why != VMM_WAIT_LOCK || w->req.kind == VMM_WAIT_TICKET || w->req.ticket || !a ||
	    vmm_is_owner(v, a) || vmm_mode(v) != VMM_MODE_MIRRORED)
		return;
	w->req.ticket = vmm_lock_request_ticket(v, &w->req, &wait_ms);
	env = vmm_msg_lock_request(&msg, w->guid, w->req.page, w->req.write, w->req.ticket,
				   wait_ms);
	vmm_partner_send(v, &env, 1, NULL, 0, on_ticket_answer, (void *[]){ NULL });
}

void vmm_page_wait(struct vmm *v, const struct vmm_page_request *req, enum vmm_wait_reason why,
		   const char *reason)
{
	struct vmm_page_waiter *w = calloc(1, sizeof(*w)), **tail = &v->page_waiters;
	uint64_t now = clock_now_ms();

	if (!w || !(w->deadline = evtimer_new(v->base, on_waiter_deadline, w))) {
		if (w)
			waiter_free(w);
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	w->vmm = v;
	w->req = *req;
	w->why = why;
	w->client_id = req->call ? client_call_client_id(req->call) : 0;
	snprintf(w->guid, sizeof(w->guid), "%s", req->guid);
	w->req.guid = w->guid;
	if (!waiter_timer(v, w)) {
		waiter_free(w);
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	snprintf(w->reason, sizeof(w->reason), "%s", reason ? reason : "");
	if (!w->req.deadline_ms)
		w->req.deadline_ms = now + v->config->request_timeout_ms;
	vmm_timer_add_ms(w->deadline, w->req.deadline_ms > now ? w->req.deadline_ms - now : 0);
	if (w->retry && req->kind != VMM_WAIT_TICKET)
		vmm_timer_add_ms(w->retry, VMM_RETRY_MS);
	if (!req->again)
		while (*tail)
			tail = &(*tail)->next;
	w->next = *tail;
	*tail = w;
	ask_for_ticket(v, w);
}

void vmm_partner_wait(struct vmm *v, const struct vmm_page_request *req, const char *reason)
{
	if (vmm_window_open(v))
		vmm_page_wait(v, req, VMM_WAIT_PARTNER, NULL);
	else
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, "%s",
				reason);
}

void vmm_frames_short(struct vmm *v, const struct vmm_page_request *req, const char *reason)
{
	if (req->wait)
		vmm_page_wait(v, req, VMM_WAIT_FRAMES, reason);
	else
		vmm_reply_error(req->call, FTVM__PARTNER__STATUS__STATUS_NO_SPACE,
				"%s page %llu: %s", req->guid, (unsigned long long)req->page,
				reason);
}

static bool same_page(const struct vmm_page_waiter *w, const char *guid, uint64_t page)
{
	return w->req.page == page && strcmp(w->guid, guid) == 0;
}

void vmm_page_in_failed(struct vmm *v, const char *guid, uint64_t page, const char *reason)
{
	struct vmm_page_waiter *w, *next;

	/* A whole-page write needs no contents: it goes on. */
	for (w = v->page_waiters; w; w = next) {
		next = w->next;
		if (w->why != VMM_WAIT_CONTENTS || w->req.kind == VMM_WAIT_WRITE_PAGE ||
		    !same_page(w, guid, page))
			continue;
		vmm_reply_error(w->req.call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
				"%s page %llu: %s", guid, (unsigned long long)page, reason);
		waiter_unlink(v, w);
	}
}

void vmm_paging_kick(struct vmm *v)
{
	if (v->page_waiters)
		event_active(v->kick_event, EV_TIMEOUT, 0);
}

static unsigned waiting_for_page(const struct vmm_page_waiter *from,
				 const struct vmm_page_waiter *to, const char *guid, uint64_t page)
{
	unsigned n = 0;

	for (const struct vmm_page_waiter *x = from; x != to; x = x->next)
		if (same_page(x, guid, page))
			n++;
	return n;
}

static const char *earlier_requests(unsigned n, char *buf, size_t len)
{
	if (!n)
		return NULL;
	snprintf(buf, len, "awaited by %u earlier request%s", n, n == 1 ? "" : "s");
	return buf;
}

const char *vmm_page_queued(const struct vmm *v, const char *guid, uint64_t page, char *buf,
			    size_t len)
{
	return earlier_requests(waiting_for_page(v->page_waiters, NULL, guid, page), buf, len);
}

static struct vmm_page_waiter *find_ticket(struct vmm *v, const Ftvm__Partner__LockRequest *m)
{
	struct vmm_page_waiter *w;

	for (w = v->page_waiters; w; w = w->next)
		if (w->req.kind == VMM_WAIT_TICKET && w->req.ticket == m->ticket &&
		    same_page(w, m->guid, m->page))
			return w;
	return NULL;
}

const char *vmm_ticket_turn(struct vmm *v, const Ftvm__Partner__LockRequest *m, char *buf,
			    size_t len)
{
	struct vmm_page_waiter *ticket = m->ticket ? find_ticket(v, m) : NULL;
	const char *why = earlier_requests(
		waiting_for_page(v->page_waiters, ticket, m->guid, m->page), buf, len);

	if (!why && ticket) {
		waiter_unlink(v, ticket);
		vmm_paging_kick(v);
	}
	return why;
}

void vmm_ticket_queue(struct vmm *v, const Ftvm__Partner__LockRequest *m)
{
	uint64_t now = clock_now_ms();
	struct vmm_page_request req = {
		.kind = VMM_WAIT_TICKET,
		.guid = m->guid,
		.page = m->page,
		.write = m->mode == FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE,
		.wait = true,
		/* The partner's wait, at most request_timeout_ms: a ticket from the
		 * wire never holds a place in the queue longer. */
		.deadline_ms = now + (m->wait_ms && m->wait_ms < v->config->request_timeout_ms
					      ? m->wait_ms
					      : v->config->request_timeout_ms),
		.ticket = m->ticket,
	};

	if (m->ticket && !find_ticket(v, m))
		vmm_page_wait(v, &req, VMM_WAIT_LOCK, NULL);
}

void vmm_tickets_drop(struct vmm *v)
{
	struct vmm_page_waiter *w, *next;
	bool dropped = false;

	for (w = v->page_waiters; w; w = next) {
		next = w->next;
		if (w->req.kind == VMM_WAIT_TICKET) {
			waiter_unlink(v, w);
			dropped = true;
		}
	}
	if (dropped)
		vmm_paging_kick(v);
}

uint64_t vmm_lock_request_ticket(struct vmm *v, const struct vmm_page_request *req,
				 uint32_t *wait_ms)
{
	uint64_t now = clock_now_ms(), deadline = req->deadline_ms
							  ? req->deadline_ms
							  : now + v->config->request_timeout_ms;

	*wait_ms = 0;
	if (!req->wait)
		return 0;
	*wait_ms = deadline > now ? (uint32_t)(deadline - now) : 1;
	return req->ticket ? req->ticket : ++v->next_ticket;
}

static bool blocked_behind(const struct vmm_page_waiter *first, const struct vmm_page_waiter *w)
{
	for (const struct vmm_page_waiter *x = first; x != w; x = x->next)
		if (same_page(x, w->guid, w->req.page))
			return true;
	return false;
}

static bool waiter_ready(struct vmm *v, const struct vmm_page_waiter *w)
{
	struct vmm_alloc *a = vmm_table_find(v->table, w->guid);
	const struct vmm_page *p;

	if (!a || w->req.page >= a->pages)
		return true; /* its retry says so */
	p = &a->page[w->req.page];
	switch (w->why) {
	case VMM_WAIT_LOCK:
		return !vmm_page_conflict(a, p, vmm_lock_mode(w->req.write));
	case VMM_WAIT_CONTENTS:
		return !p->pagein && !p->filling;
	case VMM_WAIT_FRAMES:
		return w->due;
	case VMM_WAIT_PARTNER:
		return !vmm_window_open(v);
	}
	return true;
}

/* Locks were let go, contents arrived, or frames may be free: every waiter
 * that can go on now does, in order; one still blocked keeps those behind it
 * for the same page waiting. Runs from its own event, never inside the
 * handling of a partner batch, whose answers must wait for their commit. */
void vmm_on_paging_kick(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *v = arg;
	struct vmm_page_waiter *w = v->page_waiters, *next;

	for (; w; w = next) {
		struct vmm_page_request req;
		char guid[sizeof(w->guid)];

		next = w->next;
		if (blocked_behind(v->page_waiters, w) || !waiter_ready(v, w))
			continue;
		if (w->req.kind == VMM_WAIT_TICKET) {
			/* Kept for the partner's next ask: those behind it wait. */
			if (!w->held)
				vmm_timer_add_ms(w->retry, VMM_TICKET_HOLD_MS);
			w->held = true;
			continue;
		}
		req = w->req;
		snprintf(guid, sizeof(guid), "%s", w->guid);
		req.guid = guid;
		req.again = true;
		waiter_unlink(v, w);
		if (req.kind == VMM_WAIT_POINTER)
			vmm_pointer_retry(v, &req);
		else
			vmm_page_retry(v, &req);
		next = v->page_waiters; /* a retry may have queued or dropped some */
	}
}

int vmm_lock(struct vmm *v, struct vmm_page *p, int mode, const char *owner)
{
	int r = vmm_page_lock(p, mode, owner);

	vmm_replace_update(v, p);
	return r;
}

int vmm_unlock(struct vmm *v, struct vmm_alloc *a, uint64_t page, const char *owner)
{
	struct vmm_page *p = &a->page[page];
	int r = vmm_page_unlock(p, owner);

	if (r < 0)
		return r;
	pagedata_landing_close(v->pagedata, a->guid, page,
			       owner); /* not adopted: nothing will land */
	vmm_replace_update(v, p);
	/* Held back while it was write-locked. */
	if (p->dirty)
		vmm_flash_page(v, a, page);
	if (p->dirty && vmm_is_owner(v, a))
		vmm_destage_page(v, a, page);
	vmm_paging_kick(v);
	return 0;
}

uint64_t vmm_page_waiting(const struct vmm *v)
{
	uint64_t n = 0;

	for (const struct vmm_page_waiter *w = v->page_waiters; w; w = w->next)
		n++;
	return n;
}

void vmm_page_waiters_fail(struct vmm *v, int status, const char *reason)
{
	while (v->page_waiters) {
		vmm_reply_error(v->page_waiters->req.call, status, "%s", reason);
		waiter_unlink(v, v->page_waiters);
	}
}

void vmm_page_waiters_client_gone(struct vmm *v, uint64_t client_id)
{
	struct vmm_page_waiter **w = &v->page_waiters;

	while (*w) {
		if ((*w)->req.call && (*w)->client_id == client_id) {
			vmm_reply_error((*w)->req.call, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
					"client gone");
			waiter_unlink(v, *w);
			w = &v->page_waiters; /* the list changed under us: start over */
			continue;
		}
		w = &(*w)->next;
	}
}
