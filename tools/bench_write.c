/* The write-path table of issue 24; see bench_write.h.
 *
 * A subject is an ops table (struct subject_ops): how to start it, open a
 * client's connection, make one write and wait for its acknowledgement, and,
 * where it has them, put writes in flight and reap them. A row (struct
 * row_kind) says how many clients write at once, each on its own thread,
 * or at which queue depth one client keeps writes in flight. A cell is one
 * subject in one row: every round runs each cell for cell_ms, rows in turn
 * and in each row every subject in turn, starting one subject further
 * round after round; a cell's latencies and writes add up over the rounds.
 *
 *   round 1:  1 client:  TCP relay redis mirror commit durable
 *             4 clients: TCP relay redis ... ; ...; QD 32: ...
 *   round 2:  1 client:  relay redis mirror commit durable TCP ...
 *
 * Every write is a 4 KiB page (or request, or value) answered once its mirror
 * has it: ftvm_write_page() of a page node a owns, with the client on node a
 * (at a queue depth ftvm_submit_write_page() and ftvm_reap());
 * SET of 4 KiB then WAIT 1 on Redis's primary; 4 KiB through the relay to the
 * echo and 64 bytes back; 4 KiB to the echo and 64 bytes back. A client
 * cycles through pages of its own (16, or twice its queue depth).
 *
 * With --data-dir DIR (bench_write_opts.data_dir), the run's figures also go
 * to files, for tools/bench_plot.sh and anyone's own tools:
 *
 *   DIR/write/summary.csv   the table: a header line, then one line per cell
 *                           measured (a subject skipped, or a row it has no
 *                           queue for, has none):
 *                           row,clients,depth,subject,p50_us,p99_us,writes_per_s,samples,
 *                           cpu_us_per_write (the servers' CPU time per write, or
 *                           "-": see print_rows())
 *                           e.g. qd8,1,8,mirror,131,410,52873,158619,41.3
 *   DIR/write/ROW/SUBJECT.samples
 *                           every write's latency in that cell, all rounds,
 *                           in microseconds, one whole number a line, sorted
 *                           from the smallest (line i of n is the CDF's i/n)
 *   DIR/write/machine.txt   key=value lines: nproc (CPUs online), load (the
 *                           1-minute load average before the run, -1 unknown),
 *                           date (UTC, ISO 8601, when the run ended), rounds,
 *                           cell_ms
 *
 * ROW is 1, 4, 16 (clients, each waiting for its write) or qd1, qd8, qd32
 * (one client at that queue depth); SUBJECT is tcp (the bare TCP
 * ping-pong), relay, redis, or mirror, commit, durable (ftvm at that [node]
 * ack). Files of an earlier run are overwritten, never removed. */
#define _GNU_SOURCE
#include "bench_write.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "bench_common.h"
#include "bench_peers.h"
#include "bench_redis.h"
#include "clock.h"

#define BLOCK 4096u	/* bytes of each write */
#define REPLY 64u	/* the echo's answer: about a write's answer on the wire */
#define CLIENTS_MAX 16	/* the most clients of a row */
#define DEPTH_MAX 32	/* the deepest queue of a row */
#define PAGES 16u	/* pages a client cycles through at depth 1 */
#define ALLOC_PAGES 64u /* pages of each client's allocation: 2 * DEPTH_MAX */
#define WARMUP_MS 200	/* each subject, 16 clients, before the rounds */
#define POOL "64M"	/* each pair's [memory] size */
#define SUBJECTS_MAX 6	/* TCP, relay, Redis, three levels */
_Static_assert(DEPTH_MAX <= BENCH_REDIS_SETS_MAX, "Redis's pipeline holds a queue");
_Static_assert(ALLOC_PAGES >= 2 * DEPTH_MAX && ALLOC_PAGES >= PAGES, "pages per client");

/* ---- rows ---- */

struct row_kind {
	const char *name;
	const char *slug; /* in the data files */
	const char *tag;  /* in the aims' lines */
	unsigned clients; /* threads writing at once, each its own connection */
	unsigned depth;	  /* 0: each waits for its write; else one client, this many in flight */
};

enum row_id {
	ROW_1,
	ROW_4,
	ROW_16,
	ROW_QD1,
	ROW_QD8,
	ROW_QD32,
	ROWS,
};

static const struct row_kind rows[ROWS] = {
	[ROW_1] = { .name = "1 client", .slug = "1", .tag = "1 client", .clients = 1 },
	[ROW_4] = { .name = "4 clients", .slug = "4", .tag = "4 clients", .clients = 4 },
	[ROW_16] = { .name = "16 clients", .slug = "16", .tag = "16 clients", .clients = 16 },
	[ROW_QD1] = { .name = "1 client, queue depth 1",
		      .slug = "qd1",
		      .tag = "QD 1",
		      .clients = 1,
		      .depth = 1 },
	[ROW_QD8] = { .name = "1 client, queue depth 8",
		      .slug = "qd8",
		      .tag = "QD 8",
		      .clients = 1,
		      .depth = 8 },
	[ROW_QD32] = { .name = "1 client, queue depth 32",
		       .slug = "qd32",
		       .tag = "QD 32",
		       .clients = 1,
		       .depth = 32 },
};

/* ---- subjects ---- */

struct subject;

/* conn is a client's connection, made by open() on the table's thread and
 * then used by one client thread at a time. Each hook returns 0 (reap: the
 * slots done) or -errno, the reason said on stderr. */
struct subject_ops {
	/* Starts what the subject needs. -ENOENT: it is not on this machine. */
	int (*start)(struct subject *s);
	void (*stop)(struct subject *s);
	int (*open)(struct subject *s, unsigned client, void **ret_conn);
	void (*close)(void *conn);
	/* One write of the contents stamped seq to page, returning once it is
	 * acknowledged. */
	int (*write)(void *conn, uint64_t seq, uint64_t page);
	/* Puts one write in flight, to come back from reap() as slot; NULL: the
	 * subject has no queue (its queue-depth rows say so). */
	int (*submit)(void *conn, uint64_t seq, uint64_t page, unsigned slot);
	/* Waits for at least one write in flight to be acknowledged and writes
	 * the slots of those that were into ret_slots (room for DEPTH_MAX). */
	int (*reap)(void *conn, unsigned *ret_slots);
	/* Page-table transactions committed so far by node a and node b; NULL:
	 * not a pair of ftvmd. */
	int (*commits)(struct subject *s, uint64_t ret[2]);
	/* The processes that serve its writes (up to 2), whose CPU time a
	 * write costs; how many. */
	size_t (*servers)(const struct subject *s, const struct bench_proc *ret[2]);
	/* What a row the subject cannot run prints instead. */
	const char *no_queue;
};

struct samples {
	uint64_t *v;
	size_t n, cap;
};

struct cell {
	struct samples lat; /* microseconds per write */
	uint64_t writes, us;
	uint64_t commits[2];
	uint64_t cpu_us;   /* the servers' CPU time over the cell's turns */
	uint64_t p50, p99; /* once the rounds are done */
	double writes_s;
	bool measured;
};

struct table;

struct subject {
	const struct subject_ops *ops;
	struct table *t;
	char name[32];
	const char *slug;  /* in the data files */
	const char *level; /* ftvm's [node] ack */
	const char *skipped;
	bool started;
	void *conns[CLIENTS_MAX];
	uint64_t seq[CLIENTS_MAX]; /* each client's next stamp */
	struct cell cells[ROWS];
	/* the subject's own */
	struct bench_peer relay;
	struct bench_redis redis;
	struct bench_pair pair;
	char label[48], node_names[2][48];
	struct ftvm_client *status[2];
};

struct table {
	const struct bench_write_opts *o;
	char dir[PATH_MAX];
	struct bench_peer echo; /* the bare TCP subject's, and the relay's partner */
	struct subject subjects[SUBJECTS_MAX];
	size_t n;
	double load; /* the 1-minute load average before the run, or -1 */
};

static int samples_push(struct samples *s, uint64_t v)
{
	if (s->n == s->cap) {
		size_t cap = s->cap ? 2 * s->cap : 4096;
		uint64_t *nv = realloc(s->v, cap * sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		s->v = nv;
		s->cap = cap;
	}
	s->v[s->n++] = v;
	return 0;
}

static int samples_append(struct samples *to, const struct samples *from)
{
	for (size_t i = 0; i < from->n; i++) {
		int r = samples_push(to, from->v[i]);

		if (r < 0)
			return r;
	}
	return 0;
}

/* ---- the bare TCP ping-pong and the relay: a stream of requests ---- */

struct stream_conn {
	int fd;
	bool polled; /* a unix socket: sleep in poll(), as libftvm does */
	uint8_t request[BLOCK];
	uint8_t replies[REPLY * DEPTH_MAX];
	size_t got;			    /* bytes of an answer read, less than REPLY */
	unsigned slots[DEPTH_MAX], head, n; /* the writes in flight, in order */
};

static ssize_t stream_read(struct stream_conn *c, void *buf, size_t len)
{
	for (;;) {
		struct pollfd pfd = { .fd = c->fd, .events = POLLIN };
		ssize_t n;

		if (c->polled && poll(&pfd, 1, -1) < 0 && errno != EINTR)
			return -errno;
		n = c->polled ? recv(c->fd, buf, len, MSG_DONTWAIT) : read(c->fd, buf, len);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return -errno;
		return n > 0 ? n : -ECONNRESET;
	}
}

static int stream_send(struct stream_conn *c, uint64_t seq)
{
	memcpy(c->request, &seq, sizeof(seq)); /* each request new contents */
	return bench_full_io(c->fd, c->request, BLOCK, true);
}

static int stream_write(void *conn, uint64_t seq, uint64_t page)
{
	struct stream_conn *c = conn;
	int r = stream_send(c, seq);

	for (size_t got = 0; r == 0 && got < REPLY;) {
		ssize_t n = stream_read(c, c->replies, REPLY - got);

		if (n < 0)
			r = (int)n;
		else
			got += (size_t)n;
	}
	if (r < 0)
		fprintf(stderr, "%s: %s\n", c->polled ? "relay" : "bare TCP", strerror(-r));
	return r;
}

static int stream_submit(void *conn, uint64_t seq, uint64_t page, unsigned slot)
{
	struct stream_conn *c = conn;
	int r = stream_send(c, seq);

	if (r < 0) {
		fprintf(stderr, "%s: %s\n", c->polled ? "relay" : "bare TCP", strerror(-r));
		return r;
	}
	c->slots[(c->head + c->n++) % DEPTH_MAX] = slot;
	return 0;
}

/* The answers come in the order of the requests. */
static int stream_reap(void *conn, unsigned *ret_slots)
{
	struct stream_conn *c = conn;
	ssize_t n;
	int done = 0;

	if (!c->n)
		return 0;
	n = stream_read(c, c->replies, c->n * REPLY - c->got);
	if (n < 0) {
		fprintf(stderr, "%s: %s\n", c->polled ? "relay" : "bare TCP", strerror((int)-n));
		return (int)n;
	}
	for (c->got += (size_t)n; c->got >= REPLY; c->got -= REPLY) {
		ret_slots[done++] = c->slots[c->head];
		c->head = (c->head + 1) % DEPTH_MAX;
		c->n--;
	}
	return done;
}

static void stream_close(void *conn)
{
	struct stream_conn *c = conn;

	if (c)
		close(c->fd);
	free(c);
}

static int stream_open(const struct sockaddr *addr, socklen_t len, bool unix_socket,
		       void **ret_conn)
{
	struct stream_conn *c = calloc(1, sizeof(*c));
	int r = 0;

	if (!c)
		return -ENOMEM;
	c->polled = unix_socket;
	c->fd = socket(unix_socket ? AF_UNIX : AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (c->fd < 0 || connect(c->fd, addr, len) < 0) {
		r = -errno;
		fprintf(stderr, "%s: connect: %s\n", unix_socket ? "relay" : "bare TCP",
			strerror(errno));
		if (c->fd >= 0)
			close(c->fd);
		free(c);
		return r;
	}
	if (!unix_socket)
		bench_nodelay(c->fd);
	*ret_conn = c;
	return 0;
}

static int tcp_start(struct subject *s)
{
	return 0; /* the table's echo */
}

static void tcp_stop(struct subject *s)
{
}

static int tcp_open(struct subject *s, unsigned client, void **ret_conn)
{
	return stream_open((const struct sockaddr *)&s->t->echo.addr, sizeof(s->t->echo.addr),
			   false, ret_conn);
}

static size_t tcp_servers(const struct subject *s, const struct bench_proc *ret[2])
{
	ret[0] = &s->t->echo.proc;
	return 1;
}

static const struct subject_ops tcp_ops = {
	.servers = tcp_servers,
	.start = tcp_start,
	.stop = tcp_stop,
	.open = tcp_open,
	.close = stream_close,
	.write = stream_write,
	.submit = stream_submit,
	.reap = stream_reap,
};

static int relay_start(struct subject *s)
{
	char path[PATH_MAX + 16];
	int r;

	snprintf(path, sizeof(path), "%s/relay.sock", s->t->dir);
	r = bench_relay_start(&s->relay, path, &s->t->echo.addr, BLOCK, REPLY);
	if (r < 0)
		fprintf(stderr, "relay: cannot start it on %s: %s\n", path, strerror(-r));
	return r;
}

static void relay_stop(struct subject *s)
{
	bench_peer_stop(&s->relay);
}

static int relay_open(struct subject *s, unsigned client, void **ret_conn)
{
	return stream_open((const struct sockaddr *)&s->relay.path, sizeof(s->relay.path), true,
			   ret_conn);
}

static size_t relay_servers(const struct subject *s, const struct bench_proc *ret[2])
{
	ret[0] = &s->relay.proc;
	ret[1] = &s->t->echo.proc;
	return 2;
}

static const struct subject_ops relay_ops = {
	.servers = relay_servers,
	.start = relay_start,
	.stop = relay_stop,
	.open = relay_open,
	.close = stream_close,
	.write = stream_write,
	.submit = stream_submit,
	.reap = stream_reap,
};

/* ---- Redis ---- */

/* At a queue depth, the writes submitted go at reap() as one batch, their
 * SETs and then one WAIT 1: a client that pipelines Redis's writes waits
 * for its replica once per batch. */
struct redis_conn {
	struct bench_redis_conn rc;
	unsigned slots[DEPTH_MAX], n;
	uint64_t first_seq;
};

static int redis_start(struct subject *s)
{
	int r = bench_redis_start(&s->redis, s->t->dir);

	if (r == -ENOENT)
		s->skipped = "skipped (redis-server not installed)";
	return r;
}

static void redis_stop(struct subject *s)
{
	bench_redis_stop(&s->redis);
}

static int redis_open(struct subject *s, unsigned client, void **ret_conn)
{
	struct redis_conn *c = calloc(1, sizeof(*c));
	char key[32];
	int r;

	if (!c)
		return -ENOMEM;
	snprintf(key, sizeof(key), "client-%u", client);
	r = bench_redis_open(&s->redis, key, BLOCK, &c->rc);
	if (r < 0) {
		fprintf(stderr, "redis: connect: %s\n", strerror(-r));
		free(c);
		return r;
	}
	*ret_conn = c;
	return 0;
}

static void redis_close(void *conn)
{
	struct redis_conn *c = conn;

	if (c)
		bench_redis_close(&c->rc);
	free(c);
}

static int redis_write(void *conn, uint64_t seq, uint64_t page)
{
	struct redis_conn *c = conn;

	return bench_redis_write(&c->rc, 1, seq);
}

static int redis_submit(void *conn, uint64_t seq, uint64_t page, unsigned slot)
{
	struct redis_conn *c = conn;

	if (!c->n)
		c->first_seq = seq;
	c->slots[c->n++] = slot;
	return 0;
}

static int redis_reap(void *conn, unsigned *ret_slots)
{
	struct redis_conn *c = conn;
	unsigned n = c->n;
	int r;

	if (!n)
		return 0;
	r = bench_redis_write(&c->rc, n, c->first_seq);
	if (r < 0)
		return r;
	memcpy(ret_slots, c->slots, n * sizeof(*ret_slots));
	c->n = 0;
	return (int)n;
}

static size_t redis_servers(const struct subject *s, const struct bench_proc *ret[2])
{
	ret[0] = &s->redis.procs[0];
	ret[1] = &s->redis.procs[1];
	return 2;
}

static const struct subject_ops redis_ops = {
	.servers = redis_servers,
	.start = redis_start,
	.stop = redis_stop,
	.open = redis_open,
	.close = redis_close,
	.write = redis_write,
	.submit = redis_submit,
	.reap = redis_reap,
};

/* ---- ftvm ---- */

struct ftvm_conn {
	struct ftvm_client *c;
	struct ftvm_alloc_info info;
	uint8_t block[BLOCK];
	struct ftvm_completion done[DEPTH_MAX];
};

static int ftvm_start(struct subject *s)
{
	uint64_t deadline;
	int r;

	snprintf(s->label, sizeof(s->label), "pair ack=%s", s->level);
	snprintf(s->node_names[0], sizeof(s->node_names[0]), "ftvmd a (ack=%s)", s->level);
	snprintf(s->node_names[1], sizeof(s->node_names[1]), "ftvmd b (ack=%s)", s->level);
	s->pair = (struct bench_pair){
		.label = s->label,
		.memory = POOL,
		.ack = s->level,
		.nodes = { { .name = s->node_names[0], .pid = -1 },
			   { .name = s->node_names[1], .pid = -1 } },
	};
	if (snprintf(s->pair.dir, sizeof(s->pair.dir), "%s/%s", s->t->dir, s->level) >=
	    (int)sizeof(s->pair.dir))
		return -ENAMETOOLONG;
	if (mkdir(s->pair.dir, 0700) < 0) {
		r = -errno;
		fprintf(stderr, "mkdir %s: %s\n", s->pair.dir, strerror(errno));
		return r;
	}
	r = bench_pair_start(s->t->o->env, &s->pair);
	deadline = clock_now_ms() + BENCH_START_DEADLINE_MS;
	for (int i = 0; i < 2 && r == 0; i++)
		r = bench_pair_connect(&s->pair, i, deadline, &s->status[i]);
	return r;
}

static void ftvm_stop(struct subject *s)
{
	for (int i = 0; i < 2; i++) {
		ftvm_disconnect(s->status[i]);
		s->status[i] = NULL;
	}
	bench_pair_stop(&s->pair);
}

/* Every client on node a, writing pages node a owns: the four hops of the
 * relay, client -> a -> b -> a -> client. */
static int ftvm_open(struct subject *s, unsigned client, void **ret_conn)
{
	struct ftvm_conn *c = calloc(1, sizeof(*c));
	int r;

	if (!c)
		return -ENOMEM;
	memset(c->block, 0xa5, sizeof(c->block));
	r = ftvm_connect(s->pair.sock[0], &c->c);
	if (r < 0) {
		fprintf(stderr, "%s: connect to %s: %s\n", s->name, s->pair.sock[0],
			ftvm_strerror(r));
		free(c);
		return r;
	}
	r = ftvm_alloc(c->c, (uint64_t)ALLOC_PAGES * BLOCK, NULL, true, NULL, 0, &c->info);
	if (r < 0 || c->info.block_size != BLOCK) {
		fprintf(stderr, "%s: alloc of %u pages: %s: %s\n", s->name, ALLOC_PAGES,
			r < 0 ? ftvm_strerror(r) : "not of 4 KiB blocks",
			r < 0 ? ftvm_last_error(c->c) : "");
		ftvm_disconnect(c->c);
		free(c);
		return r < 0 ? r : -EPROTO;
	}
	*ret_conn = c;
	return 0;
}

static void ftvm_close(void *conn)
{
	struct ftvm_conn *c = conn;

	if (!c)
		return;
	ftvm_free(c->c, c->info.guid);
	ftvm_disconnect(c->c);
	free(c);
}

static int ftvm_write(void *conn, uint64_t seq, uint64_t page)
{
	struct ftvm_conn *c = conn;
	int r;

	memcpy(c->block, &seq, sizeof(seq)); /* each write new contents */
	r = ftvm_write_page(c->c, c->info.guid, page, c->block, BLOCK, NULL);
	if (r < 0)
		fprintf(stderr, "write_page %s page %llu: %s: %s\n", c->info.guid,
			(unsigned long long)page, ftvm_strerror(r), ftvm_last_error(c->c));
	return r;
}

static int ftvm_submit(void *conn, uint64_t seq, uint64_t page, unsigned slot)
{
	struct ftvm_conn *c = conn;
	int r;

	memcpy(c->block, &seq, sizeof(seq)); /* copied by the call: reused at once */
	r = ftvm_submit_write_page(c->c, c->info.guid, page, c->block, BLOCK, slot);
	if (r < 0)
		fprintf(stderr, "submit_write_page %s page %llu: %s: %s\n", c->info.guid,
			(unsigned long long)page, ftvm_strerror(r), ftvm_last_error(c->c));
	return r;
}

static int ftvm_reap_some(void *conn, unsigned *ret_slots)
{
	struct ftvm_conn *c = conn;
	int n = ftvm_reap(c->c, c->done, DEPTH_MAX, -1);

	if (n < 0) {
		fprintf(stderr, "reap: %s: %s\n", ftvm_strerror(n), ftvm_last_error(c->c));
		return n;
	}
	for (int k = 0; k < n; k++) {
		if (c->done[k].result < 0) {
			fprintf(stderr, "submitted write_page %s: %s: %s\n", c->info.guid,
				ftvm_strerror(c->done[k].result), c->done[k].error);
			return c->done[k].result;
		}
		ret_slots[k] = (unsigned)c->done[k].cookie;
	}
	return n;
}

static int ftvm_commits(struct subject *s, uint64_t ret[2])
{
	for (int i = 0; i < 2; i++) {
		struct ftvm_node_status st;
		int r = ftvm_status(s->status[i], &st);

		if (r < 0) {
			fprintf(stderr, "status of %s: %s: %s\n", s->pair.nodes[i].name,
				ftvm_strerror(r), ftvm_last_error(s->status[i]));
			return r;
		}
		ret[i] = st.pagetable_commits;
	}
	return 0;
}

static size_t ftvm_servers(const struct subject *s, const struct bench_proc *ret[2])
{
	ret[0] = &s->pair.nodes[0];
	ret[1] = &s->pair.nodes[1];
	return 2;
}

static const struct subject_ops ftvm_ops = {
	.servers = ftvm_servers,
	.start = ftvm_start,
	.stop = ftvm_stop,
	.open = ftvm_open,
	.close = ftvm_close,
	.write = ftvm_write,
	.submit = ftvm_submit,
	.reap = ftvm_reap_some,
	.commits = ftvm_commits,
};

/* ---- running a cell ---- */

struct client_run {
	pthread_t thread;
	const struct subject_ops *ops;
	void *conn;
	uint64_t *seq;
	unsigned depth, pages;
	uint64_t cell_us;
	pthread_barrier_t *start;
	struct samples lat;
	uint64_t writes, t_start, t_end;
	int r;
};

static int run_waiting(struct client_run *c)
{
	uint64_t deadline = c->t_start + c->cell_us;

	for (;;) {
		uint64_t t0 = clock_now_us(), seq = (*c->seq)++, now;
		int r = c->ops->write(c->conn, seq, seq % c->pages);

		if (r < 0)
			return r;
		now = clock_now_us();
		c->writes++;
		r = samples_push(&c->lat, now - t0);
		if (r < 0 || now >= deadline)
			return r;
	}
}

/* depth writes in flight, each one reaped put in flight again until the
 * time is up; then the last ones are reaped. */
static int run_queued(struct client_run *c)
{
	uint64_t deadline = c->t_start + c->cell_us, sent[DEPTH_MAX];
	unsigned done[DEPTH_MAX], in_flight = 0;
	int r = 0;

	for (unsigned slot = 0; slot < c->depth && r == 0; slot++) {
		uint64_t seq = (*c->seq)++;

		sent[slot] = clock_now_us();
		r = c->ops->submit(c->conn, seq, seq % c->pages, slot);
		in_flight += r == 0;
	}
	while (in_flight && r == 0) {
		int n = c->ops->reap(c->conn, done);
		uint64_t now = clock_now_us();

		if (n < 0)
			return n;
		for (int k = 0; k < n && r == 0; k++) {
			in_flight--;
			c->writes++;
			r = samples_push(&c->lat, now - sent[done[k]]);
			if (r == 0 && now < deadline) {
				uint64_t seq = (*c->seq)++;

				sent[done[k]] = clock_now_us();
				r = c->ops->submit(c->conn, seq, seq % c->pages, done[k]);
				in_flight += r == 0;
			}
		}
	}
	return r;
}

static void *client_main(void *arg)
{
	struct client_run *c = arg;

	pthread_barrier_wait(c->start);
	c->t_start = clock_now_us();
	c->r = c->depth ? run_queued(c) : run_waiting(c);
	c->t_end = clock_now_us();
	return NULL;
}

/* The CPU time s's servers used so far (bench_proc_cpu_us). */
static uint64_t servers_cpu_us(const struct subject *s)
{
	const struct bench_proc *procs[2];
	size_t n = s->ops->servers(s, procs);
	uint64_t us = 0;

	for (size_t i = 0; i < n; i++)
		us += bench_proc_cpu_us(procs[i]);
	return us;
}

/* One turn of subject s in row k for ms: into its cell, or nowhere (the
 * warm-up) when cell is NULL. */
static int run_cell(struct subject *s, enum row_id k, unsigned ms, struct cell *cell)
{
	const struct row_kind *row = &rows[k];
	struct client_run runs[CLIENTS_MAX];
	pthread_barrier_t start;
	uint64_t before[2] = { 0, 0 }, after[2] = { 0, 0 }, t0 = UINT64_MAX, t1 = 0, writes = 0;
	uint64_t cpu_before = servers_cpu_us(s);
	int r = s->ops->commits ? s->ops->commits(s, before) : 0;

	if (r < 0)
		return r;
	memset(runs, 0, sizeof(runs));
	pthread_barrier_init(&start, NULL, row->clients);
	for (unsigned i = 0; i < row->clients; i++) {
		struct client_run *c = &runs[i];

		c->ops = s->ops;
		c->conn = s->conns[i];
		c->seq = &s->seq[i];
		c->depth = row->depth;
		c->pages = row->depth * 2 > PAGES ? row->depth * 2 : PAGES;
		c->cell_us = (uint64_t)ms * 1000;
		c->start = &start;
		r = -pthread_create(&c->thread, NULL, client_main, c);
		if (r < 0) {
			/* The barrier counts on every thread: none can be missing. */
			fprintf(stderr, "pthread_create: %s\n", strerror(-r));
			exit(1);
		}
	}
	for (unsigned i = 0; i < row->clients; i++) {
		struct client_run *c = &runs[i];

		pthread_join(c->thread, NULL);
		if (c->r < 0 && r == 0) {
			fprintf(stderr, "%s, %s: client %u failed\n", s->name, row->name, i);
			r = c->r;
		}
		if (r == 0 && cell)
			r = samples_append(&cell->lat, &c->lat);
		free(c->lat.v);
		writes += c->writes;
		t0 = c->t_start < t0 ? c->t_start : t0;
		t1 = c->t_end > t1 ? c->t_end : t1;
	}
	pthread_barrier_destroy(&start);
	if (r == 0 && s->ops->commits)
		r = s->ops->commits(s, after);
	if (r == 0 && cell) {
		cell->writes += writes;
		cell->us += t1 - t0;
		cell->commits[0] += after[0] - before[0];
		cell->commits[1] += after[1] - before[1];
		cell->cpu_us += servers_cpu_us(s) - cpu_before;
		cell->measured = true;
	}
	return r;
}

static bool runs_row(const struct subject *s, enum row_id k)
{
	return s->started && (!rows[k].depth || s->ops->submit);
}

/* ---- output ---- */

static const char *ratio(char *buf, size_t len, double num, double den)
{
	if (num <= 0 || den <= 0)
		snprintf(buf, len, "-");
	else if (num / den < 10)
		snprintf(buf, len, "%.2fx", num / den);
	else if (num / den < 100)
		snprintf(buf, len, "%.1fx", num / den);
	else
		snprintf(buf, len, "%.0fx", num / den);
	return buf;
}

/* The servers' CPU microseconds per write in c, or "-" when none was
 * counted (a cell too short for the kernel's ticks). */
static const char *cpu_per_write(char *buf, size_t len, const struct cell *c)
{
	if (!c->cpu_us || !c->writes)
		snprintf(buf, len, "-");
	else
		snprintf(buf, len, "%.1f", (double)c->cpu_us / (double)c->writes);
	return buf;
}

static const struct subject *find(const struct table *t, const struct subject_ops *ops,
				  const char *level)
{
	for (size_t i = 0; i < t->n; i++) {
		const struct subject *s = &t->subjects[i];

		if (s->ops == ops && (!level || strcmp(s->level, level) == 0))
			return s->started ? s : NULL;
	}
	return NULL;
}

static const struct cell *cell_of(const struct subject *s, enum row_id k)
{
	return s && s->cells[k].measured ? &s->cells[k] : NULL;
}

static void print_rows(const struct table *t)
{
	const struct subject *relay = find(t, &relay_ops, NULL), *redis = find(t, &redis_ops, NULL);

	/* Other work on the machine moves every figure: say how busy it was. */
	printf("\nwrite path: %ld CPUs online, load average %.2f before the run\n",
	       sysconf(_SC_NPROCESSORS_ONLN), t->load);
	printf("%-26s %7s %7s %9s  %6s %6s  %6s %6s  %7s  %8s %8s\n", "4 KiB writes", "p50", "p99",
	       "writes/s", "p50 /", "p50 /", "w/s /", "w/s /", "CPU us", "writes /", "writes /");
	printf("%-26s %7s %7s %9s  %6s %6s  %6s %6s  %7s  %8s %8s\n", "", "us", "us", "", "relay",
	       "redis", "relay", "redis", "/ write", "commit a", "commit b");
	for (int k = 0; k < ROWS; k++) {
		const struct cell *rc = cell_of(relay, k), *dc = cell_of(redis, k);

		printf("%s\n", rows[k].name);
		for (size_t i = 0; i < t->n; i++) {
			const struct subject *s = &t->subjects[i];
			const struct cell *c = &s->cells[k];
			char r1[16], r2[16], r3[16], r4[16], cpu[16];

			if (s->skipped) {
				printf("  %-24s %s\n", s->name, s->skipped);
				continue;
			}
			if (!runs_row(s, k)) {
				printf("  %-24s %s\n", s->name,
				       s->ops->no_queue ? s->ops->no_queue : "no queue");
				continue;
			}
			printf("  %-24s %7llu %7llu %9.0f  %6s %6s  %6s %6s  %7s", s->name,
			       (unsigned long long)c->p50, (unsigned long long)c->p99, c->writes_s,
			       ratio(r1, sizeof(r1), (double)c->p50, rc ? (double)rc->p50 : 0),
			       ratio(r2, sizeof(r2), (double)c->p50, dc ? (double)dc->p50 : 0),
			       ratio(r3, sizeof(r3), c->writes_s, rc ? rc->writes_s : 0),
			       ratio(r4, sizeof(r4), c->writes_s, dc ? dc->writes_s : 0),
			       cpu_per_write(cpu, sizeof(cpu), c));
			if (s->ops->commits)
				for (int n = 0; n < 2; n++) {
					if (c->commits[n])
						printf(" %8.1f",
						       (double)c->writes / (double)c->commits[n]);
					else
						printf(" %8s", "-");
				}
			printf("\n");
		}
	}
	printf("(%u round%s, each cell %u ms a round, the subjects in turn. A write is 4 KiB\n"
	       " answered once its mirror has it: ftvm_write_page() of a page node a owns, every\n"
	       " client on node a; Redis SET then WAIT 1 in one send; the relay 4 KiB over a unix\n"
	       " socket, on over TCP to the echo, 64 bytes back; bare TCP 4 KiB to the echo, 64\n"
	       " bytes back. N clients: each its own connection, thread and 16 pages. Queue depth\n"
	       " D: D writes in flight over 2D pages, ftvm_submit_write_page() and ftvm_reap();\n"
	       " Redis sends D SETs and then WAIT 1; the relay and TCP keep D requests on the\n"
	       " connection. CPU us / write: the CPU time of the processes that serve the writes\n"
	       " (the echo; the relay and the echo; Redis's primary and replica; ftvm's nodes a\n"
	       " and b), user and system, over the writes, /proc/PID/stat. writes / commit: the\n"
	       " clients' writes over the page-table commits of node a and of node b meanwhile,\n"
	       " status pagetable.commits)\n",
	       t->o->rounds, t->o->rounds == 1 ? "" : "s", t->o->cell_ms);
}

/* A ratio held against a bound, and beside the relay's figure in the same
 * row (the floor), which an aim not met may be limited by (issue 24: "either
 * met, or shown by the same run to be limited by the relay floor, with ftvm
 * within 1.2x of it"): "44 / 41 us = 1.07x; the relay 40 us, ftvm 1.10x it:
 * not met, within 1.2x the relay". For writes/s, the relay's as a multiple
 * of ftvm's. */
static void print_aim(const char *what, const struct cell *c, const struct cell *ref,
		      const struct cell *relay_cell, bool latency, double bound,
		      const char *missing)
{
	double v, w, f = 0, behind = 0;
	bool met;

	printf("  %-52s ", what);
	if (!c || !ref) {
		printf("not judged (%s)\n", missing);
		return;
	}
	v = latency ? (double)c->p50 : c->writes_s;
	w = latency ? (double)ref->p50 : ref->writes_s;
	met = latency ? v <= bound * w : v >= bound * w;
	printf(latency ? "%.0f / %.0f us = %.2fx" : "%.0f / %.0f writes/s = %.2fx", v, w, v / w);
	if (relay_cell) {
		f = latency ? (double)relay_cell->p50 : relay_cell->writes_s;
		behind = latency ? v / f : f / v;
		printf(latency ? "; the relay %.0f us, ftvm %.2fx it"
			       : "; the relay %.0f writes/s, %.2fx ftvm's",
		       f, behind);
	}
	printf(": %s\n", met			       ? "met"
			 : relay_cell && behind <= 1.2 ? "not met, within 1.2x the relay"
						       : "not met");
}

static void print_aims(const struct table *t)
{
	const struct subject *redis = find(t, &redis_ops, NULL), *relay = find(t, &relay_ops, NULL);
	const struct subject *mirror = find(t, &ftvm_ops, "mirror");
	const struct subject *commit = find(t, &ftvm_ops, "commit");
	const char *no_redis = redis ? NULL : "no Redis in this run";

	printf("\naims (issue 24), from this run:\n");
	print_aim("ack=mirror: 1 client p50 <= Redis's", cell_of(mirror, ROW_1),
		  cell_of(redis, ROW_1), cell_of(relay, ROW_1), true, 1.0,
		  no_redis ? no_redis : "ack=mirror not in this run");
	print_aim("ack=mirror: 16 clients >= 1.5x Redis's writes/s", cell_of(mirror, ROW_16),
		  cell_of(redis, ROW_16), cell_of(relay, ROW_16), false, 1.5,
		  no_redis ? no_redis : "ack=mirror not in this run");
	print_aim("ack=mirror: QD 32 >= 2x Redis's 16-client writes/s", cell_of(mirror, ROW_QD32),
		  cell_of(redis, ROW_16), cell_of(relay, ROW_QD32), false, 2.0,
		  no_redis  ? no_redis
		  : !mirror ? "ack=mirror not in this run"
			    : "no queue-depth rows for ftvm");
	print_aim("ack=commit: 1 client p50 <= 1.3x Redis's", cell_of(commit, ROW_1),
		  cell_of(redis, ROW_1), cell_of(relay, ROW_1), true, 1.3,
		  no_redis ? no_redis : "ack=commit not in this run");
	print_aim("ack=commit: 16 clients >= 1.0x Redis's writes/s", cell_of(commit, ROW_16),
		  cell_of(redis, ROW_16), cell_of(relay, ROW_16), false, 1.0,
		  no_redis ? no_redis : "ack=commit not in this run");
	printf("  each ftvm p50 within 1.2x the relay's in the same row:\n");
	for (size_t i = 0; i < t->n; i++) {
		const struct subject *s = &t->subjects[i];
		bool met = true, any = false;
		char r[16];

		if (s->ops != &ftvm_ops || !s->started)
			continue;
		printf("    %-12s", s->name + strlen("ftvm "));
		for (int k = 0; k < ROWS; k++) {
			const struct cell *c = cell_of(s, k), *rc = cell_of(relay, k);

			if (!c || !rc)
				continue;
			printf("%s %s %s", any ? "," : "", rows[k].tag,
			       ratio(r, sizeof(r), (double)c->p50, (double)rc->p50));
			met = met && c->p50 * 10 <= rc->p50 * 12;
			any = true;
		}
		printf(": %s\n", any ? (met ? "met" : "not met") : "not judged (no relay)");
	}
}

static void print_commands(const struct table *t)
{
	const struct bench_write_opts *o = t->o;
	char levels[64];

	printf("\nto run it again:");
	for (int i = 0; i < o->argc; i++)
		printf(" %s", o->argv[i]);
	printf("\n  this table alone: %s --only write --rounds %u --cell-ms %u --levels %s\n",
	       o->argc ? o->argv[0] : "ftvm-bench-vmm", o->rounds, o->cell_ms,
	       bench_write_levels_name(o->levels, levels, sizeof(levels)));
	printf("  Redis by hand:    redis-server --port 7000 --save '' --appendonly no &\n"
	       "                    redis-server --port 7001 --save '' --appendonly no "
	       "--replicaof 127.0.0.1 7000 &\n"
	       "                    then a client sends SET KEY <4096 bytes> and WAIT 1 1000 "
	       "in one write and\n"
	       "                    waits for +OK and :1 (at queue depth D: D SETs, one WAIT)\n"
	       "  ftvm's commits:   ftvmctl --config a.conf --json status | jq "
	       ".pagetable.commits (before, after)\n");
}

/* ---- the data files (--data-dir; their format is at the top) ---- */

static int make_dir(const char *path)
{
	if (mkdir(path, 0755) < 0 && errno != EEXIST) {
		int r = -errno;

		fprintf(stderr, "write path: mkdir %s: %s\n", path, strerror(errno));
		return r;
	}
	return 0;
}

static FILE *data_open(const char *path)
{
	FILE *f = fopen(path, "we");

	if (!f)
		fprintf(stderr, "write path: %s: %s\n", path, strerror(errno));
	return f;
}

/* Whether every line got there: a full disk shows at fclose() if not before. */
static int data_close(FILE *f, const char *path)
{
	bool failed = ferror(f);

	if (fclose(f) != 0 || failed) {
		fprintf(stderr, "write path: writing %s failed\n", path);
		return -EIO;
	}
	return 0;
}

static int write_samples(const char *path, const struct samples *lat)
{
	FILE *f = data_open(path);

	if (!f)
		return -EIO;
	for (size_t i = 0; i < lat->n; i++)
		fprintf(f, "%llu\n", (unsigned long long)lat->v[i]);
	return data_close(f, path);
}

static int write_machine(const struct table *t, const char *path)
{
	char date[32];
	time_t now = time(NULL);
	struct tm tm;
	FILE *f;

	if (!gmtime_r(&now, &tm) || !strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%SZ", &tm))
		snprintf(date, sizeof(date), "unknown");
	f = data_open(path);
	if (!f)
		return -EIO;
	fprintf(f, "nproc=%ld\nload=%.2f\ndate=%s\nrounds=%u\ncell_ms=%u\n",
		sysconf(_SC_NPROCESSORS_ONLN), t->load, date, t->o->rounds, t->o->cell_ms);
	return data_close(f, path);
}

/* After run_rounds(), which sorted every cell's samples (bench_percentiles). */
static int write_data(const struct table *t)
{
	char dir[PATH_MAX], path[PATH_MAX + 64], cpu[16];
	FILE *f;
	int r;

	if (snprintf(dir, sizeof(dir), "%s/write", t->o->data_dir) >= (int)sizeof(dir)) {
		fprintf(stderr, "write path: --data-dir %s: too long\n", t->o->data_dir);
		return -ENAMETOOLONG;
	}
	r = make_dir(t->o->data_dir);
	if (r == 0)
		r = make_dir(dir);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/machine.txt", dir);
	r = write_machine(t, path);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "%s/summary.csv", dir);
	f = data_open(path);
	if (!f)
		return -EIO;
	fprintf(f,
		"row,clients,depth,subject,p50_us,p99_us,writes_per_s,samples,cpu_us_per_write\n");
	for (int k = 0; k < ROWS && r == 0; k++) {
		char row_dir[PATH_MAX + 8];

		snprintf(row_dir, sizeof(row_dir), "%s/%s", dir, rows[k].slug);
		r = make_dir(row_dir);
		for (size_t i = 0; i < t->n && r == 0; i++) {
			const struct subject *s = &t->subjects[i];
			const struct cell *c = cell_of(s, k);
			char samples_path[PATH_MAX + 64];

			if (!s->started || !c)
				continue;
			fprintf(f, "%s,%u,%u,%s,%llu,%llu,%.0f,%zu,%s\n", rows[k].slug,
				rows[k].clients, rows[k].depth, s->slug, (unsigned long long)c->p50,
				(unsigned long long)c->p99, c->writes_s, c->lat.n,
				cpu_per_write(cpu, sizeof(cpu), c));
			snprintf(samples_path, sizeof(samples_path), "%s/%s.samples", row_dir,
				 s->slug);
			r = write_samples(samples_path, &c->lat);
		}
	}
	if (r < 0) {
		fclose(f);
		return r;
	}
	return data_close(f, path);
}

/* ---- the run ---- */

int bench_write_parse_levels(const char *s, unsigned *ret)
{
	static const char *const names[] = { "mirror", "commit", "durable" };
	unsigned levels = 0;

	for (const char *p = s; *p;) {
		size_t n = strcspn(p, ",");
		unsigned bit = 0;

		for (unsigned i = 0; i < 3; i++)
			if (strlen(names[i]) == n && strncmp(p, names[i], n) == 0)
				bit = 1u << i;
		if (!bit)
			return -EINVAL;
		levels |= bit;
		p += n + (p[n] == ',');
	}
	if (!levels)
		return -EINVAL;
	*ret = levels;
	return 0;
}

const char *bench_write_levels_name(unsigned levels, char *buf, size_t len)
{
	static const char *const names[] = { "mirror", "commit", "durable" };
	size_t used = 0;

	buf[0] = '\0';
	for (unsigned i = 0; i < 3; i++)
		if (levels & (1u << i))
			used += (size_t)snprintf(buf + used, used < len ? len - used : 0, "%s%s",
						 used ? "," : "", names[i]);
	return buf;
}

static void add_subject(struct table *t, const struct subject_ops *ops, const char *name,
			const char *slug, const char *level)
{
	struct subject *s = &t->subjects[t->n++];

	s->ops = ops;
	s->t = t;
	s->slug = slug;
	s->level = level;
	snprintf(s->name, sizeof(s->name), "%s", name);
}

static int start_all(struct table *t)
{
	int r = bench_echo_start(&t->echo, BLOCK, REPLY);

	if (r < 0) {
		fprintf(stderr, "echo: cannot start it: %s\n", strerror(-r));
		return r;
	}
	for (size_t i = 0; i < t->n; i++) {
		struct subject *s = &t->subjects[i];

		r = s->ops->start(s);
		if (r == -ENOENT && s->skipped) {
			printf("%s: %s\n", s->name, s->skipped);
			continue;
		}
		s->started = true; /* stop() takes what start() left, also on failure */
		if (r < 0)
			return r;
		for (unsigned c = 0; c < CLIENTS_MAX; c++) {
			r = s->ops->open(s, c, &s->conns[c]);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static void stop_all(struct table *t)
{
	for (size_t i = 0; i < t->n; i++) {
		struct subject *s = &t->subjects[i];

		for (unsigned c = 0; c < CLIENTS_MAX; c++)
			if (s->conns[c])
				s->ops->close(s->conns[c]);
		if (s->started)
			s->ops->stop(s);
		for (int k = 0; k < ROWS; k++)
			free(s->cells[k].lat.v);
	}
	bench_peer_stop(&t->echo);
}

static int run_rounds(struct table *t)
{
	unsigned warm = t->o->cell_ms < WARMUP_MS ? t->o->cell_ms : WARMUP_MS;
	int r = 0;

	for (size_t i = 0; i < t->n && r == 0; i++)
		if (t->subjects[i].started)
			r = run_cell(&t->subjects[i], ROW_16, warm, NULL);
	for (unsigned round = 0; round < t->o->rounds && r == 0; round++)
		for (int k = 0; k < ROWS && r == 0; k++)
			for (size_t j = 0; j < t->n && r == 0; j++) {
				struct subject *s = &t->subjects[(j + round) % t->n];

				if (runs_row(s, k))
					r = run_cell(s, k, t->o->cell_ms, &s->cells[k]);
			}
	for (size_t i = 0; i < t->n && r == 0; i++)
		for (int k = 0; k < ROWS; k++) {
			struct cell *c = &t->subjects[i].cells[k];

			if (!c->measured)
				continue;
			bench_percentiles(c->lat.v, (unsigned)c->lat.n, &c->p50, &c->p99);
			c->writes_s = c->us ? (double)c->writes * 1e6 / (double)c->us : 0;
		}
	return r;
}

int bench_write_run(const struct bench_write_opts *o)
{
	static const char *const levels[] = { "mirror", "commit", "durable" };
	struct table *t = calloc(1, sizeof(*t));
	int r;

	if (!t)
		return -ENOMEM;
	t->o = o;
	if (getloadavg(&t->load, 1) < 1)
		t->load = -1;
	snprintf(t->dir, sizeof(t->dir), "%s/write", o->dir);
	if (mkdir(t->dir, 0700) < 0 && errno != EEXIST) {
		r = -errno;
		fprintf(stderr, "mkdir %s: %s\n", t->dir, strerror(errno));
		free(t);
		return r;
	}
	add_subject(t, &tcp_ops, "bare TCP ping-pong", "tcp", NULL);
	add_subject(t, &relay_ops, "relay (design floor)", "relay", NULL);
	add_subject(t, &redis_ops, "redis SET + WAIT 1", "redis", NULL);
	for (unsigned i = 0; i < 3; i++)
		if (o->levels & (1u << i)) {
			char name[32];

			snprintf(name, sizeof(name), "ftvm ack=%s", levels[i]);
			add_subject(t, &ftvm_ops, name, levels[i], levels[i]);
		}
	r = start_all(t);
	if (r == 0)
		r = run_rounds(t);
	if (r == 0 && o->data_dir)
		r = write_data(t); /* before stop_all(), which frees the samples */
	stop_all(t);
	if (r == 0) {
		print_rows(t);
		print_aims(t);
		print_commands(t);
		if (o->data_dir)
			printf("  its data:         %s/write: summary.csv, ROW/SUBJECT.samples, "
			       "machine.txt\n",
			       o->data_dir);
	} else {
		fprintf(stderr, "write path: failed; logs in %s\n", t->dir);
	}
	free(t);
	return r;
}
