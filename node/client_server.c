/* The client API socket (client_server.h).
 *
 * A connection's life:
 *
 *   open ──the client shuts its sending side (EOF)──> draining
 *     │                                                  │
 *     │ bad frame, unparsable request, I/O error,        │ every call answered,
 *     │ client_server_free() (also from draining),       │ every reply written
 *     │ a hangup while draining (below)                  │
 *     ▼                                                  ▼
 *   closed: reader and bufferevent freed, out of the server's list
 *
 * A closed connection's struct lives on while calls made on it are
 * outstanding: each call holds a reference, so a late client_call_reply()
 * finds bev == NULL and drops its reply instead of touching freed memory.
 * "draining" lets `printf req | socat - UNIX-CONNECT:...` style clients, which
 * shut down their sending side and then wait, still get their answers.
 *
 * A draining client may also close its socket for good (it crashed, or it was
 * done waiting) while calls wait: a reply written then would notice, but a
 * call waiting on the client itself (a read behind its own write pointer)
 * would keep its pointers until that call timed out. So a draining
 * connection with calls outstanding is checked for the peer's hangup
 * (POLLHUP: both directions shut) at EOF and every HANGUP_CHECK_MS after,
 * and closed when it came.
 *
 * A client with CLIENT_CALLS_MAX calls unanswered is not read from until some
 * are answered, and one that leaves output_limit bytes of replies unread is
 * dropped: together they bound the memory one client can pin in the node.
 * Past max_clients, a new connection gets one reply saying so (id 0, which
 * no request has) and is closed.
 *
 * What a client may do is decided once, at accept, from its credentials
 * (SO_PEERCRED, SO_PEERGROUPS): vmm/VMM.md, "Who may do what".
 *
 * Replies in turns. A client with many requests in flight (the asynchronous
 * calls) gets many replies in one turn of the loop: a partner's answer
 * completes a run of page writes. The first reply of a turn to a
 * connection goes at once (a lone call waits for nothing); those that follow
 * in the same turn wait in the connection's cork, by reference, and go at
 * the turn's end in one sendmsg: the server's turn_end, an event made active
 * by that first reply, which runs after the callbacks already due in this
 * turn. What the socket does not take then moves to the bufferevent's
 * output, as any reply's rest does, so replies keep their order.
 *
 * The bufferevent writes; a frame_reader (frame_read.h) reads for it and runs
 * its read and event callbacks. */
#define _GNU_SOURCE /* struct ucred */
#define LOG_SUBSYSTEM "client"

#include "client_server.h"

#include <errno.h>
#include <grp.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pwd.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "frame.h"
#include "frame_read.h"
#include "ftvm_build.h"
#include "log.h"
#include "pb_arena.h"
#include "unix_listen.h"

#define CLIENT_CALLS_MAX 64u
#define CLIENT_BACKLOG 64
/* After accept() failed for want of fds or memory, wait this long before
 * trying again instead of spinning on a listener that stays readable. */
#define ACCEPT_RETRY_MS 1000
#define HANGUP_CHECK_MS 100
/* Replies a turn's end sends in one call (see the top); more go as the
 * socket takes them. */
#define CORK_IOV 64

struct client_conn {
	struct client_server *server; /* NULL once closed */
	struct bufferevent *bev;      /* NULL once closed */
	struct frame_reader *reader;  /* NULL once closed */
	struct event *hangup;	      /* draining with calls outstanding */
	struct client_conn *prev, *next;
	/* Replies in turns (see the top): a reply went this turn; those after
	 * it wait in cork; the next connection on the server's turn list,
	 * which holds a reference. */
	bool turn_sent;
	struct evbuffer *cork;
	struct client_conn *turn_next;
	unsigned refs;	/* one for the open connection, one per outstanding call */
	unsigned calls; /* outstanding calls */
	bool read_eof;	/* the client shut down its sending side */
	bool paused;	/* reading stopped at CLIENT_CALLS_MAX */
	pid_t pid;
	uid_t uid;
	unsigned rights; /* CLIENT_RIGHT_*, from its credentials at accept */
	uint64_t id;	 /* for the owner's bookkeeping, never reused */
};

struct client_call {
	struct client_conn *conn; /* holds a reference; NULL for a call made inside the node */
	uint64_t id;
	pid_t pid;
	/* Kept until answered: the owner may point into it (client_request_fn). */
	const Ftvm__Client__ClientRequest *request;
	/* A call made inside the node (client_call_new_internal): its client
	 * id, and where its reply goes. */
	uint64_t internal_id;
	uid_t internal_uid;
	client_call_reply_fn reply_fn;
	void *reply_arg;
};

/* Ids of clients inside the node: above any a connection gets. */
#define INTERNAL_ID_BASE (UINT64_C(1) << 62)

/* The call is answered: it goes, and its request with it (an internal
 * call's request is its maker's). */
static void call_free(struct client_call *call)
{
	if (call->conn)
		pb_arena_free(&call->request->base);
	free(call);
}

uint64_t client_internal_id_new(void)
{
	static uint64_t next = INTERNAL_ID_BASE;

	return next++;
}

struct client_call *client_call_new_internal(uint64_t client_id, uid_t uid,
					     const Ftvm__Client__ClientRequest *req,
					     client_call_reply_fn fn, void *arg)
{
	struct client_call *call = calloc(1, sizeof(*call));

	if (!call)
		return NULL;
	call->id = req->id;
	call->pid = getpid();
	call->request = req;
	call->internal_id = client_id;
	call->internal_uid = uid;
	call->reply_fn = fn;
	call->reply_arg = arg;
	return call;
}

struct client_server {
	struct event_base *base;
	struct evconnlistener *listener;
	struct event *accept_retry;
	char *path;
	struct unix_listen_id file; /* the socket file we made, so free unlinks only that */
	struct client_server_config config;
	unsigned n_conns; /* open connections */
	bool full_logged; /* a refusal at max_clients was logged since the last close */
	client_request_fn fn;
	client_gone_fn gone;
	void *arg;
	client_tap_fn tap;
	void *tap_arg;
	struct client_conn *conns;
	uint64_t next_id;
	bool closing; /* client_server_free: the owner is stopping, no gone() */
	/* Replies in turns (see the top): the connections that had a reply this
	 * turn, and the event that ends it. */
	struct client_conn *turn_conns;
	struct event *turn_end;
};

static void conn_unref(struct client_conn *conn)
{
	if (--conn->refs == 0)
		free(conn);
}

static void conn_close(struct client_conn *conn)
{
	struct client_server *s = conn->server;

	if (!conn->bev)
		return;
	if (conn->hangup)
		event_free(conn->hangup);
	conn->hangup = NULL;
	frame_reader_free(conn->reader);
	conn->reader = NULL;
	if (conn->cork)
		evbuffer_free(conn->cork); /* its frames with it */
	conn->cork = NULL;
	bufferevent_free(conn->bev);
	conn->bev = NULL;
	if (conn->prev)
		conn->prev->next = conn->next;
	else
		s->conns = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	conn->prev = conn->next = NULL;
	conn->server = NULL;
	s->n_conns--;
	s->full_logged = false;
	if (s->gone && !s->closing)
		s->gone(conn->id, s->arg);
	conn_unref(conn);
}

static size_t corked(const struct client_conn *conn)
{
	return conn->cork ? evbuffer_get_length(conn->cork) : 0;
}

/* Closes a draining connection once nothing is left to send. */
static void conn_maybe_finish(struct client_conn *conn)
{
	if (!conn->bev || !conn->read_eof || conn->calls > 0 || corked(conn) > 0)
		return;
	if (evbuffer_get_length(bufferevent_get_output(conn->bev)) > 0)
		return; /* write_cb comes back when the output is flushed */
	log_debug("client pid %d: done", (int)conn->pid);
	conn_close(conn);
}

static void tap(struct client_conn *conn, bool out, const Ftvm__Client__ClientRequest *req,
		const uint8_t *payload, size_t len)
{
	struct client_server *s = conn->server;

	if (s->tap)
		s->tap(conn->id, conn->pid, out, req, payload, len, s->tap_arg);
}

static void free_frame(const void *data, size_t len, void *arg)
{
	free((void *)data);
}

/* What waits in conn's cork goes: one sendmsg of up to CORK_IOV frames, the
 * rest to the bufferevent's output. Returns -1 when the connection was
 * closed for it. */
static int flush_cork(struct client_conn *conn)
{
	struct evbuffer_iovec vec[CORK_IOV];
	struct iovec iov[CORK_IOV];
	struct msghdr msg = { .msg_iov = iov };
	ssize_t n;
	int k;

	if (corked(conn) == 0)
		return 0;
	k = evbuffer_peek(conn->cork, -1, NULL, vec, CORK_IOV);
	for (int i = 0; i < k && i < CORK_IOV; i++)
		iov[i] = (struct iovec){ .iov_base = vec[i].iov_base, .iov_len = vec[i].iov_len };
	msg.msg_iovlen = (size_t)(k < CORK_IOV ? k : CORK_IOV);
	n = sendmsg(bufferevent_getfd(conn->bev), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n > 0)
		evbuffer_drain(conn->cork, (size_t)n);
	if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
		log_debug("client pid %d: cannot send replies: %s, closing", (int)conn->pid,
			  strerror(errno));
		conn_close(conn);
		return -1;
	}
	if (corked(conn) > 0 &&
	    evbuffer_add_buffer(bufferevent_get_output(conn->bev), conn->cork) < 0) {
		log_debug("client pid %d: cannot queue replies, closing", (int)conn->pid);
		conn_close(conn);
		return -1;
	}
	return 0;
}

/* The turn that sent replies ended: what waits goes. */
static void on_turn_end(evutil_socket_t fd, short what, void *arg)
{
	struct client_server *s = arg;
	struct client_conn *conn;

	while ((conn = s->turn_conns)) {
		s->turn_conns = conn->turn_next;
		conn->turn_next = NULL;
		conn->turn_sent = false;
		if (conn->bev && flush_cork(conn) == 0)
			conn_maybe_finish(conn);
		conn_unref(conn);
	}
}

/* A reply goes to conn this turn: conn joins the turn's list. */
static void turn_note(struct client_conn *conn)
{
	struct client_server *s = conn->server;

	conn->turn_sent = true;
	conn->refs++;
	conn->turn_next = s->turn_conns;
	if (!s->turn_conns)
		event_active(s->turn_end, EV_TIMEOUT, 0);
	s->turn_conns = conn;
}

/* The frame (malloc'd, len bytes) waits in conn's cork for the turn's end,
 * which frees it. */
static int cork_reply(struct client_conn *conn, uint8_t *frame, size_t len)
{
	if (!conn->cork && !(conn->cork = evbuffer_new()))
		return -ENOMEM;
	if (evbuffer_add_reference(conn->cork, frame, len, free_frame, NULL) < 0)
		return -ENOMEM;
	return 0;
}

static void send_reply(struct client_conn *conn, Ftvm__Client__ClientReply *reply)
{
	Ftvm__Client__ClientReply too_big = FTVM__CLIENT__CLIENT_REPLY__INIT;
	size_t len = ftvm__client__client_reply__get_packed_size(reply), done = 0;
	struct evbuffer *out = bufferevent_get_output(conn->bev);
	size_t queued = evbuffer_get_length(out) + corked(conn);
	uint8_t *frame;
	ssize_t n;

	if (queued >= conn->server->config.output_limit) {
		/* It asks and does not read: queueing more would let it grow
		 * the node without bound. */
		log_warning("client pid %d uid %u: %zu bytes of replies unread, at [client] "
			    "output_limit (%zu), dropping it",
			    (int)conn->pid, (unsigned)conn->uid, queued,
			    conn->server->config.output_limit);
		conn_close(conn);
		return;
	}
	if (len > conn->server->config.max_payload) {
		/* The client would refuse the frame and drop the connection; say
		 * what happened instead. */
		log_debug("client pid %d: reply to request %" PRIu64 " is %zu bytes, above %zu",
			  (int)conn->pid, reply->id, len, conn->server->config.max_payload);
		too_big.id = reply->id;
		too_big.status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		too_big.reason = (char *)"reply too large for a frame";
		reply = &too_big;
		len = ftvm__client__client_reply__get_packed_size(reply);
	}
	frame = malloc(FRAME_HEADER_SIZE + len);
	if (!frame)
		goto fail;
	ftvm__client__client_reply__pack(reply, frame + FRAME_HEADER_SIZE);
	frame_seal(frame, len);
	tap(conn, true, NULL, frame + FRAME_HEADER_SIZE, len);
	len += FRAME_HEADER_SIZE;
	/* With nothing queued, write straight away (or at the turn's end):
	 * leaving it to the bufferevent costs one more trip through the event
	 * loop (and two epoll_ctl) on every reply. */
	if (evbuffer_get_length(out) == 0) {
		if (conn->turn_sent) {
			if (cork_reply(conn, frame, len) == 0)
				return;
			free(frame);
			goto fail;
		}
		turn_note(conn);
		n = send(bufferevent_getfd(conn->bev), frame, len, MSG_NOSIGNAL | MSG_DONTWAIT);
		done = n > 0 ? (size_t)n : 0;
	}
	if (done == len) {
		free(frame);
		return;
	}
	/* The rest by reference: a page-sized reply is not copied again. */
	memmove(frame, frame + done, len - done);
	if (evbuffer_add_reference(out, frame, len - done, free_frame, NULL) < 0) {
		free(frame);
		goto fail;
	}
	return;
fail:
	log_debug("client pid %d: cannot queue reply to request %" PRIu64 ", closing",
		  (int)conn->pid, reply->id);
	conn_close(conn);
}

void client_call_reply(struct client_call *call, Ftvm__Client__ClientReply *reply)
{
	struct client_conn *conn = call->conn;

	reply->id = call->id;
	if (!conn) {
		call->reply_fn(reply, call->reply_arg);
		call_free(call);
		return;
	}
	if (conn->bev)
		send_reply(conn, reply);
	else
		log_debug("client pid %d gone, reply to request %" PRIu64 " dropped",
			  (int)call->pid, call->id);
	conn->calls--;
	call_free(call);

	if (conn->bev && conn->paused && conn->calls < CLIENT_CALLS_MAX) {
		conn->paused = false;
		if (frame_reader_enable(conn->reader) < 0) {
			log_debug("client pid %d: cannot read again, closing", (int)conn->pid);
			conn_close(conn);
		} else {
			/* Frames may already wait in the input buffer, and no new
			 * bytes need to come to read them; deferred, so the callback
			 * does not run inside a caller that is itself inside the read
			 * callback. */
			bufferevent_trigger(conn->bev, EV_READ, BEV_TRIG_DEFER_CALLBACKS);
		}
	}
	conn_maybe_finish(conn);
	conn_unref(conn);
}

void client_call_send(struct client_call *call, Ftvm__Client__ClientReply *reply)
{
	reply->id = call->id;
	if (call->conn && call->conn->bev)
		send_reply(call->conn, reply);
}

pid_t client_call_peer_pid(const struct client_call *call)
{
	return call->pid;
}

/* A call made inside the node has every right, for the uid its maker gave. */
uid_t client_call_peer_uid(const struct client_call *call)
{
	return call->conn ? call->conn->uid : call->internal_uid;
}

bool client_call_may(const struct client_call *call, unsigned right)
{
	return !call->conn || (call->conn->rights & right) == right;
}

uint64_t client_call_client_id(const struct client_call *call)
{
	return call->conn ? call->conn->id : call->internal_id;
}

bool client_call_client_gone(const struct client_call *call)
{
	return call->conn && call->conn->bev == NULL;
}

/* The descriptor rides on the reply's first bytes (SCM_RIGHTS), so the reply
 * must be the next thing on the stream: it goes out with sendmsg() here,
 * and only what the socket did not take is left to the bufferevent. */
void client_call_reply_fd(struct client_call *call, Ftvm__Client__ClientReply *reply, int fd)
{
	struct client_conn *conn = call->conn;
	char control[CMSG_SPACE(sizeof(int))] = { 0 };
	struct msghdr msg = { .msg_control = control, .msg_controllen = sizeof(control) };
	struct cmsghdr *cmsg = CMSG_FIRSTHDR(&msg);
	struct iovec iov;
	uint8_t *frame;
	size_t len;
	ssize_t n;

	reply->id = call->id;
	len = ftvm__client__client_reply__get_packed_size(reply);
	if (conn && conn->bev && flush_cork(conn) < 0)
		conn = NULL; /* closed for it */
	if (!conn || !conn->bev || evbuffer_get_length(bufferevent_get_output(conn->bev)) > 0 ||
	    len > conn->server->config.max_payload || !(frame = malloc(FRAME_HEADER_SIZE + len))) {
		Ftvm__Client__ClientReply busy = FTVM__CLIENT__CLIENT_REPLY__INIT;

		busy.status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		busy.reason = (char *)"cannot pass the descriptor now; ask again";
		client_call_reply(call, &busy);
		return;
	}
	ftvm__client__client_reply__pack(reply, frame + FRAME_HEADER_SIZE);
	frame_seal(frame, len);
	tap(conn, true, NULL, frame + FRAME_HEADER_SIZE, len);
	iov = (struct iovec){ .iov_base = frame, .iov_len = FRAME_HEADER_SIZE + len };
	msg.msg_iov = &iov;
	msg.msg_iovlen = 1;
	cmsg->cmsg_level = SOL_SOCKET;
	cmsg->cmsg_type = SCM_RIGHTS;
	cmsg->cmsg_len = CMSG_LEN(sizeof(int));
	memcpy(CMSG_DATA(cmsg), &fd, sizeof(int));
	n = sendmsg(bufferevent_getfd(conn->bev), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (n < 0) {
		log_debug("client pid %d: cannot pass a descriptor: %s", (int)conn->pid,
			  strerror(errno));
		n = 0;
		conn_close(conn);
	} else if ((size_t)n < iov.iov_len) {
		evbuffer_add(bufferevent_get_output(conn->bev), frame + n, iov.iov_len - (size_t)n);
	}
	free(frame);
	/* The reply went out here: account for the call as client_call_reply
	 * does, without sending anything more. */
	conn->calls--;
	call_free(call);
	conn_maybe_finish(conn);
	conn_unref(conn);
}

/* req is the call's from here on. */
static void dispatch(struct client_conn *conn, const Ftvm__Client__ClientRequest *req)
{
	struct client_server *s = conn->server;
	struct client_call *call = calloc(1, sizeof(*call));

	if (!call) {
		log_warning("client pid %d: out of memory for request %" PRIu64 ", closing",
			    (int)conn->pid, req->id);
		pb_arena_free(&req->base);
		conn_close(conn);
		return;
	}
	call->conn = conn;
	call->id = req->id;
	call->pid = conn->pid;
	call->request = req;
	conn->refs++;
	conn->calls++;

	if (req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST__NOT_SET) {
		/* A newer client's request: its oneof member is a field this build
		 * does not know (client.proto's evolution rule). */
		Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

		log_debug("client pid %d: request %" PRIu64 " of a kind this node does not know",
			  (int)conn->pid, req->id);
		reply.status = FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED;
		reply.reason = (char *)"request not known to this node (ftvmd " FTVM_VERSION ")";
		client_call_reply(call, &reply);
		return;
	}
	s->fn(call, req, s->arg);
}

/* Handles the first frame in the input buffer. Returns 1 when one was
 * handled, 0 when a whole frame is not there yet, -EBADMSG when the
 * connection was closed for it. */
static int read_one(struct client_conn *conn)
{
	struct evbuffer *in = bufferevent_get_input(conn->bev);
	size_t avail = evbuffer_get_length(in), total, payload_len;
	size_t max_payload = conn->server->config.max_payload;
	Ftvm__Client__ClientRequest *req;
	const uint8_t *payload;
	const char *why;
	uint8_t *buf;
	int r;

	if (avail < FRAME_HEADER_SIZE)
		return 0;
	buf = evbuffer_pullup(in, FRAME_HEADER_SIZE);
	if (!buf)
		goto nomem;
	r = frame_header_check(buf, max_payload, &why);
	if (r < 0)
		goto bad_frame;
	total = FRAME_HEADER_SIZE + (size_t)r;
	if (avail < total)
		return 0;
	buf = evbuffer_pullup(in, (ev_ssize_t)total);
	if (!buf)
		goto nomem;
	r = frame_decode(buf, total, max_payload, &payload, &payload_len, &why);
	if (r < 0)
		goto bad_frame;
	if (r == 0) {
		why = "frame shorter than its header says"; /* cannot happen: total is there */
		goto bad_frame;
	}
	req = (Ftvm__Client__ClientRequest *)pb_arena_unpack(
		&ftvm__client__client_request__descriptor, payload_len, payload);
	tap(conn, false, req, payload, payload_len);
	evbuffer_drain(in, total);
	if (!req) {
		log_warning("client pid %d: request does not parse as a ClientRequest (%zu bytes), "
			    "closing",
			    (int)conn->pid, payload_len);
		conn_close(conn);
		return -EBADMSG;
	}
	dispatch(conn, req);
	return 1;

bad_frame:
	log_warning("client pid %d: bad frame: %s, closing", (int)conn->pid, why);
	conn_close(conn);
	return -EBADMSG;
nomem:
	log_warning("client pid %d: out of memory reading a %zu byte frame, closing",
		    (int)conn->pid, avail);
	conn_close(conn);
	return -ENOMEM;
}

static void read_cb(struct bufferevent *bev, void *ctx)
{
	struct client_conn *conn = ctx;

	/* The callback may answer, and anything it does may close this
	 * connection (even free the server): keep conn alive until we are done
	 * looking at it. */
	conn->refs++;
	while (conn->bev && !conn->paused) {
		if (conn->calls >= CLIENT_CALLS_MAX) {
			log_debug("client pid %d: %u calls outstanding, reading paused",
				  (int)conn->pid, conn->calls);
			conn->paused = true;
			frame_reader_disable(conn->reader);
			break;
		}
		if (read_one(conn) <= 0)
			break;
	}
	conn_unref(conn);
}

static void write_cb(struct bufferevent *bev, void *ctx)
{
	conn_maybe_finish(ctx);
}

/* Closes conn when its client hung up: true then. */
static bool conn_close_if_hung_up(struct client_conn *conn)
{
	struct pollfd p = { .fd = bufferevent_getfd(conn->bev) };

	if (poll(&p, 1, 0) <= 0 || !(p.revents & (POLLHUP | POLLERR)))
		return false;
	log_debug("client pid %d: hung up with %u calls outstanding, closing", (int)conn->pid,
		  conn->calls);
	conn_close(conn);
	return true;
}

static void hangup_cb(evutil_socket_t fd, short what, void *arg)
{
	conn_close_if_hung_up(arg);
}

/* At EOF with calls outstanding: the client may have closed for good. */
static void watch_hangup(struct client_conn *conn)
{
	struct timeval tv = { .tv_sec = 0, .tv_usec = HANGUP_CHECK_MS * 1000 };

	if (conn_close_if_hung_up(conn))
		return;
	conn->hangup = event_new(conn->server->base, -1, EV_PERSIST, hangup_cb, conn);
	if (!conn->hangup || event_add(conn->hangup, &tv) < 0)
		log_debug("client pid %d: cannot watch for its hangup", (int)conn->pid);
}

static void event_cb(struct bufferevent *bev, short what, void *ctx)
{
	struct client_conn *conn = ctx;

	if (what & BEV_EVENT_ERROR) {
		int err = EVUTIL_SOCKET_ERROR();

		log_debug("client pid %d: %s error: %s, closing", (int)conn->pid,
			  what & BEV_EVENT_READING ? "read" : "write", strerror(err));
		conn_close(conn);
		return;
	}
	if (what & BEV_EVENT_EOF) {
		size_t left = evbuffer_get_length(bufferevent_get_input(bev));

		if (left > 0)
			log_debug("client pid %d: closed in the middle of a frame (%zu bytes)",
				  (int)conn->pid, left);
		conn->read_eof = true; /* the reader stopped */
		/* Either may close conn, and the finish free it. */
		if (conn->calls > 0)
			watch_hangup(conn);
		else
			conn_maybe_finish(conn);
	}
}

/* Whether the peer on fd, with credentials cred, is in group gid: its
 * primary group or one of the supplementary groups it had when it connected
 * (SO_PEERGROUPS), or where the kernel cannot say, those of its uid's
 * passwd entry. */
static bool peer_in_group(int fd, const struct ucred *cred, gid_t gid)
{
	gid_t *groups = NULL;
	socklen_t len = 0;
	bool in = false;
	int n = 0, err;

	if (gid == (gid_t)-1)
		return false;
	if (cred->gid == gid)
		return true;
	/* The first call says how much room the list needs; it succeeds when
	 * the peer has no supplementary groups. */
	err = getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, NULL, &len) < 0 ? errno : 0;
	if (err == ERANGE) {
		groups = malloc(len);
		if (groups && getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, groups, &len) == 0)
			n = (int)(len / sizeof(gid_t));
	} else if (err != 0) {
		struct passwd pw, *found = NULL;
		char buf[4096];

		n = NGROUPS_MAX + 1;
		groups = malloc((size_t)n * sizeof(gid_t));
		if (!groups || getpwuid_r(cred->uid, &pw, buf, sizeof(buf), &found) != 0 ||
		    !found || getgrouplist(found->pw_name, found->pw_gid, groups, &n) < 0)
			n = 0;
	}
	for (int i = 0; i < n && !in; i++)
		in = groups[i] == gid;
	free(groups);
	return in;
}

static unsigned peer_rights(const struct client_server *s, int fd, const struct ucred *cred)
{
	unsigned rights = 0;

	if (cred->uid == 0 || cred->uid == geteuid())
		return CLIENT_RIGHT_ADMIN | CLIENT_RIGHT_POINTERS;
	if (peer_in_group(fd, cred, s->config.admin_gid))
		rights |= CLIENT_RIGHT_ADMIN;
	if (peer_in_group(fd, cred, s->config.pointer_gid))
		rights |= CLIENT_RIGHT_POINTERS;
	return rights;
}

/* Tells a client past max_clients why, in a reply it can print (id 0: no
 * request has it), and closes. The reply is small enough for an empty
 * socket buffer; if it does not go, the close alone says it. */
static void refuse_full(struct client_server *s, int fd, const struct ucred *cred)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	uint8_t frame[FRAME_HEADER_SIZE + 256];
	char reason[160];
	size_t len;

	snprintf(reason, sizeof(reason),
		 "the node serves at most %u clients at once ([client] max_clients); try again "
		 "later",
		 s->config.max_clients);
	reply.status = FTVM__PARTNER__STATUS__STATUS_DENIED;
	reply.reason = reason;
	len = ftvm__client__client_reply__get_packed_size(&reply);
	ftvm__client__client_reply__pack(&reply, frame + FRAME_HEADER_SIZE);
	frame_seal(frame, len);
	if (send(fd, frame, FRAME_HEADER_SIZE + len, MSG_NOSIGNAL | MSG_DONTWAIT) < 0)
		log_debug("client pid %d: cannot say why it is refused: %s", (int)cred->pid,
			  strerror(errno));
	/* Once per crowd: a client retrying in a loop must not flood the log. */
	if (!s->full_logged)
		log_warning("client pid %d uid %u refused: %u clients connected, [client] "
			    "max_clients is %u",
			    (int)cred->pid, (unsigned)cred->uid, s->n_conns, s->config.max_clients);
	s->full_logged = true;
	evutil_closesocket(fd);
}

static void accept_cb(struct evconnlistener *listener, evutil_socket_t fd, struct sockaddr *addr,
		      int socklen, void *ctx)
{
	struct client_server *s = ctx;
	struct ucred cred = { .uid = (uid_t)-1, .gid = (gid_t)-1 };
	socklen_t len = sizeof(cred);
	struct client_conn *conn;

	/* Without credentials the client is nobody in particular: it gets no
	 * rights and owns nothing but what uid -1 made. */
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
		log_debug("no credentials for a new client: %s", strerror(errno));
	if (s->n_conns >= s->config.max_clients) {
		refuse_full(s, fd, &cred);
		return;
	}
	conn = calloc(1, sizeof(*conn));
	if (!conn)
		goto fail;
	conn->pid = cred.pid;
	conn->uid = cred.uid;
	conn->rights = peer_rights(s, fd, &cred);
	conn->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!conn->bev)
		goto fail;
	bufferevent_setcb(conn->bev, read_cb, write_cb, event_cb, conn);
	if (bufferevent_enable(conn->bev, EV_WRITE) < 0 ||
	    frame_reader_new(conn->bev, s->config.max_payload, &conn->reader) < 0) {
		bufferevent_free(conn->bev); /* closes fd */
		free(conn);
		log_debug("cannot watch a new client connection");
		return;
	}
	conn->server = s;
	conn->id = ++s->next_id;
	conn->refs = 1;
	conn->next = s->conns;
	if (s->conns)
		s->conns->prev = conn;
	s->conns = conn;
	s->n_conns++;
	log_debug("client pid %d uid %u connected (rights 0x%x)", (int)conn->pid,
		  (unsigned)conn->uid, conn->rights);
	return;
fail:
	log_debug("out of memory for a new client connection");
	free(conn);
	evutil_closesocket(fd);
}

static void accept_retry_cb(evutil_socket_t fd, short what, void *arg)
{
	struct client_server *s = arg;

	evconnlistener_enable(s->listener);
}

static void accept_error_cb(struct evconnlistener *listener, void *ctx)
{
	struct client_server *s = ctx;
	struct timeval tv = { .tv_sec = ACCEPT_RETRY_MS / 1000,
			      .tv_usec = (ACCEPT_RETRY_MS % 1000) * 1000 };
	int err = EVUTIL_SOCKET_ERROR();

	/* The owner is never told of this, so it is said here: clients cannot
	 * connect until it passes (EMFILE, ENOBUFS...). */
	log_warning("accept on %s failed: %s; retrying in %d ms", s->path, strerror(err),
		    ACCEPT_RETRY_MS);
	evconnlistener_disable(listener);
	evtimer_add(s->accept_retry, &tv);
}

int client_server_new(struct event_base *base, const struct client_server_config *config,
		      client_request_fn fn, client_gone_fn gone, void *arg,
		      struct client_server **ret)
{
	const char *path = config ? config->path : NULL;
	struct client_server *s;
	int fd = -1, r;

	if (!base || !path || !fn || !ret || config->max_payload == 0 || config->max_clients == 0 ||
	    config->output_limit == 0)
		return -EINVAL;
	s = calloc(1, sizeof(*s));
	if (!s)
		return -ENOMEM;
	s->base = base;
	s->config = *config;
	s->fn = fn;
	s->gone = gone;
	s->arg = arg;
	s->path = strdup(path);
	if (!s->path) {
		r = -ENOMEM;
		goto fail;
	}
	s->config.path = s->path;
	fd = unix_listen(path, config->mode, config->group, CLIENT_BACKLOG, &s->file);
	if (fd < 0) {
		r = fd;
		goto fail;
	}
	s->accept_retry = evtimer_new(base, accept_retry_cb, s);
	s->turn_end = event_new(base, -1, 0, on_turn_end, s);
	if (!s->accept_retry || !s->turn_end) {
		r = -ENOMEM;
		goto fail;
	}
	/* backlog 0: already listening. */
	s->listener = evconnlistener_new(base, accept_cb, s,
					 LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (!s->listener) {
		r = -ENOMEM;
		goto fail;
	}
	evconnlistener_set_error_cb(s->listener, accept_error_cb);
	log_debug("listening on %s", path);
	*ret = s;
	return 0;

fail:
	if (s->accept_retry)
		event_free(s->accept_retry);
	if (s->turn_end)
		event_free(s->turn_end);
	if (fd >= 0) {
		unix_listen_unlink(path, &s->file);
		close(fd);
	}
	free(s->path);
	free(s);
	return r;
}

void client_server_free(struct client_server *s)
{
	if (!s)
		return;
	s->closing = true;
	while (s->conns)
		conn_close(s->conns);
	on_turn_end(-1, 0, s); /* each closed: drops the list's references */
	event_free(s->turn_end);
	if (s->listener)
		evconnlistener_free(s->listener);
	if (s->accept_retry)
		event_free(s->accept_retry);
	/* Only our own file: a successor may already have replaced it. */
	unix_listen_unlink(s->path, &s->file);
	free(s->path);
	free(s);
}

void client_server_set_tap(struct client_server *s, client_tap_fn fn, void *arg)
{
	s->tap = fn;
	s->tap_arg = arg;
}
