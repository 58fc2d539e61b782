/* How a page's block reaches the partner and lands there (vmm/VMM.md,
 * "Landings"; replica/RDMA.md): the runs of free frames this node holds or
 * grants for the partner's RDMA WRITEs, the runs the partner granted this
 * node, the checks of a block that landed, a resync's blocks on either
 * side, and the frame pool's registration blocks as the partner channel
 * sees them. Over TCP none of it is used and every block goes inline. The
 * state is this component's own (pagedata_state.h); the memory manager
 * reaches it through these calls. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "partner.pb-c.h"
#include "session.h"

struct event_base;
struct frame_pool;
struct pagedata;
struct pagetable;
struct repl_session;
struct vmm;
struct vmm_alloc;
struct status_counts;

/* The component's state, with the memory manager's handles it works with
 * (v only for the calls vmm_core.h declares); no runs yet. NULL when out of
 * memory. Freed once the runs it held went back (link down, or the node
 * stopping). */
struct pagedata *pagedata_new(struct vmm *v, struct event_base *base,
			      const struct ftvm_config *config, struct pagetable *pt,
			      struct frame_pool *pool);
void pagedata_free(struct pagedata *pd);
/* What it counted since start (the landings_* rows of the status, and the
 * ways the blocks went: pages_*, resync_pages_one_sided and _inline). */
const struct status_counts *pagedata_counted(const struct pagedata *pd);
/* The link to the partner came up or went (node.c): at link down the runs
 * held for the partner's write locks and for a resync go back to the pool;
 * then pagedata_grants_link_changed. */
void pagedata_link_changed(struct pagedata *pd, bool up);

/* ---- landing runs (pagedata/pointer_landings.c, vmm/VMM.md "Landings") ---- */

/* Frames per registration block of the pool, offered to the transport. */
uint64_t pagedata_landing_block_frames(const struct ftvm_config *c);

/* ---- the pool's blocks (pagedata/pool_registration.c) ---- */

/* The session is there: tells it which blocks are not in use, then of every
 * block that comes or goes; starts the tick that shrinks the pool and
 * purges. */
int pagedata_start(struct pagedata *pd, struct repl_session *session);
void pagedata_stop(struct pagedata *pd);
/* The pool_* and registrations_* fields of ret. */
void pagedata_pool_counts(struct pagedata *pd, struct status_counts *ret);
/* The partner took the write lock on a's page for owner: on a one-sided link,
 * a run of free frames for its block, opened for the partner's WRITE and held
 * with the lock, in ret. false: none (the block will come inline). */
bool pagedata_landing_open(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
			   const char *owner, Ftvm__Partner__Landing *ret);
/* owner's write lock on guid/page went, or its block came inline (owner
 * NULL: whoever holds the lock): the run held with it goes back. */
void pagedata_landing_close(struct pagedata *pd, const char *guid, uint64_t page,
			    const char *owner);
/* guid goes: every run held for its pages goes back. */
void pagedata_landings_close_alloc(struct pagedata *pd, const char *guid);
/* The link went (or the node stops): the landing runs held for the partner
 * go back to the pool, and the landings this node's write pointers hold are
 * forgotten (their blocks go inline). vmm/VMM.md, "Landings". */
void pagedata_landings_drop(struct pagedata *pd);

/* ---- a resync's landing runs, on the node it brings up to date
 * (pagedata/resync_landings.c, replica/RDMA.md "Resync") ---- */

/* ResyncLandings: runs of frames[i] free frames for the first entries, in
 * order, as far as half the free frames go (and VMM_RESYNC_CHUNK runs), held
 * and put in ret; how many. */
size_t pagedata_resync_landings_open(struct pagedata *pd, const uint32_t *frames, size_t n,
				     Ftvm__Partner__Landing *ret);
/* A ResyncPage at state for a's page: 1 when the page here is newer (a change
 * mirrored after the snapshot came first: drop the block), 0 when the block
 * is to be applied, -EINVAL with the reason when it cannot be (ahead of the
 * page, or its CRC-32C differs at the same version). */
int pagedata_resync_page_order(const struct vmm_alloc *a, uint64_t page,
			       const Ftvm__Partner__PageState *state, char *reason, size_t len);
/* The resync ended or failed, or the link went: the runs held for its
 * blocks go back to the pool (replica/RDMA.md, "Resync"). */
void pagedata_resync_landings_drop(struct pagedata *pd);

/* ---- a resync's blocks, on the node that sends it
 * (pagedata/resync_send.c, replica/RDMA.md "Resync") ---- */

struct pagedata_resync_out;

/* What the resync (ha/resync.c) is told of its blocks' requests; arg is
 * passed to each. */
struct pagedata_resync_calls {
	/* n more of the resync's requests are outstanding, each until
	 * answered() is called for it. */
	void (*sent)(size_t n, void *arg);
	/* One of them is over: cc's applied LSN noted, the resync failed
	 * unless cc->status is OK. The last may end the resync, which frees
	 * the pagedata_resync_out inside this call. */
	void (*answered)(const CommandComplete *cc, void *arg);
	/* Every block is out (after pagedata_resync_out_send() returned 0):
	 * ResyncEnd goes behind them now. 0, or why it could not be sent. */
	int (*blocks_out)(void *arg);
	void *arg;
};

/* One resync's blocks, from its snapshot turn on: whether the link is
 * one-sided and the frames staging may take (half those free) are taken
 * now. NULL when out of memory. */
struct pagedata_resync_out *pagedata_resync_out_new(struct pagedata *pd,
						    const struct pagedata_resync_calls *calls);
/* The page's block at the snapshot, of state: ResyncPage{data} now, or
 * (one-sided, frames to spare) copied to a staging run, to be written
 * one-sided once pagedata_resync_out_send()'s ResyncLandings is answered.
 * 0, or the session's error (nothing sent). */
int pagedata_resync_out_page(struct pagedata_resync_out *out, const char *guid, uint64_t page,
			     const void *block, uint32_t block_size,
			     const Ftvm__Partner__PageState *state);
/* The snapshot is out: the staged blocks go, chunk by chunk (VMM_RESYNC_CHUNK
 * per ResyncLandings), a round trip later, then calls->blocks_out() (0). 1:
 * nothing waits (every block went inline), the caller sends ResyncEnd now;
 * < 0: an inline block could not be sent. */
int pagedata_resync_out_send(struct pagedata_resync_out *out);
/* The resync ended: staging runs still held go back. NULL is fine. */
void pagedata_resync_out_free(struct pagedata_resync_out *out);

/* ---- the sending side: a page's block to the partner (pagedata/send.c) ---- */

struct vmm_msg;
struct vmm_op;

/* A page's block in a batch to the partner: what the caller says of it,
 * then what pagedata_send keeps of the way it went until the batch is
 * answered (pagedata_sent). Zero it first. */
struct pagedata_outgoing {
	const char *guid;
	uint64_t page;
	uint32_t block_size, crc32c;
	const void *block; /* its bytes */
	/* The block in registered memory for an RDMA WRITE: the page's frames
	 * or frames it takes when answered (block is copied there when they
	 * differ, unless frames_filled: they hold it already); NULL: a staging
	 * slab, if it goes one-sided. */
	void *frames;
	bool frames_filled;
	/* Where the partner said to write it (the landing it gave with a write
	 * lock), or NULL. grant_ok: otherwise a run it granted for whole-page
	 * writes, if one is free. */
	const struct repl_landing *landing;
	bool grant_ok;
	/* pagedata_send's, until pagedata_sent. */
	struct repl_landing grant;
	bool granted;
	void *staging;
};
/* Sends op's batch envs (n), envs[at] (in msgs[at]) being out's WritePage,
 * which this makes: on a one-sided link the block goes by RDMA WRITE into
 * the landing or a granted run and the WritePage names it; otherwise, and
 * whenever the transport cannot write it one-sided now, the WritePage
 * carries it inline. Counts which (pages_one_sided, pages_inline). 0, or
 * what vmm_op_send returned: nothing was sent, nothing is held. */
int pagedata_send(struct pagedata *pd, struct vmm_op *op, struct vmm_msg *msgs, Envelope **envs,
		  size_t n, size_t at, struct pagedata_outgoing *out);
/* op's batch was answered (or failed): what out held goes. spent: the
 * partner applied the WritePage, or may have, so a granted run is used up;
 * otherwise it is free again. */
void pagedata_sent(struct pagedata *pd, struct pagedata_outgoing *out, bool spent);

/* ---- the receiving side: a block the partner sent (pagedata/receive.c) ---- */

/* A page's block as one of the partner's messages carries it: a WritePage
 * (under the page's write lock) or a ResyncPage (in a resync, its order
 * against the page already checked). Exactly one is set. */
struct pagedata_incoming {
	const Ftvm__Partner__WritePage *write_page;
	const Ftvm__Partner__ResyncPage *resync_page;
};
/* The block into a's page's frames, whichever way it came: landed in a run
 * this node handed out (granted to the partner, held for the write lock, or
 * given to a resync), which becomes the page's frames, or inline, copied
 * into them. 0; -EINVAL (the message is wrong: refuse it) or -ENOSPC (no
 * frames for an inline block) with the reason, the run given back (a
 * granted one stays granted). A granted run used comes back fresh in
 * ret_fresh (*ret_has_fresh) while frames allow. */
int pagedata_receive(struct pagedata *pd, struct vmm_alloc *a, const struct pagedata_incoming *in,
		     Ftvm__Partner__Landing *ret_fresh, bool *ret_has_fresh, char *reason,
		     size_t len);
/* The block is not wanted (its page is newer here, or gone): a run that
 * holds it goes back. */
void pagedata_discard(struct pagedata *pd, const struct pagedata_incoming *in);

/* ---- landing grants for whole-page writes (vmm/VMM.md "Landings") ---- */

/* Landing grants for whole-page writes live with the link: at link up this
 * node grants the partner runs (when one-sided); at link down the runs it
 * granted go back to its pool and those it was granted are void. */
void pagedata_grants_link_changed(struct pagedata *pd, bool up);

/* P, pagedata/grants_to_partner.c. The link came up: on a one-sided link, runs of free frames
 * for each block size in use are granted to the partner (LandingGrant). */
void pagedata_grants_offer(struct pagedata *pd);
/* Short of frames: the grants are asked back (LandingRevoke, sent from its
 * own event, never from inside the caller's work); their frames return to
 * the pool when the partner answers. */
void pagedata_grants_revoke(struct pagedata *pd);
/* Link down: every granted run back to the pool. */
void pagedata_grants_drop(struct pagedata *pd);

/* O, pagedata/grants_from_partner.c. Runs the partner granted (a LandingGrant, an answer's
 * grants); -EINVAL with the reason for a run of no frames. */
int pagedata_granted_add(struct pagedata *pd, Ftvm__Partner__Landing *const *ls, size_t n,
			 char *reason, size_t len);
/* The partner's LandingGrant: its runs added; -EINVAL with the reason on a
 * link that does not take page data one-sided, or for a run of no frames. */
int pagedata_granted_on_grant(struct pagedata *pd, const Ftvm__Partner__LandingGrant *m,
			      char *reason, size_t len);
/* What an answer of the partner's brings for page data: runs it granted for
 * whole-page writes (added; bad ones are logged and ignored), and the
 * landing an AllocateWrite's answer gave the write lock, in ret_landing
 * (true). */
bool pagedata_granted_from_answer(struct pagedata *pd, const CommandComplete *cc,
				  struct repl_landing *ret_landing);
/* A free granted run of frames frames, in flight from now on, in ret. */
bool pagedata_granted_take(struct pagedata *pd, uint32_t frames, struct repl_landing *ret);
/* The write that took at was answered: spent (the partner applied it, or
 * may have) drops it, otherwise it is free again. */
void pagedata_granted_done(struct pagedata *pd, const struct repl_landing *at, bool spent);
/* The partner's LandingRevoke seq m: true when its answer is held until the
 * writes in flight into those runs are answered. */
bool pagedata_granted_revoke(struct pagedata *pd, const Ftvm__Partner__LandingRevoke *m,
			     uint64_t seq);
/* Link down: every granted run is void. */
void pagedata_granted_forget(struct pagedata *pd);
