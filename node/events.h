/* The node's event stream (node/EVENTS.md): events as they happen, sent to
 * the clients that follow them. Everything runs on the event loop. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

struct client_call;
struct events;

/* The node's state as it is, as events marked current, for a follower that
 * asked with now: it calls events_emit_current() for each. */
typedef void (*events_now_fn)(struct events *e, void *arg);

int events_new(events_now_fn now, void *arg, struct events **ret);
/* Ends every follower's stream. NULL is fine. */
void events_free(struct events *e);

/* One event to every follower: type and what are words, reason the node's
 * words (NULL: none), then key, value pairs of strings, ending with NULL. */
void events_emit(struct events *e, const char *type, const char *what, const char *reason, ...)
	__attribute__((sentinel));
/* events_emit() with the pairs in kv, ending with NULL. */
void events_emit_fields(struct events *e, const char *type, const char *what, const char *reason,
			const char *const *kv);
/* The same, from inside events_now_fn, to the follower being answered. */
void events_emit_current(struct events *e, const char *type, const char *what, const char *reason,
			 ...) __attribute__((sentinel));

/* call (an EventsRequest) follows from now on; with now, its first reply is
 * the state as it is. Refused when EVENTS_FOLLOWERS_MAX follow already. */
void events_follow(struct events *e, struct client_call *call, bool now);
/* Its client closed: the follower's call ends. */
void events_client_gone(struct events *e, uint64_t client_id);
/* Followers now, for tests and status. */
unsigned events_followers(const struct events *e);
