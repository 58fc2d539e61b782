/* Frames: how one protobuf message travels on a byte stream (the partner
 * channel over TCP, the client API socket) or in one RDMA message.
 *
 *   offset  size  field
 *        0     2  magic "FV"
 *        2     1  frame format version (FRAME_VERSION)
 *        3     1  flags, reserved: must be 0
 *        4     4  payload length, big-endian
 *        8     4  CRC-32C over bytes 0..7 and the payload, big-endian
 *       12     n  payload (one packed protobuf message)
 *
 * The checksum covers the header too, so a flipped length or flag bit is caught
 * as well as a flipped payload bit. A receiver that sees a bad frame cannot
 * trust where the next one starts: it drops the connection. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define FRAME_HEADER_SIZE 12u
#define FRAME_VERSION 1u
/* Large enough for a 4 MiB block with its envelope, small enough that a bad
 * length cannot make a peer buffer gigabytes. */
#define FRAME_MAX_PAYLOAD_DEFAULT (8u << 20)

/* Writes the header for a payload that already sits right after it. */
void frame_seal(uint8_t *frame, size_t payload_len);

/* Writes the header for a payload kept elsewhere (sent as a second piece). */
void frame_header_build(uint8_t hdr[FRAME_HEADER_SIZE], const void *payload, size_t payload_len);
/* The same for a payload in n pieces (a gathered write), payload_len in all. */
void frame_header_build_iov(uint8_t hdr[FRAME_HEADER_SIZE], const struct iovec *iov, size_t n,
			    size_t payload_len);

/* Checks a frame header alone. Returns the payload length (>= 0), or -EBADMSG
 * with *ret_why naming what was wrong. */
int frame_header_check(const uint8_t hdr[FRAME_HEADER_SIZE], size_t max_payload,
		       const char **ret_why);

/* Decodes the first frame of buf. Returns 0 when buf holds only part of a
 * frame, the whole frame's length (> 0) with the payload when it is complete
 * and valid, or -EBADMSG with *ret_why saying what was wrong. */
int frame_decode(const uint8_t *buf, size_t len, size_t max_payload, const uint8_t **ret_payload,
		 size_t *ret_payload_len, const char **ret_why);
