/* Read header (seed 002 Fig. 10 steps 1050-1055): a client's `header`,
 * answered from this node's record, or from the owner's when this node's is
 * not known to be current (vmm/VMM.md, "Read header: whose record answers").
 *
 *   record known current (the usual case) -> answered here, no round trip
 *   record unconfirmed, mirrored, window shut:
 *        ReadHeader{guid} -> owner -> Header  (the owner's record answers;
 *                                              equal: this one is confirmed)
 *                                  -> NOT_FOUND (answered NOT_FOUND)
 *                                  -> no answer, link gone (this one answers)
 *
 * A record is unconfirmed from the end of a resync this node received (every
 * allocation its partner owns) until a ReadHeader's answer equals it. */
#include "vmm_state.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "session.h"

#define LOG_SUBSYSTEM VMM_LOG_SUBSYSTEM

struct read_header {
	struct vmm_op op;
	char guid[128];
	uint64_t incarnation;
	char owner[64];
	bool replied; /* with the owner's record */
};

static void reply(struct client_call *call, const Ftvm__Partner__Header *h)
{
	Ftvm__Client__ClientReply r = FTVM__CLIENT__CLIENT_REPLY__INIT;

	r.reply_case = FTVM__CLIENT__CLIENT_REPLY__REPLY_HEADER;
	r.header = (Ftvm__Partner__Header *)h;
	client_call_reply(call, &r);
}

static void reply_local(struct client_call *call, const struct vmm_alloc *a)
{
	Ftvm__Partner__Header h;

	vmm_alloc_header(a, &h);
	reply(call, &h);
}

static bool same_str(const char *x, const char *y)
{
	return strcmp(x ? x : "", y ? y : "") == 0;
}

/* The first field in which the owner's record differs from ours, or NULL. */
static const char *differs(const Ftvm__Partner__Header *ours, const Ftvm__Partner__Header *theirs)
{
	if (ours->size != theirs->size)
		return "size";
	if (ours->block_size != theirs->block_size || ours->pages != theirs->pages)
		return "block_size";
	if (!same_str(ours->policy, theirs->policy))
		return "policy";
	if (!same_str(ours->home, theirs->home))
		return "home";
	if (!same_str(ours->owner, theirs->owner))
		return "owner";
	if (ours->uid != theirs->uid || !same_str(ours->client, theirs->client) ||
	    ours->session != theirs->session)
		return "client";
	if (ours->header.len != theirs->header.len ||
	    (ours->header.len && memcmp(ours->header.data, theirs->header.data, ours->header.len)))
		return "header";
	return NULL;
}

/* The owner's record, while the answer's payload lives: it answers, and
 * confirms ours when equal. Media stays ours: it says where this node's
 * copy rests. */
static void header_answer(struct vmm_op *base, const CommandComplete *cc)
{
	struct read_header *rh = (struct read_header *)base;
	struct vmm *v = base->vmm;
	struct vmm_alloc *a = vmm_table_find_incarnation(v->table, rh->guid, rh->incarnation);
	Ftvm__Partner__Header ours, theirs;
	const char *field;

	if (!a || cc->status != FTVM__PARTNER__STATUS__STATUS_OK ||
	    cc->payload_case != FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_HEADER ||
	    !same_str(cc->header->guid, rh->guid))
		return;
	vmm_alloc_header(a, &ours);
	theirs = *cc->header;
	theirs.media = ours.media;
	field = differs(&ours, &theirs);
	if (field) {
		v->counted.header_differed++;
		log_warning("%s: this node's record differs from its owner's (%s first): the "
			    "owner's answered; `ftvmctl verify` compares the two",
			    rh->guid, field);
	} else {
		a->unconfirmed = false;
	}
	reply(base->call, &theirs);
	rh->replied = true;
}

static void header_finish(struct vmm_op *base)
{
	struct read_header *rh = (struct read_header *)base;
	struct vmm *v = base->vmm;
	struct vmm_alloc *a = vmm_table_find_incarnation(v->table, rh->guid, rh->incarnation);

	if (rh->replied) {
		free(rh);
		return;
	}
	if (base->status == FTVM__PARTNER__STATUS__STATUS_NOT_FOUND)
		vmm_reply_error(base->call, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
				"no allocation %s on its owner %s; this node's page table "
				"still has it, which `ftvmctl verify` shows",
				rh->guid, rh->owner);
	else if (!a)
		vmm_reply_error(base->call, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND,
				"no allocation %s (released meanwhile)", rh->guid);
	else
		/* The owner could not be asked: a header needs no partner
		 * (ha/HA.md, the failover window), so ours answers. */
		reply_local(base->call, a);
	free(rh);
}

static bool ask_owner(struct vmm *v, struct client_call *call, const struct vmm_alloc *a)
{
	Envelope env = FTVM__PARTNER__ENVELOPE__INIT;
	Ftvm__Partner__ReadHeader m = FTVM__PARTNER__READ_HEADER__INIT;
	Envelope *envs[] = { &env };
	struct read_header *rh = calloc(1, sizeof(*rh));

	if (!rh)
		return false;
	rh->op.vmm = v;
	rh->op.call = call;
	rh->op.on_answer = header_answer;
	rh->op.finish = header_finish;
	rh->op.needs_partner = true;
	snprintf(rh->guid, sizeof(rh->guid), "%s", a->guid);
	snprintf(rh->owner, sizeof(rh->owner), "%s", a->owner);
	rh->incarnation = a->incarnation;
	m.guid = a->guid;
	env.message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_READ_HEADER;
	env.read_header = &m;
	if (vmm_op_send(&rh->op, envs, 1) < 0) {
		free(rh);
		return false;
	}
	v->counted.header_asked++;
	return true;
}

void vmm_op_read_header(struct vmm *v, struct client_call *call, const char *guid)
{
	struct vmm_alloc *a = vmm_table_find(v->table, guid);

	if (!a) {
		vmm_reply_error(call, FTVM__PARTNER__STATUS__STATUS_NOT_FOUND, "no allocation %s",
				guid);
		return;
	}
	if (a->unconfirmed && !vmm_is_owner(v, a) && vmm_mode(v) == VMM_MODE_MIRRORED &&
	    !vmm_window_open(v) && ask_owner(v, call, a))
		return;
	reply_local(call, a);
}

void vmm_headers_resynced(struct vmm *v)
{
	size_t n = 0;
	struct vmm_alloc **all = vmm_table_sorted(v->table, &n);

	for (size_t i = 0; all && i < n; i++)
		all[i]->unconfirmed = !vmm_is_owner(v, all[i]);
	free(all);
}
