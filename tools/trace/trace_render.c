/* trace_render.h */
#include "trace_render.h"

#include <stdbool.h>
#include <string.h>

#include "crc32c.h"
#include "partner.pb-c.h"
#include "pb_field.h"

static void render_fields(FILE *f, const ProtobufCMessage *m, bool top, bool *first);

static bool needs_quotes(const char *s)
{
	if (!s[0])
		return true;
	for (; *s; s++)
		if (*s <= ' ' || *s == '"' || *s == '\\' || *s == '{' || *s == '}' || *s == '[' ||
		    *s == ']' || *s == ',' || *s == '=' || (unsigned char)*s >= 0x7f)
			return true;
	return false;
}

static void render_string(FILE *f, const char *s)
{
	if (!needs_quotes(s)) {
		fputs(s, f);
		return;
	}
	fputc('"', f);
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '"' || c == '\\')
			fprintf(f, "\\%c", c);
		else if (c < ' ' || c == 0x7f)
			fprintf(f, "\\x%02x", c);
		else
			fputc(c, f);
	}
	fputc('"', f);
}

static void render_value(FILE *f, const ProtobufCFieldDescriptor *fd, const struct pb_value *v)
{
	bool first = true;
	char text[128];

	if (v->kind == PB_STRING) {
		render_string(f, v->s);
	} else if (v->kind == PB_MESSAGE) {
		fputc('{', f);
		render_fields(f, v->msg, false, &first);
		fputc('}', f);
	} else {
		pb_value_format(v, fd, text, sizeof(text));
		fputs(text, f);
	}
}

/* An Envelope says its protocol version in every message; the dump says
 * it only when it is not the one the header names. */
static bool skip(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *fd)
{
	return m->descriptor == &ftvm__partner__envelope__descriptor &&
	       strcmp(fd->name, "version") == 0 &&
	       pb_field_get(m, fd, 0).u ==
		       FTVM__PARTNER__PROTOCOL_VERSION__PROTOCOL_VERSION_CURRENT;
}

static void render_fields(FILE *f, const ProtobufCMessage *m, bool top, bool *first)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	const ProtobufCFieldDescriptor *member = NULL;

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *fd = &d->fields[i];
		size_t n = pb_field_count(m, fd);
		struct pb_value v;

		if (n == 0 || skip(m, fd))
			continue;
		/* The top message's payload comes last, named by its type. */
		if (top && (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
		    fd->type == PROTOBUF_C_TYPE_MESSAGE) {
			member = fd;
			continue;
		}
		v = pb_field_get(m, fd, 0);
		if (fd->label != PROTOBUF_C_LABEL_REPEATED && pb_value_is_default(&v) &&
		    !(fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF))
			continue;
		fprintf(f, "%s%s=", *first ? "" : " ", fd->name);
		*first = false;
		if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
			fputc('[', f);
			for (size_t j = 0; j < n; j++) {
				v = pb_field_get(m, fd, j);
				if (j)
					fputc(',', f);
				render_value(f, fd, &v);
			}
			fputc(']', f);
		} else {
			render_value(f, fd, &v);
		}
	}
	if (member) {
		const ProtobufCMessage *sub = pb_field_get(m, member, 0).msg;

		fprintf(f, "%s%s", *first ? "" : " ",
			((const ProtobufCMessageDescriptor *)member->descriptor)->short_name);
		*first = false;
		render_fields(f, sub, false, first);
	}
}

void trace_render_text(FILE *f, const ProtobufCMessage *m)
{
	bool first = true;

	render_fields(f, m, true, &first);
}

static json_object *json_value(const ProtobufCFieldDescriptor *fd, const struct pb_value *v)
{
	json_object *o;

	switch (v->kind) {
	case PB_SIGNED:
		return json_object_new_int64(v->i);
	case PB_FLOAT:
		return json_object_new_double(v->d);
	case PB_BOOL:
		return json_object_new_boolean(v->u != 0);
	case PB_ENUM:
		return json_object_new_string(pb_enum_short_name(fd, (int)v->u));
	case PB_STRING:
		return json_object_new_string(v->s);
	case PB_BYTES:
		o = json_object_new_object();
		json_object_object_add(o, "bytes", json_object_new_uint64(v->bytes.len));
		json_object_object_add(
			o, "crc32c",
			json_object_new_uint64(crc32c(0, v->bytes.data, v->bytes.len)));
		return o;
	case PB_MESSAGE:
		return trace_render_json(v->msg);
	default:
		return json_object_new_uint64(v->u);
	}
}

json_object *trace_render_json(const ProtobufCMessage *m)
{
	const ProtobufCMessageDescriptor *d = m->descriptor;
	json_object *o = json_object_new_object();

	for (unsigned i = 0; i < d->n_fields; i++) {
		const ProtobufCFieldDescriptor *fd = &d->fields[i];
		size_t n = pb_field_count(m, fd);
		struct pb_value v;

		if (n == 0)
			continue;
		if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
			json_object *a = json_object_new_array();

			for (size_t j = 0; j < n; j++) {
				v = pb_field_get(m, fd, j);
				json_object_array_add(a, json_value(fd, &v));
			}
			json_object_object_add(o, fd->name, a);
			continue;
		}
		v = pb_field_get(m, fd, 0);
		json_object_object_add(o, fd->name, json_value(fd, &v));
	}
	return o;
}
