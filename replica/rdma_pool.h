/* The frame pool as the RDMA transport registers it (replica/RDMA.md,
 * "Registration"): the one protection domain its connections on a device
 * share, and the registration table of the pool's blocks on that domain.
 * The domain outlives every connection, so the pool's registrations survive
 * a reconnect. A connection on another device gets a domain of its own and
 * takes no part in one-sided page data. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <infiniband/verbs.h>

#include "rdma_reg_verbs.h"
#include "rdma_regtable.h"
#include "rdma_staging.h"

/* Staging slabs at most at once: more than the writes credits let be in
 * flight. */
#define RDMA_STAGING_SLABS 32u

struct rdma_pool {
	struct ibv_context *verbs; /* pd's device; NULL until a connection opened one */
	struct ibv_pd *pd;
	struct rdma_reg_verbs reg;   /* the registration table's ctx: pd and access */
	struct rdma_regtable *table; /* NULL until attached */
	uint8_t *base;		     /* the pool, in blocks of block_bytes */
	uint64_t length, block_bytes;
	uint64_t purged; /* stale registrations deregistered since the attach */
	/* The staging slabs (rdma_staging.h), registered for local access only
	 * on the same domain; NULL until the pool is attached. */
	struct rdma_reg_verbs staging_reg;
	struct rdma_staging *staging;
};

/* The shared protection domain for a connection on verbs (allocated on the
 * first call); NULL when the domain is on another device or cannot be
 * allocated: the connection then allocates its own. */
struct ibv_pd *rdma_pool_pd(struct rdma_pool *p, struct ibv_context *verbs);

/* Cuts length bytes at base into blocks of block_bytes (the last may be
 * shorter), none registered yet. Once only. */
int rdma_pool_attach(struct rdma_pool *p, void *base, uint64_t length, uint64_t block_bytes,
		     char *reason, size_t reason_len);

uint32_t rdma_pool_blocks(const struct rdma_pool *p);

/* rdma_regtable_use_range() on the pool; -ENOTCONN while no connection has
 * opened the device (no domain to register on), -EOPNOTSUPP unattached. */
int rdma_pool_use_range(struct rdma_pool *p, const void *addr, uint64_t length,
			struct rdma_block_key *ret, char *reason, size_t reason_len);

/* The lkey of a WRITE's source: in the pool (rdma_pool_use_range) or in a
 * staging slab. -ENOENT in neither. */
int rdma_pool_source_key(struct rdma_pool *p, const void *addr, uint64_t length,
			 struct rdma_block_key *ret, char *reason, size_t reason_len);

/* The frame pool shrank or grew by block (replica/RDMA.md, "The pool grows
 * and shrinks"): rdma_regtable_remove, or rdma_regtable_add_at its own
 * bytes. */
int rdma_pool_block_out(struct rdma_pool *p, uint32_t block, char *reason, size_t reason_len);
int rdma_pool_block_in(struct rdma_pool *p, uint32_t block, char *reason, size_t reason_len);

/* Deregisters the stale registrations, the pool's and the staging slabs'
 * (whose memory is then unmapped), the caller knowing that no WRITE is in
 * flight against them: how many went, or the first error. */
int rdma_pool_purge(struct rdma_pool *p, char *reason, size_t reason_len);

/* Deregisters the pool's blocks and frees the domain: after every connection
 * on it is gone. */
void rdma_pool_release(struct rdma_pool *p);
