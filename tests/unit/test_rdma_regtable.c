/* The registration table (seed 000) over a recording fake of ibv_reg_mr and
 * ibv_dereg_mr: registration on first use, a new generation on every
 * (re)registration, stale generations refused by the local table and by the
 * partner's view of it, purge, shrink and slot reuse, and failures of the
 * registration calls. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "rdma_regtable.h"

#define BLOCK (64u * 1024)
#define MAX_BLOCKS 8
#define MAX_MRS 4096

/* A memory region as the fake registered it. */
struct fake_mr {
	void *addr;
	uint64_t length;
	bool live;
};

struct fake {
	int regs, deregs;
	int fail_reg, fail_dereg; /* the next call returns this, once */
	int n_mr;
	struct fake_mr mr[MAX_MRS];
};

static int fake_reg(void *ctx, void *addr, uint64_t length, struct rdma_mr_keys *ret)
{
	struct fake *f = ctx;
	int r = f->fail_reg;

	f->regs++;
	if (r) {
		f->fail_reg = 0;
		return r;
	}
	if (f->n_mr == MAX_MRS) {
		fprintf(stderr, "the fake ran out of memory regions\n");
		exit(99);
	}
	f->mr[f->n_mr] = (struct fake_mr){ .addr = addr, .length = length, .live = true };
	ret->handle = &f->mr[f->n_mr];
	ret->lkey = 0x1000u + (uint32_t)f->n_mr;
	ret->rkey = 0x2000u + (uint32_t)f->n_mr;
	f->n_mr++;
	return 0;
}

static int fake_dereg(void *ctx, void *handle)
{
	struct fake *f = ctx;
	struct fake_mr *mr = handle;
	int r = f->fail_dereg;

	f->deregs++;
	if (r) {
		f->fail_dereg = 0;
		return r;
	}
	CHECK(mr >= f->mr && mr < f->mr + f->n_mr && mr->live,
	      "dereg of a handle that is not a live registration");
	mr->live = false;
	return 0;
}

static const struct rdma_reg_ops fake_ops = { .reg = fake_reg, .dereg = fake_dereg };

static int live_mrs(const struct fake *f)
{
	int n = 0;

	for (int i = 0; i < f->n_mr; i++)
		n += f->mr[i].live;
	return n;
}

static uint8_t *region; /* MAX_BLOCKS + 1 blocks of memory to add */
static char reason[256];

static struct rdma_regtable *table_new(struct fake *f)
{
	struct rdma_regtable *t;

	memset(f, 0, sizeof(*f));
	if (rdma_regtable_new(MAX_BLOCKS, &fake_ops, f, &t, reason, sizeof(reason)) < 0) {
		fprintf(stderr, "ERROR rdma_regtable_new: %s\n", reason);
		exit(99);
	}
	return t;
}

/* Adds blocks 0..n-1 of region, checking they get slots 0..n-1. */
static void grow(struct rdma_regtable *t, unsigned n)
{
	for (unsigned i = 0; i < n; i++) {
		uint32_t block = 99;
		int r = rdma_regtable_add(t, region + (size_t)i * BLOCK, BLOCK, &block, reason,
					  sizeof(reason));

		CHECK(r == 0 && block == i, "add block %u: %d, slot %u (%s)", i, r, block, reason);
	}
}

static struct rdma_block_key use(struct rdma_regtable *t, uint32_t block)
{
	struct rdma_block_key key = { 0 };
	int r = rdma_regtable_use(t, block, &key, reason, sizeof(reason));

	CHECK(r == 0, "use block %u: %d (%s)", block, r, reason);
	return key;
}

#define CHECK_ERR(what, expected, got, reason_has)                                                \
	do {                                                                                      \
		int r_ = (got);                                                                   \
		CHECK(r_ == (expected), "%s: expected %s (%d), got %d (%s)", (what), #expected,   \
		      (expected), r_, reason);                                                    \
		CHECK(strstr(reason, (reason_has)) != NULL,                                       \
		      "%s: the reason \"%s\" does not say \"%s\"", (what), reason, (reason_has)); \
		reason[0] = 0;                                                                    \
	} while (0)

static void test_first_use(void)
{
	struct fake f;
	struct rdma_regtable *t = table_new(&f);
	struct rdma_block_key key, again;
	struct rdma_remote_block rb;

	grow(t, 4);
	CHECK_INT("registrations before any use", 0, f.regs);
	key = use(t, 1);
	CHECK_INT("registrations after the first use", 1, f.regs);
	CHECK(key.registered_now, "the first use does not say it registered");
	CHECK_INT("key's block", 1, key.block);
	CHECK_INT("key's address", (uintptr_t)(region + BLOCK), key.addr);
	CHECK_INT("key's length", BLOCK, key.length);
	CHECK_INT("key's lkey", 0x1000, key.lkey);
	CHECK_INT("key's rkey", 0x2000, key.rkey);
	CHECK(f.mr[0].addr == region + BLOCK && f.mr[0].length == BLOCK,
	      "registered %p + %llu, not block 1", f.mr[0].addr,
	      (unsigned long long)f.mr[0].length);
	again = use(t, 1);
	CHECK_INT("registrations after a second use", 1, f.regs);
	CHECK(!again.registered_now, "a second use says it registered");
	CHECK_INT("generation of a second use", key.generation, again.generation);
	CHECK_INT("check of the current generation", 0,
		  rdma_regtable_check(t, 1, key.generation, reason, sizeof(reason)));

	/* By address: a range inside block 2 registers block 2. */
	key = (struct rdma_block_key){ 0 };
	CHECK_INT("use_range inside block 2", 0,
		  rdma_regtable_use_range(t, region + 2 * BLOCK + 100, 200, &key, reason,
					  sizeof(reason)));
	CHECK_INT("use_range's block", 2, key.block);
	CHECK(key.registered_now, "use_range's first use does not say it registered");
	CHECK_INT("registrations after use_range", 2, f.regs);

	/* What the partner is told: nothing of an unused block. */
	CHECK_INT("describe block 0", 0, rdma_regtable_describe(t, 0, &rb, reason, sizeof(reason)));
	CHECK_INT("an unused block's length as described", 0, rb.length);
	CHECK_INT("describe block 1", 0, rdma_regtable_describe(t, 1, &rb, reason, sizeof(reason)));
	CHECK(rb.block == 1 && rb.generation == again.generation &&
		      rb.addr == (uintptr_t)(region + BLOCK) && rb.length == BLOCK &&
		      rb.rkey == 0x2000,
	      "block 1 described as %u gen %llu, %llu bytes at 0x%llx, rkey 0x%x", rb.block,
	      (unsigned long long)rb.generation, (unsigned long long)rb.length,
	      (unsigned long long)rb.addr, rb.rkey);
	rdma_regtable_free(t);
	CHECK_INT("live registrations after free", 0, live_mrs(&f));
}

static void test_generations(void)
{
	struct fake f;
	struct rdma_regtable *t = table_new(&f);
	struct rdma_block_key first, second;
	struct rdma_remote_block rb;

	grow(t, 2);
	first = use(t, 0);
	CHECK_INT("invalidate", 0, rdma_regtable_invalidate(t, 0, reason, sizeof(reason)));
	CHECK_ERR("check of an invalidated registration", -ESTALE,
		  rdma_regtable_check(t, 0, first.generation, reason, sizeof(reason)),
		  "not registered now");
	CHECK_INT("describe an invalidated block", 0,
		  rdma_regtable_describe(t, 0, &rb, reason, sizeof(reason)));
	CHECK(rb.length == 0 && rb.generation > first.generation,
	      "an invalidated block is described with %llu bytes at generation %llu (was %llu)",
	      (unsigned long long)rb.length, (unsigned long long)rb.generation,
	      (unsigned long long)first.generation);

	/* The next use purges the stale registration and registers anew. */
	second = use(t, 0);
	CHECK(second.registered_now, "re-registration does not say it registered");
	CHECK_INT("deregistrations at re-registration", 1, f.deregs);
	CHECK_INT("registrations at re-registration", 2, f.regs);
	CHECK(second.generation > rb.generation,
	      "generation %llu after re-registration, not above %llu",
	      (unsigned long long)second.generation, (unsigned long long)rb.generation);
	CHECK(second.rkey != first.rkey, "re-registration kept rkey 0x%x", first.rkey);
	CHECK_INT("check of the new generation", 0,
		  rdma_regtable_check(t, 0, second.generation, reason, sizeof(reason)));
	CHECK_ERR("check of the old generation", -ESTALE,
		  rdma_regtable_check(t, 0, first.generation, reason, sizeof(reason)),
		  "is stale: it is at");
	CHECK_ERR("check of a generation not given yet", -ESTALE,
		  rdma_regtable_check(t, 0, second.generation + 1, reason, sizeof(reason)),
		  "is stale");
	CHECK_ERR("check of a block outside the table", -EINVAL,
		  rdma_regtable_check(t, MAX_BLOCKS, 1, reason, sizeof(reason)), "the table has 8");
	CHECK_ERR("invalidate a block not in the region", -ENOENT,
		  rdma_regtable_invalidate(t, 5, reason, sizeof(reason)), "not in the region");

	/* Generations come from one counter: another block's are others. */
	first = use(t, 1);
	CHECK(first.generation != second.generation, "blocks 0 and 1 share generation %llu",
	      (unsigned long long)first.generation);
	CHECK_ERR("block 1 checked with block 0's generation", -ESTALE,
		  rdma_regtable_check(t, 1, second.generation, reason, sizeof(reason)), "is stale");
	rdma_regtable_free(t);
	CHECK_INT("live registrations after free", 0, live_mrs(&f));
}

static void test_shrink_and_purge(void)
{
	struct fake f;
	struct rdma_regtable *t = table_new(&f);
	struct rdma_block_key key[4];
	struct rdma_block_key k;

	grow(t, 4);
	for (uint32_t i = 0; i < 4; i++)
		key[i] = use(t, i);
	CHECK_INT("nothing to purge yet", 0, rdma_regtable_purge(t, reason, sizeof(reason)));
	CHECK_INT("remove block 3", 0, rdma_regtable_remove(t, 3, reason, sizeof(reason)));
	CHECK_INT("remove block 2", 0, rdma_regtable_remove(t, 2, reason, sizeof(reason)));
	/* Removed is not yet deregistered (seed 000: the two are decoupled). */
	CHECK_INT("deregistrations before the purge", 0, f.deregs);
	CHECK_ERR("check of a removed block", -ESTALE,
		  rdma_regtable_check(t, 3, key[3].generation, reason, sizeof(reason)),
		  "not in the region");
	CHECK_ERR("use of a removed block", -ENOENT,
		  rdma_regtable_use(t, 3, &k, reason, sizeof(reason)),
		  "block 3 is not in the region");
	CHECK_ERR("use_range in a removed block", -ENOENT,
		  rdma_regtable_use_range(t, region + 2 * BLOCK, 10, &k, reason, sizeof(reason)),
		  "is in no block");
	CHECK_ERR("remove a removed block", -ENOENT,
		  rdma_regtable_remove(t, 3, reason, sizeof(reason)), "not in the region");
	CHECK_INT("purge", 2, rdma_regtable_purge(t, reason, sizeof(reason)));
	CHECK_INT("deregistrations after the purge", 2, f.deregs);
	CHECK(!f.mr[2].live && !f.mr[3].live && f.mr[0].live && f.mr[1].live,
	      "the purge took the wrong registrations");
	CHECK_INT("a second purge", 0, rdma_regtable_purge(t, reason, sizeof(reason)));
	CHECK_INT("check of a block kept", 0,
		  rdma_regtable_check(t, 1, key[1].generation, reason, sizeof(reason)));
	rdma_regtable_free(t);
	CHECK_INT("live registrations after free", 0, live_mrs(&f));
}

static void test_slot_reuse(void)
{
	struct fake f;
	struct rdma_regtable *t = table_new(&f);
	struct rdma_block_key old, now;
	uint32_t block = 99;

	grow(t, 3);
	old = use(t, 1);
	CHECK_INT("remove block 1", 0, rdma_regtable_remove(t, 1, reason, sizeof(reason)));
	/* The region grows again elsewhere: the lowest free slot, 1, with its
	 * stale registration still in it. */
	CHECK_INT("add", 0,
		  rdma_regtable_add(t, region + 5 * BLOCK, BLOCK / 2, &block, reason,
				    sizeof(reason)));
	CHECK_INT("slot of the new block", 1, block);
	CHECK_ERR("check of the old block's generation", -ESTALE,
		  rdma_regtable_check(t, 1, old.generation, reason, sizeof(reason)),
		  "not registered now");
	now = use(t, 1);
	CHECK_INT("the stale registration went at the new block's first use", 1, f.deregs);
	CHECK(!f.mr[0].live, "the old block's registration is still live");
	CHECK(now.addr == (uintptr_t)(region + 5 * BLOCK) && now.length == BLOCK / 2,
	      "slot 1 now registers 0x%llx + %llu", (unsigned long long)now.addr,
	      (unsigned long long)now.length);
	CHECK(now.generation > old.generation, "slot 1's generation went from %llu to %llu",
	      (unsigned long long)old.generation, (unsigned long long)now.generation);
	CHECK_INT("nothing stale left", 0, rdma_regtable_purge(t, reason, sizeof(reason)));
	rdma_regtable_free(t);
	CHECK_INT("live registrations after free", 0, live_mrs(&f));
}

static void counts_are(struct rdma_regtable *t, uint32_t cur, uint32_t st, const char *when)
{
	struct rdma_regtable_counts n;
	uint32_t c, s;

	rdma_regtable_count(t, &n);
	c = n.current;
	s = n.stale;
	CHECK(c == cur && s == st, "%s: %u current and %u stale registrations, expected %u and %u",
	      when, c, s, cur, st);
}

/* The frame pool's cycle: a block leaves (stale, withdrawn to the partner at
 * a new generation), is purged, and comes back under its own index at a
 * newer generation, registered again at its first use. */
static void test_add_at(void)
{
	struct fake f;
	struct rdma_regtable *t = table_new(&f);
	struct rdma_block_key old, now;
	struct rdma_remote_block told;

	grow(t, 4);
	use(t, 0);
	old = use(t, 2);
	counts_are(t, 2, 0, "two used");
	CHECK_INT("remove block 2", 0, rdma_regtable_remove(t, 2, reason, sizeof(reason)));
	counts_are(t, 1, 1, "block 2 removed");
	CHECK_INT("describe block 2", 0,
		  rdma_regtable_describe(t, 2, &told, reason, sizeof(reason)));
	CHECK(told.length == 0 && told.generation > old.generation,
	      "block 2 is told withdrawn (length %llu) at a newer generation (%llu > %llu)",
	      (unsigned long long)told.length, (unsigned long long)told.generation,
	      (unsigned long long)old.generation);
	CHECK_INT("purge", 1, rdma_regtable_purge(t, reason, sizeof(reason)));
	counts_are(t, 1, 0, "purged");
	CHECK_ERR("add_at a slot in the region", -EEXIST,
		  rdma_regtable_add_at(t, 1, region + 2 * BLOCK, BLOCK, reason, sizeof(reason)),
		  "block 1 is in the region");
	CHECK_ERR("add_at over another block", -EEXIST,
		  rdma_regtable_add_at(t, 2, region + 3 * BLOCK, BLOCK, reason, sizeof(reason)),
		  "overlap block 3");
	CHECK_ERR("add_at outside the table", -EINVAL,
		  rdma_regtable_add_at(t, MAX_BLOCKS, region, BLOCK, reason, sizeof(reason)),
		  "no block");
	CHECK_INT("add_at block 2", 0,
		  rdma_regtable_add_at(t, 2, region + 2 * BLOCK, BLOCK, reason, sizeof(reason)));
	counts_are(t, 1, 0, "back, not registered yet");
	CHECK_ERR("the old generation", -ESTALE,
		  rdma_regtable_check(t, 2, old.generation, reason, sizeof(reason)),
		  "not registered now");
	now = use(t, 2);
	CHECK(now.registered_now && now.generation > told.generation && now.block == 2,
	      "block 2 registered again at generation %llu (withdrawn at %llu)",
	      (unsigned long long)now.generation, (unsigned long long)told.generation);
	counts_are(t, 2, 0, "used again");
	rdma_regtable_free(t);
	CHECK_INT("live registrations after free", 0, live_mrs(&f));
}

static void test_bad_input(void)
{
	struct fake f;
	struct rdma_regtable *t = table_new(&f), *none;
	struct rdma_reg_ops half = { .reg = fake_reg };
	struct rdma_block_key k;
	uint32_t block;

	CHECK_ERR("a table of no blocks", -EINVAL,
		  rdma_regtable_new(0, &fake_ops, &f, &none, reason, sizeof(reason)),
		  "at least one block");
	CHECK_ERR("a table without dereg", -EINVAL,
		  rdma_regtable_new(4, &half, &f, &none, reason, sizeof(reason)),
		  "both registration calls");
	CHECK_ERR("a table without ops", -EINVAL,
		  rdma_regtable_new(4, NULL, &f, &none, reason, sizeof(reason)),
		  "both registration calls");
	grow(t, 2);
	CHECK_ERR("add a block of no bytes", -EINVAL,
		  rdma_regtable_add(t, region + 4 * BLOCK, 0, &block, reason, sizeof(reason)),
		  "0 bytes");
	CHECK_ERR("add a block without an address", -EINVAL,
		  rdma_regtable_add(t, NULL, BLOCK, &block, reason, sizeof(reason)),
		  "needs an address");
	CHECK_ERR("add a block overlapping block 1", -EEXIST,
		  rdma_regtable_add(t, region + BLOCK + BLOCK / 2, BLOCK, &block, reason,
				    sizeof(reason)),
		  "overlap block 1");
	CHECK_ERR("use a block outside the table", -EINVAL,
		  rdma_regtable_use(t, MAX_BLOCKS, &k, reason, sizeof(reason)),
		  "no block 8: the table has 8");
	CHECK_ERR("use a range outside the region", -ENOENT,
		  rdma_regtable_use_range(t, region + 6 * BLOCK, 1, &k, reason, sizeof(reason)),
		  "is in no block");
	CHECK_ERR("use a range past its block's end", -ERANGE,
		  rdma_regtable_use_range(t, region + BLOCK - 10, 20, &k, reason, sizeof(reason)),
		  "run past the end of block 0");
	CHECK_ERR("use a range of no bytes", -EINVAL,
		  rdma_regtable_use_range(t, region, 0, &k, reason, sizeof(reason)),
		  "needs an address and a length");
	CHECK_ERR("describe a block outside the table", -EINVAL,
		  rdma_regtable_describe(t, 100, &(struct rdma_remote_block){ 0 }, reason,
					 sizeof(reason)),
		  "no block 100");
	for (unsigned i = 2; i < MAX_BLOCKS; i++)
		CHECK_INT("fill the table", 0,
			  rdma_regtable_add(t, region + (size_t)i * BLOCK, BLOCK, &block, reason,
					    sizeof(reason)));
	CHECK_ERR("add to a full table", -ENOSPC,
		  rdma_regtable_add(t, region + MAX_BLOCKS * BLOCK, BLOCK, &block, reason,
				    sizeof(reason)),
		  "all 8 blocks");
	CHECK_INT("no registration made by any of it", 0, f.regs);
	/* reason may be NULL: the errors are the same. */
	CHECK_INT("use a block outside the table, no reason", -EINVAL,
		  rdma_regtable_use(t, MAX_BLOCKS, &k, NULL, 0));
	rdma_regtable_free(t);
	rdma_regtable_free(NULL);
}

static void test_registration_failures(void)
{
	struct fake f;
	struct rdma_regtable *t = table_new(&f);
	struct rdma_regtable_counts n;
	struct rdma_remote_block rb;
	struct rdma_block_key k;

	grow(t, 3);
	f.fail_reg = -ENOMEM;
	CHECK_ERR("use when registration fails", -ENOMEM,
		  rdma_regtable_use(t, 0, &k, reason, sizeof(reason)), "registering block 0");
	rdma_regtable_describe(t, 0, &rb, reason, sizeof(reason));
	CHECK_INT("a block whose registration failed is described with", 0, rb.length);
	rdma_regtable_count(t, &n);
	CHECK_INT("refused registrations counted", 1, n.failed);
	k = use(t, 0);
	CHECK(k.registered_now, "the retry does not say it registered");
	rdma_regtable_count(t, &n);
	CHECK_INT("refused registrations after a retry that worked", 1, n.failed);

	/* A purge whose deregistration fails keeps the registration stale. */
	use(t, 1);
	use(t, 2);
	rdma_regtable_remove(t, 1, reason, sizeof(reason));
	rdma_regtable_remove(t, 2, reason, sizeof(reason));
	f.fail_dereg = -EBUSY;
	CHECK_ERR("purge when a deregistration fails", -EBUSY,
		  rdma_regtable_purge(t, reason, sizeof(reason)), "deregistering block 1");
	CHECK_INT("live registrations after the failed purge", 2, live_mrs(&f));
	CHECK_INT("the purge after it", 1, rdma_regtable_purge(t, reason, sizeof(reason)));
	CHECK_INT("live registrations after it", 1, live_mrs(&f));

	/* A use that must first purge its slot's stale registration and
	 * cannot. */
	rdma_regtable_invalidate(t, 0, reason, sizeof(reason));
	f.fail_dereg = -EBUSY;
	CHECK_ERR("use when the stale registration cannot go", -EBUSY,
		  rdma_regtable_use(t, 0, &k, reason, sizeof(reason)), "deregistering block 0");
	CHECK_INT("registrations after it", 4, f.regs);
	k = use(t, 0);
	CHECK(k.registered_now, "the retry does not say it registered");
	CHECK_INT("live registrations at the end", 1, live_mrs(&f));
	rdma_regtable_free(t);
	CHECK_INT("live registrations after free", 0, live_mrs(&f));
}

/* The partner's table as this side sees it: what the handshake and the
 * updates said, and never an address for a generation it does not hold. */
static void test_remote_view(void)
{
	struct fake f;
	struct rdma_regtable *partner = table_new(&f);
	struct rdma_remote_view *view;
	struct rdma_block_key key[3];
	struct rdma_remote_block rb, withdrawn;
	uint64_t addr = 0xdead;
	uint32_t rkey = 0xbeef;

	CHECK_ERR("a view of no blocks", -EINVAL,
		  rdma_remote_view_new(0, &view, reason, sizeof(reason)), "at least one block");
	if (rdma_remote_view_new(MAX_BLOCKS, &view, reason, sizeof(reason)) < 0) {
		fprintf(stderr, "ERROR rdma_remote_view_new: %s\n", reason);
		exit(99);
	}
	grow(partner, 3);
	/* The handshake: every block as the partner describes it. */
	for (uint32_t i = 0; i < 3; i++) {
		key[i] = use(partner, i);
		rdma_regtable_describe(partner, i, &rb, reason, sizeof(reason));
		CHECK_INT("handshake update", 0,
			  rdma_remote_view_update(view, &rb, reason, sizeof(reason)));
	}
	CHECK_INT("target in block 1", 0,
		  rdma_remote_view_target(view, 1, key[1].generation, 4096, 4096, &addr, &rkey,
					  reason, sizeof(reason)));
	CHECK_INT("target's address", (uintptr_t)(region + BLOCK + 4096), addr);
	CHECK_INT("target's rkey", key[1].rkey, rkey);

	/* The partner registers block 1 again and says so: the old generation
	 * gets no address, the new one does. */
	rdma_regtable_invalidate(partner, 1, reason, sizeof(reason));
	rdma_regtable_describe(partner, 1, &withdrawn, reason, sizeof(reason));
	CHECK_INT("update: withdrawn", 0,
		  rdma_remote_view_update(view, &withdrawn, reason, sizeof(reason)));
	addr = 0xdead;
	rkey = 0xbeef;
	CHECK_ERR("target with the generation withdrawn", -ESTALE,
		  rdma_remote_view_target(view, 1, key[1].generation, 0, 1, &addr, &rkey, reason,
					  sizeof(reason)),
		  "is stale: the view holds generation");
	CHECK(addr == 0xdead && rkey == 0xbeef, "a stale target wrote 0x%llx rkey 0x%x",
	      (unsigned long long)addr, rkey);
	CHECK_ERR("target at the withdrawal's generation", -ENOENT,
		  rdma_remote_view_target(view, 1, withdrawn.generation, 0, 1, &addr, &rkey, reason,
					  sizeof(reason)),
		  "is not registered");
	key[1] = use(partner, 1);
	rdma_regtable_describe(partner, 1, &rb, reason, sizeof(reason));
	CHECK_INT("update: registered again", 0,
		  rdma_remote_view_update(view, &rb, reason, sizeof(reason)));
	CHECK_INT("target with the new generation", 0,
		  rdma_remote_view_target(view, 1, key[1].generation, 0, BLOCK, &addr, &rkey,
					  reason, sizeof(reason)));
	CHECK_INT("new rkey", key[1].rkey, rkey);
	CHECK_INT("the same update again", 0,
		  rdma_remote_view_update(view, &rb, reason, sizeof(reason)));

	/* The partner's region shrinks: block 2 goes. */
	rdma_regtable_remove(partner, 2, reason, sizeof(reason));
	rdma_regtable_describe(partner, 2, &rb, reason, sizeof(reason));
	CHECK_INT("update: removed", 0, rdma_remote_view_update(view, &rb, reason, sizeof(reason)));
	CHECK_ERR("target in a removed block", -ESTALE,
		  rdma_remote_view_target(view, 2, key[2].generation, 0, 1, &addr, &rkey, reason,
					  sizeof(reason)),
		  "is stale");

	/* Bounds. */
	CHECK_ERR("target past the block's end", -ERANGE,
		  rdma_remote_view_target(view, 0, key[0].generation, BLOCK - 100, 101, &addr,
					  &rkey, reason, sizeof(reason)),
		  "run past the end");
	CHECK_ERR("target at the block's end", -ERANGE,
		  rdma_remote_view_target(view, 0, key[0].generation, BLOCK, 1, &addr, &rkey,
					  reason, sizeof(reason)),
		  "run past the end");
	CHECK_ERR("target of no bytes", -EINVAL,
		  rdma_remote_view_target(view, 0, key[0].generation, 0, 0, &addr, &rkey, reason,
					  sizeof(reason)),
		  "a write needs bytes");
	CHECK_ERR("target outside the table", -EINVAL,
		  rdma_remote_view_target(view, MAX_BLOCKS, 1, 0, 1, &addr, &rkey, reason,
					  sizeof(reason)),
		  "the table has 8 blocks");
	CHECK_ERR("target in a block never told of", -ESTALE,
		  rdma_remote_view_target(view, 5, 3, 0, 1, &addr, &rkey, reason, sizeof(reason)),
		  "the view holds generation 0");

	/* What the wire may bring that cannot be. */
	rb = (struct rdma_remote_block){
		.block = MAX_BLOCKS, .generation = 99, .addr = 4096, .length = 4096, .rkey = 1
	};
	CHECK_ERR("update outside the table", -EBADMSG,
		  rdma_remote_view_update(view, &rb, reason, sizeof(reason)), "names block 8");
	rb.block = 0;
	rb.generation = 0;
	CHECK_ERR("update without a generation", -EBADMSG,
		  rdma_remote_view_update(view, &rb, reason, sizeof(reason)),
		  "without a generation");
	rb.generation = key[0].generation - 1;
	CHECK_ERR("update older than the view", -EBADMSG,
		  rdma_remote_view_update(view, &rb, reason, sizeof(reason)), "is older than");
	rdma_regtable_describe(partner, 0, &rb, reason, sizeof(reason));
	rb.rkey ^= 1;
	CHECK_ERR("update of a generation held, other keys", -EBADMSG,
		  rdma_remote_view_update(view, &rb, reason, sizeof(reason)), "with other keys");
	rb.generation++;
	rb.addr = UINT64_MAX - 10;
	CHECK_ERR("update wrapping around", -EBADMSG,
		  rdma_remote_view_update(view, &rb, reason, sizeof(reason)), "wraps around");
	CHECK_INT("block 0 still as the handshake said", 0,
		  rdma_remote_view_target(view, 0, key[0].generation, 0, 1, &addr, &rkey, reason,
					  sizeof(reason)));

	/* The connection goes: nothing holds. */
	rdma_remote_view_clear(view);
	CHECK_ERR("target after clear", -ESTALE,
		  rdma_remote_view_target(view, 0, key[0].generation, 0, 1, &addr, &rkey, reason,
					  sizeof(reason)),
		  "is stale");
	rdma_remote_view_free(view);
	rdma_remote_view_free(NULL);
	rdma_regtable_free(partner);
	CHECK_INT("live registrations after free", 0, live_mrs(&f));
}

/* Random grow, shrink, invalidate, use and purge against a model: every
 * generation ever handed out for a slot but its current one is stale, each
 * slot holds at most one live registration, and a purge leaves exactly the
 * current ones. */
static void test_random(void)
{
	struct fake f;
	struct rdma_regtable *t = table_new(&f);
	static uint64_t issued[MAX_BLOCKS][512];
	unsigned n_issued[MAX_BLOCKS] = { 0 };
	uint64_t current[MAX_BLOCKS] = { 0 }; /* 0: none */
	bool present[MAX_BLOCKS] = { false };

	for (int step = 0; step < 3000 && !failures; step++) {
		uint32_t b = rng() % MAX_BLOCKS, got;
		struct rdma_block_key k;
		int r, current_n = 0;

		switch (rng() % 5) {
		case 0: /* grow */
			r = rdma_regtable_add(t, region + (size_t)b * BLOCK, BLOCK, &got, reason,
					      sizeof(reason));
			if (present[b]) {
				CHECK(r == -EEXIST, "add over block %u: %d", b, r);
				break;
			}
			CHECK(r == 0, "add: %d (%s)", r, reason);
			/* the lowest free slot, which need not be b: move the
			 * model's entry for the address into slot got */
			if (r == 0 && got != b) {
				CHECK(!present[got], "add gave slot %u, which is in use", got);
				r = rdma_regtable_remove(t, got, reason, sizeof(reason));
				CHECK(r == 0, "remove the block just added: %d", r);
				current[got] = 0;
				break;
			}
			present[b] = true;
			current[b] = 0;
			break;
		case 1: /* shrink */
			r = rdma_regtable_remove(t, b, reason, sizeof(reason));
			CHECK(r == (present[b] ? 0 : -ENOENT), "remove block %u: %d", b, r);
			present[b] = false;
			current[b] = 0;
			break;
		case 2:
			r = rdma_regtable_invalidate(t, b, reason, sizeof(reason));
			CHECK(r == (present[b] ? 0 : -ENOENT), "invalidate block %u: %d", b, r);
			current[b] = 0;
			break;
		case 3:
			r = rdma_regtable_use(t, b, &k, reason, sizeof(reason));
			CHECK(r == (present[b] ? 0 : -ENOENT), "use block %u: %d", b, r);
			if (r < 0)
				break;
			CHECK(k.registered_now == (current[b] == 0),
			      "use of block %u: registered_now %d, the model has %llu", b,
			      k.registered_now, (unsigned long long)current[b]);
			if (k.registered_now && n_issued[b] < 512)
				issued[b][n_issued[b]++] = k.generation;
			current[b] = k.generation;
			break;
		case 4:
			r = rdma_regtable_purge(t, reason, sizeof(reason));
			CHECK(r >= 0, "purge: %d", r);
			for (uint32_t i = 0; i < MAX_BLOCKS; i++)
				current_n += current[i] != 0;
			CHECK_INT("live registrations after a purge", current_n, live_mrs(&f));
			break;
		}
		for (uint32_t i = 0; i < MAX_BLOCKS; i++)
			for (unsigned j = 0; j < n_issued[i]; j++) {
				int want = issued[i][j] == current[i] ? 0 : -ESTALE;

				r = rdma_regtable_check(t, i, issued[i][j], NULL, 0);
				if (r != want)
					FAIL("step %d: block %u generation %llu checks %d, not %d",
					     step, i, (unsigned long long)issued[i][j], r, want);
			}
		CHECK(live_mrs(&f) <= MAX_BLOCKS, "%d live registrations for %d slots",
		      live_mrs(&f), MAX_BLOCKS);
	}
	rdma_regtable_free(t);
	CHECK_INT("live registrations after free", 0, live_mrs(&f));
}

int main(void)
{
	rng_seed(0x5eed0000u);
	region = xcalloc((size_t)(MAX_BLOCKS + 1) * BLOCK);
	test_first_use();
	test_generations();
	test_shrink_and_purge();
	test_slot_reuse();
	test_add_at();
	test_bad_input();
	test_registration_failures();
	test_remote_view();
	test_random();
	free(region);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("rdma_regtable: all %d checks passed\n", checks);
	return 0;
}
