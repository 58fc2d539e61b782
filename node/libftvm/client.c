/* libftvm (ftvm.h): blocking calls over the node's unix socket.
 *
 * Every public call is one ClientRequest out and the ClientReply with the same
 * id back, through call(); adding a request means filling its oneof member,
 * calling call() and copying the answer out. Replies with another id are
 * answers to earlier calls that timed out on this side, and are skipped.
 *
 * Threads: a client may be shared. call() holds c->lock from sending the
 * request to consuming its reply, so the connection state (conn, current,
 * next_id, the pool) is only touched under it; the sockets are set once in
 * ftvm_connect() or ftvm_connect_pair(). The one exception is current, which
 * ftvm_connected_socket() reads without the lock (an atomic load). The reason
 * of a failure is not client state: it lives in thread-local storage (struct
 * last_error), tagged with the client's serial number, so each thread reads
 * the reason of its own last call and no lock is needed to write or read it.
 *
 * Failover (a client of ftvm_connect_pair()): the client knows both nodes'
 * sockets and talks to one at a time. When a call meets the end of its node,
 * the call moves the client to a node that serves before it returns, and
 * what the call returns depends on whether the node can have acted on it
 * (call_locked()):
 *
 *   what the call saw                               acted on?  the call
 *   the connection was dead before the whole        no         is sent again to the
 *     request left (a node decodes whole frames)               new node, and returns
 *   a FENCED or SHUTTING_DOWN refusal               no         its answer
 *   the connection failed after the request left    unknown    returns the failure
 *     (EOF, reset, a bad frame)                                (-ECONNRESET, ...)
 *   PARTNER_UNAVAILABLE, and the node's status      unknown    returns it
 *     says it does not serve now                               (-EHOSTUNREACH)
 *   no reply in time, and the other node serves     unknown    returns it
 *     alone: it took over                                      (-ETIMEDOUT)
 *
 * Pointer calls depend on the node's frame pool: get_pointer() maps the new
 * node's pool before it asks again, and a release reaches the new node, which
 * holds no pointer of this client and refuses it. A node "serves" when its
 * state is solo, or active with its partner linked: an active node whose link
 * is down is still deciding who serves (node/ha/HA.md, "Who survives"), and a
 * write there would fail PARTNER_UNAVAILABLE. Every new connection retires
 * the old node's pool (pool_retire()): this client's pointers went with the
 * old connection, since a node releases what a closed connection held.
 *
 * This is library code linked into other people's programs: it logs nothing,
 * never raises SIGPIPE (MSG_NOSIGNAL) and never trusts the node's bytes. */
#include "ftvm.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.pb-c.h"
#include "client_internal.h"
#include "config.h"
#include "crc32c.h"
#include "frame.h"
#include "reply_read.h"

#define RBUF_MIN 65536u
/* Looking for a node that serves: how often each socket is asked (each
 * status request may take PROBE_TIMEOUT_MS, client_internal.h). */
#define POLL_MS 20
/* How long a connection the node closed is read for the reason it sent
 * first (read_notice()). */
#define NOTICE_WAIT_MS 100

/* The outcome of this thread's last call: on the client numbered serial
 * (0: none yet, or a failed ftvm_connect_pair(), serials start at 1). */
struct last_error {
	uint64_t serial;
	char error[512]; /* room for two socket paths and the reasons */
	bool from_node;	 /* error holds the node's refusal */
};

static _Thread_local struct last_error last_error;
static atomic_uint_fast64_t next_serial = 1;

/* Starts a call on c: this thread's last error is now c's, and empty. */
static void error_reset(const struct ftvm_client *c)
{
	last_error.serial = c->serial;
	last_error.error[0] = '\0';
	last_error.from_node = false;
}

static int fail(const struct ftvm_client *c, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int vfail(const struct ftvm_client *c, int r, const char *fmt, va_list ap)
	__attribute__((format(printf, 3, 0)));

/* Every failure goes through here, so from_node is only true when call()
 * sets it after a refusal. */
static int vfail(const struct ftvm_client *c, int r, const char *fmt, va_list ap)
{
	error_reset(c);
	vsnprintf(last_error.error, sizeof(last_error.error), fmt, ap);
	return r;
}

static int fail(const struct ftvm_client *c, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	r = vfail(c, r, fmt, ap);
	va_end(ap);
	return r;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void say(char *dst, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* snprintf() for reasons, which may be cut short. */
static void say(char *dst, size_t size, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(dst, size, fmt, ap);
	va_end(ap);
}

static void sleep_ms(uint64_t ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000),
			       .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL); /* a signal only shortens a poll interval */
}

/* How far the send timeout may stray from the time a call has left before
 * it is set again: each call would otherwise cost a setsockopt call, for a
 * blocking send that may now end this much past the deadline. */
#define TIMEOUT_SLACK_MS 100

static int set_send_timeout(struct conn *conn, uint64_t ms)
{
	uint64_t *set = &conn->sndtimeo_ms;
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
			      .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	if (*set && ms + TIMEOUT_SLACK_MS >= *set && ms <= *set + TIMEOUT_SLACK_MS)
		return 0;
	if (ms == 0)
		tv.tv_usec = 1000; /* 0 would mean "no timeout" */
	if (setsockopt(conn->fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) < 0)
		return -errno;
	*set = ms ? ms : 1;
	return 0;
}

const char *client_status_name(int status)
{
	static const char *const names[] = {
		[FTVM__PARTNER__STATUS__STATUS_OK] = "OK",
		[FTVM__PARTNER__STATUS__STATUS_DENIED] = "DENIED",
		[FTVM__PARTNER__STATUS__STATUS_NOT_FOUND] = "NOT_FOUND",
		[FTVM__PARTNER__STATUS__STATUS_LOCKED] = "LOCKED",
		[FTVM__PARTNER__STATUS__STATUS_NO_SPACE] = "NO_SPACE",
		[FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE] = "PARTNER_UNAVAILABLE",
		[FTVM__PARTNER__STATUS__STATUS_TIMEOUT] = "TIMEOUT",
		[FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH] = "STALE_EPOCH",
		[FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST] = "BAD_REQUEST",
		[FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED] = "UNSUPPORTED",
		[FTVM__PARTNER__STATUS__STATUS_INTERNAL] = "INTERNAL",
		[FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN] = "SHUTTING_DOWN",
		[FTVM__PARTNER__STATUS__STATUS_ABORTED] = "ABORTED",
		[FTVM__PARTNER__STATUS__STATUS_FENCED] = "FENCED",
	};

	if (status < 0 || (size_t)status >= sizeof(names) / sizeof(names[0]) || !names[status])
		return "unknown status";
	return names[status];
}

int client_status_errno(int status)
{
	switch (status) {
	case FTVM__PARTNER__STATUS__STATUS_OK:
		return 0;
	case FTVM__PARTNER__STATUS__STATUS_NOT_FOUND:
		return -ENOENT;
	case FTVM__PARTNER__STATUS__STATUS_LOCKED:
		return -EBUSY;
	case FTVM__PARTNER__STATUS__STATUS_NO_SPACE:
		return -ENOSPC;
	case FTVM__PARTNER__STATUS__STATUS_DENIED:
		return -EACCES;
	case FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE:
		return -EHOSTUNREACH;
	case FTVM__PARTNER__STATUS__STATUS_TIMEOUT:
		return -ETIMEDOUT;
	case FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED:
		return -EOPNOTSUPP;
	case FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST:
		return -EINVAL;
	case FTVM__PARTNER__STATUS__STATUS_ABORTED:
		return -ECANCELED;
	case FTVM__PARTNER__STATUS__STATUS_FENCED:
		return -ESHUTDOWN;
	case FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH:
		return -ESTALE;
	default:
		return -EIO;
	}
}

/* Sets this thread's last error to the node's refusal r (status, reason). */
static int refused(const struct ftvm_client *c, int r, int status, const char *reason)
{
	/* Without the node's words, the meaning of r, or the status's name
	 * where r does not tell it (-EIO stands for several). */
	if (reason && reason[0])
		fail(c, r, "%s", reason);
	else if (r == -EIO)
		fail(c, r, "%s", client_status_name(status));
	else
		fail(c, r, "%s", ftvm_strerror(r));
	last_error.from_node = true;
	return r;
}

static void conn_init(struct conn *conn)
{
	*conn = (struct conn){ .fd = -1, .received_fd = -1 };
}

static void conn_close(struct conn *conn)
{
	if (conn->fd >= 0)
		close(conn->fd);
	if (conn->received_fd >= 0)
		close(conn->received_fd);
	free(conn->rbuf);
	conn_init(conn);
}

/* Connects conn to the node at path; -errno as ftvm_connect() documents. */
static int conn_open(struct conn *conn, const char *path, uint64_t timeout_ms)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int r;

	conn_init(conn);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path); /* checked by the caller */
	conn->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (conn->fd < 0)
		return -errno;
	/* connect() on a unix socket waits while the node's backlog is full
	 * (a hung node), bounded by the send timeout. */
	r = set_send_timeout(conn, timeout_ms);
	if (r < 0)
		goto fail;
	if (connect(conn->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = errno == EAGAIN ? -ETIMEDOUT : -errno;
		goto fail;
	}
	return 0;
fail:
	conn_close(conn);
	return r;
}

int client_send_all(struct ftvm_client *c, struct conn *conn, const uint8_t *buf, size_t len,
		    uint64_t deadline)
{
	size_t off = 0;
	uint64_t now;
	ssize_t n;
	int r;

	while (off < len) {
		now = now_ms();
		if (now >= deadline)
			goto timeout;
		r = set_send_timeout(conn, deadline - now);
		if (r < 0)
			return fail(c, r, "cannot set a send timeout: %s", strerror(-r));
		n = send(conn->fd, buf + off, len - off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				goto timeout;
			r = -errno;
			if (off > 0)
				conn->broken = true;
			if (r == -EPIPE || r == -ECONNRESET) {
				conn->broken = true;
				return fail(c, -ECONNRESET, "the node closed the connection");
			}
			return fail(c, r, "cannot send to the node: %s", strerror(-r));
		}
		off += (size_t)n;
	}
	return 0;
timeout:
	/* Half a frame on the wire: the node would read the next request as
	 * its rest. */
	if (off > 0)
		conn->broken = true;
	return fail(c, -ETIMEDOUT, "the node did not take the request within %d s",
		    CALL_TIMEOUT_MS / 1000);
}

/* recv() that also takes a descriptor the node passes (SCM_RIGHTS). */
static ssize_t recv_with_fd(struct conn *conn)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct iovec iov = { .iov_base = conn->rbuf + conn->rlen,
			     .iov_len = conn->rcap - conn->rlen };
	struct msghdr msg = { .msg_iov = &iov,
			      .msg_iovlen = 1,
			      .msg_control = control,
			      .msg_controllen = sizeof(control) };
	ssize_t n = recvmsg(conn->fd, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);

	for (struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL; cm;
	     cm = CMSG_NXTHDR(&msg, cm)) {
		if (cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_RIGHTS)
			continue;
		if (conn->received_fd >= 0)
			close(conn->received_fd);
		memcpy(&conn->received_fd, CMSG_DATA(cm), sizeof(int));
	}
	return n;
}

/* Waits until conn has bytes to read (or is closed) for at most ms.
 * poll() rather than a blocking recvmsg(): the node's read of our request
 * wakes whoever sleeps on the socket with "writable again", and a sleeper
 * in recvmsg() wakes for that too, a context switch on the node's CPU
 * before it has passed the request on; poll() sleeps for POLLIN only. */
static int wait_readable(struct conn *conn, uint64_t ms)
{
	struct pollfd pfd = { .fd = conn->fd, .events = POLLIN };
	int n = poll(&pfd, 1, ms > INT_MAX ? INT_MAX : (int)ms);

	if (n < 0)
		return -errno;
	return n == 0 ? -ETIMEDOUT : 0;
}

/* Reads until rbuf starts with a whole, valid frame. Returns its length and
 * sets *ret_payload and *ret_len, or -errno with why saying what happened
 * (this thread's last error is left alone: the asynchronous calls keep the
 * reason with their requests). A deadline of 0 does not wait: -EAGAIN when
 * no whole frame is there now. */
int client_recv_frame(struct ftvm_client *c, struct conn *conn, uint64_t deadline,
		      const uint8_t **ret_payload, size_t *ret_len, char *why, size_t why_size)
{
	const char *bad_why;
	uint64_t now;
	size_t need;
	ssize_t n;
	int r;

	for (;;) {
		need = FRAME_HEADER_SIZE;
		if (conn->rlen >= FRAME_HEADER_SIZE) {
			r = frame_header_check(conn->rbuf, c->max_payload, &bad_why);
			if (r < 0)
				goto bad;
			need = FRAME_HEADER_SIZE + (size_t)r;
			if (conn->rlen >= need) {
				r = frame_decode(conn->rbuf, conn->rlen, c->max_payload,
						 ret_payload, ret_len, &bad_why);
				if (r < 0)
					goto bad;
				if (r > 0)
					return r;
			}
		}
		if (need > conn->rcap) {
			size_t cap = need < RBUF_MIN ? RBUF_MIN : need;
			uint8_t *p = realloc(conn->rbuf, cap);

			if (!p) {
				say(why, why_size, "out of memory for a %zu byte reply", need);
				return -ENOMEM;
			}
			conn->rbuf = p;
			conn->rcap = cap;
		}
		if (deadline != 0) {
			now = now_ms();
			if (now >= deadline)
				goto timeout;
			r = wait_readable(conn, deadline - now);
			if (r == -EINTR)
				continue;
			if (r == -ETIMEDOUT)
				goto timeout;
			if (r < 0) {
				say(why, why_size, "cannot wait for the node's reply: %s",
				    strerror(-r));
				return r;
			}
		}
		n = recv_with_fd(conn);
		if (n == 0) {
			conn->broken = true;
			say(why, why_size, "the node closed the connection");
			return -ECONNRESET;
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK) {
				if (deadline != 0)
					continue;
				say(why, why_size, "no whole reply yet");
				return -EAGAIN;
			}
			r = -errno;
			conn->broken = true;
			if (r == -ECONNRESET)
				say(why, why_size, "the node closed the connection");
			else
				say(why, why_size, "cannot receive from the node: %s",
				    strerror(-r));
			return r;
		}
		conn->rlen += (size_t)n;
	}
bad:
	/* Where the next frame starts is unknown now. */
	conn->broken = true;
	conn->garbled = true;
	say(why, why_size, "bad reply frame from the node: %s", bad_why);
	return -EBADMSG;
timeout:
	say(why, why_size, "no reply from the node within %d s", CALL_TIMEOUT_MS / 1000);
	return -ETIMEDOUT;
}

/* client_recv_frame(), waiting until deadline, its failure this thread's
 * last error. */
static int recv_frame(struct ftvm_client *c, struct conn *conn, uint64_t deadline,
		      const uint8_t **ret_payload, size_t *ret_len)
{
	char why[sizeof(last_error.error)];
	int r = client_recv_frame(c, conn, deadline, ret_payload, ret_len, why, sizeof(why));

	return r < 0 ? fail(c, r, "%s", why) : r;
}

void client_consume(struct conn *conn, size_t len)
{
	memmove(conn->rbuf, conn->rbuf + len, conn->rlen - len);
	conn->rlen -= len;
}

/* A reply on conn whose id is not the one a call waits for: the answer to a
 * request submitted with ftvm_submit_*(), which keeps it for ftvm_reap(), or
 * to an earlier call that timed out here, which nobody waits for. */
static void other_reply(struct ftvm_client *c, struct conn *conn, Reply *reply)
{
	if (conn == &c->conn && submit_take_reply(c, reply))
		return;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
}

/* The node closed conn on us: a reply with id 0 that it sent first says why
 * (a client past [client] max_clients). 0 with it, or -errno when there is
 * none; conn is broken either way. Replies to submitted requests read on
 * the way are kept for them. */
static int read_notice(struct ftvm_client *c, struct conn *conn, Reply **ret_reply)
{
	uint64_t deadline = now_ms() + NOTICE_WAIT_MS;
	const uint8_t *payload;
	size_t len;
	Reply *reply;
	int r;

	conn->broken = true;
	for (;;) {
		/* Already in the socket if it was sent: only a moment's wait. */
		r = recv_frame(c, conn, deadline, &payload, &len);
		if (r < 0)
			return r;
		reply = ftvm__client__client_reply__unpack(NULL, len, payload);
		client_consume(conn, (size_t)r);
		if (!reply)
			return -EBADMSG;
		if (reply->id == 0) {
			*ret_reply = reply;
			return 0;
		}
		other_reply(c, conn, reply);
	}
}

/* Sends req on conn (its id is set here) and reads until the reply with the
 * same id, whatever its status, or a reply with id 0: the node's reason for
 * closing the connection, which ends it. *ret_sent says whether the whole request
 * left: until it did, the node cannot have acted on it (it decodes whole
 * frames only). On the client's own connection, a submitted request's frame
 * that is partly sent goes out whole first, and the replies to submitted
 * requests that come before req's are kept for them (submit.c). */
static int exchange(struct ftvm_client *c, struct conn *conn, Request *req, uint64_t deadline,
		    Reply **ret_reply, bool *ret_sent)
{
	const uint8_t *payload;
	size_t len, payload_len;
	uint8_t *frame;
	Reply *reply;
	int r;

	*ret_sent = false;
	req->id = ++c->next_id;
	len = ftvm__client__client_request__get_packed_size(req);
	if (len > c->max_payload)
		return fail(c, -EMSGSIZE, "request of %zu bytes is above the %zu byte frame limit",
			    len, c->max_payload);
	frame = malloc(FRAME_HEADER_SIZE + len);
	if (!frame)
		return fail(c, -ENOMEM, "out of memory for a %zu byte request", len);
	ftvm__client__client_request__pack(req, frame + FRAME_HEADER_SIZE);
	frame_seal(frame, len);
	r = conn == &c->conn ? submit_flush_partial(c, deadline) : 0;
	if (r == 0)
		r = client_send_all(c, conn, frame, FRAME_HEADER_SIZE + len, deadline);
	free(frame);
	if (r == -ECONNRESET) {
		if (read_notice(c, conn, ret_reply) == 0)
			return 0;
		return fail(c, r, "the node closed the connection");
	}
	if (r < 0)
		return r;
	*ret_sent = true;

	for (;;) {
		r = recv_frame(c, conn, deadline, &payload, &payload_len);
		if (r < 0)
			return r;
		reply = ftvm__client__client_reply__unpack(NULL, payload_len, payload);
		client_consume(conn, (size_t)r);
		if (!reply)
			return fail(c, -EBADMSG, "the node's reply does not parse (%zu bytes)",
				    payload_len);
		if (reply->id == req->id)
			break;
		if (reply->id == 0) {
			conn->broken = true;
			break;
		}
		other_reply(c, conn, reply);
	}
	*ret_reply = reply;
	return 0;
}

static void copy_str(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

/* Asks the node at the end of conn for its status; -errno when it did not
 * answer with one. */
static int conn_status(struct ftvm_client *c, struct conn *conn, uint64_t deadline,
		       struct ftvm_node_status *ret)
{
	Ftvm__Client__StatusRequest status = FTVM__CLIENT__STATUS_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	bool sent;
	int r;

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_STATUS;
	req.status = &status;
	r = exchange(c, conn, &req, deadline, &reply, &sent);
	if (r < 0)
		return r;
	r = client_status_errno(reply->status);
	if (r < 0)
		refused(c, r, reply->status, reply->reason);
	else if (reply->reply_case != FTVM__CLIENT__CLIENT_REPLY__REPLY_STATUS_REPLY)
		r = fail(c, -EBADMSG, "the node answered a status request without its status");
	else
		reply_read_status(reply->status_reply, ret);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

/* Binds conn to the client's session, so the node keeps its session
 * allocations (a node too old to know sessions says UNSUPPORTED: fine). */
static int conn_session(struct ftvm_client *c, struct conn *conn, uint64_t deadline)
{
	Ftvm__Client__SessionRequest session = FTVM__CLIENT__SESSION_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	bool sent;
	int r;

	session.session = c->session;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_SESSION;
	req.session = &session;
	r = exchange(c, conn, &req, deadline, &reply, &sent);
	if (r < 0)
		return r;
	if (reply->status != FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED) {
		r = client_status_errno(reply->status);
		if (r < 0)
			refused(c, r, reply->status, reply->reason);
	}
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

/* Whether a node in this state serves clients; if not, why not. */
static bool serves(const struct ftvm_node_status *st, char *why, size_t why_size)
{
	if (strcmp(st->state, "solo") == 0)
		return true;
	if (strcmp(st->state, "active") == 0) {
		if (strcmp(st->partner_link, "up") == 0)
			return true;
		say(why, why_size, "active, partner link down: deciding who serves");
		return false;
	}
	say(why, why_size, "%s: %s", st->state, st->reason);
	return false;
}

/* Connects conn to the node at sockets[i] if that node serves. Returns 0
 * (conn is open), -EAGAIN when the node answered or took the connection but
 * does not serve, or the -errno of the connect; why says which. */
static int probe(struct ftvm_client *c, int i, uint64_t deadline, struct conn *conn, char *why,
		 size_t why_size)
{
	struct ftvm_node_status st;
	uint64_t now = now_ms();
	int r;

	if (deadline > now + PROBE_TIMEOUT_MS)
		deadline = now + PROBE_TIMEOUT_MS;
	r = conn_open(conn, c->sockets[i], deadline > now ? deadline - now : 0);
	if (r < 0) {
		say(why, why_size, "%s", strerror(-r));
		return r;
	}
	r = conn_status(c, conn, deadline, &st);
	if (r < 0) {
		say(why, why_size, "no status: %s", last_error.error);
		conn_close(conn);
		return -EAGAIN;
	}
	if (!serves(&st, why, why_size)) {
		conn_close(conn);
		return -EAGAIN;
	}
	if (c->in_session && conn_session(c, conn, deadline) < 0) {
		say(why, why_size, "its session not taken: %s", last_error.error);
		conn_close(conn);
		return -EAGAIN;
	}
	return 0;
}

/* Unmaps the frame pool of the node the client leaves. Its address range
 * stays reserved with no access until ftvm_disconnect(): a pointer into it
 * that the caller still uses faults at once, instead of reaching whatever
 * mmap() puts there next (the next node's pool, as often as not, where it
 * would land on another page without its lock). */
static void pool_retire(struct ftvm_client *c)
{
	struct retired_pool *p;

	if (!c->pool)
		return;
	p = realloc(c->retired, (c->n_retired + 1) * sizeof(*p));
	if (p)
		c->retired = p;
	if (p && mmap(c->pool, 2 * c->pool_stride, PROT_NONE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED | MAP_NORESERVE, -1, 0) != MAP_FAILED)
		c->retired[c->n_retired++] = (struct retired_pool){ c->pool, 2 * c->pool_stride };
	else
		munmap(c->pool, 2 * c->pool_stride);
	c->pool = NULL;
	c->pool_size = c->pool_stride = 0;
}

/* Closes the connection, and with it this client's pointers on the node.
 * Requests submitted with ftvm_submit_*() that were on it learn their fate
 * first (submit_conn_leaving()): those that wholly left and got no answer
 * fail with r, saying that the node at the socket left did what (cause;
 * NULL: as the asynchronous calls saw the connection fail), their outcome
 * unknown; the rest are sent again after the move. drain_ms: how long the
 * node, alive, may take to answer them before. */
static void drop(struct ftvm_client *c, int r, const char *what, const char *cause,
		 uint64_t drain_ms)
{
	if (c->current >= 0 && c->conn.fd >= 0)
		submit_conn_leaving(c, r, what, cause, drain_ms);
	conn_close(&c->conn);
	pool_retire(c);
	__atomic_store_n(&c->current, -1, __ATOMIC_RELEASE);
}

static void adopt(struct ftvm_client *c, int i, struct conn *conn)
{
	c->conn = *conn;
	c->last = i;
	c->generation++;
	__atomic_store_n(&c->current, i, __ATOMIC_RELEASE);
}

/* Looks for a node that serves, sockets[first] before the other, every
 * POLL_MS until deadline; with give_up, stops after a round in which no node
 * could be reached at all. On 0 the client talks to the node found (the
 * caller dropped the connection before). Otherwise -ETIMEDOUT (a node was
 * reached but none served) or the first socket's connect error, with what
 * each node said in why. Either way the submitted requests the last drop()
 * left waiting learn where the client went (submit_conn_moved()). */
static int search(struct ftvm_client *c, int first, uint64_t deadline, bool give_up, char *why,
		  size_t why_size)
{
	char said[2][200] = { "", "" };
	int i, k, r, first_error = 0;
	bool reached;
	struct conn conn;

	for (;;) {
		reached = false;
		for (k = 0; k < c->n_sockets; k++) {
			i = k == 0 ? first : 1 - first;
			r = probe(c, i, deadline, &conn, said[i], sizeof(said[i]));
			if (r == 0) {
				adopt(c, i, &conn);
				submit_conn_moved(c, NULL);
				return 0;
			}
			if (r == -EAGAIN)
				reached = true;
			else if (k == 0)
				first_error = r;
		}
		if ((give_up && !reached) || now_ms() + POLL_MS >= deadline)
			break;
		sleep_ms(POLL_MS);
	}
	say(why, why_size, "%s: %s; %s: %s", c->sockets[first], said[first], c->sockets[1 - first],
	    said[1 - first]);
	submit_conn_moved(c, why);
	return reached || !first_error ? -ETIMEDOUT : first_error;
}

/* The node at sockets[left] is gone (or no longer serves): looks for one
 * that does, the other node first, for up to a call's timeout. r, what,
 * cause and drain_ms as drop(). */
static int move(struct ftvm_client *c, int left, int r, const char *what, const char *cause,
		uint64_t drain_ms, char *why, size_t why_size)
{
	drop(c, r, what, cause, drain_ms);
	return search(c, 1 - left, now_ms() + CALL_TIMEOUT_MS, false, why, why_size);
}

int client_move(struct ftvm_client *c, int r, const char *what, const char *cause,
		uint64_t drain_ms, char *why, size_t why_size)
{
	int left = c->current >= 0 ? c->current : c->last;

	return move(c, left, r, what, cause, drain_ms, why, why_size);
}

int client_search(struct ftvm_client *c, char *why, size_t why_size)
{
	/* The cause: whatever saw the connection fail (submit.c) knows it. */
	drop(c, -ECONNRESET, "went away during the call", NULL, 0);
	return search(c, 1 - c->last, now_ms() + CALL_TIMEOUT_MS, false, why, why_size);
}

/* The request of a call never reached a node that could act on it (the
 * connection was dead before it left, or the node refused it FENCED or
 * SHUTTING_DOWN): move, and return -ENOTCONN saying so; the caller sends the
 * request again when it may. Submitted requests still on the connection get
 * their answers (a node that refused is alive) or fail as in flight. */
static int moved_unsent(struct ftvm_client *c, const char *cause, bool refused_by_node)
{
	const char *what =
		refused_by_node ? "refused the call" : "was gone before the call reached it";
	char why[300];
	int left = c->current;

	if (move(c, left, -ECONNRESET,
		 refused_by_node ? "stopped serving during the call" : "went away during the call",
		 cause, refused_by_node ? DRAIN_MS : 0, why, sizeof(why)) < 0)
		return fail(c, -ENOTCONN,
			    "node at %s %s (%s), and no node served within %d s (%s): nothing was "
			    "applied; the next call looks again",
			    c->sockets[left], what, cause, CALL_TIMEOUT_MS / 1000, why);
	return fail(c, -ENOTCONN,
		    "node at %s %s (%s); the client now talks to %s: nothing was applied, call "
		    "again",
		    c->sockets[left], what, cause, c->sockets[c->current]);
}

/* The request of a call left, and its node is gone or does not serve now:
 * move, and return r saying that the outcome is unknown. */
static int moved_in_flight(struct ftvm_client *c, int r, const char *what, const char *cause,
			   bool from_node)
{
	char why[300];
	int left = c->current;

	/* A node that does not serve is alive: it may still answer submitted
	 * requests. */
	if (move(c, left, r, what, cause, c->conn.broken ? 0 : DRAIN_MS, why, sizeof(why)) < 0)
		r = fail(c, r,
			 "node at %s %s (%s), and no node served within %d s (%s): the call's "
			 "outcome is unknown, check or retry; the next call looks again",
			 c->sockets[left], what, cause, CALL_TIMEOUT_MS / 1000, why);
	else
		r = fail(c, r,
			 "node at %s %s (%s); the client now talks to %s: the call's outcome is "
			 "unknown, check or retry",
			 c->sockets[left], what, cause, c->sockets[c->current]);
	last_error.from_node = from_node;
	return r;
}

/* A pair client's node did not answer in time: whether the other node serves
 * alone, so it took over from this one (a hung node, ha/HA.md). If so, conn
 * is open to it. */
static bool other_took_over(struct ftvm_client *c, struct conn *conn)
{
	struct ftvm_node_status st;

	if (conn_open(conn, c->sockets[1 - c->current], PROBE_TIMEOUT_MS) < 0)
		return false;
	if (conn_status(c, conn, now_ms() + PROBE_TIMEOUT_MS, &st) < 0 ||
	    strcmp(st.state, "solo") != 0) {
		conn_close(conn);
		return false;
	}
	return true;
}

/* Leaves the hung node for the other one, which took over (conn, from
 * other_took_over()). */
static void switch_to_other(struct ftvm_client *c, struct conn *conn, int r, const char *cause)
{
	int other = 1 - c->current;

	drop(c, r, "did not answer", cause, 0);
	adopt(c, other, conn);
	submit_conn_moved(c, NULL);
}

int client_timed_out(struct ftvm_client *c, int r, const char *cause)
{
	struct conn conn;

	if (c->n_sockets != 2 || c->current < 0 || !other_took_over(c, &conn))
		return -EAGAIN;
	switch_to_other(c, &conn, r, cause);
	return 0;
}

/* A call timed out on a pair client's node: if the other node serves alone,
 * it took over from this one (a hung node, ha/HA.md), and the client goes there. */
static int timed_out(struct ftvm_client *c, int r)
{
	char cause[sizeof(last_error.error)];
	int left = c->current, other = 1 - c->current;
	struct conn conn;

	say(cause, sizeof(cause), "%s", last_error.error);
	if (!other_took_over(c, &conn))
		return fail(c, r, "%s", cause);
	switch_to_other(c, &conn, r, cause);
	return fail(c, r,
		    "node at %s did not answer (%s), and node at %s serves alone: it took over; "
		    "the client now talks to it: the call's outcome is unknown, check or retry",
		    c->sockets[left], cause, c->sockets[other]);
}

/* call() with c->lock held. A pair client's request that provably reached
 * no node that acts (see the table at the top) is sent again to the node the
 * client moved to when ret_unsent is NULL; otherwise the call returns
 * -ENOTCONN then and sets *ret_unsent, so the caller can redo first what
 * depended on the old node. */
static int call_locked(struct ftvm_client *c, Request *req,
		       Ftvm__Client__ClientReply__ReplyCase expect, bool *ret_unsent,
		       Reply **ret_reply)
{
	char cause[sizeof(last_error.error)], why[300];
	bool pair = c->n_sockets == 2, sent, by_node;
	const char *moved_from = NULL;
	struct ftvm_node_status st;
	Reply *reply;
	int r, status, moves = 0;

	if (ret_unsent)
		*ret_unsent = false;
	for (;;) {
		if (!pair && c->conn.broken)
			return fail(c, -ENOTCONN,
				    "the connection to the node failed earlier; reconnect");
		if (pair && (c->current < 0 || c->conn.broken)) {
			r = client_search(c, why, sizeof(why));
			if (r < 0)
				return fail(c, -ENOTCONN,
					    "no node served within %d s (%s); the next call looks "
					    "again",
					    CALL_TIMEOUT_MS / 1000, why);
		}
		/* The timeout counts from when this call has the connection, not
		 * while it waits for other threads' calls. */
		r = exchange(c, &c->conn, req, now_ms() + CALL_TIMEOUT_MS, &reply, &sent);
		if (r < 0 && pair && c->conn.broken) {
			say(cause, sizeof(cause), "%s", last_error.error);
			if (sent)
				return moved_in_flight(c, r, "went away during the call", cause,
						       false);
			by_node = false;
			goto unsent;
		}
		if (r < 0 && pair && r == -ETIMEDOUT)
			return timed_out(c, r);
		if (r < 0)
			goto out;

		status = reply->status;
		r = client_status_errno(status);
		if (r < 0) {
			refused(c, r, status, reply->reason);
			ftvm__client__client_reply__free_unpacked(reply, NULL);
		}
		if (r < 0 && pair &&
		    (status == FTVM__PARTNER__STATUS__STATUS_FENCED ||
		     status == FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN)) {
			say(cause, sizeof(cause), "%s", last_error.error);
			by_node = true;
			goto unsent;
		}
		if (r == -EHOSTUNREACH && pair) {
			/* The partner link failed under the request (outcome
			 * unknown: ha/HA.md), or the node does not serve now. */
			say(cause, sizeof(cause), "%s", last_error.error);
			if (conn_status(c, &c->conn, now_ms() + PROBE_TIMEOUT_MS, &st) == 0 &&
			    (strcmp(st.state, "starting") == 0 ||
			     strcmp(st.state, "resyncing") == 0 ||
			     strcmp(st.state, "fenced") == 0)) {
				say(why, sizeof(why), "does not serve (state %s)", st.state);
				return moved_in_flight(c, r, why, cause, true);
			}
			/* It serves, or it is deciding who does: its refusal stands. */
			fail(c, r, "%s", cause);
			last_error.from_node = true;
			goto out;
		}
		if (r < 0)
			goto out;
		if (expect != FTVM__CLIENT__CLIENT_REPLY__REPLY__NOT_SET &&
		    reply->reply_case != expect) {
			r = fail(c, -EBADMSG,
				 "the node answered OK without the expected reply (got %d)",
				 (int)reply->reply_case);
			ftvm__client__client_reply__free_unpacked(reply, NULL);
			goto out;
		}
		error_reset(c); /* a search on the way left its reasons */
		*ret_reply = reply;
		return 0;

unsent:
		moved_from = c->sockets[c->current];
		r = moved_unsent(c, cause, by_node);
		if (c->current < 0 || ret_unsent || ++moves > MOVES_MAX) {
			if (ret_unsent)
				*ret_unsent = c->current >= 0;
			return r;
		}
	}
out:
	if (moved_from && r < 0) {
		size_t n = strlen(last_error.error);

		snprintf(last_error.error + n, sizeof(last_error.error) - n,
			 " (during this call the client moved from node at %s to node at %s: "
			 "pointers taken on the first are gone)",
			 moved_from, c->current >= 0 ? c->sockets[c->current] : "none");
	}
	return r;
}

/* Sends req (its id is set here) and waits for its reply, holding the
 * client's lock so other threads' calls wait their turn. On 0, *ret_reply
 * holds a reply with status OK and the oneof member expect set (any member,
 * or none, when expect is REPLY__NOT_SET); it owns its bytes (nothing points
 * into the receive buffer), so the caller reads it without the lock and frees
 * it with ftvm__client__client_reply__free_unpacked(). Otherwise -errno with
 * the reason in this thread's last_error. */
static int call(struct ftvm_client *c, Request *req, Ftvm__Client__ClientReply__ReplyCase expect,
		Reply **ret_reply)
{
	int r;

	error_reset(c);
	r = pthread_mutex_lock(&c->lock);
	if (r != 0)
		return fail(c, -r, "cannot lock the client: %s", strerror(r));
	r = call_locked(c, req, expect, NULL, ret_reply);
	submit_call_done(c);
	pthread_mutex_unlock(&c->lock);
	return r;
}

/* ---- for submit.c (client_internal.h) ---- */

uint64_t client_now_ms(void)
{
	return now_ms();
}

int client_fail(const struct ftvm_client *c, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	r = vfail(c, r, fmt, ap);
	va_end(ap);
	return r;
}

const char *client_error(void)
{
	return last_error.error;
}

void client_error_reset(const struct ftvm_client *c)
{
	error_reset(c);
}

int client_node_status(struct ftvm_client *c, struct ftvm_node_status *ret)
{
	return conn_status(c, &c->conn, now_ms() + PROBE_TIMEOUT_MS, ret);
}

/* 128 random bits from the kernel, as hex: the client's session (a guess
 * would let another client keep its session allocations alive, nothing
 * more). -errno when the kernel gives none. */
static int new_session_id(char ret[CONFIG_SESSION_ID_LEN + 1])
{
	uint8_t bits[CONFIG_SESSION_ID_LEN / 2];
	size_t got = 0;
	ssize_t n;

	while (got < sizeof(bits)) {
		n = getrandom(bits + got, sizeof(bits) - got, 0);
		if (n < 0 && errno != EINTR)
			return -errno;
		got += n > 0 ? (size_t)n : 0;
	}
	for (size_t i = 0; i < sizeof(bits); i++)
		snprintf(ret + 2 * i, 3, "%02x", bits[i]);
	return 0;
}

static void client_free(struct ftvm_client *c)
{
	submit_free(c);
	conn_close(&c->conn);
	if (c->pool)
		munmap(c->pool, 2 * c->pool_stride);
	for (size_t i = 0; i < c->n_retired; i++)
		munmap(c->retired[i].addr, c->retired[i].size);
	free(c->retired);
	free(c->sockets[0]);
	free(c->sockets[1]);
	pthread_mutex_destroy(&c->lock);
	free(c);
}

static int client_new(const char *const *sockets, int n, struct ftvm_client **ret)
{
	struct ftvm_client *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	c->serial = atomic_fetch_add(&next_serial, 1);
	c->max_payload = FRAME_MAX_PAYLOAD_DEFAULT;
	c->current = -1;
	conn_init(&c->conn);
	r = new_session_id(c->session);
	if (r < 0) {
		free(c);
		return r;
	}
	r = pthread_mutex_init(&c->lock, NULL);
	if (r != 0) {
		free(c);
		return -r;
	}
	c->n_sockets = n;
	for (int i = 0; i < n; i++) {
		c->sockets[i] = strdup(sockets[i]);
		if (!c->sockets[i]) {
			client_free(c);
			return -ENOMEM;
		}
	}
	*ret = c;
	return 0;
}

static int check_socket_path(const char *path)
{
	struct sockaddr_un sa;

	if (!path)
		return -EINVAL;
	if (path[0] == '\0' || strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	return 0;
}

int ftvm_connect(const char *socket_path, struct ftvm_client **ret)
{
	struct ftvm_client *c;
	int r;

	if (last_error.serial == 0) /* ftvm_last_error(NULL) says "no client" again */
		last_error.error[0] = '\0';
	if (!socket_path || !ret)
		return -EINVAL;
	r = check_socket_path(socket_path);
	if (r < 0)
		return r;
	r = client_new(&socket_path, 1, &c);
	if (r < 0)
		return r;
	r = conn_open(&c->conn, socket_path, CALL_TIMEOUT_MS);
	if (r < 0) {
		client_free(c);
		return r;
	}
	c->current = 0;
	*ret = c;
	return 0;
}

int ftvm_connect_named(const char *socket_path, const char *name, struct ftvm_client **ret)
{
	struct ftvm_client *c;
	int r;

	if (!name || !config_client_name_valid(name)) {
		last_error.serial = 0;
		snprintf(last_error.error, sizeof(last_error.error),
			 "client name '%.80s' is not one: letters, digits, '.', '_' and '-', at "
			 "most %d",
			 name ? name : "(null)", FTVM_CLIENT_NAME_MAX);
		return -EINVAL;
	}
	r = ftvm_connect(socket_path, &c);
	if (r < 0)
		return r;
	snprintf(c->name, sizeof(c->name), "%s", name);
	*ret = c;
	return 0;
}

int ftvm_set_name(struct ftvm_client *c, const char *name)
{
	if (!c)
		return -EINVAL;
	if (!name || !config_client_name_valid(name))
		return fail(c, -EINVAL,
			    "client name '%.80s' is not one: letters, digits, '.', '_' and '-', "
			    "at most %d",
			    name ? name : "(null)", FTVM_CLIENT_NAME_MAX);
	pthread_mutex_lock(&c->lock);
	snprintf(c->name, sizeof(c->name), "%s", name);
	pthread_mutex_unlock(&c->lock);
	return 0;
}

int ftvm_connect_pair(const char *socket_a, const char *socket_b, struct ftvm_client **ret)
{
	const char *sockets[2] = { socket_a, socket_b };
	struct ftvm_client *c;
	char why[300];
	int r;

	if (last_error.serial == 0)
		last_error.error[0] = '\0';
	if (!socket_a || !socket_b || !ret)
		return -EINVAL;
	r = check_socket_path(socket_a);
	if (r == 0)
		r = check_socket_path(socket_b);
	if (r < 0)
		return r;
	r = client_new(sockets, 2, &c);
	if (r < 0)
		return r;
	r = search(c, 0, now_ms() + CALL_TIMEOUT_MS, true, why, sizeof(why));
	if (r < 0) {
		client_free(c);
		/* Kept for ftvm_last_error(NULL), under no client's serial. */
		snprintf(last_error.error, sizeof(last_error.error), "no node serves (%s)", why);
		last_error.serial = 0;
		last_error.from_node = false;
		return r;
	}
	error_reset(c); /* the search's reasons are not a failure */
	*ret = c;
	return 0;
}

void ftvm_disconnect(struct ftvm_client *c)
{
	if (!c)
		return;
	client_free(c);
}

const char *ftvm_connected_socket(const struct ftvm_client *c)
{
	int i;

	if (!c)
		return NULL;
	i = __atomic_load_n(&c->current, __ATOMIC_ACQUIRE);
	return i >= 0 ? c->sockets[i] : NULL;
}

const char *ftvm_last_error(const struct ftvm_client *c)
{
	if (!c)
		return last_error.serial == 0 && last_error.error[0] ? last_error.error
								     : "no client";
	return last_error.serial == c->serial ? last_error.error : "";
}

bool ftvm_last_error_from_node(const struct ftvm_client *c)
{
	return c && last_error.serial == c->serial && last_error.from_node;
}

/* The first dst_size bytes of a struct the library filled (src_size bytes):
 * ftvm.h, "Compatibility". */
static void copy_sized(void *dst, size_t dst_size, const void *src, size_t src_size)
{
	memcpy(dst, src, dst_size < src_size ? dst_size : src_size);
	if (dst_size > src_size)
		memset((uint8_t *)dst + src_size, 0, dst_size - src_size);
}

int ftvm_status_sized(struct ftvm_client *c, struct ftvm_node_status *ret, size_t ret_size)
{
	Ftvm__Client__StatusRequest status = FTVM__CLIENT__STATUS_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	struct ftvm_node_status st;
	Reply *reply = NULL;
	int r;

	if (!c || !ret || ret_size == 0)
		return -EINVAL;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_STATUS;
	req.status = &status;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_STATUS_REPLY, &reply);
	if (r < 0)
		return r;
	reply_read_status(reply->status_reply, &st);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	copy_sized(ret, ret_size, &st, sizeof(st));
	return 0;
}

bool ftvm_guid_valid(const char *guid)
{
	size_t i;

	if (!guid || !guid[0])
		return false;
	for (i = 0; guid[i]; i++) {
		/* Printable ASCII without space; also keeps a GUID one token in
		 * ftvmctl's text output and in log lines. */
		if (guid[i] <= ' ' || guid[i] > '~' || i + 1 >= FTVM_GUID_MAX)
			return false;
	}
	return true;
}

const char *ftvm_strerror(int r)
{
	switch (r) {
	case -ENOENT:
		return "not found";
	case -EBUSY:
		return "page is locked";
	case -ENOSPC:
		return "no space";
	case -EACCES:
		return "denied";
	case -EHOSTUNREACH:
		return "partner unavailable";
	case -ETIMEDOUT:
		return "timed out";
	case -EOPNOTSUPP:
		return "not supported by the node";
	case -EINVAL:
		return "invalid request";
	case -ECANCELED:
		return "not applied";
	case -EIO:
		return "the node failed";
	case -EBADMSG:
		return "bad reply from the node";
	case -ENOBUFS:
		return "buffer smaller than the block";
	case -EMSGSIZE:
		return "request too large";
	case -ECONNRESET:
		return "the node closed the connection";
	case -ENOTCONN:
		return "not connected";
	default:
		return r >= 0 ? "success" : strerror(-r);
	}
}

/* Local checks, so a bad argument fails with a reason and without a round trip. */
/* Also the NULL client check of every call that takes a GUID. */
int client_check_guid(struct ftvm_client *c, const char *guid)
{
	if (!c)
		return -EINVAL;
	if (!guid)
		return fail(c, -EINVAL, "no GUID given");
	if (!ftvm_guid_valid(guid))
		return fail(c, -EINVAL, "'%.*s' is not a GUID (want 1 to %d printable characters)",
			    FTVM_GUID_MAX, guid, FTVM_GUID_MAX - 1);
	return 0;
}

/* GUIDs are copied whole or not at all: a truncated one names another
 * allocation. */
static int copy_guid(struct ftvm_client *c, char dst[FTVM_GUID_MAX], const char *src)
{
	if (!ftvm_guid_valid(src))
		return fail(c, -EBADMSG, "the node answered with a malformed GUID");
	snprintf(dst, FTVM_GUID_MAX, "%s", src);
	return 0;
}

static int header_from_reply(struct ftvm_client *c, const Ftvm__Partner__Header *h,
			     struct ftvm_header *ret)
{
	int r;

	if (h->header.len > FTVM_HEADER_MAX)
		return fail(c, -EBADMSG, "the node sent a %zu byte header for %s (at most %d)",
			    h->header.len, h->guid, FTVM_HEADER_MAX);
	memset(ret, 0, sizeof(*ret));
	r = copy_guid(c, ret->guid, h->guid);
	if (r < 0)
		return r;
	ret->size = h->size;
	ret->block_size = h->block_size;
	ret->uid = h->uid;
	ret->pages = h->pages;
	copy_str(ret->policy, sizeof(ret->policy), h->policy);
	copy_str(ret->home, sizeof(ret->home), h->home);
	copy_str(ret->owner, sizeof(ret->owner), h->owner);
	if (h->header.len > 0)
		memcpy(ret->header, h->header.data, h->header.len);
	ret->header_len = h->header.len;
	return 0;
}

static int alloc(struct ftvm_client *c, uint64_t size, const char *policy, bool immediate,
		 const void *header, size_t header_len, bool session, struct ftvm_alloc_info *ret)
{
	Ftvm__Client__AllocRequest alloc = FTVM__CLIENT__ALLOC_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	struct ftvm_alloc_info info = { 0 };
	int r;

	if (!c)
		return -EINVAL;
	if (!ret)
		return fail(c, -EINVAL, "no place for the result");
	if (size == 0)
		return fail(c, -EINVAL, "cannot allocate 0 bytes");
	if (header_len > FTVM_HEADER_MAX)
		return fail(c, -EINVAL, "header of %zu bytes is above the %d byte limit",
			    header_len, FTVM_HEADER_MAX);
	if (header_len > 0 && !header)
		return fail(c, -EINVAL, "header of %zu bytes given as NULL", header_len);

	alloc.size = size;
	alloc.policy = (char *)(policy ? policy : "");
	alloc.immediate = immediate;
	alloc.header.data = (uint8_t *)header;
	alloc.header.len = header_len;
	alloc.client = c->name;
	if (session) {
		alloc.session = c->session;
		/* From now on a new connection (a move) is bound to it. */
		pthread_mutex_lock(&c->lock);
		c->in_session = true;
		pthread_mutex_unlock(&c->lock);
	}
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC;
	req.alloc = &alloc;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_ALLOC, &reply);
	if (r < 0)
		return r;
	r = copy_guid(c, info.guid, reply->alloc->guid);
	if (r < 0)
		goto out;
	info.pages = reply->alloc->pages;
	info.block_size = reply->alloc->block_size;
	*ret = info;
out:
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

int ftvm_alloc(struct ftvm_client *c, uint64_t size, const char *policy, bool immediate,
	       const void *header, size_t header_len, struct ftvm_alloc_info *ret)
{
	return alloc(c, size, policy, immediate, header, header_len, false, ret);
}

int ftvm_alloc_session(struct ftvm_client *c, uint64_t size, const char *policy, bool immediate,
		       const void *header, size_t header_len, struct ftvm_alloc_info *ret)
{
	return alloc(c, size, policy, immediate, header, header_len, true, ret);
}

static int write_page(struct ftvm_client *c, const char *guid, uint64_t page, const void *data,
		      size_t len, bool wait, uint32_t *ret_crc32c)
{
	Ftvm__Client__WritePageRequest write = FTVM__CLIENT__WRITE_PAGE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	r = client_check_guid(c, guid);
	if (r < 0)
		return r;
	if (len > 0 && !data)
		return fail(c, -EINVAL, "data of %zu bytes for %s page %" PRIu64 " given as NULL",
			    len, guid, page);

	write.guid = (char *)guid;
	write.page = page;
	write.data.data = (uint8_t *)data;
	write.data.len = len;
	write.wait = wait;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE;
	req.write_page = &write;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_WRITE_PAGE, &reply);
	if (r < 0)
		return r;
	if (ret_crc32c)
		*ret_crc32c = reply->write_page->crc32c;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_write_page(struct ftvm_client *c, const char *guid, uint64_t page, const void *data,
		    size_t len, uint32_t *ret_crc32c)
{
	return write_page(c, guid, page, data, len, true, ret_crc32c);
}

int ftvm_write_page_try(struct ftvm_client *c, const char *guid, uint64_t page, const void *data,
			size_t len, uint32_t *ret_crc32c)
{
	return write_page(c, guid, page, data, len, false, ret_crc32c);
}

static int read_page(struct ftvm_client *c, const char *guid, uint64_t page, void *buf,
		     size_t buf_len, bool wait, size_t *ret_len, uint32_t *ret_crc32c)
{
	Ftvm__Client__ReadPageRequest read = FTVM__CLIENT__READ_PAGE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const Ftvm__Client__ReadPageReply *rp;
	Reply *reply = NULL;
	uint32_t crc;
	int r;

	r = client_check_guid(c, guid);
	if (r < 0)
		return r;
	if (buf_len > 0 && !buf)
		return fail(c, -EINVAL, "a %zu byte buffer given as NULL", buf_len);

	read.guid = (char *)guid;
	read.page = page;
	read.wait = wait;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_READ_PAGE;
	req.read_page = &read;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_READ_PAGE, &reply);
	if (r < 0)
		return r;
	rp = reply->read_page;
	/* End to end: the node checksummed the block under its read lock. */
	crc = crc32c(0, rp->data.data, rp->data.len);
	if (crc != rp->crc32c) {
		r = fail(c, -EBADMSG,
			 "%s page %" PRIu64 ": the %zu bytes received have crc32c 0x%08x, the node "
			 "said 0x%08x",
			 guid, page, rp->data.len, crc, rp->crc32c);
		goto out;
	}
	if (ret_len)
		*ret_len = rp->data.len;
	if (rp->data.len > buf_len) {
		r = fail(c, -ENOBUFS,
			 "%s page %" PRIu64 " is %zu bytes, more than the %zu byte buffer", guid,
			 page, rp->data.len, buf_len);
		goto out;
	}
	if (rp->data.len > 0)
		memcpy(buf, rp->data.data, rp->data.len);
	if (ret_crc32c)
		*ret_crc32c = rp->crc32c;
out:
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

int ftvm_read_page(struct ftvm_client *c, const char *guid, uint64_t page, void *buf,
		   size_t buf_len, size_t *ret_len, uint32_t *ret_crc32c)
{
	return read_page(c, guid, page, buf, buf_len, true, ret_len, ret_crc32c);
}

int ftvm_read_page_try(struct ftvm_client *c, const char *guid, uint64_t page, void *buf,
		       size_t buf_len, size_t *ret_len, uint32_t *ret_crc32c)
{
	return read_page(c, guid, page, buf, buf_len, false, ret_len, ret_crc32c);
}

/* The header request for guid: the reply, to free. */
static int header_call(struct ftvm_client *c, const char *guid, bool has_ret, Reply **ret_reply)
{
	Ftvm__Client__HeaderRequest header = FTVM__CLIENT__HEADER_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	int r = client_check_guid(c, guid);

	if (r < 0)
		return r;
	if (!has_ret)
		return fail(c, -EINVAL, "no place for the result");
	header.guid = (char *)guid;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_HEADER;
	req.header = &header;
	return call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_HEADER, ret_reply);
}

int ftvm_header(struct ftvm_client *c, const char *guid, struct ftvm_header *ret)
{
	Reply *reply = NULL;
	int r = header_call(c, guid, ret != NULL, &reply);

	if (r < 0)
		return r;
	r = header_from_reply(c, reply->header, ret);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

/* A request whose answer is its status alone (ClientReply has no member for
 * it): 0 when the node said OK. */
static int call_status(struct ftvm_client *c, Request *req)
{
	Reply *reply = NULL;
	int r = call(c, req, FTVM__CLIENT__CLIENT_REPLY__REPLY__NOT_SET, &reply);

	if (r < 0)
		return r;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_free(struct ftvm_client *c, const char *guid)
{
	Ftvm__Client__FreeRequest free_req = FTVM__CLIENT__FREE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	int r;

	r = client_check_guid(c, guid);
	if (r < 0)
		return r;

	free_req.guid = (char *)guid;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FREE;
	req.free = &free_req;
	return call_status(c, &req);
}

int ftvm_flush(struct ftvm_client *c, const char *guid, uint64_t first_page, uint64_t pages)
{
	Ftvm__Client__FlushRequest flush = FTVM__CLIENT__FLUSH_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	int r = client_check_guid(c, guid);

	if (r < 0)
		return r;
	flush.guid = (char *)guid;
	flush.first_page = first_page;
	flush.pages = pages;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FLUSH;
	req.flush = &flush;
	return call_status(c, &req);
}

int ftvm_drill_cut_link(struct ftvm_client *c, uint32_t ms)
{
	Ftvm__Client__CutLinkRequest cut = FTVM__CLIENT__CUT_LINK_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;

	cut.ms = ms;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_CUT_LINK;
	req.cut_link = &cut;
	return call_status(c, &req);
}

int ftvm_failback(struct ftvm_client *c, uint64_t *ret_handed_back, uint64_t *ret_busy)
{
	Ftvm__Client__FailbackRequest fb = FTVM__CLIENT__FAILBACK_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FAILBACK;
	req.failback = &fb;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_FAILBACK, &reply);
	if (r < 0)
		return r;
	if (ret_handed_back)
		*ret_handed_back = reply->failback->handed_back;
	if (ret_busy)
		*ret_busy = reply->failback->busy;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_recovery_list(struct ftvm_client *c, uint64_t after, bool newest,
		       struct ftvm_recovered *ret, size_t max, size_t *ret_n, uint64_t *ret_total)
{
	Ftvm__Client__RecoveryRequest rr = FTVM__CLIENT__RECOVERY_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	size_t n;
	int r;

	if (!ret || !max || !ret_n)
		return -EINVAL;
	rr.after = after;
	rr.limit = max > UINT32_MAX ? UINT32_MAX : (uint32_t)max;
	rr.newest = newest;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RECOVERY;
	req.recovery = &rr;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_RECOVERY, &reply);
	if (r < 0)
		return r;
	n = reply->recovery->n_pages < max ? reply->recovery->n_pages : max;
	for (size_t i = 0; i < n; i++) {
		const Ftvm__Client__RecoveredPage *p = reply->recovery->pages[i];

		memset(&ret[i], 0, sizeof(ret[i]));
		ret[i].id = p->id;
		ret[i].at_ms = p->at_ms;
		copy_str(ret[i].guid, sizeof(ret[i].guid), p->guid);
		ret[i].page = p->page;
		ret[i].from_version = p->from_version;
		ret[i].to_version = p->to_version;
		copy_str(ret[i].why, sizeof(ret[i].why), p->why);
	}
	*ret_n = n;
	if (ret_total)
		*ret_total = reply->recovery->total;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_takeover_force(struct ftvm_client *c)
{
	Ftvm__Client__TakeoverRequest t = FTVM__CLIENT__TAKEOVER_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;

	t.force = true;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_TAKEOVER;
	req.takeover = &t;
	return call_status(c, &req);
}

static int call_trace(struct ftvm_client *c, Ftvm__Client__TraceRequest *tr, uint64_t *ret_records)
{
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_TRACE;
	req.trace = tr;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_TRACE, &reply);
	if (r < 0)
		return r;
	if (ret_records)
		*ret_records = reply->trace->records;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_trace_start(struct ftvm_client *c, const char *path, const char *channels)
{
	Ftvm__Client__TraceRequest tr = FTVM__CLIENT__TRACE_REQUEST__INIT;

	if (!c)
		return -EINVAL;
	if (!path || path[0] != '/')
		return fail(c, -EINVAL, "the trace's path must be absolute");
	tr.path = (char *)path;
	tr.channels = (char *)(channels ? channels : "");
	return call_trace(c, &tr, NULL);
}

int ftvm_trace_stop(struct ftvm_client *c, uint64_t *ret_records)
{
	Ftvm__Client__TraceRequest tr = FTVM__CLIENT__TRACE_REQUEST__INIT;

	tr.stop = true;
	return call_trace(c, &tr, ret_records);
}

/* The node's list of allocations (the reply, freed by the caller) and a
 * zeroed array of one row of row_size per allocation in it (NULL for none). */
static int list_rows(struct ftvm_client *c, size_t row_size, Reply **ret_reply, void **ret_rows)
{
	Ftvm__Client__ListRequest list = FTVM__CLIENT__LIST_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	size_t n;
	int r;

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_LIST;
	req.list = &list;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_LIST, ret_reply);
	if (r < 0)
		return r;
	n = (*ret_reply)->list->n_allocations;
	*ret_rows = n ? calloc(n, row_size) : NULL;
	if (n && !*ret_rows) {
		ftvm__client__client_reply__free_unpacked(*ret_reply, NULL);
		return fail(c, -ENOMEM, "out of memory for %zu allocations", n);
	}
	return 0;
}

int ftvm_list(struct ftvm_client *c, struct ftvm_header **ret, size_t *ret_n)
{
	struct ftvm_header *headers = NULL;
	const Ftvm__Client__ListReply *lr;
	Reply *reply = NULL;
	size_t i;
	int r;

	if (!c)
		return -EINVAL;
	if (!ret || !ret_n)
		return fail(c, -EINVAL, "no place for the result");
	r = list_rows(c, sizeof(*headers), &reply, (void **)&headers);
	if (r < 0)
		return r;
	lr = reply->list;
	for (i = 0; i < lr->n_allocations; i++) {
		r = header_from_reply(c, lr->allocations[i], &headers[i]);
		if (r < 0)
			goto out;
	}
	*ret = headers;
	*ret_n = lr->n_allocations;
	headers = NULL;
out:
	free(headers);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

/* Where the node's copy of h rests; an older node, which names none,
 * kept every allocation in the store. */
static const char *media_of(const Ftvm__Partner__Header *h)
{
	return h->media && h->media[0] ? h->media : "store";
}

/* What programs built before ftvm_mapping's partition have of each row. */
#define MAPPING_V1_SIZE offsetof(struct ftvm_mapping, partition)

/* The row of h, its first row_size bytes into dst (ftvm.h, "Compatibility"). */
static void mapping_from_header(const Ftvm__Partner__Header *h, void *dst, size_t row_size)
{
	struct ftvm_mapping m, *ret = &m;

	memset(&m, 0, sizeof(m));
	copy_str(ret->guid, sizeof(ret->guid), h->guid);
	copy_str(ret->home, sizeof(ret->home), h->home);
	copy_str(ret->owner, sizeof(ret->owner), h->owner);
	copy_str(ret->media, sizeof(ret->media), media_of(h));
	ret->pages = h->pages;
	ret->block_size = h->block_size;
	copy_str(ret->partition, sizeof(ret->partition), h->partition);
	copy_sized(dst, row_size, &m, sizeof(m));
}

int ftvm_mapping_sized(struct ftvm_client *c, struct ftvm_mapping **ret, size_t *ret_n,
		       size_t row_size)
{
	const Ftvm__Client__ListReply *lr;
	Reply *reply = NULL;
	char *rows = NULL;
	int r;

	if (!c)
		return -EINVAL;
	if (!ret || !ret_n || !row_size)
		return fail(c, -EINVAL, "no place for the result");
	r = list_rows(c, row_size, &reply, (void **)&rows);
	if (r < 0)
		return r;
	lr = reply->list;
	for (size_t i = 0; i < lr->n_allocations; i++)
		mapping_from_header(lr->allocations[i], rows + i * row_size, row_size);
	*ret = (struct ftvm_mapping *)rows;
	*ret_n = lr->n_allocations;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_mapping_of_sized(struct ftvm_client *c, const char *guid, struct ftvm_mapping *ret,
			  size_t ret_size)
{
	Reply *reply = NULL;
	int r = header_call(c, guid, ret != NULL && ret_size != 0, &reply);

	if (r < 0)
		return r;
	mapping_from_header(reply->header, ret, ret_size);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

/* ---- volumes ---- */

int ftvm_volume_create(struct ftvm_client *c, const char *name, uint64_t size, const char *home,
		       struct ftvm_alloc_info *ret)
{
	Ftvm__Client__AllocRequest alloc = FTVM__CLIENT__ALLOC_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	struct ftvm_alloc_info info = { 0 };
	int r;

	if (!c)
		return -EINVAL;
	if (!name || !name[0])
		return fail(c, -EINVAL, "a volume needs a name");
	if (size == 0)
		return fail(c, -EINVAL, "a volume of 0 bytes");
	alloc.size = size;
	alloc.volume = (char *)name;
	alloc.home = (char *)(home ? home : "");
	alloc.client = c->name;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC;
	req.alloc = &alloc;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_ALLOC, &reply);
	if (r < 0)
		return r;
	r = copy_guid(c, info.guid, reply->alloc->guid);
	info.pages = reply->alloc->pages;
	info.block_size = reply->alloc->block_size;
	if (r == 0 && ret)
		*ret = info;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

int ftvm_volume_delete(struct ftvm_client *c, const char *name)
{
	Ftvm__Client__FreeRequest free_req = FTVM__CLIENT__FREE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;

	if (!c)
		return -EINVAL;
	if (!name || !name[0])
		return fail(c, -EINVAL, "which volume?");
	free_req.guid = (char *)"";
	free_req.volume = (char *)name;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FREE;
	req.free = &free_req;
	return call_status(c, &req);
}

static int by_volume_name(const void *x, const void *y)
{
	const Ftvm__Partner__Header *const *a = x, *const *b = y;

	return strcmp((*a)->volume, (*b)->volume);
}

int ftvm_volume_list_sized(struct ftvm_client *c, struct ftvm_volume **ret, size_t *ret_n,
			   size_t row_size)
{
	const Ftvm__Client__ListReply *lr;
	Ftvm__Partner__Header **volumes = NULL;
	Reply *reply = NULL;
	char *rows = NULL;
	size_t n = 0;
	int r;

	if (!c)
		return -EINVAL;
	if (!ret || !ret_n || !row_size)
		return fail(c, -EINVAL, "no place for the result");
	/* The list has every allocation: rows for all, filled for volumes. */
	r = list_rows(c, row_size, &reply, (void **)&rows);
	if (r < 0)
		return r;
	lr = reply->list;
	volumes = lr->n_allocations ? calloc(lr->n_allocations, sizeof(*volumes)) : NULL;
	if (lr->n_allocations && !volumes) {
		r = fail(c, -ENOMEM, "out of memory for %zu allocations", lr->n_allocations);
		goto out;
	}
	for (size_t i = 0; i < lr->n_allocations; i++)
		if (lr->allocations[i]->volume && lr->allocations[i]->volume[0])
			volumes[n++] = lr->allocations[i];
	qsort(volumes, n, sizeof(*volumes), by_volume_name);
	for (size_t i = 0; i < n; i++) {
		struct ftvm_volume vol;

		memset(&vol, 0, sizeof(vol));
		copy_str(vol.name, sizeof(vol.name), volumes[i]->volume);
		copy_str(vol.guid, sizeof(vol.guid), volumes[i]->guid);
		vol.size = volumes[i]->size;
		vol.block_size = volumes[i]->block_size;
		copy_str(vol.home, sizeof(vol.home), volumes[i]->home);
		copy_str(vol.owner, sizeof(vol.owner), volumes[i]->owner);
		copy_sized(rows + i * row_size, row_size, &vol, sizeof(vol));
	}
	if (n == 0) {
		free(rows);
		rows = NULL;
	}
	*ret = (struct ftvm_volume *)rows;
	*ret_n = n;
	rows = NULL;
out:
	free(rows);
	free(volumes);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

/* The names of before the row grew, for programs built then (ftvm.h): the
 * parentheses keep the macros of the same names out. */
int(ftvm_mapping)(struct ftvm_client *c, struct ftvm_mapping **ret, size_t *ret_n)
{
	return ftvm_mapping_sized(c, ret, ret_n, MAPPING_V1_SIZE);
}

int(ftvm_mapping_of)(struct ftvm_client *c, const char *guid, struct ftvm_mapping *ret)
{
	return ftvm_mapping_of_sized(c, guid, ret, MAPPING_V1_SIZE);
}

static int by_usage(const void *x, const void *y)
{
	const struct ftvm_client_usage *a = x, *b = y;
	int r;

	if (a->uid != b->uid)
		return a->uid < b->uid ? -1 : 1;
	r = strcmp(a->name, b->name);
	return r ? r : strcmp(a->media, b->media);
}

/* The allocate table, from the list: one row per uid, name and media. */
int ftvm_clients(struct ftvm_client *c, struct ftvm_client_usage **ret, size_t *ret_n)
{
	struct ftvm_client_usage *rows = NULL;
	const Ftvm__Client__ListReply *lr;
	Reply *reply = NULL;
	size_t n = 0;
	int r;

	if (!c)
		return -EINVAL;
	if (!ret || !ret_n)
		return fail(c, -EINVAL, "no place for the result");
	r = list_rows(c, sizeof(*rows), &reply, (void **)&rows);
	if (r < 0)
		return r;
	lr = reply->list;
	for (size_t i = 0; i < lr->n_allocations; i++) {
		const Ftvm__Partner__Header *h = lr->allocations[i];
		const char *name = h->client ? h->client : "";
		size_t k = 0;

		const char *media = media_of(h);

		while (k < n && (rows[k].uid != h->uid || strcmp(rows[k].name, name) != 0 ||
				 strcmp(rows[k].media, media) != 0))
			k++;
		if (k == n) {
			rows[n].uid = h->uid;
			snprintf(rows[n].name, sizeof(rows[n].name), "%s", name);
			snprintf(rows[n].media, sizeof(rows[n].media), "%s", media);
			n++;
		}
		rows[k].allocations++;
		rows[k].bytes += h->size;
	}
	if (n)
		qsort(rows, n, sizeof(*rows), by_usage);
	*ret = rows; /* NULL when the node knows no allocation */
	*ret_n = n;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_partitions(struct ftvm_client *c, struct ftvm_partition **ret, size_t *ret_n)
{
	Ftvm__Client__PartitionsRequest pr = FTVM__CLIENT__PARTITIONS_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const Ftvm__Client__PartitionsReply *rep;
	struct ftvm_partition *rows;
	Reply *reply = NULL;
	int r;

	if (!c)
		return -EINVAL;
	if (!ret || !ret_n)
		return fail(c, -EINVAL, "no place for the result");
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_PARTITIONS;
	req.partitions = &pr;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_PARTITIONS, &reply);
	if (r < 0)
		return r;
	rep = reply->partitions;
	rows = calloc(rep->n_partitions ? rep->n_partitions : 1, sizeof(*rows));
	if (!rows) {
		ftvm__client__client_reply__free_unpacked(reply, NULL);
		return fail(c, -ENOMEM, "out of memory");
	}
	for (size_t i = 0; i < rep->n_partitions; i++) {
		const Ftvm__Client__Partition *p = rep->partitions[i];

		copy_str(rows[i].media, sizeof(rows[i].media), p->media);
		copy_str(rows[i].type, sizeof(rows[i].type), p->type);
		rows[i].start = p->start;
		rows[i].length = p->length;
		rows[i].free = p->free;
		copy_str(rows[i].guid, sizeof(rows[i].guid), p->guid);
		rows[i].uid = p->uid;
		copy_str(rows[i].client, sizeof(rows[i].client), p->client);
	}
	*ret = rows;
	*ret_n = rep->n_partitions;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

int ftvm_sense_sized(struct ftvm_client *c, struct ftvm_sense *ret, size_t ret_size)
{
	Ftvm__Client__SenseRequest sense = FTVM__CLIENT__SENSE_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	struct ftvm_sense sense_info;
	Reply *reply = NULL;
	int r;

	if (!c)
		return -EINVAL;
	if (!ret || ret_size == 0)
		return fail(c, -EINVAL, "no place for the result");

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_SENSE;
	req.sense = &sense;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_SENSE, &reply);
	if (r < 0)
		return r;
	reply_read_sense(reply->sense, &sense_info);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	copy_sized(ret, ret_size, &sense_info, sizeof(sense_info));
	return 0;
}

/* One row of the discovery table as the node sent it; the node's bytes are
 * not trusted: strings are cut to fit, media past the row's room left out. */
static void device_from_reply(const Ftvm__Client__DiscoveredNode *d, struct ftvm_device *ret)
{
	memset(ret, 0, sizeof(*ret));
	copy_str(ret->node, sizeof(ret->node), d->node);
	copy_str(ret->endpoint, sizeof(ret->endpoint), d->endpoint);
	copy_str(ret->state, sizeof(ret->state), d->state);
	copy_str(ret->reason, sizeof(ret->reason), d->reason);
	ret->self = d->self;
	ret->reachable = d->reachable;
	ret->serving = d->serving;
	ret->n_media = reply_read_media(ret->media, sizeof(ret->media) / sizeof(ret->media[0]),
					d->media, d->n_media);
}

int ftvm_discover_sized(struct ftvm_client *c, struct ftvm_device *ret, size_t max, size_t *ret_n,
			size_t row_size)
{
	Ftvm__Client__DiscoverRequest discover = FTVM__CLIENT__DISCOVER_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const Ftvm__Client__DiscoverReply *dr;
	struct ftvm_device row;
	Reply *reply = NULL;
	size_t i;
	int r;

	if (!c)
		return -EINVAL;
	if (!ret || !max || !ret_n || !row_size)
		return fail(c, -EINVAL, "no place for the result");

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_DISCOVER;
	req.discover = &discover;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_DISCOVER, &reply);
	if (r < 0)
		return r;
	dr = reply->discover;
	for (i = 0; i < dr->n_nodes && i < max; i++) {
		device_from_reply(dr->nodes[i], &row);
		copy_sized((uint8_t *)ret + i * row_size, row_size, &row, sizeof(row));
	}
	*ret_n = i;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

void ftvm_verify_free(struct ftvm_verify *v)
{
	size_t i;

	if (!v)
		return;
	for (i = 0; i < v->n_differences; i++)
		free(v->differences[i]);
	free(v->differences);
	/* Not the whole struct: a caller's may be smaller than this library's. */
	v->differences = NULL;
	v->n_differences = 0;
}

/* The first struct ftvm_verify, which every caller's holds. */
#define VERIFY_SIZE_MIN (offsetof(struct ftvm_verify, n_differences) + sizeof(size_t))

int ftvm_verify_sized(struct ftvm_client *c, struct ftvm_verify *ret, size_t ret_size)
{
	Ftvm__Client__VerifyRequest verify = FTVM__CLIENT__VERIFY_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const Ftvm__Client__VerifyReply *vr;
	struct ftvm_verify v = { 0 };
	Reply *reply = NULL;
	int r;

	if (ret && ret_size >= VERIFY_SIZE_MIN)
		memset(ret, 0, ret_size);
	if (!c)
		return -EINVAL;
	if (!ret || ret_size < VERIFY_SIZE_MIN)
		return fail(c, -EINVAL, "no place for the result (%zu bytes, want %zu)", ret_size,
			    VERIFY_SIZE_MIN);

	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_VERIFY;
	req.verify = &verify;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_VERIFY, &reply);
	if (r < 0)
		return r;
	vr = reply->verify;
	v.equal = vr->equal;
	v.allocations = vr->allocations;
	v.pages = vr->pages;
	v.busy = vr->busy;
	v.rounds = vr->rounds;
	if (vr->n_differences > 0) {
		v.differences = calloc(vr->n_differences, sizeof(*v.differences));
		if (!v.differences) {
			r = fail(c, -ENOMEM, "out of memory for %zu differences",
				 vr->n_differences);
			goto out;
		}
	}
	for (; v.n_differences < vr->n_differences; v.n_differences++) {
		v.differences[v.n_differences] = strdup(vr->differences[v.n_differences]);
		if (!v.differences[v.n_differences]) {
			r = fail(c, -ENOMEM, "out of memory for %zu differences",
				 vr->n_differences);
			goto out;
		}
	}
	copy_sized(ret, ret_size, &v, sizeof(v));
	memset(&v, 0, sizeof(v));
out:
	ftvm_verify_free(&v);
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

/* ---- pointers into the node's frame pool ---- */

/* Maps fd's size bytes twice, stride bytes apart (size rounded up to whole
 * pages, *ret_stride): writable, then read-only. Read pointers point into
 * the read-only view, so that a write through one faults at once (SIGSEGV),
 * as an MMU would, instead of changing a block that other readers share,
 * behind the lock and unknown to the partner's copy. */
static uint8_t *map_pool(int fd, size_t size, size_t *ret_stride)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE), stride;
	uint8_t *base;
	int e;

	if (size > SIZE_MAX / 4) {
		errno = ENOMEM;
		return NULL;
	}
	stride = (size + page - 1) / page * page;
	base = mmap(NULL, 2 * stride, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1,
		    0);
	if (base == MAP_FAILED)
		return NULL;
	if (mmap(base, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED ||
	    mmap(base + stride, size, PROT_READ, MAP_SHARED | MAP_FIXED, fd, 0) == MAP_FAILED) {
		e = errno;
		munmap(base, 2 * stride);
		errno = e;
		return NULL;
	}
	*ret_stride = stride;
	return base;
}

/* Maps the frame pool of the node the client talks to, once per connection:
 * the node passes its memfd with the reply to a MapRequest. With c->lock
 * held. */
static int map_locked(struct ftvm_client *c)
{
	Ftvm__Client__MapRequest map = FTVM__CLIENT__MAP_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	uint8_t *pool;
	size_t stride = 0;
	int r, fd;

	if (c->pool && c->pool_generation == c->generation)
		return 0;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_MAP;
	req.map = &map;
	r = call_locked(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_MAP, NULL, &reply);
	if (r < 0)
		return r;
	fd = c->conn.received_fd;
	c->conn.received_fd = -1;
	if (fd < 0) {
		r = fail(c, -EBADMSG, "the node sent no frame pool descriptor");
		goto out;
	}
	pool = map_pool(fd, reply->map->size, &stride);
	close(fd);
	if (!pool) {
		r = fail(c, -errno, "cannot map the node's frame pool (%" PRIu64 " bytes): %s",
			 reply->map->size, strerror(errno));
		goto out;
	}
	pool_retire(c); /* a pool of an earlier connection: not expected here */
	c->pool = pool;
	c->pool_size = reply->map->size;
	c->pool_stride = stride;
	c->pool_generation = c->generation;
out:
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

static int get_pointer(struct ftvm_client *c, const char *guid, uint64_t page, bool write,
		       bool wait, void **ret, size_t *ret_len)
{
	Ftvm__Client__GetPointerRequest get = FTVM__CLIENT__GET_POINTER_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	bool unsent;
	int r, tries;

	if (!c || !ret)
		return -EINVAL;
	r = client_check_guid(c, guid);
	if (r < 0)
		return r;
	get.guid = (char *)guid;
	get.page = page;
	get.write = write;
	get.wait = wait;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_GET_POINTER;
	req.get_pointer = &get;

	error_reset(c);
	r = pthread_mutex_lock(&c->lock);
	if (r != 0)
		return fail(c, -r, "cannot lock the client: %s", strerror(r));
	/* The pool and the grant must come from one connection: after a move
	 * that the request never reached, map the new node's pool and ask it. */
	for (tries = 0;; tries++) {
		r = map_locked(c);
		if (r < 0)
			break;
		r = call_locked(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_POINTER, &unsent,
				&reply);
		if (r < 0 && unsent && tries < MOVES_MAX)
			continue;
		break;
	}
	if (r < 0)
		goto out;
	if (c->pool_generation != c->generation) {
		r = fail(c, -ENOTCONN, "the client moved to another node during the call");
	} else if (reply->pointer->offset > c->pool_size ||
		   reply->pointer->length > c->pool_size - reply->pointer->offset) {
		r = fail(c, -EBADMSG, "the node's pointer (%" PRIu64 " + %u) is outside its pool",
			 reply->pointer->offset, reply->pointer->length);
	} else {
		*ret = c->pool + (write ? 0 : c->pool_stride) + reply->pointer->offset;
		if (ret_len)
			*ret_len = reply->pointer->length;
	}
	ftvm__client__client_reply__free_unpacked(reply, NULL);
out:
	submit_call_done(c);
	pthread_mutex_unlock(&c->lock);
	return r;
}

int ftvm_get_read_pointer(struct ftvm_client *c, const char *guid, uint64_t page, bool wait,
			  const void **ret, size_t *ret_len)
{
	return get_pointer(c, guid, page, false, wait, (void **)ret, ret_len);
}

int ftvm_get_write_pointer(struct ftvm_client *c, const char *guid, uint64_t page, bool wait,
			   void **ret, size_t *ret_len)
{
	return get_pointer(c, guid, page, true, wait, ret, ret_len);
}

int ftvm_release_pointer(struct ftvm_client *c, const char *guid, uint64_t page, bool modified,
			 uint32_t *ret_crc32c)
{
	Ftvm__Client__ReleasePointerRequest rel = FTVM__CLIENT__RELEASE_POINTER_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Reply *reply = NULL;
	int r;

	r = client_check_guid(c, guid);
	if (r < 0)
		return r;
	rel.guid = (char *)guid;
	rel.page = page;
	rel.modified = modified;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER;
	req.release_pointer = &rel;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_RELEASE_POINTER, &reply);
	if (r < 0)
		return r;
	if (ret_crc32c)
		*ret_crc32c = reply->release_pointer->crc32c;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}

/* ---- events (node/EVENTS.md) ---- */

static void event_from_reply(const Ftvm__Client__Event *e, struct ftvm_event *ret)
{
	memset(ret, 0, sizeof(*ret));
	ret->seq = e->seq;
	ret->at_ms = e->at_ms;
	copy_str(ret->type, sizeof(ret->type), e->type);
	copy_str(ret->what, sizeof(ret->what), e->what);
	copy_str(ret->reason, sizeof(ret->reason), e->reason);
	ret->current = e->current;
	for (size_t i = 0; i < e->n_fields && ret->n_fields < FTVM_EVENT_FIELDS_MAX; i++) {
		struct ftvm_event_field *f = &ret->fields[ret->n_fields++];

		copy_str(f->key, sizeof(f->key), e->fields[i]->key);
		copy_str(f->value, sizeof(f->value), e->fields[i]->value);
	}
}

/* The events of one reply to fn; fn's value, or 0 to go on. */
static int events_to(struct ftvm_client *c, const Reply *reply, ftvm_event_fn fn, void *arg)
{
	struct ftvm_event ev;
	int r;

	if (reply->status != FTVM__PARTNER__STATUS__STATUS_OK)
		return refused(c, client_status_errno(reply->status), reply->status, reply->reason);
	if (reply->reply_case != FTVM__CLIENT__CLIENT_REPLY__REPLY_EVENTS)
		return fail(c, -EBADMSG, "the node answered events with something else");
	for (size_t i = 0; i < reply->events->n_events; i++) {
		event_from_reply(reply->events->events[i], &ev);
		r = fn(&ev, arg);
		if (r)
			return r;
	}
	return 0;
}

/* A connection of its own, so the client's lock is not held while the
 * stream lasts: the request goes with id 1, and every reply is its. */
int ftvm_events(struct ftvm_client *c, bool now, ftvm_event_fn fn, void *arg)
{
	Ftvm__Client__EventsRequest er = FTVM__CLIENT__EVENTS_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const char *socket_path;
	const uint8_t *payload;
	uint8_t *frame = NULL;
	size_t len, payload_len;
	struct conn conn;
	Reply *reply;
	int r;

	if (!c || !fn)
		return -EINVAL;
	error_reset(c);
	conn_init(&conn);
	socket_path = ftvm_connected_socket(c);
	if (!socket_path)
		return fail(c, -ENOTCONN, "the client talks to no node now");
	r = conn_open(&conn, socket_path, CALL_TIMEOUT_MS);
	if (r < 0)
		return fail(c, r, "cannot connect to %s: %s", socket_path, strerror(-r));
	er.now = now;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_EVENTS;
	req.events = &er;
	req.id = 1;
	len = ftvm__client__client_request__get_packed_size(&req);
	frame = malloc(FRAME_HEADER_SIZE + len);
	if (!frame) {
		r = fail(c, -ENOMEM, "out of memory");
		goto out;
	}
	ftvm__client__client_request__pack(&req, frame + FRAME_HEADER_SIZE);
	frame_seal(frame, len);
	r = client_send_all(c, &conn, frame, FRAME_HEADER_SIZE + len, now_ms() + CALL_TIMEOUT_MS);
	while (r >= 0) {
		r = recv_frame(c, &conn, UINT64_MAX, &payload, &payload_len);
		if (r < 0)
			break;
		reply = ftvm__client__client_reply__unpack(NULL, payload_len, payload);
		client_consume(&conn, (size_t)r);
		if (!reply) {
			r = fail(c, -EBADMSG, "the node's reply does not parse (%zu bytes)",
				 payload_len);
			break;
		}
		r = events_to(c, reply, fn, arg);
		ftvm__client__client_reply__free_unpacked(reply, NULL);
		if (r)
			break;
	}
out:
	free(frame);
	conn_close(&conn);
	return r;
}
