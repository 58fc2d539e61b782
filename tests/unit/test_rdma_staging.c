/* Staging slabs over a fake registration: slabs mapped as more writes are
 * in flight and reused when free, registered at first use, trimmed only
 * after a whole trim interval idle, unmapped only once their registration is
 * gone (a failed deregistration keeps the memory and the slot), and every
 * registration deregistered by the end. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "rdma_staging.h"

#define MAX_MRS 64

struct fake {
	int live, regs, fail_dereg;
};

static int fake_reg(void *ctx, void *addr, uint64_t length, struct rdma_mr_keys *ret)
{
	struct fake *f = ctx;

	memset(addr, 0x11, length); /* the memory must be mapped and writable */
	f->live++;
	f->regs++;
	ret->handle = (void *)(uintptr_t)f->regs;
	ret->lkey = 0x100u + (uint32_t)f->regs;
	return 0;
}

static int fake_dereg(void *ctx, void *handle)
{
	struct fake *f = ctx;

	(void)handle;
	if (f->fail_dereg) {
		f->fail_dereg = 0;
		return -EBUSY;
	}
	f->live--;
	return 0;
}

static const struct rdma_reg_ops fake_ops = { .reg = fake_reg, .dereg = fake_dereg };
static char reason[256];

static struct rdma_staging *staging(struct fake *f, uint32_t max)
{
	struct rdma_staging *st;

	memset(f, 0, sizeof(*f));
	if (rdma_staging_new(max, &fake_ops, f, &st, reason, sizeof(reason)) < 0)
		die("rdma_staging_new");
	return st;
}

static struct rdma_staging_stats stats(const struct rdma_staging *st)
{
	struct rdma_staging_stats s;

	rdma_staging_get_stats(st, &s);
	return s;
}

static void test_take_and_reuse(void)
{
	struct fake f;
	struct rdma_staging *st = staging(&f, 2);
	struct rdma_block_key key;
	void *a = NULL, *b = NULL, *c = NULL;

	CHECK_INT("take a", 0, rdma_staging_take(st, 4096, &a, reason, sizeof(reason)));
	CHECK_INT("take b while a is in flight", 0,
		  rdma_staging_take(st, 65536, &b, reason, sizeof(reason)));
	CHECK(a && b && a != b, "two slabs for two writes in flight");
	CHECK_INT("a third while both are taken", -ENOSPC,
		  rdma_staging_take(st, 4096, &c, reason, sizeof(reason)));
	CHECK(strstr(reason, "all 2 staging slabs") != NULL, "the reason: %s", reason);
	CHECK_INT("nothing registered before a use", 0, f.regs);
	CHECK_INT("use b", 0, rdma_staging_use_range(st, b, 65536, &key, reason, sizeof(reason)));
	CHECK(key.registered_now && key.lkey, "b registered at its first use");
	CHECK_INT("use b again", 0,
		  rdma_staging_use_range(st, (uint8_t *)b + 4096, 4096, &key, reason,
					 sizeof(reason)));
	CHECK(!key.registered_now, "b's registration holds");
	CHECK_INT("outside every slab", -ENOENT,
		  rdma_staging_use_range(st, &key, 8, &key, reason, sizeof(reason)));
	CHECK_INT("give b", 0, rdma_staging_give(st, b));
	CHECK_INT("give b twice", -ENOENT, rdma_staging_give(st, b));
	/* A 4K write fits b's 64K slab: no new mapping. */
	CHECK_INT("take c", 0, rdma_staging_take(st, 4096, &c, reason, sizeof(reason)));
	CHECK(c == b, "the free slab is reused");
	CHECK_INT("slabs mapped", 2, stats(st).allocated);
	CHECK_INT("taken", 2, stats(st).taken);
	CHECK_INT("take 0 bytes", -EINVAL, rdma_staging_take(st, 0, &c, reason, sizeof(reason)));
	rdma_staging_free(st);
	CHECK_INT("registrations left after free", 0, f.live);
}

static void test_trim_and_purge(void)
{
	struct fake f;
	struct rdma_staging *st = staging(&f, 2);
	struct rdma_block_key key;
	void *a, *b, *c;

	if (rdma_staging_take(st, 4096, &a, reason, sizeof(reason)) < 0 ||
	    rdma_staging_take(st, 4096, &b, reason, sizeof(reason)) < 0 ||
	    rdma_staging_use_range(st, a, 4096, &key, reason, sizeof(reason)) < 0 ||
	    rdma_staging_use_range(st, b, 4096, &key, reason, sizeof(reason)) < 0)
		die("setup");
	rdma_staging_give(st, a);
	/* a was taken since the last trim: not idle yet. b is still taken. */
	CHECK_INT("first trim", 0, rdma_staging_trim(st));
	CHECK_INT("second trim: a was idle a whole interval", 1, rdma_staging_trim(st));
	CHECK_INT("a leaving, b taken: still two slabs", 2, stats(st).slabs);
	/* The slot of a leaving slab is not reused. */
	CHECK_INT("take while a leaves", -ENOSPC,
		  rdma_staging_take(st, 4096, &c, reason, sizeof(reason)));
	f.fail_dereg = 1;
	CHECK_INT("a purge whose deregistration fails", -EBUSY,
		  rdma_staging_purge(st, reason, sizeof(reason)));
	CHECK_INT("a's memory stays while registered", 0, stats(st).released);
	CHECK_INT("the next purge", 1, rdma_staging_purge(st, reason, sizeof(reason)));
	CHECK_INT("a unmapped", 1, stats(st).released);
	CHECK_INT("one slab left", 1, stats(st).slabs);
	CHECK_INT("one registration left", 1, f.live);
	CHECK_INT("a new slab in a's slot", 0,
		  rdma_staging_take(st, 4096, &c, reason, sizeof(reason)));
	CHECK_INT("use it", 0, rdma_staging_use_range(st, c, 4096, &key, reason, sizeof(reason)));
	CHECK(key.registered_now, "the new slab registered afresh");
	rdma_staging_give(st, b);
	rdma_staging_give(st, c);
	CHECK_INT("b, idle since the last trims, leaves; c was just used", 1,
		  rdma_staging_trim(st));
	CHECK_INT("then c", 1, rdma_staging_trim(st));
	CHECK_INT("purge both", 2, rdma_staging_purge(st, reason, sizeof(reason)));
	CHECK_INT("no slab left", 0, stats(st).slabs);
	CHECK_INT("no registration left", 0, f.live);
	rdma_staging_free(st);
}

/* A slab taken and given back without a WRITE was never registered: it goes
 * at the trim, with no purge to wait for. */
static void test_never_registered(void)
{
	struct fake f;
	struct rdma_staging *st = staging(&f, 1);
	void *a;

	if (rdma_staging_take(st, 4096, &a, reason, sizeof(reason)) < 0)
		die("take");
	rdma_staging_give(st, a);
	rdma_staging_trim(st);
	CHECK_INT("trimmed once idle", 1, rdma_staging_trim(st));
	CHECK_INT("unmapped at once", 1, stats(st).released);
	CHECK_INT("no slab left", 0, stats(st).slabs);
	CHECK_INT("nothing was registered", 0, f.regs);
	rdma_staging_free(st);
}

int main(void)
{
	test_take_and_reuse();
	test_trim_and_purge();
	test_never_registered();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("rdma_staging: all %d checks passed\n", checks);
	return 0;
}
