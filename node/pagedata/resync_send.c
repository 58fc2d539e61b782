/* A resync's blocks on the node that sends it, S (node/ha/HA.md, "Solo and
 * rejoin"; replica/RDMA.md, "Resync"). ha/resync.c sends the rest of the
 * resync and hands each page's block here in the snapshot turn:
 *
 *   snapshot turn  each block: on a one-sided link copied to a staging run
 *                  of free frames (half those free at the snapshot, at
 *                  most); otherwise, or none to spare, ResyncPage{data}
 *                  inline now. Then ResyncLandings{frames} for the first
 *                  VMM_RESYNC_CHUNK staged (none staged, or not sent: they
 *                  go inline now, and the resync sends ResyncEnd itself)
 *   its answer     the chunk's blocks that got a run: RDMA WRITEs and the
 *                  ResyncPage{state, landed}s in one batch behind them; the
 *                  chunk's others inline; then the next chunk's
 *                  ResyncLandings, or after the last the resync's
 *                  blocks_out() (ResyncEnd, behind every block)
 *   each answer    a landed ResyncPage's: its staging run back to the pool
 *
 * No runs in the answer, an older receiver's UNSUPPORTED, a batch the
 * session cannot write one-sided now: those blocks go inline. The WRITE
 * reads the staging run, never the page's frames, which a client's write
 * pointer may change after the snapshot. Each request sent here is one of
 * the resync's outstanding ones (calls.sent) until answered
 * (calls.answered). */
#include "vmm_core.h"

#include "pagedata_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "frame_pool.h"

/* A block copied in the snapshot turn, for a one-sided write later. */
struct staged {
	struct pagedata_resync_out *out;
	char *guid;
	uint64_t page;
	uint32_t block_size;
	Ftvm__Partner__PageState state;
	uint64_t frame; /* the staging run, in this node's pool */
	bool holds;	/* the run is still out of the pool */
	struct repl_landing to;
};

struct pagedata_resync_out {
	struct pagedata *pd;
	struct pagedata_resync_calls calls;
	/* One-sided: the staged blocks, the frames staging may still take; the
	 * chunk of them whose runs were asked for, and how many came. */
	bool one_sided;
	uint64_t stage_budget;
	struct staged *staged;
	size_t n_staged, cap_staged, chunk_first, chunk_n, n_landed;
};

struct pagedata_resync_out *pagedata_resync_out_new(struct pagedata *pd,
						    const struct pagedata_resync_calls *calls)
{
	struct pagedata_resync_out *out = calloc(1, sizeof(*out));

	if (!out)
		return NULL;
	out->pd = pd;
	out->calls = *calls;
	out->one_sided = repl_session_one_sided(pd->session);
	out->stage_budget = frame_pool_free_count(pd->pool) / 2;
	return out;
}

static void give_back(struct pagedata_resync_out *out, struct staged *b)
{
	struct pagedata *pd = out->pd;

	if (b->holds)
		frame_pool_give(pd->pool, b->frame, b->block_size / pd->config->page_size);
	b->holds = false;
}

void pagedata_resync_out_free(struct pagedata_resync_out *out)
{
	if (!out)
		return;
	for (size_t i = 0; i < out->n_staged; i++) {
		give_back(out, &out->staged[i]);
		free(out->staged[i].guid);
	}
	free(out->staged);
	free(out);
}

/* A request for the resync, answered to done: one more outstanding. */
static int request(struct pagedata_resync_out *out, Envelope *env, pending_done_fn done, void *arg)
{
	int r = vmm_partner_send(out->pd->vmm, &env, 1, NULL, 0, done, &arg);

	if (r == 0)
		out->calls.sent(1, out->calls.arg);
	return r;
}

static int send_inline(struct pagedata_resync_out *out, const char *guid, uint64_t page,
		       const void *data, uint32_t block_size, const Ftvm__Partner__PageState *state)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__ResyncPage m = FTVM__PARTNER__RESYNC_PAGE__INIT;
	int r;

	m.guid = (char *)guid;
	m.page = page;
	m.data.data = (uint8_t *)data;
	m.data.len = block_size;
	m.state = (Ftvm__Partner__PageState *)state;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE;
	env.resync_page = &m;
	r = request(out, &env, out->calls.answered, out->calls.arg);
	if (r == 0)
		out->pd->counted.resync_pages_inline++;
	return r;
}

/* The block copied to a staging run of free frames, for a one-sided write
 * once the receiver gave a run: the page's own frames may change meanwhile
 * (a client's write pointer), the staging run does not. -ENOSPC: no frames
 * to spare (half of those free at the snapshot, at most); it goes inline. */
static int stage(struct pagedata_resync_out *out, const char *guid, uint64_t page,
		 const void *block, uint32_t block_size, const Ftvm__Partner__PageState *state)
{
	struct frame_pool *pool = out->pd->pool;
	uint32_t frames = block_size / out->pd->config->page_size;
	struct staged *b, *grown;
	uint64_t first;

	if (frames > out->stage_budget || frame_pool_take(pool, frames, &first) < 0)
		return -ENOSPC;
	if (out->n_staged == out->cap_staged) {
		size_t cap = out->cap_staged ? 2 * out->cap_staged : 64;

		grown = realloc(out->staged, cap * sizeof(*grown));
		if (!grown) {
			frame_pool_give(pool, first, frames);
			return -ENOMEM;
		}
		out->staged = grown;
		out->cap_staged = cap;
	}
	b = &out->staged[out->n_staged];
	memset(b, 0, sizeof(*b));
	b->guid = strdup(guid);
	if (!b->guid) {
		frame_pool_give(pool, first, frames);
		return -ENOMEM;
	}
	out->n_staged++;
	out->stage_budget -= frames;
	b->out = out;
	b->page = page;
	b->block_size = block_size;
	b->state = *state;
	b->frame = first;
	b->holds = true;
	memcpy(frame_pool_addr(pool, first), block, block_size);
	return 0;
}

int pagedata_resync_out_page(struct pagedata_resync_out *out, const char *guid, uint64_t page,
			     const void *block, uint32_t block_size,
			     const Ftvm__Partner__PageState *state)
{
	if (out->one_sided && stage(out, guid, page, block, block_size, state) == 0)
		return 0;
	return send_inline(out, guid, page, block, block_size, state);
}

/* A landed ResyncPage answered: the WRITE is over, its staging run free. */
static void on_landed_answer(const CommandComplete *cc, void *arg)
{
	struct staged *b = arg;
	struct pagedata_resync_out *out = b->out;

	give_back(out, b);
	out->calls.answered(cc, out->calls.arg);
}

static int compare_landing(const void *x, const void *y)
{
	const struct repl_page_write *a = x, *b = y;

	return a->to.frame < b->to.frame ? -1 : a->to.frame > b->to.frame;
}

/* The chunk's blocks that got a run, in one batch behind their WRITEs
 * (sorted by landing frame: neighbouring runs coalesce into fewer work
 * requests; the transport posts them as write slots free). A fallback error
 * from the session: they go inline instead. */
static int send_landed(struct pagedata_resync_out *out)
{
	struct pagedata *pd = out->pd;
	size_t n = out->n_landed;
	Envelope *envs = calloc(n, sizeof(*envs)), **env_ptrs = calloc(n, sizeof(*env_ptrs));
	Ftvm__Partner__ResyncPage *pages = calloc(n, sizeof(*pages));
	Ftvm__Partner__Landing *named = calloc(n, sizeof(*named));
	struct repl_page_write *writes = calloc(n, sizeof(*writes));
	void **args = calloc(n, sizeof(*args));
	int r = -ENOMEM;

	if (!envs || !env_ptrs || !pages || !named || !writes || !args)
		goto finish;
	for (size_t i = 0; i < n; i++) {
		struct staged *b = &out->staged[out->chunk_first + i];

		ftvm__partner__envelope__init(&envs[i]);
		ftvm__partner__resync_page__init(&pages[i]);
		ftvm__partner__landing__init(&named[i]);
		named[i].frame = b->to.frame;
		named[i].frames = b->to.frames;
		named[i].generation = b->to.generation;
		pages[i].guid = b->guid;
		pages[i].page = b->page;
		pages[i].state = &b->state;
		pages[i].landed = &named[i];
		envs[i].message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE;
		envs[i].resync_page = &pages[i];
		env_ptrs[i] = &envs[i];
		args[i] = b;
		writes[i].src = frame_pool_addr(pd->pool, b->frame);
		writes[i].len = b->block_size;
		writes[i].to = b->to;
	}
	qsort(writes, n, sizeof(*writes), compare_landing);
	r = vmm_partner_send(pd->vmm, env_ptrs, n, writes, n, on_landed_answer, args);
	if (r == 0) {
		out->calls.sent(n, out->calls.arg);
		pd->counted.resync_pages_one_sided += n;
	}
finish:
	free(envs);
	free(env_ptrs);
	free(pages);
	free(named);
	free(writes);
	free(args);
	return r;
}

/* The staged blocks from first on inline (from their staging runs). */
static int send_staged_inline(struct pagedata_resync_out *out, size_t first, size_t end)
{
	int r = 0;

	for (size_t i = first; r == 0 && i < end; i++) {
		struct staged *b = &out->staged[i];

		r = send_inline(out, b->guid, b->page, frame_pool_addr(out->pd->pool, b->frame),
				b->block_size, &b->state);
		give_back(out, b); /* the session copied the block */
	}
	return r;
}

/* The resync told that a request it counted is over, with status; the last
 * one it waits for may end it (and free out). */
static void answered(struct pagedata_resync_out *out, int status, const char *reason)
{
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

	cc.status = status;
	cc.reason = (char *)reason;
	out->calls.answered(&cc, out->calls.arg);
}

static int send_landings_request(struct pagedata_resync_out *out);

/* After ResyncLandings' answer: the chunk's blocks that got a run
 * one-sided, the others inline; then the next chunk's ResyncLandings, or
 * after the last the resync's blocks_out (ResyncEnd: after every page, on
 * the same link). */
static void send_rest(evutil_socket_t fd, short what, void *arg)
{
	struct pagedata_resync_out *out = arg;
	size_t done = out->chunk_first + out->chunk_n, inline_from = out->chunk_first;
	int r = 0;

	if (out->n_landed) {
		r = send_landed(out);
		if (r == 0)
			inline_from += out->n_landed;
		else if (repl_session_inline_instead(r))
			r = 0;
	}
	if (r == 0)
		r = send_staged_inline(out, inline_from, done);
	if (r == 0 && done < out->n_staged) {
		if (send_landings_request(out) == 0)
			goto let_go; /* the next chunk's answer goes on */
		r = send_staged_inline(out, done, out->n_staged);
	}
	if (r == 0)
		r = out->calls.blocks_out(out->calls.arg);
let_go:
	/* The answered ResyncLandings' hold goes. */
	if (r < 0)
		answered(out, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
			 "cannot send the resync's blocks");
	else
		answered(out, FTVM__PARTNER__STATUS__STATUS_OK, "");
}

/* The receiver's runs, a prefix of what was asked (none: all inline; an
 * older receiver answers UNSUPPORTED: all inline too). The rest goes from
 * the loop, not from inside the session's delivery of this answer; until
 * then it holds the resync in the request's place. */
static void on_landings(const CommandComplete *cc, void *arg)
{
	struct pagedata_resync_out *out = arg;
	struct timeval now = { 0, 0 };
	CommandComplete seen = *cc;
	size_t k = 0;

	if (cc->status == FTVM__PARTNER__STATUS__STATUS_OK)
		for (; k < cc->n_landings && k < out->chunk_n; k++) {
			const Ftvm__Partner__Landing *l = cc->landings[k];
			struct staged *b = &out->staged[out->chunk_first + k];

			if ((uint64_t)l->frames * out->pd->config->page_size != b->block_size)
				break;
			b->to.frame = l->frame;
			b->to.frames = l->frames;
			b->to.generation = l->generation;
		}
	out->n_landed = k;
	/* Not answered (the link went, the node stops): the resync failed. */
	if ((cc->status != FTVM__PARTNER__STATUS__STATUS_OK &&
	     cc->status != FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED) ||
	    event_base_once(out->pd->base, -1, EV_TIMEOUT, send_rest, out, &now) < 0) {
		seen.status = cc->status ? cc->status : FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		out->calls.answered(&seen, out->calls.arg);
		return;
	}
	/* Its applied LSN is noted now, as any answer's. */
	seen.status = FTVM__PARTNER__STATUS__STATUS_OK;
	out->calls.sent(1, out->calls.arg);
	out->calls.answered(&seen, out->calls.arg);
}

/* Runs for the next chunk of staged blocks, in their order. ResyncEnd
 * waits for them. */
static int send_landings_request(struct pagedata_resync_out *out)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__ResyncLandings m = FTVM__PARTNER__RESYNC_LANDINGS__INIT;
	size_t first = out->chunk_first + out->chunk_n, n = out->n_staged - first;
	uint32_t frames[VMM_RESYNC_CHUNK];
	int r;

	if (n > VMM_RESYNC_CHUNK)
		n = VMM_RESYNC_CHUNK;
	for (size_t i = 0; i < n; i++)
		frames[i] = out->staged[first + i].block_size / out->pd->config->page_size;
	m.n_frames = n;
	m.frames = frames;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_LANDINGS;
	env.resync_landings = &m;
	r = request(out, &env, on_landings, out);
	if (r < 0)
		return r;
	out->chunk_first = first;
	out->chunk_n = n;
	out->n_landed = 0;
	return 0;
}

int pagedata_resync_out_send(struct pagedata_resync_out *out)
{
	int r;

	if (out->n_staged && send_landings_request(out) == 0)
		return 0;
	/* Not sent: the staged blocks go inline now, as they would have. */
	r = send_staged_inline(out, 0, out->n_staged);
	return r < 0 ? r : 1;
}
