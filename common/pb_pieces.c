#include "pb_pieces.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* protobuf-c's output, appended piece by piece. */
struct sink {
	ProtobufCBuffer base;
	struct pb_pieces *p;
	const ProtobufCBinaryData *refs;
	size_t n_refs;
	bool failed;
};

static int add_piece(struct pb_pieces *p, const uint8_t *ref, size_t off, size_t len)
{
	struct pb_piece *last = p->n ? &p->piece[p->n - 1] : NULL;

	/* Copies made one after the other are one piece. */
	if (!ref && last && !last->ref && last->off + last->len == off) {
		last->len += len;
		return 0;
	}
	if (p->n == p->cap) {
		size_t cap = p->cap ? 2 * p->cap : 8;
		struct pb_piece *grown = realloc(p->piece, cap * sizeof(*grown));

		if (!grown)
			return -ENOMEM;
		p->piece = grown;
		p->cap = cap;
	}
	p->piece[p->n++] = (struct pb_piece){ .ref = ref, .off = off, .len = len };
	return 0;
}

/* Room for len more bytes in the own buffer. */
static inline int own_room(struct pb_pieces *p, size_t len)
{
	size_t cap;
	uint8_t *grown;

	if (p->own_len + len <= p->own_cap)
		return 0;
	cap = p->own_cap ? 2 * p->own_cap : 256;
	while (cap < p->own_len + len)
		cap *= 2;
	grown = realloc(p->own, cap);
	if (!grown)
		return -ENOMEM;
	p->own = grown;
	p->own_cap = cap;
	return 0;
}

/* The len bytes just written at the end of the own buffer, as a piece. */
static inline int own_added(struct pb_pieces *p, size_t len)
{
	struct pb_piece *last = p->n ? &p->piece[p->n - 1] : NULL;

	p->own_len += len;
	if (last && !last->ref && last->off + last->len == p->own_len - len) {
		last->len += len;
		return 0;
	}
	return add_piece(p, NULL, p->own_len - len, len);
}

static int copy_in(struct pb_pieces *p, const uint8_t *data, size_t len)
{
	if (own_room(p, len) < 0)
		return -ENOMEM;
	memcpy(p->own + p->own_len, data, len);
	return own_added(p, len);
}

/* Whether data is one of the named fields' bytes, all of them. */
static bool named(const struct sink *s, const uint8_t *data, size_t len)
{
	for (size_t i = 0; i < s->n_refs; i++)
		if (s->refs[i].data == data && s->refs[i].len == len)
			return true;
	return false;
}

static void append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct sink *s = (struct sink *)buffer;
	int r;

	if (s->failed || len == 0)
		return;
	if (len >= PB_PIECES_REF_MIN && named(s, data, len)) {
		r = add_piece(s->p, data, 0, len);
	} else {
		r = copy_in(s->p, data, len);
	}
	s->failed = r < 0;
	s->p->len += len;
}

/* ---- The walk (see pb_pieces.h) ----------------------------------------
 *
 * protobuf-c packs a message by walking every field of its descriptor, a
 * call or two each, and asks a sub-message's size anew at each level above
 * it. An Envelope's oneof has some 30 members of which one is set: packing a
 * small one that way took 3.5-4k instructions, three or four times per page
 * write on each node. This walk skips what is not set in a few instructions
 * and writes the same bytes, for the fields partner.proto and client.proto
 * use: proto3 singular scalars (bool, enum, int32, uint32, int64, uint64),
 * strings, bytes and messages, oneofs of those, and repeated strings, bytes
 * and messages. A message with any other field (repeated scalars, which
 * proto3 packs; other types; proto2 labels) or with unknown fields is left
 * to protobuf-c whole, so a field added later is packed right, only slower.
 * Field order is the descriptor's, as protobuf-c's. */

static uint64_t tag_of(const ProtobufCFieldDescriptor *f, unsigned wire_type)
{
	return (uint64_t)f->id << 3 | wire_type;
}

/* A scalar as protobuf-c writes it: the wire's varint (int32 and enum sign
 * extended to 64 bits). */
static uint64_t scalar_of(const ProtobufCFieldDescriptor *f, const void *member)
{
	switch (f->type) {
	case PROTOBUF_C_TYPE_BOOL:
		return *(const protobuf_c_boolean *)member ? 1 : 0;
	case PROTOBUF_C_TYPE_ENUM:
	case PROTOBUF_C_TYPE_INT32:
		return (uint64_t)(int64_t) * (const int32_t *)member;
	case PROTOBUF_C_TYPE_UINT32:
		return *(const uint32_t *)member;
	default: /* INT64, UINT64 */
		return *(const uint64_t *)member;
	}
}

enum walk_kind {
	WALK_NO,     /* not this walk's: protobuf-c packs the message */
	WALK_SCALAR, /* varint */
	WALK_STRING,
	WALK_BYTES,
	WALK_MESSAGE,
};

static inline enum walk_kind walk_kind(const ProtobufCFieldDescriptor *f)
{
	bool repeated = f->label == PROTOBUF_C_LABEL_REPEATED;

	if (f->label != PROTOBUF_C_LABEL_NONE && !repeated)
		return WALK_NO;
	switch (f->type) {
	case PROTOBUF_C_TYPE_BOOL:
	case PROTOBUF_C_TYPE_ENUM:
	case PROTOBUF_C_TYPE_INT32:
	case PROTOBUF_C_TYPE_UINT32:
	case PROTOBUF_C_TYPE_INT64:
	case PROTOBUF_C_TYPE_UINT64:
		return repeated ? WALK_NO : WALK_SCALAR;
	case PROTOBUF_C_TYPE_STRING:
		return WALK_STRING;
	case PROTOBUF_C_TYPE_BYTES:
		return WALK_BYTES;
	case PROTOBUF_C_TYPE_MESSAGE:
		return WALK_MESSAGE;
	default:
		return WALK_NO;
	}
}

/* A oneof member not selected: nothing of it is packed, whatever its kind.
 * Most of an Envelope's fields are such; this is all they cost. */
static inline bool unselected(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	return (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) &&
	       *(const uint32_t *)((const uint8_t *)m + f->quantifier_offset) != f->id;
}

/* Whether f of m (of kind, not a oneof member unselected) is packed, as
 * protobuf-c decides: a selected oneof string or message not when NULL or
 * the default, any other selected member always; a singular field not
 * when zero, "", empty or NULL; a repeated one when it has values. */
static inline bool present(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f,
			   const void *member, enum walk_kind kind)
{
	if (f->label == PROTOBUF_C_LABEL_REPEATED)
		return *(const size_t *)((const uint8_t *)m + f->quantifier_offset) > 0;
	if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
		const void *ptr = *(const void *const *)member;

		return (kind != WALK_STRING && kind != WALK_MESSAGE) ||
		       (ptr && ptr != f->default_value);
	}
	switch (kind) {
	case WALK_SCALAR:
		return scalar_of(f, member) != 0;
	case WALK_STRING:
		return *(const char *const *)member && **(const char *const *)member;
	case WALK_BYTES:
		return ((const ProtobufCBinaryData *)member)->len > 0;
	default: /* WALK_MESSAGE */
		return *(const void *const *)member != NULL;
	}
}

static size_t value_count(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f)
{
	if (f->label != PROTOBUF_C_LABEL_REPEATED)
		return 1;
	return *(const size_t *)((const uint8_t *)m + f->quantifier_offset);
}

/* The address of value i of f in m (the member itself when singular). */
static const void *value_at(const ProtobufCFieldDescriptor *f, const void *member, size_t i,
			    enum walk_kind kind)
{
	size_t width = kind == WALK_BYTES ? sizeof(ProtobufCBinaryData) : sizeof(void *);

	if (f->label != PROTOBUF_C_LABEL_REPEATED)
		return member;
	return *(const uint8_t *const *)member + i * width;
}

static bool walk_size(const ProtobufCMessage *m, size_t *ret);

/* A message's packed size, by the walk where it is the walk's (*ret_walked)
 * or else by protobuf-c. */
static size_t message_size(const ProtobufCMessage *m, bool *ret_walked)
{
	size_t size;

	*ret_walked = walk_size(m, &size);
	return *ret_walked ? size : protobuf_c_message_get_packed_size(m);
}

static const char *string_of(const void *value)
{
	const char *str = *(const char *const *)value;

	return str ? str : "";
}

/* m's packed size, as protobuf_c_message_get_packed_size(m); false when m
 * is not the walk's (nothing in *ret then). */
static bool walk_size(const ProtobufCMessage *m, size_t *ret)
{
	const ProtobufCFieldDescriptor *f = m->descriptor->fields;
	/* A message without fields has none (NULL) to point past. */
	const ProtobufCFieldDescriptor *end = f ? f + m->descriptor->n_fields : f;
	size_t size = 0;

	if (m->n_unknown_fields)
		return false;
	for (; f < end; f++) {
		const void *member = (const uint8_t *)m + f->offset;
		enum walk_kind kind;
		size_t n;

		if (unselected(m, f))
			continue;
		kind = walk_kind(f);
		if (kind == WALK_NO)
			return false;
		if (!present(m, f, member, kind))
			continue;
		if (kind == WALK_SCALAR) {
			size += pb_varint_size(tag_of(f, 0)) + pb_varint_size(scalar_of(f, member));
			continue;
		}
		n = value_count(m, f);
		for (size_t j = 0; j < n; j++) {
			const void *value = value_at(f, member, j, kind);
			size_t len;
			bool walked;

			if (kind == WALK_STRING)
				len = strlen(string_of(value));
			else if (kind == WALK_BYTES)
				len = ((const ProtobufCBinaryData *)value)->len;
			else
				len = message_size(*(const ProtobufCMessage *const *)value,
						   &walked);
			size += pb_varint_size(tag_of(f, 2)) + pb_varint_size(len) + len;
		}
	}
	*ret = size;
	return true;
}

/* A key and a varint (a value, or a length), written into the own buffer. */
static inline void emit_key(struct sink *s, const ProtobufCFieldDescriptor *f, unsigned wire_type,
			    uint64_t v)
{
	struct pb_pieces *p = s->p;
	size_t n;

	if (s->failed || own_room(p, 20) < 0) {
		s->failed = true;
		return;
	}
	n = pb_put_varint(p->own + p->own_len, tag_of(f, wire_type));
	n += pb_put_varint(p->own + p->own_len + n, v);
	s->failed = own_added(p, n) < 0;
	p->len += n;
}

/* m into s. False, with nothing emitted, when m is not the walk's; that
 * shows before anything is emitted only for its first fields, so a caller
 * that has not asked walk_size() starts s again then. */
static bool walk_emit(struct sink *s, const ProtobufCMessage *m)
{
	const ProtobufCFieldDescriptor *f = m->descriptor->fields;
	/* A message without fields has none (NULL) to point past. */
	const ProtobufCFieldDescriptor *end = f ? f + m->descriptor->n_fields : f;

	if (m->n_unknown_fields)
		return false;
	for (; f < end; f++) {
		const void *member = (const uint8_t *)m + f->offset;
		enum walk_kind kind;
		size_t n;

		if (unselected(m, f))
			continue;
		kind = walk_kind(f);
		if (kind == WALK_NO)
			return false;
		if (!present(m, f, member, kind))
			continue;
		if (kind == WALK_SCALAR) {
			emit_key(s, f, 0, scalar_of(f, member));
			continue;
		}
		n = value_count(m, f);
		for (size_t j = 0; j < n; j++) {
			const void *value = value_at(f, member, j, kind);
			const ProtobufCBinaryData *b = value;
			const ProtobufCMessage *sub;
			const char *str;
			bool walked;
			size_t len;

			switch (kind) {
			case WALK_STRING:
				str = string_of(value);
				len = strlen(str);
				emit_key(s, f, 2, len);
				append(&s->base, len, (const uint8_t *)str);
				break;
			case WALK_BYTES:
				emit_key(s, f, 2, b->len);
				append(&s->base, b->len, b->data);
				break;
			default: /* WALK_MESSAGE */
				sub = *(const ProtobufCMessage *const *)value;
				emit_key(s, f, 2, message_size(sub, &walked));
				if (!walked || !walk_emit(s, sub))
					protobuf_c_message_pack_to_buffer(sub, &s->base);
				break;
			}
		}
	}
	return true;
}

/* A sink appending to p, with what the caller named. */
static struct sink sink_on(struct pb_pieces *p, const ProtobufCBinaryData *refs, size_t n_refs)
{
	return (struct sink){
		.base = { .append = append }, .p = p, .refs = refs, .n_refs = n_refs
	};
}

/* Where p ends, to go back to. */
struct mark {
	size_t n, own_len, len, last_len;
};

static struct mark mark_of(const struct pb_pieces *p)
{
	return (struct mark){ .n = p->n,
			      .own_len = p->own_len,
			      .len = p->len,
			      .last_len = p->n ? p->piece[p->n - 1].len : 0 };
}

static void back_to(struct pb_pieces *p, const struct mark *m)
{
	p->n = m->n;
	p->own_len = m->own_len;
	p->len = m->len;
	if (p->n)
		p->piece[p->n - 1].len = m->last_len;
}

size_t pb_pieces_size(const ProtobufCMessage *m)
{
	bool walked;

	return message_size(m, &walked);
}

/* m's fields into s: by the walk, or where m is not the walk's (which may
 * show after some of its fields went out), by protobuf-c from where it
 * started. */
static void sink_message(struct sink *s, const ProtobufCMessage *m)
{
	struct mark start = mark_of(s->p);

	if (walk_emit(s, m))
		return;
	back_to(s->p, &start);
	protobuf_c_message_pack_to_buffer(m, &s->base);
}

int pb_pieces_add(struct pb_pieces *p, const ProtobufCMessage *m, const ProtobufCBinaryData *refs,
		  size_t n_refs)
{
	struct sink s = sink_on(p, refs, n_refs);

	sink_message(&s, m);
	return s.failed ? -ENOMEM : 0;
}

int pb_pieces_add_field(struct pb_pieces *p, uint32_t field, const ProtobufCMessage *m, size_t size,
			const ProtobufCBinaryData *refs, size_t n_refs)
{
	struct sink s = sink_on(p, refs, n_refs);
	ProtobufCFieldDescriptor key = { .id = field };

	emit_key(&s, &key, 2, size);
	sink_message(&s, m);
	return s.failed ? -ENOMEM : 0;
}

uint8_t *pb_pieces_room(struct pb_pieces *p, size_t len)
{
	return own_room(p, len) < 0 ? NULL : p->own + p->own_len;
}

int pb_pieces_added(struct pb_pieces *p, size_t len)
{
	if (len && own_added(p, len) < 0)
		return -ENOMEM;
	p->len += len;
	return 0;
}

void pb_pieces_clear(struct pb_pieces *p)
{
	p->n = p->own_len = p->len = 0;
}

void pb_pieces_iov(const struct pb_pieces *p, struct iovec *iov)
{
	for (size_t i = 0; i < p->n; i++) {
		const struct pb_piece *q = &p->piece[i];

		iov[i].iov_base = (void *)(q->ref ? q->ref : p->own + q->off);
		iov[i].iov_len = q->len;
	}
}

int pb_pieces_flatten(struct pb_pieces *p)
{
	uint8_t *flat;
	size_t at = 0;

	if (p->own && p->n == 1 && !p->piece[0].ref && p->piece[0].off == 0)
		return 0;
	if (!p->n && add_piece(p, NULL, 0, 0) < 0) /* an empty payload: room for its piece */
		return -ENOMEM;
	flat = malloc(p->len ? p->len : 1);
	if (!flat)
		return -ENOMEM;
	for (size_t i = 0; i < p->n; i++) {
		const struct pb_piece *q = &p->piece[i];

		if (q->len)
			memcpy(flat + at, q->ref ? q->ref : p->own + q->off, q->len);
		at += q->len;
	}
	free(p->own);
	p->own = flat;
	p->own_len = p->own_cap = p->len;
	p->piece[0] = (struct pb_piece){ .off = 0, .len = p->len };
	p->n = 1;
	return 0;
}

const uint8_t *pb_pieces_bytes(struct pb_pieces *p)
{
	return pb_pieces_flatten(p) == 0 ? p->own : NULL;
}

void pb_pieces_free(struct pb_pieces *p)
{
	free(p->piece);
	free(p->own);
	memset(p, 0, sizeof(*p));
}
