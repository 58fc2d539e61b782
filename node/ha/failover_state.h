/* What the memory manager's side of failover keeps (failover.h). Only
 * ha/'s files include this. */
#pragma once

#include <stdbool.h>

#include "status_counts.h"
#include "vmm.h"

struct event;

struct failover_state {
	/* vmm_mode.c, which alone writes them: the mode the methods complete
	 * in (node/ha/HA.md: mirrored, solo, fenced), why, and the pair's
	 * epoch as this node knows it (loaded from the page table at start). */
	enum vmm_mode mode;
	char mode_reason[256];
	uint64_t epoch;
	/* resync.c: the resync this node sends, or whether it receives one,
	 * and how that went; who is told of a received one's start and end. */
	struct resync_send *resync_send;
	bool resync_receiving, resync_failed;
	char resync_error[256];
	vmm_resync_observer_fn resync_observer;
	void *resync_arg;
	/* failover_window.c: held from a lost link while mirrored until the
	 * next mode change; what waits for its end, and the event that lets it
	 * go on. */
	bool window_held;
	struct vmm_window_waiter *window_waiters;
	struct event *window_event;
	/* holdings.c: the pointers this node's clients hold, newest first;
	 * vmm/pointer.c adds and takes them through failover.h's calls. */
	struct vmm_holding *holdings;
	/* How many snapshots they were mirrored behind (a grant whose request
	 * left before the last one is mirrored again: holdings.c), as
	 * vmm_holdings_snapshots() tells it. */
	uint64_t holdings_snapshots;
	/* The resync_pages_dropped row of `ftvmctl status`, counted in
	 * resync.c (`vmm_failover(v)->counted.resync_pages_dropped++`); which
	 * way a resync's blocks went is pagedata's to count
	 * (pagedata_counted()). */
	struct status_counts counted;
};

/* vmm_mode.c: a resync's sender goes mirrored in its snapshot's turn
 * (resync.c, start()): every change from then on goes to the partner behind
 * the snapshot. Quietly: the mode's reason stays, and the pair's own change
 * (vmm_set_mode()) comes with the partner's answer. */
void vmm_mode_mirrored_at_snapshot(struct vmm *v);
