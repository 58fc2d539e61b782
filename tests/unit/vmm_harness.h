/* One memory manager (node "a", partner "b") for the unit tests of its core,
 * through vmm.h, with the fakes of what lies below it: the partner session
 * (fake_session.h) and the client calls (fake_client.h). The page table is
 * real SQLite and the store a real file, both in a scratch directory.
 *
 * The event loop runs only when a test runs it: harness_settle() runs what is
 * due now (a turn's commit, the paging queue), RUN_UNTIL() runs turns until a
 * condition holds, at most HARNESS_TURNS of them. Nothing sleeps and no time
 * is measured; a condition that never comes costs at most the turns (the
 * vmm's own timers wake the loop up at least every half second).
 *
 * Setup failures exit 99 naming what failed; checks are the test's
 * (check.h), on what these helpers return. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/event.h>

#include "client.pb-c.h"
#include "codec.h"
#include "fake_client.h"
#include "fake_session.h"

#define HARNESS_TURNS 50
#define HARNESS_PAGE 4096u

typedef Ftvm__Client__ClientReply ClientReply;
typedef Ftvm__Client__ClientRequest ClientRequest;

struct harness {
	char dir[256];
	struct event_base *base;
	struct ftvm_config *config;
	struct vmm *v;
	struct repl_session *s;
	struct fake_client *client; /* root's: every right */
	uint64_t partition;	    /* bytes in each node's partition of the store */
};

/* Runs turns of h's loop until cond holds or HARNESS_TURNS went by; cond's
 * value then. */
#define RUN_UNTIL(h, cond)                                       \
	({                                                       \
		unsigned turns_ = 0;                             \
		while (!(cond) && turns_++ < HARNESS_TURNS)      \
			event_base_loop((h)->base, EVLOOP_ONCE); \
		(cond);                                          \
	})

/* A vmm mirrored with partner "b" over a linked fake session. memory and
 * store are the [memory] size and [store] size ("64K", "1M"); policies is
 * more config text ("" or "[policy big]\nblock_size = 8K\n"). Logs show
 * warnings and errors (all with FTVM_TEST_DEBUG=1 in the environment). */
void harness_start(struct harness *h, const char *name, const char *memory, const char *store,
		   const char *policies);
/* Fails what waits for the partner, frees the vmm (which commits and
 * destages, as at a clean stop) and removes the scratch directory. Returns
 * the client calls left unanswered: each call is answered exactly once, so
 * anything but 0 is a failure. */
unsigned harness_stop(struct harness *h);
/* Runs what is due now without waiting (a turn's commit, the paging queue). */
void harness_settle(struct harness *h);

/* ---- client calls, as h->client (or c) ---- */
struct fake_call *harness_alloc_call(struct harness *h, uint64_t size, const char *policy,
				     bool immediate);
/* harness_alloc_call(h, size, NULL, false) for the client named name. */
struct fake_call *harness_named_alloc_call(struct harness *h, uint64_t size, const char *name);
/* ... and for a session allocation of session (a client's session id). */
struct fake_call *harness_session_alloc_call(struct harness *h, uint64_t size, const char *session);
/* A SessionRequest: binds h->client's connection to session. */
struct fake_call *harness_session_call(struct harness *h, const char *session);
struct fake_call *harness_free_call(struct harness *h, const char *guid);
struct fake_call *harness_flush_call(struct harness *h, const char *guid, uint64_t first_page,
				     uint64_t pages);
struct fake_call *harness_pointer_call(struct harness *h, struct fake_client *c, const char *guid,
				       uint64_t page, bool write, bool wait);
struct fake_call *harness_release_call(struct harness *h, struct fake_client *c, const char *guid,
				       uint64_t page, bool modified);
struct fake_call *harness_write_call(struct harness *h, const char *guid, uint64_t page,
				     const void *data, size_t len, bool wait);
struct fake_call *harness_read_call(struct harness *h, const char *guid, uint64_t page, bool wait);
struct fake_call *harness_header_call(struct harness *h, const char *guid);
/* A pointer granted: asked, the partner's answers OK, the reply awaited.
 * Exits 99 when it is not granted. */
struct fake_call *harness_pointer(struct harness *h, struct fake_client *c, const char *guid,
				  uint64_t page, bool write);
/* The status of call's reply, or -1 while it has none. */
int harness_status(const struct fake_call *call);

/* An allocation of size bytes made here: asked, its [SpaceRequest,
 * AllocateMemory] answered OK, its reply awaited. Its guid in guid; its
 * extent's store offset returned. Exits 99 when that does not go. */
uint64_t harness_alloc(struct harness *h, uint64_t size, char *guid, size_t len);
/* The partner's allocation guid of pages pages of 4K, homed and owned by
 * "b", made by its AllocateMemory (at the start of b's partition plus
 * offset). Exits 99 when it is refused. */
void harness_partner_alloc(struct harness *h, const char *guid, uint64_t pages, uint64_t offset);

/* ---- the partner's requests ---- */
/* One request from b (message set), delivered alone; its seq. */
uint64_t harness_deliver(struct harness *h, Envelope *env);
/* The vmm's answer to seq once committed (settles first); NULL if none. */
const CommandComplete *harness_answer(struct harness *h, uint64_t seq);

/* b writes its page as b does ([AllocateWrite, WritePage, ReleasePointer],
 * every byte of the block byte, at version); a mirrors it, dirty. The
 * status of the first that failed, 0 when none did. */
int harness_partner_writes(struct harness *h, const char *guid, uint64_t page, uint8_t byte,
			   uint64_t version);

/* ---- what the page table on disk holds, committed ---- */
struct pt_row {
	uint64_t version;
	uint32_t crc32c;
	bool dirty;
};
/* Whether the table has allocation guid; its owner in owner. Settles first:
 * what is due is committed. */
bool harness_pt_alloc(struct harness *h, const char *guid, char *owner, size_t len);
/* The state of guid's page in the table; false when there is none. */
bool harness_pt_page(struct harness *h, const char *guid, uint64_t page, struct pt_row *ret);

/* ---- the store file ---- */
/* The record of an extent's page: its version and CRC-32C as destaged. */
void harness_store_record(struct harness *h, uint64_t extent, uint64_t page, uint64_t *ret_version,
			  uint32_t *ret_crc);
/* The block of page of an extent of pages 4K blocks, into buf. */
void harness_store_block(struct harness *h, uint64_t extent, uint64_t pages, uint64_t page,
			 void *buf);

/* ---- vmm_peek.c: the one place that looks inside struct vmm ---- */
/* A page's state in the in-memory page table (residency, lock, dirty),
 * which nothing in vmm.h tells. */
struct peek_page {
	bool resident, dirty, destaging, stale;
	bool on_flash;	   /* this node's flash holds its version */
	const char *media; /* where its allocation's copy here rests */
	uint64_t version;
	uint32_t crc32c;
	uint64_t frame;
	int lock_mode; /* Ftvm__Partner__LockMode */
	size_t n_owners;
	const char *owner0; /* the first lock owner, or NULL */
};
/* false when there is no such page. */
bool vmm_peek_page(struct vmm *v, const char *guid, uint64_t page, struct peek_page *ret);
/* The page table's rows for guid (the allocation's owner into owner) and,
 * with ret, its page: false when there are none. Read through the vmm's own
 * connection (the table is locking_mode=EXCLUSIVE: no other may read it),
 * only with no transaction open, so what is read is committed; the fold the
 * read does first is committed at once, as the vmm's idle fold would. */
bool vmm_peek_committed(struct vmm *v, const char *guid, uint64_t page, char *owner, size_t len,
			struct pt_row *ret);
/* Whether changes wait for a commit (a transaction is open). */
bool vmm_peek_uncommitted(struct vmm *v);
