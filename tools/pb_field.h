/* One view over protobuf-c's in-memory layout, for code that walks any
 * message by its descriptor: the trace dump's rendering and the replay's
 * comparison. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct pb_value {
	ProtobufCType type;
	union {
		int64_t i;  /* the signed integer types */
		uint64_t u; /* the unsigned ones, bool, enum */
		double d;   /* float, double */
		const char *s;
		ProtobufCBinaryData bytes;
		const ProtobufCMessage *msg;
	};
};

/* How many values field f has in m: 0 for an unset oneof member or submessage,
 * the count of a repeated field, else 1 (a proto3 scalar always has one). */
size_t pb_field_count(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f);
/* Value i (0 for a singular field) of field f. */
struct pb_value pb_field_get(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
			     size_t i);
/* 0, "", false, empty bytes: what proto3 leaves off the wire. */
bool pb_value_is_default(const struct pb_value *v);
/* An enum value's name without its type's prefix: STATUS_OK -> "OK". */
const char *pb_enum_short_name(const ProtobufCFieldDescriptor *f, int value);
/* The oneof member set in m, or NULL (the first oneof only: ours have one). */
const ProtobufCFieldDescriptor *pb_oneof_member(const ProtobufCMessage *m);
