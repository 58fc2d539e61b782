/* The pieces ftvm-bench-channel and ftvm-bench-vmm share; see bench_common.h. */
#include "bench_common.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"

int bench_full_io(int fd, void *buf, size_t len, bool writing)
{
	uint8_t *p = buf;

	while (len) {
		ssize_t n = writing ? write(fd, p, len) : read(fd, p, len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		p += n;
		len -= (size_t)n;
	}
	return 0;
}

void bench_nodelay(int fd)
{
	int one = 1;

	(void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

void bench_percentiles(uint64_t *samples, unsigned n, uint64_t *ret_p50, uint64_t *ret_p99)
{
	if (n == 0) {
		*ret_p50 = *ret_p99 = 0;
		return;
	}
	qsort(samples, n, sizeof(*samples), cmp_u64);
	*ret_p50 = samples[(unsigned)(0.50 * (n - 1) + 0.5)];
	*ret_p99 = samples[(unsigned)(0.99 * (n - 1) + 0.5)];
}

/* The echoing side: answers each request with reply_bytes until the
 * connection closes. Dies with its parent, so it never outlives the bench. */
static void floor_child(int lfd, pid_t parent, uint8_t *buf, size_t request_bytes,
			size_t reply_bytes)
{
	int fd;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	fd = accept(lfd, NULL, NULL);
	if (fd < 0)
		_exit(1);
	bench_nodelay(fd);
	while (bench_full_io(fd, buf, request_bytes, false) == 0 &&
	       bench_full_io(fd, buf, reply_bytes, true) == 0)
		;
	_exit(0);
}

/* Reads exactly len bytes from a unix socket, sleeping in poll() as libftvm
 * does (a node sleeps in epoll): a sleeper in read() on a unix socket also
 * wakes each time its peer takes what it sent, which ftvm does not pay. */
static int full_read_polled(int fd, uint8_t *buf, size_t len)
{
	struct pollfd pfd = { .fd = fd, .events = POLLIN };

	while (len) {
		ssize_t n = poll(&pfd, 1, -1) < 0 ? -1 : recv(fd, buf, len, MSG_DONTWAIT);

		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		if (n == 0)
			return -EIO;
		buf += n;
		len -= (size_t)n;
	}
	return 0;
}

/* The relay: each request from the unix socket goes on over TCP to the echo,
 * its answer back the same way, as a node passes a client's write to its
 * partner. Dies with its parent. */
static void relay_child(const int pair[2], const struct sockaddr_in *echo, pid_t parent,
			uint8_t *buf, size_t request_bytes, size_t reply_bytes)
{
	int ufd = pair[1], fd;

	/* Only the parent's end may stay open: its close is the relay's end. */
	close(pair[0]);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(1);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || connect(fd, (const struct sockaddr *)echo, sizeof(*echo)) < 0)
		_exit(1);
	bench_nodelay(fd);
	while (full_read_polled(ufd, buf, request_bytes) == 0 &&
	       bench_full_io(fd, buf, request_bytes, true) == 0 &&
	       bench_full_io(fd, buf, reply_bytes, false) == 0 &&
	       bench_full_io(ufd, buf, reply_bytes, true) == 0)
		;
	_exit(0);
}

/* warmup + count blocking round trips on fd (a unix socket: unix_socket); the
 * last count into samples_us. */
static int round_trips(int fd, bool unix_socket, uint8_t *buf, size_t request_bytes,
		       size_t reply_bytes, unsigned warmup, unsigned count, uint64_t *samples_us)
{
	for (unsigned i = 0; i < warmup + count; i++) {
		uint64_t t0 = clock_now_us();
		int r = bench_full_io(fd, buf, request_bytes, true);

		if (r == 0)
			r = unix_socket ? full_read_polled(fd, buf, reply_bytes)
					: bench_full_io(fd, buf, reply_bytes, false);
		if (r < 0)
			return r;
		if (i >= warmup)
			samples_us[i - warmup] = clock_now_us() - t0;
	}
	return 0;
}

/* Closing our end of a child's connection ends its loop; the kill is for a
 * child still blocked elsewhere because the run failed. */
static void child_reap(pid_t child, int r)
{
	if (child <= 0)
		return;
	if (r < 0)
		kill(child, SIGKILL);
	waitpid(child, NULL, 0);
}

int bench_floor_run(enum bench_floor_kind kind, size_t request_bytes, size_t reply_bytes,
		    unsigned warmup, unsigned count, uint64_t *samples_us)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sin);
	size_t buf_len = request_bytes > reply_bytes ? request_bytes : reply_bytes;
	uint8_t *buf = calloc(1, buf_len ? buf_len : 1);
	pid_t parent = getpid(), echo = -1, relay = -1;
	int lfd = -1, fd = -1, pair[2] = { -1, -1 }, r = 0;

	if (!buf)
		return -ENOMEM;
	lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 1) < 0 ||
	    getsockname(lfd, (struct sockaddr *)&sin, &len) < 0) {
		r = -errno;
		goto out;
	}
	echo = fork();
	if (echo < 0) {
		r = -errno;
		goto out;
	}
	if (echo == 0)
		floor_child(lfd, parent, buf, request_bytes, reply_bytes);
	close(lfd);
	lfd = -1;
	if (kind == BENCH_FLOOR_RELAY) {
		if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) < 0) {
			r = -errno;
			goto out;
		}
		relay = fork();
		if (relay < 0) {
			r = -errno;
			goto out;
		}
		if (relay == 0)
			relay_child(pair, &sin, parent, buf, request_bytes, reply_bytes);
		/* The relay's end is the relay's alone. */
		close(pair[1]);
		pair[1] = -1;
		fd = pair[0];
		pair[0] = -1;
	} else {
		fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
			r = -errno;
			goto out;
		}
		bench_nodelay(fd);
	}
	r = round_trips(fd, kind == BENCH_FLOOR_RELAY, buf, request_bytes, reply_bytes, warmup,
			count, samples_us);
out:
	if (fd >= 0)
		close(fd);
	for (size_t i = 0; i < 2; i++)
		if (pair[i] >= 0)
			close(pair[i]);
	if (lfd >= 0)
		close(lfd);
	/* The relay first: its end closing ends the echo's loop. */
	child_reap(relay, r);
	child_reap(echo, r);
	free(buf);
	return r;
}
