/* Pages whose newer versions no node holds any more (node/ha/HA.md,
 * "Recovery"). A stale page (vmm/VMM.md, "The backing store") waits for the
 * partner's copy. When this node is about to serve knowing that no partner
 * holds one (a forced takeover, a restart after serving alone, both nodes
 * restarted at once), that wait would never end: the page would fail every
 * read for good. So each stale page goes back to the store's copy, the
 * newest that survived: the store's version and CRC-32C become the page's
 * (version 0, zeroes, when the store never had one), journalled as an own
 * change ("undo": a resync must carry it), and the page table keeps the
 * list, from which version to which, for `ftvmctl recovery`. */
#include "vmm_core.h"

#include <endian.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "client.pb-c.h"
#include "client_server.h"
#include "log.h"
#include "store.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM
/* Pages named one by one in the log; the rest are counted. */
#define LOG_PAGES_MAX 64
/* Rows in one reply to `ftvmctl recovery`, which asks again from the last. */
#define RECOVERY_LIST_MAX 4096

struct recovery {
	struct vmm *vmm;
	const char *why;
	uint64_t at_ms; /* wall clock, for the operator */
	uint64_t pages, allocations;
};

static uint64_t wall_clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void settle(struct recovery *rc, struct vmm_alloc *a, uint64_t i,
		   const struct store_page_record *rec)
{
	struct vmm *v = rc->vmm;
	struct vmm_page *p = &a->page[i];
	uint64_t from = p->version, to = le64toh(rec->version);
	struct pt_origin o = { .node = vmm_node_id(v),
			       .lsn = pagetable_reserve_lsn(vmm_pagetable(v)),
			       .own = true };
	struct pt_recovered noted = { .at_ms = rc->at_ms,
				      .guid = a->guid,
				      .page = i,
				      .from_version = from,
				      .to_version = to,
				      .why = rc->why };
	struct pt_page pp;

	p->version = to;
	p->crc32c = to ? le32toh(rec->crc32c) : vmm_zero_crc(a->block_size);
	p->dirty = false;
	p->stale = false;
	vmm_replace_update(v, p);
	vmm_page_state(a, i, &pp);
	pp.undo = true;
	vmm_journal_page(v, a, &pp, &o);
	if (pagetable_recovered_add(vmm_pagetable(v), &noted) < 0)
		log_error("page table: cannot note that %s page %llu went back: %s", a->guid,
			  (unsigned long long)i, pagetable_last_error(vmm_pagetable(v)));
	if (rc->pages++ < LOG_PAGES_MAX)
		log_warning("%s page %llu: version %llu is lost (%s): back to the store's "
			    "version %llu",
			    a->guid, (unsigned long long)i, (unsigned long long)from, rc->why,
			    (unsigned long long)to);
}

static void recover_allocation(struct recovery *rc, struct vmm_alloc *a)
{
	struct store_page_record *rec = NULL;
	bool any = false;

	for (uint64_t i = 0; i < a->pages && !any; i++)
		any = a->page[i].stale;
	if (!any)
		return;
	rec = vmm_store_read_records(rc->vmm, a);
	if (!rec) {
		log_error("%s: its stale pages stay stale: the store's records cannot be read",
			  a->guid);
		return;
	}
	rc->allocations++;
	for (uint64_t i = 0; i < a->pages; i++)
		if (a->page[i].stale)
			settle(rc, a, i, &rec[i]);
	free(rec);
}

int64_t vmm_recover_lost_pages(struct vmm *v, const char *why)
{
	struct recovery rc = { .vmm = v, .why = why, .at_ms = wall_clock_ms() };
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(vmm_allocations(v), &n);
	int r;

	if (!all && n)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++)
		recover_allocation(&rc, all[i]);
	free(all);
	if (!rc.pages)
		return 0;
	r = pagetable_commit(vmm_pagetable(v));
	if (r < 0)
		return log_error_errno(r, "page table: cannot commit the recovery: %s",
				       pagetable_last_error(vmm_pagetable(v)));
	log_warning("recovery (%s): %llu pages of %llu allocations went back to the store's "
		    "copy, their newer versions were in memory alone and are lost%s; `ftvmctl "
		    "recovery` lists them",
		    why, (unsigned long long)rc.pages, (unsigned long long)rc.allocations,
		    rc.pages > LOG_PAGES_MAX ? " (the first ones are named above)" : "");
	return (int64_t)rc.pages;
}

static int take_newest_at(const struct pt_recovered *rec, void *arg)
{
	*(uint64_t *)arg = rec->at_ms;
	return 0;
}

void vmm_recovered_summary(struct vmm *v, uint64_t *ret_pages, uint64_t *ret_last_at_ms)
{
	*ret_pages = pagetable_recovered_count(vmm_pagetable(v));
	*ret_last_at_ms = 0;
	if (*ret_pages)
		pagetable_recovered_list(vmm_pagetable(v), 0, 1, true, take_newest_at,
					 ret_last_at_ms);
}

/* The reply's pages, copied out of the page table's rows. */
struct listing {
	Ftvm__Client__RecoveredPage *pages;
	Ftvm__Client__RecoveredPage **ptrs;
	size_t n;
};

static int take_row(const struct pt_recovered *rec, void *arg)
{
	struct listing *l = arg;
	Ftvm__Client__RecoveredPage *p = &l->pages[l->n];

	ftvm__client__recovered_page__init(p);
	p->id = rec->id;
	p->at_ms = rec->at_ms;
	p->guid = strdup(rec->guid);
	p->page = rec->page;
	p->from_version = rec->from_version;
	p->to_version = rec->to_version;
	p->why = strdup(rec->why);
	if (!p->guid || !p->why) {
		free(p->guid);
		free(p->why);
		return -ENOMEM;
	}
	l->ptrs[l->n++] = p;
	return 0;
}

void vmm_reply_recovery(struct vmm *v, struct client_call *call,
			const Ftvm__Client__RecoveryRequest *req)
{
	Ftvm__Client__RecoveryReply rr = FTVM__CLIENT__RECOVERY_REPLY__INIT;
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	unsigned limit =
		req->limit && req->limit < RECOVERY_LIST_MAX ? req->limit : RECOVERY_LIST_MAX;
	struct listing l = { .pages = calloc(limit, sizeof(*l.pages)),
			     .ptrs = calloc(limit, sizeof(*l.ptrs)) };
	int r = l.pages && l.ptrs ? 0 : -ENOMEM;

	if (r == 0)
		r = pagetable_recovered_list(vmm_pagetable(v), req->after, limit, req->newest,
					     take_row, &l);
	if (r < 0) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
				"cannot list the recovered pages: %s",
				r == -ENOMEM ? strerror(ENOMEM)
					     : pagetable_last_error(vmm_pagetable(v)));
	} else {
		rr.pages = l.ptrs;
		rr.n_pages = l.n;
		rr.total = pagetable_recovered_count(vmm_pagetable(v));
		reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_RECOVERY;
		reply.recovery = &rr;
		client_call_reply(call, &reply);
	}
	for (size_t i = 0; i < l.n; i++) {
		free(l.pages[i].guid);
		free(l.pages[i].why);
	}
	free(l.pages);
	free(l.ptrs);
}
