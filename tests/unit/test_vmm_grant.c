/* pagedata/grants_to_partner.c, P's side of landing grants for whole-page writes, over a fake
 * session: runs granted at link up (two per block size in use, each inside
 * one registration block), a granted run adopted as the page's frames for a
 * resident page and for one being paged in, with a fresh grant in its
 * place; refusals that keep the grant; a revoke whose runs come back with
 * the partner's answer; and link down giving every run back. fake_landed.h
 * and the fakes below stand for the session (replica/session.h) and the rest
 * of the vmm. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <event2/event.h>

#include "check.h"
#include "crc32c.h"
#include "vmm_core.h"

#include "pagedata_state.h"

#define PAGE 4096u
#define BLOCK (2 * PAGE) /* the policy's block: two frames */
#define POOL_FRAMES 1024
#define BLOCK_FRAMES 64 /* registration blocks [0,64) [64,128) ... */

#define SENT_MAX 16

#include "fake_landed.h"

/* ---- the rest of the fake session: the last request sent, kept with its
 * callback ---- */
static int sent_case;
static Ftvm__Partner__Landing sent[SENT_MAX];
static size_t n_sent;
static pending_done_fn sent_done;
static void *sent_arg;
static bool kicked, granted_forgotten;

int vmm_partner_send(struct vmm *v, Envelope *const *envs, size_t n_envs,
		     const struct repl_page_write *writes, size_t n_writes, pending_done_fn done,
		     void *const *args)
{
	Envelope *env = envs[0];
	Ftvm__Partner__Landing **ls = NULL;
	size_t n = 0;

	sent_case = env->message_case;
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_GRANT) {
		ls = env->landing_grant->landings;
		n = env->landing_grant->n_landings;
	} else if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_REVOKE) {
		ls = env->landing_revoke->landings;
		n = env->landing_revoke->n_landings;
	}
	for (n_sent = 0; n_sent < n && n_sent < SENT_MAX; n_sent++)
		sent[n_sent] = *ls[n_sent];
	sent_done = done;
	sent_arg = args[0];
	return 0;
}

const char *codec_status_name(int status)
{
	return "REFUSED";
}

/* ---- the rest of the vmm, as far as pagedata/grants_to_partner.c uses it ---- */
const char *vmm_node_id(const struct vmm *v)
{
	return "a";
}

const char *vmm_partner_id(const struct vmm *v)
{
	return "b";
}

void vmm_paging_kick(struct vmm *v)
{
	kicked = true;
}

void pagedata_granted_forget(struct pagedata *state)
{
	granted_forgotten = true;
}

static struct ftvm_config config = {
	.page_size = PAGE,
	.request_timeout_ms = 1000,
	.n_policies = 2,
	.policies = { { .name = "pair", .block_size = BLOCK },
		      { .name = "page", .block_size = PAGE } },
};
static struct vmm_alloc *alloc;

static void setup(void)
{
	if (frame_pool_new((uint64_t)POOL_FRAMES * PAGE, PAGE, BLOCK_FRAMES, &pd.pool) < 0)
		die("frame_pool_new");
	pd.config = &config;
	pd.base = event_base_new();
	if (!pd.base)
		die("event_base_new");
	alloc = vmm_alloc_new("a-1", "a", "a", "pair", 4 * BLOCK, BLOCK, NULL, 0);
	if (!alloc)
		die("vmm_alloc_new");
}

/* The answer to the last request sent. */
static void answer(int status)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

	cc.status = status;
	sent_done(&cc, sent_arg);
}

/* A granted run of frames frames from the last LandingGrant, or NULL. */
static Ftvm__Partner__Landing *granted(uint32_t frames)
{
	for (size_t i = 0; i < n_sent; i++)
		if (sent[i].frames == frames)
			return &sent[i];
	return NULL;
}

/* A WritePage naming l, its crc32c that of the run's bytes now. */
static Ftvm__Partner__WritePage landed_write(uint64_t page, Ftvm__Partner__Landing *l)
{
	Ftvm__Partner__WritePage m = FTVM__PARTNER__WRITE_PAGE__INIT;

	m.guid = (char *)"a-1";
	m.page = page;
	m.landed = l;
	m.crc32c = crc32c(0, frame_pool_addr(pd.pool, l->frame), BLOCK);
	return m;
}

static void test_offer(uint64_t free0)
{
	fake_one_sided = false;
	pagedata_grants_link_changed(&pd, true);
	CHECK_INT("grants on a link not one-sided", 0, sent_case);
	fake_one_sided = true;

	pagedata_grants_link_changed(&pd, true);
	CHECK_INT("sent at link up", FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_GRANT, sent_case);
	/* Block sizes in use: the policies' (2 frames, 1 frame) and the default
	 * policy's (1 frame, the same): two each. */
	CHECK_INT("runs granted", 4, n_sent);
	CHECK_INT("counted", 4, pd.counted.landings_granted);
	CHECK_INT("frames held for them", free0 - 6, frame_pool_free_count(pd.pool));
	for (size_t i = 0; i < n_sent; i++)
		CHECK(sent[i].frame / BLOCK_FRAMES ==
			      (sent[i].frame + sent[i].frames - 1) / BLOCK_FRAMES,
		      "run at %llu (%u frames) crosses a registration block",
		      (unsigned long long)sent[i].frame, sent[i].frames);
	CHECK(granted(2) && granted(1), "no run of 2 frames or of 1 frame granted");
	answer(FTVM__PARTNER__STATUS__STATUS_OK);
}

static void adopt(const char *what, uint64_t page, Ftvm__Partner__Landing *l)
{
	Ftvm__Partner__Landing fresh, used = *l;
	Ftvm__Partner__WritePage m;
	uint64_t adopted0 = pd.counted.landings_adopted;
	bool has_fresh;
	char reason[256] = "";

	memset(frame_pool_addr(pd.pool, used.frame), 0x5a, BLOCK); /* what the WRITE placed */
	m = landed_write(page, &used);
	CHECK_INT(what, 0,
		  pagedata_grant_adopt(&pd, alloc, page, &m, &fresh, &has_fresh, reason,
				       sizeof(reason)));
	CHECK(alloc->page[page].resident && alloc->page[page].frame == used.frame,
	      "%s: page %llu resident %d at frame %llu, want the run at %llu", what,
	      (unsigned long long)page, alloc->page[page].resident,
	      (unsigned long long)alloc->page[page].frame, (unsigned long long)used.frame);
	CHECK_INT("adopted", adopted0 + 1, pd.counted.landings_adopted);
	CHECK(!pagedata_grant_named(&pd, &used), "%s: the run is still granted", what);
	CHECK(has_fresh, "%s: no fresh grant in the answer", what);
	CHECK_INT("fresh grant frames", 2, fresh.frames);
	CHECK(pagedata_grant_named(&pd, &fresh), "%s: the fresh grant is not held", what);
	*l = fresh; /* the partner's next write goes there */
}

static void test_adopt(uint64_t free0)
{
	Ftvm__Partner__Landing *l = granted(2);
	uint64_t old;

	/* Page 1 resident at its old frames: they go back, the fresh grant
	 * takes as many. */
	if (frame_pool_take(pd.pool, 2, &old) < 0)
		die("frame_pool_take");
	vmm_page_attach(pd.vmm, &alloc->page[1], old);
	adopt("adopt, resident", 1, l);
	CHECK_INT("free frames after adopting over a resident page", free0 - 8,
		  frame_pool_free_count(pd.pool));

	/* Page 2 not resident, its read from the store in flight: the run is
	 * its frames, the read gives its own back when it completes. */
	alloc->page[2].pagein = (struct vmm_pagein *)&old;
	adopt("adopt, being paged in", 2, l);
	CHECK(alloc->page[2].pagein == NULL, "the page-in still names page 2");
	CHECK_INT("free frames after adopting a non-resident page", free0 - 10,
		  frame_pool_free_count(pd.pool));
}

/* Each refusal names its reason and keeps the grant. */
static void refused(const char *what, Ftvm__Partner__WritePage *m, int want, const char *says)
{
	uint64_t refused0 = pd.counted.landings_refused, free0 = frame_pool_free_count(pd.pool);
	Ftvm__Partner__Landing fresh;
	bool has_fresh = true;
	char reason[256] = "";
	int r = pagedata_grant_adopt(&pd, alloc, 3, m, &fresh, &has_fresh, reason, sizeof(reason));

	CHECK_INT(what, want, r);
	CHECK(strstr(reason, says) != NULL, "%s: reason '%s' does not say '%s'", what, reason,
	      says);
	CHECK(strstr(reason, "a-1 page 3") != NULL, "%s: reason '%s' does not name the page", what,
	      reason);
	CHECK(!has_fresh, "%s: a fresh grant with a refusal", what);
	CHECK_INT("refusals counted", refused0 + 1, pd.counted.landings_refused);
	CHECK_INT("frames after a refusal", free0, frame_pool_free_count(pd.pool));
}

static void test_refusals(Ftvm__Partner__Landing *l)
{
	Ftvm__Partner__Landing other;
	Ftvm__Partner__WritePage m;

	m = landed_write(3, l);
	m.crc32c ^= 1;
	refused("bad crc32c", &m, -EBADMSG, "CRC-32C");

	fake_generation = 2;
	m = landed_write(3, l);
	refused("stale generation", &m, -ESTALE, "is stale");
	fake_generation = 1;
	other = *l;
	other.generation++;
	m = landed_write(3, &other);
	refused("another generation", &m, -ESTALE, "stale: it was granted at generation 1");

	m = landed_write(3, granted(1));
	refused("a run of another block size", &m, -EINVAL, "the run is 1 frames");

	other = *l;
	other.frame = POOL_FRAMES - 2;
	m = landed_write(3, &other);
	refused("not granted", &m, -EINVAL, "is not granted");
	CHECK(pagedata_grant_named(&pd, l), "the grant went with a refusal");

	/* Kept: the partner uses it again, and it is adopted. */
	adopt("adopt after refusals", 3, l);
}

static void test_revoke(uint64_t free0)
{
	uint64_t before = frame_pool_free_count(pd.pool);
	size_t held = 4; /* as granted at link up: each adopted run was replaced */
	sent_case = 0;
	kicked = false;
	pagedata_grants_revoke(&pd);
	CHECK_INT("sent inside the caller's work", 0, sent_case);
	event_base_loop(pd.base, EVLOOP_NONBLOCK);
	CHECK_INT("sent when short", FTVM__PARTNER__ENVELOPE__MESSAGE_LANDING_REVOKE, sent_case);
	CHECK_INT("runs revoked", held, n_sent);
	CHECK_INT("frames before the answer", before, frame_pool_free_count(pd.pool));
	sent_case = 0;
	pagedata_grants_revoke(&pd);
	event_base_loop(pd.base, EVLOOP_NONBLOCK);
	CHECK_INT("a second revoke of the same runs", 0, sent_case);
	answer(FTVM__PARTNER__STATUS__STATUS_OK);
	CHECK(pd.grants == NULL, "grants held after the revoke's answer");
	CHECK(kicked, "the paging queue was not told of the frames");
	/* Pages 1, 2 and 3 hold 2 frames each now. */
	CHECK_INT("frames after the revoke", free0 - 6, frame_pool_free_count(pd.pool));
}

static void test_link_down(uint64_t free0)
{
	/* A LandingGrant the partner refused: it took none, they come back. */
	pagedata_grants_link_changed(&pd, true);
	answer(FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH);
	CHECK(pd.grants == NULL, "grants held after the partner refused them");
	CHECK_INT("frames after a refused grant", free0 - 6, frame_pool_free_count(pd.pool));
	/* Unanswered: the partner may have taken them, so they stay held. */
	pagedata_grants_link_changed(&pd, true);
	answer(FTVM__PARTNER__STATUS__STATUS_TIMEOUT);
	CHECK(pd.grants != NULL, "grants given back without an answer");

	pagedata_grants_link_changed(&pd, false);
	pagedata_grants_link_changed(&pd, true);
	CHECK(pd.grants != NULL, "no grants at the next link up");
	pagedata_grants_link_changed(&pd, false);
	CHECK(pd.grants == NULL, "grants held after link down");
	CHECK(granted_forgotten, "link down: the partner's grants to this node were not forgotten");
	CHECK_INT("frames after link down", free0 - 6, frame_pool_free_count(pd.pool));
}

int main(void)
{
	uint64_t free0;

	setup();
	free0 = frame_pool_free_count(pd.pool);
	test_offer(free0);
	test_adopt(free0);
	test_refusals(granted(2));
	test_revoke(free0);
	test_link_down(free0);
	for (uint64_t i = 1; i <= 3; i++)
		frame_pool_give(pd.pool, alloc->page[i].frame, 2);
	CHECK_INT("frames at the end", free0, frame_pool_free_count(pd.pool));
	vmm_alloc_free(alloc);
	frame_pool_free(pd.pool);
	event_base_free(pd.base);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("vmm_grant: all %d checks passed\n", checks);
	return 0;
}
