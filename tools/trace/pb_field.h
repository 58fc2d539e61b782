/* One view over protobuf-c's in-memory layout, for code that walks any
 * message by its descriptor: the trace dump's rendering and the replay's
 * comparison. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* The protobuf types by how C holds them. */
enum pb_kind {
	PB_SIGNED,   /* .i */
	PB_UNSIGNED, /* .u */
	PB_BOOL,     /* .u, 0 or 1 */
	PB_ENUM,     /* .u, the value */
	PB_FLOAT,    /* .d */
	PB_STRING,   /* .s, never NULL */
	PB_BYTES,    /* .bytes */
	PB_MESSAGE,  /* .msg */
};

struct pb_value {
	ProtobufCType type;
	enum pb_kind kind;
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
/* A value other than a message as text: numbers, true/false, enums by name,
 * bytes as "<N bytes crc32c 0x...>", strings as they are. */
void pb_value_format(const struct pb_value *v, const ProtobufCFieldDescriptor *f, char *buf,
		     size_t len);
/* The same type, the same value. */
bool pb_value_equal(const struct pb_value *a, const struct pb_value *b);
/* An enum value's name without its type's prefix: STATUS_OK -> "OK". */
const char *pb_enum_short_name(const ProtobufCFieldDescriptor *f, int value);
/* The oneof member set in m, or NULL (the first oneof only: ours have one). */
const ProtobufCFieldDescriptor *pb_oneof_member(const ProtobufCMessage *m);
