/* ftvm-bench-channel: the round trip of one request and its CommandComplete
 * over the partner channel (TCP backend, libevent, protobuf, checksummed
 * frames), against the floor: a bare blocking TCP ping-pong of the same byte
 * counts on loopback. Each side of each test runs in its own process, as two
 * nodes would. Prints p50 and p99 of both and their ratio. */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "frame.h"
#include "session.h"

struct bench {
	unsigned count;
	unsigned warmup;
	uint64_t *samples_us;
	unsigned done;
	uint64_t sent_us;
	struct repl_session *s;
	struct event_base *base;
	size_t request_bytes, reply_bytes; /* wire sizes, for the floor */
};

static uint16_t free_port(void)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	int fd = socket(AF_INET, SOCK_STREAM, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 ||
	    getsockname(fd, (struct sockaddr *)&sin, &len) < 0) {
		perror("free port");
		exit(1);
	}
	close(fd);
	return ntohs(sin.sin_port);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

static uint64_t percentile(uint64_t *sorted, unsigned n, double p)
{
	unsigned i = (unsigned)(p * (n - 1) + 0.5);

	return sorted[i];
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
		fprintf(stderr, "request failed: %s\n", cc->reason);
		exit(1);
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
	if (repl_session_request(b->s, &env, 5000, on_done, b) < 0) {
		fprintf(stderr, "request: link down\n");
		exit(1);
	}
}

static void on_link(struct repl_session *s, bool up, const char *reason, void *arg)
{
	struct bench *b = arg;

	if (up && b->samples_us && b->done == 0)
		send_next(b);
	else if (!up) {
		fprintf(stderr, "link down during the benchmark: %s\n", reason);
		exit(1);
	}
}

/* The responder: answers every SpaceRequest as a partner's Fig. 10 would. */
static void on_request(struct repl_session *s, Envelope *const *envs, size_t n, void *arg)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	Ftvm__Partner__SpaceStatus space = FTVM__PARTNER__SPACE_STATUS__INIT;

	space.free_bytes = 1u << 30;
	space.total_bytes = 1u << 30;
	cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE;
	cc.space = &space;
	for (size_t i = 0; i < n; i++)
		repl_session_complete(s, envs[i]->seq, &cc);
}

static void run_session(struct bench *b, const char *id, uint16_t listen, uint16_t partner)
{
	static const struct repl_session_callbacks cb = {
		.link_changed = on_link,
		.request = on_request,
	};
	char l[32], p[32];
	struct repl_session_config c = {
		.node_id = id,
		.listen = l,
		.partner = p,
		.transport = &repl_transport_tcp,
		.page_size = 4096,
		.frame_count = 1024,
		.epoch = 1,
		.heartbeat_ms = 100,
		.dead_after_ms = 2000,
		.max_payload = FRAME_MAX_PAYLOAD_DEFAULT,
	};

	snprintf(l, sizeof(l), "127.0.0.1:%u", listen);
	snprintf(p, sizeof(p), "127.0.0.1:%u", partner);
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
	pid_t child = fork();

	if (child == 0) {
		struct bench responder = { 0 };
		run_session(&responder, "b", pb, pa);
		_exit(0);
	}
	run_session(b, "a", pa, pb);
	kill(child, SIGTERM);
	waitpid(child, NULL, 0);
}

/* ---- the floor: bare TCP ping-pong ---- */

static int full_io(int fd, void *buf, size_t len, bool writing)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);
		if (n <= 0)
			return -1;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

static void nodelay(int fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void bench_floor(struct bench *b)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	uint8_t buf[256] = { 0 };
	int lfd = socket(AF_INET, SOCK_STREAM, 0), fd;
	pid_t child;

	if (bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sin, &len) < 0) {
		perror("floor listen");
		exit(1);
	}
	child = fork();
	if (child == 0) {
		int cfd = accept(lfd, NULL, NULL);
		nodelay(cfd);
		while (full_io(cfd, buf, b->request_bytes, false) == 0 &&
		       full_io(cfd, buf, b->reply_bytes, true) == 0)
			;
		_exit(0);
	}
	close(lfd);
	fd = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
		perror("floor connect");
		exit(1);
	}
	nodelay(fd);
	for (unsigned i = 0; i < b->warmup + b->count; i++) {
		uint64_t t0 = clock_now_us();
		if (full_io(fd, buf, b->request_bytes, true) < 0 ||
		    full_io(fd, buf, b->reply_bytes, false) < 0) {
			fprintf(stderr, "floor: connection lost\n");
			exit(1);
		}
		if (i >= b->warmup)
			b->samples_us[i - b->warmup] = clock_now_us() - t0;
	}
	close(fd);
	waitpid(child, NULL, 0);
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
	qsort(samples, n, sizeof(*samples), cmp_u64);
	*ret_p50 = percentile(samples, n, 0.50);
	*ret_p99 = percentile(samples, n, 0.99);
	printf("%-28s p50 %6llu us   p99 %6llu us   (%u round trips)\n", name,
	       (unsigned long long)*ret_p50, (unsigned long long)*ret_p99, n);
}

static void usage(FILE *out)
{
	fprintf(out, "Usage: ftvm-bench-channel [--count N] [--warmup N]\n"
		     "Round trip over the partner channel (TCP) against a bare TCP ping-pong.\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "count", required_argument, NULL, 'n' },
		{ "warmup", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ 0 },
	};
	struct bench channel = { .count = 20000, .warmup = 1000 };
	struct bench floor_ = { 0 };
	uint64_t c50, c99, f50, f99;
	int c;

	while ((c = getopt_long(argc, argv, "n:w:h", options, NULL)) != -1) {
		switch (c) {
		case 'n':
			channel.count = (unsigned)strtoul(optarg, NULL, 10);
			break;
		case 'w':
			channel.warmup = (unsigned)strtoul(optarg, NULL, 10);
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

	printf("request %zu bytes, completion %zu bytes on the wire, loopback\n",
	       channel.request_bytes, channel.reply_bytes);
	bench_floor(&floor_);
	report("bare TCP ping-pong (floor)", floor_.samples_us, floor_.count, &f50, &f99);
	bench_channel(&channel);
	report("partner channel (tcp)", channel.samples_us, channel.count, &c50, &c99);
	printf("ratio channel/floor          p50 %.2fx      p99 %.2fx      (aim: <= 1.5x)\n",
	       (double)c50 / (double)(f50 ? f50 : 1), (double)c99 / (double)(f99 ? f99 : 1));
	free(channel.samples_us);
	free(floor_.samples_us);
	return 0;
}
