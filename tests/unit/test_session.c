/* The partner session over real TCP sockets on loopback: two sessions in one
 * process, plus raw sockets that play a hung or garbage-speaking partner. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "check.h"
#include "clock.h"
#include "crc32c.h"
#include "frame.h"
#include "free_port.h"
#include "log.h"
#include "session.h"

static struct event_base *base;

struct peer {
	const char *id;
	char listen[32];
	char partner[32];
	uint32_t page_size;
	struct repl_session *s;
	int link_ups, link_downs;
	char last_reason[256];
	int protocol_errors;
	char last_protocol_error[256];
	/* Requests answered by the test, not at once. */
	uint64_t held_seq[16];
	int n_held;
	bool hold_requests;
	size_t last_batch;	/* requests in the last delivery */
	void *pool;		/* offered for one-sided page data; NULL: none */
	const char *key;	/* the shared key (a string here); NULL: none */
	size_t max_backlog;	/* 0: the session's default */
	uint32_t dead_after_ms; /* 0: 150 */
	/* WritePages that came: their blocks' CRC-32C, in order. */
	uint32_t write_crcs[256];
	int n_writes;
	/* SpaceRequests that came: their bytes, in the order taken. */
	uint64_t space_bytes[32];
	int n_spaces;
};

/* A peer dials its partner's port before the partner listens: see
 * free_port.h for why the port comes from outside the ephemeral range. */
static uint16_t free_port(void)
{
	uint16_t port = 0;

	if (free_port_pick(&port) < 0) {
		fprintf(stderr, "no free port outside the ephemeral range\n");
		exit(1);
	}
	return port;
}

static void on_link(struct repl_session *s, bool up, const char *reason, void *arg)
{
	struct peer *p = arg;

	if (up)
		p->link_ups++;
	else
		p->link_downs++;
	snprintf(p->last_reason, sizeof(p->last_reason), "%s", reason);
}

/* A SpaceStatus answer saying free_bytes. */
struct space_answer {
	CommandComplete cc;
	Ftvm__Partner__SpaceStatus space;
};

static const CommandComplete *space_answer(struct space_answer *a, uint64_t free_bytes)
{
	ftvm__partner__command_complete__init(&a->cc);
	ftvm__partner__space_status__init(&a->space);
	a->space.free_bytes = free_bytes;
	a->cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE;
	a->cc.space = &a->space;
	return &a->cc;
}

static void answer(struct repl_session *s, uint64_t seq, uint64_t free_bytes)
{
	struct space_answer sa;
	struct repl_answer a = { seq, space_answer(&sa, free_bytes) };

	repl_session_answer(s, &a, 1);
}

/* Answers each SpaceRequest{bytes} with free_bytes = bytes * 2 (a request
 * for 0 bytes: a plain success, applied_lsn its seq), or holds it, and each
 * WritePage (noting its block's CRC-32C); the answers to a batch go back in
 * one call, as one batch. */
static void on_request(struct repl_session *s, Envelope *const *envs, size_t n, void *arg)
{
	struct peer *p = arg;
	struct space_answer *sa = calloc(n, sizeof(*sa));
	struct repl_answer *answers = calloc(n, sizeof(*answers));
	size_t n_answers = 0;

	p->last_batch = n;
	if (!sa || !answers)
		exit(99);
	for (size_t i = 0; i < n; i++) {
		const Ftvm__Partner__WritePage *wp =
			envs[i]->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE
				? envs[i]->write_page
				: NULL;

		if (wp && p->n_writes < 256)
			p->write_crcs[p->n_writes++] = crc32c(0, wp->data.data, wp->data.len);
		if (!wp && p->n_spaces < 32)
			p->space_bytes[p->n_spaces++] = envs[i]->space_request->bytes;
		if (p->hold_requests && p->n_held < 16)
			p->held_seq[p->n_held++] = envs[i]->seq;
		else if (!wp && envs[i]->space_request->bytes == 0) {
			ftvm__partner__command_complete__init(&sa[i].cc);
			sa[i].cc.applied_lsn = envs[i]->seq;
			answers[n_answers++] = (struct repl_answer){ envs[i]->seq, &sa[i].cc };
		} else
			answers[n_answers++] = (struct repl_answer){
				envs[i]->seq,
				space_answer(&sa[i], wp ? 0 : envs[i]->space_request->bytes * 2)
			};
	}
	if (n_answers)
		repl_session_answer(s, answers, n_answers);
	free(answers);
	free(sa);
}

static void on_protocol_error(struct repl_session *s, const char *peer, const char *reason,
			      void *arg)
{
	struct peer *p = arg;

	p->protocol_errors++;
	snprintf(p->last_protocol_error, sizeof(p->last_protocol_error), "%s", reason);
}

/* Each peer says where its page table stands: LSNs from its name. */
static void on_hello(struct repl_session *s, Ftvm__Partner__Hello *h, void *arg)
{
	struct peer *p = arg;

	h->applied_lsn = 1000u + (uint64_t)p->id[0];
	h->own_lsn = 2000u + (uint64_t)p->id[0];
}

static const struct repl_session_callbacks callbacks = {
	.link_changed = on_link,
	.request = on_request,
	.protocol_error = on_protocol_error,
	.hello = on_hello,
};

static void peer_init(struct peer *p, const char *id, uint16_t listen, uint16_t partner)
{
	memset(p, 0, sizeof(*p));
	p->id = id;
	p->page_size = 4096;
	snprintf(p->listen, sizeof(p->listen), "127.0.0.1:%u", listen);
	snprintf(p->partner, sizeof(p->partner), "127.0.0.1:%u", partner);
}

static int peer_start(struct peer *p)
{
	struct repl_session_config c = {
		.node_id = p->id,
		.listen = p->listen,
		.partner = p->partner,
		.transport = &repl_transport_tcp,
		.page_size = p->page_size,
		.frame_count = 1024,
		.epoch = 1,
		.heartbeat_ms = 20,
		.dead_after_ms = p->dead_after_ms ? p->dead_after_ms : 150,
		.max_payload = FRAME_MAX_PAYLOAD_DEFAULT,
		.pool_base = p->pool,
		.pool_block_frames = 64,
		.key = (const uint8_t *)p->key,
		.key_len = p->key ? strlen(p->key) : 0,
		.max_backlog = p->max_backlog,
	};
	int r = repl_session_new(base, &c, &callbacks, p, &p->s);

	return r < 0 ? r : repl_session_start(p->s);
}

static void peer_stop(struct peer *p)
{
	repl_session_free(p->s);
	p->s = NULL;
}

/* Runs the loop until cond holds or timeout_ms pass; returns cond. */
#define RUN_UNTIL(cond, timeout_ms)                                                        \
	({                                                                                 \
		uint64_t deadline_ = clock_now_ms() + (timeout_ms);                        \
		while (!(cond) && clock_now_ms() < deadline_)                              \
			event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK), usleep(200); \
		(cond);                                                                    \
	})

static bool link_up(struct peer *p)
{
	struct repl_session_stats st;

	repl_session_get_stats(p->s, &st);
	return st.link_up;
}

static uint64_t auth_failures(struct peer *p)
{
	struct repl_session_stats st;

	repl_session_get_stats(p->s, &st);
	return st.auth_failures;
}

static unsigned connections(struct peer *p)
{
	struct repl_session_stats st;

	repl_session_get_stats(p->s, &st);
	return st.connections;
}

struct result {
	bool done;
	int status;
	uint64_t free_bytes;
	uint64_t applied_lsn;
	int payload; /* the answer's payload_case */
	char reason[128];
};

static void on_done(const CommandComplete *cc, void *arg)
{
	struct result *r = arg;

	r->done = true;
	r->status = cc->status;
	r->applied_lsn = cc->applied_lsn;
	r->payload = cc->payload_case;
	if (cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE)
		r->free_bytes = cc->space->free_bytes;
	snprintf(r->reason, sizeof(r->reason), "%s", cc->reason ? cc->reason : "");
}

static int send_space_request(struct peer *p, uint64_t bytes, uint32_t timeout_ms,
			      struct result *res)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SpaceRequest req = FTVM__PARTNER__SPACE_REQUEST__INIT;

	memset(res, 0, sizeof(*res));
	req.bytes = bytes;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &req;
	return repl_session_request(p->s, &env, timeout_ms, on_done, res);
}

static void test_handshake_and_requests(void)
{
	uint16_t pa = free_port(), pb = free_port();
	struct peer a, b;
	struct result res[8];
	struct repl_session_stats st;

	peer_init(&a, "a", pa, pb);
	peer_init(&b, "b", pb, pa);
	CHECK(peer_start(&a) == 0, "start a");
	CHECK(peer_start(&b) == 0, "start b");
	CHECK(RUN_UNTIL(link_up(&a) && link_up(&b), 3000), "link up on both");
	/* Both dialled: they must settle on one connection, the same on both. */
	CHECK(RUN_UNTIL(connections(&a) == 1 && connections(&b) == 1, 2000),
	      "one connection each, got a=%u b=%u", connections(&a), connections(&b));
	repl_session_get_stats(a.s, &st);
	CHECK(strcmp(st.partner_id, "b") == 0, "a's partner is '%s'", st.partner_id);
	CHECK(st.partner_applied_lsn == 1000u + 'b' && st.partner_own_lsn == 2000u + 'b',
	      "b's Hello said applied %llu own %llu", (unsigned long long)st.partner_applied_lsn,
	      (unsigned long long)st.partner_own_lsn);

	/* Several in flight, answered in reverse order: each gets its own. */
	b.hold_requests = true;
	for (int i = 0; i < 8; i++)
		CHECK(send_space_request(&a, 100 + i, 2000, &res[i]) == 0, "request %d", i);
	CHECK(RUN_UNTIL(b.n_held == 8, 2000), "b got 8 requests, has %d", b.n_held);
	for (int i = 7; i >= 0; i--)
		answer(b.s, b.held_seq[i], 1000 + (uint64_t)i);
	CHECK(RUN_UNTIL(res[0].done && res[7].done, 2000), "answers arrived");
	for (int i = 0; i < 8; i++)
		CHECK(res[i].done && res[i].status == 0 && res[i].free_bytes == 1000 + (uint64_t)i,
		      "request %d: done %d status %d free %llu", i, res[i].done, res[i].status,
		      (unsigned long long)res[i].free_bytes);

	/* A batch: one delivery of three requests, three answers in one batch. */
	{
		Ftvm__Partner__SpaceRequest reqs[3];
		Envelope envs[3], *ptrs[3];
		void *args[3];

		b.hold_requests = false;
		for (int i = 0; i < 3; i++) {
			ftvm__partner__space_request__init(&reqs[i]);
			ftvm__partner__envelope__init(&envs[i]);
			reqs[i].bytes = 10 + (uint64_t)i;
			envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
			envs[i].space_request = &reqs[i];
			ptrs[i] = &envs[i];
			memset(&res[i], 0, sizeof(res[i]));
			args[i] = &res[i];
		}
		CHECK(repl_session_request_batch(a.s, ptrs, 3, 2000, on_done, args) == 0, "batch");
		CHECK(RUN_UNTIL(res[0].done && res[1].done && res[2].done, 2000), "batch answered");
		CHECK(b.last_batch == 3, "b got the batch in one delivery of %zu", b.last_batch);
		for (int i = 0; i < 3; i++)
			CHECK(res[i].free_bytes == 20 + 2 * (uint64_t)i, "batch answer %d: %llu", i,
			      (unsigned long long)res[i].free_bytes);
		b.hold_requests = true;
	}

	/* More answers than go in one Batch: they go in several, all arrive. */
	{
		enum {
			N = 2 * REPL_ANSWERS_MAX + 5
		};
		Ftvm__Partner__SpaceRequest reqs[N];
		Envelope envs[N], *ptrs[N];
		struct result many[N];
		void *args[N];
		bool all = true;

		b.hold_requests = false;
		for (int i = 0; i < N; i++) {
			ftvm__partner__space_request__init(&reqs[i]);
			ftvm__partner__envelope__init(&envs[i]);
			reqs[i].bytes = 1 + (uint64_t)i;
			envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
			envs[i].space_request = &reqs[i];
			ptrs[i] = &envs[i];
			memset(&many[i], 0, sizeof(many[i]));
			args[i] = &many[i];
		}
		CHECK(repl_session_request_batch(a.s, ptrs, N, 2000, on_done, args) == 0,
		      "a batch of %d", N);
		CHECK(RUN_UNTIL(many[N - 1].done, 2000), "the last of %d answered", N);
		for (int i = 0; i < N; i++)
			all = all && many[i].done && many[i].free_bytes == 2 * (1 + (uint64_t)i);
		CHECK(all && b.last_batch == N, "%d answers in one call, each its own", N);
		b.hold_requests = true;
	}

	/* A request nobody answers fails at its deadline. */
	b.n_held = 0;
	uint64_t t0 = clock_now_ms();
	send_space_request(&a, 1, 100, &res[0]);
	CHECK(RUN_UNTIL(res[0].done, 2000), "timeout reported");
	CHECK(res[0].status == FTVM__PARTNER__STATUS__STATUS_TIMEOUT, "status %d", res[0].status);
	CHECK(clock_now_ms() - t0 >= 100, "timed out early, after %llu ms",
	      (unsigned long long)(clock_now_ms() - t0));
	/* Its late answer is ignored without harm. */
	answer(b.s, b.held_seq[0], 5);
	b.hold_requests = false;
	CHECK(send_space_request(&a, 21, 2000, &res[1]) == 0, "request after late answer");
	CHECK(RUN_UNTIL(res[1].done, 2000) && res[1].free_bytes == 42, "answered 42, got %llu",
	      (unsigned long long)res[1].free_bytes);

	/* The partner goes away with a request pending: it fails at once, clearly. */
	b.hold_requests = true;
	b.n_held = 0;
	send_space_request(&a, 1, 5000, &res[2]);
	CHECK(RUN_UNTIL(b.n_held == 1, 2000), "b holds it");
	peer_stop(&b);
	CHECK(RUN_UNTIL(res[2].done, 1000), "pending failed on link down");
	CHECK(res[2].status == FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, "status %d",
	      res[2].status);
	CHECK(!link_up(&a) && a.link_downs == 1, "a sees the link down (%d downs)", a.link_downs);
	CHECK(send_space_request(&a, 1, 100, &res[3]) == -ENOTCONN, "request while down");

	/* It comes back: a redials on its own. */
	peer_init(&b, "b", pb, pa);
	CHECK(peer_start(&b) == 0, "restart b");
	CHECK(RUN_UNTIL(link_up(&a) && link_up(&b), 5000), "link back");

	/* b took over (epoch 2): a's requests, alone or batched, are refused
	 * with the reason and never reach b's request callback. */
	repl_session_set_epoch(b.s, 2);
	b.hold_requests = true;
	b.n_held = 0;
	b.last_batch = 0;
	send_space_request(&a, 1, 2000, &res[4]);
	CHECK(RUN_UNTIL(res[4].done, 2000), "stale request answered");
	CHECK(res[4].status == FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH, "status %d",
	      res[4].status);
	CHECK(strstr(res[4].reason, "epoch 1") && strstr(res[4].reason, "at 2"), "reason: %s",
	      res[4].reason);
	{
		Ftvm__Partner__SpaceRequest reqs[2];
		Envelope envs[2], *ptrs[2];
		void *args[2] = { &res[5], &res[6] };

		for (int i = 0; i < 2; i++) {
			ftvm__partner__space_request__init(&reqs[i]);
			ftvm__partner__envelope__init(&envs[i]);
			envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
			envs[i].space_request = &reqs[i];
			ptrs[i] = &envs[i];
			memset(&res[5 + i], 0, sizeof(res[5]));
		}
		CHECK(repl_session_request_batch(a.s, ptrs, 2, 2000, on_done, args) == 0, "batch");
		CHECK(RUN_UNTIL(res[5].done && res[6].done, 2000), "stale batch answered");
		CHECK(res[5].status == FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH &&
			      res[6].status == FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH,
		      "batch statuses %d %d", res[5].status, res[6].status);
	}
	CHECK(b.n_held == 0 && b.last_batch == 0, "b's callback saw %d held, batch %zu", b.n_held,
	      b.last_batch);
	repl_session_get_stats(b.s, &st);
	CHECK(st.stale_refused == 3, "b counted %llu stale refusals",
	      (unsigned long long)st.stale_refused);
	/* Answers from the older epoch still answer what b asked. */
	a.hold_requests = false;
	send_space_request(&b, 6, 2000, &res[0]);
	CHECK(RUN_UNTIL(res[0].done, 2000) && res[0].status == 0 && res[0].free_bytes == 12,
	      "b's request answered by a at the older epoch: status %d free %llu", res[0].status,
	      (unsigned long long)res[0].free_bytes);
	{
		Ftvm__Partner__SpaceRequest reqs[2];
		Envelope envs[2], *ptrs[2];
		void *args[2] = { &res[1], &res[2] };

		for (int i = 0; i < 2; i++) {
			ftvm__partner__space_request__init(&reqs[i]);
			ftvm__partner__envelope__init(&envs[i]);
			reqs[i].bytes = 7;
			envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
			envs[i].space_request = &reqs[i];
			ptrs[i] = &envs[i];
			memset(&res[1 + i], 0, sizeof(res[1]));
		}
		CHECK(repl_session_request_batch(b.s, ptrs, 2, 2000, on_done, args) == 0,
		      "b's batch");
		CHECK(RUN_UNTIL(res[1].done && res[2].done, 2000) && res[1].status == 0 &&
			      res[2].free_bytes == 14,
		      "b's batch answered in a batch at the older epoch: %d %llu", res[1].status,
		      (unsigned long long)res[2].free_bytes);
	}
	/* At the same epoch again, requests go through. */
	repl_session_set_epoch(a.s, 2);
	b.hold_requests = false;
	send_space_request(&a, 4, 2000, &res[7]);
	CHECK(RUN_UNTIL(res[7].done, 2000) && res[7].status == 0 && res[7].free_bytes == 8,
	      "same epoch: status %d free %llu", res[7].status,
	      (unsigned long long)res[7].free_bytes);
	peer_stop(&a);
	peer_stop(&b);
}

/* Over TCP page data never goes one-sided, even with a pool offered: the
 * landing calls say -EOPNOTSUPP and change nothing. */
static void test_tcp_not_one_sided(void)
{
	uint16_t pa = free_port(), pb = free_port();
	struct repl_landing landing = { .frame = 7, .frames = 3, .generation = 9 }, copy;
	struct repl_session_stats before, after;
	struct peer a, b;
	struct result res = { 0 };
	Ftvm__Partner__SpaceRequest req = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, *envs[1] = { &env };
	void *args[1] = { &res };
	struct repl_page_write w;
	char reason[128] = "";

	peer_init(&a, "a", pa, pb);
	peer_init(&b, "b", pb, pa);
	a.pool = xcalloc(1024 * 4096);
	b.pool = xcalloc(1024 * 4096);
	CHECK(peer_start(&a) == 0 && peer_start(&b) == 0, "start a and b");
	CHECK(RUN_UNTIL(link_up(&a) && link_up(&b), 3000), "link up on both");
	CHECK(!repl_session_one_sided(a.s) && !repl_session_one_sided(b.s), "one_sided over TCP");

	copy = landing;
	CHECK_INT("landing_open over TCP", -EOPNOTSUPP,
		  repl_session_landing_open(b.s, 0, 1, &landing));
	CHECK(memcmp(&copy, &landing, sizeof(landing)) == 0, "landing_open changed its result");
	CHECK_INT("landing_check over TCP", -EOPNOTSUPP,
		  repl_session_landing_check(b.s, &landing, reason, sizeof(reason)));
	CHECK(reason[0], "landing_check gave no reason");

	repl_session_get_stats(a.s, &before);
	req.bytes = 5;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &req;
	w = (struct repl_page_write){ .src = a.pool, .len = 4096, .to = landing };
	CHECK_INT("request_batch_landed over TCP", -EOPNOTSUPP,
		  repl_session_request_batch_landed(a.s, envs, 1, 2000, on_done, args, &w, 1));
	repl_session_get_stats(a.s, &after);
	CHECK(after.requests_sent == before.requests_sent, "requests_sent went %llu -> %llu",
	      (unsigned long long)before.requests_sent, (unsigned long long)after.requests_sent);
	/* Sent inline instead, it goes and is answered as ever. */
	CHECK_INT("the same batch inline", 0,
		  repl_session_request_batch(a.s, envs, 1, 2000, on_done, args));
	CHECK(RUN_UNTIL(res.done, 2000) && res.status == 0 && res.free_bytes == 10,
	      "inline after the refusal: done %d status %d free %llu", res.done, res.status,
	      (unsigned long long)res.free_bytes);
	CHECK(b.last_batch == 1, "b got %zu requests in the delivery", b.last_batch);
	/* The pool's blocks come and go with no registrations to keep; nothing
	 * is staged. */
	{
		struct repl_pool_stats ps = { .current = 1 };
		void *slab = NULL;

		CHECK_INT("pool_block_out over TCP", 0,
			  repl_session_pool_block_out(a.s, 1, reason, sizeof(reason)));
		CHECK_INT("pool_block_in over TCP", 0,
			  repl_session_pool_block_in(a.s, 1, reason, sizeof(reason)));
		CHECK_INT("pool_purge over TCP", 0,
			  repl_session_pool_purge(a.s, reason, sizeof(reason)));
		repl_session_pool_stats(a.s, &ps);
		CHECK(!ps.current && !ps.stale && !ps.purged && !ps.staging_slabs,
		      "registrations over TCP");
		CHECK_INT("staging_take over TCP", -EOPNOTSUPP,
			  repl_session_staging_take(a.s, 4096, &slab));
		CHECK(!slab, "staging_take gave a slab over TCP");
	}
	peer_stop(&a);
	peer_stop(&b);
	free(a.pool);
	free(b.pool);
}

/* Writes one envelope frame to a raw socket. */
static void raw_send(int fd, Envelope *env)
{
	uint8_t *frame;
	size_t len;

	codec_frame_pack(&env->base, &frame, &len);
	CHECK(write(fd, frame, len) == (ssize_t)len, "raw write");
	free(frame);
}

/* env from b, linked at epoch 1. */
static void raw_send_b(int fd, Envelope *env)
{
	env->version = 1;
	env->sender = "b";
	env->epoch = 1;
	raw_send(fd, env);
}

/* The first step of the handshake for a node without a key. */
static void raw_challenge(int fd, const char *id)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__AuthChallenge ch = FTVM__PARTNER__AUTH_CHALLENGE__INIT;

	ch.node_id = (char *)id;
	ch.method = FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_NONE;
	env.version = 1;
	env.sender = (char *)id;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE;
	env.auth_challenge = &ch;
	raw_send(fd, &env);
}

/* A Hello after the handshake; marks_retired: as a node that ends a
 * connection it retires with ConnectionRetired; answers_runs: as one that
 * takes an answer to a run of requests. */
static void raw_hello_says(int fd, const char *id, uint32_t page_size, bool marks_retired,
			   bool answers_runs)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__Hello hello = FTVM__PARTNER__HELLO__INIT;

	hello.node_id = (char *)id;
	hello.version = 1;
	hello.page_size = page_size;
	hello.marks_retired = marks_retired;
	hello.answers_runs = answers_runs;
	env.version = 1;
	env.sender = (char *)id;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO;
	env.hello = &hello;
	raw_send(fd, &env);
}

static void raw_hello_only(int fd, const char *id, uint32_t page_size, bool marks_retired)
{
	raw_hello_says(fd, id, page_size, marks_retired, false);
}

/* The handshake of a node without a key, then its Hello (an older node's:
 * it does not mark what it retires). */
static void raw_hello(int fd, const char *id, uint32_t page_size)
{
	raw_challenge(fd, id);
	raw_hello_only(fd, id, page_size, false);
}

/* What a live partner sends while it has nothing else to say. */
static void raw_heartbeat(int fd)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__Heartbeat hb = FTVM__PARTNER__HEARTBEAT__INIT;

	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT;
	env.heartbeat = &hb;
	raw_send_b(fd, &env);
}

static int raw_connect(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	CHECK(connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0, "raw connect");
	return fd;
}

/* a started, and a raw "b" that dials it and says Hello (answers_runs: as
 * a node that takes answers in runs): b's connection, the link up. */
static int raw_partner_dials(struct peer *a, bool answers_runs)
{
	uint16_t pa = free_port(), pb = free_port();
	int fd;

	peer_init(a, "a", pa, pb);
	CHECK(peer_start(a) == 0, "start a");
	fd = raw_connect(pa);
	raw_challenge(fd, "b");
	raw_hello_says(fd, "b", 4096, false, answers_runs);
	CHECK(RUN_UNTIL(link_up(a), 2000), "linked to the raw partner");
	return fd;
}

static int raw_listen(uint16_t port)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_port = htons(port),
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	int fd = socket(AF_INET, SOCK_STREAM, 0), one = 1;

	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	CHECK(bind(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0 && listen(fd, 4) == 0,
	      "raw listen on %u", port);
	return fd;
}

/* The next envelope on fd, read into buf (cap bytes, *have of them used);
 * NULL when the connection closed (*closed) or nothing came in 3 s. */
static Envelope *raw_next(int fd, uint8_t *buf, size_t cap, size_t *have, bool *closed)
{
	*closed = false;
	for (;;) {
		const uint8_t *payload;
		size_t payload_len;
		const char *why;
		int n = frame_decode(buf, *have, cap, &payload, &payload_len, &why);
		Envelope *env = NULL;
		ssize_t got;

		if (n > 0) {
			CHECK(codec_envelope_decode(payload, payload_len, &env, NULL, 0) == 0,
			      "raw decode");
			memmove(buf, buf + n, *have - (size_t)n);
			*have -= (size_t)n;
			if (env)
				return env;
			continue;
		}
		CHECK(n == 0, "raw frame: %s", why);
		if (n < 0 || poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 3000) != 1)
			return NULL;
		got = read(fd, buf + *have, cap - *have);
		if (got <= 0) {
			*closed = true;
			return NULL;
		}
		*have += (size_t)got;
	}
}

/* The next envelope of message type want on fd (others skipped). */
static Envelope *raw_expect(int fd, int want)
{
	static uint8_t buf[1 << 16];
	size_t have = 0; /* one connection per call: nothing is left from another */
	bool closed;
	Envelope *env;

	while ((env = raw_next(fd, buf, sizeof(buf), &have, &closed))) {
		if ((int)env->message_case == want)
			return env;
		codec_envelope_free(env);
	}
	CHECK(false, "raw read: %s", closed ? "the connection closed" : "nothing came in 3 s");
	return NULL;
}

static void raw_answer(int fd, uint64_t seq, uint64_t free_bytes)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	Ftvm__Partner__SpaceStatus space = FTVM__PARTNER__SPACE_STATUS__INIT;

	space.free_bytes = free_bytes;
	cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE;
	cc.space = &space;
	env.answers = seq;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;
	env.command_complete = &cc;
	raw_send_b(fd, &env);
}

/* b's SpaceRequest{bytes} as request seq. */
static void raw_space_request(int fd, uint64_t seq, uint64_t bytes)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SpaceRequest req = FTVM__PARTNER__SPACE_REQUEST__INIT;

	req.bytes = bytes;
	env.seq = seq;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &req;
	raw_send_b(fd, &env);
}

/* b's last frame on a connection it retired. */
static void raw_retired(int fd)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__ConnectionRetired cr = FTVM__PARTNER__CONNECTION_RETIRED__INIT;

	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_CONNECTION_RETIRED;
	env.connection_retired = &cr;
	raw_send_b(fd, &env);
}

/* a started with a raw socket for its partner b: b listens on *ret_lfd,
 * where a's dial is accepted and returned; *ret_pa is a's port, for b's
 * dials. a's fields set before (max_backlog, dead_after_ms) stay. */
static int start_against_raw(struct peer *a, uint16_t *ret_pa, int *ret_lfd)
{
	uint16_t pb = free_port();
	size_t max_backlog = a->max_backlog;
	uint32_t dead_after_ms = a->dead_after_ms;
	int fd;

	*ret_pa = free_port();
	*ret_lfd = raw_listen(pb);
	peer_init(a, "a", *ret_pa, pb);
	a->max_backlog = max_backlog;
	a->dead_after_ms = dead_after_ms;
	CHECK(peer_start(a) == 0, "start a");
	fd = accept(*ret_lfd, NULL, NULL);
	CHECK(fd >= 0, "a dialled the raw partner");
	return fd;
}

/* The answers on fd to the requests b sent, in the frames that carry them,
 * until those to seq `through` came: the answered seq and answers_count of
 * each envelope in order, in seqs[] and counts[] (max of them); how many. */
static size_t raw_answers(int fd, uint64_t through, uint64_t *seqs, uint32_t *counts, size_t max)
{
	static uint8_t buf[1 << 16];
	size_t have = 0, n = 0;
	bool closed;
	Envelope *env;

	while (n < max && (n == 0 || seqs[n - 1] < through) &&
	       (env = raw_next(fd, buf, sizeof(buf), &have, &closed))) {
		size_t items = env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH
				       ? env->batch->n_envelopes
				       : 1;

		for (size_t i = 0; i < items && n < max; i++) {
			Envelope *e = env;

			if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH)
				CHECK(codec_batch_envelope_decode(env, i, &e, NULL, 0) == 0,
				      "batch item decodes");
			if (e->message_case != FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE)
				continue;
			seqs[n] = e->answers;
			counts[n++] = e->answers_count;
		}
		codec_envelope_free(env);
	}
	return n;
}

/* b's SpaceRequests for bytes[i] as seqs 1 .. n, in one Batch. */
static void raw_space_batch(int fd, const uint64_t *bytes, size_t n)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, items[8];
	Ftvm__Partner__SpaceRequest req[8];
	Ftvm__Partner__Batch batch = FTVM__PARTNER__BATCH__INIT;
	ProtobufCBinaryData packed[8];

	CHECK(n <= 8, "a raw batch holds 8");
	for (size_t i = 0; i < n; i++) {
		ftvm__partner__envelope__init(&items[i]);
		ftvm__partner__space_request__init(&req[i]);
		req[i].bytes = bytes[i];
		items[i].version = 1;
		items[i].sender = "b";
		items[i].epoch = 1;
		items[i].seq = i + 1;
		items[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
		items[i].space_request = &req[i];
		CHECK(codec_payload_pack(&items[i].base, &packed[i].data, &packed[i].len) == 0,
		      "pack");
	}
	batch.n_envelopes = n;
	batch.envelopes = packed;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH;
	env.batch = &batch;
	raw_send_b(fd, &env);
	for (size_t i = 0; i < n; i++)
		free(packed[i].data);
}

/* Answers in runs (SESSION.md): to a partner whose Hello says answers_runs,
 * plain successes of consecutive seqs go with the answer after them as one
 * envelope (answers_count), the answer to the run's last; to one whose Hello
 * does not (an older node), each alone as before. */
static void test_answers_sent_in_runs(bool partner_takes_runs)
{
	/* 0 bytes: a plain success; others carry free space. */
	static const uint64_t bytes[] = { 0, 0, 5, 0, 0, 7, 3 };
	static const uint64_t want_seqs[] = { 3, 6, 7 };
	static const uint32_t want_counts[] = { 3, 3, 0 };
	uint64_t seqs[8];
	uint32_t counts[8];
	Envelope *hello;
	struct peer a;
	int fd = raw_partner_dials(&a, partner_takes_runs);
	size_t n;

	hello = raw_expect(fd, FTVM__PARTNER__ENVELOPE__MESSAGE_HELLO);
	CHECK(hello && hello->hello->answers_runs, "a's Hello says it takes runs");
	codec_envelope_free(hello);

	raw_space_batch(fd, bytes, 7);
	for (int i = 0; i < 20; i++) /* a answers on its loop; run it while b reads */
		RUN_UNTIL(false, 5);
	n = raw_answers(fd, 7, seqs, counts, 8);
	if (partner_takes_runs) {
		CHECK(n == 3, "a sent %zu answers to 7 requests, wanted 3", n);
		for (size_t i = 0; i < n && i < 3; i++)
			CHECK(seqs[i] == want_seqs[i] && counts[i] == want_counts[i],
			      "answer %zu: to seq %llu, a run of %u; wanted %llu, %u", i,
			      (unsigned long long)seqs[i], counts[i],
			      (unsigned long long)want_seqs[i], want_counts[i]);
	} else {
		CHECK(n == 7, "a sent %zu answers to 7 requests, wanted 7", n);
		for (size_t i = 0; i < n; i++)
			CHECK(seqs[i] == i + 1 && counts[i] == 0, "answer %zu: to seq %llu, run %u",
			      i, (unsigned long long)seqs[i], counts[i]);
	}
	close(fd);
	peer_stop(&a);
}

static int send_space_batch(struct peer *p, const uint64_t *bytes, size_t n, struct result *res)
{
	Envelope env[8], *envs[8];
	Ftvm__Partner__SpaceRequest req[8];
	void *args[8];

	for (size_t i = 0; i < n; i++) {
		ftvm__partner__envelope__init(&env[i]);
		ftvm__partner__space_request__init(&req[i]);
		req[i].bytes = bytes[i];
		env[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
		env[i].space_request = &req[i];
		envs[i] = &env[i];
		memset(&res[i], 0, sizeof(res[i]));
		args[i] = &res[i];
	}
	return repl_session_request_batch(p->s, envs, n, 5000, on_done, args);
}

/* Between two sessions: each request of a batch b answers in runs gets its
 * own answer on a, as if each had come alone: the run's plain successes OK
 * with nothing else (no applied_lsn: the run's last has it), the answer
 * after them its own. A run that reaches below seq 1, or is longer than a
 * sender makes, is refused as the partner's error. */
static void test_answers_taken_in_runs(void)
{
	static const uint64_t bytes[] = { 0, 0, 5, 0, 0 };
	uint16_t pa = free_port(), pb = free_port();
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	struct result res[5];
	struct peer a, b;
	int fd;

	peer_init(&a, "a", pa, pb);
	peer_init(&b, "b", pb, pa);
	CHECK(peer_start(&a) == 0 && peer_start(&b) == 0, "start");
	CHECK(RUN_UNTIL(link_up(&a) && link_up(&b), 3000), "link up");
	CHECK_INT("sent", 0, send_space_batch(&a, bytes, 5, res));
	CHECK(RUN_UNTIL(res[4].done, 3000), "answered");
	for (int i = 0; i < 5; i++) {
		bool last = i == 2 || i == 4;

		CHECK(res[i].done && res[i].status == 0, "request %d: done %d, status %d", i,
		      res[i].done, res[i].status);
		CHECK(res[i].payload ==
			      (bytes[i] ? FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE
					: FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD__NOT_SET),
		      "request %d: payload %d", i, res[i].payload);
		CHECK(res[i].free_bytes == bytes[i] * 2, "request %d: free_bytes %llu", i,
		      (unsigned long long)res[i].free_bytes);
		CHECK(last || res[i].applied_lsn == 0,
		      "request %d inside a run was told applied_lsn %llu", i,
		      (unsigned long long)res[i].applied_lsn);
	}
	CHECK(res[4].applied_lsn > 0, "the run's last was told its applied_lsn");
	peer_stop(&a);
	peer_stop(&b);

	/* A raw partner's bad runs: the connection goes, with the reason. */
	for (int bad = 0; bad < 2; bad++) {
		int lfd;

		fd = start_against_raw(&a, &pa, &lfd);
		raw_hello(fd, "b", 4096);
		CHECK(RUN_UNTIL(link_up(&a), 2000), "linked to the raw partner");
		env.answers = bad ? 70 : 2;
		env.answers_count = bad ? 65 : 3;
		env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;
		env.command_complete = &cc;
		raw_send_b(fd, &env);
		CHECK(RUN_UNTIL(a.protocol_errors > 0, 2000), "a bad run refused");
		CHECK(strstr(a.last_protocol_error, bad ? "run of 65" : "run of 3") != NULL,
		      "reason: %s", a.last_protocol_error);
		close(fd);
		close(lfd);
		peer_stop(&a);
	}
}

/* Both dialled, and the link came up on the partner's dial before a's own
 * connection said Hello: a then switches to the one it dialled (the smaller
 * id's). The link stays up; the old connection retires instead of closing,
 * so an answer the partner sent on it before it switched too still arrives
 * (a resync was once failed here though the partner had applied it); a
 * request made after the switch goes on the new one; the old one closes
 * after dead_after_ms. */
static void test_switch_keeps_pending(void)
{
	uint16_t pa;
	int lfd, out_fd, in_fd;
	Envelope *req[2] = { NULL, NULL };
	struct result res[2];
	struct peer a;

	out_fd = start_against_raw(&a, &pa, &lfd);
	CHECK(RUN_UNTIL(connections(&a) == 1, 1000), "a's dial is up");
	RUN_UNTIL(false, 50); /* let it send its Hello */
	in_fd = raw_connect(pa);
	raw_hello(in_fd, "b", 4096);
	CHECK(RUN_UNTIL(link_up(&a), 2000), "linked on the partner's dial");
	CHECK(send_space_request(&a, 7, 5000, &res[0]) == 0, "request on it");
	req[0] = raw_expect(in_fd, FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST);
	CHECK(req[0] && req[0]->space_request->bytes == 7, "it came on the partner's dial");

	raw_hello(out_fd, "b", 4096);
	RUN_UNTIL(false, 20); /* a switches */
	CHECK(!res[0].done, "the request was failed at the switch: %s", res[0].reason);
	CHECK(send_space_request(&a, 8, 5000, &res[1]) == 0, "request after the switch");
	req[1] = raw_expect(out_fd, FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST);
	CHECK(req[1] && req[1]->space_request->bytes == 8, "it came on a's dial");
	raw_answer(in_fd, req[0] ? req[0]->seq : 0, 14);
	raw_answer(out_fd, req[1] ? req[1]->seq : 0, 16);
	CHECK(RUN_UNTIL(res[0].done && res[1].done, 2000), "both answered");
	CHECK(res[0].status == 0 && res[0].free_bytes == 14, "on the retired one: %d %llu %s",
	      res[0].status, (unsigned long long)res[0].free_bytes, res[0].reason);
	CHECK(res[1].status == 0 && res[1].free_bytes == 16, "on the kept one: %d %llu %s",
	      res[1].status, (unsigned long long)res[1].free_bytes, res[1].reason);
	/* The partner stays alive on the kept connection while the retired one
	 * runs out its dead_after_ms: a silent partner would take the link down
	 * in the same tick under a slow loop. */
	for (int i = 0; i < 100 && !RUN_UNTIL(connections(&a) == 1, 20); i++)
		raw_heartbeat(out_fd);
	CHECK(connections(&a) == 1, "the retired one closed, %u left", connections(&a));
	CHECK(link_up(&a) && a.link_downs == 0 && a.link_ups == 1,
	      "the link stayed up through the switch (%d ups, %d downs)", a.link_ups, a.link_downs);
	codec_envelope_free(req[0]);
	codec_envelope_free(req[1]);
	close(in_fd);
	close(out_fd);
	close(lfd);
	peer_stop(&a);
}

/* The other way round: a is linked on its own dial when the partner's dial
 * says Hello too. That one loses (the partner dialled it, b > a) but is
 * still read: a request the partner sent on it, having taken it as its link
 * for a moment, is answered on the link. */
static void test_losing_dial_still_read(void)
{
	uint16_t pa;
	int lfd, out_fd, in_fd;
	Envelope *answer;
	struct peer a;

	out_fd = start_against_raw(&a, &pa, &lfd);
	RUN_UNTIL(false, 50);
	raw_hello(out_fd, "b", 4096);
	CHECK(RUN_UNTIL(link_up(&a), 2000), "linked on a's dial");
	in_fd = raw_connect(pa);
	raw_hello(in_fd, "b", 4096);
	raw_space_request(in_fd, 9, 5);
	RUN_UNTIL(false, 100); /* a reads and answers (raw_expect blocks) */
	answer = raw_expect(out_fd, FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE);
	CHECK(answer && answer->answers == 9 &&
		      answer->command_complete->payload_case ==
			      FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE &&
		      answer->command_complete->space->free_bytes == 10,
	      "the request on the losing dial was answered on the link");
	CHECK(link_up(&a) && a.link_downs == 0, "the link stayed up (%d downs)", a.link_downs);
	/* (The raw partner sends no heartbeats: the link itself goes silent next.) */
	CHECK(RUN_UNTIL(connections(&a) <= 1, 2000), "the losing dial closed, %u left",
	      connections(&a));
	codec_envelope_free(answer);
	close(in_fd);
	close(out_fd);
	close(lfd);
	peer_stop(&a);
}

/* Runs a's loop for ms, b's heartbeats coming on fd meanwhile (a partner
 * silent for dead_after_ms takes the link down). */
static void stay_alive(int fd, int ms)
{
	for (int i = 0; i < ms / 20; i++) {
		raw_heartbeat(fd);
		RUN_UNTIL(false, 20);
	}
}

/* dead_after_ms for the tests that check a wait is still on 150 ms after it
 * began: a retired connection is closed, and one that does not say Hello
 * given up, dead_after_ms after, and a loaded machine (CI's other build)
 * took the test past 150 ms. */
#define WAITS_OUTLAST_MS 2000

/* The link moves to a's dial while b's dial, the link until then, still
 * brings what b sent there first: b's request on the new link waits for
 * it and for b's ConnectionRetired, so a takes them in the order b sent
 * them (a resync's allocation before a lock that names it); a ends its old
 * connection with ConnectionRetired too. Ended by a close instead, the
 * wait ends as well. */
static void test_move_keeps_order(bool ended_by_close)
{
	uint16_t pa;
	int lfd, out_fd, in_fd;
	Envelope *retired;
	struct peer a = { .dead_after_ms = WAITS_OUTLAST_MS };

	out_fd = start_against_raw(&a, &pa, &lfd);
	CHECK(RUN_UNTIL(connections(&a) == 1, 1000), "a's dial is up");
	RUN_UNTIL(false, 50);
	in_fd = raw_connect(pa);
	raw_challenge(in_fd, "b");
	raw_hello_only(in_fd, "b", 4096, true);
	CHECK(RUN_UNTIL(link_up(&a), 2000), "linked on b's dial");

	raw_challenge(out_fd, "b"); /* b's Hello on a's dial: the link moves */
	raw_hello_only(out_fd, "b", 4096, true);
	RUN_UNTIL(false, 50);
	retired = raw_expect(in_fd, FTVM__PARTNER__ENVELOPE__MESSAGE_CONNECTION_RETIRED);
	CHECK(retired, "a ended its old connection with ConnectionRetired");
	codec_envelope_free(retired);
	raw_space_request(out_fd, 12, 2); /* after the move */
	stay_alive(out_fd, 100);
	CHECK(a.n_spaces == 0, "the request on the new link waited (%d taken)", a.n_spaces);
	raw_space_request(in_fd, 11, 1); /* before it, still on its way */
	if (ended_by_close)
		close(in_fd);
	else
		raw_retired(in_fd);
	CHECK(RUN_UNTIL(a.n_spaces == 2, 2000), "taken: %d", a.n_spaces);
	CHECK(a.space_bytes[0] == 1 && a.space_bytes[1] == 2,
	      "in the order b sent them: %llu then %llu", (unsigned long long)a.space_bytes[0],
	      (unsigned long long)a.space_bytes[1]);
	CHECK(link_up(&a) && a.link_downs == 0, "the link stayed up (%d downs)", a.link_downs);
	if (!ended_by_close)
		close(in_fd);
	close(out_fd);
	close(lfd);
	peer_stop(&a);
}

/* a is linked on its own dial when b's dial authenticates: b may have made
 * that one its link and sent on it already, so the link waits for its
 * Hello. It loses (b dialled it), and what b sent there before moving is
 * taken first, what came on the link meanwhile behind it. */
static void test_new_dial_holds_link(void)
{
	uint16_t pa;
	int lfd, out_fd, in_fd;
	Envelope *retired;
	struct peer a = { .dead_after_ms = WAITS_OUTLAST_MS };

	out_fd = start_against_raw(&a, &pa, &lfd);
	RUN_UNTIL(false, 50);
	raw_challenge(out_fd, "b");
	raw_hello_only(out_fd, "b", 4096, true);
	CHECK(RUN_UNTIL(link_up(&a), 2000), "linked on a's dial");
	in_fd = raw_connect(pa);
	raw_challenge(in_fd, "b");
	RUN_UNTIL(false, 50);
	raw_space_request(out_fd, 12, 2);
	stay_alive(out_fd, 100);
	CHECK(a.n_spaces == 0, "the link waited for b's Hello on its dial (%d taken)", a.n_spaces);
	raw_hello_only(in_fd, "b", 4096, true);
	raw_space_request(in_fd, 11, 1);
	raw_retired(in_fd);
	CHECK(RUN_UNTIL(a.n_spaces == 2, 2000), "both taken: %d", a.n_spaces);
	CHECK(a.space_bytes[0] == 1 && a.space_bytes[1] == 2, "in b's order: %llu then %llu",
	      (unsigned long long)a.space_bytes[0], (unsigned long long)a.space_bytes[1]);
	retired = raw_expect(in_fd, FTVM__PARTNER__ENVELOPE__MESSAGE_CONNECTION_RETIRED);
	CHECK(retired, "a ended the losing dial with ConnectionRetired");
	codec_envelope_free(retired);
	CHECK(link_up(&a) && a.link_downs == 0, "the link stayed up (%d downs)", a.link_downs);
	close(in_fd);
	close(out_fd);
	close(lfd);
	peer_stop(&a);
}

/* A retired connection that never ends cannot hold the link for more than
 * max_backlog bytes: past them it is closed and what waited is taken. */
static void test_move_wait_bounded(void)
{
	uint16_t pa;
	int lfd, out_fd, in_fd;
	struct peer a;
	bool closed = false;
	uint8_t buf[4096];
	size_t have = 0;
	Envelope *env;

	memset(&a, 0, sizeof(a));
	a.max_backlog = 256;
	out_fd = start_against_raw(&a, &pa, &lfd);
	CHECK(RUN_UNTIL(connections(&a) == 1, 1000), "a's dial is up");
	RUN_UNTIL(false, 50);
	in_fd = raw_connect(pa);
	raw_challenge(in_fd, "b");
	raw_hello_only(in_fd, "b", 4096, true);
	CHECK(RUN_UNTIL(link_up(&a), 2000), "linked on b's dial");
	raw_challenge(out_fd, "b");
	raw_hello_only(out_fd, "b", 4096, true);
	for (uint64_t i = 0; i < 32; i++) /* 14 bytes each */
		raw_space_request(out_fd, 20 + i, 100 + i);
	CHECK(RUN_UNTIL(a.n_spaces == 32, 2000), "taken past the bound: %d (%d downs: %s)",
	      a.n_spaces, a.link_downs, a.last_reason);
	CHECK(a.space_bytes[0] == 100 && a.space_bytes[31] == 131, "in order");
	RUN_UNTIL(false, 50);
	while ((env = raw_next(in_fd, buf, sizeof(buf), &have, &closed)))
		codec_envelope_free(env);
	CHECK(closed, "the old connection was closed");
	close(in_fd);
	close(out_fd);
	close(lfd);
	peer_stop(&a);
}

static void test_silent_partner(void)
{
	struct peer a;
	uint64_t t0;
	/* "b" is a raw socket: it says Hello, then nothing, as a hung process would. */
	int fd = raw_partner_dials(&a, false);

	t0 = clock_now_ms();
	CHECK(RUN_UNTIL(!link_up(&a), 2000), "silent partner reported down");
	CHECK(clock_now_ms() - t0 <= 150 + 20 + 100, "down after %llu ms (dead_after 150)",
	      (unsigned long long)(clock_now_ms() - t0));
	CHECK(strstr(a.last_reason, "silent") != NULL, "reason: %s", a.last_reason);
	close(fd);
	peer_stop(&a);
}

/* A pause of the node's own loop past dead_after_ms (here both peers share
 * the loop, so both pause, as a node stalled in a long fdatasync would): the
 * tick that ends it takes nobody for silent, since what the other sent
 * meanwhile is still unread; the link stays up and the pause is counted. */
static void test_own_pause(void)
{
	uint16_t pa = free_port(), pb = free_port();
	struct repl_session_stats st;
	int downs_a, downs_b;
	struct peer a, b;

	peer_init(&a, "a", pa, pb);
	peer_init(&b, "b", pb, pa);
	CHECK(peer_start(&a) == 0, "start a");
	CHECK(peer_start(&b) == 0, "start b");
	CHECK(RUN_UNTIL(link_up(&a) && link_up(&b) && connections(&a) == 1 && connections(&b) == 1,
			3000),
	      "linked on one connection");
	RUN_UNTIL(false, 100);
	downs_a = a.link_downs;
	downs_b = b.link_downs;
	usleep(400 * 1000); /* dead_after_ms is 150 */
	RUN_UNTIL(false, 300);
	CHECK(link_up(&a) && link_up(&b) && a.link_downs == downs_a && b.link_downs == downs_b,
	      "the link stayed up through the pause (downs a %d b %d: %s)", a.link_downs - downs_a,
	      b.link_downs - downs_b, a.last_reason);
	repl_session_get_stats(a.s, &st);
	CHECK(st.loop_pauses >= 1 && st.loop_pause_max_ms >= 350,
	      "the pause counted: %llu pauses, the longest %llu ms",
	      (unsigned long long)st.loop_pauses, (unsigned long long)st.loop_pause_max_ms);
	peer_stop(&a);
	peer_stop(&b);
}

/* A RegionUpdate is no request: alone or in a Batch ahead of a request, it
 * never reaches the request callback (over TCP no view takes it) and drops
 * nothing. */
static void test_region_update_not_a_request(void)
{
	Envelope update = FTVM__PARTNER__ENVELOPE__INIT, request = FTVM__PARTNER__ENVELOPE__INIT,
		 batch_env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__RegionUpdate ru = FTVM__PARTNER__REGION_UPDATE__INIT;
	Ftvm__Partner__PoolRegion region = FTVM__PARTNER__POOL_REGION__INIT,
				  *regions[1] = { &region };
	Ftvm__Partner__SpaceRequest req = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Ftvm__Partner__Batch batch = FTVM__PARTNER__BATCH__INIT;
	ProtobufCBinaryData items[2];
	Envelope *all[] = { &update, &request, &batch_env };
	struct peer a;
	int fd = raw_partner_dials(&a, false);

	region.block = 3;
	region.generation = 7;
	region.addr = 0x10000;
	region.length = 0x40000;
	region.rkey = 0x1234;
	ru.n_regions = 1;
	ru.regions = regions;
	for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
		all[i]->version = 1;
		all[i]->sender = "b";
		all[i]->epoch = 1;
	}
	update.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_REGION_UPDATE;
	update.region_update = &ru;
	raw_send(fd, &update);

	req.bytes = 3;
	request.seq = 5;
	request.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	request.space_request = &req;
	CHECK(codec_payload_pack(&update.base, &items[0].data, &items[0].len) == 0, "pack");
	CHECK(codec_payload_pack(&request.base, &items[1].data, &items[1].len) == 0, "pack");
	batch.n_envelopes = 2;
	batch.envelopes = items;
	batch_env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH;
	batch_env.batch = &batch;
	raw_send(fd, &batch_env);
	CHECK(RUN_UNTIL(a.last_batch > 0 || a.protocol_errors > 0, 2000), "the batch arrived");
	CHECK(a.last_batch == 1, "the request callback got %zu envelopes, not the request alone",
	      a.last_batch);
	CHECK(a.protocol_errors == 0 && link_up(&a), "dropped: %s", a.last_protocol_error);
	free(items[0].data);
	free(items[1].data);
	close(fd);
	peer_stop(&a);
}

static void test_bad_input(void)
{
	uint16_t pa = free_port(), pb = free_port();
	struct peer a, b;
	char garbage[4096];
	struct result res;
	uint64_t failed;
	int fd;

	peer_init(&a, "a", pa, pb);
	peer_init(&b, "b", pb, pa);
	CHECK(peer_start(&a) == 0 && peer_start(&b) == 0, "start");
	CHECK(RUN_UNTIL(link_up(&a) && link_up(&b), 3000), "link up");

	/* Garbage on a's port: dropped with a reason, the link to b unharmed. */
	srand(7);
	for (size_t i = 0; i < sizeof(garbage); i++)
		garbage[i] = (char)rand();
	fd = raw_connect(pa);
	CHECK(write(fd, garbage, sizeof(garbage)) == (ssize_t)sizeof(garbage), "garbage write");
	CHECK(RUN_UNTIL(a.protocol_errors > 0, 2000), "garbage noticed");
	CHECK(strstr(a.last_protocol_error, "bad frame") != NULL, "reason: %s",
	      a.last_protocol_error);
	close(fd);

	/* A Hello with another page size is refused, naming both sizes. */
	a.protocol_errors = 0;
	fd = raw_connect(pa);
	raw_hello(fd, "b", 8192);
	CHECK(RUN_UNTIL(a.protocol_errors > 0, 2000), "page size mismatch noticed");
	CHECK(strstr(a.last_protocol_error, "page_size 8192") != NULL, "reason: %s",
	      a.last_protocol_error);
	close(fd);

	/* A node claiming a's own id is refused at its challenge. */
	failed = auth_failures(&a);
	fd = raw_connect(pa);
	raw_hello(fd, "a", 4096);
	CHECK(RUN_UNTIL(auth_failures(&a) > failed, 2000), "own id refused");
	close(fd);

	/* A connection that never authenticates is closed after dead_after_ms. */
	failed = auth_failures(&a);
	fd = raw_connect(pa);
	CHECK(RUN_UNTIL(auth_failures(&a) > failed, 2000), "mute connection closed");
	close(fd);

	/* A connection that never says Hello once authenticated, likewise. */
	a.protocol_errors = 0;
	fd = raw_connect(pa);
	raw_challenge(fd, "b");
	CHECK(RUN_UNTIL(a.protocol_errors > 0, 2000), "mute connection closed");
	CHECK(strstr(a.last_protocol_error, "no Hello") != NULL, "reason: %s",
	      a.last_protocol_error);
	close(fd);

	CHECK(link_up(&a) && a.link_downs == 0, "link to b never dropped (%d downs)", a.link_downs);
	CHECK(send_space_request(&a, 8, 2000, &res) == 0, "request");
	CHECK(RUN_UNTIL(res.done, 2000) && res.free_bytes == 16, "still served");
	peer_stop(&a);
	peer_stop(&b);
}

/* Every envelope fd gets until the other side closes it (or 3 s pass):
 * how many, the first's type in *first and its epoch in *epoch; -1 when it
 * stayed open. */
static int raw_until_closed(int fd, int *first, uint64_t *epoch)
{
	static uint8_t buf[1 << 16];
	size_t have = 0;
	int n_env = 0;
	bool closed;
	Envelope *env;

	while ((env = raw_next(fd, buf, sizeof(buf), &have, &closed))) {
		if (!n_env++) {
			*first = (int)env->message_case;
			*epoch = env->epoch;
		}
		codec_envelope_free(env);
	}
	return closed ? n_env : -1;
}

/* A stranger on a's port, sending what send() sends after the connect. */
static void check_stranger(struct peer *a, uint16_t port, const char *what, void (*send)(int fd))
{
	uint64_t failed = auth_failures(a), epoch = 99;
	int fd = raw_connect(port), first = 0, n;

	send(fd);
	CHECK(RUN_UNTIL(auth_failures(a) > failed, 2000), "%s: refused", what);
	n = raw_until_closed(fd, &first, &epoch);
	CHECK(n == 1 && first == FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE && epoch == 0,
	      "%s: learnt %d messages, the first a %d at epoch %llu (want one AuthChallenge at "
	      "epoch 0)",
	      what, n, first, (unsigned long long)epoch);
	close(fd);
}

static void send_hello_only(int fd)
{
	raw_hello_only(fd, "b", 4096, false);
}

/* The challenge of a node with a key, then a proof made up. */
static void send_guessed_proof(int fd)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__AuthChallenge ch = FTVM__PARTNER__AUTH_CHALLENGE__INIT;
	Ftvm__Partner__AuthProof proof = FTVM__PARTNER__AUTH_PROOF__INIT;
	uint8_t nonce[32] = { 1 }, mac[32] = { 2 };

	ch.node_id = "b";
	ch.method = FTVM__PARTNER__AUTH_METHOD__AUTH_METHOD_HMAC_SHA256;
	ch.nonce = (ProtobufCBinaryData){ .len = sizeof(nonce), .data = nonce };
	env.version = 1;
	env.sender = "b";
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE;
	env.auth_challenge = &ch;
	raw_send(fd, &env);
	proof.mac = (ProtobufCBinaryData){ .len = sizeof(mac), .data = mac };
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_PROOF;
	env.auth_proof = &proof;
	raw_send(fd, &env);
}

static void send_no_key(int fd)
{
	raw_challenge(fd, "b");
}

/* Two peers link only when both hold the same key (or both none); a
 * stranger learns nothing but a's challenge, and the link stays up. */
static void test_auth(void)
{
	static const char key[] = "0123456789abcdef0123456789abcdef-one";
	static const char other[] = "0123456789abcdef0123456789abcdef-two";
	uint16_t pa = free_port(), pb = free_port();
	struct peer a, b;
	struct result res;

	peer_init(&a, "a", pa, pb);
	peer_init(&b, "b", pb, pa);
	a.key = key;
	b.key = key;
	CHECK(peer_start(&a) == 0 && peer_start(&b) == 0, "start");
	CHECK(RUN_UNTIL(link_up(&a) && link_up(&b), 3000), "linked with the same key");
	CHECK(send_space_request(&a, 5, 2000, &res) == 0 && RUN_UNTIL(res.done, 2000) &&
		      res.free_bytes == 10,
	      "a request over the authenticated link");
	check_stranger(&a, pa, "a Hello without a challenge", send_hello_only);
	check_stranger(&a, pa, "a proof made up", send_guessed_proof);
	check_stranger(&a, pa, "no key", send_no_key);
	CHECK(link_up(&a) && a.link_downs == 0, "link to b never dropped (%d downs)", a.link_downs);
	peer_stop(&b);

	/* Another key: no link, and both count the failures. */
	peer_init(&b, "b", pb, pa);
	b.key = other;
	CHECK(peer_start(&b) == 0, "start b with another key");
	CHECK(RUN_UNTIL(auth_failures(&b) > 0, 3000), "b refused a's proof");
	CHECK(!link_up(&b), "b linked with another key");
	peer_stop(&b);

	/* No key beside a key: refused both ways. */
	peer_init(&b, "b", pb, pa);
	CHECK(peer_start(&b) == 0, "start b without a key");
	CHECK(RUN_UNTIL(auth_failures(&b) > 0, 3000), "b refused a's method");
	CHECK(!link_up(&b), "b linked without a key");
	peer_stop(&a);
	peer_stop(&b);
}

/* Four connections that have not authenticated may wait at once; a fifth is
 * closed at once, before a byte is sent to it. */
static void test_unproven_bounded(void)
{
	uint16_t pa = free_port(), pb = free_port();
	int fds[5], first = 0, n;
	uint64_t failed, epoch = 0;
	struct peer a;

	peer_init(&a, "a", pa, pb);
	CHECK(peer_start(&a) == 0, "start a");
	for (int i = 0; i < 4; i++)
		fds[i] = raw_connect(pa);
	RUN_UNTIL(false, 50);
	failed = auth_failures(&a);
	fds[4] = raw_connect(pa);
	CHECK(RUN_UNTIL(auth_failures(&a) > failed, 1000), "a fifth unproven connection refused");
	n = raw_until_closed(fds[4], &first, &epoch);
	CHECK(n == 0, "the fifth connection got %d messages before its close, want none", n);
	for (int i = 0; i < 5; i++)
		close(fds[i]);
	peer_stop(&a);
}

/* A partner that says Hello and heartbeats but reads nothing: what waits
 * for it stops at the bound, and the link is dropped for it, not for
 * silence. */
static void test_backlog_bounded(void)
{
	static uint8_t block[64 << 10];
	Ftvm__Partner__WritePage wp = FTVM__PARTNER__WRITE_PAGE__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	uint16_t pa = free_port(), pb = free_port();
	struct result res;
	struct peer a;
	int fd, refused = 0;

	peer_init(&a, "a", pa, pb);
	a.max_backlog = 1 << 20;
	CHECK(peer_start(&a) == 0, "start a");
	fd = raw_connect(pa);
	raw_hello(fd, "b", 4096);
	CHECK(RUN_UNTIL(link_up(&a), 2000), "linked to the raw partner");
	wp.data = (ProtobufCBinaryData){ .len = sizeof(block), .data = block };
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
	env.write_page = &wp;
	/* 32 MiB: more than loopback's socket buffers and the bound. */
	for (int i = 0; i < 512; i++)
		refused += repl_session_request(a.s, &env, 60000, on_done, &res) < 0;
	CHECK(refused > 0, "every one of 512 requests of 64 KiB was queued");
	raw_heartbeat(fd);
	CHECK(RUN_UNTIL(!link_up(&a), 1000), "link dropped for the backlog");
	CHECK(strstr(a.last_reason, "reads nothing") != NULL, "reason: %s", a.last_reason);
	close(fd);
	peer_stop(&a);
}

/* What a tap saw go out: how many payloads, and the last one's block. */
static unsigned tapped;
static uint32_t tapped_crc;

static void on_tap(struct repl_session *s, bool out, const char *peer, const uint8_t *payload,
		   size_t len, void *arg)
{
	Envelope *env;
	char err[128];

	if (!out || codec_envelope_decode(payload, len, &env, err, sizeof(err)) < 0)
		return;
	tapped++;
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE)
		tapped_crc = crc32c(0, env->write_page->data.data, env->write_page->data.len);
	codec_envelope_free(env);
}

/* A tap sees each payload whole, a page block sent from the caller's memory
 * included, and nothing once it is taken away. */
static void test_tap(void)
{
	static uint8_t block[16 << 10];
	Ftvm__Partner__WritePage wp = FTVM__PARTNER__WRITE_PAGE__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	uint16_t pa = free_port(), pb = free_port();
	struct result res[2];
	struct peer a, b;
	unsigned seen;

	peer_init(&a, "a", pa, pb);
	peer_init(&b, "b", pb, pa);
	CHECK(peer_start(&a) == 0, "start a");
	CHECK(peer_start(&b) == 0, "start b");
	CHECK(RUN_UNTIL(link_up(&a) && link_up(&b), 3000), "link up on both");
	memset(block, 0x3c, sizeof(block));
	wp.guid = "a-1";
	wp.data = (ProtobufCBinaryData){ .len = sizeof(block), .data = block };
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
	env.write_page = &wp;
	tapped = 0;
	repl_session_set_tap(a.s, on_tap, NULL);
	CHECK_INT("sent", 0, repl_session_request(a.s, &env, 5000, on_done, &res[0]));
	CHECK(tapped == 1 && tapped_crc == crc32c(0, block, sizeof(block)),
	      "the tap saw %u payloads, the block %s", tapped,
	      tapped_crc == crc32c(0, block, sizeof(block)) ? "whole" : "not whole");
	repl_session_set_tap(a.s, NULL, NULL);
	seen = tapped;
	CHECK_INT("sent", 0, repl_session_request(a.s, &env, 5000, on_done, &res[1]));
	CHECK_INT("tapped once taken away", seen, tapped);
	CHECK(RUN_UNTIL(res[1].done, 3000) && b.n_writes == 2, "both blocks arrived");
	peer_stop(&a);
	peer_stop(&b);
}

/* Batches with a 64 KiB block each, more than the socket takes at once:
 * the block goes from the caller's memory in a gathered write, and what the
 * socket did not take is copied before the call returns (the caller's
 * buffer is overwritten at once). Every block arrives whole, in order. */
static void test_gathered_writes(void)
{
	enum {
		N = 160
	};
	static uint8_t block[64 << 10];
	static uint32_t want[N];
	uint16_t pa = free_port(), pb = free_port();
	struct result res[2 * N];
	struct peer a, b;
	bool same = true;
	int sent = 0;

	peer_init(&a, "a", pa, pb);
	peer_init(&b, "b", pb, pa);
	CHECK(peer_start(&a) == 0, "start a");
	CHECK(peer_start(&b) == 0, "start b");
	CHECK(RUN_UNTIL(link_up(&a) && link_up(&b), 3000), "link up on both");
	for (int i = 0; i < N; i++) {
		Ftvm__Partner__SpaceRequest sr = FTVM__PARTNER__SPACE_REQUEST__INIT;
		Ftvm__Partner__WritePage wp = FTVM__PARTNER__WRITE_PAGE__INIT;
		Envelope e0 = FTVM__PARTNER__ENVELOPE__INIT, e1 = FTVM__PARTNER__ENVELOPE__INIT;
		Envelope *envs[2] = { &e0, &e1 };
		void *args[2] = { &res[2 * i], &res[2 * i + 1] };

		for (size_t k = 0; k < sizeof(block); k += 64)
			block[k] = (uint8_t)(i + k / 64);
		want[i] = crc32c(0, block, sizeof(block));
		sr.bytes = 1;
		e0.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
		e0.space_request = &sr;
		wp.guid = "a-1";
		wp.data = (ProtobufCBinaryData){ .len = sizeof(block), .data = block };
		e1.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
		e1.write_page = &wp;
		memset(&res[2 * i], 0, 2 * sizeof(res[0]));
		sent += repl_session_request_batch(a.s, envs, 2, 10000, on_done, args) == 0;
		memset(block, 0xee, sizeof(block)); /* the caller's memory is its own again */
	}
	CHECK(sent == N, "%d of %d batches sent", sent, N);
	CHECK(RUN_UNTIL(res[2 * N - 1].done, 10000), "the last batch answered");
	CHECK(b.n_writes == N, "%d of %d blocks arrived", b.n_writes, N);
	for (int i = 0; i < N && i < b.n_writes; i++)
		same = same && b.write_crcs[i] == want[i];
	CHECK(same, "every block arrived as it was sent, in order");
	peer_stop(&a);
	peer_stop(&b);
}

/* The next envelope on fd that is not a heartbeat (raw_next's buffer). */
static Envelope *raw_next_said(int fd, uint8_t *buf, size_t cap, size_t *have)
{
	bool closed;
	Envelope *env;

	while ((env = raw_next(fd, buf, cap, have, &closed)) &&
	       env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_HEARTBEAT)
		codec_envelope_free(env);
	return env;
}

/* Whether env is a SpaceRequest for bytes; its seq into *ret_seq. */
static bool space_request_for(Envelope *env, uint64_t bytes, uint64_t *ret_seq)
{
	bool is = env && env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST &&
		  env->space_request->bytes == bytes;

	*ret_seq = is ? env->seq : 0;
	codec_envelope_free(env);
	return is;
}

/* Corking (session.c): of the frames sent in one turn of the loop the
 * first goes at once and the others wait for the turn's end, then go
 * together, in order; an answer made between two requests stays between
 * them on the wire. The partner is a raw socket, which sees the bytes as
 * they come. */
static void test_corked_turn(void)
{
	static uint8_t buf[1 << 16];
	uint16_t pa = free_port(), pb = free_port();
	int lfd = raw_listen(pb), fd;
	Ftvm__Partner__SpaceRequest sr = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, *got;
	struct result res[8];
	uint64_t seqs[8];
	size_t have = 0;
	struct peer a;
	bool all = true;

	peer_init(&a, "a", pa, pb);
	CHECK(peer_start(&a) == 0, "start a");
	fd = accept(lfd, NULL, NULL);
	CHECK(fd >= 0 && RUN_UNTIL(connections(&a) == 1, 1000), "a dialled the raw partner");
	raw_hello(fd, "b", 4096);
	CHECK(RUN_UNTIL(link_up(&a), 2000), "linked");
	RUN_UNTIL(false, 20);
	/* What a said so far (its challenge and Hello) is dropped. */
	while (poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 0) == 1 &&
	       read(fd, buf, sizeof(buf)) > 0)
		;

	for (int i = 0; i < 5; i++)
		CHECK(send_space_request(&a, 10 + (uint64_t)i, 5000, &res[i]) == 0, "request %d",
		      i);
	CHECK(space_request_for(raw_next_said(fd, buf, sizeof(buf), &have), 10, &seqs[0]),
	      "the turn's first request went at once");
	CHECK(have == 0 && poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 0) == 0,
	      "and nothing else yet (%zu bytes more)", have);
	RUN_UNTIL(false, 20); /* the turn ends */
	for (int i = 1; i < 5; i++)
		CHECK(space_request_for(raw_next_said(fd, buf, sizeof(buf), &have),
					10 + (uint64_t)i, &seqs[i]),
		      "request %d came after the turn, in order", i);

	/* The partner asks; a answers it between two requests of its own. */
	a.hold_requests = true;
	sr.bytes = 3;
	env.seq = 777;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &sr;
	raw_send_b(fd, &env);
	CHECK(RUN_UNTIL(a.n_held == 1, 2000), "a got the partner's request");
	CHECK(send_space_request(&a, 20, 5000, &res[5]) == 0, "the turn's first request");
	CHECK(send_space_request(&a, 21, 5000, &res[6]) == 0, "a request before the answer");
	answer(a.s, a.held_seq[0], 99);
	CHECK(send_space_request(&a, 22, 5000, &res[7]) == 0, "a request after the answer");
	RUN_UNTIL(false, 20);
	for (int i = 5; i < 7; i++)
		CHECK(space_request_for(raw_next_said(fd, buf, sizeof(buf), &have),
					15 + (uint64_t)i, &seqs[i]),
		      "request %d, made before the answer, came before it", 15 + i);
	got = raw_next_said(fd, buf, sizeof(buf), &have);
	CHECK(got && got->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE &&
		      got->answers == 777,
	      "then the answer, not %s", got ? codec_message_name(got) : "nothing");
	codec_envelope_free(got);
	CHECK(space_request_for(raw_next_said(fd, buf, sizeof(buf), &have), 22, &seqs[7]),
	      "then the request made after it");

	for (int i = 0; i < 8; i++)
		raw_answer(fd, seqs[i], 100 + (uint64_t)i);
	CHECK(RUN_UNTIL(res[7].done, 2000), "the answers came");
	for (int i = 0; i < 8; i++)
		all = all && res[i].done && res[i].status == 0 &&
		      res[i].free_bytes == 100 + (uint64_t)i;
	CHECK(all, "each request got its own answer");
	close(fd);
	close(lfd);
	peer_stop(&a);
}

int main(void)
{
	struct event_config *cfg = event_config_new();

	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	if (getenv("SESSION_DEBUG"))
		log_set_max_level(7);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	test_handshake_and_requests();
	test_tcp_not_one_sided();
	test_move_keeps_order(false);
	test_move_keeps_order(true);
	test_new_dial_holds_link();
	test_move_wait_bounded();
	test_silent_partner();
	test_own_pause();
	test_switch_keeps_pending();
	test_losing_dial_still_read();
	test_region_update_not_a_request();
	test_bad_input();
	test_auth();
	test_backlog_bounded();
	test_unproven_bounded();
	test_gathered_writes();
	test_corked_turn();
	test_tap();
	test_answers_sent_in_runs(true);
	test_answers_sent_in_runs(false);
	test_answers_taken_in_runs();
	event_base_free(base);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("session: all checks passed\n");
	return 0;
}
