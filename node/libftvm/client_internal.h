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
/* How long a node the client leaves while it is alive (it refused a call as
 * fenced or stopping, or does not serve) may take to answer the submitted
 * requests it has, before those it did not answer fail as in flight. */
#define DRAIN_MS 1000

/* One connection to a node. */
struct conn {
	int fd; /* -1: none */
	/* The stream lost its frame boundary (bad frame, half-sent request, node
	 * gone): nothing more can be read or sent on it. */
	bool broken;
	/* Its replies cannot be told apart any more (a bad frame): not even
	 * what came before the break can be read. */
	bool garbled;
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
	/* The requests submitted with ftvm_submit_*() (submit.c): made at the
	 * first asynchronous call, NULL until then. */
	struct submit_queue *queue;
};

/* ---- client.c, for submit.c ---- */

uint64_t client_now_ms(void);
/* Sets this thread's last error to c's failure r, and returns r. */
int client_fail(const struct ftvm_client *c, int r, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
/* This thread's last error, as ftvm_last_error() says it. */
const char *client_error(void);
/* Starts a call on c: this thread's last error is now c's, and empty. */
void client_error_reset(const struct ftvm_client *c);
int client_check_guid(struct ftvm_client *c, const char *guid);
int client_status_errno(int status);
const char *client_status_name(int status);
int client_send_all(struct ftvm_client *c, struct conn *conn, const uint8_t *buf, size_t len,
		    uint64_t deadline);
int client_recv_frame(struct ftvm_client *c, struct conn *conn, uint64_t deadline,
		      const uint8_t **ret_payload, size_t *ret_len, char *why, size_t why_size);
void client_consume(struct conn *conn, size_t len);
/* The status of the node c talks to, asked on its connection. */
int client_node_status(struct ftvm_client *c, struct ftvm_node_status *ret);
/* A pair client leaves its node, which did what (cause), for the node that
 * serves, as a blocking call that meets the same does; r: the failure of
 * the submitted requests it leaves unanswered; drain_ms: how long to read
 * their answers first. 0, or -errno when no node served within
 * CALL_TIMEOUT_MS (why says what each said). */
int client_move(struct ftvm_client *c, int r, const char *what, const char *cause,
		uint64_t drain_ms, char *why, size_t why_size);
/* A pair client without a connection looks for a node that serves. */
int client_search(struct ftvm_client *c, char *why, size_t why_size);
/* A request timed out on a pair client's node: if the other node serves
 * alone (it took over from this hung one), the client moves there and 0
 * comes back; otherwise -EAGAIN and nothing changed. */
int client_timed_out(struct ftvm_client *c, int r, const char *cause);

/* ---- submit.c, for client.c; each does nothing on a client that never
 * submitted ---- */

/* Before a call sends on the client's connection: the frame of a submitted
 * request that is partly sent goes out whole first. 0 or -errno (the
 * connection is then broken, and this thread's last error says why). */
int submit_flush_partial(struct ftvm_client *c, uint64_t deadline);
/* A call read a reply on the client's connection that is not its own: true
 * when it answers a submitted request, which now owns it. */
bool submit_take_reply(struct ftvm_client *c, Reply *reply);
/* The client leaves its connection (client.c's drop()); cause NULL: the
 * connection failed earlier, as this file may have seen it. */
void submit_conn_leaving(struct ftvm_client *c, int r, const char *what, const char *cause,
			 uint64_t drain_ms);
/* Where the client went after it left: a node (c->current), or none (why). */
void submit_conn_moved(struct ftvm_client *c, const char *why);
/* A call ends: what it left for the submitted requests is done or signalled. */
void submit_call_done(struct ftvm_client *c);
void submit_free(struct ftvm_client *c);
