/* Packing a protobuf-c message in pieces, for a gathered write: the large
 * bytes fields (a page's block) are not copied but referenced where the
 * message points, and everything else (keys, lengths, numbers, strings, the
 * small bytes) is copied into a buffer the pieces own. The bytes the pieces
 * add up to are exactly protobuf_c_message_pack()'s: protobuf-c's own
 * pack_to_buffer makes them, this only chooses which of its appends are
 * copied (PB_PIECES_REF_MIN).
 *
 * So the memory a piece references must stay as it is until the pieces are
 * sent, flattened or freed. */
#pragma once

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include <protobuf-c/protobuf-c.h>

/* A bytes field this long or longer is referenced, not copied. */
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

/* Packs msg into ret (zeroed first). A bytes field of msg whose data points
 * at parts[i] (and whose len is parts[i].len) stands for that payload: its
 * pieces go in its place, so an envelope that carries packed envelopes as
 * bytes (a Batch) is packed without copying them again. 0 or -ENOMEM (ret
 * is then empty). */
int pb_pieces_pack(const ProtobufCMessage *msg, const struct pb_pieces *parts, size_t n_parts,
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
