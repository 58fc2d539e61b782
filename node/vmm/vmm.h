/* The mirrored memory manager of seed 002 (design: vmm/VMM.md): the originating
 * node's methods behind the client API, and the partner's message response
 * method behind the partner session. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "client.pb-c.h"
#include "client_server.h"
#include "codec.h"
#include "config.h"
#include "pagetable_sqlite.h"
#include "status_counts.h"

struct event_base;
struct repl_session;
struct vmm;

/* How the methods complete (node/ha/HA.md). */
enum vmm_mode {
	VMM_MODE_OFFLINE,   /* starting or behind: serves nothing, writes no store */
	VMM_MODE_MIRRORED,  /* acknowledged by the partner first */
	VMM_MODE_SOLO,	    /* the partner is gone: completed here alone */
	VMM_MODE_SOLO_READ, /* alone, [failover] solo = refuse: reads only */
	VMM_MODE_FENCED,    /* nothing at all: another node serves */
};

struct vmm_takeover {
	uint64_t allocations; /* adopted */
	uint64_t locks_released;
	uint64_t dirty_pages; /* queued for destage here */
};

/* Opens the page table under state_dir, creates the frame pool and loads
 * what the page table holds. Errors are logged. */
int vmm_new(struct event_base *base, const struct ftvm_config *config, struct vmm **ret);
/* The session the methods mirror through; set once it exists. From then on
 * the pool's blocks coming and going are told to it (-ENOMEM: no tick). */
int vmm_set_session(struct vmm *v, struct repl_session *session);
/* Where the memory manager tells what happens to it for the node's event
 * stream (node/EVENTS.md): volumes made and deleted here, failbacks. kv:
 * key, value pairs ending with NULL. fn NULL: nowhere. */
typedef void (*vmm_event_fn)(const char *type, const char *what, const char *reason,
			     const char *const *kv, void *arg);
void vmm_set_event_sink(struct vmm *v, vmm_event_fn fn, void *arg);
/* Commits what is open; NULL is fine. */
void vmm_free(struct vmm *v);

/* Whether the client of call has right (CLIENT_RIGHT_*) to what; if not,
 * answers it DENIED naming who may. A NULL call (no client) may. */
bool vmm_client_may(struct vmm *v, struct client_call *call, unsigned right, const char *what);

/* A data request from a local client (alloc, write, read, header, free,
 * list, sense, verify); answered through call, now or later. */
void vmm_client_request(struct vmm *v, struct client_call *call,
			const Ftvm__Client__ClientRequest *req);

/* Seed 003's device discovery table (vmm/query.c; vmm/MEDIA.md, "Device
 * discovery: the message flow"): what node.c knows of the pair when a
 * client asks, to which the memory manager adds each node's media, the
 * partner's from a SenseRequest. Answered in any mode, never parked in the
 * failover window: a partner that cannot be asked is a row that says why,
 * and the call still succeeds. The strings are copied. */
struct vmm_discover {
	const char *state; /* this node's, as it reports it (INTERFACES.md) */
	bool serving;	   /* solo, or active with its partner linked */
	/* The partner's state as its last Heartbeat said it, "unknown" while
	 * the link is down, and whether that state serves (when it answers). */
	const char *partner_state;
	bool partner_serving;
};
void vmm_op_discover(struct vmm *v, struct client_call *call, const struct vmm_discover *d);
/* Seed 003's memory partition table to a client (vmm/partitions.c), in any
 * mode. */
void vmm_op_partitions(struct vmm *v, struct client_call *call);

/* A block volume as its NBD export shows it (vmm/volume.c): its guid (to
 * ask page requests of), size and block size. -ENOENT for no volume name. */
struct vmm_volume_info {
	char guid[64];
	uint64_t size;
	uint32_t block_size;
};
int vmm_volume_info(struct vmm *v, const char *name, struct vmm_volume_info *ret);
/* Read-ahead (node/NBD.md, "Read-ahead"): stages pages first to first + n
 * - 1 of volume guid into the storage cache that are not there, each a
 * page-in from the store (or zeroes for a page never written), as a read
 * would, but nobody waits for them; it stops at the first that finds no
 * frames. Only while the node serves. Returns how many it staged. */
uint64_t vmm_volume_read_ahead(struct vmm *v, const char *guid, uint64_t first, uint64_t n);
/* Calls fn with each volume's name. */
void vmm_volume_names(struct vmm *v, void (*fn)(void *ctx, const char *name), void *ctx);

/* A local client disconnected: its pointers are released, its waiting
 * requests dropped. */
void vmm_client_gone(struct vmm *v, uint64_t client_id);

/* Requests from the partner (Fig. 10), in order, a failure aborting the rest. */
void vmm_partner_request(struct vmm *v, Envelope *const *envs, size_t n);
/* The link to the partner went: the places its waiting requests held in our
 * paging queue are void (vmm/VMM.md, "Fairness across the pair"). */
void vmm_tickets_drop(struct vmm *v);
/* The link was lost: while mirrored, what needs the partner waits for the
 * pair's decision (the next mode), even once the link is back (ha/HA.md,
 * "Calls through the failover window"). */
void vmm_window_link_lost(struct vmm *v);
/* The memory manager's page-data component (node/pagedata/, pagedata.h),
 * for node.c's wiring and ha/: what reaches the partner's frames by RDMA. */
struct pagedata *vmm_pagedata(const struct vmm *v);
/* The frame pool's mapping and its registration blocks' size in frames, for
 * the session's one-sided page data. */
void *vmm_pool_base(const struct vmm *v);
uint64_t vmm_pool_block_frames(const struct vmm *v);

/* Sets all of *ret: the counters the memory manager counted, its gauges now,
 * and zero for the numbers others keep (node.c fills those). */
void vmm_get_counts(struct vmm *v, struct status_counts *ret);
/* This node's capacities and queues as a client's sense request gets them
 * (vmm/query.c), for its metrics. *ret's media point into storage of the
 * memory manager's, valid until its next sense: read them at once. */
void vmm_get_sense(struct vmm *v, Ftvm__Partner__SenseInformation *ret);

/* ---- failover (ha/vmm_mode.c, node/ha/HA.md) ---- */

/* Sets the mode; reason says why (it ends up in the answers refused). The
 * node's state goes with it: ha/ha.c's transition table says which mode each
 * state allows, and its change() is the one caller. */
void vmm_set_mode(struct vmm *v, enum vmm_mode mode, const char *reason);
enum vmm_mode vmm_mode(const struct vmm *v);
/* "offline", "mirrored", "solo", "solo, reads only", "fenced". */
const char *vmm_mode_name(enum vmm_mode mode);
/* The pair's epoch as this node knows it; setting persists it (committed
 * before it returns) and tells the session. */
uint64_t vmm_epoch(const struct vmm *v);
int vmm_set_epoch(struct vmm *v, uint64_t epoch);
/* Whether this node last ran solo (persisted): it then holds the newest copy
 * of everything and may serve alone again after a restart. */
bool vmm_was_solo(struct vmm *v);
/* This node's partition in the store (and so its fence slot): vmm/destage.c's,
 * which opens the store. */
unsigned vmm_store_index(const struct vmm *v);
/* Adopts every allocation the partner owned (owner = this node, journalled),
 * lets go of every lock the partner's clients held, and queues the adopted
 * dirty pages for destage here. Done in one event-loop turn. */
int vmm_takeover(struct vmm *v, struct vmm_takeover *ret);

/* Recovery (ha/recovery.c; node/ha/HA.md, "Recovery"): this node is about to
 * serve knowing that no node holds the newer versions of its stale pages
 * (why says the occasion): each goes back to the store's copy, journalled and
 * noted for `ftvmctl recovery`. Returns the pages that went back (0: none
 * were stale), or -errno. */
int64_t vmm_recover_lost_pages(struct vmm *v, const char *why);
/* The pages noted so far, and when the last went (wall clock, ms; 0: none). */
void vmm_recovered_summary(struct vmm *v, uint64_t *ret_pages, uint64_t *ret_last_at_ms);
/* Answers `ftvmctl recovery` from the page table, in any mode. */
void vmm_reply_recovery(struct vmm *v, struct client_call *call,
			const Ftvm__Client__RecoveryRequest *req);

/* Resync (ha/resync.c). The survivor sends everything it holds to a partner
 * that is behind, and mirrors every change from then on; done runs once the
 * partner answered it all (status 0) or failed (a Status, with the reason). */
struct vmm_resync_stats {
	bool incremental; /* what changed since, not everything */
	uint64_t allocations, pages, bytes;
	uint64_t ms; /* from the snapshot to the last answer */
};
typedef void (*vmm_resync_done_fn)(int status, const char *reason,
				   const struct vmm_resync_stats *stats, void *arg);
/* The partner's position comes from its Hello (vmm_resync_position() there):
 * it decides between sending what changed since and everything. */
int vmm_resync_send(struct vmm *v, uint64_t partner_applied_lsn, uint64_t partner_own_lsn,
		    vmm_resync_done_fn done, void *arg);
/* Where this node's page table stands, for its Hello: the last of the
 * partner's LSNs it applied, and its own last. */
void vmm_resync_position(struct vmm *v, uint64_t *ret_applied, uint64_t *ret_own);
/* The receiving side tells: begin (begin true), then the end (r 0, or -errno
 * with the reason when it was incomplete). */
typedef void (*vmm_resync_observer_fn)(bool begin, int r, const char *reason, void *arg);
void vmm_set_resync_observer(struct vmm *v, vmm_resync_observer_fn fn, void *arg);
