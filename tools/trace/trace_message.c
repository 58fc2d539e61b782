/* trace_message.h */
#include "trace_message.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "client.pb-c.h"
#include "codec.h"
#include "pb_arena.h"
#include "pb_field.h"

int trace_message_decode_envelope(const uint8_t *data, size_t len, ProtobufCMessage **ret,
				  char *err, size_t err_len)
{
	Envelope *env;
	int r = codec_envelope_decode(data, len, &env, err, err_len);

	if (r < 0)
		return r;
	*ret = &env->base;
	return 0;
}

int trace_message_decode(const struct trace_record *rec, ProtobufCMessage **ret, char *err,
			 size_t err_len)
{
	char why[200];
	ProtobufCMessage *m;

	if (rec->channel == TRACE_CHANNEL_PARTNER) {
		if (trace_message_decode_envelope(rec->payload, rec->len, ret, why, sizeof(why)) ==
		    0)
			return 0;
		snprintf(err, err_len, "partner message does not decode: %s", why);
		return -EBADMSG;
	}
	if (rec->direction == TRACE_IN)
		m = pb_arena_unpack(&ftvm__client__client_request__descriptor, rec->len,
				    rec->payload);
	else
		m = pb_arena_unpack(&ftvm__client__client_reply__descriptor, rec->len,
				    rec->payload);
	if (!m) {
		snprintf(err, err_len, "%s does not parse (%zu bytes)",
			 rec->direction == TRACE_IN ? "ClientRequest" : "ClientReply", rec->len);
		return -EBADMSG;
	}
	*ret = m;
	return 0;
}

/* Envelopes come from codec_envelope_decode, whose memory is an arena too. */
void trace_message_free(ProtobufCMessage *m)
{
	pb_arena_free(m);
}

const char *trace_message_type(const ProtobufCMessage *m)
{
	const ProtobufCFieldDescriptor *f = pb_oneof_member(m);

	if (f && f->type == PROTOBUF_C_TYPE_MESSAGE)
		return ((const ProtobufCMessageDescriptor *)f->descriptor)->short_name;
	if (m->descriptor == &ftvm__client__client_reply__descriptor)
		return "ClientReply";
	return "none";
}
