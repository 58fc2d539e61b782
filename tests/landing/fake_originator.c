/* ftvm-fake-originator: plays node a against a real ftvmd b, so that a test
 * can send b what a correct node a never sends: a page block written
 * one-sided into b's landing run followed by a WritePage that is wrong, or by
 * no WritePage at all (replica/RDMA.md, "One-sided page writes": P's copy
 * stays whole and old until it adopts a run it checked).
 *
 *   ftvm-fake-originator LISTEN PARTNER TRANSPORT PAGE_SIZE FRAMES [EPOCH]
 *
 * It links as "a" (LISTEN, dialling b at PARTNER), answers every request of
 * b's with OK (free space when asked), and prints "linked one_sided=yes|no".
 * It speaks at b's epoch, or at EPOCH when given (a later one: a survivor
 * that took over, for `resync`). Then it reads commands on standard input,
 * one per line:
 *
 *   write GUID PAGE HOW
 *
 * takes the write lock on GUID's PAGE from b, the allocation's owner
 * (LockRequest + AllocateWrite), prints "locked landing=..." and writes the
 * block of 0x5a bytes as HOW says:
 *   good     one-sided into the landing, a WritePage naming it, released
 *            modified: b must adopt the run;
 *   badcrc   the same with a CRC-32C that does not match: b refuses it;
 *   stale    a WritePage naming the landing at a later generation;
 *   landed   a WritePage naming a landing b never gave (its last frame,
 *            FRAMES - 1), sent inline: b refuses it, one-sided or not;
 *   cut      one-sided into the landing, then no WritePage: the process
 *            exits at once, as a node that died between the two.
 * Each answer is printed as "NAME: STATUS reason"; a refused write is
 * followed by a plain release ("release: ..."). And:
 *
 *   resync GUID OFFSET
 *
 * resyncs b as a survivor would (node/ha/HA.md, replica/RDMA.md "Resync") with
 * a's allocation GUID of two one-page blocks at store OFFSET (in a's
 * partition, which b checks), both dirty at version 1: the
 * block of page 0 is 0x01 bytes, page 1's 0x02. It asks b for landings
 * ("landings: N"); then, as a change mirrored after the snapshot, writes
 * page 0 again (0x03 bytes, version 2: "mirrored: STATUS"); only then sends
 * the snapshot's blocks, into the landings when b gave them, inline
 * otherwise ("page0: STATUS", "page1: STATUS"), and ResyncEnd ("end:
 * STATUS"). b must keep page 0's newer bytes and adopt page 1's.
 * Wire values b must not take as given (tests/e2e/test_wire_values.sh):
 *
 *   alloc GUID SIZE OFFSET
 *
 * mirrors a's allocation GUID of SIZE bytes in pages of PAGE_SIZE at store
 * OFFSET ("alloc: STATUS reason"): b refuses one that does not fit in a's
 * partition of the store.
 *
 *   wait GUID PAGE WAIT_MS
 *
 * asks b for the write lock on GUID's PAGE with a ticket, to wait WAIT_MS in
 * b's paging queue ("wait: STATUS reason"): b keeps it there at most
 * request_timeout_ms.
 * Requests of b's in flight across a resync (node/ha/HA.md, "Requests in
 * flight across a resync"):
 *
 *   hold
 *
 * answers none of b's requests from now on: each batch that comes is held,
 * and "held: N" says how many requests are held in all;
 *
 *   epoch N
 *
 * speaks at epoch N from now on (a survivor that took over, for `resync`);
 *
 *   answer STATUS
 *
 * answers every held request with STATUS (a name: OK, STALE_EPOCH, ...),
 * "answered: N", and holds no more.
 * Exit 0 at end of input, 1 when the link is lost or an answer does not
 * come, 2 usage. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <event2/event.h>

#include "clock.h"
#include "crc32c.h"
#include "keyfile.h"
#include "session.h"

#define ANSWER_TIMEOUT_MS 30000u
#define OWNER "a/1/1" /* node/pid/op, as vmm_lock_owner() makes them */

static struct event_base *base;
static struct repl_session *session;
static bool link_up, link_lost, stdin_ready;
static uint64_t next_lsn = 1;
static uint64_t pool_frames; /* b's too */
static uint64_t speak_epoch; /* 0: b's */
/* `hold`: b's requests not answered yet, by sequence number and LSN. */
static bool holding;
static struct held {
	uint64_t seq, lsn;
} held[64];
static size_t n_held;

struct answer {
	bool done;
	int status;
	char reason[256];
	bool has_landing;
	struct repl_landing landing;
	struct repl_landing landings[2]; /* the answer to ResyncLandings */
	size_t n_landings;
};

static void on_answer(const CommandComplete *cc, void *arg)
{
	struct answer *a = arg;

	a->done = true;
	a->status = cc->status;
	snprintf(a->reason, sizeof(a->reason), "%s", cc->reason ? cc->reason : "");
	a->n_landings = cc->n_landings < 2 ? cc->n_landings : 2;
	for (size_t i = 0; i < a->n_landings; i++)
		a->landings[i] = (struct repl_landing){ .frame = cc->landings[i]->frame,
							.frames = cc->landings[i]->frames,
							.generation = cc->landings[i]->generation };
	if (cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LANDING) {
		a->has_landing = true;
		a->landing = (struct repl_landing){ .frame = cc->landing->frame,
						    .frames = cc->landing->frames,
						    .generation = cc->landing->generation };
	}
}

static void on_link(struct repl_session *s, bool up, const char *reason, void *arg)
{
	struct repl_session_stats st;

	(void)arg;
	if (!up) {
		fprintf(stderr, "ftvm-fake-originator: link down: %s\n", reason);
		link_lost = true;
		event_base_loopbreak(base);
		return;
	}
	/* Speak at b's epoch, or b refuses everything as stale. */
	repl_session_get_stats(s, &st);
	repl_session_set_epoch(s, speak_epoch ? speak_epoch : st.partner_epoch);
	link_up = true;
}

/* b mirrors its own clients' work here: everything is acknowledged. */
static void on_request(struct repl_session *s, Envelope *const *envs, size_t n, void *arg)
{
	(void)arg;
	if (holding) {
		for (size_t i = 0; i < n && n_held < sizeof(held) / sizeof(held[0]); i++)
			held[n_held++] = (struct held){ envs[i]->seq, envs[i]->lsn };
		printf("held: %zu\n", n_held);
		fflush(stdout);
		return;
	}
	for (size_t i = 0; i < n; i++) {
		CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
		Ftvm__Partner__SpaceStatus space = FTVM__PARTNER__SPACE_STATUS__INIT;
		struct repl_answer a = { envs[i]->seq, &cc };

		if (envs[i]->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST) {
			space.free_bytes = UINT64_C(1) << 40;
			cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE;
			cc.space = &space;
		}
		cc.applied_lsn = envs[i]->lsn;
		repl_session_answer(s, &a, 1);
	}
}

static const struct repl_session_callbacks callbacks = {
	.link_changed = on_link,
	.request = on_request,
};

static void on_stdin(evutil_socket_t fd, short what, void *arg)
{
	(void)fd, (void)what, (void)arg;
	stdin_ready = true;
	event_base_loopbreak(base);
}

/* Runs the loop until every answer came; false when the link went or the
 * answers did not come in time. */
static bool wait_answers(struct answer *a, size_t n)
{
	uint64_t deadline = clock_now_ms() + ANSWER_TIMEOUT_MS;

	for (;;) {
		size_t done = 0;

		for (size_t i = 0; i < n; i++)
			done += a[i].done;
		if (done == n)
			return true;
		if (link_lost || clock_now_ms() > deadline)
			return false;
		event_base_loop(base, EVLOOP_ONCE);
	}
}

static void print_answer(const char *name, const struct answer *a)
{
	printf("%s: %s %s\n", name, codec_status_name(a->status), a->reason);
}

static void envelope_init(Envelope *env)
{
	*env = (Envelope)FTVM__PARTNER__ENVELOPE__INIT;
	env->lsn = next_lsn++;
}

/* LockRequest + AllocateWrite to the owner: the landing, if b gave one. */
static int lock_page(char *guid, uint64_t page, struct answer ans[2])
{
	Ftvm__Partner__LockRequest lr = FTVM__PARTNER__LOCK_REQUEST__INIT;
	Ftvm__Partner__AllocateWrite aw = FTVM__PARTNER__ALLOCATE_WRITE__INIT;
	Envelope envs[2];
	Envelope *ep[2] = { &envs[0], &envs[1] };
	void *args[2] = { &ans[0], &ans[1] };

	lr.guid = aw.guid = guid;
	lr.page = aw.page = page;
	lr.mode = FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE;
	aw.owner = OWNER;
	envelope_init(&envs[0]);
	envs[0].lsn = 0; /* a question, not a change */
	envs[0].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_LOCK_REQUEST;
	envs[0].lock_request = &lr;
	envelope_init(&envs[1]);
	envs[1].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_WRITE;
	envs[1].allocate_write = &aw;
	if (repl_session_request_batch(session, ep, 2, ANSWER_TIMEOUT_MS, on_answer, args) < 0 ||
	    !wait_answers(ans, 2))
		return -EIO;
	print_answer("lock", &ans[0]);
	print_answer("allocate_write", &ans[1]);
	if (ans[1].has_landing)
		printf("locked landing=frame:%" PRIu64 ",frames:%" PRIu32 ",generation:%" PRIu64
		       "\n",
		       ans[1].landing.frame, ans[1].landing.frames, ans[1].landing.generation);
	else
		printf("locked landing=none\n");
	return ans[1].status == FTVM__PARTNER__STATUS__STATUS_OK ? 0 : -EACCES;
}

static int release_page(char *guid, uint64_t page, bool modified, struct answer *ans)
{
	Ftvm__Partner__ReleasePointer rp = FTVM__PARTNER__RELEASE_POINTER__INIT;
	Envelope env;

	rp.guid = guid;
	rp.page = page;
	rp.owner = OWNER;
	rp.modified = modified;
	envelope_init(&env);
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER;
	env.release_pointer = &rp;
	if (repl_session_request(session, &env, ANSWER_TIMEOUT_MS, on_answer, ans) < 0 ||
	    !wait_answers(ans, 1))
		return -EIO;
	print_answer("release", ans);
	return 0;
}

/* WritePage naming landing, and for a good one the modified release in the
 * same batch; the block goes one-sided to `to` unless inline. */
static int write_landed(char *guid, uint64_t page, const uint8_t *block, size_t len, uint32_t crc,
			const struct repl_landing *named, const struct repl_landing *to,
			bool release)
{
	Ftvm__Partner__WritePage wp = FTVM__PARTNER__WRITE_PAGE__INIT;
	Ftvm__Partner__Landing landed = FTVM__PARTNER__LANDING__INIT;
	Ftvm__Partner__ReleasePointer rp = FTVM__PARTNER__RELEASE_POINTER__INIT;
	struct answer ans[2] = { { 0 } };
	Envelope envs[2];
	Envelope *ep[2] = { &envs[0], &envs[1] };
	void *args[2] = { &ans[0], &ans[1] };
	size_t n = release ? 2 : 1;
	int r;

	wp.guid = rp.guid = guid;
	wp.page = rp.page = page;
	wp.crc32c = crc;
	landed.frame = named->frame;
	landed.frames = named->frames;
	landed.generation = named->generation;
	wp.landed = &landed;
	rp.owner = OWNER;
	rp.modified = true;
	envelope_init(&envs[0]);
	envs[0].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
	envs[0].write_page = &wp;
	envelope_init(&envs[1]);
	envs[1].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER;
	envs[1].release_pointer = &rp;
	if (to) {
		struct repl_page_write w = { .src = block, .len = len, .to = *to };

		r = repl_session_request_batch_landed(session, ep, n, ANSWER_TIMEOUT_MS, on_answer,
						      args, &w, 1);
	} else {
		r = repl_session_request_batch(session, ep, n, ANSWER_TIMEOUT_MS, on_answer, args);
	}
	if (r < 0) {
		printf("write_page: not sent: %s\n", strerror(-r));
		return r;
	}
	if (!wait_answers(ans, n))
		return -EIO;
	print_answer("write_page", &ans[0]);
	if (release)
		print_answer("release", &ans[1]);
	return ans[0].status == FTVM__PARTNER__STATUS__STATUS_OK ? 0 : -EACCES;
}

/* One-sided into the landing, followed by a SenseRequest only; then gone. */
static void write_and_die(uint8_t *block, size_t len, const struct repl_landing *to)
{
	Ftvm__Partner__SenseRequest sr = FTVM__PARTNER__SENSE_REQUEST__INIT;
	struct repl_page_write w = { .src = block, .len = len, .to = *to };
	struct answer ans = { 0 };
	Envelope env;
	Envelope *ep = &env;
	void *arg = &ans;
	int r;

	envelope_init(&env);
	env.lsn = 0;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SENSE_REQUEST;
	env.sense_request = &sr;
	r = repl_session_request_batch_landed(session, &ep, 1, ANSWER_TIMEOUT_MS, on_answer, &arg,
					      &w, 1);
	if (r < 0) {
		printf("cut: not sent: %s\n", strerror(-r));
		exit(1);
	}
	wait_answers(&ans, 1);
	printf("cut: written one-sided, no WritePage; exiting\n");
	fflush(stdout);
	_exit(0);
}

static int run_write(char *guid, uint64_t page, const char *how, uint8_t *pool, uint32_t page_size)
{
	struct answer lock[2] = { { 0 } }, rel = { 0 };
	struct repl_landing named;
	size_t len;
	uint32_t crc;
	int r = lock_page(guid, page, lock);

	if (r < 0)
		return r == -EACCES ? 0 : r;
	len = (size_t)(lock[1].has_landing ? lock[1].landing.frames : 1) * page_size;
	memset(pool, 0x5a, len);
	crc = crc32c(0, pool, len);
	named = lock[1].landing;
	if (strcmp(how, "landed") == 0) {
		/* b's last frame: its lock landings and grants come first fit. */
		named = (struct repl_landing){ .frame = pool_frames - 1,
					       .frames = 1,
					       .generation = 1 };
		r = write_landed(guid, page, pool, len, crc, &named, NULL, false);
	} else if (!lock[1].has_landing) {
		printf("write_page: not sent: no landing\n");
		r = -EACCES;
	} else if (strcmp(how, "cut") == 0) {
		write_and_die(pool, len, &lock[1].landing);
	} else if (strcmp(how, "good") == 0) {
		return write_landed(guid, page, pool, len, crc, &named, &lock[1].landing, true) ==
				       -EIO
			       ? -EIO
			       : 0;
	} else if (strcmp(how, "badcrc") == 0) {
		r = write_landed(guid, page, pool, len, crc ^ 1, &named, &lock[1].landing, false);
	} else if (strcmp(how, "stale") == 0) {
		named.generation++;
		r = write_landed(guid, page, pool, len, crc, &named, &lock[1].landing, false);
	} else {
		fprintf(stderr, "ftvm-fake-originator: unknown write '%s'\n", how);
		r = -EACCES;
	}
	if (r == -EIO)
		return r;
	return release_page(guid, page, false, &rel);
}

/* One request alone; false when no answer came. */
static bool request(Envelope *env, struct answer *ans)
{
	return repl_session_request(session, env, ANSWER_TIMEOUT_MS, on_answer, ans) == 0 &&
	       wait_answers(ans, 1);
}

/* The change a survivor mirrors after its snapshot: page 0 written again. */
static int mirror_write(char *guid, const uint8_t *block, size_t len)
{
	Ftvm__Partner__AllocateWrite aw = FTVM__PARTNER__ALLOCATE_WRITE__INIT;
	Ftvm__Partner__WritePage wp = FTVM__PARTNER__WRITE_PAGE__INIT;
	Ftvm__Partner__ReleasePointer rp = FTVM__PARTNER__RELEASE_POINTER__INIT;
	struct answer ans[3] = { { 0 } };
	Envelope envs[3];
	Envelope *ep[3] = { &envs[0], &envs[1], &envs[2] };
	void *args[3] = { &ans[0], &ans[1], &ans[2] };

	aw.guid = wp.guid = rp.guid = guid;
	aw.owner = rp.owner = OWNER;
	wp.data.data = (uint8_t *)block;
	wp.data.len = len;
	wp.crc32c = crc32c(0, block, len);
	rp.modified = true;
	rp.version = 2;
	for (int i = 0; i < 3; i++)
		envelope_init(&envs[i]);
	envs[0].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_WRITE;
	envs[0].allocate_write = &aw;
	envs[1].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE;
	envs[1].write_page = &wp;
	envs[2].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RELEASE_POINTER;
	envs[2].release_pointer = &rp;
	if (repl_session_request_batch(session, ep, 3, ANSWER_TIMEOUT_MS, on_answer, args) < 0 ||
	    !wait_answers(ans, 3))
		return -EIO;
	/* The first failure, if any: the rest of the batch is ABORTED. */
	for (int i = 0; i < 3; i++)
		if (ans[i].status || i == 2) {
			print_answer("mirrored", &ans[i]);
			break;
		}
	return 0;
}

/* A snapshot block of page, at version 1, into landing when there is one. */
static int resync_page(char *guid, uint64_t page, const uint8_t *block, size_t len,
		       const struct repl_landing *landing)
{
	Ftvm__Partner__ResyncPage m = FTVM__PARTNER__RESYNC_PAGE__INIT;
	Ftvm__Partner__PageState state = FTVM__PARTNER__PAGE_STATE__INIT;
	Ftvm__Partner__Landing named = FTVM__PARTNER__LANDING__INIT;
	struct answer ans = { 0 };
	Envelope env, *ep = &env;
	void *arg = &ans;
	char name[16];
	int r;

	state.version = 1;
	state.crc32c = crc32c(0, block, len);
	state.dirty = true;
	m.guid = guid;
	m.page = page;
	m.state = &state;
	envelope_init(&env);
	env.lsn = 0;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE;
	env.resync_page = &m;
	if (landing) {
		struct repl_page_write w = { .src = block, .len = len, .to = *landing };

		named.frame = landing->frame;
		named.frames = landing->frames;
		named.generation = landing->generation;
		m.landed = &named;
		r = repl_session_request_batch_landed(session, &ep, 1, ANSWER_TIMEOUT_MS, on_answer,
						      &arg, &w, 1);
	} else {
		m.data.data = (uint8_t *)block;
		m.data.len = len;
		r = repl_session_request(session, &env, ANSWER_TIMEOUT_MS, on_answer, &ans);
	}
	if (r < 0 || !wait_answers(&ans, 1))
		return -EIO;
	snprintf(name, sizeof(name), "page%" PRIu64, page);
	print_answer(name, &ans);
	return 0;
}

static int run_resync(char *guid, uint64_t offset, uint8_t *pool, uint32_t page_size)
{
	Ftvm__Partner__ResyncBegin begin = FTVM__PARTNER__RESYNC_BEGIN__INIT;
	Ftvm__Partner__ResyncAllocation ra = FTVM__PARTNER__RESYNC_ALLOCATION__INIT;
	Ftvm__Partner__AllocateMemory am = FTVM__PARTNER__ALLOCATE_MEMORY__INIT;
	Ftvm__Partner__PageState states[2], *state_ptrs[2] = { &states[0], &states[1] };
	Ftvm__Partner__ResyncLandings rl = FTVM__PARTNER__RESYNC_LANDINGS__INIT;
	Ftvm__Partner__ResyncEnd end = FTVM__PARTNER__RESYNC_END__INIT;
	uint32_t frames[2] = { 1, 1 };
	uint8_t *block[3] = { pool, pool + page_size, pool + 2 * page_size };
	struct answer ans = { 0 }, lands = { 0 };
	Envelope env;

	for (int i = 0; i < 3; i++)
		memset(block[i], i + 1, page_size);
	envelope_init(&env);
	begin.epoch = speak_epoch;
	begin.allocations = 1;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_BEGIN;
	env.resync_begin = &begin;
	if (!request(&env, &ans))
		return -EIO;
	print_answer("begin", &ans);

	am.guid = guid;
	am.size = 2 * page_size;
	am.block_size = page_size;
	am.policy = "default";
	am.home = "a";
	am.store_offset = offset;
	for (int i = 0; i < 2; i++) {
		ftvm__partner__page_state__init(&states[i]);
		states[i].version = 1;
		states[i].crc32c = crc32c(0, block[i], page_size);
		states[i].dirty = true;
	}
	ra.allocation = &am;
	ra.owner = "a";
	ra.n_pages = 2;
	ra.pages = state_ptrs;
	envelope_init(&env);
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_ALLOCATION;
	env.resync_allocation = &ra;
	memset(&ans, 0, sizeof(ans));
	if (!request(&env, &ans))
		return -EIO;
	print_answer("allocation", &ans);

	rl.n_frames = 2;
	rl.frames = frames;
	envelope_init(&env);
	env.lsn = 0;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS;
	env.resync_landings = &rl;
	if (!request(&env, &lands))
		return -EIO;
	printf("landings: %zu\n", lands.n_landings);

	if (mirror_write(guid, block[2], page_size) < 0 ||
	    resync_page(guid, 0, block[0], page_size,
			lands.n_landings > 0 ? &lands.landings[0] : NULL) < 0 ||
	    resync_page(guid, 1, block[1], page_size,
			lands.n_landings > 1 ? &lands.landings[1] : NULL) < 0)
		return -EIO;

	end.epoch = speak_epoch;
	end.lsn = next_lsn - 1;
	envelope_init(&env);
	env.lsn = 0;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_END;
	env.resync_end = &end;
	memset(&ans, 0, sizeof(ans));
	if (!request(&env, &ans))
		return -EIO;
	print_answer("end", &ans);
	return 0;
}

static int run_alloc(char *guid, uint64_t size, uint64_t offset, uint32_t page_size)
{
	Ftvm__Partner__AllocateMemory am = FTVM__PARTNER__ALLOCATE_MEMORY__INIT;
	struct answer ans = { 0 };
	Envelope env;

	am.guid = guid;
	am.size = size;
	am.block_size = page_size;
	am.policy = "default";
	am.home = "a";
	am.store_offset = offset;
	envelope_init(&env);
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY;
	env.allocate_memory = &am;
	if (!request(&env, &ans))
		return -EIO;
	print_answer("alloc", &ans);
	return 0;
}

static int run_hold(void)
{
	holding = true;
	return 0;
}

static int run_epoch(uint64_t epoch)
{
	speak_epoch = epoch;
	repl_session_set_epoch(session, epoch);
	return 0;
}

/* Every held request answered with the status named; -EINVAL: no such name. */
static int run_answer(const char *name)
{
	CommandComplete cc[sizeof(held) / sizeof(held[0])];
	struct repl_answer answers[sizeof(held) / sizeof(held[0])];
	int status = 0;

	while (strcmp(codec_status_name(status), name) != 0)
		if (++status > FTVM__PARTNER__STATUS__STATUS_FENCED)
			return -EINVAL;
	for (size_t i = 0; i < n_held; i++) {
		ftvm__partner__command_complete__init(&cc[i]);
		cc[i].status = status;
		cc[i].reason = "answered by the test";
		cc[i].applied_lsn = status ? 0 : held[i].lsn;
		answers[i] = (struct repl_answer){ held[i].seq, &cc[i] };
	}
	repl_session_answer(session, answers, n_held);
	printf("answered: %zu\n", n_held);
	n_held = 0;
	holding = false;
	return 0;
}

static int run_wait(char *guid, uint64_t page, uint32_t wait_ms)
{
	Ftvm__Partner__LockRequest lr = FTVM__PARTNER__LOCK_REQUEST__INIT;
	struct answer ans = { 0 };
	Envelope env;

	lr.guid = guid;
	lr.page = page;
	lr.mode = FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE;
	lr.ticket = 77;
	lr.wait_ms = wait_ms;
	envelope_init(&env);
	env.lsn = 0; /* a question, not a change */
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_LOCK_REQUEST;
	env.lock_request = &lr;
	if (!request(&env, &ans))
		return -EIO;
	print_answer("wait", &ans);
	return 0;
}

int main(int argc, char **argv)
{
	struct repl_session_config cfg = { 0 };
	static uint8_t key[KEYFILE_MAX];
	struct event *stdin_ev;
	char reason[256], *line = NULL;
	size_t cap = 0;
	uint8_t *pool;
	uint64_t deadline;

	if (argc != 6 && argc != 7) {
		fprintf(stderr, "usage: ftvm-fake-originator LISTEN PARTNER TRANSPORT PAGE_SIZE "
				"FRAMES [EPOCH]\n");
		return 2;
	}
	if (argc == 7)
		speak_epoch = strtoull(argv[6], NULL, 10);
	cfg.node_id = "a";
	cfg.listen = argv[1];
	cfg.partner = argv[2];
	cfg.transport = repl_transport_select(argv[3], argv[1], reason, sizeof(reason));
	cfg.page_size = (uint32_t)strtoul(argv[4], NULL, 10);
	cfg.frame_count = strtoull(argv[5], NULL, 10);
	pool_frames = cfg.frame_count;
	cfg.epoch = speak_epoch ? speak_epoch : 1;
	cfg.heartbeat_ms = 50;
	cfg.dead_after_ms = 60000;
	cfg.max_payload = 8u << 20;
	/* The pair's key, when the node under test has one. */
	if (getenv("FTVM_KEY_FILE")) {
		if (keyfile_load(getenv("FTVM_KEY_FILE"), key, &cfg.key_len, reason,
				 sizeof(reason)) < 0) {
			fprintf(stderr, "ftvm-fake-originator: %s\n", reason);
			return 2;
		}
		cfg.key = key;
	}
	if (!cfg.transport || !cfg.page_size || !cfg.frame_count) {
		fprintf(stderr, "ftvm-fake-originator: %s\n",
			cfg.transport ? "bad PAGE_SIZE or FRAMES" : reason);
		return 2;
	}
	pool = mmap(NULL, cfg.frame_count * cfg.page_size, PROT_READ | PROT_WRITE,
		    MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (pool == MAP_FAILED)
		return 1;
	cfg.pool_base = pool;
	cfg.pool_block_frames = cfg.frame_count;
	base = event_base_new();
	if (!base || repl_session_new(base, &cfg, &callbacks, NULL, &session) < 0 ||
	    repl_session_start(session) < 0) {
		fprintf(stderr, "ftvm-fake-originator: cannot start the session on %s\n",
			cfg.listen);
		return 1;
	}
	deadline = clock_now_ms() + ANSWER_TIMEOUT_MS;
	while (!link_up && clock_now_ms() < deadline)
		event_base_loop(base, EVLOOP_ONCE);
	if (!link_up) {
		fprintf(stderr, "ftvm-fake-originator: no link to b at %s\n", cfg.partner);
		return 1;
	}
	printf("linked one_sided=%s\n", repl_session_one_sided(session) ? "yes" : "no");
	fflush(stdout);
	/* Unbuffered: a line read leaves the next one to the loop's event. */
	setvbuf(stdin, NULL, _IONBF, 0);
	stdin_ev = event_new(base, STDIN_FILENO, EV_READ | EV_PERSIST, on_stdin, NULL);
	event_add(stdin_ev, NULL);
	for (;;) {
		char guid[80], how[16];
		uint64_t page, size, offset, epoch;
		uint32_t wait_ms;
		int r;

		stdin_ready = false;
		while (!stdin_ready && !link_lost)
			event_base_loop(base, 0);
		if (link_lost)
			return 1;
		if (getline(&line, &cap, stdin) < 0)
			break;
		if (sscanf(line, "resync %79s %" SCNu64, guid, &offset) == 2) {
			if (run_resync(guid, offset, pool, cfg.page_size) < 0) {
				fprintf(stderr, "ftvm-fake-originator: no answer from b\n");
				return 1;
			}
			fflush(stdout);
			continue;
		}
		if (sscanf(line, "alloc %79s %" SCNu64 " %" SCNu64, guid, &size, &offset) == 3)
			r = run_alloc(guid, size, offset, cfg.page_size);
		else if (sscanf(line, "wait %79s %" SCNu64 " %" SCNu32, guid, &page, &wait_ms) == 3)
			r = run_wait(guid, page, wait_ms);
		else if (sscanf(line, "write %79s %" SCNu64 " %15s", guid, &page, how) == 3)
			r = run_write(guid, page, how, pool, cfg.page_size);
		else if (strcmp(line, "hold\n") == 0)
			r = run_hold();
		else if (sscanf(line, "epoch %" SCNu64, &epoch) == 1)
			r = run_epoch(epoch);
		else if (sscanf(line, "answer %15s", how) == 1 && run_answer(how) == 0)
			r = 0;
		else {
			fprintf(stderr, "ftvm-fake-originator: bad command: %s", line);
			return 2;
		}
		if (r < 0) {
			fprintf(stderr, "ftvm-fake-originator: no answer from b\n");
			return 1;
		}
		fflush(stdout);
	}
	free(line);
	event_free(stdin_ev);
	repl_session_free(session);
	event_base_free(base);
	return 0;
}
