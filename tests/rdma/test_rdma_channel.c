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
 * connect to a port nobody listens on ends in conn_down. Exit 0 pass, 1 fail,
 * 77 no usable RDMA device, 99 setup error. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "../unit/check.h"
#include "clock.h"
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
};

static struct event_base *base;

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

static struct end a = { .name = "a" }, b = { .name = "b" };
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

int main(int argc, char **argv)
{
	char reason[192], listen[96], other[96];
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
		r = repl_transport_rdma.listen(a.t, listen);
	if (r < 0) {
		fprintf(stderr, "ERROR setting up on %s: %s\n", listen, strerror(-r));
		return 99;
	}
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
