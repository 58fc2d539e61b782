/* What the memory manager's side of failover keeps (failover.h). Only
 * ha/'s files include this. */
#pragma once

#include <stdbool.h>

#include "status_counts.h"
#include "vmm.h"

struct event;

struct failover_state {
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
	/* The resync_* rows of `ftvmctl status`, counted where each happens
	 * in resync.c (`vmm_failover(v)->counted.resync_pages_dropped++`). */
	struct status_counts counted;
};
