/* What the memory manager (node/vmm/) offers the components that work on
 * its pages, node/pagedata/ and node/ha/: frames, pages, the journal, the
 * paging queue's kick and operations sent to the partner; each call here is
 * one they use. Not for the rest of node/, which has vmm.h. struct vmm and
 * the calls vmm/'s files share among themselves are vmm/'s alone
 * (vmm_state.h). */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include <event2/util.h>

struct event;

#include "failover.h"
#include "frame_pool.h"
#include "pagedata.h"
#include "pagetable_sqlite.h"
#include "session.h"
#include "vmm.h"
#include "vmm_table.h"

#define VMM_LOG_SUBSYSTEM "vmm"
/* Blocks per ResyncLandings and per batch of landed ResyncPages: the runs of
 * an answer and the batch stay far below the session's max_payload. */
#define VMM_RESYNC_CHUNK 1024

/* An originating node's operation waiting for its partner's answers. */
struct vmm_op {
	struct vmm *vmm;
	struct client_call *call;
	size_t n, answered;
	int status;	  /* the first failure, or OK */
	size_t failed_at; /* its index in the batch */
	char reason[256];
	uint64_t lock_version; /* from a LockStatus answer */
	/* From an AllocateWrite answer on a one-sided link: where the partner
	 * takes the page's block by RDMA WRITE. */
	struct repl_landing landing;
	bool has_landing;
	uint64_t lsn; /* this node's LSN for the change */
	/* Optional: sees each answer while its payload is alive. */
	void (*on_answer)(struct vmm_op *op, const CommandComplete *cc);
	/* What it asks only the partner can tell (verify): refused when this
	 * node serves alone, instead of acknowledged by itself. */
	bool needs_partner;
	void (*finish)(struct vmm_op *op);
};

/* Arms the timer ev to fire in ms milliseconds. */
void vmm_timer_add_ms(struct event *ev, uint64_t ms);
/* Everything changed in this turn is committed at its end; schedules that. */
void vmm_changed(struct vmm *v);
/* Runs fn(arg) once the open transaction committed (a node whose commit
 * fails stops at once: vmm/vmm.c, stop_on_failed_commit). */
void vmm_after_commit(struct vmm *v, void (*fn)(void *arg), void *arg);
/* Commits now and sends the answers held for it. */
void vmm_flush(struct vmm *v);
/* Answers the partner's request seq with cc (copied: nothing of the
 * caller's is kept) once the open transaction committed, with every other
 * answer of the turn in one call down (vmm/VMM.md, "The partner channel,
 * down and up"). -ENOMEM: not answered (the partner's deadline fails it). */
int vmm_answer(struct vmm *v, uint64_t seq, const CommandComplete *cc);
/* The one way this node's requests go to the partner (vmm/VMM.md, "The
 * partner channel, down and up"): answers that wait for the open transaction
 * go first, committed; then envs (n) in one batch, behind the RDMA WRITEs of
 * writes (none: n_writes 0), each answered to done(cc, args[i]). 0, or the
 * session's error (replica/session.h, repl_session_request_batch_landed):
 * nothing was sent. */
int vmm_partner_send(struct vmm *v, Envelope *const *envs, size_t n,
		     const struct repl_page_write *writes, size_t n_writes, pending_done_fn done,
		     void *const *args);

/* Sends envs as one batch for op; op->finish runs when all are answered. */
int vmm_op_send(struct vmm_op *op, Envelope *const *envs, size_t n);
/* vmm_op_send with page blocks written one-sided first (the session's
 * repl_session_request_batch_landed): -ESTALE, -ENOENT, -ERANGE or
 * -EOPNOTSUPP when they cannot go so (solo too); nothing was sent then. */
int vmm_op_send_landed(struct vmm_op *op, Envelope *const *envs, size_t n,
		       const struct repl_page_write *writes, size_t n_writes);

/* Answers a client: status with a reason (printf), no payload. */
void vmm_reply_error(struct client_call *call, int status, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* The block of a resident page. */
uint32_t vmm_block_crc(const struct vmm *v, const struct vmm_alloc *a, uint64_t page);
void *vmm_block_addr(const struct vmm *v, const struct vmm_alloc *a, uint64_t page);

/* ---- frames and the replacement queue (vmm/replacement.c, vmm/VMM.md
 * "Replacement") ---- */

void vmm_frames_give(struct vmm *v, uint64_t frame, uint32_t block_size);
/* The partition of the pool a's pages take their frames from: a volume's
 * the storage cache (vmm/VMM.md, "Volumes"), the rest server memory. */
static inline enum frame_partition vmm_alloc_partition(const struct vmm_alloc *a)
{
	return vmm_alloc_is_volume(a) ? FRAME_CACHE : FRAME_SERVER;
}
/* p's contents are in the frames at frame now: it is resident. */
void vmm_page_attach(struct vmm *v, struct vmm_page *p, uint64_t frame);
/* A resident page gives its frames back (nothing when it is not resident). */
void vmm_page_detach(struct vmm *v, struct vmm_page *p);
/* A resident page lets go of its frames, which are the caller's now. */
uint64_t vmm_page_take_frames(struct vmm *v, struct vmm_page *p);
/* A whole block for a's page from the partner (WritePage, a resync): into
 * its frames, taken first when it is not resident. -ENOSPC, with reason, when
 * there are none to take. */
int vmm_page_fill(struct vmm *v, struct vmm_alloc *a, uint64_t page, const void *data, char *reason,
		  size_t reason_len);
/* a goes: its resident pages give their frames back, and the landing runs
 * held for its pages. */
void vmm_alloc_give_frames(struct vmm *v, struct vmm_alloc *a);
/* p's lock, dirty, destaging, pins or residency changed: it enters the
 * replacement queue (at the tail) or leaves it. */
void vmm_replace_update(struct vmm *v, struct vmm_page *p);
/* p was used: a queued page moves to the tail. */
void vmm_replace_touch(struct vmm *v, struct vmm_page *p);

/* The partner's allocation m (AllocateMemory, ResyncAllocation): its size
 * and extent fit in its home's partition of the store. */
bool vmm_extent_fits(struct vmm *v, const Ftvm__Partner__AllocateMemory *m);
void vmm_space_waiters_fail(struct vmm *v);
/* The change in SQLite, with its journal row. */
int vmm_persist_alloc(struct vmm *v, const struct vmm_alloc *a, const struct pt_origin *o);
/* Tells the event stream (vmm_set_event_sink()); kv ends with NULL. */
void vmm_tell(struct vmm *v, const char *type, const char *what, const char *reason,
	      const char *const *kv);
/* A volume was made ("created") or freed ("deleted") on this node; an
 * allocation that is not a volume is not told. */
void vmm_tell_volume(struct vmm *v, const struct vmm_alloc *a, const char *what);
int vmm_persist_page(struct vmm *v, struct vmm_alloc *a, uint64_t page, const struct pt_origin *o);
/* A row of a's page pp->page in the state pp says, which need not be the
 * page's in memory (a whole-page write's expected state, vmm/whole_page.c); every
 * page row goes through here and counts in the page's rows.
 * vmm_page_state fills ret with the page's state in memory. */
int vmm_journal_page(struct vmm *v, struct vmm_alloc *a, const struct pt_page *pp,
		     const struct pt_origin *o);
void vmm_page_state(const struct vmm_alloc *a, uint64_t page, struct pt_page *ret);
/* A page took a new version (a modifying release): dirty until destaged,
 * which the owner queues now; persisted. vmm_page_set_modified changes
 * memory alone, for a row journalled before. */
int vmm_page_modified(struct vmm *v, struct vmm_alloc *a, uint64_t page, uint64_t version,
		      uint32_t crc, const struct pt_origin *o);
/* vmm/sessions.c: session allocations (vmm/VMM.md, "Session allocations").
 * A connection (call's) bound to its client's session; one that closed;
 * every session with allocations and no connection here waits
 * session_grace_ms for its client (at a start and a takeover); whether a
 * connection here is bound to session (the partner's SessionQuery). */
void vmm_session_bind(struct vmm *v, struct client_call *call, const char *session);
void vmm_sessions_client_gone(struct vmm *v, uint64_t client_id);
void vmm_sessions_orphaned(struct vmm *v);
bool vmm_session_live(const struct vmm *v, const char *session);
void vmm_op_session(struct vmm *v, struct client_call *call,
		    const Ftvm__Client__SessionRequest *req);
void vmm_sessions_free(struct vmm *v);
/* vmm/media.c (node/vmm/MEDIA.md): where a's copy here rests, decided
 * once when it comes to this node, by its policy's performance and this
 * node's room (an extent on flash taken, or frames promised, and for a new
 * copy taken). NEW (an allocation, an AllocateMemory): -ENOSPC, saying why
 * in reason, when there is no room for what the policy asks; RESYNC (a copy
 * with contents): it rests in the store then, which is logged. */
enum vmm_place {
	VMM_PLACE_NEW,
	VMM_PLACE_RESYNC,
	VMM_PLACE_CHECK, /* where it would rest, taking nothing (vmm_media_room) */
};
int vmm_media_place(struct vmm *v, struct vmm_alloc *a, enum vmm_place how, char *reason,
		    size_t reason_len);
/* vmm/flash.c: a resync drops a: what flash holds of it is kept for the
 * copy that replaces it (vmm_media_place, RESYNC), until the resync begins
 * again or ends (vmm_flash_forget_kept). */
void vmm_flash_keep(struct vmm *v, const struct vmm_alloc *a);
void vmm_flash_forget_kept(struct vmm *v);
/* vmm/read_header.c: a resync this node received ended; the records of the
 * allocations its partner owns are read from the owner until confirmed. */
void vmm_headers_resynced(struct vmm *v);
/* vmm/flash.c: reads the block flash holds of a's page into buf
 * (block_size bytes) at once, and checks it against the page's CRC-32C: 0,
 * or -errno / -EBADMSG (logged). For a page that is not resident
 * (vmm_page_on_flash). */
int vmm_flash_read_block(struct vmm *v, const struct vmm_alloc *a, uint64_t page, void *buf);
/* vmm/destage.c: what the store queue may write (storage/STORAGE.md,
 * "Access"): this node's partition, and its partner's while this node owns
 * an allocation homed there (from a takeover until the failback hands the
 * last one back). Called when that may have changed. */
void vmm_store_access(struct vmm *v);
/* vmm/destage.c: the backing store. The store's record of each of a's pages
 * (a->pages of them, to free), read at once (the store queue drained);
 * NULL, logged, when it cannot be. */
struct store_page_record;
struct store_page_record *vmm_store_read_records(struct vmm *v, const struct vmm_alloc *a);
/* a's dirty page goes in the queue for the store, unless it is there or may
 * not go yet (write-locked, say). */
void vmm_destage_page(struct vmm *v, struct vmm_alloc *a, uint64_t page);
const char *vmm_node_id(const struct vmm *v);
const char *vmm_partner_id(const struct vmm *v);
bool vmm_is_owner(const struct vmm *v, const struct vmm_alloc *a);
/* A change can complete: the partner is linked to acknowledge it, or this
 * node serves alone (solo). */
bool vmm_can_complete(const struct vmm *v);
/* Drops owner's lock on a page and lets the paging queue go on; -ENOENT when
 * owner held none. */
int vmm_unlock(struct vmm *v, struct vmm_alloc *a, uint64_t page, const char *owner);

/* Something a queued request may wait for happened: look at the queue again. */
void vmm_paging_kick(struct vmm *v);
void vmm_page_waiters_fail(struct vmm *v, int status, const char *reason);

/* ---- for node/ha/: what failover reaches of the memory manager ----
 * ha/ keeps its own state (failover_state.h: the mode, the epoch, the
 * pointers clients hold, the resync and the failover window); these are the
 * memory manager's handles and facts it works with (vmm/vmm.c). */

/* The page table, the allocations in memory, the frame pool, the partner
 * session (NULL until vmm_set_session()), the node's configuration and its
 * event loop: the memory manager's, shared for as long as v lives. */
struct pagetable *vmm_pagetable(const struct vmm *v);
struct vmm_table *vmm_allocations(const struct vmm *v);
struct frame_pool *vmm_frame_pool(const struct vmm *v);
struct repl_session *vmm_session(const struct vmm *v);
const struct ftvm_config *vmm_config(const struct vmm *v);
struct event_base *vmm_event_base(const struct vmm *v);
/* ha/'s state, made with v (failover_state_new()). */
struct failover_state *vmm_failover(const struct vmm *v);
/* Operations completed alone (solo) still a loop turn from their answers
 * (vmm_op_send): a resync's snapshot waits until none is half done. */
bool vmm_solo_answers_pending(const struct vmm *v);
/* The partner has everything again (mirrored): the journal's rows let go
 * past [failover] journal_limit no longer count against it (the status's
 * journal_given_up). */
void vmm_journal_caught_up(struct vmm *v);
