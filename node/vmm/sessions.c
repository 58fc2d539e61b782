/* Session allocations (seed 003 Fig. 15 step S143; vmm/VMM.md, "Session
 * allocations"): an allocation that lives as long as its client. A
 * connection is bound to its client's session id by a session allocation or
 * a SessionRequest; when a session's last connection here closes, a timer of
 * [client] session_grace_ms starts:
 *
 *   live here --last connection closes--> waiting (timer) --fires--> asking
 *       ^                                     |                        |
 *       +------- a connection binds ----------+      partner: live there (OK): forgotten here
 *                                                     partner: NOT_FOUND, or none: its
 *                                                     allocations freed (Fig. 9); it waits
 *                                                     again, forgotten once none is left
 *                                                     no answer (link down, mirrored): waits again
 *
 * A takeover, and a start, give every session with allocations and no
 * connection here a timer: its client may yet come to this node. */
#include "vmm_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct vmm_session {
	struct vmm_session *next;
	struct vmm *v;
	char id[CONFIG_SESSION_ID_LEN + 1];
	unsigned connections; /* bound to it here now */
	struct event *grace;  /* pending while it has none */
	bool asking;	      /* a SessionQuery is out */
};

struct vmm_session_bind {
	struct vmm_session_bind *next;
	uint64_t client_id;
	struct vmm_session *s;
};

/* A SessionQuery's answer finds its session by id: it may be gone by then. */
struct session_query {
	struct vmm *v;
	char id[CONFIG_SESSION_ID_LEN + 1];
};

static struct vmm_session *find(const struct vmm *v, const char *id)
{
	struct vmm_session *s = v->sessions;

	while (s && strcmp(s->id, id) != 0)
		s = s->next;
	return s;
}

static void forget(struct vmm *v, struct vmm_session *s)
{
	struct vmm_session **p = &v->sessions;

	while (*p != s)
		p = &(*p)->next;
	*p = s->next;
	event_free(s->grace);
	free(s);
}

static void on_grace(evutil_socket_t fd, short what, void *arg);

static struct vmm_session *find_or_make(struct vmm *v, const char *id)
{
	struct vmm_session *s = find(v, id);

	if (s)
		return s;
	s = calloc(1, sizeof(*s));
	if (!s)
		return NULL;
	s->v = v;
	memcpy(s->id, id, sizeof(s->id));
	s->grace = evtimer_new(v->base, on_grace, s);
	if (!s->grace) {
		free(s);
		return NULL;
	}
	s->next = v->sessions;
	v->sessions = s;
	return s;
}

static size_t allocations_of(struct vmm *v, const char *id, struct vmm_alloc ***ret)
{
	size_t n = 0, k = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);

	for (size_t i = 0; all && i < n; i++)
		if (strcmp(all[i]->session, id) == 0)
			all[k++] = all[i];
	*ret = all;
	return k;
}

static void wait_grace(struct vmm_session *s)
{
	vmm_timer_add_ms(s->grace, s->v->config->session_grace_ms);
}

/* A try that could not be made now: again a grace later, and not sooner
 * than RETRY_MS (a grace of 0 would spin while the node is offline). */
#define RETRY_MS 100
static void wait_again(struct vmm_session *s)
{
	uint32_t grace = s->v->config->session_grace_ms;

	vmm_timer_add_ms(s->grace, grace < RETRY_MS ? RETRY_MS : grace);
}

/* Nobody holds the session: its allocations go, on both nodes. The session
 * stays until they are gone: one refused (a page still locked) is freed at
 * the next grace. */
static void free_all(struct vmm *v, struct vmm_session *s, const char *why)
{
	struct vmm_alloc **mine = NULL;
	size_t n = allocations_of(v, s->id, &mine), to_free = 0;

	for (size_t i = 0; i < n; i++)
		to_free += !mine[i]->freeing;
	if (to_free)
		log_info("session %.8s (client '%s', uid %u) %s: freeing its %zu allocations",
			 s->id, mine[0]->client, (unsigned)mine[0]->uid, why, to_free);
	for (size_t i = 0; i < n; i++)
		if (!mine[i]->freeing)
			vmm_op_free(v, NULL, mine[i]->guid);
	free(mine);
	wait_again(s);
}

static void on_query_answer(const CommandComplete *cc, void *arg)
{
	struct session_query *q = arg;
	struct vmm_session *s = find(q->v, q->id);

	if (s)
		s->asking = false;
	if (!s || s->connections) {
		free(q);
		return; /* it came back here meanwhile */
	}
	if (cc->status == FTVM__PARTNER__STATUS__STATUS_OK) {
		log_info("session %.8s is live on the partner: its allocations stay", s->id);
		forget(q->v, s);
	} else if (cc->status == FTVM__PARTNER__STATUS__STATUS_NOT_FOUND) {
		free_all(q->v, s, "is gone from both nodes");
	} else {
		wait_again(s); /* no answer: ask again later */
	}
	free(q);
}

static void ask_partner(struct vmm *v, struct vmm_session *s)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, *envs[] = { &env };
	Ftvm__Partner__SessionQuery m = FTVM__PARTNER__SESSION_QUERY__INIT;
	struct session_query *q = calloc(1, sizeof(*q));
	void *args[] = { q };

	if (!q) {
		wait_again(s);
		return;
	}
	q->v = v;
	memcpy(q->id, s->id, sizeof(q->id));
	m.session = s->id;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SESSION_QUERY;
	env.session_query = &m;
	s->asking = true;
	if (vmm_partner_send(v, envs, 1, NULL, 0, on_query_answer, args) < 0) {
		s->asking = false;
		free(q);
		wait_again(s);
	}
}

static void on_grace(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_session *s = arg;
	struct vmm *v = s->v;
	struct vmm_alloc **mine = NULL;
	size_t n;

	if (s->connections || s->asking)
		return;
	n = allocations_of(v, s->id, &mine);
	free(mine);
	if (!n) {
		forget(v, s); /* nothing of it is left here */
		return;
	}
	switch (vmm_mode(v)) {
	case VMM_MODE_MIRRORED:
		ask_partner(v, s);
		break;
	case VMM_MODE_SOLO:
		free_all(v, s, "is gone, and this node serves alone");
		break;
	default: /* offline, fenced, or reads only: nothing may change yet */
		wait_again(s);
		break;
	}
}

void vmm_session_bind(struct vmm *v, struct client_call *call, const char *id)
{
	uint64_t client = client_call_client_id(call);
	struct vmm_session_bind *b = v->session_binds;
	struct vmm_session *s;

	while (b && b->client_id != client)
		b = b->next;
	if (b && strcmp(b->s->id, id) == 0)
		return;
	s = find_or_make(v, id);
	if (!s) {
		log_warning("out of memory: session %.8s not bound", id);
		return;
	}
	if (!b) {
		b = calloc(1, sizeof(*b));
		if (!b) {
			log_warning("out of memory: session %.8s not bound", id);
			return;
		}
		b->client_id = client;
		b->next = v->session_binds;
		v->session_binds = b;
	} else if (--b->s->connections == 0) {
		wait_grace(b->s); /* the connection changed sessions */
	}
	b->s = s;
	if (s->connections++ == 0 && event_pending(s->grace, EV_TIMEOUT, NULL)) {
		event_del(s->grace);
		log_info("session %.8s is back: its allocations stay", id);
	}
}

void vmm_sessions_client_gone(struct vmm *v, uint64_t client_id)
{
	struct vmm_session_bind **p = &v->session_binds, *b;

	while (*p && (*p)->client_id != client_id)
		p = &(*p)->next;
	b = *p;
	if (!b)
		return;
	*p = b->next;
	if (--b->s->connections == 0) {
		log_info("session %.8s: its client is gone; its allocations are freed in %u ms "
			 "unless it comes back",
			 b->s->id, (unsigned)v->config->session_grace_ms);
		wait_grace(b->s);
	}
	free(b);
}

void vmm_sessions_orphaned(struct vmm *v)
{
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);
	struct vmm_session *s;

	for (size_t i = 0; all && i < n; i++) {
		if (!all[i]->session[0])
			continue;
		s = find_or_make(v, all[i]->session);
		if (s && !s->connections && !s->asking &&
		    !event_pending(s->grace, EV_TIMEOUT, NULL))
			wait_grace(s);
	}
	free(all);
}

bool vmm_session_live(const struct vmm *v, const char *id)
{
	const struct vmm_session *s = find(v, id);

	return s && s->connections > 0;
}

void vmm_op_session(struct vmm *v, struct client_call *call,
		    const Ftvm__Client__SessionRequest *req)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

	if (!req->session[0] || !config_session_id_valid(req->session)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"session '%.80s' is not one (%d lowercase hex digits)",
				req->session, CONFIG_SESSION_ID_LEN);
		return;
	}
	vmm_session_bind(v, call, req->session);
	client_call_reply(call, &reply);
}

void vmm_sessions_free(struct vmm *v)
{
	while (v->session_binds) {
		struct vmm_session_bind *b = v->session_binds;

		v->session_binds = b->next;
		free(b);
	}
	while (v->sessions)
		forget(v, v->sessions);
}
