/* Registered memory blocks (seed 000): the descriptor table of a region that
 * grows and shrinks in blocks (the frame pool, staging buffers), and the
 * partner's view of the same table.
 *
 * A block is registered when it is first used, not when it joins the region,
 * so memory that is never sent from or written into is never pinned. Every
 * registration gets a generation from one counter that only goes up, and a
 * block's generation changes again when it leaves the region or its
 * registration is invalidated: a key or a remote address is only ever handed
 * out together with the generation it belongs to, and a generation that is
 * not the block's current one is stale. A stale registration stays until
 * purge() deregisters it (seed 000's decoupling of release from
 * deregistration), or until its slot is used again.
 *
 * The partner keeps a struct rdma_remote_view of this table, filled at the
 * handshake and updated by a message whenever a block is registered or
 * withdrawn, and it refuses to produce a remote address for any generation
 * but the one it holds: a stale rkey is never written with.
 *
 * No verbs here: registration goes through struct rdma_reg_ops, which the
 * RDMA transport implements with ibv_reg_mr/ibv_dereg_mr and a unit test with
 * a recording fake. Functions return 0 (or a count) or -errno, and write why
 * into reason (which may be NULL) when they fail. Not thread-safe: everything
 * runs on the event loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What one registration gave: the handle deregistration needs, and keys. */
struct rdma_mr_keys {
	void *handle;
	uint32_t lkey;
	uint32_t rkey;
};

/* How blocks are registered. Both run in the caller's context (the event
 * loop) and return 0 or -errno; reg registers length bytes at addr for local
 * use and remote writes. */
struct rdma_reg_ops {
	int (*reg)(void *ctx, void *addr, uint64_t length, struct rdma_mr_keys *ret);
	int (*dereg)(void *ctx, void *handle);
};

/* A block's current registration: what a local work request needs (lkey)
 * and what the partner needs to write into it (addr, rkey, generation). */
struct rdma_block_key {
	uint32_t block;
	uint64_t generation;
	uint64_t addr; /* the block's first byte */
	uint64_t length;
	uint32_t lkey;
	uint32_t rkey;
	bool registered_now; /* this use registered it: the partner must be told */
};

/* A block as the partner is told of it, at the handshake and in updates.
 * length 0: not registered (never, or withdrawn at this generation). */
struct rdma_remote_block {
	uint32_t block;
	uint64_t generation;
	uint64_t addr;
	uint64_t length;
	uint32_t rkey;
};

struct rdma_regtable;

int rdma_regtable_new(uint32_t max_blocks, const struct rdma_reg_ops *ops, void *ctx,
		      struct rdma_regtable **ret, char *reason, size_t reason_len);
/* Deregisters every registration left, current or stale. NULL is fine. */
void rdma_regtable_free(struct rdma_regtable *t);

uint32_t rdma_regtable_max_blocks(const struct rdma_regtable *t);

/* The region grew by a block of length bytes at addr: it takes the lowest
 * free slot (ret_block), unregistered until it is first used. */
int rdma_regtable_add(struct rdma_regtable *t, void *addr, uint64_t length, uint32_t *ret_block,
		      char *reason, size_t reason_len);

/* rdma_regtable_add() into slot block, which must not be in the region: a
 * block that left comes back under its own index (the partner names blocks
 * by index). -EEXIST when it is in the region or overlaps one that is,
 * -EINVAL for an index outside the table. */
int rdma_regtable_add_at(struct rdma_regtable *t, uint32_t block, void *addr, uint64_t length,
			 char *reason, size_t reason_len);

/* The region shrank: block leaves it, and its registration, if any, is stale
 * from now on. The caller makes sure nothing is in flight to or from it. */
int rdma_regtable_remove(struct rdma_regtable *t, uint32_t block, char *reason, size_t reason_len);

/* Block stays in the region but its registration no longer holds (a new
 * protection domain after a reconnect, say): stale, and registered again
 * at its next use. -ENOENT when it is not in the region. */
int rdma_regtable_invalidate(struct rdma_regtable *t, uint32_t block, char *reason,
			     size_t reason_len);

/* The keys of block, registered now if this is its first use since it
 * joined or was invalidated (a stale registration in its slot is purged
 * first). -ENOENT when the block is not in the region; a registration
 * failure returns reg's error. */
int rdma_regtable_use(struct rdma_regtable *t, uint32_t block, struct rdma_block_key *ret,
		      char *reason, size_t reason_len);

/* rdma_regtable_use() for the block holding [addr, addr + length), which must
 * lie in one block: -ENOENT when addr is in none, -ERANGE when the range runs
 * past its block's end. Looks through the blocks in order. */
int rdma_regtable_use_range(struct rdma_regtable *t, const void *addr, uint64_t length,
			    struct rdma_block_key *ret, char *reason, size_t reason_len);

/* 0 when generation is block's current registration; -ESTALE when it is not
 * (older, newer, or the block is no longer registered), -EINVAL for a block
 * index outside the table. For a generation that came from the partner. */
int rdma_regtable_check(const struct rdma_regtable *t, uint32_t block, uint64_t generation,
			char *reason, size_t reason_len);

/* Deregisters every stale registration. Returns how many went, or the first
 * error of dereg: the ones that failed stay stale for the next purge. */
int rdma_regtable_purge(struct rdma_regtable *t, char *reason, size_t reason_len);

/* Whether slot block holds a registration, current or stale: memory that
 * left the region may be released once it holds none. */
bool rdma_regtable_registered(const struct rdma_regtable *t, uint32_t block);

struct rdma_regtable_counts {
	uint32_t current; /* slots holding a current registration */
	uint32_t stale;	  /* ... and a stale one */
	uint64_t failed;  /* registrations the ops refused since the table was made */
};

void rdma_regtable_count(const struct rdma_regtable *t, struct rdma_regtable_counts *ret);

/* Block as the partner is to see it now (for the handshake, and for the
 * update sent after it was registered, removed or invalidated). */
int rdma_regtable_describe(const struct rdma_regtable *t, uint32_t block,
			   struct rdma_remote_block *ret, char *reason, size_t reason_len);

/* ---- The partner's table, as this side knows it ---- */

struct rdma_remote_view;

int rdma_remote_view_new(uint32_t max_blocks, struct rdma_remote_view **ret, char *reason,
			 size_t reason_len);
void rdma_remote_view_free(struct rdma_remote_view *v);

/* Takes what the partner said of one block. It comes off the wire, so a
 * block outside the table, generation 0, a generation older than the one
 * held, or the same generation with other keys is -EBADMSG. */
int rdma_remote_view_update(struct rdma_remote_view *v, const struct rdma_remote_block *b,
			    char *reason, size_t reason_len);

/* The connection went: nothing the partner said holds any more. */
void rdma_remote_view_clear(struct rdma_remote_view *v);

/* Where to write length bytes at offset into the partner's block, which the
 * partner named at generation: -ESTALE unless the view holds exactly that
 * generation, -ENOENT when the partner has not registered the block, -ERANGE
 * when the bytes run past its end, -EINVAL for length 0 or a block index
 * outside the table. Nothing is written to ret_* on failure. */
int rdma_remote_view_target(const struct rdma_remote_view *v, uint32_t block, uint64_t generation,
			    uint64_t offset, uint64_t length, uint64_t *ret_addr,
			    uint32_t *ret_rkey, char *reason, size_t reason_len);
