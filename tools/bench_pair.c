/* Starting a pair of ftvmd for a benchmark; see bench_pair.h. */
#include "bench_pair.h"

#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "free_port.h"
#include "keyfile.h"

void bench_default_ftvmd(const char *argv0, char *out, size_t out_len)
{
	char self[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);

	if (n > 0)
		self[n] = '\0';
	else
		snprintf(self, sizeof(self), "%s", argv0);
	snprintf(out, out_len, "%s/../node/ftvmd", dirname(self));
}

static int write_config(const struct bench_pair_env *env, const struct bench_pair *pair, int i,
			uint16_t port, uint16_t partner)
{
	char path[PATH_MAX + 16];
	const char id = (char)('a' + i);
	FILE *f;

	snprintf(path, sizeof(path), "%s/%c.conf", pair->dir, id);
	f = fopen(path, "we");
	if (!f)
		return -errno;
	fprintf(f,
		"# written by ftvm-bench-vmm\n"
		"[node]\n"
		"id = %c\n"
		"listen = %s:%u\n"
		"partner = %s:%u\n"
		"key_file = pair.key\n"
		"%s%s%s"
		"%s%s%s"
		"socket = %c.sock\n"
		"state_dir = %c\n"
		"[memory]\n"
		"size = %s\n"
		"[store]\n"
		"path = shared/store\n"
		"[failover]\n"
		"heartbeat_ms = 100\n"
		"dead_after_ms = 2000\n"
		"[policy big]\n"
		"block_size = 64K\n",
		id, env->addr, port, env->addr, partner, env->transport ? "transport = " : "",
		env->transport ? env->transport : "", env->transport ? "\n" : "",
		pair->ack ? "ack = " : "", pair->ack ? pair->ack : "", pair->ack ? "\n" : "", id,
		id, pair->memory);
	if (pair->extra[i])
		fputs(pair->extra[i], f);
	if (env->trace)
		fprintf(f, "[trace]\npath = %c.trace\n", id);
	if (fclose(f) != 0)
		return -errno;
	return 0;
}

int bench_pair_connect(struct bench_pair *pair, int i, uint64_t deadline, struct ftvm_client **ret)
{
	int r;

	for (;;) {
		r = ftvm_connect(pair->sock[i], ret);
		if (r == 0)
			return 0;
		if (bench_proc_exited(&pair->nodes[i]))
			return -ECHILD;
		if (clock_now_ms() >= deadline) {
			fprintf(stderr, "node %s does not serve on %s after %d ms: %s\n",
				pair->nodes[i].name, pair->sock[i], BENCH_START_DEADLINE_MS,
				ftvm_strerror(r));
			return r;
		}
		bench_sleep_ms(10);
	}
}

static bool linked(const struct ftvm_node_status *st)
{
	return strcmp(st->partner_link, "up") == 0 && strcmp(st->state, "active") == 0;
}

int bench_pair_start(const struct bench_pair_env *env, struct bench_pair *pair)
{
	struct ftvm_client *c[2] = { NULL, NULL };
	struct ftvm_node_status st[2];
	char key[PATH_MAX + 16], why[PATH_MAX + 128];
	uint16_t port[2];
	uint64_t started, deadline;
	int r;

	for (int i = 0; i < 2; i++) {
		r = free_port_pick(&port[i]);
		if (r < 0) {
			fprintf(stderr, "no free port: %s\n", strerror(-r));
			return r;
		}
	}
	/* The pair proves its key, as a deployed pair must. */
	snprintf(key, sizeof(key), "%s/pair.key", pair->dir);
	r = keyfile_generate(key, why, sizeof(why));
	if (r < 0) {
		fprintf(stderr, "%s\n", why);
		return r;
	}
	for (int i = 0; i < 2; i++) {
		char conf[PATH_MAX + 16];
		char *argv[] = { (char *)env->ftvmd, "--config", conf, NULL };

		r = write_config(env, pair, i, port[i], port[1 - i]);
		if (r < 0) {
			fprintf(stderr, "cannot write %s/%c.conf: %s\n", pair->dir, 'a' + i,
				strerror(-r));
			return r;
		}
		snprintf(conf, sizeof(conf), "%s/%c.conf", pair->dir, 'a' + i);
		snprintf(pair->sock[i], sizeof(pair->sock[i]), "%s/%c.sock", pair->dir, 'a' + i);
		snprintf(pair->nodes[i].log, sizeof(pair->nodes[i].log), "%s/%c.log", pair->dir,
			 'a' + i);
		r = bench_proc_spawn(&pair->nodes[i], argv);
		if (r < 0) {
			fprintf(stderr, "cannot start %s: %s\n", env->ftvmd, strerror(-r));
			return r;
		}
	}

	started = clock_now_ms();
	deadline = started + BENCH_START_DEADLINE_MS;
	for (int i = 0; i < 2; i++) {
		r = bench_pair_connect(pair, i, deadline, &c[i]);
		if (r < 0)
			goto out;
	}
	for (;;) {
		for (int i = 0; i < 2; i++) {
			r = ftvm_status(c[i], &st[i]);
			if (r < 0) {
				fprintf(stderr, "status of node %s: %s: %s\n", pair->nodes[i].name,
					ftvm_strerror(r), ftvm_last_error(c[i]));
				goto out;
			}
		}
		if (linked(&st[0]) && linked(&st[1]))
			break;
		if (clock_now_ms() >= deadline) {
			fprintf(stderr,
				"the %s did not link within %d ms: a is %s (link %s: %s), b is %s "
				"(link %s: %s); logs in %s\n",
				pair->label, BENCH_START_DEADLINE_MS, st[0].state,
				st[0].partner_link, st[0].reason, st[1].state, st[1].partner_link,
				st[1].reason, pair->dir);
			r = -ETIMEDOUT;
			goto out;
		}
		bench_sleep_ms(10);
	}
	printf("%s: ftvmd %s, a pid %d, b pid %d, linked in %llu ms, transport %s, ack %s, page "
	       "%u bytes, in %s\n",
	       pair->label, env->ftvmd, (int)pair->nodes[0].pid, (int)pair->nodes[1].pid,
	       (unsigned long long)(clock_now_ms() - started), st[0].transport, st[0].ack,
	       st[0].page_size, pair->dir);
	r = 0;
out:
	ftvm_disconnect(c[0]);
	ftvm_disconnect(c[1]);
	return r;
}

void bench_pair_stop(struct bench_pair *pair)
{
	for (int i = 0; i < 2; i++)
		if (!bench_proc_exited(&pair->nodes[i]))
			bench_proc_stop(&pair->nodes[i]);
}
