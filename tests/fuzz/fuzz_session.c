/* libFuzzer target: a peer's bytes on the partner port, through the
 * session (replica/session.c) in this process: a real TCP listener on
 * loopback, a real event loop, and per input one connection that sends the
 * input and shuts down its sending side. That covers the frame reader, the
 * envelope decoding, the authentication handshake (AuthChallenge,
 * AuthProof), Hello and its checks, heartbeats, completions, RegionUpdate,
 * batches and requests handed up, stale epochs, and the connection's life
 * to its close.
 *
 * The input's first byte chooses:
 *   bit 0        raw bytes or framed payloads (fuzz_stream.h);
 *   bit 1        the session holds a key (the peer must prove it, which a
 *                fuzzer cannot: only the refusals are reached), else none.
 * The request callback answers every request OK, a batch's in one call.
 * Nothing may crash, leak or hang, and whatever the session sends back is
 * whole frames of envelopes, the first an AuthChallenge at epoch 0. */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/event.h>

#include "codec.h"
#include "frame.h"
#include "free_port.h"
#include "fuzz_stream.h"
#include "fuzz_util.h"
#include "log.h"
#include "session.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const char KEY[] = "fuzz fuzz fuzz fuzz fuzz fuzz fuzz fuzz";

static struct event_base *base;
/* [0] without a key, [1] with one; each listens on its own port. */
static struct {
	struct repl_session *s;
	uint16_t port;
	char listen[32], partner[32];
} sessions[2];

static void on_request(struct repl_session *s, Envelope *const *envs, size_t n, void *arg)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	struct repl_answer *answers = calloc(n, sizeof(*answers));

	if (!answers)
		return;
	for (size_t i = 0; i < n; i++)
		answers[i] = (struct repl_answer){ envs[i]->seq, &cc };
	repl_session_answer(s, answers, n);
	free(answers);
}

static uint16_t port(void)
{
	uint16_t p = 0;

	if (free_port_pick(&p) < 0)
		abort();
	return p;
}

static void setup(void)
{
	static const struct repl_session_callbacks cb = { .request = on_request };

	log_set_max_level(LOG_LEVEL_ERROR);
	base = event_base_new();
	if (!base)
		abort();
	for (int i = 0; i < 2; i++) {
		struct repl_session_config c = {
			.node_id = "a",
			.transport = &repl_transport_tcp,
			.page_size = 4096,
			.frame_count = 1024,
			.epoch = 2,
			/* Ticks rarely: an input is over long before. */
			.heartbeat_ms = 10000,
			.dead_after_ms = 60000,
			.max_payload = FRAME_MAX_PAYLOAD_DEFAULT,
			.key = i ? (const uint8_t *)KEY : NULL,
			.key_len = i ? strlen(KEY) : 0,
		};

		sessions[i].port = port();
		snprintf(sessions[i].listen, sizeof(sessions[i].listen), "127.0.0.1:%u",
			 sessions[i].port);
		/* Nobody listens there: its dials fail and back off. */
		snprintf(sessions[i].partner, sizeof(sessions[i].partner), "127.0.0.1:%u", port());
		c.listen = sessions[i].listen;
		c.partner = sessions[i].partner;
		if (repl_session_new(base, &c, &cb, NULL, &sessions[i].s) < 0 ||
		    repl_session_start(sessions[i].s) < 0)
			abort();
	}
}

/* Every frame the session sent is whole and holds an envelope; the first is
 * its challenge, which tells a peer nothing more (epoch 0). */
static void check_sent(const uint8_t *buf, size_t len)
{
	size_t used = 0;
	bool first = true;

	while (used < len) {
		const uint8_t *payload;
		size_t plen;
		const char *why;
		Envelope *env;
		int r = frame_decode(buf + used, len - used, FRAME_MAX_PAYLOAD_DEFAULT, &payload,
				     &plen, &why);

		if (r == 0)
			return; /* cut by the close: what went before was whole */
		if (r < 0 || codec_envelope_decode(payload, plen, &env, NULL, 0) < 0)
			abort();
		if (first &&
		    (env->message_case != FTVM__PARTNER__ENVELOPE__MESSAGE_AUTH_CHALLENGE ||
		     env->epoch != 0))
			abort();
		first = false;
		codec_envelope_free(env);
		used += (size_t)r;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	uint8_t *stream, *in = NULL;
	size_t len, sent = 0, in_len = 0, in_cap = 0;
	bool eof = false, shut = false, progress;
	int fd;

	if (size < 1)
		return 0;
	data = fuzz_data(data);
	if (!base)
		setup();
	stream = fuzz_stream(data, size, &len);
	sa.sin_port = htons(sessions[(data[0] >> 1) & 1].port);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0 || (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS))
		abort();
	while (!eof) {
		ssize_t n;

		progress = false;
		if (sent < len) {
			n = send(fd, stream + sent, len - sent, MSG_NOSIGNAL);
			if (n > 0) {
				sent += (size_t)n;
				progress = true;
			} else if (n < 0 && errno != EAGAIN && errno != ENOTCONN) {
				sent = len; /* the session closed: nothing more goes */
			}
		} else if (!shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
			progress = true;
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		for (;;) {
			n = fuzz_recv_more(fd, &in, &in_len, &in_cap);
			if (n < 0 && (errno == EAGAIN || errno == ENOTCONN))
				break;
			if (n <= 0) {
				eof = true;
				break;
			}
			progress = true;
		}
		if (!progress && !eof)
			poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 1);
	}
	check_sent(in, in_len);
	close(fd);
	/* The session's side of the close, before the next input. */
	event_base_loop(base, EVLOOP_NONBLOCK);
	free(stream);
	free(in);
	return 0;
}
