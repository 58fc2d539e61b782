/* ftvmctl drill (drill.h). The victim is the node the fault hits, the
 * survivor the other; for a cut, the victim is the node that must fence
 * itself (the larger node id, node/ha/HA.md "Who survives").
 *
 * The workload: one allocation homed on each node, every page written once
 * before the fault, then writes through the survivor alone, round robin, for
 * as long as the fault lasts. The first one that the survivor acknowledges on
 * the victim's allocation marks the takeover. Each page's last acknowledged
 * write is remembered by its sequence number, from which its bytes follow.
 * With --volume, block writes to a volume over NBD go beside it
 * (drill_volume.c), numbered from the same sequence. */
#define _GNU_SOURCE /* sigabbrev_np */
#include "drill.h"

#include <errno.h>
#include <inttypes.h>
#include <libgen.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>

#include "clock.h"
#include "config.h"
#include "drill_volume.h"
#include "ftvm.h"
#include "ftvmd_spawn.h"

#define EXIT_DONE 0
#define EXIT_FAILED 1
#define EXIT_USAGE 2
#define EXIT_UNREACHABLE 3

struct drill_node {
	struct ftvm_config *cfg;
	char config_path[PATH_MAX];
	struct ftvm_client *c; /* NULL while it is down */
	char unit[96];	       /* its systemd unit when it runs under one, else "" */
};

struct drill_alloc {
	struct ftvm_alloc_info info;
	uint64_t *acked; /* per page: the sequence number of its last acked write */
	uint32_t next;	 /* the next page the workload writes */
};

struct drill {
	const struct drill_options *o;
	struct drill_node victim, survivor;
	struct drill_alloc alloc[2]; /* [0] homed on the victim, [1] on the survivor */
	uint8_t *block;
	uint64_t seq;
	uint64_t t0;
	int64_t detect_ms, takeover_ms;
	uint64_t acked_during, checked, lost;
	/* Writes through the survivor that failed during the fault (ha/HA.md,
	 * "Calls through the failover window": none should), the first's why. */
	uint64_t failed_during;
	char first_failure[256];
	uint64_t resync_pages, resync_ms, epoch_before, epoch_after;
	bool equal;
	uint64_t busy;		  /* pages verify left uncompared: other clients writing them */
	struct drill_volume *vol; /* --volume: its workload; NULL without */
	/* A line of progress on a terminal (not with --json): what the drill
	 * does now, and when the line was last written. */
	bool live;
	const char *phase;
	uint64_t start_ms, progress_ms, acked_before;
};

static const char *const kind_names[] = {
	[DRILL_KILL] = "kill",
	[DRILL_HANG] = "hang",
	[DRILL_CUT] = "cut",
	[DRILL_RESTART] = "restart",
};

/* A progress line is on the terminal now (progress()): a message goes on a
 * line of its own. */
static bool progress_shown;

static void progress_clear(void)
{
	if (progress_shown) {
		printf("\r\033[K");
		fflush(stdout);
		progress_shown = false;
	}
}

int drill_failed(const char *fmt, ...)
{
	va_list ap;

	progress_clear();
	fputs("ftvmctl: drill: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return EXIT_FAILED;
}

void drill_sleep_ms(unsigned ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L };

	nanosleep(&ts, NULL);
}

static uint64_t elapsed(const struct drill *d)
{
	return clock_now_ms() - d->t0;
}

void drill_fill(uint8_t *buf, size_t len, uint64_t seq)
{
	uint64_t x = seq * 0x9e3779b97f4a7c15ull + 1;

	for (size_t i = 0; i < len; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
		buf[i] = (uint8_t)x;
	}
}

/* The progress line, rewritten at most every PROGRESS_MS unless the phase
 * changed: the phase, the writes acknowledged so far, the time since the
 * drill began. */
#define PROGRESS_MS 100

static void progress(struct drill *d, const char *phase)
{
	uint64_t now = clock_now_ms();

	if (!d->live || (phase == d->phase && now - d->progress_ms < PROGRESS_MS))
		return;
	d->phase = phase;
	d->progress_ms = now;
	printf("\r\033[Kdrill %s %s: %s; %" PRIu64 " writes acknowledged; %.1f s",
	       kind_names[d->o->kind], d->victim.cfg->id, phase, d->acked_before + d->acked_during,
	       (double)(now - d->start_ms) / 1000);
	fflush(stdout);
	progress_shown = true;
}

/* ---- the nodes ---- */

static int load_node(struct drill_node *n, const char *path)
{
	char err[512];
	int r;

	snprintf(n->config_path, sizeof(n->config_path), "%s", path);
	r = config_load(path, &n->cfg, err, sizeof(err));
	if (r < 0) {
		fprintf(stderr, "ftvmctl: %s\n", err[0] ? err : strerror(-r));
		return EXIT_USAGE;
	}
	return EXIT_DONE;
}

static int status_of(struct drill_node *n, struct ftvm_node_status *st)
{
	if (!n->c && ftvm_connect(n->cfg->socket_path, &n->c) < 0)
		return -ENOTCONN;
	if (ftvm_status(n->c, st) == 0)
		return 0;
	ftvm_disconnect(n->c); /* the process went: connect afresh next time */
	n->c = NULL;
	return -ENOTCONN;
}

static bool serving(const struct ftvm_node_status *st, const char *state)
{
	return strcmp(st->state, state) == 0;
}

/* A node under systemd is driven through its unit (systemd would restart
 * it behind our back otherwise): /proc/PID/cgroup names the unit. */
static void find_unit(struct drill_node *n, int64_t pid)
{
	char path[64], line[512], want[96];
	FILE *f;

	n->unit[0] = '\0';
	snprintf(path, sizeof(path), "/proc/%" PRId64 "/cgroup", pid);
	snprintf(want, sizeof(want), "/ftvmd@%s.service", n->cfg->id);
	f = fopen(path, "re");
	if (!f)
		return;
	while (fgets(line, sizeof(line), f))
		if (strstr(line, want))
			snprintf(n->unit, sizeof(n->unit), "%s", want + 1);
	fclose(f);
}

static int run_systemctl(const char *verb, const char *arg, const char *unit)
{
	pid_t pid = fork();
	int status;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		if (arg)
			execlp("systemctl", "systemctl", verb, arg, unit, (char *)NULL);
		else
			execlp("systemctl", "systemctl", verb, unit, (char *)NULL);
		_exit(127);
	}
	if (waitpid(pid, &status, 0) < 0)
		return -errno;
	return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

static int signal_node(struct drill_node *n, int64_t pid, int sig)
{
	char arg[32];

	if (n->unit[0]) {
		snprintf(arg, sizeof(arg), "--signal=%s", sigabbrev_np(sig));
		return run_systemctl("kill", arg, n->unit);
	}
	return kill((pid_t)pid, sig) < 0 ? -errno : 0;
}

/* Starts the node again: its unit, or ftvmd detached, its output appended
 * to <config dir>/<id>.log. */
static int start_node(const struct drill *d, struct drill_node *n)
{
	char ftvmd[PATH_MAX], log[PATH_MAX + 64], dir[PATH_MAX];
	int r;

	if (n->unit[0])
		return run_systemctl("start", NULL, n->unit);
	r = ftvmd_find(d->o->ftvmd, ftvmd, sizeof(ftvmd));
	if (r < 0) {
		drill_failed("cannot find ftvmd to start %s again (give --ftvmd PATH)", n->cfg->id);
		return r;
	}
	snprintf(dir, sizeof(dir), "%s", n->config_path);
	snprintf(log, sizeof(log), "%s/%s.log", dirname(dir), n->cfg->id);
	return ftvmd_spawn(ftvmd, n->config_path, log, NULL);
}

static bool gone(int64_t pid)
{
	return kill((pid_t)pid, 0) < 0 && errno == ESRCH;
}

/* ---- the workload ---- */

static int write_next(struct drill *d, struct drill_alloc *a)
{
	uint32_t page = a->next;
	uint64_t seq = ++d->seq;
	int r;

	drill_fill(d->block, a->info.block_size, seq);
	r = ftvm_write_page(d->survivor.c, a->info.guid, page, d->block, a->info.block_size, NULL);
	if (r < 0) {
		if (!d->failed_during++)
			snprintf(d->first_failure, sizeof(d->first_failure), "%s page %u: %s",
				 a->info.guid, page, ftvm_last_error(d->survivor.c));
		return r;
	}
	a->acked[page] = seq;
	a->next = (page + 1) % a->info.pages;
	return 0;
}

static int setup_workload(struct drill *d)
{
	struct drill_node *home[2] = { &d->victim, &d->survivor };
	uint64_t size = (uint64_t)d->o->pages * d->victim.cfg->page_size;

	for (int i = 0; i < 2; i++) {
		struct drill_alloc *a = &d->alloc[i];
		int r = ftvm_alloc(home[i]->c, size, NULL, false, NULL, 0, &a->info);

		if (r < 0)
			return drill_failed("allocating on %s: %s", home[i]->cfg->id,
					    ftvm_last_error(home[i]->c));
		a->acked = calloc(a->info.pages, sizeof(*a->acked));
		if (!a->acked)
			return drill_failed("out of memory");
	}
	d->block = malloc(d->alloc[0].info.block_size);
	if (!d->block)
		return drill_failed("out of memory");
	/* Before the fault: every page once, from the node it is homed on. */
	for (int i = 0; i < 2; i++)
		for (uint32_t p = 0; p < d->alloc[i].info.pages; p++) {
			struct drill_alloc *a = &d->alloc[i];
			uint64_t seq = ++d->seq;

			drill_fill(d->block, a->info.block_size, seq);
			if (ftvm_write_page(home[i]->c, a->info.guid, p, d->block,
					    a->info.block_size, NULL) < 0)
				return drill_failed("writing %s page %u before the fault: %s",
						    a->info.guid, p, ftvm_last_error(home[i]->c));
			a->acked[p] = seq;
			d->acked_before++;
			progress(d, "writing before the fault");
		}
	return EXIT_DONE;
}

/* ---- the fault ---- */

static int start_fault(struct drill *d, int64_t pid)
{
	struct drill_node *v = &d->victim;
	int r = 0;

	d->t0 = clock_now_ms();
	switch (d->o->kind) {
	case DRILL_KILL:
		r = signal_node(v, pid, SIGKILL);
		break;
	case DRILL_HANG:
		r = signal_node(v, pid, SIGSTOP);
		break;
	case DRILL_CUT:
		r = ftvm_drill_cut_link(d->survivor.c, d->o->seconds * 1000);
		break;
	case DRILL_RESTART:
		r = signal_node(v, pid, SIGTERM);
		break;
	}
	if (r < 0 && d->o->kind == DRILL_CUT) /* the node said why (not an admin...) */
		return drill_failed("cannot cut %s: %s (%s)", v->cfg->id, strerror(-r),
				    ftvm_last_error(d->survivor.c));
	if (r < 0)
		return drill_failed("cannot %s %s: %s", kind_names[d->o->kind], v->cfg->id,
				    strerror(-r));
	if (v->c && d->o->kind != DRILL_CUT) {
		ftvm_disconnect(v->c);
		v->c = NULL;
	}
	if (d->vol)
		drill_volume_fault(d->vol);
	return EXIT_DONE;
}

/* Writes through the survivor until the fault is over and, unless it was
 * shorter than dead_after_ms, the survivor took over. */
static int ride_out(struct drill *d, int64_t pid, uint64_t takeovers_before)
{
	uint64_t fault_ms = (uint64_t)d->o->seconds * 1000;
	uint64_t limit = (uint64_t)d->o->timeout_s * 1000 + fault_ms;
	bool resumed = d->o->kind != DRILL_HANG, restarted = d->o->kind != DRILL_RESTART;
	bool expect_takeover = d->o->kind == DRILL_KILL || d->o->kind == DRILL_RESTART ||
			       fault_ms > d->survivor.cfg->dead_after_ms;
	struct ftvm_node_status st = { 0 };

	while (elapsed(d) < limit) {
		progress(d, d->takeover_ms >= 0 ? "taken over, writing through the survivor"
			    : d->detect_ms >= 0 ? "fault seen, waiting for the takeover"
						: "fault, writing through the survivor");
		if (status_of(&d->survivor, &st) == 0 && d->detect_ms < 0 &&
		    strcmp(st.partner_link, "down") == 0)
			d->detect_ms = (int64_t)elapsed(d);
		if (write_next(d, &d->alloc[0]) == 0) {
			d->acked_during++;
			if (d->takeover_ms < 0 && st.takeovers > takeovers_before)
				d->takeover_ms = (int64_t)elapsed(d);
		} else {
			drill_sleep_ms(5);
		}
		if (write_next(d, &d->alloc[1]) == 0)
			d->acked_during++;
		if (d->vol)
			drill_volume_step(d->vol, &d->seq);
		if (!resumed && elapsed(d) >= fault_ms) {
			signal_node(&d->victim, pid, SIGCONT);
			resumed = true;
		}
		if (!restarted && gone(pid)) {
			if (start_node(d, &d->victim) < 0)
				return drill_failed("cannot start %s again", d->victim.cfg->id);
			restarted = true;
		}
		if ((d->takeover_ms >= 0 || !expect_takeover) && resumed && restarted &&
		    elapsed(d) >= fault_ms && d->acked_during >= 8 &&
		    (!d->vol || drill_volume_acked_during(d->vol) >= 8))
			return EXIT_DONE;
	}
	return drill_failed("no takeover within %u s: %s still refuses the victim's pages",
			    d->o->timeout_s, d->survivor.cfg->id);
}

/* Both active at one epoch again (the victim resynced). */
static int wait_whole(struct drill *d)
{
	uint64_t deadline = clock_now_ms() + (uint64_t)d->o->timeout_s * 1000;
	struct ftvm_node_status sv, ss;

	if (d->o->kind == DRILL_KILL && start_node(d, &d->victim) < 0)
		return drill_failed("cannot start %s again", d->victim.cfg->id);
	while (clock_now_ms() < deadline) {
		progress(d, "waiting for the pair to be whole");
		if (status_of(&d->victim, &sv) == 0 && status_of(&d->survivor, &ss) == 0 &&
		    serving(&sv, "active") && serving(&ss, "active") && sv.epoch == ss.epoch) {
			d->resync_pages = ss.last_resync_pages;
			d->resync_ms = ss.last_resync_ms;
			d->epoch_after = ss.epoch;
			return EXIT_DONE;
		}
		drill_sleep_ms(20);
	}
	return drill_failed("the pair is not whole again within %u s", d->o->timeout_s);
}

/* ---- the checks ---- */

/* A page that is not the last acknowledged write's counts as lost, and so
 * does one that cannot be read once the pair is whole; which of the two,
 * and why, is said. */
static void check_node(struct drill *d, struct drill_node *n)
{
	uint8_t *got = malloc(d->alloc[0].info.block_size);

	for (int i = 0; got && i < 2; i++) {
		struct drill_alloc *a = &d->alloc[i];

		for (uint32_t p = 0; p < a->info.pages; p++) {
			uint32_t crc;
			int r;

			d->checked++;
			drill_fill(d->block, a->info.block_size, a->acked[p]);
			r = ftvm_read_page(n->c, a->info.guid, p, got, a->info.block_size, NULL,
					   &crc);
			if (r < 0)
				fprintf(stderr,
					"ftvmctl: drill: lost on %s: %s page %u: cannot read it: %s\n",
					n->cfg->id, a->info.guid, p, ftvm_last_error(n->c));
			else if (memcmp(got, d->block, a->info.block_size) != 0)
				fprintf(stderr,
					"ftvmctl: drill: lost on %s: %s page %u: it holds a block with "
					"CRC-32C 0x%08x, not write #%" PRIu64 "'s\n",
					n->cfg->id, a->info.guid, p, crc, a->acked[p]);
			else
				continue;
			d->lost++;
		}
	}
	free(got);
}

/* Other clients may be writing meanwhile: verify compares a page with a
 * change in flight once it landed, and counts the pages it never saw at
 * rest (node/vmm/VMM.md, "Verify while clients write"). */
static void verify_pair(struct drill *d)
{
	struct ftvm_verify v;

	if (ftvm_verify(d->survivor.c, &v) < 0) {
		fprintf(stderr, "ftvmctl: drill: verify on %s: %s\n", d->survivor.cfg->id,
			ftvm_last_error(d->survivor.c));
		return;
	}
	d->equal = v.equal;
	d->busy = v.busy;
	for (size_t i = 0; i < v.n_differences; i++)
		fprintf(stderr, "ftvmctl: drill: verify: %s\n", v.differences[i]);
	ftvm_verify_free(&v);
}

static void check(struct drill *d)
{
	check_node(d, &d->survivor);
	check_node(d, &d->victim);
	verify_pair(d);
	for (int i = 0; i < 2; i++)
		if (ftvm_free(d->survivor.c, d->alloc[i].info.guid) < 0)
			fprintf(stderr, "ftvmctl: drill: cannot free %s: %s\n",
				d->alloc[i].info.guid, ftvm_last_error(d->survivor.c));
}

static void report(const struct drill *d)
{
	if (d->o->json) {
		json_object *o = json_object_new_object();

		json_object_object_add(o, "drill", json_object_new_string(kind_names[d->o->kind]));
		json_object_object_add(o, "node", json_object_new_string(d->victim.cfg->id));
		json_object_object_add(o, "survivor", json_object_new_string(d->survivor.cfg->id));
		json_object_object_add(o, "detect_ms", json_object_new_int64(d->detect_ms));
		json_object_object_add(o, "takeover_ms", json_object_new_int64(d->takeover_ms));
		json_object_object_add(o, "checked", json_object_new_uint64(d->checked));
		json_object_object_add(o, "lost", json_object_new_uint64(d->lost));
		json_object_object_add(o, "acked_during", json_object_new_uint64(d->acked_during));
		json_object_object_add(o, "failed_during",
				       json_object_new_uint64(d->failed_during));
		json_object_object_add(o, "resync_pages", json_object_new_uint64(d->resync_pages));
		json_object_object_add(o, "resync_ms", json_object_new_uint64(d->resync_ms));
		json_object_object_add(o, "epoch_before", json_object_new_uint64(d->epoch_before));
		json_object_object_add(o, "epoch_after", json_object_new_uint64(d->epoch_after));
		json_object_object_add(o, "equal", json_object_new_boolean(d->equal));
		json_object_object_add(o, "verify_busy", json_object_new_uint64(d->busy));
		if (d->vol)
			json_object_object_add(o, "volume", drill_volume_json(d->vol));
		printf("%s\n", json_object_to_json_string_ext(o, JSON_C_TO_STRING_PLAIN));
		json_object_put(o);
		return;
	}
	printf("drill %s %s (survivor %s%s%s)\n", kind_names[d->o->kind], d->victim.cfg->id,
	       d->survivor.cfg->id, d->victim.unit[0] ? ", under systemd " : "", d->victim.unit);
	if (d->takeover_ms >= 0)
		printf("  detected in %" PRId64 " ms, taken over in %" PRId64 " ms (epoch %" PRIu64
		       " -> %" PRIu64 ")\n",
		       d->detect_ms, d->takeover_ms, d->epoch_before, d->epoch_after);
	else
		printf("  no takeover: the fault was shorter than dead_after_ms (epoch %" PRIu64
		       ")\n",
		       d->epoch_after);
	printf("  %" PRIu64 " writes acknowledged during the fault, %" PRIu64 " failed%s%s\n",
	       d->acked_during, d->failed_during, d->failed_during ? ", the first: " : "",
	       d->first_failure);
	printf("  resync: %" PRIu64 " pages in %" PRIu64 " ms\n", d->resync_pages, d->resync_ms);
	printf("  checked %" PRIu64 " pages on both nodes: %" PRIu64 " lost\n", d->checked,
	       d->lost - (d->vol ? drill_volume_lost(d->vol) : 0));
	if (d->vol)
		drill_volume_print(d->vol);
	printf("  verify: %s", d->equal ? "equal" : "NOT equal");
	if (d->busy)
		printf(", %" PRIu64 " pages busy (being written by other clients)", d->busy);
	printf("\n");
}

/* ---- putting it together ---- */

void drill_partner_config_path(const char *config_path, const char *partner_id, char *buf,
			       size_t len)
{
	char dir[PATH_MAX];

	snprintf(dir, sizeof(dir), "%s", config_path);
	snprintf(buf, len, "%s/%s.conf", dirname(dir), partner_id);
}

/* Both active at one epoch, now or within a few dead_after_ms: the two
 * views of a pair that just failed over, or is ending a resync, differ for
 * a moment (a survivor says solo while the other has not yet read, in the
 * store, that it must fence itself). s1 and s2 are the last statuses. */
static bool whole_soon(struct drill_node *n1, struct ftvm_node_status *s1, struct drill_node *n2,
		       struct ftvm_node_status *s2)
{
	uint64_t deadline = clock_now_ms() + 4ull * n1->cfg->dead_after_ms + 1000;

	for (;;) {
		if (serving(s1, "active") && serving(s2, "active") && s1->epoch == s2->epoch)
			return true;
		if (clock_now_ms() >= deadline)
			return false;
		drill_sleep_ms(20);
		if (status_of(n1, s1) < 0 || status_of(n2, s2) < 0)
			return false;
	}
}

static int open_pair(struct drill *d)
{
	const struct drill_options *o = d->o;
	struct drill_node first = { 0 }, second = { 0 };
	struct ftvm_node_status s1, s2;
	char path[PATH_MAX];
	int r;

	r = load_node(&first, o->config_path);
	if (r != EXIT_DONE)
		return r;
	if (status_of(&first, &s1) < 0) {
		fprintf(stderr, "ftvmctl: cannot reach the node at %s\n", first.cfg->socket_path);
		config_free(first.cfg);
		return EXIT_UNREACHABLE;
	}
	if (o->partner_config)
		snprintf(path, sizeof(path), "%s", o->partner_config);
	else
		drill_partner_config_path(o->config_path, s1.partner_id, path, sizeof(path));
	r = load_node(&second, path);
	if (r == EXIT_DONE && status_of(&second, &s2) < 0) {
		fprintf(stderr, "ftvmctl: cannot reach %s's partner at %s\n", first.cfg->id,
			second.cfg->socket_path);
		r = EXIT_UNREACHABLE;
	}
	if (r == EXIT_DONE && !whole_soon(&first, &s1, &second, &s2))
		r = drill_failed("the pair is not whole: %s is %s at epoch %" PRIu64
				 " (%s), %s is %s at "
				 "epoch %" PRIu64 " (%s)",
				 first.cfg->id, s1.state, s1.epoch, s1.reason, second.cfg->id,
				 s2.state, s2.epoch, s2.reason);
	if (r == EXIT_DONE) {
		bool first_victim = o->kind == DRILL_CUT ? strcmp(first.cfg->id, second.cfg->id) > 0
							 : strcmp(o->node, first.cfg->id) == 0;

		if (o->kind != DRILL_CUT && !first_victim && strcmp(o->node, second.cfg->id) != 0)
			r = drill_failed("no node '%s' in this pair (%s, %s)", o->node,
					 first.cfg->id, second.cfg->id);
		d->victim = first_victim ? first : second;
		d->survivor = first_victim ? second : first;
		d->epoch_before = s1.epoch;
		find_unit(&d->victim, first_victim ? s1.pid : s2.pid);
		return r;
	}
	ftvm_disconnect(first.c);
	ftvm_disconnect(second.c);
	config_free(first.cfg);
	config_free(second.cfg);
	return r;
}

int drill_run(const struct drill_options *o)
{
	struct drill d = { .o = o,
			   .detect_ms = -1,
			   .takeover_ms = -1,
			   .live = !o->json && isatty(STDOUT_FILENO),
			   .start_ms = clock_now_ms() };
	struct ftvm_node_status st;
	uint64_t takeovers;
	int64_t pid;
	int r;

	r = open_pair(&d);
	if (r != EXIT_DONE)
		goto out;
	r = status_of(&d.victim, &st) < 0 ? EXIT_UNREACHABLE : EXIT_DONE;
	pid = st.pid;
	if (r == EXIT_DONE)
		r = status_of(&d.survivor, &st) < 0 ? EXIT_UNREACHABLE : EXIT_DONE;
	takeovers = st.takeovers;
	/* A volume that is not there, or a node without [nbd], is refused
	 * before anything is written. */
	if (r == EXIT_DONE && o->volume)
		r = drill_volume_open(o->volume, d.survivor.c, d.victim.cfg, d.survivor.cfg,
				      2 * o->pages, o->timeout_s * 1000, &d.vol);
	/* The volume's first round before the allocations are made: a write
	 * that fails here leaves none behind. */
	if (r == EXIT_DONE && d.vol)
		r = drill_volume_write_all(d.vol, &d.seq);
	if (r == EXIT_DONE)
		r = setup_workload(&d);
	if (r == EXIT_DONE)
		r = start_fault(&d, pid);
	if (r == EXIT_DONE)
		r = ride_out(&d, pid, takeovers);
	if (r == EXIT_DONE && d.vol)
		r = drill_volume_settle(d.vol, &d.seq, o->timeout_s * 1000);
	if (r == EXIT_DONE)
		r = wait_whole(&d);
	if (r == EXIT_DONE) {
		progress(&d, "checking every acknowledged write");
		check(&d);
		progress_clear(); /* the report takes its place */
		if (d.vol) {
			drill_volume_check(d.vol);
			d.lost += drill_volume_lost(d.vol);
		}
		report(&d);
		r = d.lost == 0 && d.equal && (!d.vol || drill_volume_flushed(d.vol)) ? EXIT_DONE
										      : EXIT_FAILED;
	}
out:
	progress_clear();
	for (int i = 0; i < 2; i++)
		free(d.alloc[i].acked);
	free(d.block);
	drill_volume_free(d.vol);
	ftvm_disconnect(d.victim.c);
	ftvm_disconnect(d.survivor.c);
	config_free(d.victim.cfg);
	config_free(d.survivor.cfg);
	return r;
}
