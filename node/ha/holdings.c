/* Pointers held by this node's clients across failover (node/ha/HA.md): mirrored
 * again to a partner a resync brought back (vmm_holdings_mirror), revoked
 * when this node fences itself, their frames set aside until each is
 * released (vmm_holdings_revoke), released at a stop alone
 * (vmm_holdings_release_at_stop), and counted for `ftvmctl status`. The
 * grants and releases themselves are vmm/pointer.c's. */
#include "vmm_core.h"

#include "failover_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "log.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

/* The frames of a page whose pointers were revoked (node/ha/HA.md, "Pointers
 * of a fenced node are revoked"): kept from the pool while a client may
 * still write into them. */
struct vmm_quarantine {
	uint64_t frame;
	uint32_t block_size;
	unsigned pointers; /* revoked holdings pointing into it */
};

/* The newest of call's client's pointers to guid's page. */
struct vmm_holding *vmm_holding_find(struct vmm *v, struct client_call *call, const char *guid,
				     uint64_t page)
{
	uint64_t client_id = client_call_client_id(call);
	struct vmm_holding *h;

	for (h = vmm_failover(v)->holdings; h; h = h->next)
		if (h->client_id == client_id && h->page == page && strcmp(h->guid, guid) == 0)
			break;
	return h;
}

void vmm_holding_add(struct vmm *v, struct vmm_holding *h)
{
	struct failover_state *f = vmm_failover(v);

	h->next = f->holdings;
	f->holdings = h;
}

void vmm_holding_unlink(struct vmm *v, struct vmm_holding *h)
{
	struct vmm_holding **p = &vmm_failover(v)->holdings;

	while (*p && *p != h)
		p = &(*p)->next;
	if (*p)
		*p = h->next;
}

struct vmm_holding *vmm_holding_take_client(struct vmm *v, uint64_t client_id)
{
	struct vmm_holding **p = &vmm_failover(v)->holdings, *h;

	while ((h = *p) && (h->client_id != client_id || h->retry))
		p = &h->next;
	if (h)
		*p = h->next;
	return h;
}

/* h goes (out of the list already), and its quarantined frames with the
 * last pointer into them. */
void vmm_holding_free(struct vmm *v, struct vmm_holding *h)
{
	struct vmm_quarantine *q = h->quarantine;

	if (h->retry)
		event_free(h->retry);
	if (q && --q->pointers == 0) {
		vmm_frames_give(v, q->frame, q->block_size);
		free(q);
	}
	free(h);
}

static void reply_revoked(struct vmm *v, struct client_call *call, struct vmm_holding *h)
{
	vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_STALE_EPOCH,
			"%s page %llu: pointer revoked: node %s was fenced at epoch %llu and its "
			"partner took the page over; what was written through the pointer does "
			"not count",
			h->guid, (unsigned long long)h->page, vmm_node_id(v),
			(unsigned long long)h->revoked_epoch);
	vmm_holding_unlink(v, h);
	vmm_holding_free(v, h);
}

bool vmm_holding_revoked_reply(struct vmm *v, struct client_call *call, struct vmm_holding *h)
{
	if (!h || !h->revoked)
		return false;
	reply_revoked(v, call, h);
	return true;
}

void vmm_holdings_forget_landings(struct vmm *v)
{
	for (struct vmm_holding *h = vmm_failover(v)->holdings; h; h = h->next)
		h->has_landing = false;
}

/* A pointer mirrored again after a resync: the partner's answer may give a
 * write pointer's release a landing, as the grant's did. */
struct remirror_op {
	struct vmm_op op;
	char guid[128];
	uint64_t page;
	char owner[128];
};

static void remirror_finish(struct vmm_op *base)
{
	struct remirror_op *op = (struct remirror_op *)base;
	struct vmm_holding *h;

	if (op->op.status != FTVM__PARTNER__STATUS__STATUS_OK)
		log_warning("%s page %llu: the resynced partner did not take the pointer %s holds: "
			    "%s; its release will fail there",
			    op->guid, (unsigned long long)op->page, op->owner, op->op.reason);
	else if (op->op.has_landing)
		/* Still held (not released meanwhile): its release may use it. */
		for (h = vmm_failover(op->op.vmm)->holdings; h; h = h->next)
			if (h->write && h->page == op->page && strcmp(h->guid, op->guid) == 0 &&
			    strcmp(h->owner, op->owner) == 0) {
				h->landing = op->op.landing;
				h->has_landing = true;
				break;
			}
	free(op);
}

/* h to the partner again as its grant went (AllocateRead or AllocateWrite
 * with the holder); false when it could not be sent (the link down). */
static bool mirror_one(struct vmm *v, struct vmm_holding *h)
{
	struct remirror_op *op = calloc(1, sizeof(*op));
	struct vmm_msg msg;
	Envelope *env;

	if (!op) {
		log_error("resync: out of memory mirroring the pointers held here");
		return false;
	}
	op->op.vmm = v;
	op->op.finish = remirror_finish;
	snprintf(op->guid, sizeof(op->guid), "%s", h->guid);
	op->page = h->page;
	snprintf(op->owner, sizeof(op->owner), "%s", h->owner);
	h->has_landing = false; /* given on the old link */
	env = vmm_msg_allocate(&msg, h->guid, h->page, h->owner, h->write, false);
	if (vmm_op_send(&op->op, &env, 1) < 0) {
		log_warning("resync: cannot mirror the pointer %s holds on %s page %llu: %s",
			    h->owner, h->guid, (unsigned long long)h->page,
			    op->op.reason[0] ? op->op.reason : "link down");
		free(op);
		return false;
	}
	return true;
}

/* The partner a resync just brought back knows none of our clients'
 * pointers: they were granted while it was away, or went with its process.
 * Each goes to it again as its grant did, behind the snapshot on the same
 * link, so a release finds the lock there; this node owns every allocation
 * by then, so it never conflicts. */
void vmm_holdings_mirror(struct vmm *v)
{
	struct failover_state *f = vmm_failover(v);
	unsigned n = 0;

	f->holdings_snapshots++;
	for (struct vmm_holding *h = f->holdings; h; h = h->next) {
		if (h->revoked)
			continue;
		if (!mirror_one(v, h))
			return;
		n++;
	}
	if (n)
		log_info("resync: %u pointer(s) held by this node's clients mirrored to %s", n,
			 vmm_partner_id(v));
}

uint64_t vmm_holdings_snapshots(struct vmm *v)
{
	return vmm_failover(v)->holdings_snapshots;
}

/* A request that left before a snapshot: the partner took it first (the
 * link keeps the order), then the resync replaced its table, and
 * vmm_holdings_mirror() ran while h was out of the list. */
bool vmm_holding_mirror_since(struct vmm *v, struct vmm_holding *h, uint64_t snapshots)
{
	if (snapshots == vmm_holdings_snapshots(v) || !mirror_one(v, h))
		return false;
	log_info("resync: the pointer %s holds on %s page %llu was in flight across the resync: "
		 "mirrored to %s again",
		 h->owner, h->guid, (unsigned long long)h->page, vmm_partner_id(v));
	return true;
}

void vmm_holding_add_after(struct vmm *v, struct vmm_holding *h, uint64_t snapshots)
{
	vmm_holding_add(v, h);
	vmm_holding_mirror_since(v, h, snapshots);
}

/* Whether h is a write pointer whose client wrote into its page's block:
 * the block is then neither the page's version nor anything the partner
 * has. */
static bool written_into(struct vmm *v, struct vmm_alloc *a, const struct vmm_holding *h)
{
	struct vmm_page *p = vmm_alloc_page(a, h->page);

	return h->write && p && p->resident && vmm_block_crc(v, a, h->page) != p->crc32c;
}

/* A fenced node's (or one being resynced) gone client's pointer goes with
 * its lock, here only; what the client wrote goes with the page's frames
 * (a dirty page is stale then: the resync brings it). */
static void drop_written(struct vmm *v, struct vmm_alloc *a, const struct vmm_holding *h)
{
	struct vmm_page *p = vmm_alloc_page(a, h->page);

	if (!p)
		return;
	if (written_into(v, a, h)) {
		vmm_page_detach(v, p);
		p->stale = p->dirty;
	}
	vmm_page_unlock(p, h->owner);
	vmm_replace_update(v, p);
}

/* Revokes every live pointer to first's page: its lock goes, here only,
 * and the page's frames go aside for them. Returns how many. */
static unsigned revoke_page(struct vmm *v, struct vmm_holding *first)
{
	struct vmm_alloc *a = vmm_table_find(vmm_allocations(v), first->guid);
	struct vmm_page *p = vmm_alloc_page(a, first->page);
	struct vmm_quarantine *q = NULL;
	unsigned n = 0;

	if (p && p->resident) {
		uint64_t frame = vmm_page_take_frames(v, p);

		/* Not noted, the frames are lost until a restart: still never
		 * another page's under the pointer. */
		q = calloc(1, sizeof(*q));
		if (q)
			*q = (struct vmm_quarantine){ .frame = frame, .block_size = a->block_size };
		else
			log_error(
				"%s page %llu: out of memory: its frames are lost until a restart",
				a->guid, (unsigned long long)first->page);
		p->stale = p->dirty; /* its contents come with the resync */
	}
	for (struct vmm_holding *h = first; h; h = h->next) {
		if (h->revoked || h->retry || h->page != first->page ||
		    strcmp(h->guid, first->guid) != 0)
			continue;
		h->revoked = true;
		h->revoked_epoch = vmm_epoch(v);
		h->has_landing = false;
		h->quarantine = q;
		if (q)
			q->pointers++;
		if (p)
			vmm_page_unlock(p, h->owner);
		n++;
	}
	if (p)
		vmm_replace_update(v, p);
	return n;
}

void vmm_holdings_revoke(struct vmm *v)
{
	struct vmm_holding **hp = &vmm_failover(v)->holdings;
	unsigned n = 0;

	while (*hp) {
		struct vmm_holding *h = *hp;

		if (h->retry) {
			/* A gone client's release, to be tried again: the
			 * survivor let its lock go at the takeover. */
			*hp = h->next;
			drop_written(v, vmm_table_find(vmm_allocations(v), h->guid), h);
			vmm_holding_free(v, h);
			continue;
		}
		if (!h->revoked)
			n += revoke_page(v, h);
		hp = &h->next;
	}
	if (n)
		log_warning("%u pointer(s) held by this node's clients revoked at epoch %llu: the "
			    "partner serves their pages; their frames stay aside until each is "
			    "released",
			    n, (unsigned long long)vmm_epoch(v));
}

/* Whether h is the first of the list's holdings into its quarantine (a
 * page's readers share one). */
static bool first_into(const struct vmm_holding *list, const struct vmm_holding *h)
{
	for (const struct vmm_holding *e = list; e != h; e = e->next)
		if (e->quarantine == h->quarantine)
			return false;
	return true;
}

void vmm_holdings_revoked(const struct vmm *v, uint64_t *ret_pointers, uint64_t *ret_frames)
{
	const struct failover_state *f = vmm_failover(v);

	*ret_pointers = *ret_frames = 0;
	for (const struct vmm_holding *h = f->holdings; h; h = h->next) {
		if (!h->revoked)
			continue;
		(*ret_pointers)++;
		if (h->quarantine && first_into(f->holdings, h))
			*ret_frames +=
				h->quarantine->block_size / frame_pool_page_size(vmm_frame_pool(v));
	}
}

/* The write pointer's block as its client left it is the page's next
 * version, here alone; returns that version. */
static uint64_t release_modified_here(struct vmm *v, struct vmm_alloc *a, struct vmm_holding *h)
{
	struct pt_origin o = { .node = vmm_node_id(v),
			       .lsn = pagetable_reserve_lsn(vmm_pagetable(v)),
			       .own = true };
	uint64_t version = a->page[h->page].version + 1;

	vmm_page_modified(v, a, h->page, version, vmm_block_crc(v, a, h->page), &o);
	vmm_unlock(v, a, h->page, h->owner);
	return version;
}

/* A node stopping alone: the write pointers its clients still hold are
 * released as modified here, as their clients' going would release them.
 * The page's last acknowledged contents were in that block alone, now
 * written over by the client, and the partner does not have them; left
 * out of the last destage the page could not be read again (node/ha/HA.md, "A
 * node stopped while its clients hold pointers"). */
void vmm_holdings_release_at_stop(struct vmm *v)
{
	for (struct vmm_holding *h = vmm_failover(v)->holdings; h; h = h->next) {
		struct vmm_alloc *a = vmm_table_find(vmm_allocations(v), h->guid);
		struct vmm_page *p = vmm_alloc_page(a, h->page);

		if (!p || !p->resident || !h->write || h->revoked)
			continue;
		log_info("stopping alone: a client's write pointer to %s page %llu released as "
			 "modified: the block as the client left it is version %llu",
			 h->guid, (unsigned long long)h->page,
			 (unsigned long long)release_modified_here(v, a, h));
	}
}

void vmm_holding_let_go(struct vmm *v, struct vmm_holding *h)
{
	struct vmm_alloc *a = vmm_table_find(vmm_allocations(v), h->guid);

	if (!a)
		return;
	if (vmm_mode(v) == VMM_MODE_FENCED)
		drop_written(v, a, h);
	else if (!written_into(v, a, h))
		vmm_unlock(v, a, h->page, h->owner);
	else
		log_warning("%s page %llu: the block the gone client left is version %llu here "
			    "alone; the partner gets it with the next resync",
			    h->guid, (unsigned long long)h->page,
			    (unsigned long long)release_modified_here(v, a, h));
}

void vmm_holdings_free(struct vmm *v)
{
	struct failover_state *f = vmm_failover(v);

	while (f->holdings) {
		struct vmm_holding *h = f->holdings;

		f->holdings = h->next;
		vmm_holding_free(v, h);
	}
}
