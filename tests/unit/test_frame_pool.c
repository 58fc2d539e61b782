/* frame_pool_take() and frame_pool_take_within(): first fit, runs that never
 * wrap around the end nor cross a block boundary, what is free afterwards,
 * and the refusals. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "check.h"
#include "frame_pool.h"

#define PAGE 4096u

static struct frame_pool *pool(uint64_t frames)
{
	struct frame_pool *p;

	if (frame_pool_new(frames * PAGE, PAGE, &p) < 0)
		die("frame_pool_new");
	return p;
}

static void test_take(void)
{
	struct frame_pool *p = pool(8);
	uint64_t a = 99, b = 99;

	CHECK_INT("take 3", 0, frame_pool_take(p, 3, &a));
	CHECK_INT("first run", 0, a);
	CHECK_INT("take 5", 0, frame_pool_take(p, 5, &b));
	CHECK_INT("second run", 3, b);
	CHECK_INT("free after both", 0, frame_pool_free_count(p));
	CHECK_INT("take 1 of none", -ENOSPC, frame_pool_take(p, 1, &a));
	frame_pool_give(p, 0, 3);
	CHECK_INT("free after a give", 3, frame_pool_free_count(p));
	CHECK_INT("take 0", -ENOSPC, frame_pool_take(p, 0, &a));
	frame_pool_free(p);
}

/* Blocks of 4 frames: [0,4) [4,8) [8,12). A run of 3 from the hint must not
 * straddle a boundary even where 3 free frames are contiguous across it. */
static void test_within(void)
{
	struct frame_pool *p = pool(12);
	uint64_t f = 99, one;

	/* Frames 0 and 1 taken: 2..7 free and contiguous, but 2..4 crosses. */
	CHECK_INT("take 2", 0, frame_pool_take(p, 2, &one));
	CHECK_INT("take 3 within 4", 0, frame_pool_take_within(p, 3, 4, &f));
	CHECK_INT("run starts at the next block", 4, f);
	CHECK(f / 4 == (f + 2) / 4, "run %llu..%llu crosses a block", (unsigned long long)f,
	      (unsigned long long)f + 2);
	CHECK_INT("take 4 within 4", 0, frame_pool_take_within(p, 4, 4, &f));
	CHECK_INT("a whole block", 8, f);
	/* Free now: 2, 3 and 7, no two in one block but 2-3. */
	CHECK_INT("take 2 within 4", 0, frame_pool_take_within(p, 2, 4, &f));
	CHECK_INT("the pair left in block 0", 2, f);
	CHECK_INT("take 2 within 4, none left", -ENOSPC, frame_pool_take_within(p, 2, 4, &f));
	CHECK_INT("free frames", 1, frame_pool_free_count(p));
	CHECK_INT("take 1 within 4", 0, frame_pool_take_within(p, 1, 4, &f));
	CHECK_INT("the last frame", 7, f);
	frame_pool_free(p);
}

static void test_within_refusals(void)
{
	struct frame_pool *p = pool(8);
	uint64_t f = 99;

	CHECK_INT("run longer than a block", -EINVAL, frame_pool_take_within(p, 5, 4, &f));
	CHECK_INT("no boundary", -EINVAL, frame_pool_take_within(p, 1, 0, &f));
	CHECK_INT("nothing taken by a refusal", 8, frame_pool_free_count(p));
	CHECK_INT("untouched output", 99, f);
	/* A boundary larger than the pool: the pool's end is the only limit. */
	CHECK_INT("boundary past the end", 0, frame_pool_take_within(p, 8, 64, &f));
	CHECK_INT("the whole pool", 0, f);
	frame_pool_free(p);
}

int main(void)
{
	test_take();
	test_within();
	test_within_refusals();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("frame_pool: all %d checks passed\n", checks);
	return 0;
}
