/* Questions answered from a node's own table (read header, list, sense) and
 * verify, which asks the partner for its table (SenseRequest{page_table}) and
 * compares the two. */
#include "vmm_internal.h"

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

int vmm_sense_fill(struct vmm *v, bool page_table, Ftvm__Partner__SenseInformation *info)
{
	static Ftvm__Partner__MediaCapacity dram = FTVM__PARTNER__MEDIA_CAPACITY__INIT;
	static Ftvm__Partner__MediaCapacity store = FTVM__PARTNER__MEDIA_CAPACITY__INIT;
	static Ftvm__Partner__MediaCapacity *media[] = { &dram, &store };
	uint64_t page_size = frame_pool_page_size(v->pool);
	struct vmm_alloc **all;
	size_t n;

	ftvm__partner__sense_information__init(info);
	/* The frame pool: what is not free holds resident pages. */
	dram.type = "dram";
	dram.capacity = frame_pool_total(v->pool) * page_size;
	dram.free = frame_pool_free_count(v->pool) * page_size;
	/* This node's store partition: room for the extents of new allocations. */
	store.type = "store";
	vmm_store_space(v, &store.free, &store.capacity);
	info->media = media;
	info->n_media = 2;
	/* The paging queue: requests waiting for a lock, a page-in, frames or
	 * space; the replacement queue: resident pages that may be evicted. */
	info->paging_queue = vmm_space_waiting(v) + vmm_page_waiting(v);
	info->destage_queue = vmm_destage_depth(v);
	info->replacement_queue = v->lru_length;
	if (!page_table)
		return 0;

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
		free(info->allocations[i]);
	}
	free(info->allocations);
	info->allocations = NULL;
	info->n_allocations = 0;
}

static void reply_header(struct vmm *v, struct client_call *call, const char *guid)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Partner__Header h;
	struct vmm_alloc *a = vmm_table_find(v->table, guid);

	if (!a) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND, "no allocation %s",
				guid);
		return;
	}
	vmm_alloc_header(a, &h);
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_HEADER;
	reply.header = &h;
	client_call_reply(call, &reply);
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
		reply_header(v, call, req->header->guid);
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

struct verify_op {
	struct vmm_op op;
	char **differences;
	size_t n_differences;
	uint64_t allocations, pages;
};

__attribute__((format(printf, 2, 3))) static void differ(struct verify_op *op, const char *fmt, ...)
{
	char line[512], **d;
	va_list ap;

	if (op->n_differences == VERIFY_DIFFERENCES_MAX)
		return;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
	d = realloc(op->differences, (op->n_differences + 1) * sizeof(*d));
	if (!d)
		return;
	op->differences = d;
	d[op->n_differences] = strdup(line);
	if (d[op->n_differences])
		op->n_differences++;
}

static const char *str_diff(const char *x, const char *y)
{
	return strcmp(x, y) ? "differs" : NULL;
}

static void compare_allocation(struct verify_op *op, const char *me, const char *them,
			       const Ftvm__Partner__AllocationDigest *x,
			       const Ftvm__Partner__AllocationDigest *y)
{
	const Ftvm__Partner__Header *hx = x->header, *hy = y->header;

	if (hx->size != hy->size || hx->block_size != hy->block_size || hx->pages != hy->pages ||
	    str_diff(hx->policy, hy->policy) || str_diff(hx->home, hy->home)) {
		differ(op,
		       "%s: size/block_size/pages/policy/home %llu/%u/%llu/%s/%s on %s, "
		       "%llu/%u/%llu/%s/%s on %s",
		       hx->guid, (unsigned long long)hx->size, hx->block_size,
		       (unsigned long long)hx->pages, hx->policy, hx->home, me,
		       (unsigned long long)hy->size, hy->block_size, (unsigned long long)hy->pages,
		       hy->policy, hy->home, them);
		return;
	}
	if (str_diff(hx->owner, hy->owner))
		differ(op, "%s: owner %s on %s, %s on %s", hx->guid, hx->owner, me, hy->owner,
		       them);
	if (hx->header.len != hy->header.len ||
	    (hx->header.len && memcmp(hx->header.data, hy->header.data, hx->header.len) != 0))
		differ(op, "%s: header differs (%zu bytes on %s, %zu on %s)", hx->guid,
		       hx->header.len, me, hy->header.len, them);
	if (x->n_page_crc32c != hx->pages || y->n_page_crc32c != hx->pages ||
	    x->n_page_version != hx->pages || y->n_page_version != hx->pages) {
		differ(op, "%s: page lists of different lengths", hx->guid);
		return;
	}
	for (uint64_t p = 0; p < hx->pages; p++) {
		op->pages++;
		if (x->page_crc32c[p] != y->page_crc32c[p])
			differ(op, "%s page %llu: crc32c 0x%08x on %s, 0x%08x on %s", hx->guid,
			       (unsigned long long)p, x->page_crc32c[p], me, y->page_crc32c[p],
			       them);
		if (x->page_version[p] != y->page_version[p])
			differ(op, "%s page %llu: version %llu on %s, %llu on %s", hx->guid,
			       (unsigned long long)p, (unsigned long long)x->page_version[p], me,
			       (unsigned long long)y->page_version[p], them);
	}
}

/* Both lists are sorted by guid: walk them side by side. */
static void compare_tables(struct verify_op *op, const Ftvm__Partner__SenseInformation *mine,
			   const Ftvm__Partner__SenseInformation *theirs)
{
	const char *me = vmm_node_id(op->op.vmm), *them = vmm_partner_id(op->op.vmm);
	size_t i = 0, j = 0;

	while (i < mine->n_allocations || j < theirs->n_allocations) {
		const Ftvm__Partner__AllocationDigest *x =
			i < mine->n_allocations ? mine->allocations[i] : NULL;
		const Ftvm__Partner__AllocationDigest *y =
			j < theirs->n_allocations ? theirs->allocations[j] : NULL;
		int c = !x ? 1 : !y ? -1 : strcmp(x->header->guid, y->header->guid);

		op->allocations++;
		if (c < 0) {
			differ(op, "%s: only on %s", x->header->guid, me);
			i++;
		} else if (c > 0) {
			differ(op, "%s: only on %s", y->header->guid, them);
			j++;
		} else {
			compare_allocation(op, me, them, x, y);
			i++;
			j++;
		}
	}
}

/* Runs while the partner's table is in hand; ours is taken at the same point
 * of the stream, so a change acknowledged before it is in both. */
static void verify_answer(struct vmm_op *base, const CommandComplete *cc)
{
	struct verify_op *op = (struct verify_op *)base;
	Ftvm__Partner__SenseInformation mine;

	if (cc->status != FTVM__PARTNER__STATUS__STATUS_OK ||
	    cc->payload_case != FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SENSE)
		return;
	if (vmm_sense_fill(op->op.vmm, true, &mine) < 0) {
		differ(op, "out of memory on %s", vmm_node_id(op->op.vmm));
		return;
	}
	compare_tables(op, &mine, cc->sense);
	vmm_sense_release(&mine);
}

static void verify_finish(struct vmm_op *base)
{
	struct verify_op *op = (struct verify_op *)base;
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__VerifyReply vr = FTVM__CLIENT__VERIFY_REPLY__INIT;

	if (op->op.status != FTVM__PARTNER__STATUS__STATUS_OK) {
		vmm_reply_error(op->op.call, op->op.status, "%s", op->op.reason);
	} else {
		vr.equal = op->n_differences == 0;
		vr.differences = op->differences;
		vr.n_differences = op->n_differences;
		vr.allocations = op->allocations;
		vr.pages = op->pages;
		reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_VERIFY;
		reply.verify = &vr;
		client_call_reply(op->op.call, &reply);
	}
	for (size_t i = 0; i < op->n_differences; i++)
		free(op->differences[i]);
	free(op->differences);
	free(op);
}

void vmm_op_verify(struct vmm *v, struct client_call *call)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SenseRequest sr = FTVM__PARTNER__SENSE_REQUEST__INIT;
	Envelope *envs[] = { &env };
	struct verify_op *op = calloc(1, sizeof(*op));

	if (!op) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	op->op.vmm = v;
	op->op.call = call;
	op->op.on_answer = verify_answer;
	op->op.finish = verify_finish;
	sr.capacity = true;
	sr.page_table = true;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SENSE_REQUEST;
	env.sense_request = &sr;
	if (vmm_op_send(&op->op, envs, 1) < 0) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"partner unavailable: verify compares both nodes' tables");
		free(op);
	}
}
