/* The partner link.
 *
 * Both nodes listen and both dial, so a pair may end up with two connections.
 * Each connection goes through:
 *
 *   (transport conn_up) --send AuthChallenge--> CHALLENGE
 *   CHALLENGE --peer's AuthChallenge ok--> PROOF (no key: --send Hello--> HELLO)
 *   PROOF --peer's AuthProof ok--> --send Hello--> HELLO
 *   HELLO --partner's Hello ok--> ESTABLISHED
 *        any state --bad frame / bad message / refused Hello / silence--> closed
 *
 * Authentication. A peer proves it holds the pair's shared key ([node]
 * key_file) before it learns or changes anything. Messages, D being the node
 * that dialled and A the one that accepted:
 *
 *   D -> A  AuthChallenge{id D, method, nonce_D}   (both at conn_up, at once)
 *   A -> D  AuthChallenge{id A, method, nonce_A}
 *   D -> A  AuthProof{HMAC(key, D, D, A, nonce_D, nonce_A)}  (on A's challenge)
 *   A -> D  AuthProof{HMAC(key, A, A, D, nonce_A, nonce_D)}  (once D's checks)
 *   A -> D  Hello ...                                        (right behind it)
 *   D -> A  Hello ...                                        (once A's checks)
 *
 * (replica/auth.h: the role, the ids, then the prover's nonce before the
 * verifier's.) The acceptor proves itself only to a peer that proved itself
 * first, so a stranger that connects learns nothing but a challenge: no
 * epoch, state, LSNs, pool regions or keys, and gets no MAC made over a
 * nonce of its choice. A proof that does not match, a message out of turn
 * or another method closes the connection; it is counted (auth_failures)
 * and logged at most once a minute per address. Before any of this the
 * transport closes a connection from an address the partner's endpoint does
 * not resolve to (address_refused; peer_filter.h). At most
 * UNPROVEN_INBOUND_MAX inbound connections may be unauthenticated at once,
 * and each has dead_after_ms to reach ESTABLISHED. Without a key both sides
 * say method NONE and go straight to Hello; a node with a key and one
 * without refuse each other, naming why.
 *
 * The session's link is up while one ESTABLISHED connection is `active`. When a
 * second connection becomes ESTABLISHED (both dialled at once), the pair keeps
 * the one dialled by the node with the smaller id; both nodes apply the same
 * rule to the same facts, so they settle on the same connection without
 * another message. The connection that loses, new or the active one,
 * retires: the link stays up, nothing more is sent on it, what arrives on it
 * is still taken (requests and answers the partner sent on it before it
 * settled too), and it closes after dead_after_ms or when the partner
 * closes it.
 *
 * The link moves, and keeps its order. Frames the partner sent on the old
 * connection before it moved may still be on their way (a resync's
 * snapshot, queued behind a full socket) when its next ones come on the
 * new: taken as they came, a lock or a write would overtake the allocation
 * it names. So each node ends a connection it retires with
 * ConnectionRetired, its last frame there, when the partner's Hello on it
 * said marks_retired; and while such a connection has not brought its
 * ConnectionRetired (nor closed, nor run out its dead_after_ms), what
 * arrives on the link is held (copied, held_frames.h) and taken only then,
 * in the order it came:
 *
 *   old:  ... R1 R2 ConnectionRetired      (sent before the move)
 *   new:  Hello R3 R4 ...                  (R3, R4 held until ConnectionRetired)
 *
 * A connection that lost at once (both dialled) brings its
 * ConnectionRetired right behind its Hello, so the link waits a round trip
 * at most there. More than max_backlog bytes held ends the wait, as the
 * partner's silence would.
 *
 *   link down --dial (backoff 50 ms .. 2 s)--> dialling --Hello--> link up
 *   link up --conn lost | partner silent dead_after_ms--> link down
 *
 * A partner that reads nothing cannot grow this node's memory: once more than
 * max_backlog bytes wait unsent on a connection nothing more is queued on
 * it, and the next tick drops it (the link goes down, and is dialled again).
 *
 * Going down fails every pending request with PARTNER_UNAVAILABLE. Heartbeats
 * go out every heartbeat_ms while the link is up; any frame from the partner
 * counts as a sign of life.
 *
 * A tick that comes more than heartbeat_ms late is a pause of this node's own
 * event loop (a long commit or checkpoint, a stopped process, a starved CPU):
 * while it lasted nothing was read or sent. It is counted and, from half of
 * dead_after_ms, logged as a warning, since the partner takes a node silent
 * for dead_after_ms for dead (as Corosync reports a process pause). What the
 * partner sent meanwhile still waits unread, so the tick that ends a pause
 * does not judge the partner silent: the next one does, after a read. Only
 * one tick in a row defers, so a loop late at every tick still judges.
 *
 * Corking. A node serving many clients reads several requests in one turn
 * of its loop, and each sent its frames to the partner with a write of its
 * own: one system call, and one trip through the partner's TCP receive
 * path and wakeup, per page write. So on the link (a transport with
 * send_many), the first frame of a turn goes at once, as before (an idle
 * node's request waits for nothing), and the frames that follow in the
 * same turn wait, in order, for turn_end: an event made active by that
 * first frame, which runs after the callbacks already due in this turn (the
 * other clients' reads) and sends what waits in one send_many(). Every
 * frame on the link goes through this, so nothing overtakes what waits (an
 * answer is never overtaken by a later request, node/vmm/VMM.md, "Ordering
 * and durability"), and before the link changes hands or a payload goes
 * behind RDMA WRITEs, what waits goes first. A waiting frame is copied out
 * of its caller's memory (what it referenced, a page's block, may change
 * after the call), behind the others in one buffer the session keeps from
 * turn to turn; one above CORK_MAX_BYTES is not copied but goes at once,
 * with what waits before it in the same call. */
#include "session.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "auth.h"
#include "clock.h"
#include "held_frames.h"
#include "log.h"
#include "pb_pieces.h"
#include "reason.h"

#define LOG_SUBSYSTEM "session"

#define DIAL_BACKOFF_MIN_MS 50u
#define DIAL_BACKOFF_MAX_MS 2000u
/* A registration the device refuses is warned of at most this often. */
#define REFUSED_WARN_EVERY_MS 60000u
/* A peer refused its link is logged at most this often per address, and so
 * many addresses are remembered for that (the oldest forgotten first). */
#define AUTH_WARN_EVERY_MS 60000u
#define AUTH_WARN_ADDRS 16
/* Inbound connections that have not proved the key yet, at most at once. */
#define UNPROVEN_INBOUND_MAX 4

enum conn_state {
	CONN_CHALLENGE, /* waiting for the peer's AuthChallenge */
	CONN_PROOF,	/* waiting for the peer's AuthProof */
	CONN_HELLO,	/* authenticated; waiting for its Hello */
	CONN_ESTABLISHED,
};

struct session_conn {
	struct repl_session *session;
	struct session_conn *next;
	struct repl_conn *conn;
	enum conn_state state;
	bool inbound;
	bool connecting; /* outbound, transport has not reported it up yet */
	/* The handshake: our nonce, and the peer's id and nonce from its
	 * AuthChallenge (the id is proved once the state reaches CONN_HELLO). */
	uint8_t nonce[AUTH_NONCE_LEN];
	uint8_t peer_nonce[AUTH_NONCE_LEN];
	char peer_id[64];
	uint64_t since_ms; /* when it came up (for the Hello deadline) */
	/* Replaced as the link by a simultaneous connect: nothing more is sent
	 * on it, but what the partner sent before it switched too (answers to
	 * requests made on it) is still taken, until the partner closes it or
	 * dead_after_ms pass (retired_ms). */
	bool retiring;
	uint64_t retired_ms;
	/* The partner's Hello here said marks_retired (it ends a connection it
	 * retires with ConnectionRetired), and whether that came: until then
	 * what arrives on the link waits (see the top). */
	bool partner_marks_retired;
	bool ended;
	/* The partner's Hello here said answers_runs: it takes one answer for
	 * a run of its requests. */
	bool partner_answers_runs;
	size_t n_held; /* its frames in the session's rx_held */
	/* One-sided page data: our Hello offered it, the partner's did too
	 * (then the transport holds its view of the partner's pool). */
	bool offered_one_sided;
	bool partner_one_sided;
	uint64_t partner_block_frames;
	/* Per block of our pool, the generation this connection's partner was
	 * told (Hello, RegionUpdate); 0: none. A block may have been registered
	 * without telling anyone (as the source of our own WRITEs), so a landing
	 * compares with this, not with whether its use registered the block. */
	uint64_t *told_generation;
};

struct repl_session {
	struct event_base *base;
	struct repl_session_config config;
	struct repl_session_callbacks cb;
	repl_session_tap_fn tap; /* NULL: nothing taps */
	void *tap_arg;
	void *cb_arg;

	struct repl_transport *transport;
	struct session_conn *conns;
	struct session_conn *active; /* the link, NULL while down */
	struct session_conn *dialling;

	struct pending_table *pending;
	uint64_t next_seq;
	/* The memory of the last payload send_together() packed, kept for
	 * the next (empty between calls). */
	struct pb_pieces out;
	int state; /* our NodeState, as advertised */

	/* Corking (see the top): the frames waiting for turn_end, their
	 * payloads copied end to end into cork_buf (kept from turn to turn),
	 * corked[i] the length of each, and room to gather them. turn_sent: a
	 * frame went on the link this turn (turn_end is active); cork_failed:
	 * frames that waited could not be sent (turn_end drops the link). */
	uint8_t *cork_buf;
	size_t cork_len, cork_buf_cap;
	size_t *corked;
	size_t n_corked, corked_cap;
	struct repl_payload *cork_payloads;
	struct iovec *cork_iov;
	bool turn_sent, cork_failed;
	struct event *turn_end;

	/* What came on the link while a retired connection may still bring
	 * older frames (see the top), and the event that takes it once none
	 * can. */
	struct held_frames rx_held;
	struct event *rx_replay;

	struct event *tick;    /* every heartbeat_ms */
	uint64_t last_tick_ms; /* when it last ran, 0 before the first */
	bool silence_deferred; /* the last tick ended a pause, and did not judge */
	struct event *redial;
	uint32_t backoff_ms;
	uint64_t cut_until_ms; /* a drill's cut lasts until then (clock_now_ms) */

	struct repl_session_stats stats;
	/* Refused registrations: when the last warning went, and how many
	 * came after it unwarned. */
	uint64_t refused_warned_ms;
	uint64_t refused_unwarned;
	/* Addresses refused a link lately: when each was last logged, and how
	 * many refusals came after that unlogged. */
	struct {
		char addr[72];
		uint64_t warned_ms;
		uint64_t unwarned;
	} auth_warned[AUTH_WARN_ADDRS];
};

static void schedule_dial(struct repl_session *s);
static void drop_conn(struct repl_session *s, struct session_conn *sc, const char *reason);
static void on_hello(struct repl_session *s, struct session_conn *sc, const Envelope *env);
static int send_envelope(struct repl_session *s, struct session_conn *sc, Envelope *env);
static void held_check(struct repl_session *s);

static struct session_conn *find_conn(struct repl_session *s, struct repl_conn *conn)
{
	struct session_conn *sc = conn->user;

	return sc && sc->session == s ? sc : NULL;
}

/* During a cut (repl_session_cut) the link is silent both ways, as a pulled
 * cable would leave it: nothing goes out, nothing is read, nothing connects. */
static bool cut(const struct repl_session *s)
{
	return s->cut_until_ms && clock_now_ms() < s->cut_until_ms;
}

static void tap(struct repl_session *s, struct repl_conn *conn, bool out, const void *payload,
		size_t len)
{
	struct session_conn *sc = find_conn(s, conn);
	bool known = sc && sc->state == CONN_ESTABLISHED;

	s->tap(s, out, known ? s->stats.partner_id : repl_conn_peer_name(conn), payload, len,
	       s->tap_arg);
}

/* A partner that reads nothing: what waits for it is past the bound. */
static bool backlogged(const struct repl_session *s, const struct repl_conn *conn)
{
	return conn->transport->ops->backlog(conn) > s->config.max_backlog;
}

/* A payload in more pieces than this is made one before it goes (a batch
 * of many answers): a gathered write of many small pieces gains nothing. */
#define WIRE_PIECES 8
/* A frame larger than this does not wait for the turn's end (a block of
 * 64 KiB): copying it would cost about what its own write does. */
#define CORK_MAX_BYTES (16u << 10)

static void drop_corked(struct repl_session *s)
{
	s->n_corked = 0;
	s->cork_len = 0;
}

/* What waits, then also (unless NULL, not copied), in one send_many(). */
static int send_corked(struct repl_session *s, struct pb_pieces *also)
{
	struct repl_conn *conn = s->active->conn;
	size_t n = 0, at = 0, off = 0;
	int r;

	for (size_t i = 0; i < s->n_corked; i++, n++) {
		s->cork_iov[at] =
			(struct iovec){ .iov_base = s->cork_buf + off, .iov_len = s->corked[i] };
		s->cork_payloads[n] = (struct repl_payload){ .iov = &s->cork_iov[at++],
							     .n = 1,
							     .len = s->corked[i] };
		off += s->corked[i];
	}
	if (also) {
		pb_pieces_iov(also, &s->cork_iov[at]);
		s->cork_payloads[n++] = (struct repl_payload){ .iov = &s->cork_iov[at],
							       .n = also->n,
							       .len = also->len };
	}
	r = n ? conn->transport->ops->send_many(conn, s->cork_payloads, n) : 0;
	drop_corked(s);
	return r;
}

/* payload waits for turn_end, copied behind the others in cork_buf. */
static int cork(struct repl_session *s, const struct pb_pieces *payload)
{
	struct iovec iov[WIRE_PIECES];

	if (payload->len > s->config.max_payload)
		return -EMSGSIZE; /* as send() would have said */
	if (s->n_corked + 1 >= s->corked_cap) {
		size_t cap = s->corked_cap ? 2 * s->corked_cap : 32;
		size_t *c = realloc(s->corked, cap * sizeof(*c));
		struct repl_payload *p;
		struct iovec *iovs;

		if (!c)
			return -ENOMEM;
		s->corked = c;
		p = realloc(s->cork_payloads, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		s->cork_payloads = p;
		iovs = realloc(s->cork_iov, (cap + WIRE_PIECES) * sizeof(*iovs));
		if (!iovs)
			return -ENOMEM;
		s->cork_iov = iovs;
		s->corked_cap = cap;
	}
	if (s->cork_len + payload->len > s->cork_buf_cap) {
		size_t cap = s->cork_buf_cap ? 2 * s->cork_buf_cap : 64u << 10;
		uint8_t *grown;

		while (cap < s->cork_len + payload->len)
			cap *= 2;
		grown = realloc(s->cork_buf, cap);
		if (!grown)
			return -ENOMEM;
		s->cork_buf = grown;
		s->cork_buf_cap = cap;
	}
	pb_pieces_iov(payload, iov);
	for (size_t i = 0; i < payload->n; i++) {
		memcpy(s->cork_buf + s->cork_len, iov[i].iov_base, iov[i].iov_len);
		s->cork_len += iov[i].iov_len;
	}
	s->corked[s->n_corked++] = payload->len;
	return 0;
}

/* The end of a turn that sent on the link: what waits goes. */
static void on_turn_end(evutil_socket_t fd, short what, void *arg)
{
	struct repl_session *s = arg;
	char why[96];
	int r = 0;

	s->turn_sent = false;
	if (s->active && s->n_corked)
		r = send_corked(s, NULL);
	if (s->active && (r < 0 || s->cork_failed)) {
		snprintf(why, sizeof(why), "cannot send frames queued for the partner: %s",
			 strerror(r < 0 ? -r : ENOMEM));
		drop_conn(s, s->active, why);
	}
	s->cork_failed = false;
}

/* Whether frames to conn wait for the turn's end (see the top). */
static bool corks(const struct repl_session *s, const struct repl_conn *conn)
{
	return s->active && conn == s->active->conn && conn->transport->ops->send_many &&
	       s->turn_end;
}

static int wire_send(struct repl_session *s, struct repl_conn *conn, struct pb_pieces *payload)
{
	struct iovec iov[WIRE_PIECES];
	int r;

	if (cut(s))
		return 0;
	if (backlogged(s, conn))
		return -ENOBUFS; /* the next tick drops the link */
	if ((payload->n > WIRE_PIECES || s->tap) && pb_pieces_flatten(payload) < 0)
		return -ENOMEM;
	if (s->tap)
		tap(s, conn, true, pb_pieces_bytes(payload), payload->len);
	if (corks(s, conn) && (s->n_corked || s->turn_sent) && payload->len <= CORK_MAX_BYTES)
		return cork(s, payload);
	if (corks(s, conn) && s->n_corked) {
		r = send_corked(s, payload);
		if (r < 0)
			s->cork_failed = true; /* and turn_end, active, drops the link */
		return r;
	}
	if (corks(s, conn) && !s->turn_sent) {
		s->turn_sent = true;
		event_active(s->turn_end, EV_TIMEOUT, 0);
	}
	pb_pieces_iov(payload, iov);
	return repl_conn_sendv(conn, iov, payload->n, payload->len);
}

static void forget_conn(struct repl_session *s, struct session_conn *sc)
{
	struct session_conn **p = &s->conns;

	while (*p && *p != sc)
		p = &(*p)->next;
	if (*p)
		*p = sc->next;
	if (s->dialling == sc)
		s->dialling = NULL;
	if (sc->n_held)
		held_frames_drop(&s->rx_held, sc);
	free(sc->told_generation);
	free(sc);
	held_check(s); /* it may have been what the link waited for */
}

/* Nothing more is sent on sc, which is not the link (any longer); a partner
 * that reads ConnectionRetired gets it as sc's last frame (see the top). */
static void retire(struct repl_session *s, struct session_conn *sc)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__ConnectionRetired cr = FTVM__PARTNER__CONNECTION_RETIRED__INIT;

	sc->retiring = true;
	sc->retired_ms = clock_now_ms();
	if (!sc->partner_marks_retired)
		return;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_CONNECTION_RETIRED;
	env.connection_retired = &cr;
	if (send_envelope(s, sc, &env) < 0)
		log_debug("ConnectionRetired not sent to %s: it waits for the connection's "
			  "dead_after_ms",
			  s->stats.partner_id);
}

static void close_retiring(struct repl_session *s, uint64_t older_than_ms)
{
	struct session_conn *sc, *next;

	for (sc = s->conns; sc; sc = next) {
		next = sc->next;
		if (sc->retiring && sc->retired_ms <= older_than_ms) {
			repl_conn_close(sc->conn);
			forget_conn(s, sc);
		}
	}
}

/* Every frame held for the link, none counted against its connection. */
static void drop_rx_held(struct repl_session *s)
{
	held_frames_drop(&s->rx_held, NULL);
	for (struct session_conn *sc = s->conns; sc; sc = sc->next)
		sc->n_held = 0;
}

static void link_down(struct repl_session *s, const char *reason)
{
	s->active = NULL;
	drop_rx_held(s); /* the link's, from a partner that is gone */
	close_retiring(s, UINT64_MAX);
	drop_corked(s);
	s->stats.link_up = false;
	s->stats.link_changes++;
	pending_fail_all(s->pending, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, reason);
	if (s->cb.link_changed)
		s->cb.link_changed(s, false, reason, s->cb_arg);
	schedule_dial(s);
}

/* Closes sc ourselves (no conn_down will follow) and handles the link. */
static void drop_conn(struct repl_session *s, struct session_conn *sc, const char *reason)
{
	bool was_active = s->active == sc;

	repl_conn_close(sc->conn);
	forget_conn(s, sc);
	if (was_active)
		link_down(s, reason);
	else if (!s->active && !s->dialling)
		schedule_dial(s);
}

static void protocol_error(struct repl_session *s, struct session_conn *sc, const char *reason)
{
	if (s->cb.protocol_error)
		s->cb.protocol_error(s, repl_conn_peer_name(sc->conn), reason, s->cb_arg);
	drop_conn(s, sc, reason);
}

/* peer ("host:port", "[v6]:port") without its port. */
static void address_of(const char *peer, char *ret, size_t len)
{
	const char *colon = strrchr(peer, ':');
	size_t n = colon ? (size_t)(colon - peer) : strlen(peer);

	snprintf(ret, len, "%.*s", (int)n, peer);
}

/* Logs that peer was refused a link, at most once a minute per address. */
static void warn_auth(struct repl_session *s, const char *peer, const char *reason)
{
	uint64_t now = clock_now_ms();
	size_t i, oldest = 0;
	char addr[72], more[160] = "";

	address_of(peer, addr, sizeof(addr));
	for (i = 0; i < AUTH_WARN_ADDRS; i++) {
		if (strcmp(s->auth_warned[i].addr, addr) == 0)
			break;
		if (s->auth_warned[i].warned_ms < s->auth_warned[oldest].warned_ms)
			oldest = i;
	}
	if (i == AUTH_WARN_ADDRS) {
		i = oldest;
		snprintf(s->auth_warned[i].addr, sizeof(s->auth_warned[i].addr), "%s", addr);
		s->auth_warned[i].warned_ms = 0;
		s->auth_warned[i].unwarned = 0;
	}
	if (s->auth_warned[i].warned_ms && now - s->auth_warned[i].warned_ms < AUTH_WARN_EVERY_MS) {
		s->auth_warned[i].unwarned++;
		return;
	}
	if (s->auth_warned[i].unwarned)
		snprintf(more, sizeof(more),
			 " (and %" PRIu64 " more from %s since the last warning)",
			 s->auth_warned[i].unwarned, addr);
	log_warning("partner channel: refused %s: %s%s", peer, reason, more);
	s->auth_warned[i].warned_ms = now;
	s->auth_warned[i].unwarned = 0;
	if (s->cb.refused)
		s->cb.refused(s, peer, reason, s->cb_arg);
}

/* sc did not prove the key: closed, counted, logged (rate-limited). */
static void auth_failed(struct repl_session *s, struct session_conn *sc, const char *reason)
{
	s->stats.auth_failures++;
	warn_auth(s, repl_conn_peer_name(sc->conn), reason);
	drop_conn(s, sc, reason);
}

static void on_refused(const char *peer, const char *reason, void *arg)
{
	struct repl_session *s = arg;

	s->stats.address_refused++;
	warn_auth(s, peer, reason);
}

static int auth_method(const struct repl_session *s)
{
	return s->config.key ? FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_HMAC_SHA256
			     : FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_NONE;
}

static bool is_auth(const Envelope *env)
{
	return env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE ||
	       env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF;
}

static void fill_header(struct repl_session *s, Envelope *env)
{
	env->version = FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	env->sender = (char *)s->config.node_id;
	/* A peer not yet proved learns no epoch. */
	env->epoch = is_auth(env) ? 0 : s->config.epoch;
}

/* A block the device would not register (pinned memory short: RLIMIT_MEMLOCK,
 * say) costs a one-sided transfer, not the operation: its data goes inline.
 * An operator should hear of it, but not at every write. */
static void warn_refused(struct repl_session *s, const char *reason)
{
	uint64_t now = clock_now_ms();
	char more[64] = "";

	if (s->refused_warned_ms && now - s->refused_warned_ms < REFUSED_WARN_EVERY_MS) {
		s->refused_unwarned++;
		return;
	}
	if (s->refused_unwarned)
		snprintf(more, sizeof(more), "; %" PRIu64 " more since the last warning",
			 s->refused_unwarned);
	log_warning("page data goes inline, not one-sided: %s (pinned memory: see ulimit -l, "
		    "LimitMEMLOCK; `ftvmctl status` counts failed registrations%s)",
		    reason, more);
	s->refused_warned_ms = now;
	s->refused_unwarned = 0;
}

bool repl_session_inline_instead(int r)
{
	return r == -ESTALE || r == -ENOENT || r == -ERANGE || r == -EOPNOTSUPP;
}

/* Whether a one-sided attempt failed for a reason of the moment (a view
 * without that generation, a run across blocks, the link going down) rather
 * than one the transport could not get past: a registration refused. */
static bool one_sided_usual_failure(int r)
{
	return repl_session_inline_instead(r) || r == -ENOTCONN;
}

/* payload after the RDMA WRITEs of writes. The blocks go by WRITE, so what
 * is left is small: it goes in one piece. */
static int send_behind_writes(struct repl_session *s, struct repl_conn *conn,
			      const struct repl_remote_write *writes, size_t n_writes,
			      struct pb_pieces *payload)
{
	const uint8_t *bytes = pb_pieces_bytes(payload);
	char reason[192];
	int r;

	if (!bytes)
		return -ENOMEM;
	r = conn->transport->ops->send_after_writes(conn, writes, n_writes, bytes, payload->len,
						    reason, sizeof(reason));
	if (r < 0 && one_sided_usual_failure(r)) {
		log_debug("page data not sent one-sided: %s", reason);
	} else if (r < 0) {
		warn_refused(s, reason);
		r = -EOPNOTSUPP; /* nothing was sent: the caller goes inline */
	} else if (s->tap) {
		tap(s, conn, true, bytes, payload->len);
	}
	return r;
}

/* payload to the link, after the RDMA WRITEs of writes (n_writes 0: none, a
 * plain send). */
static int send_payload(struct repl_session *s, const struct repl_remote_write *writes,
			size_t n_writes, struct pb_pieces *payload)
{
	struct repl_conn *conn = s->active->conn;
	int r = 0;

	if (!n_writes)
		r = wire_send(s, conn, payload);
	else if (!cut(s) && s->n_corked && (r = send_corked(s, NULL)) < 0)
		s->cork_failed = true; /* and turn_end, active, drops the link */
	else if (!cut(s))
		r = send_behind_writes(s, conn, writes, n_writes, payload);
	return r;
}

static int send_envelope(struct repl_session *s, struct session_conn *sc, Envelope *env)
{
	struct pb_pieces payload = { 0 };
	int r;

	fill_header(s, env);
	r = codec_envelope_pieces(env, &payload);
	if (r == 0)
		r = wire_send(s, sc->conn, &payload);
	pb_pieces_free(&payload);
	return r;
}

/* ---- One-sided page data: what the pool's blocks are, told both ways ---- */

static bool pool_attached(const struct repl_session *s)
{
	const struct repl_transport_ops *ops = s->transport->ops;

	return ops->pool_blocks && ops->pool_blocks(s->transport) > 0;
}

static bool conn_offers_one_sided(const struct repl_session *s, const struct session_conn *sc)
{
	return pool_attached(s) && s->transport->ops->conn_one_sided(sc->conn);
}

static void region_from(Ftvm__Partner__PoolRegion *ret, const struct rdma_remote_block *b)
{
	*ret = (Ftvm__Partner__PoolRegion)FTVM__PARTNER__POOL_REGION__INIT;
	ret->block = b->block;
	ret->generation = b->generation;
	ret->addr = b->addr;
	ret->length = b->length;
	ret->rkey = b->rkey;
}

/* The pool's registered blocks, for a Hello on sc, noted as told there: *ret
 * is one allocation (the pointers, then the regions) for the caller to free. */
static size_t registered_regions(struct repl_session *s, struct session_conn *sc,
				 Ftvm__Partner__PoolRegion ***ret)
{
	uint32_t blocks = s->transport->ops->pool_blocks(s->transport);
	Ftvm__Partner__PoolRegion **ptrs, *regions;
	struct rdma_remote_block b;
	size_t n = 0;

	free(sc->told_generation);
	sc->told_generation = calloc(blocks, sizeof(*sc->told_generation));
	ptrs = calloc(blocks, sizeof(*ptrs) + sizeof(*regions));
	*ret = ptrs;
	if (!ptrs || !sc->told_generation) {
		free(sc->told_generation);
		sc->told_generation = NULL;
		return 0; /* the partner then learns of none: page data goes inline */
	}
	regions = (Ftvm__Partner__PoolRegion *)(ptrs + blocks);
	for (uint32_t i = 0; i < blocks; i++) {
		if (s->transport->ops->pool_describe(s->transport, i, &b) < 0 || !b.length)
			continue;
		region_from(&regions[n], &b);
		ptrs[n] = &regions[n];
		sc->told_generation[i] = b.generation;
		n++;
	}
	return n;
}

/* What the partner said of its pool's blocks, into sc's view of it. */
static int take_regions(struct repl_session *s, struct session_conn *sc,
			Ftvm__Partner__PoolRegion *const *regions, size_t n, char *reason,
			size_t reason_len)
{
	struct rdma_remote_block b;
	int r;

	for (size_t i = 0; i < n; i++) {
		b = (struct rdma_remote_block){
			.block = regions[i]->block,
			.generation = regions[i]->generation,
			.addr = regions[i]->addr,
			.length = regions[i]->length,
			.rkey = regions[i]->rkey,
		};
		r = s->transport->ops->conn_remote_update(sc->conn, &b, reason, reason_len);
		if (r < 0)
			return r;
	}
	return 0;
}

/* The partner's Hello on sc: whether page data goes one-sided there, and the
 * blocks it registered so far. */
static int take_hello_pool(struct repl_session *s, struct session_conn *sc,
			   const Ftvm__Partner__Hello *h, char *reason, size_t reason_len)
{
	uint64_t blocks;
	int r;

	sc->partner_one_sided = false;
	if (!h->one_sided || !sc->offered_one_sided)
		return 0;
	if (!h->pool_block_frames || !h->frame_count)
		return reason_fail(reason, reason_len, -EPROTO,
				   "partner offers one-sided page data with a pool of %" PRIu64
				   " frames in blocks of %" PRIu64,
				   h->frame_count, h->pool_block_frames);
	blocks = (h->frame_count - 1) / h->pool_block_frames + 1;
	if (blocks > UINT32_MAX)
		return reason_fail(reason, reason_len, -EPROTO,
				   "partner's pool has %" PRIu64 " registration blocks", blocks);
	r = s->transport->ops->conn_remote_open(sc->conn, (uint32_t)blocks, reason, reason_len);
	if (r < 0)
		return r;
	r = take_regions(s, sc, h->regions, h->n_regions, reason, reason_len);
	if (r < 0)
		return r;
	sc->partner_block_frames = h->pool_block_frames;
	sc->partner_one_sided = true;
	return 0;
}

/* A RegionUpdate from the partner on sc; false when sc was dropped for it. */
static bool on_region_update(struct repl_session *s, struct session_conn *sc,
			     const Ftvm__Partner__RegionUpdate *u)
{
	char reason[160], why[224];

	if (!sc->partner_one_sided)
		return true; /* no view of its pool is kept on this connection */
	if (take_regions(s, sc, u->regions, u->n_regions, reason, sizeof(reason)) == 0)
		return true;
	snprintf(why, sizeof(why), "bad RegionUpdate: %s", reason);
	protocol_error(s, sc, why);
	return false;
}

/* Tells every connection that offered one-sided data (and so has sent its
 * Hello) of block's current registration, unless it knows it already. It
 * goes at once, so it reaches the partner ahead of the answer that names
 * the generation. */
static void send_region_update(struct repl_session *s, uint32_t block)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__RegionUpdate update = FTVM__PARTNER__REGION_UPDATE__INIT;
	Ftvm__Partner__PoolRegion region, *regions[1] = { &region };
	struct rdma_remote_block b;

	if (s->transport->ops->pool_describe(s->transport, block, &b) < 0)
		return;
	region_from(&region, &b);
	update.n_regions = 1;
	update.regions = regions;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_REGION_UPDATE;
	env.region_update = &update;
	for (struct session_conn *sc = s->conns; sc; sc = sc->next) {
		if (!sc->offered_one_sided || !sc->told_generation ||
		    sc->told_generation[block] == b.generation)
			continue;
		if (!b.length && !sc->told_generation[block])
			continue; /* withdrawn, and the partner never heard of it */
		if (send_envelope(s, sc, &env) == 0)
			sc->told_generation[block] = b.generation;
	}
}

static void send_hello(struct repl_session *s, struct session_conn *sc)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__Hello hello = FTVM__PARTNER__HELLO__INIT;

	hello.node_id = (char *)s->config.node_id;
	hello.version = FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	hello.epoch = s->config.epoch;
	hello.page_size = s->config.page_size;
	hello.frame_count = s->config.frame_count;
	hello.initiator = !sc->inbound;
	hello.state = s->state;
	hello.marks_retired = true;
	hello.answers_runs = true;
	sc->offered_one_sided = conn_offers_one_sided(s, sc);
	if (sc->offered_one_sided) {
		hello.one_sided = true;
		hello.pool_block_frames = s->config.pool_block_frames;
		hello.n_regions = registered_regions(s, sc, &hello.regions);
	}
	if (s->cb.hello)
		s->cb.hello(s, &hello, s->cb_arg);
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO;
	env.hello = &hello;
	send_envelope(s, sc, &env);
	free(hello.regions);
}

/* ---- Authentication (see the top) ---- */

static void send_challenge(struct repl_session *s, struct session_conn *sc)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__AuthChallenge ch = FTVM__PARTNER__AUTH_CHALLENGE__INIT;

	ch.node_id = (char *)s->config.node_id;
	ch.method = auth_method(s);
	if (s->config.key) {
		if (auth_nonce(sc->nonce) < 0) {
			drop_conn(s, sc, "no random bytes for a nonce");
			return;
		}
		ch.nonce = (ProtobufCBinaryData){ .len = AUTH_NONCE_LEN, .data = sc->nonce };
	}
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE;
	env.auth_challenge = &ch;
	sc->state = CONN_CHALLENGE;
	send_envelope(s, sc, &env);
}

/* Our proof to sc's peer; false when sc was dropped instead. */
static bool send_proof(struct repl_session *s, struct session_conn *sc)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__AuthProof proof = FTVM__PARTNER__AUTH_PROOF__INIT;
	uint8_t mac[AUTH_MAC_LEN];

	if (auth_proof(s->config.key, s->config.key_len, !sc->inbound, s->config.node_id,
		       sc->peer_id, sc->nonce, sc->peer_nonce, mac) < 0) {
		drop_conn(s, sc, "cannot compute the proof of the key (libcrypto failed)");
		return false;
	}
	proof.mac = (ProtobufCBinaryData){ .len = sizeof(mac), .data = mac };
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF;
	env.auth_proof = &proof;
	send_envelope(s, sc, &env);
	return true;
}

static const char *method_name(int method)
{
	switch (method) {
	case FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_NONE:
		return "no key";
	case FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_HMAC_SHA256:
		return "a key (HMAC-SHA256)";
	default:
		return "an unknown method";
	}
}

static int check_challenge(struct repl_session *s, const Ftvm__Partner__AuthChallenge *ch,
			   char *why, size_t why_len)
{
	if ((int)ch->method != auth_method(s))
		return reason_fail(why, why_len, -EACCES,
				   "peer authenticates with %s, this node with %s (set the same "
				   "[node] key_file on both nodes)",
				   method_name(ch->method), method_name(auth_method(s)));
	if (!ch->node_id[0] || strlen(ch->node_id) >= sizeof(((struct session_conn *)0)->peer_id))
		return reason_fail(why, why_len, -EACCES, "peer's id '%.40s' is not a node id",
				   ch->node_id);
	if (strcmp(ch->node_id, s->config.node_id) == 0)
		return reason_fail(why, why_len, -EACCES,
				   "peer has this node's own id '%s' (two nodes %s, or a node "
				   "dialling itself?)",
				   ch->node_id, ch->node_id);
	if (s->config.key && ch->nonce.len != AUTH_NONCE_LEN)
		return reason_fail(why, why_len, -EACCES, "peer's nonce has %zu bytes, not %u",
				   ch->nonce.len, AUTH_NONCE_LEN);
	return 0;
}

static void on_challenge(struct repl_session *s, struct session_conn *sc, const Envelope *env)
{
	const Ftvm__Partner__AuthChallenge *ch = env->auth_challenge;
	char why[224];

	if (check_challenge(s, ch, why, sizeof(why)) < 0) {
		auth_failed(s, sc, why);
		return;
	}
	snprintf(sc->peer_id, sizeof(sc->peer_id), "%s", ch->node_id);
	if (!s->config.key) {
		sc->state = CONN_HELLO;
		send_hello(s, sc);
		return;
	}
	memcpy(sc->peer_nonce, ch->nonce.data, AUTH_NONCE_LEN);
	sc->state = CONN_PROOF;
	if (!sc->inbound)
		send_proof(s, sc); /* the dialler proves itself first */
}

static void on_proof(struct repl_session *s, struct session_conn *sc, const Envelope *env)
{
	const ProtobufCBinaryData *mac = &env->auth_proof->mac;
	uint8_t expected[AUTH_MAC_LEN];
	char why[160];

	if (auth_proof(s->config.key, s->config.key_len, sc->inbound, sc->peer_id,
		       s->config.node_id, sc->peer_nonce, sc->nonce, expected) < 0) {
		drop_conn(s, sc, "cannot compute the proof of the key (libcrypto failed)");
		return;
	}
	if (!auth_proof_matches(expected, mac->data, mac->len)) {
		snprintf(why, sizeof(why),
			 "peer '%.40s' did not prove the pair's key (another key_file, or a "
			 "replayed handshake)",
			 sc->peer_id);
		auth_failed(s, sc, why);
		return;
	}
	if (sc->inbound && !send_proof(s, sc))
		return;
	sc->state = CONN_HELLO;
	send_hello(s, sc);
}

/* A message from sc's peer before its Hello: the handshake's next step, or
 * a refusal. */
static void on_handshake(struct repl_session *s, struct session_conn *sc, const Envelope *env)
{
	char why[192];

	if (sc->state == CONN_CHALLENGE &&
	    env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE)
		return on_challenge(s, sc, env);
	if (sc->state == CONN_PROOF &&
	    env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF)
		return on_proof(s, sc, env);
	if (sc->state == CONN_HELLO && env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO)
		return on_hello(s, sc, env);
	if (sc->state == CONN_HELLO) {
		protocol_error(s, sc, "first message after authentication is not a Hello");
		return;
	}
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO)
		snprintf(why, sizeof(why),
			 "peer sent a Hello before authenticating (an ftvmd older than this "
			 "one, or a stranger)");
	else
		snprintf(why, sizeof(why), "peer sent %s while this node waited for its %s",
			 codec_message_name(env),
			 sc->state == CONN_CHALLENGE ? "AuthChallenge" : "AuthProof");
	auth_failed(s, sc, why);
}

static unsigned unproven_inbound(const struct repl_session *s)
{
	unsigned n = 0;

	for (const struct session_conn *sc = s->conns; sc; sc = sc->next)
		n += sc->inbound && sc->state < CONN_HELLO;
	return n;
}

/* The node that dialled sc; simultaneous connects keep the smaller one's. */
static const char *dialler_of(struct repl_session *s, struct session_conn *sc)
{
	return sc->inbound ? s->stats.partner_id : s->config.node_id;
}

static int check_hello(struct repl_session *s, const struct session_conn *sc,
		       const Ftvm__Partner__Hello *h, char *why, size_t why_len)
{
	if (strcmp(h->node_id, sc->peer_id) != 0) {
		snprintf(why, why_len,
			 "Hello names node '%.40s', but the peer authenticated as '%s'", h->node_id,
			 sc->peer_id);
		return -EPROTO;
	}
	if (h->version != FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT) {
		snprintf(why, why_len, "partner speaks protocol version %u, this node %u",
			 h->version, FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
		return -EPROTO;
	}
	if (strcmp(h->node_id, s->config.node_id) == 0) {
		snprintf(why, why_len,
			 "partner has this node's own id '%s' (two nodes a, or "
			 "a node dialling itself?)",
			 h->node_id);
		return -EPROTO;
	}
	if (strlen(h->node_id) >= sizeof(s->stats.partner_id) || h->node_id[0] == '\0') {
		snprintf(why, why_len, "partner id '%.40s' is not a node id", h->node_id);
		return -EPROTO;
	}
	if (s->stats.partner_id[0] && strcmp(h->node_id, s->stats.partner_id) != 0 && s->active) {
		snprintf(why, why_len, "node '%s' answered, but partner '%s' is linked already",
			 h->node_id, s->stats.partner_id);
		return -EPROTO;
	}
	if (h->page_size != s->config.page_size) {
		snprintf(why, why_len, "partner '%s' has page_size %u, this node %u", h->node_id,
			 h->page_size, s->config.page_size);
		return -EPROTO;
	}
	return 0;
}

static void on_hello(struct repl_session *s, struct session_conn *sc, const Envelope *env)
{
	const Ftvm__Partner__Hello *h = env->hello;
	struct session_conn *old = s->active;
	char why[192];

	if (check_hello(s, sc, h, why, sizeof(why)) < 0 ||
	    take_hello_pool(s, sc, h, why, sizeof(why)) < 0) {
		protocol_error(s, sc, why);
		return;
	}
	snprintf(s->stats.partner_id, sizeof(s->stats.partner_id), "%s", h->node_id);
	s->stats.partner_state = h->state;
	s->stats.partner_epoch = h->epoch;
	s->stats.partner_applied_lsn = h->applied_lsn;
	s->stats.partner_own_lsn = h->own_lsn;
	snprintf(s->stats.partner_ack, sizeof(s->stats.partner_ack), "%s", h->ack ? h->ack : "");
	sc->state = CONN_ESTABLISHED;
	sc->partner_marks_retired = h->marks_retired;
	sc->partner_answers_runs = h->answers_runs;
	if (s->dialling == sc)
		s->dialling = NULL;

	if (old) {
		/* Two links at once: keep the one the smaller id dialled. */
		if (strcmp(dialler_of(s, sc), dialler_of(s, old)) >= 0) {
			/* The partner may have made this its link already and sent
			 * requests behind its Hello: they are still taken, and the
			 * link's wait for its ConnectionRetired. */
			retire(s, sc);
			held_check(s);
			return;
		}
		/* What waits was sent on old, and goes there first. */
		if (s->n_corked && send_corked(s, NULL) < 0)
			log_debug("frames queued for %s lost as the link moves: their "
				  "requests time out",
				  s->stats.partner_id);
		/* The link stays up: what is pending stays pending. The old
		 * connection retires rather than closing at once, so answers
		 * the partner sent on it before it switched still arrive (the
		 * partner answers on whichever connection is its link then);
		 * what it never read times out. Failing them here, or losing
		 * answers in a connection closed under them, made a resync the
		 * partner had applied count as failed, and it was never sent
		 * again. */
		s->active = sc;
		retire(s, old);
		held_check(s); /* what old brought before is older than all on sc */
		return;
	}
	s->active = sc;
	/* Linked, while our own dial is still under way: when it lands it would
	 * replace this link (the smaller id's dial wins), failing what is
	 * pending by then, a resync say; over RDMA, whose connects take long,
	 * that was seen. It has not sent its Hello yet (that goes at conn_up),
	 * so the partner never links it: drop it now. */
	if (s->dialling && s->dialling != sc && s->dialling->connecting)
		drop_conn(s, s->dialling, "linked on another connection");
	s->stats.last_rx_ms = clock_now_ms();
	s->backoff_ms = 0;
	s->stats.link_up = true;
	s->stats.link_changes++;
	if (s->redial)
		evtimer_del(s->redial);
	if (s->cb.link_changed)
		s->cb.link_changed(s, true,
				   sc->inbound ? "partner connected" : "connected to partner",
				   s->cb_arg);
}

/* An answer: to env->answers, or to the run of seqs that ends there (the
 * codec checked it), each told what codec_run_answer() says. */
static void on_completion(struct repl_session *s, const Envelope *env)
{
	CommandComplete plain;

	for (uint64_t seq = env->answers - codec_answers_in(env) + 1; seq <= env->answers; seq++)
		/* An answer to nothing pending came after its request timed
		 * out: harmless. */
		if (!pending_complete(s->pending, seq, codec_run_answer(env, seq, &plain)))
			log_debug("late answer to seq %" PRIu64 " from %s", seq,
				  s->stats.partner_id);
}

/* Requests from an older epoch come from a node that was taken over: none of
 * them may change anything here (node/ha/HA.md, "Epochs"). Each is answered, so
 * its sender fails it at once instead of at its deadline. Answers from an
 * older epoch are let through: they answer what this node asked. */
static bool refuse_stale(struct repl_session *s, uint64_t epoch, Envelope *const *envs, size_t n)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	char reason[256];

	if (epoch >= s->config.epoch)
		return false;
	snprintf(reason, sizeof(reason),
		 "stale epoch: %s is at epoch %" PRIu64 ", this node at %" PRIu64
		 " (it took over; the partner must rejoin and resync)",
		 s->stats.partner_id, epoch, s->config.epoch);
	cc.status = FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH;
	cc.reason = reason;
	for (size_t i = 0; i < n; i++) {
		struct repl_answer a = { envs[i]->seq, &cc };

		repl_session_answer(s, &a, 1);
	}
	s->stats.stale_refused += n;
	return true;
}

/* A batch holds completions (answers to our batch) or requests, never both
 * and never another batch; each inner envelope is checked like any other.
 * RegionUpdates held with the answers are applied as they come, ahead of
 * what follows them. The inner envelopes live in env's memory and go with
 * it. */
static void on_batch(struct repl_session *s, struct session_conn *sc, const Envelope *env)
{
	const Ftvm__Partner__Batch *batch = env->batch;
	Envelope **envs = calloc(batch->n_envelopes ? batch->n_envelopes : 1, sizeof(*envs));
	size_t n = 0, completions = 0;
	char err[160];
	Envelope *e;

	if (!envs) {
		protocol_error(s, sc, "out of memory for a batch");
		return;
	}
	for (size_t i = 0; i < batch->n_envelopes; i++) {
		if (codec_batch_envelope_decode(env, i, &e, err, sizeof(err)) < 0)
			goto bad;
		if (e->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_REGION_UPDATE) {
			if (!on_region_update(s, sc, e->region_update))
				goto out;
			continue;
		}
		envs[n++] = e;
		if (e->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE)
			completions++;
		else if (e->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH ||
			 e->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO ||
			 e->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT ||
			 e->seq == 0) {
			snprintf(err, sizeof(err),
				 "batch item %zu is a %s without a sequence number "
				 "or cannot be batched",
				 i, codec_message_name(e));
			goto bad;
		}
	}
	if (completions && completions != n) {
		snprintf(err, sizeof(err), "batch mixes %zu completions with %zu requests",
			 completions, n - completions);
		goto bad;
	}
	if (completions) {
		for (size_t i = 0; i < n; i++)
			on_completion(s, envs[i]);
	} else if (n && !refuse_stale(s, env->epoch, envs, n)) {
		s->stats.requests_received += n;
		s->cb.request(s, envs, n, s->cb_arg);
	}
	goto out;
bad:
	protocol_error(s, sc, err);
out:
	free(envs);
}

/* One frame from sc, taken now: as it came, or once the link's wait ended. */
static void take_frame(struct repl_session *s, struct session_conn *sc, const uint8_t *payload,
		       size_t len)
{
	char err[160];
	Envelope *env;

	/* payload stays until this returns, and env goes before. */
	if (codec_envelope_decode_borrowed(payload, len, &env, err, sizeof(err)) < 0) {
		protocol_error(s, sc, err);
		return;
	}
	if (sc->state != CONN_ESTABLISHED) {
		on_handshake(s, sc, env);
		goto out;
	}
	if (sc != s->active && !sc->retiring)
		goto out; /* the losing half of a simultaneous connect, closing */
	if (strcmp(env->sender, s->stats.partner_id) != 0) {
		snprintf(err, sizeof(err), "message from '%.40s' on the link to '%s'", env->sender,
			 s->stats.partner_id);
		protocol_error(s, sc, err);
		goto out;
	}
	s->stats.last_rx_ms = clock_now_ms();
	s->stats.partner_epoch = env->epoch;
	switch (env->message_case) {
	case FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT:
		s->stats.partner_state = env->heartbeat->state;
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO:
		protocol_error(s, sc, "Hello on an established link");
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE:
		on_completion(s, env);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH:
		on_batch(s, sc, env);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_REGION_UPDATE:
		on_region_update(s, sc, env->region_update);
		break;
	case FTVM__PARTNER__ENVELOPE__MESSAGE_CONNECTION_RETIRED:
		if (!sc->retiring) {
			log_debug("ConnectionRetired from %s on the link itself: ignored",
				  s->stats.partner_id);
			break;
		}
		sc->ended = true;
		held_check(s);
		break;
	default:
		if (env->seq == 0) {
			protocol_error(s, sc, "request without a sequence number");
			break;
		}
		if (refuse_stale(s, env->epoch, &env, 1))
			break;
		s->stats.requests_received++;
		s->cb.request(s, &env, 1, s->cb_arg);
		break;
	}
out:
	codec_envelope_free(env);
}

/* ---- The link moves (see the top) ---- */

/* Whether the partner may still send, on a connection other than the link,
 * frames older than the link's: one retired that has not brought its
 * ConnectionRetired, or one of the partner's whose Hello has not come yet
 * (the partner may have made it its link and sent on it, and it may win or
 * lose here). */
static bool holds_link(const struct repl_session *s, const struct session_conn *sc)
{
	if (sc == s->active)
		return false;
	if (sc->retiring)
		return sc->partner_marks_retired && !sc->ended;
	return sc->state == CONN_HELLO && strcmp(sc->peer_id, s->stats.partner_id) == 0;
}

static bool link_waits(const struct repl_session *s)
{
	for (const struct session_conn *sc = s->conns; sc; sc = sc->next)
		if (holds_link(s, sc))
			return true;
	return false;
}

/* Whether the oldest held frame can be taken: one from a connection that
 * is no longer the link always (it came before anything on the link). */
static bool held_takeable(const struct repl_session *s)
{
	return s->rx_held.first &&
	       (held_frames_first_tag(&s->rx_held) != s->active || !link_waits(s));
}

static void held_check(struct repl_session *s)
{
	if (s->rx_replay && held_takeable(s))
		event_active(s->rx_replay, EV_TIMEOUT, 0);
}

static void on_rx_replay(evutil_socket_t fd, short what, void *arg)
{
	struct repl_session *s = arg;
	struct held_frame *f;
	const uint8_t *payload;
	size_t len;
	void *tag;

	while (held_takeable(s) && (f = held_frames_pop(&s->rx_held, &tag, &payload, &len))) {
		struct session_conn *sc = tag;

		sc->n_held--;
		take_frame(s, sc, payload, len);
		held_frames_done(f);
	}
}

/* Past max_backlog bytes held the wait ends, as the partner's silence
 * would end it: what it waited for is closed, and what it would have
 * brought is lost (its requests time out). */
static void give_up_waiting(struct repl_session *s)
{
	struct session_conn *sc, *next;

	log_warning("the link to %s moved, and %zu bytes came on it while the old "
		    "connection did not end: closing that one and taking them",
		    s->stats.partner_id, s->rx_held.bytes);
	for (sc = s->conns; sc; sc = next) {
		next = sc->next;
		if (holds_link(s, sc)) {
			repl_conn_close(sc->conn);
			forget_conn(s, sc);
		}
	}
}

static void hold_frame(struct repl_session *s, struct session_conn *sc, const uint8_t *payload,
		       size_t len)
{
	if (held_frames_push(&s->rx_held, sc, payload, len) < 0) {
		drop_conn(s, sc, "out of memory for frames that wait for the link to move");
		return;
	}
	sc->n_held++;
	s->stats.last_rx_ms = clock_now_ms(); /* a sign of life all the same */
	if (s->rx_held.bytes > s->config.max_backlog)
		give_up_waiting(s);
	held_check(s);
}

/* A frame waits while the link waits, or behind frames of its own
 * connection that wait. */
static void on_receive(struct repl_conn *conn, const uint8_t *payload, size_t len, void *arg)
{
	struct repl_session *s = arg;
	struct session_conn *sc = find_conn(s, conn);

	if (!sc || cut(s))
		return;
	if (s->tap)
		tap(s, conn, false, payload, len);
	if (sc->n_held || (sc == s->active && (s->rx_held.first || link_waits(s))))
		hold_frame(s, sc, payload, len);
	else
		take_frame(s, sc, payload, len);
}

static void on_conn_up(struct repl_conn *conn, bool inbound, void *arg)
{
	struct repl_session *s = arg;
	struct session_conn *sc = inbound ? NULL : find_conn(s, conn);

	if (inbound && cut(s)) {
		repl_conn_close(conn);
		return;
	}
	if (inbound && unproven_inbound(s) >= UNPROVEN_INBOUND_MAX) {
		s->stats.auth_failures++;
		warn_auth(s, repl_conn_peer_name(conn),
			  "too many connections have not authenticated yet");
		repl_conn_close(conn);
		return;
	}
	if (!sc) {
		sc = calloc(1, sizeof(*sc));
		if (!sc) {
			repl_conn_close(conn);
			return;
		}
		sc->session = s;
		sc->conn = conn;
		sc->inbound = true;
		conn->user = sc;
		sc->next = s->conns;
		s->conns = sc;
	}
	sc->connecting = false;
	sc->since_ms = clock_now_ms();
	send_challenge(s, sc);
}

static void on_conn_down(struct repl_conn *conn, int error, const char *reason, void *arg)
{
	struct repl_session *s = arg;
	struct session_conn *sc = find_conn(s, conn);
	bool was_active;

	if (!sc)
		return;
	was_active = s->active == sc;
	if (error == -EBADMSG && s->cb.protocol_error)
		s->cb.protocol_error(s, repl_conn_peer_name(conn), reason, s->cb_arg);
	forget_conn(s, sc);
	if (was_active)
		link_down(s, reason);
	else if (!s->active && !s->dialling)
		schedule_dial(s);
}

static void dial(struct repl_session *s)
{
	struct session_conn *sc;
	struct repl_conn *conn;

	if (s->active || s->dialling)
		return;
	if (cut(s))
		goto retry;
	sc = calloc(1, sizeof(*sc));
	if (!sc)
		goto retry;
	if (s->transport->ops->connect(s->transport, s->config.partner, &conn) < 0) {
		free(sc);
		goto retry;
	}
	sc->session = s;
	sc->conn = conn;
	sc->connecting = true;
	sc->since_ms = clock_now_ms();
	conn->user = sc;
	sc->next = s->conns;
	s->conns = sc;
	s->dialling = sc;
	return;
retry:
	schedule_dial(s);
}

static void on_redial(evutil_socket_t fd, short what, void *arg)
{
	dial(arg);
}

static void schedule_dial(struct repl_session *s)
{
	struct timeval tv;

	if (s->active || !s->redial)
		return;
	s->backoff_ms = s->backoff_ms ? s->backoff_ms * 2 : DIAL_BACKOFF_MIN_MS;
	if (s->backoff_ms > DIAL_BACKOFF_MAX_MS)
		s->backoff_ms = DIAL_BACKOFF_MAX_MS;
	tv.tv_sec = s->backoff_ms / 1000;
	tv.tv_usec = (s->backoff_ms % 1000) * 1000;
	if (!evtimer_pending(s->redial, NULL))
		evtimer_add(s->redial, &tv);
}

static void send_heartbeat(struct repl_session *s)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__Heartbeat hb = FTVM__PARTNER__HEARTBEAT__INIT;

	hb.sent_us = clock_now_us();
	hb.state = s->state;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT;
	env.heartbeat = &hb;
	send_envelope(s, s->active, &env);
}

/* Whether this tick ends a pause of the event loop (see the top); counts it. */
static bool loop_paused(struct repl_session *s, uint64_t now)
{
	uint64_t gap = s->last_tick_ms ? now - s->last_tick_ms : 0, pause;

	s->last_tick_ms = now;
	if (gap <= 2 * (uint64_t)s->config.heartbeat_ms)
		return false;
	pause = gap - s->config.heartbeat_ms;
	s->stats.loop_pauses++;
	if (pause > s->stats.loop_pause_max_ms)
		s->stats.loop_pause_max_ms = pause;
	if (2 * pause >= s->config.dead_after_ms)
		log_warning("this node's event loop did not run for %" PRIu64
			    " ms (dead_after_ms %u): a partner that hears nothing for "
			    "dead_after_ms takes this node for silent",
			    pause, s->config.dead_after_ms);
	return true;
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct repl_session *s = arg;
	uint64_t now = clock_now_ms();
	bool paused = loop_paused(s, now), judge;
	struct session_conn *sc, *next;
	char why[224];

	/* A connection that never said Hello is a stranger or a hung partner. */
	for (sc = s->conns; sc; sc = next) {
		next = sc->next;
		if (sc->state == CONN_ESTABLISHED || sc->connecting ||
		    now - sc->since_ms <= s->config.dead_after_ms)
			continue;
		snprintf(why, sizeof(why), "no %s within %u ms",
			 sc->state == CONN_HELLO ? "Hello" : "authentication",
			 s->config.dead_after_ms);
		if (sc->state == CONN_HELLO)
			protocol_error(s, sc, why);
		else
			auth_failed(s, sc, why);
	}
	/* One a tick: dropping the link closes other connections too. */
	for (sc = s->conns; sc; sc = sc->next) {
		if (!backlogged(s, sc->conn))
			continue;
		snprintf(why, sizeof(why),
			 "partner '%s' reads nothing: %zu bytes wait for it, past the bound of %zu",
			 sc->peer_id, sc->conn->transport->ops->backlog(sc->conn),
			 s->config.max_backlog);
		log_warning("%s; the link is dropped and dialled again", why);
		drop_conn(s, sc, why);
		break;
	}
	if (!s->active)
		return;
	close_retiring(s, now - s->config.dead_after_ms);
	judge = !paused || s->silence_deferred;
	s->silence_deferred = !judge;
	if (judge && now - s->stats.last_rx_ms > s->config.dead_after_ms) {
		snprintf(why, sizeof(why),
			 "partner '%s' silent for %" PRIu64 " ms (dead_after_ms %u)",
			 s->stats.partner_id, now - s->stats.last_rx_ms, s->config.dead_after_ms);
		drop_conn(s, s->active, why);
		return;
	}
	send_heartbeat(s);
}

/* Offers the frame pool to a transport that takes page data one-sided. A
 * pool it refuses only means page data goes inline: said, not fatal. */
static void attach_pool(struct repl_session *s)
{
	const struct repl_session_config *c = &s->config;
	char reason[160];
	int r;

	if (!c->pool_base || !s->transport->ops->pool_attach)
		return;
	r = s->transport->ops->pool_attach(
		s->transport, c->pool_base, c->frame_count * c->page_size,
		c->pool_block_frames * c->page_size, reason, sizeof(reason));
	if (r < 0)
		log_warning("page data goes inline: the %s transport refused the frame pool: %s",
			    s->transport->ops->name, reason);
}

int repl_session_new(struct event_base *base, const struct repl_session_config *config,
		     const struct repl_session_callbacks *cb, void *arg, struct repl_session **ret)
{
	static const struct repl_transport_callbacks transport_cb = {
		.conn_up = on_conn_up,
		.receive = on_receive,
		.conn_down = on_conn_down,
		.refused = on_refused,
	};
	struct repl_session *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->base = base;
	s->config = *config;
	if (!s->config.max_backlog)
		s->config.max_backlog = REPL_BACKLOG_DEFAULT;
	s->cb = *cb;
	s->cb_arg = arg;
	s->state = FTVM__PARTNER__NODE_STATE__NODE_STATE_STARTING;
	r = pending_table_new(base, &s->pending);
	if (r < 0)
		goto fail;
	r = config->transport->create(base, &transport_cb, s, config->max_payload, &s->transport);
	if (r < 0)
		goto fail;
	attach_pool(s);
	s->tick = event_new(base, -1, EV_PERSIST, on_tick, s);
	s->redial = evtimer_new(base, on_redial, s);
	s->turn_end = event_new(base, -1, 0, on_turn_end, s);
	s->rx_replay = event_new(base, -1, 0, on_rx_replay, s);
	if (!s->tick || !s->redial || !s->turn_end || !s->rx_replay) {
		r = -ENOMEM;
		goto fail;
	}
	*ret = s;
	return 0;
fail:
	repl_session_free(s);
	return r;
}

int repl_session_start(struct repl_session *s)
{
	struct timeval tv = {
		.tv_sec = s->config.heartbeat_ms / 1000,
		.tv_usec = (s->config.heartbeat_ms % 1000) * 1000,
	};
	struct peer_filter allowed;
	char reason[192];
	int r;

	r = peer_filter_init(&allowed, s->config.partner, reason, sizeof(reason));
	if (r < 0) {
		log_error("partner %s: %s", s->config.partner, reason);
		return r;
	}
	r = s->transport->ops->listen(s->transport, s->config.listen, &allowed);
	if (r < 0)
		return r;
	evtimer_add(s->tick, &tv);
	dial(s);
	return 0;
}

void repl_session_set_tap(struct repl_session *s, repl_session_tap_fn fn, void *arg)
{
	s->tap = fn;
	s->tap_arg = arg;
}

void repl_session_free(struct repl_session *s)
{
	if (!s)
		return;
	pending_table_free(s->pending);
	drop_rx_held(s);
	pb_pieces_free(&s->out);
	free(s->cork_buf);
	free(s->corked);
	free(s->cork_payloads);
	free(s->cork_iov);
	while (s->conns) {
		struct session_conn *sc = s->conns;
		repl_conn_close(sc->conn);
		forget_conn(s, sc);
	}
	if (s->transport)
		s->transport->ops->destroy(s->transport);
	if (s->tick)
		event_free(s->tick);
	if (s->redial)
		event_free(s->redial);
	if (s->turn_end)
		event_free(s->turn_end);
	if (s->rx_replay)
		event_free(s->rx_replay);
	free(s);
}

void repl_session_fail_pending(struct repl_session *s, const char *reason)
{
	pending_fail_all(s->pending, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN, reason);
}

int repl_session_request(struct repl_session *s, Envelope *env, uint32_t timeout_ms,
			 pending_done_fn done, void *arg)
{
	return repl_session_request_batch(s, &env, 1, timeout_ms, done, &arg);
}

/* The n envelopes in one frame (a Batch when n > 1), after the RDMA WRITEs
 * of writes (none when n_writes is 0). */
static int send_together(struct repl_session *s, Envelope *const *envs, size_t n,
			 const struct repl_remote_write *writes, size_t n_writes)
{
	/* Taken out while in use: a send that led to another would find none
	 * and pack into memory of its own, which is dropped below. */
	struct pb_pieces payload = s->out;
	Envelope outer = FTVM__PARTNER__ENVELOPE__INIT;
	int r;

	s->out = (struct pb_pieces){ 0 };
	for (size_t i = 0; i < n; i++)
		fill_header(s, envs[i]);
	if (n == 1) {
		r = codec_envelope_pieces(envs[0], &payload);
	} else {
		fill_header(s, &outer);
		r = codec_batch_pieces(&outer, envs, n, &payload);
	}
	if (r == 0)
		r = send_payload(s, writes, n_writes, &payload);
	pb_pieces_clear(&payload);
	pb_pieces_free(&s->out);
	s->out = payload;
	return r;
}

/* The n requests in one frame, after the RDMA WRITEs of writes (none when
 * n_writes is 0). Nothing sent: their sequence numbers are given again. */
static int send_requests(struct repl_session *s, Envelope *const *envs, size_t n,
			 uint32_t timeout_ms, pending_done_fn done, void *const *args,
			 const struct repl_remote_write *writes, size_t n_writes)
{
	uint64_t first = s->next_seq + 1;
	int r;

	if (!s->active)
		return -ENOTCONN;
	for (size_t i = 0; i < n; i++) {
		envs[i]->seq = ++s->next_seq;
		envs[i]->answers = 0;
	}
	r = send_together(s, envs, n, writes, n_writes);
	if (r < 0) {
		s->next_seq = first - 1;
		return r;
	}
	for (size_t i = 0; i < n; i++) {
		s->stats.requests_sent++;
		r = pending_add(s->pending, first + i, timeout_ms, done, args[i]);
		if (r < 0)
			return r;
	}
	return 0;
}

int repl_session_request_batch(struct repl_session *s, Envelope *const *envs, size_t n,
			       uint32_t timeout_ms, pending_done_fn done, void *const *args)
{
	return send_requests(s, envs, n, timeout_ms, done, args, NULL, 0);
}

/* A success that says nothing but how far this node applied: inside a
 * run, where the partner reads a plain success. */
static bool plain_success(const CommandComplete *cc)
{
	return cc->status == FTVM__PARTNER__STATUS__STATUS_OK && (!cc->reason || !*cc->reason) &&
	       cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD__NOT_SET &&
	       !cc->n_grants && !cc->n_landings;
}

/* How many of the answers from the first go as one: plain successes of
 * consecutive seqs, and the answer after them, whatever it says. The run's
 * answer is that last one's, whose applied_lsn is the highest (what this
 * node applied only grows). */
static size_t run_length(const struct repl_answer *answers, size_t n)
{
	size_t len = 1;

	while (len < n && plain_success(answers[len - 1].cc) &&
	       answers[len].seq == answers[len - 1].seq + 1)
		len++;
	return len;
}

_Static_assert(REPL_ANSWERS_MAX <= CODEC_ANSWERS_RUN_MAX, "a run fits in one batch of answers");

int repl_session_answer(struct repl_session *s, const struct repl_answer *answers, size_t n)
{
	Envelope *envs[REPL_ANSWERS_MAX], env[REPL_ANSWERS_MAX];
	bool runs;
	int r = 0;

	if (!s->active)
		return -ENOTCONN;
	runs = s->active->partner_answers_runs;
	while (n && r >= 0) {
		size_t some = n < REPL_ANSWERS_MAX ? n : REPL_ANSWERS_MAX, k = 0;

		for (size_t i = 0; i < some; k++) {
			size_t len = runs ? run_length(&answers[i], some - i) : 1;

			env[k] = (Envelope)FTVM__PARTNER__ENVELOPE__INIT;
			env[k].answers = answers[i + len - 1].seq;
			env[k].answers_count = len > 1 ? (uint32_t)len : 0;
			env[k].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;
			env[k].command_complete = (CommandComplete *)answers[i + len - 1].cc;
			envs[k] = &env[k];
			i += len;
		}
		r = send_together(s, envs, k, NULL, 0);
		answers += some;
		n -= some;
	}
	return r;
}

void repl_session_cut(struct repl_session *s, uint32_t ms)
{
	s->cut_until_ms = clock_now_ms() + ms;
	log_warning("link cut for %u ms (a drill): nothing sent, read or connected", ms);
}

void repl_session_set_epoch(struct repl_session *s, uint64_t epoch)
{
	s->config.epoch = epoch;
}

void repl_session_set_state(struct repl_session *s, int node_state)
{
	bool changed = s->state != node_state;

	s->state = node_state;
	/* Tell the partner now rather than at the next tick: its status shows ours. */
	if (changed && s->active)
		send_heartbeat(s);
}

bool repl_session_link_up(const struct repl_session *s)
{
	return s->active != NULL;
}

const char *repl_session_partner_id(const struct repl_session *s)
{
	return s->stats.partner_id;
}

void repl_session_get_stats(const struct repl_session *s, struct repl_session_stats *ret)
{
	*ret = s->stats;
	ret->connections = 0;
	for (const struct session_conn *sc = s->conns; sc; sc = sc->next)
		ret->connections++;
}

bool repl_session_one_sided(const struct repl_session *s)
{
	return s->active && s->active->offered_one_sided && s->active->partner_one_sided;
}

/* The run [frame, frame + frames) of this node's pool: 0 when it lies in the
 * pool and within one registration block (*ret_block). */
static int own_run(const struct repl_session *s, uint64_t frame, uint32_t frames,
		   uint64_t *ret_block, char *reason, size_t reason_len)
{
	uint64_t count = s->config.frame_count, per_block = s->config.pool_block_frames;

	if (!frames || frame >= count || frames > count - frame)
		return reason_fail(reason, reason_len, -ERANGE,
				   "landing frames %" PRIu64 "+%" PRIu32
				   " are outside the pool of %" PRIu64 " frames",
				   frame, frames, count);
	if (frame / per_block != (frame + frames - 1) / per_block)
		return reason_fail(reason, reason_len, -ERANGE,
				   "landing frames %" PRIu64 "+%" PRIu32
				   " cross a registration block (%" PRIu64 " frames each)",
				   frame, frames, per_block);
	*ret_block = frame / per_block;
	return 0;
}

int repl_session_landing_open(struct repl_session *s, uint64_t frame, uint32_t frames,
			      struct repl_landing *ret)
{
	uint8_t *pool = s->config.pool_base;
	struct rdma_block_key key;
	char reason[160];
	uint64_t block;
	int r;

	if (!repl_session_one_sided(s))
		return -EOPNOTSUPP;
	r = own_run(s, frame, frames, &block, reason, sizeof(reason));
	if (r == 0)
		r = s->transport->ops->pool_use_range(
			s->transport, pool + frame * s->config.page_size,
			(uint64_t)frames * s->config.page_size, &key, reason, sizeof(reason));
	if (r < 0) {
		if (one_sided_usual_failure(r))
			log_debug("no landing at frame %" PRIu64 ": %s", frame, reason);
		else
			warn_refused(s, reason);
		return r;
	}
	/* Before anything sent after this call names the generation. */
	send_region_update(s, key.block);
	*ret = (struct repl_landing){ .frame = frame,
				      .frames = frames,
				      .generation = key.generation };
	return 0;
}

int repl_session_landing_check(const struct repl_session *s, const struct repl_landing *l,
			       char *reason, size_t reason_len)
{
	struct rdma_remote_block b;
	uint64_t block;
	int r;

	if (!pool_attached(s))
		return reason_fail(reason, reason_len, -EOPNOTSUPP,
				   "page data does not go one-sided on this link");
	r = own_run(s, l->frame, l->frames, &block, reason, reason_len);
	if (r < 0)
		return r;
	r = s->transport->ops->pool_describe(s->transport, (uint32_t)block, &b);
	if (r < 0 || !b.length || b.generation != l->generation)
		return reason_fail(reason, reason_len, -ESTALE,
				   "landing frame %" PRIu64 " at generation %" PRIu64
				   " is stale: block %" PRIu64 " is at %" PRIu64 "%s",
				   l->frame, l->generation, block, b.generation,
				   r == 0 && !b.length ? " (not registered)" : "");
	return 0;
}

int repl_session_request_batch_landed(struct repl_session *s, Envelope *const *envs, size_t n,
				      uint32_t timeout_ms, pending_done_fn done, void *const *args,
				      const struct repl_page_write *writes, size_t n_writes)
{
	struct repl_remote_write *w;
	uint64_t per_block;
	int r = 0;

	if (!n_writes)
		return repl_session_request_batch(s, envs, n, timeout_ms, done, args);
	if (!repl_session_one_sided(s))
		return -EOPNOTSUPP;
	w = calloc(n_writes, sizeof(*w));
	if (!w)
		return -ENOMEM;
	per_block = s->active->partner_block_frames;
	for (size_t i = 0; i < n_writes && r == 0; i++) {
		const struct repl_page_write *pw = &writes[i];

		if (pw->to.frame / per_block > UINT32_MAX ||
		    pw->len > (uint64_t)pw->to.frames * s->config.page_size) {
			r = -ERANGE;
			break;
		}
		w[i] = (struct repl_remote_write){
			.src = pw->src,
			.block = (uint32_t)(pw->to.frame / per_block),
			.generation = pw->to.generation,
			.offset = pw->to.frame % per_block * s->config.page_size,
			.length = pw->len,
		};
	}
	if (r == 0)
		r = send_requests(s, envs, n, timeout_ms, done, args, w, n_writes);
	free(w);
	return r;
}

int repl_session_pool_block_out(struct repl_session *s, uint32_t block, char *reason,
				size_t reason_len)
{
	int r;

	if (!pool_attached(s))
		return 0;
	r = s->transport->ops->pool_block_out(s->transport, block, reason, reason_len);
	if (r < 0)
		return r;
	send_region_update(s, block);
	return 0;
}

int repl_session_pool_block_in(struct repl_session *s, uint32_t block, char *reason,
			       size_t reason_len)
{
	if (!pool_attached(s))
		return 0;
	return s->transport->ops->pool_block_in(s->transport, block, reason, reason_len);
}

int repl_session_pool_purge(struct repl_session *s, char *reason, size_t reason_len)
{
	if (!pool_attached(s))
		return 0;
	return s->transport->ops->pool_purge(s->transport, reason, reason_len);
}

void repl_session_pool_stats(const struct repl_session *s, struct repl_pool_stats *ret)
{
	*ret = (struct repl_pool_stats){ 0 };
	if (pool_attached(s))
		s->transport->ops->pool_stats(s->transport, ret);
}

int repl_session_staging_take(struct repl_session *s, uint64_t length, void **ret_addr)
{
	char reason[160];
	int r;

	if (!pool_attached(s))
		return -EOPNOTSUPP;
	r = s->transport->ops->staging_take(s->transport, length, ret_addr, reason, sizeof(reason));
	if (r < 0)
		log_debug("no staging slab of %" PRIu64 " bytes: %s", length, reason);
	return r;
}

void repl_session_staging_give(struct repl_session *s, void *addr)
{
	if (pool_attached(s))
		s->transport->ops->staging_give(s->transport, addr);
}

void repl_session_staging_trim(struct repl_session *s)
{
	if (pool_attached(s))
		s->transport->ops->staging_trim(s->transport);
}
