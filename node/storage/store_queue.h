/* The backing store driven like a verbs queue (seed 004): reads and writes are
 * posted and complete out of order on a small pool of threads (pread/pwrite on
 * the store's fd); a fence completes once everything posted before it has, and
 * nothing posted after it starts before it completes; a barrier is a fence that
 * also makes everything before it stable (fdatasync). Completions are delivered
 * on the event loop thread, from an eventfd the loop watches: no callback ever
 * runs on a pool thread.
 *
 * Every call here is made on the event loop thread. A completion callback may
 * post more operations; it must not free the queue. The caller owns buf (and
 * the fd, which the queue never closes) until the operation's completion. */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct event_base;
struct store_queue;

/* result: bytes transferred (reads and writes, always the whole length or an
 * error), 0 for fence/barrier, or -errno (a short read past the end of the
 * file is -EIO with nothing partial reported as success). Runs exactly once
 * per operation that was posted successfully. */
typedef void (*store_done_fn)(int result, void *arg);

/* threads: 1..STORE_QUEUE_MAX_THREADS pool threads, started here; -EINVAL
 * otherwise. */
#define STORE_QUEUE_MAX_THREADS 64u
int store_queue_new(struct event_base *base, int fd, unsigned threads, struct store_queue **ret);
/* Waits for every posted operation, delivers their completions, then frees.
 * Completions that post while it runs get -ESHUTDOWN. NULL is fine. */
void store_queue_free(struct store_queue *q);

/* What the queue may write (storage/STORAGE.md, "Access"): a write must lie
 * wholly inside one of these ranges, or it is refused -EACCES and nothing is
 * written. Replaces the ranges set before; none at first (a new queue writes
 * nothing). -EINVAL for more than STORE_QUEUE_MAX_RANGES. */
struct store_range {
	uint64_t start, length;
};
#define STORE_QUEUE_MAX_RANGES 4u
int store_queue_set_writable(struct store_queue *q, const struct store_range *ranges, size_t n);
/* Writes refused so far. */
uint64_t store_queue_refused(const struct store_queue *q);

/* 0 when posted (done will run), or -EINVAL (no callback, NULL buf, len over
 * INT_MAX, offset + len past the largest file offset), -EACCES (a write
 * outside the writable ranges), -ENOMEM, -ESHUTDOWN. */
int store_queue_read(struct store_queue *q, void *buf, size_t len, uint64_t offset,
		     store_done_fn done, void *arg);
int store_queue_write(struct store_queue *q, const void *buf, size_t len, uint64_t offset,
		      store_done_fn done, void *arg);
int store_queue_fence(struct store_queue *q, store_done_fn done, void *arg);
int store_queue_barrier(struct store_queue *q, store_done_fn done, void *arg);

/* Operations posted and not yet completed (delivered). */
size_t store_queue_depth(const struct store_queue *q);

/* Runs the event loop's completions for everything posted so far, blocking
 * until all are done (for a clean shutdown). Operations the callbacks post
 * meanwhile are not waited for, though their completions may be delivered.
 * Not from a completion callback. */
void store_queue_drain(struct store_queue *q);
