/* Redis synchronous replication as a benchmark's reference: a primary and a
 * replica on loopback, no persistence on either, and a client that writes
 * SET key <value> followed by WAIT 1, the write acknowledged once the replica
 * has it. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "bench_proc.h"

#define BENCH_REDIS_SETS_MAX 64 /* SETs one bench_redis_write() may send */

struct bench_redis {
	struct bench_proc procs[2]; /* the primary, the replica */
	uint16_t port[2];
};

/* One client connection, writing one key. */
struct bench_redis_conn {
	int fd;
	char *cmd;	/* BENCH_REDIS_SETS_MAX SETs of the key, then WAIT 1 1000 */
	size_t set_len; /* bytes of one SET in cmd */
	size_t value_len;
	char buf[4096]; /* what was read and not parsed yet */
	size_t head, tail;
};

/* Starts the primary and the replica with their data and logs in
 * dir/redis-0, dir/redis-1, and waits until the replica is linked.
 * -ENOENT: redis-server is not installed (nothing said); other failures
 * are said on stderr. What was started is left for bench_redis_stop(). */
int bench_redis_start(struct bench_redis *r, const char *dir);

void bench_redis_stop(struct bench_redis *r);

/* A connection to the primary that writes key with values of value_len
 * bytes. Returns 0 or -errno. */
int bench_redis_open(const struct bench_redis *r, const char *key, size_t value_len,
		     struct bench_redis_conn *ret);

void bench_redis_close(struct bench_redis_conn *c);

/* sets SETs of the key (each value stamped with seq, seq + 1, ...) and then
 * WAIT 1 1000, in one send, as a client that pipelines them would; returns
 * once all are answered and the replica acknowledged them. -ETIMEDOUT: the
 * replica did not within the WAIT's second, or Redis did not answer within
 * 5 s; -EBADMSG: another answer (said on stderr). */
int bench_redis_write(struct bench_redis_conn *c, unsigned sets, uint64_t seq);
