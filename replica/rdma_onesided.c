/* RDMA WRITEs of page data ahead of a message (rdma_onesided.h). Every
 * target is checked against the partner's view before anything is queued:
 * a stale rkey is never written with. */
#include "rdma_onesided.h"

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>

#include "rdma_pool.h"
#include "reason.h"

/* Without a signalled WRITE now and then, a long plan's entries would come
 * back only with the next signalled SEND. */
#define SIGNAL_EVERY 8u

bool rdma_onesided_conn_ok(const struct repl_conn *base)
{
	const struct rdma_conn *c = (const struct rdma_conn *)base;

	return c->shares_pool_pd && rdma_pool_blocks(rdma_transport_pool(c->transport)) > 0;
}

int rdma_onesided_remote_open(struct repl_conn *base, uint32_t blocks, char *reason,
			      size_t reason_len)
{
	struct rdma_conn *c = (struct rdma_conn *)base;

	rdma_remote_view_free(c->view);
	c->view = NULL;
	return rdma_remote_view_new(blocks, &c->view, reason, reason_len);
}

int rdma_onesided_remote_update(struct repl_conn *base, const struct rdma_remote_block *b,
				char *reason, size_t reason_len)
{
	struct rdma_conn *c = (struct rdma_conn *)base;

	if (!c->view)
		return reason_fail(reason, reason_len, -EBADMSG,
				   "pool block %" PRIu32 " from a partner that has no pool",
				   b->block);
	return rdma_remote_view_update(c->view, b, reason, reason_len);
}

/* One write as a transfer: the source's lkey from the pool or a staging slab
 * (registering its block on first use), the target's address and rkey from
 * the view. */
static int resolve(struct rdma_conn *c, const struct repl_remote_write *w, struct rdma_xfer *ret,
		   char *reason, size_t reason_len)
{
	struct rdma_block_key local;
	int r;

	r = rdma_remote_view_target(c->view, w->block, w->generation, w->offset, w->length,
				    &ret->remote_addr, &ret->rkey, reason, reason_len);
	if (r < 0)
		return r;
	r = rdma_pool_source_key(rdma_transport_pool(c->transport), w->src, w->length, &local,
				 reason, reason_len);
	if (r < 0)
		return r;
	ret->local_addr = (uint64_t)(uintptr_t)w->src;
	ret->lkey = local.lkey;
	ret->length = w->length;
	return 0;
}

int rdma_onesided_send_after_writes(struct repl_conn *base, const struct repl_remote_write *w,
				    size_t n, const void *payload, size_t len, char *reason,
				    size_t reason_len)
{
	struct rdma_conn *c = (struct rdma_conn *)base;
	struct rdma_write_job *j;
	int r;

	if (!rdma_onesided_conn_ok(base) || !c->view)
		return reason_fail(reason, reason_len, -EOPNOTSUPP,
				   "%s takes no one-sided page data", c->peer);
	if (c->closed || c->failing)
		return reason_fail(reason, reason_len, -ENOTCONN, "%s is going down", c->peer);
	j = malloc(sizeof(*j) + n * sizeof(j->xfers[0]));
	if (!j)
		return reason_fail(reason, reason_len, -ENOMEM, "out of memory");
	j->n_xfers = n;
	for (size_t i = 0; i < n; i++) {
		r = resolve(c, &w[i], &j->xfers[i], reason, reason_len);
		if (r < 0)
			goto fail;
	}
	r = rdma_plan_init(&j->plan, j->xfers, n, &c->limits, reason, reason_len);
	if (r < 0)
		goto fail;
	r = rdma_conn_send_behind(c, &(struct iovec){ .iov_base = (void *)payload, .iov_len = len },
				  1, len, j);
	if (r < 0)
		return reason_fail(reason, reason_len, r, "%s: queueing the message failed",
				   c->peer);
	return 0;
fail:
	free(j);
	return r;
}

int rdma_onesided_post(struct rdma_conn *c, struct rdma_write_job *j)
{
	struct rdma_wr wrs[RDMA_WRITE_SLOTS];
	struct ibv_sge sges[RDMA_WRITE_SLOTS][RDMA_PLAN_SGE_MAX];
	struct ibv_send_wr ws[RDMA_WRITE_SLOTS], *bad;
	unsigned n = rdma_plan_next(&j->plan, wrs, c->free_write_slots);
	uint32_t unsignalled = 0;

	if (!n)
		return 0;
	for (unsigned k = 0; k < n; k++) {
		for (uint32_t e = 0; e < wrs[k].n_sge; e++)
			sges[k][e] = (struct ibv_sge){
				.addr = wrs[k].sge[e].addr,
				.length = wrs[k].sge[e].length,
				.lkey = wrs[k].sge[e].lkey,
			};
		ws[k] = (struct ibv_send_wr){
			.wr_id = RDMA_WR_WRITE,
			.next = k + 1 < n ? &ws[k + 1] : NULL,
			.sg_list = sges[k],
			.num_sge = (int)wrs[k].n_sge,
			.opcode = IBV_WR_RDMA_WRITE,
			.wr.rdma = { .remote_addr = wrs[k].remote_addr, .rkey = wrs[k].rkey },
		};
		/* The last of every post is signalled, so no entry is left for
		 * a SEND's completion to free unseen. */
		if (++unsignalled == SIGNAL_EVERY || k + 1 == n) {
			ws[k].send_flags = IBV_SEND_SIGNALED;
			ws[k].wr_id = (uint64_t)unsignalled << RDMA_WR_KIND_BITS | RDMA_WR_WRITE;
			unsignalled = 0;
		}
	}
	c->free_write_slots -= n;
	return -ibv_post_send(c->id->qp, ws, &bad);
}

void rdma_onesided_completed(struct rdma_conn *c, uint64_t wr_id)
{
	c->free_write_slots += RDMA_WR_INDEX(wr_id);
}

bool rdma_conn_writes_pending(const struct rdma_conn *c)
{
	if (c->free_write_slots < RDMA_WRITE_SLOTS)
		return true;
	for (const struct rdma_out_msg *m = c->out_head; m; m = m->next)
		if (m->writes)
			return true;
	return false;
}
