/* The transport's protection domain and the pool's registration table
 * (rdma_pool.h). */
#include "rdma_pool.h"

#include <errno.h>
#include <inttypes.h>

#include "reason.h"

struct ibv_pd *rdma_pool_pd(struct rdma_pool *p, struct ibv_context *verbs)
{
	if (!p->pd) {
		p->pd = ibv_alloc_pd(verbs);
		if (!p->pd)
			return NULL;
		p->verbs = verbs;
		p->reg.pd = p->staging_reg.pd = p->pd;
	}
	return p->verbs == verbs ? p->pd : NULL;
}

static int no_table(char *reason, size_t reason_len)
{
	return reason_fail(reason, reason_len, -EOPNOTSUPP, "no pool attached");
}

int rdma_pool_attach(struct rdma_pool *p, void *base, uint64_t length, uint64_t block_bytes,
		     char *reason, size_t reason_len)
{
	uint64_t blocks;
	uint32_t block;
	int r;

	if (p->table)
		return reason_fail(reason, reason_len, -EEXIST, "a pool is attached already");
	if (!base || !length || !block_bytes)
		return reason_fail(reason, reason_len, -EINVAL,
				   "pool of %" PRIu64 " bytes in blocks of %" PRIu64
				   " bytes: neither may be 0",
				   length, block_bytes);
	blocks = (length + block_bytes - 1) / block_bytes;
	if (blocks > UINT32_MAX)
		return reason_fail(reason, reason_len, -EINVAL,
				   "pool of %" PRIu64 " blocks: at most %" PRIu32, blocks,
				   UINT32_MAX);
	/* The partner writes into landing runs; local write for the NIC's own
	 * reads is what a WRITE's source needs. */
	p->reg.access = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE;
	r = rdma_regtable_new((uint32_t)blocks, &rdma_reg_verbs_ops, &p->reg, &p->table, reason,
			      reason_len);
	if (r < 0)
		return r;
	/* A staging slab is only ever a WRITE's source. */
	p->staging_reg.access = IBV_ACCESS_LOCAL_WRITE;
	r = rdma_staging_new(RDMA_STAGING_SLABS, &rdma_reg_verbs_ops, &p->staging_reg, &p->staging,
			     reason, reason_len);
	if (r < 0) {
		rdma_regtable_free(p->table);
		p->table = NULL;
		return r;
	}
	p->base = base;
	p->length = length;
	p->block_bytes = block_bytes;
	for (uint64_t off = 0; off < length; off += block_bytes) {
		uint64_t n = length - off < block_bytes ? length - off : block_bytes;

		r = rdma_regtable_add(p->table, (uint8_t *)base + off, n, &block, reason,
				      reason_len);
		if (r < 0) {
			rdma_regtable_free(p->table);
			p->table = NULL;
			return r;
		}
	}
	return 0;
}

uint32_t rdma_pool_blocks(const struct rdma_pool *p)
{
	return p->table ? rdma_regtable_max_blocks(p->table) : 0;
}

int rdma_pool_use_range(struct rdma_pool *p, const void *addr, uint64_t length,
			struct rdma_block_key *ret, char *reason, size_t reason_len)
{
	if (!p->table)
		return no_table(reason, reason_len);
	if (!p->pd)
		return reason_fail(reason, reason_len, -ENOTCONN,
				   "no connection has opened the RDMA device yet");
	return rdma_regtable_use_range(p->table, addr, length, ret, reason, reason_len);
}

int rdma_pool_block_out(struct rdma_pool *p, uint32_t block, char *reason, size_t reason_len)
{
	if (!p->table)
		return no_table(reason, reason_len);
	return rdma_regtable_remove(p->table, block, reason, reason_len);
}

int rdma_pool_block_in(struct rdma_pool *p, uint32_t block, char *reason, size_t reason_len)
{
	uint64_t off = (uint64_t)block * p->block_bytes;

	if (!p->table)
		return no_table(reason, reason_len);
	if (off >= p->length)
		return reason_fail(reason, reason_len, -EINVAL,
				   "no block %" PRIu32 " in a pool of %" PRIu64 " bytes", block,
				   p->length);
	return rdma_regtable_add_at(p->table, block, p->base + off,
				    p->length - off < p->block_bytes ? p->length - off
								     : p->block_bytes,
				    reason, reason_len);
}

int rdma_pool_source_key(struct rdma_pool *p, const void *addr, uint64_t length,
			 struct rdma_block_key *ret, char *reason, size_t reason_len)
{
	int r = rdma_pool_use_range(p, addr, length, ret, reason, reason_len);

	if (r != -ENOENT || !p->staging)
		return r;
	return rdma_staging_use_range(p->staging, addr, length, ret, reason, reason_len);
}

int rdma_pool_purge(struct rdma_pool *p, char *reason, size_t reason_len)
{
	int r, s;

	if (!p->table)
		return no_table(reason, reason_len);
	r = rdma_regtable_purge(p->table, reason, reason_len);
	if (r > 0)
		p->purged += (uint64_t)r;
	s = rdma_staging_purge(p->staging, r < 0 ? NULL : reason, reason_len);
	if (s > 0)
		p->purged += (uint64_t)s;
	if (r < 0)
		return r;
	return s < 0 ? s : r + s;
}

void rdma_pool_release(struct rdma_pool *p)
{
	rdma_staging_free(p->staging);
	p->staging = NULL;
	rdma_regtable_free(p->table);
	p->table = NULL;
	if (p->pd)
		ibv_dealloc_pd(p->pd);
	p->pd = NULL;
	p->verbs = NULL;
}
