/* Block volumes (vmm/VMM.md, "Volumes"): allocations of the pair whose
 * pages are a volume's blocks, cached in the storage cache partition and
 * resting in their home's partition of the store; served over NBD. */
#include "vmm_state.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <event2/event.h>

#include "config.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

bool vmm_volume_name_taken(struct vmm *v, const char *name)
{
	if (vmm_table_find_volume(v->table, name))
		return true;
	for (size_t i = 0; i < v->n_extents_reserved; i++)
		if (strcmp(v->extents_reserved[i]->volume, name) == 0)
			return true;
	return false;
}

bool vmm_volume_request_valid(struct vmm *v, struct client_call *call,
			      const Ftvm__Client__AllocRequest *req)
{
	if (!config_volume_name_valid(req->volume)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"volume name '%.80s%s': want 1 to %d of [A-Za-z0-9._-], not "
				"starting with '-' or '.'",
				req->volume, strlen(req->volume) > 80 ? "..." : "",
				CONFIG_CLIENT_NAME_MAX);
		return false;
	}
	if (req->policy[0] || req->session[0]) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"volume %s: a volume has no policy and no session", req->volume);
		return false;
	}
	if (req->home[0] && strcmp(req->home, vmm_node_id(v)) != 0 &&
	    (!vmm_partner_id(v)[0] || strcmp(req->home, vmm_partner_id(v)) != 0)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_BAD_REQUEST,
				"volume %s: no node '%.40s' in this pair (%s and %s)", req->volume,
				req->home, vmm_node_id(v),
				vmm_partner_id(v)[0] ? vmm_partner_id(v) : "a partner not yet met");
		return false;
	}
	if (vmm_volume_name_taken(v, req->volume)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_DENIED, "volume %s exists",
				req->volume);
		return false;
	}
	if (!frame_pool_cache_frames(v->pool)) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_DENIED,
				"%s has no storage cache to serve volume %s from: set [memory] "
				"cache = N%% (node/vmm/MEDIA.md)",
				vmm_node_id(v), req->volume);
		return false;
	}
	return true;
}

void vmm_op_free_volume(struct vmm *v, struct client_call *call, const char *name)
{
	struct vmm_alloc *a = vmm_table_find_volume(v->table, name);

	if (!a) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND, "no volume %.80s",
				name);
		return;
	}
	vmm_op_free(v, call, a->guid);
}

int vmm_volume_info(struct vmm *v, const char *name, struct vmm_volume_info *ret)
{
	struct vmm_alloc *a = vmm_table_find_volume(v->table, name);

	if (!a)
		return -ENOENT;
	snprintf(ret->guid, sizeof(ret->guid), "%s", a->guid);
	ret->size = a->size;
	ret->block_size = a->block_size;
	return 0;
}

void vmm_volume_names(struct vmm *v, void (*fn)(void *ctx, const char *name), void *ctx)
{
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);

	for (size_t i = 0; all && i < n; i++)
		if (vmm_alloc_is_volume(all[i]))
			fn(ctx, all[i]->volume);
	free(all);
}

uint64_t vmm_volume_read_ahead(struct vmm *v, const char *guid, uint64_t first, uint64_t n)
{
	struct vmm_alloc *a = vmm_table_find(v->table, guid);
	enum vmm_mode mode = vmm_mode(v);
	uint64_t staged = 0;
	char why[200];

	if (!a || !vmm_alloc_is_volume(a) ||
	    (mode != VMM_MODE_MIRRORED && mode != VMM_MODE_SOLO && mode != VMM_MODE_SOLO_READ))
		return 0;
	for (uint64_t i = first; i < a->pages && i - first < n; i++) {
		struct vmm_page *p = &a->page[i];

		if (p->resident || p->pagein || p->filling || p->stale)
			continue;
		if (vmm_page_make_resident(v, a, i, why, sizeof(why)) < 0)
			break; /* no frames, or the store refuses: a hint, dropped */
		p->read_ahead = true;
		staged++;
	}
	v->counted.readahead_pages += staged;
	return staged;
}

/* ---- a volume homed on the partner (MakeVolume) ----
 *
 *   A (asked, --home B)                 B
 *   MakeVolume{name, size, uid} ------>  held; next turn: its own client's
 *                                        AllocRequest{volume} (Fig. 5, A as
 *                                        its partner: SpaceRequest and
 *                                        AllocateMemory come to A)
 *   AllocReply to the client <--------  CommandComplete{Header} once made,
 *                                        or the refusal its client would get
 *
 * No answer (a timeout, the link lost) leaves the outcome unknown: the
 * client is told so, and `volume list` says. */

struct make_op {
	struct client_call *call;
	char name[CONFIG_CLIENT_NAME_MAX + 1];
};

static void on_made(const CommandComplete *cc, void *arg)
{
	struct make_op *op = arg;
	Ftvm__Client__ClientReply reply = FTVM__CLIENT__CLIENT_REPLY__INIT;
	Ftvm__Client__AllocReply ar = FTVM__CLIENT__ALLOC_REPLY__INIT;

	if (cc->status == FTVM__PARTNER__STATUS__STATUS_TIMEOUT ||
	    cc->status == FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE) {
		vmm_reply_error(op->call, cc->status,
				"volume %s: the partner did not answer (%s): whether it was made "
				"is unknown (volume list says)",
				op->name, cc->reason);
	} else if (cc->status) {
		vmm_reply_error(op->call, cc->status, "partner: %s", cc->reason);
	} else if (cc->payload_case != FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_HEADER) {
		vmm_reply_error(op->call, FTVM__PARTNER__STATUS__STATUS_INTERNAL,
				"volume %s: the partner's answer has no header", op->name);
	} else {
		ar.guid = cc->header->guid;
		ar.pages = cc->header->pages;
		ar.block_size = cc->header->block_size;
		reply.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_ALLOC;
		reply.alloc = &ar;
		client_call_reply(op->call, &reply);
	}
	free(op);
}

void vmm_volume_make_on_partner(struct vmm *v, struct client_call *call,
				const Ftvm__Client__AllocRequest *req)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT, *envs[] = { &env };
	Ftvm__Partner__MakeVolume m = FTVM__PARTNER__MAKE_VOLUME__INIT;
	struct make_op *op = calloc(1, sizeof(*op));
	void *args[] = { op };

	if (!op) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_INTERNAL, "out of memory");
		return;
	}
	op->call = call;
	snprintf(op->name, sizeof(op->name), "%s", req->volume);
	m.name = req->volume;
	m.size = req->size;
	m.uid = client_call_peer_uid(call);
	m.client = req->client;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_MAKE_VOLUME;
	env.make_volume = &m;
	if (!vmm_can_complete(v) || vmm_partner_send(v, envs, 1, NULL, 0, on_made, args) < 0) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_PARTNER_UNAVAILABLE,
				"volume %s: its home %s cannot be asked now", req->volume,
				req->home);
		free(op);
	}
}

struct make_for {
	struct vmm *v;
	uint64_t seq; /* the MakeVolume's, which its answer names */
	Ftvm__Client__ClientRequest req;
	Ftvm__Client__AllocRequest alloc;
	uint32_t uid;
	char name[CONFIG_CLIENT_NAME_MAX + 1];
	char client[CONFIG_CLIENT_NAME_MAX + 1];
};

static void on_made_here(const Ftvm__Client__ClientReply *reply, void *arg)
{
	struct make_for *mf = arg;
	CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;
	Ftvm__Partner__Header h;
	struct vmm_alloc *a = reply->status == 0 && reply->alloc
				      ? vmm_table_find(mf->v->table, reply->alloc->guid)
				      : NULL;

	cc.status = reply->status;
	cc.reason = reply->reason;
	if (a) {
		vmm_alloc_header(a, &h);
		cc.payload_case = FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_HEADER;
		cc.header = &h;
	} else if (reply->status == 0) {
		cc.status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		cc.reason = (char *)"made, and gone again at once";
	}
	cc.applied_lsn = pagetable_partner_applied_lsn(mf->v->pt);
	vmm_answer(mf->v, mf->seq, &cc);
	free(mf);
}

/* A turn after the MakeVolume: its own client's request, outside the
 * partner batch being applied. */
static void make_for_partner(evutil_socket_t fd, short what, void *arg)
{
	struct make_for *mf = arg;
	struct client_call *call = client_call_new_internal(client_internal_id_new(), mf->uid,
							    &mf->req, on_made_here, mf);

	if (!call) {
		CommandComplete cc = FTVM__PARTNER__COMMAND_COMPLETE__INIT;

		cc.status = FTVM__PARTNER__STATUS__STATUS_INTERNAL;
		cc.reason = (char *)"out of memory";
		vmm_answer(mf->v, mf->seq, &cc);
		free(mf);
		return;
	}
	vmm_client_request(mf->v, call, &mf->req);
}

int vmm_volume_make_for_partner(struct vmm *v, const Ftvm__Partner__MakeVolume *m, uint64_t seq,
				char *reason, size_t len)
{
	struct timeval now = { 0, 0 };
	struct make_for *mf;

	if (!config_volume_name_valid(m->name) || !config_client_name_valid(m->client)) {
		snprintf(reason, len, "volume '%.80s' for client '%.80s': not a name", m->name,
			 m->client);
		return -EINVAL;
	}
	mf = calloc(1, sizeof(*mf));
	if (!mf) {
		snprintf(reason, len, "out of memory");
		return -ENOMEM;
	}
	mf->v = v;
	mf->seq = seq;
	mf->uid = m->uid;
	snprintf(mf->name, sizeof(mf->name), "%s", m->name);
	snprintf(mf->client, sizeof(mf->client), "%s", m->client);
	ftvm__client__client_request__init(&mf->req);
	ftvm__client__alloc_request__init(&mf->alloc);
	mf->alloc.size = m->size;
	mf->alloc.volume = mf->name;
	mf->alloc.client = mf->client;
	mf->req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_ALLOC;
	mf->req.alloc = &mf->alloc;
	if (event_base_once(v->base, -1, EV_TIMEOUT, make_for_partner, mf, &now) < 0) {
		free(mf);
		snprintf(reason, len, "out of memory");
		return -ENOMEM;
	}
	return 0;
}
