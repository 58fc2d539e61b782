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
 *                  --the allocation freed or resynced--> NOT_FOUND
 *
 * A page write's answer at ack = durable waits the same way, for its one
 * page at its new version (vmm_page_write_acked(), "Acknowledgement levels"
 * in vmm/VMM.md): a waiter ends in a callback, the flush's answering its
 * client. */
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
	/* How it ends: OK, or a status and why. */
	vmm_acked_fn done;
	void *arg;
	uint64_t client_id; /* whose wait it is, 0: nobody's */
	char guid[128];
	uint64_t incarnation;
	struct event *deadline;
	size_t n;
	struct flush_page pending[];
};

/* A client's flush ends: its answer. */
static void flush_answered(void *arg, int status, const char *reason)
{
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;

	if (status == FTVM__PARTNER__STATUS__STATUS_OK)
		client_call_reply(arg, &reply);
	else
		vmm_reply_error(arg, status, "%s", reason);
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

/* Takes f out, then ends it: done may start another wait. */
static void flush_end(struct vmm *v, struct vmm_flush *f, int status, const char *reason)
{
	vmm_acked_fn done = f->done;
	void *arg = f->arg;

	flush_free(v, f);
	done(arg, status, reason);
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_flush *f = arg;
	struct vmm *v = f->vmm;
	char reason[512];

	snprintf(reason, sizeof(reason),
		 "flush of %s: page %llu (version %llu) and %zu more not in the store "
		 "within %u ms",
		 f->guid, (unsigned long long)f->pending[0].page,
		 (unsigned long long)f->pending[0].version, f->n - 1,
		 v->config->request_timeout_ms);
	flush_end(v, f, FTVM__PARTNER__STATUS__STATUS_TIMEOUT, reason);
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

/* Waits that end are taken out first and ended after: an end answers a
 * client, which may close it, and its going ends its other waits. */
void vmm_flush_check(struct vmm *v)
{
	struct vmm_flush **at = &v->flushes, *ended = NULL, *f;

	while ((f = *at)) {
		struct vmm_alloc *a = vmm_table_find_incarnation(v->table, f->guid, f->incarnation);

		if (a && !settle(v, f, a)) {
			at = &f->next;
			continue;
		}
		*at = f->next;
		f->next = ended;
		ended = f;
		f->n = a ? 0 : SIZE_MAX; /* SIZE_MAX: its allocation went */
	}
	while ((f = ended)) {
		vmm_acked_fn done = f->done;
		void *arg = f->arg;
		char reason[256];
		bool gone = f->n == SIZE_MAX;

		snprintf(reason, sizeof(reason), "flush of %s: released or resynced meanwhile",
			 f->guid);
		ended = f->next;
		event_free(f->deadline);
		free(f);
		done(arg,
		     gone ? FTVM__PARTNER__STATUS__STATUS_NOT_FOUND
			  : FTVM__PARTNER__STATUS__STATUS_OK,
		     gone ? reason : NULL);
	}
}

/* A wait for n pages of a, filled by the caller; NULL when out of memory. */
static struct vmm_flush *flush_new(struct vmm *v, const struct vmm_alloc *a, size_t n,
				   vmm_acked_fn done, void *arg, uint64_t client_id)
{
	struct vmm_flush *f = calloc(1, sizeof(*f) + n * sizeof(f->pending[0]));

	if (!f || !(f->deadline = evtimer_new(v->base, on_deadline, f))) {
		free(f);
		return NULL;
	}
	f->vmm = v;
	f->done = done;
	f->arg = arg;
	f->client_id = client_id;
	snprintf(f->guid, sizeof(f->guid), "%s", a->guid);
	f->incarnation = a->incarnation;
	return f;
}

static void flush_start(struct vmm *v, struct vmm_flush *f)
{
	vmm_timer_add_ms(f->deadline, v->config->request_timeout_ms);
	f->next = v->flushes;
	v->flushes = f;
	vmm_destage_hurry(v); /* this node's own pages; the partner's keep its pace */
}

void vmm_op_flush(struct vmm *v, struct client_call *call, const Ftvm__Client__FlushRequest *req)
{
	struct vmm_alloc *a = vmm_client_page(v, call, req->guid, req->first_page, "flush");
	uint64_t end, n = 0;
	struct vmm_flush *f;

	if (!a)
		return;
	end = req->pages && req->pages <= a->pages - req->first_page ? req->first_page + req->pages
								     : a->pages;
	for (uint64_t i = req->first_page; i < end; i++)
		n += !durable(&a->page[i], a->page[i].version);
	if (n == 0) {
		flush_answered(call, FTVM__PARTNER__STATUS__STATUS_OK, NULL);
		return;
	}
	f = flush_new(v, a, n, flush_answered, call, client_call_client_id(call));
	if (!f) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	for (uint64_t i = req->first_page; i < end; i++)
		if (!durable(&a->page[i], a->page[i].version))
			f->pending[f->n++] = (struct flush_page){ i, a->page[i].version };
	flush_start(v, f);
}

/* ---- a page write's answer ([node] ack) ---- */

struct write_ack {
	struct vmm *vmm;
	char guid[128];
	uint64_t incarnation, page, version, client_id;
	vmm_acked_fn done;
	void *arg;
};

/* Committed here: at ack = durable, the store's copy is waited for. */
static void write_ack_committed(void *arg)
{
	struct write_ack *w = arg;
	struct vmm *v = w->vmm;
	struct vmm_alloc *a = vmm_table_find_incarnation(v->table, w->guid, w->incarnation);
	struct vmm_flush *f;
	char reason[256];

	if (v->config->ack != CONFIG_ACK_DURABLE || !a || durable(&a->page[w->page], w->version)) {
		/* Gone since: the write did happen, and is answered so. */
		w->done(w->arg, FTVM__PARTNER__STATUS__STATUS_OK, NULL);
	} else if (!(f = flush_new(v, a, 1, w->done, w->arg, w->client_id))) {
		snprintf(reason, sizeof(reason),
			 "%s page %llu: out of memory waiting for the store", w->guid,
			 (unsigned long long)w->page);
		w->done(w->arg, FTVM__PARTNER__STATUS__STATUS_INTERNAL, reason);
	} else {
		f->pending[f->n++] = (struct flush_page){ w->page, w->version };
		flush_start(v, f);
	}
	free(w);
}

void vmm_page_write_acked(struct vmm *v, const struct vmm_alloc *a, uint64_t page, uint64_t version,
			  bool committed, uint64_t client_id, vmm_acked_fn done, void *arg)
{
	struct write_ack *w;

	if (committed && v->config->ack != CONFIG_ACK_DURABLE) {
		done(arg, FTVM__PARTNER__STATUS__STATUS_OK, NULL);
		return;
	}
	w = calloc(1, sizeof(*w));
	if (!w) {
		done(arg, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	*w = (struct write_ack){ .vmm = v,
				 .incarnation = a->incarnation,
				 .page = page,
				 .version = version,
				 .client_id = client_id,
				 .done = done,
				 .arg = arg };
	snprintf(w->guid, sizeof(w->guid), "%s", a->guid);
	if (committed)
		write_ack_committed(w);
	else
		vmm_after_commit(v, write_ack_committed, w);
}

void vmm_flushes_fail(struct vmm *v)
{
	while (v->flushes)
		flush_end(v, v->flushes, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
			  "node stopping");
}

void vmm_flushes_client_gone(struct vmm *v, uint64_t client_id)
{
	struct vmm_flush *f = v->flushes, *next;

	/* A client's wait ends with an answer it will not read: nothing is
	 * closed by it, and the list stays as it is but for f. */
	for (; f; f = next) {
		next = f->next;
		if (f->client_id == client_id)
			flush_end(v, f, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN, "client gone");
	}
}
