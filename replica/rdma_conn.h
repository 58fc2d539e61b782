/* One connection of the RDMA transport: its rdma_cm id, its queue pair and
 * the registered buffers behind it, and the two-sided message path (SEND into
 * the peer's pre-posted receive buffers, with the credits of rdma_credits.h).
 * transport_rdma.c drives the connection's life from rdma_cm events; this
 * file owns everything that moves data. Both run on the event loop thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <infiniband/verbs.h>
#include <rdma/rdma_cma.h>

#include "rdma_credits.h"
#include "rdma_planner.h"
#include "rdma_regtable.h"
#include "transport.h"

struct event;
struct event_base;

/* Each side posts this many receive buffers of this size; a frame longer
 * than one buffer goes as several SENDs. 32 x 64 KiB each way: 4 MiB pinned
 * per connection, under the 8 MiB RLIMIT_MEMLOCK a user gets by default even
 * while a second connection is being set up (the unit has no limit). */
#define RDMA_RECV_BUFS 32u
#define RDMA_SEND_SLOTS 32u
#define RDMA_BUF_SIZE (64u << 10)
/* Send-queue entries for RDMA WRITEs, besides the send slots: a plan longer
 * than this is posted in parts as completions free them. */
#define RDMA_WRITE_SLOTS 16u

/* A work request's wr_id: its kind in the low bits, then the receive buffer
 * or send slot index, or for a WRITE the WRITEs its completion frees. */
#define RDMA_WR_SEND 0u
#define RDMA_WR_RECV 1u
#define RDMA_WR_WRITE 2u
#define RDMA_WR_KIND_BITS 2
#define RDMA_WR_KIND(wr_id) ((uint32_t)((wr_id)&3u))
#define RDMA_WR_INDEX(wr_id) ((uint32_t)((wr_id) >> RDMA_WR_KIND_BITS))

enum rdma_conn_state {
	RDMA_CONN_RESOLVING_ADDR, /* outbound: rdma_resolve_addr sent */
	RDMA_CONN_RESOLVING_ROUTE,
	RDMA_CONN_CONNECTING, /* outbound: rdma_connect sent */
	RDMA_CONN_ACCEPTING,  /* inbound: rdma_accept sent */
	RDMA_CONN_UP,
};

struct rdma_transport;

struct rdma_write_job;

/* A frame waiting for credits (or, when longer than a buffer, for its
 * remaining pieces to go), and for the RDMA WRITEs that go before it. */
struct rdma_out_msg {
	struct rdma_out_msg *next;
	struct rdma_write_job *writes; /* NULL: a plain frame */
	size_t len, off;
	uint8_t frame[];
};

struct rdma_conn {
	struct repl_conn base; /* first: the transport-independent part */
	struct rdma_transport *transport;
	struct rdma_conn *next;
	struct rdma_cm_id *id;
	enum rdma_conn_state state;
	bool inbound;
	char peer[80];
	/* As in transport_tcp.c: while a callback runs on this conn, close()
	 * only marks it and whoever dispatched frees it afterwards. */
	bool dispatching;
	bool closed;
	/* A failure found where conn_down cannot be called (inside send(), or
	 * inside a callback): reported from the loop by fail_ev. */
	bool failing;
	int fail_error;
	char fail_reason[192];
	struct event *fail_ev;

	struct ibv_pd *pd;
	bool shares_pool_pd; /* pd is the transport's: the pool's keys work here */
	struct ibv_comp_channel *comp;
	struct ibv_cq *cq;
	struct event *cq_ev;
	uint8_t *recv_bufs, *send_bufs;
	struct ibv_mr *recv_mr, *send_mr;
	uint32_t free_slots[RDMA_SEND_SLOTS];
	uint32_t n_free_slots;
	uint32_t free_write_slots;
	struct rdma_limits limits;     /* of this queue pair, for the planner */
	struct rdma_remote_view *view; /* the partner's pool; NULL until its Hello */

	struct rdma_credits credits;
	uint32_t peer_buf_size;
	struct rdma_out_msg *out_head, **out_tail;
	size_t out_bytes; /* of the frames queued there, not yet posted */
	/* A frame arriving in pieces: its whole length and what came so far. */
	uint8_t *reasm;
	size_t reasm_len, reasm_have;
};

/* What the connection needs of its transport (transport_rdma.c). */
struct event_base *rdma_transport_base(const struct rdma_transport *t);
size_t rdma_transport_max_payload(const struct rdma_transport *t);
const struct repl_transport_callbacks *rdma_transport_cb(const struct rdma_transport *t,
							 void **ret_arg);
struct rdma_pool *rdma_transport_pool(struct rdma_transport *t);

/* A connection with no verbs resources yet; id may be NULL (set later). */
struct rdma_conn *rdma_conn_new(struct rdma_transport *t, const char *peer, bool inbound);
/* Releases everything (queue pair, buffers, id); does not unlink or report. */
void rdma_conn_release(struct rdma_conn *c);

/* Creates the protection domain, completion channel and queue, the queue pair
 * on c->id, registers the buffers and posts every receive buffer; the
 * completion channel's fd joins the loop. On failure *ret_what names the
 * step that failed. */
int rdma_conn_setup(struct rdma_conn *c, const char **ret_what);
/* The parameters this side announces in its private data. */
void rdma_conn_params(struct rdma_params *ret);
/* The peer's announced parameters: credits start here. */
void rdma_conn_peer_params(struct rdma_conn *c, const struct rdma_params *p);

/* Queues one payload (len bytes in n pieces) as a frame and sends what
 * credits allow. */
int rdma_conn_send(struct rdma_conn *c, const struct iovec *iov, size_t n, size_t len);
/* The same, after the RDMA WRITEs of writes (rdma_onesided.c; taken over,
 * freed with the frame): the frame waits until they are all posted. */
int rdma_conn_send_behind(struct rdma_conn *c, const struct iovec *iov, size_t n, size_t len,
			  struct rdma_write_job *writes);
/* Sends queued frames as far as credits and send slots allow (after UP). */
void rdma_conn_flush(struct rdma_conn *c);
/* Handles every completion waiting in the CQ, then flushes; frees c when it
 * was closed meanwhile. Only once UP (completions wait until then). */
void rdma_conn_poll(struct rdma_conn *c);

/* Reports c down now (conn_down, then frees it), unless its owner closed it. */
void rdma_conn_fail(struct rdma_conn *c, int error, const char *reason);
/* The same from the loop: for failures found inside send() or a callback. */
void rdma_conn_fail_soon(struct rdma_conn *c, int error, const char *reason);
/* An RDMA WRITE is posted and not completed, or queued behind a frame. */
bool rdma_conn_writes_pending(const struct rdma_conn *c);
/* Unlinks from the transport and releases. */
void rdma_conn_free(struct rdma_conn *c);
