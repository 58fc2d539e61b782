/* The echo and the relay, serving many connections; see bench_peers.h. */
#define _GNU_SOURCE /* accept4 */
#include "bench_peers.h"

#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "bench_common.h"

#define READ_MAX (64 * 1024) /* bytes one read may bring */
#define EVENTS_MAX 64
/* Requests the relay has passed on and not had answered: a client has at
 * most one in flight, or its queue depth. */
#define RELAY_FIFO (BENCH_RELAY_CLIENTS_MAX * 64)

/* Writes all of buf to a non-blocking socket, waiting in poll() when it is
 * full. Returns 0 or -errno. */
static int write_all(int fd, const uint8_t *buf, size_t len)
{
	while (len) {
		ssize_t n = write(fd, buf, len);

		if (n < 0 && errno == EAGAIN) {
			struct pollfd pfd = { .fd = fd, .events = POLLOUT };

			if (poll(&pfd, 1, -1) < 0 && errno != EINTR)
				return -errno;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* In the child: dies with the benchmark, which may have ended already. */
static void child_setup(pid_t parent)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	signal(SIGPIPE, SIG_IGN);
	signal(SIGTERM, SIG_DFL);
}

static int epoll_add(int ep, int fd, void *ptr)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = ptr };

	return epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev);
}

/* ---- the echo ---- */

struct echo_conn {
	int fd;
	size_t got; /* bytes of a request not whole yet */
};

static void echo_serve(int lfd, size_t request_bytes, size_t reply_bytes)
{
	size_t replies_max = READ_MAX / request_bytes + 1;
	uint8_t *in = malloc(READ_MAX), *out = calloc(replies_max, reply_bytes);
	struct epoll_event evs[EVENTS_MAX];
	int ep = epoll_create1(EPOLL_CLOEXEC);

	if (!in || !out || ep < 0 || epoll_add(ep, lfd, NULL) < 0)
		_exit(1);
	for (;;) {
		int n = epoll_wait(ep, evs, EVENTS_MAX, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			_exit(1);
		for (int i = 0; i < n; i++) {
			struct echo_conn *c = evs[i].data.ptr;
			ssize_t got;
			size_t whole;

			if (!c) {
				int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

				if (fd < 0)
					continue;
				bench_nodelay(fd);
				c = calloc(1, sizeof(*c));
				if (!c)
					_exit(1);
				c->fd = fd;
				if (epoll_add(ep, fd, c) < 0)
					_exit(1);
				continue;
			}
			got = read(c->fd, in, READ_MAX);
			if (got < 0 && (errno == EAGAIN || errno == EINTR))
				continue;
			whole = got > 0 ? (c->got + (size_t)got) / request_bytes : 0;
			if (got > 0)
				c->got = (c->got + (size_t)got) % request_bytes;
			if (got <= 0 || (whole && write_all(c->fd, out, whole * reply_bytes) < 0)) {
				close(c->fd); /* also leaves the epoll set */
				free(c);
			}
		}
	}
}

int bench_echo_start(struct bench_peer *p, size_t request_bytes, size_t reply_bytes)
{
	socklen_t len = sizeof(p->addr);
	pid_t parent = getpid();
	int lfd, r = 0;

	p->addr = (struct sockaddr_in){ .sin_family = AF_INET,
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	p->proc = (struct bench_proc){ .name = "echo", .pid = -1 };
	if (request_bytes == 0 || reply_bytes == 0)
		return -EINVAL;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0)
		return -errno;
	if (bind(lfd, (struct sockaddr *)&p->addr, sizeof(p->addr)) < 0 || listen(lfd, 64) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&p->addr, &len) < 0)
		r = -errno;
	if (r == 0) {
		p->proc.pid = fork();
		if (p->proc.pid < 0)
			r = -errno;
		else if (p->proc.pid == 0) {
			child_setup(parent);
			echo_serve(lfd, request_bytes, reply_bytes);
		}
	}
	close(lfd);
	return r;
}

/* ---- the relay ---- */

struct relay_client {
	int fd; /* -1: the slot is free */
	unsigned gen;
	size_t got; /* bytes of buf not passed on: less than one request */
	uint8_t *buf;
};

struct relay {
	size_t request_bytes, reply_bytes;
	int lfd, tfd, ep;
	struct relay_client clients[BENCH_RELAY_CLIENTS_MAX];
	/* Whose request each one passed on and not answered is, in order
	 * (the echo answers in order): the client's slot and generation. */
	struct {
		unsigned slot, gen;
	} fifo[RELAY_FIFO];
	size_t head, n;
	uint8_t *answers;
	size_t answers_got;
};

static void relay_accept(struct relay *r)
{
	int fd = accept4(r->lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
	struct relay_client *c = NULL;

	if (fd < 0)
		return;
	for (size_t i = 0; i < BENCH_RELAY_CLIENTS_MAX && !c; i++)
		if (r->clients[i].fd < 0)
			c = &r->clients[i];
	if (!c) {
		close(fd); /* more clients than BENCH_RELAY_CLIENTS_MAX */
		return;
	}
	c->fd = fd;
	c->got = 0;
	if (epoll_add(r->ep, fd, c) < 0)
		_exit(1);
}

static void relay_drop(struct relay_client *c)
{
	close(c->fd);
	c->fd = -1;
	c->gen++;
}

/* A client's whole requests go on to the echo, in one write. */
static void relay_from_client(struct relay *r, struct relay_client *c)
{
	ssize_t n = read(c->fd, c->buf + c->got, READ_MAX);
	size_t whole;

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0) {
		relay_drop(c);
		return;
	}
	c->got += (size_t)n;
	whole = c->got / r->request_bytes;
	if (!whole)
		return;
	if (r->n + whole > RELAY_FIFO || write_all(r->tfd, c->buf, whole * r->request_bytes) < 0)
		_exit(1);
	for (size_t k = 0; k < whole; k++) {
		size_t at = (r->head + r->n++) % RELAY_FIFO;

		r->fifo[at].slot = (unsigned)(c - r->clients);
		r->fifo[at].gen = c->gen;
	}
	c->got -= whole * r->request_bytes;
	memmove(c->buf, c->buf + whole * r->request_bytes, c->got);
}

/* The echo's answers back to whom they belong, a client's run of them in
 * one write. */
static void relay_from_echo(struct relay *r)
{
	size_t room = READ_MAX - r->answers_got, at = 0;
	ssize_t n = read(r->tfd, r->answers + r->answers_got, room);

	if (n < 0 && (errno == EAGAIN || errno == EINTR))
		return;
	if (n <= 0)
		_exit(1); /* the echo is gone */
	r->answers_got += (size_t)n;
	while (r->answers_got - at >= r->reply_bytes && r->n) {
		unsigned slot = r->fifo[r->head].slot, gen = r->fifo[r->head].gen;
		struct relay_client *c = &r->clients[slot];
		size_t run = 0;

		while (r->n && r->fifo[r->head].slot == slot && r->fifo[r->head].gen == gen &&
		       r->answers_got - at - run >= r->reply_bytes) {
			run += r->reply_bytes;
			r->head = (r->head + 1) % RELAY_FIFO;
			r->n--;
		}
		if (c->fd >= 0 && c->gen == gen && write_all(c->fd, r->answers + at, run) < 0)
			relay_drop(c);
		at += run;
	}
	r->answers_got -= at;
	memmove(r->answers, r->answers + at, r->answers_got);
}

static void relay_serve(struct relay *r, const struct sockaddr_in *echo)
{
	struct epoll_event evs[EVENTS_MAX];

	r->tfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (r->tfd < 0 || connect(r->tfd, (const struct sockaddr *)echo, sizeof(*echo)) < 0)
		_exit(1);
	bench_nodelay(r->tfd);
	r->ep = epoll_create1(EPOLL_CLOEXEC);
	r->answers = malloc(READ_MAX);
	if (r->ep < 0 || !r->answers || epoll_add(r->ep, r->lfd, NULL) < 0 ||
	    epoll_add(r->ep, r->tfd, r) < 0)
		_exit(1);
	for (size_t i = 0; i < BENCH_RELAY_CLIENTS_MAX; i++) {
		r->clients[i].fd = -1;
		/* room for a partial request and a whole read behind it */
		r->clients[i].buf = malloc(READ_MAX + r->request_bytes);
		if (!r->clients[i].buf)
			_exit(1);
	}
	for (;;) {
		int n = epoll_wait(r->ep, evs, EVENTS_MAX, -1);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			_exit(1);
		for (int i = 0; i < n; i++) {
			void *ptr = evs[i].data.ptr;

			if (!ptr)
				relay_accept(r);
			else if (ptr == r)
				relay_from_echo(r);
			else if (((struct relay_client *)ptr)->fd >= 0)
				relay_from_client(r, ptr);
		}
	}
}

int bench_relay_start(struct bench_peer *p, const char *path, const struct sockaddr_in *echo,
		      size_t request_bytes, size_t reply_bytes)
{
	pid_t parent = getpid();
	int lfd, r = 0;

	p->proc = (struct bench_proc){ .name = "relay", .pid = -1 };
	p->path = (struct sockaddr_un){ .sun_family = AF_UNIX };
	if (request_bytes == 0 || reply_bytes == 0 || reply_bytes > READ_MAX)
		return -EINVAL;
	if (snprintf(p->path.sun_path, sizeof(p->path.sun_path), "%s", path) >=
	    (int)sizeof(p->path.sun_path))
		return -ENAMETOOLONG;
	lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (lfd < 0)
		return -errno;
	unlink(path);
	/* Bound and listening before the fork: a client may connect at once. */
	if (bind(lfd, (struct sockaddr *)&p->path, sizeof(p->path)) < 0 || listen(lfd, 64) < 0)
		r = -errno;
	if (r == 0) {
		p->proc.pid = fork();
		if (p->proc.pid < 0) {
			r = -errno;
		} else if (p->proc.pid == 0) {
			struct relay *relay = calloc(1, sizeof(*relay));

			child_setup(parent);
			if (!relay)
				_exit(1);
			relay->lfd = lfd;
			relay->request_bytes = request_bytes;
			relay->reply_bytes = reply_bytes;
			relay_serve(relay, echo);
		}
	}
	close(lfd);
	return r;
}

void bench_peer_stop(struct bench_peer *p)
{
	bench_proc_stop(&p->proc);
	if (p->path.sun_path[0])
		unlink(p->path.sun_path);
}
