/* ibv_reg_mr sets errno and returns NULL; ibv_dereg_mr returns a positive
 * errno: both become -errno here (STYLE.md, "Errors"). */
#include "rdma_reg_verbs.h"

#include <errno.h>
#include <infiniband/verbs.h>

static int verbs_reg(void *ctx, void *addr, uint64_t length, struct rdma_mr_keys *ret)
{
	const struct rdma_reg_verbs *v = ctx;
	struct ibv_mr *mr;

	if (length > SIZE_MAX)
		return -EOVERFLOW;
	mr = ibv_reg_mr(v->pd, addr, (size_t)length, v->access);
	if (!mr)
		return errno ? -errno : -EIO;
	ret->handle = mr;
	ret->lkey = mr->lkey;
	ret->rkey = mr->rkey;
	return 0;
}

static int verbs_dereg(void *ctx, void *handle)
{
	int r = ibv_dereg_mr(handle);

	return r ? -r : 0;
}

const struct rdma_reg_ops rdma_reg_verbs_ops = {
	.reg = verbs_reg,
	.dereg = verbs_dereg,
};
