/* The RDMA backend of the partner channel: librdmacm for connections, RC
 * queue pairs, frames as two-sided SENDs (rdma_conn.c) under credit-based
 * flow control (rdma_credits.c). The rdma_cm event channel's fd and each
 * connection's completion channel fd are events in the libevent loop: no
 * threads. The connection state machine is in replica/RDMA.md, "Connections";
 * in short:
 *
 *   outbound: connect() -> RESOLVING_ADDR -ADDR_RESOLVED-> RESOLVING_ROUTE
 *             -ROUTE_RESOLVED (QP, buffers, receives posted; rdma_connect with
 *             our params)-> CONNECTING -ESTABLISHED (peer's params)-> UP
 *   inbound:  CONNECT_REQUEST (peer's params; QP, buffers, receives posted;
 *             rdma_accept with ours) -> ACCEPTING -ESTABLISHED-> UP
 *   any:      ADDR/ROUTE_ERROR, UNREACHABLE, REJECTED, CONNECT_ERROR,
 *             DISCONNECTED, DEVICE_REMOVAL, a completion in error -> conn_down
 *             with the reason, freed. */
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "config.h"
#include "log.h"
#include "rdma_conn.h"
#include "rdma_onesided.h"
#include "rdma_pool.h"
#include "reason.h"
#include "transport.h"

#define LOG_SUBSYSTEM "rdma"

/* Address and route resolution: generous, TCG guests are slow. */
#define RESOLVE_TIMEOUT_MS 5000
#define LISTEN_BACKLOG 8
/* rnr_retry 7 is "retry for ever"; credits mean an RNR never happens. */
#define RNR_RETRY_FOREVER 7
#define TRANSPORT_RETRIES 7

struct rdma_transport {
	struct repl_transport base;
	struct event_base *evbase;
	struct repl_transport_callbacks cb;
	void *cb_arg;
	size_t max_payload;
	struct rdma_event_channel *channel;
	struct event *channel_ev;
	struct rdma_cm_id *listen_id;
	struct peer_filter allowed;
	struct rdma_conn *conns;
	struct rdma_pool pool; /* the protection domain and the frame pool's blocks */
};

struct event_base *rdma_transport_base(const struct rdma_transport *t)
{
	return t->evbase;
}

size_t rdma_transport_max_payload(const struct rdma_transport *t)
{
	return t->max_payload;
}

const struct repl_transport_callbacks *rdma_transport_cb(const struct rdma_transport *t,
							 void **ret_arg)
{
	*ret_arg = t->cb_arg;
	return &t->cb;
}

struct rdma_pool *rdma_transport_pool(struct rdma_transport *t)
{
	return &t->pool;
}

void rdma_conn_free(struct rdma_conn *c)
{
	struct rdma_conn **p = &c->transport->conns;

	while (*p && *p != c)
		p = &(*p)->next;
	if (*p)
		*p = c->next;
	rdma_conn_release(c);
}

static struct rdma_conn *conn_add(struct rdma_transport *t, const char *peer, bool inbound)
{
	struct rdma_conn *c = rdma_conn_new(t, peer, inbound);

	if (!c)
		return NULL;
	c->base.transport = &t->base;
	c->next = t->conns;
	t->conns = c;
	return c;
}

static int resolve(const char *endpoint, bool passive, struct addrinfo **ret)
{
	struct addrinfo hints = {
		.ai_family = AF_UNSPEC,
		.ai_socktype = SOCK_STREAM,
		.ai_flags = passive ? AI_PASSIVE : 0,
	};
	char host[256], port[8];
	uint16_t portnum;

	if (config_parse_endpoint(endpoint, host, sizeof(host), &portnum) < 0)
		return -EINVAL;
	snprintf(port, sizeof(port), "%u", portnum);
	if (getaddrinfo(host, port, &hints, ret) != 0)
		return -EHOSTUNREACH;
	return 0;
}

static void conn_param(struct rdma_conn_param *p, uint8_t data[RDMA_PARAMS_SIZE])
{
	struct rdma_params ours;

	rdma_conn_params(&ours);
	rdma_params_encode(&ours, data);
	*p = (struct rdma_conn_param){
		.private_data = data,
		.private_data_len = RDMA_PARAMS_SIZE,
		.retry_count = TRANSPORT_RETRIES,
		.rnr_retry_count = RNR_RETRY_FOREVER,
	};
}

static void fail_errno(struct rdma_conn *c, int r, const char *what)
{
	char reason[160];

	snprintf(reason, sizeof(reason), "%s: %s: %s", c->peer, what, strerror(-r));
	rdma_conn_fail(c, r, reason);
}

static void up(struct rdma_conn *c)
{
	struct rdma_transport *t = c->transport;

	c->state = RDMA_CONN_UP;
	log_debug("%s: connected (%s)", c->peer, c->inbound ? "inbound" : "outbound");
	c->dispatching = true;
	t->cb.conn_up(&c->base, c->inbound, t->cb_arg);
	c->dispatching = false;
	if (c->closed) {
		rdma_conn_free(c);
		return;
	}
	rdma_conn_poll(c);
}

static void peer_name(struct rdma_cm_id *id, char *buf, size_t len)
{
	struct sockaddr *sa = rdma_get_peer_addr(id);
	char host[NI_MAXHOST] = "?", port[NI_MAXSERV] = "?";

	getnameinfo(sa,
		    sa->sa_family == AF_INET6 ? sizeof(struct sockaddr_in6)
					      : sizeof(struct sockaddr_in),
		    host, sizeof(host), port, sizeof(port), NI_NUMERICHOST | NI_NUMERICSERV);
	snprintf(buf, len, sa->sa_family == AF_INET6 ? "[%s]:%s" : "%s:%s", host, port);
}

static void on_connect_request(struct rdma_transport *t, struct rdma_cm_id *id, const void *data,
			       size_t data_len)
{
	uint8_t ours[RDMA_PARAMS_SIZE];
	struct rdma_conn_param param;
	struct rdma_params theirs;
	const char *why, *what;
	struct rdma_conn *c;
	char peer[80];
	int r;

	peer_name(id, peer, sizeof(peer));
	if (!peer_filter_allows(&t->allowed, rdma_get_peer_addr(id))) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		if (t->cb.refused)
			t->cb.refused(peer, "not the partner's address", t->cb_arg);
		return;
	}
	if (rdma_params_decode(data, data_len, &theirs, &why) < 0) {
		log_debug("%s: connection refused: %s", peer, why);
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	c = conn_add(t, peer, true);
	if (!c) {
		rdma_reject(id, NULL, 0);
		rdma_destroy_id(id);
		return;
	}
	c->id = id;
	id->context = c;
	c->state = RDMA_CONN_ACCEPTING;
	rdma_conn_peer_params(c, &theirs);
	r = rdma_conn_setup(c, &what);
	if (r < 0) {
		rdma_reject(id, NULL, 0);
		return fail_errno(c, r, what);
	}
	conn_param(&param, ours);
	if (rdma_accept(id, &param))
		fail_errno(c, -errno, "rdma_accept");
}

static void on_route_resolved(struct rdma_conn *c)
{
	uint8_t ours[RDMA_PARAMS_SIZE];
	struct rdma_conn_param param;
	const char *what;
	int r;

	r = rdma_conn_setup(c, &what);
	if (r < 0)
		return fail_errno(c, r, what);
	conn_param(&param, ours);
	if (rdma_connect(c->id, &param))
		return fail_errno(c, -errno, "rdma_connect");
	c->state = RDMA_CONN_CONNECTING;
}

static void on_established(struct rdma_conn *c, const void *data, size_t data_len)
{
	struct rdma_params theirs;
	const char *why;
	char reason[160];

	if (!c->inbound) {
		if (rdma_params_decode(data, data_len, &theirs, &why) < 0) {
			snprintf(reason, sizeof(reason), "%s: %s", c->peer, why);
			return rdma_conn_fail(c, -EPROTO, reason);
		}
		rdma_conn_peer_params(c, &theirs);
	}
	up(c);
}

static const char *reject_reason(int status)
{
	/* The IB CM reject reasons rdma_cm passes on for RoCE. */
	switch (status) {
	case 8:
		return "nothing listens on that port";
	case 28:
		return "the peer refused it";
	default:
		return "rejected";
	}
}

/* An event on a connection's id. */
static void on_conn_event(struct rdma_conn *c, enum rdma_cm_event_type type, int status,
			  const void *data, size_t data_len)
{
	char reason[192];

	switch (type) {
	case RDMA_CM_EVENT_ADDR_RESOLVED:
		if (rdma_resolve_route(c->id, RESOLVE_TIMEOUT_MS))
			return fail_errno(c, -errno, "rdma_resolve_route");
		c->state = RDMA_CONN_RESOLVING_ROUTE;
		return;
	case RDMA_CM_EVENT_ROUTE_RESOLVED:
		return on_route_resolved(c);
	case RDMA_CM_EVENT_ESTABLISHED:
		return on_established(c, data, data_len);
	case RDMA_CM_EVENT_ADDR_ERROR:
		snprintf(reason, sizeof(reason), "%s: no RDMA address (%s)", c->peer,
			 strerror(status < 0 ? -status : EHOSTUNREACH));
		return rdma_conn_fail(c, -EHOSTUNREACH, reason);
	case RDMA_CM_EVENT_ROUTE_ERROR:
		snprintf(reason, sizeof(reason), "%s: no RDMA route (%s)", c->peer,
			 strerror(status < 0 ? -status : EHOSTUNREACH));
		return rdma_conn_fail(c, -EHOSTUNREACH, reason);
	case RDMA_CM_EVENT_UNREACHABLE:
		snprintf(reason, sizeof(reason), "%s: unreachable", c->peer);
		return rdma_conn_fail(c, -EHOSTUNREACH, reason);
	case RDMA_CM_EVENT_REJECTED:
		snprintf(reason, sizeof(reason), "%s: connection refused (%s)", c->peer,
			 reject_reason(status));
		return rdma_conn_fail(c, -ECONNREFUSED, reason);
	case RDMA_CM_EVENT_CONNECT_ERROR:
		snprintf(reason, sizeof(reason), "%s: connection failed", c->peer);
		return rdma_conn_fail(c, -ECONNABORTED, reason);
	case RDMA_CM_EVENT_DISCONNECTED:
		snprintf(reason, sizeof(reason), "%s closed the connection", c->peer);
		return rdma_conn_fail(c, -ECONNRESET, reason);
	case RDMA_CM_EVENT_DEVICE_REMOVAL:
		snprintf(reason, sizeof(reason), "%s: the RDMA device was removed", c->peer);
		return rdma_conn_fail(c, -ENODEV, reason);
	default:
		log_debug("%s: %s (ignored)", c->peer, rdma_event_str(type));
		return;
	}
}

static void on_channel(evutil_socket_t fd, short what, void *arg)
{
	struct rdma_transport *t = arg;
	struct rdma_cm_event *ev;
	/* 255 bytes: the most a uint8_t private_data_len can say. */
	uint8_t data[255];

	while (rdma_get_cm_event(t->channel, &ev) == 0) {
		enum rdma_cm_event_type type = ev->event;
		struct rdma_cm_id *id = ev->id;
		int status = ev->status;
		size_t data_len = 0;

		if (ev->param.conn.private_data) {
			data_len = ev->param.conn.private_data_len;
			memcpy(data, ev->param.conn.private_data, data_len);
		}
		/* Acknowledged before handling: destroying an id waits for its
		 * events to be acknowledged, and handling may destroy it. */
		rdma_ack_cm_event(ev);
		if (type == RDMA_CM_EVENT_CONNECT_REQUEST)
			on_connect_request(t, id, data_len ? data : NULL, data_len);
		else if (id->context)
			on_conn_event(id->context, type, status, data_len ? data : NULL, data_len);
		else
			log_debug("listener: %s (ignored)", rdma_event_str(type));
	}
}

static int rdma_create(struct event_base *base, const struct repl_transport_callbacks *cb,
		       void *arg, size_t max_payload, struct repl_transport **ret)
{
	struct rdma_transport *t = calloc(1, sizeof(*t));
	int flags, r;

	if (!t)
		return -ENOMEM;
	t->base.ops = &repl_transport_rdma;
	t->evbase = base;
	t->cb = *cb;
	t->cb_arg = arg;
	t->max_payload = max_payload;
	t->channel = rdma_create_event_channel();
	if (!t->channel) {
		r = -(errno ? errno : ENODEV);
		goto fail;
	}
	flags = fcntl(t->channel->fd, F_GETFL);
	if (flags < 0 || fcntl(t->channel->fd, F_SETFL, flags | O_NONBLOCK) < 0) {
		r = -errno;
		goto fail;
	}
	t->channel_ev = event_new(base, t->channel->fd, EV_READ | EV_PERSIST, on_channel, t);
	if (!t->channel_ev || event_add(t->channel_ev, NULL) < 0) {
		r = -ENOMEM;
		goto fail;
	}
	*ret = &t->base;
	return 0;
fail:
	repl_transport_rdma.destroy(&t->base);
	return r;
}

static int rdma_listen_on(struct repl_transport *base, const char *endpoint,
			  const struct peer_filter *allowed)
{
	struct rdma_transport *t = (struct rdma_transport *)base;
	struct addrinfo *ai;
	int r;

	t->allowed = allowed ? *allowed : (struct peer_filter){ 0 };
	r = resolve(endpoint, true, &ai);
	if (r < 0)
		return r;
	if (rdma_create_id(t->channel, &t->listen_id, NULL, RDMA_PS_TCP)) {
		r = -errno;
		goto out;
	}
	if (rdma_bind_addr(t->listen_id, ai->ai_addr) ||
	    rdma_listen(t->listen_id, LISTEN_BACKLOG)) {
		r = -errno;
		rdma_destroy_id(t->listen_id);
		t->listen_id = NULL;
	}
out:
	freeaddrinfo(ai);
	return r;
}

static int rdma_connect_to(struct repl_transport *base, const char *endpoint,
			   struct repl_conn **ret)
{
	struct rdma_transport *t = (struct rdma_transport *)base;
	struct rdma_conn *c;
	struct addrinfo *ai;
	int r;

	r = resolve(endpoint, false, &ai);
	if (r < 0)
		return r;
	c = conn_add(t, endpoint, false);
	if (!c) {
		r = -ENOMEM;
		goto out;
	}
	if (rdma_create_id(t->channel, &c->id, c, RDMA_PS_TCP) ||
	    rdma_resolve_addr(c->id, NULL, ai->ai_addr, RESOLVE_TIMEOUT_MS)) {
		r = -errno;
		rdma_conn_free(c);
		goto out;
	}
	c->state = RDMA_CONN_RESOLVING_ADDR;
	*ret = &c->base;
out:
	freeaddrinfo(ai);
	return r;
}

static int rdma_send(struct repl_conn *base, const struct iovec *iov, size_t n, size_t len)
{
	return rdma_conn_send((struct rdma_conn *)base, iov, n, len);
}

static void rdma_close(struct repl_conn *base)
{
	struct rdma_conn *c = (struct rdma_conn *)base;

	if (c->closed)
		return;
	c->closed = true;
	if (c->state == RDMA_CONN_UP)
		rdma_disconnect(c->id);
	if (!c->dispatching)
		rdma_conn_free(c);
}

static size_t rdma_backlog(const struct repl_conn *base)
{
	return ((const struct rdma_conn *)base)->out_bytes;
}

static const char *rdma_peer_name(const struct repl_conn *base)
{
	return ((const struct rdma_conn *)base)->peer;
}

static void rdma_destroy(struct repl_transport *base)
{
	struct rdma_transport *t = (struct rdma_transport *)base;

	if (!t)
		return;
	while (t->conns)
		rdma_conn_free(t->conns);
	if (t->listen_id)
		rdma_destroy_id(t->listen_id);
	rdma_pool_release(&t->pool);
	if (t->channel_ev)
		event_free(t->channel_ev);
	if (t->channel)
		rdma_destroy_event_channel(t->channel);
	free(t);
}

static int rdma_pool_attach_op(struct repl_transport *base, void *addr, uint64_t length,
			       uint64_t block_bytes, char *reason, size_t reason_len)
{
	return rdma_pool_attach(&((struct rdma_transport *)base)->pool, addr, length, block_bytes,
				reason, reason_len);
}

static uint32_t rdma_pool_blocks_op(const struct repl_transport *base)
{
	return rdma_pool_blocks(&((const struct rdma_transport *)base)->pool);
}

static int rdma_pool_describe_op(const struct repl_transport *base, uint32_t block,
				 struct rdma_remote_block *ret)
{
	const struct rdma_pool *p = &((const struct rdma_transport *)base)->pool;

	if (!p->table)
		return -EOPNOTSUPP;
	return rdma_regtable_describe(p->table, block, ret, NULL, 0);
}

static int rdma_pool_use_range_op(struct repl_transport *base, const void *addr, uint64_t length,
				  struct rdma_block_key *ret, char *reason, size_t reason_len)
{
	return rdma_pool_use_range(&((struct rdma_transport *)base)->pool, addr, length, ret,
				   reason, reason_len);
}

static int rdma_pool_block_out_op(struct repl_transport *base, uint32_t block, char *reason,
				  size_t reason_len)
{
	return rdma_pool_block_out(&((struct rdma_transport *)base)->pool, block, reason,
				   reason_len);
}

static int rdma_pool_block_in_op(struct repl_transport *base, uint32_t block, char *reason,
				 size_t reason_len)
{
	return rdma_pool_block_in(&((struct rdma_transport *)base)->pool, block, reason,
				  reason_len);
}

static int rdma_pool_purge_op(struct repl_transport *base, char *reason, size_t reason_len)
{
	struct rdma_transport *t = (struct rdma_transport *)base;

	for (const struct rdma_conn *c = t->conns; c; c = c->next)
		if (rdma_conn_writes_pending(c))
			return reason_fail(reason, reason_len, -EBUSY,
					   "RDMA WRITEs in flight on the connection to %s",
					   c->peer);
	return rdma_pool_purge(&t->pool, reason, reason_len);
}

static void rdma_pool_stats_op(const struct repl_transport *base, struct repl_pool_stats *ret)
{
	const struct rdma_pool *p = &((const struct rdma_transport *)base)->pool;
	struct rdma_regtable_counts pool, slabs;
	struct rdma_staging_stats st;

	*ret = (struct repl_pool_stats){ .purged = p->purged };
	if (!p->table)
		return;
	rdma_regtable_count(p->table, &pool);
	rdma_staging_get_stats(p->staging, &st);
	rdma_staging_count(p->staging, &slabs);
	ret->current = pool.current + slabs.current;
	ret->stale = pool.stale + slabs.stale;
	ret->failed = pool.failed + slabs.failed;
	ret->staging_slabs = st.slabs;
	ret->staging_allocated = st.allocated;
}

static int rdma_staging_take_op(struct repl_transport *base, uint64_t length, void **ret_addr,
				char *reason, size_t reason_len)
{
	struct rdma_pool *p = &((struct rdma_transport *)base)->pool;

	if (!p->staging)
		return reason_fail(reason, reason_len, -EOPNOTSUPP, "no pool attached");
	return rdma_staging_take(p->staging, length, ret_addr, reason, reason_len);
}

static int rdma_staging_give_op(struct repl_transport *base, void *addr)
{
	struct rdma_pool *p = &((struct rdma_transport *)base)->pool;

	return p->staging ? rdma_staging_give(p->staging, addr) : -ENOENT;
}

static int rdma_staging_trim_op(struct repl_transport *base)
{
	struct rdma_pool *p = &((struct rdma_transport *)base)->pool;

	return p->staging ? rdma_staging_trim(p->staging) : 0;
}

const struct repl_transport_ops repl_transport_rdma = {
	.name = "rdma",
	.create = rdma_create,
	.listen = rdma_listen_on,
	.connect = rdma_connect_to,
	.send = rdma_send,
	.close = rdma_close,
	.backlog = rdma_backlog,
	.peer_name = rdma_peer_name,
	.destroy = rdma_destroy,
	.pool_attach = rdma_pool_attach_op,
	.pool_blocks = rdma_pool_blocks_op,
	.pool_describe = rdma_pool_describe_op,
	.pool_use_range = rdma_pool_use_range_op,
	.pool_block_out = rdma_pool_block_out_op,
	.pool_block_in = rdma_pool_block_in_op,
	.pool_purge = rdma_pool_purge_op,
	.pool_stats = rdma_pool_stats_op,
	.staging_take = rdma_staging_take_op,
	.staging_give = rdma_staging_give_op,
	.staging_trim = rdma_staging_trim_op,
	.conn_one_sided = rdma_onesided_conn_ok,
	.conn_remote_open = rdma_onesided_remote_open,
	.conn_remote_update = rdma_onesided_remote_update,
	.send_after_writes = rdma_onesided_send_after_writes,
};
