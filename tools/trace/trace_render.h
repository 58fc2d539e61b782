/* Messages as people read them, for `ftvmctl trace dump`, the text form of
 * traces and replay reports: every field that is not at its default, byte
 * fields as length and CRC-32C, enums by name. Generic over the descriptors,
 * so a field added to a .proto shows without a change here. */
#pragma once

#include <stdio.h>

#include <json-c/json.h>
#include <protobuf-c/protobuf-c.h>

/* One line without its newline: the top message's fields (an Envelope's
 * seq, epoch, ...), then the type it carries and that one's fields:
 *   seq=3 epoch=1 LockRequest guid=a-1 page=2 mode=WRITE */
void trace_render_text(FILE *f, const ProtobufCMessage *m);
/* The same as a new JSON object: {"field": value, ...}, byte fields as
 * {"bytes": N, "crc32c": N}. */
json_object *trace_render_json(const ProtobufCMessage *m);
