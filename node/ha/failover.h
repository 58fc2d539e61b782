/* The memory manager's side of failover (ha/HA.md), as the rest of the
 * memory manager reaches it: the pointers clients hold across a failover
 * (holdings.c), the failover window (failover_window.c), failback
 * (failback.c) and resync (resync.c). What these files keep is theirs
 * (failover_state.h); ha.c, which decides, reaches the memory manager
 * through vmm.h. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/util.h>

#include "client.pb-c.h"
#include "client_server.h"
#include "codec.h"
#include "pagetable_sqlite.h"
#include "session.h"
#include "status_counts.h"

struct event_base;
struct vmm;
struct failover_state;

/* The state, empty but for the window's event (on base, for v), offline
 * ("starting"); NULL when out of memory. */
struct failover_state *failover_state_new(struct event_base *base, struct vmm *v);
void failover_state_free(struct failover_state *f);
/* vmm_mode.c: at start, the epoch recorded in the page table becomes this
 * node's (vmm_epoch()); -errno when it cannot be read (the page table's
 * error says why). */
int vmm_epoch_load(struct vmm *v);
/* Why the node is in its mode (vmm_set_mode()'s reason; "starting" before
 * the first): the answers it refuses say so. */
const char *vmm_mode_reason(const struct vmm *v);
/* What it counted since start (resync_pages_dropped; the other resync_*
 * rows, which way the blocks went, pagedata counts). */
const struct status_counts *failover_counted(const struct failover_state *f);
/* resync.c: a resync is under way, sending or receiving; receiving. */
bool vmm_resync_busy(const struct vmm *v);
bool vmm_resync_receiving(const struct vmm *v);

/* A pointer a client of this node holds (vmm/pointer.c grants and releases
 * it; ha/holdings.c carries it across failover). */
struct vmm_quarantine;
struct vmm_holding {
	struct vmm_holding *next;
	struct vmm *vmm;
	uint64_t client_id;
	char guid[128];
	uint64_t page;
	char owner[128];
	bool write;
	/* Where the partner takes the block by RDMA WRITE at a modified
	 * release (it gave it with the lock); used once. */
	struct repl_landing landing;
	bool has_landing;
	/* A gone client's release the partner refused for want of frames is
	 * tried again (retry) until deadline_ms. */
	struct event *retry;
	uint64_t deadline_ms;
	/* Revoked at a fence: no lock any more, its page's old frames aside
	 * (NULL when the page had none), and the epoch it was revoked at. */
	bool revoked;
	struct vmm_quarantine *quarantine; /* ha/holdings.c */
	uint64_t revoked_epoch;
};

/* ha/holdings.c: the newest of call's client's pointers to guid's page. */
struct vmm_holding *vmm_holding_find(struct vmm *v, struct client_call *call, const char *guid,
				     uint64_t page);
/* ha/holdings.c keeps the list of them (failover_state.h); vmm/pointer.c
 * puts h in when granted (and when its release failed or waits to be tried
 * again), and takes it out to release it. */
void vmm_holding_add(struct vmm *v, struct vmm_holding *h);
void vmm_holding_unlink(struct vmm *v, struct vmm_holding *h);
/* A gone client's next pointer to release, out of the list: one of
 * client_id's not waiting to be tried again (h->retry); NULL when none is
 * left. */
struct vmm_holding *vmm_holding_take_client(struct vmm *v, uint64_t client_id);
/* ha/holdings.c: h goes (out of the list already), and the frames set
 * aside for it with the last revoked pointer into them. */
void vmm_holding_free(struct vmm *v, struct vmm_holding *h);
/* ha/holdings.c: the landings this node's write pointers hold are void. */
void vmm_holdings_forget_landings(struct vmm *v);
/* ha/holdings.c: right behind a resync's snapshot, the partner learns the
 * pointers this node's clients hold (node/ha/HA.md, "Solo and rejoin"). */
void vmm_holdings_mirror(struct vmm *v);
/* ha/holdings.c: how many snapshots the holdings went behind so far. A
 * grant or a release notes it as its request leaves; what the partner did
 * with the request, a resync that went after it has undone. */
uint64_t vmm_holdings_snapshots(struct vmm *v);
/* ha/holdings.c: h to the partner again as its grant went, behind what the
 * link carries now, when a snapshot went since the request that counted
 * snapshots left; true when it went. */
bool vmm_holding_mirror_since(struct vmm *v, struct vmm_holding *h, uint64_t snapshots);
/* ha/holdings.c: h into the list (vmm_holding_add()) after a request that
 * left at snapshots (its grant, a release that failed), and to the partner
 * again when a snapshot went since: the partner took its lock, or kept it,
 * before the resync replaced its table. */
void vmm_holding_add_after(struct vmm *v, struct vmm_holding *h, uint64_t snapshots);
/* ha/holdings.c: this node fenced itself, or is resynced: the pointers its
 * clients hold are revoked, their frames kept from every page until each is
 * released (node/ha/HA.md, "Pointers of a fenced node are revoked"). */
void vmm_holdings_revoke(struct vmm *v);
/* ha/holdings.c: true when h (call's client's, as vmm_holding_find() gave
 * it, or NULL) was revoked; call is then answered STALE_EPOCH and h let go. */
bool vmm_holding_revoked_reply(struct vmm *v, struct client_call *call, struct vmm_holding *h);
/* ha/holdings.c: revoked pointers not released yet, and the frames set
 * aside for them. */
void vmm_holdings_revoked(const struct vmm *v, uint64_t *ret_pointers, uint64_t *ret_frames);

/* ha/failover_window.c: the failover window. Open while mirrored with the link
 * lost, until the next mode change. fn(v, arg, status, reason) runs once
 * for a waiter: OK when the window closed and the mode decided lets it go
 * on, else why not (fenced, request_timeout_ms passed, its client gone,
 * stopping). */
typedef void (*vmm_window_fn)(struct vmm *v, void *arg, int status, const char *reason);
bool vmm_window_open(const struct vmm *v);
/* -ENOMEM: nothing waits. client_id: the client whose going ends it (0:
 * none). */
int vmm_window_wait(struct vmm *v, uint64_t client_id, vmm_window_fn fn, void *arg);
/* After a mode change: a window that closed lets its waiters go on (from
 * window_event: vmm_on_window_closed). */
void vmm_window_check(struct vmm *v);
void vmm_on_window_closed(evutil_socket_t fd, short what, void *arg);
void vmm_window_client_gone(struct vmm *v, uint64_t client_id);
void vmm_window_fail_all(struct vmm *v, int status, const char *reason);
/* Keeps req until the window's end, then dispatches it again (req stays
 * valid until call is answered: client_request_fn); false when it cannot
 * (out of memory). */
bool vmm_window_park(struct vmm *v, struct client_call *call,
		     const Ftvm__Client__ClientRequest *req);
/* Refuses a change in [failover] solo = refuse mode: true when answered. */
bool vmm_refuses_change(struct vmm *v, struct client_call *call);
/* ha/holdings.c: a node stopping solo releases its clients' write
 * pointers as modified, here alone, before its last destage. */
void vmm_holdings_release_at_stop(struct vmm *v);
/* ha/holdings.c: a gone client's pointer (h, out of the list) whose
 * release the partner never took is let go here only, and what its client
 * wrote with it (node/ha/HA.md, "A gone client's pointer"). */
void vmm_holding_let_go(struct vmm *v, struct vmm_holding *h);
void vmm_holdings_free(struct vmm *v);

/* failback.c, resync.c */
/* Hands every allocation adopted here back to its home node. */
void vmm_op_failback(struct vmm *v, struct client_call *call);
/* The partner's messages of failover: a Status, with the reason filled.
 * OwnerChange (ha/failback.c) and the resync messages (ha/resync.c). */
int vmm_owner_changed(struct vmm *v, const char *guid, const char *owner, const struct pt_origin *o,
		      char *reason, size_t len);
int vmm_resync_apply(struct vmm *v, const Envelope *env, char *reason, size_t len);
