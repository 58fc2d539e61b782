/* Reading frames off a socket without libevent's read path.
 *
 * A socket bufferevent asks ioctl(FIONREAD) before every read and reads at
 * most 4 KiB a call. A frame carrying a 4 KiB page then costs an ioctl that
 * contends for the socket lock with the softirq delivering the data, and two
 * reads, often in two loop turns. So the bufferevent keeps only its writing;
 * a persistent EV_READ event of our own does one read(2) per readable event,
 * of up to FRAME_READ_MIN bytes or the rest of the frame begun in the buffer,
 * whichever is more: a page frame, or many small frames, in one call, and a
 * frame above 64 KiB in as few calls as the socket allows.
 *
 * The bytes go into the bufferevent's input buffer, and the bufferevent's own
 * callbacks run on them, so its users keep their frame loops and their EOF
 * and error handling (the bytes of a truncated frame are still in the input
 * when EOF is told). bufferevent_trigger holds a reference on the bufferevent
 * while its callback runs, so a callback may free it and the reader, as a
 * connection closed on a bad frame does. Watermarks are not looked at: nobody
 * here sets them.
 *
 * A read into an input that holds nothing goes into a buffer of
 * FRAME_READ_MIN bytes from a small pool, lent to the input by reference
 * (evbuffer_add_reference) and back in the pool once the input drained it.
 * Reserving the room in the input instead made libevent allocate a chain of
 * 64 KiB and free it again for each such read: on a node serving many
 * clients, one large malloc and free per request (each read of a client
 * finds its input drained), with glibc's consolidation behind them. A read
 * into an input that still holds part of a frame reserves room there, as
 * before. The pool is the thread's: the loop that reads is the one that
 * drains. */
#include "frame_read.h"

#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "frame.h"

#define FRAME_READ_MIN (64u << 10)

struct frame_reader {
	struct bufferevent *bev;
	struct event *readable;
	size_t max_payload;
};

/* Buffers lent to inputs come back here, so many at most. */
#define POOL_MAX 4

struct pool_buf {
	struct pool_buf *next;
	alignas(max_align_t) uint8_t data[FRAME_READ_MIN];
};

static _Thread_local struct pool_buf *pool;
static _Thread_local unsigned pool_len;

static struct pool_buf *pool_take(void)
{
	struct pool_buf *b = pool;

	if (!b)
		return malloc(sizeof(*b));
	pool = b->next;
	pool_len--;
	return b;
}

static void pool_give(struct pool_buf *b)
{
	if (pool_len == POOL_MAX) {
		free(b);
		return;
	}
	b->next = pool;
	pool = b;
	pool_len++;
}

/* The input is done with a lent buffer. */
static void on_returned(const void *data, size_t len, void *arg)
{
	pool_give(arg);
}

/* What to ask read(2) for: FRAME_READ_MIN, or all that is missing of the
 * frame at the head of in when that is more. A bad header gets the minimum:
 * the frame loop refuses it. */
static size_t read_size(struct evbuffer *in, size_t max_payload)
{
	uint8_t hdr[FRAME_HEADER_SIZE];
	size_t have = evbuffer_get_length(in), missing;
	const char *why;
	int len;

	if (evbuffer_copyout(in, hdr, sizeof(hdr)) != (ev_ssize_t)sizeof(hdr))
		return FRAME_READ_MIN;
	len = frame_header_check(hdr, max_payload, &why);
	if (len < 0 || FRAME_HEADER_SIZE + (size_t)len <= have)
		return FRAME_READ_MIN;
	missing = FRAME_HEADER_SIZE + (size_t)len - have;
	return missing > FRAME_READ_MIN ? missing : FRAME_READ_MIN;
}

static ssize_t read_fd(evutil_socket_t fd, void *buf, size_t len)
{
	ssize_t n;

	do
		n = read(fd, buf, len);
	while (n < 0 && errno == EINTR);
	return n < 0 ? -errno : n;
}

/* One read(2) of up to want bytes into a pool buffer, lent to in. */
static ssize_t read_lent(evutil_socket_t fd, struct evbuffer *in, size_t want)
{
	struct pool_buf *b = pool_take();
	ssize_t n;

	if (!b)
		return -ENOMEM;
	n = read_fd(fd, b->data, want);
	if (n <= 0) {
		pool_give(b);
		return n;
	}
	if (evbuffer_add_reference(in, b->data, (size_t)n, on_returned, b) < 0) {
		pool_give(b);
		return -ENOMEM;
	}
	return n;
}

/* One read(2) of up to want bytes, appended to in. Returns the bytes read,
 * 0 at end of file, or -errno. */
static ssize_t read_into(evutil_socket_t fd, struct evbuffer *in, size_t want)
{
	struct evbuffer_iovec v;
	ssize_t n;

	/* A socket bufferevent keeps the end of its input frozen but while it
	 * reads, which is what this does in its stead. */
	evbuffer_unfreeze(in, 0);
	if (want <= FRAME_READ_MIN && evbuffer_get_length(in) == 0) {
		n = read_lent(fd, in, want);
		goto out;
	}
	if (evbuffer_reserve_space(in, (ev_ssize_t)want, &v, 1) != 1) {
		n = -ENOMEM;
		goto out;
	}
	n = read_fd(fd, v.iov_base, want);
	if (n < 0)
		goto out; /* not committed: the reservation is dropped */
	v.iov_len = (size_t)n;
	if (n > 0 && evbuffer_commit_space(in, &v, 1) < 0)
		n = -ENOMEM;
out:
	evbuffer_freeze(in, 0);
	return n;
}

static void on_readable(evutil_socket_t fd, short what, void *arg)
{
	struct frame_reader *r = arg;
	struct bufferevent *bev = r->bev;
	struct evbuffer *in = bufferevent_get_input(bev);
	ssize_t n = read_into(fd, in, read_size(in, r->max_payload));

	/* The callbacks may free r and bev: nothing is touched after them. */
	if (n > 0) {
		bufferevent_trigger(bev, EV_READ, 0);
		return;
	}
	if (n == -EAGAIN)
		return;
	/* As the bufferevent would: stop reading, then tell, errno set. */
	frame_reader_disable(r);
	if (n == 0) {
		bufferevent_trigger_event(bev, BEV_EVENT_READING | BEV_EVENT_EOF, 0);
		return;
	}
	errno = (int)-n;
	bufferevent_trigger_event(bev, BEV_EVENT_READING | BEV_EVENT_ERROR, 0);
}

int frame_reader_new(struct bufferevent *bev, size_t max_payload, struct frame_reader **ret)
{
	struct frame_reader *r = calloc(1, sizeof(*r));

	if (!r)
		return -ENOMEM;
	r->bev = bev;
	r->max_payload = max_payload;
	r->readable = event_new(bufferevent_get_base(bev), bufferevent_getfd(bev),
				EV_READ | EV_PERSIST, on_readable, r);
	if (!r->readable || frame_reader_enable(r) < 0) {
		frame_reader_free(r);
		return -ENOMEM;
	}
	*ret = r;
	return 0;
}

void frame_reader_free(struct frame_reader *r)
{
	if (!r)
		return;
	if (r->readable)
		event_free(r->readable);
	free(r);
}

void frame_reader_disable(struct frame_reader *r)
{
	event_del(r->readable);
}

int frame_reader_enable(struct frame_reader *r)
{
	return event_add(r->readable, NULL) < 0 ? -ENOMEM : 0;
}
