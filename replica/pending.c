/* The table is a small hash on the sequence number (chained), and each entry
 * carries its own libevent timer: libevent keeps timers in a min-heap, so a
 * deadline costs O(log n) and nothing scans the table. */
#include "pending.h"

#include <errno.h>
#include <stdlib.h>

#include <event2/event.h>

#define PENDING_BUCKETS 256u

struct pending {
	struct pending *next;
	struct pending_table *table;
	uint64_t seq;
	pending_done_fn done;
	void *arg;
	struct event *deadline;
};

struct pending_table {
	struct event_base *base;
	struct pending *buckets[PENDING_BUCKETS];
	size_t count;
};

int pending_table_new(struct event_base *base, struct pending_table **ret)
{
	struct pending_table *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->base = base;
	*ret = t;
	return 0;
}

void pending_table_free(struct pending_table *t)
{
	if (!t)
		return;
	pending_fail_all(t, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN, "node shutting down");
	free(t);
}

static struct pending **find_slot(struct pending_table *t, uint64_t seq)
{
	struct pending **p = &t->buckets[seq % PENDING_BUCKETS];

	while (*p && (*p)->seq != seq)
		p = &(*p)->next;
	return p;
}

/* Unlinks p and runs its callback last, so the callback may add new requests. */
static void finish(struct pending_table *t, struct pending **slot, const CommandComplete *cc)
{
	struct pending *p = *slot;

	*slot = p->next;
	t->count--;
	event_free(p->deadline);
	p->done(cc, p->arg);
	free(p);
}

static void fail_one(struct pending_table *t, struct pending **slot, int status, const char *reason)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

	cc.status = status;
	cc.reason = (char *)reason;
	finish(t, slot, &cc);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct pending *p = arg;

	fail_one(p->table, find_slot(p->table, p->seq), FTVM__PARTNER__STATUS__STATUS_TIMEOUT,
		 "no answer from the partner before the deadline");
}

int pending_add(struct pending_table *t, uint64_t seq, uint32_t timeout_ms, pending_done_fn done,
		void *arg)
{
	struct timeval tv = { .tv_sec = timeout_ms / 1000, .tv_usec = (timeout_ms % 1000) * 1000 };
	struct pending **slot = find_slot(t, seq);
	struct pending *p;

	if (*slot)
		return -EEXIST;
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->table = t;
	p->seq = seq;
	p->done = done;
	p->arg = arg;
	p->deadline = evtimer_new(t->base, on_deadline, p);
	if (!p->deadline) {
		free(p);
		return -ENOMEM;
	}
	/* The loop's cached time may be stale; a deadline must not come early. */
	event_base_update_cache_time(t->base);
	evtimer_add(p->deadline, &tv);
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

void pending_fail_all(struct pending_table *t, int status, const char *reason)
{
	for (size_t b = 0; b < PENDING_BUCKETS; b++)
		while (t->buckets[b])
			fail_one(t, &t->buckets[b], status, reason);
}

size_t pending_count(const struct pending_table *t)
{
	return t->count;
}
