/* pagedata/pointer_landings.c, P's side of one-sided pointer writes, over a fake session:
 * a landing taken inside one registration block and held with the lock,
 * adopted as the page's frames (old ones back to the pool), every refusal
 * with its reason and the run given back, and the run given back at an
 * unlock, at the allocation's release and at link down. fake_landed.h
 * fakes the session's landing calls and the vmm's frame calls; the fakes
 * below stand for the rest of the vmm. */
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
#define POOL_FRAMES 16
#define BLOCK_FRAMES 4 /* registration blocks [0,4) [4,8) ... */

#include "fake_landed.h"

static bool holdings_forgotten;

/* ---- the rest of the vmm, as far as pagedata/pointer_landings.c uses it ---- */
const char *vmm_node_id(const struct vmm *v)
{
	return "a";
}

const char *vmm_partner_id(const struct vmm *v)
{
	return "b";
}

void vmm_holdings_forget_landings(struct vmm *v)
{
	holdings_forgotten = true;
}

static struct vmm_alloc *alloc;

static void setup(void)
{
	if (frame_pool_new((uint64_t)POOL_FRAMES * PAGE, PAGE, BLOCK_FRAMES, &pd.pool) < 0)
		die("frame_pool_new");
	alloc = vmm_alloc_new("a-1", "a", "a", "stripe", 4 * BLOCK, BLOCK, NULL, 0);
	if (!alloc)
		die("vmm_alloc_new");
}

/* A WritePage of guid naming l, its crc32c that of the run's bytes now. */
static Ftvm__Partner__WritePage landed_write_of(const char *guid, uint64_t page,
						Ftvm__Partner__Landing *l)
{
	Ftvm__Partner__WritePage m = FTVM__PARTNER__WRITE_PAGE__INIT;

	m.guid = (char *)guid;
	m.page = page;
	m.landed = l;
	m.crc32c = crc32c(0, frame_pool_addr(pd.pool, l->frame), BLOCK);
	return m;
}

static Ftvm__Partner__WritePage landed_write(uint64_t page, Ftvm__Partner__Landing *l)
{
	return landed_write_of("a-1", page, l);
}

static void test_open(void)
{
	Ftvm__Partner__Landing l;
	uint64_t free0 = frame_pool_free_count(pd.pool), held;

	/* Frames 0-2 taken: the first run of 2 free within a block starts at 4,
	 * not 3. */
	if (frame_pool_take(pd.pool, 3, &held) < 0)
		die("frame_pool_take");
	CHECK(pagedata_landing_open(&pd, alloc, 0, "b/1/1", &l), "no landing with frames free");
	CHECK_INT("landing frame", 4, l.frame);
	CHECK_INT("landing frames", 2, l.frames);
	CHECK_INT("landing generation", 1, l.generation);
	CHECK_INT("frames free with it held", free0 - 5, frame_pool_free_count(pd.pool));
	/* The lock goes without an adoption: only its owner's unlock gives it back. */
	pagedata_landing_close(&pd, "a-1", 0, "b/1/2");
	CHECK_INT("another owner's unlock", free0 - 5, frame_pool_free_count(pd.pool));
	pagedata_landing_close(&pd, "a-1", 0, "b/1/1");
	CHECK_INT("frames after the unlock", free0 - 3, frame_pool_free_count(pd.pool));
	frame_pool_give(pd.pool, held, 3);

	fake_one_sided = false;
	CHECK(!pagedata_landing_open(&pd, alloc, 0, "b/1/1", &l),
	      "a landing on a link not one-sided");
	fake_one_sided = true;
	fake_open_error = -EIO;
	CHECK(!pagedata_landing_open(&pd, alloc, 0, "b/1/1", &l), "a landing the session refused");
	fake_open_error = 0;
	CHECK_INT("frames after refusals", free0, frame_pool_free_count(pd.pool));
}

static void test_adopt(void)
{
	Ftvm__Partner__Landing l;
	Ftvm__Partner__WritePage m;
	uint64_t old, free0;
	char reason[256];

	/* Page 1 resident at its old frames. */
	if (frame_pool_take(pd.pool, 2, &old) < 0)
		die("frame_pool_take");
	vmm_page_attach(pd.vmm, &alloc->page[1], old);
	free0 = frame_pool_free_count(pd.pool);
	CHECK(pagedata_landing_open(&pd, alloc, 1, "b/1/3", &l), "no landing");
	memset(frame_pool_addr(pd.pool, l.frame), 0x5a, BLOCK); /* what the WRITE placed */
	m = landed_write(1, &l);
	CHECK_INT("adopt", 0, pagedata_landing_adopt(&pd, alloc, 1, &m, reason, sizeof(reason)));
	CHECK_INT("the page's frames", l.frame, alloc->page[1].frame);
	CHECK_INT("old frames back, the run the page's", free0, frame_pool_free_count(pd.pool));
	CHECK_INT("adopted", 1, pd.counted.landings_adopted);
	/* Adopted: the unlock behind it gives nothing back. */
	pagedata_landing_close(&pd, "a-1", 1, "b/1/3");
	CHECK_INT("frames after the unlock", free0, frame_pool_free_count(pd.pool));

	/* A page not resident takes the run as its frames. */
	CHECK(pagedata_landing_open(&pd, alloc, 2, "b/1/4", &l), "no landing");
	m = landed_write(2, &l);
	CHECK_INT("adopt, not resident", 0,
		  pagedata_landing_adopt(&pd, alloc, 2, &m, reason, sizeof(reason)));
	CHECK(alloc->page[2].resident && alloc->page[2].frame == l.frame,
	      "page 2: resident %d at frame %llu, want the run at %llu", alloc->page[2].resident,
	      (unsigned long long)alloc->page[2].frame, (unsigned long long)l.frame);
}

/* Each refusal names its reason and gives the run back. */
static void refused(const char *what, Ftvm__Partner__WritePage *m, int want, const char *says)
{
	uint64_t refused0 = pd.counted.landings_refused;
	char reason[256] = "";
	int r = pagedata_landing_adopt(&pd, alloc, 3, m, reason, sizeof(reason));

	CHECK_INT(what, want, r);
	CHECK(strstr(reason, says) != NULL, "%s: reason '%s' does not say '%s'", what, reason,
	      says);
	CHECK(strstr(reason, "a-1 page 3") != NULL, "%s: reason '%s' does not name the page", what,
	      reason);
	CHECK_INT("refusals counted", refused0 + 1, pd.counted.landings_refused);
}

static void test_refusals(void)
{
	uint64_t free0 = frame_pool_free_count(pd.pool);
	Ftvm__Partner__Landing l, other;
	Ftvm__Partner__WritePage m;
	uint8_t byte = 1;

	CHECK(pagedata_landing_open(&pd, alloc, 3, "b/1/5", &l), "no landing");
	m = landed_write(3, &l);
	m.crc32c ^= 1;
	refused("bad crc32c", &m, -EBADMSG, "CRC-32C");
	CHECK_INT("frames after a bad crc32c", free0, frame_pool_free_count(pd.pool));

	CHECK(pagedata_landing_open(&pd, alloc, 3, "b/1/5", &l), "no landing");
	other = l;
	other.frame += 8;
	m = landed_write(3, &other);
	refused("another landing", &m, -EINVAL, "not the landing held");
	CHECK_INT("frames after another landing", free0, frame_pool_free_count(pd.pool));
	refused("none held", &m, -EINVAL, "holds no landing");

	/* Named at another generation than it was given at. */
	CHECK(pagedata_landing_open(&pd, alloc, 3, "b/1/5", &l), "no landing");
	other = l;
	other.generation++;
	m = landed_write(3, &other);
	refused("another generation", &m, -ESTALE, "is stale: it was given at generation 1");
	/* Given at a generation its block's registration has left since. */
	CHECK(pagedata_landing_open(&pd, alloc, 3, "b/1/5", &l), "no landing");
	fake_generation = 2;
	m = landed_write(3, &l);
	refused("stale generation", &m, -ESTALE, "is stale: block");
	fake_generation = 1;
	CHECK_INT("frames after a stale one", free0, frame_pool_free_count(pd.pool));

	CHECK(pagedata_landing_open(&pd, alloc, 3, "b/1/5", &l), "no landing");
	m = landed_write(3, &l);
	m.data.data = &byte;
	m.data.len = 1;
	refused("data as well", &m, -EINVAL, "data as well");

	CHECK(pagedata_landing_open(&pd, alloc, 3, "b/1/5", &l), "no landing");
	m = landed_write(3, &l);
	fake_one_sided = false;
	refused("not one-sided", &m, -EINVAL, "does not take page data one-sided");
	fake_one_sided = true;
	CHECK_INT("frames after the refusals", free0, frame_pool_free_count(pd.pool));
}

static void test_give_back(void)
{
	uint64_t free0 = frame_pool_free_count(pd.pool);
	Ftvm__Partner__Landing l;

	CHECK(pagedata_landing_open(&pd, alloc, 0, "b/1/6", &l), "no landing");
	CHECK(pagedata_landing_open(&pd, alloc, 3, "b/1/7", &l), "no landing");
	pagedata_landings_close_alloc(&pd, "a-1");
	CHECK_INT("frames after the allocation went", free0, frame_pool_free_count(pd.pool));

	CHECK(pagedata_landing_open(&pd, alloc, 0, "b/1/8", &l), "no landing");
	/* A second lock on the page (the owner's view won over our mirror's):
	 * the first run is void. */
	CHECK(pagedata_landing_open(&pd, alloc, 0, "b/1/9", &l), "no landing");
	CHECK_INT("one run for the page", free0 - 2, frame_pool_free_count(pd.pool));
	pagedata_landing_close(&pd, "a-1", 0, NULL); /* its block came inline */
	CHECK_INT("frames after an inline block", free0, frame_pool_free_count(pd.pool));

	CHECK(pagedata_landing_open(&pd, alloc, 0, "b/1/10", &l), "no landing");
	CHECK(pagedata_landing_open(&pd, alloc, 1, "b/1/11", &l), "no landing");
	pagedata_landings_drop(&pd);
	CHECK_INT("frames after link down", free0, frame_pool_free_count(pd.pool));
	CHECK(holdings_forgotten, "link down: the pointers' landings were not forgotten");
}

static void test_no_room(void)
{
	uint64_t free0 = frame_pool_free_count(pd.pool), taken[POOL_FRAMES];
	size_t n = 0;
	Ftvm__Partner__Landing l;

	/* Free only the last frame of each block: no run of two anywhere. */
	while (n < POOL_FRAMES && frame_pool_take(pd.pool, 1, &taken[n]) == 0)
		n++;
	for (size_t i = 0; i < n; i++)
		if (taken[i] % BLOCK_FRAMES == 3) {
			frame_pool_give(pd.pool, taken[i], 1);
			taken[i] = UINT64_MAX;
		}
	CHECK(!pagedata_landing_open(&pd, alloc, 0, "b/1/12", &l), "a landing without a free run");
	for (size_t i = 0; i < n; i++)
		if (taken[i] != UINT64_MAX)
			frame_pool_give(pd.pool, taken[i], 1);
	CHECK_INT("frames after", free0, frame_pool_free_count(pd.pool));
}

static void test_block_frames(void)
{
	struct ftvm_config c = { .memory_size = 1ull << 30,
				 .page_size = PAGE,
				 .pool_block_size = 64ull << 20 };

	CHECK_INT("64 MiB of 4 KiB frames", 16384, pagedata_landing_block_frames(&c));
	c.pool_block_size = 1ull << 20;
	CHECK_INT("pool_block_size 1M", 256, pagedata_landing_block_frames(&c));
	c.pool_block_size = 64ull << 20;
	c.n_policies = 2;
	c.policies[0].block_size = 3 * PAGE;
	c.policies[1].block_size = 4 * PAGE;
	CHECK_INT("a multiple of 3 and 4 frames", 16392, pagedata_landing_block_frames(&c));
	c.memory_size = 64 * PAGE;
	CHECK_INT("a small pool is one block", 64, pagedata_landing_block_frames(&c));
}

/* A volume's page (node/vmm/VMM.md, "Volumes"), in a pool whose last 8
 * frames are the storage cache: its landing is taken there, and a run in
 * server memory (a grant's, handed out before anyone knew the page) is
 * copied into cache frames when adopted, the run given back. */
static void test_volume(void)
{
	struct vmm_alloc *vol = vmm_alloc_new("a-2", "a", "a", "", 2 * BLOCK, BLOCK, NULL, 0);
	Ftvm__Partner__Landing l;
	Ftvm__Partner__WritePage m;
	uint64_t run, server0;
	char reason[256];

	frame_pool_free(pd.pool);
	if (!vol || vmm_alloc_set_volume(vol, "vol") < 0 ||
	    frame_pool_new((uint64_t)POOL_FRAMES * PAGE, PAGE, BLOCK_FRAMES, &pd.pool) < 0 ||
	    frame_pool_set_cache(pd.pool, 8) < 0)
		die("the volume's setup");
	CHECK(pagedata_landing_open(&pd, vol, 0, "b/1/9", &l), "no landing for a volume's page");
	CHECK_INT("its landing lies in the storage cache", FRAME_CACHE,
		  frame_pool_partition_of(pd.pool, l.frame));
	memset(frame_pool_addr(pd.pool, l.frame), 0x11, BLOCK);
	m = landed_write_of("a-2", 0, &l);
	CHECK_INT("adopt", 0, pagedata_landing_adopt(&pd, vol, 0, &m, reason, sizeof(reason)));
	CHECK_INT("page 0's frames, the run's", l.frame, vol->page[0].frame);

	server0 = frame_pool_free_count(pd.pool);
	if (frame_pool_take(pd.pool, 2, &run) < 0)
		die("a server run");
	memset(frame_pool_addr(pd.pool, run), 0x22, BLOCK);
	pagedata_landed_adopt(&pd, vol, 1, run);
	CHECK(vol->page[1].resident &&
		      frame_pool_partition_of(pd.pool, vol->page[1].frame) == FRAME_CACHE,
	      "page 1 adopted a server run in place: frame %llu",
	      (unsigned long long)vol->page[1].frame);
	CHECK_INT("page 1's bytes", 0x22, *(uint8_t *)frame_pool_addr(pd.pool, vol->page[1].frame));
	CHECK_INT("the server run back", server0, frame_pool_free_count(pd.pool));
	vmm_alloc_free(vol);
}

int main(void)
{
	setup();
	test_open();
	test_adopt();
	/* Pages 1 and 2 hold frames from here on. */
	test_refusals();
	test_give_back();
	test_no_room();
	test_block_frames();
	test_volume();
	vmm_alloc_free(alloc);
	frame_pool_free(pd.pool);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("vmm_landing: all %d checks passed\n", checks);
	return 0;
}
