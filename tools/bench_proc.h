/* The processes a benchmark starts (daemons, references) and stops: each
 * dies with the benchmark (PR_SET_PDEATHSIG) and is stopped at its end,
 * SIGTERM and SIGKILL after BENCH_STOP_GRACE_MS. */
#pragma once

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#define BENCH_STOP_GRACE_MS 5000

struct bench_proc {
	const char *name; /* how messages name it */
	pid_t pid;	  /* -1 (or 0): not running */
	char log[PATH_MAX];
};

/* Starts argv[0] (found in PATH when it has no '/') as p, with stdout and
 * stderr appended to p->log and stdin from /dev/null. Returns 0 or -errno. */
int bench_proc_spawn(struct bench_proc *p, char *const argv[]);

/* Whether p has exited; reaps it and says how on stderr. */
bool bench_proc_exited(struct bench_proc *p);

/* SIGTERM, then SIGKILL after BENCH_STOP_GRACE_MS; nothing when p is not
 * running. */
void bench_proc_stop(struct bench_proc *p);

/* The CPU time p used so far, user and system, all its threads, in
 * microseconds (the kernel counts in clock ticks: 10 ms here); 0 when p is
 * not running or /proc cannot say. */
uint64_t bench_proc_cpu_us(const struct bench_proc *p);

void bench_sleep_ms(unsigned ms);

/* Whether name is an executable in PATH. */
bool bench_have_program(const char *name);
