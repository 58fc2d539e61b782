/* pagedata/send.c, the sending side of page data, over a fake session and a
 * fake batch send: which way a block goes and what the WritePage says of it
 * (inline over TCP; one-sided into the landing a lock gave, or into a run
 * the partner granted, read from the frames given or from a staging slab;
 * inline again when the transport cannot write it one-sided now), what is
 * counted, and what is held until the answer (pagedata_sent). The real
 * batch send and transports are tested by the e2e tests and, one-sided, by
 * the qemu guest's RDMA suite. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "crc32c.h"
#include "frame_pool.h"
#include "vmm_core.h"
#include "vmm_msg.h"

#include "pagedata_state.h"

#define PAGE 4096u

/* ---- the fakes: the session's one-sided calls, the batch send ---- */
static bool fake_one_sided;
static int fake_landed_result; /* what a one-sided send returns */
static uint8_t staging_slab[PAGE];
static bool staging_out, staging_short;

/* What went out: the batch's WritePage as it was sent, and the WRITE. */
static unsigned sends, landed_sends;
static Ftvm__Partner__WritePage sent_write;
static Ftvm__Partner__Landing sent_landed;
static struct repl_page_write sent_w;

bool repl_session_one_sided(const struct repl_session *s)
{
	return fake_one_sided;
}

const char *vmm_partner_id(const struct vmm *v)
{
	return "b";
}

bool repl_session_inline_instead(int r)
{
	return r == -ESTALE || r == -ENOENT || r == -ERANGE || r == -EOPNOTSUPP;
}

int repl_session_staging_take(struct repl_session *s, uint64_t length, void **ret_addr)
{
	if (staging_short || staging_out || length > sizeof(staging_slab))
		return -ENOMEM;
	staging_out = true;
	*ret_addr = staging_slab;
	return 0;
}

void repl_session_staging_give(struct repl_session *s, void *addr)
{
	staging_out = false;
}

/* LandingRevoke's answers (grants_from_partner.c): none in these tests. */
int vmm_answer(struct vmm *v, uint64_t seq, const CommandComplete *cc)
{
	return 0;
}

uint64_t pagetable_partner_applied_lsn(const struct pagetable *pt)
{
	return 0;
}

/* The WritePage sent, kept past the batch (its landing is on the sender's
 * stack). */
static void keep_write_page(const Envelope *env)
{
	sent_write = *env->write_page;
	if (sent_write.landed) {
		sent_landed = *sent_write.landed;
		sent_write.landed = &sent_landed;
	}
}

int vmm_op_send(struct vmm_op *op, Envelope *const *envs, size_t n)
{
	sends++;
	keep_write_page(envs[1]);
	return 0;
}

int vmm_op_send_landed(struct vmm_op *op, Envelope *const *envs, size_t n,
		       const struct repl_page_write *writes, size_t n_writes)
{
	if (fake_landed_result < 0)
		return fake_landed_result;
	landed_sends++;
	keep_write_page(envs[1]);
	sent_w = writes[0];
	return 0;
}

/* ---- the test ---- */
static struct pagedata pd;
static struct frame_pool *pool;
static uint8_t block[PAGE];

/* A batch of three, the WritePage in the middle, for block. */
static int send_batch(struct pagedata_outgoing *out)
{
	struct vmm_op op = { 0 };
	struct vmm_msg msgs[3];
	Envelope *envs[3];
	Envelope first = FTVM__PARTNER__ENVELOPE__INIT, last = FTVM__PARTNER__ENVELOPE__INIT;

	envs[0] = &first;
	envs[2] = &last;
	memset(&sent_write, 0, sizeof(sent_write));
	return pagedata_send(&pd, &op, msgs, envs, 3, 1, out);
}

static struct pagedata_outgoing outgoing(void *frames, const struct repl_landing *landing,
					 bool grant_ok)
{
	struct pagedata_outgoing out = {
		.guid = "a-1",
		.page = 3,
		.block_size = PAGE,
		.crc32c = crc32c(0, block, PAGE),
		.block = block,
		.frames = frames,
		.landing = landing,
		.grant_ok = grant_ok,
	};

	return out;
}

static void grant(uint64_t frame)
{
	Ftvm__Partner__Landing l = FTVM__PARTNER__LANDING__INIT, *ls[] = { &l };
	char reason[128];

	l.frame = frame;
	l.frames = 1;
	l.generation = 1;
	CHECK_INT("grant", 0, pagedata_granted_add(&pd, ls, 1, reason, sizeof(reason)));
}

static void test_inline_over_tcp(void)
{
	struct pagedata_outgoing out = outgoing(NULL, NULL, true);

	fake_one_sided = false;
	grant(7); /* never used over TCP */
	CHECK_INT("send", 0, send_batch(&out));
	CHECK(sends == 1 && landed_sends == 0, "%u inline, %u one-sided sends", sends,
	      landed_sends);
	CHECK(!sent_write.landed && sent_write.data.len == PAGE && sent_write.data.data == block &&
		      sent_write.crc32c == out.crc32c && strcmp(sent_write.guid, "a-1") == 0 &&
		      sent_write.page == 3,
	      "the WritePage carries the block inline");
	CHECK_INT("counted inline", 1, pd.counted.pages_inline);
	CHECK(!out.granted && !out.staging, "something held for an inline block");
	pagedata_granted_forget(&pd);
}

static void test_into_the_locks_landing(void)
{
	struct repl_landing landing = { .frame = 40, .frames = 1, .generation = 2 };
	uint8_t *frames = frame_pool_addr(pool, 5);
	struct pagedata_outgoing out = outgoing(frames, &landing, false);

	fake_one_sided = true;
	memset(frames, 0, PAGE);
	CHECK_INT("send", 0, send_batch(&out));
	CHECK_INT("one-sided sends", 1, landed_sends);
	CHECK(sent_write.landed && sent_write.landed->frame == 40 &&
		      sent_write.landed->generation == 2 && sent_write.data.len == 0,
	      "the WritePage names the landing, without data");
	CHECK(sent_w.src == frames && sent_w.len == PAGE && sent_w.to.frame == 40,
	      "the WRITE reads the frames given, into the landing");
	CHECK(memcmp(frames, block, PAGE) == 0, "the block was not copied into the frames");
	CHECK_INT("counted one-sided", 1, pd.counted.pages_one_sided);
	CHECK(!out.granted && !out.staging, "something held beside the landing");

	/* Frames that hold the block already (a write applied before the
	 * send) are read as they are: nothing is copied into them. */
	out = outgoing(frames, &landing, false);
	out.frames_filled = true;
	memset(frames, 0x5a, PAGE);
	CHECK_INT("send", 0, send_batch(&out));
	CHECK(sent_w.src == frames && frames[0] == 0x5a && frames[PAGE - 1] == 0x5a,
	      "frames said to hold the block were copied into");
}

static void test_no_grant_asked_for(void)
{
	struct pagedata_outgoing out = outgoing(block, NULL, false);
	unsigned before = sends;

	fake_one_sided = true;
	grant(8);
	CHECK_INT("send", 0, send_batch(&out));
	CHECK(sends == before + 1 && !sent_write.landed,
	      "a release without a landing used a grant");
	pagedata_granted_forget(&pd);
}

static void test_into_a_granted_run(void)
{
	struct pagedata_outgoing out = outgoing(NULL, NULL, true), again;
	struct repl_landing probe;

	fake_one_sided = true;
	grant(9);
	CHECK_INT("send", 0, send_batch(&out));
	CHECK(out.granted && out.grant.frame == 9, "the granted run is not held");
	CHECK(sent_write.landed && sent_write.landed->frame == 9, "the WritePage names run 9");
	CHECK(out.staging == staging_slab && sent_w.src == staging_slab &&
		      memcmp(staging_slab, block, PAGE) == 0,
	      "with no frames given, the WRITE reads a staging slab holding the block");
	CHECK(!pagedata_granted_take(&pd, 1, &probe), "the run in flight was taken again");
	pagedata_sent(&pd, &out, false);
	CHECK(!staging_out, "the staging slab was not given back");
	CHECK(pagedata_granted_take(&pd, 1, &probe) && probe.frame == 9,
	      "a write the partner did not apply left its run spent");
	pagedata_granted_done(&pd, &probe, false);

	again = outgoing(NULL, NULL, true);
	CHECK_INT("send again", 0, send_batch(&again));
	pagedata_sent(&pd, &again, true);
	CHECK(!pagedata_granted_take(&pd, 1, &probe), "an applied write left its run free");
	pagedata_granted_forget(&pd);
}

static void test_inline_instead(void)
{
	struct pagedata_outgoing out = outgoing(NULL, NULL, true);
	struct repl_landing probe;
	unsigned before = sends;

	fake_one_sided = true;
	grant(11);
	fake_landed_result = -ESTALE; /* a view without that generation, say */
	CHECK_INT("send", 0, send_batch(&out));
	CHECK(sends == before + 1 && !sent_write.landed && sent_write.data.len == PAGE,
	      "not sent inline when the WRITE could not go");
	CHECK(!out.granted && !out.staging && !staging_out, "the run or the slab still held");
	CHECK(pagedata_granted_take(&pd, 1, &probe) && probe.frame == 11,
	      "the run is not free again");
	pagedata_granted_done(&pd, &probe, false);

	fake_landed_result = -ENOTCONN; /* the link went: nothing is sent */
	before = sends;
	CHECK_INT("send on a link gone", -ENOTCONN, send_batch(&out));
	CHECK(sends == before && !out.granted, "sent, or the run held, with the link gone");
	fake_landed_result = 0;

	staging_short = true; /* a grant, but nowhere to read the block from */
	out = outgoing(NULL, NULL, true);
	CHECK_INT("send without a slab", 0, send_batch(&out));
	CHECK(!sent_write.landed && !out.granted, "without a slab the block did not go inline");
	staging_short = false;
	pagedata_granted_forget(&pd);
}

int main(void)
{
	if (frame_pool_new(16ull * PAGE, PAGE, 0, &pool) < 0)
		die("frame_pool_new");
	pd.pool = pool;
	for (size_t i = 0; i < PAGE; i++)
		block[i] = (uint8_t)(i * 7);
	test_inline_over_tcp();
	test_into_the_locks_landing();
	test_no_grant_asked_for();
	test_into_a_granted_run();
	test_inline_instead();
	frame_pool_free(pool);
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
