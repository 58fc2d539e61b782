/* libftvm's insides: the client and its connection, shared by the library's
 * source files. Nothing here is the library's API (that is ftvm.h), and
 * nothing here is exported: the library is built with hidden visibility. */
#pragma once

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "client.pb-c.h"
#include "config.h"
#include "ftvm.h"

typedef Ftvm__Client__ClientRequest Request;
typedef Ftvm__Client__ClientReply Reply;

/* How long a call waits for its reply once it has the connection. */
#define CALL_TIMEOUT_MS 10000
/* How long one status request of a search may take: a hung node must not
 * use up the whole search while the other node is taking over. */
#define PROBE_TIMEOUT_MS 1000
/* Moves a call may make before it gives up: from a node to its partner and
 * back once (a partner that fenced itself meanwhile). */
#define MOVES_MAX 2

/* One connection to a node. */
struct conn {
	int fd; /* -1: none */
	/* The stream lost its frame boundary (bad frame, half-sent request, node
	 * gone): nothing more can be read or sent on it. */
	bool broken;
	uint8_t *rbuf; /* received bytes not yet consumed */
	size_t rlen, rcap;
	int received_fd;      /* a descriptor the node passed with a reply, -1 */
	uint64_t sndtimeo_ms; /* SO_SNDTIMEO as last set on fd (0: not yet) */
};

/* A frame pool of a node the client left: kept reserved, with no access. */
struct retired_pool {
	void *addr;
	size_t size;
};

struct ftvm_client {
	/* Names this client in a thread's last_error; never reused, unlike the
	 * address once the client is freed. */
	uint64_t serial;
	pthread_mutex_t lock; /* serialises calls: held for one request and its reply */
	/* The nodes' sockets: one (ftvm_connect()) or two (ftvm_connect_pair()). */
	char *sockets[2];
	int n_sockets;
	/* The sockets[] index conn goes to; -1 while a pair client has none (a
	 * failover found no node that serves; the next call looks again). */
	int current;
	int last;	     /* the index it talked to last: a search asks the other first */
	uint64_t generation; /* connections made: a pool belongs to one */
	struct conn conn;
	uint64_t next_id;
	size_t max_payload;
	/* The frame pool of the node conn goes to, mapped at the first pointer
	 * call on this connection, twice side by side (map_pool()): writable at
	 * pool, read-only at pool + pool_stride (pool_size rounded up to whole
	 * pages of the machine). */
	uint8_t *pool;
	size_t pool_size, pool_stride;
	uint64_t pool_generation;
	struct retired_pool *retired; /* until ftvm_disconnect() */
	size_t n_retired;
	char name[FTVM_CLIENT_NAME_MAX + 1]; /* sent with each allocation */
	/* Random, made with the client: its session allocations' session. Once
	 * it made one (in_session), each new connection is bound to it. */
	char session[CONFIG_SESSION_ID_LEN + 1];
	bool in_session;
};
