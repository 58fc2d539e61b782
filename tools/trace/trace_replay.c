/* trace_replay.h. The replay rules are TRACE.md's "Replay"; in short:
 *
 *   in-record, partner   sent on the replayer's partner connection (our Hello
 *                        and heartbeats are the replayer's own); an answer to
 *                        the node's request gets the node's new seq
 *   in-record, client    sent on that recorded client's own connection
 *   out-record, answer   waited for (by seq answered, by client and id) and
 *                        compared under trace_rules.c
 *   out-record, request  the node's next request of that kind, compared; the
 *                        recorded answer to it follows as an in-record
 *   a new link           the partner's death and restart (replay_failover.h):
 *                        the link closed after the partner's last record,
 *                        the node's takeover waited for, a new link dialled
 *                        with the partner's recorded Hello
 *
 * Everything runs on one thread with poll(2): what the node sends is read as
 * it comes and queued until the trace asks for it. */
#define _GNU_SOURCE /* open_memstream */
#include "trace_replay.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <json-c/json.h>

#include "client.pb-c.h"
#include "clock.h"
#include "codec.h"
#include "config.h"
#include "replay_failover.h"
#include "replay_nodes.h"
#include "replay_stream.h"
#include "trace_dump.h"
#include "trace_file.h"
#include "trace_message.h"
#include "trace_render.h"
#include "trace_replay_state.h"
#include "trace_rules.h"

/* ---- small things ---- */

static char *render(const ProtobufCMessage *m)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		return NULL;
	if (m)
		trace_render_text(f, m);
	fclose(f);
	return text;
}

void replay_diverge(struct replay *rp, const char *where, const char *field,
		    const ProtobufCMessage *expected, const ProtobufCMessage *actual,
		    const char *actual_text)
{
	if (rp->diverged)
		return;
	rp->diverged = true;
	snprintf(rp->where, sizeof(rp->where), "%s", where);
	snprintf(rp->field, sizeof(rp->field), "%s", field);
	rp->expected = render(expected);
	rp->actual = actual ? render(actual) : strdup(actual_text);
}

void replay_where_of(char *buf, size_t len, const struct rec *r, size_t inner, bool batch)
{
	if (batch)
		snprintf(buf, len, "%" PRIu64 ".%zu", r->number, inner + 1);
	else
		snprintf(buf, len, "%" PRIu64, r->number);
}

static int bad_trace(struct replay *rp, uint64_t record, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int bad_trace(struct replay *rp, uint64_t record, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "ftvmctl: %s: record %" PRIu64 ": ", rp->o->path, record);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return -EBADMSG;
}

/* ---- reading the trace ---- */

static int header_u64(struct replay *rp, const char *key, uint64_t *ret, bool required)
{
	const char *v = trace_reader_header_get(rp->reader, key);
	char *end;

	if (!v) {
		if (required)
			return bad_trace(rp, 0, "the header lacks %s, which a replay needs", key);
		return 0;
	}
	errno = 0;
	*ret = strtoull(v, &end, 10);
	if (errno || end == v || *end)
		return bad_trace(rp, 0, "header %s=%s is not a number", key, v);
	return 0;
}

static int read_header(struct replay *rp)
{
	uint64_t protocol = 0, page = 0, hb = 100, dead = 500, rto = 5000;
	const char *node = trace_reader_header_get(rp->reader, "node");
	const char *partner = trace_reader_header_get(rp->reader, "partner");

	if (header_u64(rp, "protocol", &protocol, true) < 0 ||
	    header_u64(rp, "page_size", &page, true) < 0 ||
	    header_u64(rp, "memory_size", &rp->memory_size, true) < 0 ||
	    header_u64(rp, "store_size", &rp->store_size, false) < 0 ||
	    header_u64(rp, "heartbeat_ms", &hb, false) < 0 ||
	    header_u64(rp, "dead_after_ms", &dead, false) < 0 ||
	    header_u64(rp, "request_timeout_ms", &rto, false) < 0)
		return -EBADMSG;
	if (protocol != FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT)
		return bad_trace(rp, 0, "protocol version %" PRIu64 ", this build speaks %d",
				 protocol,
				 FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
	if (!node || !node[0] || strlen(node) >= sizeof(rp->node_id))
		return bad_trace(rp, 0, "the header names no node");
	snprintf(rp->node_id, sizeof(rp->node_id), "%s", node);
	if (partner)
		snprintf(rp->partner_id, sizeof(rp->partner_id), "%s", partner);
	if (page == 0 || page > UINT32_MAX || hb == 0 || hb > UINT32_MAX || dead == 0 ||
	    dead > UINT32_MAX || rto == 0 || rto > UINT32_MAX)
		return bad_trace(rp, 0, "page size or failover timers out of range");
	rp->page_size = (uint32_t)page;
	rp->heartbeat_ms = (uint32_t)hb;
	rp->dead_after_ms = (uint32_t)dead;
	rp->request_timeout_ms = (uint32_t)rto;
	return 0;
}

static int add_rec(struct replay *rp, const struct trace_record *tr)
{
	struct rec *r, *grown;
	char err[300];
	unsigned long long client, pid;

	if (rp->n_recs % 256 == 0) {
		grown = realloc(rp->recs, (rp->n_recs + 256) * sizeof(*grown));
		if (!grown)
			return bad_trace(rp, tr->number, "out of memory");
		rp->recs = grown;
	}
	r = &rp->recs[rp->n_recs];
	*r = (struct rec){ .number = tr->number,
			   .channel = tr->channel,
			   .direction = tr->direction };
	if (trace_message_decode(tr, &r->msg, err, sizeof(err)) < 0)
		return bad_trace(rp, tr->number, "%s", err);
	rp->n_recs++;
	if (tr->channel == TRACE_CHANNEL_CLIENT) {
		if (sscanf(tr->peer, "client %llu pid %llu", &client, &pid) != 2)
			return bad_trace(rp, tr->number, "peer '%s' is not 'client N pid P'",
					 tr->peer);
		r->client = client;
		return 0;
	}
	rp->partner_mode = true;
	if (!rp->partner_id[0] && tr->direction == TRACE_IN)
		snprintf(rp->partner_id, sizeof(rp->partner_id), "%s",
			 ((Envelope *)r->msg)->sender);
	if (((Envelope *)r->msg)->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH) {
		Ftvm__Partner__Batch *b = ((Envelope *)r->msg)->batch;

		r->inner = calloc(b->n_envelopes ? b->n_envelopes : 1, sizeof(*r->inner));
		if (!r->inner)
			return bad_trace(rp, tr->number, "out of memory");
		for (; r->n_inner < b->n_envelopes; r->n_inner++) {
			ProtobufCMessage *m;

			if (trace_message_decode_envelope(b->envelopes[r->n_inner].data,
							  b->envelopes[r->n_inner].len, &m, err,
							  sizeof(err)) < 0)
				return bad_trace(rp, tr->number,
						 "envelope %zu of its batch does not decode: %s",
						 r->n_inner + 1, err);
			r->inner[r->n_inner] = (Envelope *)m;
		}
	}
	return 0;
}

/* A message of a link's opening: the handshake (AuthChallenge, AuthProof)
 * and the Hello. */
static bool opens_link(const struct rec *r)
{
	return r->channel == TRACE_CHANNEL_PARTNER &&
	       (replay_is_auth((Envelope *)r->msg) ||
		((Envelope *)r->msg)->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO);
}

/* A link's opening after other partner messages is a new link: the partner
 * went away after its last record before it (TRACE.md, "Failover and
 * resync"). */
static void mark_new_links(struct replay *rp)
{
	struct rec *last = NULL;

	for (size_t i = 0; i < rp->n_recs; i++) {
		struct rec *r = &rp->recs[i];

		if (r->channel != TRACE_CHANNEL_PARTNER)
			continue;
		if (opens_link(r) && last && !opens_link(last)) {
			last->partner_gone = true;
			r->new_link = true;
		}
		last = r;
	}
}

static int load(struct replay *rp)
{
	struct trace_record tr;
	char err[512];
	int rc;

	if (trace_reader_open(rp->o->path, &rp->reader, err, sizeof(err)) < 0) {
		fprintf(stderr, "ftvmctl: %s\n", err);
		return -EBADMSG;
	}
	if (read_header(rp) < 0)
		return -EBADMSG;
	while ((rc = trace_reader_next(rp->reader, &tr, err, sizeof(err))) == 1)
		if (add_rec(rp, &tr) < 0)
			return -EBADMSG;
	if (rc < 0) {
		fprintf(stderr, "ftvmctl: %s\n", err);
		return -EBADMSG;
	}
	trace_warn_torn(rp->reader, rp->n_recs ? rp->recs[rp->n_recs - 1].number + 1 : 1);
	mark_new_links(rp);
	if (!rp->partner_id[0])
		return bad_trace(rp, 0,
				 "the trace never names the partner (recorded before it "
				 "linked, without partner records): nothing to build a pair "
				 "from");
	return 0;
}

/* ---- the fresh node ---- */

bool replay_is_auth(const Envelope *env)
{
	return env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE ||
	       env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF;
}

/* The fresh node has no key (it listens on loopback): the handshake is one
 * AuthChallenge each way, and the node's Hello follows ours. */
static void send_challenge(struct replay *rp)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__AuthChallenge ch = FTVM__PARTNER__AUTH_CHALLENGE__INIT;

	ch.node_id = rp->partner_id;
	ch.method = FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_NONE;
	env.version = FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	env.sender = rp->partner_id;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE;
	env.auth_challenge = &ch;
	replay_send_partner(rp, &env);
}

/* The replayer is the partner: it dials the node. */
int replay_dial_node(struct replay *rp)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				  .sin_port = htons((uint16_t)rp->env.listen_port) };
	int one = 1, r;

	rp->node_hello = false;
	rp->next_heartbeat_ms = UINT64_MAX; /* none before our Hello */
	rp->partner.len = 0;
	rp->partner.fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (rp->partner.fd < 0 || connect(rp->partner.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		fprintf(stderr,
			"ftvmctl: trace replay: cannot reach node %s's partner port %d: %s\n",
			rp->node_id, rp->env.listen_port, strerror(-r));
		return r;
	}
	setsockopt(rp->partner.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	send_challenge(rp);
	return 0;
}

static int start(struct replay *rp)
{
	struct replay_nodes_config c = {
		.reader = rp->reader,
		.ids = { rp->node_id, rp->partner_id },
		.n = rp->partner_mode ? 1 : 2,
		.page_size = rp->page_size,
		.heartbeat_ms = rp->heartbeat_ms,
		.dead_after_ms = rp->dead_after_ms,
		.request_timeout_ms = rp->request_timeout_ms,
		.memory_size = rp->memory_size,
		.store_size = rp->store_size,
		.ftvmd = rp->o->ftvmd,
	};
	int r = replay_nodes_start(&rp->env, &c);

	if (r < 0 || !rp->partner_mode)
		return r;
	return replay_dial_node(rp);
}

/* ---- the partner side ---- */

void replay_send_partner(struct replay *rp, Envelope *env)
{
	if (replay_send_frame(rp->partner.fd, &env->base) < 0)
		replay_diverge(rp, "-", "the node closed the partner connection", &env->base, NULL,
			       "nothing: the connection is gone");
}

static void send_own(struct replay *rp, Envelope *env)
{
	env->version = FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	env->sender = rp->partner_id;
	env->epoch = rp->partner_epoch;
	replay_send_partner(rp, env);
}

void replay_send_heartbeat(struct replay *rp)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__Heartbeat hb = FTVM__PARTNER__HEARTBEAT__INIT;

	hb.sent_us = clock_now_us();
	/* Behind the node: a partner restarted and not resynced yet. */
	hb.state = rp->partner_epoch < rp->node_epoch ? STATE(STARTING) : STATE(ACTIVE);
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT;
	env.heartbeat = &hb;
	send_own(rp, &env);
	rp->next_heartbeat_ms = clock_now_ms() + rp->heartbeat_ms;
}

static void send_hello(struct replay *rp)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__Hello h = FTVM__PARTNER__HELLO__INIT;

	h.node_id = rp->partner_id;
	h.version = FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
	h.epoch = rp->node_epoch;
	h.page_size = rp->page_size;
	h.frame_count = rp->memory_size / rp->page_size;
	h.initiator = true;
	h.state = STATE(STARTING);
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO;
	env.hello = &h;
	send_own(rp, &env);
}

/* Time-driven messages: never played, never compared (TRACE.md). The
 * partner's Destaged is played like any request: it comes where it came.
 * RegionUpdate goes with them: it tells of the sender's memory registrations,
 * which belong to the recorded process; and ConnectionRetired, of the
 * recorded process's connections. */
static bool time_driven(const Envelope *env, bool from_node)
{
	return env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT ||
	       env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO || replay_is_auth(env) ||
	       env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_REGION_UPDATE ||
	       env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_CONNECTION_RETIRED ||
	       (from_node && env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_DESTAGED);
}

static int queue_from_node(struct replay *rp, Envelope *env)
{
	Envelope **q;

	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO) {
		rp->node_epoch = env->hello->epoch;
		rp->node_hello = true;
	}
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_DESTAGED) {
		CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
		Envelope ans = FTVM__PARTNER__ENVELOPE__INIT;

		ans.answers = env->seq;
		ans.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;
		ans.command_complete = &cc;
		send_own(rp, &ans);
	}
	if (time_driven(env, true)) {
		codec_envelope_free(env);
		return 0;
	}
	q = realloc(rp->from_node, (rp->n_from_node + 1) * sizeof(*q));
	if (!q) {
		codec_envelope_free(env);
		return -ENOMEM;
	}
	rp->from_node = q;
	rp->from_node[rp->n_from_node++] = env;
	return 0;
}

static int partner_frame(struct replay *rp, const uint8_t *payload, size_t len)
{
	char err[200];
	Envelope *env;
	int r = codec_envelope_decode(payload, len, &env, err, sizeof(err));

	if (r < 0) {
		replay_diverge(rp, "-", "the node sent an envelope that does not decode", NULL,
			       NULL, err);
		return r;
	}
	if (env->message_case != FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH)
		return queue_from_node(rp, env);
	for (size_t i = 0; r == 0 && i < env->batch->n_envelopes; i++) {
		Envelope *inner;

		r = codec_envelope_decode(env->batch->envelopes[i].data,
					  env->batch->envelopes[i].len, &inner, err, sizeof(err));
		if (r == 0)
			r = queue_from_node(rp, inner);
		else
			replay_diverge(rp, "-", "the node sent a batch that does not decode", NULL,
				       NULL, err);
	}
	codec_envelope_free(env);
	return r;
}

/* What a client learns from a reply as libftvm would: the pool it maps, the
 * offsets of the pointers it is granted. */
static void client_learn(struct client *c, const ClientReply *reply)
{
	if (reply->reply_case == FTVM__CLIENT__CLIENT_REPLY__REPLY_MAP && c->s.passed_fd >= 0) {
		void *p = mmap(NULL, reply->map->size, PROT_READ | PROT_WRITE, MAP_SHARED,
			       c->s.passed_fd, 0);

		if (p != MAP_FAILED) {
			if (c->pool)
				munmap(c->pool, c->pool_size);
			c->pool = p;
			c->pool_size = reply->map->size;
		}
		close(c->s.passed_fd);
		c->s.passed_fd = -1;
	}
	if (reply->reply_case != FTVM__CLIENT__CLIENT_REPLY__REPLY_POINTER)
		return;
	for (size_t i = 0; i < c->n_pointers; i++)
		if (!c->pointers[i].granted && c->pointers[i].id == reply->id) {
			c->pointers[i].granted = true;
			c->pointers[i].offset = reply->pointer->offset;
			c->pointers[i].length = reply->pointer->length;
		}
}

static int client_frame(struct replay *rp, struct client *c, const uint8_t *payload, size_t len)
{
	ClientReply *reply = ftvm__client__client_reply__unpack(NULL, len, payload), **q;

	if (!reply) {
		replay_diverge(rp, "-", "the node sent a reply that does not parse", NULL, NULL,
			       "a ClientReply that does not parse");
		return -EBADMSG;
	}
	client_learn(c, reply);
	q = realloc(c->replies, (c->n_replies + 1) * sizeof(*q));
	if (!q) {
		ftvm__client__client_reply__free_unpacked(reply, NULL);
		return -ENOMEM;
	}
	c->replies = q;
	c->replies[c->n_replies++] = reply;
	return 0;
}

/* Reads what came until deadline_ms (or one round when it has passed),
 * sending our heartbeats meanwhile. */
int replay_pump(struct replay *rp, uint64_t deadline_ms)
{
	struct pollfd pfd[CLIENTS_MAX + 1];
	size_t n = 0;
	uint64_t now = clock_now_ms(), until = deadline_ms;
	int r;

	if (rp->partner.fd >= 0) {
		if (now >= rp->next_heartbeat_ms)
			replay_send_heartbeat(rp);
		if (rp->next_heartbeat_ms < until)
			until = rp->next_heartbeat_ms;
		pfd[n++] = (struct pollfd){ .fd = rp->partner.fd, .events = POLLIN };
	}
	for (size_t i = 0; i < rp->n_clients; i++)
		pfd[n++] = (struct pollfd){ .fd = rp->clients[i].s.fd, .events = POLLIN };
	r = poll(pfd, n, until > now ? (int)(until - now) : 0);
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	for (size_t i = 0; i < n; i++) {
		struct replay_stream *s = i == 0 && rp->partner.fd >= 0
						  ? &rp->partner
						  : &rp->clients[i - (rp->partner.fd >= 0)].s;
		const char *why = NULL;
		uint8_t *payload;
		size_t len;

		if (!(pfd[i].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		r = replay_stream_fill(s);
		while (r == 0 && (r = replay_stream_next(s, &payload, &len, &why)) == 1) {
			r = s == &rp->partner
				    ? partner_frame(rp, payload, len)
				    : client_frame(rp, &rp->clients[i - (rp->partner.fd >= 0)],
						   payload, len);
			free(payload);
		}
		if (r < 0) {
			replay_diverge(rp, "-",
				       s == &rp->partner ? "the node dropped the partner connection"
							 : "the node dropped a client connection",
				       NULL, NULL, why ? why : strerror(-r));
			return r;
		}
	}
	return 0;
}

/* The first envelope from the node that answers our seq, or is a request of
 * kind, taken off the queue; NULL when none came before the deadline. */
static Envelope *wait_from_node(struct replay *rp, const Envelope *want)
{
	uint64_t deadline = clock_now_ms() + rp->request_timeout_ms + ANSWER_MARGIN_MS;
	bool answer = want->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;

	do {
		for (size_t i = 0; i < rp->n_from_node; i++) {
			Envelope *e = rp->from_node[i];

			if (answer ? e->message_case == want->message_case &&
					     e->answers == want->answers
				   : e->message_case == want->message_case && e->seq) {
				memmove(&rp->from_node[i], &rp->from_node[i + 1],
					(rp->n_from_node - i - 1) * sizeof(*rp->from_node));
				rp->n_from_node--;
				return e;
			}
		}
	} while (!rp->diverged && replay_pump(rp, deadline) == 0 && clock_now_ms() < deadline);
	return NULL;
}

static bool skipped(const struct replay *rp, uint64_t seq)
{
	for (size_t i = 0; i < rp->n_skipped; i++)
		if (rp->skipped_seqs[i] == seq)
			return true;
	return false;
}

/* Answer i of the run env answers (replica/SESSION.md, "Answers in runs"),
 * alone, as the node reads it (codec_run_answer()). plain is room for a
 * plain success. */
static Envelope run_member(const Envelope *env, uint32_t i, CommandComplete *plain)
{
	Envelope one = *env;

	one.answers = env->answers - codec_answers_in(env) + 1 + i;
	one.answers_count = 0;
	one.command_complete = (CommandComplete *)codec_run_answer(env, one.answers, plain);
	return one;
}

/* any_applied_lsn: want is an answer inside a recorded run but its last, a
 * plain success that says no applied_lsn; the node, answering us alone,
 * says one. */
static void expect_one(struct replay *rp, const char *where, Envelope *want, bool any_applied_lsn)
{
	char field[512], waited[96];
	Envelope *got;

	if (want->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_DESTAGED) {
		uint64_t *s = realloc(rp->skipped_seqs, (rp->n_skipped + 1) * sizeof(*s));

		if (s) {
			rp->skipped_seqs = s;
			rp->skipped_seqs[rp->n_skipped++] = want->seq;
		}
	}
	if (time_driven(want, true))
		return;
	got = wait_from_node(rp, want);
	if (!got) {
		snprintf(waited, sizeof(waited), "nothing within %u ms",
			 rp->request_timeout_ms + ANSWER_MARGIN_MS);
		replay_diverge(rp, where, "no such message from the node", &want->base, NULL,
			       waited);
		return;
	}
	if (any_applied_lsn && got->message_case == want->message_case)
		want->command_complete->applied_lsn = got->command_complete->applied_lsn;
	if (trace_compare(rp->maps, &want->base, &got->base, field, sizeof(field)) < 0)
		replay_diverge(rp, where, field, &want->base, &got->base, NULL);
	else
		rp->matched++;
	codec_envelope_free(got);
}

/* The node answers us alone (our Hello does not take runs): a recorded run
 * is waited for answer by answer. */
static void expect_partner(struct replay *rp, const char *where, Envelope *want)
{
	uint32_t count = codec_answers_in(want);

	if (count == 1) {
		expect_one(rp, where, want, false);
		return;
	}
	for (uint32_t i = 0; i < count && !rp->diverged; i++) {
		CommandComplete cc;
		Envelope one = run_member(want, i, &cc);

		expect_one(rp, where, &one, i + 1 < count);
	}
}

/* The epoch an envelope of the partner's carries in this run: the recorded
 * one mapped (trace_rules.c), else, in a trace without the node's Hello, the
 * one the partner is at. A partner that reaches the node's epoch (its resync
 * ended) is active again, and its slot says so. */
static uint64_t partner_epoch_now(struct replay *rp, uint64_t recorded)
{
	uint64_t now = trace_maps_epoch(rp->maps, recorded);

	if (now > rp->partner_epoch) {
		rp->partner_epoch = now;
		if (rp->slot && now >= rp->node_epoch)
			replay_slot_set(rp->slot, STATE(ACTIVE), now);
	}
	return now ? now : rp->partner_epoch;
}

/* An allocation's extent in this run's store. The node checks it lies in
 * its home's partition; which partition a node has depends on which made
 * the store (TRACE.md). Here the node under test made it and has the first:
 * the partner has the second. The recorded extent keeps its place in its
 * partition. */
static void place_extent(const struct replay *rp, Ftvm__Partner__AllocateMemory *am)
{
	uint64_t size = rp->store_size ? rp->store_size : 4 * rp->memory_size + STORE_HEADER_SPACE;
	uint64_t half = (size - STORE_HEADER_SPACE) / 2 / rp->page_size * rp->page_size;
	uint64_t second = STORE_HEADER_SPACE + half, in_partition;

	if (!am || am->store_offset < STORE_HEADER_SPACE)
		return; /* not an extent: the node says so */
	in_partition =
		am->store_offset - (am->store_offset >= second ? second : STORE_HEADER_SPACE);
	am->store_offset =
		(strcmp(am->home, rp->node_id) == 0 ? STORE_HEADER_SPACE : second) + in_partition;
}

/* An envelope of the partner's, about to be sent: mapped values put in, an
 * answer to the node's request given the node's new seq. false: leave it
 * out (it answers a request that is not replayed). */
static bool prepare(struct replay *rp, const char *where, Envelope *env)
{
	uint64_t epoch = partner_epoch_now(rp, env->epoch);

	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE) {
		uint64_t now;

		if (skipped(rp, env->answers))
			return false;
		now = trace_maps_node_seq(rp->maps, env->answers);
		if (!now) {
			char why[160];

			snprintf(why, sizeof(why),
				 "it answers the node's request seq %" PRIu64
				 ", which the node did not make in this run",
				 env->answers);
			replay_diverge(rp, where, why, &env->base, NULL, "no such request");
			return false;
		}
		env->answers = now;
	}
	trace_rewrite(rp->maps, &env->base);
	env->epoch = epoch;
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY)
		place_extent(rp, env->allocate_memory);
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_ALLOCATION)
		place_extent(rp, env->resync_allocation->allocation);
	return true;
}

static void play_partner_in(struct replay *rp, struct rec *r)
{
	Envelope *env = (Envelope *)r->msg, wrap = FTVM__PARTNER__ENVELOPE__INIT;
	bool batched = env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH;
	Envelope *const *inner = batched ? r->inner : &env;
	size_t n_inner = batched ? r->n_inner : 1, n_items = 0, kept = 0;
	Ftvm__Partner__Batch batch = FTVM__PARTNER__BATCH__INIT;
	ProtobufCBinaryData *items;
	char where[40];

	replay_where_of(where, sizeof(where), r, 0, false);
	if (time_driven(env, false))
		return;
	if (!batched && codec_answers_in(env) == 1) {
		if (prepare(rp, where, env))
			replay_send_partner(rp, env);
		return;
	}
	/* A batch goes as a batch (its envelopes apply together), repacked
	 * into one of our own: the recorded one's bytes are in its arena. A
	 * run of answers goes answer by answer, each given the node's seq (the
	 * run's seqs may map apart), in a batch. */
	for (size_t i = 0; i < n_inner; i++)
		n_items += codec_answers_in(inner[i]);
	items = calloc(n_items, sizeof(*items));
	if (!items)
		return;
	for (size_t i = 0; i < n_inner; i++) {
		uint32_t count = codec_answers_in(inner[i]);

		if (batched)
			replay_where_of(where, sizeof(where), r, i, true);
		for (uint32_t j = 0; j < count; j++) {
			CommandComplete cc;
			Envelope one, *play = inner[i];

			if (count > 1) {
				one = run_member(inner[i], j, &cc);
				play = &one;
			}
			if (!prepare(rp, where, play))
				continue;
			if (codec_payload_pack(&play->base, &items[kept].data, &items[kept].len) <
			    0)
				goto out;
			kept++;
		}
	}
	batch.n_envelopes = kept;
	batch.envelopes = items;
	wrap.version = env->version;
	wrap.sender = env->sender;
	wrap.epoch = partner_epoch_now(rp, env->epoch);
	wrap.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH;
	wrap.batch = &batch;
	if (kept && !rp->diverged)
		replay_send_partner(rp, &wrap);
out:
	for (size_t i = 0; i < kept; i++)
		free(items[i].data);
	free(items);
}

static void play_partner_out(struct replay *rp, struct rec *r)
{
	Envelope *env = (Envelope *)r->msg;
	char where[40], why[300];

	/* The node's Hello is not compared, but says which epoch of this run
	 * the recorded one is. */
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO) {
		replay_where_of(where, sizeof(where), r, 0, false);
		if (trace_maps_bind_epoch(rp->maps, env->hello->epoch, rp->node_epoch, why,
					  sizeof(why)) < 0)
			replay_diverge(rp, where, why, &env->base, NULL, "another epoch");
		return;
	}
	if (env->message_case != FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH) {
		replay_where_of(where, sizeof(where), r, 0, false);
		expect_partner(rp, where, env);
		return;
	}
	/* The node may batch differently this time: its envelopes one by one. */
	for (size_t i = 0; i < r->n_inner && !rp->diverged; i++) {
		replay_where_of(where, sizeof(where), r, i, true);
		expect_partner(rp, where, r->inner[i]);
	}
}

/* ---- the clients ---- */

static struct client *client_for(struct replay *rp, uint64_t recorded)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct client *c;

	for (size_t i = 0; i < rp->n_clients; i++)
		if (rp->clients[i].recorded == recorded)
			return &rp->clients[i];
	if (rp->n_clients == CLIENTS_MAX)
		return NULL;
	c = &rp->clients[rp->n_clients];
	*c = (struct client){ .recorded = recorded, .s = { .passed_fd = -1 } };
	memcpy(sa.sun_path, rp->env.node[0].socket, strlen(rp->env.node[0].socket) + 1);
	c->s.fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->s.fd < 0 || connect(c->s.fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		if (c->s.fd >= 0)
			close(c->s.fd);
		return NULL;
	}
	rp->n_clients++;
	return c;
}

/* The block the recorded node sent its partner for this page after
 * record i: what the client had written through its pointer. */
static const ProtobufCBinaryData *written_block(const struct replay *rp, size_t i, const char *guid,
						uint64_t page)
{
	for (; i < rp->n_recs; i++) {
		const struct rec *r = &rp->recs[i];
		Envelope *const *envs = r->inner ? r->inner : (Envelope *const *)&r->msg;
		size_t n = r->inner ? r->n_inner : 1;

		if (r->channel != TRACE_CHANNEL_PARTNER || r->direction != TRACE_OUT)
			continue;
		for (size_t j = 0; j < n; j++)
			if (envs[j]->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE &&
			    strcmp(envs[j]->write_page->guid, guid) == 0 &&
			    envs[j]->write_page->page == page)
				return &envs[j]->write_page->data;
	}
	return NULL;
}

/* Pointers: a client writes into the node's frames without a message. The
 * replayer does what the client did, from the block the recorded node then
 * mirrored (a trace without the partner channel does not have it). */
static void client_pointer_call(struct replay *rp, struct client *c, size_t i,
				const ClientRequest *req, const char *recorded_guid)
{
	if (req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST_GET_POINTER) {
		struct pointer *p = realloc(c->pointers, (c->n_pointers + 1) * sizeof(*p));

		if (!p)
			return;
		c->pointers = p;
		p = &c->pointers[c->n_pointers++];
		*p = (struct pointer){ .id = req->id, .page = req->get_pointer->page };
		snprintf(p->guid, sizeof(p->guid), "%s", req->get_pointer->guid);
		return;
	}
	if (req->request_case != FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER ||
	    !req->release_pointer->modified || !c->pool)
		return;
	for (size_t k = c->n_pointers; k-- > 0;) {
		struct pointer *p = &c->pointers[k];
		const ProtobufCBinaryData *block;

		if (!p->granted || strcmp(p->guid, req->release_pointer->guid) != 0 ||
		    p->page != req->release_pointer->page)
			continue;
		block = written_block(rp, i, recorded_guid, p->page);
		if (block && block->len == p->length && p->offset + p->length <= c->pool_size)
			memcpy(c->pool + p->offset, block->data, block->len);
		return;
	}
}

static void play_client_in(struct replay *rp, size_t i)
{
	struct rec *r = &rp->recs[i];
	struct client *c = client_for(rp, r->client);
	const ClientRequest *req = (const ClientRequest *)r->msg;
	char where[40], recorded_guid[64] = "";

	replay_where_of(where, sizeof(where), r, 0, false);
	if (!c) {
		replay_diverge(rp, where, "cannot connect a client to the node", r->msg, NULL,
			       strerror(errno));
		return;
	}
	if (req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER)
		snprintf(recorded_guid, sizeof(recorded_guid), "%s", req->release_pointer->guid);
	trace_rewrite(rp->maps, r->msg);
	client_pointer_call(rp, c, i, req, recorded_guid);
	if (replay_send_frame(c->s.fd, r->msg) < 0)
		replay_diverge(rp, where, "cannot send the request", r->msg, NULL, strerror(errno));
}

static void play_client_out(struct replay *rp, struct rec *r)
{
	const ClientReply *want = (const ClientReply *)r->msg;
	uint64_t deadline = clock_now_ms() + rp->request_timeout_ms + ANSWER_MARGIN_MS;
	struct client *c = client_for(rp, r->client);
	char where[40], field[512], waited[96];

	replay_where_of(where, sizeof(where), r, 0, false);
	if (!c) {
		replay_diverge(rp, where, "cannot connect a client to the node", r->msg, NULL,
			       strerror(errno));
		return;
	}
	do {
		for (size_t i = 0; i < c->n_replies; i++) {
			ClientReply *got = c->replies[i];

			if (got->id != want->id)
				continue;
			memmove(&c->replies[i], &c->replies[i + 1],
				(c->n_replies - i - 1) * sizeof(*c->replies));
			c->n_replies--;
			if (trace_compare(rp->maps, r->msg, &got->base, field, sizeof(field)) < 0)
				replay_diverge(rp, where, field, r->msg, &got->base, NULL);
			else
				rp->matched++;
			ftvm__client__client_reply__free_unpacked(got, NULL);
			return;
		}
	} while (!rp->diverged && replay_pump(rp, deadline) == 0 && clock_now_ms() < deadline);
	snprintf(waited, sizeof(waited), "nothing within %u ms",
		 rp->request_timeout_ms + ANSWER_MARGIN_MS);
	replay_diverge(rp, where, "no reply from the node", r->msg, NULL, waited);
}

/* ---- the run ---- */

static void play(struct replay *rp)
{
	uint64_t deadline = clock_now_ms() + LINK_TIMEOUT_MS;

	if (rp->partner_mode) {
		/* The node speaks first on a new connection: its Hello gives the
		 * epoch ours must carry. */
		while (!rp->diverged && !rp->node_hello && clock_now_ms() < deadline)
			replay_pump(rp, clock_now_ms() + 20);
		rp->partner_epoch = rp->node_epoch;
		if (replay_slot_start(rp, "0", STATE(STARTING)) < 0)
			return;
		send_hello(rp);
		replay_send_heartbeat(rp);
		/* Up: the node said Hello and is active with us. */
		while (!rp->diverged && !replay_node_state_is(&rp->env.node[0], "active")) {
			if (clock_now_ms() > deadline) {
				replay_diverge(rp, "0",
					       "the fresh node never linked with the replayer",
					       NULL, NULL, "not active");
				return;
			}
			replay_pump(rp, clock_now_ms() + 20);
		}
		replay_slot_set(rp->slot, STATE(ACTIVE), rp->node_epoch);
	}
	for (size_t i = 0; i < rp->n_recs && !rp->diverged; i++) {
		struct rec *r = &rp->recs[i];

		if (r->new_link)
			replay_partner_restarts(rp, i);
		if (rp->diverged)
			break;
		if (r->channel == TRACE_CHANNEL_PARTNER && r->direction == TRACE_IN)
			play_partner_in(rp, r);
		else if (r->channel == TRACE_CHANNEL_PARTNER)
			play_partner_out(rp, r);
		else if (r->direction == TRACE_IN)
			play_client_in(rp, i);
		else
			play_client_out(rp, r);
		if (r->partner_gone && !rp->diverged)
			replay_partner_dies(rp, r);
	}
}

static int report(const struct replay *rp)
{
	json_object *o, *d = NULL;

	if (rp->o->json) {
		o = json_object_new_object();
		json_object_object_add(o, "records", json_object_new_uint64(rp->n_recs));
		json_object_object_add(o, "matched", json_object_new_uint64(rp->matched));
		if (rp->diverged) {
			d = json_object_new_object();
			json_object_object_add(d, "record", json_object_new_string(rp->where));
			json_object_object_add(d, "field", json_object_new_string(rp->field));
			json_object_object_add(
				d, "expected",
				json_object_new_string(rp->expected ? rp->expected : ""));
			json_object_object_add(
				d, "actual", json_object_new_string(rp->actual ? rp->actual : ""));
		}
		json_object_object_add(o, "first_divergence", d);
		puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN |
							       JSON_C_TO_STRING_NOSLASHESCAPE));
		json_object_put(o);
	} else if (!rp->diverged) {
		printf("%s: %zu records replayed against a fresh %s, %" PRIu64 " answers matched\n",
		       rp->o->path, rp->n_recs, rp->partner_mode ? "node" : "pair", rp->matched);
	}
	if (rp->diverged)
		fprintf(stderr,
			"ftvmctl: %s: record %s: divergence after %" PRIu64
			" matched answers: %s\n  expected: %s\n  actual:   %s\n",
			rp->o->path, rp->where, rp->matched, rp->field,
			rp->expected ? rp->expected : "", rp->actual ? rp->actual : "");
	return rp->diverged ? 1 : 0;
}

static void replay_free(struct replay *rp)
{
	for (size_t i = 0; i < rp->n_recs; i++) {
		for (size_t j = 0; j < rp->recs[i].n_inner; j++)
			codec_envelope_free(rp->recs[i].inner[j]);
		free(rp->recs[i].inner);
		trace_message_free(rp->recs[i].msg);
	}
	free(rp->recs);
	for (size_t i = 0; i < rp->n_from_node; i++)
		codec_envelope_free(rp->from_node[i]);
	free(rp->from_node);
	free(rp->skipped_seqs);
	for (size_t i = 0; i < rp->n_clients; i++) {
		close(rp->clients[i].s.fd);
		free(rp->clients[i].s.buf);
		for (size_t j = 0; j < rp->clients[i].n_replies; j++)
			ftvm__client__client_reply__free_unpacked(rp->clients[i].replies[j], NULL);
		free(rp->clients[i].replies);
		free(rp->clients[i].pointers);
		if (rp->clients[i].pool)
			munmap(rp->clients[i].pool, rp->clients[i].pool_size);
		if (rp->clients[i].s.passed_fd >= 0)
			close(rp->clients[i].s.passed_fd);
	}
	if (rp->partner.fd >= 0)
		close(rp->partner.fd);
	free(rp->partner.buf);
	trace_maps_free(rp->maps);
	trace_reader_free(rp->reader);
	free(rp->expected);
	free(rp->actual);
}

int trace_replay_run(const struct replay_options *o)
{
	struct replay rp = { .o = o, .partner = { .fd = -1 }, .env = { .partner_port_fd = -1 } };
	int rc;

	if (load(&rp) < 0 || trace_maps_new(&rp.maps) < 0) {
		replay_free(&rp);
		return 1;
	}
	if (start(&rp) < 0) {
		replay_nodes_stop(&rp.env, o->keep);
		replay_free(&rp);
		return 3;
	}
	play(&rp);
	replay_slot_kill(rp.slot);
	rc = report(&rp);
	replay_nodes_stop(&rp.env, o->keep);
	replay_free(&rp);
	return rc;
}
