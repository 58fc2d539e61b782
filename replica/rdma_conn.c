/* The data path of one RDMA connection (rdma_conn.h): registered buffers,
 * SEND with immediate data, the completion queue in the event loop, frames
 * sent in pieces and reassembled, and the credits of rdma_credits.h. */
#include "rdma_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "frame.h"
#include "log.h"
#include "rdma_onesided.h"
#include "rdma_pool.h"

#define LOG_SUBSYSTEM "rdma"

#define WC_BATCH 16

static uint8_t *recv_buf(struct rdma_conn *c, uint32_t i)
{
	return c->recv_bufs + (size_t)i * RDMA_BUF_SIZE;
}

static uint8_t *send_buf(struct rdma_conn *c, uint32_t i)
{
	return c->send_bufs + (size_t)i * RDMA_BUF_SIZE;
}

static void on_fail_soon(evutil_socket_t fd, short what, void *arg)
{
	struct rdma_conn *c = arg;

	rdma_conn_fail(c, c->fail_error, c->fail_reason);
}

struct rdma_conn *rdma_conn_new(struct rdma_transport *t, const char *peer, bool inbound)
{
	struct rdma_conn *c = calloc(1, sizeof(*c));

	if (!c)
		return NULL;
	c->fail_ev = event_new(rdma_transport_base(t), -1, 0, on_fail_soon, c);
	if (!c->fail_ev) {
		free(c);
		return NULL;
	}
	c->transport = t;
	c->inbound = inbound;
	c->out_tail = &c->out_head;
	c->free_write_slots = RDMA_WRITE_SLOTS;
	snprintf(c->peer, sizeof(c->peer), "%s", peer);
	return c;
}

void rdma_conn_release(struct rdma_conn *c)
{
	struct rdma_out_msg *m;

	if (c->cq_ev)
		event_free(c->cq_ev);
	event_free(c->fail_ev);
	if (c->id && c->id->qp)
		rdma_destroy_qp(c->id);
	if (c->recv_mr)
		ibv_dereg_mr(c->recv_mr);
	if (c->send_mr)
		ibv_dereg_mr(c->send_mr);
	if (c->cq)
		ibv_destroy_cq(c->cq);
	if (c->comp)
		ibv_destroy_comp_channel(c->comp);
	if (c->pd && !c->shares_pool_pd)
		ibv_dealloc_pd(c->pd);
	if (c->id)
		rdma_destroy_id(c->id);
	free(c->recv_bufs);
	free(c->send_bufs);
	free(c->reasm);
	while ((m = c->out_head)) {
		c->out_head = m->next;
		free(m->writes);
		free(m);
	}
	rdma_remote_view_free(c->view);
	free(c);
}

void rdma_conn_fail(struct rdma_conn *c, int error, const char *reason)
{
	void *arg;
	const struct repl_transport_callbacks *cb = rdma_transport_cb(c->transport, &arg);

	if (c->closed)
		return;
	c->closed = true;
	log_debug("down: %s", reason);
	/* An inbound connection nobody was told of goes quietly, as a TCP
	 * connection that failed before accept() would. */
	if (!c->inbound || c->state == RDMA_CONN_UP) {
		c->dispatching = true;
		cb->conn_down(&c->base, error, reason, arg);
	}
	rdma_conn_free(c);
}

void rdma_conn_fail_soon(struct rdma_conn *c, int error, const char *reason)
{
	if (c->closed || c->failing)
		return;
	c->failing = true;
	c->fail_error = error;
	snprintf(c->fail_reason, sizeof(c->fail_reason), "%s", reason);
	event_active(c->fail_ev, 0, 0);
}

static int post_recv(struct rdma_conn *c, uint32_t i)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)recv_buf(c, i),
		.length = RDMA_BUF_SIZE,
		.lkey = c->recv_mr->lkey,
	};
	struct ibv_recv_wr wr = {
		.wr_id = (uint64_t)i << RDMA_WR_KIND_BITS | RDMA_WR_RECV,
		.sg_list = &sge,
		.num_sge = 1,
	}, *bad;

	return -ibv_post_recv(c->id->qp, &wr, &bad);
}

/* One SEND of len bytes (0: a credit return alone) from send slot slot,
 * carrying back the credits we owe. */
static int post_send(struct rdma_conn *c, uint32_t slot, size_t len)
{
	struct ibv_sge sge = {
		.addr = (uintptr_t)send_buf(c, slot),
		.length = (uint32_t)len,
		.lkey = c->send_mr->lkey,
	};
	struct ibv_send_wr wr = {
		.wr_id = (uint64_t)slot << RDMA_WR_KIND_BITS | RDMA_WR_SEND,
		.sg_list = &sge,
		.num_sge = len ? 1 : 0,
		.opcode = IBV_WR_SEND_WITH_IMM,
		.send_flags = IBV_SEND_SIGNALED,
		.imm_data = htonl(rdma_credits_spend(&c->credits)),
	}, *bad;

	return -ibv_post_send(c->id->qp, &wr, &bad);
}

static void post_failed(struct rdma_conn *c, int r, const char *what)
{
	char reason[160];

	snprintf(reason, sizeof(reason), "%s: ibv_post_%s: %s", c->peer, what, strerror(-r));
	rdma_conn_fail_soon(c, r, reason);
}

void rdma_conn_flush(struct rdma_conn *c)
{
	struct rdma_out_msg *m;
	uint32_t slot;
	size_t piece;
	int r;

	if (c->state != RDMA_CONN_UP || c->closed || c->failing)
		return;
	while ((m = c->out_head)) {
		/* A frame goes only after its WRITEs, and frames behind it wait:
		 * nothing overtakes. */
		if (m->writes && !rdma_plan_done(&m->writes->plan)) {
			r = rdma_onesided_post(c, m->writes);
			if (r < 0)
				return post_failed(c, r, "send (RDMA WRITE)");
			if (!rdma_plan_done(&m->writes->plan))
				break;
		}
		if (!c->n_free_slots || !rdma_credits_can_send_data(&c->credits))
			break;
		piece = m->len - m->off;
		if (piece > c->peer_buf_size)
			piece = c->peer_buf_size;
		slot = c->free_slots[--c->n_free_slots];
		memcpy(send_buf(c, slot), m->frame + m->off, piece);
		r = post_send(c, slot, piece);
		if (r < 0)
			return post_failed(c, r, "send");
		m->off += piece;
		c->out_bytes -= piece;
		if (m->off == m->len) {
			c->out_head = m->next;
			if (!c->out_head)
				c->out_tail = &c->out_head;
			free(m->writes);
			free(m);
		}
	}
	/* Receiving much and sending little: give the credits back explicitly. */
	if (c->n_free_slots && rdma_credits_return_due(&c->credits)) {
		slot = c->free_slots[--c->n_free_slots];
		r = post_send(c, slot, 0);
		if (r < 0)
			post_failed(c, r, "send");
	}
}

/* The payload's pieces, one after the other, at to. */
static void gather(uint8_t *to, const struct iovec *iov, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		memcpy(to, iov[i].iov_base, iov[i].iov_len);
		to += iov[i].iov_len;
	}
}

int rdma_conn_send(struct rdma_conn *c, const struct iovec *iov, size_t n, size_t len)
{
	return rdma_conn_send_behind(c, iov, n, len, NULL);
}

int rdma_conn_send_behind(struct rdma_conn *c, const struct iovec *iov, size_t n, size_t len,
			  struct rdma_write_job *writes)
{
	size_t max = rdma_transport_max_payload(c->transport);
	size_t total = FRAME_HEADER_SIZE + len;
	struct rdma_out_msg *m;
	uint32_t slot;
	uint8_t *buf;
	int r;

	if (c->closed || c->failing) {
		free(writes);
		return -ENOTCONN;
	}
	if (len > max) {
		free(writes);
		log_debug("%s: refused a %zu-byte message: the channel carries at most %zu bytes",
			  c->peer, len, max);
		return -EMSGSIZE;
	}
	/* The common case: nothing waiting, one piece, a credit and a slot free:
	 * the frame is built in the registered slot, one copy. */
	if (!writes && c->state == RDMA_CONN_UP && !c->out_head && total <= c->peer_buf_size &&
	    c->n_free_slots && rdma_credits_can_send_data(&c->credits)) {
		slot = c->free_slots[--c->n_free_slots];
		buf = send_buf(c, slot);
		gather(buf + FRAME_HEADER_SIZE, iov, n);
		frame_seal(buf, len);
		r = post_send(c, slot, total);
		if (r < 0)
			post_failed(c, r, "send");
		return 0;
	}
	m = malloc(sizeof(*m) + total);
	if (!m) {
		free(writes);
		return -ENOMEM;
	}
	m->next = NULL;
	m->writes = writes;
	m->len = total;
	m->off = 0;
	gather(m->frame + FRAME_HEADER_SIZE, iov, n);
	frame_seal(m->frame, len);
	*c->out_tail = m;
	c->out_tail = &m->next;
	c->out_bytes += total;
	rdma_conn_flush(c);
	return 0;
}

/* Hands one whole frame up. Returns false when the conn is gone or going. */
static bool deliver(struct rdma_conn *c, const uint8_t *frame, size_t len)
{
	void *arg;
	const struct repl_transport_callbacks *cb = rdma_transport_cb(c->transport, &arg);
	const uint8_t *payload;
	size_t payload_len;
	const char *why;
	char reason[160];
	int r;

	r = frame_decode(frame, len, rdma_transport_max_payload(c->transport), &payload,
			 &payload_len, &why);
	if (r != (int)len) {
		snprintf(reason, sizeof(reason), "bad frame from %s: %s", c->peer,
			 r < 0 ? why : "a message holds more than one frame");
		rdma_conn_fail_soon(c, -EBADMSG, reason);
		return false;
	}
	cb->receive(&c->base, payload, payload_len, arg);
	return !c->closed && !c->failing;
}

static bool bad_piece(struct rdma_conn *c, const char *why)
{
	char reason[160];

	snprintf(reason, sizeof(reason), "bad frame from %s: %s", c->peer, why);
	rdma_conn_fail_soon(c, -EBADMSG, reason);
	return false;
}

/* One received message: a whole frame, or a piece of one. */
static bool receive_piece(struct rdma_conn *c, const uint8_t *buf, size_t n)
{
	const char *why;
	int len;

	if (c->reasm) {
		if (n > c->reasm_len - c->reasm_have)
			return bad_piece(c, "a piece runs past the end of its frame");
		memcpy(c->reasm + c->reasm_have, buf, n);
		c->reasm_have += n;
		if (c->reasm_have < c->reasm_len)
			return true;
		bool alive = deliver(c, c->reasm, c->reasm_len);
		free(c->reasm);
		c->reasm = NULL;
		return alive;
	}
	if (n < FRAME_HEADER_SIZE)
		return bad_piece(c, "a message shorter than a frame header");
	len = frame_header_check(buf, rdma_transport_max_payload(c->transport), &why);
	if (len < 0)
		return bad_piece(c, why);
	if (FRAME_HEADER_SIZE + (size_t)len <= n)
		return deliver(c, buf, n);
	c->reasm_len = FRAME_HEADER_SIZE + (size_t)len;
	c->reasm = malloc(c->reasm_len);
	if (!c->reasm) {
		rdma_conn_fail_soon(c, -ENOMEM, "out of memory for a frame in pieces");
		return false;
	}
	memcpy(c->reasm, buf, n);
	c->reasm_have = n;
	return true;
}

static int wc_error(enum ibv_wc_status status)
{
	switch (status) {
	case IBV_WC_RETRY_EXC_ERR:
	case IBV_WC_RNR_RETRY_EXC_ERR:
		return -ETIMEDOUT;
	case IBV_WC_WR_FLUSH_ERR:
		return -ECONNRESET;
	default:
		return -EIO;
	}
}

/* One work completion. Returns false when the conn is gone or going. */
static bool handle_wc(struct rdma_conn *c, const struct ibv_wc *wc)
{
	uint32_t kind = RDMA_WR_KIND(wc->wr_id), i = RDMA_WR_INDEX(wc->wr_id);
	static const char *const kind_name[] = {
		[RDMA_WR_SEND] = "a send",
		[RDMA_WR_RECV] = "a receive",
		[RDMA_WR_WRITE] = "an RDMA WRITE",
	};
	char reason[192];
	int r;

	if (wc->status != IBV_WC_SUCCESS) {
		snprintf(reason, sizeof(reason), "%s: %s (on %s)", c->peer,
			 ibv_wc_status_str(wc->status),
			 kind < sizeof(kind_name) / sizeof(kind_name[0]) && kind_name[kind]
				 ? kind_name[kind]
				 : "a work request");
		rdma_conn_fail_soon(c, wc_error(wc->status), reason);
		return false;
	}
	if (kind == RDMA_WR_WRITE) {
		rdma_onesided_completed(c, wc->wr_id);
		return true;
	}
	if (kind == RDMA_WR_SEND) {
		c->free_slots[c->n_free_slots++] = i;
		return true;
	}
	if (wc->wc_flags & IBV_WC_WITH_IMM &&
	    rdma_credits_grant(&c->credits, ntohl(wc->imm_data)) < 0) {
		snprintf(reason, sizeof(reason), "%s returned %u credits, more than it can owe",
			 c->peer, ntohl(wc->imm_data));
		rdma_conn_fail_soon(c, -EPROTO, reason);
		return false;
	}
	if (wc->byte_len && !receive_piece(c, recv_buf(c, i), wc->byte_len))
		return false;
	r = post_recv(c, i);
	if (r < 0) {
		post_failed(c, r, "recv");
		return false;
	}
	rdma_credits_reposted(&c->credits);
	return true;
}

void rdma_conn_poll(struct rdma_conn *c)
{
	struct ibv_wc wcs[WC_BATCH];
	int n;

	c->dispatching = true;
	while (!c->closed && !c->failing && (n = ibv_poll_cq(c->cq, WC_BATCH, wcs)) > 0)
		for (int k = 0; k < n && handle_wc(c, &wcs[k]); k++)
			;
	c->dispatching = false;
	if (c->closed) {
		rdma_conn_free(c);
		return;
	}
	rdma_conn_flush(c);
}

static void on_cq_event(evutil_socket_t fd, short what, void *arg)
{
	struct rdma_conn *c = arg;
	struct ibv_cq *cq;
	unsigned events = 0;
	void *ctx;

	while (ibv_get_cq_event(c->comp, &cq, &ctx) == 0)
		events++;
	if (events)
		ibv_ack_cq_events(c->cq, events);
	/* Re-arm before polling: a completion that lands in between is then
	 * either polled here or raises the next event. */
	if (ibv_req_notify_cq(c->cq, 0)) {
		rdma_conn_fail(c, -EIO, "ibv_req_notify_cq failed");
		return;
	}
	/* The peer may send as soon as it is ESTABLISHED, before our own
	 * ESTABLISHED event is read: what came that early waits in the CQ until
	 * conn_up has been reported (transport_rdma.c polls then), so the first
	 * frame up is never one for a connection nobody knows yet. */
	if (c->state == RDMA_CONN_UP)
		rdma_conn_poll(c);
}

static int set_nonblocking(int fd)
{
	int flags = fcntl(fd, F_GETFL);

	if (flags < 0 || fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0)
		return -errno;
	return 0;
}

static int alloc_bufs(struct rdma_conn *c, const char **ret_what)
{
	size_t recv_bytes = (size_t)RDMA_RECV_BUFS * RDMA_BUF_SIZE;
	size_t send_bytes = (size_t)RDMA_SEND_SLOTS * RDMA_BUF_SIZE;
	void *p;

	*ret_what = "allocating the message buffers";
	if (posix_memalign(&p, 4096, recv_bytes))
		return -ENOMEM;
	c->recv_bufs = p;
	if (posix_memalign(&p, 4096, send_bytes))
		return -ENOMEM;
	c->send_bufs = p;
	/* Pinning is what a low RLIMIT_MEMLOCK refuses: say so. */
	*ret_what = "ibv_reg_mr of the message buffers (pinned memory: see ulimit -l)";
	c->recv_mr = ibv_reg_mr(c->pd, c->recv_bufs, recv_bytes, IBV_ACCESS_LOCAL_WRITE);
	if (!c->recv_mr)
		return -errno;
	c->send_mr = ibv_reg_mr(c->pd, c->send_bufs, send_bytes, 0);
	if (!c->send_mr)
		return -errno;
	for (uint32_t i = 0; i < RDMA_SEND_SLOTS; i++)
		c->free_slots[i] = i;
	c->n_free_slots = RDMA_SEND_SLOTS;
	return 0;
}

/* What one WRITE may carry on this device, for the planner. */
static int query_limits(struct rdma_conn *c, struct ibv_context *verbs)
{
	struct ibv_device_attr dev;
	struct ibv_port_attr port;
	int r;

	r = ibv_query_device(verbs, &dev);
	if (r)
		return -r;
	r = ibv_query_port(verbs, c->id->port_num, &port);
	if (r)
		return -r;
	c->limits.max_sge =
		dev.max_sge < RDMA_PLAN_SGE_MAX ? (uint32_t)dev.max_sge : RDMA_PLAN_SGE_MAX;
	if (!c->limits.max_sge)
		c->limits.max_sge = 1;
	c->limits.max_msg_size = port.max_msg_sz;
	return 0;
}

int rdma_conn_setup(struct rdma_conn *c, const char **ret_what)
{
	struct ibv_context *verbs = c->id->verbs;
	struct ibv_qp_init_attr qa = {
		.qp_type = IBV_QPT_RC,
		.cap = {
			.max_send_wr = RDMA_SEND_SLOTS + RDMA_WRITE_SLOTS,
			.max_recv_wr = RDMA_RECV_BUFS,
			.max_recv_sge = 1,
		},
	};
	int r;

	*ret_what = "querying the device (ibv_query_device, ibv_query_port)";
	r = query_limits(c, verbs);
	if (r < 0)
		return r;
	qa.cap.max_send_sge = c->limits.max_sge;
	/* The transport's domain, so the pool's registrations work here; a
	 * connection on another device gets its own and no one-sided data. */
	c->pd = rdma_pool_pd(rdma_transport_pool(c->transport), verbs);
	c->shares_pool_pd = c->pd != NULL;
	*ret_what = "ibv_alloc_pd";
	if (!c->pd)
		c->pd = ibv_alloc_pd(verbs);
	if (!c->pd)
		return -(errno ? errno : ENOMEM);
	*ret_what = "the completion channel";
	c->comp = ibv_create_comp_channel(verbs);
	if (!c->comp)
		return -(errno ? errno : ENOMEM);
	r = set_nonblocking(c->comp->fd);
	if (r < 0)
		return r;
	*ret_what = "ibv_create_cq";
	/* Room for every entry of both queues: in error, each one completes. */
	c->cq = ibv_create_cq(verbs, RDMA_SEND_SLOTS + RDMA_WRITE_SLOTS + RDMA_RECV_BUFS, c,
			      c->comp, 0);
	if (!c->cq)
		return -(errno ? errno : ENOMEM);
	if (ibv_req_notify_cq(c->cq, 0))
		return -EIO;
	qa.send_cq = c->cq;
	qa.recv_cq = c->cq;
	*ret_what = "rdma_create_qp";
	if (rdma_create_qp(c->id, c->pd, &qa))
		return -errno;
	r = alloc_bufs(c, ret_what);
	if (r < 0)
		return r;
	*ret_what = "ibv_post_recv";
	for (uint32_t i = 0; i < RDMA_RECV_BUFS; i++) {
		r = post_recv(c, i);
		if (r < 0)
			return r;
	}
	*ret_what = "adding the completion channel to the event loop";
	c->cq_ev = event_new(rdma_transport_base(c->transport), c->comp->fd, EV_READ | EV_PERSIST,
			     on_cq_event, c);
	if (!c->cq_ev || event_add(c->cq_ev, NULL) < 0)
		return -ENOMEM;
	return 0;
}

void rdma_conn_params(struct rdma_params *ret)
{
	ret->credits = RDMA_RECV_BUFS;
	ret->buf_size = RDMA_BUF_SIZE;
}

void rdma_conn_peer_params(struct rdma_conn *c, const struct rdma_params *p)
{
	rdma_credits_init(&c->credits, RDMA_RECV_BUFS, p->credits);
	c->peer_buf_size = p->buf_size < RDMA_BUF_SIZE ? p->buf_size : RDMA_BUF_SIZE;
}
