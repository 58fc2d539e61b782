/* The frame pool in registration blocks: first fit in the blocks in use, runs
 * that never cross a block, growth (the lowest block not in use comes in when
 * no run is free) before -ENOSPC, and shrinking with hysteresis (a wholly
 * free block leaves only when the others keep a block's worth free), its
 * memory given back to the OS and zeroes when it comes back (with the memfd
 * sealed against any change of size, which clients that map it cannot
 * undo); the storage cache's frames at the pool's end, which no take gets
 * (node/vmm/MEDIA.md, "The memory partition table"). */
#define _GNU_SOURCE /* F_GET_SEALS */
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "check.h"
#include "frame_pool.h"

#define PAGE 4096u

/* What the block callback was told, in order: +b in, -b out. */
static int told[32];
static int n_told;

static void on_block(uint32_t block, bool in, void *arg)
{
	(void)arg;
	if (n_told < 32)
		told[n_told++] = in ? (int)block + 1 : -((int)block + 1);
}

static struct frame_pool *pool(uint64_t frames, uint64_t block_frames)
{
	struct frame_pool *p;

	if (frame_pool_new(frames * PAGE, PAGE, block_frames, &p) < 0)
		die("frame_pool_new");
	n_told = 0;
	frame_pool_set_block_fn(p, on_block, NULL);
	return p;
}

static uint32_t in_use(const struct frame_pool *p)
{
	struct frame_pool_stats st;

	frame_pool_get_stats(p, &st);
	return st.blocks_in_use;
}

static void test_take(void)
{
	struct frame_pool *p = pool(8, 0);
	uint64_t a = 99, b = 99;

	CHECK_INT("one block when none is asked for", 1, in_use(p));
	CHECK_INT("take 3", 0, frame_pool_take(p, 3, &a));
	CHECK_INT("first run", 0, a);
	CHECK_INT("take 5", 0, frame_pool_take(p, 5, &b));
	CHECK_INT("second run", 3, b);
	CHECK_INT("free after both", 0, frame_pool_free_count(p));
	CHECK_INT("take 1 of none", -ENOSPC, frame_pool_take(p, 1, &a));
	frame_pool_give(p, 0, 3);
	CHECK_INT("free after a give", 3, frame_pool_free_count(p));
	CHECK_INT("take 0", -EINVAL, frame_pool_take(p, 0, &a));
	CHECK_INT("no block ever came or went", 0, n_told);
	frame_pool_free(p);
}

/* Blocks of 4 frames: [0,4) [4,8) [8,12). */
static void test_grow(void)
{
	struct frame_pool *p = pool(12, 4);
	struct frame_pool_stats st;
	uint64_t f = 99, one;

	CHECK_INT("block 0 in use at the start", 1, in_use(p));
	CHECK_INT("every frame counts as free", 12, frame_pool_free_count(p));
	CHECK_INT("take 2", 0, frame_pool_take(p, 2, &one));
	/* 2 and 3 free in block 0; a run of 3 grows the pool instead of
	 * crossing into block 1. */
	CHECK_INT("take 3", 0, frame_pool_take(p, 3, &f));
	CHECK_INT("the run starts the new block", 4, f);
	CHECK_INT("block 1 came in", 2, in_use(p));
	CHECK_INT("told of it", 1, n_told);
	CHECK_INT("told block 1 in", 2, told[0]);
	CHECK_INT("take 5, longer than a block", -EINVAL, frame_pool_take(p, 5, &f));
	CHECK_INT("take 2 from block 0's rest", 0, frame_pool_take(p, 2, &f));
	CHECK_INT("first fit in the blocks in use", 2, f);
	CHECK_INT("take 1: block 1's last", 0, frame_pool_take(p, 1, &f));
	CHECK_INT("frame 7", 7, f);
	CHECK_INT("take 4: block 2 comes in", 0, frame_pool_take(p, 4, &f));
	CHECK_INT("frame 8", 8, f);
	CHECK_INT("take 1 of none", -ENOSPC, frame_pool_take(p, 1, &f));
	frame_pool_get_stats(p, &st);
	CHECK_INT("blocks", 3, st.blocks);
	CHECK_INT("all in use", 3, st.blocks_in_use);
	CHECK_INT("grown", 2, st.grown);
	CHECK_INT("shrunk", 0, st.shrunk);
	frame_pool_free(p);
}

static uint64_t allocated_bytes(const struct frame_pool *p)
{
	struct stat st;

	if (fstat(frame_pool_fd(p), &st) < 0)
		die("fstat");
	return (uint64_t)st.st_blocks * 512;
}

/* Blocks of 4 in a pool of 16: fill blocks 0-2, then free them. */
static void test_shrink(void)
{
	struct frame_pool *p = pool(16, 4);
	struct frame_pool_stats st;
	uint32_t b = 99;
	uint64_t f[12], g;

	for (int i = 0; i < 12; i++)
		if (frame_pool_take(p, 1, &f[i]) < 0)
			die("frame_pool_take");
	CHECK_INT("three blocks in use", 3, in_use(p));
	memset(frame_pool_addr(p, 8), 0x5a, 4 * PAGE); /* block 2's memory */
	for (int i = 8; i < 12; i++)
		frame_pool_give(p, f[i], 1);
	/* Block 2 is wholly free, but nothing else is: keep it. */
	CHECK_INT("no shrink while the rest is full", 0, frame_pool_shrink(p, &b));
	frame_pool_give(p, f[4], 1);
	frame_pool_give(p, f[5], 1);
	frame_pool_give(p, f[6], 1);
	CHECK_INT("no shrink with 3 frames free elsewhere", 0, frame_pool_shrink(p, &b));
	frame_pool_give(p, f[7], 1);
	/* Blocks 1 and 2 are wholly free: the highest goes, block 1 stays
	 * (it would leave block 0 with nothing free). */
	n_told = 0;
	uint64_t before = allocated_bytes(p);
	CHECK_INT("shrink", 1, frame_pool_shrink(p, &b));
	CHECK_INT("the highest free block", 2, b);
	CHECK_INT("told block 2 out", -3, n_told ? told[0] : 0);
	CHECK(allocated_bytes(p) <= before - 4 * PAGE,
	      "block 2's memory went back: %llu bytes before, %llu after",
	      (unsigned long long)before, (unsigned long long)allocated_bytes(p));
	CHECK_INT("then no more (hysteresis)", 0, frame_pool_shrink(p, &b));
	CHECK_INT("two blocks in use", 2, in_use(p));
	CHECK_INT("free counts the blocks out", 12, frame_pool_free_count(p));
	/* Takes fit in block 1 without growing: no flapping. */
	for (int i = 4; i < 8; i++)
		CHECK_INT("take in block 1", 0, frame_pool_take(p, 1, &f[i]));
	CHECK_INT("still two blocks", 2, in_use(p));
	/* Regrowth: block 2 again, lowest first, its old bytes gone. */
	CHECK_INT("take grows", 0, frame_pool_take(p, 1, &g));
	CHECK_INT("block 2 again", 8, g);
	CHECK_INT("told block 2 in", 3, told[n_told - 1]);
	CHECK_INT("zeroes after the punch", 0, *(uint8_t *)frame_pool_addr(p, 8));
	frame_pool_get_stats(p, &st);
	CHECK_INT("grown", 3, st.grown);
	CHECK_INT("shrunk", 1, st.shrunk);
	frame_pool_free(p);
}

/* A last block shorter than the others, and block 0, never leave wrongly. */
static void test_short_last_block(void)
{
	struct frame_pool *p = pool(10, 4); /* [0,4) [4,8) [8,10) */
	uint32_t b = 99;
	uint64_t f;

	CHECK_INT("take 4", 0, frame_pool_take(p, 4, &f));
	CHECK_INT("take 4 more", 0, frame_pool_take(p, 4, &f));
	CHECK_INT("a run of 3 does not fit the short block", -ENOSPC, frame_pool_take(p, 3, &f));
	CHECK_INT("a run of 2 does", 0, frame_pool_take(p, 2, &f));
	CHECK_INT("at frame 8", 8, f);
	frame_pool_give(p, 8, 2);
	frame_pool_give(p, 0, 4);
	/* Free: block 0 (4) and the short block (2): 4 >= 4 elsewhere. */
	CHECK_INT("the short block goes", 1, frame_pool_shrink(p, &b));
	CHECK_INT("block 2", 2, b);
	frame_pool_give(p, 4, 4);
	CHECK_INT("block 1 goes, block 0 stays", 1, frame_pool_shrink(p, &b));
	CHECK_INT("block 1", 1, b);
	CHECK_INT("block 0 never leaves", 0, frame_pool_shrink(p, &b));
	CHECK(frame_pool_block_in_use(p, 0) && !frame_pool_block_in_use(p, 1),
	      "block 0 in use, block 1 out");
	frame_pool_free(p);
}

/* What a client holding the fd could try: each is refused, the pool keeps
 * its size and its bytes. */
static void test_sealed(void)
{
	struct frame_pool *p = pool(8, 4);
	int fd = frame_pool_fd(p), seals = fcntl(fd, F_GET_SEALS);
	struct stat st;

	CHECK_INT("sealed against grow, shrink and more seals",
		  F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL,
		  seals & (F_SEAL_GROW | F_SEAL_SHRINK | F_SEAL_SEAL));
	memset(frame_pool_addr(p, 7), 0x77, PAGE);
	CHECK_INT("ftruncate to 0", -1, ftruncate(fd, 0));
	CHECK_INT("... EPERM", EPERM, errno);
	CHECK_INT("ftruncate larger", -1, ftruncate(fd, 16 * PAGE));
	CHECK_INT("... EPERM", EPERM, errno);
	CHECK_INT("add a write seal", -1, fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE));
	CHECK_INT("... EPERM", EPERM, errno);
	if (fstat(fd, &st) < 0)
		die("fstat");
	CHECK_INT("size kept", 8 * PAGE, st.st_size);
	CHECK_INT("last frame still readable", 0x77, *(uint8_t *)frame_pool_addr(p, 7));
	frame_pool_free(p);
}

/* 10 frames in blocks of 4, the last 4 the cache's: server memory is
 * [0,6), block 1 straddles the split and block 2 is the cache's alone. */
static void test_cache(void)
{
	struct frame_pool *p = pool(10, 4);
	uint64_t f = 99;

	CHECK_INT("a cache of the whole pool", -EINVAL, frame_pool_set_cache(p, 10));
	CHECK_INT("a cache of 4 frames", 0, frame_pool_set_cache(p, 4));
	CHECK_INT("server frames", 6, frame_pool_server_frames(p));
	CHECK_INT("free", 6, frame_pool_free_count(p));
	CHECK_INT("total, as clients map it", 10, frame_pool_total(p));
	CHECK_INT("a run of 4: block 0", 0, frame_pool_take(p, 4, &f));
	CHECK_INT("... at frame", 0, f);
	CHECK_INT("a run of 3: block 1 has 2 frames of server memory", -ENOSPC,
		  frame_pool_take(p, 3, &f));
	frame_pool_free(p);

	p = pool(10, 4);
	CHECK_INT("a cache of 4 frames", 0, frame_pool_set_cache(p, 4));
	for (int i = 0; i < 6; i++) {
		CHECK_INT("take one", 0, frame_pool_take(p, 1, &f));
		CHECK(f < 6, "frame %llu is the cache's", (unsigned long long)f);
	}
	CHECK_INT("a seventh frame", -ENOSPC, frame_pool_take(p, 1, &f));
	CHECK_INT("free", 0, frame_pool_free_count(p));
	CHECK(!frame_pool_block_in_use(p, 2), "the cache's block came into use");
	CHECK_INT("the split after a take", -EBUSY, frame_pool_set_cache(p, 2));
	frame_pool_free(p);
}

/* The cache's frames are taken from the cache alone, and given back to it. */
static void test_cache_takes(void)
{
	struct frame_pool *p = pool(10, 4);
	uint64_t f = 99, g = 99, h = 99;
	uint32_t b;

	CHECK_INT("a cache of 4 frames", 0, frame_pool_set_cache(p, 4));
	CHECK_INT("cache frames", 4, frame_pool_cache_frames(p));
	CHECK_INT("cache free", 4, frame_pool_cache_free_count(p));
	CHECK_INT("a cache run of 2: block 1's two cache frames", 0,
		  frame_pool_take_from(p, FRAME_CACHE, 2, &f));
	CHECK_INT("... at frame", 6, f);
	CHECK(frame_pool_block_in_use(p, 1), "block 1 came into use");
	CHECK_INT("another cache run of 2: block 2", 0,
		  frame_pool_take_from(p, FRAME_CACHE, 2, &g));
	CHECK_INT("... at frame", 8, g);
	CHECK_INT("the cache is full", -ENOSPC, frame_pool_take_from(p, FRAME_CACHE, 1, &h));
	CHECK_INT("cache free", 0, frame_pool_cache_free_count(p));
	CHECK_INT("server memory untouched", 6, frame_pool_free_count(p));
	frame_pool_give(p, f, 2);
	CHECK_INT("given back to the cache", 2, frame_pool_cache_free_count(p));
	CHECK_INT("... not to server memory", 6, frame_pool_free_count(p));
	for (int i = 0; i < 6; i++)
		CHECK_INT("server takes", 0, frame_pool_take(p, 1, &h));
	CHECK_INT("server memory full though the cache has two", -ENOSPC,
		  frame_pool_take(p, 1, &h));
	for (int i = 0; i < 6; i++)
		frame_pool_give(p, (uint64_t)i, 1);
	frame_pool_give(p, g, 2);
	CHECK_INT("block 2, wholly free with the cache's frames back, leaves", 1,
		  frame_pool_shrink(p, &b));
	CHECK_INT("... block", 2, b);
	frame_pool_free(p);

	p = pool(10, 4);
	CHECK_INT("no cache: a cache take", -ENOSPC, frame_pool_take_from(p, FRAME_CACHE, 1, &f));
	frame_pool_free(p);
}

int main(void)
{
	test_take();
	test_grow();
	test_shrink();
	test_short_last_block();
	test_sealed();
	test_cache();
	test_cache_takes();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("frame_pool: all %d checks passed\n", checks);
	return 0;
}
