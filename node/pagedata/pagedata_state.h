/* The state pagedata/ owns (pagedata.h), and the calls its files share.
 * Only pagedata/'s files (and their unit tests) include this. */
#pragma once

#include <stdint.h>

#include "partner.pb-c.h"
#include "session.h"
#include "status_counts.h"

struct event;
struct event_base;
struct frame_pool;
struct ftvm_config;
struct pagetable;
struct repl_session;
struct vmm;
struct vmm_alloc;

struct pagedata {
	/* The handles it works with, the memory manager's (pagedata_new);
	 * the session comes at pagedata_start. vmm is only passed to the
	 * calls vmm_core.h declares, never looked into. */
	struct vmm *vmm;
	struct event_base *base;
	const struct ftvm_config *config;
	struct pagetable *pt;
	struct frame_pool *pool;
	struct repl_session *session;

	/* One-sided pointer writes (pagedata/pointer_landings.c): the landing runs this node
	 * holds for the partner's write locks (each in one registration block
	 * of the pool). */
	struct vmm_landing *landings;
	struct event *pool_tick; /* pagedata/pool_registration.c: shrinks the pool, purges */
	/* Whole-page writes (pagedata/grants_to_partner.c): the runs granted to
	 * the partner. pagedata/grants_from_partner.c: the runs the partner granted
	 * this node, and its LandingRevokes waiting for writes in flight. */
	struct vmm_grant *grants;
	struct event *revoke_event; /* a LandingRevoke to send, made on first use */
	struct vmm_granted *granted;
	struct vmm_revoke_held *revokes_held;
	/* A resync (ha/resync.c, pagedata/resync_landings.c): the runs held
	 * for the survivor's blocks. */
	struct vmm_resync_landing *resync_landings;
	/* The rows of `ftvmctl status` it counts as they happen
	 * (`pd->counted.landings_adopted++`): landings_*, and which way the
	 * blocks went, pages_* (send.c) and a resync's resync_pages_one_sided
	 * and resync_pages_inline (resync_send.c). */
	struct status_counts counted;
};

/* ---- a block that came by RDMA WRITE (pagedata/landed_block.c) ---- */

/* The start of a refusal's reason, "MESSAGE GUID page P landed at RUN F (N
 * frames, generation G): ", in reason; its length (0 when it does not fit). */
size_t pagedata_landed_reason_start(char *reason, size_t len, const char *message, const char *guid,
				    uint64_t page, const char *run,
				    const Ftvm__Partner__Landing *named);
/* A run handed out ahead (a grant, a resync's run: handed says which) that
 * named names, for a's page: a's block size (-EINVAL), at the generation it
 * was handed out at (-ESTALE), and pagedata_landed_bytes_check. */
int pagedata_landed_run_check(struct pagedata *pd, const struct vmm_alloc *a,
			      const struct repl_landing *at, const Ftvm__Partner__Landing *named,
			      const char *handed, uint32_t named_crc32c, char *reason, size_t len);
/* A block written into the run at by RDMA WRITE may be adopted: its
 * registration block is still at at's generation (-ESTALE) and its
 * block_size bytes match named_crc32c (-EBADMSG), else the reason. */
int pagedata_landed_bytes_check(struct pagedata *pd, const struct repl_landing *at,
				uint32_t block_size, uint32_t named_crc32c, char *reason,
				size_t len);
/* The run at frame, checked, is a's page's frames from now on: a resident
 * page's old frames go back, a page-in in flight gives its own back. */
void pagedata_landed_adopt(struct pagedata *pd, struct vmm_alloc *a, uint64_t page, uint64_t frame);
/* The end of an adoption of a run held here (held, NULL when none was),
 * checked with the result r: refused (r < 0), it is counted and the run
 * goes back to the pool; otherwise its frames are a's page's. The caller
 * has unlinked its record of the run and frees it. r, either way. */
int pagedata_landed_settle(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
			   const struct repl_landing *held, int r);

/* ---- how a block lands, each way (pagedata_receive() chooses) ---- */

/* Whether l names a run granted to the partner. */
bool pagedata_grant_named(struct pagedata *pd, const Ftvm__Partner__Landing *l);
/* A WritePage landed in a granted run: the run becomes the page's frames
 * (resident or not; its old ones go back) and a fresh run, if frames allow,
 * is in ret_fresh (*ret_has_fresh). Refused (< 0, the run stays granted)
 * with the reason when the run is not granted, not the page's block size,
 * stale, or its bytes fail m->crc32c. */
int pagedata_grant_adopt(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
			 const Ftvm__Partner__WritePage *m, Ftvm__Partner__Landing *ret_fresh,
			 bool *ret_has_fresh, char *reason, size_t len);
/* A WritePage naming m->landed: the run becomes the page's frames (its old
 * ones go back). Refused (< 0, the run given back) with the reason when the
 * link is not one-sided, the landing is not the one held for the page's lock,
 * its generation is stale or its bytes fail m->crc32c. */
int pagedata_landing_adopt(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
			   const Ftvm__Partner__WritePage *m, char *reason, size_t len);
/* The block landed in the run named: checked (held here, the page's block
 * size, its generation, crc32c) and adopted as the page's frames. Refused
 * (< 0, the run given back) with the reason. */
int pagedata_resync_landing_adopt(struct pagedata *pd, struct vmm_alloc *a, uint64_t page,
				  const Ftvm__Partner__Landing *named, uint32_t crc32c,
				  char *reason, size_t len);
/* The block in the run named is not wanted (dropped as older): run back. */
void pagedata_resync_landing_close(struct pagedata *pd, const Ftvm__Partner__Landing *named);
