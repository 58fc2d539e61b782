/* Unpacking a protobuf-c message into one arena: the message, its
 * submessages, strings, bytes and repeated arrays all come from one block
 * sized from the payload (more blocks are chained on when it is not enough),
 * and the whole is freed at once. protobuf-c otherwise makes one malloc and
 * one free per piece, a dozen for a page write's envelopes.
 *
 * A message from here must be freed with pb_arena_free(), never with
 * protobuf-c's free_unpacked: its pieces are not malloc's. Whatever points
 * into it (a string, WritePage.data) is good until then, and no longer. */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* Unpacks len bytes at data as a desc message into a new arena. NULL when
 * they do not parse, or memory ran out. */
ProtobufCMessage *pb_arena_unpack(const ProtobufCMessageDescriptor *desc, size_t len,
				  const uint8_t *data);

/* The same, into the arena owner came from (owner from either unpack): for
 * messages nested as bytes in owner, a Batch's envelopes. The result lives as
 * long as owner; pb_arena_free() on it does nothing. */
ProtobufCMessage *pb_arena_unpack_with(const ProtobufCMessage *owner,
				       const ProtobufCMessageDescriptor *desc, size_t len,
				       const uint8_t *data);

/* A desc message, initialised, in a new arena of size bytes besides it,
 * for a caller that fills it itself (pb_arena_alloc) and may unpack more
 * into it (pb_arena_unpack_with). Freed with pb_arena_free(). NULL when
 * memory ran out. */
ProtobufCMessage *pb_arena_message_new(const ProtobufCMessageDescriptor *desc, size_t size);

/* The same in owner's arena (a Batch's envelope, read by hand): it lives as
 * long as owner; pb_arena_free() on it does nothing. */
ProtobufCMessage *pb_arena_message_new_with(const ProtobufCMessage *owner,
					    const ProtobufCMessageDescriptor *desc);

/* size bytes (aligned for anything) from owner's arena, for as long as
 * owner. NULL when memory ran out. */
void *pb_arena_alloc(const ProtobufCMessage *owner, size_t size);

/* Frees the arena msg was unpacked into, when msg made it; NULL is fine. */
void pb_arena_free(const ProtobufCMessage *msg);
