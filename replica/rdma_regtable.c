/* Seed 000's descriptor table and registration table in one array: slot i
 * holds block i's descriptor (where it is, whether it is in the region, its
 * generation) and the one registration made for the slot, if any. The
 * registration is current when it has the descriptor's generation and the
 * block is in the region; otherwise it is stale, and goes at the next purge,
 * or when the slot is used again (seed 000 claim 2: a different registration
 * at the same location is purged before the new one is stored).
 *
 *   event                 descriptor generation      registration
 *   add (grow)            new                        none (or a stale one)
 *   first use             new, = registration's      registered
 *   remove (shrink)       new                        stale
 *   invalidate            new                        stale
 *   purge                 -                          stale ones deregistered
 */
#include "rdma_regtable.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>

#include "reason.h"
#include <stdlib.h>
#include <string.h>

struct slot {
	/* the descriptor */
	uint8_t *addr;
	uint64_t length;
	bool present;
	uint64_t generation;
	/* the registration */
	bool registered;
	uint64_t reg_generation;
	struct rdma_mr_keys keys;
};

struct rdma_regtable {
	const struct rdma_reg_ops *ops;
	void *ctx;
	uint64_t last_generation;
	uint64_t failed; /* refused registrations */
	uint32_t max_blocks;
	struct slot slot[];
};

struct rdma_remote_view {
	uint32_t max_blocks;
	struct rdma_remote_block block[];
};

static bool current(const struct slot *s)
{
	return s->present && s->registered && s->reg_generation == s->generation;
}

static bool stale(const struct slot *s)
{
	return s->registered && !current(s);
}

int rdma_regtable_new(uint32_t max_blocks, const struct rdma_reg_ops *ops, void *ctx,
		      struct rdma_regtable **ret, char *reason, size_t reason_len)
{
	struct rdma_regtable *t;

	if (max_blocks == 0 || !ops || !ops->reg || !ops->dereg)
		return reason_fail(reason, reason_len, -EINVAL,
				   "a registration table needs at least one block (asked %" PRIu32
				   ") and both registration calls",
				   max_blocks);
	t = calloc(1, sizeof(*t) + (size_t)max_blocks * sizeof(t->slot[0]));
	if (!t)
		return reason_fail(reason, reason_len, -ENOMEM, "out of memory");
	t->ops = ops;
	t->ctx = ctx;
	t->max_blocks = max_blocks;
	*ret = t;
	return 0;
}

void rdma_regtable_free(struct rdma_regtable *t)
{
	if (!t)
		return;
	/* Nothing can be done about a failure now: the table goes either way. */
	for (uint32_t i = 0; i < t->max_blocks; i++)
		if (t->slot[i].registered)
			t->ops->dereg(t->ctx, t->slot[i].keys.handle);
	free(t);
}

uint32_t rdma_regtable_max_blocks(const struct rdma_regtable *t)
{
	return t->max_blocks;
}

static int find_present(const struct rdma_regtable *t, uint32_t block, char *reason,
			size_t reason_len)
{
	if (block >= t->max_blocks)
		return reason_fail(reason, reason_len, -EINVAL,
				   "no block %" PRIu32 ": the table has %" PRIu32, block,
				   t->max_blocks);
	if (!t->slot[block].present)
		return reason_fail(reason, reason_len, -ENOENT,
				   "block %" PRIu32 " is not in the region", block);
	return 0;
}

static bool overlaps(const struct slot *s, const uint8_t *addr, uint64_t length)
{
	return s->present && addr < s->addr + s->length && s->addr < addr + length;
}

/* Whether length bytes at addr may join the region: an address, no wrap, no
 * overlap with a block in it. */
static int check_new_block(const struct rdma_regtable *t, const uint8_t *a, uint64_t length,
			   char *reason, size_t reason_len)
{
	if (!a || length == 0 || (uintptr_t)a + length < (uintptr_t)a)
		return reason_fail(reason, reason_len, -EINVAL,
				   "a block needs an address and a length that fits (%p, %" PRIu64
				   " bytes)",
				   (const void *)a, length);
	for (uint32_t i = 0; i < t->max_blocks; i++)
		if (overlaps(&t->slot[i], a, length))
			return reason_fail(reason, reason_len, -EEXIST,
					   "%" PRIu64 " bytes at %p overlap block %" PRIu32, length,
					   (const void *)a, i);
	return 0;
}

static void put_block(struct rdma_regtable *t, uint32_t block, uint8_t *a, uint64_t length)
{
	t->slot[block].addr = a;
	t->slot[block].length = length;
	t->slot[block].present = true;
	t->slot[block].generation = ++t->last_generation;
}

int rdma_regtable_add(struct rdma_regtable *t, void *addr, uint64_t length, uint32_t *ret_block,
		      char *reason, size_t reason_len)
{
	int r = check_new_block(t, addr, length, reason, reason_len);

	if (r < 0)
		return r;
	for (uint32_t i = 0; i < t->max_blocks; i++) {
		if (!t->slot[i].present) {
			put_block(t, i, addr, length);
			*ret_block = i;
			return 0;
		}
	}
	return reason_fail(reason, reason_len, -ENOSPC, "all %" PRIu32 " blocks are in the region",
			   t->max_blocks);
}

int rdma_regtable_add_at(struct rdma_regtable *t, uint32_t block, void *addr, uint64_t length,
			 char *reason, size_t reason_len)
{
	int r;

	if (block >= t->max_blocks)
		return reason_fail(reason, reason_len, -EINVAL,
				   "no block %" PRIu32 ": the table has %" PRIu32, block,
				   t->max_blocks);
	if (t->slot[block].present)
		return reason_fail(reason, reason_len, -EEXIST,
				   "block %" PRIu32 " is in the region", block);
	r = check_new_block(t, addr, length, reason, reason_len);
	if (r < 0)
		return r;
	put_block(t, block, addr, length);
	return 0;
}

int rdma_regtable_remove(struct rdma_regtable *t, uint32_t block, char *reason, size_t reason_len)
{
	int r = find_present(t, block, reason, reason_len);

	if (r < 0)
		return r;
	t->slot[block].present = false;
	t->slot[block].generation = ++t->last_generation;
	return 0;
}

int rdma_regtable_invalidate(struct rdma_regtable *t, uint32_t block, char *reason,
			     size_t reason_len)
{
	int r = find_present(t, block, reason, reason_len);

	if (r < 0)
		return r;
	t->slot[block].generation = ++t->last_generation;
	return 0;
}

static int deregister(struct rdma_regtable *t, uint32_t block, char *reason, size_t reason_len)
{
	struct slot *s = &t->slot[block];
	int r = t->ops->dereg(t->ctx, s->keys.handle);

	if (r < 0)
		return reason_fail(reason, reason_len, r,
				   "deregistering block %" PRIu32 " (generation %" PRIu64 "): %s",
				   block, s->reg_generation, strerror(-r));
	s->registered = false;
	memset(&s->keys, 0, sizeof(s->keys));
	return 0;
}

static void fill_key(const struct rdma_regtable *t, uint32_t block, bool registered_now,
		     struct rdma_block_key *ret)
{
	const struct slot *s = &t->slot[block];

	*ret = (struct rdma_block_key){
		.block = block,
		.generation = s->generation,
		.addr = (uint64_t)(uintptr_t)s->addr,
		.length = s->length,
		.lkey = s->keys.lkey,
		.rkey = s->keys.rkey,
		.registered_now = registered_now,
	};
}

int rdma_regtable_use(struct rdma_regtable *t, uint32_t block, struct rdma_block_key *ret,
		      char *reason, size_t reason_len)
{
	struct slot *s;
	struct rdma_mr_keys keys = { 0 };
	int r = find_present(t, block, reason, reason_len);

	if (r < 0)
		return r;
	s = &t->slot[block];
	if (current(s)) {
		fill_key(t, block, false, ret);
		return 0;
	}
	if (s->registered) {
		r = deregister(t, block, reason, reason_len);
		if (r < 0)
			return r;
	}
	r = t->ops->reg(t->ctx, s->addr, s->length, &keys);
	if (r < 0) {
		t->failed++;
		return reason_fail(reason, reason_len, r,
				   "registering block %" PRIu32 " (%" PRIu64 " bytes at %p): %s",
				   block, s->length, (void *)s->addr, strerror(-r));
	}
	s->registered = true;
	s->keys = keys;
	s->generation = s->reg_generation = ++t->last_generation;
	fill_key(t, block, true, ret);
	return 0;
}

int rdma_regtable_use_range(struct rdma_regtable *t, const void *addr, uint64_t length,
			    struct rdma_block_key *ret, char *reason, size_t reason_len)
{
	const uint8_t *a = addr;

	if (!addr || length == 0)
		return reason_fail(reason, reason_len, -EINVAL,
				   "a range needs an address and a length (%p, %" PRIu64 " bytes)",
				   addr, length);
	for (uint32_t i = 0; i < t->max_blocks; i++) {
		const struct slot *s = &t->slot[i];

		if (!s->present || a < s->addr || a >= s->addr + s->length)
			continue;
		if (length > (uint64_t)(s->addr + s->length - a))
			return reason_fail(reason, reason_len, -ERANGE,
					   "%" PRIu64
					   " bytes at %p run past the end of block %" PRIu32
					   " (%" PRIu64 " bytes at %p)",
					   length, addr, i, s->length, (void *)s->addr);
		return rdma_regtable_use(t, i, ret, reason, reason_len);
	}
	return reason_fail(reason, reason_len, -ENOENT, "%p is in no block of the region", addr);
}

int rdma_regtable_check(const struct rdma_regtable *t, uint32_t block, uint64_t generation,
			char *reason, size_t reason_len)
{
	const struct slot *s;

	if (block >= t->max_blocks)
		return reason_fail(reason, reason_len, -EINVAL,
				   "no block %" PRIu32 ": the table has %" PRIu32, block,
				   t->max_blocks);
	s = &t->slot[block];
	if (!current(s))
		return reason_fail(
			reason, reason_len, -ESTALE,
			"block %" PRIu32 " generation %" PRIu64 " is stale: the block is %s", block,
			generation, s->present ? "not registered now" : "not in the region");
	if (s->generation != generation)
		return reason_fail(reason, reason_len, -ESTALE,
				   "block %" PRIu32 " generation %" PRIu64
				   " is stale: it is at %" PRIu64,
				   block, generation, s->generation);
	return 0;
}

int rdma_regtable_purge(struct rdma_regtable *t, char *reason, size_t reason_len)
{
	int purged = 0, first_error = 0;

	for (uint32_t i = 0; i < t->max_blocks; i++) {
		int r;

		if (!stale(&t->slot[i]))
			continue;
		/* Only the first failure's reason is kept: the one returned. */
		r = deregister(t, i, first_error ? NULL : reason, reason_len);
		if (r < 0 && !first_error)
			first_error = r;
		else if (r == 0)
			purged++;
	}
	return first_error ? first_error : purged;
}

bool rdma_regtable_registered(const struct rdma_regtable *t, uint32_t block)
{
	return block < t->max_blocks && t->slot[block].registered;
}

void rdma_regtable_count(const struct rdma_regtable *t, struct rdma_regtable_counts *ret)
{
	*ret = (struct rdma_regtable_counts){ .failed = t->failed };
	for (uint32_t i = 0; i < t->max_blocks; i++) {
		ret->current += current(&t->slot[i]);
		ret->stale += stale(&t->slot[i]);
	}
}

int rdma_regtable_describe(const struct rdma_regtable *t, uint32_t block,
			   struct rdma_remote_block *ret, char *reason, size_t reason_len)
{
	const struct slot *s;

	if (block >= t->max_blocks)
		return reason_fail(reason, reason_len, -EINVAL,
				   "no block %" PRIu32 ": the table has %" PRIu32, block,
				   t->max_blocks);
	s = &t->slot[block];
	*ret = (struct rdma_remote_block){ .block = block, .generation = s->generation };
	if (current(s)) {
		ret->addr = (uint64_t)(uintptr_t)s->addr;
		ret->length = s->length;
		ret->rkey = s->keys.rkey;
	}
	return 0;
}

/* ---- The partner's table ---- */

int rdma_remote_view_new(uint32_t max_blocks, struct rdma_remote_view **ret, char *reason,
			 size_t reason_len)
{
	struct rdma_remote_view *v;

	if (max_blocks == 0)
		return reason_fail(reason, reason_len, -EINVAL,
				   "a remote view needs at least one block");
	v = calloc(1, sizeof(*v) + (size_t)max_blocks * sizeof(v->block[0]));
	if (!v)
		return reason_fail(reason, reason_len, -ENOMEM, "out of memory");
	v->max_blocks = max_blocks;
	*ret = v;
	return 0;
}

void rdma_remote_view_free(struct rdma_remote_view *v)
{
	free(v);
}

static bool same_block(const struct rdma_remote_block *a, const struct rdma_remote_block *b)
{
	return a->addr == b->addr && a->length == b->length && a->rkey == b->rkey;
}

int rdma_remote_view_update(struct rdma_remote_view *v, const struct rdma_remote_block *b,
			    char *reason, size_t reason_len)
{
	struct rdma_remote_block *held;

	if (b->block >= v->max_blocks)
		return reason_fail(reason, reason_len, -EBADMSG,
				   "the partner names block %" PRIu32 ": the table has %" PRIu32,
				   b->block, v->max_blocks);
	if (b->generation == 0)
		return reason_fail(reason, reason_len, -EBADMSG,
				   "the partner names block %" PRIu32 " without a generation",
				   b->block);
	if (b->length && b->addr + b->length < b->addr)
		return reason_fail(reason, reason_len, -EBADMSG,
				   "the partner's block %" PRIu32 " (%" PRIu64
				   " bytes at 0x%" PRIx64 ") wraps around the address space",
				   b->block, b->length, b->addr);
	held = &v->block[b->block];
	if (b->generation < held->generation)
		return reason_fail(reason, reason_len, -EBADMSG,
				   "the partner's block %" PRIu32 " generation %" PRIu64
				   " is older than generation %" PRIu64 " it sent before",
				   b->block, b->generation, held->generation);
	if (b->generation == held->generation && !same_block(b, held))
		return reason_fail(reason, reason_len, -EBADMSG,
				   "the partner's block %" PRIu32 " generation %" PRIu64
				   " came before with other keys",
				   b->block, b->generation);
	*held = *b;
	return 0;
}

void rdma_remote_view_clear(struct rdma_remote_view *v)
{
	memset(v->block, 0, (size_t)v->max_blocks * sizeof(v->block[0]));
}

int rdma_remote_view_target(const struct rdma_remote_view *v, uint32_t block, uint64_t generation,
			    uint64_t offset, uint64_t length, uint64_t *ret_addr,
			    uint32_t *ret_rkey, char *reason, size_t reason_len)
{
	const struct rdma_remote_block *held;

	if (block >= v->max_blocks || length == 0)
		return reason_fail(reason, reason_len, -EINVAL,
				   "%" PRIu64 " bytes into the partner's block %" PRIu32
				   ": the table has %" PRIu32 " blocks, and a write needs bytes",
				   length, block, v->max_blocks);
	held = &v->block[block];
	if (held->generation != generation)
		return reason_fail(reason, reason_len, -ESTALE,
				   "the partner's block %" PRIu32 " generation %" PRIu64
				   " is stale: the view holds generation %" PRIu64,
				   block, generation, held->generation);
	if (held->length == 0)
		return reason_fail(reason, reason_len, -ENOENT,
				   "the partner's block %" PRIu32 " is not registered", block);
	if (offset >= held->length || length > held->length - offset)
		return reason_fail(reason, reason_len, -ERANGE,
				   "%" PRIu64 " bytes at offset %" PRIu64
				   " run past the end of the "
				   "partner's block %" PRIu32 " (%" PRIu64 " bytes)",
				   length, offset, block, held->length);
	*ret_addr = held->addr + offset;
	*ret_rkey = held->rkey;
	return 0;
}
