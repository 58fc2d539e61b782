/* The session's one-sided page data over real verbs (Soft-RoCE in the qemu
 * guest: tests/vm/jobs/rdma_pair.sh runs it): two sessions in one process
 * and one event loop, each with a frame pool (a memfd mapping) offered to
 * the RDMA transport.
 *
 *   test_rdma_session ADDR
 *
 * a plays O (it writes pages), b plays P (it gives landings). Each round b
 * answers a's request with a landing it opened (a block used for the first
 * time sends its RegionUpdate, which must leave ahead of the answer); a
 * writes a block of its pool there with repl_session_request_batch_landed,
 * and when the request reaches b the bytes are in b's pool and
 * repl_session_landing_check accepts the landing. Then a stale generation:
 * landing_check refuses it with the reason, and request_batch_landed sends
 * nothing. Then a source whose block the device refuses to register
 * (PROT_NONE memory: pinning it fails, as it does past RLIMIT_MEMLOCK):
 * -EOPNOTSUPP, so that the caller goes inline, nothing sent, the refusal
 * counted; the next request goes as usual. Exit 0 pass, 1 fail, 77 no
 * usable RDMA device, 99 setup error. */
#define _GNU_SOURCE /* memfd_create */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include <event2/event.h>

#include "../unit/check.h"
#include "clock.h"
#include "pool_memfd.h"
#include "rdma_probe.h"
#include "session.h"

#define PAGE 4096u
#define BLOCK_FRAMES 64u
#define POOL_FRAMES (16 * BLOCK_FRAMES + 2)
#define POOL_BYTES ((size_t)POOL_FRAMES * PAGE)
#define ROUNDS 64u
#define DEADLINE_MS 60000 /* TCG guests are slow */

struct node {
	const char *id;
	char listen[96], partner[96];
	struct repl_session *s;
	uint8_t *pool;
	bool up;
};

static struct event_base *base;
static struct node a = { .id = "a" }, b = { .id = "b" };

/* What a wrote in the round under way, for b to find in its pool. */
static struct repl_landing granted; /* the landing b gave with its last answer */
static bool granted_valid;
static size_t written_src, written_len; /* in a's pool */
static unsigned rounds_landed, rounds_answered, region_updates_ahead;
static bool region_update_last; /* b's last payload out was a RegionUpdate */
static unsigned landed_bad;
static char landed_bad_what[224];

static void fill(uint8_t *p, size_t len, uint32_t seed)
{
	rng_seed(seed);
	for (size_t i = 0; i < len; i++)
		p[i] = (uint8_t)rng();
}

static void on_link(struct repl_session *s, bool up, const char *reason, void *arg)
{
	struct node *n = arg;

	n->up = up;
	if (!up)
		printf("%s: link down: %s\n", n->id, reason);
}

/* b's landing for round r: blocks in turn, runs of 1, 16, 17 and 64 frames. */
static int open_landing(unsigned r, struct repl_landing *ret)
{
	static const uint32_t runs[] = { 1, 16, 17, 64 };
	uint64_t block = (r / 2) % 16, frames = runs[r % 4];

	return repl_session_landing_open(b.s, block * BLOCK_FRAMES + (r % 4 == 2 ? 5 : 0),
					 (uint32_t)frames, ret);
}

static void bad(const char *what)
{
	if (!landed_bad++)
		snprintf(landed_bad_what, sizeof(landed_bad_what), "%s", what);
}

/* b: the request of round bytes - 1 (bytes 0: the first, which writes
 * nothing) finds a's bytes in its pool; the answer carries the next
 * landing. */
static void on_request(struct repl_session *s, Envelope *const *envs, size_t n, void *arg)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	Ftvm__Partner__Landing landing = FTVM__PARTNER__LANDING__INIT;
	struct repl_answer answer;
	uint64_t round = envs[0]->space_request->bytes;
	struct repl_landing next;
	char reason[160], what[224];
	int r;

	if (round && granted_valid) {
		if (memcmp(b.pool + granted.frame * PAGE, a.pool + written_src, written_len) != 0) {
			snprintf(what, sizeof(what), "round %llu: frame %llu lacks a's bytes",
				 (unsigned long long)round, (unsigned long long)granted.frame);
			bad(what);
		}
		r = repl_session_landing_check(b.s, &granted, reason, sizeof(reason));
		if (r < 0) {
			snprintf(what, sizeof(what), "round %llu: landing_check: %s",
				 (unsigned long long)round, reason);
			bad(what);
		}
		rounds_landed++;
	}
	r = open_landing((unsigned)round, &next);
	if (r < 0) {
		snprintf(what, sizeof(what), "landing_open for round %llu: %s",
			 (unsigned long long)round, strerror(-r));
		bad(what);
	} else {
		landing.frame = next.frame;
		landing.frames = next.frames;
		landing.generation = next.generation;
		cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LANDING;
		cc.landing = &landing;
	}
	answer.seq = envs[0]->seq;
	answer.cc = &cc;
	repl_session_answer(s, &answer, 1);
}

static void on_tap(struct repl_session *s, bool out, const char *peer, const uint8_t *payload,
		   size_t len, void *arg)
{
	Envelope *env;
	char err[64];

	/* The answer naming a block's new registration leaves right behind its
	 * RegionUpdate. */
	if (!out || s != b.s || codec_envelope_decode(payload, len, &env, err, sizeof(err)) < 0)
		return;
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE &&
	    region_update_last)
		region_updates_ahead++;
	region_update_last = env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_REGION_UPDATE;
	codec_envelope_free(env);
}

static const struct repl_session_callbacks callbacks = {
	.link_changed = on_link,
	.request = on_request,
};

/* a: the answer, with the landing for the next round. */
static void on_done(const CommandComplete *cc, void *arg)
{
	rounds_answered++;
	granted_valid = cc->status == 0 &&
			cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LANDING;
	if (granted_valid)
		granted = (struct repl_landing){ .frame = cc->landing->frame,
						 .frames = cc->landing->frames,
						 .generation = cc->landing->generation };
}

static bool run_until(bool (*cond)(void))
{
	uint64_t end = clock_now_ms() + DEADLINE_MS;

	while (!cond()) {
		if (clock_now_ms() > end)
			return false;
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
	}
	return true;
}

static bool both_one_sided(void)
{
	return repl_session_one_sided(a.s) && repl_session_one_sided(b.s);
}

static unsigned answers_due;

static bool answered(void)
{
	return rounds_answered >= answers_due;
}

static int start(struct node *n, const char *addr, unsigned port, unsigned partner_port)
{
	struct repl_session_config c = {
		.node_id = n->id,
		.listen = n->listen,
		.partner = n->partner,
		.transport = &repl_transport_rdma,
		.page_size = PAGE,
		.frame_count = POOL_FRAMES,
		.epoch = 1,
		.heartbeat_ms = 100,
		.dead_after_ms = 5000,
		.max_payload = 8u << 20,
		.pool_base = n->pool,
		.pool_block_frames = BLOCK_FRAMES,
	};
	int r;

	snprintf(n->listen, sizeof(n->listen), "%s:%u", addr, port);
	snprintf(n->partner, sizeof(n->partner), "%s:%u", addr, partner_port);
	n->pool = c.pool_base = pool_memfd_map(POOL_BYTES);
	r = repl_session_new(base, &c, &callbacks, n, &n->s);
	if (r < 0)
		return r;
	repl_session_set_tap(n->s, on_tap, n);
	return repl_session_start(n->s);
}

/* One request of round, its page block written to the granted landing
 * first (none for round 0). */
static int send_round(unsigned round, int *ret_landed)
{
	Ftvm__Partner__SpaceRequest req = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, *envs[1] = { &env };
	void *args[1] = { NULL };
	struct repl_page_write w;

	req.bytes = round;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &req;
	if (!round)
		return repl_session_request_batch(a.s, envs, 1, DEADLINE_MS, on_done, args);
	written_src = (size_t)(round % 16) * BLOCK_FRAMES * PAGE;
	written_len = (size_t)granted.frames * PAGE;
	fill(a.pool + written_src, written_len, round);
	w = (struct repl_page_write){ .src = a.pool + written_src,
				      .len = written_len,
				      .to = granted };
	*ret_landed = 1;
	return repl_session_request_batch_landed(a.s, envs, 1, DEADLINE_MS, on_done, args, &w, 1);
}

static void test_rounds(void)
{
	for (unsigned round = 0; round <= ROUNDS && !failures; round++) {
		int landed = 0, r = send_round(round, &landed);

		CHECK(r == 0, "round %u: %s", round, strerror(-r));
		answers_due = round + 1;
		CHECK(run_until(answered), "round %u never answered", round);
		CHECK(granted_valid, "round %u: b gave no landing", round);
	}
	CHECK(!landed_bad, "%u bad, first: %s", landed_bad, landed_bad_what);
	CHECK(rounds_landed == ROUNDS, "%u rounds landed of %u", rounds_landed, ROUNDS);
	CHECK(region_updates_ahead >= 16, "%u RegionUpdates went ahead of an answer",
	      region_updates_ahead);
	printf("ok: %u page blocks (1-64 frames) written one-sided into b's landings, each in "
	       "b's pool at its request; %u RegionUpdates went ahead of the answer\n",
	       rounds_landed, region_updates_ahead);
}

/* request_batch_landed of one SpaceRequest with w's block must fail with
 * want and send nothing. */
static void landed_refused(const char *what, int want, const struct repl_page_write *w)
{
	Ftvm__Partner__SpaceRequest req = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, *envs[1] = { &env };
	void *args[1] = { NULL };
	struct repl_session_stats before, after;

	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &req;
	repl_session_get_stats(a.s, &before);
	CHECK_INT(what, want,
		  repl_session_request_batch_landed(a.s, envs, 1, 1000, on_done, args, w, 1));
	repl_session_get_stats(a.s, &after);
	CHECK(after.requests_sent == before.requests_sent, "%s: a request was sent", what);
}

static void test_stale(void)
{
	struct repl_landing stale = granted;
	struct repl_page_write w = { .src = a.pool, .len = PAGE };
	char reason[192] = "";

	stale.generation++;
	CHECK_INT("landing_check of a newer generation", -ESTALE,
		  repl_session_landing_check(b.s, &stale, reason, sizeof(reason)));
	CHECK(strstr(reason, "is stale"), "reason: %s", reason);
	printf("ok: landing_check refused: %s\n", reason);
	stale.frame = POOL_FRAMES;
	CHECK_INT("landing_check outside the pool", -ERANGE,
		  repl_session_landing_check(b.s, &stale, reason, sizeof(reason)));

	stale = granted;
	stale.generation++;
	w.to = stale;
	landed_refused("request_batch_landed at a stale generation", -ESTALE, &w);
	printf("ok: request_batch_landed at a stale generation: -ESTALE, nothing sent\n");
}

static void test_refused(void)
{
	Ftvm__Partner__SpaceRequest req = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, *envs[1] = { &env };
	void *args[1] = { NULL };
	/* The pool's last block (two frames), never a source before. */
	uint8_t *last = a.pool + (size_t)16 * BLOCK_FRAMES * PAGE;
	struct repl_page_write w = { .src = last, .len = PAGE, .to = granted };
	struct repl_pool_stats pool;

	if (mprotect(last, 2 * PAGE, PROT_NONE) < 0)
		die("mprotect");
	landed_refused("request_batch_landed from a block the device will not register",
		       -EOPNOTSUPP, &w);
	repl_session_pool_stats(a.s, &pool);
	CHECK_INT("registrations the device refused", 1, pool.failed);
	if (mprotect(last, 2 * PAGE, PROT_READ | PROT_WRITE) < 0)
		die("mprotect");
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	env.space_request = &req; /* bytes 0: b looks for no landed bytes */
	CHECK_INT("the request sent inline after it", 0,
		  repl_session_request_batch(a.s, envs, 1, DEADLINE_MS, on_done, args));
	answers_due = rounds_answered + 1;
	CHECK(run_until(answered),
	      "the inline request after a refused registration never answered");
	printf("ok: a source block the device refused: -EOPNOTSUPP, nothing sent, %" PRIu64
	       " failed registration counted; the next request answered\n",
	       pool.failed);
}

int main(int argc, char **argv)
{
	char reason[192], probe[96];
	int r;

	if (argc != 2) {
		fprintf(stderr, "usage: test_rdma_session ADDR (an address on an RDMA device)\n");
		return 99;
	}
	snprintf(probe, sizeof(probe), "%s:7481", argv[1]);
	if (!rdma_probe(probe, false, reason, sizeof(reason))) {
		printf("skipped: %s\n", reason);
		return 77;
	}
	base = event_base_new();
	if (!base)
		die("event_base_new");
	r = start(&a, argv[1], 7481, 7482);
	if (r == 0)
		r = start(&b, argv[1], 7482, 7481);
	if (r < 0) {
		fprintf(stderr, "ERROR starting the sessions: %s\n", strerror(-r));
		return 99;
	}
	CHECK(run_until(both_one_sided), "not one-sided: a %d b %d (links %d %d)",
	      repl_session_one_sided(a.s), repl_session_one_sided(b.s), a.up, b.up);
	if (failures)
		return 1;
	printf("ok: linked over rdma, one_sided on both\n");
	test_rounds();
	test_stale();
	test_refused();

	repl_session_free(a.s);
	repl_session_free(b.s);
	event_base_free(base);
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("rdma_session: all %d checks passed\n", checks);
	return 0;
}
