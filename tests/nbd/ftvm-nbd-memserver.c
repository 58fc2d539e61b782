/* ftvm-nbd-memserver: an NBD server whose exports are plain memory, for
 * tests/e2e/test_nbd_wire.sh. It proves common/nbd_wire against real NBD
 * clients (nbdinfo, qemu-io, nbdcopy) before the real server exists, so it
 * speaks the protocol only through nbd_wire's functions and keeps everything
 * else as simple as it can: blocking sockets, a thread per connection,
 * replies in the order of the requests.
 *
 *   ftvm-nbd-memserver SOCKET [--tcp PORT] --export NAME:SIZE[:ro[:DESCRIPTION]]...
 *
 * SIZE takes K, M or G. SOCKET is a unix socket path (replaced if it exists);
 * --tcp also listens on 127.0.0.1:PORT. Exports are zero at start and shared
 * by every connection (so CAN_MULTI_CONN is true). It runs until killed,
 * logging each connection's end and each refused request on stderr. */
#define _GNU_SOURCE /* accept4 */
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "nbd_wire.h"

struct mem_export {
	char *name;
	char *description;
	uint64_t size;
	bool read_only;
	uint8_t *data;
	pthread_mutex_t lock; /* data, between connections */
};

static struct mem_export *exports;
static size_t n_exports;

static struct mem_export *export_find(const char *name)
{
	for (size_t i = 0; i < n_exports; i++)
		if (!strcmp(exports[i].name, name))
			return &exports[i];
	return NULL;
}

static int lookup(void *arg, const char *name, struct nbd_export *ret)
{
	struct mem_export *m = export_find(name);

	(void)arg;
	if (!m)
		return -ENOENT;
	*ret = (struct nbd_export){ .size = m->size,
				    .min_block = 1,
				    .preferred_block = 4096,
				    .max_block = NBD_DEFAULT_MAX_BLOCK,
				    .read_only = m->read_only,
				    .multi_conn = true,
				    .description = m->description };
	return 0;
}

static void list(void *arg, void (*emit)(void *ctx, const char *name, const char *description),
		 void *ctx)
{
	(void)arg;
	for (size_t i = 0; i < n_exports; i++)
		emit(ctx, exports[i].name, exports[i].description);
}

/* ---- one connection ---- */

struct conn {
	int fd;
	unsigned id;
	uint8_t *in; /* bytes read and not yet used: in[0..in_len) */
	size_t in_len, in_cap;
	struct nbd_out out;
};

/* Sends and forgets what out holds. 0 or -errno. */
static int conn_flush(struct conn *c)
{
	size_t off = 0;

	while (off < c->out.len) {
		ssize_t n = send(c->fd, c->out.data + off, c->out.len - off, MSG_NOSIGNAL);

		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			return -errno;
		off += (size_t)n;
	}
	c->out.len = 0;
	return 0;
}

/* Reads more into in, growing it to hold at least want bytes. 0, -ECONNRESET
 * at end of file, or -errno. */
static int conn_fill(struct conn *c, size_t want)
{
	ssize_t n;

	if (want < c->in_len + 4096)
		want = c->in_len + 4096;
	if (want > c->in_cap) {
		uint8_t *p = realloc(c->in, want);

		if (!p)
			return -ENOMEM;
		c->in = p;
		c->in_cap = want;
	}
	do
		n = recv(c->fd, c->in + c->in_len, c->in_cap - c->in_len, 0);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return -errno;
	if (n == 0)
		return -ECONNRESET;
	c->in_len += (size_t)n;
	return 0;
}

/* Forgets the first n bytes of in. */
static void conn_take(struct conn *c, size_t n)
{
	memmove(c->in, c->in + n, c->in_len - n);
	c->in_len -= n;
}

/* Makes in hold at least n bytes. */
static int conn_need(struct conn *c, size_t n)
{
	while (c->in_len < n) {
		int r = conn_fill(c, n);

		if (r < 0)
			return r;
	}
	return 0;
}

/* Reads and drops n bytes (a refused write's payload). */
static int conn_skip(struct conn *c, uint64_t n)
{
	while (n) {
		size_t k;
		int r;

		if (!c->in_len && (r = conn_fill(c, 0)) < 0)
			return r;
		k = c->in_len < n ? c->in_len : (size_t)n;
		conn_take(c, k);
		n -= k;
	}
	return 0;
}

/* The handshake; the export chosen (and *ret as the handshake told it), or
 * NULL when the connection is over. */
static struct mem_export *conn_handshake(struct conn *c, struct nbd_export *ret)
{
	struct nbd_handshake *h = NULL;
	struct mem_export *m = NULL;
	enum nbd_handshake_result res = NBD_HS_MORE;
	int r;

	if (nbd_handshake_new(lookup, list, NULL, &c->out, &h) < 0) {
		fprintf(stderr, "conn %u: out of memory\n", c->id);
		return NULL;
	}
	while (res == NBD_HS_MORE) {
		size_t consumed;

		r = conn_flush(c);
		if (r >= 0)
			r = conn_fill(c, NBD_OPTION_HEADER_SIZE + NBD_OPTION_MAX_DATA);
		if (r < 0) {
			fprintf(stderr, "conn %u: handshake: %s\n", c->id, strerror(-r));
			goto out;
		}
		res = nbd_handshake_input(h, c->in, c->in_len, &consumed, &c->out);
		conn_take(c, consumed);
	}
	r = conn_flush(c);
	if (res == NBD_HS_CLOSE) {
		fprintf(stderr, "conn %u: handshake closed: %s\n", c->id, nbd_handshake_error(h));
		goto out;
	}
	if (r < 0) {
		fprintf(stderr, "conn %u: handshake: %s\n", c->id, strerror(-r));
		goto out;
	}
	m = export_find(nbd_handshake_export(h));
	*ret = *nbd_handshake_export_info(h);
	fprintf(stderr, "conn %u: export \"%s\"\n", c->id, m->name);
out:
	nbd_handshake_free(h);
	return m;
}

/* One request whose header is in in (and taken); what it needs of the
 * export. 0 to go on, 1 after DISC, -errno to drop the connection. */
static int conn_request(struct conn *c, struct mem_export *m, const struct nbd_export *e,
			const struct nbd_request *rq)
{
	const char *why;
	uint32_t error = nbd_request_check(rq, e, &why);
	uint8_t *p;
	int r;

	if (rq->type == NBD_CMD_DISC) {
		if (error)
			fprintf(stderr, "conn %u: DISC: %s\n", c->id, why);
		return 1;
	}
	if (error) {
		fprintf(stderr,
			"conn %u: refused %s flags 0x%x offset %" PRIu64 " length %" PRIu32
			": %s (error %" PRIu32 ")\n",
			c->id, nbd_cmd_name(rq->type), rq->flags, rq->offset, rq->length, why,
			error);
		if (rq->type == NBD_CMD_WRITE && (r = conn_skip(c, rq->length)) < 0)
			return r;
		return nbd_reply_simple(&c->out, rq->cookie, error);
	}
	switch (rq->type) {
	case NBD_CMD_READ:
		if (nbd_reply_simple(&c->out, rq->cookie, 0) < 0 ||
		    !(p = nbd_out_reserve(&c->out, rq->length)))
			return -ENOMEM;
		pthread_mutex_lock(&m->lock);
		memcpy(p, m->data + rq->offset, rq->length);
		pthread_mutex_unlock(&m->lock);
		c->out.len += rq->length;
		return 0;
	case NBD_CMD_WRITE:
		r = conn_need(c, rq->length);
		if (r < 0)
			return r;
		pthread_mutex_lock(&m->lock);
		memcpy(m->data + rq->offset, c->in, rq->length);
		pthread_mutex_unlock(&m->lock);
		conn_take(c, rq->length);
		break;
	case NBD_CMD_TRIM:
	case NBD_CMD_WRITE_ZEROES:
		/* Memory has no holes: both leave zeroes. */
		pthread_mutex_lock(&m->lock);
		memset(m->data + rq->offset, 0, rq->length);
		pthread_mutex_unlock(&m->lock);
		break;
	case NBD_CMD_FLUSH:
		break;
	}
	return nbd_reply_simple(&c->out, rq->cookie, 0);
}

static void *conn_run(void *arg)
{
	struct conn *c = arg;
	struct nbd_export e;
	struct mem_export *m = conn_handshake(c, &e);
	unsigned long requests = 0;
	int r = 0;

	if (!m)
		goto out;
	for (;;) {
		struct nbd_request rq;

		/* Replies go out when no whole request is waiting. */
		r = nbd_request_parse(c->in, c->in_len, &rq);
		if (r == 0) {
			r = conn_flush(c);
			if (r >= 0)
				r = conn_fill(c, NBD_REQUEST_SIZE);
			if (r < 0)
				break;
			continue;
		}
		if (r < 0) {
			fprintf(stderr, "conn %u: not a request (bad magic) after %lu requests\n",
				c->id, requests);
			break;
		}
		conn_take(c, NBD_REQUEST_SIZE);
		requests++;
		r = conn_request(c, m, &e, &rq);
		if (r != 0)
			break;
	}
	/* Replies to the requests before a DISC or a bad header still go out. */
	if (r >= 0 || r == -EPROTO) {
		int f = conn_flush(c);

		if (f < 0 && r >= 0)
			r = f;
	}
	if (r == 1 || r == 0)
		fprintf(stderr, "conn %u: disconnected after %lu requests\n", c->id, requests);
	else if (r < 0 && r != -EPROTO)
		fprintf(stderr, "conn %u: closed after %lu requests: %s\n", c->id, requests,
			strerror(-r));
out:
	close(c->fd);
	free(c->in);
	nbd_out_free(&c->out);
	free(c);
	return NULL;
}

/* ---- setup ---- */

static int parse_size(const char *s, uint64_t *ret)
{
	char *end;
	unsigned long long v;
	unsigned shift = 0;

	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno || end == s)
		return -EINVAL;
	switch (*end) {
	case 'K':
		shift = 10;
		end++;
		break;
	case 'M':
		shift = 20;
		end++;
		break;
	case 'G':
		shift = 30;
		end++;
		break;
	}
	if (*end || v > (UINT64_MAX >> shift))
		return -EINVAL;
	*ret = (uint64_t)v << shift;
	return 0;
}

/* NAME:SIZE[:ro[:DESCRIPTION]] */
static int export_add(const char *arg)
{
	struct mem_export *m, *grown;
	char *s = strdup(arg), *size, *mode = NULL, *desc = NULL;

	if (!s)
		return -ENOMEM;
	size = strchr(s, ':');
	if (!size)
		goto bad;
	*size++ = '\0';
	mode = strchr(size, ':');
	if (mode) {
		*mode++ = '\0';
		desc = strchr(mode, ':');
		if (desc)
			*desc++ = '\0';
		if (strcmp(mode, "ro") && strcmp(mode, "rw"))
			goto bad;
	}
	grown = realloc(exports, (n_exports + 1) * sizeof(*exports));
	if (!grown)
		goto bad;
	exports = grown;
	m = &exports[n_exports];
	*m = (struct mem_export){ .name = s, .read_only = mode && !strcmp(mode, "ro") };
	if (parse_size(size, &m->size) < 0 || export_find(s))
		goto bad;
	m->description = desc ? strdup(desc) : NULL;
	/* Untouched pages cost nothing, so a big sparse export is cheap. */
	m->data = mmap(NULL, m->size ? m->size : 1, PROT_READ | PROT_WRITE,
		       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m->data == MAP_FAILED)
		goto bad;
	pthread_mutex_init(&m->lock, NULL);
	n_exports++;
	return 0;
bad:
	fprintf(stderr, "bad --export %s (NAME:SIZE[:ro|rw[:DESCRIPTION]], names unique)\n", arg);
	free(s);
	return -EINVAL;
}

static int listen_unix(const char *path)
{
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(a.sun_path)) {
		fprintf(stderr, "socket path too long: %s\n", path);
		return -ENAMETOOLONG;
	}
	strcpy(a.sun_path, path);
	unlink(path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0) {
		fprintf(stderr, "listen on %s: %s\n", path, strerror(errno));
		return -errno;
	}
	return fd;
}

static int listen_tcp(const char *port)
{
	struct sockaddr_in a = { .sin_family = AF_INET,
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				 .sin_port = htons((uint16_t)atoi(port)) };
	int one = 1, fd;

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0 || setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) < 0 ||
	    bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(fd, 16) < 0) {
		fprintf(stderr, "listen on 127.0.0.1:%s: %s\n", port, strerror(errno));
		return -errno;
	}
	return fd;
}

static void usage(void)
{
	fprintf(stderr, "usage: ftvm-nbd-memserver SOCKET [--tcp PORT] "
			"--export NAME:SIZE[:ro|rw[:DESCRIPTION]]...\n");
}

int main(int argc, char **argv)
{
	struct pollfd fds[2];
	const char *tcp = NULL;
	unsigned nfds = 0, next_id = 1;

	if (argc < 2 || argv[1][0] == '-') {
		usage();
		return 2;
	}
	for (int i = 2; i < argc; i++) {
		if (!strcmp(argv[i], "--export") && i + 1 < argc) {
			if (export_add(argv[++i]) < 0)
				return 2;
		} else if (!strcmp(argv[i], "--tcp") && i + 1 < argc) {
			tcp = argv[++i];
		} else {
			usage();
			return 2;
		}
	}
	signal(SIGPIPE, SIG_IGN);
	fds[nfds].fd = listen_unix(argv[1]);
	if (fds[nfds++].fd < 0)
		return 1;
	if (tcp) {
		fds[nfds].fd = listen_tcp(tcp);
		if (fds[nfds++].fd < 0)
			return 1;
	}
	fprintf(stderr, "serving %zu export(s) on %s%s%s\n", n_exports, argv[1],
		tcp ? " and 127.0.0.1:" : "", tcp ? tcp : "");
	for (;;) {
		for (unsigned i = 0; i < nfds; i++)
			fds[i].events = POLLIN;
		if (poll(fds, nfds, -1) < 0) {
			if (errno == EINTR)
				continue;
			perror("poll");
			return 1;
		}
		for (unsigned i = 0; i < nfds; i++) {
			struct conn *c;
			pthread_t t;
			int fd;

			if (!(fds[i].revents & POLLIN))
				continue;
			fd = accept4(fds[i].fd, NULL, NULL, SOCK_CLOEXEC);
			if (fd < 0)
				continue;
			c = calloc(1, sizeof(*c));
			if (!c) {
				close(fd);
				continue;
			}
			c->fd = fd;
			c->id = next_id++;
			if (pthread_create(&t, NULL, conn_run, c) != 0) {
				close(fd);
				free(c);
				continue;
			}
			pthread_detach(t);
		}
	}
}
