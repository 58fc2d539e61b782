/* Redis synchronous replication as a reference; see bench_redis.h. */
#include "bench_redis.h"

#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "bench_common.h"
#include "clock.h"
#include "free_port.h"

#define START_DEADLINE_MS 10000
#define IO_TIMEOUT_S 5 /* a Redis reply later than this ends the run */

/* A RESP reader: enough for the simple, error, integer and bulk replies the
 * commands used here get. */
static int resp_fill(struct bench_redis_conn *r)
{
	ssize_t n;

	if (r->head == r->tail)
		r->head = r->tail = 0;
	if (r->tail == sizeof(r->buf)) {
		memmove(r->buf, r->buf + r->head, r->tail - r->head);
		r->tail -= r->head;
		r->head = 0;
	}
	do
		n = read(r->fd, r->buf + r->tail, sizeof(r->buf) - r->tail);
	while (n < 0 && errno == EINTR);
	if (n < 0)
		return errno == EAGAIN ? -ETIMEDOUT : -errno;
	if (n == 0)
		return -ECONNRESET;
	r->tail += (size_t)n;
	return 0;
}

/* One line without its CRLF, cut to out_len - 1. */
static int resp_line(struct bench_redis_conn *r, char *out, size_t out_len)
{
	size_t used = 0;

	for (;;) {
		char *lf = memchr(r->buf + r->head, '\n', r->tail - r->head);
		size_t n = lf ? (size_t)(lf - (r->buf + r->head)) + 1 : r->tail - r->head;
		size_t take = n < out_len - 1 - used ? n : out_len - 1 - used;
		int e;

		memcpy(out + used, r->buf + r->head, take);
		used += take;
		r->head += n;
		if (lf)
			break;
		e = resp_fill(r);
		if (e < 0)
			return e;
	}
	while (used && (out[used - 1] == '\n' || out[used - 1] == '\r'))
		used--;
	out[used] = '\0';
	return 0;
}

/* One reply: its type byte in *ret_type and its text (a bulk string's
 * contents, cut to out_len - 1) in out. */
static int resp_reply(struct bench_redis_conn *r, char *out, size_t out_len, char *ret_type)
{
	char line[128];
	long len;
	int e = resp_line(r, line, sizeof(line));

	if (e < 0)
		return e;
	*ret_type = line[0];
	if (line[0] != '$') {
		snprintf(out, out_len, "%s", line + (line[0] ? 1 : 0));
		return line[0] == '+' || line[0] == ':' || line[0] == '-' ? 0 : -EBADMSG;
	}
	len = strtol(line + 1, NULL, 10);
	out[0] = '\0';
	if (len < 0)
		return 0;
	for (size_t used = 0, want = (size_t)len + 2; want;) {
		size_t n = r->tail - r->head < want ? r->tail - r->head : want;
		size_t take = used + n < out_len - 1 ? n : out_len - 1 - used;

		memcpy(out + used, r->buf + r->head, take);
		used += take;
		out[used] = '\0';
		r->head += n;
		want -= n;
		if (want && (e = resp_fill(r)) < 0)
			return e;
	}
	return 0;
}

static int redis_connect(uint16_t port, uint64_t deadline, struct bench_redis_conn *r)
{
	struct sockaddr_in sin = { .sin_family = AF_INET,
				   .sin_addr.s_addr = htonl(INADDR_LOOPBACK),
				   .sin_port = htons(port) };
	struct timeval tv = { .tv_sec = IO_TIMEOUT_S };

	for (;;) {
		int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

		if (fd < 0)
			return -errno;
		if (connect(fd, (struct sockaddr *)&sin, sizeof(sin)) == 0) {
			bench_nodelay(fd);
			setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
			memset(r, 0, sizeof(*r));
			r->fd = fd;
			return 0;
		}
		close(fd);
		if (clock_now_ms() >= deadline)
			return -ETIMEDOUT;
		bench_sleep_ms(10);
	}
}

/* Whether INFO replication on r says field:value. */
static int redis_info_has(struct bench_redis_conn *r, const char *field_value)
{
	static const char cmd[] = "*2\r\n$4\r\nINFO\r\n$11\r\nreplication\r\n";
	char text[4096], type;
	int e = bench_full_io(r->fd, (void *)cmd, strlen(cmd), true);

	if (e == 0)
		e = resp_reply(r, text, sizeof(text), &type);
	if (e < 0)
		return e;
	return strstr(text, field_value) != NULL;
}

int bench_redis_start(struct bench_redis *r, const char *dir)
{
	struct bench_redis_conn replica = { .fd = -1 };
	char port_s[2][8], data[2][PATH_MAX];
	uint64_t deadline;
	int e;

	r->procs[0] = (struct bench_proc){ .name = "redis primary", .pid = -1 };
	r->procs[1] = (struct bench_proc){ .name = "redis replica", .pid = -1 };
	if (!bench_have_program("redis-server"))
		return -ENOENT;
	for (int i = 0; i < 2; i++) {
		e = free_port_pick(&r->port[i]);
		if (e < 0) {
			fprintf(stderr, "redis: no free port: %s\n", strerror(-e));
			return e;
		}
		snprintf(port_s[i], sizeof(port_s[i]), "%u", r->port[i]);
		snprintf(data[i], sizeof(data[i]), "%s/redis-%d", dir, i);
		snprintf(r->procs[i].log, sizeof(r->procs[i].log), "%s/redis-%d.log", dir, i);
		if (mkdir(data[i], 0700) < 0 && errno != EEXIST) {
			e = -errno;
			fprintf(stderr, "redis: mkdir %s: %s\n", data[i], strerror(errno));
			return e;
		}
	}
	for (int i = 0; i < 2; i++) {
		char *argv[] = { "redis-server", "--port",  port_s[i], "--bind",
				 "127.0.0.1",	 "--save",  "",	       "--appendonly",
				 "no",		 "--dir",   data[i],   "--replicaof",
				 "127.0.0.1",	 port_s[0], NULL };

		if (i == 0)
			argv[11] = NULL; /* the primary replicates nothing */
		e = bench_proc_spawn(&r->procs[i], argv);
		if (e < 0) {
			fprintf(stderr, "redis: cannot start redis-server: %s\n", strerror(-e));
			return e;
		}
	}
	deadline = clock_now_ms() + START_DEADLINE_MS;
	e = redis_connect(r->port[1], deadline, &replica);
	if (e < 0) {
		fprintf(stderr, "redis: cannot reach the replica on port %u: %s\n", r->port[1],
			strerror(-e));
		return e;
	}
	while ((e = redis_info_has(&replica, "master_link_status:up")) == 0) {
		if (bench_proc_exited(&r->procs[0]) || bench_proc_exited(&r->procs[1]) ||
		    clock_now_ms() >= deadline) {
			fprintf(stderr,
				"redis: the replica did not link within %d ms; logs in %s\n",
				START_DEADLINE_MS, dir);
			e = -ETIMEDOUT;
			break;
		}
		bench_sleep_ms(10);
	}
	close(replica.fd);
	return e < 0 ? e : 0;
}

void bench_redis_stop(struct bench_redis *r)
{
	for (int i = 0; i < 2; i++)
		bench_proc_stop(&r->procs[i]);
}

int bench_redis_open(const struct bench_redis *r, const char *key, size_t value_len,
		     struct bench_redis_conn *ret)
{
	static const char wait_cmd[] = "*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$4\r\n1000\r\n";
	char hdr[128];
	int n = snprintf(hdr, sizeof(hdr), "*3\r\n$3\r\nSET\r\n$%zu\r\n%s\r\n$%zu\r\n", strlen(key),
			 key, value_len);
	int e;

	if (n < 0 || (size_t)n >= sizeof(hdr) || value_len < 64)
		return -EINVAL;
	e = redis_connect(r->port[0], clock_now_ms() + START_DEADLINE_MS, ret);
	if (e < 0)
		return e;
	ret->value_len = value_len;
	ret->set_len = (size_t)n + value_len + 2;
	ret->cmd = malloc(ret->set_len * BENCH_REDIS_SETS_MAX + sizeof(wait_cmd));
	if (!ret->cmd) {
		close(ret->fd);
		ret->fd = -1;
		return -ENOMEM;
	}
	for (unsigned i = 0; i < BENCH_REDIS_SETS_MAX; i++) {
		char *set = ret->cmd + i * ret->set_len;

		memcpy(set, hdr, (size_t)n);
		memset(set + n, 'v', value_len);
		memcpy(set + n + value_len, "\r\n", 2);
	}
	return 0;
}

void bench_redis_close(struct bench_redis_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	free(c->cmd);
	c->cmd = NULL;
}

int bench_redis_write(struct bench_redis_conn *c, unsigned sets, uint64_t seq)
{
	static const char wait_cmd[] = "*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$4\r\n1000\r\n";
	size_t value_at = c->set_len - c->value_len - 2;
	size_t wait_len = strlen(wait_cmd);
	char text[128] = "", type = '?';
	int e;

	if (sets == 0 || sets > BENCH_REDIS_SETS_MAX)
		return -EINVAL;
	/* Each value new contents. The WAIT goes right behind the last SET. */
	for (unsigned i = 0; i < sets; i++) {
		uint64_t v = seq + i;

		memcpy(c->cmd + i * c->set_len + value_at, &v, sizeof(v));
	}
	memcpy(c->cmd + sets * c->set_len, wait_cmd, wait_len);
	e = bench_full_io(c->fd, c->cmd, sets * c->set_len + wait_len, true);
	/* The SET the WAIT overwrote, whole again for a longer batch (the SETs
	 * differ only in the stamps, which each batch writes anew). */
	memcpy(c->cmd + sets * c->set_len, c->cmd, wait_len < c->set_len ? wait_len : c->set_len);
	for (unsigned i = 0; i < sets && e == 0; i++) {
		e = resp_reply(c, text, sizeof(text), &type);
		if (e == 0 && type != '+')
			e = -EBADMSG;
	}
	if (e == 0)
		e = resp_reply(c, text, sizeof(text), &type);
	if (e == 0 && (type != ':' || strtol(text, NULL, 10) < 1))
		e = type == ':' ? -ETIMEDOUT : -EBADMSG;
	if (e < 0)
		fprintf(stderr, "redis: %u SET + WAIT 1 answered %c%s: %s\n", sets, type, text,
			e == -ETIMEDOUT && type == ':' ? "the replica did not acknowledge in 1 s"
						       : strerror(-e));
	return e;
}
