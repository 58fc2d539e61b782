/* The event stream (events.h, node/EVENTS.md).
 *
 * A follower is an EventsRequest call kept open: each event is one more
 * reply to it (client_call_send()), and it ends when its client goes. A
 * send may close a client that does not read (client_server.c's
 * output_limit), whose gone() comes back here while the followers are
 * being walked: such a follower is only marked then, and let go after the
 * walk. A walk may hold another: the send that drops a client logs a
 * warning, and that warning is an event sent to the followers from inside
 * the first walk; followers are let go only when the outermost ends. */
#define LOG_SUBSYSTEM "events"

#include "events.h"

#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.pb-c.h"
#include "client_server.h"
#include "log.h"

#define EVENTS_FOLLOWERS_MAX 16
#define STR(x) #x
#define XSTR(x) STR(x)
#define EVENT_FIELDS_MAX 8

typedef Ftvm__Client__Event Event;
typedef Ftvm__Client__EventField EventField;

struct follower {
	struct follower *next;
	struct client_call *call;
	uint64_t client_id;
	bool gone; /* its client went while the followers were walked */
};

/* One event as it is built: the message and the room it points into. */
struct built {
	Event ev;
	EventField fields[EVENT_FIELDS_MAX];
	EventField *field_ptrs[EVENT_FIELDS_MAX];
};

struct events {
	events_now_fn now;
	void *now_arg;
	struct follower *followers;
	unsigned n_followers;
	uint64_t seq;
	/* Walks of the followers under way: an event sent can log a warning,
	 * which is an event too, sent from inside the first walk. */
	unsigned walking;
	/* While events_now_fn runs: the current events, owning their strings. */
	struct built **current;
	size_t n_current, current_cap;
	bool current_failed;
};

static uint64_t wall_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* b from the words and the key, value pairs of kv, ending with NULL
 * (strings b points to, not copies). Pairs past EVENT_FIELDS_MAX are
 * dropped. */
static void build(struct built *b, const char *type, const char *what, const char *reason,
		  const char *const *kv)
{
	ftvm__client__event__init(&b->ev);
	b->ev.at_ms = wall_clock_ms();
	b->ev.type = (char *)type;
	b->ev.what = (char *)what;
	b->ev.reason = (char *)(reason ? reason : "");
	b->ev.fields = b->field_ptrs;
	for (; kv && kv[0] && b->ev.n_fields < EVENT_FIELDS_MAX; kv += 2) {
		EventField *f = &b->fields[b->ev.n_fields];

		ftvm__client__event_field__init(f);
		f->key = (char *)kv[0];
		f->value = (char *)(kv[1] ? kv[1] : "");
		b->field_ptrs[b->ev.n_fields++] = f;
		if (!kv[1])
			break;
	}
}

/* The key, value pairs of a variadic call, in kv (room for
 * EVENT_FIELDS_MAX pairs and the NULL). */
#define COLLECT(kv, last)                                                                   \
	do {                                                                                \
		va_list ap_;                                                                \
		size_t n_ = 0;                                                              \
		va_start(ap_, last);                                                        \
		while (n_ < 2 * EVENT_FIELDS_MAX && (kv[n_] = va_arg(ap_, const char *))) { \
			kv[n_ + 1] = va_arg(ap_, const char *);                             \
			n_ += 2;                                                            \
		}                                                                           \
		kv[n_] = NULL;                                                              \
		va_end(ap_);                                                                \
	} while (0)

static void send_events(struct client_call *call, Event **events, size_t n)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__EventsReply er = FTVM__CLIENT__EVENTS_REPLY__INIT;

	er.events = events;
	er.n_events = n;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_EVENTS;
	reply.events = &er;
	client_call_send(call, &reply);
}

/* The follower's call ends (its client is gone: the answer goes nowhere). */
static void follower_end(struct events *e, struct follower *f)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

	reply.status = FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN;
	reply.reason = (char *)"events: the stream ended";
	client_call_reply(f->call, &reply);
	e->n_followers--;
	free(f);
}

static void prune(struct events *e)
{
	struct follower **at = &e->followers, *f;

	while ((f = *at)) {
		if (!f->gone) {
			at = &f->next;
			continue;
		}
		*at = f->next;
		follower_end(e, f);
	}
}

void events_emit_fields(struct events *e, const char *type, const char *what, const char *reason,
			const char *const *kv)
{
	struct built b;
	Event *ev = &b.ev;

	if (!e)
		return;
	build(&b, type, what, reason, kv);
	b.ev.seq = ++e->seq;
	e->walking++;
	for (struct follower *f = e->followers; f; f = f->next)
		if (!f->gone)
			send_events(f->call, &ev, 1);
	if (--e->walking == 0)
		prune(e);
}

void events_emit(struct events *e, const char *type, const char *what, const char *reason, ...)
{
	const char *kv[2 * EVENT_FIELDS_MAX + 1];

	COLLECT(kv, reason);
	events_emit_fields(e, type, what, reason, kv);
}

/* Strings of the current event b, copied (the caller's may be gone by the
 * time the reply is packed); false when out of memory. */
static bool own_strings(struct built *b)
{
	char **s[2 + 2 * EVENT_FIELDS_MAX + 1];
	size_t n = 0;

	s[n++] = &b->ev.type;
	s[n++] = &b->ev.what;
	s[n++] = &b->ev.reason;
	for (size_t i = 0; i < b->ev.n_fields; i++) {
		s[n++] = &b->fields[i].key;
		s[n++] = &b->fields[i].value;
	}
	for (size_t i = 0; i < n; i++)
		*s[i] = strdup(*s[i]);
	for (size_t i = 0; i < n; i++)
		if (!*s[i])
			return false;
	return true;
}

static void built_free(struct built *b)
{
	free(b->ev.type);
	free(b->ev.what);
	free(b->ev.reason);
	for (size_t i = 0; i < b->ev.n_fields; i++) {
		free(b->fields[i].key);
		free(b->fields[i].value);
	}
	free(b);
}

void events_emit_current(struct events *e, const char *type, const char *what, const char *reason,
			 ...)
{
	const char *kv[2 * EVENT_FIELDS_MAX + 1];
	struct built *b;

	COLLECT(kv, reason);
	if (e->n_current == e->current_cap) {
		size_t cap = e->current_cap ? 2 * e->current_cap : 16;
		struct built **more = realloc(e->current, cap * sizeof(*more));

		if (!more) {
			e->current_failed = true;
			return;
		}
		e->current = more;
		e->current_cap = cap;
	}
	b = calloc(1, sizeof(*b));
	if (!b) {
		e->current_failed = true;
		return;
	}
	build(b, type, what, reason, kv);
	b->ev.current = true;
	e->current[e->n_current++] = b;
	if (!own_strings(b))
		e->current_failed = true;
}

void events_follow(struct events *e, struct client_call *call, bool now)
{
	struct follower *f;
	Event **evs;

	if (e->n_followers >= EVENTS_FOLLOWERS_MAX) {
		Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

		reply.status = FTVM__PARTNER__STATUS__STATUS_NO_SPACE;
		reply.reason = (char *)"events: " XSTR(
			EVENTS_FOLLOWERS_MAX) " clients follow this node's events already";
		client_call_reply(call, &reply);
		return;
	}
	f = calloc(1, sizeof(*f));
	if (!f) {
		Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

		reply.status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		reply.reason = (char *)"out of memory";
		client_call_reply(call, &reply);
		return;
	}
	f->call = call;
	f->client_id = client_call_client_id(call);
	f->next = e->followers;
	e->followers = f;
	e->n_followers++;
	if (!now) {
		send_events(call, NULL, 0); /* the stream has begun */
	} else {
		e->n_current = 0;
		e->current_failed = false;
		e->now(e, e->now_arg);
		evs = calloc(e->n_current ? e->n_current : 1, sizeof(*evs));
		if (!evs || e->current_failed)
			log_warning("out of memory: a follower's current state is sent in part");
		for (size_t i = 0; evs && i < e->n_current; i++)
			evs[i] = &e->current[i]->ev;
		e->walking++;
		send_events(call, evs, evs ? e->n_current : 0);
		e->walking--;
		free(evs);
		for (size_t i = 0; i < e->n_current; i++)
			built_free(e->current[i]);
		e->n_current = 0;
	}
	if (!e->walking)
		prune(e);
}

void events_client_gone(struct events *e, uint64_t client_id)
{
	if (!e)
		return;
	for (struct follower *f = e->followers; f; f = f->next)
		if (f->client_id == client_id)
			f->gone = true;
	if (!e->walking)
		prune(e);
}

unsigned events_followers(const struct events *e)
{
	return e ? e->n_followers : 0;
}

int events_new(events_now_fn now, void *arg, struct events **ret)
{
	struct events *e = calloc(1, sizeof(*e));

	if (!e)
		return -ENOMEM;
	e->now = now;
	e->now_arg = arg;
	*ret = e;
	return 0;
}

void events_free(struct events *e)
{
	if (!e)
		return;
	for (struct follower *f = e->followers; f; f = f->next)
		f->gone = true;
	prune(e);
	free(e->current);
	free(e);
}
