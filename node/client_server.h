/* The daemon side of the client API: a unix socket on the event loop that
 * local processes (libftvm, ftvmctl) send ClientRequest frames to.
 *
 * Each request becomes a client_call handed to the owner's callback, which
 * answers it with client_call_reply() now or later (an answer that needs the
 * partner waits for it). Replies are matched to requests by id, so they may go
 * out in any order. A frame that fails its checks or a payload that does not
 * parse as a ClientRequest closes that client only; a request this build does
 * not know (no oneof member set) is answered STATUS_UNSUPPORTED here without
 * reaching the callback.
 *
 * Everything runs on the event loop thread. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "client.pb-c.h"

struct event_base;
struct client_server;
struct client_call;

/* One request. The call is the callee's until it passes it to
 * client_call_reply(); req, and all it points to (a page write's block),
 * stays as it is until then, so the callee may keep pointers into it
 * instead of copying it. */
typedef void (*client_request_fn)(struct client_call *call, const Ftvm__Client__ClientRequest *req,
				  void *arg);

/* A client connection closed (it disconnected, crashed, or sent garbage):
 * what it held in the node is to be let go. Not called while the server
 * itself is being freed. */
typedef void (*client_gone_fn)(uint64_t client_id, void *arg);

/* Every frame payload a client sent (req: how it parsed, NULL when it did
 * not) or is sent (req NULL), before it is handled, for traces
 * (common/TRACE.md). */
typedef void (*client_tap_fn)(uint64_t client_id, pid_t pid, bool out,
			      const Ftvm__Client__ClientRequest *req, const uint8_t *payload,
			      size_t len, void *arg);

/* What a client may do besides the data operations on its own allocations
 * (vmm/VMM.md, "Who may do what"). */
enum {
	/* Others' allocations and the pair (cut, failback, trace): root, the
	 * daemon's uid, admin_group. */
	CLIENT_RIGHT_ADMIN = 1,
	/* Map the frame pool and hold pointers: root, the daemon's uid,
	 * pointer_group. */
	CLIENT_RIGHT_POINTERS = 2,
};

struct client_server_config {
	const char *path;
	mode_t mode;	   /* of the socket file */
	gid_t group;	   /* of the socket file; (gid_t)-1: the daemon's */
	gid_t admin_gid;   /* (gid_t)-1: none */
	gid_t pointer_gid; /* (gid_t)-1: none */
	unsigned max_clients;
	size_t output_limit; /* replies left unread past this drop the client */
	size_t max_payload;  /* frames above it are refused both ways */
};

/* Listens on the unix socket config->path (copied). A stale socket file left
 * by a dead process is replaced; -EADDRINUSE when a live process answers on
 * path, -EEXIST when path is something other than a socket; -EPERM when the
 * socket cannot be given config->group. */
int client_server_new(struct event_base *base, const struct client_server_config *config,
		      client_request_fn fn, client_gone_fn gone, void *arg,
		      struct client_server **ret);

/* Closes every client and the listener and unlinks the socket file. Calls
 * still outstanding stay valid: each must still be passed to
 * client_call_reply(), which then drops the reply. NULL is fine. */
void client_server_free(struct client_server *s);

/* Sets or (fn NULL) clears the tap. */
void client_server_set_tap(struct client_server *s, client_tap_fn fn, void *arg);

/* Sends reply (its id is set from the request here; the reply itself stays the
 * caller's) and frees call: exactly once per call. When the client went away
 * meanwhile the reply is dropped silently. */
void client_call_reply(struct client_call *call, Ftvm__Client__ClientReply *reply);

/* One reply of a call that goes on (a stream: node/EVENTS.md), with the
 * call's id; the call stays the callee's until client_call_reply() ends it.
 * Dropped when the client went away. Bounded as every reply is: a client
 * that leaves output_limit bytes unread is closed, here, and its gone()
 * runs before this returns. Not for calls made inside the node. */
void client_call_send(struct client_call *call, Ftvm__Client__ClientReply *reply);

/* A call made inside the node (the NBD server's page I/O, node/NBD.md): no
 * socket and no tap. Its reply goes to fn, from inside client_call_reply(),
 * valid only until fn returns; req stays its maker's, unchanged until then.
 * It is the daemon's pid with every right, for uid. client_id is its
 * client's (client_internal_id_new(), one per client inside the node), so
 * that what it holds is let go by client id as a connection's is. NULL when
 * out of memory. */
typedef void (*client_call_reply_fn)(const Ftvm__Client__ClientReply *reply, void *arg);
struct client_call *client_call_new_internal(uint64_t client_id, uid_t uid,
					     const Ftvm__Client__ClientRequest *req,
					     client_call_reply_fn fn, void *arg);
/* A client id for a client inside the node, never one a connection has. */
uint64_t client_internal_id_new(void);

/* The pid of the process that sent the request (SO_PEERCRED at accept), for
 * lock owners; 0 when the kernel did not say. */
pid_t client_call_peer_pid(const struct client_call *call);

/* The uid of the process that made the connection (SO_PEERCRED). */
uid_t client_call_peer_uid(const struct client_call *call);

/* Whether the client has right (CLIENT_RIGHT_*). */
bool client_call_may(const struct client_call *call, unsigned right);

/* The connection the call came on: the same for every call of one client. */
uint64_t client_call_client_id(const struct client_call *call);

/* The client closed its connection since it made the call (gone() has run
 * for it): what the call would hand it has no holder. */
bool client_call_client_gone(const struct client_call *call);

/* As client_call_reply, passing fd (duplicated into the client) with the
 * reply. When the reply cannot be the next bytes on the stream, the client
 * gets an INTERNAL "ask again" instead. */
void client_call_reply_fd(struct client_call *call, Ftvm__Client__ClientReply *reply, int fd);
