/* ftvmctl drill --volume NAME (drill_volume.h): block writes to a volume
 * over NBD through both nodes, kept going through the fault, then read back
 * from both.
 *
 * The volume is cut into slots spread evenly over it, one write of
 * WRITE_SIZE bytes each; every third starts UNALIGNED_SHIFT bytes into a
 * page, so it is a partial write of two pages (a write pointer on the node,
 * node/NBD.md). Two streams write the slots, alternately: stream 0 starts
 * on the victim's NBD endpoint, stream 1 on the survivor's, as a host with a
 * path to each controller would. A stream's write that fails (an error
 * reply, the connection gone, no reply in time) has an unknown outcome, as
 * on any disk: the stream drops its connection and, once the fault has
 * begun, reconnects to the survivor and writes that slot again, with new
 * bytes, before going on. Only acknowledged writes are recorded (a slot's
 * last one, by its sequence number), so a slot never holds bytes the drill
 * cannot name once the fault is settled.
 *
 * Every request runs on libnbd's state machine with a deadline
 * (nbd_aio_* and nbd_poll), not a blocking call: the drill's one thread
 * also resumes a hung victim (SIGCONT), which it could not do while blocked
 * on that victim's socket. */
#include "drill_volume.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <libnbd.h>

#include "clock.h"
#include "config.h"
#include "ftvm.h"

#define EXIT_FAILED 1

#define WRITE_SIZE 4096u
#define UNALIGNED_SHIFT 1500u
/* A slot's room: its write and the shift, rounded up to pages of 4 KiB. */
#define SLOT_MIN (2 * WRITE_SIZE)

enum {
	VICTIM,
	SURVIVOR
};

struct endpoint {
	const struct ftvm_config *cfg;
	char unix_path[PATH_MAX]; /* [nbd] socket, or "" */
	char host[256];		  /* [nbd] listen's, when there is no socket */
	char port[8];
	char desc[PATH_MAX + 16]; /* for messages: unix:PATH or tcp:HOST:PORT */
};

struct stream {
	int on;		      /* VICTIM or SURVIVOR: where its connection goes */
	struct nbd_handle *h; /* NULL: not connected */
	bool dropped;	      /* its last connection failed: the next is a reconnect */
	bool pending;	      /* its slot's last write failed: rewrite it first */
	uint32_t next, count; /* its slots are stream index + 2 * k, k < count */
};

struct slot {
	uint64_t offset;
	uint64_t acked; /* the sequence number of its last acknowledged write */
};

struct drill_volume {
	char name[FTVM_CLIENT_NAME_MAX + 1];
	uint64_t size;
	struct endpoint ep[2]; /* [VICTIM], [SURVIVOR] */
	struct stream st[2];
	struct slot *slots;
	uint32_t n_slots, unaligned;
	uint8_t *buf, *got;
	bool fault;
	uint32_t timeout_ms, victim_ms;
	uint64_t writes, acked_during, failed, retried, reconnects;
	uint64_t bytes_checked, mismatches;
	bool flushed;
	char first_failure[512];
};

/* libnbd's last error on this thread, for a message. */
static const char *nbd_why(void)
{
	const char *e = nbd_get_error();

	return e && e[0] ? e : "no reason given";
}

static int nbd_errno(void)
{
	int e = nbd_get_errno();

	return e > 0 ? -e : -EIO;
}

/* ---- endpoints and connections ---- */

/* The node's [nbd] socket, else its [nbd] listen (a wildcard address
 * reached on loopback: a drill runs beside the nodes it signals). */
static int endpoint_find(struct endpoint *ep, const struct ftvm_config *cfg)
{
	char host[256];
	uint16_t port;

	ep->cfg = cfg;
	if (cfg->nbd_socket_path) {
		snprintf(ep->unix_path, sizeof(ep->unix_path), "%s", cfg->nbd_socket_path);
		snprintf(ep->desc, sizeof(ep->desc), "unix:%s", ep->unix_path);
		return 0;
	}
	if (!cfg->nbd_listen)
		return drill_failed("%s serves no NBD: its config %s sets neither [nbd] socket nor "
				    "[nbd] listen, and drill --volume writes through both nodes "
				    "(node/NBD.md)",
				    cfg->id, cfg->path);
	if (config_parse_endpoint(cfg->nbd_listen, host, sizeof(host), &port) < 0)
		return drill_failed("%s: [nbd] listen '%s' is not host:port", cfg->id,
				    cfg->nbd_listen);
	if (strcmp(host, "0.0.0.0") == 0 || strcmp(host, "*") == 0)
		snprintf(host, sizeof(host), "127.0.0.1");
	else if (strcmp(host, "::") == 0)
		snprintf(host, sizeof(host), "::1");
	snprintf(ep->host, sizeof(ep->host), "%s", host);
	snprintf(ep->port, sizeof(ep->port), "%u", port);
	snprintf(ep->desc, sizeof(ep->desc), "tcp:%s", cfg->nbd_listen);
	return 0;
}

/* Runs h until the command cookie completes (cookie 0: until h is
 * connected), it fails, or the deadline passes (-ETIMEDOUT). */
static int await(struct nbd_handle *h, int64_t cookie, uint64_t deadline)
{
	for (;;) {
		uint64_t now;
		int r;

		if (cookie) {
			r = nbd_aio_command_completed(h, (uint64_t)cookie);
			if (r == 1)
				return 0;
			if (r < 0)
				return nbd_errno();
		} else if (nbd_aio_is_ready(h)) {
			return 0;
		} else if (nbd_aio_is_dead(h) || nbd_aio_is_closed(h)) {
			return nbd_errno();
		}
		now = clock_now_ms();
		if (now >= deadline)
			return -ETIMEDOUT;
		if (nbd_poll(h, (int)(deadline - now)) < 0)
			return nbd_errno();
	}
}

/* The deadline of a request through node `on` (VICTIM or SURVIVOR): once
 * the fault has begun the victim gets dead_after_ms, after which the
 * survivor will have given up on it too. */
static uint64_t deadline_for(const struct drill_volume *v, int on)
{
	return clock_now_ms() + (v->fault && on == VICTIM ? v->victim_ms : v->timeout_ms);
}

static const char *why(int r)
{
	return r == -ETIMEDOUT ? "no answer in time" : nbd_why();
}

/* A connection to the volume's export on node `on`; NULL after saying why
 * into why_buf. */
static struct nbd_handle *conn_open(struct drill_volume *v, int on, char *why_buf, size_t len)
{
	const struct endpoint *ep = &v->ep[on];
	struct nbd_handle *h = nbd_create();
	int r;

	if (!h) {
		snprintf(why_buf, len, "%s", nbd_why());
		return NULL;
	}
	r = nbd_set_export_name(h, v->name);
	if (r == 0)
		r = ep->unix_path[0] ? nbd_aio_connect_unix(h, ep->unix_path)
				     : nbd_aio_connect_tcp(h, ep->host, ep->port);
	if (r == 0)
		r = await(h, 0, deadline_for(v, on));
	else
		r = nbd_errno();
	if (r == 0 && nbd_get_size(h) != (int64_t)v->size) {
		snprintf(why_buf, len, "its export '%s' is %" PRId64 " bytes, not %" PRIu64,
			 v->name, nbd_get_size(h), v->size);
		nbd_close(h);
		return NULL;
	}
	if (r < 0) {
		snprintf(why_buf, len, "%s", why(r));
		nbd_close(h);
		return NULL;
	}
	return h;
}

/* A clean goodbye to a node that is up; a connection to one that may not
 * be is only closed. */
static void conn_close(struct nbd_handle *h, bool up)
{
	if (h && up)
		nbd_shutdown(h, 0);
	nbd_close(h);
}

/* ---- the workload ---- */

static int stream_write(struct drill_volume *v, int i, uint64_t *seq)
{
	struct stream *s = &v->st[i];
	struct slot *slot = &v->slots[i + 2 * s->next];
	const struct endpoint *ep;
	char reason[256];
	int64_t cookie;
	int r = 0;

	if (!s->h) {
		s->h = conn_open(v, s->on, reason, sizeof(reason));
		if (!s->h) {
			r = -ENOTCONN;
			goto fail;
		}
		if (s->dropped)
			v->reconnects++;
		s->dropped = false;
	}
	drill_fill(v->buf, WRITE_SIZE, ++*seq);
	cookie = nbd_aio_pwrite(s->h, v->buf, WRITE_SIZE, slot->offset, NBD_NULL_COMPLETION, 0);
	r = cookie < 0 ? nbd_errno() : await(s->h, cookie, deadline_for(v, s->on));
	if (r < 0) {
		snprintf(reason, sizeof(reason), "%s", why(r));
		goto fail;
	}
	slot->acked = *seq;
	v->writes++;
	if (v->fault)
		v->acked_during++;
	if (s->pending)
		v->retried++;
	s->pending = false;
	s->next = (s->next + 1) % s->count;
	return 0;
fail:
	ep = &v->ep[s->on];
	if (!v->failed++)
		snprintf(v->first_failure, sizeof(v->first_failure),
			 "offset %" PRIu64 " through %s (%s): %s", slot->offset, ep->cfg->id,
			 ep->desc, reason);
	if (!v->fault)
		drill_failed("volume %s: writing offset %" PRIu64
			     " through %s (%s) before the fault: "
			     "%s",
			     v->name, slot->offset, ep->cfg->id, ep->desc, reason);
	conn_close(s->h, false);
	s->h = NULL;
	s->dropped = true;
	s->pending = true;
	if (v->fault)
		s->on = SURVIVOR;
	return r;
}

/* ---- the API ---- */

static int find_volume(struct drill_volume *v, const char *name, struct ftvm_client *c)
{
	struct ftvm_volume *vols = NULL;
	char names[512] = "";
	size_t n = 0, used = 0;
	int r;

	r = ftvm_volume_list(c, &vols, &n);
	if (r < 0)
		return drill_failed("listing the volumes: %s", ftvm_last_error(c));
	for (size_t i = 0; i < n; i++) {
		if (strcmp(vols[i].name, name) == 0) {
			snprintf(v->name, sizeof(v->name), "%s", name);
			v->size = vols[i].size;
			free(vols);
			return 0;
		}
		if (used < sizeof(names))
			used += (size_t)snprintf(names + used, sizeof(names) - used, "%s%s",
						 i ? ", " : "", vols[i].name);
	}
	free(vols);
	if (!n)
		return drill_failed(
			"no volume '%s': the pair has none (make one with ftvmctl volume "
			"create %s --size SIZE)",
			name, name);
	return drill_failed("no volume '%s' in this pair (it has: %s)", name, names);
}

/* Slots spread over the whole volume, a page-aligned stride apart. */
static int lay_out(struct drill_volume *v, uint32_t want)
{
	uint64_t stride;

	if (v->size < 2 * SLOT_MIN)
		return drill_failed("volume %s is too small for the drill: %" PRIu64
				    " bytes, it needs %u",
				    v->name, v->size, 2 * SLOT_MIN);
	if (want < 2)
		want = 2;
	if (v->size / SLOT_MIN < want)
		want = (uint32_t)(v->size / SLOT_MIN);
	stride = v->size / want / WRITE_SIZE * WRITE_SIZE;
	v->slots = calloc(want, sizeof(*v->slots));
	if (!v->slots)
		return drill_failed("out of memory");
	v->n_slots = want;
	for (uint32_t i = 0; i < want; i++) {
		v->slots[i].offset = i * stride + (i % 3 == 2 ? UNALIGNED_SHIFT : 0);
		v->unaligned += i % 3 == 2;
	}
	for (int i = 0; i < 2; i++)
		v->st[i].count = (want - (uint32_t)i + 1) / 2;
	return 0;
}

int drill_volume_open(const char *name, struct ftvm_client *c, const struct ftvm_config *victim,
		      const struct ftvm_config *survivor, uint32_t slots, uint32_t timeout_ms,
		      struct drill_volume **ret)
{
	struct drill_volume *v = calloc(1, sizeof(*v));
	char reason[256];
	int r;

	if (!v)
		return drill_failed("out of memory");
	/* A write to a node that just died must fail, not kill ftvmctl. */
	signal(SIGPIPE, SIG_IGN);
	v->timeout_ms = timeout_ms;
	v->victim_ms = survivor->dead_after_ms;
	v->st[VICTIM].on = VICTIM;
	v->st[SURVIVOR].on = SURVIVOR;
	r = endpoint_find(&v->ep[VICTIM], victim);
	if (r == 0)
		r = endpoint_find(&v->ep[SURVIVOR], survivor);
	if (r == 0)
		r = find_volume(v, name, c);
	if (r == 0)
		r = lay_out(v, slots);
	if (r == 0) {
		v->buf = malloc(WRITE_SIZE);
		v->got = malloc(WRITE_SIZE);
		if (!v->buf || !v->got)
			r = drill_failed("out of memory");
	}
	for (int i = 0; r == 0 && i < 2; i++) {
		v->st[i].h = conn_open(v, i, reason, sizeof(reason));
		if (!v->st[i].h)
			r = drill_failed("volume %s: cannot connect to %s's NBD server (%s): %s",
					 name, v->ep[i].cfg->id, v->ep[i].desc, reason);
	}
	if (r != 0) {
		drill_volume_free(v);
		return r;
	}
	*ret = v;
	return 0;
}

int drill_volume_write_all(struct drill_volume *v, uint64_t *seq)
{
	for (int i = 0; i < 2; i++)
		for (uint32_t k = 0; k < v->st[i].count; k++)
			if (stream_write(v, i, seq) < 0)
				return EXIT_FAILED;
	return 0;
}

void drill_volume_fault(struct drill_volume *v)
{
	v->fault = true;
}

void drill_volume_step(struct drill_volume *v, uint64_t *seq)
{
	for (int i = 0; i < 2; i++)
		stream_write(v, i, seq);
}

uint64_t drill_volume_acked_during(const struct drill_volume *v)
{
	return v->acked_during;
}

int drill_volume_settle(struct drill_volume *v, uint64_t *seq, uint32_t timeout_ms)
{
	uint64_t deadline = clock_now_ms() + timeout_ms;

	for (int i = 0; i < 2; i++)
		while (v->st[i].pending) {
			if (clock_now_ms() >= deadline)
				return drill_failed("volume %s: a write of unknown outcome was not "
						    "rewritten within %u ms; the last failure: %s",
						    v->name, timeout_ms, v->first_failure);
			if (stream_write(v, i, seq) < 0)
				drill_sleep_ms(20);
		}
	return 0;
}

/* Every slot through node `on`, against its last acknowledged write. */
static void check_through(struct drill_volume *v, int on)
{
	const struct endpoint *ep = &v->ep[on];
	char reason[256];
	struct nbd_handle *h = conn_open(v, on, reason, sizeof(reason));

	if (!h) {
		fprintf(stderr, "ftvmctl: drill: lost on %s: volume %s: cannot connect (%s): %s\n",
			ep->cfg->id, v->name, ep->desc, reason);
		v->mismatches += v->n_slots;
		return;
	}
	for (uint32_t i = 0; i < v->n_slots; i++) {
		const struct slot *slot = &v->slots[i];
		int64_t cookie =
			nbd_aio_pread(h, v->got, WRITE_SIZE, slot->offset, NBD_NULL_COMPLETION, 0);
		int r = cookie < 0 ? nbd_errno() : await(h, cookie, deadline_for(v, on));
		size_t at = 0;

		if (r < 0) {
			fprintf(stderr,
				"ftvmctl: drill: lost on %s: volume %s offset %" PRIu64
				": cannot read it: %s\n",
				ep->cfg->id, v->name, slot->offset, why(r));
			v->mismatches++;
			continue;
		}
		v->bytes_checked += WRITE_SIZE;
		drill_fill(v->buf, WRITE_SIZE, slot->acked);
		while (at < WRITE_SIZE && v->got[at] == v->buf[at])
			at++;
		if (at == WRITE_SIZE)
			continue;
		fprintf(stderr,
			"ftvmctl: drill: lost on %s: volume %s offset %" PRIu64
			": not write #%" PRIu64 "'s %u bytes (they differ from byte %zu on)\n",
			ep->cfg->id, v->name, slot->offset, slot->acked, WRITE_SIZE, at);
		v->mismatches++;
	}
	conn_close(h, true);
}

/* FLUSH through the survivor: what both streams wrote, through either node,
 * is durable in the store (node/NBD.md, "The write-back cache's contract"). */
static void flush_through_survivor(struct drill_volume *v)
{
	const struct endpoint *ep = &v->ep[SURVIVOR];
	char reason[256];
	struct nbd_handle *h = conn_open(v, SURVIVOR, reason, sizeof(reason));
	int64_t cookie;
	int r;

	if (!h) {
		fprintf(stderr,
			"ftvmctl: drill: volume %s: cannot connect to %s (%s) to flush: %s\n",
			v->name, ep->cfg->id, ep->desc, reason);
		return;
	}
	cookie = nbd_aio_flush(h, NBD_NULL_COMPLETION, 0);
	r = cookie < 0 ? nbd_errno() : await(h, cookie, deadline_for(v, SURVIVOR));
	if (r < 0)
		fprintf(stderr, "ftvmctl: drill: volume %s: flush through %s failed: %s\n", v->name,
			ep->cfg->id, why(r));
	v->flushed = r == 0;
	conn_close(h, true);
}

void drill_volume_check(struct drill_volume *v)
{
	/* The pair is whole: a request through the node that was hit may take
	 * as long as one through the other (a page-in from the store). */
	v->fault = false;
	/* The streams' connections go first: the check reads through fresh
	 * ones, as a host would after the pair is whole. */
	for (int i = 0; i < 2; i++) {
		conn_close(v->st[i].h, true);
		v->st[i].h = NULL;
	}
	flush_through_survivor(v);
	check_through(v, SURVIVOR);
	check_through(v, VICTIM);
}

uint64_t drill_volume_lost(const struct drill_volume *v)
{
	return v->mismatches;
}

bool drill_volume_flushed(const struct drill_volume *v)
{
	return v->flushed;
}

json_object *drill_volume_json(const struct drill_volume *v)
{
	json_object *o = json_object_new_object();
	json_object *ep = json_object_new_object();

	for (int i = 0; i < 2; i++)
		json_object_object_add(ep, v->ep[i].cfg->id, json_object_new_string(v->ep[i].desc));
	json_object_object_add(o, "name", json_object_new_string(v->name));
	json_object_object_add(o, "endpoints", ep);
	json_object_object_add(o, "slots", json_object_new_uint64(v->n_slots));
	json_object_object_add(o, "unaligned", json_object_new_uint64(v->unaligned));
	json_object_object_add(o, "write_size", json_object_new_uint64(WRITE_SIZE));
	json_object_object_add(o, "writes", json_object_new_uint64(v->writes));
	json_object_object_add(o, "acked_during", json_object_new_uint64(v->acked_during));
	json_object_object_add(o, "failed", json_object_new_uint64(v->failed));
	json_object_object_add(o, "retried", json_object_new_uint64(v->retried));
	json_object_object_add(o, "reconnects", json_object_new_uint64(v->reconnects));
	json_object_object_add(o, "flushed", json_object_new_boolean(v->flushed));
	json_object_object_add(o, "bytes_checked", json_object_new_uint64(v->bytes_checked));
	json_object_object_add(o, "mismatches", json_object_new_uint64(v->mismatches));
	return o;
}

void drill_volume_print(const struct drill_volume *v)
{
	printf("  volume %s: %u slots of %u bytes over it (%u unaligned), written through %s "
	       "(%s) and %s (%s)\n",
	       v->name, v->n_slots, WRITE_SIZE, v->unaligned, v->ep[VICTIM].cfg->id,
	       v->ep[VICTIM].desc, v->ep[SURVIVOR].cfg->id, v->ep[SURVIVOR].desc);
	printf("  volume: %" PRIu64 " writes acknowledged (%" PRIu64 " during the fault), %" PRIu64
	       " failed, %" PRIu64 " rewritten, %" PRIu64 " reconnects%s%s\n",
	       v->writes, v->acked_during, v->failed, v->retried, v->reconnects,
	       v->failed ? "; the first failure: " : "", v->first_failure);
	printf("  volume: %s; checked %" PRIu64 " bytes through both nodes: %" PRIu64
	       " mismatched\n",
	       v->flushed ? "flushed" : "NOT flushed", v->bytes_checked, v->mismatches);
}

void drill_volume_free(struct drill_volume *v)
{
	if (!v)
		return;
	for (int i = 0; i < 2; i++)
		conn_close(v->st[i].h, false);
	free(v->slots);
	free(v->buf);
	free(v->got);
	free(v);
}
