/* replay_nodes.h */
#define _GNU_SOURCE /* mkdtemp */
#include "replay_nodes.h"

#include <arpa/inet.h>
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "ftvm.h"
#include "ftvmd_spawn.h"
#include "trace_file.h"

#define START_TIMEOUT_MS 10000u
#define START_ATTEMPTS 3

void replay_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000 };

	nanosleep(&ts, NULL);
}

/* A free loopback port, held (bound, not listening) until *fd is closed:
 * nobody else takes it meanwhile, and a connect to it is refused. */
static int reserve_port(int *fd)
{
	struct sockaddr_in sa = { .sin_family = AF_INET,
				  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);

	*fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (*fd < 0 || bind(*fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    getsockname(*fd, (struct sockaddr *)&sa, &len) < 0) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		return -1;
	}
	return ntohs(sa.sin_port);
}

static int write_config(const struct replay_nodes *rn, const struct replay_nodes_config *c,
			struct replay_node *n, const char *id, int listen, int partner)
{
	const char *key, *value;
	FILE *f;

	snprintf(n->id, sizeof(n->id), "%s", id);
	if (snprintf(n->config, sizeof(n->config), "%s/%s.conf", rn->dir, id) >=
		    (int)sizeof(n->config) ||
	    snprintf(n->socket, sizeof(n->socket), "%s/%s.sock", rn->dir, id) >=
		    (int)sizeof(((struct sockaddr_un *)NULL)->sun_path))
		return -ENAMETOOLONG;
	f = fopen(n->config, "we");
	if (!f)
		return -errno;
	fprintf(f, "[node]\nid = %s\nlisten = 127.0.0.1:%d\npartner = 127.0.0.1:%d\n", id, listen,
		partner);
	fprintf(f, "socket = %s.sock\nstate_dir = %s\nlog_level = debug\n", id, id);
	fprintf(f, "[memory]\nsize = %" PRIu64 "\npage_size = %" PRIu32 "\n", c->memory_size,
		c->page_size);
	fprintf(f, "[store]\npath = shared/store\n");
	if (c->store_size)
		fprintf(f, "size = %" PRIu64 "\n", c->store_size);
	fprintf(f, "[failover]\nheartbeat_ms = %" PRIu32 "\ndead_after_ms = %" PRIu32 "\n",
		c->heartbeat_ms, c->dead_after_ms);
	fprintf(f, "request_timeout_ms = %" PRIu32 "\n", c->request_timeout_ms);
	value = trace_reader_header_get(c->reader, "solo");
	if (value)
		fprintf(f, "solo = %s\n", value);
	/* The recorder's flash and policies' performance: where its copies
	 * rested, and so what it had room for (node/vmm/MEDIA.md). */
	value = trace_reader_header_get(c->reader, "flash_size");
	if (value)
		fprintf(f, "[flash]\npath = %s/flash\nsize = %s\n", id, value);
	for (size_t i = 0; i < trace_reader_header_count(c->reader); i++) {
		char perf_key[80];
		const char *perf;

		trace_reader_header_entry(c->reader, i, &key, &value);
		if (strncmp(key, "policy.", 7) != 0 || strcmp(key, "policy.default") == 0)
			continue;
		fprintf(f, "[policy %s]\nblock_size = %s\n", key + 7, value);
		snprintf(perf_key, sizeof(perf_key), "performance.%s", key + 7);
		perf = trace_reader_header_get(c->reader, perf_key);
		if (perf)
			fprintf(f, "performance = %s\n", perf);
	}
	return fclose(f) == 0 ? 0 : -errno;
}

int replay_node_status(const struct replay_node *n, struct ftvm_node_status *ret)
{
	struct ftvm_client *c;
	int r = ftvm_connect(n->socket, &c);

	if (r < 0)
		return r;
	r = ftvm_status(c, ret);
	ftvm_disconnect(c);
	return r;
}

bool replay_node_state_is(const struct replay_node *n, const char *state)
{
	struct ftvm_node_status st;

	return replay_node_status(n, &st) == 0 && (!state || strcmp(st.state, state) == 0);
}

static int remove_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	return remove(path);
}

static bool exited(struct replay_node *n)
{
	int status;

	if (n->pid > 0 && waitpid(n->pid, &status, WNOHANG) == n->pid)
		n->pid = 0;
	return n->pid == 0;
}

/* One try in a new directory: 0, -EAGAIN when a node exited (its port was
 * taken between our pick and its bind), or an error said on stderr. With one
 * node, its partner's port stays held by us, so it dials nobody else. */
static int try_start(struct replay_nodes *rn, const struct replay_nodes_config *c,
		     const char *ftvmd)
{
	char log[PATH_MAX + 16], shared[PATH_MAX + 16];
	const char *tmp = getenv("TMPDIR");
	int port[2], hold[2], r = 0;
	uint64_t deadline;

	snprintf(rn->dir, sizeof(rn->dir), "%s/ftvm-replay.XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
	if (!mkdtemp(rn->dir)) {
		r = -errno;
		fprintf(stderr, "ftvmctl: trace replay: cannot make a temporary directory: %s\n",
			strerror(-r));
		rn->dir[0] = '\0';
		return r;
	}
	snprintf(shared, sizeof(shared), "%s/shared", rn->dir);
	mkdir(shared, 0750);
	port[0] = reserve_port(&hold[0]);
	port[1] = reserve_port(&hold[1]);
	if (port[0] < 0 || port[1] < 0)
		r = -EADDRNOTAVAIL;
	if (r == 0)
		r = write_config(rn, c, &rn->node[0], c->ids[0], port[0], port[1]);
	if (r == 0 && rn->n == 2)
		r = write_config(rn, c, &rn->node[1], c->ids[1], port[1], port[0]);
	for (size_t i = 0; r == 0 && i < rn->n; i++) {
		snprintf(log, sizeof(log), "%s/%s.log", rn->dir, rn->node[i].id);
		close(hold[i]);
		hold[i] = -1;
		r = ftvmd_spawn(ftvmd, rn->node[i].config, log, &rn->node[i].pid);
	}
	rn->partner_port_fd = hold[1];
	if (hold[0] >= 0)
		close(hold[0]);
	if (r < 0) {
		fprintf(stderr, "ftvmctl: trace replay: cannot start ftvmd: %s\n", strerror(-r));
		return r;
	}
	deadline = clock_now_ms() + START_TIMEOUT_MS;
	for (size_t i = 0; i < rn->n; i++)
		while (!replay_node_state_is(&rn->node[i], rn->n == 2 ? "active" : NULL)) {
			if (exited(&rn->node[0]) || (rn->n == 2 && exited(&rn->node[1])))
				return -EAGAIN;
			if (clock_now_ms() > deadline) {
				fprintf(stderr,
					"ftvmctl: trace replay: the fresh node %s did not come up "
					"within %u ms (its log: %s/%s.log)\n",
					rn->node[i].id, START_TIMEOUT_MS, rn->dir, rn->node[i].id);
				return -ETIMEDOUT;
			}
			replay_sleep_ms(20);
		}
	rn->listen_port = port[0];
	return 0;
}

void replay_nodes_stop(struct replay_nodes *rn, bool keep)
{
	for (size_t i = 0; i < rn->n; i++) {
		int status;

		if (rn->node[i].pid <= 0)
			continue;
		kill(rn->node[i].pid, SIGTERM);
		for (int t = 0; t < 500 && waitpid(rn->node[i].pid, &status, WNOHANG) == 0; t++)
			replay_sleep_ms(10);
		if (kill(rn->node[i].pid, 0) == 0) {
			kill(rn->node[i].pid, SIGKILL);
			waitpid(rn->node[i].pid, &status, 0);
		}
		rn->node[i].pid = 0;
	}
	if (rn->partner_port_fd >= 0)
		close(rn->partner_port_fd);
	rn->partner_port_fd = -1;
	if (rn->dir[0] && !keep)
		nftw(rn->dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
	else if (rn->dir[0])
		fprintf(stderr, "ftvmctl: trace replay: kept %s\n", rn->dir);
	rn->dir[0] = '\0';
}

int replay_nodes_start(struct replay_nodes *rn, const struct replay_nodes_config *c)
{
	char ftvmd[PATH_MAX];
	int r;

	*rn = (struct replay_nodes){ .n = c->n, .partner_port_fd = -1 };
	r = ftvmd_find(c->ftvmd, ftvmd, sizeof(ftvmd));
	if (r < 0) {
		fprintf(stderr, "ftvmctl: trace replay: cannot find ftvmd (give --ftvmd PATH)\n");
		return r;
	}
	for (int attempt = 0; attempt < START_ATTEMPTS; attempt++) {
		r = try_start(rn, c, ftvmd);
		if (r != -EAGAIN)
			break;
		replay_nodes_stop(rn, false);
	}
	if (r == -EAGAIN)
		fprintf(stderr, "ftvmctl: trace replay: the fresh node exited at start, %d times\n",
			START_ATTEMPTS);
	return r;
}
