/* A trace record's message, decoded by its channel and direction: a partner
 * Envelope (checked as the session checks one), a ClientRequest going in, a
 * ClientReply coming out. */
#pragma once

#include <stddef.h>

#include <protobuf-c/protobuf-c.h>

#include "trace_file.h"

/* -EBADMSG with err saying why when the bytes do not decode. Free with
 * trace_message_free. */
int trace_message_decode(const struct trace_record *rec, ProtobufCMessage **ret, char *err,
			 size_t err_len);
/* The same for one envelope inside a Batch. */
int trace_message_decode_envelope(const uint8_t *data, size_t len, ProtobufCMessage **ret,
				  char *err, size_t err_len);
void trace_message_free(ProtobufCMessage *m);

/* The type of what the message carries: "SpaceRequest", "CommandComplete",
 * "AllocRequest", "AllocReply"; for a reply with no payload "ClientReply";
 * "none" when nothing this build knows is set. */
const char *trace_message_type(const ProtobufCMessage *m);
