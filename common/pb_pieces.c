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
	const struct pb_pieces *parts;
	size_t n_parts, spliced;
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

static int copy_in(struct pb_pieces *p, const uint8_t *data, size_t len)
{
	if (p->own_len + len > p->own_cap) {
		size_t cap = p->own_cap ? 2 * p->own_cap : 256;
		uint8_t *grown;

		while (cap < p->own_len + len)
			cap *= 2;
		grown = realloc(p->own, cap);
		if (!grown)
			return -ENOMEM;
		p->own = grown;
		p->own_cap = cap;
	}
	memcpy(p->own + p->own_len, data, len);
	p->own_len += len;
	return add_piece(p, NULL, p->own_len - len, len);
}

/* The part a bytes field stands for: its data points at parts[i]. */
static const struct pb_pieces *part_of(const struct sink *s, const uint8_t *data, size_t len)
{
	uintptr_t at = (uintptr_t)data, first = (uintptr_t)s->parts;
	size_t i;

	if (!s->n_parts || at < first || at >= (uintptr_t)(s->parts + s->n_parts))
		return NULL;
	i = (at - first) / sizeof(*s->parts);
	if (at != (uintptr_t)&s->parts[i] || s->parts[i].len != len)
		return NULL;
	return &s->parts[i];
}

/* part's pieces in its place: what it references is referenced, what it
 * copied (small) is copied again, so that the whole stays few pieces. */
/* Whether data is one of the named fields' bytes, all of them. */
static bool named(const struct sink *s, const uint8_t *data, size_t len)
{
	for (size_t i = 0; i < s->n_refs; i++)
		if (s->refs[i].data == data && s->refs[i].len == len)
			return true;
	return false;
}

static int splice(struct pb_pieces *p, const struct pb_pieces *part)
{
	int r = 0;

	for (size_t i = 0; r == 0 && i < part->n; i++) {
		const struct pb_piece *q = &part->piece[i];

		r = q->ref ? add_piece(p, q->ref, 0, q->len)
			   : copy_in(p, part->own + q->off, q->len);
	}
	return r;
}

static void append(ProtobufCBuffer *buffer, size_t len, const uint8_t *data)
{
	struct sink *s = (struct sink *)buffer;
	const struct pb_pieces *part;
	int r;

	if (s->failed || len == 0)
		return;
	part = part_of(s, data, len);
	if (part) {
		r = splice(s->p, part);
		s->spliced++;
	} else if (len >= PB_PIECES_REF_MIN && named(s, data, len)) {
		r = add_piece(s->p, data, 0, len);
	} else {
		r = copy_in(s->p, data, len);
	}
	s->failed = r < 0;
	s->p->len += len;
}

int pb_pieces_pack(const ProtobufCMessage *msg, const ProtobufCBinaryData *refs, size_t n_refs,
		   const struct pb_pieces *parts, size_t n_parts, struct pb_pieces *ret)
{
	struct sink s = { .base = { .append = append },
			  .p = ret,
			  .refs = refs,
			  .n_refs = n_refs,
			  .parts = parts,
			  .n_parts = n_parts };

	memset(ret, 0, sizeof(*ret));
	protobuf_c_message_pack_to_buffer(msg, &s.base);
	if (s.failed || s.spliced != n_parts) {
		pb_pieces_free(ret);
		return s.failed ? -ENOMEM : -EPROTO;
	}
	return 0;
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
