/* The RDMA transport over real verbs (Soft-RoCE in the qemu guest: the
 * tests/vm/jobs/rdma_pair.sh job runs it): two transports in one process and
 * one event loop, connected over the device that holds ADDR.
 *
 *   test_rdma_channel ADDR
 *
 * Checks: both ends come up; a burst far past the credit window arrives
 * whole and in order while the receiver sends nothing (explicit credit
 * returns); a ping-pong; frames longer than a receive buffer (in pieces) both
 * ways; a payload over max_payload is refused with -EMSGSIZE; a close is
 * seen by the peer as conn_down with its reason; a redial comes up again; a
 * connect to a port nobody listens on ends in conn_down.
 *
 * One-sided page data (both ends attach a pool: a memfd mapping on a, heap
 * on b): b writes into landings a opened (RDMA WRITE) and sends a message
 * behind them; when the message reaches a, the bytes are in a's pool. Rounds
 * of one page, 64 and 68 KiB runs, a whole 256 KiB block and 40 scattered
 * pages (more WRITEs than the write slots: posting resumes from
 * completions), several in flight; a landing in the pool's short last block;
 * a stale generation, an unknown block and bytes past a block's end are
 * refused with nothing written; after a reconnect the pool's registrations
 * are the same (one protection domain per device) and writes go again.
 * Exit 0 pass, 1 fail, 77 no usable RDMA device, 99 setup error. */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../unit/check.h"
#include "clock.h"
#include "pool_memfd.h"
#include "rdma_conn.h"
#include "rdma_probe.h"
#include "transport.h"

#define MAX_PAYLOAD (8u << 20)
#define DEADLINE_MS 60000 /* TCG guests are slow */
#define BURST 2000

struct end {
	const char *name;
	struct repl_transport *t;
	struct repl_conn *conn;
	unsigned ups, downs;
	int down_error;
	char down_reason[256];
	unsigned received;
	size_t last_len;
	uint8_t *last;
	uint32_t next_seq; /* burst: the sequence number expected next */
	bool out_of_order;
	uint8_t *pool;	      /* one-sided page data lands here (a) or goes from here (b) */
	unsigned rounds_seen; /* one-sided rounds whose message arrived */
};

static struct end a = { .name = "a" }, b = { .name = "b" };

static struct event_base *base;

/* ---- One-sided page data: the pools and what each round must have placed ---- */
#define PAGE 4096u
#define BLOCK_FRAMES 64u		    /* 256 KiB registration blocks */
#define POOL_FRAMES (16 * BLOCK_FRAMES + 2) /* and a short last block of 2 frames */
#define POOL_BYTES ((size_t)POOL_FRAMES * PAGE)
#define IN_FLIGHT 4u		       /* rounds under way at once */
#define SLOT_FRAMES (4 * BLOCK_FRAMES) /* each in-flight round's own area */
#define SCATTERED 40u		       /* pages in the scattered round */
#define ROUND_MAGIC 0x6f6e6531u

/* A round's message; what a checks at it is in landed_checks[round % IN_FLIGHT]. */
struct round_msg {
	uint32_t magic;
	uint32_t round;
};

struct landed_check {
	size_t dst, src, len; /* offsets into a's and b's pools */
};

static struct landed_check landed_checks[IN_FLIGHT][SCATTERED];
static unsigned n_checks[IN_FLIGHT];
static unsigned landed_bad;
static char landed_bad_what[160];

static void check_round(struct end *e, const struct round_msg *m);

static void on_up(struct repl_conn *conn, bool inbound, void *arg)
{
	struct end *e = arg;

	e->conn = conn;
	e->ups++;
}

static void on_receive(struct repl_conn *conn, const uint8_t *payload, size_t len, void *arg)
{
	struct end *e = arg;
	uint32_t seq;

	e->received++;
	if (len == sizeof(struct round_msg) &&
	    ((const struct round_msg *)payload)->magic == ROUND_MAGIC)
		check_round(e, (const struct round_msg *)payload);
	if (len >= sizeof(seq)) {
		memcpy(&seq, payload, sizeof(seq));
		if (seq != e->next_seq)
			e->out_of_order = true;
		e->next_seq = seq + 1;
	}
	free(e->last);
	e->last = xmalloc(len);
	memcpy(e->last, payload, len);
	e->last_len = len;
}

static void on_down(struct repl_conn *conn, int error, const char *reason, void *arg)
{
	struct end *e = arg;

	if (conn == e->conn)
		e->conn = NULL;
	e->downs++;
	e->down_error = error;
	snprintf(e->down_reason, sizeof(e->down_reason), "%s", reason);
}

static const struct repl_transport_callbacks callbacks = {
	.conn_up = on_up,
	.receive = on_receive,
	.conn_down = on_down,
};

/* Runs the loop until cond(arg) or the deadline; false on the deadline. */
static bool run_until(bool (*cond)(void *), void *arg)
{
	uint64_t end = clock_now_ms() + DEADLINE_MS;

	while (!cond(arg)) {
		if (clock_now_ms() > end)
			return false;
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	}
	return true;
}

static unsigned want_a, want_b;

static bool both_up(void *arg)
{
	return a.conn && b.conn;
}

static bool received(void *arg)
{
	return a.received >= want_a && b.received >= want_b;
}

static bool b_down(void *arg)
{
	return b.downs > 0;
}

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	rng_seed(seed);
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rng();
}

static void test_burst(void)
{
	uint8_t msg[300];

	b.next_seq = 0;
	want_b = b.received + BURST;
	for (uint32_t seq = 0; seq < BURST; seq++) {
		memcpy(msg, &seq, sizeof(seq));
		memset(msg + sizeof(seq), (int)seq, sizeof(msg) - sizeof(seq));
		CHECK_INT("send in the burst", 0, repl_conn_send(a.conn, msg, sizeof(msg)));
	}
	CHECK(run_until(received, NULL), "b received %u of %u", b.received, want_b);
	CHECK(!b.out_of_order, "the burst arrived out of order");
	printf("ok: a burst of %u messages (window %u) arrived in order, b sending nothing\n",
	       BURST, RDMA_RECV_BUFS);
}

static void test_ping_pong(void)
{
	uint32_t x = 7;

	for (int i = 0; i < 200; i++) {
		a.next_seq = b.next_seq = x;
		want_b = b.received + 1;
		repl_conn_send(a.conn, &x, sizeof(x));
		if (!run_until(received, NULL))
			break;
		want_a = a.received + 1;
		repl_conn_send(b.conn, &x, sizeof(x));
		if (!run_until(received, NULL))
			break;
	}
	CHECK(a.received >= want_a && b.received >= want_b, "ping-pong stalled");
	printf("ok: 200 round trips\n");
}

static void test_large(size_t len)
{
	uint8_t *p = xmalloc(len);

	fill(p, len, (uint32_t)len);
	want_b = b.received + 1;
	want_a = a.received + 1;
	CHECK_INT("send large a->b", 0, repl_conn_send(a.conn, p, len));
	CHECK_INT("send large b->a", 0, repl_conn_send(b.conn, p, len));
	CHECK(run_until(received, NULL), "large frames of %zu bytes did not arrive", len);
	CHECK(b.last_len == len && memcmp(b.last, p, len) == 0, "b got %zu bytes, not the %zu sent",
	      b.last_len, len);
	CHECK(a.last_len == len && memcmp(a.last, p, len) == 0, "a got %zu bytes, not the %zu sent",
	      a.last_len, len);
	printf("ok: a %zu-byte frame each way, in pieces, intact\n", len);
	free(p);
}

/* At the round's message, every byte written before it is in a's pool. */
static void check_round(struct end *e, const struct round_msg *m)
{
	unsigned slot = m->round % IN_FLIGHT;

	if (m->round != e->rounds_seen && !landed_bad++)
		snprintf(landed_bad_what, sizeof(landed_bad_what),
			 "round %u's message came when round %u was due", m->round, e->rounds_seen);
	for (unsigned i = 0; i < n_checks[slot]; i++) {
		const struct landed_check *c = &landed_checks[slot][i];

		if (memcmp(a.pool + c->dst, b.pool + c->src, c->len) != 0 && !landed_bad++)
			snprintf(landed_bad_what, sizeof(landed_bad_what),
				 "round %u: %zu bytes at a's pool offset %zu are not b's from %zu",
				 m->round, c->len, c->dst, c->src);
	}
	e->rounds_seen++;
}

static void attach_pools(void)
{
	char reason[160] = "";
	void *heap;

	a.pool = pool_memfd_map(POOL_BYTES);
	if (posix_memalign(&heap, PAGE, POOL_BYTES))
		die("heap pool");
	b.pool = heap;
	memset(b.pool, 0, POOL_BYTES);
	CHECK_INT("a attaches its pool", 0,
		  repl_transport_rdma.pool_attach(a.t, a.pool, POOL_BYTES,
						  (uint64_t)BLOCK_FRAMES * PAGE, reason,
						  sizeof(reason)));
	CHECK_INT("b attaches its pool", 0,
		  repl_transport_rdma.pool_attach(b.t, b.pool, POOL_BYTES,
						  (uint64_t)BLOCK_FRAMES * PAGE, reason,
						  sizeof(reason)));
	CHECK(repl_transport_rdma.pool_blocks(a.t) == 17, "a's pool has %u blocks, not 17",
	      repl_transport_rdma.pool_blocks(a.t));
}

/* a opens a landing (what landing_open does): registers its block on first
 * use, and then b's view learns of it (what the RegionUpdate carries). */
static int open_landing(size_t dst, size_t len, struct rdma_block_key *ret)
{
	struct rdma_remote_block desc;
	char reason[160] = "";
	int r;

	r = repl_transport_rdma.pool_use_range(a.t, a.pool + dst, len, ret, reason, sizeof(reason));
	if (r < 0)
		return r;
	if (ret->registered_now) {
		CHECK_INT("describe", 0, repl_transport_rdma.pool_describe(a.t, ret->block, &desc));
		r = repl_transport_rdma.conn_remote_update(b.conn, &desc, reason, sizeof(reason));
		CHECK(r == 0, "b's view refused block %u: %s", ret->block, reason);
	}
	return r;
}

/* One write of len bytes from b's pool at src to a's at dst, checked at the
 * round's message. */
static void add_write(struct repl_remote_write *w, unsigned *n, unsigned slot, size_t dst,
		      size_t src, size_t len)
{
	struct rdma_block_key key;

	CHECK_INT("open a landing", 0, open_landing(dst, len, &key));
	w[*n] = (struct repl_remote_write){
		.src = b.pool + src,
		.block = key.block,
		.generation = key.generation,
		.offset = dst - (size_t)key.block * BLOCK_FRAMES * PAGE,
		.length = len,
	};
	landed_checks[slot][*n] = (struct landed_check){ .dst = dst, .src = src, .len = len };
	fill(b.pool + src, len, (uint32_t)(dst * 31 + src + *n));
	memset(a.pool + dst, 0, len);
	(*n)++;
}

/* Round r: its shape by r % 5, in its slot's own areas of both pools. */
static void send_round(uint32_t r)
{
	struct repl_remote_write w[SCATTERED];
	unsigned slot = r % IN_FLIGHT, n = 0;
	size_t area = (size_t)slot * SLOT_FRAMES * PAGE;
	struct round_msg m = { .magic = ROUND_MAGIC, .round = r };
	char reason[160] = "";
	int rc;

	switch (r % 5) {
	case 0:
		add_write(w, &n, slot, area + 5 * PAGE, area + 9 * PAGE, PAGE);
		break;
	case 1:
		add_write(w, &n, slot, area, area + BLOCK_FRAMES * PAGE, 16 * PAGE);
		break;
	case 2:
		add_write(w, &n, slot, area + 3 * PAGE, area, 17 * PAGE);
		break;
	case 3:
		add_write(w, &n, slot, area + 2 * BLOCK_FRAMES * PAGE, area + BLOCK_FRAMES * PAGE,
			  BLOCK_FRAMES * PAGE);
		break;
	default:
		/* Every other frame on a, every third on b: no two coalesce. */
		for (unsigned i = 0; i < SCATTERED; i++)
			add_write(w, &n, slot, area + 2 * i * PAGE, area + 3 * i * PAGE, PAGE);
		break;
	}
	n_checks[slot] = n;
	rc = repl_transport_rdma.send_after_writes(b.conn, w, n, &m, sizeof(m), reason,
						   sizeof(reason));
	CHECK(rc == 0, "round %u: send_after_writes: %d %s", r, rc, reason);
}

static unsigned rounds_due;

static bool rounds_arrived(void *arg)
{
	return a.rounds_seen >= rounds_due;
}

static void test_one_sided_rounds(uint32_t first, uint32_t rounds)
{
	for (uint32_t r = first; r < first + rounds && !failures; r++) {
		rounds_due = r + 1 > IN_FLIGHT ? r + 1 - IN_FLIGHT : 0;
		if (!run_until(rounds_arrived, NULL)) {
			FAIL("round %u: round %u never arrived", r, rounds_due - 1);
			return;
		}
		send_round(r);
	}
	rounds_due = first + rounds;
	CHECK(run_until(rounds_arrived, NULL), "only %u of %u rounds arrived", a.rounds_seen,
	      rounds_due);
	CHECK(!landed_bad, "%u bad landings, first: %s", landed_bad, landed_bad_what);
	printf("ok: %u rounds of one-sided writes (1 page, 64 KiB, 68 KiB, a 256 KiB block, "
	       "%u scattered pages), %u in flight, each in a's pool when its message came\n",
	       rounds, SCATTERED, IN_FLIGHT);
}

/* Runs the loop a while: what was (not) sent has had time to arrive. */
static bool settle_done;

static void on_settled(evutil_socket_t fd, short what, void *arg)
{
	settle_done = true;
}

static bool settled(void *arg)
{
	return settle_done;
}

static void settle(unsigned ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	settle_done = false;
	event_base_once(base, -1, EV_TIMEOUT, on_settled, NULL, &tv);
	run_until(settled, NULL);
}

/* A write that cannot go is refused before anything is posted. */
static void expect_refused(const char *what, int want, const struct repl_remote_write *w)
{
	struct round_msg m = { .magic = ROUND_MAGIC, .round = 999999 };
	unsigned before = a.received;
	char reason[160] = "";
	int r;

	r = repl_transport_rdma.send_after_writes(b.conn, w, 1, &m, sizeof(m), reason,
						  sizeof(reason));
	CHECK_INT(what, want, r);
	settle(300);
	CHECK(a.received == before, "%s: a received %u messages", what, a.received - before);
	printf("ok: %s refused (%s)\n", what, reason);
}

static void test_one_sided_edges(void)
{
	struct rdma_block_key key;
	struct repl_remote_write w;
	size_t last = (size_t)16 * BLOCK_FRAMES * PAGE;
	uint8_t *before = xmalloc(2 * PAGE);

	/* The short last block takes a 2-frame landing, not a 3-frame one. */
	CHECK(open_landing(last, 3 * PAGE, &key) < 0, "a 3-frame landing in the 2-frame block");
	CHECK_INT("landing in the short block", 0, open_landing(last, 2 * PAGE, &key));
	CHECK(key.block == 16 && key.registered_now, "block %u registered_now %d", key.block,
	      key.registered_now);
	fill(a.pool + last, 2 * PAGE, 77);
	memcpy(before, a.pool + last, 2 * PAGE);
	fill(b.pool, 2 * PAGE, 78);
	w = (struct repl_remote_write){
		.src = b.pool, .block = 16, .generation = key.generation + 1, .length = 2 * PAGE
	};
	expect_refused("a newer generation than b's view holds", -ESTALE, &w);
	w.generation = key.generation - 1;
	expect_refused("an older generation", -ESTALE, &w);
	w.generation = key.generation;
	w.offset = PAGE;
	expect_refused("bytes past the block's end", -ERANGE, &w);
	w.offset = 0;
	w.src = before;
	expect_refused("a source outside b's pool", -ENOENT, &w);
	CHECK(memcmp(a.pool + last, before, 2 * PAGE) == 0, "a refused write changed a's pool");

	/* And the good one lands. */
	n_checks[a.rounds_seen % IN_FLIGHT] = 0;
	w.src = b.pool;
	{
		struct round_msg m = { .magic = ROUND_MAGIC, .round = a.rounds_seen };
		unsigned slot = m.round % IN_FLIGHT;
		char reason[160] = "";

		landed_checks[slot][0] =
			(struct landed_check){ .dst = last, .src = 0, .len = 2 * PAGE };
		n_checks[slot] = 1;
		CHECK_INT("write into the short block", 0,
			  repl_transport_rdma.send_after_writes(b.conn, &w, 1, &m, sizeof(m),
								reason, sizeof(reason)));
		rounds_due = m.round + 1;
		CHECK(run_until(rounds_arrived, NULL), "the short block's round never arrived");
		CHECK(!landed_bad, "%s", landed_bad_what);
	}
	printf("ok: a 2-frame landing in the pool's short last block\n");
	free(before);
}

/* After a reconnect: the same registrations (same domain), a fresh view. */
static void test_one_sided_after_reconnect(const struct rdma_block_key *old)
{
	struct rdma_block_key key;
	struct repl_remote_write w = {
		.src = b.pool, .block = old->block, .generation = old->generation, .length = PAGE
	};
	struct round_msg m = { .magic = ROUND_MAGIC, .round = a.rounds_seen };
	char reason[160] = "";
	int r;

	CHECK(repl_transport_rdma.conn_one_sided(a.conn) &&
		      repl_transport_rdma.conn_one_sided(b.conn),
	      "the new connections do not offer one-sided data");
	r = repl_transport_rdma.pool_use_range(a.t,
					       a.pool + (size_t)old->block * BLOCK_FRAMES * PAGE,
					       PAGE, &key, reason, sizeof(reason));
	CHECK_INT("use after the reconnect", 0, r);
	CHECK(!key.registered_now && key.generation == old->generation && key.rkey == old->rkey,
	      "block %u after the reconnect: registered_now %d, generation %llu (was %llu)",
	      key.block, key.registered_now, (unsigned long long)key.generation,
	      (unsigned long long)old->generation);
	CHECK_INT("send_after_writes before the partner's pool is known", -EOPNOTSUPP,
		  repl_transport_rdma.send_after_writes(b.conn, &w, 1, &m, sizeof(m), reason,
							sizeof(reason)));
	CHECK_INT("b opens its view of a's pool", 0,
		  repl_transport_rdma.conn_remote_open(b.conn, repl_transport_rdma.pool_blocks(a.t),
						       reason, sizeof(reason)));
	{
		struct rdma_remote_block desc;

		for (uint32_t i = 0; i < repl_transport_rdma.pool_blocks(a.t); i++) {
			repl_transport_rdma.pool_describe(a.t, i, &desc);
			if (desc.length)
				CHECK_INT("b's view takes a's block", 0,
					  repl_transport_rdma.conn_remote_update(
						  b.conn, &desc, reason, sizeof(reason)));
		}
	}
	printf("ok: after the reconnect, a's registrations are the same (generation %llu)\n",
	       (unsigned long long)key.generation);
	test_one_sided_rounds(a.rounds_seen, 25);
}

int main(int argc, char **argv)
{
	char reason[192], listen[96], other[96];
	struct rdma_block_key kept_key;
	struct repl_conn *conn;
	uint8_t *big;
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: test_rdma_channel ADDR (an address on an RDMA device)\n");
		return 99;
	}
	snprintf(listen, sizeof(listen), "%s:7471", argv[1]);
	snprintf(other, sizeof(other), "%s:7479", argv[1]);
	if (!rdma_probe(listen, false, reason, sizeof(reason))) {
		printf("skipped: %s\n", reason);
		return 77;
	}
	printf("device: %s\n", reason);
	base = event_base_new();
	if (!base)
		die("event_base_new");
	r = repl_transport_rdma.create(base, &callbacks, &a, MAX_PAYLOAD, &a.t);
	if (r == 0)
		r = repl_transport_rdma.create(base, &callbacks, &b, MAX_PAYLOAD, &b.t);
	if (r == 0)
		r = repl_transport_rdma.listen(a.t, listen, NULL);
	if (r < 0) {
		fprintf(stderr, "ERROR setting up on %s: %s\n", listen, strerror(-r));
		return 99;
	}
	attach_pools();
	/* b dials a; a's inbound end is its conn. */
	CHECK_INT("connect", 0, repl_transport_rdma.connect(b.t, listen, &conn));
	CHECK(run_until(both_up, NULL), "not up: a ups %u, b ups %u, b down: %s", a.ups, b.ups,
	      b.down_reason);
	if (failures)
		return 1;
	printf("ok: connected, b -> a (%s)\n", repl_conn_peer_name(a.conn));

	test_burst();
	test_ping_pong();
	test_large(200 << 10);
	test_large((4u << 20) + 100);

	CHECK(repl_transport_rdma.conn_one_sided(a.conn) &&
		      repl_transport_rdma.conn_one_sided(b.conn),
	      "connections on the pools' device do not offer one-sided data");
	CHECK_INT("b opens its view of a's pool", 0,
		  repl_transport_rdma.conn_remote_open(b.conn, repl_transport_rdma.pool_blocks(a.t),
						       reason, sizeof(reason)));
	test_one_sided_rounds(0, 200);
	test_one_sided_edges();
	CHECK_INT("a block used before the reconnect", 0, open_landing(0, PAGE, &kept_key));

	big = xcalloc(MAX_PAYLOAD + 1);
	CHECK_INT("over max_payload", -EMSGSIZE, repl_conn_send(a.conn, big, MAX_PAYLOAD + 1));
	free(big);
	printf("ok: %u bytes refused with -EMSGSIZE\n", MAX_PAYLOAD + 1);

	repl_conn_close(a.conn);
	a.conn = NULL;
	CHECK(run_until(b_down, NULL), "b never saw a's close");
	CHECK_INT("b's conn_down error", -ECONNRESET, b.down_error);
	printf("ok: a closed, b saw conn_down: %s\n", b.down_reason);

	b.downs = 0;
	CHECK_INT("redial", 0, repl_transport_rdma.connect(b.t, listen, &conn));
	CHECK(run_until(both_up, NULL), "redial not up: %s", b.down_reason);
	want_a = a.received + 1;
	repl_conn_send(b.conn, "again", 5);
	CHECK(run_until(received, NULL), "nothing after the redial");
	printf("ok: redialled, a message after it\n");
	test_one_sided_after_reconnect(&kept_key);

	b.downs = 0;
	CHECK_INT("connect to nobody", 0, repl_transport_rdma.connect(b.t, other, &conn));
	CHECK(run_until(b_down, NULL), "a connect to %s never ended", other);
	printf("ok: connect to %s (nobody listens): conn_down %d: %s\n", other, b.down_error,
	       b.down_reason);

	repl_transport_rdma.destroy(a.t);
	repl_transport_rdma.destroy(b.t);
	event_base_free(base);
	free(a.last);
	free(b.last);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("rdma_channel: all %d checks passed\n", checks);
	return 0;
}
