/* The write path of issue 24: 4 KiB writes acknowledged by a mirror, from
 * 1, 4 and 16 clients (each its own connection, thread and pages) and from
 * one client at queue depths 1, 8 and 32, for ftvm at each acknowledgement
 * level ([node] ack) beside three references: a bare TCP ping-pong, a relay
 * doing no work over the same four hops as a write (bench_peers.h), and
 * Redis SET + WAIT 1 with a replica. The subjects take turns, round after
 * round, so that what the machine does meanwhile falls on all alike. Each
 * figure is printed with its ratio to the relay's and to Redis's in the same
 * row, then the aims, met or not, and the commands to run it again.
 * Figures are printed, never asserted. With data_dir, the figures also go to
 * files, for tools/bench_plot.sh: their format is at the top of bench_write.c. */
#pragma once

#include "bench_pair.h"

/* The acknowledgement levels, as bits of bench_write_opts.levels. */
enum {
	BENCH_ACK_MIRROR = 1u << 0,
	BENCH_ACK_COMMIT = 1u << 1,
	BENCH_ACK_DURABLE = 1u << 2,
	BENCH_ACK_ALL = (1u << 3) - 1,
};

struct bench_write_opts {
	const struct bench_pair_env *env;
	const char
		*dir; /* the run's directory: the table's pairs, Redis and relay go in dir/write */
	unsigned rounds;      /* every cell runs once per round */
	unsigned cell_ms;     /* how long, each time */
	unsigned levels;      /* BENCH_ACK_*: a pair of ftvmd for each */
	const char *data_dir; /* NULL, or where data_dir/write/ gets the samples and summary */
	int argc;	      /* the command line, printed for a reader to run again */
	char **argv;
};

/* Starts every subject, runs the rounds, prints the table, stops them.
 * Returns 0 or -errno, what failed said on stderr (a subject that cannot
 * run here, Redis when not installed, is printed as skipped). */
int bench_write_run(const struct bench_write_opts *o);

/* "mirror,commit,durable" (any of them, comma-separated) as BENCH_ACK_*
 * bits. -EINVAL for anything else. */
int bench_write_parse_levels(const char *s, unsigned *ret);

/* The levels as bench_write_parse_levels() reads them, into buf. */
const char *bench_write_levels_name(unsigned levels, char *buf, size_t len);
