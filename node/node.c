#include "node.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <event2/event.h>

#include "client.pb-c.h"
#include "client_server.h"
#include "clock.h"
#include "events.h"
#include "frame.h"
#include "ha.h"
#include "log.h"
#include "metrics_server.h"
#include "nbd_server.h"
#include "notify.h"
#include "pagedata.h"
#include "reload.h"
#include "reply_read.h"
#include "session.h"
#include "status_counts.h"
#include "trace_tap.h"
#include "vmm.h"
#include "volume_io.h"

#define LOG_SUBSYSTEM "node"
#define CUT_LINK_MS_MAX 600000u
#define RESYNC_PROGRESS_MS 1000

typedef Ftvm__Client__ClientRequest ClientRequest;
typedef Ftvm__Client__ClientReply ClientReply;

struct node {
	const struct ftvm_config *config;
	struct event_base *base;
	const struct repl_transport_ops *transport;
	char transport_reason[192];
	int state; /* Ftvm__Partner__NodeState, as ha/ha.c decides it */
	struct vmm *vmm;
	struct ha *ha;
	struct repl_session *session;
	struct client_server *clients;
	/* The block interface ([nbd]; node/NBD.md): volumes over NBD, their
	 * requests as page requests of the memory manager. */
	struct nbd_server *nbd;
	struct volume_io *volume_io;
	/* [metrics] listen: GET /metrics, the status and sense as Prometheus
	 * text (metrics_server.h). */
	struct metrics_server *metrics;
	struct trace_tap *trace; /* while recording (common/TRACE.md) */
	/* The event stream (node/EVENTS.md); a resync's progress is told
	 * every RESYNC_PROGRESS_MS while this node is resyncing. */
	struct events *events;
	struct event *resync_progress;
	uint64_t resync_started_ms, resync_sent_before;
	uint64_t told_epoch; /* the epoch the last state event said */
	struct notify_watchdog *watchdog;
	struct event *sigterm;
	struct event *sigint;
	struct event *sighup;
	int state_lock; /* flock on state_dir/ftvmd.lock while we run, -1 */
};

static const char *state_name(const struct node *n)
{
	return codec_node_state_name(n->state);
}

static void u64_text(char *buf, size_t size, uint64_t v)
{
	snprintf(buf, size, "%llu", (unsigned long long)v);
}

static void timer_add_ms(struct event *ev, uint64_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

static uint64_t resync_pages_sent(struct node *n)
{
	struct status_counts c = { 0 };

	vmm_get_counts(n->vmm, &c);
	return c.resync_pages_one_sided + c.resync_pages_inline;
}

static void on_resync_progress(evutil_socket_t fd, short what, void *arg)
{
	struct node *n = arg;
	char ms[24], sent[24];

	u64_text(ms, sizeof(ms), clock_now_ms() - n->resync_started_ms);
	u64_text(sent, sizeof(sent), resync_pages_sent(n) - n->resync_sent_before);
	events_emit(n->events, "resync", "progress", NULL, "elapsed_ms", ms, "pages_sent", sent,
		    NULL);
	timer_add_ms(n->resync_progress, RESYNC_PROGRESS_MS);
}

/* A resync's start, end or failure, from the step of the state table. */
static void tell_resync(struct node *n, const char *step, const char *reason)
{
	static const struct {
		const char *step, *what;
	} steps[] = { { "send", "start" },	   { "receive", "start" },
		      { "sent", "end" },	   { "received", "end" },
		      { "send failed", "failed" }, { "receive failed", "failed" },
		      { "unstarted", "failed" },   { "cut", "failed" } };
	struct ha_status hs;
	char pages[24], ms[24];

	for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		if (strcmp(step, steps[i].step) != 0)
			continue;
		if (strcmp(steps[i].what, "start") == 0) {
			n->resync_started_ms = clock_now_ms();
			n->resync_sent_before = resync_pages_sent(n);
			timer_add_ms(n->resync_progress, RESYNC_PROGRESS_MS);
			events_emit(n->events, "resync", "start", reason, "role",
				    strcmp(step, "send") == 0 ? "sender" : "receiver", NULL);
			return;
		}
		evtimer_del(n->resync_progress);
		ha_get_status(n->ha, &hs);
		u64_text(ms, sizeof(ms), clock_now_ms() - n->resync_started_ms);
		u64_text(pages, sizeof(pages),
			 strcmp(step, "sent") == 0 ? hs.last_resync_pages : 0);
		if (strcmp(step, "sent") == 0)
			events_emit(n->events, "resync", "end", reason, "elapsed_ms", ms,
				    "pages_sent", pages, NULL);
		else
			events_emit(n->events, "resync", steps[i].what, reason, "elapsed_ms", ms,
				    NULL);
		return;
	}
}

static void on_state_changed(int state, const char *step, const char *reason, void *arg)
{
	struct node *n = arg;
	char status[320], epoch[24];
	uint64_t e = vmm_epoch(n->vmm);
	bool changed = state != n->state || e != n->told_epoch;

	n->state = state;
	repl_session_set_state(n->session, state);
	snprintf(status, sizeof(status), "%s, epoch %llu: %s", state_name(n), (unsigned long long)e,
		 reason);
	notify_status(status);
	u64_text(epoch, sizeof(epoch), e);
	if (strcmp(step, "took over") == 0)
		events_emit(n->events, "takeover", "done", reason, "epoch", epoch, NULL);
	else if (strcmp(step, "fence") == 0)
		events_emit(n->events, "fence", "done", reason, "epoch", epoch, NULL);
	tell_resync(n, step, reason);
	if (changed)
		events_emit(n->events, "state", state_name(n), reason, "epoch", epoch, "step", step,
			    NULL);
	n->told_epoch = e;
}

/* The partner's ack level, as its Hello said: one of the names, or "" (an
 * older node, or something this node does not know). */
static const char *partner_ack(const struct repl_session_stats *st)
{
	return config_ack_parse(st->partner_ack) < 0 ? "" : st->partner_ack;
}

/* Each node acknowledges at its own level (node/vmm/VMM.md,
 * "Acknowledgement levels"), so two levels are allowed, as while the
 * operator changes them one node at a time; but what a write survives is
 * then the weaker one's, which the operator should hear of. */
static void check_partner_ack(struct node *n, const struct repl_session_stats *st)
{
	const char *theirs = partner_ack(st), *ours = config_ack_name(n->config->ack);

	if (!theirs[0] || strcmp(theirs, ours) == 0)
		return;
	log_warning("partner %s acknowledges at %s, this node at %s: a write survives what the "
		    "weaker level survives; set [node] ack the same on both nodes",
		    st->partner_id, theirs, ours);
}

static void on_link_changed(struct repl_session *s, bool up, const char *reason, void *arg)
{
	struct node *n = arg;
	struct repl_session_stats st;

	repl_session_get_stats(s, &st);
	if (up)
		log_info("partner %s (epoch %llu) linked: %s", st.partner_id,
			 (unsigned long long)st.partner_epoch, reason);
	else
		log_warning("partner %s down: %s", st.partner_id, reason);
	if (up)
		events_emit(n->events, "auth", "authenticated", NULL, "partner", st.partner_id,
			    "method", n->config->key ? "hmac-sha256" : "none", NULL);
	events_emit(n->events, "link", up ? "up" : "down", reason, "partner", st.partner_id, NULL);
	if (up)
		check_partner_ack(n, &st);
	if (!up) {
		vmm_window_link_lost(n->vmm);
		vmm_tickets_drop(n->vmm);
	}
	pagedata_link_changed(vmm_pagedata(n->vmm), up);
	if (n->ha)
		ha_link_changed(n->ha, up, reason);
}

static void on_refused(struct repl_session *s, const char *peer, const char *reason, void *arg)
{
	struct node *n = arg;

	events_emit(n->events, "auth", "refused", reason, "peer", peer, NULL);
}

/* Warnings and errors of the event-loop thread (log_set_sink()). */
static void on_log_line(int level, const char *subsystem, const char *line, void *arg)
{
	struct node *n = arg;

	events_emit(n->events, level <= LOG_LEVEL_ERROR ? "error" : "warning", subsystem, line,
		    NULL);
}

/* The memory manager's events: volumes, failback (vmm_set_event_sink()). */
static void on_vmm_event(const char *type, const char *what, const char *reason,
			 const char *const *kv, void *arg)
{
	struct node *n = arg;

	events_emit_fields(n->events, type, what, reason, kv);
}

struct now_volumes {
	struct node *n;
	struct events *e;
};

static void tell_volume_now(void *ctx, const char *name)
{
	struct now_volumes *nv = ctx;
	struct vmm_volume_info info;
	char size[24];

	if (vmm_volume_info(nv->n->vmm, name, &info) < 0)
		return;
	u64_text(size, sizeof(size), info.size);
	events_emit_current(nv->e, "volume", "present", NULL, "name", name, "size", size, "guid",
			    info.guid, NULL);
}

/* The node as it is, for a follower that asked with now. */
static void tell_now(struct events *e, void *arg)
{
	struct node *n = arg;
	struct repl_session_stats st;
	struct now_volumes nv = { n, e };
	char epoch[24];

	u64_text(epoch, sizeof(epoch), vmm_epoch(n->vmm));
	events_emit_current(e, "state", state_name(n), NULL, "epoch", epoch, "ack",
			    config_ack_name(n->config->ack), NULL);
	repl_session_get_stats(n->session, &st);
	events_emit_current(e, "link", st.link_up ? "up" : "down", NULL, "partner", st.partner_id,
			    NULL);
	if (n->state == FTVM__PARTNER__NODE_STATE__NODE_STATE_RESYNCING)
		events_emit_current(e, "resync", "running", NULL, NULL);
	vmm_volume_names(n->vmm, tell_volume_now, &nv);
}

static void on_partner_request(struct repl_session *s, Envelope *const *envs, size_t n, void *arg)
{
	struct node *n_ = arg;

	vmm_partner_request(n_->vmm, envs, n);
}

static void on_hello(struct repl_session *s, Ftvm__Partner__Hello *h, void *arg)
{
	struct node *n = arg;

	vmm_resync_position(n->vmm, &h->applied_lsn, &h->own_lsn);
	h->ack = (char *)config_ack_name(n->config->ack);
}

static void on_protocol_error(struct repl_session *s, const char *peer, const char *reason,
			      void *arg)
{
	log_warning("dropped connection from %s: %s", peer, reason);
}

static void on_session_tap(struct repl_session *s, bool out, const char *peer,
			   const uint8_t *payload, size_t len, void *arg)
{
	struct node *n = arg;

	trace_tap_partner(n->trace, out, peer, payload, len);
}

/* The trace requests are not recorded: a trace starts after its start and
 * ends before its stop. */
static void on_client_tap(uint64_t client_id, pid_t pid, bool out, const ClientRequest *req,
			  const uint8_t *payload, size_t len, void *arg)
{
	struct node *n = arg;

	if (req && req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST_TRACE)
		return;
	trace_tap_client(n->trace, client_id, pid, out, payload, len);
}

static int trace_open(struct node *n, const char *path, int channels, struct trace_tap **ret)
{
	return trace_tap_start(n->config, repl_session_partner_id(n->session), path, channels, ret);
}

static void trace_install(struct node *n, struct trace_tap *t, int channels)
{
	n->trace = t;
	repl_session_set_tap(n->session, on_session_tap, n);
	client_server_set_tap(n->clients, on_client_tap, n);
	log_info("recording %s to trace %s", config_trace_channels_name(channels),
		 trace_tap_path(t));
}

static int64_t trace_stop(struct node *n)
{
	char *path = strdup(trace_tap_path(n->trace));
	int64_t records;

	repl_session_set_tap(n->session, NULL, NULL);
	client_server_set_tap(n->clients, NULL, NULL);
	records = trace_tap_stop(n->trace);
	n->trace = NULL;
	if (records >= 0)
		log_info("trace %s: stopped, %" PRId64 " records", path ? path : "", records);
	free(path);
	return records;
}

/* `ftvmctl trace start FILE` and `trace stop`. The reply to a start goes out
 * before the recording begins, so it is not recorded. */
static void reply_trace(struct node *n, struct client_call *call,
			const Ftvm__Client__TraceRequest *req)
{
	Ftvm__Client__TraceReply tr = FTVM__CLIENT__TRACE_REPLY__INIT;
	ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	char reason[PATH_MAX + 128], *path = NULL;
	int channels =
		req->channels[0] ? config_parse_trace_channels(req->channels) : CONFIG_TRACE_ALL;
	struct trace_tap *started = NULL;
	int64_t records;
	int r;

	reply.status = FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST;
	reply.reason = reason;
	if (req->stop) {
		if (!n->trace) {
			snprintf(reason, sizeof(reason), "no trace is being recorded");
			goto out;
		}
		path = strdup(trace_tap_path(n->trace));
		records = trace_stop(n);
		if (records < 0) {
			snprintf(reason, sizeof(reason), "trace %s: writing failed: %s",
				 path ? path : "", strerror((int)-records));
			reply.status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
			goto out;
		}
		tr.records = (uint64_t)records;
	} else {
		if (n->trace) {
			snprintf(reason, sizeof(reason), "already recording to %s",
				 trace_tap_path(n->trace));
			goto out;
		}
		if (channels < 0 || req->path[0] != '/') {
			snprintf(reason, sizeof(reason), "%s",
				 channels < 0 ? "channels: want all, partner or client"
					      : "the trace's path must be absolute");
			goto out;
		}
		/* Opened now, installed after the reply went out. */
		r = trace_open(n, req->path, channels, &started);
		if (r < 0) {
			snprintf(reason, sizeof(reason), "cannot create trace %s: %s", req->path,
				 strerror(-r));
			goto out;
		}
		path = strdup(req->path);
	}
	reply.status = FTVM__PARTNER__STATUS__STATUS_OK;
	reply.reason = (char *)"";
	tr.path = path ? path : (char *)"";
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_TRACE;
	reply.trace = &tr;
out:
	client_call_reply(call, &reply);
	if (started)
		trace_install(n, started, channels);
	free(path);
}

/* [nbd] listen and/or socket: volumes served over NBD (node/NBD.md). The
 * socket file is made as the client socket is ([client] socket_mode and
 * socket_group). */
static int nbd_from_config(struct node *n)
{
	const struct ftvm_config *c = n->config;
	struct nbd_server_config nc = {
		.listen = c->nbd_listen,
		.socket_path = c->nbd_socket_path,
		.socket_mode = c->socket_mode,
		.socket_group = c->socket_group.name ? c->socket_group.gid : (gid_t)-1,
	};
	int r = volume_io_new(n->base, n->vmm, &n->volume_io);

	if (r < 0)
		return log_error_errno(r, "NBD: volume I/O");
	r = nbd_server_new(n->base, &nc, &volume_io_nbd_ops, n->volume_io, &n->nbd);
	if (r < 0)
		return log_error_errno(r, "NBD: cannot listen on %s%s%s",
				       c->nbd_listen ? c->nbd_listen : "",
				       c->nbd_listen && c->nbd_socket_path ? " and " : "",
				       c->nbd_socket_path ? c->nbd_socket_path : "");
	return 0;
}

/* [trace] path: recorded from the start; a trace left by the last run is
 * kept as FILE.1 rather than overwritten. */
static int trace_from_config(struct node *n)
{
	char old[PATH_MAX + 8];
	struct trace_tap *t;
	int r;

	snprintf(old, sizeof(old), "%s.1", n->config->trace_path);
	if (rename(n->config->trace_path, old) < 0 && errno != ENOENT)
		return log_error_errno(-errno, "[trace] path %s: cannot keep it as %s",
				       n->config->trace_path, old);
	r = trace_open(n, n->config->trace_path, n->config->trace_channels, &t);
	if (r < 0)
		return log_error_errno(r, "[trace] path %s: cannot create it",
				       n->config->trace_path);
	trace_install(n, t, n->config->trace_channels);
	return 0;
}

/* A status reply and what it points to: the numbers, and the records the
 * strings are in. */
struct status_parts {
	Ftvm__Client__StatusReply st;
	Ftvm__Client__PartnerStatus partner;
	Ftvm__Client__PageTableStatus pagetable;
	uint64_t counters[STATUS_LIST_SIZE];
	struct repl_session_stats rs;
	struct ha_status hs;
};

/* The node's status now, as a status request gets it (and GET /metrics). */
static void status_gather(struct node *n, struct status_parts *p)
{
	struct status_counts c;

	ftvm__client__status_reply__init(&p->st);
	ftvm__client__partner_status__init(&p->partner);
	ftvm__client__page_table_status__init(&p->pagetable);
	repl_session_get_stats(n->session, &p->rs);
	ha_get_status(n->ha, &p->hs);
	vmm_get_counts(n->vmm, &c);
	c.epoch = vmm_epoch(n->vmm);
	c.partner_link_changes = p->rs.link_changes;
	c.partner_last_seen_ms =
		p->rs.link_up || !p->rs.last_rx_ms ? 0 : clock_now_ms() - p->rs.last_rx_ms;
	c.partner_store_epoch = p->hs.store.partner.epoch;
	/* As the takeover decisions count it: a figure past dead_after_ms
	 * means a forced takeover is not refused for silence. */
	c.partner_store_silent_ms = sbd_partner_silent_ms(&p->hs.store);
	c.partner_auth_failures = p->rs.auth_failures;
	c.partner_address_refused = p->rs.address_refused;
	c.takeovers = p->hs.takeovers;
	c.since_takeover_ms = p->hs.last_takeover_ms ? clock_now_ms() - p->hs.last_takeover_ms : 0;
	c.resyncs = p->hs.resyncs;
	c.last_resync_pages = p->hs.last_resync_pages;
	c.last_resync_ms = p->hs.last_resync_ms;
	c.journal_limit = n->config->journal_limit;
	vmm_recovered_summary(n->vmm, &c.recovered_pages, &c.recovered_last_at_ms);
	c.loop_pauses = p->rs.loop_pauses;
	c.loop_pause_max_ms = p->rs.loop_pause_max_ms;
	c.page_size = n->config->page_size;
	c.pid = getpid();
	if (n->nbd) {
		struct nbd_server_stats ns;

		nbd_server_get_stats(n->nbd, &ns);
		c.nbd_connections = ns.connections;
		c.nbd_accepted = ns.accepted;
		c.nbd_requests = ns.requests;
		c.nbd_errors = ns.errors;
		c.nbd_protocol_errors = ns.protocol_errors;
		c.nbd_read_bytes = ns.read_bytes;
		c.nbd_written_bytes = ns.written_bytes;
		c.nbd_refused = ns.refused;
	}
	c.event_followers = events_followers(n->events);
	status_counts_to_reply(&c, &p->st, &p->partner, &p->pagetable, p->counters);

	p->partner.id = p->rs.partner_id;
	p->partner.link = p->rs.link_up ? "up" : "down";
	p->partner.state =
		p->rs.link_up ? (char *)codec_node_state_name(p->rs.partner_state) : "unknown";
	p->partner.endpoint = n->config->partner;
	p->partner.store_state = (char *)sbd_state_name(
		p->hs.store.partner_valid ? p->hs.store.partner.state : SBD_STATE_EMPTY);
	p->partner.auth = n->config->key ? "key" : "none";
	p->partner.ack = p->rs.link_up ? (char *)partner_ack(&p->rs) : "";
	p->st.node = (char *)n->config->id;
	p->st.state = (char *)state_name(n);
	p->st.reason = p->hs.reason;
	p->st.store_error = p->hs.store.error;
	p->st.transport = (char *)n->transport->name;
	p->st.ack = (char *)config_ack_name(n->config->ack);
	p->st.transport_reason = n->transport_reason;
	p->st.partner = &p->partner;
	p->st.pagetable = &p->pagetable;
}

static void reply_status(struct node *n, struct client_call *call)
{
	ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	struct status_parts p;

	status_gather(n, &p);
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_STATUS_REPLY;
	reply.status_reply = &p.st;
	client_call_reply(call, &reply);
}

/* GET /metrics: the status and sense a client would get, read into
 * libftvm's structs by libftvm's own reader, so the text is `ftvmctl
 * metrics`'s. */
static void gather_metrics(void *arg, struct ftvm_node_status *ret_status,
			   struct ftvm_sense *ret_sense)
{
	struct node *n = arg;
	Ftvm__Partner__SenseInformation info;
	struct status_parts p;

	status_gather(n, &p);
	reply_read_status(&p.st, ret_status);
	vmm_get_sense(n->vmm, &info);
	reply_read_sense(&info, ret_sense);
}

/* Whether a node in state serves clients, as libftvm judges it (ftvm.h,
 * "Failover"): solo, or active with its partner linked. */
static bool state_serves(int state, bool linked)
{
	return state == FTVM__PARTNER__NODE_STATE__NODE_STATE_SOLO ||
	       (state == FTVM__PARTNER__NODE_STATE__NODE_STATE_ACTIVE && linked);
}

/* Seed 003's device discovery table: what this node knows of the pair; the
 * memory manager adds each node's media, asking the partner for its own
 * (vmm/MEDIA.md, "Device discovery: the message flow"). In any state. */
static void reply_discover(struct node *n, struct client_call *call)
{
	struct repl_session_stats rs;
	struct vmm_discover d;

	repl_session_get_stats(n->session, &rs);
	d.state = state_name(n);
	d.serving = state_serves(n->state, rs.link_up);
	d.partner_state = rs.link_up ? codec_node_state_name(rs.partner_state) : "unknown";
	d.partner_serving = rs.link_up && state_serves(rs.partner_state, true);
	vmm_op_discover(n->vmm, call, &d);
}

static void reply_with(struct client_call *call, int status, const char *reason)
{
	ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

	reply.status = status;
	reply.reason = (char *)reason;
	client_call_reply(call, &reply);
}

/* `ftvmctl drill cut`: the link goes silent for ms, then comes back. */
static void reply_cut_link(struct node *n, struct client_call *call, uint32_t ms)
{
	char reason[96];

	if (ms == 0 || ms > CUT_LINK_MS_MAX) {
		snprintf(reason, sizeof(reason), "a cut of %u ms: want 1 to %u", ms,
			 CUT_LINK_MS_MAX);
		reply_with(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST, reason);
		return;
	}
	repl_session_cut(n->session, ms);
	reply_with(call, FTVM__PARTNER__STATUS__STATUS_OK, "");
}

static void on_forced_takeover(bool ok, const char *reason, void *arg)
{
	reply_with(arg,
		   ok ? FTVM__PARTNER__STATUS__STATUS_OK : FTVM__PARTNER__STATUS__STATUS_FENCED,
		   reason);
}

/* `ftvmctl takeover --force --yes`: answered when the node serves alone. */
static void reply_takeover(struct node *n, struct client_call *call,
			   const Ftvm__Client__TakeoverRequest *req)
{
	char why[320], reason[400];

	if (!req->force) {
		reply_with(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
			   "a node takes over by itself when its partner fails; a takeover asked "
			   "for needs force, for a partner gone for good");
		return;
	}
	if (ha_force_takeover(n->ha, on_forced_takeover, call, why, sizeof(why)) < 0) {
		snprintf(reason, sizeof(reason), "forced takeover refused: %s", why);
		log_warning("%s", reason);
		reply_with(call, FTVM__PARTNER__STATUS__STATUS_DENIED, reason);
		return;
	}
	log_warning("forced takeover asked by uid %u (pid %d)",
		    (unsigned)client_call_peer_uid(call), (int)client_call_peer_pid(call));
}

/* What a pair operation does, for its refusal; NULL for any other request. */
static const char *pair_operation(const ClientRequest *req)
{
	switch (req->request_case) {
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_CUT_LINK:
		return "cut the partner link";
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_TRACE:
		return req->trace->stop ? "stop a trace" : "start a trace";
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FAILBACK:
		return "fail back";
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_TAKEOVER:
		return "force a takeover";
	default:
		return NULL;
	}
}

static void on_client_request(struct client_call *call, const ClientRequest *req, void *arg)
{
	struct node *n = arg;
	const char *pair_op = pair_operation(req);

	if (pair_op && !vmm_client_may(n->vmm, call, CLIENT_RIGHT_ADMIN, pair_op))
		return;
	switch (req->request_case) {
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_STATUS:
		reply_status(n, call);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_CUT_LINK:
		reply_cut_link(n, call, req->cut_link->ms);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_TRACE:
		reply_trace(n, call, req->trace);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_TAKEOVER:
		reply_takeover(n, call, req->takeover);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RECOVERY:
		vmm_reply_recovery(n->vmm, call, req->recovery);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_DISCOVER:
		reply_discover(n, call);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_PARTITIONS:
		vmm_op_partitions(n->vmm, call); /* in any state, as status */
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_EVENTS:
		events_follow(n->events, call, req->events->now); /* in any state */
		break;
	default:
		vmm_client_request(n->vmm, call, req);
		break;
	}
}

static void on_client_gone(uint64_t client_id, void *arg)
{
	struct node *n = arg;

	vmm_client_gone(n->vmm, client_id);
	events_client_gone(n->events, client_id);
}

/* SIGHUP reads the configuration again; before, it ended the node at once,
 * without the destage of a stop. */
static void on_reload(evutil_socket_t sig, short what, void *arg)
{
	struct node *n = arg;

	notify_reloading();
	reload_config(n->config);
	notify_reloaded();
}

static void on_signal(evutil_socket_t sig, short what, void *arg)
{
	struct node *n = arg;

	log_info("node %s: %s, stopping", n->config->id, strsignal((int)sig));
	notify_stopping();
	event_base_loopexit(n->base, NULL);
}

/* Creates state_dir when missing and locks it: two ftvmd on one page table
 * would each believe it theirs. Returns the lock's fd. */
static int claim_state_dir(const char *path)
{
	char lock[4096], pid[32] = "";
	struct stat st;
	ssize_t n;
	int fd;

	if (mkdir(path, 0750) < 0 && errno != EEXIST)
		return log_error_errno(-errno, "state_dir %s: cannot create", path);
	if (stat(path, &st) < 0 || !S_ISDIR(st.st_mode) || access(path, W_OK) < 0)
		return log_error_errno(-(errno ? errno : ENOTDIR),
				       "state_dir %s: not a writable directory", path);
	snprintf(lock, sizeof(lock), "%s/ftvmd.lock", path);
	fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC, 0640);
	if (fd < 0)
		return log_error_errno(-errno, "state_dir %s: cannot open %s", path, lock);
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int r = -errno;

		n = pread(fd, pid, sizeof(pid) - 1, 0);
		pid[n > 0 ? n : 0] = '\0';
		pid[strcspn(pid, "\n")] = '\0';
		close(fd);
		if (r == -EWOULDBLOCK) {
			log_error("state_dir %s is in use by another ftvmd (pid %s)", path,
				  pid[0] ? pid : "unknown");
			return -EBUSY;
		}
		return log_error_errno(r, "state_dir %s: cannot lock %s", path, lock);
	}
	n = snprintf(pid, sizeof(pid), "%ld\n", (long)getpid());
	if (ftruncate(fd, 0) < 0 || pwrite(fd, pid, (size_t)n, 0) != n)
		log_warning("state_dir %s: cannot note our pid in %s", path, lock);
	return fd;
}

int node_new(struct event_base *base, const struct ftvm_config *config, struct node **ret)
{
	struct repl_session_config sc = {
		.node_id = config->id,
		.listen = config->listen,
		.partner = config->partner,
		.page_size = config->page_size,
		.frame_count = config->memory_size / config->page_size,
		.heartbeat_ms = config->heartbeat_ms,
		.dead_after_ms = config->dead_after_ms,
		.max_payload = FRAME_MAX_PAYLOAD_DEFAULT,
		.key = config->key,
		.key_len = config->key_len,
	};
	struct client_server_config cs = {
		.path = config->socket_path,
		.mode = config->socket_mode,
		.group = config->socket_group.name ? config->socket_group.gid : (gid_t)-1,
		.admin_gid = config->admin_group.name ? config->admin_group.gid : (gid_t)-1,
		.pointer_gid = config->pointer_group.name ? config->pointer_group.gid : (gid_t)-1,
		.max_clients = config->max_clients,
		.output_limit = config->output_limit,
		.max_payload = FRAME_MAX_PAYLOAD_DEFAULT,
	};
	static const struct repl_session_callbacks session_cb = {
		.link_changed = on_link_changed,
		.request = on_partner_request,
		.protocol_error = on_protocol_error,
		.hello = on_hello,
		.refused = on_refused,
	};
	struct node *n;
	int r;

	n = calloc(1, sizeof(*n));
	if (!n)
		return log_error_errno(-ENOMEM, "node");
	n->config = config;
	n->base = base;
	n->state = FTVM__PARTNER__NODE_STATE__NODE_STATE_STARTING;
	n->state_lock = -1;

	n->transport =
		repl_transport_select(config_transport_name(config->transport), config->listen,
				      n->transport_reason, sizeof(n->transport_reason));
	if (!n->transport) {
		log_error("%s: %s", config->path, n->transport_reason);
		r = -EPROTONOSUPPORT;
		goto fail;
	}
	sc.transport = n->transport;

	/* Before any other thread starts: log_set_sink() is not for them. */
	r = events_new(tell_now, n, &n->events);
	if (r < 0)
		goto fail;
	n->resync_progress = evtimer_new(base, on_resync_progress, n);
	if (!n->resync_progress) {
		r = -ENOMEM;
		goto fail;
	}
	log_set_sink(on_log_line, n);
	r = claim_state_dir(config->state_dir);
	if (r < 0)
		goto fail;
	n->state_lock = r;
	r = vmm_new(base, config, &n->vmm);
	if (r < 0)
		goto fail;
	vmm_set_event_sink(n->vmm, on_vmm_event, n);
	sc.epoch = vmm_epoch(n->vmm);
	/* One-sided page data: the transport registers the pool in blocks of
	 * this many frames (pagedata_landing_block_frames() says why that size). */
	sc.pool_base = vmm_pool_base(n->vmm);
	sc.pool_block_frames = vmm_pool_block_frames(n->vmm);
	r = repl_session_new(base, &sc, &session_cb, n, &n->session);
	if (r < 0) {
		log_error_errno(r, "partner session");
		goto fail;
	}
	r = vmm_set_session(n->vmm, n->session);
	if (r < 0) {
		log_error_errno(r, "frame pool tick");
		goto fail;
	}
	r = ha_new(base, config, n->vmm, n->session, on_state_changed, n, &n->ha);
	if (r < 0) {
		log_error_errno(r, "fence slots in the store %s", config->store_path);
		goto fail;
	}
	r = client_server_new(base, &cs, on_client_request, on_client_gone, n, &n->clients);
	if (r == -EPERM && config->socket_group.name) {
		log_error("client socket %s: cannot give it to group %s ([client] socket_group): "
			  "ftvmd's user is not in that group",
			  config->socket_path, config->socket_group.name);
		goto fail;
	}
	if (r < 0) {
		log_error_errno(r, "client socket %s", config->socket_path);
		goto fail;
	}
	if (config->nbd_listen || config->nbd_socket_path) {
		r = nbd_from_config(n);
		if (r < 0)
			goto fail;
	}
	if (config->metrics_listen) {
		r = metrics_server_new(base, config->metrics_listen, gather_metrics, n,
				       &n->metrics);
		if (r < 0) {
			log_error_errno(r, "[metrics] listen: cannot serve on %s",
					config->metrics_listen);
			goto fail;
		}
	}
	if (config->trace_path) {
		r = trace_from_config(n);
		if (r < 0)
			goto fail;
	}
	if (!config->key)
		log_warning("partner channel: no [node] key_file, so any process on this machine "
			    "may connect as the partner (allowed only because listen and partner "
			    "are loopback addresses; `ftvmctl keygen FILE` makes a key)");
	r = repl_session_start(n->session);
	if (r < 0) {
		log_error_errno(r, "partner channel: cannot listen on %s", config->listen);
		goto fail;
	}
	n->sigterm = evsignal_new(base, SIGTERM, on_signal, n);
	n->sigint = evsignal_new(base, SIGINT, on_signal, n);
	n->sighup = evsignal_new(base, SIGHUP, on_reload, n);
	if (!n->sigterm || !n->sigint || !n->sighup) {
		r = log_error_errno(-ENOMEM, "signals");
		goto fail;
	}
	evsignal_add(n->sigterm, NULL);
	evsignal_add(n->sigint, NULL);
	evsignal_add(n->sighup, NULL);
	r = notify_watchdog_start(base, &n->watchdog);
	if (r < 0) {
		log_error_errno(r, "systemd watchdog");
		goto fail;
	}
	*ret = n;
	return 0;
fail:
	node_free(n);
	return r;
}

int node_run(struct node *n)
{
	char status[192];

	log_info("node %s: serving clients on %s; partner channel %s on %s, partner at %s "
		 "(transport %s: %s)",
		 n->config->id, n->config->socket_path, n->transport->name, n->config->listen,
		 n->config->partner, n->transport->name, n->transport_reason);
	snprintf(status, sizeof(status), "%s; waiting for partner at %s", state_name(n),
		 n->config->partner);
	notify_ready(status);
	if (event_base_dispatch(n->base) < 0)
		return log_error_errno(-EIO, "event loop failed");
	return 0;
}

void node_free(struct node *n)
{
	if (!n)
		return;
	notify_watchdog_free(n->watchdog);
	if (n->sigterm)
		event_free(n->sigterm);
	if (n->sigint)
		event_free(n->sigint);
	if (n->sighup)
		event_free(n->sighup);
	if (n->trace)
		trace_stop(n);
	metrics_server_free(n->metrics);
	client_server_free(n->clients);
	nbd_server_free(n->nbd);
	/* What waits for the partner's answer fails while the memory manager
	 * that asked is whole: their callbacks reach into it. */
	if (n->session)
		repl_session_fail_pending(n->session, "this node is stopping");
	/* The memory manager commits (and destages) first; then our slot says
	 * stopped, so the partner may take over at once; the session then fails
	 * what waits (the Destaged batch of the last destage, whose answer
	 * nothing waits for). */
	vmm_free(n->vmm);
	volume_io_free(n->volume_io); /* the memory manager's last answers came */
	ha_free(n->ha, true);
	repl_session_free(n->session);
	/* Followers' calls end last: everything above may still tell them. */
	log_set_sink(NULL, NULL);
	events_free(n->events);
	if (n->resync_progress)
		event_free(n->resync_progress);
	if (n->state_lock >= 0)
		close(n->state_lock); /* the lock goes with it */
	free(n);
}
