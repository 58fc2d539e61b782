#include "codec.h"

#include <errno.h>
#include <inttypes.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "frame.h"
#include "pb_arena.h"
#include "pb_pieces.h"

int codec_payload_pack(const ProtobufCMessage *msg, uint8_t **ret_payload, size_t *ret_len)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	/* malloc(0) may return NULL; an empty message is a valid payload. */
	uint8_t *buf = malloc(len ? len : 1);

	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf);
	*ret_payload = buf;
	*ret_len = len;
	return 0;
}

/* ---- Envelopes packed in pieces: their headers by hand -----------------
 *
 * pb_pieces' walk of an Envelope turns over its 36 fields to find the seven
 * of its header and the one member of its oneof that is set: about 2.7k
 * instructions for each of a page write's three requests and their Batch.
 * The header is written here, as protobuf-c writes it (fields 1 to 7 in
 * order, each left out when zero or empty), and only the member is walked.
 *
 * A Batch goes into one payload: each envelope sized first, then the
 * outer header, the Batch's key and length, and each entry's key and
 * length before the envelope itself, all appended to the same pieces.
 * Packing each entry into pieces of its own and splicing those into the
 * Batch cost two allocations and a second copy per entry. test_codec holds
 * the bytes of both to protobuf-c's. */

/* An envelope's header numbers (fields 1 and 3 to 7), at most. */
#define HEAD_NUMBERS (6 * (1 + 10))

/* Field field (wire type varint) of value v at at, unless v is 0. */
static size_t put_number(uint8_t *at, unsigned field, uint64_t v)
{
	if (!v)
		return 0;
	at[0] = (uint8_t)(field << 3);
	return 1 + pb_put_varint(at + 1, v);
}

static size_t number_size(uint64_t v)
{
	return v ? 1 + pb_varint_size(v) : 0;
}

static size_t sender_len(const Envelope *env)
{
	return env->sender ? strlen(env->sender) : 0;
}

static size_t head_size(const Envelope *env)
{
	size_t sender = sender_len(env);

	return number_size(env->version) + (sender ? 1 + pb_varint_size(sender) + sender : 0) +
	       number_size(env->epoch) + number_size(env->seq) + number_size(env->answers) +
	       number_size(env->lsn) + number_size(env->answers_count);
}

static int add_head(struct pb_pieces *p, const Envelope *env)
{
	size_t sender = sender_len(env), n = 0;
	uint8_t *head = pb_pieces_room(p, HEAD_NUMBERS + 1 + 10 + sender);

	if (!head)
		return -ENOMEM;
	n += put_number(head + n, 1, env->version);
	if (sender) {
		head[n++] = 2 << 3 | 2;
		n += pb_put_varint(head + n, sender);
		memcpy(head + n, env->sender, sender);
		n += sender;
	}
	n += put_number(head + n, 3, env->epoch);
	n += put_number(head + n, 4, env->seq);
	n += put_number(head + n, 5, env->answers);
	n += put_number(head + n, 6, env->lsn);
	n += put_number(head + n, 7, env->answers_count);
	return pb_pieces_added(p, n);
}

/* The page block env carries inline, in ret, to be referenced; false:
 * none. */
static bool envelope_block(const Envelope *env, ProtobufCBinaryData *ret)
{
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE)
		*ret = env->write_page->data;
	else if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE)
		*ret = env->resync_page->data;
	else
		return false;
	return ret->len > 0;
}

/* An envelope sized, for packing next. */
struct envelope_plan {
	bool whole;			/* pb_pieces packs all of it (an unknown field, say) */
	const ProtobufCMessage *member; /* its oneof's, NULL for none */
	uint32_t field;
	size_t member_size, size; /* the member's and the envelope's */
	ProtobufCBinaryData block;
	size_t n_block;
};

static void plan_envelope(const Envelope *env, struct envelope_plan *plan)
{
	const ProtobufCFieldDescriptor *f = NULL;
	ProtobufCBinaryData block = { 0 };
	bool has_block = envelope_block(env, &block);

	*plan = (struct envelope_plan){ .block = block, .n_block = has_block ? 1 : 0 };
	if (env->message_case != FTVM__PARTNER__ENVELOPE__MESSAGE__NOT_SET)
		f = protobuf_c_message_descriptor_get_field(&ftvm__partner__envelope__descriptor,
							    (unsigned)env->message_case);
	/* Anything else (a member not a message is a later protocol's) is
	 * packed whole. */
	if (env->base.n_unknown_fields ||
	    (env->message_case != FTVM__PARTNER__ENVELOPE__MESSAGE__NOT_SET &&
	     (!f || f->type != PROTOBUF_C_TYPE_MESSAGE))) {
		plan->whole = true;
		plan->size = pb_pieces_size(&env->base);
		return;
	}
	plan->size = head_size(env);
	if (!f)
		return;
	memcpy(&plan->member, (const uint8_t *)env + f->offset, sizeof(plan->member));
	if (!plan->member) /* a case set, and no message: protobuf-c packs nothing */
		return;
	plan->field = f->id;
	plan->member_size = pb_pieces_size(plan->member);
	plan->size += pb_varint_size((uint64_t)f->id << 3) + pb_varint_size(plan->member_size) +
		      plan->member_size;
}

static int add_planned(struct pb_pieces *p, const Envelope *env, const struct envelope_plan *plan)
{
	int r;

	if (plan->whole)
		return pb_pieces_add(p, &env->base, &plan->block, plan->n_block);
	r = add_head(p, env);
	if (r == 0 && plan->member)
		r = pb_pieces_add_field(p, plan->field, plan->member, plan->member_size,
					&plan->block, plan->n_block);
	return r;
}

int codec_envelope_pieces(const Envelope *env, struct pb_pieces *p)
{
	struct envelope_plan plan;

	plan_envelope(env, &plan);
	return add_planned(p, env, &plan);
}

/* A key of wire type 2 and a length, into p. */
static int add_key_len(struct pb_pieces *p, uint32_t field, size_t len)
{
	uint8_t *at = pb_pieces_room(p, 20);
	size_t n;

	if (!at)
		return -ENOMEM;
	n = pb_put_varint(at, (uint64_t)field << 3 | 2);
	n += pb_put_varint(at + n, len);
	return pb_pieces_added(p, n);
}

int codec_batch_pieces(const Envelope *outer, Envelope *const *envs, size_t n, struct pb_pieces *p)
{
	struct envelope_plan few[8], *plans = n <= 8 ? few : calloc(n, sizeof(*plans));
	size_t batch = 0;
	int r;

	if (!plans)
		return -ENOMEM;
	for (size_t i = 0; i < n; i++) {
		plan_envelope(envs[i], &plans[i]);
		batch += 1 + pb_varint_size(plans[i].size) + plans[i].size;
	}
	r = add_head(p, outer) ?: add_key_len(p, FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH, batch);
	for (size_t i = 0; i < n && r == 0; i++)
		r = add_key_len(p, 1, plans[i].size) ?: add_planned(p, envs[i], &plans[i]);
	if (plans != few)
		free(plans);
	return r;
}

/* What codec_command_complete_copy() hands out is cc, in one of these. A
 * node answers every request of its partner with a copy (vmm_answer), and
 * most answers carry a status, maybe a reason, an LSN, and at most a
 * LockStatus (the answers to a page write's AllocateWrite, WritePage and
 * ReleasePointer over TCP): those are copied field by field into one
 * allocation, lock and strings behind cc in tail. A copy packed and
 * unpacked again, protobuf-c allocating each field, was 7k instructions of
 * each page write on the node that answers. The others (other payloads,
 * runs, fields this build does not know) still go through their packed
 * bytes, unpacked into one arena (unpacked), which cc's pointers then lead
 * into. */
struct cc_copy {
	const ProtobufCMessage *unpacked; /* NULL: all of it is here */
	CommandComplete cc;
	Ftvm__Partner__LockStatus lock;
	alignas(max_align_t) unsigned char tail[]; /* lock's owners, then the strings */
};

static bool copied_by_fields(const CommandComplete *cc)
{
	if (cc->n_grants || cc->n_landings || cc->base.n_unknown_fields)
		return false;
	if (cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD__NOT_SET)
		return true;
	return cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LOCK && cc->lock &&
	       !cc->lock->base.n_unknown_fields;
}

/* s into the copy's strings at *at. */
static char *put_string(char **at, const char *s)
{
	size_t len = strlen(s ? s : "") + 1;
	char *put = *at;

	memcpy(put, s ? s : "", len);
	*at += len;
	return put;
}

static CommandComplete *copy_by_fields(const CommandComplete *cc)
{
	const Ftvm__Partner__LockStatus *lock =
		cc->payload_case == FTVM__PARTNER__COMMAND_COMPLETE__PAYLOAD_LOCK ? cc->lock : NULL;
	size_t n_owners = lock ? lock->n_owners : 0;
	size_t strings = strlen(cc->reason ? cc->reason : "") + 1;
	struct cc_copy *copy;
	char **owners, *at;

	for (size_t i = 0; i < n_owners; i++)
		strings += strlen(lock->owners[i] ? lock->owners[i] : "") + 1;
	copy = malloc(sizeof(*copy) + n_owners * sizeof(*owners) + strings);
	if (!copy)
		return NULL;
	owners = (char **)copy->tail;
	at = (char *)(owners + n_owners);
	copy->unpacked = NULL;
	copy->cc = *cc;
	copy->cc.reason = put_string(&at, cc->reason);
	/* Nothing may point back into cc (copied_by_fields saw none of these). */
	copy->cc.base.unknown_fields = NULL;
	copy->cc.grants = NULL;
	copy->cc.landings = NULL;
	copy->cc.lock = NULL; /* the payload's union, unset when no lock */
	if (lock) {
		copy->lock = *lock;
		copy->lock.base.unknown_fields = NULL;
		for (size_t i = 0; i < n_owners; i++)
			owners[i] = put_string(&at, lock->owners[i]);
		copy->lock.owners = n_owners ? owners : NULL;
		copy->cc.lock = &copy->lock;
	}
	return &copy->cc;
}

CommandComplete *codec_command_complete_copy(const CommandComplete *cc)
{
	struct cc_copy *copy;
	uint8_t *buf;
	size_t len;

	if (copied_by_fields(cc))
		return copy_by_fields(cc);
	copy = malloc(sizeof(*copy));
	len = ftvm__partner__command_complete__get_packed_size(cc);
	buf = malloc(len ? len : 1);
	if (!copy || !buf)
		goto fail;
	ftvm__partner__command_complete__pack(cc, buf);
	copy->unpacked = pb_arena_unpack(&ftvm__partner__command_complete__descriptor, len, buf);
	if (!copy->unpacked)
		goto fail;
	free(buf);
	copy->cc = *(const CommandComplete *)copy->unpacked;
	return &copy->cc;
fail:
	free(buf);
	free(copy);
	return NULL;
}

void codec_command_complete_free(CommandComplete *cc)
{
	struct cc_copy *copy;

	if (!cc)
		return;
	copy = (struct cc_copy *)((uint8_t *)cc - offsetof(struct cc_copy, cc));
	pb_arena_free(copy->unpacked);
	free(copy);
}

int codec_frame_pack(const ProtobufCMessage *msg, uint8_t **ret_frame, size_t *ret_len)
{
	size_t len = protobuf_c_message_get_packed_size(msg);
	uint8_t *buf = malloc(FRAME_HEADER_SIZE + len);

	if (!buf)
		return -ENOMEM;
	protobuf_c_message_pack(msg, buf + FRAME_HEADER_SIZE);
	frame_seal(buf, len);
	*ret_frame = buf;
	*ret_len = FRAME_HEADER_SIZE + len;
	return 0;
}

/* The checks every decoded envelope gets; env is freed when it fails them. */
static int envelope_check(Envelope *env, size_t len, char *err, size_t err_len)
{
	if (!env) {
		snprintf(err, err_len, "envelope does not parse (%zu bytes)", len);
		return -EBADMSG;
	}
	if (env->version != FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT) {
		snprintf(err, err_len, "unknown protocol version %u (this node speaks %u)",
			 env->version, FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT);
		goto bad;
	}
	if (env->sender[0] == '\0') {
		snprintf(err, err_len, "envelope names no sender");
		goto bad;
	}
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE &&
	    env->answers == 0) {
		snprintf(err, err_len, "CommandComplete answers no sequence number");
		goto bad;
	}
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE &&
	    (env->answers_count > CODEC_ANSWERS_RUN_MAX || env->answers_count > env->answers)) {
		snprintf(err, err_len,
			 "CommandComplete answers a run of %u requests ending at seq %" PRIu64
			 " (a run is at most %d long, from seq 1 on)",
			 env->answers_count, env->answers, CODEC_ANSWERS_RUN_MAX);
		goto bad;
	}
	return 0;
bad:
	codec_envelope_free(env);
	return -EBADMSG;
}

/* ---- Reading an envelope off the wire by hand --------------------------
 *
 * protobuf-c unpacks an Envelope by walking all of its descriptor's fields
 * (the header's and the 30-odd members of its oneof) more than once, about
 * 2.5k instructions before the message inside is even read: three times per
 * page write on the node it is sent to. Nearly every envelope is a header
 * (fields 1-7) and one member of the oneof, so those are read here by hand
 * and only the member's message is given to protobuf-c. And protobuf-c
 * copies every bytes field it unpacks, so a Batch's entries were copied out
 * of the frame, and each entry's own fields again when it was unpacked in
 * turn; on the session's receive path (decode_borrowed) the entries point
 * into the payload instead, and the envelopes they hold are unpacked from
 * there: a page write's block is copied once. Anything else (an unknown
 * field, the oneof twice, which merges or replaces, an unexpected wire type,
 * a value that does not fit) is left to protobuf-c, which decides; so the
 * result is always protobuf-c's (test_codec compares the two). */

/* A varint at *at (before end), moved past; false when there is none. */
static bool get_varint(const uint8_t **at, const uint8_t *end, uint64_t *ret)
{
	uint64_t v = 0;

	for (unsigned shift = 0; *at < end && shift < 64; shift += 7) {
		uint8_t b = *(*at)++;

		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			*ret = v;
			return shift < 63 || b <= 1;
		}
	}
	return false;
}

/* A length-delimited value at *at: its bytes, *at moved past them. */
static bool get_bytes(const uint8_t **at, const uint8_t *end, const uint8_t **ret, size_t *ret_len)
{
	uint64_t len;

	if (!get_varint(at, end, &len) || len > (uint64_t)(end - *at))
		return false;
	*ret = *at;
	*ret_len = (size_t)len;
	*at += len;
	return true;
}

struct wire_envelope {
	uint64_t num[8]; /* fields 1, 3-7 by number */
	const uint8_t *sender, *body;
	size_t sender_len, body_len;
	const ProtobufCFieldDescriptor *member; /* the oneof's, NULL: none */
};

/* payload as the header's fields and at most one member of the oneof, or
 * false. A scalar or the sender repeated is fine: the last one counts, as
 * in protobuf. */
static bool read_envelope(const uint8_t *payload, size_t len, struct wire_envelope *w)
{
	/* An empty payload may come as NULL: no arithmetic on it. */
	const uint8_t *at = payload, *end = len ? payload + len : payload;
	uint64_t key;

	memset(w, 0, sizeof(*w));
	while (at < end) {
		const ProtobufCFieldDescriptor *f;
		unsigned field, wire;

		/* Past protobuf's largest field number: protobuf-c says no. */
		if (!get_varint(&at, end, &key) || key >> 3 > 0x1fffffff)
			return false;
		field = (unsigned)(key >> 3);
		wire = key & 7;
		if ((field == 1 || (field >= 3 && field <= 7)) && wire == 0) {
			if (!get_varint(&at, end, &w->num[field]))
				return false;
			continue;
		}
		if (field == 2 && wire == 2) {
			if (!get_bytes(&at, end, &w->sender, &w->sender_len))
				return false;
			continue;
		}
		f = field >= 10 && wire == 2 && !w->member
			    ? protobuf_c_message_descriptor_get_field(
				      &ftvm__partner__envelope__descriptor, field)
			    : NULL;
		if (!f || !(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ||
		    f->type != PROTOBUF_C_TYPE_MESSAGE ||
		    !get_bytes(&at, end, &w->body, &w->body_len))
			return false;
		w->member = f;
	}
	return w->num[1] <= UINT32_MAX && w->num[7] <= UINT32_MAX;
}

/* A Batch's entries, counted; false when the body is anything else. */
static bool count_entries(const struct wire_envelope *w, size_t *ret)
{
	const uint8_t *at = w->body, *end = w->body + w->body_len;
	uint64_t key;

	*ret = 0;
	while (at < end) {
		const uint8_t *entry;
		size_t entry_len;

		if (!get_varint(&at, end, &key) || key != (1 << 3 | 2) ||
		    !get_bytes(&at, end, &entry, &entry_len))
			return false;
		(*ret)++;
	}
	return true;
}

/* The Batch in w's body, its entries pointing into it, in env's arena. */
static bool borrow_batch(Envelope *env, const struct wire_envelope *w, size_t entries)
{
	Ftvm__Partner__Batch *batch = pb_arena_alloc(&env->base, sizeof(*batch));
	const uint8_t *at = w->body, *end = w->body + w->body_len, *entry = NULL;
	uint64_t key;

	if (!batch)
		return false;
	ftvm__partner__batch__init(batch);
	batch->envelopes = pb_arena_alloc(&env->base, entries * sizeof(*batch->envelopes));
	if (!batch->envelopes)
		return false;
	for (size_t i = 0; i < entries; i++) {
		get_varint(&at, end, &key);
		get_bytes(&at, end, &entry, &batch->envelopes[i].len);
		batch->envelopes[i].data = (uint8_t *)entry;
	}
	batch->n_envelopes = entries;
	env->batch = batch;
	return true;
}

/* The envelope payload holds, read by hand: in owner's arena (a Batch's
 * entry), or in a new one of its own; a Batch's entries pointing into
 * payload when borrow. NULL when it is not for this path or memory ran out:
 * protobuf-c then decides. */
static Envelope *fast_decode(const ProtobufCMessage *owner, const uint8_t *payload, size_t len,
			     bool borrow)
{
	const ProtobufCMessageDescriptor *desc = &ftvm__partner__envelope__descriptor;
	struct wire_envelope w;
	size_t entries = 0;
	Envelope *env;

	if (!read_envelope(payload, len, &w))
		return NULL;
	borrow = borrow && w.member && w.member->id == FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH &&
		 count_entries(&w, &entries);
	/* As pb_arena_unpack sizes it: room for a Batch's envelopes too. */
	env = (Envelope *)(owner ? pb_arena_message_new_with(owner, desc)
				 : pb_arena_message_new(desc, 2 * len + 2048));
	if (!env)
		return NULL;
	env->sender = pb_arena_alloc(&env->base, w.sender_len + 1);
	if (!env->sender)
		goto fail;
	if (w.sender_len)
		memcpy(env->sender, w.sender, w.sender_len);
	env->sender[w.sender_len] = '\0';
	env->version = (uint32_t)w.num[1];
	env->epoch = w.num[3];
	env->seq = w.num[4];
	env->answers = w.num[5];
	env->lsn = w.num[6];
	env->answers_count = (uint32_t)w.num[7];
	if (borrow) {
		if (!borrow_batch(env, &w, entries))
			goto fail;
	} else if (w.member) {
		ProtobufCMessage *msg =
			pb_arena_unpack_with(&env->base, w.member->descriptor, w.body_len, w.body);

		if (!msg)
			goto fail;
		memcpy((uint8_t *)env + w.member->offset, &msg, sizeof(msg));
	}
	if (w.member)
		env->message_case = (Ftvm__Partner__Envelope__MessageCase)w.member->id;
	return env;
fail:
	if (!owner)
		pb_arena_free(&env->base);
	return NULL;
}

static int decode(const ProtobufCMessage *owner, const uint8_t *payload, size_t len, bool borrow,
		  Envelope **ret, char *err, size_t err_len)
{
	const ProtobufCMessageDescriptor *desc = &ftvm__partner__envelope__descriptor;
	Envelope *env = fast_decode(owner, payload, len, borrow);
	int r;

	if (!env)
		env = (Envelope *)(owner ? pb_arena_unpack_with(owner, desc, len, payload)
					 : pb_arena_unpack(desc, len, payload));
	r = envelope_check(env, len, err, err_len);
	if (r == 0)
		*ret = env;
	return r;
}

int codec_envelope_decode(const uint8_t *payload, size_t len, Envelope **ret, char *err,
			  size_t err_len)
{
	return decode(NULL, payload, len, false, ret, err, err_len);
}

int codec_envelope_decode_borrowed(const uint8_t *payload, size_t len, Envelope **ret, char *err,
				   size_t err_len)
{
	return decode(NULL, payload, len, true, ret, err, err_len);
}

int codec_batch_envelope_decode(const Envelope *batch, size_t i, Envelope **ret, char *err,
				size_t err_len)
{
	const ProtobufCBinaryData *b = &batch->batch->envelopes[i];

	return decode(&batch->base, b->data, b->len, false, ret, err, err_len);
}

int codec_envelope_decode_frame(const uint8_t *buf, size_t len, size_t max_payload, Envelope **ret,
				char *err, size_t err_len)
{
	const uint8_t *payload;
	size_t payload_len;
	const char *why;
	int r;

	r = frame_decode(buf, len, max_payload, &payload, &payload_len, &why);
	if (r < 0) {
		snprintf(err, err_len, "bad frame: %s", why);
		return r;
	}
	if (r == 0) {
		snprintf(err, err_len, "truncated frame (%zu bytes)", len);
		return -EBADMSG;
	}
	if ((size_t)r != len) {
		snprintf(err, err_len, "%zu bytes after the frame", len - (size_t)r);
		return -EBADMSG;
	}
	return codec_envelope_decode(payload, payload_len, ret, err, err_len);
}

void codec_envelope_free(Envelope *env)
{
	if (env)
		pb_arena_free(&env->base);
}

uint32_t codec_answers_in(const Envelope *env)
{
	return env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_COMMAND_COMPLETE &&
			       env->answers_count > 1
		       ? env->answers_count
		       : 1;
}

const CommandComplete *codec_run_answer(const Envelope *env, uint64_t seq, CommandComplete *plain)
{
	if (seq == env->answers)
		return env->command_complete;
	ftvm__partner__command_complete__init(plain);
	return plain;
}

const char *codec_message_name(const Envelope *env)
{
	const ProtobufCFieldDescriptor *f;

	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE__NOT_SET)
		return "none";
	f = protobuf_c_message_descriptor_get_field(&ftvm__partner__envelope__descriptor,
						    (unsigned)env->message_case);
	if (!f)
		return "unknown";
	/* The descriptor's message type carries the seed's CamelCase name. */
	return ((const ProtobufCMessageDescriptor *)f->descriptor)->short_name;
}

static const char *enum_short_name(const ProtobufCEnumDescriptor *d, int value, size_t prefix_len)
{
	const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value(d, value);

	if (!v)
		return "UNKNOWN";
	/* protobuf-c's value names are the .proto names: "STATUS_OK" -> "OK". */
	return v->name + prefix_len;
}

const char *codec_status_name(int status)
{
	return enum_short_name(&ftvm__partner__status__descriptor, status, sizeof("STATUS_") - 1);
}

const char *codec_node_state_name(int state)
{
	static const char *const names[] = {
		[FTVM__PARTNER__NODE_STATE__NODE_STATE_UNSPECIFIED] = "unknown",
		[FTVM__PARTNER__NODE_STATE__NODE_STATE_STARTING] = "starting",
		[FTVM__PARTNER__NODE_STATE__NODE_STATE_ACTIVE] = "active",
		[FTVM__PARTNER__NODE_STATE__NODE_STATE_SOLO] = "solo",
		[FTVM__PARTNER__NODE_STATE__NODE_STATE_RESYNCING] = "resyncing",
		[FTVM__PARTNER__NODE_STATE__NODE_STATE_FENCED] = "fenced",
	};
	if (state < 0 || (size_t)state >= sizeof(names) / sizeof(names[0]))
		return "unknown";
	return names[state];
}
