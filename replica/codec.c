#include "codec.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

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

CommandComplete *codec_command_complete_copy(const CommandComplete *cc)
{
	size_t len = ftvm__partner__command_complete__get_packed_size(cc);
	uint8_t *buf = malloc(len ? len : 1);
	CommandComplete *copy;

	if (!buf)
		return NULL;
	ftvm__partner__command_complete__pack(cc, buf);
	copy = ftvm__partner__command_complete__unpack(NULL, len, buf);
	free(buf);
	return copy;
}

void codec_command_complete_free(CommandComplete *cc)
{
	if (cc)
		ftvm__partner__command_complete__free_unpacked(cc, NULL);
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
