/* Packing protobuf-c messages in pieces, for a gathered write: the bytes
 * fields the caller names (a page's block) are not copied but referenced
 * where the message points, and everything else (keys, lengths, numbers,
 * strings, other bytes) is copied into a buffer the pieces own. The bytes
 * the pieces add up to are exactly protobuf_c_message_pack()'s. A walk of
 * its own packs the fields the partner protocol uses (pb_pieces.c says
 * which, and why: protobuf-c's cost 3.5-4k instructions for a small
 * Envelope); a message with anything else goes to protobuf-c's
 * pack_to_buffer, of whose appends only one that is exactly a named
 * field's bytes is referenced, so a protobuf-c that packed through a buffer
 * of its own would cost copies, never a dangling piece.
 *
 * Pieces are appended, so that a caller packs several messages, with keys
 * and lengths of its own between them, into one payload (a Batch of
 * envelopes: replica/codec.c).
 *
 * The memory a piece references must stay as it is until the pieces are
 * sent, flattened or freed. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <protobuf-c/protobuf-c.h>

/* v as a protobuf varint at at (room for 10 bytes): its length. */
static inline size_t pb_put_varint(uint8_t *at, uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		at[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	at[n++] = (uint8_t)v;
	return n;
}

/* How many bytes pb_put_varint() writes for v. */
static inline size_t pb_varint_size(uint64_t v)
{
	size_t n = 1;

	while (v >= 0x80) {
		v >>= 7;
		n++;
	}
	return n;
}

/* A named bytes field shorter than this is copied all the same. */
#define PB_PIECES_REF_MIN 512

struct pb_piece {
	const uint8_t *ref; /* NULL: in the pieces' own buffer, at off */
	size_t off, len;
};

struct pb_pieces {
	struct pb_piece *piece;
	size_t n, cap;
	uint8_t *own; /* the copied parts */
	size_t own_len, own_cap;
	size_t len; /* the whole payload's */
};

/* Appending to p (a zeroed struct pb_pieces is empty), each 0 or -ENOMEM;
 * after a failure p holds part of what was asked, and its caller clears it
 * or frees it. */
/* m's fields, packed: the bytes protobuf_c_message_pack() makes, those of
 * the bytes fields named in refs referenced. */
int pb_pieces_add(struct pb_pieces *p, const ProtobufCMessage *m, const ProtobufCBinaryData *refs,
		  size_t n_refs);
/* m as field field of the message being packed: its key, its length
 * (size, pb_pieces_size(m)) and its fields, as pb_pieces_add(). */
int pb_pieces_add_field(struct pb_pieces *p, uint32_t field, const ProtobufCMessage *m, size_t size,
			const ProtobufCBinaryData *refs, size_t n_refs);
/* Room for up to len bytes at the end of p, for a caller to write its own
 * (keys, lengths, numbers) and then say how many it wrote with
 * pb_pieces_added(). NULL when memory ran out. */
uint8_t *pb_pieces_room(struct pb_pieces *p, size_t len);
int pb_pieces_added(struct pb_pieces *p, size_t len);
/* m's packed size, as protobuf_c_message_get_packed_size(m). */
size_t pb_pieces_size(const ProtobufCMessage *m);
/* Empties p, keeping its memory for the next payload. */
void pb_pieces_clear(struct pb_pieces *p);
/* The pieces as iovecs, into iov (room for p->n). */
void pb_pieces_iov(const struct pb_pieces *p, struct iovec *iov);
/* The referenced pieces copied into the own buffer: p references nothing
 * from now on, and is one piece. 0 or -ENOMEM (p unchanged). */
int pb_pieces_flatten(struct pb_pieces *p);
/* The whole payload, contiguous: the own buffer once flattened. NULL when
 * memory ran out. */
const uint8_t *pb_pieces_bytes(struct pb_pieces *p);
void pb_pieces_free(struct pb_pieces *p);
