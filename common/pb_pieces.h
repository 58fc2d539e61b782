/* Packing a protobuf-c message in pieces, for a gathered write: the bytes
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

/* Packs msg into ret (zeroed first), referencing the bytes of refs (fields
 * of msg). A bytes field of msg whose data points at parts[i] (and whose len
 * is parts[i].len) stands for that payload: its pieces go in its place, so
 * an envelope that carries packed envelopes as bytes (a Batch) is packed
 * without copying them again. 0; -ENOMEM, or -EPROTO when a part was not
 * found in msg's bytes (ret is then empty). */
int pb_pieces_pack(const ProtobufCMessage *msg, const ProtobufCBinaryData *refs, size_t n_refs,
		   const struct pb_pieces *parts, size_t n_parts, struct pb_pieces *ret);
/* As pb_pieces_pack() of a message whose fields numbered below field are
 * packed already, head_len bytes at head, and whose field field is the
 * message msg (NULL: none): head copied, then msg's key, length and fields.
 * For a caller that writes a message's first fields itself, as the codec
 * does an Envelope's header (replica/codec.c); the bytes are pb_pieces_pack's
 * of the whole when head is what that would have written first. */
int pb_pieces_pack_after(const uint8_t *head, size_t head_len, uint32_t field,
			 const ProtobufCMessage *msg, const ProtobufCBinaryData *refs,
			 size_t n_refs, const struct pb_pieces *parts, size_t n_parts,
			 struct pb_pieces *ret);
/* The pieces as iovecs, into iov (room for p->n). */
void pb_pieces_iov(const struct pb_pieces *p, struct iovec *iov);
/* The referenced pieces copied into the own buffer: p references nothing
 * from now on, and is one piece. 0 or -ENOMEM (p unchanged). */
int pb_pieces_flatten(struct pb_pieces *p);
/* The whole payload, contiguous: the own buffer once flattened. NULL when
 * memory ran out. */
const uint8_t *pb_pieces_bytes(struct pb_pieces *p);
void pb_pieces_free(struct pb_pieces *p);
