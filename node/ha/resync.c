/* Resync (node/ha/HA.md, "Solo and rejoin"): the survivor sends a node that is
 * behind everything it holds, in one event-loop turn, and from the same turn
 * on mirrors every change as usual: the link keeps the order, so nothing
 * written meanwhile is lost or stale. The receiver replaces its page table.
 *
 * The pages' blocks are pagedata's to send (pagedata/resync_send.c): on a
 * one-sided link they are copied to staging runs in that turn and go by
 * RDMA WRITE once the receiver answered ResyncLandings, a round trip later
 * (replica/RDMA.md, "Resync"): each ResyncPage carries the page's state at
 * the snapshot, and the receiver keeps whichever version is newer.
 *
 *   snapshot turn: Begin, Allocation..., inline pages, ResyncLandings
 *   its answer:    landed pages (one batch), the rest inline, the next
 *                  chunk's ResyncLandings or ResyncEnd
 *   each answer:   staging runs back to the pool */
#include "vmm_core.h"

#include "failover_state.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "clock.h"
#include "crc32c.h"
#include "log.h"
#include "session.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

/* ---- the survivor's side ---- */

struct resync_send {
	struct vmm *vmm;
	uint64_t partner_applied_lsn, partner_own_lsn; /* from its Hello */
	unsigned outstanding;			       /* requests not yet answered */
	int status;
	char reason[256];
	vmm_resync_done_fn done;
	void *arg;
	struct vmm_resync_stats stats;
	/* The pages' blocks, which pagedata sends (pagedata/resync_send.c). */
	struct pagedata_resync_out *blocks;
	uint64_t end_lsn; /* the last LSN of the snapshot, for ResyncEnd */
};

static void note_applied(struct resync_send *rs, const CommandComplete *cc)
{
	struct pagetable *pt = vmm_pagetable(rs->vmm);

	if (cc->applied_lsn > pagetable_applied_by_partner_lsn(pt))
		pagetable_set_applied_by_partner_lsn(pt, cc->applied_lsn);
}

static void fail(struct resync_send *rs, int status, const char *reason)
{
	if (rs->status != FTVM__PARTNER__STATUS__STATUS_OK)
		return;
	rs->status = status;
	snprintf(rs->reason, sizeof(rs->reason), "%s",
		 reason && reason[0] ? reason : codec_status_name(status));
}

/* One request fewer outstanding; the last one ends the resync. */
static void release(struct resync_send *rs)
{
	if (--rs->outstanding)
		return;
	pagedata_resync_out_free(rs->blocks);
	rs->stats.ms = clock_now_ms() - rs->stats.ms;
	vmm_failover(rs->vmm)->resync_send = NULL;
	rs->done(rs->status, rs->reason, &rs->stats, rs->arg);
	free(rs);
}

static void on_answer(const CommandComplete *cc, void *arg)
{
	struct resync_send *rs = arg;

	note_applied(rs, cc);
	if (cc->status != FTVM__PARTNER__STATUS__STATUS_OK)
		fail(rs, cc->status, cc->reason);
	release(rs);
}

/* Requests pagedata sent for the resync's blocks. */
static void on_sent(size_t n, void *arg)
{
	struct resync_send *rs = arg;

	rs->outstanding += n;
}

static int send_one(struct resync_send *rs, Envelope *env)
{
	int r = vmm_partner_send(rs->vmm, &env, 1, NULL, 0, on_answer, (void *[]){ rs });

	if (r == 0)
		rs->outstanding++;
	return r;
}

static int send_allocation(struct resync_send *rs, const struct vmm_alloc *a)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__ResyncAllocation m = FTVM__PARTNER__RESYNC_ALLOCATION__INIT;
	Ftvm__Partner__AllocateMemory am;
	Ftvm__Partner__PageState *states = calloc(a->pages, sizeof(*states));
	Ftvm__Partner__PageState **ptrs = calloc(a->pages, sizeof(*ptrs));
	int r = -ENOMEM;

	if (!states || !ptrs)
		goto out;
	vmm_msg_allocation(&am, a);
	for (uint64_t i = 0; i < a->pages; i++) {
		ftvm__partner__page_state__init(&states[i]);
		states[i].version = a->page[i].version;
		states[i].crc32c = a->page[i].crc32c;
		states[i].dirty = a->page[i].dirty;
		ptrs[i] = &states[i];
	}
	m.allocation = &am;
	m.owner = a->owner;
	m.n_pages = a->pages;
	m.pages = ptrs;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_ALLOCATION;
	env.resync_allocation = &m;
	r = send_one(rs, &env);
out:
	free(states);
	free(ptrs);
	return r;
}

/* What a page's block is of: its state at the snapshot. */
static void page_state(const struct vmm_alloc *a, uint64_t page, Ftvm__Partner__PageState *ret)
{
	ftvm__partner__page_state__init(ret);
	ret->version = a->page[page].version;
	ret->crc32c = a->page[page].crc32c;
	ret->dirty = a->page[page].dirty;
}

/* A write-locked page's block: a client's write pointer may be writing into
 * it at this very moment, from another process. So the block is copied
 * first and the copy checked against the page's CRC-32C: what is sent is
 * what was checked. A copy that differs was written into and not released:
 * it is not the page's state, and the page goes without its block, which
 * the release brings the receiver (the holding is mirrored behind the
 * snapshot); until then a dirty page is stale there, a clean one comes
 * from the store. NULL, *ret_r 0: not sent; -ENOMEM in *ret_r. */
static void *copy_locked(struct vmm *v, const struct vmm_alloc *a, uint64_t page, int *ret_r)
{
	void *copy = malloc(a->block_size);

	*ret_r = copy ? 0 : -ENOMEM;
	if (!copy)
		return NULL;
	memcpy(copy, vmm_block_addr(v, a, page), a->block_size);
	if (crc32c(0, copy, a->block_size) == a->page[page].crc32c)
		return copy;
	free(copy);
	log_info("resync: %s page %llu: a write pointer has written into its block and not "
		 "released it: sent without its block, which the release brings",
		 a->guid, (unsigned long long)page);
	return NULL;
}

/* A resident page's block: a dirty one, which the store does not have, or a
 * clean one, which warms the receiver's frames; and a dirty one whose frames
 * went, from flash. The receiver pages in the others from the store (a stale
 * page has nothing here to send). */
static int send_page(struct resync_send *rs, const struct vmm_alloc *a, uint64_t page)
{
	Ftvm__Partner__PageState state;
	const void *block;
	void *copy = NULL;
	int r = 0;

	if (!a->page[page].resident && !(a->page[page].dirty && vmm_page_on_flash(&a->page[page])))
		return 0;
	if (!a->page[page].resident) {
		/* Dirty, its frames given back: flash has its block. */
		block = copy = malloc(a->block_size);
		if (!copy)
			return -ENOMEM;
		if (vmm_flash_read_block(rs->vmm, a, page, copy) < 0) {
			free(copy);
			return 0; /* lost here: the receiver's copy stays stale */
		}
	} else if (vmm_page_write_locked(&a->page[page])) {
		block = copy = copy_locked(rs->vmm, a, page, &r);
		if (!copy)
			return r;
	} else {
		block = vmm_block_addr(rs->vmm, a, page);
	}
	page_state(a, page, &state);
	r = pagedata_resync_out_page(rs->blocks, a->guid, page, block, a->block_size, &state);
	free(copy);
	if (r == 0) {
		rs->stats.pages++;
		rs->stats.bytes += a->block_size;
	}
	return r;
}

/* An allocation as a whole: its row, its pages' state and every block. */
static int send_whole(struct resync_send *rs, const struct vmm_alloc *a)
{
	int r = send_allocation(rs, a);

	for (uint64_t i = 0; r == 0 && i < a->pages; i++)
		r = send_page(rs, a, i);
	rs->stats.allocations++;
	return r;
}

/* What the partner lacks, from where its Hello said its table stands. */
struct resync_plan {
	bool incremental;
	char **touched; /* incremental: allocations changed here since, sorted */
	size_t n_touched;
};

static int add_touched(const char *guid, void *arg)
{
	struct resync_plan *p = arg;
	char **t = realloc(p->touched, (p->n_touched + 1) * sizeof(*t));

	if (!t)
		return -ENOMEM;
	p->touched = t;
	t[p->n_touched] = strdup(guid);
	return t[p->n_touched++] ? 0 : -ENOMEM;
}

static bool touched(const struct resync_plan *p, const char *guid)
{
	for (size_t i = 0; i < p->n_touched; i++)
		if (strcmp(p->touched[i], guid) == 0)
			return true;
	return false;
}

static void plan_free(struct resync_plan *p)
{
	for (size_t i = 0; i < p->n_touched; i++)
		free(p->touched[i]);
	free(p->touched);
}

/* Incremental only when the histories agree (node/ha/HA.md, "Solo and
 * rejoin"): the partner holds exactly the changes of its own this node
 * applied (none more, which it alone made and nobody acknowledged; none
 * fewer, which it lost), and this node still journals all of its own since
 * the last the partner applied. */
static void make_plan(struct resync_send *rs, struct resync_plan *p)
{
	struct vmm *v = rs->vmm;

	memset(p, 0, sizeof(*p));
	if (rs->partner_own_lsn != pagetable_partner_applied_lsn(vmm_pagetable(v)) ||
	    rs->partner_applied_lsn < pagetable_applied_by_partner_lsn(vmm_pagetable(v)))
		return;
	if (pagetable_journal_guids_after(vmm_pagetable(v), vmm_node_id(v), rs->partner_applied_lsn,
					  add_touched, p) < 0) {
		plan_free(p);
		memset(p, 0, sizeof(*p));
		return;
	}
	p->incremental = true;
}

/* The allocations touched that are gone here: the partner drops them. */
static char **freed_of(const struct vmm *v, const struct resync_plan *p, size_t *ret_n)
{
	char **freed = calloc(p->n_touched ? p->n_touched : 1, sizeof(*freed));

	*ret_n = 0;
	for (size_t i = 0; freed && i < p->n_touched; i++)
		if (!vmm_table_find(vmm_allocations(v), p->touched[i]))
			freed[(*ret_n)++] = p->touched[i];
	return freed;
}

static int send_begin(struct resync_send *rs, const struct resync_plan *p, size_t n)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__ResyncBegin begin = FTVM__PARTNER__RESYNC_BEGIN__INIT;
	size_t n_freed = 0;
	char **freed = p->incremental ? freed_of(rs->vmm, p, &n_freed) : NULL;
	int r;

	if (p->incremental && !freed)
		return -ENOMEM;
	begin.epoch = vmm_epoch(rs->vmm);
	begin.allocations = n;
	begin.incremental = p->incremental;
	begin.freed = freed;
	begin.n_freed = n_freed;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_BEGIN;
	env.resync_begin = &begin;
	r = send_one(rs, &env);
	free(freed);
	return r;
}

/* After the snapshot's blocks: from start(), or from pagedata once the last
 * landed ones are out (pagedata_resync_calls.blocks_out). */
static int send_end(void *arg)
{
	struct resync_send *rs = arg;
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__ResyncEnd end = FTVM__PARTNER__RESYNC_END__INIT;

	end.epoch = vmm_epoch(rs->vmm);
	end.lsn = rs->end_lsn;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_END;
	env.resync_end = &end;
	return send_one(rs, &env);
}

/* Everything, or what changed: the allocations touched since, whole, and
 * the blocks of every dirty page (a node that restarted lost those). 1:
 * every block went inline, and ResyncEnd is the caller's to send; 0: it
 * follows the landed blocks (pagedata_resync_out_send). */
static int send_snapshot(struct resync_send *rs)
{
	struct vmm *v = rs->vmm;
	struct resync_plan plan;
	size_t n = 0, whole = 0;
	struct vmm_alloc **all = vmm_table_sorted(vmm_allocations(v), &n);
	int r;

	if (!all && n)
		return -ENOMEM;
	make_plan(rs, &plan);
	rs->stats.incremental = plan.incremental;
	for (size_t i = 0; i < n; i++)
		whole += !plan.incremental || touched(&plan, all[i]->guid);
	r = send_begin(rs, &plan, whole);
	for (size_t i = 0; r == 0 && i < n; i++) {
		struct vmm_alloc *a = all[i];

		if (!plan.incremental || touched(&plan, a->guid)) {
			r = send_whole(rs, a);
			continue;
		}
		for (uint64_t p = 0; r == 0 && p < a->pages; p++)
			if (a->page[p].dirty)
				r = send_page(rs, a, p);
	}
	plan_free(&plan);
	free(all);
	if (r < 0)
		return r;
	/* Everything journalled here until now is in the snapshot. */
	rs->end_lsn = pagetable_reserve_lsn(vmm_pagetable(v));
	return pagedata_resync_out_send(rs->blocks);
}

static void start_when_settled(evutil_socket_t fd, short what, void *arg);

/* Operations completed alone finish a turn after they start (vmm/vmm.c): the
 * snapshot waits until none is half done. */
static void start(struct resync_send *rs)
{
	struct vmm *v = rs->vmm;
	const struct pagedata_resync_calls calls = {
		.sent = on_sent,
		.answered = on_answer,
		.blocks_out = send_end,
		.arg = rs,
	};
	struct timeval soon = { 0, 1000 };
	int r;

	if (vmm_solo_answers_pending(v)) {
		if (event_base_once(vmm_event_base(v), -1, EV_TIMEOUT, start_when_settled, rs,
				    &soon) < 0)
			log_error("resync: cannot wait for operations in flight");
		return;
	}
	/* Fenced, say, while the snapshot waited: a node that no longer serves
	 * alone has nothing to resync, and must not go mirrored. */
	if (vmm_mode(v) != VMM_MODE_SOLO && vmm_mode(v) != VMM_MODE_SOLO_READ) {
		char why[160];

		snprintf(why, sizeof(why), "this node no longer serves alone (%s)",
			 vmm_mode_name(vmm_mode(v)));
		rs->outstanding = 1;
		fail(rs,
		     vmm_mode(v) == VMM_MODE_FENCED
			     ? FTVM__PARTNER__STATUS__STATUS_FENCED
			     : FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
		     why);
		release(rs);
		return;
	}
	vmm_flush(v);
	rs->stats.ms = clock_now_ms();
	rs->outstanding = 1; /* held until every request is out */
	rs->blocks = pagedata_resync_out_new(vmm_pagedata(v), &calls);
	r = rs->blocks ? send_snapshot(rs) : -ENOMEM;
	/* From this turn on, every change goes to the partner after the
	 * snapshot, on the same link, as any mirrored change does. */
	vmm_mode_mirrored_at_snapshot(v);
	/* Ahead of ResyncEnd, after which the partner serves its clients: it
	 * must know our clients' locks by then. */
	if (r >= 0)
		vmm_holdings_mirror(v);
	if (r == 1)
		r = send_end(rs);
	if (r < 0 && rs->status == FTVM__PARTNER__STATUS__STATUS_OK) {
		rs->status = FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE;
		snprintf(rs->reason, sizeof(rs->reason), "cannot send the resync: %s",
			 strerror(-r));
	}
	log_info("resync (%s): %llu allocations, %llu pages (%llu bytes) sent to %s",
		 rs->stats.incremental ? "incremental" : "full",
		 (unsigned long long)rs->stats.allocations, (unsigned long long)rs->stats.pages,
		 (unsigned long long)rs->stats.bytes, vmm_partner_id(v));
	{
		CommandComplete ok = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

		on_answer(&ok, rs); /* lets go of the hold */
	}
}

static void start_when_settled(evutil_socket_t fd, short what, void *arg)
{
	start(arg);
}

void vmm_resync_position(struct vmm *v, uint64_t *ret_applied, uint64_t *ret_own)
{
	*ret_applied = pagetable_partner_applied_lsn(vmm_pagetable(v));
	*ret_own = pagetable_last_own_lsn(vmm_pagetable(v), vmm_node_id(v));
}

int vmm_resync_send(struct vmm *v, uint64_t partner_applied_lsn, uint64_t partner_own_lsn,
		    vmm_resync_done_fn done, void *arg)
{
	struct failover_state *f = vmm_failover(v);
	struct resync_send *rs;

	if (f->resync_send)
		return -EBUSY;
	rs = calloc(1, sizeof(*rs));
	if (!rs)
		return -ENOMEM;
	rs->vmm = v;
	rs->partner_applied_lsn = partner_applied_lsn;
	rs->partner_own_lsn = partner_own_lsn;
	rs->done = done;
	rs->arg = arg;
	f->resync_send = rs;
	start(rs);
	return 0;
}

/* ---- the receiver's side ---- */

__attribute__((format(printf, 4, 5))) static int refuse(struct vmm *v, char *reason, size_t len,
							const char *fmt, ...)
{
	struct failover_state *f = vmm_failover(v);
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(reason, len, fmt, ap);
	va_end(ap);
	if (f->resync_receiving && !f->resync_failed) {
		f->resync_failed = true;
		snprintf(f->resync_error, sizeof(f->resync_error), "%s", reason);
	}
	return FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST;
}

/* Our copy of guid goes (absent already is fine): the survivor's replaces it. */
static int drop_allocation(struct vmm *v, const char *guid, const struct pt_origin *o)
{
	struct vmm_alloc *a = vmm_table_find(vmm_allocations(v), guid);
	int r;

	if (!a)
		return 0;
	vmm_flash_keep(v, a); /* for the copy that replaces it */
	r = pagetable_alloc_delete(vmm_pagetable(v), a->guid, o);
	vmm_alloc_give_frames(v, a);
	vmm_table_remove(vmm_allocations(v), a);
	vmm_alloc_free(a);
	vmm_changed(v);
	return r;
}

/* Everything this node held goes: the survivor's copy replaces it. */
static int drop_table(struct vmm *v, const struct pt_origin *o)
{
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(vmm_allocations(v), &n);
	int r = 0;

	if (!all && n)
		return -ENOMEM;
	for (size_t i = 0; i < n && r == 0; i++)
		r = drop_allocation(v, all[i]->guid, o);
	free(all);
	return r;
}

static int on_begin(struct vmm *v, const Ftvm__Partner__ResyncBegin *m, const struct pt_origin *o,
		    char *reason, size_t len)
{
	struct failover_state *f = vmm_failover(v);
	int r = 0;

	if (m->epoch <= vmm_epoch(v))
		return refuse(v, reason, len,
			      "not behind: this node is at epoch %llu, not below %llu",
			      (unsigned long long)vmm_epoch(v), (unsigned long long)m->epoch);
	f->resync_receiving = true;
	f->resync_failed = false;
	vmm_flash_forget_kept(v);			/* an earlier resync's */
	pagedata_resync_landings_drop(vmm_pagedata(v)); /* an earlier resync's */
	f->resync_error[0] = '\0';
	vmm_space_waiters_fail(v);
	vmm_page_waiters_fail(v, FTVM__PARTNER__STATUS__STATUS_FENCED,
			      "this node is being resynced by its partner, which serves");
	vmm_holdings_revoke(v); /* fenced already; a grant may have raced it */
	if (!m->incremental)
		r = drop_table(v, o);
	for (size_t i = 0; r == 0 && i < m->n_freed; i++)
		r = drop_allocation(v, m->freed[i], o);
	if (r < 0)
		return refuse(v, reason, len, "cannot empty the page table: %s",
			      pagetable_last_error(vmm_pagetable(v)));
	log_info("resync from %s (epoch %llu): %llu allocations coming", o->node,
		 (unsigned long long)m->epoch, (unsigned long long)m->allocations);
	if (f->resync_observer)
		f->resync_observer(true, 0, "", f->resync_arg);
	return 0;
}

static int on_allocation(struct vmm *v, const Ftvm__Partner__ResyncAllocation *m,
			 const struct pt_origin *o, char *reason, size_t len)
{
	const Ftvm__Partner__AllocateMemory *am = m->allocation;
	struct vmm_alloc *a;

	if (!vmm_failover(v)->resync_receiving)
		return refuse(v, reason, len, "ResyncAllocation outside a resync");
	if (am && am->guid[0] && drop_allocation(v, am->guid, o) < 0)
		return refuse(v, reason, len, "page table: %s",
			      pagetable_last_error(vmm_pagetable(v)));
	if (!am || !am->guid[0] || !m->owner[0] || am->block_size == 0 ||
	    am->block_size % vmm_config(v)->page_size || am->header.len > VMM_HEADER_MAX ||
	    !am->size || !vmm_extent_fits(v, am))
		return refuse(v, reason, len, "a resync allocation that cannot be: %s",
			      am ? am->guid : "(none)");
	a = vmm_alloc_new(am->guid, am->home, m->owner, am->policy, am->size, am->block_size,
			  am->header.data, am->header.len);
	if (!a)
		return refuse(v, reason, len, "out of memory");
	if (a->pages != m->n_pages) {
		vmm_alloc_free(a);
		return refuse(v, reason, len, "%s: %zu page states for %llu pages", am->guid,
			      m->n_pages, (unsigned long long)a->pages);
	}
	a->store_offset = am->store_offset;
	a->uid = am->uid;
	if (vmm_alloc_set_client(a, am->client) < 0 || vmm_alloc_set_session(a, am->session) < 0 ||
	    vmm_alloc_set_volume(a, am->volume) < 0) {
		vmm_alloc_free(a);
		return refuse(v, reason, len,
			      "%s: client name '%.80s', session '%.80s' or volume '%.80s' is not "
			      "one",
			      am->guid, am->client, am->session, am->volume);
	}
	/* A resync is not refused for room: a copy that finds none rests in
	 * the store here. */
	vmm_media_place(v, a, VMM_PLACE_RESYNC, reason, len);
	vmm_table_insert(vmm_allocations(v), a);
	if (vmm_persist_alloc(v, a, o) < 0)
		return refuse(v, reason, len, "page table: %s",
			      pagetable_last_error(vmm_pagetable(v)));
	for (uint64_t i = 0; i < a->pages; i++) {
		a->page[i].version = m->pages[i]->version;
		a->page[i].crc32c = m->pages[i]->crc32c;
		a->page[i].dirty = m->pages[i]->dirty;
		/* Not resident: a dirty page's block follows in a ResyncPage,
		 * unless flash holds it here already. */
		a->page[i].stale = m->pages[i]->dirty && !vmm_page_on_flash(&a->page[i]);
		if (vmm_persist_page(v, a, i, o) < 0)
			return refuse(v, reason, len, "page table: %s",
				      pagetable_last_error(vmm_pagetable(v)));
	}
	return 0;
}

/* The block is not wanted: a change mirrored after the survivor's snapshot
 * got here first (the page is newer, or its allocation freed). */
static int drop_page(struct vmm *v, const Ftvm__Partner__ResyncPage *m)
{
	struct pagedata_incoming in = { .resync_page = m };

	pagedata_discard(vmm_pagedata(v), &in);
	vmm_failover(v)->counted.resync_pages_dropped++;
	log_debug("resync: %s page %llu dropped, a newer change came first", m->guid,
		  (unsigned long long)m->page);
	return 0;
}

static int on_page(struct vmm *v, const Ftvm__Partner__ResyncPage *m, char *reason, size_t len)
{
	struct failover_state *f = vmm_failover(v);
	struct pagedata *pd = vmm_pagedata(v);
	struct pagedata_incoming in = { .resync_page = m };
	struct vmm_alloc *a = vmm_table_find(vmm_allocations(v), m->guid);
	Ftvm__Partner__Landing no_grant; /* a resync's blocks never use one */
	bool granted;
	char why[512];
	int r;

	if (!f->resync_receiving || !a || m->page >= a->pages) {
		/* With a state it may come after the allocation's ReleaseMemory. */
		if (f->resync_receiving && !a && m->state)
			return drop_page(v, m);
		pagedata_discard(pd, &in);
		if (!f->resync_receiving)
			return refuse(v, reason, len, "ResyncPage outside a resync");
		return refuse(v, reason, len, "ResyncPage %s page %llu: no such page", m->guid,
			      (unsigned long long)m->page);
	}
	if (m->state) {
		r = pagedata_resync_page_order(a, m->page, m->state, why, sizeof(why));
		if (r > 0)
			return drop_page(v, m);
		if (r < 0) {
			pagedata_discard(pd, &in);
			return refuse(v, reason, len, "%s", why);
		}
	}
	r = pagedata_receive(pd, a, &in, &no_grant, &granted, why, sizeof(why));
	/* A clean page that finds no frame is read from the store when needed. */
	if (r == -ENOSPC && !a->page[m->page].dirty) {
		a->page[m->page].stale = false;
		r = 0;
	}
	return r < 0 ? refuse(v, reason, len, "%s", why) : 0;
}

/* Our LandingGrant at link up went at the epoch we had and the survivor
 * refused it; offer again at the new one, once ResyncEnd's answer is out. */
static void offer_grants(void *arg)
{
	pagedata_grants_offer(vmm_pagedata(arg));
}

static int on_end(struct vmm *v, const Ftvm__Partner__ResyncEnd *m, char *reason, size_t len)
{
	struct failover_state *f = vmm_failover(v);
	int r;

	if (!f->resync_receiving)
		return refuse(v, reason, len, "ResyncEnd outside a resync");
	f->resync_receiving = false;
	pagedata_resync_landings_drop(vmm_pagedata(v)); /* none is named after ResyncEnd */
	vmm_flash_forget_kept(v);			/* copies the survivor no longer has */
	if (f->resync_failed) {
		snprintf(reason, len, "resync incomplete: %s", f->resync_error);
		if (f->resync_observer)
			f->resync_observer(false, -EIO, reason, f->resync_arg);
		return FTVM__PARTNER__STATUS__STATUS_INTERNAL;
	}
	/* Changes mirrored after the snapshot may have been applied already,
	 * ahead of blocks that came a round trip later. */
	r = pagetable_set_partner_applied_lsn(
		vmm_pagetable(v), m->lsn > pagetable_partner_applied_lsn(vmm_pagetable(v))
					  ? m->lsn
					  : pagetable_partner_applied_lsn(vmm_pagetable(v)));
	/* Our own journal rows describe a table the survivor's replaced: none
	 * is needed for a resync any more. */
	if (r == 0)
		r = pagetable_set_applied_by_partner_lsn(vmm_pagetable(v),
							 pagetable_reserve_lsn(vmm_pagetable(v)));
	if (r == 0)
		r = vmm_set_epoch(v, m->epoch);
	if (r < 0) {
		snprintf(reason, len, "cannot record the resync: %s",
			 pagetable_last_error(vmm_pagetable(v)));
		return FTVM__PARTNER__STATUS__STATUS_INTERNAL;
	}
	vmm_headers_resynced(v);
	log_info("resync done: epoch %llu, %zu allocations", (unsigned long long)m->epoch,
		 vmm_table_size(vmm_allocations(v)));
	vmm_after_commit(v, offer_grants, v);
	if (f->resync_observer)
		f->resync_observer(false, 0, "", f->resync_arg);
	return 0;
}

int vmm_resync_apply(struct vmm *v, const Envelope *env, char *reason, size_t len)
{
	struct pt_origin o = { .node = env->sender, .lsn = env->lsn, .own = false };

	switch (env->message_case) {
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_BEGIN:
		return on_begin(v, env->resync_begin, &o, reason, len);
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_ALLOCATION:
		return on_allocation(v, env->resync_allocation, &o, reason, len);
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE:
		return on_page(v, env->resync_page, reason, len);
	case FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_END:
		return on_end(v, env->resync_end, reason, len);
	default:
		return refuse(v, reason, len, "%s is not a resync message",
			      codec_message_name(env));
	}
}

void vmm_set_resync_observer(struct vmm *v, vmm_resync_observer_fn fn, void *arg)
{
	struct failover_state *f = vmm_failover(v);

	f->resync_observer = fn;
	f->resync_arg = arg;
}

bool vmm_resync_busy(const struct vmm *v)
{
	struct failover_state *f = vmm_failover(v);

	return f->resync_send || f->resync_receiving;
}

bool vmm_resync_receiving(const struct vmm *v)
{
	return vmm_failover(v)->resync_receiving;
}
