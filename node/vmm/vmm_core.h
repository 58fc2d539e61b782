/* What the memory manager (node/vmm/) offers the components that work on
 * its pages, node/pagedata/ and node/ha/: frames, pages, the journal, the
 * paging queue and operations sent to the partner. Not for the rest of
 * node/, which has vmm.h. struct vmm itself is vmm/'s alone (vmm_state.h). */
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
/* How often a request short of frames (here or on the partner) tries again. */
#define VMM_RETRY_MS 50
/* How long the owner keeps a page for a partner's ticket whose turn came
 * (vmm/VMM.md, "Fairness across the pair"). */
#define VMM_TICKET_HOLD_MS 1000
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
/* Before a request to the partner: commits the open transaction only when
 * answers to the partner wait for it (they must go first). */
void vmm_before_request(struct vmm *v);

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

/* ---- frames and the replacement queue (vmm/vmm.c, vmm/VMM.md "Replacement") ---- */

/* A run of frames for a block of block_size bytes: from the free pool, else
 * by evicting pages from the head of the replacement queue. -ENOSPC when
 * nothing is left to evict; reason then says so, naming the node. */
int vmm_frames_take(struct vmm *v, uint32_t block_size, uint64_t *ret_frame, char *reason,
		    size_t reason_len);
void vmm_frames_give(struct vmm *v, uint64_t frame, uint32_t block_size);
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
/* The lock mode of a read or a write pointer. */
static inline int vmm_lock_mode(bool write)
{
	return write ? FTVM__PARTNER__LOCK_MODE__LOCK_MODE_WRITE
		     : FTVM__PARTNER__LOCK_MODE__LOCK_MODE_READ;
}
/* paging_queue.c: vmm_page_lock, and p leaves the replacement queue. */
int vmm_lock(struct vmm *v, struct vmm_page *p, int mode, const char *owner);
/* A request in flight needs p's frames to stay (not evicted) until unpinned. */
void vmm_pin(struct vmm *v, struct vmm_page *p);
void vmm_unpin(struct vmm *v, struct vmm_page *p);

/* The partner's allocation m (AllocateMemory, ResyncAllocation): its size
 * and extent fit in its home's partition of the store. */
bool vmm_extent_fits(struct vmm *v, const Ftvm__Partner__AllocateMemory *m);
/* Room in this node's store partition was given back: waiting allocations
 * may go on. */
void vmm_space_freed(struct vmm *v);
void vmm_space_waiters_fail(struct vmm *v);
/* A gone client's allocations waiting for space are not made. */
void vmm_space_waiters_client_gone(struct vmm *v, uint64_t client_id);
/* Allocations waiting for space, and page requests waiting (for a lock, a
 * page-in or frames): together the paging queue. */
uint64_t vmm_space_waiting(const struct vmm *v);
uint64_t vmm_page_waiting(const struct vmm *v);
/* The change in SQLite, with its journal row. */
int vmm_persist_alloc(struct vmm *v, const struct vmm_alloc *a, const struct pt_origin *o);
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
void vmm_page_set_modified(struct vmm *v, struct vmm_alloc *a, uint64_t page, uint64_t version,
			   uint32_t crc);

/* vmm/destage.c: the destage queue and the backing store. */
int vmm_store_open(struct vmm *v);
void vmm_store_close(struct vmm *v);
/* At start: takes from the store's records the version and CRC-32C of every
 * page it holds; pages stay non-resident. */
void vmm_store_page_in(struct vmm *v);
/* The store's record of each of a's pages (a->pages of them, to free), read
 * at once (the store queue drained); NULL, logged, when it cannot be. */
struct store_page_record;
struct store_page_record *vmm_store_read_records(struct vmm *v, const struct vmm_alloc *a);
/* This node's partition: bytes free for new extents, and its length. */
void vmm_store_space(struct vmm *v, uint64_t *ret_free, uint64_t *ret_total);
/* a's extent is new (it may hold an older allocation's records): its records
 * are zeroed, before anything destaged later (a fence). */
void vmm_store_extent_clear(struct vmm *v, const struct vmm_alloc *a);
/* An extent in this node's partition for a, in a->store_offset, held until
 * vmm_store_extent_done(); -ENOSPC when no gap is large enough. */
int vmm_store_extent(struct vmm *v, struct vmm_alloc *a);
/* a is in the table now, or was refused: its reservation ends. */
void vmm_store_extent_done(struct vmm *v, struct vmm_alloc *a);
void vmm_destage_page(struct vmm *v, struct vmm_alloc *a, uint64_t page);
uint64_t vmm_destage_depth(const struct vmm *v);
/* The partner destaged guid page at version: clean here too. */
void vmm_destaged(struct vmm *v, const char *guid, uint64_t page, uint64_t version, uint32_t crc);
const char *vmm_node_id(const struct vmm *v);
const char *vmm_partner_id(const struct vmm *v);
bool vmm_is_owner(const struct vmm *v, const struct vmm_alloc *a);
/* A change can complete: the partner is linked to acknowledge it, or this
 * node serves alone (solo). */
bool vmm_can_complete(const struct vmm *v);

/* Looks up guid/page for a client request that would verb it ("read",
 * "write", ...); answers the client when it cannot, or may not
 * (vmm_client_owns). */
struct vmm_alloc *vmm_client_page(struct vmm *v, struct client_call *call, const char *guid,
				  uint64_t page, const char *verb);
/* Whether the client of call may verb a: it is a's uid's, or an admin's
 * (vmm/VMM.md, "Who may do what"). If not, answers it DENIED naming the owner.
 * A NULL call (no client) may. */
bool vmm_client_owns(struct vmm *v, struct client_call *call, const struct vmm_alloc *a,
		     const char *verb);
/* A new lock owner name for a request: "<node>/<client pid>/<op n>". */
void vmm_lock_owner(struct vmm *v, struct client_call *call, char *buf, size_t len);
/* A batch failed after the partner recorded owner's lock: release it there. */
void vmm_release_stray_lock(struct vmm *v, const char *guid, uint64_t page, const char *owner);
/* Drops owner's lock on a page and lets the paging queue go on; -ENOENT when
 * owner held none. */
int vmm_unlock(struct vmm *v, struct vmm_alloc *a, uint64_t page, const char *owner);
void vmm_on_paging_kick(evutil_socket_t fd, short what, void *arg);

/* The paging queue holds pointer requests and whole-page calls. */
enum vmm_wait_kind {
	VMM_WAIT_POINTER,
	VMM_WAIT_WRITE_PAGE,
	VMM_WAIT_READ_PAGE,
	/* The partner's waiting LockRequest keeping its place (no client
	 * here): it is never granted from the queue, only held for the
	 * partner's next ask. */
	VMM_WAIT_TICKET,
};
/* What a queued request waits for. */
enum vmm_wait_reason {
	VMM_WAIT_LOCK,	   /* a conflicting lock to go */
	VMM_WAIT_CONTENTS, /* the page's contents to arrive (page-in, or a write) */
	VMM_WAIT_FRAMES,   /* frames, here or on the partner: tried every VMM_RETRY_MS */
	VMM_WAIT_PARTNER,  /* the end of the failover window (ha/failover_window.c) */
};
/* A client's request for a page, as the paging queue keeps it. */
struct vmm_page_request {
	struct client_call *call;
	enum vmm_wait_kind kind;
	const char *guid;
	uint64_t page;
	bool write;	      /* wants the write lock */
	bool wait;	      /* the client waits for a lock, and for frames */
	bool again;	      /* out of the paging queue: queued again, it goes first */
	uint64_t deadline_ms; /* monotonic, once queued: it gives up then */
	uint64_t ticket;      /* its place in the owner's queue, once it has one */
	const void *data;     /* a whole-page write's bytes */
	size_t len;
};
/* Queues req until why is over or its deadline (reason: why it waits, for the
 * answer at the deadline). */
void vmm_page_wait(struct vmm *v, const struct vmm_page_request *req, enum vmm_wait_reason why,
		   const char *reason);
/* req cannot complete without the partner: in the failover window it waits
 * for the pair's decision, else it is refused PARTNER_UNAVAILABLE, reason. */
void vmm_partner_wait(struct vmm *v, const struct vmm_page_request *req, const char *reason);
/* No frames for req: it waits for them when req->wait, else NO_SPACE now. */
void vmm_frames_short(struct vmm *v, const struct vmm_page_request *req, const char *reason);
/* A page-in failed: the requests waiting to read guid/page get reason. */
void vmm_page_in_failed(struct vmm *v, const char *guid, uint64_t page, const char *reason);
/* Something a queued request may wait for happened: look at the queue again. */
void vmm_paging_kick(struct vmm *v);
/* Why a new request for guid/page must wait although its lock may be free:
 * earlier requests wait for the page (vmm/VMM.md, "Fairness across the pair");
 * NULL when none do. The text is in buf. */
const char *vmm_page_queued(const struct vmm *v, const char *guid, uint64_t page, char *buf,
			    size_t len);
/* The owner's side of the partner's LockRequest m: NULL when m may have the
 * lock now, as far as the queue goes (its ticket, if any, had its turn and
 * is dropped); otherwise why not, in buf. */
const char *vmm_ticket_turn(struct vmm *v, const Ftvm__Partner__LockRequest *m, char *buf,
			    size_t len);
/* m was refused: its ticket (non-zero) keeps its place in the queue. */
void vmm_ticket_queue(struct vmm *v, const Ftvm__Partner__LockRequest *m);
/* The ticket of req's LockRequest, and how long req still waits (0, 0 when
 * it does not wait): its own ticket, or a new one the first time. */
uint64_t vmm_lock_request_ticket(struct vmm *v, const struct vmm_page_request *req,
				 uint32_t *wait_ms);
/* pointer.c: a pointer request out of the paging queue, tried again. */
void vmm_pointer_retry(struct vmm *v, const struct vmm_page_request *req);
/* A gone client's requests in the paging queue are dropped. */
void vmm_page_waiters_client_gone(struct vmm *v, uint64_t client_id);
/* vmm/whole_page.c: a whole-page call out of the paging queue, tried again. */
void vmm_page_retry(struct vmm *v, const struct vmm_page_request *req);
/* vmm/destage.c: true when a's page (req's) is resident, with its contents
 * (zeroes for a page never written); otherwise req was queued (a page-in is
 * on its way, or frames are short and req waits) or answered. */
bool vmm_page_contents(struct vmm *v, const struct vmm_page_request *req, struct vmm_alloc *a);
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

/* The originating node's methods. */
void vmm_op_alloc(struct vmm *v, struct client_call *call, const Ftvm__Client__AllocRequest *req);
void vmm_op_free(struct vmm *v, struct client_call *call, const char *guid);
void vmm_op_write_page(struct vmm *v, struct client_call *call,
		       const Ftvm__Client__WritePageRequest *req);
void vmm_op_read_page(struct vmm *v, struct client_call *call,
		      const Ftvm__Client__ReadPageRequest *req);
void vmm_op_verify(struct vmm *v, struct client_call *call);
void vmm_op_map(struct vmm *v, struct client_call *call);
void vmm_op_get_pointer(struct vmm *v, struct client_call *call,
			const Ftvm__Client__GetPointerRequest *req);
void vmm_op_release_pointer(struct vmm *v, struct client_call *call,
			    const Ftvm__Client__ReleasePointerRequest *req);
/* header, list, sense: answered from this node's own table. */
void vmm_op_local(struct vmm *v, struct client_call *call, const Ftvm__Client__ClientRequest *req);
/* Fills info from this node's table (capacity, queues, and digests when
 * page_table); free with vmm_sense_release. */
int vmm_sense_fill(struct vmm *v, bool page_table, Ftvm__Partner__SenseInformation *info);
void vmm_sense_release(Ftvm__Partner__SenseInformation *info);
