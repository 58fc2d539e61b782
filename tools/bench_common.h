/* What the benchmarks share: whole reads and writes, percentiles, and the
 * floors every round trip is held against. (Free loopback ports come from
 * tests/support/free_port.h.) */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Reads or writes exactly len bytes, retrying on EINTR. Returns 0, or -EIO
 * when the peer closed, or -errno. */
int bench_full_io(int fd, void *buf, size_t len, bool writing);

/* TCP_NODELAY, as the partner channel sets it. */
void bench_nodelay(int fd);

/* Sorts samples[0..n) in place and returns its 50th and 99th percentiles. */
void bench_percentiles(uint64_t *samples, unsigned n, uint64_t *ret_p50, uint64_t *ret_p99);

enum bench_floor_kind {
	/* A bare TCP ping-pong on loopback, the echoing side in a child
	 * process as a partner node would be: the floor every round trip is
	 * held against. */
	BENCH_FLOOR_TCP,
	/* The same, reached through a relay: this process talks to a child
	 * over a unix socket, which passes each request on over TCP to the
	 * echo and its answer back. A client, its node and the partner with
	 * no work done: the floor of ftvm's own design for a mirrored write. */
	BENCH_FLOOR_RELAY,
};

/* warmup + count blocking round trips of request_bytes out and reply_bytes
 * back, as kind says. samples_us receives the last count round trips, in
 * microseconds. Returns 0 or -errno; the children are gone either way. */
int bench_floor_run(enum bench_floor_kind kind, size_t request_bytes, size_t reply_bytes,
		    unsigned warmup, unsigned count, uint64_t *samples_us);
