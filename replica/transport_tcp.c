/* The TCP backend of the partner channel: libevent bufferevents carrying
 * length-prefixed, checksummed frames (common/frame.h). Nagle is off: the
 * channel is request/response and every microsecond of a round trip counts.
 * A bufferevent writes; a frame_reader (frame_read.h) reads in its stead, once
 * the connection is up. */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>

#include "config.h"
#include "frame.h"
#include "frame_read.h"
#include "transport.h"

struct tcp_transport;

struct tcp_conn {
	struct repl_conn base; /* first: the transport-independent part */
	struct tcp_transport *transport;
	struct tcp_conn *next;
	struct bufferevent *bev;
	struct frame_reader *reader; /* NULL until connected */
	char peer[80];
	/* Set while a callback runs on this conn: close() then only marks it,
	 * and the read loop frees it once the callback has returned. */
	bool dispatching;
	bool closed;
	bool connected;
};

struct tcp_transport {
	struct repl_transport base;
	struct event_base *evbase;
	struct repl_transport_callbacks cb;
	void *cb_arg;
	size_t max_payload;
	struct evconnlistener *listener;
	struct peer_filter allowed;
	struct tcp_conn *conns;
};

static int resolve(const char *endpoint, int passive, struct evutil_addrinfo **ret)
{
	struct evutil_addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_protocol = IPPROTO_TCP,
		.ai_flags = passive ? EVUTIL_AI_PASSIVE : 0,
	};
	char host[256], port[8];
	uint16_t portnum;

	if (config_parse_endpoint(endpoint, host, sizeof(host), &portnum) < 0)
		return -EINVAL;
	snprintf(port, sizeof(port), "%u", portnum);
	if (evutil_getaddrinfo(host, port, &hints, ret) != 0)
		return -EHOSTUNREACH;
	return 0;
}

static void set_nodelay(evutil_socket_t fd)
{
	int one = 1;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static void conn_unlink(struct tcp_conn *c)
{
	struct tcp_conn **p = &c->transport->conns;

	while (*p && *p != c)
		p = &(*p)->next;
	if (*p)
		*p = c->next;
}

static void conn_free(struct tcp_conn *c)
{
	conn_unlink(c);
	frame_reader_free(c->reader);
	bufferevent_free(c->bev);
	free(c);
}

/* Reports the connection gone and frees it (unless its owner closed it in
 * the callback already, which frees it too). */
static void conn_fail(struct tcp_conn *c, int error, const char *reason)
{
	struct tcp_transport *t = c->transport;

	if (c->closed)
		return;
	c->closed = true;
	c->dispatching = true;
	t->cb.conn_down(&c->base, error, reason, t->cb_arg);
	conn_free(c);
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct tcp_conn *c = arg;
	struct tcp_transport *t = c->transport;
	struct evbuffer *in = bufferevent_get_input(bev);
	uint8_t hdr[FRAME_HEADER_SIZE];
	char reason[128];

	c->dispatching = true;
	while (!c->closed && evbuffer_get_length(in) >= FRAME_HEADER_SIZE) {
		const uint8_t *payload;
		size_t payload_len;
		const char *why;
		int len, r;

		evbuffer_copyout(in, hdr, sizeof(hdr));
		len = frame_header_check(hdr, t->max_payload, &why);
		if (len < 0)
			goto bad_frame;
		if (evbuffer_get_length(in) < FRAME_HEADER_SIZE + (size_t)len)
			break;
		r = frame_decode(evbuffer_pullup(in, FRAME_HEADER_SIZE + len),
				 FRAME_HEADER_SIZE + len, t->max_payload, &payload, &payload_len,
				 &why);
		if (r < 0)
			goto bad_frame;
		t->cb.receive(&c->base, payload, payload_len, t->cb_arg);
		if (!c->closed)
			evbuffer_drain(in, (size_t)r);
		continue;
bad_frame:
		snprintf(reason, sizeof(reason), "bad frame: %s", why);
		c->dispatching = false;
		conn_fail(c, -EBADMSG, reason);
		return;
	}
	c->dispatching = false;
	if (c->closed)
		conn_free(c);
}

static void on_event(struct bufferevent *bev, short events, void *arg)
{
	struct tcp_conn *c = arg;
	struct tcp_transport *t = c->transport;
	char reason[192];
	size_t left;
	int err;

	if (events & BEV_EVENT_CONNECTED) {
		set_nodelay(bufferevent_getfd(bev));
		if (frame_reader_new(c->bev, t->max_payload, &c->reader) < 0) {
			snprintf(reason, sizeof(reason), "%s: out of memory to read from", c->peer);
			conn_fail(c, -ENOMEM, reason);
			return;
		}
		c->connected = true;
		c->dispatching = true;
		t->cb.conn_up(&c->base, false, t->cb_arg);
		c->dispatching = false;
		if (c->closed)
			conn_free(c);
		return;
	}
	if (events & BEV_EVENT_EOF) {
		left = evbuffer_get_length(bufferevent_get_input(bev));
		if (left)
			snprintf(reason, sizeof(reason),
				 "%s closed the connection inside a frame (%zu bytes truncated)",
				 c->peer, left);
		else
			snprintf(reason, sizeof(reason), "%s closed the connection", c->peer);
		conn_fail(c, left ? -EBADMSG : -ECONNRESET, reason);
		return;
	}
	if (events & BEV_EVENT_ERROR) {
		err = EVUTIL_SOCKET_ERROR();
		snprintf(reason, sizeof(reason), "%s: %s", c->peer,
			 evutil_socket_error_to_string(err));
		conn_fail(c, -(err ? err : EIO), reason);
	}
}

static struct tcp_conn *conn_new(struct tcp_transport *t, evutil_socket_t fd, const char *peer)
{
	struct tcp_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->bev = bufferevent_socket_new(t->evbase, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!c->bev) {
		free(c);
		return NULL;
	}
	c->base.transport = &t->base;
	c->transport = t;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	bufferevent_setcb(c->bev, on_read, NULL, on_event, c);
	bufferevent_enable(c->bev, EV_WRITE);
	c->next = t->conns;
	t->conns = c;
	return c;
}

static void on_accept(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int salen,
		      void *arg)
{
	struct tcp_transport *t = arg;
	char addr[INET6_ADDRSTRLEN] = "?", peer[80];
	struct tcp_conn *c;
	uint16_t port = 0;

	if (sa->sa_family == AF_INET) {
		struct sockaddr_in *sin = (struct sockaddr_in *)sa;
		evutil_inet_ntop(AF_INET, &sin->sin_addr, addr, sizeof(addr));
		port = ntohs(sin->sin_port);
		snprintf(peer, sizeof(peer), "%s:%u", addr, port);
	} else {
		struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)sa;
		evutil_inet_ntop(AF_INET6, &sin6->sin6_addr, addr, sizeof(addr));
		port = ntohs(sin6->sin6_port);
		snprintf(peer, sizeof(peer), "[%s]:%u", addr, port);
	}
	if (!peer_filter_allows(&t->allowed, sa)) {
		evutil_closesocket(fd);
		if (t->cb.refused)
			t->cb.refused(peer, "not the partner's address", t->cb_arg);
		return;
	}
	set_nodelay(fd);
	c = conn_new(t, fd, peer);
	if (!c) {
		evutil_closesocket(fd);
		return;
	}
	if (frame_reader_new(c->bev, t->max_payload, &c->reader) < 0) {
		conn_free(c); /* closes fd */
		return;
	}
	c->connected = true;
	c->dispatching = true;
	t->cb.conn_up(&c->base, true, t->cb_arg);
	c->dispatching = false;
	if (c->closed)
		conn_free(c);
}

static int tcp_create(struct event_base *base, const struct repl_transport_callbacks *cb, void *arg,
		      size_t max_payload, struct repl_transport **ret)
{
	struct tcp_transport *t = calloc(1, sizeof(*t));

	if (!t)
		return -ENOMEM;
	t->base.ops = &repl_transport_tcp;
	t->evbase = base;
	t->cb = *cb;
	t->cb_arg = arg;
	t->max_payload = max_payload;
	*ret = &t->base;
	return 0;
}

static int tcp_listen(struct repl_transport *base, const char *endpoint,
		      const struct peer_filter *allowed)
{
	struct tcp_transport *t = (struct tcp_transport *)base;
	struct evutil_addrinfo *ai;
	int r;

	t->allowed = allowed ? *allowed : (struct peer_filter){ 0 };
	r = resolve(endpoint, 1, &ai);
	if (r < 0)
		return r;
	t->listener = evconnlistener_new_bind(t->evbase, on_accept, t,
					      LEV_OPT_CLOSE_ON_FREE | LEV_OPT_REUSEABLE |
						      LEV_OPT_CLOSE_ON_EXEC,
					      -1, ai->ai_addr, (int)ai->ai_addrlen);
	r = t->listener ? 0 : -(errno ? errno : EADDRINUSE);
	evutil_freeaddrinfo(ai);
	return r;
}

static int tcp_connect(struct repl_transport *base, const char *endpoint, struct repl_conn **ret)
{
	struct tcp_transport *t = (struct tcp_transport *)base;
	struct evutil_addrinfo *ai;
	struct tcp_conn *c;
	int r;

	r = resolve(endpoint, 0, &ai);
	if (r < 0)
		return r;
	c = conn_new(t, -1, endpoint);
	if (!c) {
		evutil_freeaddrinfo(ai);
		return -ENOMEM;
	}
	/* Failure here (or later) arrives as BEV_EVENT_ERROR: one path for both. */
	if (bufferevent_socket_connect(c->bev, ai->ai_addr, (int)ai->ai_addrlen) < 0) {
		r = -(errno ? errno : ECONNREFUSED);
		conn_free(c);
		evutil_freeaddrinfo(ai);
		return r;
	}
	evutil_freeaddrinfo(ai);
	*ret = &c->base;
	return 0;
}

/* The pieces of one frame a gathered write takes at once: its header and
 * the payload's pieces (more are queued, not written at once). */
#define TCP_WRITE_PIECES 16

/* Writes what the socket takes now and returns how much; 0 on EAGAIN or an
 * error (the bufferevent then sees the error on its own write). */
static size_t write_now(struct tcp_conn *c, const uint8_t *hdr, const struct iovec *iov, size_t n)
{
	struct iovec all[TCP_WRITE_PIECES];
	ssize_t done;

	all[0] = (struct iovec){ .iov_base = (void *)hdr, .iov_len = FRAME_HEADER_SIZE };
	memcpy(all + 1, iov, n * sizeof(*iov));
	done = writev(bufferevent_getfd(c->bev), all, (int)n + 1);
	return done > 0 ? (size_t)done : 0;
}

/* What the socket did not take, from skip bytes into the pieces on, queued
 * (copied) for the bufferevent. */
static int queue_rest(struct evbuffer *out, const struct iovec *iov, size_t n, size_t skip)
{
	for (size_t i = 0; i < n; i++) {
		size_t len = iov[i].iov_len;

		if (skip >= len) {
			skip -= len;
			continue;
		}
		if (evbuffer_add(out, (const uint8_t *)iov[i].iov_base + skip, len - skip) < 0)
			return -ENOMEM;
		skip = 0;
	}
	return 0;
}

static int tcp_send(struct repl_conn *base, const struct iovec *iov, size_t n, size_t len)
{
	struct tcp_conn *c = (struct tcp_conn *)base;
	struct evbuffer *out = bufferevent_get_output(c->bev);
	uint8_t hdr[FRAME_HEADER_SIZE];
	size_t done = 0;

	if (c->closed)
		return -ENOTCONN;
	if (len > c->transport->max_payload)
		return -EMSGSIZE;
	frame_header_build_iov(hdr, iov, n, len);
	/* With nothing queued, write straight away: leaving it to the bufferevent
	 * costs one more trip through the event loop on every message. */
	if (c->connected && evbuffer_get_length(out) == 0 && n < TCP_WRITE_PIECES)
		done = write_now(c, hdr, iov, n);
	if (done < FRAME_HEADER_SIZE && evbuffer_add(out, hdr + done, FRAME_HEADER_SIZE - done) < 0)
		return -ENOMEM;
	done = done > FRAME_HEADER_SIZE ? done - FRAME_HEADER_SIZE : 0;
	return queue_rest(out, iov, n, done);
}

/* The iovecs one writev() of tcp_send_many() gathers at most: a header and
 * a piece or two per payload, for the payloads a loop turn leaves. */
#define TCP_MANY_IOV 128

/* Payloads [*at, n) that fit in TCP_MANY_IOV iovecs (one at least), each
 * behind its header (hdrs[i - *at]), into iov; *at moves past them.
 * Returns the iovecs used; *ret_len their bytes. */
static size_t gather(const struct repl_payload *p, size_t n, size_t *at,
		     uint8_t (*hdrs)[FRAME_HEADER_SIZE], struct iovec *iov, size_t *ret_len)
{
	size_t used = 0, len = 0, first = *at;

	for (; *at < n && (*at == first || used + 1 + p[*at].n <= TCP_MANY_IOV); (*at)++) {
		uint8_t *hdr = hdrs[*at - first];

		frame_header_build_iov(hdr, p[*at].iov, p[*at].n, p[*at].len);
		iov[used++] = (struct iovec){ .iov_base = hdr, .iov_len = FRAME_HEADER_SIZE };
		memcpy(iov + used, p[*at].iov, p[*at].n * sizeof(*iov));
		used += p[*at].n;
		len += FRAME_HEADER_SIZE + p[*at].len;
	}
	*ret_len = len;
	return used;
}

static int tcp_send_many(struct repl_conn *base, const struct repl_payload *p, size_t n)
{
	struct tcp_conn *c = (struct tcp_conn *)base;
	struct evbuffer *out = bufferevent_get_output(c->bev);
	uint8_t hdrs[TCP_MANY_IOV][FRAME_HEADER_SIZE];
	struct iovec iov[TCP_MANY_IOV];
	bool gathered = true;
	size_t at = 0;
	int r = 0;

	if (c->closed)
		return -ENOTCONN;
	for (size_t i = 0; i < n; i++) {
		if (p[i].len > c->transport->max_payload)
			return -EMSGSIZE;
		gathered = gathered && p[i].n < TCP_MANY_IOV;
	}
	while (at < n && r == 0) {
		size_t len, used, done = 0;
		ssize_t w;

		/* Behind bytes already queued, everything queues (as send()). */
		if (!c->connected || !gathered || evbuffer_get_length(out) > 0) {
			for (; at < n && r == 0; at++)
				r = tcp_send(base, p[at].iov, p[at].n, p[at].len);
			break;
		}
		used = gather(p, n, &at, hdrs, iov, &len);
		w = writev(bufferevent_getfd(c->bev), iov, (int)used);
		done = w > 0 ? (size_t)w : 0; /* an error: the bufferevent sees it */
		if (done < len)
			r = queue_rest(out, iov, used, done);
	}
	return r;
}

static void tcp_close(struct repl_conn *base)
{
	struct tcp_conn *c = (struct tcp_conn *)base;

	if (c->closed)
		return;
	c->closed = true;
	if (!c->dispatching)
		conn_free(c);
}

static size_t tcp_backlog(const struct repl_conn *base)
{
	return evbuffer_get_length(bufferevent_get_output(((const struct tcp_conn *)base)->bev));
}

static const char *tcp_peer_name(const struct repl_conn *base)
{
	return ((const struct tcp_conn *)base)->peer;
}

static void tcp_destroy(struct repl_transport *base)
{
	struct tcp_transport *t = (struct tcp_transport *)base;

	if (!t)
		return;
	while (t->conns)
		conn_free(t->conns);
	if (t->listener)
		evconnlistener_free(t->listener);
	free(t);
}

const struct repl_transport_ops repl_transport_tcp = {
	.name = "tcp",
	.create = tcp_create,
	.listen = tcp_listen,
	.connect = tcp_connect,
	.send = tcp_send,
	.send_many = tcp_send_many,
	.close = tcp_close,
	.backlog = tcp_backlog,
	.peer_name = tcp_peer_name,
	.destroy = tcp_destroy,
};
