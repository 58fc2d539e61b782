/**
 * @file ftvm.h
 * @brief libftvm: the client library for a local ftvm node.
 *
 * A client talks to its own node (ftvmd) over the node's unix socket (the
 * `socket` key of the node's configuration). Every call blocks until the node
 * answers or a 10 s timeout passes, but for the asynchronous page calls,
 * which keep many requests in flight (see "Asynchronous calls" below). A
 * client made with ftvm_connect_pair()
 * knows both nodes of the pair and follows a failover: see "Failover" below.
 *
 * Conventions:
 *  - Functions return 0 (or a non-negative count) on success and a negative
 *    errno value on failure. What the node refused comes back as:
 *    -ENOENT (not found), -EBUSY (locked), -ENOSPC (no space), -EACCES (denied),
 *    -EHOSTUNREACH (partner unavailable), -ETIMEDOUT (the node timed out, or
 *    did not answer in time), -EOPNOTSUPP (the node does not serve the
 *    request), -EINVAL (bad request), -ECANCELED (not applied because an
 *    earlier step failed), -EIO (anything else). -EBADMSG means the node's
 *    answer could not be read or failed its checks.
 *  - Access (node/vmm/VMM.md, "Who may do what"): an allocation belongs to the uid
 *    that made it. Free, write, read and pointers on another uid's are
 *    refused -EACCES, naming the owner, unless the caller is root, ftvmd's
 *    uid or in the node's [client] admin_group. Pointers (the pool mapped
 *    into this process) need root, ftvmd's uid or [client] pointer_group;
 *    other callers use ftvm_write_page() and ftvm_read_page(), and get
 *    -EACCES from the pointer calls. A node with [client] max_clients
 *    connections refuses one more: its first call returns -EACCES saying so.
 *  - Arguments are checked before anything is sent: a bad one (NULL or empty
 *    GUID, a header above FTVM_HEADER_MAX...) returns -EINVAL at once.
 *  - After a failure, ftvm_last_error() says why, in the node's words when the
 *    node refused; ftvm_strerror() gives the short meaning of the return value.
 *  - The library never raises SIGPIPE.
 *
 * Compatibility:
 *  - The structs the library fills for a status, a sense or a verify
 *    (struct ftvm_node_status, struct ftvm_sense, struct ftvm_verify) gain
 *    fields at their end as ftvm grows. Their calls therefore pass the
 *    struct's size as the program was compiled (ftvm_status(), ftvm_sense()
 *    and ftvm_verify() are inline wrappers that pass sizeof), and the library
 *    writes that many bytes and
 *    no more: a program built against an older ftvm.h keeps working with a
 *    newer library, and one built against a newer ftvm.h finds the fields an
 *    older library does not know set to zero.
 *  - The rows of the device discovery table (struct ftvm_device) grow the
 *    same way; as they come in an array, ftvm_discover_sized() is passed the
 *    size of one row, and ftvm_discover() is the inline wrapper. So do the
 *    address mapping's (struct ftvm_mapping, ftvm_mapping_sized()), whose
 *    unsized calls of before stay exported under macros of their names.
 *
 * Threads:
 *  - One client may be shared by any number of threads. Its calls are
 *    serialised by a mutex inside the client: one blocking request is on
 *    the connection at a time, and a call waits while another thread's call
 *    is in progress. Each call's 10 s timeout starts when it has the
 *    connection. For calls that proceed in parallel, use a client per
 *    thread, or keep many page requests in flight on one client with the
 *    asynchronous calls (below).
 *  - The reason for a failure is kept per thread (thread-local storage):
 *    ftvm_last_error() and ftvm_last_error_from_node() describe the calling
 *    thread's own last call, never another thread's call on the same client.
 *  - ftvm_disconnect() must not race with calls on the same client: stop or
 *    join the threads using it first.
 *  - A thread cancelled inside a call leaves the client locked; do not cancel
 *    threads while they call libftvm.
 *  - Linking a program against libftvm needs nothing more than -lftvm
 *    (`pkg-config --cflags --libs ftvm`); the library brings its own pthread
 *    dependency.
 *
 * Failover (clients of ftvm_connect_pair() only; a ftvm_connect() client
 * talks to its one node and never moves; node/ha/HA.md):
 *  - A node serves when its state is `solo`, or `active` with its partner
 *    linked. `starting`, `resyncing` and `fenced` nodes do not, nor does an
 *    `active` node whose partner link is down: it is still deciding which
 *    node serves, and would refuse writes.
 *  - The call that finds its node gone moves the client before it returns:
 *    it looks for a node that serves, the other node first, every 20 ms for
 *    up to 10 s (the survivor may still be taking over), so such a call may
 *    take up to 10 s more than its own timeout. Allocations are then found
 *    by GUID on the new node: the survivor adopted them. The node is gone,
 *    and what the call returns, in these cases:
 *     - the connection was dead before the whole request left (EPIPE, reset):
 *       the node cannot have acted on it (it reads whole requests only), so
 *       the request is sent to the new node and the call returns its answer,
 *       as though nothing had happened;
 *     - the node refused the call as fenced or stopping (FENCED,
 *       SHUTTING_DOWN): it applied nothing, and the call is sent to the new
 *       node as above;
 *     - the connection failed after the request left (end of file, reset, a
 *       bad frame): the call returns that failure (-ECONNRESET, -EBADMSG)
 *       and ftvm_last_error() reads "node at A went away during the call
 *       (...); the client now talks to B: the call's outcome is unknown,
 *       check or retry";
 *     - the node refused the call -EHOSTUNREACH (partner unavailable) and
 *       its status then says `starting`, `resyncing` or `fenced`: the call
 *       returns -EHOSTUNREACH, the outcome unknown, said the same way (a
 *       node that still serves keeps the client, and its refusal is
 *       returned as it is);
 *     - no reply came within the call's 10 s and the other node is `solo`
 *       (it took over from this hung one): the call returns -ETIMEDOUT, the
 *       outcome unknown, said the same way.
 *    A call is sent again at most twice. A call whose outcome is unknown
 *    never gets an answer from the old node; writing a page again with the
 *    same bytes is always safe, an allocation may or may not have been made.
 *  - When no node serves within the 10 s, the call fails as above, or with
 *    -ENOTCONN when its request had reached no node (nothing was applied);
 *    ftvm_connected_socket() returns NULL, and the next call looks for a
 *    node again before it sends anything.
 *  - Pointers: a node releases the pointers of a connection that closed, and
 *    the survivor let go of the locks the dead node's clients held. On a move
 *    the client unmaps the old node's frame pool; its address range stays
 *    reserved with no access until ftvm_disconnect(), so touching an old
 *    pointer faults (SIGSEGV) rather than reaching the new node's memory.
 *    Releasing an old pointer reaches the new node, which holds no such
 *    pointer and refuses it (-EINVAL): nothing changes there. Bytes written
 *    through an old write pointer and not released before the move are lost,
 *    as any unacknowledged write: take a pointer on the new node and write
 *    again. The next pointer call maps the new node's pool.
 *  - A node stopped cleanly while a client holds a write pointer (any client,
 *    ftvm_connect() ones too) treats it as the client's going would, when it
 *    is serving alone: the block as the client left it is the page's new
 *    version. With its partner linked, the partner takes the page over with
 *    its last acknowledged contents, and what was written through the
 *    pointer is lost, as any unacknowledged write (node/ha/HA.md).
 *  - A node that fences itself revokes its clients' pointers (any client,
 *    ftvm_connect() ones too): their blocks are set aside, so what is written
 *    through them reaches no page, and releasing one returns -ESTALE from
 *    that node, fenced or resynced since, without a move.
 *  - A move happens inside a call, under the client's mutex: other threads'
 *    calls wait for it, then go to the new node.
 *
 * Asynchronous calls (ftvm_submit_write_page(), ftvm_submit_read_page(),
 * ftvm_reap(), ftvm_completion_fd()):
 *  - A submit sends its page request on the client's connection and returns
 *    without waiting for the answer; up to FTVM_SUBMIT_MAX requests of one
 *    client may be submitted and not yet reaped (then -EAGAIN: reap first).
 *    ftvm_reap() returns their completions, each once, in the order they
 *    completed: the cookie given at submit, and the result, the CRC-32C
 *    and the reason the blocking call would have returned. What a submit
 *    refuses at once (-EINVAL, -EAGAIN, -EMSGSIZE...) gets no completion.
 *  - A minimal loop, n at most FTVM_SUBMIT_MAX:
 *
 *        for (i = 0; i < n; i++)
 *                if (ftvm_submit_write_page(c, guid, first + i, blocks[i], len, i) < 0)
 *                        break;                   (ftvm_last_error(c): why; no completion)
 *        for (done = 0; done < i; done += r) {   (i: the requests submitted)
 *                r = ftvm_reap(c, cqe, 32, -1);   (or poll ftvm_completion_fd() first)
 *                if (r < 0)
 *                        return r;
 *                for (k = 0; k < r; k++)
 *                        if (cqe[k].result < 0)
 *                                report(cqe[k].cookie, cqe[k].result, cqe[k].error);
 *        }
 *
 *  - No thread of the library's runs them: the calls on the client do. A
 *    submit sends what the connection takes at once and never waits for
 *    the node; whatever it could not send, a reap sends. A reap reads the
 *    replies, times requests out and moves the client in a failover, so
 *    reap whenever ftvm_completion_fd() is readable (or regularly).
 *  - Each request behaves as its blocking call: the same checks and errors,
 *    a write waits in the node's paging queue for a locked page, a read's
 *    CRC-32C is checked. Its 10 s timeout counts from when it wholly left;
 *    a request waiting to be sent fails -ETIMEDOUT ("nothing was applied")
 *    when the node takes none of its bytes for 10 s.
 *  - Threads: the calls take the client's mutex, as every call does, for
 *    the time they work on the connection, never while a reap waits. Any
 *    thread may submit, reap, or make a blocking call on the same client:
 *    a blocking call that reads replies to submitted requests keeps them
 *    for ftvm_reap(), and a reap never takes a blocking call's reply (the
 *    blocking call holds the mutex until it has it). The reason of a
 *    submitted request's failure is in its completion (the error field),
 *    not in ftvm_last_error(), which tells about the submit or reap call.
 *  - Failover, for ftvm_connect_pair() clients, as above, request by
 *    request: one whose bytes had not wholly left when the connection went,
 *    or that the node refused FENCED or SHUTTING_DOWN, is sent again to the
 *    node that serves (at most twice) and completes with its answer; one
 *    that had left and got no answer completes with the failure
 *    (-ECONNRESET, -EBADMSG, -EHOSTUNREACH, -ETIMEDOUT) and "... the call's
 *    outcome is unknown, check or retry" in its error. Before the client
 *    leaves a node that is alive (it refused a request as fenced or
 *    stopping, or does not serve), it reads that node's answers to the
 *    requests on it for up to 1 s. The move happens inside whichever call
 *    finds the node gone (a reap, or a blocking call), and may take up to
 *    10 s, whatever the reap's timeout. ftvm_completion_fd() stays the same.
 *    A ftvm_connect() client never moves: when its connection fails, the
 *    requests that left fail with the failure, their outcome unknown, and
 *    the others -ENOTCONN.
 *  - ftvm_disconnect() drops what was submitted and not reaped: requests that
 *    left may still be applied, and no completion comes for any.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ftvm_status.h"

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
 * @brief Connects to whichever node of a pair serves, and follows the pair
 *        through a failover (see "Failover" above).
 *
 * Asks @p socket_a for its status, then @p socket_b: the first node that
 * serves (`active` with its partner linked, or `solo`) is taken, so
 * @p socket_a when both serve. When a node answers but none serves yet (the
 * pair is starting, resyncing, or deciding who serves after a failure) it
 * asks again every 20 ms, for up to 10 s.
 * @param socket_a the client API socket of one node, preferred.
 * @param socket_b the other node's.
 * @param[out] ret the new client, to be closed with ftvm_disconnect().
 * @return 0, or -errno: -ENOENT / -ECONNREFUSED (@p socket_a's error) when no
 *         node listens on either socket, -ETIMEDOUT when a node answered but
 *         none served within 10 s, -ENAMETOOLONG as ftvm_connect(). On
 *         failure ftvm_last_error(NULL) says what each node said.
 */
FTVM_EXPORT int ftvm_connect_pair(const char *socket_a, const char *socket_b,
				  struct ftvm_client **ret);

/** The longest client name (ftvm_connect_named()). */
#define FTVM_CLIENT_NAME_MAX 64

/**
 * @brief ftvm_connect(), for a client that names itself.
 *
 * The node keeps @p name with every allocation the client makes, on both
 * nodes and through a failover: the server memory allocate table
 * (ftvm_clients(), `ftvmctl clients`; seed 003 Fig. 13) counts what each
 * client holds by uid and name.
 * @param name letters, digits, '.', '_' and '-', at most FTVM_CLIENT_NAME_MAX
 *        of them; "" is no name.
 * @return as ftvm_connect(), or -EINVAL for a name that is not one (nothing
 *         connected; ftvm_last_error(NULL) says why).
 */
FTVM_EXPORT int ftvm_connect_named(const char *socket_path, const char *name,
				   struct ftvm_client **ret);

/**
 * @brief Names a client (ftvm_connect_pair() ones too) from now on, as
 *        ftvm_connect_named() does; allocations made before keep their name.
 * @return 0, or -EINVAL for a name that is not one (the name is unchanged).
 */
FTVM_EXPORT int ftvm_set_name(struct ftvm_client *c, const char *name);

/**
 * @brief The socket of the node the client talks to now.
 *
 * Changes when a call moves a ftvm_connect_pair() client to the other node;
 * compare it before and after a call to see a move. Safe to call while other
 * threads call on @p c; it does not wait for them.
 * @param c a client, or NULL.
 * @return the socket, as given to ftvm_connect() or ftvm_connect_pair(), in
 *         the client's own copy: the same pointer for the same node, valid
 *         until ftvm_disconnect(); NULL for a NULL client, and while a
 *         pair client talks to no node (the last move found none that
 *         serves; its next call looks again). A ftvm_connect() client always
 *         returns its socket.
 */
FTVM_EXPORT const char *ftvm_connected_socket(const struct ftvm_client *c);

/**
 * @brief Closes the connection and frees @p c.
 *
 * No other thread may be calling, or go on to call, a function on @p c.
 * @param c a client, or NULL (nothing happens).
 */
FTVM_EXPORT void ftvm_disconnect(struct ftvm_client *c);

/**
 * @brief A node's view of itself and of its partner (`ftvmctl status`).
 *
 * Its members, in this order, and what each means are the rows of
 * FTVM_STATUS_FIELDS in ftvm_status.h. Strings are NUL terminated and
 * truncated to fit.
 */
struct ftvm_node_status {
	FTVM_STATUS_FIELDS(FTVM_STATUS_MEMBER)
};

/**
 * @brief Asks the node for its status: for a ftvm_connect_pair() client, the
 *        node it talks to (ftvm_connected_socket()).
 * @param c a connected client.
 * @param[out] ret filled in on success: its first @p ret_size bytes.
 * @param ret_size sizeof(struct ftvm_node_status) as the caller was compiled;
 *        bytes past what this library knows are set to zero.
 * @return 0 or -errno (see the conventions above); -EINVAL when @p ret_size
 *         is 0.
 */
FTVM_EXPORT int ftvm_status_sized(struct ftvm_client *c, struct ftvm_node_status *ret,
				  size_t ret_size);

/**
 * @brief ftvm_status_sized() with this program's sizeof(struct
 *        ftvm_node_status): see "Compatibility" above.
 */
static inline int ftvm_status(struct ftvm_client *c, struct ftvm_node_status *ret)
{
	return ftvm_status_sized(c, ret, sizeof(*ret));
}

/**
 * @brief Why the calling thread's last call, made on @p c, failed.
 *
 * Per thread: what other threads do with @p c does not change it. Only the
 * thread's most recent call on any client is remembered; when that call was
 * on another client, this is an empty string for @p c.
 * @param c a client, or NULL: then the reason the calling thread's last
 *        ftvm_connect_pair() failed, if no call on a client came after it,
 *        otherwise "no client".
 * @return the node's reason, or a local one ("no reply within 10 s"); an empty
 *         string when the last call succeeded. Valid in this thread until its
 *         next ftvm_* call (it lives in thread-local storage).
 */
FTVM_EXPORT const char *ftvm_last_error(const struct ftvm_client *c);

/**
 * @brief Whether the calling thread's last call, made on @p c, was refused by
 *        the node.
 *
 * Tells a refusal (the node answered with a failure status, so it is
 * reachable; ftvm_last_error() holds its reason) from a failure on the way
 * (the node closed the connection, did not answer within the timeout, or its
 * answer could not be read). Both can return -ETIMEDOUT, for example.
 * @param c a client, or NULL (false).
 * @return true for the node's refusal, false otherwise.
 */
FTVM_EXPORT bool ftvm_last_error_from_node(const struct ftvm_client *c);

/** Room for a GUID and its NUL: GUIDs are at most 79 printable characters. */
#define FTVM_GUID_MAX 80
/** The longest user header an allocation carries; the node refuses longer ones. */
#define FTVM_HEADER_MAX 4096

/**
 * @brief Whether @p guid has the form of a GUID.
 *
 * A GUID is 1 to FTVM_GUID_MAX - 1 printable ASCII characters without spaces.
 * This checks the form only, not that the allocation exists.
 * @param guid a string, or NULL (false).
 */
FTVM_EXPORT bool ftvm_guid_valid(const char *guid);

/**
 * @brief The short meaning of a negative return of any ftvm_* call.
 *
 * The codes the node's refusals map to read in ftvm's terms ("page is locked"
 * for -EBUSY, "partner unavailable" for -EHOSTUNREACH, "no space" for
 * -ENOSPC...); any other code reads as strerror(). ftvm_last_error() has the
 * details of the last failure.
 * @param r a return value; 0 and positive values read "success".
 * @return a static string.
 */
FTVM_EXPORT const char *ftvm_strerror(int r);

/** A new allocation, as ftvm_alloc() made it. */
struct ftvm_alloc_info {
	char guid[FTVM_GUID_MAX]; /**< its GUID, never truncated */
	uint64_t pages;		  /**< blocks in it: size rounded up to block_size */
	uint32_t block_size;	  /**< bytes per page: the policy's block size */
};

/**
 * @brief Allocates memory on this node, mirrored on its partner (seed 002 Fig. 5).
 *
 * Returns once the partner acknowledged the allocation.
 * @param c a connected client.
 * @param size bytes to allocate, at least 1; rounded up to whole blocks.
 * @param policy the name of a `[policy NAME]` of the node's configuration, or
 *        NULL (or "") for the default policy, whose block is one page.
 * @param immediate true: refuse at once (-EACCES) when there is no space now,
 *        instead of waiting for it.
 * @param header the user header stored with the allocation, or NULL when
 *        @p header_len is 0.
 * @param header_len bytes of @p header, at most FTVM_HEADER_MAX.
 * @param[out] ret the new allocation's GUID and geometry.
 * @return 0, or -errno: -EINVAL (bad argument, or a policy the node does not
 *         know), -ENOSPC or -EACCES (no space), -EHOSTUNREACH (the partner
 *         did not acknowledge), and the conventions above.
 */
FTVM_EXPORT int ftvm_alloc(struct ftvm_client *c, uint64_t size, const char *policy, bool immediate,
			   const void *header, size_t header_len, struct ftvm_alloc_info *ret);

/**
 * @brief ftvm_alloc(), for an allocation that lives as long as the client
 *        (seed 003 Fig. 15; node/vmm/VMM.md, "Session allocations").
 *
 * When the client's last connection closes (ftvm_disconnect(), its process
 * ends or dies) and it does not come back within the node's `[client]
 * session_grace_ms`, the pair frees it. A ftvm_connect_pair() client that
 * follows its node to the survivor comes back: its session allocations stay.
 * Other allocations stay until freed. Same parameters and returns as
 * ftvm_alloc().
 */
FTVM_EXPORT int ftvm_alloc_session(struct ftvm_client *c, uint64_t size, const char *policy,
				   bool immediate, const void *header, size_t header_len,
				   struct ftvm_alloc_info *ret);

/**
 * @brief Writes one page: locks it for writing, copies @p data in, releases it
 *        as modified, in one step.
 *
 * Returns once the partner acknowledged the new contents. When the page is
 * locked it waits in the node's paging queue, up to the node's
 * request_timeout_ms, then fails with -EBUSY; ftvm_write_page_try() fails at
 * once instead.
 * @param c a connected client.
 * @param guid the allocation.
 * @param page the page's index, from 0.
 * @param data the bytes, or NULL when @p len is 0.
 * @param len at most the allocation's block size; a shorter page is
 *        zero-filled to the block (the node refuses a longer one, -EINVAL).
 * @param[out] ret_crc32c the CRC-32C of the whole block as stored, or NULL.
 * @return 0, or -errno: -ENOENT (no such allocation), -EINVAL (@p page is
 *         past the allocation's last page), -EBUSY (the page stayed locked),
 *         -EHOSTUNREACH, -EMSGSIZE (@p len is above the frame limit), and the
 *         conventions above.
 */
FTVM_EXPORT int ftvm_write_page(struct ftvm_client *c, const char *guid, uint64_t page,
				const void *data, size_t len, uint32_t *ret_crc32c);

/** @brief ftvm_write_page(), but -EBUSY at once when the page is locked. */
FTVM_EXPORT int ftvm_write_page_try(struct ftvm_client *c, const char *guid, uint64_t page,
				    const void *data, size_t len, uint32_t *ret_crc32c);

/**
 * @brief Reads one page: locks it for reading, copies the whole block out,
 *        releases it, in one step.
 *
 * The block's CRC-32C as the node states it is checked against the bytes
 * received; a mismatch is -EBADMSG. A write-locked page is waited for, as in
 * ftvm_write_page(); ftvm_read_page_try() fails at once instead.
 * @param c a connected client.
 * @param guid the allocation.
 * @param page the page's index, from 0.
 * @param[out] buf room for the block (ftvm_header()'s block_size bytes), or
 *        NULL when @p buf_len is 0.
 * @param buf_len bytes of @p buf.
 * @param[out] ret_len the block's size, also on -ENOBUFS; or NULL.
 * @param[out] ret_crc32c the block's CRC-32C, or NULL.
 * @return 0, or -errno: -ENOBUFS (@p buf_len is below the block; *ret_len
 *         says how much is needed and @p buf is untouched), -ENOENT (no such
 *         allocation), -EINVAL (@p page is past its last page), -EBUSY, and
 *         the conventions above.
 */
FTVM_EXPORT int ftvm_read_page(struct ftvm_client *c, const char *guid, uint64_t page, void *buf,
			       size_t buf_len, size_t *ret_len, uint32_t *ret_crc32c);

/** @brief ftvm_read_page(), but -EBUSY at once when the page is write-locked. */
FTVM_EXPORT int ftvm_read_page_try(struct ftvm_client *c, const char *guid, uint64_t page,
				   void *buf, size_t buf_len, size_t *ret_len,
				   uint32_t *ret_crc32c);

/** Requests a client may have submitted and not yet reaped: one more is
 *  refused -EAGAIN (see "Asynchronous calls" above). */
#define FTVM_SUBMIT_MAX 128
/** Room for a completion's reason and its NUL. */
#define FTVM_COMPLETION_ERROR_MAX 512

/**
 * The outcome of one submitted request, as ftvm_reap() returns it. Fields
 * are added at its end as ftvm grows: see ftvm_reap_sized().
 */
struct ftvm_completion {
	uint64_t cookie; /**< as given to the submit call */
	/** 0, or -errno: what the blocking call (ftvm_write_page(),
	 *  ftvm_read_page()) would have returned for the same request */
	int result;
	/** on success, the block's CRC-32C: as stored for a write, as received
	 *  and checked for a read */
	uint32_t crc32c;
	/** a read's block size, also with -ENOBUFS (the room it needs); 0 for a
	 *  write */
	size_t len;
	/** the failure is the node's refusal, as ftvm_last_error_from_node()
	 *  tells for a blocking call */
	bool from_node;
	/** why it failed, in the words ftvm_last_error() would use for the
	 *  blocking call ("... the call's outcome is unknown, check or retry"
	 *  after a failover); "" on success */
	char error[FTVM_COMPLETION_ERROR_MAX];
};

/**
 * @brief Submits a page write (ftvm_write_page()) and returns without waiting
 *        for it: its outcome comes back from ftvm_reap().
 *
 * The request is sent at once if the connection takes it, otherwise it
 * waits in the client, behind the requests submitted before it. Requests
 * leave in the order they were submitted, and the node answers them in any
 * order; writes of one page apply in the order they reach the node.
 * @param c a connected client.
 * @param guid the allocation.
 * @param page the page's index, from 0.
 * @param data the bytes, or NULL when @p len is 0; copied before the call
 *        returns, so the caller may reuse it at once.
 * @param len as ftvm_write_page().
 * @param cookie the caller's, returned in the completion.
 * @return 0 once submitted: exactly one completion follows. Otherwise
 *         nothing was sent and no completion follows: -EAGAIN when
 *         FTVM_SUBMIT_MAX requests of @p c are submitted and not reaped
 *         (reap first), -EINVAL for a bad argument, -EMSGSIZE when @p len
 *         is above the frame limit, -ENOMEM. ftvm_last_error() says why.
 */
FTVM_EXPORT int ftvm_submit_write_page(struct ftvm_client *c, const char *guid, uint64_t page,
				       const void *data, size_t len, uint64_t cookie);

/**
 * @brief Submits a page read (ftvm_read_page()): its outcome comes back from
 *        ftvm_reap().
 *
 * The block's CRC-32C is checked as ftvm_read_page() checks it, and the
 * block is copied into @p buf before the completion is reaped.
 * @param buf room for the block, or NULL when @p buf_len is 0. The library
 *        writes into it at any time until ftvm_reap() returns this request's
 *        completion (or ftvm_disconnect()): it must stay valid until then.
 *        On -ENOBUFS it is untouched and the completion's len says how much
 *        is needed.
 * @param buf_len bytes of @p buf.
 * @return as ftvm_submit_write_page().
 */
FTVM_EXPORT int ftvm_submit_read_page(struct ftvm_client *c, const char *guid, uint64_t page,
				      void *buf, size_t buf_len, uint64_t cookie);

/**
 * @brief Returns the completions of submitted requests, in the order they
 *        completed, waiting up to @p timeout_ms for the first.
 *
 * Any thread may reap any completion of the client: each is returned once.
 * Reaping is also what moves the requests along: it reads the node's
 * replies, sends what the connection did not take at submit, times requests
 * out, and moves a ftvm_connect_pair() client when its node is gone (see
 * "Asynchronous calls" above: such a move may take up to 10 s whatever
 * @p timeout_ms is).
 * @param c a client.
 * @param[out] out room for @p max rows of @p row_size bytes each: row i at
 *        (char *)out + i * @p row_size, its first @p row_size bytes written,
 *        bytes past what this library knows set to zero.
 * @param max rows @p out has room for, at least 1.
 * @param timeout_ms 0: do not wait; -1: wait until one completes; otherwise
 *        at most this long.
 * @param row_size sizeof(struct ftvm_completion) as the caller was compiled.
 * @return the completions written (0 when none came in time, or at once when
 *         @p c has no request submitted and not reaped), or -errno: -EINVAL
 *         for a bad argument (@p row_size below this struct's first
 *         version's), with ftvm_last_error() saying why.
 */
FTVM_EXPORT int ftvm_reap_sized(struct ftvm_client *c, struct ftvm_completion *out, unsigned max,
				int timeout_ms, size_t row_size);

/**
 * @brief ftvm_reap_sized() with this program's sizeof(struct
 *        ftvm_completion): see "Compatibility" above.
 */
static inline int ftvm_reap(struct ftvm_client *c, struct ftvm_completion *out, unsigned max,
			    int timeout_ms)
{
	return ftvm_reap_sized(c, out, max, timeout_ms, sizeof(*out));
}

/**
 * @brief A descriptor to poll (poll(), epoll, io_uring's poll) for POLLIN:
 *        readable when ftvm_reap() may have work or completions.
 *
 * It is an epoll instance the client owns, watching its connection (the
 * node's replies, and room to send what waits), an eventfd the library
 * signals (completions ready, or work another thread's call left) and a
 * timerfd set no later than the next request's deadline (early after the
 * request it was set for completed, once); the connection stays watched
 * after the last request until a reap finds nothing submitted. It stays
 * the same across a move to the other node, until ftvm_disconnect() closes
 * it: do not close it, read it or change what it watches. Readable may be
 * spurious: then ftvm_reap(..., 0) returns 0.
 * @param c a client.
 * @return the descriptor, or -errno (-EINVAL for a NULL client; -EMFILE,
 *         -ENOMEM when it cannot be made).
 */
FTVM_EXPORT int ftvm_completion_fd(struct ftvm_client *c);

/** An allocation's header (seed 002's read-header message). Strings are NUL terminated. */
struct ftvm_header {
	char guid[FTVM_GUID_MAX]; /**< its GUID, never truncated */
	uint64_t size;		  /**< bytes asked for */
	uint32_t block_size;	  /**< bytes per page */
	/** the client uid it belongs to (its maker's); in what was padding, so
	 *  programs built before it keep the struct's size */
	uint32_t uid;
	uint64_t pages;			 /**< blocks in it */
	char policy[40];		 /**< the policy it was made with */
	char home[40];			 /**< the node it was made on */
	char owner[40];			 /**< the node serving it now (home until a takeover) */
	uint8_t header[FTVM_HEADER_MAX]; /**< the user header given to ftvm_alloc() */
	size_t header_len;		 /**< bytes of header */
};

/**
 * @brief Reads an allocation's header.
 * @param c a connected client.
 * @param guid the allocation.
 * @param[out] ret filled in on success.
 * @return 0, or -errno: -ENOENT (no such allocation), and the conventions above.
 */
FTVM_EXPORT int ftvm_header(struct ftvm_client *c, const char *guid, struct ftvm_header *ret);

/**
 * @brief Releases an allocation's memory on both nodes (seed 002 Fig. 9).
 * @param c a connected client.
 * @param guid the allocation.
 * @return 0, or -errno: -ENOENT (no such allocation), -EBUSY (a page is
 *         locked), -EHOSTUNREACH, and the conventions above.
 */
FTVM_EXPORT int ftvm_free(struct ftvm_client *c, const char *guid);

/**
 * @brief Waits until every page of @p pages from @p first_page of @p guid
 *        (@p pages 0: every page from @p first_page on) that was changed
 *        before the call is durable in the store: destaged by its owner,
 *        behind a barrier, whichever node it was written on
 *        (node/vmm/VMM.md, "Flush"). A page changed after the call is not
 *        waited for.
 * @return 0, or -errno: -ETIMEDOUT when that takes longer than the node's
 *         request_timeout_ms, -ENOENT for no such allocation, and the
 *         conventions above.
 */
FTVM_EXPORT int ftvm_flush(struct ftvm_client *c, const char *guid, uint64_t first_page,
			   uint64_t pages);

/** The most key=value details an event carries (struct ftvm_event). */
#define FTVM_EVENT_FIELDS_MAX 8

/** One detail of an event: "epoch" "4", "partner" "b", ... */
struct ftvm_event_field {
	char key[32];
	char value[256];
};

/**
 * One event of a node (node/EVENTS.md). The struct may gain members at its
 * end; the library fills all it knows.
 */
struct ftvm_event {
	/** 1, 2, ... from the node's start (0 for current ones); a gap: events lost */
	uint64_t seq;
	/** wall clock, ms since the epoch */
	uint64_t at_ms;
	/** link, auth, state, takeover, fence, resync, failback, volume, warning, error */
	char type[16];
	/** up, down, refused, the new state, start, progress, end, created, ... */
	char what[64];
	/** the node's words, "" for none */
	char reason[512];
	/** the state as it is (ftvm_events() with now), not a change */
	bool current;
	size_t n_fields;
	struct ftvm_event_field fields[FTVM_EVENT_FIELDS_MAX];
};

/** Called with each event; a value other than 0 ends ftvm_events(), which returns it. */
typedef int (*ftvm_event_fn)(const struct ftvm_event *event, void *arg);

/**
 * @brief Follows the events of the node @p c talks to, as they happen.
 *
 * Opens a connection of its own to that node (the client's other calls go
 * on, from other threads), asks for its events and calls @p fn with each,
 * in order, until @p fn returns non-zero or the node goes. With @p now, the
 * node's state as it is comes first, as events marked current (its state
 * and epoch, the partner link, a resync under way, each volume). A node
 * sends to at most 16 followers, and drops one that does not read.
 * @return what @p fn returned, or -errno: -ECONNRESET when the node closed
 *         the stream (it stopped, or dropped a follower that did not read),
 *         -ENOSPC when 16 follow already, -ENOTCONN when a pair client
 *         talks to no node, and the conventions above.
 */
FTVM_EXPORT int ftvm_events(struct ftvm_client *c, bool now, ftvm_event_fn fn, void *arg);

/**
 * @brief Fault injection for failover drills (`ftvmctl drill cut`): the
 *        node's partner link goes silent both ways for @p ms, as with a
 *        pulled cable, then comes back by itself.
 *
 * Both nodes live through it; node/ha/HA.md says which one serves.
 * @param c a connected client.
 * @param ms 1 to 600000.
 * @return 0, or -errno: -EINVAL for @p ms out of range, and the conventions
 *         above.
 */
FTVM_EXPORT int ftvm_drill_cut_link(struct ftvm_client *c, uint32_t ms);

/**
 * @brief Hands every allocation the node adopted in a takeover back to its
 *        home node (`ftvmctl failback`; node/ha/HA.md, "Failback").
 *
 * An adopted allocation with a page locked now stays, counted in
 * @p ret_busy: call again once it is released.
 * @param c a connected client.
 * @param[out] ret_handed_back allocations handed back, or NULL.
 * @param[out] ret_busy adopted allocations left for now, or NULL.
 * @return 0, or -errno: -EHOSTUNREACH when the pair is not whole (the node
 *         serves alone), and the conventions above.
 */
FTVM_EXPORT int ftvm_failback(struct ftvm_client *c, uint64_t *ret_handed_back, uint64_t *ret_busy);

/** A page that went back to the store's copy because no node held its newer
 *  versions any more (`ftvmctl recovery`; node/ha/HA.md, "Recovery"). */
struct ftvm_recovered {
	uint64_t id;		  /**< in the order the node noted them, from 1 */
	uint64_t at_ms;		  /**< when: wall clock, ms since the epoch */
	char guid[FTVM_GUID_MAX]; /**< the allocation (it may be freed since) */
	uint64_t page;
	uint64_t from_version; /**< the version lost */
	uint64_t to_version;   /**< the store's, served since (0: zeroes) */
	char why[64];	       /**< the occasion, e.g. "both nodes restarted" */
};

/**
 * @brief Lists the pages the node's page table notes as gone back to the
 *        store's copy (`ftvmctl recovery`), in any state of the node.
 *
 * @param c a connected client.
 * @param after with @p newest false, the pages whose id is above it, in
 *        order: pass the last id got to go on; 0 from the first.
 * @param newest the last @p max noted, newest first (@p after is ignored).
 * @param[out] ret up to @p max entries (the node sends at most 4096 a call).
 * @param[out] ret_n entries filled in.
 * @param[out] ret_total pages noted in all, or NULL.
 * @return 0, or -errno (the conventions above); -EINVAL without @p ret,
 *         @p max or @p ret_n.
 */
FTVM_EXPORT int ftvm_recovery_list(struct ftvm_client *c, uint64_t after, bool newest,
				   struct ftvm_recovered *ret, size_t max, size_t *ret_n,
				   uint64_t *ret_total);

/**
 * @brief Makes the node serve alone although its partner may hold newer
 *        copies: for a partner gone for good (`ftvmctl takeover --force
 *        --yes`; node/ha/HA.md, "Forced takeover").
 *
 * What the partner acknowledged that this node never got is given up, and
 * pages whose newest version was in memory alone go back to the store's
 * (status `recovery` lists them). Returns once the node serves alone.
 * @param c a connected client of a node whose uid is root, ftvmd's or in
 *        `[client] admin_group`.
 * @return 0, or -errno: -EACCES when the node refused (the link is up, the
 *         partner's store heartbeat moves, the node serves already, or the
 *         caller is not an admin: ftvm_last_error() says which), -ESHUTDOWN
 *         when the node fenced itself instead, and the conventions above.
 */
FTVM_EXPORT int ftvm_takeover_force(struct ftvm_client *c);

/**
 * @brief Starts recording the node's partner channel and client API to a
 *        trace file (`ftvmctl trace start`; common/TRACE.md).
 *
 * @param c a connected client.
 * @param path absolute; the node creates it and refuses an existing file.
 * @param channels "all" (or NULL), "partner" or "client".
 * @return 0, or -errno: -EINVAL when the node refused (a trace runs already,
 *         the file exists or cannot be made: ftvm_last_error() says which),
 *         and the conventions above.
 */
FTVM_EXPORT int ftvm_trace_start(struct ftvm_client *c, const char *path, const char *channels);

/**
 * @brief Stops the trace the node records (`ftvmctl trace stop`).
 * @param c a connected client.
 * @param[out] ret_records records written, or NULL.
 * @return 0, or -errno: -EINVAL when no trace runs, and the conventions above.
 */
FTVM_EXPORT int ftvm_trace_stop(struct ftvm_client *c, uint64_t *ret_records);

/**
 * @brief Lists the allocations the node knows: its own and its partner's.
 * @param c a connected client.
 * @param[out] ret an array of *ret_n headers, in the node's order, to be freed
 *        with free(); NULL when there are none. Untouched on failure.
 * @param[out] ret_n how many.
 * @return 0 or -errno (see the conventions above).
 */
FTVM_EXPORT int ftvm_list(struct ftvm_client *c, struct ftvm_header **ret, size_t *ret_n);

/** One row of the server memory allocate table (seed 003 Fig. 13). */
struct ftvm_client_usage {
	uint32_t uid;			     /**< the client uid */
	char name[FTVM_CLIENT_NAME_MAX + 1]; /**< as it named itself; "" for none */
	char media[16];			     /**< where its allocations rest: "store", "flash" */
	uint64_t allocations;		     /**< how many it holds */
	uint64_t bytes;			     /**< their sizes added up */
};

/**
 * @brief The server memory allocate table: what each client (uid and name)
 *        holds, over the allocations the node knows (its own and its
 *        partner's), sorted by uid, then name, then media.
 * @param c a connected client.
 * @param[out] ret an array of *ret_n rows, to be freed with free(); NULL when
 *        there are none. Untouched on failure.
 * @param[out] ret_n how many.
 * @return 0 or -errno (see the conventions above).
 */
FTVM_EXPORT int ftvm_clients(struct ftvm_client *c, struct ftvm_client_usage **ret, size_t *ret_n);

/** Where one allocation lives on the node asked (seed 003's address
 *  mapping table, node/vmm/MEDIA.md). Rows grow at their end, as the status
 *  struct does: see ftvm_mapping_sized(). */
struct ftvm_mapping {
	char guid[FTVM_GUID_MAX]; /**< the allocation */
	char home[40];		  /**< the node it was made on */
	char owner[40];		  /**< the node serving it now */
	char media[16];		  /**< where this node's copy rests: "dram", "flash" or "store" */
	uint64_t pages;		  /**< blocks in it */
	uint32_t block_size;	  /**< bytes per block */
	/** the partition this node's copy takes: "server-memory" (dram, flash:
	 *  the memory partition table), or, in the store, its home's store
	 *  partition (the node id); "" from a node older than it */
	char partition[40];
};

/**
 * @brief The address mapping table: every allocation the node knows (its own
 *        and its partner's), in the node's order, with where its copy on
 *        that node rests. Each node places its own copy.
 * @param c a connected client.
 * @param[out] ret an array of *ret_n rows of @p row_size bytes each (row i
 *        at (char *)*ret + i * @p row_size), to be freed with free(); NULL
 *        when there are none. Of each row, the first @p row_size bytes are
 *        written, and bytes past what this library knows are zero. Untouched
 *        on failure.
 * @param[out] ret_n how many.
 * @param row_size sizeof(struct ftvm_mapping) as the caller was compiled.
 * @return 0 or -errno (see the conventions above); -EINVAL when @p row_size
 *         is 0.
 */
FTVM_EXPORT int ftvm_mapping_sized(struct ftvm_client *c, struct ftvm_mapping **ret, size_t *ret_n,
				   size_t row_size);

/**
 * @brief One allocation's row of the address mapping table, in one small
 *        request: its first @p ret_size bytes, as ftvm_mapping_sized()'s.
 * @return 0, or -errno: -ENOENT (no such allocation), -EINVAL when @p
 *         ret_size is 0, and the conventions above.
 */
FTVM_EXPORT int ftvm_mapping_of_sized(struct ftvm_client *c, const char *guid,
				      struct ftvm_mapping *ret, size_t ret_size);

/* ftvm_mapping() and ftvm_mapping_of() with this program's sizeof(struct
 * ftvm_mapping). They are macros: the functions of those names stay
 * exported for programs built before the row grew (rows end before
 * partition). */
FTVM_EXPORT int ftvm_mapping(struct ftvm_client *c, struct ftvm_mapping **ret, size_t *ret_n);
FTVM_EXPORT int ftvm_mapping_of(struct ftvm_client *c, const char *guid, struct ftvm_mapping *ret);
#define ftvm_mapping(c, ret, ret_n) \
	ftvm_mapping_sized((c), (ret), (ret_n), sizeof(struct ftvm_mapping))
#define ftvm_mapping_of(c, guid, ret) \
	ftvm_mapping_of_sized((c), (guid), (ret), sizeof(struct ftvm_mapping))

/** A block volume (node/vmm/VMM.md, "Volumes"): an allocation of the pair
 *  whose pages are its blocks, cached in the storage cache partition and
 *  served over NBD as the export of its name. Rows grow at their end, as
 *  the status struct does: see ftvm_volume_list_sized(). */
struct ftvm_volume {
	char name[FTVM_CLIENT_NAME_MAX + 1]; /**< the NBD export's name */
	char guid[FTVM_GUID_MAX];	     /**< its allocation */
	uint64_t size;			     /**< bytes, as made */
	uint32_t block_size;		     /**< bytes per page: the node's page size */
	char home[40];			     /**< the node it was made on, whose partition of
						  the store holds its blocks */
	char owner[40];			     /**< the node serving it now */
};

/**
 * @brief Makes a block volume of @p size bytes named @p name
 *        ([A-Za-z0-9._-], 1 to FTVM_CLIENT_NAME_MAX characters, not starting
 *        with '-' or '.'; unique in the pair), homed on @p home: NULL or the
 *        node asked, or its partner's id (the partner makes it; its store
 *        partition holds its blocks). It is refused (-EPERM: DENIED) when the
 *        name is taken or either node has no storage cache ([memory] cache),
 *        and never waits for space.
 * @param[out] ret the new volume's allocation (may be NULL).
 * @return 0 or -errno (see the conventions above); -EINVAL for a home that
 *         is neither node.
 */
FTVM_EXPORT int ftvm_volume_create(struct ftvm_client *c, const char *name, uint64_t size,
				   const char *home, struct ftvm_alloc_info *ret);

/**
 * @brief Frees the volume named @p name, as ftvm_free() its allocation.
 * @return 0 or -errno: -ENOENT when there is no such volume.
 */
FTVM_EXPORT int ftvm_volume_delete(struct ftvm_client *c, const char *name);

/**
 * @brief Every volume of the pair, by name.
 * @param[out] ret an array of *ret_n rows of @p row_size bytes each, as
 *        ftvm_mapping_sized()'s, to be freed with free(); NULL when there are
 *        none. Untouched on failure.
 * @param row_size sizeof(struct ftvm_volume) as the caller was compiled.
 * @return 0 or -errno; -EINVAL when @p row_size is 0.
 */
FTVM_EXPORT int ftvm_volume_list_sized(struct ftvm_client *c, struct ftvm_volume **ret,
				       size_t *ret_n, size_t row_size);
#define ftvm_volume_list(c, ret, ret_n) \
	ftvm_volume_list_sized((c), (ret), (ret_n), sizeof(struct ftvm_volume))

/** One row of the memory partition table (seed 003 Fig. 12): a partition
 *  of the node's DRAM or flash, or, inside flash server memory, the range
 *  one allocation holds and the client it belongs to. */
struct ftvm_partition {
	char media[16];	 /**< "dram", "flash" */
	char type[16];	 /**< "server-memory", "storage-cache" */
	uint64_t start;	 /**< bytes: from the pool's first frame, or the flash device's */
	uint64_t length; /**< bytes */
	uint64_t free;	 /**< bytes not taken, on a partition's row; 0 on an allocation's */
	char guid[FTVM_GUID_MAX];	       /**< the allocation's row: its guid; "" */
	uint32_t uid;			       /**< ... its client's uid */
	char client[FTVM_CLIENT_NAME_MAX + 1]; /**< ... and name */
};

/**
 * @brief The memory partition table: the node's DRAM and flash, each split
 *        between server memory (clients' allocations) and the storage cache
 *        ([memory] cache, [flash] cache), each partition's row followed, on
 *        flash, by the range each allocation there holds (node/vmm/MEDIA.md,
 *        "The memory partition table"). Answered in any state.
 * @param c a connected client.
 * @param[out] ret an array of *ret_n rows, to be freed with free().
 *        Untouched on failure.
 * @param[out] ret_n how many.
 * @return 0 or -errno (see the conventions above); -EOPNOTSUPP from a node
 *         older than this call.
 */
FTVM_EXPORT int ftvm_partitions(struct ftvm_client *c, struct ftvm_partition **ret, size_t *ret_n);

/** One storage medium of a node. */
struct ftvm_media {
	char type[16];	   /**< "dram", "flash", ... */
	uint64_t capacity; /**< bytes */
	uint64_t free;	   /**< bytes */
};

/** A node's capacities and queue depths (seed 002's sense request). */
struct ftvm_sense {
	struct ftvm_media media[4]; /**< the first n_media media the node reports */
	size_t n_media;
	uint64_t paging_queue;	    /**< requests waiting for a lock or for space */
	uint64_t destage_queue;	    /**< pages waiting to be written to the store */
	uint64_t replacement_queue; /**< frames waiting to be reclaimed */
	/** the storage cache partitions ("dram", "flash"; node/vmm/MEDIA.md), each
	 *  only where the node has one: media above are server memory's and the
	 *  store's; none from a node older than them */
	struct ftvm_media cache[2];
	size_t n_cache;
};

/**
 * @brief Asks the node for its capacities and queues.
 * @param c a connected client.
 * @param[out] ret filled in on success: its first @p ret_size bytes.
 * @param ret_size sizeof(struct ftvm_sense) as the caller was compiled;
 *        bytes past what this library knows are set to zero.
 * @return 0 or -errno (see the conventions above); -EINVAL when @p ret_size
 *         is 0.
 */
FTVM_EXPORT int ftvm_sense_sized(struct ftvm_client *c, struct ftvm_sense *ret, size_t ret_size);

/**
 * @brief ftvm_sense_sized() with this program's sizeof(struct ftvm_sense):
 *        see "Compatibility" above.
 */
static inline int ftvm_sense(struct ftvm_client *c, struct ftvm_sense *ret)
{
	return ftvm_sense_sized(c, ret, sizeof(*ret));
}

/** The nodes of a pair: the rows ftvm_discover() fills at most. */
#define FTVM_PAIR_NODES 2

/**
 * One row of the device discovery table (seed 003 Fig. 10): a node of the
 * pair as the node the client is connected to sees it. Strings are NUL
 * terminated and truncated to fit. Rows gain fields at their end as ftvm
 * grows: see ftvm_discover_sized().
 */
struct ftvm_device {
	char node[40];	   /**< its [node] id; "" for a partner not heard from yet */
	char endpoint[80]; /**< its partner-channel address ([node] listen / partner) */
	/** starting, active, solo, resyncing or fenced, as the node reports
	 *  itself; "unknown" for a partner not linked */
	char state[16];
	char reason[160]; /**< why it is not reachable; "" when it is */
	bool self;	  /**< the node the client is connected to */
	/** it answered: the node itself always, its partner when it answered
	 *  the node's sense request */
	bool reachable;
	bool serving; /**< solo, or active with its partner linked */
	/** "dram", "flash", "store", as ftvm_sense(); none for a partner not
	 *  reachable */
	struct ftvm_media media[4];
	size_t n_media;
};

/**
 * @brief The device discovery table: the node the client is connected to
 *        and its partner, each with its state and its capacity and free
 *        bytes per media (node/vmm/MEDIA.md, "Device discovery: the message
 *        flow").
 *
 * The node answers for itself and asks its partner for its media. A partner
 * that cannot be asked (the link is down, the node serves alone, it did
 * not answer in time, it refused) does not fail the call: its row has
 * reachable false and reason says why. The node answers in any state, as
 * for a status.
 * @param c a connected client.
 * @param[out] ret room for @p max rows of @p row_size bytes each, filled
 *        from the first: the node the client is connected to, then its
 *        partner. Row i is at (char *)ret + i * @p row_size; of each, the
 *        first @p row_size bytes are written, and bytes past what this
 *        library knows are set to zero (see "Compatibility" above: here the
 *        size is a row's, as the rows form an array).
 * @param max rows @p ret has room for; rows past it are left out.
 * @param[out] ret_n rows filled.
 * @param row_size sizeof(struct ftvm_device) as the caller was compiled.
 * @return 0, or -errno (see the conventions above): -EOPNOTSUPP from a node
 *         older than this call, -EINVAL when @p ret, @p max, @p ret_n or
 *         @p row_size is 0 or NULL.
 */
FTVM_EXPORT int ftvm_discover_sized(struct ftvm_client *c, struct ftvm_device *ret, size_t max,
				    size_t *ret_n, size_t row_size);

/**
 * @brief ftvm_discover_sized() with this program's sizeof(struct
 *        ftvm_device), for an array of FTVM_PAIR_NODES rows.
 */
static inline int ftvm_discover(struct ftvm_client *c, struct ftvm_device ret[FTVM_PAIR_NODES],
				size_t *ret_n)
{
	return ftvm_discover_sized(c, ret, FTVM_PAIR_NODES, ret_n, sizeof(struct ftvm_device));
}

/**
 * The comparison of the two nodes' page tables and page checksums. Clients
 * may write meanwhile: a page that differs while a change of it is in
 * flight is compared again once it landed, and counted in busy when a
 * change was in flight at every comparison (node/vmm/VMM.md, "Verify while
 * clients write").
 */
struct ftvm_verify {
	bool equal;	      /**< no difference found between the nodes */
	uint64_t allocations; /**< allocations compared */
	uint64_t pages;	      /**< pages compared */
	char **differences;   /**< n_differences lines, each naming a guid and page */
	size_t n_differences;
	uint64_t busy;	 /**< pages not compared: a change in flight each time */
	uint32_t rounds; /**< comparisons made (later ones of what differed) */
};

/**
 * @brief Has the node compare its page table and page checksums with its partner's.
 * @param c a connected client.
 * @param[out] ret the result, to be freed with ftvm_verify_free(): its first
 *        @p ret_size bytes; zeroed on failure, so freeing it is always safe.
 * @param ret_size sizeof(struct ftvm_verify) as the caller was compiled; at
 *        least up to n_differences. Bytes past what this library knows are
 *        set to zero.
 * @return 0 whether or not the nodes are equal (see ret->equal), or -errno:
 *         -EHOSTUNREACH (no partner to compare with), -EINVAL when @p
 *         ret_size is too small, and the conventions above.
 */
FTVM_EXPORT int ftvm_verify_sized(struct ftvm_client *c, struct ftvm_verify *ret, size_t ret_size);

/**
 * @brief ftvm_verify_sized() with this program's sizeof(struct ftvm_verify):
 *        see "Compatibility" above.
 */
static inline int ftvm_verify(struct ftvm_client *c, struct ftvm_verify *ret)
{
	return ftvm_verify_sized(c, ret, sizeof(*ret));
}

/**
 * @brief Frees the differences ftvm_verify() allocated in @p v, and sets
 *        them to NULL and 0, so freeing twice is safe.
 * @param v a result, or NULL (nothing happens).
 */
FTVM_EXPORT void ftvm_verify_free(struct ftvm_verify *v);

/**
 * @brief Obtains a read pointer to a page (seed 002 Fig. 6): shared with other
 * readers on both nodes, mirrored on the partner before it is granted.
 *
 * The pointer points into the node's frame pool, which this client maps at
 * its first pointer call; it stays valid until ftvm_release_pointer(),
 * ftvm_disconnect(), or a move to the other node (see "Failover" above).
 * It points into a read-only view of the pool: a write through it faults
 * (SIGSEGV) at once, and the block stays as the locks and the partner know
 * it. (The client maps the pool twice, a writable view for write pointers and
 * a read-only one: address space of twice the pool, no more memory.)
 * @param wait when the page is write-locked, wait in the node's paging queue
 *        (up to the node's request_timeout_ms) instead of failing at once.
 * @param[out] ret the block's first byte.
 * @param[out] ret_len the block size (may be NULL).
 * @return 0; -EBUSY when locked (and not granted within the wait);
 *         -ENOENT, -EINVAL for a bad guid or page; -EHOSTUNREACH when the
 *         partner is unavailable.
 */
FTVM_EXPORT int ftvm_get_read_pointer(struct ftvm_client *c, const char *guid, uint64_t page,
				      bool wait, const void **ret, size_t *ret_len);

/**
 * @brief Obtains the write pointer to a page (seed 002 Fig. 7): exclusive on
 * both nodes. Write the block through it, then release it as modified, which
 * mirrors the block to the partner before it returns.
 *
 * Arguments and returns as ftvm_get_read_pointer().
 */
FTVM_EXPORT int ftvm_get_write_pointer(struct ftvm_client *c, const char *guid, uint64_t page,
				       bool wait, void **ret, size_t *ret_len);

/**
 * @brief Releases this client's pointer to a page (seed 002 Fig. 8).
 *
 * With @p modified (write pointers only) the block is replicated to the
 * partner and queued for destage; the call returns once the partner has it.
 * Pointers a client still holds when its connection closes are released by
 * the node (a write pointer as modified).
 * @param[out] ret_crc32c the block's CRC-32C after the release (may be NULL).
 * @return 0; -EINVAL when this client holds no pointer to the page, or a read
 *         pointer is released as modified (also for a pointer taken before
 *         a move to the other node: the new node holds none), or a write
 *         pointer whose block was written into is released as not modified
 *         (the write is in place: the pointer is then still held, release
 *         it as modified); -EHOSTUNREACH
 *         when the partner is unavailable (the pointer is then still held:
 *         release it again); -ESTALE when the pointer was revoked: the node
 *         fenced itself and its partner took the page over (node/ha/HA.md).
 *         What was written through it since the grant does not count, and
 *         the pointer is let go: take a new one. Until then its block stays
 *         aside, written by nobody else.
 */
FTVM_EXPORT int ftvm_release_pointer(struct ftvm_client *c, const char *guid, uint64_t page,
				     bool modified, uint32_t *ret_crc32c);

#ifdef __cplusplus
}
#endif
