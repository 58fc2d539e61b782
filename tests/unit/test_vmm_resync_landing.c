/* pagedata/resync_landings.c, the resync receiver's landing runs, over a fake
 * session: runs taken in order within registration blocks and never more
 * than half the free frames, held until adopted (old frames back, the page
 * no longer stale), given back when a block is dropped as older, refused
 * (each reason, the run back), and all given back at ResyncEnd or link down;
 * and the version rule that decides which of a mirrored change and a
 * snapshot block is kept. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "crc32c.h"
#include "vmm_core.h"

#include "pagedata_state.h"

#define PAGE 4096u
#define BLOCK (2 * PAGE) /* two frames a page */
#define POOL_FRAMES 32
#define BLOCK_FRAMES 8 /* registration blocks [0,8) [8,16) ... */

#include "fake_landed.h"

/* ---- the rest of the vmm, as far as these files use it ---- */
const char *vmm_node_id(const struct vmm *v)
{
	return "b";
}

static struct vmm_alloc *alloc;

static void setup(void)
{
	if (frame_pool_new((uint64_t)POOL_FRAMES * PAGE, PAGE, BLOCK_FRAMES, &pd.pool) < 0)
		die("frame_pool_new");
	alloc = vmm_alloc_new("a-1", "a", "a", "stripe", 8 * BLOCK, BLOCK, NULL, 0);
	if (!alloc)
		die("vmm_alloc_new");
}

static uint64_t free_frames(void)
{
	return frame_pool_free_count(pd.pool);
}

/* Runs for n blocks of this test's block size: how many came. */
static size_t open_runs(size_t n, Ftvm__Partner__Landing *ret)
{
	uint32_t frames[16];

	for (size_t i = 0; i < n; i++)
		frames[i] = BLOCK / PAGE;
	return pagedata_resync_landings_open(&pd, frames, n, ret);
}

/* What the survivor's WRITE placed in l, and its state at the snapshot. */
static uint32_t place(const Ftvm__Partner__Landing *l, uint8_t byte)
{
	memset(frame_pool_addr(pd.pool, l->frame), byte, BLOCK);
	return crc32c(0, frame_pool_addr(pd.pool, l->frame), BLOCK);
}

static void test_open(void)
{
	Ftvm__Partner__Landing l[16];
	uint64_t free0 = free_frames();
	size_t n;

	/* Half of 32 free frames: 8 runs of 2 at most, each in one block. */
	n = open_runs(12, l);
	CHECK_INT("runs for 12 blocks with 32 frames free", 8, n);
	CHECK_INT("frames free with them held", free0 - 16, free_frames());
	for (size_t i = 0; i < n; i++) {
		CHECK_INT("run frames", 2, l[i].frames);
		CHECK_INT("run generation", 1, l[i].generation);
		CHECK(l[i].frame / BLOCK_FRAMES == (l[i].frame + 1) / BLOCK_FRAMES,
		      "run %zu at frame %llu crosses a block", i, (unsigned long long)l[i].frame);
		/* First fit: neighbouring runs, which the survivor's WRITEs coalesce. */
		if (i)
			CHECK_INT("run next to the one before", l[i - 1].frame + 2, l[i].frame);
	}
	pagedata_resync_landings_drop(&pd);
	CHECK_INT("frames after ResyncEnd or link down", free0, free_frames());

	fake_one_sided = false;
	CHECK_INT("runs on a link not one-sided", 0, open_runs(2, l));
	fake_one_sided = true;
	CHECK_INT("frames after", free0, free_frames());
}

static void test_adopt(void)
{
	Ftvm__Partner__Landing l[2];
	uint64_t old, free0;
	char reason[512];

	/* Page 1 resident at its old frames; page 2 not resident, stale. */
	if (frame_pool_take(pd.pool, 2, &old) < 0)
		die("frame_pool_take");
	vmm_page_attach(pd.vmm, &alloc->page[1], old);
	alloc->page[2].stale = true;
	free0 = free_frames();
	CHECK_INT("two runs", 2, open_runs(2, l));
	CHECK_INT("adopt into a resident page", 0,
		  pagedata_resync_landing_adopt(&pd, alloc, 1, &l[0], place(&l[0], 0x11), reason,
						sizeof(reason)));
	CHECK_INT("page 1's frames", l[0].frame, alloc->page[1].frame);
	CHECK_INT("adopt into a stale page", 0,
		  pagedata_resync_landing_adopt(&pd, alloc, 2, &l[1], place(&l[1], 0x22), reason,
						sizeof(reason)));
	CHECK(alloc->page[2].resident && alloc->page[2].frame == l[1].frame &&
		      !alloc->page[2].stale,
	      "page 2: resident %d at %llu stale %d, want the run at %llu, not stale",
	      alloc->page[2].resident, (unsigned long long)alloc->page[2].frame,
	      alloc->page[2].stale, (unsigned long long)l[1].frame);
	/* The old frames back, the runs the pages' own. */
	CHECK_INT("frames after adopting", free0 - 2, free_frames());
	CHECK_INT("adopted", 2, pd.counted.landings_adopted);
	/* Adopted: a run serves once. */
	CHECK_INT("the same run again", -EINVAL,
		  pagedata_resync_landing_adopt(&pd, alloc, 1, &l[0], place(&l[0], 0x11), reason,
						sizeof(reason)));
	pagedata_resync_landings_drop(&pd);
	CHECK_INT("frames after link down", free0 - 2, free_frames());
}

static void test_order(void)
{
	Ftvm__Partner__PageState st = FTVM__PARTNER__PAGE_STATE__INIT;
	Ftvm__Partner__Landing l;
	uint64_t free0 = free_frames();
	char reason[512] = "";

	alloc->page[3].version = 7;
	alloc->page[3].crc32c = 0xabcd;
	st.version = 7;
	st.crc32c = 0xabcd;
	CHECK_INT("the snapshot's version", 0,
		  pagedata_resync_page_order(alloc, 3, &st, reason, sizeof(reason)));
	/* A change mirrored after the snapshot came first: version 8 here. */
	alloc->page[3].version = 8;
	CHECK_INT("older than the page", 1,
		  pagedata_resync_page_order(alloc, 3, &st, reason, sizeof(reason)));
	CHECK_INT("a run for it", 1, open_runs(1, &l));
	pagedata_resync_landing_close(&pd, &l); /* dropped: its run back */
	CHECK_INT("frames after the drop", free0, free_frames());

	st.version = 9;
	CHECK_INT("ahead of the page", -EINVAL,
		  pagedata_resync_page_order(alloc, 3, &st, reason, sizeof(reason)));
	CHECK(strstr(reason, "ahead of its page state") != NULL, "reason '%s'", reason);
	st.version = 8;
	st.crc32c = 0x1234;
	CHECK_INT("same version, another CRC-32C", -EINVAL,
		  pagedata_resync_page_order(alloc, 3, &st, reason, sizeof(reason)));
	CHECK(strstr(reason, "CRC-32C") != NULL, "reason '%s'", reason);
}

/* Each refusal names its reason, counts and gives the run back. */
static void refused(const char *what, const Ftvm__Partner__Landing *named, uint32_t crc, int want,
		    const char *says)
{
	uint64_t refused0 = pd.counted.landings_refused;
	char reason[512] = "";
	int r = pagedata_resync_landing_adopt(&pd, alloc, 4, named, crc, reason, sizeof(reason));

	CHECK_INT(what, want, r);
	CHECK(strstr(reason, says) != NULL, "%s: reason '%s' does not say '%s'", what, reason,
	      says);
	CHECK(strstr(reason, "a-1 page 4") != NULL, "%s: reason '%s' does not name the page", what,
	      reason);
	CHECK_INT("refusals counted", refused0 + 1, pd.counted.landings_refused);
	CHECK(!alloc->page[4].resident, "%s: the page took the run", what);
}

static void test_refusals(void)
{
	uint64_t free0 = free_frames();
	Ftvm__Partner__Landing l, other;
	uint32_t crc;

	CHECK_INT("a run", 1, open_runs(1, &l));
	crc = place(&l, 0x33);
	refused("bad crc32c", &l, crc ^ 1, -EBADMSG, "CRC-32C");
	CHECK_INT("frames after a bad crc32c", free0, free_frames());
	refused("not held", &l, crc, -EINVAL, "holds no resync landing");

	CHECK_INT("a run", 1, open_runs(1, &l));
	other = l;
	other.generation++;
	refused("another generation", &other, place(&l, 0x33), -ESTALE,
		"stale: it was given at generation 1");
	CHECK_INT("a run", 1, open_runs(1, &l));
	fake_generation = 2; /* its block registered again since */
	refused("stale registration", &l, place(&l, 0x33), -ESTALE, "is stale: block");
	fake_generation = 1;

	/* A run of another size than the page's block. */
	{
		uint32_t one = 1;

		CHECK_INT("a run of one frame", 1, pagedata_resync_landings_open(&pd, &one, 1, &l));
		refused("another size", &l, 0, -EINVAL, "the run is 1 frames");
	}
	CHECK_INT("frames after the refusals", free0, free_frames());
}

int main(void)
{
	setup();
	test_open();
	test_adopt();
	/* Pages 1 and 2 hold frames from here on. */
	test_order();
	test_refusals();
	vmm_alloc_free(alloc);
	frame_pool_free(pd.pool);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("vmm_resync_landing: all %d checks passed\n", checks);
	return 0;
}
