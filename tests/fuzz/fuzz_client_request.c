/* libFuzzer target: a client's bytes on the client API socket, through the
 * node's own server for it (node/client_server.c), in this process: a real
 * unix socket in a scratch directory under /tmp, a real event loop, and per
 * input one client connection that sends the input and shuts down its
 * sending side. That covers what every request goes through before the
 * node acts on it: the frame reader, frame_header_check() and frame_decode(),
 * the ClientRequest unpacking (pb_arena), the refusal of unknown requests,
 * the limit of calls outstanding per client (reading pauses at 64 and
 * resumes), replies in any order, replies to a client that is gone, and the
 * connection's life to its close.
 *
 * What the node then does with a request (node.c's on_client_request and
 * the memory manager's operations behind vmm_client_request) is
 * fuzz_node_request.c's, on a real pair: here the owner's callback is a stub
 * that answers a request with an even id at once and holds one with an odd
 * id until the loop has nothing else to do, which a real node cannot be
 * made to do at will.
 *
 * The input's first byte chooses how the rest is read:
 *   bit 0 clear  the bytes as they are, frame headers and all;
 *   bit 0 set    payloads, each a 16-bit little-endian length and that many
 *                bytes, each sent in a frame made right (so the fuzzer gets
 *                past the checksum to the protobuf and the dispatch).
 * Nothing may crash, leak or hang. Every reply is a valid frame holding a
 * ClientReply to an id the client sent, the connection is given up exactly
 * once, and a client whose frames all hold requests gets one reply each. */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/event.h>

#include "client.pb-c.h"
#include "client_server.h"
#include "frame.h"
#include "fuzz_stream.h"
#include "fuzz_util.h"
#include "log.h"

#define HELD_MAX 256 /* above the server's 64 calls per client */
#define IDS_MAX 4096 /* request ids remembered per input */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct event_base *base;
static struct client_server *server;
static char *sock_path;

/* One input's doings, as the callbacks see them. */
static struct {
	struct client_call *held[HELD_MAX];
	size_t n_held;
	uint64_t ids[IDS_MAX];
	size_t n_ids;
	unsigned requests; /* frames that parsed as a ClientRequest */
	unsigned unparsed; /* frames that did not */
	unsigned replies;  /* reply payloads the server sent */
	unsigned gone;
	bool progress;
} st;

static void answer(struct client_call *call)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

	reply.status = FTVM__PARTNER__STATUS__STATUS_OK;
	reply.reason = (char *)"fuzz";
	client_call_reply(call, &reply);
}

static void on_request(struct client_call *call, const Ftvm__Client__ClientRequest *req, void *arg)
{
	if (!req || req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST__NOT_SET)
		abort(); /* the server answers those itself */
	st.progress = true;
	if (req->id % 2 == 0 || st.n_held == HELD_MAX)
		answer(call);
	else
		st.held[st.n_held++] = call;
}

static void on_gone(uint64_t client_id, void *arg)
{
	st.gone++;
	st.progress = true;
}

static void on_tap(uint64_t client_id, pid_t pid, bool out, const Ftvm__Client__ClientRequest *req,
		   const uint8_t *payload, size_t len, void *arg)
{
	st.progress = true;
	if (out) {
		st.replies++;
		return;
	}
	if (!req) {
		st.unparsed++;
		return;
	}
	st.requests++;
	if (st.n_ids < IDS_MAX)
		st.ids[st.n_ids++] = req->id;
}

static void answer_held(void)
{
	for (size_t i = 0; i < st.n_held; i++)
		answer(st.held[i]);
	st.n_held = 0;
}

static void setup(void)
{
	struct client_server_config c = {
		.mode = 0600,
		.group = (gid_t)-1,
		.admin_gid = (gid_t)-1,
		.pointer_gid = (gid_t)-1,
		.max_clients = 16,
		.output_limit = 64u << 20,
		.max_payload = FRAME_MAX_PAYLOAD_DEFAULT,
	};

	log_set_max_level(LOG_LEVEL_ERROR);
	sock_path = fuzz_tmp_path("client.sock");
	c.path = sock_path;
	base = event_base_new();
	if (!base || client_server_new(base, &c, on_request, on_gone, NULL, &server) < 0)
		abort();
	client_server_set_tap(server, on_tap, NULL);
}

/* Checks the reply frames at the front of buf; returns the bytes used. */
static size_t take_replies(const uint8_t *buf, size_t len, unsigned *ret_n)
{
	size_t used = 0;

	for (;;) {
		const uint8_t *payload;
		size_t plen;
		const char *why;
		Ftvm__Client__ClientReply *reply;
		bool known = false;
		int r = frame_decode(buf + used, len - used, FRAME_MAX_PAYLOAD_DEFAULT, &payload,
				     &plen, &why);

		if (r < 0)
			abort();
		if (r == 0)
			return used;
		reply = ftvm__client__client_reply__unpack(NULL, plen, payload);
		if (!reply)
			abort();
		for (size_t i = 0; i < st.n_ids && !known; i++)
			known = st.ids[i] == reply->id;
		if (!known && st.n_ids < IDS_MAX)
			abort();
		ftvm__client__client_reply__free_unpacked(reply, NULL);
		(*ret_n)++;
		used += (size_t)r;
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	uint8_t *stream, *in = NULL;
	size_t len, sent = 0, in_len = 0, in_cap = 0;
	unsigned received = 0;
	bool eof = false, shut = false, clean;
	int fd;

	if (size < 1)
		return 0;
	if (!server)
		setup();
	memset(&st, 0, sizeof(st));
	stream = fuzz_stream(data, size, &len);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", sock_path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		abort();
	while (!eof || st.gone == 0) {
		ssize_t n;

		st.progress = false;
		if (sent < len) {
			n = send(fd, stream + sent, len - sent, MSG_NOSIGNAL);
			if (n > 0) {
				sent += (size_t)n;
				st.progress = true;
			} else if (n < 0 && errno != EAGAIN) {
				sent = len; /* the server closed: nothing more goes */
			}
		} else if (!shut) {
			shutdown(fd, SHUT_WR);
			shut = true;
			st.progress = true;
		}
		event_base_loop(base, EVLOOP_NONBLOCK);
		while (!eof) {
			n = fuzz_recv_more(fd, &in, &in_len, &in_cap);
			if (n < 0 && errno == EAGAIN)
				break;
			if (n <= 0) {
				eof = true;
				break;
			}
			st.progress = true;
		}
		if (st.progress)
			continue;
		if (st.n_held) {
			answer_held();
			continue;
		}
		/* Nothing moved: wait a little for the kernel, not a busy spin. */
		poll(&(struct pollfd){ .fd = fd, .events = POLLIN }, 1, 1);
	}
	answer_held(); /* after the close: their replies are dropped */
	/* Framed payloads that all parse end in a clean drain: every reply
	 * whole. A close for a bad frame or request may cut the last one. */
	clean = (data[0] & 1) && !st.unparsed;
	if (take_replies(in, in_len, &received) != in_len && clean)
		abort();
	if (st.gone != 1 || received > st.replies || received > st.requests ||
	    (clean && received != st.requests))
		abort();
	event_base_loop(base, EVLOOP_NONBLOCK);
	close(fd);
	free(in);
	free(stream);
	return 0;
}
