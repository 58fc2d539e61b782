/* Seed 001's "Format Descriptor": one work request from the request state,
 * coalescing and dividing as it walks the transfers. */
#include "rdma_planner.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "reason.h"

static int check_xfer(const struct rdma_xfer *x, size_t i, char *reason, size_t reason_len)
{
	if (x->length == 0)
		return reason_fail(reason, reason_len, -EINVAL, "transfer %zu has no bytes", i);
	if (x->local_addr == 0 || x->remote_addr == 0)
		return reason_fail(reason, reason_len, -EINVAL, "transfer %zu has no %s address", i,
				   x->local_addr ? "remote" : "local");
	if (x->local_addr + x->length < x->local_addr ||
	    x->remote_addr + x->length < x->remote_addr)
		return reason_fail(reason, reason_len, -EINVAL,
				   "transfer %zu (%" PRIu64 " bytes from 0x%" PRIx64
				   " to 0x%" PRIx64 ") wraps around the address space",
				   i, x->length, x->local_addr, x->remote_addr);
	return 0;
}

int rdma_plan_init(struct rdma_plan *p, const struct rdma_xfer *xfers, size_t n_xfers,
		   const struct rdma_limits *limits, char *reason, size_t reason_len)
{
	if (!xfers || n_xfers == 0)
		return reason_fail(reason, reason_len, -EINVAL, "nothing to transfer");
	if (!limits || limits->max_msg_size == 0 || limits->max_sge == 0)
		return reason_fail(
			reason, reason_len, -EINVAL,
			"the device limits need a message size and scatter-gather entries "
			"(max_msg_size %" PRIu32 ", max_sge %" PRIu32 ")",
			limits ? limits->max_msg_size : 0, limits ? limits->max_sge : 0);
	for (size_t i = 0; i < n_xfers; i++) {
		int r = check_xfer(&xfers[i], i, reason, reason_len);

		if (r < 0)
			return r;
	}
	*p = (struct rdma_plan){
		.xfers = xfers,
		.n_xfers = n_xfers,
		.max_msg_size = limits->max_msg_size,
		.max_sge =
			limits->max_sge < RDMA_PLAN_SGE_MAX ? limits->max_sge : RDMA_PLAN_SGE_MAX,
	};
	return 0;
}

bool rdma_plan_done(const struct rdma_plan *p)
{
	return p->element == p->n_xfers;
}

/* Whether the transfer at p->element goes on where wr ends. */
static bool continues(const struct rdma_plan *p, const struct rdma_wr *wr)
{
	const struct rdma_xfer *x = &p->xfers[p->element];

	return x->rkey == wr->rkey && x->remote_addr == wr->remote_addr + wr->length;
}

/* Adds take bytes at local (lkey) to wr: onto its last entry when they follow
 * it, else as a new entry. false when that needs an entry wr has not got. */
static bool add_bytes(const struct rdma_plan *p, struct rdma_wr *wr, uint64_t local, uint32_t lkey,
		      uint32_t take)
{
	struct rdma_sge *last = wr->n_sge ? &wr->sge[wr->n_sge - 1] : NULL;

	if (last && last->lkey == lkey && last->addr + last->length == local) {
		last->length += take;
	} else if (wr->n_sge < p->max_sge) {
		wr->sge[wr->n_sge++] =
			(struct rdma_sge){ .addr = local, .length = take, .lkey = lkey };
	} else {
		return false;
	}
	wr->length += take;
	return true;
}

static void format_wr(struct rdma_plan *p, struct rdma_wr *wr)
{
	const struct rdma_xfer *x = &p->xfers[p->element];

	*wr = (struct rdma_wr){
		.remote_addr = x->remote_addr + p->offset,
		.rkey = x->rkey,
		.first = p->element,
		.last = p->element,
	};
	do {
		uint64_t left, room = p->max_msg_size - wr->length;
		uint32_t take;

		x = &p->xfers[p->element];
		left = x->length - p->offset;
		take = (uint32_t)(left < room ? left : room);
		if (!add_bytes(p, wr, x->local_addr + p->offset, x->lkey, take))
			return; /* out of entries: the next work request starts here */
		wr->last = p->element;
		if (take < left) {
			p->offset += take; /* divided: the rest goes in the next one */
			return;
		}
		p->element++;
		p->offset = 0;
	} while (wr->length < p->max_msg_size && !rdma_plan_done(p) && continues(p, wr));
}

unsigned rdma_plan_next(struct rdma_plan *p, struct rdma_wr *wrs, unsigned slots)
{
	unsigned n = 0;

	while (n < slots && !rdma_plan_done(p))
		format_wr(p, &wrs[n++]);
	return n;
}

size_t rdma_plan_remaining(const struct rdma_plan *p)
{
	struct rdma_plan copy = *p;
	struct rdma_wr scratch;
	size_t n = 0;

	while (rdma_plan_next(&copy, &scratch, 1))
		n++;
	return n;
}
