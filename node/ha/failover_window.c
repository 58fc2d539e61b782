/* The failover window (node/ha/HA.md, "Calls through the failover window").
 * From the moment the link to the partner is lost while the pair is
 * mirrored until the pair decides (the link back with the pair whole, a
 * takeover, a fence: each is a vmm_set_mode()), a change cannot be
 * mirrored and nobody serves alone yet. A client's request that needs the
 * partner then waits for the decision, bounded by request_timeout_ms,
 * instead of failing at once:
 *
 *   mirrored, link lost ──> open ──vmm_set_mode()──> closed: each waiter
 *                            │                        goes on, in order, in
 *                            │ request_timeout_ms     the mode decided (or is
 *                            ▼                        told it is fenced)
 *                   that waiter: PARTNER_UNAVAILABLE
 *
 * A waiter is a callback and its argument: a request parked as it came
 * (vmm_window_park: dispatched again), or an operation whose
 * partner answer the lost link failed (vmm/whole_page.c). The paging queue's
 * requests wait for the same end under VMM_WAIT_PARTNER. */
#include "vmm_core.h"

#include "failover_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include <event2/event.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct vmm_window_waiter {
	struct vmm_window_waiter *next;
	struct vmm *vmm;
	uint64_t client_id; /* 0: none (its callback is told when its client goes) */
	vmm_window_fn fn;
	void *arg;
	struct event *deadline;
};

bool vmm_window_open(const struct vmm *v)
{
	return vmm_mode(v) == VMM_MODE_MIRRORED &&
	       (vmm_failover(v)->window_held || !repl_session_link_up(vmm_session(v)));
}

void vmm_window_link_lost(struct vmm *v)
{
	if (vmm_mode(v) == VMM_MODE_MIRRORED)
		vmm_failover(v)->window_held = true;
}

static void unlink_waiter(struct vmm *v, struct vmm_window_waiter *w)
{
	struct vmm_window_waiter **p = &vmm_failover(v)->window_waiters;

	while (*p && *p != w)
		p = &(*p)->next;
	if (*p)
		*p = w->next;
	event_free(w->deadline);
	free(w);
}

/* Unlinks w, then tells its callback (which may park again). */
static void end_waiter(struct vmm *v, struct vmm_window_waiter *w, int status, const char *reason)
{
	vmm_window_fn fn = w->fn;
	void *arg = w->arg;

	unlink_waiter(v, w);
	fn(v, arg, status, reason);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_window_waiter *w = arg;
	struct vmm *v = w->vmm;
	char reason[192];

	snprintf(reason, sizeof(reason),
		 "partner unavailable for %u ms (request_timeout_ms): the link is down and "
		 "neither the partner's return nor a takeover came",
		 vmm_config(v)->request_timeout_ms);
	end_waiter(v, w, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, reason);
}

int vmm_window_wait(struct vmm *v, uint64_t client_id, vmm_window_fn fn, void *arg)
{
	struct vmm_window_waiter *w = calloc(1, sizeof(*w));
	struct vmm_window_waiter **tail = &vmm_failover(v)->window_waiters;

	if (!w || !(w->deadline = evtimer_new(vmm_event_base(v), on_deadline, w))) {
		free(w);
		return -ENOMEM;
	}
	w->vmm = v;
	w->client_id = client_id;
	w->fn = fn;
	w->arg = arg;
	vmm_timer_add_ms(w->deadline, vmm_config(v)->request_timeout_ms);
	while (*tail)
		tail = &(*tail)->next;
	*tail = w;
	return 0;
}

/* The decision came: those that waited go on in the order they came, in
 * the mode decided (a fenced node tells them so). Those parked again while
 * this runs (the link lost once more) wait for the next end. */
void vmm_on_window_closed(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *v = arg;
	struct failover_state *f = vmm_failover(v);
	struct vmm_window_waiter *w = f->window_waiters;
	char reason[320];
	size_t n = 0;

	f->window_waiters = NULL;
	if (w)
		log_info("%s: requests that waited for the partner go on",
			 vmm_mode(v) == VMM_MODE_FENCED ? "fenced" : "the pair decided");
	snprintf(reason, sizeof(reason), "node %s is fenced (%s): its partner serves",
		 vmm_node_id(v), vmm_mode_reason(v));
	while (w) {
		struct vmm_window_waiter *next = w->next;
		vmm_window_fn fn = w->fn;
		void *fn_arg = w->arg;

		event_free(w->deadline);
		free(w);
		n++;
		if (vmm_mode(v) == VMM_MODE_FENCED)
			fn(v, fn_arg, FTVM__PARTNER__STATUS__STATUS_FENCED, reason);
		else
			fn(v, fn_arg, FTVM__PARTNER__STATUS__STATUS_OK, "");
		w = next;
	}
	if (n)
		log_debug("%zu requests waited through the failover window", n);
}

void vmm_window_check(struct vmm *v)
{
	struct failover_state *f = vmm_failover(v);

	if (vmm_mode(v) != VMM_MODE_MIRRORED || repl_session_link_up(vmm_session(v)))
		f->window_held = false;
	if (vmm_window_open(v))
		return;
	if (f->window_waiters)
		event_active(f->window_event, EV_TIMEOUT, 0);
	vmm_paging_kick(v); /* its VMM_WAIT_PARTNER waiters */
}

void vmm_window_client_gone(struct vmm *v, uint64_t client_id)
{
	struct vmm_window_waiter *w = vmm_failover(v)->window_waiters, *next;

	for (; w; w = next) {
		next = w->next;
		if (w->client_id && w->client_id == client_id)
			end_waiter(v, w, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
				   "client gone");
	}
}

void vmm_window_fail_all(struct vmm *v, int status, const char *reason)
{
	struct failover_state *f = vmm_failover(v);

	while (f->window_waiters)
		end_waiter(v, f->window_waiters, status, reason);
}

/* ---- requests parked as they came ---- */

/* The request itself, not a copy: it stays as it is until its call is
 * answered (client_request_fn, client_server.h), and what it is dispatched
 * to may keep pointers into it for that long (a page write that waits in
 * the paging queue behind another keeps its block's). A copy freed after
 * the dispatch left such a write pointing at freed memory, which went into
 * the page. */
struct parked {
	struct client_call *call;
	const Ftvm__Client__ClientRequest *req;
};

static void on_parked_end(struct vmm *v, void *arg, int status, const char *reason)
{
	struct parked *p = arg;

	if (status != FTVM__PARTNER__STATUS__STATUS_OK)
		vmm_reply_error(p->call, status, "%s", reason);
	else
		vmm_client_request(v, p->call, p->req);
	free(p);
}

bool vmm_window_park(struct vmm *v, struct client_call *call,
		     const Ftvm__Client__ClientRequest *req)
{
	struct parked *p = malloc(sizeof(*p));

	if (!p || vmm_window_wait(v, client_call_client_id(call), on_parked_end, p) < 0) {
		free(p);
		return false; /* it fails now, as without the window */
	}
	p->call = call;
	p->req = req;
	return true;
}
