/* The link to the partner node: connection management, the Hello handshake,
 * heartbeats and dead-partner detection, sequence numbers, and requests
 * matched to their completions. It knows the protocol's envelope but nothing
 * of pages or locks: paging messages go up to the request callback.
 * The state machine is drawn at the top of session.c. */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#include "codec.h"
#include "pending.h"
#include "transport.h"

struct event_base;
struct repl_session;

struct repl_session_config {
	const char *node_id;
	const char *listen;  /* endpoint to accept on */
	const char *partner; /* endpoint to dial */
	const struct repl_transport_ops *transport;
	uint32_t page_size;
	uint64_t frame_count;
	uint64_t epoch;
	uint32_t heartbeat_ms;
	uint32_t dead_after_ms;
	size_t max_payload;
	/* The frame pool (frame_count frames of page_size bytes from pool_base),
	 * offered to the transport for one-sided page data in registration
	 * blocks of pool_block_frames frames. NULL: none offered. */
	void *pool_base;
	uint64_t pool_block_frames;
	/* The pair's shared key, which the partner must prove before anything
	 * else (session.c, "Authentication"); NULL: no key, and the partner
	 * must have none either (loopback only, checked by the config). Kept
	 * by the caller for the session's life. */
	const uint8_t *key;
	size_t key_len;
	/* What may wait unsent for a partner that does not read (bytes; 0:
	 * REPL_BACKLOG_DEFAULT). Past it nothing more is queued, and the next
	 * tick takes the link for dead and dials again. */
	size_t max_backlog;
};

#define REPL_BACKLOG_DEFAULT ((size_t)256 << 20)

struct repl_session_callbacks {
	/* The link came up (Hello exchanged) or went down, with why. */
	void (*link_changed)(struct repl_session *s, bool up, const char *reason, void *arg);
	/* Requests from the partner (paging messages, or messages this build
	 * does not know): n > 1 when they came in one Batch, to be applied in
	 * order, the rest answered ABORTED after one fails. Answer each with
	 * repl_session_answer(envs[i]->seq), now or later; envs are freed when
	 * this returns. */
	void (*request)(struct repl_session *s, Envelope *const *envs, size_t n, void *arg);
	/* A connection was dropped for what it sent (a bad frame, a message that
	 * does not decode, a refused Hello); peer names it. Optional. */
	void (*protocol_error)(struct repl_session *s, const char *peer, const char *reason,
			       void *arg);
	/* Fills in where this node's page table stands, and its ack level,
	 * for each Hello it sends (applied_lsn, own_lsn, ack). Optional. */
	void (*hello)(struct repl_session *s, Ftvm__Partner__Hello *h, void *arg);
	/* A peer was refused before it could say anything: it did not prove
	 * the key, or it came from an address other than the partner's
	 * (session.c, "Authentication"); as often as the log warns of it (once
	 * a minute or so per address). Optional. */
	void (*refused)(struct repl_session *s, const char *peer, const char *reason, void *arg);
};

/* Every payload (one packed Envelope) as it goes out or comes in, before any
 * decoding, for traces (common/TRACE.md). peer is the partner's id, or its
 * endpoint before its Hello. It must not call back into the session. */
typedef void (*repl_session_tap_fn)(struct repl_session *s, bool out, const char *peer,
				    const uint8_t *payload, size_t len, void *arg);

struct repl_session_stats {
	bool link_up;
	char partner_id[64]; /* "" until a Hello was seen */
	int partner_state;   /* Ftvm__Partner__NodeState */
	uint64_t partner_epoch;
	/* From its Hello: the last of our LSNs it applied, and its own last. */
	uint64_t partner_applied_lsn, partner_own_lsn;
	/* Its Hello's ack, truncated to fit; "" when it said none. */
	char partner_ack[16];
	uint64_t link_changes;
	uint64_t last_rx_ms; /* monotonic ms of the last frame from the partner */
	uint64_t requests_sent;
	uint64_t requests_received;
	unsigned connections;	/* open, in any state (1 when settled) */
	uint64_t stale_refused; /* requests refused for an older epoch */
	/* Pauses of this node's event loop longer than heartbeat_ms since start,
	 * and the longest (session.c, at the top). */
	uint64_t loop_pauses;
	uint64_t loop_pause_max_ms;
	/* Connections closed before the link for not proving the key (a wrong
	 * proof, a message out of turn, another method), and those closed at
	 * once for coming from another address than the partner's. */
	uint64_t auth_failures;
	uint64_t address_refused;
};

int repl_session_new(struct event_base *base, const struct repl_session_config *config,
		     const struct repl_session_callbacks *cb, void *arg, struct repl_session **ret);
/* Listens and starts dialling the partner. */
int repl_session_start(struct repl_session *s);
/* Fails pending requests, closes connections. NULL is fine. */
void repl_session_free(struct repl_session *s);
/* Taps every payload from now on (fn NULL: none). Only while one is set is an
 * outgoing payload made one piece for it: a page write's block is copied
 * then, and only then. */
void repl_session_set_tap(struct repl_session *s, repl_session_tap_fn fn, void *arg);
/* Runs the callback of every request still waiting for the partner's answer
 * now, with STATUS_SHUTTING_DOWN and reason: the node is stopping, and what
 * made the requests is about to be freed (their callbacks must run before).
 * The link stays up; requests made later wait for their answers as usual. */
void repl_session_fail_pending(struct repl_session *s, const char *reason);

/* Sends env (its message and lsn set by the caller; version, sender, epoch
 * and seq are filled here) and calls done once with the answer. -ENOTCONN
 * when the link is down (done is not called). */
int repl_session_request(struct repl_session *s, Envelope *env, uint32_t timeout_ms,
			 pending_done_fn done, void *arg);

/* Sends the n envelopes in one Batch frame, each a request with its own seq
 * and its own call of done(cc, args[i]). All or none are sent. */
int repl_session_request_batch(struct repl_session *s, Envelope *const *envs, size_t n,
			       uint32_t timeout_ms, pending_done_fn done, void *const *args);

/* The answer to the partner's request seq. */
struct repl_answer {
	uint64_t seq;
	const CommandComplete *cc;
};

/* Sends the n answers together: one frame, a Batch when n > 1 (split in
 * Batches of REPL_ANSWERS_MAX). Plain successes of consecutive seqs go as one
 * answer to their run when the partner takes runs (SESSION.md, "Answers in
 * runs"). The caller's memory is not kept. -ENOTCONN
 * when the link went down in between (the partner has failed the requests
 * on its side already). */
#define REPL_ANSWERS_MAX 64
int repl_session_answer(struct repl_session *s, const struct repl_answer *answers, size_t n);

/* What this node says it is, in Hello and every heartbeat. */
void repl_session_set_state(struct repl_session *s, int node_state);
/* A drill's cut (ftvmctl drill cut): for ms the link is silent both ways, as
 * with a pulled cable; both sides then see the partner silent, and after it
 * the link comes back by itself. */
void repl_session_cut(struct repl_session *s, uint32_t ms);
/* The epoch this node's envelopes carry from now on; requests from an older
 * one are refused (STATUS_STALE_EPOCH) without reaching the request callback. */
void repl_session_set_epoch(struct repl_session *s, uint64_t epoch);

void repl_session_get_stats(const struct repl_session *s, struct repl_session_stats *ret);

/* The link is up (a Hello crossed on the active connection). */
bool repl_session_link_up(const struct repl_session *s);

/* The partner's node id, "" until a Hello was seen. */
const char *repl_session_partner_id(const struct repl_session *s);

/* ---- One-sided page data (replica/RDMA.md, "One-sided page writes") ----
 * Only where the transport can (RDMA) and the pool was given in the config,
 * and only while both sides' Hellos on the active connection said one_sided.
 * Otherwise repl_session_one_sided() is false and the rest return
 * -EOPNOTSUPP: page data then goes inline in WritePage, as over TCP. */

/* A run of frames in a node's pool, at its registration block's generation. */
struct repl_landing {
	uint64_t frame;
	uint32_t frames;
	uint64_t generation;
};

/* O's side of one page write: len bytes at src (inside this node's pool)
 * go to the partner's landing. */
struct repl_page_write {
	const void *src;
	uint64_t len;
	struct repl_landing to;
};

bool repl_session_one_sided(const struct repl_session *s);

/* P: makes frames [frame, frame + frames) of this node's pool writable by the
 * partner and fills ret. Registers their block on its first use; the partner
 * is then told (RegionUpdate) before anything sent after this call.
 * -ERANGE when the run crosses a registration block; a registration the
 * device refuses returns its error (the caller answers without a landing),
 * with a warning at most once a minute (shared with the next call's). */
int repl_session_landing_open(struct repl_session *s, uint64_t frame, uint32_t frames,
			      struct repl_landing *ret);

/* P: 0 when l lies in this node's pool and its block's registration is
 * still at l->generation; -ESTALE (or -ERANGE for frames outside the pool)
 * with the reason otherwise. */
int repl_session_landing_check(const struct repl_session *s, const struct repl_landing *l,
			       char *reason, size_t reason_len);

/* O: repl_session_request_batch() with the n_writes page blocks placed first
 * by RDMA WRITE into the partner's landings (none: a plain batch, on any
 * link); the partner gets the batch only after their bytes arrived.
 * -ESTALE, -ENOENT, -ERANGE or -EOPNOTSUPP when a write cannot go one-sided
 * (the partner's view does not hold that generation, say): nothing was sent,
 * and the caller sends inline instead.
 * -EOPNOTSUPP also when the device refused to register a source's block
 * (pinned memory short: RLIMIT_MEMLOCK), which is counted in the pool's
 * stats (failed) and warned of at most once a minute. */
int repl_session_request_batch_landed(struct repl_session *s, Envelope *const *envs, size_t n,
				      uint32_t timeout_ms, pending_done_fn done, void *const *args,
				      const struct repl_page_write *writes, size_t n_writes);
/* Whether a repl_session_request_batch_landed() failure means: nothing was
 * sent, send the blocks inline. */
bool repl_session_inline_instead(int r);

/* ---- The pool's blocks come and go (replica/RDMA.md, "The pool grows and
 * shrinks"). Without a pool attached (TCP) they do nothing and return 0. */

/* The frame pool shrank by block: it leaves the registration table at a new
 * generation and every connection whose partner was told of it gets a
 * RegionUpdate saying it is withdrawn (length 0), ahead of anything sent
 * after this call. No frame of it may be in use. */
int repl_session_pool_block_out(struct repl_session *s, uint32_t block, char *reason,
				size_t reason_len);
/* The frame pool grew by block again: back in the table at a new
 * generation, registered (and the partner told) at its first use. */
int repl_session_pool_block_in(struct repl_session *s, uint32_t block, char *reason,
			       size_t reason_len);
/* Deregisters stale registrations: how many went; -EBUSY while an RDMA WRITE
 * is posted or queued on some connection (try again later). */
int repl_session_pool_purge(struct repl_session *s, char *reason, size_t reason_len);
/* The pool's registrations (all 0 without a pool). */
void repl_session_pool_stats(const struct repl_session *s, struct repl_pool_stats *ret);

/* O: a registered staging slab of at least length bytes, the source of one
 * one-sided write whose block is in no frame of the pool, taken until
 * repl_session_staging_give (after the answer). -EOPNOTSUPP without a pool,
 * -ENOSPC when every slab is taken: the caller sends inline. */
int repl_session_staging_take(struct repl_session *s, uint64_t length, void **ret_addr);
void repl_session_staging_give(struct repl_session *s, void *addr);
/* The staging slabs idle since the last call go (unmapped at a purge). */
void repl_session_staging_trim(struct repl_session *s);
