/* What the benchmarks share: free loopback ports, whole reads and writes,
 * percentiles, and the floor every round trip is held against: a bare
 * blocking TCP ping-pong on loopback, with the server side in a child
 * process as a partner node would be. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A loopback TCP port that was free a moment ago (bound, read, closed).
 * Returns 0 with *ret_port set, or -errno. */
int bench_free_port(uint16_t *ret_port);

/* Reads or writes exactly len bytes, retrying on EINTR. Returns 0, or -EIO
 * when the peer closed, or -errno. */
int bench_full_io(int fd, void *buf, size_t len, bool writing);

/* TCP_NODELAY, as the partner channel sets it. */
void bench_nodelay(int fd);

/* Sorts samples[0..n) in place and returns its 50th and 99th percentiles. */
void bench_percentiles(uint64_t *samples, unsigned n, uint64_t *ret_p50, uint64_t *ret_p99);

/* The floor: warmup + count blocking round trips of request_bytes out and
 * reply_bytes back over loopback TCP, the echoing side in a child process.
 * samples_us receives the last count round trips, in microseconds.
 * Returns 0 or -errno; the child is gone either way. */
int bench_tcp_floor(size_t request_bytes, size_t reply_bytes, unsigned warmup, unsigned count,
		    uint64_t *samples_us);
