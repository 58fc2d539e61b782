/* The memory manager's lifecycle, group commit and the plumbing its methods
 * share (vmm/VMM.md, "Ordering and durability"). */
#include "vmm_state.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <event2/event.h>

#include "codec.h"
#include "crc32c.h"
#include "log.h"
#include "session.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM
#define JOURNAL_TRIM_EVERY_S 1
#define JOURNAL_TRIM_ROWS 10000
/* A commit that leaves page writes waiting for a fold, or the WAL to
 * checkpoint, pushes the idle housekeeping this far back: past the gaps
 * between the turns of a busy node (a pause there would delay the next
 * client), short enough that a burst's writes are folded before the next
 * burst. */
#define IDLE_MS 10
/* The idle checkpoint waits for this many WAL frames: each checkpoint is
 * an fdatasync of the WAL and of the database however few frames it
 * copies, and a request that comes meanwhile waits for them. */
#define IDLE_CHECKPOINT_FRAMES 256

const char *vmm_node_id(const struct vmm *v)
{
	return v->config->id;
}

struct pagedata *vmm_pagedata(const struct vmm *v)
{
	return v->pagedata;
}

const char *vmm_partner_id(const struct vmm *v)
{
	return repl_session_partner_id(v->session);
}

bool vmm_can_complete(const struct vmm *v)
{
	return vmm_mode(v) == VMM_MODE_SOLO || repl_session_link_up(v->session);
}

/* ---- for node/ha/ (vmm_core.h) ---- */

struct pagetable *vmm_pagetable(const struct vmm *v)
{
	return v->pt;
}

struct vmm_table *vmm_allocations(const struct vmm *v)
{
	return v->table;
}

struct frame_pool *vmm_frame_pool(const struct vmm *v)
{
	return v->pool;
}

struct repl_session *vmm_session(const struct vmm *v)
{
	return v->session;
}

const struct ftvm_config *vmm_config(const struct vmm *v)
{
	return v->config;
}

struct event_base *vmm_event_base(const struct vmm *v)
{
	return v->base;
}

struct failover_state *vmm_failover(const struct vmm *v)
{
	return v->failover;
}

bool vmm_solo_answers_pending(const struct vmm *v)
{
	return v->solo_in_flight != 0;
}

void vmm_journal_caught_up(struct vmm *v)
{
	v->journal_given_up = false;
}

bool vmm_is_owner(const struct vmm *v, const struct vmm_alloc *a)
{
	return strcmp(a->owner, vmm_node_id(v)) == 0;
}

void *vmm_block_addr(const struct vmm *v, const struct vmm_alloc *a, uint64_t page)
{
	assert(a->page[page].resident);
	return frame_pool_addr(v->pool, a->page[page].frame);
}

uint32_t vmm_block_crc(const struct vmm *v, const struct vmm_alloc *a, uint64_t page)
{
	return crc32c(0, vmm_block_addr(v, a, page), a->block_size);
}

int vmm_persist_alloc(struct vmm *v, const struct vmm_alloc *a, const struct pt_origin *o)
{
	struct pt_alloc pa = {
		.guid = a->guid,
		.home = a->home,
		.owner = a->owner,
		.policy = a->policy,
		.size = a->size,
		.block_size = a->block_size,
		.pages = a->pages,
		.header = a->header,
		.header_len = a->header_len,
		.store_offset = a->store_offset,
		.uid = a->uid,
		.client = a->client,
		.session = a->session,
		.media = vmm_media_name(a->media),
		.flash_offset = a->flash_offset,
		.volume = a->volume,
	};
	int r = pagetable_alloc_put(v->pt, &pa, vmm_zero_crc(a->block_size), o);

	vmm_changed(v);
	return r < 0 ? log_error_errno(r, "page table: allocation %s: %s", a->guid,
				       pagetable_last_error(v->pt))
		     : 0;
}

int vmm_journal_page(struct vmm *v, struct vmm_alloc *a, const struct pt_page *pp,
		     const struct pt_origin *o)
{
	int r = pagetable_page_put(v->pt, pp, o);

	a->page[pp->page].rows++;
	vmm_changed(v);
	return r < 0 ? log_error_errno(r, "page table: %s page %llu: %s", a->guid,
				       (unsigned long long)pp->page, pagetable_last_error(v->pt))
		     : 0;
}

void vmm_page_state(const struct vmm_alloc *a, uint64_t page, struct pt_page *ret)
{
	*ret = (struct pt_page){
		.guid = a->guid,
		.page = page,
		.version = a->page[page].version,
		.crc32c = a->page[page].crc32c,
		.dirty = a->page[page].dirty,
	};
}

int vmm_persist_page(struct vmm *v, struct vmm_alloc *a, uint64_t page, const struct pt_origin *o)
{
	struct pt_page pp;

	vmm_page_state(a, page, &pp);
	return vmm_journal_page(v, a, &pp, o);
}

void vmm_page_set_modified(struct vmm *v, struct vmm_alloc *a, uint64_t page, uint64_t version,
			   uint32_t crc)
{
	struct vmm_page *p = &a->page[page];

	p->version = version;
	p->crc32c = crc;
	p->dirty = true;
	p->stale = false;
	vmm_replace_update(v, p);
	vmm_flash_page(v, a, page);
	if (vmm_is_owner(v, a))
		vmm_destage_page(v, a, page);
}

int vmm_page_modified(struct vmm *v, struct vmm_alloc *a, uint64_t page, uint64_t version,
		      uint32_t crc, const struct pt_origin *o)
{
	vmm_page_set_modified(v, a, page, version, crc);
	return vmm_persist_page(v, a, page, o);
}

/* ---- group commit ---- */

static bool idle_work_due(struct vmm *v)
{
	struct pt_stats st;

	pagetable_get_stats(v->pt, &st);
	return st.fold_waiting > 0 || st.wal_frames >= IDLE_CHECKPOINT_FRAMES;
}

/* SQLite rolled the transaction back, but memory, the partner and the
 * frames already hold its changes: what this node serves no longer matches
 * its table on disk, and each later commit would widen the gap (an update of
 * a row that was never inserted). So the node stops at once, as a crash
 * would, answering nothing of that transaction: the partner takes over, and
 * this node, restarted, loads what it committed and is resynced (node/vmm/VMM.md,
 * "A page-table commit that fails"). Every commit once the node started: the
 * group commit's, and those of epochs, solo marks and leases. */
static _Noreturn void stop_on_failed_commit(void *arg, int r)
{
	struct vmm *v = arg;

	log_error_errno(r,
			"page table commit failed: %s; stopping now, as a crash would: "
			"this node's page table on disk no longer matches what it serves "
			"(the partner takes over; restarted, this node is resynced from it)",
			pagetable_last_error(v->pt));
	_exit(EXIT_FAILURE);
}

static void drop_answers(struct vmm *v)
{
	for (size_t i = 0; i < v->n_answers; i++)
		codec_command_complete_free((CommandComplete *)v->answers[i].cc);
	v->n_answers = 0;
}

/* With the link down they are dropped: the partner failed its requests. */
static void send_answers(struct vmm *v)
{
	if (v->n_answers)
		repl_session_answer(v->session, v->answers, v->n_answers);
	drop_answers(v);
}

/* At ack = mirror the partner is answered once its changes are applied here,
 * ahead of their commit; otherwise only for what is committed. */
static bool answers_before_commit(const struct vmm *v)
{
	return v->config->ack == CONFIG_ACK_MIRROR;
}

void vmm_flush(struct vmm *v)
{
	struct vmm_after_commit *list = v->after, *next;

	v->flush_pending = false;
	v->after = NULL;
	v->after_tail = &v->after;
	if (answers_before_commit(v))
		send_answers(v);
	pagetable_commit(v->pt); /* or the node stops: stop_on_failed_commit */
	if (idle_work_due(v)) {
		struct timeval later = { 0, IDLE_MS * 1000 };

		event_add(v->idle_event, &later);
	}
	send_answers(v);
	for (; list; list = next) {
		next = list->next;
		list->fn(list->arg);
		free(list);
	}
}

int vmm_answer(struct vmm *v, uint64_t seq, const CommandComplete *cc)
{
	CommandComplete *copy;

	if (v->n_answers == v->answers_cap) {
		size_t cap = v->answers_cap ? 2 * v->answers_cap : 16;
		struct repl_answer *a = realloc(v->answers, cap * sizeof(*a));

		if (!a)
			goto no_memory;
		v->answers = a;
		v->answers_cap = cap;
	}
	copy = codec_command_complete_copy(cc);
	if (!copy)
		goto no_memory;
	v->answers[v->n_answers++] = (struct repl_answer){ seq, copy };
	vmm_changed(v);
	return 0;
no_memory:
	log_warning("partner seq %llu not answered: out of memory", (unsigned long long)seq);
	return -ENOMEM;
}

int vmm_partner_send(struct vmm *v, Envelope *const *envs, size_t n,
		     const struct repl_page_write *writes, size_t n_writes, pending_done_fn done,
		     void *const *args)
{
	/* Answers held for the open transaction reach the partner before a
	 * new request, so it is committed first (at ack = mirror they need
	 * no commit). With none held, the request goes now and our own
	 * changes commit at the end of the turn, one commit for every client
	 * served in it. */
	if (v->n_answers && answers_before_commit(v))
		send_answers(v);
	else if (v->n_answers)
		vmm_flush(v);
	return repl_session_request_batch_landed(v->session, envs, n, v->config->request_timeout_ms,
						 done, args, writes, n_writes);
}

static void on_flush(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *v = arg;

	if (v->flush_pending)
		vmm_flush(v);
}

/* Nothing committed for IDLE_MS: the fold goes into a commit of its own,
 * with whatever changed in this turn so far, then the WAL is checkpointed.
 * Not again until the next commit, whatever failed: no retry loop on a full
 * disk. */
static void on_idle(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *v = arg;
	uint64_t rows = pagetable_fold_waiting(v->pt);
	struct pt_stats st;
	int r = pagetable_fold(v->pt);

	if (r < 0) {
		log_warning("idle fold of the page table: %s", pagetable_last_error(v->pt));
		return;
	}
	vmm_flush(v);
	if (rows)
		log_debug("idle: %llu page writes folded into the page table",
			  (unsigned long long)rows);
	pagetable_get_stats(v->pt, &st);
	if (st.wal_frames >= IDLE_CHECKPOINT_FRAMES) {
		r = pagetable_checkpoint(v->pt);
		if (r < 0)
			log_warning("idle checkpoint of the page table: %s",
				    pagetable_last_error(v->pt));
		else
			log_debug("idle: %d WAL frames checkpointed", r);
	}
	/* The flush armed it again for the frames now checkpointed. */
	event_del(v->idle_event);
}

void vmm_timer_add_ms(struct event *ev, uint64_t ms)
{
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = (ms % 1000) * 1000 };

	evtimer_add(ev, &tv);
}

void vmm_changed(struct vmm *v)
{
	if (v->flush_pending)
		return;
	v->flush_pending = true;
	/* Active now, it runs after the callbacks already due in this turn. */
	event_active(v->flush_event, EV_TIMEOUT, 0);
}

void vmm_after_commit(struct vmm *v, void (*fn)(void *arg), void *arg)
{
	struct vmm_after_commit *a = calloc(1, sizeof(*a));

	if (!a) { /* no room to wait for the turn's commit: commit now */
		vmm_flush(v);
		fn(arg);
		return;
	}
	a->fn = fn;
	a->arg = arg;
	*v->after_tail = a;
	v->after_tail = &a->next;
	vmm_changed(v);
}

/* ---- operations waiting for the partner ---- */

static void on_answer(const CommandComplete *cc, void *arg)
{
	struct vmm_op *op = arg;
	struct vmm *v = op->vmm;

	if (op->on_answer)
		op->on_answer(op, cc);
	if (cc->status != FTVM__PARTNER__STATUS__STATUS_OK &&
	    op->status == FTVM__PARTNER__STATUS__STATUS_OK) {
		op->status = cc->status;
		op->failed_at = op->answered;
		snprintf(op->reason, sizeof(op->reason), "partner: %s",
			 cc->reason && cc->reason[0] ? cc->reason : codec_status_name(cc->status));
	}
	if (cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LOCK)
		op->lock_version = cc->lock->version;
	if (pagedata_granted_from_answer(v->pagedata, cc, &op->landing))
		op->has_landing = true;
	if (cc->applied_lsn > pagetable_applied_by_partner_lsn(v->pt))
		pagetable_set_applied_by_partner_lsn(v->pt, cc->applied_lsn);
	if (++op->answered == op->n)
		op->finish(op);
}

/* Solo: every mirror message is acknowledged by this node alone, a loop turn
 * later, as the partner's answers would come. */
static void on_solo_answers(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_op *op = arg;
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	size_t left = op->n - op->answered;

	op->vmm->solo_in_flight--;
	/* The last answer runs op->finish, which may free op: count first. */
	while (left--)
		on_answer(&cc, op);
}

static int solo_send(struct vmm_op *op, size_t n)
{
	if (op->needs_partner) { /* it asks the partner something (verify): nobody to ask */
		snprintf(op->reason, sizeof(op->reason),
			 "no partner: this node serves alone (solo)");
		return -ENOTCONN;
	}
	op->n = n;
	op->answered = 0;
	op->status = FTVM__PARTNER__STATUS__STATUS_OK;
	vmm_flush(op->vmm);
	if (event_base_once(op->vmm->base, -1, EV_TIMEOUT, on_solo_answers, op, NULL) < 0)
		return -ENOMEM;
	op->vmm->solo_in_flight++;
	return 0;
}

int vmm_op_send_landed(struct vmm_op *op, Envelope *const *envs, size_t n,
		       const struct repl_page_write *writes, size_t n_writes)
{
	void *args[8];
	int r;

	if (n > sizeof(args) / sizeof(args[0]))
		return -E2BIG;
	if (vmm_mode(op->vmm) == VMM_MODE_SOLO)
		return n_writes ? -EOPNOTSUPP : solo_send(op, n);
	for (size_t i = 0; i < n; i++) {
		args[i] = op;
		envs[i]->lsn = op->lsn;
	}
	op->n = n;
	op->answered = 0;
	op->status = FTVM__PARTNER__STATUS__STATUS_OK;
	r = vmm_partner_send(op->vmm, envs, n, writes, n_writes, on_answer, args);
	if (r == -ENOTCONN)
		snprintf(op->reason, sizeof(op->reason), "partner unavailable (link down)");
	return r;
}

int vmm_op_send(struct vmm_op *op, Envelope *const *envs, size_t n)
{
	return vmm_op_send_landed(op, envs, n, NULL, 0);
}

void vmm_reply_error(struct client_call *call, int status, const char *fmt, ...)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	char reason[512];
	va_list ap;

	if (!call)
		return; /* the operation had no client (a gone client's release) */
	va_start(ap, fmt);
	vsnprintf(reason, sizeof(reason), fmt, ap);
	va_end(ap);
	reply.status = status;
	reply.reason = reason;
	client_call_reply(call, &reply);
}

/* A group's name for a refusal, or "not set". */
static const char *group_named(const struct config_group *g)
{
	return g->name ? g->name : "not set";
}

bool vmm_client_may(struct vmm *v, struct client_call *call, unsigned right, const char *what)
{
	bool admin = right == CLIENT_RIGHT_ADMIN;

	if (!call || client_call_may(call, right))
		return true;
	vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_DENIED,
			"uid %u may not %s: only root, ftvmd's uid %u and [client] %s (%s) may",
			(unsigned)client_call_peer_uid(call), what, (unsigned)geteuid(),
			admin ? "admin_group" : "pointer_group",
			group_named(admin ? &v->config->admin_group : &v->config->pointer_group));
	return false;
}

bool vmm_client_owns(struct vmm *v, struct client_call *call, const struct vmm_alloc *a,
		     const char *verb)
{
	if (!call || client_call_peer_uid(call) == a->uid ||
	    client_call_may(call, CLIENT_RIGHT_ADMIN))
		return true;
	vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_DENIED,
			"allocation %s belongs to uid %u; uid %u may not %s it (only its owner, "
			"root, ftvmd's uid %u and [client] admin_group (%s) may)",
			a->guid, (unsigned)a->uid, (unsigned)client_call_peer_uid(call), verb,
			(unsigned)geteuid(), group_named(&v->config->admin_group));
	return false;
}

struct vmm_alloc *vmm_client_page(struct vmm *v, struct client_call *call, const char *guid,
				  uint64_t page, const char *verb)
{
	struct vmm_alloc *a = vmm_table_find(v->table, guid);

	if (!a) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND, "no allocation %s",
				guid);
		return NULL;
	}
	if (!vmm_client_owns(v, call, a, verb))
		return NULL;
	if (page >= a->pages) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"%s has pages 0..%llu, not %llu", guid,
				(unsigned long long)a->pages - 1, (unsigned long long)page);
		return NULL;
	}
	return a;
}

/* v's decimal digits, ending just before end; returns where they start. */
static char *decimal(char *end, unsigned long long v)
{
	do
		*--end = (char)('0' + v % 10);
	while (v /= 10);
	return end;
}

/* "<node>/<pid>/<op n>", as snprintf's "%s/%d/%llu" writes it (a peer's
 * pid, from SO_PEERCRED or getpid(), is not negative), without its parsing
 * of the format: snprintf took 1.4k instructions, 2% of a whole-page write
 * on the node a client asked. */
void vmm_lock_owner(struct vmm *v, struct client_call *call, char *buf, size_t len)
{
	const char *node = vmm_node_id(v);
	char digits[2][24], *pid, *op;
	size_t node_len = strlen(node), pid_len, op_len;

	pid = decimal(digits[0] + sizeof(digits[0]),
		      (unsigned long long)client_call_peer_pid(call));
	op = decimal(digits[1] + sizeof(digits[1]), ++v->next_op);
	pid_len = (size_t)(digits[0] + sizeof(digits[0]) - pid);
	op_len = (size_t)(digits[1] + sizeof(digits[1]) - op);
	if (node_len + pid_len + op_len + 3 > len) { /* cut short, as snprintf would */
		snprintf(buf, len, "%s/%.*s/%.*s", node, (int)pid_len, pid, (int)op_len, op);
		return;
	}
	memcpy(buf, node, node_len);
	buf += node_len;
	*buf++ = '/';
	memcpy(buf, pid, pid_len);
	buf += pid_len;
	*buf++ = '/';
	memcpy(buf, op, op_len);
	buf[op_len] = '\0';
}

static void on_stray_lock_answer(const CommandComplete *cc, void *arg)
{
	if (cc->status != FTVM__PARTNER__STATUS__STATUS_OK)
		log_warning("releasing a half-applied lock (%s) failed: %s", (char *)arg,
			    cc->reason);
	free(arg);
}

void vmm_release_stray_lock(struct vmm *v, const char *guid, uint64_t page, const char *owner)
{
	struct vmm_msg msg;
	Envelope *env = vmm_msg_release_pointer(&msg, guid, page, owner, false, 0, 0);
	void *arg = strdup(owner);

	if (!arg || vmm_partner_send(v, &env, 1, NULL, 0, on_stray_lock_answer, &arg) < 0)
		free(arg);
}

/* ---- the journal ---- */

/* While the partner is away the journal keeps what it missed, up to
 * [failover] journal_limit rows (DRBD's bounded bitmap): past that this node
 * lets those rows go by moving the partner's applied mark to its own last
 * LSN. The partner's Hello then says it applied less than the mark, and the
 * resync it gets is full (ha/resync.c, make_plan). */
static void journal_limit(struct vmm *v)
{
	uint64_t rows, last;

	if (vmm_mode(v) != VMM_MODE_SOLO && vmm_mode(v) != VMM_MODE_SOLO_READ)
		return;
	rows = pagetable_journal_count(v->pt);
	if (rows <= v->config->journal_limit)
		return;
	last = pagetable_last_own_lsn(v->pt, vmm_node_id(v));
	if (last == UINT64_MAX)
		return;
	pagetable_set_applied_by_partner_lsn(v->pt, last);
	if (!v->journal_given_up)
		log_warning(
			"journal: %llu rows kept for the partner, past journal_limit (%llu): no "
			"more are kept, and the partner gets a full resync when it returns",
			(unsigned long long)rows, (unsigned long long)v->config->journal_limit);
	v->journal_given_up = true;
}

/* Rows both nodes applied go, a bounded number at a time: this node's up to
 * what the partner said it applied (frozen while the partner is away, so a
 * resync finds what it missed, up to journal_limit), and the partner's. */
static void on_trim(evutil_socket_t fd, short what, void *arg)
{
	struct vmm *v = arg;
	int r;

	journal_limit(v);
	r = pagetable_journal_trim(v->pt, vmm_node_id(v), pagetable_applied_by_partner_lsn(v->pt),
				   JOURNAL_TRIM_ROWS);

	if (r < 0)
		log_warning("journal trim: %s", pagetable_last_error(v->pt));
	else if (vmm_mode(v) == VMM_MODE_SOLO || vmm_mode(v) == VMM_MODE_SOLO_READ)
		log_debug("journal trim while alone: %d rows gone", r);
	vmm_changed(v);
}

/* ---- lifecycle ---- */

static int load_alloc(const struct pt_alloc *pa, void *arg)
{
	struct vmm *v = arg;
	struct vmm_alloc *a = vmm_alloc_new(pa->guid, pa->home, pa->owner, pa->policy, pa->size,
					    pa->block_size, pa->header, pa->header_len);
	int media = vmm_media_parse(pa->media ? pa->media : "store");

	if (!a)
		return -ENOMEM;
	a->store_offset = pa->store_offset;
	a->uid = pa->uid;
	a->media = media < 0 ? VMM_MEDIA_STORE : (enum vmm_media)media;
	a->flash_offset = pa->flash_offset;
	if (vmm_alloc_set_client(a, pa->client) < 0 || vmm_alloc_set_session(a, pa->session) < 0 ||
	    vmm_alloc_set_volume(a, pa->volume ? pa->volume : "") < 0 || media < 0) {
		vmm_alloc_free(a);
		return log_error_errno(
			-EBADMSG,
			"page table: allocation %s: client name '%s', session '%s', volume '%s' or "
			"media '%s' is not one",
			pa->guid, pa->client, pa->session, pa->volume, pa->media);
	}
	vmm_table_insert(v->table, a);
	return 0;
}

static int load_page(const struct pt_page *pp, void *arg)
{
	struct vmm *v = arg;
	struct vmm_alloc *a = vmm_table_find(v->table, pp->guid);

	if (!a || pp->page >= a->pages)
		return log_error_errno(-EBADMSG, "page table: page %llu of %s has no allocation",
				       (unsigned long long)pp->page, pp->guid);
	a->page[pp->page].version = pp->version;
	a->page[pp->page].crc32c = pp->crc32c;
	a->page[pp->page].dirty = pp->dirty;
	return 0;
}

int vmm_new(struct event_base *base, const struct ftvm_config *config, struct vmm **ret)
{
	char path[4096];
	struct vmm *v = calloc(1, sizeof(*v));
	int r;

	if (!v)
		return log_error_errno(-ENOMEM, "memory manager");
	v->base = base;
	v->config = config;
	v->after_tail = &v->after;
	v->flush_event = event_new(base, -1, 0, on_flush, v);
	v->kick_event = event_new(base, -1, 0, vmm_on_paging_kick, v);
	v->failover = failover_state_new(base, v);
	v->trim_event = event_new(base, -1, EV_PERSIST, on_trim, v);
	v->idle_event = evtimer_new(base, on_idle, v);
	/* The lowest priority: a fold due when a request is there too waits
	 * (the request's commit pushes it back), so it takes no client's time. */
	if (v->idle_event)
		event_priority_set(v->idle_event, event_base_get_npriorities(base) - 1);
	r = vmm_table_new(&v->table);
	if (r < 0 || !v->failover || !v->flush_event || !v->kick_event || !v->trim_event ||
	    !v->idle_event) {
		r = log_error_errno(-ENOMEM, "memory manager");
		goto fail;
	}
	r = frame_pool_new(config->memory_size, config->page_size,
			   pagedata_landing_block_frames(config), &v->pool);
	if (r < 0) {
		log_error_errno(r, "frame pool of %llu bytes",
				(unsigned long long)config->memory_size);
		goto fail;
	}
	snprintf(path, sizeof(path), "%s/pagetable.db", config->state_dir);
	r = pagetable_open(path, config->synchronous_full, &v->pt);
	if (r < 0) {
		log_error_errno(r, "page table %s: %s", path, pagetable_last_error(NULL));
		goto fail;
	}
	v->pagedata = pagedata_new(v, base, config, v->pt, v->pool);
	if (!v->pagedata) {
		r = log_error_errno(-ENOMEM, "memory manager");
		goto fail;
	}
	r = pagetable_set_checkpoint_frames(v->pt, config->wal_checkpoint_frames);
	if (r == 0)
		r = pagetable_load(v->pt, load_alloc, load_page, v);
	if (r == 0)
		r = pagetable_recover_partner_applied_lsn(v->pt, config->id);
	if (r < 0) {
		log_error_errno(r, "page table %s: cannot load: %s", path,
				pagetable_last_error(v->pt));
		goto fail;
	}
	r = vmm_epoch_load(v);
	if (r < 0) {
		log_error_errno(r, "page table %s: %s", path, pagetable_last_error(v->pt));
		goto fail;
	}
	log_info("page table %s (WAL, synchronous %s): %zu allocations loaded, epoch %llu", path,
		 config->synchronous_full ? "full" : "normal", vmm_table_size(v->table),
		 (unsigned long long)vmm_epoch(v));
	r = vmm_store_open(v);
	if (r == 0)
		r = vmm_flash_open(v);
	if (r == 0)
		r = vmm_partitions_open(v);
	if (r < 0)
		goto fail;
	vmm_store_page_in(v);
	vmm_flash_page_in(v);
	vmm_sessions_orphaned(v); /* their clients went with the last run */
	{
		struct timeval every = { JOURNAL_TRIM_EVERY_S, 0 };

		event_add(v->trim_event, &every);
	}
	/* From here a failed commit stops the node; before, it fails the start. */
	pagetable_on_commit_failed(v->pt, stop_on_failed_commit, v);
	*ret = v;
	return 0;
fail:
	vmm_free(v);
	return r;
}

void vmm_set_event_sink(struct vmm *v, vmm_event_fn fn, void *arg)
{
	v->event_fn = fn;
	v->event_arg = arg;
}

void vmm_tell(struct vmm *v, const char *type, const char *what, const char *reason,
	      const char *const *kv)
{
	if (v->event_fn)
		v->event_fn(type, what, reason, kv, v->event_arg);
}

void vmm_tell_volume(struct vmm *v, const struct vmm_alloc *a, const char *what)
{
	char size[24];

	if (!vmm_alloc_is_volume(a))
		return;
	snprintf(size, sizeof(size), "%llu", (unsigned long long)a->size);
	vmm_tell(v, "volume", what, NULL,
		 (const char *const[]){ "name", a->volume, "size", size, "home", a->home, "guid",
					a->guid, NULL });
}

int vmm_set_session(struct vmm *v, struct repl_session *session)
{
	v->session = session;
	return pagedata_start(v->pagedata, session);
}

void vmm_free(struct vmm *v)
{
	if (!v)
		return;
	if (v->store_queue)
		log_info("replacement: %llu page-ins, %llu evictions since start; %llu pages "
			 "resident",
			 (unsigned long long)v->counted.page_ins,
			 (unsigned long long)v->counted.evictions,
			 (unsigned long long)v->resident_pages);
	vmm_space_waiters_fail(v);
	vmm_flushes_fail(v);
	if (v->failover)
		vmm_window_fail_all(v, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
				    "node stopping");
	vmm_page_waiters_fail(v, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN, "node stopping");
	if (v->failover) { /* the holdings are ha/'s (a start may fail before) */
		if (vmm_mode(v) == VMM_MODE_SOLO)
			vmm_holdings_release_at_stop(v);
		vmm_holdings_free(v);
	}
	if (v->pagedata) {
		pagedata_landings_drop(v->pagedata);
		pagedata_grants_drop(v->pagedata);
		pagedata_granted_forget(v->pagedata);
	}
	/* Destage first: the pages it marks clean commit with the flush below. */
	vmm_store_close(v);
	vmm_flash_close(v);
	if (v->kick_event)
		event_free(v->kick_event);
	failover_state_free(v->failover);
	if (v->trim_event)
		event_free(v->trim_event);
	if (v->pt && v->flush_event)
		vmm_flush(v);
	/* Close folds what waits and checkpoints. */
	if (v->idle_event)
		event_free(v->idle_event);
	pagetable_close(v->pt);
	vmm_table_free(v->table);
	if (v->pagedata)
		pagedata_stop(v->pagedata);
	pagedata_free(v->pagedata);
	frame_pool_free(v->pool);
	if (v->flush_event)
		event_free(v->flush_event);
	vmm_sessions_free(v);
	drop_answers(v);
	free(v->answers);
	free(v);
}

void vmm_get_counts(struct vmm *v, struct status_counts *ret)
{
	struct pt_stats pt;

	*ret = v->counted;
	ret->frames_total = frame_pool_server_frames(v->pool);
	ret->frames_free = frame_pool_free_count(v->pool);
	ret->cache_frames_total = frame_pool_cache_frames(v->pool);
	ret->cache_frames_free = frame_pool_cache_free_count(v->pool);
	ret->cache_replacement_queue = v->lru[FRAME_CACHE].length;
	ret->allocations_own = vmm_table_count(v->table, vmm_node_id(v), true);
	ret->allocations_partner = vmm_table_count(v->table, vmm_node_id(v), false);
	ret->journal_rows = pagetable_journal_count(v->pt);
	ret->journal_given_up = v->journal_given_up;
	if (v->store)
		vmm_extent_space(v, VMM_DEVICE_STORE, &ret->store_free, &ret->store_capacity);
	if (v->flash)
		vmm_extent_space(v, VMM_DEVICE_FLASH, &ret->flash_free, &ret->flash_capacity);
	status_counts_add(ret, pagedata_counted(v->pagedata));
	status_counts_add(ret, failover_counted(v->failover));
	pagedata_pool_counts(v->pagedata, ret);
	vmm_holdings_revoked(v, &ret->pointers_revoked, &ret->frames_revoked);
	/* "asked" folds and checkpoints are the idle ones: vmm.c asks only when idle. */
	pagetable_get_stats(v->pt, &pt);
	ret->pagetable_folds_idle = pt.folds_asked;
	ret->pagetable_folds_backstop = pt.folds_backstop;
	ret->pagetable_fold_waiting = pt.fold_waiting;
	ret->pagetable_checkpoints_idle = pt.checkpoints_asked;
	ret->pagetable_checkpoints_backstop = pt.checkpoints_backstop;
	ret->pagetable_wal_frames = pt.wal_frames;
	ret->pagetable_wal_frames_peak = pt.wal_frames_peak;
	ret->pagetable_wal_checkpoint_frames = pt.checkpoint_frames;
	ret->pagetable_commits = pt.commits;
}

void *vmm_pool_base(const struct vmm *v)
{
	return frame_pool_addr(v->pool, 0);
}

uint64_t vmm_pool_block_frames(const struct vmm *v)
{
	return frame_pool_block_frames(v->pool);
}

/* What a request changes: refused while solo with [failover] solo = refuse. */
static bool modifies(const Ftvm__Client__ClientRequest *req)
{
	switch (req->request_case) {
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC:
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE:
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FREE:
		return true;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_GET_POINTER:
		return req->get_pointer->write;
	default:
		return false;
	}
}

/* Answers the requests the mode forbids; false when req may go on. */
static bool refused_by_mode(struct vmm *v, struct client_call *call,
			    const Ftvm__Client__ClientRequest *req)
{
	if (vmm_mode(v) == VMM_MODE_OFFLINE) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"node %s does not serve yet (%s): it waits for its partner",
				vmm_node_id(v), vmm_mode_reason(v));
		return true;
	}
	if (vmm_mode(v) == VMM_MODE_FENCED) {
		const Ftvm__Client__ReleasePointerRequest *rel = req->release_pointer;

		/* Its clients learn that their pointers were revoked (ha/HA.md). */
		if (req->request_case == FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER &&
		    vmm_holding_revoked_reply(v, call,
					      vmm_holding_find(v, call, rel->guid, rel->page)))
			return true;
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_FENCED,
				"node %s is fenced (%s): its partner serves", vmm_node_id(v),
				vmm_mode_reason(v));
		return true;
	}
	return modifies(req) && vmm_refuses_change(v, call);
}

bool vmm_refuses_change(struct vmm *v, struct client_call *call)
{
	if (vmm_mode(v) != VMM_MODE_SOLO_READ)
		return false;
	vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_DENIED,
			"node %s serves alone with [failover] solo = refuse: "
			"reads only until the partner is back",
			vmm_node_id(v));
	return true;
}

/* What cannot complete without the partner while mirrored: in the failover
 * window it waits for the pair's decision (ha/failover_window.c). */
static bool needs_partner(const Ftvm__Client__ClientRequest *req)
{
	switch (req->request_case) {
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC:
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE:
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FREE:
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_GET_POINTER:
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER:
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_VERIFY:
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FAILBACK:
		return true;
	default:
		return false;
	}
}

void vmm_client_request(struct vmm *v, struct client_call *call,
			const Ftvm__Client__ClientRequest *req)
{
	if (refused_by_mode(v, call, req))
		return;
	if (needs_partner(req) && vmm_window_open(v) && vmm_window_park(v, call, req))
		return;
	switch (req->request_case) {
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC:
		vmm_op_alloc(v, call, req->alloc);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_WRITE_PAGE:
		vmm_op_write_page(v, call, req->write_page);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_READ_PAGE:
		vmm_op_read_page(v, call, req->read_page);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FREE:
		if (req->free->volume[0])
			vmm_op_free_volume(v, call, req->free->volume);
		else
			vmm_op_free(v, call, req->free->guid);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_VERIFY:
		vmm_op_verify(v, call);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FLUSH:
		vmm_op_flush(v, call, req->flush);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_FAILBACK:
		vmm_op_failback(v, call);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_MAP:
		vmm_op_map(v, call);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_GET_POINTER:
		vmm_op_get_pointer(v, call, req->get_pointer);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_RELEASE_POINTER:
		vmm_op_release_pointer(v, call, req->release_pointer);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_SESSION:
		vmm_op_session(v, call, req->session);
		break;
	default:
		vmm_op_local(v, call, req);
		break;
	}
}
