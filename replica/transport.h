/* The partner channel's transport interface: one ops table per backend (TCP
 * now, RDMA later), so nothing above this file knows which one runs.
 *
 * A transport instance owns a listener and its connections. It moves whole
 * frames (common/frame.h): send() takes one payload, in pieces, and frames
 * it; the receive callback gets one whole, checksum-verified payload. A
 * frame that is too long, truncated, or fails its checksum ends the
 * connection (conn_down with the reason); the transport itself goes on
 * listening.
 *
 * Every callback runs on the event loop thread, from the loop. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "peer_filter.h"
#include "rdma_regtable.h"

struct event_base;
struct repl_transport;
struct repl_conn;

struct repl_transport_callbacks {
	/* conn can carry frames now: accepted (inbound) or connected (outbound). */
	void (*conn_up)(struct repl_conn *conn, bool inbound, void *arg);
	/* One frame's payload; the buffer is valid only during the call. */
	void (*receive)(struct repl_conn *conn, const uint8_t *payload, size_t len, void *arg);
	/* conn is gone: peer closed, I/O error, bad frame, or an outbound connect
	 * failed. reason says which. conn is freed when this returns. Not called
	 * for a connection the owner closed with close(). */
	void (*conn_down)(struct repl_conn *conn, int error, const char *reason, void *arg);
	/* A connection from peer ("host:port") was refused by the listen
	 * filter and closed before anything was read from it. Optional. */
	void (*refused)(const char *peer, const char *reason, void *arg);
};

/* One block of page data placed by RDMA WRITE before a payload
 * (send_after_writes): length bytes at src, inside the attached pool, to
 * offset into the partner's pool block, which the partner registered at
 * generation. */
struct repl_remote_write {
	const void *src;
	uint32_t block;
	uint64_t generation;
	uint64_t offset;
	uint64_t length;
};

/* The registrations of the pool and the staging slabs, for status:
 * registered now, stale ones waiting for a purge, those purged and those the
 * device refused since the attach; the staging slabs mapped now and since
 * the attach. */
struct repl_pool_stats {
	uint32_t current;
	uint32_t stale;
	uint64_t purged;
	uint64_t failed;
	uint32_t staging_slabs;
	uint64_t staging_allocated;
};

/* One payload in pieces, for send_many(). */
struct repl_payload {
	const struct iovec *iov;
	size_t n;
	size_t len; /* the pieces' bytes in all */
};

struct repl_transport_ops {
	const char *name;
	/* A transport on base that reports to cb; frames above max_payload are
	 * refused both ways. */
	int (*create)(struct event_base *base, const struct repl_transport_callbacks *cb, void *arg,
		      size_t max_payload, struct repl_transport **ret);
	/* Accept connections on "host:port", only from the addresses allowed
	 * lets in (the transport keeps a copy; NULL: anyone); any other is
	 * closed at once and reported to refused(). */
	int (*listen)(struct repl_transport *t, const char *endpoint,
		      const struct peer_filter *allowed);
	/* Start connecting to "host:port": conn_up or conn_down follows later. */
	int (*connect)(struct repl_transport *t, const char *endpoint, struct repl_conn **ret);
	/* Queue one payload, gathered from n pieces (len bytes in all). The
	 * caller keeps the pieces' memory (what does not go to the socket or
	 * the device at once is copied before return). Never -EAGAIN: a
	 * backend with send credits (RDMA) queues the frame until credits come
	 * back. -EMSGSIZE: len is above max_payload. */
	int (*send)(struct repl_conn *c, const struct iovec *iov, size_t n, size_t len);
	/* Optional: n payloads in this order, as send() of each would queue
	 * them, but handed to the kernel together (TCP: one writev() where the
	 * socket takes them all). The same ownership and errors as send();
	 * nothing is queued when one is above max_payload. NULL: the caller
	 * sends them one by one. */
	int (*send_many)(struct repl_conn *c, const struct repl_payload *p, size_t n);
	/* Close and free conn now; no conn_down follows. */
	void (*close)(struct repl_conn *c);
	/* Bytes given to send() on c and not yet handed to the kernel or the
	 * device: waiting for socket room or for send credits. */
	size_t (*backlog)(const struct repl_conn *c);
	/* Text naming the peer ("127.0.0.1:7102"), for logs. */
	const char *(*peer_name)(const struct repl_conn *c);
	/* Close everything; NULL is fine. */
	void (*destroy)(struct repl_transport *t);

	/* ---- One-sided page data (replica/RDMA.md); NULL where the backend
	 * has none (TCP). Functions with a reason write why they failed. ---- */
	/* Offers the frame pool, length bytes at base, in registration blocks of
	 * block_bytes (the last may be shorter). Nothing is registered yet. */
	int (*pool_attach)(struct repl_transport *t, void *base, uint64_t length,
			   uint64_t block_bytes, char *reason, size_t reason_len);
	/* How many blocks the attached pool has (0: none attached). */
	uint32_t (*pool_blocks)(const struct repl_transport *t);
	/* Block as the partner is to see it now (length 0: not registered). */
	int (*pool_describe)(const struct repl_transport *t, uint32_t block,
			     struct rdma_remote_block *ret);
	/* Makes [addr, addr + length), inside one block of the pool, writable by
	 * the partner: its block's keys and generation, registered_now when this
	 * call registered it (the partner must be told). -ERANGE across a
	 * block, -ENOENT outside the pool, -ENOTCONN before any connection
	 * opened the device. */
	int (*pool_use_range)(struct repl_transport *t, const void *addr, uint64_t length,
			      struct rdma_block_key *ret, char *reason, size_t reason_len);
	/* The frame pool shrank by block (it leaves the registration table: a
	 * new generation, its registration stale) or grew by it again (back in
	 * its own slot at a new generation, unregistered until its next use).
	 * The caller made sure no frame of a block that leaves is in use. */
	int (*pool_block_out)(struct repl_transport *t, uint32_t block, char *reason,
			      size_t reason_len);
	int (*pool_block_in)(struct repl_transport *t, uint32_t block, char *reason,
			     size_t reason_len);
	/* Deregisters the stale registrations: how many went; -EBUSY while a
	 * connection has an RDMA WRITE posted or queued (one might still use a
	 * stale key); a deregistration's error. */
	int (*pool_purge)(struct repl_transport *t, char *reason, size_t reason_len);
	void (*pool_stats)(const struct repl_transport *t, struct repl_pool_stats *ret);
	/* A staging slab of at least length bytes for the source of one write
	 * (send_after_writes takes it as a source like a frame of the pool),
	 * taken until staging_give. -ENOSPC when every slab is taken. */
	int (*staging_take)(struct repl_transport *t, uint64_t length, void **ret_addr,
			    char *reason, size_t reason_len);
	int (*staging_give)(struct repl_transport *t, void *addr);
	/* The slabs idle since the last call leave; pool_purge unmaps them. */
	int (*staging_trim)(struct repl_transport *t);
	/* c can take part in one-sided page data: the pool is attached and c's
	 * queue pair is on the pool's protection domain. */
	bool (*conn_one_sided)(const struct repl_conn *c);
	/* The partner on c registers its pool in blocks blocks: what it says of
	 * them (conn_remote_update) is kept until c goes. */
	int (*conn_remote_open)(struct repl_conn *c, uint32_t blocks, char *reason,
				size_t reason_len);
	/* What the partner said of one of its blocks (Hello, RegionUpdate):
	 * -EBADMSG when it cannot be true (rdma_remote_view_update). */
	int (*conn_remote_update)(struct repl_conn *c, const struct rdma_remote_block *b,
				  char *reason, size_t reason_len);
	/* send() of payload, after the n writes are placed by RDMA WRITE on
	 * the same queue pair: the partner gets the payload only after their
	 * bytes. The writes are checked before anything goes: -ESTALE, -ENOENT
	 * or -ERANGE when the partner's view does not hold that generation or
	 * those bytes, -ENOENT/-ERANGE for a source outside the pool, the
	 * registration's error for a source whose block the device refused to
	 * register (-ENOMEM past RLIMIT_MEMLOCK, say), -ENOTCONN when c is
	 * going down. Whatever the error, nothing was sent. The src bytes must
	 * stay as they are until the partner answered the payload. */
	int (*send_after_writes)(struct repl_conn *c, const struct repl_remote_write *w, size_t n,
				 const void *payload, size_t len, char *reason, size_t reason_len);
};

/* Every backend's instance and connection structs start with these, so a
 * caller can get back to the ops and keep its own pointer on a connection. */
struct repl_transport {
	const struct repl_transport_ops *ops;
};

struct repl_conn {
	struct repl_transport *transport;
	void *user;
};

extern const struct repl_transport_ops repl_transport_tcp;
/* Only in builds with rdma-core (HAVE_RDMA). */
extern const struct repl_transport_ops repl_transport_rdma;

/* The backend named name ("tcp", "rdma"), or NULL when this build has none. */
const struct repl_transport_ops *repl_transport_find(const char *name);

/* Picks the backend for a configured "auto" | "tcp" | "rdma" on a node that
 * listens on listen ("host:port"). Returns it and writes why it was picked to
 * reason; NULL with the reason it cannot run. auto takes rdma only when the
 * listen address is on an RDMA device with an active port (replica/RDMA.md). */
const struct repl_transport_ops *repl_transport_select(const char *configured, const char *listen,
						       char *reason, size_t reason_len);

static inline int repl_conn_send(struct repl_conn *c, const void *payload, size_t len)
{
	struct iovec one = { .iov_base = (void *)payload, .iov_len = len };

	return c->transport->ops->send(c, &one, 1, len);
}

static inline int repl_conn_sendv(struct repl_conn *c, const struct iovec *iov, size_t n,
				  size_t len)
{
	return c->transport->ops->send(c, iov, n, len);
}

static inline void repl_conn_close(struct repl_conn *c)
{
	c->transport->ops->close(c);
}

static inline const char *repl_conn_peer_name(const struct repl_conn *c)
{
	return c->transport->ops->peer_name(c);
}
