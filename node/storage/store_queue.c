/* The backing store as a verbs-style queue (seed 004: RDMA semantics mapped to
 * local storage, with out-of-order processing and completions, fence and
 * barrier kept).
 *
 * An operation's life, and which thread moves it:
 *
 *     post ──► WAITING ──(pool: rule below)──► RUNNING ──(pool)──► DONE ──(loop)──► delivered
 *     loop     FIFO, by seq                    pread/pwrite/       FIFO, in        callback
 *                                              fdatasync           finish order    runs, freed
 *
 * Only the head of WAITING may start:
 *     read/write at the head  starts unless a fence or barrier is RUNNING;
 *     fence/barrier at head   starts only when nothing is RUNNING, and while it
 *                             runs nothing else starts.
 * So reads and writes overlap and finish in any order, a fence starts after
 * everything posted before it has finished, and everything posted after it
 * waits until it has. DONE is delivered in the order operations finished, so
 * a fence's completion also comes after every earlier one and before every
 * later one. A fence occupies a pool thread for no time; a barrier holds one
 * for its fdatasync.
 *
 * WAITING, RUNNING and DONE live under one mutex; the pool sleeps on `work`,
 * a drain on `finished`. A pool thread that puts the first operation into an
 * empty DONE writes the eventfd, and the loop thread takes all of DONE at
 * once, so one wakeup can deliver many completions and none is left behind.
 * depth and closing are the loop thread's alone. */
#include "store_queue.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <event2/event.h>

#include "log.h"

#define LOG_SUBSYSTEM "store"

enum op_kind {
	OP_READ,
	OP_WRITE,
	OP_FENCE,
	OP_BARRIER,
};

static const char *const op_names[] = {
	[OP_READ] = "read",
	[OP_WRITE] = "write",
	[OP_FENCE] = "fence",
	[OP_BARRIER] = "barrier",
};

struct op {
	struct op *next;
	uint64_t seq;
	enum op_kind kind;
	void *rbuf;
	const void *wbuf;
	size_t len;
	uint64_t offset;
	int result;
	store_done_fn done;
	void *arg;
};

/* A FIFO of ops linked through next. */
struct op_list {
	struct op *head, *tail;
};

struct store_queue {
	struct event_base *base;
	int fd;
	int efd;
	struct event *ready;

	pthread_mutex_t lock;
	pthread_cond_t work;	 /* pool: WAITING's head may start, or stopping */
	pthread_cond_t finished; /* drain: DONE is not empty */
	struct op_list waiting;
	struct op_list done;
	unsigned running;
	bool fence_running;
	bool stopping;

	/* Loop thread only. */
	uint64_t next_seq;
	size_t depth;
	bool closing;
	struct store_range writable[STORE_QUEUE_MAX_RANGES];
	size_t n_writable;
	uint64_t refused;

	unsigned nthreads;
	pthread_t threads[];
};

static bool is_fence(const struct op *op)
{
	return op->kind == OP_FENCE || op->kind == OP_BARRIER;
}

static void list_push(struct op_list *l, struct op *op)
{
	op->next = NULL;
	if (l->tail)
		l->tail->next = op;
	else
		l->head = op;
	l->tail = op;
}

static struct op *list_pop(struct op_list *l)
{
	struct op *op = l->head;

	l->head = op->next;
	if (!l->head)
		l->tail = NULL;
	return op;
}

/* Takes the whole list, leaving it empty. */
static struct op *list_take(struct op_list *l)
{
	struct op *head = l->head;

	l->head = l->tail = NULL;
	return head;
}

/* Called with the lock held. */
static bool head_can_start(const struct store_queue *q)
{
	const struct op *op = q->waiting.head;

	if (!op || q->fence_running)
		return false;
	return !is_fence(op) || q->running == 0;
}

/* Whole length or an error: a read that meets the end of the file is -EIO. */
static int transfer(int fd, struct op *op)
{
	size_t done = 0;

	while (done < op->len) {
		ssize_t n;

		if (op->kind == OP_READ)
			n = pread(fd, (char *)op->rbuf + done, op->len - done,
				  (off_t)(op->offset + done));
		else
			n = pwrite(fd, (const char *)op->wbuf + done, op->len - done,
				   (off_t)(op->offset + done));
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return -errno;
		}
		if (n == 0)
			return -EIO;
		done += (size_t)n;
	}
	return (int)done;
}

static int execute(int fd, struct op *op)
{
	switch (op->kind) {
	case OP_READ:
	case OP_WRITE:
		return transfer(fd, op);
	case OP_FENCE:
		return 0;
	case OP_BARRIER:
		while (fdatasync(fd) < 0)
			if (errno != EINTR)
				return -errno;
		return 0;
	}
	return -EINVAL;
}

static void wake_loop(struct store_queue *q)
{
	uint64_t one = 1;

	/* Only fails on a counter overflow, which the loop's reads rule out. */
	while (write(q->efd, &one, sizeof(one)) < 0 && errno == EINTR)
		;
}

static void *worker(void *arg)
{
	struct store_queue *q = arg;

	pthread_mutex_lock(&q->lock);
	for (;;) {
		struct op *op;
		bool fence;

		if (!head_can_start(q)) {
			if (q->stopping)
				break;
			pthread_cond_wait(&q->work, &q->lock);
			continue;
		}
		op = list_pop(&q->waiting);
		fence = is_fence(op);
		q->running++;
		q->fence_running = fence;
		/* Each post signals once; pass the baton if more can start. */
		if (head_can_start(q))
			pthread_cond_signal(&q->work);
		pthread_mutex_unlock(&q->lock);

		op->result = execute(q->fd, op);

		pthread_mutex_lock(&q->lock);
		q->running--;
		if (fence)
			q->fence_running = false;
		if (!q->done.head)
			wake_loop(q);
		list_push(&q->done, op);
		pthread_cond_signal(&q->finished);
		/* What a fence held back may start now, as may a fence that
		 * waited for the last running op. */
		if (head_can_start(q))
			pthread_cond_broadcast(&q->work);
	}
	pthread_mutex_unlock(&q->lock);
	return NULL;
}

/* Loop thread: runs and frees each completion. Returns how many had seq at or
 * below upto. */
static size_t deliver(struct store_queue *q, struct op *op, uint64_t upto)
{
	size_t n = 0;

	while (op) {
		struct op *next = op->next;

		q->depth--;
		if (op->seq <= upto)
			n++;
		if (op->result < 0)
			log_debug_errno(op->result, "%s seq %" PRIu64 " failed", op_names[op->kind],
					op->seq);
		op->done(op->result, op->arg);
		free(op);
		op = next;
	}
	return n;
}

static void on_ready(evutil_socket_t fd, short what, void *arg)
{
	struct store_queue *q = arg;
	uint64_t count;
	struct op *ops;

	/* Nonblocking: a drain may have emptied DONE after the last write. */
	while (read(q->efd, &count, sizeof(count)) < 0 && errno == EINTR)
		;
	pthread_mutex_lock(&q->lock);
	ops = list_take(&q->done);
	pthread_mutex_unlock(&q->lock);
	deliver(q, ops, 0);
}

void store_queue_drain(struct store_queue *q)
{
	/* Everything undelivered now was posted at or before upto. */
	uint64_t upto = q->next_seq - 1;
	size_t left = q->depth;

	while (left > 0) {
		struct op *ops;

		pthread_mutex_lock(&q->lock);
		while (!q->done.head)
			pthread_cond_wait(&q->finished, &q->lock);
		ops = list_take(&q->done);
		pthread_mutex_unlock(&q->lock);
		left -= deliver(q, ops, upto);
	}
}

/* Stops and joins the first n pool threads; WAITING must be empty. */
static void stop_threads(struct store_queue *q, unsigned n)
{
	pthread_mutex_lock(&q->lock);
	q->stopping = true;
	pthread_cond_broadcast(&q->work);
	pthread_mutex_unlock(&q->lock);
	for (unsigned i = 0; i < n; i++)
		pthread_join(q->threads[i], NULL);
}

int store_queue_new(struct event_base *base, int fd, unsigned threads, struct store_queue **ret)
{
	struct store_queue *q;
	sigset_t all, old;
	unsigned started;
	int r;

	if (!base || threads == 0 || threads > STORE_QUEUE_MAX_THREADS)
		return -EINVAL;
	q = calloc(1, sizeof(*q) + threads * sizeof(q->threads[0]));
	if (!q)
		return -ENOMEM;
	q->base = base;
	q->fd = fd;
	q->next_seq = 1;
	q->nthreads = threads;
	pthread_mutex_init(&q->lock, NULL);
	pthread_cond_init(&q->work, NULL);
	pthread_cond_init(&q->finished, NULL);

	q->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (q->efd < 0) {
		r = -errno;
		goto fail_sync;
	}
	q->ready = event_new(base, q->efd, EV_READ | EV_PERSIST, on_ready, q);
	if (!q->ready) {
		r = -ENOMEM;
		goto fail_efd;
	}
	if (event_add(q->ready, NULL) < 0) {
		r = -ENOMEM;
		goto fail_event;
	}

	/* Signals are the loop's business: the pool starts with all blocked. */
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	for (started = 0; started < threads; started++) {
		r = -pthread_create(&q->threads[started], NULL, worker, q);
		if (r < 0)
			break;
	}
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (started < threads) {
		log_debug_errno(r, "starting store thread %u of %u", started + 1, threads);
		goto fail_threads;
	}

	*ret = q;
	return 0;

fail_threads:
	stop_threads(q, started);
fail_event:
	event_free(q->ready);
fail_efd:
	close(q->efd);
fail_sync:
	pthread_cond_destroy(&q->finished);
	pthread_cond_destroy(&q->work);
	pthread_mutex_destroy(&q->lock);
	free(q);
	return r;
}

void store_queue_free(struct store_queue *q)
{
	if (!q)
		return;
	q->closing = true;
	store_queue_drain(q);
	stop_threads(q, q->nthreads);
	event_free(q->ready);
	close(q->efd);
	pthread_cond_destroy(&q->finished);
	pthread_cond_destroy(&q->work);
	pthread_mutex_destroy(&q->lock);
	free(q);
}

static int post(struct store_queue *q, enum op_kind kind, void *rbuf, const void *wbuf, size_t len,
		uint64_t offset, store_done_fn done, void *arg)
{
	struct op *op;

	if (!done)
		return -EINVAL;
	if (q->closing)
		return -ESHUTDOWN;
	op = calloc(1, sizeof(*op));
	if (!op)
		return -ENOMEM;
	op->seq = q->next_seq++;
	op->kind = kind;
	op->rbuf = rbuf;
	op->wbuf = wbuf;
	op->len = len;
	op->offset = offset;
	op->done = done;
	op->arg = arg;
	q->depth++;

	pthread_mutex_lock(&q->lock);
	list_push(&q->waiting, op);
	if (head_can_start(q))
		pthread_cond_signal(&q->work);
	pthread_mutex_unlock(&q->lock);
	return 0;
}

/* The transfer's result must fit the int it completes with, and its last
 * byte the largest off_t. */
static bool transfer_ok(const void *buf, size_t len, uint64_t offset)
{
	if (len > INT_MAX || (len > 0 && !buf))
		return false;
	return offset <= (uint64_t)INT64_MAX - len;
}

int store_queue_read(struct store_queue *q, void *buf, size_t len, uint64_t offset,
		     store_done_fn done, void *arg)
{
	if (!transfer_ok(buf, len, offset))
		return -EINVAL;
	return post(q, OP_READ, buf, NULL, len, offset, done, arg);
}

int store_queue_set_writable(struct store_queue *q, const struct store_range *ranges, size_t n)
{
	if (n > STORE_QUEUE_MAX_RANGES)
		return -EINVAL;
	for (size_t i = 0; i < n; i++)
		q->writable[i] = ranges[i];
	q->n_writable = n;
	return 0;
}

/* [offset, offset + len) lies wholly in one writable range. */
static bool may_write(const struct store_queue *q, size_t len, uint64_t offset)
{
	for (size_t i = 0; i < q->n_writable; i++) {
		const struct store_range *w = &q->writable[i];

		if (offset >= w->start && len <= w->length && offset - w->start <= w->length - len)
			return true;
	}
	return false;
}

int store_queue_write(struct store_queue *q, const void *buf, size_t len, uint64_t offset,
		      store_done_fn done, void *arg)
{
	if (!transfer_ok(buf, len, offset))
		return -EINVAL;
	if (!may_write(q, len, offset)) {
		/* A bug above: say where, once in a while, and write nothing. */
		if (q->refused++ % 1000 == 0)
			log_error("refused a write of %zu bytes at %" PRIu64
				  ": outside what this node may write (%" PRIu64 " refused)",
				  len, offset, q->refused);
		return -EACCES;
	}
	return post(q, OP_WRITE, NULL, buf, len, offset, done, arg);
}

uint64_t store_queue_refused(const struct store_queue *q)
{
	return q->refused;
}

int store_queue_fence(struct store_queue *q, store_done_fn done, void *arg)
{
	return post(q, OP_FENCE, NULL, NULL, 0, 0, done, arg);
}

int store_queue_barrier(struct store_queue *q, store_done_fn done, void *arg)
{
	return post(q, OP_BARRIER, NULL, NULL, 0, 0, done, arg);
}

size_t store_queue_depth(const struct store_queue *q)
{
	return q->depth;
}
