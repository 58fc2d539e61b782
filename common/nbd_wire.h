/* The NBD protocol's bytes, server side: the fixed newstyle handshake and the
 * transmission phase's requests and simple replies, as a codec with no
 * sockets and no event loop (bytes in, bytes out). The protocol is the
 * NetworkBlockDevice project's doc/proto.md; the names below are its names.
 * The handshake's states are described at the top of nbd_wire.c. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Transmission flags (16 bits, sent at the end of the handshake). */
#define NBD_FLAG_HAS_FLAGS (1u << 0)	     /* always set */
#define NBD_FLAG_READ_ONLY (1u << 1)	     /* writes, trims and zeroes fail */
#define NBD_FLAG_SEND_FLUSH (1u << 2)	     /* NBD_CMD_FLUSH understood */
#define NBD_FLAG_SEND_FUA (1u << 3)	     /* NBD_CMD_FLAG_FUA understood */
#define NBD_FLAG_ROTATIONAL (1u << 4)	     /* a hint for the client's scheduler */
#define NBD_FLAG_SEND_TRIM (1u << 5)	     /* NBD_CMD_TRIM understood */
#define NBD_FLAG_SEND_WRITE_ZEROES (1u << 6) /* NBD_CMD_WRITE_ZEROES and NO_HOLE */
#define NBD_FLAG_SEND_DF (1u << 7)	     /* NBD_CMD_FLAG_DF (structured replies only) */
#define NBD_FLAG_CAN_MULTI_CONN (1u << 8)    /* flush and FUA visible on every connection */
#define NBD_FLAG_SEND_CACHE (1u << 10)	     /* NBD_CMD_CACHE understood */
#define NBD_FLAG_SEND_FAST_ZERO (1u << 11)   /* NBD_CMD_FLAG_FAST_ZERO understood */

/* Commands (a request's type). */
#define NBD_CMD_READ 0
#define NBD_CMD_WRITE 1 /* length bytes of payload follow the request */
#define NBD_CMD_DISC 2	/* no reply: the server closes once earlier requests are answered */
#define NBD_CMD_FLUSH 3
#define NBD_CMD_TRIM 4
#define NBD_CMD_CACHE 5 /* not served here */
#define NBD_CMD_WRITE_ZEROES 6
#define NBD_CMD_BLOCK_STATUS 7 /* needs structured replies: not served here */

/* Command flags (a request's flags). */
#define NBD_CMD_FLAG_FUA (1u << 0)	 /* reply only once the data is persistent */
#define NBD_CMD_FLAG_NO_HOLE (1u << 1)	 /* WRITE_ZEROES: allocate, do not punch */
#define NBD_CMD_FLAG_DF (1u << 2)	 /* READ: one data chunk (structured only) */
#define NBD_CMD_FLAG_REQ_ONE (1u << 3)	 /* BLOCK_STATUS: one extent */
#define NBD_CMD_FLAG_FAST_ZERO (1u << 4) /* WRITE_ZEROES: fail unless fast */

/* Error values of a reply (the protocol's own, not the host's errno). */
#define NBD_EPERM 1	  /* write, trim or zeroes on a read-only export */
#define NBD_EIO 5	  /* the medium failed */
#define NBD_ENOMEM 12	  /* the server is out of memory */
#define NBD_EINVAL 22	  /* a bad request: flags, range, alignment, length */
#define NBD_ENOSPC 28	  /* a write past the end, or no room */
#define NBD_EOVERFLOW 75  /* a length too large to serve */
#define NBD_ENOTSUP 95	  /* an operation not supported */
#define NBD_ESHUTDOWN 108 /* the server is shutting down */

/* Bounds the handshake keeps (see nbd_wire.c). A caller's input buffer must
 * hold at least NBD_OPTION_HEADER_SIZE + NBD_OPTION_MAX_DATA bytes, since an
 * option is consumed only whole. */
#define NBD_OPTION_HEADER_SIZE 16
#define NBD_OPTION_MAX_DATA 8192 /* longer option data closes the connection */
#define NBD_NAME_MAX 4096	 /* longer export names are refused */
#define NBD_OPTIONS_MAX 64	 /* options before GO; more close the connection */

/* Block sizes used when a lookup leaves them 0: the spec's defaults. */
#define NBD_DEFAULT_MIN_BLOCK 1
#define NBD_DEFAULT_PREFERRED_BLOCK 4096
#define NBD_DEFAULT_MAX_BLOCK (32u << 20)

/* What the server says of an export. */
struct nbd_export {
	uint64_t size;
	uint32_t min_block, preferred_block, max_block; /* NBD_INFO_BLOCK_SIZE */
	bool read_only;
	bool multi_conn;	 /* NBD_FLAG_CAN_MULTI_CONN */
	const char *description; /* NBD_INFO_DESCRIPTION, may be NULL */
};
/* 0 and *ret filled, or -ENOENT for no such export. Any other error refuses
 * the export too (NBD_REP_ERR_SHUTDOWN for -ESHUTDOWN, else
 * NBD_REP_ERR_POLICY). Block sizes left 0 take the defaults above; what is
 * given must follow the spec (powers of two, min <= 64 KiB, min <= preferred
 * <= max). *ret's description must stay valid until the call that looked it
 * up returns, or past NBD_HS_GO for nbd_handshake_export_info(). */
typedef int (*nbd_lookup_fn)(void *arg, const char *name, struct nbd_export *ret);
/* Calls emit once per export. */
typedef void (*nbd_list_fn)(void *arg,
			    void (*emit)(void *ctx, const char *name, const char *description),
			    void *ctx);

/* Bytes to send, appended to (grown with realloc). Zero-initialise it. */
struct nbd_out {
	uint8_t *data;
	size_t len, cap;
};
void nbd_out_free(struct nbd_out *out);
/* Appends n bytes. 0 or -ENOMEM (out unchanged). */
int nbd_out_append(struct nbd_out *out, const void *p, size_t n);
/* Makes room for n more bytes and returns where they go; the caller writes
 * them and adds n to out->len. NULL when out of memory. */
uint8_t *nbd_out_reserve(struct nbd_out *out, size_t n);
/* Forgets the first n bytes (sent), keeping the rest. */
void nbd_out_consume(struct nbd_out *out, size_t n);

/* The handshake (fixed newstyle only): */
enum nbd_handshake_result {
	NBD_HS_MORE,  /* feed more input */
	NBD_HS_GO,    /* transmission phase begins: nbd_handshake_export() names the export */
	NBD_HS_CLOSE, /* send what is in out, then close (NBD_OPT_ABORT, or a protocol error:
		       * nbd_handshake_error() says which, for the log) */
};
struct nbd_handshake;
/* Appends the server's greeting to out. -ENOMEM. lookup and list are called
 * from nbd_handshake_input() only, with arg. */
int nbd_handshake_new(nbd_lookup_fn lookup, nbd_list_fn list, void *arg, struct nbd_out *out,
		      struct nbd_handshake **ret);
/* Consumes what it can of in[0..len) (*consumed says how much; the caller
 * keeps the rest and feeds it again with more), appends replies to out.
 * After NBD_HS_GO, bytes after the consumed ones belong to the transmission
 * phase. Once it has said NBD_HS_GO or NBD_HS_CLOSE it says so again,
 * consuming nothing. Out of memory is NBD_HS_CLOSE. */
enum nbd_handshake_result nbd_handshake_input(struct nbd_handshake *h, const uint8_t *in,
					      size_t len, size_t *consumed, struct nbd_out *out);
/* After NBD_HS_GO: the export's name, as the client gave it. */
const char *nbd_handshake_export(const struct nbd_handshake *h);
/* After NBD_HS_GO: the export as the lookup described it at GO (block sizes
 * with the defaults filled in), so the caller need not look it up again. */
const struct nbd_export *nbd_handshake_export_info(const struct nbd_handshake *h);
/* The transmission flags sent for e (NBD_FLAG_*). */
uint16_t nbd_export_flags(const struct nbd_export *e);
/* The client asked for structured replies and was told yes (never, yet). */
bool nbd_handshake_structured(const struct nbd_handshake *h);
/* After NBD_HS_CLOSE: why, or "client aborted". */
const char *nbd_handshake_error(const struct nbd_handshake *h);
void nbd_handshake_free(struct nbd_handshake *h);

/* Transmission: */
struct nbd_request {
	uint16_t flags;
	uint16_t type;
	uint64_t cookie;
	uint64_t offset;
	uint32_t length;
};
#define NBD_REQUEST_SIZE 28
#define NBD_SIMPLE_REPLY_SIZE 16
/* 0: fewer than 28 bytes; NBD_REQUEST_SIZE: parsed into *ret; -EPROTO: not a
 * request (bad magic; said as soon as the first 4 bytes are in). */
int nbd_request_parse(const uint8_t *in, size_t len, struct nbd_request *ret);
/* Whether r may be served on e: 0, or the NBD error to reply, with *why for
 * the log:
 *   NBD_EINVAL  an unknown command (including CACHE and BLOCK_STATUS, which
 *               are not advertised), a command flag unknown or not valid for
 *               the command, length 0 on READ/WRITE/TRIM/WRITE_ZEROES, a
 *               READ/WRITE longer than max_block, offset or length not a
 *               multiple of min_block, a READ or TRIM past the end, FLUSH or
 *               DISC with a nonzero offset or length;
 *   NBD_EPERM   WRITE, TRIM or WRITE_ZEROES on a read-only export;
 *   NBD_ENOSPC  WRITE or WRITE_ZEROES past the end.
 * NBD_CMD_FLAG_FUA is accepted on every command (the spec says a server that
 * advertises SEND_FUA must). A WRITE's payload (length bytes) follows the
 * header on the wire whatever the answer; a DISC is never replied to. */
uint32_t nbd_request_check(const struct nbd_request *r, const struct nbd_export *e,
			   const char **why);
/* Appends a simple reply (16 bytes). 0 or -ENOMEM. For a successful READ the
 * caller appends length bytes of data after it. */
int nbd_reply_simple(struct nbd_out *out, uint64_t cookie, uint32_t error);
/* The NBD error for an errno, either sign (EIO, ENOSPC, EDQUOT, EFBIG,
 * EPERM, EINVAL, ENOMEM, EOVERFLOW, ENOTSUP, ESHUTDOWN; 0 is 0; anything
 * else EIO). */
uint32_t nbd_error_from_errno(int err);
/* "READ", "WRITE", ... or "UNKNOWN", for logs. */
const char *nbd_cmd_name(uint16_t type);
