/* pagedata/grants_from_partner.c, O's side of landing grants for whole-page writes, over a
 * fake session: runs granted are taken by block size and in flight until
 * settled; a write the partner did not apply frees its run again, one it
 * applied (or may have) spends it; a LandingRevoke drops the free runs and
 * its answer waits until none of its runs is in flight; link down forgets
 * everything. A LandingGrant is refused on a link that is not one-sided; an
 * answer's grants are added and its landing handed back. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "vmm_core.h"

#include "pagedata_state.h"

#define PAGE 4096u

/* ---- the fakes: the answers given (vmm_answer), whether the link is one-sided ---- */
static uint64_t answered_seq;
static int answered_status = -1;
static bool one_sided = true;

bool repl_session_one_sided(const struct repl_session *s)
{
	return one_sided;
}

const char *vmm_partner_id(const struct vmm *v)
{
	return "b";
}

int vmm_answer(struct vmm *v, uint64_t seq, const CommandComplete *cc)
{
	answered_seq = seq;
	answered_status = cc->status;
	return 0;
}

uint64_t pagetable_partner_applied_lsn(const struct pagetable *pt)
{
	return 0;
}

static struct pagedata pd;

static Ftvm__Partner__Landing landing(uint64_t frame, uint32_t frames)
{
	Ftvm__Partner__Landing l = FTVM__PARTNER__LANDING__INIT;

	l.frame = frame;
	l.frames = frames;
	l.generation = 1;
	return l;
}

static void add(uint64_t frame, uint32_t frames)
{
	Ftvm__Partner__Landing l = landing(frame, frames), *ls[] = { &l };
	char reason[128];

	CHECK_INT("add", 0, pagedata_granted_add(&pd, ls, 1, reason, sizeof(reason)));
}

static void test_take_and_settle(void)
{
	Ftvm__Partner__Landing bad = landing(9, 0), *ls[] = { &bad };
	struct repl_landing a, b, c;
	char reason[128] = "";

	CHECK_INT("a run of no frames", -EINVAL,
		  pagedata_granted_add(&pd, ls, 1, reason, sizeof(reason)));
	CHECK(strstr(reason, "frame 9 has 0 frames") != NULL, "reason '%s'", reason);
	CHECK(!pagedata_granted_take(&pd, 1, &a), "a run taken that was refused");

	add(10, 2);
	add(20, 2);
	add(30, 1);
	CHECK(pagedata_granted_take(&pd, 2, &a), "no run of 2 frames");
	CHECK(pagedata_granted_take(&pd, 2, &b), "no second run of 2 frames");
	CHECK(a.frame != b.frame, "the same run taken twice: %llu", (unsigned long long)a.frame);
	CHECK(!pagedata_granted_take(&pd, 2, &c), "a third run of 2 frames, both in flight");
	CHECK(pagedata_granted_take(&pd, 1, &c) && c.frame == 30, "no run of 1 frame");

	/* Not applied (LOCKED, a refusal): free again, and taken again. */
	pagedata_granted_done(&pd, &a, false);
	CHECK(pagedata_granted_take(&pd, 2, &c) && c.frame == a.frame, "the run is not free again");
	/* Applied: spent. */
	pagedata_granted_done(&pd, &c, true);
	pagedata_granted_done(&pd, &b, true);
	CHECK(!pagedata_granted_take(&pd, 2, &c), "a spent run taken");
	c = (struct repl_landing){ .frame = 30, .frames = 1, .generation = 1 };
	pagedata_granted_done(&pd, &c, false);
}

static void test_revoke(void)
{
	Ftvm__Partner__Landing r1 = landing(40, 2), r2 = landing(50, 2), *ls[] = { &r1, &r2 };
	Ftvm__Partner__LandingRevoke m = FTVM__PARTNER__LANDING_REVOKE__INIT;
	struct repl_landing in_flight, free_run;

	add(40, 2);
	add(50, 2);
	CHECK(pagedata_granted_take(&pd, 2, &in_flight), "no run to take");
	m.landings = ls;
	m.n_landings = 2;
	answered_status = -1;
	CHECK(pagedata_granted_revoke(&pd, &m, 77),
	      "the answer was not held for the write in flight");
	CHECK_INT("answered early", -1, answered_status);
	CHECK(!pagedata_granted_take(&pd, 2, &free_run), "a revoked run taken");
	/* The write is answered (not applied): the run is revoked all the same. */
	pagedata_granted_done(&pd, &in_flight, false);
	CHECK_INT("revoke answered", 77, answered_seq);
	CHECK_INT("revoke answer", FTVM__PARTNER__STATUS__STATUS_OK, answered_status);
	CHECK(!pagedata_granted_take(&pd, 2, &free_run), "a revoked run is free again");

	/* Nothing in flight: answered at once. */
	add(40, 2);
	CHECK(!pagedata_granted_revoke(&pd, &m, 78), "an answer held with nothing in flight");
}

static void test_forget(void)
{
	Ftvm__Partner__Landing r = landing(70, 1), *ls[] = { &r };
	Ftvm__Partner__LandingRevoke m = FTVM__PARTNER__LANDING_REVOKE__INIT;
	struct repl_landing l;

	add(60, 1);
	add(70, 1);
	CHECK(pagedata_granted_take(&pd, 1, &l) && l.frame == 70, "not the last run granted taken");
	m.landings = ls;
	m.n_landings = 1;
	CHECK(pagedata_granted_revoke(&pd, &m, 79), "no answer held");
	pagedata_granted_forget(&pd);
	CHECK(pd.granted == NULL && pd.revokes_held == NULL,
	      "runs or held answers after link down");
	answered_status = -1;
	pagedata_granted_done(&pd, &l, false); /* the write's answer, failed with the link */
	CHECK_INT("an answer to a revoke of a link gone", -1, answered_status);
	CHECK(!pagedata_granted_take(&pd, 1, &l), "a run taken after link down");
}

static void test_grant_and_answers(void)
{
	Ftvm__Partner__Landing r = landing(80, 1), *ls[] = { &r }, given = landing(90, 2);
	Ftvm__Partner__LandingGrant m = FTVM__PARTNER__LANDING_GRANT__INIT;
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	struct repl_landing l, at = { 0 };
	char reason[128] = "";

	m.landings = ls;
	m.n_landings = 1;
	one_sided = false;
	CHECK_INT("a LandingGrant over TCP", -EINVAL,
		  pagedata_granted_on_grant(&pd, &m, reason, sizeof(reason)));
	CHECK(strcmp(reason, "LandingGrant on a link that does not take page data one-sided") == 0,
	      "reason '%s'", reason);
	CHECK(!pagedata_granted_take(&pd, 1, &l), "a run taken that was refused");
	one_sided = true;
	CHECK_INT("a LandingGrant", 0, pagedata_granted_on_grant(&pd, &m, reason, sizeof(reason)));
	CHECK(pagedata_granted_take(&pd, 1, &l) && l.frame == 80, "the run granted is not there");
	pagedata_granted_done(&pd, &l, true);

	/* An AllocateWrite's answer with a landing and a fresh grant. */
	cc.n_grants = 1;
	cc.grants = ls;
	cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LANDING;
	cc.landing = &given;
	CHECK(pagedata_granted_from_answer(&pd, &cc, &at), "the answer's landing not handed back");
	CHECK(at.frame == 90 && at.frames == 2 && at.generation == 1, "landing at %llu",
	      (unsigned long long)at.frame);
	CHECK(pagedata_granted_take(&pd, 1, &l) && l.frame == 80, "the answer's grant not added");
	pagedata_granted_done(&pd, &l, true);
	cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD__NOT_SET;
	cc.n_grants = 0;
	CHECK(!pagedata_granted_from_answer(&pd, &cc, &at), "a landing from an answer with none");
}

int main(void)
{
	if (frame_pool_new(64ull * PAGE, PAGE, 0, &pd.pool) < 0)
		die("frame_pool_new");
	test_take_and_settle();
	test_revoke();
	test_forget();
	test_grant_and_answers();
	frame_pool_free(pd.pool);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("vmm_granted: all %d checks passed\n", checks);
	return 0;
}
