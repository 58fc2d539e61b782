/* The originating node's allocate memory method (seed 002 Fig. 5), and the
 * queue of allocations waiting for space.
 *
 * What limits an allocation is its extent in the home node's store
 * partition, which this node chooses alone, and room for each node's copy
 * where its policy makes it rest (node/vmm/MEDIA.md): frames for a DRAM
 * copy, an extent on flash, nothing more for the store (pages take frames
 * on demand, vmm/VMM.md "Replacement"). This node places its own copy
 * (step 510); the partner's answer to the SpaceRequest says whether it has
 * room for its own (step 520), and without it the allocation is denied or
 * waits, as for room here. */
#include "vmm_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "clock.h"
#include "log.h"
#include "session.h"
#include "store.h"
#include "vmm_msg.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct alloc_op {
	struct vmm_op op;
	struct vmm_alloc *a;
	uint64_t deadline_ms; /* monotonic: a waiting allocation gives up then */
	bool immediate;	      /* denied at once when there is no room, not waiting */
	/* Why it found no room, when it did not: in the store, or for its
	 * copy here (its media's reason). */
	bool short_of_media;
	char media_reason[256];
};

/* An allocation without `immediate` that found no room for its extent: it
 * waits in order, and tries again when an allocation homed here is released
 * (from either node: both go through this node's table), until its deadline. */
struct vmm_space_waiter {
	struct vmm_space_waiter *next;
	struct alloc_op *op;
	struct event *deadline;
};

static uint32_t policy_block_size(const struct vmm *v, const char *policy)
{
	struct config_policy pol;

	return config_policy_find(v->config, policy, &pol) ? pol.block_size : 0;
}

/* Fig. 5 step 510: local space, which is room for its extent in the store
 * and for its copy here where its policy says it rests (vmm/media.c); held
 * until vmm_store_extent_done (the media's as the allocation's). */
static int take_space(struct vmm *v, struct alloc_op *op)
{
	int r = vmm_store_extent(v, op->a);

	op->short_of_media = false;
	if (r < 0)
		return r;
	r = vmm_media_place(v, op->a, VMM_PLACE_NEW, op->media_reason, sizeof(op->media_reason));
	if (r < 0) {
		op->short_of_media = true;
		vmm_store_extent_done(v, op->a);
	}
	return r;
}

static void alloc_op_free(struct alloc_op *op)
{
	if (op->a) {
		vmm_store_extent_done(op->op.vmm, op->a);
		vmm_alloc_give_frames(op->op.vmm, op->a); /* a copy resting in DRAM took some */
	}
	vmm_alloc_free(op->a);
	free(op);
}

static void alloc_replied(void *arg)
{
	struct alloc_op *op = arg;
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__AllocReply ar = FTVM__CLIENT__ALLOC_REPLY__INIT;

	ar.guid = op->a->guid;
	ar.pages = op->a->pages;
	ar.block_size = op->a->block_size;
	reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_ALLOC;
	reply.alloc = &ar;
	client_call_reply(op->op.call, &reply);
	op->a = NULL; /* the table has it */
	alloc_op_free(op);
}

static void wait_for_space(struct vmm *v, struct alloc_op *op);

/* The partner's SpaceRequest answer: where its copy rests, and the room
 * left there (a refusal comes as the op's status). */
static void space_answered(struct vmm_op *base, const CommandComplete *cc)
{
	struct alloc_op *op = (struct alloc_op *)base;

	if (cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_SPACE &&
	    cc->space->media[0])
		log_debug("allocation %s: the partner's copy rests on %s there (%llu of %llu "
			  "bytes free)",
			  op->a->guid, cc->space->media, (unsigned long long)cc->space->free_bytes,
			  (unsigned long long)cc->space->total_bytes);
}

/* The partner has no room for its copy (Fig. 5 step 520): what this node
 * took goes back, and the allocation is denied (immediate) or waits, as for
 * room here, until an allocation is freed or its deadline. */
static void partner_short(struct vmm *v, struct alloc_op *op)
{
	if (op->immediate) {
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_DENIED, "%s; immediate",
				op->op.reason);
		alloc_op_free(op);
		vmm_space_freed(v);
		return;
	}
	vmm_store_extent_done(v, op->a);
	vmm_alloc_give_frames(v, op->a);
	op->a->media = VMM_MEDIA_STORE;
	vmm_space_freed(v); /* others may fit in what it gave back */
	op->short_of_media = true;
	snprintf(op->media_reason, sizeof(op->media_reason), "%s", op->op.reason);
	wait_for_space(v, op);
}

static void alloc_finish(struct vmm_op *base)
{
	struct alloc_op *op = (struct alloc_op *)base;
	struct vmm *v = op->op.vmm;
	struct pt_origin o = { .node = vmm_node_id(v), .lsn = op->op.lsn, .own = true };
	int status = op->op.status;

	if (status == FTVM__PARTNER__STATUS__STATUS_NO_SPACE) {
		partner_short(v, op);
		return;
	}
	if (status != FTVM__PARTNER__STATUS__STATUS_OK) {
		vmm_reply_error(op->op.call, status, "%s", op->op.reason);
		alloc_op_free(op);
		vmm_space_freed(v); /* its extent is free again */
		return;
	}
	vmm_table_insert(v->table, op->a);
	vmm_store_extent_done(v, op->a); /* the table holds its extent now */
	vmm_store_extent_clear(v, op->a);
	vmm_persist_alloc(v, op->a, &o);
	vmm_tell_volume(v, op->a, "created");
	vmm_after_commit(v, alloc_replied, op);
}

/* The extent is ours: SpaceRequest and AllocateMemory go in one round trip.
 * The partner answers the first with the room its own copy would take
 * (where its policy puts it), or NO_SPACE; it refuses the second the same
 * way, so it keeps nothing when there is no room. */
static void alloc_send(struct alloc_op *op)
{
	struct vmm *v = op->op.vmm;
	struct vmm_alloc *a = op->a;
	Envelope space_env = FTVM__PARTNER__ENVELOPE__INIT,
		 alloc_env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__SpaceRequest space = FTVM__PARTNER__SPACE_REQUEST__INIT;
	Ftvm__Partner__AllocateMemory am;
	Envelope *envs[] = { &space_env, &alloc_env };

	space.bytes = a->pages * a->block_size;
	space.policy = a->policy;
	space.pages = a->pages;
	space.block_size = a->block_size;
	space.volume = vmm_alloc_is_volume(a);
	space_env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_SPACE_REQUEST;
	space_env.space_request = &space;
	vmm_msg_allocation(&am, a);
	alloc_env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_ALLOCATE_MEMORY;
	alloc_env.allocate_memory = &am;
	op->op.lsn = pagetable_reserve_lsn(v->pt);
	op->op.on_answer = space_answered;
	op->op.finish = alloc_finish;
	if (vmm_op_send(&op->op, envs, 2) < 0) {
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"%s",
				op->op.reason[0] ? op->op.reason : "cannot reach the partner");
		alloc_op_free(op);
	}
}

static void waiter_free(struct vmm *v, struct vmm_space_waiter *w)
{
	struct vmm_space_waiter **p = &v->space_waiters;

	while (*p && *p != w)
		p = &(*p)->next;
	if (*p)
		*p = w->next;
	event_free(w->deadline);
	free(w);
}

static void on_waiter_deadline(evutil_socket_t fd, short what, void *arg)
{
	struct vmm_space_waiter *w = arg;
	struct alloc_op *op = w->op;
	struct vmm *v = op->op.vmm;

	if (op->short_of_media)
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_NO_SPACE,
				"no space within %u ms: %s", v->config->request_timeout_ms,
				op->media_reason);
	else
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_NO_SPACE,
				"no space for %llu pages of %u bytes within %u ms: they do not fit "
				"in %s's partition of the store",
				(unsigned long long)op->a->pages, op->a->block_size,
				v->config->request_timeout_ms, vmm_node_id(v));
	waiter_free(v, w);
	alloc_op_free(op);
}

static void wait_for_space(struct vmm *v, struct alloc_op *op)
{
	uint64_t now = clock_now_ms(), left = op->deadline_ms > now ? op->deadline_ms - now : 0;
	struct timeval tv = { .tv_sec = left / 1000, .tv_usec = left % 1000 * 1000 };
	struct vmm_space_waiter *w = calloc(1, sizeof(*w)), **tail = &v->space_waiters;

	if (!w || !(w->deadline = evtimer_new(v->base, on_waiter_deadline, w))) {
		free(w);
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
				"out of memory");
		alloc_op_free(op);
		return;
	}
	w->op = op;
	evtimer_add(w->deadline, &tv);
	while (*tail)
		tail = &(*tail)->next;
	*tail = w;
	if (op->short_of_media)
		log_debug("allocation %s waits: %s", op->a->guid, op->media_reason);
	else
		log_debug("allocation %s waits for %llu bytes in %s's partition of the store",
			  op->a->guid,
			  (unsigned long long)store_extent_size(v->config->page_size, op->a->pages,
								op->a->block_size),
			  vmm_node_id(v));
}

void vmm_space_freed(struct vmm *v)
{
	/* In order: the first that still does not fit keeps the rest waiting. */
	while (v->space_waiters) {
		struct vmm_space_waiter *w = v->space_waiters;
		struct alloc_op *op = w->op;

		if (take_space(v, op) < 0)
			return;
		waiter_free(v, w);
		alloc_send(op);
	}
}

uint64_t vmm_space_waiting(const struct vmm *v)
{
	uint64_t n = 0;

	for (const struct vmm_space_waiter *w = v->space_waiters; w; w = w->next)
		n++;
	return n;
}

void vmm_space_waiters_fail(struct vmm *v)
{
	while (v->space_waiters) {
		struct alloc_op *op = v->space_waiters->op;

		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
				"node stopping");
		waiter_free(v, v->space_waiters);
		alloc_op_free(op);
	}
}

void vmm_space_waiters_client_gone(struct vmm *v, uint64_t client_id)
{
	struct vmm_space_waiter *w = v->space_waiters, *next;

	for (; w; w = next) {
		struct alloc_op *op = w->op;

		next = w->next;
		if (!op->op.call || client_call_client_id(op->op.call) != client_id)
			continue;
		log_debug("allocation %s: its client went while it waited for space: dropped",
			  op->a->guid);
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_SHUTTING_DOWN,
				"client gone");
		waiter_free(v, w);
		alloc_op_free(op);
	}
}

/* The request's own faults are answered here; true when it may go on. */
static bool alloc_request_valid(struct vmm *v, struct client_call *call,
				const Ftvm__Client__AllocRequest *req, const char *policy,
				uint32_t block_size)
{
	uint64_t pool = frame_pool_server_frames(v->pool) * frame_pool_page_size(v->pool);
	uint64_t free_bytes, partition;

	vmm_store_space(v, &free_bytes, &partition);
	if (!block_size) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"no policy '%s' (configure it as [policy %s])", policy, policy);
		return false;
	}
	if (block_size > pool) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"policy '%s' has blocks of %u bytes, more than %s's frame pool "
				"(%llu bytes)",
				policy, block_size, vmm_node_id(v), (unsigned long long)pool);
		return false;
	}
	if (req->size == 0 || req->size > partition) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"size %llu: want 1 to %llu bytes (%s's partition of the store)",
				(unsigned long long)req->size, (unsigned long long)partition,
				vmm_node_id(v));
		return false;
	}
	if (req->header.len > VMM_HEADER_MAX) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"header of %zu bytes: at most %u", req->header.len, VMM_HEADER_MAX);
		return false;
	}
	if (!config_client_name_valid(req->client)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"client name '%.80s%s': want [A-Za-z0-9._-], at most %d characters",
				req->client, strlen(req->client) > 80 ? "..." : "",
				CONFIG_CLIENT_NAME_MAX);
		return false;
	}
	if (!config_session_id_valid(req->session)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"session '%.80s' is not one (%d lowercase hex digits)",
				req->session, CONFIG_SESSION_ID_LEN);
		return false;
	}
	if (!vmm_can_complete(v)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"partner unavailable: an allocation is mirrored before it is made");
		return false;
	}
	return true;
}

static void alloc_denied(struct vmm *v, struct alloc_op *op)
{
	uint64_t free_bytes, partition;

	vmm_store_space(v, &free_bytes, &partition);
	if (op->short_of_media)
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_DENIED, "%s; immediate",
				op->media_reason);
	else
		vmm_reply_error(op->op.call, FTVM__PARTNER__STATUS__STATUS_DENIED,
				"%llu pages of %u bytes do not fit in %s's partition of the store "
				"(%llu of %llu bytes free; immediate)",
				(unsigned long long)op->a->pages, op->a->block_size, vmm_node_id(v),
				(unsigned long long)free_bytes, (unsigned long long)partition);
	alloc_op_free(op);
}

void vmm_op_alloc(struct vmm *v, struct client_call *call, const Ftvm__Client__AllocRequest *req)
{
	bool volume = req->volume[0] != '\0';
	/* A volume has no policy: its blocks are pages, cached in the storage
	 * cache (vmm/VMM.md, "Volumes"). */
	const char *policy = volume ? "" : req->policy[0] ? req->policy : "default";
	uint32_t block_size = volume ? frame_pool_page_size(v->pool) : policy_block_size(v, policy);
	char guid[64];
	struct alloc_op *op;
	int r;

	if (volume && !vmm_volume_request_valid(v, call, req))
		return;
	if (!volume && req->home[0] && strcmp(req->home, vmm_node_id(v)) != 0) {
		vmm_reply_error(
			call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
			"an allocation is made on the node asked: home '%.40s' is for volumes",
			req->home);
		return;
	}
	if (volume && req->home[0] && strcmp(req->home, vmm_node_id(v)) != 0) {
		vmm_volume_make_on_partner(v, call, req);
		return;
	}
	if (!alloc_request_valid(v, call, req, policy, block_size))
		return;
	snprintf(guid, sizeof(guid), "%s-%llu", vmm_node_id(v),
		 (unsigned long long)pagetable_next_guid(v->pt));
	op = calloc(1, sizeof(*op));
	if (op)
		op->a = vmm_alloc_new(guid, vmm_node_id(v), vmm_node_id(v), policy, req->size,
				      block_size, req->header.data, req->header.len);
	if (!op || !op->a || vmm_alloc_set_client(op->a, req->client) < 0 ||
	    vmm_alloc_set_session(op->a, req->session) < 0 ||
	    vmm_alloc_set_volume(op->a, req->volume) < 0) {
		if (op)
			vmm_alloc_free(op->a);
		free(op);
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	op->a->uid = client_call_peer_uid(call);
	if (req->session[0])
		vmm_session_bind(v, call, req->session);
	op->op.vmm = v;
	op->op.call = call;
	op->deadline_ms = clock_now_ms() + v->config->request_timeout_ms;
	/* A volume never waits for space: a name waiting would be taken by
	 * nobody the partner could see. */
	op->immediate = req->immediate || volume;
	/* Fig. 5 step 510: local space first. */
	r = take_space(v, op);
	if (r == -ENOSPC && op->immediate) {
		alloc_denied(v, op);
	} else if (r == -ENOSPC) {
		wait_for_space(v, op);
	} else if (r < 0) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		alloc_op_free(op);
	} else {
		alloc_send(op);
	}
}

/* The allocation's extent lies in its home's partition of the store: a
 * size or offset from the wire is never taken as given. */
bool vmm_extent_fits(struct vmm *v, const Ftvm__Partner__AllocateMemory *m)
{
	uint32_t page_size = frame_pool_page_size(v->pool);
	bool partner = strcmp(m->home, vmm_node_id(v)) != 0;
	uint64_t pages;

	if (!store_extent_fits(v->store, partner, m->store_offset, m->size))
		return false; /* larger than the partition: no arithmetic on it */
	pages = (m->size - 1) / m->block_size + 1;
	return store_extent_fits(v->store, partner, m->store_offset,
				 store_extent_size(page_size, pages, m->block_size));
}
