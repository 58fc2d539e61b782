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

bool codec_envelope_block(const Envelope *env, ProtobufCBinaryData *ret)
{
	if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_WRITE_PAGE)
		*ret = env->write_page->data;
	else if (env->message_case == FTVM__PARTNER__ENVELOPE__MESSAGE_RESYNC_PAGE)
		*ret = env->resync_page->data;
	else
		return false;
	return ret->len > 0;
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

int codec_envelope_decode(const uint8_t *payload, size_t len, Envelope **ret, char *err,
			  size_t err_len)
{
	Envelope *env =
		(Envelope *)pb_arena_unpack(&ftvm__partner__envelope__descriptor, len, payload);
	int r = envelope_check(env, len, err, err_len);

	if (r == 0)
		*ret = env;
	return r;
}

/* ---- An Envelope holding a Batch, its entries not copied ----------------
 *
 * protobuf-c copies every bytes field it unpacks, so a Batch's entries were
 * copied out of the frame, and each entry's own fields again when it was
 * unpacked in turn: a page write's block twice on the node it is sent to.
 * Here an Envelope whose fields are the header's (1-6) and a Batch (30) of
 * entries (1) is read off the wire by hand, its entries pointing into the
 * payload, and the envelopes they hold are unpacked from there into its
 * arena as before: the block is copied once. Anything else (another field,
 * a field repeated that merges, an unexpected wire type, a value that does
 * not fit) is left to protobuf-c, which decides. */

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
	uint64_t num[7]; /* fields 1, 3-6 by number */
	const uint8_t *sender, *batch;
	size_t sender_len, batch_len, entries;
};

/* payload as the header's fields and a Batch, or false. */
static bool read_batch_envelope(const uint8_t *payload, size_t len, struct wire_envelope *w)
{
	const uint8_t *at = payload, *end = payload + len, *bend;
	uint64_t key;

	memset(w, 0, sizeof(*w));
	while (at < end) {
		unsigned field, wire;

		if (!get_varint(&at, end, &key))
			return false;
		field = key >> 3 > 64 ? 64 : (unsigned)(key >> 3);
		wire = key & 7;
		if ((field == 1 || (field >= 3 && field <= 6)) && wire == 0) {
			if (!get_varint(&at, end, &w->num[field]))
				return false;
		} else if (field == 2 && wire == 2) {
			if (!get_bytes(&at, end, &w->sender, &w->sender_len))
				return false;
		} else if (field == 30 && wire == 2 && !w->batch) {
			if (!get_bytes(&at, end, &w->batch, &w->batch_len))
				return false;
		} else {
			return false;
		}
	}
	if (!w->batch || w->num[1] > UINT32_MAX)
		return false;
	at = w->batch;
	bend = w->batch + w->batch_len;
	while (at < bend) {
		const uint8_t *entry;
		size_t entry_len;

		if (!get_varint(&at, bend, &key) || key != (1 << 3 | 2) ||
		    !get_bytes(&at, bend, &entry, &entry_len))
			return false;
		w->entries++;
	}
	return true;
}

/* The envelope w read, in an arena; its entries point into w's payload. */
static Envelope *batch_envelope_new(const struct wire_envelope *w, size_t len)
{
	/* As pb_arena_unpack sizes it: room for the entries' envelopes. */
	Envelope *env = (Envelope *)pb_arena_message_new(&ftvm__partner__envelope__descriptor,
							 2 * len + 2048);
	Ftvm__Partner__Batch *batch;
	const uint8_t *at = w->batch, *end = w->batch + w->batch_len, *entry = NULL;
	uint64_t key;

	if (!env)
		return NULL;
	batch = pb_arena_alloc(&env->base, sizeof(*batch));
	env->sender = pb_arena_alloc(&env->base, w->sender_len + 1);
	if (batch) {
		ftvm__partner__batch__init(batch);
		batch->envelopes =
			pb_arena_alloc(&env->base, w->entries * sizeof(*batch->envelopes));
	}
	if (!batch || !env->sender || !batch->envelopes) {
		pb_arena_free(&env->base);
		return NULL;
	}
	if (w->sender_len)
		memcpy(env->sender, w->sender, w->sender_len);
	env->sender[w->sender_len] = '\0';
	env->version = (uint32_t)w->num[1];
	env->epoch = w->num[3];
	env->seq = w->num[4];
	env->answers = w->num[5];
	env->lsn = w->num[6];
	for (size_t i = 0; i < w->entries; i++) {
		get_varint(&at, end, &key);
		get_bytes(&at, end, &entry, &batch->envelopes[i].len);
		batch->envelopes[i].data = (uint8_t *)entry;
	}
	batch->n_envelopes = w->entries;
	env->message_case = FTVM__PARTNER__ENVELOPE__MESSAGE_BATCH;
	env->batch = batch;
	return env;
}

int codec_envelope_decode_borrowed(const uint8_t *payload, size_t len, Envelope **ret, char *err,
				   size_t err_len)
{
	struct wire_envelope w;
	Envelope *env;
	int r;

	if (!read_batch_envelope(payload, len, &w))
		return codec_envelope_decode(payload, len, ret, err, err_len);
	env = batch_envelope_new(&w, len);
	if (!env) {
		snprintf(err, err_len, "out of memory for an envelope of %zu bytes", len);
		return -ENOMEM;
	}
	r = envelope_check(env, len, err, err_len);
	if (r == 0)
		*ret = env;
	return r;
}

int codec_batch_envelope_decode(const Envelope *batch, size_t i, Envelope **ret, char *err,
				size_t err_len)
{
	const ProtobufCBinaryData *b = &batch->batch->envelopes[i];
	Envelope *env = (Envelope *)pb_arena_unpack_with(
		&batch->base, &ftvm__partner__envelope__descriptor, b->len, b->data);
	int r = envelope_check(env, b->len, err, err_len);

	if (r == 0)
		*ret = env;
	return r;
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
