/* The memory manager's own state: only node/vmm/'s files include this. The
 * components beside it (node/pagedata/, node/ha/) reach it through
 * vmm_core.h's functions, and own their state (pagedata_state.h,
 * failover_state.h). */
#pragma once

#include "vmm_core.h"

struct vmm_after_commit {
	struct vmm_after_commit *next;
	void (*fn)(void *arg);
	void *arg;
};

struct vmm {
	unsigned solo_in_flight; /* operations completed alone, a turn from done */
	/* The journal passed [failover] journal_limit while the partner was
	 * away: its rows were let go, and it gets a full resync. */
	bool journal_given_up;
	struct event_base *base;
	const struct ftvm_config *config;
	struct repl_session *session;
	struct pagetable *pt;
	struct frame_pool *pool;
	struct vmm_table *table;
	uint64_t next_op;     /* numbers lock owners "<node>/<pid>/<op>" */
	uint64_t next_ticket; /* numbers this node's waiting LockRequests */

	/* Group commit: changes collect in one SQLite transaction that is
	 * committed at the end of the event-loop turn (flush). */
	struct event *flush_event;
	bool flush_pending;
	/* Folds the page writes a commit left waiting and checkpoints the WAL
	 * once the node is idle (IDLE_MS without a commit), so a busy commit
	 * seldom pays either. */
	struct event *idle_event;
	struct vmm_after_commit *after, **after_tail;

	/* Allocations waiting for room in the store (Fig. 5 without
	 * `immediate`), in order. */
	struct vmm_space_waiter *space_waiters;
	/* The paging queue: requests waiting for a lock, a page-in or frames,
	 * in order, looked at again (kick_event) when one of those may be over. */
	struct vmm_page_waiter *page_waiters;
	struct event *kick_event;
	struct event *trim_event; /* the journal, every JOURNAL_TRIM_EVERY_S */

	/* The replacement queue (vmm/vmm.c, vmm/VMM.md "Replacement"): resident pages
	 * that may give their frames back, least recently used first. */
	struct vmm_page *lru_head, *lru_tail;
	uint64_t lru_length;
	uint64_t resident_pages;

	/* The backing store (vmm/destage.c): where this node's next extent
	 * goes, and dirty pages of allocations owned here waiting to be
	 * written to it, in order. */
	struct store *store;
	struct store_queue *store_queue;
	/* Allocations made here and not yet in the table hold their extents. */
	struct vmm_alloc **extents_reserved;
	size_t n_extents_reserved;
	struct vmm_destage *destage_waiting, **destage_tail;
	struct destage_round *destage_round; /* being written, at most one */
	struct event *destage_timer;

	/* What pagedata/ owns (pagedata_state.h), and what ha/ owns of the
	 * memory manager's side of failover (failover_state.h): among it the
	 * node's mode and epoch (vmm_mode(), vmm_epoch()) and the pointers
	 * clients hold. */
	struct pagedata *pagedata;
	struct failover_state *failover;

	/* The status counters the memory manager counts, since start, where
	 * each happens (`v->counted.pages_inline++`); vmm_get_counts()
	 * hands them on with its gauges, and what pagedata/ and ha/
	 * counted. */
	struct status_counts counted;
};
