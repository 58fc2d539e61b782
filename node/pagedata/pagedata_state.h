/* The state pagedata/ owns (pagedata.h). Only pagedata/'s files include
 * this. */
#pragma once

#include <stdint.h>

struct event;

struct pagedata {
	/* One-sided pointer writes (pagedata/pointer_landings.c): the landing runs this node
	 * holds for the partner's write locks (each in one registration block
	 * of the pool). The counters are since start, for `ftvmctl status`. */
	struct vmm_landing *landings;
	struct event *pool_tick; /* pagedata/pool_registration.c: shrinks the pool, purges */
	uint64_t landings_adopted, landings_refused;
	/* Whole-page writes (pagedata/grants_to_partner.c): the runs granted to the partner, and
	 * how many were since start. pagedata/grants_from_partner.c: the runs the partner granted
	 * this node, and its LandingRevokes waiting for writes in flight. */
	struct vmm_grant *grants;
	struct event *revoke_event; /* a LandingRevoke to send, made on first use */
	uint64_t landings_granted;
	struct vmm_granted *granted;
	struct vmm_revoke_held *revokes_held;
	/* A resync (ha/resync.c, pagedata/resync_landings.c): the runs held
	 * for the survivor's blocks. */
	struct vmm_resync_landing *resync_landings;
};
