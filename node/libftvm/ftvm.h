/**
 * @file ftvm.h
 * @brief libftvm: the client library for a local ftvm node.
 *
 * A client talks to its own node (ftvmd) over the node's unix socket (the
 * `socket` key of the node's configuration). Every call blocks until the node
 * answers or a 10 s timeout passes.
 *
 * Conventions:
 *  - Functions return 0 (or a non-negative count) on success and a negative
 *    errno value on failure. What the node refused comes back as:
 *    -ENOENT (not found), -EBUSY (locked), -ENOSPC (no space), -EACCES (denied),
 *    -EHOSTUNREACH (partner unavailable), -ETIMEDOUT (the node timed out, or
 *    did not answer in time), -EOPNOTSUPP (the node does not serve the
 *    request), -EINVAL (bad request), -EIO (anything else). -EBADMSG means the
 *    node's answer could not be read.
 *  - After a failure, ftvm_last_error() says why, in the node's words when the
 *    node refused.
 *  - A client is not thread safe: use one per thread, or lock around it.
 *  - The library never raises SIGPIPE.
 */
#pragma once

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** Marks the library's API, so a build with hidden visibility exports it alone. */
#if defined(__GNUC__)
#define FTVM_EXPORT __attribute__((visibility("default")))
#else
#define FTVM_EXPORT
#endif

/** An open connection to a node. */
struct ftvm_client;

/**
 * @brief Connects to the node listening on @p socket_path.
 * @param socket_path the node's client API socket.
 * @param[out] ret the new client, to be closed with ftvm_disconnect().
 * @return 0, or -errno: -ENOENT / -ECONNREFUSED when no node listens there,
 *         -EACCES when the socket's permissions keep the caller out,
 *         -ENAMETOOLONG when the path is too long for a unix socket.
 */
FTVM_EXPORT int ftvm_connect(const char *socket_path, struct ftvm_client **ret);

/**
 * @brief Closes the connection and frees @p c.
 * @param c a client, or NULL (nothing happens).
 */
FTVM_EXPORT void ftvm_disconnect(struct ftvm_client *c);

/**
 * @brief A node's view of itself and of its partner (`ftvmctl status`).
 *
 * Strings are NUL terminated and truncated to fit.
 */
struct ftvm_node_status {
	char node[64];		       /**< this node's id */
	char state[16];		       /**< starting | active | solo | resyncing | fenced */
	uint64_t epoch;		       /**< the pair's epoch as this node knows it */
	char transport[16];	       /**< partner channel transport: "tcp", "rdma" */
	char transport_reason[160];    /**< why that transport runs */
	char partner_id[64];	       /**< empty until the partner said hello */
	char partner_link[8];	       /**< "up" or "down" */
	char partner_state[16];	       /**< the partner's own state, "unknown" while down */
	char partner_endpoint[80];     /**< host:port of the partner channel */
	uint64_t partner_link_changes; /**< link up/down transitions since the node started */
	uint64_t partner_last_seen_ms; /**< ms since the partner was last heard, 0 while up */
	uint64_t frames_total;	       /**< frames in the pool */
	uint64_t frames_free;	       /**< frames not in use */
	uint64_t allocations_own;      /**< allocations made on this node */
	uint64_t allocations_partner;  /**< the partner's allocations mirrored here */
	uint32_t page_size;	       /**< bytes per frame */
	int64_t pid;		       /**< the node's process id */
};

/**
 * @brief Asks the node for its status.
 * @param c a connected client.
 * @param[out] ret filled in on success.
 * @return 0 or -errno (see the conventions above).
 */
FTVM_EXPORT int ftvm_status(struct ftvm_client *c, struct ftvm_node_status *ret);

/**
 * @brief Why the last failed call on @p c failed.
 * @param c a client, or NULL.
 * @return the node's reason, or a local one ("no reply within 10 s"); an empty
 *         string when the last call succeeded. Valid until the next call on @p c.
 */
FTVM_EXPORT const char *ftvm_last_error(const struct ftvm_client *c);

/**
 * @brief Whether the last failed call on @p c was refused by the node.
 *
 * Tells a refusal (the node answered with a failure status, so it is
 * reachable; ftvm_last_error() holds its reason) from a failure on the way
 * (the node closed the connection, did not answer within the timeout, or its
 * answer could not be read). Both can return -ETIMEDOUT, for example.
 * @param c a client, or NULL (false).
 * @return true for the node's refusal, false otherwise.
 */
FTVM_EXPORT bool ftvm_last_error_from_node(const struct ftvm_client *c);

#ifdef __cplusplus
}
#endif
