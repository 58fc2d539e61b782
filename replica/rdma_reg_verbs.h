/* rdma_reg_ops over libibverbs: the registration table's blocks become
 * memory regions of a protection domain. Built only with rdma-core. */
#pragma once

#include "rdma_regtable.h"

struct ibv_pd;

/* The ctx rdma_reg_verbs_ops takes: the protection domain of the queue
 * pairs that use the table, and the ibv_access_flags its blocks need
 * (IBV_ACCESS_LOCAL_WRITE, and IBV_ACCESS_REMOTE_WRITE for a region the
 * partner writes into). */
struct rdma_reg_verbs {
	struct ibv_pd *pd;
	int access;
};

extern const struct rdma_reg_ops rdma_reg_verbs_ops;
