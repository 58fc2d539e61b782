/* replica/pending.c: each request's callback runs exactly once, with its
 * answer or with TIMEOUT once its own deadline passed (never before it, and
 * in the order of the deadlines whatever order the requests came in with
 * their timeouts), or with the status pending_fail_all gives, in the order
 * sent; an answer to the first request leaves the later ones to time out on
 * time; callbacks may add requests and answer others; a sequence number
 * pending twice is refused. The libevent loop runs for real, on a base with
 * EVENT_BASE_FLAG_PRECISE_TIMER as ftvmd's. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "check.h"
#include "clock.h"
#include "pending.h"

#define MAX_CALLS 64

static struct event_base *base;
static struct pending_table *table;

/* Each callback, in the order they ran. */
static struct call {
	uint64_t seq;
	int status;
	uint64_t at_us;
} calls[MAX_CALLS];
static unsigned n_calls;

struct req {
	uint64_t seq;
	uint64_t sent_us, deadline_us;
	unsigned ran;
	/* Run inside the callback: add this request, answer that one. */
	struct req *add_then;
	uint32_t add_timeout_ms;
	uint64_t answer_then;
};

static void on_done(const CommandComplete *cc, void *arg)
{
	struct req *r = arg;

	r->ran++;
	if (n_calls < MAX_CALLS)
		calls[n_calls++] = (struct call){ r->seq, cc->status, clock_now_us() };
	if (r->add_then) {
		struct req *n = r->add_then;

		n->sent_us = clock_now_us();
		n->deadline_us = n->sent_us + (uint64_t)r->add_timeout_ms * 1000;
		CHECK_INT("add from a callback", 0,
			  pending_add(table, n->seq, r->add_timeout_ms, on_done, n));
	}
	if (r->answer_then) {
		CommandComplete ok = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

		CHECK(pending_complete(table, r->answer_then, &ok),
		      "seq %llu answered from a callback", (unsigned long long)r->answer_then);
	}
}

static void add(struct req *r, uint64_t seq, uint32_t timeout_ms)
{
	memset(r, 0, sizeof(*r));
	r->seq = seq;
	r->sent_us = clock_now_us();
	r->deadline_us = r->sent_us + (uint64_t)timeout_ms * 1000;
	CHECK_INT("pending_add", 0, pending_add(table, seq, timeout_ms, on_done, r));
}

static void answer(uint64_t seq, bool expect)
{
	CommandComplete ok = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

	CHECK(pending_complete(table, seq, &ok) == expect, "answer to seq %llu %s",
	      (unsigned long long)seq, expect ? "found nothing" : "found a request");
}

/* Runs the loop until n_calls reaches want or timeout_ms pass. */
static void run_until_calls(unsigned want, unsigned timeout_ms)
{
	uint64_t end = clock_now_ms() + timeout_ms;

	while (n_calls < want && clock_now_ms() < end)
		event_base_loop(base, EVLOOP_ONCE);
}

static void reset(void)
{
	n_calls = 0;
	memset(calls, 0, sizeof(calls));
}

/* A call with TIMEOUT for r, not before its deadline. */
static void check_timed_out(const char *what, unsigned i, const struct req *r)
{
	CHECK_INT(what, r->seq, calls[i].seq);
	CHECK_INT("its status", FTVM__PARTNER__STATUS__STATUS_TIMEOUT, calls[i].status);
	CHECK(calls[i].at_us >= r->deadline_us, "%s: failed %lld us before its deadline", what,
	      (long long)(r->deadline_us - calls[i].at_us));
	CHECK_INT("its callback ran once", 1, r->ran);
}

static void test_deadline_order(void)
{
	struct req r[4];

	reset();
	add(&r[0], 1, 200);
	add(&r[1], 2, 40);
	add(&r[2], 3, 120);
	add(&r[3], 4, 40);
	CHECK_INT("pending", 4, pending_count(table));
	run_until_calls(4, 2000);
	CHECK_INT("timeouts", 4, n_calls);
	check_timed_out("first to time out: 40 ms", 0, &r[1]);
	check_timed_out("second: the other 40 ms, sent after", 1, &r[3]);
	check_timed_out("third: 120 ms", 2, &r[2]);
	check_timed_out("last: 200 ms", 3, &r[0]);
	CHECK_INT("pending after", 0, pending_count(table));
}

/* The head answered: the timer set for it fails nothing, and the next one
 * still times out on time; an answer after the timeout finds nothing. */
static void test_head_answered(void)
{
	struct req r[3];

	reset();
	add(&r[0], 11, 30);
	usleep(20 * 1000);
	add(&r[1], 12, 60);
	add(&r[2], 13, 60);
	answer(11, true);
	CHECK_INT("the answer's call", 1, n_calls);
	CHECK_INT("its status", FTVM__PARTNER__STATUS__STATUS_OK, calls[0].status);
	run_until_calls(3, 2000);
	CHECK_INT("calls", 3, n_calls);
	check_timed_out("the second", 1, &r[1]);
	check_timed_out("the third", 2, &r[2]);
	CHECK_INT("the answered one ran once", 1, r[0].ran);
	answer(12, false);
	answer(11, false);
}

/* A callback adds a request (with a shorter timeout than one pending) and
 * answers another; a sequence number pending twice is refused. */
static void test_from_callbacks(void)
{
	struct req r[3], later;

	reset();
	memset(&later, 0, sizeof(later));
	add(&r[0], 21, 30);
	add(&r[1], 22, 300);
	add(&r[2], 23, 300);
	r[0].add_then = &later;
	r[0].add_timeout_ms = 50;
	later.seq = 24;
	r[0].answer_then = 23;
	CHECK_INT("seq 22 twice", -EEXIST, pending_add(table, 22, 10, on_done, &r[1]));
	run_until_calls(3, 2000);
	CHECK_INT("calls", 3, n_calls);
	check_timed_out("the first", 0, &r[0]);
	CHECK_INT("then the one it answered", 23, calls[1].seq);
	CHECK_INT("its status", FTVM__PARTNER__STATUS__STATUS_OK, calls[1].status);
	check_timed_out("then the one it added", 2, &later);
	CHECK_INT("pending", 1, pending_count(table));
	answer(22, true);
	CHECK_INT("pending after", 0, pending_count(table));
}

/* pending_fail_all: every request in the order sent, with its status. */
static void test_fail_all(void)
{
	struct req r[40];

	reset();
	for (unsigned i = 0; i < 40; i++)
		add(&r[i], 100 + i * 256, 5000); /* one bucket */
	answer(100 + 7 * 256, true);
	pending_fail_all(table, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, "link down");
	CHECK_INT("calls", 40, n_calls);
	for (unsigned i = 1, j = 0; i < 40; i++, j++) {
		if (j == 7)
			j++;
		CHECK_INT("failed in the order sent", r[j].seq, calls[i].seq);
		CHECK_INT("with the status given",
			  FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE, calls[i].status);
	}
	CHECK_INT("pending after", 0, pending_count(table));
	for (unsigned i = 0; i < 40; i++)
		CHECK_INT("each ran once", 1, r[i].ran);
}

int main(void)
{
	struct event_config *cfg = event_config_new();

	if (!cfg)
		die("event_config_new");
	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	if (!base || pending_table_new(base, &table) < 0)
		die("event base or pending table");

	test_deadline_order();
	test_head_answered();
	test_from_callbacks();
	test_fail_all();

	pending_table_free(table);
	event_base_free(base);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("pending: all %d checks passed\n", checks);
	return 0;
}
