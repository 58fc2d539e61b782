/* The transfer planner (seed 001): page transfers to the partner's memory
 * become RDMA WRITE work requests that fit the device.
 *
 * Consecutive transfers whose remote bytes follow each other under one rkey
 * are coalesced into one work request, each contributing a scatter-gather
 * entry (or extending the last one, when its local bytes follow too and have
 * the same lkey). A work request ends when it holds max_msg_size bytes, when
 * its scatter-gather entries run out, or when the next transfer goes
 * elsewhere; a transfer that does not fit is divided, the rest going into the
 * next work request. The plan keeps seed 001's request state, the current
 * element and the offset into it, so planning stops when the send queue has no
 * slot left and goes on later exactly where it stopped: every byte is planned
 * once, in order.
 *
 * Pure: the output is plain structs, which the transport turns into
 * ibv_send_wr; the transfers are not reordered (sort them by remote address
 * first for the most coalescing). */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The most scatter-gather entries a planned work request has, whatever the
 * device allows (16 pages of 4 KiB: 64 KiB per work request). */
#define RDMA_PLAN_SGE_MAX 16

/* One transfer: length bytes from local memory into the partner's. */
struct rdma_xfer {
	uint64_t local_addr;
	uint32_t lkey;
	uint64_t length;
	uint64_t remote_addr;
	uint32_t rkey;
};

/* What the device and the queue pair allow per work request. */
struct rdma_limits {
	uint32_t max_msg_size; /* the port's max_msg_sz */
	uint32_t max_sge;      /* the queue pair's max_send_sge; above RDMA_PLAN_SGE_MAX, that */
};

struct rdma_sge {
	uint64_t addr;
	uint32_t length;
	uint32_t lkey;
};

/* One RDMA WRITE: the bytes of sge[0..n_sge) in order, to remote_addr. */
struct rdma_wr {
	uint64_t remote_addr;
	uint32_t rkey;
	uint32_t n_sge;
	uint64_t length; /* the sum of the entries' lengths */
	/* the transfers whose bytes it carries: a transfer divided between
	 * work requests is in each of them */
	size_t first, last;
	struct rdma_sge sge[RDMA_PLAN_SGE_MAX];
};

/* The request state. The transfers are the caller's, and must stay as they
 * are until the plan is done. */
struct rdma_plan {
	const struct rdma_xfer *xfers;
	size_t n_xfers;
	uint32_t max_msg_size;
	uint32_t max_sge;
	size_t element;	 /* the transfer the next work request starts in */
	uint64_t offset; /* the bytes of it already planned */
};

/* Checks the transfers and the limits and starts a plan: -EINVAL, with the
 * reason (naming the transfer), for no transfers, a transfer of no bytes, one
 * without an address or whose bytes would wrap around the address space, or
 * limits of 0. */
int rdma_plan_init(struct rdma_plan *p, const struct rdma_xfer *xfers, size_t n_xfers,
		   const struct rdma_limits *limits, char *reason, size_t reason_len);

/* Formats at most slots work requests into wrs (the send-queue slots free
 * now) and returns how many: fewer than slots only when the plan is done. */
unsigned rdma_plan_next(struct rdma_plan *p, struct rdma_wr *wrs, unsigned slots);

bool rdma_plan_done(const struct rdma_plan *p);

/* The work requests still to be formatted (seed 001's total transfer count). */
size_t rdma_plan_remaining(const struct rdma_plan *p);
