/* libftvm (ftvm.h): blocking calls over the node's unix socket.
 *
 * Every public call is one ClientRequest out and the ClientReply with the same
 * id back, through call(); adding a request means filling its oneof member,
 * calling call() and copying the answer out. Replies with another id are
 * answers to earlier calls that timed out on this side, and are skipped.
 *
 * This is library code linked into other people's programs: it logs nothing,
 * never raises SIGPIPE (MSG_NOSIGNAL) and never trusts the node's bytes. */
#include "ftvm.h"

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "client.pb-c.h"
#include "frame.h"

typedef Ftvm__Client__ClientRequest Request;
typedef Ftvm__Client__ClientReply Reply;

#define CALL_TIMEOUT_MS 10000
#define RBUF_MIN 65536u

struct ftvm_client {
	int fd;
	/* The stream lost its frame boundary (bad frame, half-sent request, node
	 * gone): nothing more can be read or sent on it. */
	bool broken;
	uint64_t next_id;
	size_t max_payload;
	uint8_t *rbuf; /* received bytes not yet consumed */
	size_t rlen, rcap;
	char error[256];
	bool error_from_node; /* error holds the node's refusal */
};

static int fail(struct ftvm_client *c, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int fail(struct ftvm_client *c, int r, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(c->error, sizeof(c->error), fmt, ap);
	va_end(ap);
	return r;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int set_timeout(int fd, int opt, uint64_t ms)
{
	struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
			      .tv_usec = (suseconds_t)(ms % 1000) * 1000 };

	if (ms == 0)
		tv.tv_usec = 1000; /* 0 would mean "no timeout" */
	return setsockopt(fd, SOL_SOCKET, opt, &tv, sizeof(tv)) < 0 ? -errno : 0;
}

static const char *status_name(int status)
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
	};

	if (status < 0 || (size_t)status >= sizeof(names) / sizeof(names[0]) || !names[status])
		return "unknown status";
	return names[status];
}

static int status_to_errno(int status)
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
	default:
		return -EIO;
	}
}

static int send_all(struct ftvm_client *c, const uint8_t *buf, size_t len, uint64_t deadline)
{
	size_t off = 0;
	uint64_t now;
	ssize_t n;
	int r;

	while (off < len) {
		now = now_ms();
		if (now >= deadline)
			goto timeout;
		r = set_timeout(c->fd, SO_SNDTIMEO, deadline - now);
		if (r < 0)
			return fail(c, r, "cannot set a send timeout: %s", strerror(-r));
		n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				goto timeout;
			r = -errno;
			if (off > 0)
				c->broken = true;
			if (r == -EPIPE || r == -ECONNRESET) {
				c->broken = true;
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
		c->broken = true;
	return fail(c, -ETIMEDOUT, "the node did not take the request within %d s",
		    CALL_TIMEOUT_MS / 1000);
}

/* Reads until rbuf starts with a whole, valid frame. Returns its length and
 * sets *ret_payload and *ret_len, or -errno. */
static int recv_frame(struct ftvm_client *c, uint64_t deadline, const uint8_t **ret_payload,
		      size_t *ret_len)
{
	const char *why;
	uint64_t now;
	size_t need;
	ssize_t n;
	int r;

	for (;;) {
		need = FRAME_HEADER_SIZE;
		if (c->rlen >= FRAME_HEADER_SIZE) {
			r = frame_header_check(c->rbuf, c->max_payload, &why);
			if (r < 0)
				goto bad;
			need = FRAME_HEADER_SIZE + (size_t)r;
			if (c->rlen >= need) {
				r = frame_decode(c->rbuf, c->rlen, c->max_payload, ret_payload,
						 ret_len, &why);
				if (r < 0)
					goto bad;
				if (r > 0)
					return r;
			}
		}
		if (need > c->rcap) {
			size_t cap = need < RBUF_MIN ? RBUF_MIN : need;
			uint8_t *p = realloc(c->rbuf, cap);

			if (!p)
				return fail(c, -ENOMEM, "out of memory for a %zu byte reply", need);
			c->rbuf = p;
			c->rcap = cap;
		}
		now = now_ms();
		if (now >= deadline)
			goto timeout;
		r = set_timeout(c->fd, SO_RCVTIMEO, deadline - now);
		if (r < 0)
			return fail(c, r, "cannot set a receive timeout: %s", strerror(-r));
		n = recv(c->fd, c->rbuf + c->rlen, c->rcap - c->rlen, 0);
		if (n == 0) {
			c->broken = true;
			return fail(c, -ECONNRESET, "the node closed the connection");
		}
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				goto timeout;
			r = -errno;
			c->broken = true;
			if (r == -ECONNRESET)
				return fail(c, r, "the node closed the connection");
			return fail(c, r, "cannot receive from the node: %s", strerror(-r));
		}
		c->rlen += (size_t)n;
	}
bad:
	/* Where the next frame starts is unknown now. */
	c->broken = true;
	return fail(c, -EBADMSG, "bad reply frame from the node: %s", why);
timeout:
	return fail(c, -ETIMEDOUT, "no reply from the node within %d s", CALL_TIMEOUT_MS / 1000);
}

static void consume(struct ftvm_client *c, size_t len)
{
	memmove(c->rbuf, c->rbuf + len, c->rlen - len);
	c->rlen -= len;
}

/* Sends req (its id is set here) and waits for its reply. On 0, *ret_reply
 * holds a reply with status OK and the oneof member expect set; free it with
 * ftvm__client__client_reply__free_unpacked(). Otherwise -errno with the
 * reason in c->error. */
static int call(struct ftvm_client *c, Request *req, Ftvm__Client__ClientReply__ReplyCase expect,
		Reply **ret_reply)
{
	uint64_t deadline = now_ms() + CALL_TIMEOUT_MS;
	const uint8_t *payload;
	size_t len, payload_len;
	uint8_t *frame;
	Reply *reply;
	int r;

	c->error[0] = '\0';
	c->error_from_node = false;
	if (c->broken)
		return fail(c, -ENOTCONN, "the connection to the node failed earlier; reconnect");

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
	r = send_all(c, frame, FRAME_HEADER_SIZE + len, deadline);
	free(frame);
	if (r < 0)
		return r;

	for (;;) {
		r = recv_frame(c, deadline, &payload, &payload_len);
		if (r < 0)
			return r;
		reply = ftvm__client__client_reply__unpack(NULL, payload_len, payload);
		consume(c, (size_t)r);
		if (!reply)
			return fail(c, -EBADMSG, "the node's reply does not parse (%zu bytes)",
				    payload_len);
		if (reply->id == req->id)
			break;
		/* The answer to an earlier call that timed out here. */
		ftvm__client__client_reply__free_unpacked(reply, NULL);
	}

	r = status_to_errno(reply->status);
	if (r < 0) {
		fail(c, r, "%s",
		     reply->reason && reply->reason[0] ? reply->reason
						       : status_name(reply->status));
		c->error_from_node = true;
		goto out;
	}
	if (reply->reply_case != expect) {
		r = fail(c, -EBADMSG, "the node answered OK without the expected reply (got %d)",
			 (int)reply->reply_case);
		goto out;
	}
	*ret_reply = reply;
	return 0;
out:
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return r;
}

static void copy_str(char *dst, size_t size, const char *src)
{
	snprintf(dst, size, "%s", src ? src : "");
}

int ftvm_connect(const char *socket_path, struct ftvm_client **ret)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct ftvm_client *c;
	int r;

	if (!socket_path || !ret)
		return -EINVAL;
	if (socket_path[0] == '\0' || strlen(socket_path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, socket_path);

	c = calloc(1, sizeof(*c));
	if (!c)
		return -ENOMEM;
	c->max_payload = FRAME_MAX_PAYLOAD_DEFAULT;
	c->fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		r = -errno;
		goto fail;
	}
	/* connect() on a unix socket waits while the node's backlog is full
	 * (a hung node), bounded by the send timeout. */
	r = set_timeout(c->fd, SO_SNDTIMEO, CALL_TIMEOUT_MS);
	if (r < 0)
		goto fail;
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = errno == EAGAIN ? -ETIMEDOUT : -errno;
		goto fail;
	}
	*ret = c;
	return 0;
fail:
	if (c->fd >= 0)
		close(c->fd);
	free(c);
	return r;
}

void ftvm_disconnect(struct ftvm_client *c)
{
	if (!c)
		return;
	close(c->fd);
	free(c->rbuf);
	free(c);
}

const char *ftvm_last_error(const struct ftvm_client *c)
{
	return c ? c->error : "no client";
}

bool ftvm_last_error_from_node(const struct ftvm_client *c)
{
	return c && c->error_from_node;
}

int ftvm_status(struct ftvm_client *c, struct ftvm_node_status *ret)
{
	Ftvm__Client__StatusRequest status = FTVM__CLIENT__STATUS_REQUEST__INIT;
	Request req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	const Ftvm__Client__StatusReply *s;
	const Ftvm__Client__PartnerStatus *p;
	Reply *reply = NULL;
	int r;

	if (!c || !ret)
		return -EINVAL;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_STATUS;
	req.status = &status;
	r = call(c, &req, FTVM__CLIENT__CLIENT_REPLY__REPLY_STATUS_REPLY, &reply);
	if (r < 0)
		return r;

	s = reply->status_reply;
	memset(ret, 0, sizeof(*ret));
	copy_str(ret->node, sizeof(ret->node), s->node);
	copy_str(ret->state, sizeof(ret->state), s->state);
	ret->epoch = s->epoch;
	copy_str(ret->transport, sizeof(ret->transport), s->transport);
	copy_str(ret->transport_reason, sizeof(ret->transport_reason), s->transport_reason);
	p = s->partner;
	if (p) {
		copy_str(ret->partner_id, sizeof(ret->partner_id), p->id);
		copy_str(ret->partner_link, sizeof(ret->partner_link), p->link);
		copy_str(ret->partner_state, sizeof(ret->partner_state), p->state);
		copy_str(ret->partner_endpoint, sizeof(ret->partner_endpoint), p->endpoint);
		ret->partner_link_changes = p->link_changes;
		ret->partner_last_seen_ms = p->last_seen_ms;
	}
	ret->frames_total = s->frames_total;
	ret->frames_free = s->frames_free;
	ret->allocations_own = s->allocations_own;
	ret->allocations_partner = s->allocations_partner;
	ret->page_size = s->page_size;
	ret->pid = s->pid;
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	return 0;
}
