/* The state pagedata/ owns (pagedata.h). Only pagedata/'s files include
 * this. */
#pragma once

#include <stdint.h>

#include "status_counts.h"

struct event;

struct pagedata {
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
	/* The landings_* rows of `ftvmctl status`, counted as they happen
	 * (`v->pagedata->counted.landings_adopted++`). */
	struct status_counts counted;
};
