/* The byte stream a socket target sends for one input (fuzz_client_request,
 * fuzz_session): the input's first byte chooses how the rest is read.
 *   bit 0 clear  the bytes as they are, frame headers and all;
 *   bit 0 set    payloads, each a 16-bit little-endian length and that many
 *                bytes, each put in a frame made right (common/frame.h), so
 *                the fuzzer gets past the checksum to what the frames hold.
 * The other bits are the target's. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The stream for data (size >= 1), malloc'd; its length in *ret_len. */
uint8_t *fuzz_stream(const uint8_t *data, size_t size, size_t *ret_len);

/* One recv() on fd into *buf, grown as needed (*len bytes used of *cap):
 * recv()'s result. */
ssize_t fuzz_recv_more(int fd, uint8_t **buf, size_t *len, size_t *cap);
