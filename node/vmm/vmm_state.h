/* The memory manager's own state, and the calls its files share among
 * themselves: only node/vmm/'s files include this (and tests/unit/vmm_peek.c,
 * which looks inside on purpose). The components beside it (node/pagedata/,
 * node/ha/) reach it through vmm_core.h's calls, and own their state
 * (pagedata_state.h, failover_state.h). */
#pragma once

#include "vmm_core.h"

struct vmm_after_commit {
	struct vmm_after_commit *next;
	void (*fn)(void *arg);
	void *arg;
};

struct vmm {
	vmm_event_fn event_fn; /* vmm_set_event_sink() */
	void *event_arg;
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
	/* Answers to the partner's requests (owned copies), sent together
	 * after this transaction commits (vmm_answer). */
	struct repl_answer *answers;
	size_t n_answers, answers_cap;
	/* Folds the page writes a commit left waiting and checkpoints the WAL
	 * once the node is idle (IDLE_MS without a commit), so a busy commit
	 * seldom pays either. */
	struct event *idle_event;
	struct vmm_after_commit *after, **after_tail;

	/* Flushes waiting for pages to be durable in the store (vmm/flush.c),
	 * and whether a Destaged of the partner's batch being applied may have
	 * answered some: they are looked at once, after the batch. */
	struct vmm_flush *flushes;
	bool flushes_recheck;
	/* Allocations waiting for room in the store (Fig. 5 without
	 * `immediate`), in order. */
	struct vmm_space_waiter *space_waiters;
	/* Session allocations' clients (vmm/sessions.c), and which
	 * connection is bound to which. */
	struct vmm_session *sessions;
	struct vmm_session_bind *session_binds;
	/* The paging queue: requests waiting for a lock, a page-in or frames,
	 * in order, looked at again (kick_event) when one of those may be over. */
	struct vmm_page_waiter *page_waiters;
	struct event *kick_event;
	struct event *trim_event; /* the journal, every JOURNAL_TRIM_EVERY_S */

	/* The replacement queues (vmm/replacement.c, vmm/VMM.md "Replacement"),
	 * one per partition of the pool: resident pages that may give their
	 * frames back, least recently used first. A page takes frames from its
	 * partition alone (a volume's from the storage cache), evicting from its
	 * queue alone. */
	struct vmm_lru {
		struct vmm_page *head, *tail;
		uint64_t length;
	} lru[FRAME_PARTITIONS];
	uint64_t resident_pages;

	/* The backing store (vmm/destage.c): where this node's next extent
	 * goes, and dirty pages of allocations owned here waiting to be
	 * written to it, in order. */
	struct store *store;
	struct store_queue *store_queue;
	bool partner_partition_writable; /* vmm_store_access */
	/* Allocations made here and not yet in the table hold their extents. */
	struct vmm_alloc **extents_reserved;
	size_t n_extents_reserved;
	struct vmm_destage *destage_waiting, **destage_tail;
	struct destage_round *destage_round; /* being written, at most one */
	struct event *destage_timer;

	/* This node's flash ([flash] path; NULL without one): the copies of
	 * flash-resting allocations (vmm/flash.c), written there in rounds
	 * as the store's destage is. */
	struct store *flash;
	/* Its server memory's bytes from the partition's start; the storage
	 * cache has the rest (vmm/partitions.c). */
	uint64_t flash_server_length;
	struct store_queue *flash_queue;
	struct flash_write *flash_waiting, **flash_tail;
	struct flash_round *flash_round; /* being written, at most one */
	struct event *flash_timer;
	struct flash_kept *flash_kept; /* copies a resync dropped (vmm_flash_keep) */

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

/* How often a request short of frames (here or on the partner) tries again. */
#define VMM_RETRY_MS 50
/* How long the owner keeps a page for a partner's ticket whose turn came
 * (vmm/VMM.md, "Fairness across the pair"). */
#define VMM_TICKET_HOLD_MS 1000

/* ---- the calls vmm/'s files share among themselves ---- */
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
	const void *data;     /* a whole-page write's bytes, in its call's request */
	size_t len;
};

/* ---- frames and the replacement queue (vmm/vmm.c, vmm/VMM.md "Replacement") ---- */

/* A run of frames for a block of a: from the free frames of a's partition
 * of the pool, else by evicting pages from the head of its replacement
 * queue. -ENOSPC when nothing is left to evict; reason then says so, naming
 * the node. */
int vmm_frames_take(struct vmm *v, const struct vmm_alloc *a, uint64_t *ret_frame, char *reason,
		    size_t reason_len);
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
/* Room in this node's store partition was given back: waiting allocations
 * may go on. */
void vmm_space_freed(struct vmm *v);
/* A gone client's allocations waiting for space are not made. */
void vmm_space_waiters_client_gone(struct vmm *v, uint64_t client_id);
/* Allocations waiting for space, and page requests waiting (for a lock, a
 * page-in or frames): together the paging queue. */
uint64_t vmm_space_waiting(const struct vmm *v);
uint64_t vmm_page_waiting(const struct vmm *v);
void vmm_page_set_modified(struct vmm *v, struct vmm_alloc *a, uint64_t page, uint64_t version,
			   uint32_t crc);

/* vmm/extents.c: room on this node's devices. An extent for a on device,
 * first fit between those in use (-ENOSPC when no gap is large enough);
 * the bytes free there and the partition's length. */
enum vmm_device {
	VMM_DEVICE_STORE,	/* this node's partition of the store */
	VMM_DEVICE_FLASH,	/* this node's flash: its server memory */
	VMM_DEVICE_FLASH_CACHE, /* ... and its storage cache, for volumes (fast destage) */
};
int vmm_extent_find(struct vmm *v, enum vmm_device device, const struct vmm_alloc *a,
		    uint64_t *ret_offset);
void vmm_extent_space(struct vmm *v, enum vmm_device device, uint64_t *ret_free,
		      uint64_t *ret_total);

/* vmm/flash.c: this node's flash (node/vmm/MEDIA.md). Opened after the
 * store when [flash] path is set; at start each flash-resting page takes
 * what flash's records hold of it (after vmm_store_page_in). */
int vmm_flash_open(struct vmm *v);
/* vmm/partitions.c: this node's split of DRAM and flash taken from the
 * config, checked against the one recorded, recorded; logged on failure.
 * After vmm_flash_open, before any frame is taken. */
int vmm_partitions_open(struct vmm *v);
void vmm_flash_close(struct vmm *v);
void vmm_flash_page_in(struct vmm *v);
/* vmm/media.c: whether this node has room for its copy of an allocation (or
 * a volume) of pages blocks of block_size under policy (the partner's SpaceRequest,
 * Fig. 5 step 520): 0, where it would rest, and that media's free and
 * total bytes (DRAM: frames not promised); -ENOSPC, saying why in reason.
 * Nothing is taken: its AllocateMemory, in the same turn, takes it. */
int vmm_media_room(struct vmm *v, const char *policy, bool volume, uint64_t pages,
		   uint32_t block_size, enum vmm_media *ret_media, uint64_t *ret_free,
		   uint64_t *ret_total, char *reason, size_t reason_len);
/* An extent on flash for a (its records zeroed): a's copy rests there;
 * -ENOSPC when no gap is large enough, -ENODEV without flash. */
int vmm_flash_place(struct vmm *v, struct vmm_alloc *a);
/* a's page changed here: its block goes to flash, unless it is there, a's
 * copy does not rest there, or it may not go yet (write-locked). */
void vmm_flash_page(struct vmm *v, struct vmm_alloc *a, uint64_t page);
/* Posts a read of a's page's block from flash into buf: done as for the
 * store queue. */
int vmm_flash_post_read(struct vmm *v, const struct vmm_alloc *a, uint64_t page, void *buf,
			void (*done)(int result, void *arg), void *arg);
uint64_t vmm_flash_depth(const struct vmm *v);
/* The extents of the copies a resync dropped that flash keeps for their
 * replacements (vmm_flash_keep), which are in use: written to ret (NULL:
 * only counted); how many. */
struct store_range;
size_t vmm_flash_kept_extents(const struct vmm *v, struct store_range *ret);
/* A resync's replacement for a dropped copy of the same guid and shape,
 * which rested on flash, rests there again on its old extent, each page on
 * flash where its version and CRC-32C come back unchanged: true when a was
 * placed so. */
bool vmm_flash_recall(struct vmm *v, struct vmm_alloc *a);

/* vmm/destage.c: the destage queue and the backing store. */
int vmm_store_open(struct vmm *v);
void vmm_store_close(struct vmm *v);
/* At start: takes from the store's records the version and CRC-32C of every
 * page it holds; pages stay non-resident. */
void vmm_store_page_in(struct vmm *v);
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
uint64_t vmm_destage_depth(const struct vmm *v);
/* A flush waits: the next destage round goes now, not DESTAGE_DELAY_MS on. */
void vmm_destage_hurry(struct vmm *v);
/* The partner destaged guid page at version: clean here too. */
void vmm_destaged(struct vmm *v, const char *guid, uint64_t page, uint64_t version, uint32_t crc);

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
void vmm_on_paging_kick(evutil_socket_t fd, short what, void *arg);
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
/* vmm/destage.c: makes a's page resident: 1 when it is now (zeroes for a
 * page never written), 0 when its page-in is on its way (posted now or
 * before), -ENOSPC when no frames can be taken or -errno when the read
 * cannot be posted, with reason. */
int vmm_page_make_resident(struct vmm *v, struct vmm_alloc *a, uint64_t page, char *reason,
			   size_t len);

/* The originating node's methods. */
void vmm_op_alloc(struct vmm *v, struct client_call *call, const Ftvm__Client__AllocRequest *req);
/* call NULL: the node frees it for a session gone (vmm/sessions.c). */
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
/* vmm/flush.c: a flush waits for the pages of a range changed before it to
 * be durable in the store (vmm/VMM.md, "Flush"); checked again after each
 * destage round here and each batch of the partner's with a Destaged. */
void vmm_op_flush(struct vmm *v, struct client_call *call, const Ftvm__Client__FlushRequest *req);
void vmm_flush_check(struct vmm *v);
/* How a wait for a change ends: status OK (reason NULL), or why not. */
typedef void (*vmm_acked_fn)(void *arg, int status, const char *reason);
/* A page write made here is done: its client is answered ([node] ack,
 * vmm/VMM.md "Acknowledgement levels") once this node's change is
 * committed (now when committed says it is), and at ack = durable once
 * a's page is in the store at version too, by the same wait as a flush.
 * done(arg, OK) then, or with the reason that wait failed; client_id names
 * whose wait it is (a client that goes ends it). */
void vmm_page_write_acked(struct vmm *v, const struct vmm_alloc *a, uint64_t page, uint64_t version,
			  bool committed, uint64_t client_id, vmm_acked_fn done, void *arg);
void vmm_flushes_fail(struct vmm *v);
void vmm_flushes_client_gone(struct vmm *v, uint64_t client_id);
/* vmm/volume.c: the request's faults as a volume's are answered here;
 * true when it may go on as an allocation does (vmm/VMM.md, "Volumes"). */
bool vmm_volume_request_valid(struct vmm *v, struct client_call *call,
			      const Ftvm__Client__AllocRequest *req);
/* A volume homed on the partner (req->home its id): it makes it
 * (MakeVolume), and its answer answers call. */
void vmm_volume_make_on_partner(struct vmm *v, struct client_call *call,
				const Ftvm__Client__AllocRequest *req);
/* The partner's MakeVolume m (seq): made here a turn later as this node's
 * own client's volume, and answered then (vmm_answer); -errno, with
 * reason, for one refused now. */
int vmm_volume_make_for_partner(struct vmm *v, const Ftvm__Partner__MakeVolume *m, uint64_t seq,
				char *reason, size_t len);
/* Frees the volume of that name, as vmm_op_free its allocation. */
void vmm_op_free_volume(struct vmm *v, struct client_call *call, const char *name);
/* A client read p: staged by read-ahead, it was a hit. */
static inline void vmm_read_ahead_used(struct vmm *v, struct vmm_page *p)
{
	if (p->read_ahead) {
		p->read_ahead = false;
		v->counted.readahead_hits++;
	}
}
/* Whether a volume of that name is in the table or being made here. */
bool vmm_volume_name_taken(struct vmm *v, const char *name);
/* vmm/read_header.c: a client's header, from this node's record or its
 * owner's (vmm/VMM.md, "Read header: whose record answers"). */
void vmm_op_read_header(struct vmm *v, struct client_call *call, const char *guid);
/* Fills info from this node's table (capacity, queues, and digests when
 * page_table); free with vmm_sense_release. */
int vmm_sense_fill(struct vmm *v, bool page_table, Ftvm__Partner__SenseInformation *info);
void vmm_sense_release(Ftvm__Partner__SenseInformation *info);
