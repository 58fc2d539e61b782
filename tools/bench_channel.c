/* ftvm-bench-channel: the round trip of one request and its CommandComplete
 * over the partner channel (the TCP backend, or with --transport rdma the RDMA
 * one; libevent, protobuf, checksummed frames), against the floor: a bare
 * blocking TCP ping-pong of the same byte counts on loopback (for RDMA the
 * floor that counts is perftest's ib_send_lat on the same device, which
 * tests/vm/jobs/bench_rdma.sh runs beside this). Each side of each test runs
 * in its own process, as two nodes would. Prints p50 and p99 of both and
 * their ratio. */
#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "bench_common.h"
#include "clock.h"
#include "frame.h"
#include "free_port.h"
#include "session.h"

struct bench {
	const struct repl_transport_ops *transport;
	const char *addr; /* where the two sessions listen */
	unsigned count;
	unsigned warmup;
	uint64_t *samples_us;
	unsigned done;
	uint64_t sent_us;
	struct repl_session *s;
	struct event_base *base;
	size_t request_bytes, reply_bytes; /* wire sizes, for the floor */
	pid_t responder;		   /* the measuring side's child, 0 in the child */
};

/* Ends the run, the responder too: a measuring side that exits alone
 * leaves its child answering nobody, and whoever waits for it waits on. */
static void __attribute__((noreturn)) fail_run(struct bench *b, const char *what)
{
	fprintf(stderr, "%s\n", what);
	if (b->responder > 0) {
		kill(b->responder, SIGTERM);
		waitpid(b->responder, NULL, 0);
	}
	exit(1);
}

static uint16_t free_port(void)
{
	uint16_t port;
	int r = free_port_pick(&port);

	if (r < 0) {
		fprintf(stderr, "free port: %s\n", strerror(-r));
		exit(1);
	}
	return port;
}

static struct event_base *new_base(void)
{
	struct event_config *cfg = event_config_new();
	struct event_base *base;

	event_config_set_flag(cfg, EVENT_BASE_FLAG_PRECISE_TIMER);
	base = event_base_new_with_config(cfg);
	event_config_free(cfg);
	return base;
}

/* ---- the partner channel ---- */

static void send_next(struct bench *b);

static void on_done(const CommandComplete *cc, void *arg)
{
	struct bench *b = arg;
	uint64_t now = clock_now_us();

	if (cc->status != FTVM__PARTNER__STATUS__STATUS_OK) {
		/* Both ends dial at the start, and the session may then swap the
		 * link for the other connection, failing what was pending on the
		 * first (often over RDMA, whose connects take longer): in the
		 * warm-up that request is only sent again. */
		if (b->done < b->warmup &&
		    cc->status == FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE) {
			send_next(b);
			return;
		}
		char what[256];

		snprintf(what, sizeof(what), "request failed: %s", cc->reason);
		fail_run(b, what);
	}
	if (b->done >= b->warmup)
		b->samples_us[b->done - b->warmup] = now - b->sent_us;
	b->done++;
	if (b->done == b->warmup + b->count)
		event_base_loopexit(b->base, NULL);
	else
		send_next(b);
}

static void send_next(struct bench *b)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SpaceRequest req = FTVM__PARTNER__SPACE_REQUEST__INIT;

	req.bytes = 4096;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &req;
	b->sent_us = clock_now_us();
	if (repl_session_request(b->s, &env, 5000, on_done, b) < 0)
		fail_run(b, "request: link down");
}

static void on_link(struct repl_session *s, bool up, const char *reason, void *arg)
{
	struct bench *b = arg;

	if (up && b->samples_us && b->done == 0)
		send_next(b);
	else if (!up && b->samples_us) { /* the responder's link ends with the run */
		char what[256];

		snprintf(what, sizeof(what), "link down during the benchmark: %s", reason);
		fail_run(b, what);
	}
}

/* The responder: answers every SpaceRequest as a partner's Fig. 10 would. */
static void on_request(struct repl_session *s, Envelope *const *envs, size_t n, void *arg)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	Ftvm__Partner__SpaceStatus space = FTVM__PARTNER__SPACE_STATUS__INIT;
	struct repl_answer *answers;

	space.free_bytes = 1u << 30;
	space.total_bytes = 1u << 30;
	cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE;
	cc.space = &space;
	answers = calloc(n, sizeof(*answers));
	if (!answers)
		return; /* the requests fail at their deadline */
	for (size_t i = 0; i < n; i++)
		answers[i] = (struct repl_answer){ envs[i]->seq, &cc };
	repl_session_answer(s, answers, n);
	free(answers);
}

static void run_session(struct bench *b, const char *id, uint16_t listen, uint16_t partner)
{
	static const struct repl_session_callbacks cb = {
		.link_changed = on_link,
		.request = on_request,
	};
	char l[80], p[80];
	struct repl_session_config c = {
		.node_id = id,
		.listen = l,
		.partner = p,
		.transport = b->transport,
		.page_size = 4096,
		.frame_count = 1024,
		.epoch = 1,
		.heartbeat_ms = 100,
		.dead_after_ms = 2000,
		.max_payload = FRAME_MAX_PAYLOAD_DEFAULT,
	};

	snprintf(l, sizeof(l), "%s:%u", b->addr, listen);
	snprintf(p, sizeof(p), "%s:%u", b->addr, partner);
	b->base = new_base();
	if (repl_session_new(b->base, &c, &cb, b, &b->s) < 0 || repl_session_start(b->s) < 0) {
		fprintf(stderr, "%s: cannot start the session\n", id);
		exit(1);
	}
	event_base_dispatch(b->base);
	repl_session_free(b->s);
	event_base_free(b->base);
}

static void bench_channel(struct bench *b)
{
	uint16_t pa = free_port(), pb = free_port();
	fflush(stdout); /* or the child prints what is buffered again */
	b->responder = fork();
	if (b->responder < 0) {
		fprintf(stderr, "fork: %s\n", strerror(errno));
		exit(1);
	}

	if (b->responder == 0) {
		struct bench responder = { .transport = b->transport, .addr = b->addr };
		run_session(&responder, "b", pb, pa);
		_exit(0);
	}
	run_session(b, "a", pa, pb);
	kill(b->responder, SIGTERM);
	waitpid(b->responder, NULL, 0);
}

/* ---- the floor: bare TCP ping-pong ---- */

static void bench_floor(struct bench *b)
{
	int r = bench_floor_run(BENCH_FLOOR_TCP, b->request_bytes, b->reply_bytes, b->warmup,
				b->count, b->samples_us);

	if (r < 0) {
		fprintf(stderr, "floor: %s\n", strerror(-r));
		exit(1);
	}
}

/* The frames the channel benchmark sends, so the floor moves as many bytes. */
static void wire_sizes(struct bench *b)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SpaceRequest req = FTVM__PARTNER__SPACE_REQUEST__INIT;
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	Ftvm__Partner__SpaceStatus space = FTVM__PARTNER__SPACE_STATUS__INIT;

	env.version = 1;
	env.sender = "a";
	env.epoch = 1;
	env.seq = 1000;
	req.bytes = 4096;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &req;
	b->request_bytes = FRAME_HEADER_SIZE + protobuf_c_message_get_packed_size(&env.base);
	env.seq = 0;
	env.answers = 1000;
	space.free_bytes = space.total_bytes = 1u << 30;
	cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE;
	cc.space = &space;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE;
	env.command_complete = &cc;
	b->reply_bytes = FRAME_HEADER_SIZE + protobuf_c_message_get_packed_size(&env.base);
}

static void report(const char *name, uint64_t *samples, unsigned n, uint64_t *ret_p50,
		   uint64_t *ret_p99)
{
	bench_percentiles(samples, n, ret_p50, ret_p99);
	printf("%-28s p50 %6llu us   p99 %6llu us   (%u round trips)\n", name,
	       (unsigned long long)*ret_p50, (unsigned long long)*ret_p99, n);
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: ftvm-bench-channel [--count N] [--warmup N] [--transport tcp|rdma]\n"
		     "                          [--addr ADDR]\n"
		     "Round trip over the partner channel against a bare TCP ping-pong.\n"
		     "--addr: where the channel's two ends listen (default 127.0.0.1; for\n"
		     "rdma an address on an RDMA device).\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "transport", required_argument, NULL, 't' },
		{ "addr", required_argument, NULL, 'a' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct bench channel = {
		.transport = &repl_transport_tcp,
		.addr = "127.0.0.1",
		.count = 20000,
		.warmup = 1000,
	};
	char label[40];
	struct bench floor_ = { 0 };
	uint64_t c50, c99, f50, f99;
	int c;

	while ((c = getopt_long(argc, argv, "n:w:t:a:h", options, NULL)) != -1) {
		switch (c) {
		case 'n':
			channel.count = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'w':
			channel.warmup = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 't':
			channel.transport = repl_transport_find(optarg);
			if (!channel.transport) {
				fprintf(stderr,
					"ftvm-bench-channel: no transport '%s' in this build "
					"(tcp%s)\n",
					optarg, repl_transport_find("rdma") ? ", rdma" : "");
				return 2;
			}
			break;
		case 'a':
			channel.addr = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (channel.count == 0) {
		fprintf(stderr, "ftvm-bench-channel: --count must be a positive number\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	wire_sizes(&channel);
	floor_ = channel;
	channel.samples_us = calloc(channel.count, sizeof(uint64_t));
	floor_.samples_us = calloc(channel.count, sizeof(uint64_t));
	if (!channel.samples_us || !floor_.samples_us)
		return 1;

	printf("request %zu bytes, completion %zu bytes on the wire; floor on loopback, "
	       "channel on %s\n",
	       channel.request_bytes, channel.reply_bytes, channel.addr);
	bench_floor(&floor_);
	report("bare TCP ping-pong (floor)", floor_.samples_us, floor_.count, &f50, &f99);
	bench_channel(&channel);
	snprintf(label, sizeof(label), "partner channel (%s)", channel.transport->name);
	report(label, channel.samples_us, channel.count, &c50, &c99);
	printf("ratio channel/floor          p50 %.2fx      p99 %.2fx      (aim: <= 1.5x)\n",
	       (double)c50 / (double)(f50 ? f50 : 1), (double)c99 / (double)(f99 ? f99 : 1));
	free(channel.samples_us);
	free(floor_.samples_us);
	return 0;
}
