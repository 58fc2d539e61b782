/* How a page's block reaches the partner and lands there (vmm/VMM.md,
 * "Landings"; replica/RDMA.md): the runs of free frames this node holds or
 * grants for the partner's RDMA WRITEs, the runs the partner granted this
 * node, the checks of a block that landed, and the frame pool's registration
 * blocks as the partner channel sees them. Over TCP none of it is used and
 * every block goes inline. The state is this component's own
 * (pagedata_state.h); the memory manager reaches it through these calls. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"
#include "partner.pb-c.h"
#include "session.h"

struct pagedata;
struct vmm;
struct vmm_alloc;
struct status_counts;

/* The component's state, empty; NULL when out of memory. Freed once the
 * runs it held went back (link down, or the node stopping). */
struct pagedata *pagedata_new(void);
void pagedata_free(struct pagedata *pd);
/* What it counted since start (the landings_* rows of the status). */
const struct status_counts *pagedata_counted(const struct pagedata *pd);

/* ---- landing runs (pagedata/pointer_landings.c, vmm/VMM.md "Landings") ---- */

/* Frames per registration block of the pool, offered to the transport. */
uint64_t vmm_landing_block_frames(const struct ftvm_config *c);

/* ---- the pool's blocks (pagedata/pool_registration.c) ---- */

/* Tells the session which blocks are not in use, then of every block that
 * comes or goes; starts the tick that shrinks the pool and purges. */
int vmm_pool_start(struct vmm *v);
void vmm_pool_stop(struct vmm *v);
/* The pool_* and registrations_* fields of ret. */
void vmm_pool_counts(struct vmm *v, struct status_counts *ret);
/* The partner took the write lock on a's page for owner: on a one-sided link,
 * a run of free frames for its block, opened for the partner's WRITE and held
 * with the lock, in ret. false: none (the block will come inline). */
bool vmm_landing_open(struct vmm *v, struct vmm_alloc *a, uint64_t page, const char *owner,
		      Ftvm__Partner__Landing *ret);
/* A WritePage naming m->landed: the run becomes the page's frames (its old
 * ones go back). Refused (< 0, the run given back) with the reason when the
 * link is not one-sided, the landing is not the one held for the page's lock,
 * its generation is stale or its bytes fail m->crc32c. */
int vmm_landing_adopt(struct vmm *v, struct vmm_alloc *a, uint64_t page,
		      const Ftvm__Partner__WritePage *m, char *reason, size_t len);
/* owner's write lock on guid/page went, or its block came inline (owner
 * NULL: whoever holds the lock): the run held with it goes back. */
void vmm_landing_close(struct vmm *v, const char *guid, uint64_t page, const char *owner);
/* guid goes: every run held for its pages goes back. */
void vmm_landings_close_alloc(struct vmm *v, const char *guid);
/* pagedata/landed_block.c: the start of a refusal's reason, "MESSAGE GUID page P
 * landed at RUN F (N frames, generation G): ", in reason; its length (0 when
 * it does not fit). */
size_t vmm_landed_reason_start(char *reason, size_t len, const char *message, const char *guid,
			       uint64_t page, const char *run, const Ftvm__Partner__Landing *named);
/* A run handed out ahead (a grant, a resync's run: handed says which) that
 * named names, for a's page: a's block size (-EINVAL), at the generation it
 * was handed out at (-ESTALE), and vmm_landed_bytes_check. */
int vmm_landed_run_check(struct vmm *v, const struct vmm_alloc *a, const struct repl_landing *at,
			 const Ftvm__Partner__Landing *named, const char *handed,
			 uint32_t named_crc32c, char *reason, size_t len);
/* pagedata/landed_block.c: a block written into the run at by RDMA WRITE may be
 * adopted: its registration block is still at at's generation (-ESTALE) and
 * its block_size bytes match named_crc32c (-EBADMSG), else the reason. */
int vmm_landed_bytes_check(struct vmm *v, const struct repl_landing *at, uint32_t block_size,
			   uint32_t named_crc32c, char *reason, size_t len);
/* The run at frame, checked, is a's page's frames from now on: a resident
 * page's old frames go back, a page-in in flight gives its own back. */
void vmm_landed_adopt(struct vmm *v, struct vmm_alloc *a, uint64_t page, uint64_t frame);

/* ---- a resync's landing runs, on the node it brings up to date
 * (pagedata/resync_landings.c, replica/RDMA.md "Resync") ---- */

/* ResyncLandings: runs of frames[i] free frames for the first entries, in
 * order, as far as half the free frames go (and VMM_RESYNC_CHUNK runs), held
 * and put in ret; how many. */
size_t vmm_resync_landings_open(struct vmm *v, const uint32_t *frames, size_t n,
				Ftvm__Partner__Landing *ret);
/* A ResyncPage at state for a's page: 1 when the page here is newer (a change
 * mirrored after the snapshot came first: drop the block), 0 when the block
 * is to be applied, -EINVAL with the reason when it cannot be (ahead of the
 * page, or its CRC-32C differs at the same version). */
int vmm_resync_page_order(const struct vmm_alloc *a, uint64_t page,
			  const Ftvm__Partner__PageState *state, char *reason, size_t len);
/* The block landed in the run named: checked (held here, the page's block
 * size, its generation, crc32c) and adopted as the page's frames. Refused
 * (< 0, the run given back) with the reason. */
int vmm_resync_landing_adopt(struct vmm *v, struct vmm_alloc *a, uint64_t page,
			     const Ftvm__Partner__Landing *named, uint32_t crc32c, char *reason,
			     size_t len);
/* The block in the run named is not wanted (dropped as older): run back. */
void vmm_resync_landing_close(struct vmm *v, const Ftvm__Partner__Landing *named);

/* ---- landing grants for whole-page writes (vmm/VMM.md "Landings") ---- */

/* P, pagedata/grants_to_partner.c. The link came up: on a one-sided link, runs of free frames
 * for each block size in use are granted to the partner (LandingGrant). */
void vmm_grants_offer(struct vmm *v);
/* Whether l names a run granted to the partner. */
bool vmm_grant_named(struct vmm *v, const Ftvm__Partner__Landing *l);
/* A WritePage landed in a granted run: the run becomes the page's frames
 * (resident or not; its old ones go back) and a fresh run, if frames allow,
 * is in ret_fresh (*ret_has_fresh). Refused (< 0, the run stays granted)
 * with the reason when the run is not granted, not the page's block size,
 * stale, or its bytes fail m->crc32c. */
int vmm_grant_adopt(struct vmm *v, struct vmm_alloc *a, uint64_t page,
		    const Ftvm__Partner__WritePage *m, Ftvm__Partner__Landing *ret_fresh,
		    bool *ret_has_fresh, char *reason, size_t len);
/* Short of frames: the grants are asked back (LandingRevoke, sent from its
 * own event, never from inside the caller's work); their frames return to
 * the pool when the partner answers. */
void vmm_grants_revoke(struct vmm *v);
/* Link down: every granted run back to the pool. */
void vmm_grants_drop(struct vmm *v);

/* O, pagedata/grants_from_partner.c. Runs the partner granted (a LandingGrant, an answer's
 * grants); -EINVAL with the reason for a run of no frames. */
int vmm_granted_add(struct vmm *v, Ftvm__Partner__Landing *const *ls, size_t n, char *reason,
		    size_t len);
/* A free granted run of frames frames, in flight from now on, in ret. */
bool vmm_granted_take(struct vmm *v, uint32_t frames, struct repl_landing *ret);
/* The write that took at was answered: spent (the partner applied it, or
 * may have) drops it, otherwise it is free again. */
void vmm_granted_done(struct vmm *v, const struct repl_landing *at, bool spent);
/* The partner's LandingRevoke seq m: true when its answer is held until the
 * writes in flight into those runs are answered. */
bool vmm_granted_revoke(struct vmm *v, const Ftvm__Partner__LandingRevoke *m, uint64_t seq);
/* Link down: every granted run is void. */
void vmm_granted_forget(struct vmm *v);
