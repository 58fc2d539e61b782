/* A pair of ftvmd a benchmark starts on loopback, with generated
 * configurations, a key of its own, and its logs and sockets in one
 * directory. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "bench_proc.h"
#include "ftvm.h"

#define BENCH_START_DEADLINE_MS 10000 /* for a daemon to serve and the pair to link */

/* What every pair of one run shares. */
struct bench_pair_env {
	const char *ftvmd;     /* the daemon to start */
	const char *transport; /* the pair's, or NULL: the config's default (auto) */
	const char *addr;      /* where the pair's channel listens */
	bool trace;	       /* both nodes record all their messages (common/TRACE.md) */
};

struct bench_pair {
	const char *label;    /* how its line and its messages name it */
	const char *memory;   /* [memory] size */
	const char *ack;      /* [node] ack on both nodes, or NULL: the default */
	const char *extra[2]; /* further configuration of node a, of node b, or NULL */
	char dir[256];	      /* its configs, key, logs, sockets and store; short */
	char sock[2][PATH_MAX];
	struct bench_proc nodes[2];
};

/* Writes both configurations and the key into pair->dir (which exists),
 * starts both nodes and waits until they are linked and active, then prints
 * a line naming the pair. Returns 0 or -errno, the reason said on stderr;
 * what was started is left running for bench_pair_stop(). */
int bench_pair_start(const struct bench_pair_env *env, struct bench_pair *pair);

/* Connects to node i (0: a, 1: b), retrying until deadline (clock_now_ms())
 * while its socket is not there yet. */
int bench_pair_connect(struct bench_pair *pair, int i, uint64_t deadline, struct ftvm_client **ret);

/* Stops both nodes (either may have exited already). */
void bench_pair_stop(struct bench_pair *pair);

/* The ftvmd of this build tree: ../node/ftvmd from the directory of the
 * running binary (argv0 when /proc is not there to say). */
void bench_default_ftvmd(const char *argv0, char *out, size_t out_len);
