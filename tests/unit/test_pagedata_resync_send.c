/* pagedata/resync_send.c, a resync's blocks on the node that sends it, over
 * a fake session and a fake resync (its calls count what is outstanding):
 * over TCP every block inline and nothing staged; on a one-sided link blocks
 * staged while half the free frames last and the rest inline; ResyncLandings
 * asking the staged blocks' frames in order, VMM_RESYNC_CHUNK at a time; an
 * answer's runs (a prefix) written one-sided in one batch sorted by landing
 * frame, the others inline, then the next chunk or the resync's blocks_out;
 * UNSUPPORTED, a batch the session cannot write one-sided: inline; a failed
 * answer or send fails the resync; staging runs back to the pool; what is
 * counted. The real session is tested by the e2e tests (inline, over TCP)
 * and, one-sided, by the qemu guest's RDMA suite. */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "check.h"
#include "crc32c.h"
#include "frame_pool.h"
#include "vmm_core.h"

#include "pagedata_state.h"

#define PAGE 4096u
#define STATUS(x) FTVM__PARTNER__STATUS__STATUS_##x

/* ---- what went out: each request, in order ---- */
struct req {
	int kind; /* the envelope's message_case */
	bool in_batch;
	uint64_t page;
	size_t data_len;
	uint32_t data_crc, state_crc;
	bool landed;
	struct repl_landing at;
	uint32_t *frames; /* ResyncLandings' */
	size_t n_frames;
	pending_done_fn done;
	void *arg;
	bool answered;
};
static struct req *reqs;
static size_t n_reqs;
/* One letter per thing done, in order: P inline page, B landed batch, L
 * ResyncLandings, E blocks_out. */
static char trace[4096];
static size_t trace_len;
/* The last landed batch's WRITEs, with the crc32c of what each reads. */
static struct repl_page_write *writes;
static uint32_t *write_crcs;
static size_t n_writes;

static bool fake_one_sided;
static int fake_landings_result, fake_landed_result;

static void note(char c)
{
	if (trace_len + 1 < sizeof(trace))
		trace[trace_len++] = c;
}

static struct req *record(const Envelope *env, pending_done_fn done, void *arg)
{
	struct req *r;

	reqs = realloc(reqs, (n_reqs + 1) * sizeof(*reqs));
	if (!reqs)
		die("realloc");
	r = &reqs[n_reqs++];
	memset(r, 0, sizeof(*r));
	r->kind = env->message_case;
	r->done = done;
	r->arg = arg;
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE) {
		const Ftvm__Partner__ResyncPage *m = env->resync_page;

		r->page = m->page;
		r->data_len = m->data.len;
		r->data_crc = crc32c(0, m->data.data, m->data.len);
		r->state_crc = m->state ? m->state->crc32c : 0;
		if (m->landed) {
			r->landed = true;
			r->at.frame = m->landed->frame;
			r->at.frames = m->landed->frames;
			r->at.generation = m->landed->generation;
		}
	} else if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS) {
		r->n_frames = env->resync_landings->n_frames;
		r->frames = malloc(r->n_frames * sizeof(*r->frames) + 1);
		if (!r->frames)
			die("malloc");
		memcpy(r->frames, env->resync_landings->frames, r->n_frames * sizeof(*r->frames));
	}
	return r;
}

/* ---- the fakes: the session's one-sided calls, the vmm's send ---- */
bool repl_session_one_sided(const struct repl_session *s)
{
	return fake_one_sided;
}

bool repl_session_inline_instead(int r)
{
	return r == -ESTALE || r == -ENOENT || r == -ERANGE || r == -EOPNOTSUPP;
}

/* Every request of the resync goes here: one ResyncPage or ResyncLandings
 * alone, or a batch of landed ResyncPages behind their WRITEs. */
int vmm_partner_send(struct vmm *v, Envelope *const *envs, size_t n,
		     const struct repl_page_write *w, size_t n_w, pending_done_fn done,
		     void *const *args)
{
	bool landings = envs[0]->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS;

	if (!n_w) {
		if (landings && fake_landings_result < 0)
			return fake_landings_result;
		note(landings ? 'L' : 'P');
		record(envs[0], done, args[0]);
		return 0;
	}
	if (fake_landed_result < 0)
		return fake_landed_result;
	note('B');
	for (size_t i = 0; i < n; i++)
		record(envs[i], done, args[i])->in_batch = true;
	free(writes);
	free(write_crcs);
	writes = calloc(n_w + 1, sizeof(*writes));
	write_crcs = calloc(n_w + 1, sizeof(*write_crcs));
	if (!writes || !write_crcs)
		die("calloc");
	for (size_t i = 0; i < n_w; i++) {
		writes[i] = w[i];
		write_crcs[i] = crc32c(0, w[i].src, w[i].len);
	}
	n_writes = n_w;
	return 0;
}

/* ---- the fake resync: what it is told ---- */
static unsigned outstanding, blocks_out_calls, answers;
static int failed_status;
static char failed_reason[256];
static uint64_t applied_lsn;
static int fake_end_result;

static void on_sent(size_t n, void *arg)
{
	outstanding += n;
}

static void on_answered(const CommandComplete *cc, void *arg)
{
	answers++;
	if (cc->applied_lsn > applied_lsn)
		applied_lsn = cc->applied_lsn;
	if (cc->status != STATUS(OK) && !failed_status) {
		failed_status = cc->status;
		snprintf(failed_reason, sizeof(failed_reason), "%s", cc->reason ? cc->reason : "");
	}
	if (outstanding == 0)
		FAIL("answered with nothing outstanding");
	else
		outstanding--;
}

static int on_blocks_out(void *arg)
{
	note('E');
	blocks_out_calls++;
	return fake_end_result;
}

static const struct pagedata_resync_calls calls = {
	.sent = on_sent,
	.answered = on_answered,
	.blocks_out = on_blocks_out,
};

/* ---- the test ---- */
static struct pagedata pd;
static struct ftvm_config config = { .page_size = PAGE, .request_timeout_ms = 1000 };

/* A fresh resync over a pool of frames free frames. */
static struct pagedata_resync_out *begin(uint64_t frames, bool one_sided)
{
	struct pagedata_resync_out *out;

	for (size_t i = 0; i < n_reqs; i++)
		free(reqs[i].frames);
	n_reqs = 0;
	trace_len = 0;
	memset(trace, 0, sizeof(trace));
	outstanding = blocks_out_calls = answers = 0;
	failed_status = 0;
	failed_reason[0] = '\0';
	applied_lsn = 0;
	fake_landings_result = fake_landed_result = fake_end_result = 0;
	memset(&pd.counted, 0, sizeof(pd.counted));
	if (pd.pool)
		frame_pool_free(pd.pool);
	if (frame_pool_new(frames * PAGE, PAGE, 0, &pd.pool) < 0)
		die("frame_pool_new");
	fake_one_sided = one_sided;
	out = pagedata_resync_out_new(&pd, &calls);
	if (!out)
		die("pagedata_resync_out_new");
	return out;
}

/* Page p's block (block_size bytes, its bytes p's own) at the snapshot; the
 * buffer is scribbled over afterwards, as a client's write pointer may. */
static int page(struct pagedata_resync_out *out, uint64_t p, uint32_t block_size)
{
	static uint8_t block[4 * PAGE];
	Ftvm__Partner__PageState state = FTVM__PARTNER__PAGE_STATE__INIT;
	int r;

	for (uint32_t i = 0; i < block_size; i++)
		block[i] = (uint8_t)(p * 31 + i);
	state.version = p + 1;
	state.crc32c = crc32c(0, block, block_size);
	r = pagedata_resync_out_page(out, "a-1", p, block, block_size, &state);
	memset(block, 0xee, block_size);
	return r;
}

static size_t count(char c)
{
	size_t n = 0;

	for (size_t i = 0; i < trace_len; i++)
		n += trace[i] == c;
	return n;
}

/* The last request of kind. */
static struct req *last(int kind)
{
	for (size_t i = n_reqs; i-- > 0;)
		if (reqs[i].kind == kind)
			return &reqs[i];
	return NULL;
}

static void answer(struct req *r, int status, uint64_t lsn, Ftvm__Partner__Landing **runs, size_t n)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

	cc.status = status;
	cc.applied_lsn = lsn;
	cc.landings = runs;
	cc.n_landings = n;
	r->answered = true;
	r->done(&cc, r->arg);
}

/* Every request not answered yet, OK. */
static void answer_all(void)
{
	for (size_t i = 0; i < n_reqs; i++)
		if (!reqs[i].answered)
			answer(&reqs[i], STATUS(OK), 0, NULL, 0);
}

/* What on_landings left for the loop. */
static void run_loop(void)
{
	event_base_loop(pd.base, EVLOOP_NONBLOCK);
}

/* Runs for n blocks of frames each, at frame top, top - frames, ... (the
 * batch must sort them). */
static Ftvm__Partner__Landing **runs(size_t n, uint32_t frames, uint64_t top)
{
	static Ftvm__Partner__Landing l[16], *ls[16];

	for (size_t i = 0; i < n; i++) {
		ftvm__partner__landing__init(&l[i]);
		l[i].frame = top - i * frames;
		l[i].frames = frames;
		l[i].generation = 3;
		ls[i] = &l[i];
	}
	return ls;
}

/* A one-sided resync over 64 free frames with n blocks of two frames
 * staged and their ResyncLandings sent. */
static struct pagedata_resync_out *staged(uint64_t n)
{
	struct pagedata_resync_out *out = begin(64, true);

	for (uint64_t p = 0; p < n; p++)
		page(out, p, 2 * PAGE);
	CHECK_INT("ResyncLandings sent", 0, pagedata_resync_out_send(out));
	return out;
}

/* The last ResyncLandings answered with status and the n runs ls, and what
 * its answer left for the loop done. */
static void answer_landings(int status, Ftvm__Partner__Landing **ls, size_t n)
{
	answer(last(FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS), status, 0, ls, n);
	run_loop();
}

static void test_tcp(void)
{
	struct pagedata_resync_out *out = begin(64, false);
	uint64_t free0 = frame_pool_free_count(pd.pool);

	for (uint64_t p = 0; p < 3; p++)
		CHECK_INT("page", 0, page(out, p, 2 * PAGE));
	CHECK_INT("frames taken over TCP", free0, frame_pool_free_count(pd.pool));
	CHECK_STR("sent in the snapshot turn", "PPP", trace);
	CHECK(reqs[1].page == 1 && reqs[1].data_len == 2 * PAGE && !reqs[1].landed &&
		      reqs[1].data_crc == reqs[1].state_crc,
	      "page 1 not inline with its block and state");
	CHECK_INT("outstanding", 3, outstanding);
	CHECK_INT("nothing staged: the caller sends ResyncEnd", 1, pagedata_resync_out_send(out));
	CHECK_STR("after the snapshot", "PPP", trace);
	CHECK_INT("counted inline", 3, pd.counted.resync_pages_inline);
	CHECK_INT("counted one-sided", 0, pd.counted.resync_pages_one_sided);
	answer_all();
	CHECK_INT("outstanding after the answers", 0, outstanding);
	CHECK_INT("failed", 0, failed_status);
	pagedata_resync_out_free(out);
}

/* 64 frames free: 32 to stage in, 16 blocks of two frames; the others
 * inline now. Runs come for the first 10: those one-sided, 6 inline. */
static void test_one_sided(void)
{
	struct pagedata_resync_out *out = begin(64, true);
	uint64_t free0 = frame_pool_free_count(pd.pool);
	struct req *landings;
	size_t batch_at;

	for (uint64_t p = 0; p < 20; p++)
		CHECK_INT("page", 0, page(out, p, 2 * PAGE));
	CHECK_INT("frames staged (half the free ones)", free0 - 32, frame_pool_free_count(pd.pool));
	CHECK_STR("inline beyond the budget", "PPPP", trace);
	CHECK(reqs[0].page == 16 && reqs[3].page == 19 && reqs[0].data_len == 2 * PAGE,
	      "the blocks sent inline are not the ones past the budget");
	CHECK_INT("the resync's answer comes later", 0, pagedata_resync_out_send(out));
	CHECK_STR("ResyncLandings after the inline pages", "PPPPL", trace);
	landings = last(FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS);
	CHECK(landings && landings->n_frames == 16, "ResyncLandings asks for %zu blocks",
	      landings ? landings->n_frames : 0);
	for (size_t i = 0; landings && i < landings->n_frames; i++)
		CHECK_INT("frames asked", 2, landings->frames[i]);
	CHECK_INT("outstanding", 5, outstanding);

	batch_at = n_reqs;
	answer(landings, STATUS(OK), 77, runs(10, 2, 100), 10);
	CHECK_INT("the answer's LSN noted at once", 77, applied_lsn);
	CHECK_STR("nothing sent inside the answer", "PPPPL", trace);
	CHECK_INT("the answered request still holds the resync", 5, outstanding);
	run_loop();
	CHECK_STR("landed batch, the rest inline, blocks out", "PPPPLBPPPPPPE", trace);
	for (size_t i = 0; i < 10; i++) {
		struct req *r = &reqs[batch_at + i];

		CHECK(r->in_batch && r->landed && r->page == i && r->data_len == 0 &&
			      r->at.frame == 100 - 2 * i && r->at.frames == 2 &&
			      r->at.generation == 3,
		      "batch entry %zu does not name page %zu's run", i, i);
	}
	CHECK(reqs[batch_at + 10].page == 10 && !reqs[batch_at + 10].landed &&
		      reqs[batch_at + 10].data_len == 2 * PAGE &&
		      reqs[batch_at + 10].data_crc == reqs[batch_at + 10].state_crc,
	      "page 10 is not inline, from its staged copy");
	CHECK_INT("writes", 10, n_writes);
	for (size_t i = 0; i < n_writes; i++) {
		CHECK_INT("write sorted by landing frame", 82 + 2 * i, writes[i].to.frame);
		/* Run 100 - 2k is page k's, whose state crc the batch carries. */
		CHECK_HEX32("the WRITE reads the staged copy", reqs[batch_at + 9 - i].state_crc,
			    write_crcs[i]);
	}
	CHECK_INT("counted one-sided", 10, pd.counted.resync_pages_one_sided);
	CHECK_INT("counted inline", 10, pd.counted.resync_pages_inline);
	CHECK_INT("blocks_out", 1, blocks_out_calls);
	CHECK_INT("frames held for the landed blocks", free0 - 20, frame_pool_free_count(pd.pool));
	answer_all();
	CHECK_INT("staging runs back after the answers", free0, frame_pool_free_count(pd.pool));
	CHECK_INT("outstanding after the answers", 0, outstanding);
	CHECK_INT("failed", 0, failed_status);
	pagedata_resync_out_free(out);
}

/* More staged blocks than a chunk: two ResyncLandings, in order. */
static void test_chunks(void)
{
	size_t n = VMM_RESYNC_CHUNK + 76;
	struct pagedata_resync_out *out = begin(4 * n, true);
	uint64_t free0 = frame_pool_free_count(pd.pool);
	struct req *first, *second;

	for (uint64_t p = 0; p < n; p++)
		page(out, p, PAGE);
	CHECK_INT("nothing inline", 0, n_reqs);
	CHECK_INT("send", 0, pagedata_resync_out_send(out));
	first = last(FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS);
	CHECK(first && first->n_frames == VMM_RESYNC_CHUNK, "the first chunk asks %zu",
	      first ? first->n_frames : 0);
	answer(first, STATUS(OK), 0, runs(2, 1, 500), 2);
	run_loop();
	CHECK_INT("inline of the first chunk", VMM_RESYNC_CHUNK - 2, count('P'));
	CHECK_INT("blocks out before the last chunk", 0, blocks_out_calls);
	second = last(FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS);
	CHECK(second && second != first && second->n_frames == 76, "the second chunk asks %zu",
	      second ? second->n_frames : 0);
	CHECK(trace_len > 0 && trace[0] == 'L' && trace[1] == 'B' && trace[trace_len - 1] == 'L',
	      "first chunk not landed, inline, then the next ResyncLandings: %.8s...", trace);
	answer(second, STATUS(OK), 0, runs(3, 1, 900), 3);
	run_loop();
	CHECK(reqs[n_reqs - 76].in_batch && reqs[n_reqs - 76].page == VMM_RESYNC_CHUNK,
	      "the second chunk's runs are not for its own blocks");
	CHECK_INT("blocks out", 1, blocks_out_calls);
	CHECK_INT("counted one-sided", 5, pd.counted.resync_pages_one_sided);
	CHECK_INT("counted inline", n - 5, pd.counted.resync_pages_inline);
	answer_all();
	CHECK_INT("staging runs back", free0, frame_pool_free_count(pd.pool));
	CHECK_INT("outstanding", 0, outstanding);
	pagedata_resync_out_free(out);
}

/* A run not of the block's size ends the prefix: the rest go inline. */
static void test_run_of_another_size(void)
{
	struct pagedata_resync_out *out = staged(4);
	Ftvm__Partner__Landing **ls = runs(4, 2, 40);

	ls[2]->frames = 1;
	answer_landings(STATUS(OK), ls, 4);
	CHECK_STR("two landed, two inline", "LBPPE", trace);
	CHECK_INT("writes", 2, n_writes);
	CHECK_INT("counted one-sided", 2, pd.counted.resync_pages_one_sided);
	answer_all();
	pagedata_resync_out_free(out);
}

/* An older receiver: UNSUPPORTED, every staged block inline, no failure. */
static void test_unsupported(void)
{
	uint64_t free0 = 64;
	struct pagedata_resync_out *out = staged(3);

	answer_landings(STATUS(UNSUPPORTED), runs(3, 2, 40), 3);
	CHECK_STR("all inline, then blocks out", "LPPPE", trace);
	CHECK_INT("failed", 0, failed_status);
	CHECK_INT("counted inline", 3, pd.counted.resync_pages_inline);
	CHECK_INT("staging runs back once sent inline", free0, frame_pool_free_count(pd.pool));
	answer_all();
	CHECK_INT("outstanding", 0, outstanding);
	pagedata_resync_out_free(out);
}

/* ResyncLandings not answered (the link went): the resync fails, nothing
 * more goes; the staging runs go back when it ends. */
static void test_failed_answer(void)
{
	uint64_t free0 = 64;
	struct pagedata_resync_out *out = staged(3);

	CHECK_INT("frames staged", free0 - 6, frame_pool_free_count(pd.pool));
	answer_landings(STATUS(PARTNER_UNAVAILABLE), NULL, 0);
	CHECK_INT("failed", STATUS(PARTNER_UNAVAILABLE), failed_status);
	CHECK_STR("nothing more sent", "L", trace);
	CHECK_INT("blocks out", 0, blocks_out_calls);
	CHECK_INT("outstanding", 0, outstanding);
	pagedata_resync_out_free(out);
	CHECK_INT("staging runs back at the end", free0, frame_pool_free_count(pd.pool));
}

/* The session cannot write the batch one-sided now: inline instead; it
 * cannot send at all: the resync fails, without blocks_out. */
static void test_send_errors(void)
{
	struct pagedata_resync_out *out = staged(3);

	fake_landed_result = -ESTALE;
	answer_landings(STATUS(OK), runs(3, 2, 40), 3);
	CHECK_STR("inline instead of one-sided", "LPPPE", trace);
	CHECK_INT("counted one-sided", 0, pd.counted.resync_pages_one_sided);
	CHECK_INT("failed", 0, failed_status);
	answer_all();
	pagedata_resync_out_free(out);

	out = staged(3);
	fake_landed_result = -ENOTCONN;
	answer_landings(STATUS(OK), runs(3, 2, 40), 3);
	CHECK_INT("failed", STATUS(PARTNER_UNAVAILABLE), failed_status);
	CHECK_STR("reason", "cannot send the resync's blocks", failed_reason);
	CHECK_INT("blocks out", 0, blocks_out_calls);
	CHECK_INT("outstanding", 0, outstanding);
	pagedata_resync_out_free(out);

	/* ResyncLandings not sent: every staged block inline now, and the
	 * caller sends ResyncEnd. */
	out = begin(64, true);
	for (uint64_t p = 0; p < 3; p++)
		page(out, p, 2 * PAGE);
	fake_landings_result = -EBUSY;
	CHECK_INT("send without ResyncLandings", 1, pagedata_resync_out_send(out));
	fake_landings_result = 0;
	CHECK_STR("inline at once", "PPP", trace);
	CHECK_INT("staging runs back", 64, frame_pool_free_count(pd.pool));
	answer_all();
	pagedata_resync_out_free(out);
}

int main(void)
{
	pd.config = &config;
	pd.base = event_base_new();
	if (!pd.base)
		die("event_base_new");
	test_tcp();
	test_one_sided();
	test_chunks();
	test_run_of_another_size();
	test_unsupported();
	test_failed_answer();
	test_send_errors();
	frame_pool_free(pd.pool);
	event_base_free(pd.base);
	for (size_t i = 0; i < n_reqs; i++)
		free(reqs[i].frames);
	free(reqs);
	free(writes);
	free(write_crcs);
	printf("%d checks, %d failed\n", checks, failures);
	return failures ? 1 : 0;
}
