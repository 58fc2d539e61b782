/* The NBD server (nbd_server.h; node/NBD.md has the connection's states and
 * the limits).
 *
 * A connection's struct lives while requests it handed to the backend are
 * in flight: each holds a reference, so a late nbd_io_done() on a closed
 * connection drops its reply, and the backend's close comes once the last
 * is done. Reading pauses at the limits and resumes from a deferred event
 * (never from inside nbd_io_done, which the backend may call from inside
 * submit). */
#define _GNU_SOURCE
#define LOG_SUBSYSTEM "nbd"

#include "nbd_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/listener.h>

#include "log.h"
#include "tcp_listen.h"
#include "unix_listen.h"

#define NBD_CONNECTIONS_MAX 64
#define NBD_REQUESTS_MAX 128		   /* in flight per connection */
#define NBD_INFLIGHT_BYTES_MAX (64u << 20) /* payloads and read buffers */
#define NBD_OUTPUT_MAX (64u << 20)	   /* replies the client has not read */
#define NBD_BACKLOG 64
#define NBD_HANDSHAKE_INPUT (NBD_OPTION_HEADER_SIZE + NBD_OPTION_MAX_DATA)
#define REFUSED_LOG_EVERY_S 60

enum conn_state {
	CONN_HANDSHAKE,
	CONN_TRANSMISSION,
	CONN_DRAINING, /* nothing more is read; closed once its requests are answered */
};

struct nbd_conn {
	struct nbd_server *server; /* NULL once closed */
	struct bufferevent *bev;   /* NULL once closed */
	struct event *resume;	   /* reading again after a pause */
	struct nbd_conn *prev, *next;
	enum conn_state state;
	struct nbd_handshake *hs;
	struct nbd_export export; /* as looked up at GO */
	char *export_name;
	void *backend; /* the backend's export, once opened */
	const struct nbd_backend_ops *ops;
	void *arg;
	char peer[INET6_ADDRSTRLEN + 16];
	unsigned in_flight;
	size_t in_flight_bytes;
	bool paused;
	unsigned refs; /* one while open, one per request in flight */
};

struct conn_io {
	struct nbd_io io; /* first: nbd_io_done() finds the rest from it */
	struct nbd_conn *conn;
};

struct nbd_server {
	struct event_base *base;
	struct evconnlistener *tcp, *unix_listener;
	char *socket_path;
	struct unix_listen_id socket_file;
	const struct nbd_backend_ops *ops;
	void *arg;
	struct nbd_conn *conns;
	time_t refused_logged;
	struct nbd_server_stats stats;
};

static void read_cb(struct bufferevent *bev, void *arg);

/* The connection's last reference: the backend lets go of its export. */
static void conn_unref(struct nbd_conn *conn)
{
	if (--conn->refs > 0)
		return;
	if (conn->backend)
		conn->ops->close(conn->arg, conn->backend);
	free(conn->export_name);
	free(conn);
}

static void conn_close(struct nbd_conn *conn, const char *why)
{
	struct nbd_server *s = conn->server;

	if (!conn->bev)
		return;
	log_debug("%s: closed (%s; %u requests in flight)", conn->peer, why, conn->in_flight);
	nbd_handshake_free(conn->hs);
	conn->hs = NULL;
	event_free(conn->resume);
	conn->resume = NULL;
	bufferevent_free(conn->bev);
	conn->bev = NULL;
	*(conn->prev ? &conn->prev->next : &s->conns) = conn->next;
	if (conn->next)
		conn->next->prev = conn->prev;
	conn->server = NULL;
	s->stats.connections--;
	conn_unref(conn);
}

/* A client that broke the protocol: logged, and its connection only goes. */
static void protocol_error(struct nbd_conn *conn, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
static void protocol_error(struct nbd_conn *conn, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_warning("%s: %s: closing its connection", conn->peer, why);
	conn->server->stats.protocol_errors++;
	conn_close(conn, why);
}

static size_t output_queued(const struct nbd_conn *conn)
{
	return evbuffer_get_length(bufferevent_get_output(conn->bev));
}

static bool over_limits(const struct nbd_conn *conn)
{
	return conn->in_flight >= NBD_REQUESTS_MAX ||
	       conn->in_flight_bytes >= NBD_INFLIGHT_BYTES_MAX ||
	       output_queued(conn) >= NBD_OUTPUT_MAX;
}

/* Draining, or paused under the limits again: what comes next. */
static void conn_settle(struct nbd_conn *conn)
{
	if (!conn->bev)
		return;
	if (conn->state == CONN_DRAINING) {
		if (conn->in_flight == 0 && output_queued(conn) == 0)
			conn_close(conn, "drained");
		return;
	}
	if (conn->paused && !over_limits(conn)) {
		conn->paused = false;
		bufferevent_enable(conn->bev, EV_READ);
		event_active(conn->resume, 0, 0); /* what is buffered already */
	}
}

static void drain(struct nbd_conn *conn, const char *why)
{
	log_debug("%s: %s", conn->peer, why);
	conn->state = CONN_DRAINING;
	bufferevent_disable(conn->bev, EV_READ);
	conn_settle(conn);
}

static void reply(struct nbd_conn *conn, const struct nbd_request *req, uint32_t error,
		  const uint8_t *data)
{
	struct nbd_out out = { 0 };

	if (error)
		conn->server->stats.errors++;
	if (nbd_reply_simple(&out, req->cookie, error) < 0 ||
	    bufferevent_write(conn->bev, out.data, out.len) < 0 ||
	    (data && bufferevent_write(conn->bev, data, req->length) < 0)) {
		nbd_out_free(&out);
		protocol_error(conn, "out of memory for a reply");
		return;
	}
	nbd_out_free(&out);
}

void nbd_io_done(struct nbd_io *io, int err)
{
	struct conn_io *ci = (struct conn_io *)io;
	struct nbd_conn *conn = ci->conn;
	bool read = io->req.type == NBD_CMD_READ, carries = read || io->req.type == NBD_CMD_WRITE;

	if (conn->bev) {
		if (err == 0 && read)
			conn->server->stats.read_bytes += io->req.length;
		else if (err == 0 && io->req.type == NBD_CMD_WRITE)
			conn->server->stats.written_bytes += io->req.length;
		reply(conn, &io->req, nbd_error_from_errno(err),
		      err == 0 && read ? io->data : NULL);
	}
	conn->in_flight--;
	conn->in_flight_bytes -= carries ? io->req.length : 0;
	free(io->data);
	free(ci);
	conn_settle(conn);
	conn_unref(conn);
}

/* The handshake's bytes; true when the connection goes on to transmission. */
static bool handshake_input(struct nbd_conn *conn)
{
	struct evbuffer *in = bufferevent_get_input(conn->bev);
	size_t len = evbuffer_get_length(in), consumed = 0;
	struct nbd_out out = { 0 };
	enum nbd_handshake_result r;
	const uint8_t *bytes;
	void *backend = NULL;
	int e;

	if (len > NBD_HANDSHAKE_INPUT)
		len = NBD_HANDSHAKE_INPUT;
	bytes = evbuffer_pullup(in, (ssize_t)len);
	r = nbd_handshake_input(conn->hs, bytes, len, &consumed, &out);
	evbuffer_drain(in, consumed);
	if (out.len && bufferevent_write(conn->bev, out.data, out.len) < 0)
		r = NBD_HS_CLOSE;
	nbd_out_free(&out);
	if (r == NBD_HS_MORE)
		return false;
	if (r == NBD_HS_CLOSE) {
		if (strcmp(nbd_handshake_error(conn->hs), "client aborted") == 0) {
			drain(conn, "the client aborted the handshake");
		} else {
			log_warning("%s: handshake: %s", conn->peer, nbd_handshake_error(conn->hs));
			conn->server->stats.protocol_errors++;
			drain(conn, nbd_handshake_error(conn->hs));
		}
		return false;
	}
	conn->export = *nbd_handshake_export_info(conn->hs);
	conn->export.description = NULL; /* the lookup's, valid no longer */
	conn->export_name = strdup(nbd_handshake_export(conn->hs));
	e = conn->export_name ? conn->ops->open(conn->arg, conn->export_name, &backend) : -ENOMEM;
	nbd_handshake_free(conn->hs);
	conn->hs = NULL;
	if (e < 0) {
		/* Gone between the lookup and now. */
		protocol_error(conn, "export '%.80s' cannot be opened: %s",
			       conn->export_name ? conn->export_name : "", strerror(-e));
		return false;
	}
	conn->backend = backend;
	conn->state = CONN_TRANSMISSION;
	log_info("%s: serving export '%s' (%llu bytes)", conn->peer, conn->export_name,
		 (unsigned long long)conn->export.size);
	return true;
}

/* One request read off the input into a new io, handed to the backend. */
static void submit(struct nbd_conn *conn, const struct nbd_request *req)
{
	struct evbuffer *in = bufferevent_get_input(conn->bev);
	bool carries = req->type == NBD_CMD_READ || req->type == NBD_CMD_WRITE;
	struct conn_io *ci = calloc(1, sizeof(*ci));

	if (ci && carries)
		ci->io.data = malloc(req->length);
	if (!ci || (carries && !ci->io.data)) {
		if (req->type == NBD_CMD_WRITE)
			evbuffer_drain(in, req->length);
		if (ci)
			free(ci);
		reply(conn, req, NBD_ENOMEM, NULL);
		return;
	}
	if (req->type == NBD_CMD_WRITE)
		evbuffer_remove(in, ci->io.data, req->length);
	ci->io.req = *req;
	ci->conn = conn;
	conn->refs++;
	conn->in_flight++;
	conn->in_flight_bytes += carries ? req->length : 0;
	conn->server->stats.requests++;
	conn->ops->submit(conn->arg, conn->backend, &ci->io);
}

/* Requests off the input while under the limits. */
static void transmission_input(struct nbd_conn *conn)
{
	struct evbuffer *in = bufferevent_get_input(conn->bev);
	uint8_t header[NBD_REQUEST_SIZE];
	struct nbd_request req;
	const char *why;
	uint32_t error;
	size_t len;
	int r;

	while (conn->bev && conn->state == CONN_TRANSMISSION) {
		if (over_limits(conn)) {
			conn->paused = true;
			bufferevent_disable(conn->bev, EV_READ);
			return;
		}
		len = evbuffer_get_length(in);
		len = len < sizeof(header) ? len : sizeof(header);
		evbuffer_copyout(in, header, len);
		r = nbd_request_parse(header, len, &req);
		if (r < 0) {
			protocol_error(conn, "not an NBD request (bad magic)");
			return;
		}
		if (r == 0)
			return;
		if (req.type == NBD_CMD_WRITE && req.length > conn->export.max_block) {
			protocol_error(conn,
				       "a WRITE of %u bytes, past the %u bytes a request may carry",
				       req.length, conn->export.max_block);
			return;
		}
		if (req.type == NBD_CMD_WRITE &&
		    evbuffer_get_length(in) < NBD_REQUEST_SIZE + (size_t)req.length)
			return; /* its payload is on its way */
		evbuffer_drain(in, NBD_REQUEST_SIZE);
		if (req.type == NBD_CMD_DISC) {
			drain(conn, "the client disconnected (DISC)");
			return;
		}
		error = nbd_request_check(&req, &conn->export, &why);
		if (error) {
			log_debug("%s: %s of %u bytes at %llu refused: %s", conn->peer,
				  nbd_cmd_name(req.type), req.length,
				  (unsigned long long)req.offset, why);
			if (req.type == NBD_CMD_WRITE)
				evbuffer_drain(in, req.length);
			reply(conn, &req, error, NULL);
			continue;
		}
		submit(conn, &req);
	}
}

static void conn_input(struct nbd_conn *conn)
{
	conn->refs++; /* a backend answering inside submit must not free it */
	if (conn->state == CONN_HANDSHAKE && handshake_input(conn))
		transmission_input(conn);
	else if (conn->state == CONN_TRANSMISSION)
		transmission_input(conn);
	conn_unref(conn);
}

static void read_cb(struct bufferevent *bev, void *arg)
{
	conn_input(arg);
}

static void resume_cb(evutil_socket_t fd, short what, void *arg)
{
	struct nbd_conn *conn = arg;

	if (conn->bev)
		conn_input(conn);
}

static void write_cb(struct bufferevent *bev, void *arg)
{
	conn_settle(arg);
}

static void event_cb(struct bufferevent *bev, short what, void *arg)
{
	struct nbd_conn *conn = arg;

	if (what & BEV_EVENT_ERROR) {
		conn_close(conn, strerror(EVUTIL_SOCKET_ERROR()));
		return;
	}
	if (what & BEV_EVENT_EOF) {
		if (conn->state == CONN_HANDSHAKE)
			conn_close(conn, "the client went during the handshake");
		else
			drain(conn, "the client closed its side");
	}
}

static void peer_name(const struct sockaddr *sa, char *buf, size_t len)
{
	char host[INET6_ADDRSTRLEN] = "?";

	if (sa->sa_family == AF_INET) {
		const struct sockaddr_in *in = (const struct sockaddr_in *)sa;

		inet_ntop(AF_INET, &in->sin_addr, host, sizeof(host));
		snprintf(buf, len, "nbd %s:%u", host, ntohs(in->sin_port));
	} else if (sa->sa_family == AF_INET6) {
		const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;

		inet_ntop(AF_INET6, &in6->sin6_addr, host, sizeof(host));
		snprintf(buf, len, "nbd [%s]:%u", host, ntohs(in6->sin6_port));
	} else {
		snprintf(buf, len, "nbd unix");
	}
}

static void accept_cb(struct evconnlistener *l, evutil_socket_t fd, struct sockaddr *sa, int len,
		      void *arg)
{
	struct nbd_server *s = arg;
	struct nbd_conn *conn;
	struct nbd_out out = { 0 };
	int one = 1;

	if (s->stats.connections >= NBD_CONNECTIONS_MAX) {
		time_t now = time(NULL);

		s->stats.refused++;
		if (now - s->refused_logged >= REFUSED_LOG_EVERY_S) {
			log_warning("NBD connection refused: %d are open, the most there may be",
				    NBD_CONNECTIONS_MAX);
			s->refused_logged = now;
		}
		close(fd);
		return;
	}
	if (sa->sa_family != AF_UNIX)
		setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	conn = calloc(1, sizeof(*conn));
	if (!conn) {
		close(fd);
		return;
	}
	peer_name(sa, conn->peer, sizeof(conn->peer));
	conn->server = s;
	conn->ops = s->ops;
	conn->arg = s->arg;
	conn->refs = 1;
	conn->bev = bufferevent_socket_new(s->base, fd, BEV_OPT_CLOSE_ON_FREE);
	conn->resume = event_new(s->base, -1, 0, resume_cb, conn);
	if (!conn->bev || !conn->resume ||
	    nbd_handshake_new(s->ops->lookup, s->ops->list, s->arg, &out, &conn->hs) < 0 ||
	    bufferevent_write(conn->bev, out.data, out.len) < 0) {
		log_warning("%s: out of memory for its connection", conn->peer);
		nbd_out_free(&out);
		nbd_handshake_free(conn->hs);
		if (conn->resume)
			event_free(conn->resume);
		if (conn->bev)
			bufferevent_free(conn->bev);
		else
			close(fd);
		free(conn);
		return;
	}
	nbd_out_free(&out);
	conn->next = s->conns;
	if (s->conns)
		s->conns->prev = conn;
	s->conns = conn;
	s->stats.connections++;
	s->stats.accepted++;
	bufferevent_setcb(conn->bev, read_cb, write_cb, event_cb, conn);
	bufferevent_enable(conn->bev, EV_READ | EV_WRITE);
	log_debug("%s: connected", conn->peer);
}

static void accept_error_cb(struct evconnlistener *l, void *arg)
{
	log_warning("NBD accept: %s", strerror(EVUTIL_SOCKET_ERROR()));
}

/* Accepts on the listening socket fd (closed on failure) into *ret. */
static int accept_on(struct nbd_server *s, int fd, const char *where, struct evconnlistener **ret)
{
	*ret = evconnlistener_new(s->base, accept_cb, s,
				  LEV_OPT_CLOSE_ON_FREE | LEV_OPT_CLOSE_ON_EXEC, 0, fd);
	if (!*ret) {
		close(fd);
		return -ENOMEM;
	}
	evconnlistener_set_error_cb(*ret, accept_error_cb);
	log_info("NBD: listening on %s", where);
	return 0;
}

static int listen_tcp(struct nbd_server *s, const char *endpoint)
{
	int fd = tcp_listen(endpoint, NBD_BACKLOG);

	if (fd < 0)
		return fd;
	return accept_on(s, fd, endpoint, &s->tcp);
}

static int listen_unix(struct nbd_server *s, const struct nbd_server_config *config)
{
	int fd;

	s->socket_path = strdup(config->socket_path);
	if (!s->socket_path)
		return -ENOMEM;
	fd = unix_listen(s->socket_path, config->socket_mode, config->socket_group, NBD_BACKLOG,
			 &s->socket_file);
	if (fd < 0) {
		free(s->socket_path);
		s->socket_path = NULL;
		return fd;
	}
	return accept_on(s, fd, s->socket_path, &s->unix_listener);
}

int nbd_server_new(struct event_base *base, const struct nbd_server_config *config,
		   const struct nbd_backend_ops *ops, void *arg, struct nbd_server **ret)
{
	struct nbd_server *s = calloc(1, sizeof(*s));
	int r = 0;

	if (!s)
		return -ENOMEM;
	s->base = base;
	s->ops = ops;
	s->arg = arg;
	if (config->listen)
		r = listen_tcp(s, config->listen);
	if (r == 0 && config->socket_path)
		r = listen_unix(s, config);
	if (r < 0) {
		nbd_server_free(s);
		return r;
	}
	*ret = s;
	return 0;
}

void nbd_server_free(struct nbd_server *s)
{
	if (!s)
		return;
	while (s->conns)
		conn_close(s->conns, "the node is stopping");
	if (s->tcp)
		evconnlistener_free(s->tcp);
	if (s->unix_listener)
		evconnlistener_free(s->unix_listener);
	if (s->socket_path)
		unix_listen_unlink(s->socket_path, &s->socket_file);
	free(s->socket_path);
	free(s);
}

void nbd_server_get_stats(const struct nbd_server *s, struct nbd_server_stats *ret)
{
	*ret = s->stats;
}
