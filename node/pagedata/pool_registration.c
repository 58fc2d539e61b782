/* The frame pool's registration blocks and the partner channel (vmm/VMM.md,
 * "The pool grows before it evicts"; replica/RDMA.md, "The pool grows and
 * shrinks"). vmm/frame_pool.c decides when a block comes in (a take with no free
 * run) and whether one may leave (frame_pool_shrink); here a block's coming
 * and going is told to the session, and a tick on the event loop lets one
 * block go at a time, lets the staging slabs idle since the last tick go,
 * and purges stale registrations once no RDMA WRITE is in flight. */
#include "vmm_core.h"

#include "pagedata_state.h"

#include <errno.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM
#define POOL_TICK_MS 500

static void log_blocks(struct pagedata *pd, uint32_t block, bool in)
{
	struct frame_pool_stats st;

	frame_pool_get_stats(pd->pool, &st);
	log_info(
		"frame pool: block %u %s (%u of %u blocks of %llu frames in use, %llu frames free)",
		block, in ? "comes into use" : "leaves, its memory back to the OS",
		st.blocks_in_use, st.blocks, (unsigned long long)st.block_frames,
		(unsigned long long)frame_pool_free_count(pd->pool));
}

static void tell_session(struct pagedata *pd, uint32_t block, bool in)
{
	char reason[160];
	int r = in ? repl_session_pool_block_in(pd->session, block, reason, sizeof(reason))
		   : repl_session_pool_block_out(pd->session, block, reason, sizeof(reason));

	/* A table that disagrees with the pool means a bug here: the block
	 * then stays as the table had it, and its landings go inline. */
	if (r < 0)
		log_warning("frame pool block %u %s the registration table: %s", block,
			    in ? "cannot rejoin" : "cannot leave", reason);
}

static void on_block(uint32_t block, bool in, void *arg)
{
	struct pagedata *pd = arg;

	log_blocks(pd, block, in);
	tell_session(pd, block, in);
}

static void purge(struct pagedata *pd)
{
	struct repl_pool_stats st;
	char reason[160];
	int r;

	repl_session_pool_stats(pd->session, &st);
	if (!st.stale)
		return;
	r = repl_session_pool_purge(pd->session, reason, sizeof(reason));
	if (r > 0)
		log_info("frame pool: %d stale registration(s) purged", r);
	else if (r < 0 && r != -EBUSY) /* busy: the next tick tries again */
		log_warning("frame pool: purging stale registrations: %s", reason);
}

static void on_tick(evutil_socket_t fd, short what, void *arg)
{
	struct pagedata *pd = arg;
	uint32_t block;
	int r = frame_pool_shrink(pd->pool, &block);

	if (r < 0)
		log_warning("frame pool block %u left, but its memory did not go back: %s", block,
			    strerror(-r));
	repl_session_staging_trim(pd->session);
	purge(pd);
}

int pagedata_start(struct pagedata *pd, struct repl_session *session)
{
	struct frame_pool_stats st;
	struct timeval every = { POOL_TICK_MS / 1000, POOL_TICK_MS % 1000 * 1000 };

	pd->session = session;
	pd->pool_tick = event_new(pd->base, -1, EV_PERSIST, on_tick, pd);
	if (!pd->pool_tick)
		return -ENOMEM;
	/* The session's table starts with every block in it; the blocks not in
	 * use (never, or not since the page table was loaded) leave it. */
	frame_pool_get_stats(pd->pool, &st);
	for (uint32_t b = 0; b < st.blocks; b++)
		if (!frame_pool_block_in_use(pd->pool, b))
			tell_session(pd, b, false);
	frame_pool_set_block_fn(pd->pool, on_block, pd);
	event_add(pd->pool_tick, &every);
	return 0;
}

void pagedata_stop(struct pagedata *pd)
{
	if (pd->pool_tick)
		event_free(pd->pool_tick);
	pd->pool_tick = NULL;
	if (pd->pool)
		frame_pool_set_block_fn(pd->pool, NULL, NULL);
}

void pagedata_pool_counts(struct pagedata *pd, struct status_counts *ret)
{
	struct frame_pool_stats st;
	struct repl_pool_stats reg = { 0 };

	frame_pool_get_stats(pd->pool, &st);
	ret->pool_blocks = st.blocks;
	ret->pool_blocks_in_use = st.blocks_in_use;
	ret->pool_block_bytes = st.block_frames * frame_pool_page_size(pd->pool);
	ret->pool_grown = st.grown;
	ret->pool_shrunk = st.shrunk;
	if (pd->session)
		repl_session_pool_stats(pd->session, &reg);
	ret->registrations_current = reg.current;
	ret->registrations_stale = reg.stale;
	ret->registrations_purged = reg.purged;
	ret->registrations_failed = reg.failed;
	ret->staging_slabs = reg.staging_slabs;
	ret->staging_allocated = reg.staging_allocated;
}
