/* pb_field.h: protobuf-c's layout rules in one place. */
#include "pb_field.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "crc32c.h"

static size_t element_size(ProtobufCType t)
{
	switch (t) {
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
	case PROTOBUF_C_TYPE_DOUBLE:
		return 8;
	case PROTOBUF_C_TYPE_STRING:
		return sizeof(char *);
	case PROTOBUF_C_TYPE_BYTES:
		return sizeof(ProtobufCBinaryData);
	case PROTOBUF_C_TYPE_MESSAGE:
		return sizeof(ProtobufCMessage *);
	default:
		return 4; /* 32-bit integers, float, bool (protobuf_c_boolean), enum */
	}
}

size_t pb_field_count(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	const char *base = (const char *)m;

	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return *(const size_t *)(base + f->quantifier_offset);
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
		return *(const uint32_t *)(base + f->quantifier_offset) == f->id;
	if (f->type == PROTOBUF_C_TYPE_MESSAGE)
		return *(ProtobufCMessage *const *)(base + f->offset) != NULL;
	return 1;
}

struct pb_value pb_field_get(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f, size_t i)
{
	const char *p = (const char *)m + f->offset;
	struct pb_value v = { .type = f->type };

	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		p = *(const char *const *)p + i * element_size(f->type);
	switch (f->type) {
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_SINT32:
	case PROTOBUF_C_TYPE_SFIXED32:
		v.kind = PB_SIGNED;
		v.i = *(const int32_t *)p;
		break;
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_SINT64:
	case PROTOBUF_C_TYPE_SFIXED64:
		v.kind = PB_SIGNED;
		v.i = *(const int64_t *)p;
		break;
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_FIXED32:
		v.kind = PB_UNSIGNED;
		v.u = *(const uint32_t *)p;
		break;
	case PROTOBUF_C_TYPE_UINT64:
	case PROTOBUF_C_TYPE_FIXED64:
		v.kind = PB_UNSIGNED;
		v.u = *(const uint64_t *)p;
		break;
	case PROTOBUF_C_TYPE_FLOAT:
		v.kind = PB_FLOAT;
		v.d = *(const float *)p;
		break;
	case PROTOBUF_C_TYPE_DOUBLE:
		v.kind = PB_FLOAT;
		v.d = *(const double *)p;
		break;
	case PROTOBUF_C_TYPE_BOOL:
		v.kind = PB_BOOL;
		v.u = *(const protobuf_c_boolean *)p != 0;
		break;
	case PROTOBUF_C_TYPE_ENUM:
		v.kind = PB_ENUM;
		v.u = (uint64_t)(int64_t) * (const int *)p;
		break;
	case PROTOBUF_C_TYPE_STRING:
		v.kind = PB_STRING;
		v.s = *(const char *const *)p;
		if (!v.s)
			v.s = "";
		break;
	case PROTOBUF_C_TYPE_BYTES:
		v.kind = PB_BYTES;
		v.bytes = *(const ProtobufCBinaryData *)p;
		break;
	case PROTOBUF_C_TYPE_MESSAGE:
		v.kind = PB_MESSAGE;
		v.msg = *(const ProtobufCMessage *const *)p;
		break;
	}
	return v;
}

bool pb_value_is_default(const struct pb_value *v)
{
	switch (v->kind) {
	case PB_SIGNED:
		return v->i == 0;
	case PB_FLOAT:
		return v->d == 0;
	case PB_STRING:
		return v->s[0] == '\0';
	case PB_BYTES:
		return v->bytes.len == 0;
	case PB_MESSAGE:
		return v->msg == NULL;
	default:
		return v->u == 0;
	}
}

void pb_value_format(const struct pb_value *v, const ProtobufCFieldDescriptor *f, char *buf,
		     size_t len)
{
	switch (v->kind) {
	case PB_SIGNED:
		snprintf(buf, len, "%" PRId64, v->i);
		break;
	case PB_FLOAT:
		snprintf(buf, len, "%g", v->d);
		break;
	case PB_BOOL:
		snprintf(buf, len, "%s", v->u ? "true" : "false");
		break;
	case PB_ENUM:
		snprintf(buf, len, "%s", pb_enum_short_name(f, (int)v->u));
		break;
	case PB_STRING:
		snprintf(buf, len, "%s", v->s);
		break;
	case PB_BYTES:
		snprintf(buf, len, "<%zu bytes crc32c 0x%08" PRIx32 ">", v->bytes.len,
			 crc32c(0, v->bytes.data, v->bytes.len));
		break;
	case PB_MESSAGE:
		snprintf(buf, len, "{...}");
		break;
	default:
		snprintf(buf, len, "%" PRIu64, v->u);
		break;
	}
}

bool pb_value_equal(const struct pb_value *a, const struct pb_value *b)
{
	if (a->kind != b->kind)
		return false;
	switch (a->kind) {
	case PB_SIGNED:
		return a->i == b->i;
	case PB_FLOAT:
		return a->d == b->d;
	case PB_STRING:
		return strcmp(a->s, b->s) == 0;
	case PB_BYTES:
		return a->bytes.len == b->bytes.len &&
		       (a->bytes.len == 0 ||
			memcmp(a->bytes.data, b->bytes.data, a->bytes.len) == 0);
	case PB_MESSAGE:
		return a->msg == b->msg;
	default:
		return a->u == b->u;
	}
}

const char *pb_enum_short_name(const ProtobufCFieldDescriptor *f, int value)
{
	const ProtobufCEnumDescriptor *d = f->descriptor;
	const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(d, value);
	const char *name, *type = d->short_name;
	size_t n = 0;

	if (!ev)
		return "UNKNOWN";
	/* The prefix is the type's name in UPPER_SNAKE: LockMode -> LOCK_MODE_. */
	for (name = ev->name; *type; type++) {
		if (n && isupper((unsigned char)*type)) {
			if (name[n] != '_')
				return ev->name;
			n++;
		}
		if (name[n] != toupper((unsigned char)*type))
			return ev->name;
		n++;
	}
	return name[n] == '_' ? name + n + 1 : ev->name;
}

const ProtobufCFieldDescriptor *pb_oneof_member(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;

	for (unsigned i = 0; i < d->n_fields; i++)
		if ((d->fields[i].flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    pb_field_count(m, &d->fields[i]))
			return &d->fields[i];
	return NULL;
}
