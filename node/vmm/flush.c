/* Flush (vmm/VMM.md, "Flush"): a client's request that the pages of a range
 * changed before it be durable in the store. Its owner destages a changed
 * page DESTAGE_DELAY_MS after the change, behind a barrier, and tells its
 * partner (Destaged), so either node knows when a version is in the store:
 * p->durable_version. A flush notes each page that is dirty as it comes
 * (its version then), and is answered once each of them is clean or
 * durable at that version or later; a page changed after the flush is not
 * waited for. While a flush waits, this node's destage rounds go at once
 * instead of DESTAGE_DELAY_MS after a change; the partner keeps its pace.
 *
 *   request --no page dirty--> OK
 *      |
 *      +--> waiting --each destage round here, each batch of Destaged
 *                     from the partner: pages durable drop out--> none left: OK
 *                  --request_timeout_ms--> TIMEOUT, naming a page
 *                  --the allocation freed or resynced--> NOT_FOUND */
#include "vmm_state.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct flush_page {
	uint64_t page, version;
};

struct vmm_flush {
	struct vmm_flush *next;
	struct vmm *vmm;
	struct client_call *call;
	char guid[128];
	uint64_t incarnation;
	struct event *deadline;
	size_t n;
	struct flush_page pending[];
};

static void reply_ok(struct client_call *call)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

	client_call_reply(call, &reply);
}

static bool durable(const struct vmm_page *p, uint64_t version)
{
	return !p->dirty || p->durable_version >= version;
}

static void flush_free(struct vmm *v, struct vmm_flush *f)
{
	struct vmm_flush **at = &v->flushes;

	while (*at && *at != f)
		at = &(*at)->next;
	if (*at)
		*at = f->next;
	event_free(f->deadline);
	free(f);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_flush *f = arg;
	struct vmm *v = f->vmm;

	vmm_reply_error(f->call, FTVM__PARTNER__STATUS__STATUS_TIMEOUT,
			"flush of %s: page %llu (version %llu) and %zu more not in the store "
			"within %u ms",
			f->guid, (unsigned long long)f->pending[0].page,
			(unsigned long long)f->pending[0].version, f->n - 1,
			v->config->request_timeout_ms);
	flush_free(v, f);
}

/* Drops f's pages that are durable now: true when none is left. */
static bool settle(struct vmm *v, struct vmm_flush *f, struct vmm_alloc *a)
{
	size_t kept = 0;

	for (size_t i = 0; i < f->n; i++)
		if (!durable(&a->page[f->pending[i].page], f->pending[i].version))
			f->pending[kept++] = f->pending[i];
	f->n = kept;
	return kept == 0;
}

void vmm_flush_check(struct vmm *v)
{
	struct vmm_flush *f = v->flushes, *next;

	for (; f; f = next) {
		struct vmm_alloc *a = vmm_table_find_incarnation(v->table, f->guid, f->incarnation);

		next = f->next;
		if (!a)
			vmm_reply_error(f->call, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
					"flush of %s: released or resynced meanwhile", f->guid);
		else if (settle(v, f, a))
			reply_ok(f->call);
		else
			continue;
		flush_free(v, f);
	}
}

void vmm_op_flush(struct vmm *v, struct client_call *call, const Ftvm__Client__FlushRequest *req)
{
	struct vmm_alloc *a = vmm_client_page(v, call, req->guid, req->first_page, "flush");
	uint64_t end, n = 0, ms = v->config->request_timeout_ms;
	struct timeval tv = { .tv_sec = ms / 1000, .tv_usec = ms % 1000 * 1000 };
	struct vmm_flush *f;

	if (!a)
		return;
	end = req->pages && req->pages <= a->pages - req->first_page ? req->first_page + req->pages
								     : a->pages;
	for (uint64_t i = req->first_page; i < end; i++)
		n += !durable(&a->page[i], a->page[i].version);
	if (n == 0) {
		reply_ok(call);
		return;
	}
	f = calloc(1, sizeof(*f) + n * sizeof(f->pending[0]));
	if (!f || !(f->deadline = evtimer_new(v->base, on_deadline, f))) {
		free(f);
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	f->vmm = v;
	f->call = call;
	snprintf(f->guid, sizeof(f->guid), "%s", a->guid);
	f->incarnation = a->incarnation;
	for (uint64_t i = req->first_page; i < end; i++)
		if (!durable(&a->page[i], a->page[i].version))
			f->pending[f->n++] = (struct flush_page){ i, a->page[i].version };
	evtimer_add(f->deadline, &tv);
	f->next = v->flushes;
	v->flushes = f;
	vmm_destage_hurry(v); /* this node's own pages; the partner's keep its pace */
}

void vmm_flushes_fail(struct vmm *v)
{
	while (v->flushes) {
		vmm_reply_error(v->flushes->call, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
				"node stopping");
		flush_free(v, v->flushes);
	}
}

void vmm_flushes_client_gone(struct vmm *v, uint64_t client_id)
{
	struct vmm_flush *f = v->flushes, *next;

	for (; f; f = next) {
		next = f->next;
		if (client_call_client_id(f->call) != client_id)
			continue;
		vmm_reply_error(f->call, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
				"client gone");
		flush_free(v, f);
	}
}
