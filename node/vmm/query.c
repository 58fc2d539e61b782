/* Questions answered from a node's own table (list, sense),
 * the device discovery table, which asks the partner for its media
 * (SenseRequest; vmm/MEDIA.md, "Device discovery: the message flow"), and
 * verify, which asks the partner for its table (SenseRequest{page_table})
 * and compares the two.
 *
 * Verify while clients write (vmm/VMM.md, "Verify while clients write"): the two
 * tables are two moments, one per node, so a page can differ while a change
 * of it is in flight. Each node lists its pages with one (busy_pages:
 * write-locked, or a write waiting for the owner's answer) and says when a
 * resync is under way. Rounds:
 *
 *   round 1      compare everything; what is not equal is open
 *   round 2..5   the partner's table again, right behind the last answer;
 *                an open item equal now is settled, else it stays open
 *   at the end   an open page busy on either node in the last round: busy
 *                (counted, not compared); any other open item: a difference
 *
 * A difference has lasted through every round with nothing in flight at the
 * last, so at quiescence verify reports exactly what differs. */
#include "vmm_state.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM
#define VERIFY_DIFFERENCES_MAX 100

/* What a page holds for verify: the frame's bytes when it is resident (so a
 * damaged frame shows), what the page table recorded when it is not. */
static uint32_t page_digest(const struct vmm *v, const struct vmm_alloc *a, uint64_t page)
{
	return a->page[page].resident ? vmm_block_crc(v, a, page) : a->page[page].crc32c;
}

/* A change of the page is in flight here: a write lock (a pointer's client
 * may be half way through the block; an owner's whole-page write or a
 * release waits for the partner's answer) or a write waiting for the
 * owner's answer (pinned, or filling frames taken for it). */
static bool page_busy(const struct vmm_page *p)
{
	return vmm_page_write_locked(p) || p->pins || p->filling;
}

/* d's busy_pages: the pages of a with a change in flight, ascending. */
static int digest_busy(const struct vmm_alloc *a, Ftvm__Partner__AllocationDigest *d)
{
	size_t n = 0;

	for (uint64_t p = 0; p < a->pages; p++)
		n += page_busy(&a->page[p]);
	if (!n)
		return 0;
	d->busy_pages = calloc(n, sizeof(uint64_t));
	if (!d->busy_pages)
		return -ENOMEM;
	for (uint64_t p = 0; p < a->pages; p++)
		if (page_busy(&a->page[p]))
			d->busy_pages[d->n_busy_pages++] = p;
	return 0;
}

int vmm_sense_fill(struct vmm *v, bool page_table, Ftvm__Partner__SenseInformation *info)
{
	static Ftvm__Partner__MediaCapacity dram = FTVM__PARTNER__MEDIA_CAPACITY__INIT;
	static Ftvm__Partner__MediaCapacity store = FTVM__PARTNER__MEDIA_CAPACITY__INIT;
	static Ftvm__Partner__MediaCapacity flash = FTVM__PARTNER__MEDIA_CAPACITY__INIT;
	static Ftvm__Partner__MediaCapacity *media[] = { &dram, &store, &flash };
	static Ftvm__Partner__MediaCapacity dram_cache = FTVM__PARTNER__MEDIA_CAPACITY__INIT;
	static Ftvm__Partner__MediaCapacity flash_cache = FTVM__PARTNER__MEDIA_CAPACITY__INIT;
	static Ftvm__Partner__MediaCapacity *cache[2];
	uint64_t page_size = frame_pool_page_size(v->pool);
	struct vmm_alloc **all;
	size_t n;

	ftvm__partner__sense_information__init(info);
	/* The frame pool: what is not free holds resident pages. */
	dram.type = "dram";
	dram.capacity = frame_pool_server_frames(v->pool) * page_size;
	dram.free = frame_pool_free_count(v->pool) * page_size;
	/* This node's store partition: room for the extents of new allocations. */
	store.type = "store";
	vmm_store_space(v, &store.free, &store.capacity);
	info->media = media;
	info->n_media = 2;
	/* This node's flash: room for the extents of copies resting there. */
	if (v->flash) {
		flash.type = "flash";
		vmm_extent_space(v, VMM_DEVICE_FLASH, &flash.free, &flash.capacity);
		info->n_media = 3;
	}
	/* The paging queue: requests waiting for a lock, a page-in, frames or
	 * space; the replacement queue: resident pages that may be evicted. */
	/* The storage cache partitions, where the node has them. */
	info->cache = cache;
	info->n_cache = 0;
	if (frame_pool_cache_frames(v->pool)) {
		dram_cache.type = "dram";
		dram_cache.capacity = frame_pool_cache_frames(v->pool) * page_size;
		dram_cache.free = frame_pool_cache_free_count(v->pool) * page_size;
		cache[info->n_cache++] = &dram_cache;
	}
	if (v->flash) {
		vmm_extent_space(v, VMM_DEVICE_FLASH_CACHE, &flash_cache.free,
				 &flash_cache.capacity);
		flash_cache.type = "flash";
		if (flash_cache.capacity)
			cache[info->n_cache++] = &flash_cache;
	}
	info->paging_queue = vmm_space_waiting(v) + vmm_page_waiting(v);
	info->destage_queue = vmm_destage_depth(v);
	info->replacement_queue = v->lru[FRAME_SERVER].length;
	if (!page_table)
		return 0;

	info->resync = vmm_resync_busy(v);
	all = vmm_table_sorted(v->table, &n);
	info->allocations = calloc(n ? n : 1, sizeof(*info->allocations));
	if (!all || !info->allocations)
		goto fail;
	for (size_t i = 0; i < n; i++) {
		struct vmm_alloc *a = all[i];
		Ftvm__Partner__AllocationDigest *d = calloc(1, sizeof(*d) + sizeof(*d->header));

		if (!d)
			goto fail;
		info->allocations[info->n_allocations++] = d;
		ftvm__partner__allocation_digest__init(d);
		d->header = (Ftvm__Partner__Header *)(d + 1);
		vmm_alloc_header(a, d->header);
		d->page_version = calloc(a->pages, sizeof(uint64_t));
		d->page_crc32c = calloc(a->pages, sizeof(uint32_t));
		if (!d->page_version || !d->page_crc32c)
			goto fail;
		d->n_page_version = d->n_page_crc32c = a->pages;
		for (uint64_t p = 0; p < a->pages; p++) {
			d->page_version[p] = a->page[p].version;
			d->page_crc32c[p] = page_digest(v, a, p);
		}
		if (digest_busy(a, d) < 0)
			goto fail;
	}
	free(all);
	return 0;
fail:
	free(all);
	vmm_sense_release(info);
	return -ENOMEM;
}

void vmm_sense_release(Ftvm__Partner__SenseInformation *info)
{
	for (size_t i = 0; i < info->n_allocations; i++) {
		free(info->allocations[i]->page_version);
		free(info->allocations[i]->page_crc32c);
		free(info->allocations[i]->busy_pages);
		free(info->allocations[i]);
	}
	free(info->allocations);
	info->allocations = NULL;
	info->n_allocations = 0;
}

static void reply_list(struct vmm *v, struct client_call *call)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__ListReply lr = FTVM__CLIENT__LIST_REPLY__INIT;
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);
	Ftvm__Partner__Header *h = calloc(n ? n : 1, sizeof(*h));
	Ftvm__Partner__Header **hp = calloc(n ? n : 1, sizeof(*hp));

	if (!all || !h || !hp) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		goto out;
	}
	for (size_t i = 0; i < n; i++) {
		vmm_alloc_header(all[i], &h[i]);
		hp[i] = &h[i];
	}
	lr.allocations = hp;
	lr.n_allocations = n;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_LIST;
	reply.list = &lr;
	client_call_reply(call, &reply);
out:
	free(all);
	free(h);
	free(hp);
}

void vmm_get_sense(struct vmm *v, Ftvm__Partner__SenseInformation *ret)
{
	vmm_sense_fill(v, false, ret); /* without the page table: cannot fail */
}

static void reply_sense(struct vmm *v, struct client_call *call)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Partner__SenseInformation info;

	vmm_sense_fill(v, false, &info);
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_SENSE;
	reply.sense = &info;
	client_call_reply(call, &reply);
}

void vmm_op_local(struct vmm *v, struct client_call *call, const Ftvm__Client__ClientRequest *req)
{
	switch (req->request_case) {
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_HEADER:
		vmm_op_read_header(v, call, req->header->guid);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_LIST:
		reply_list(v, call);
		break;
	case FTVM__CLIENT__CLIENT_REQUEST__REQUEST_SENSE:
		reply_sense(v, call);
		break;
	default:
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_UNSUPPORTED,
				"request not served by this node's version");
		break;
	}
}

/* ---- verify ---- */

/* Comparisons at most, the first of everything included. */
#define VERIFY_ROUNDS 5
/* What differs at once and is compared again, at most; beyond it a page is
 * judged on the round that found it. */
#define VERIFY_RECHECK_MAX 4096
/* An item that is an allocation (its presence and header fields), not a page. */
#define VERIFY_ALLOCATION UINT64_MAX

/* What differed in a round: a page, with both nodes' values then, or an
 * allocation, with the line that says how. */
struct verify_item {
	char *guid;
	uint64_t page; /* or VERIFY_ALLOCATION */
	uint64_t version[2];
	uint32_t crc32c[2];
	bool busy;  /* a change in flight on either node then */
	char *line; /* an allocation's */
};

struct verify {
	struct vmm *vmm;
	struct client_call *call;
	unsigned rounds;
	uint64_t allocations, pages; /* compared by the first round */
	/* What differed in the last round, in the order the tables are walked,
	 * and where the walk of the round in hand is in it. */
	struct verify_item *items;
	size_t n_items, cursor;
	/* What differs in the round in hand. */
	struct verify_item *next;
	size_t n_next;
	/* The answer: lines (VERIFY_DIFFERENCES_MAX at most) and counts. */
	char **differences;
	size_t n_differences;
	uint64_t found, busy;
};

/* One comparison: the partner's table asked for, ours taken at its answer. */
struct verify_round {
	struct vmm_op op;
	struct verify *vf;
};

static void items_free(struct verify_item *items, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		free(items[i].guid);
		free(items[i].line);
	}
	free(items);
}

static void verify_free(struct verify *vf)
{
	items_free(vf->items, vf->n_items);
	items_free(vf->next, vf->n_next);
	for (size_t i = 0; i < vf->n_differences; i++)
		free(vf->differences[i]);
	free(vf->differences);
	free(vf);
}

static void differ_line(struct verify *vf, const char *line)
{
	char **d;

	vf->found++;
	if (vf->n_differences == VERIFY_DIFFERENCES_MAX)
		return;
	d = realloc(vf->differences, (vf->n_differences + 1) * sizeof(*d));
	if (!d)
		return;
	vf->differences = d;
	d[vf->n_differences] = strdup(line);
	if (d[vf->n_differences])
		vf->n_differences++;
}

/* A page that differs and has no change in flight on either node. */
static void differ_page(struct verify *vf, const struct verify_item *it)
{
	const char *me = vmm_node_id(vf->vmm), *them = vmm_partner_id(vf->vmm);
	unsigned long long page = (unsigned long long)it->page;
	char line[512];

	if (it->version[0] == it->version[1])
		snprintf(line, sizeof(line), "%s page %llu: crc32c 0x%08x on %s, 0x%08x on %s",
			 it->guid, page, it->crc32c[0], me, it->crc32c[1], them);
	else
		snprintf(line, sizeof(line),
			 "%s page %llu: version %llu (crc32c 0x%08x) on %s, "
			 "version %llu (crc32c 0x%08x) on %s",
			 it->guid, page, (unsigned long long)it->version[0], it->crc32c[0], me,
			 (unsigned long long)it->version[1], it->crc32c[1], them);
	differ_line(vf, line);
}

/* The last word on an item: busy when a change was in flight, else a
 * difference. */
static void judge(struct verify *vf, const struct verify_item *it)
{
	if (it->page == VERIFY_ALLOCATION)
		differ_line(vf, it->line);
	else if (it->busy)
		vf->busy++;
	else
		differ_page(vf, it);
}

/* The walk's order: by guid, an allocation before its pages. */
static int item_cmp(const struct verify_item *it, const char *guid, uint64_t page)
{
	int c = strcmp(it->guid, guid);

	/* + 1 turns VERIFY_ALLOCATION into 0, ahead of every page. */
	return c ? c : it->page + 1 < page + 1 ? -1 : it->page + 1 > page + 1;
}

/* Whether the item differed in the last round too (the first: everything);
 * one that was equal once is settled, whatever changes it since. */
static bool still_open(struct verify *vf, const char *guid, uint64_t page)
{
	if (vf->rounds == 1)
		return true;
	while (vf->cursor < vf->n_items && item_cmp(&vf->items[vf->cursor], guid, page) < 0)
		vf->cursor++;
	return vf->cursor < vf->n_items && item_cmp(&vf->items[vf->cursor], guid, page) == 0;
}

/* Something differs in this round: kept for the next one (an allocation's
 * line made now), or judged at once when too much differs to keep. */
static void open_item(struct verify *vf, const struct verify_item *it, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));
static void open_item(struct verify *vf, const struct verify_item *it, const char *fmt, ...)
{
	struct verify_item *n = NULL;
	char line[512] = "";
	va_list ap;

	if (!still_open(vf, it->guid, it->page))
		return;
	if (fmt) {
		va_start(ap, fmt);
		vsnprintf(line, sizeof(line), fmt, ap);
		va_end(ap);
	}
	if (vf->n_next < VERIFY_RECHECK_MAX)
		n = realloc(vf->next, (vf->n_next + 1) * sizeof(*n));
	if (!n) {
		struct verify_item now = *it;

		now.line = line;
		judge(vf, &now);
		return;
	}
	vf->next = n;
	n += vf->n_next;
	*n = *it;
	n->guid = strdup(it->guid);
	n->line = fmt ? strdup(line) : NULL;
	if (!n->guid || (fmt && !n->line)) {
		free(n->guid);
		free(n->line);
		n->line = line;
		judge(vf, n);
		return;
	}
	vf->n_next++;
}

static const char *str_diff(const char *x, const char *y)
{
	return strcmp(x, y) ? "differs" : NULL;
}

/* Whether page p is in d's busy_pages (ascending), from *at on: pages are
 * asked in ascending order. */
static bool busy_at(const Ftvm__Partner__AllocationDigest *d, uint64_t p, size_t *at)
{
	while (*at < d->n_busy_pages && d->busy_pages[*at] < p)
		(*at)++;
	return *at < d->n_busy_pages && d->busy_pages[*at] == p;
}

static void compare_pages(struct verify *vf, bool resync, const Ftvm__Partner__AllocationDigest *x,
			  const Ftvm__Partner__AllocationDigest *y)
{
	struct verify_item it = { .guid = x->header->guid };
	size_t bx = 0, by = 0;

	for (uint64_t p = 0; p < x->header->pages; p++) {
		bool busy_here = busy_at(x, p, &bx), busy_there = busy_at(y, p, &by);

		if (vf->rounds == 1)
			vf->pages++;
		if (x->page_version[p] == y->page_version[p] &&
		    x->page_crc32c[p] == y->page_crc32c[p])
			continue;
		it.page = p;
		it.version[0] = x->page_version[p];
		it.version[1] = y->page_version[p];
		it.crc32c[0] = x->page_crc32c[p];
		it.crc32c[1] = y->page_crc32c[p];
		it.busy = resync || busy_here || busy_there;
		open_item(vf, &it, NULL);
	}
}

static void compare_allocation(struct verify *vf, bool resync,
			       const Ftvm__Partner__AllocationDigest *x,
			       const Ftvm__Partner__AllocationDigest *y)
{
	const char *me = vmm_node_id(vf->vmm), *them = vmm_partner_id(vf->vmm);
	const Ftvm__Partner__Header *hx = x->header, *hy = y->header;
	struct verify_item it = { .guid = hx->guid, .page = VERIFY_ALLOCATION };
	bool owner = str_diff(hx->owner, hy->owner) != NULL;
	bool header = hx->header.len != hy->header.len ||
		      (hx->header.len && memcmp(hx->header.data, hy->header.data, hx->header.len));

	if (hx->size != hy->size || hx->block_size != hy->block_size || hx->pages != hy->pages ||
	    str_diff(hx->policy, hy->policy) || str_diff(hx->home, hy->home)) {
		open_item(vf, &it,
			  "%s: size/block_size/pages/policy/home %llu/%u/%llu/%s/%s on %s, "
			  "%llu/%u/%llu/%s/%s on %s",
			  hx->guid, (unsigned long long)hx->size, hx->block_size,
			  (unsigned long long)hx->pages, hx->policy, hx->home, me,
			  (unsigned long long)hy->size, hy->block_size,
			  (unsigned long long)hy->pages, hy->policy, hy->home, them);
		return;
	}
	if (str_diff(hx->volume, hy->volume)) {
		open_item(vf, &it, "%s: volume '%s' on %s, '%s' on %s", hx->guid, hx->volume, me,
			  hy->volume, them);
		return;
	}
	if (x->n_page_crc32c != hx->pages || y->n_page_crc32c != hx->pages ||
	    x->n_page_version != hx->pages || y->n_page_version != hx->pages) {
		open_item(vf, &it, "%s: page lists of different lengths", hx->guid);
		return;
	}
	if (owner && header)
		open_item(
			vf, &it,
			"%s: owner %s on %s, %s on %s; header differs (%zu bytes on %s, %zu on %s)",
			hx->guid, hx->owner, me, hy->owner, them, hx->header.len, me,
			hy->header.len, them);
	else if (owner)
		open_item(vf, &it, "%s: owner %s on %s, %s on %s", hx->guid, hx->owner, me,
			  hy->owner, them);
	else if (header)
		open_item(vf, &it, "%s: header differs (%zu bytes on %s, %zu on %s)", hx->guid,
			  hx->header.len, me, hy->header.len, them);
	compare_pages(vf, resync, x, y);
}

/* Both lists are sorted by guid: walk them side by side. */
static void compare_tables(struct verify *vf, const Ftvm__Partner__SenseInformation *mine,
			   const Ftvm__Partner__SenseInformation *theirs)
{
	const char *me = vmm_node_id(vf->vmm), *them = vmm_partner_id(vf->vmm);
	bool resync = mine->resync || theirs->resync;
	size_t i = 0, j = 0;

	while (i < mine->n_allocations || j < theirs->n_allocations) {
		const Ftvm__Partner__AllocationDigest *x =
			i < mine->n_allocations ? mine->allocations[i] : NULL;
		const Ftvm__Partner__AllocationDigest *y =
			j < theirs->n_allocations ? theirs->allocations[j] : NULL;
		int c = !x ? 1 : !y ? -1 : strcmp(x->header->guid, y->header->guid);
		struct verify_item it = { .page = VERIFY_ALLOCATION };

		if (vf->rounds == 1)
			vf->allocations++;
		if (c < 0) {
			it.guid = x->header->guid;
			open_item(vf, &it, "%s: only on %s", it.guid, me);
			i++;
		} else if (c > 0) {
			it.guid = y->header->guid;
			open_item(vf, &it, "%s: only on %s", it.guid, them);
			j++;
		} else {
			compare_allocation(vf, resync, x, y);
			i++;
			j++;
		}
	}
}

/* Runs while the partner's table is in hand; ours is taken at its answer.
 * Each node's table is a moment of its own: what differs between them may
 * be a change on its way, which the next round sees landed. */
static void verify_answer(struct vmm_op *base, const CommandComplete *cc)
{
	struct verify *vf = ((struct verify_round *)base)->vf;
	Ftvm__Partner__SenseInformation mine;

	if (cc->status != FTVM__PARTNER__STATUS__STATUS_OK ||
	    cc->payload_case != FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SENSE)
		return;
	if (vmm_sense_fill(vf->vmm, true, &mine) < 0) {
		base->status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		snprintf(base->reason, sizeof(base->reason), "out of memory on %s",
			 vmm_node_id(vf->vmm));
		return;
	}
	vf->cursor = 0;
	compare_tables(vf, &mine, cc->sense);
	vmm_sense_release(&mine);
	items_free(vf->items, vf->n_items);
	vf->items = vf->next;
	vf->n_items = vf->n_next;
	vf->next = NULL;
	vf->n_next = 0;
}

static void verify_reply(struct verify *vf)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__VerifyReply vr = FTVM__CLIENT__VERIFY_REPLY__INIT;

	for (size_t i = 0; i < vf->n_items; i++)
		judge(vf, &vf->items[i]);
	vr.equal = vf->found == 0;
	vr.differences = vf->differences;
	vr.n_differences = vf->n_differences;
	vr.allocations = vf->allocations;
	vr.pages = vf->pages;
	vr.busy = vf->busy;
	vr.rounds = vf->rounds;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_VERIFY;
	reply.verify = &vr;
	client_call_reply(vf->call, &reply);
	verify_free(vf);
}

static void verify_finish(struct vmm_op *base);
static void verify_start(struct verify *vf);

/* A round: SenseRequest{page_table} to the partner; -errno when it cannot go. */
static int verify_round(struct verify *vf)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SenseRequest sr = FTVM__PARTNER__SENSE_REQUEST__INIT;
	Envelope *envs[] = { &env };
	struct verify_round *r = calloc(1, sizeof(*r));
	int ret;

	if (!r)
		return -ENOMEM;
	r->vf = vf;
	r->op.vmm = vf->vmm;
	r->op.call = vf->call;
	r->op.on_answer = verify_answer;
	r->op.needs_partner = true;
	r->op.finish = verify_finish;
	sr.capacity = true;
	sr.page_table = true;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SENSE_REQUEST;
	env.sense_request = &sr;
	vf->rounds++;
	ret = vmm_op_send(&r->op, envs, 1);
	if (ret < 0)
		free(r);
	return ret;
}

/* What still differs is compared again, the next round going out right
 * behind this one's answer: a change in flight at a snapshot (a write the
 * partner had applied and whose answer was on its way, a release waiting
 * for its answer) has landed on both nodes by the next, as the answers
 * to the partner go before this node's next request. */
static void verify_finish(struct vmm_op *base)
{
	struct verify_round *r = (struct verify_round *)base;
	struct verify *vf = r->vf;

	if (r->op.status != FTVM__PARTNER__STATUS__STATUS_OK) {
		vmm_reply_error(vf->call, r->op.status, "%s", r->op.reason);
		verify_free(vf);
	} else if (!vf->n_items || vf->rounds == VERIFY_ROUNDS) {
		verify_reply(vf);
	} else {
		verify_start(vf);
	}
	free(r);
}

/* A round, or the reason why none can go: what differed so far may be a
 * change in flight, so no half answer is given. */
static void verify_start(struct verify *vf)
{
	if (verify_round(vf) < 0) {
		vmm_reply_error(vf->call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"partner unavailable: verify compares both nodes' tables");
		verify_free(vf);
	}
}

void vmm_op_verify(struct vmm *v, struct client_call *call)
{
	struct verify *vf = calloc(1, sizeof(*vf));

	if (!vf) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	vf->vmm = v;
	vf->call = call;
	verify_start(vf);
}

/* ---- device discovery (seed 003 Fig. 10; vmm/MEDIA.md, "Device discovery:
 * the message flow") ---- */

#define DISCOVER_STATE_MAX 16

/* A discovery waiting for the partner's SenseInformation. */
struct discover {
	struct vmm_op op;
	struct client_call *call;
	char state[DISCOVER_STATE_MAX], partner_state[DISCOVER_STATE_MAX];
	bool serving, partner_serving;
	bool replied;
};

/* Both rows, this node's first; theirs is the partner's answer, or NULL with
 * why it could not be had. Runs while theirs is alive. */
static void discover_reply(struct discover *d, const Ftvm__Partner__SenseInformation *theirs,
			   const char *why)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__DiscoverReply dr = FTVM__CLIENT__DISCOVER_REPLY__INIT;
	Ftvm__Client__DiscoveredNode self = FTVM__CLIENT__DISCOVERED_NODE__INIT;
	Ftvm__Client__DiscoveredNode partner = FTVM__CLIENT__DISCOVERED_NODE__INIT;
	Ftvm__Client__DiscoveredNode *nodes[] = { &self, &partner };
	struct vmm *v = d->op.vmm;
	Ftvm__Partner__SenseInformation mine;

	/* Without the page table it only points at its own static rows. */
	vmm_sense_fill(v, false, &mine);
	self.node = (char *)vmm_node_id(v);
	self.endpoint = v->config->listen;
	self.self = true;
	self.reachable = true;
	self.serving = d->serving;
	self.state = d->state;
	self.media = mine.media;
	self.n_media = mine.n_media;

	partner.node = (char *)vmm_partner_id(v);
	partner.endpoint = v->config->partner;
	partner.reachable = theirs != NULL;
	partner.serving = theirs && d->partner_serving;
	partner.state = d->partner_state;
	partner.reason = theirs ? "" : (char *)why;
	if (theirs) {
		partner.media = theirs->media;
		partner.n_media = theirs->n_media;
	} else {
		log_debug("discovery: partner %s not reachable: %s",
			  partner.node[0] ? partner.node : v->config->partner, why);
	}

	dr.nodes = nodes;
	dr.n_nodes = sizeof(nodes) / sizeof(nodes[0]);
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_DISCOVER;
	reply.discover = &dr;
	client_call_reply(d->call, &reply);
	d->replied = true;
}

/* Every answer comes here before finish, a failure too (the link went down,
 * the deadline passed, the partner refused): the reply goes now, while the
 * answer's SenseInformation is alive. */
static void discover_answer(struct vmm_op *base, const CommandComplete *cc)
{
	struct discover *d = (struct discover *)base;
	char why[sizeof(base->reason)];

	if (cc->status == FTVM__PARTNER__STATUS__STATUS_OK &&
	    cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SENSE) {
		discover_reply(d, cc->sense, NULL);
		return;
	}
	if (cc->status == FTVM__PARTNER__STATUS__STATUS_OK)
		snprintf(why, sizeof(why), "partner answered without its media");
	else
		snprintf(why, sizeof(why), "partner: %s",
			 cc->reason && cc->reason[0] ? cc->reason : codec_status_name(cc->status));
	discover_reply(d, NULL, why);
}

static void discover_finish(struct vmm_op *base)
{
	struct discover *d = (struct discover *)base;

	if (!d->replied)
		discover_reply(d, NULL, d->op.reason[0] ? d->op.reason : "partner did not answer");
	free(d);
}

void vmm_op_discover(struct vmm *v, struct client_call *call, const struct vmm_discover *facts)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SenseRequest sr = FTVM__PARTNER__SENSE_REQUEST__INIT;
	Envelope *envs[] = { &env };
	struct discover *d = calloc(1, sizeof(*d));
	int r;

	if (!d) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	d->call = call;
	snprintf(d->state, sizeof(d->state), "%s", facts->state);
	snprintf(d->partner_state, sizeof(d->partner_state), "%s", facts->partner_state);
	d->serving = facts->serving;
	d->partner_serving = facts->partner_serving;
	d->op.vmm = v;
	d->op.call = call;
	d->op.on_answer = discover_answer;
	d->op.finish = discover_finish;
	/* Alone (solo) there is nobody to ask: not acknowledged by this node. */
	d->op.needs_partner = true;
	sr.capacity = true;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SENSE_REQUEST;
	env.sense_request = &sr;
	r = vmm_op_send(&d->op, envs, 1);
	if (r < 0) {
		if (!d->op.reason[0])
			snprintf(d->op.reason, sizeof(d->op.reason), "partner not asked: %s",
				 strerror(-r));
		discover_reply(d, NULL, d->op.reason);
		free(d);
	}
}
