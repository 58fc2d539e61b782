/* rdma_credits: the credit rule of the RDMA transport's two-sided messages,
 * run on a model of two peers and the wire between them (no device): a
 * sender never fills more receive buffers than the peer posted, and traffic
 * of any shape (one way, both ways, bursts) always drains, so the rule cannot
 * deadlock. Also the connect private data each side announces. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rdma_credits.h"

#define WIRE_MAX 4096

struct msg {
	bool data;
	uint32_t imm; /* credits returned */
};

struct peer {
	struct rdma_credits cr;
	uint32_t posted;	   /* receive buffers posted now */
	unsigned queued;	   /* data messages waiting for credits */
	unsigned received;	   /* data messages received */
	unsigned returns;	   /* credit-only messages sent */
	struct msg wire[WIRE_MAX]; /* to the other peer, in order */
	unsigned head, tail;
};

/* The sender's side of rdma_conn_flush(): data while credits allow, then an
 * explicit return when one is due. */
static void flush(struct peer *p)
{
	while (p->queued && rdma_credits_can_send_data(&p->cr)) {
		p->queued--;
		p->wire[p->tail++ % WIRE_MAX] = (struct msg){ true, rdma_credits_spend(&p->cr) };
	}
	if (rdma_credits_return_due(&p->cr)) {
		p->returns++;
		p->wire[p->tail++ % WIRE_MAX] = (struct msg){ false, rdma_credits_spend(&p->cr) };
	}
}

/* One message from `from` lands at `to`: it takes a posted buffer (there must
 * be one), its credits are granted, the buffer is posted again, and to
 * flushes, as the completion handler does. */
static bool deliver_one(struct peer *from, struct peer *to)
{
	struct msg m;

	if (from->head == from->tail)
		return false;
	m = from->wire[from->head++ % WIRE_MAX];
	CHECK(to->posted > 0, "a SEND arrived with no receive buffer posted (overrun)");
	to->posted--;
	CHECK(rdma_credits_grant(&to->cr, m.imm) == 0, "a return of %u credits was refused", m.imm);
	if (m.data)
		to->received++;
	to->posted++;
	rdma_credits_reposted(&to->cr);
	flush(to);
	return true;
}

static void peer_init(struct peer *p, uint32_t window, uint32_t peer_window)
{
	memset(p, 0, sizeof(*p));
	rdma_credits_init(&p->cr, window, peer_window);
	p->posted = window;
}

/* Runs a and b with the given sends until everything has arrived, choosing
 * at random what happens next. Returns the steps taken; fails on a stall. */
static unsigned run(uint32_t wa, uint32_t wb, unsigned sends_a, unsigned sends_b, unsigned burst)
{
	static struct peer a, b;
	unsigned steps = 0, left_a = sends_a, left_b = sends_b;

	peer_init(&a, wa, wb);
	peer_init(&b, wb, wa);
	for (;;) {
		bool moved = false;

		switch (rng() % 4) {
		case 0: /* a's owner sends */
			if (left_a) {
				unsigned n = 1 + rng() % burst;
				n = n > left_a ? left_a : n;
				left_a -= n;
				a.queued += n;
				flush(&a);
				moved = true;
			}
			break;
		case 1:
			if (left_b) {
				unsigned n = 1 + rng() % burst;
				n = n > left_b ? left_b : n;
				left_b -= n;
				b.queued += n;
				flush(&b);
				moved = true;
			}
			break;
		case 2:
			moved = deliver_one(&a, &b);
			break;
		default:
			moved = deliver_one(&b, &a);
			break;
		}
		steps += moved;
		if (!left_a && !left_b && a.head == a.tail && b.head == b.tail) {
			/* Nothing in flight, nothing more to send: all out, or a
			 * deadlock (flush ran after every event, so what is still
			 * queued can never leave). */
			if (a.queued || b.queued)
				FAIL("stalled: a queued %u (credits %u, owes %u), "
				     "b queued %u (credits %u, owes %u)",
				     a.queued, a.cr.send, a.cr.owed, b.queued, b.cr.send,
				     b.cr.owed);
			break;
		}
		if (steps > 50u * 1000 * 1000) {
			FAIL("no end after %u steps", steps);
			return steps;
		}
	}
	CHECK_INT("a queued at the end", 0, a.queued);
	CHECK_INT("b queued at the end", 0, b.queued);
	CHECK_INT("b received all of a's", sends_a, b.received);
	CHECK_INT("a received all of b's", sends_b, a.received);
	CHECK(a.cr.send + b.cr.owed <= wb, "a's credits and b's debt exceed b's window");
	if (sends_b == 0 && sends_a > wb)
		CHECK(b.returns > 0, "b, sending nothing, never returned credits explicitly");
	return steps;
}

static void test_rule(void)
{
	struct rdma_credits c;

	rdma_credits_init(&c, 8, 4);
	CHECK_INT("starts with the peer's window", 4, c.send);
	CHECK(rdma_credits_can_send_data(&c), "4 credits: data may go");
	rdma_credits_spend(&c);
	rdma_credits_spend(&c);
	rdma_credits_spend(&c);
	CHECK(!rdma_credits_can_send_data(&c), "the last credit is kept for a return");
	CHECK(!rdma_credits_return_due(&c), "nothing owed, no return due");
	for (int i = 0; i < 3; i++)
		rdma_credits_reposted(&c);
	CHECK(!rdma_credits_return_due(&c), "3 owed of a window of 8: not yet");
	rdma_credits_reposted(&c);
	CHECK(rdma_credits_return_due(&c), "4 owed of 8: a return is due");
	CHECK_INT("a SEND carries what is owed", 4, rdma_credits_spend(&c));
	CHECK_INT("and then nothing is", 0, c.owed);
	CHECK_INT("credits left", 0, c.send);
	CHECK(!rdma_credits_return_due(&c), "no credit to send a return with");
	CHECK_INT("a grant within the window", 0, rdma_credits_grant(&c, 4));
	CHECK_INT("a grant past the window", -EPROTO, rdma_credits_grant(&c, 1));
	CHECK_INT("credits after the refused grant", 4, c.send);
}

static void test_traffic(void)
{
	run(32, 32, 5000, 5000, 8);
	run(32, 32, 5000, 0, 40);
	run(32, 32, 0, 5000, 1);
	run(3, 3, 2000, 2000, 3);
	run(3, 4, 3000, 0, 5);
	run(3, 64, 1000, 1000, 100);
	for (int i = 0; i < 200; i++)
		run(3 + rng() % 40, 3 + rng() % 40, rng() % 2000, rng() % 2000, 1 + rng() % 64);
}

static void test_params(void)
{
	struct rdma_params in = { .credits = 32, .buf_size = 128 << 10 }, out;
	uint8_t buf[56] = { 0 };
	const char *why = NULL;

	rdma_params_encode(&in, buf);
	CHECK_INT("decodes (padded as IB CM pads it)", 0,
		  rdma_params_decode(buf, sizeof(buf), &out, &why));
	CHECK_INT("credits", 32, out.credits);
	CHECK_INT("buf_size", 128 << 10, out.buf_size);
	CHECK_INT("none at all", -EBADMSG, rdma_params_decode(NULL, 0, &out, &why));
	CHECK_INT("too short", -EBADMSG, rdma_params_decode(buf, RDMA_PARAMS_SIZE - 1, &out, &why));
	buf[0] = 'X';
	CHECK_INT("bad magic", -EBADMSG, rdma_params_decode(buf, sizeof(buf), &out, &why));
	CHECK_STR("why", "the connect private data is not ftvm's (bad magic)", why);
	buf[0] = 'F';
	buf[2] = RDMA_PARAMS_VERSION + 1;
	CHECK_INT("other version", -EBADMSG, rdma_params_decode(buf, sizeof(buf), &out, &why));
	buf[2] = RDMA_PARAMS_VERSION;
	in.credits = 2;
	rdma_params_encode(&in, buf);
	CHECK_INT("two credits (too few for the return rule)", -EBADMSG,
		  rdma_params_decode(buf, sizeof(buf), &out, &why));
	in.credits = 32;
	in.buf_size = 100;
	rdma_params_encode(&in, buf);
	CHECK_INT("tiny buffers", -EBADMSG, rdma_params_decode(buf, sizeof(buf), &out, &why));
}

int main(void)
{
	rng_seed(0x2545f491u);
	test_rule();
	test_traffic();
	test_params();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("rdma_credits: all %d checks passed\n", checks);
	return 0;
}
