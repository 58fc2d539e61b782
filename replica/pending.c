/* The table is a small hash on the sequence number (chained) for the
 * answers, and a list in order of deadline for the timeouts, under one
 * libevent timer for the whole table.
 *
 * Each entry used to carry a timer of its own: an event_new, an event_add
 * into libevent's min-heap and an event_free per request, three requests per
 * page write, for deadlines that almost never pass. Requests mostly share one
 * timeout (the node's request_timeout_ms), so a new entry goes at the tail of
 * the list and the head's is the next deadline. The timer is armed for the
 * head's deadline when it is not armed already; an answer that takes the head
 * away leaves it as it is, and when it fires early (for an entry answered
 * since) it fails nothing and is armed again for the head's deadline then.
 * So under a steady flow of requests it fires about once per timeout, and no
 * entry fails before its deadline, nor later than its own (an entry with a
 * shorter timeout than the head's becomes the head and arms the timer for
 * itself). Entries freed are kept for the next ones, up to SPARE_MAX. */
#include "pending.h"

#include <errno.h>
#include <stdlib.h>

#include <event2/event.h>

#include "clock.h"

#define PENDING_BUCKETS 256u
#define SPARE_MAX 256u

struct pending {
	struct pending *next; /* in its bucket; in the spares */
	struct pending *prev_by_deadline, *next_by_deadline;
	uint64_t seq;
	uint64_t deadline_us; /* clock_now_us() */
	pending_done_fn done;
	void *arg;
};

struct pending_table {
	struct event_base *base;
	struct pending *buckets[PENDING_BUCKETS];
	struct pending *first, *last; /* by deadline */
	struct event *timer;
	uint64_t armed_us; /* the timer's deadline while it is pending */
	struct pending *spares;
	size_t count, n_spares;
};

static void on_timer(evutil_socket_t fd, short what, void *arg);

int pending_table_new(struct event_base *base, struct pending_table **ret)
{
	struct pending_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->base = base;
	t->timer = evtimer_new(base, on_timer, t);
	if (!t->timer) {
		free(t);
		return -ENOMEM;
	}
	*ret = t;
	return 0;
}

void pending_table_free(struct pending_table *t)
{
	if (!t)
		return;
	pending_fail_all(t, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN, "node shutting down");
	event_free(t->timer);
	while (t->spares) {
		struct pending *p = t->spares;

		t->spares = p->next;
		free(p);
	}
	free(t);
}

static struct pending **find_slot(struct pending_table *t, uint64_t seq)
{
	struct pending **p = &t->buckets[seq % PENDING_BUCKETS];

	while (*p && (*p)->seq != seq)
		p = &(*p)->next;
	return p;
}

/* The timer for deadline_us, unless it is armed for that or sooner. */
static void arm(struct pending_table *t, uint64_t deadline_us, uint64_t now_us)
{
	uint64_t in_us = deadline_us > now_us ? deadline_us - now_us : 0;
	struct timeval tv = { .tv_sec = (time_t)(in_us / 1000000),
			      .tv_usec = (suseconds_t)(in_us % 1000000) };

	if (evtimer_pending(t->timer, NULL) && t->armed_us <= deadline_us)
		return;
	/* The loop's cached time may be stale; a deadline must not come early. */
	event_base_update_cache_time(t->base);
	evtimer_add(t->timer, &tv);
	t->armed_us = deadline_us;
}

static void unlink_deadline(struct pending_table *t, struct pending *p)
{
	if (p->prev_by_deadline)
		p->prev_by_deadline->next_by_deadline = p->next_by_deadline;
	else
		t->first = p->next_by_deadline;
	if (p->next_by_deadline)
		p->next_by_deadline->prev_by_deadline = p->prev_by_deadline;
	else
		t->last = p->prev_by_deadline;
}

/* After the later ones from the tail: usually none, all sharing a timeout. */
static void link_deadline(struct pending_table *t, struct pending *p)
{
	struct pending *after = t->last;

	while (after && after->deadline_us > p->deadline_us)
		after = after->prev_by_deadline;
	p->prev_by_deadline = after;
	p->next_by_deadline = after ? after->next_by_deadline : t->first;
	if (p->next_by_deadline)
		p->next_by_deadline->prev_by_deadline = p;
	else
		t->last = p;
	if (after)
		after->next_by_deadline = p;
	else
		t->first = p;
}

/* Unlinks p and runs its callback last, so the callback may add new requests. */
static void finish(struct pending_table *t, struct pending **slot, const CommandComplete *cc)
{
	struct pending *p = *slot;
	pending_done_fn done = p->done;
	void *arg = p->arg;

	*slot = p->next;
	unlink_deadline(t, p);
	t->count--;
	if (t->n_spares < SPARE_MAX) {
		p->next = t->spares;
		t->spares = p;
		t->n_spares++;
	} else {
		free(p);
	}
	done(cc, arg);
}

static void fail_one(struct pending_table *t, struct pending **slot, int status, const char *reason)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

	cc.status = status;
	cc.reason = (char *)reason;
	finish(t, slot, &cc);
}

static void on_timer(evutil_socket_t fd, short what, void *arg)
{
	struct pending_table *t = arg;
	uint64_t now = clock_now_us();

	/* Each callback may add and answer others: the head is read anew. */
	while (t->first && t->first->deadline_us <= now)
		fail_one(t, find_slot(t, t->first->seq), FTVM__PARTNER__STATUS__STATUS_TIMEOUT,
			 "no answer from the partner before the deadline");
	if (t->first)
		arm(t, t->first->deadline_us, clock_now_us());
}

int pending_add(struct pending_table *t, uint64_t seq, uint32_t timeout_ms, pending_done_fn done,
		void *arg)
{
	struct pending **slot = find_slot(t, seq);
	uint64_t now = clock_now_us();
	struct pending *p;

	if (*slot)
		return -EEXIST;
	p = t->spares;
	if (p) {
		t->spares = p->next;
		t->n_spares--;
	} else {
		p = malloc(sizeof(*p));
		if (!p)
			return -ENOMEM;
	}
	*p = (struct pending){
		.seq = seq,
		.deadline_us = now + (uint64_t)timeout_ms * 1000,
		.done = done,
		.arg = arg,
	};
	link_deadline(t, p);
	arm(t, t->first->deadline_us, now);
	*slot = p;
	t->count++;
	return 0;
}

bool pending_complete(struct pending_table *t, uint64_t seq, const CommandComplete *cc)
{
	struct pending **slot = find_slot(t, seq);

	if (!*slot)
		return false;
	finish(t, slot, cc);
	return true;
}

/* In the order of their deadlines, which for one timeout is the order sent. */
void pending_fail_all(struct pending_table *t, int status, const char *reason)
{
	while (t->first)
		fail_one(t, find_slot(t, t->first->seq), status, reason);
}

size_t pending_count(const struct pending_table *t)
{
	return t->count;
}
