/* frame_reader: what one readable event reads (all the socket holds, not
 * 4 KiB of it; the whole rest of a frame above 64 KiB), bytes intact across
 * frame boundaries, EOF inside a frame and a reset told to the bufferevent's
 * event callback with the truncated bytes still buffered, pausing, and a
 * reader freed from inside its own callback. */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "check.h"
#include "frame.h"
#include "frame_read.h"

#define MAX_PAYLOAD (1u << 20)
#define PAGE 4096u

static struct event_base *base;

/* What the bufferevent's callbacks saw. */
struct seen {
	struct bufferevent *bev;
	struct frame_reader *reader;
	int reads;	 /* read callbacks */
	size_t read_len; /* input length at the last read callback */
	uint8_t *got;	 /* every whole frame taken off the input, in order */
	size_t got_len;
	short events; /* event callback: what, 0 when it did not run */
	int event_errno;
	size_t left_at_event; /* input length when the event callback ran */
	bool free_in_read;    /* the read callback frees reader and bev */
};

/* Takes whole frames off the input as the transports do. */
static void take_frames(struct seen *s, struct evbuffer *in)
{
	for (;;) {
		size_t avail = evbuffer_get_length(in);
		const uint8_t *payload;
		size_t payload_len;
		const char *why;
		int r;

		if (avail < FRAME_HEADER_SIZE)
			return;
		r = frame_decode(evbuffer_pullup(in, -1), avail, MAX_PAYLOAD, &payload,
				 &payload_len, &why);
		if (r < 0)
			FAIL("bad frame in the input: %s", why);
		if (r <= 0)
			return;
		evbuffer_remove(in, s->got + s->got_len, (size_t)r);
		s->got_len += (size_t)r;
	}
}

static void on_read(struct bufferevent *bev, void *arg)
{
	struct seen *s = arg;
	struct evbuffer *in = bufferevent_get_input(bev);

	s->reads++;
	s->read_len = evbuffer_get_length(in);
	if (s->free_in_read) {
		frame_reader_free(s->reader);
		bufferevent_free(bev);
		s->reader = NULL;
		s->bev = NULL;
		return;
	}
	take_frames(s, in);
}

static void on_event(struct bufferevent *bev, short what, void *arg)
{
	struct seen *s = arg;

	s->events = what;
	s->event_errno = errno;
	s->left_at_event = evbuffer_get_length(bufferevent_get_input(bev));
}

/* A bufferevent on fd, read by a frame_reader. */
static void watch(struct seen *s, int fd, size_t room)
{
	memset(s, 0, sizeof(*s));
	s->got = xmalloc(room);
	if (evutil_make_socket_nonblocking(fd) < 0)
		die("nonblocking");
	s->bev = bufferevent_socket_new(base, fd, BEV_OPT_CLOSE_ON_FREE);
	if (!s->bev)
		die("bufferevent_socket_new");
	bufferevent_setcb(s->bev, on_read, NULL, on_event, s);
	if (frame_reader_new(s->bev, MAX_PAYLOAD, &s->reader) < 0)
		die("frame_reader_new");
}

static void unwatch(struct seen *s)
{
	frame_reader_free(s->reader);
	if (s->bev)
		bufferevent_free(s->bev);
	free(s->got);
}

static void stream_pair(int fds[2])
{
	int big = 1 << 20;

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fds) < 0)
		die("socketpair");
	/* Room for a 200 KiB frame in flight. */
	setsockopt(fds[1], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	setsockopt(fds[0], SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
}

/* n frames of payload_len random bytes each, back to back. */
static uint8_t *make_frames(size_t n, size_t payload_len, size_t *ret_len)
{
	size_t one = FRAME_HEADER_SIZE + payload_len;
	uint8_t *buf = xmalloc(n * one);

	for (size_t k = 0; k < n; k++) {
		uint8_t *f = buf + k * one;

		for (size_t i = 0; i < payload_len; i++)
			f[FRAME_HEADER_SIZE + i] = (uint8_t)rng();
		frame_seal(f, payload_len);
	}
	*ret_len = n * one;
	return buf;
}

static void send_all(int fd, const uint8_t *p, size_t len)
{
	while (len > 0) {
		ssize_t n = send(fd, p, len, MSG_NOSIGNAL);

		if (n <= 0)
			die("write");
		p += n;
		len -= (size_t)n;
	}
}

static void loop_once(void)
{
	event_base_loop(base, EVLOOP_ONCE);
}

/* Runs whatever is ready without waiting. */
static void loop_ready(void)
{
	for (int i = 0; i < 4; i++)
		event_base_loop(base, EVLOOP_ONCE | EVLOOP_NONBLOCK);
}

/* n frames of payload_len bytes, and a stream pair whose reading end is
 * watched with room for them all. */
static uint8_t *start(struct seen *s, int fds[2], size_t n, size_t payload_len, size_t *ret_len)
{
	uint8_t *sent = make_frames(n, payload_len, ret_len);

	stream_pair(fds);
	watch(s, fds[0], *ret_len);
	return sent;
}

static void finish(struct seen *s, int fds[2], uint8_t *sent)
{
	unwatch(s);
	close(fds[1]);
	free(sent);
}

/* Ten page frames (41 KiB) sent at once are one read: libevent's own read
 * path would have taken them 4 KiB at a time, one read callback each. */
static void test_one_read_takes_all(void)
{
	struct seen s;
	int fds[2];
	size_t len;
	uint8_t *sent = start(&s, fds, 10, PAGE, &len);

	send_all(fds[1], sent, len);
	loop_once();
	CHECK_INT("read callbacks for ten page frames", 1, s.reads);
	CHECK_INT("bytes in the input at the read callback", (long long)len, (long long)s.read_len);
	CHECK_INT("bytes taken as frames", (long long)len, (long long)s.got_len);
	CHECK(memcmp(sent, s.got, len) == 0, "the frames came out as they went in");
	CHECK_INT("event callback", 0, s.events);
	finish(&s, fds, sent);
}

/* A page frame and the start of a 200 KiB one, then the rest of that: the
 * rest, above 64 KiB, comes in one read, and both frames come out whole. */
static void test_frame_boundary(void)
{
	uint8_t *page, *big, *sent;
	size_t page_len, big_len, first = 100;
	struct seen s;
	int fds[2];

	page = make_frames(1, PAGE, &page_len);
	big = make_frames(1, 200u << 10, &big_len);
	sent = xmalloc(page_len + big_len);
	memcpy(sent, page, page_len);
	memcpy(sent + page_len, big, big_len);
	stream_pair(fds);
	watch(&s, fds[0], page_len + big_len);

	send_all(fds[1], sent, page_len + first);
	loop_once();
	CHECK_INT("read callbacks for a frame and a bit", 1, s.reads);
	CHECK_INT("bytes taken as frames", (long long)page_len, (long long)s.got_len);

	send_all(fds[1], sent + page_len + first, big_len - first);
	loop_once();
	CHECK_INT("read callbacks once the 200 KiB frame's rest was sent", 2, s.reads);
	CHECK_INT("bytes in the input at the second read callback", (long long)big_len,
		  (long long)s.read_len);
	CHECK_INT("bytes taken as frames", (long long)(page_len + big_len), (long long)s.got_len);
	CHECK(memcmp(sent, s.got, page_len + big_len) == 0, "the frames came out as they went in");
	unwatch(&s);
	close(fds[1]);
	free(page);
	free(big);
	free(sent);
}

/* The peer goes away 50 bytes into a frame: the read callback gets the whole
 * frame before, then the event callback EOF with those 50 bytes still in the
 * input, and the reader reads no more. */
static void test_eof_inside_frame(void)
{
	struct seen s;
	int fds[2];
	size_t len;
	uint8_t *sent = start(&s, fds, 2, PAGE, &len);

	send_all(fds[1], sent, len / 2 + 50);
	shutdown(fds[1], SHUT_WR);
	for (int i = 0; i < 10 && !s.events; i++)
		loop_once();
	CHECK_INT("bytes taken as frames", (long long)(len / 2), (long long)s.got_len);
	CHECK_INT("event", BEV_EVENT_READING | BEV_EVENT_EOF, s.events);
	CHECK_INT("bytes left in the input at EOF", 50, (long long)s.left_at_event);
	s.events = 0;
	loop_ready();
	CHECK_INT("event callbacks after EOF", 0, s.events);
	finish(&s, fds, sent);
}

/* A TCP peer that resets the connection: ECONNRESET is told as an error. */
static void test_reset(void)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct linger abort_close = { .l_onoff = 1, .l_linger = 0 };
	socklen_t salen = sizeof(sa);
	int lfd, cfd, afd;
	struct seen s;

	lfd = socket(AF_INET, SOCK_STREAM, 0);
	cfd = socket(AF_INET, SOCK_STREAM, 0);
	if (lfd < 0 || cfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(lfd, 1) < 0 || getsockname(lfd, (struct sockaddr *)&sa, &salen) < 0 ||
	    connect(cfd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		die("loopback TCP connection");
	afd = accept(lfd, NULL, NULL);
	if (afd < 0)
		die("accept");
	watch(&s, afd, 1);
	setsockopt(cfd, SOL_SOCKET, SO_LINGER, &abort_close, sizeof(abort_close));
	close(cfd);
	for (int i = 0; i < 10 && !s.events; i++)
		loop_once();
	CHECK_INT("event", BEV_EVENT_READING | BEV_EVENT_ERROR, s.events);
	CHECK_INT("errno at the event", ECONNRESET, s.event_errno);
	CHECK_INT("read callbacks", 0, s.reads);
	unwatch(&s);
	close(lfd);
}

/* Disabled, the reader leaves bytes in the socket; enabled, it reads them. */
static void test_pause(void)
{
	struct seen s;
	int fds[2];
	size_t len;
	uint8_t *sent = start(&s, fds, 1, PAGE, &len);

	frame_reader_disable(s.reader);
	send_all(fds[1], sent, len);
	loop_ready();
	CHECK_INT("read callbacks while disabled", 0, s.reads);
	CHECK_INT("enable", 0, frame_reader_enable(s.reader));
	loop_once();
	CHECK_INT("read callbacks once enabled", 1, s.reads);
	CHECK_INT("bytes taken as frames", (long long)len, (long long)s.got_len);
	finish(&s, fds, sent);
}

/* The read callback frees the reader and the bufferevent, as a connection
 * closed on a bad frame does (ASan would see a use after free). */
static void test_free_in_callback(void)
{
	struct seen s;
	int fds[2];
	size_t len;
	uint8_t *sent = start(&s, fds, 1, PAGE, &len);

	s.free_in_read = true;
	send_all(fds[1], sent, len);
	loop_once();
	CHECK_INT("read callbacks", 1, s.reads);
	loop_ready();
	CHECK_INT("read callbacks after the free", 1, s.reads);
	finish(&s, fds, sent);
}

int main(void)
{
	rng_seed(0x6b8b4567u);
	base = event_base_new();
	if (!base)
		die("event_base_new");
	test_one_read_takes_all();
	test_frame_boundary();
	test_eof_inside_frame();
	test_reset();
	test_pause();
	test_free_in_callback();
	event_base_free(base);
	if (failures) {
		fprintf(stderr, "%d of %d check(s) failed\n", failures, checks);
		return 1;
	}
	printf("frame_read: %d checks passed\n", checks);
	return 0;
}
