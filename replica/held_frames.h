/* Frames received and not taken yet, in the order they came: copies, each
 * tagged with the connection it came on (an opaque pointer). The session
 * holds here what arrives on the link's new connection while the one it
 * replaced may still bring older frames (session.c, "the link moves"). */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct held_frames {
	struct held_frame *first, *last;
	size_t n, bytes;
};

/* A copy of payload behind the others; -ENOMEM, and nothing held, if no room. */
int held_frames_push(struct held_frames *q, void *tag, const uint8_t *payload, size_t len);

/* The oldest frame's tag; NULL when none is held. */
void *held_frames_first_tag(const struct held_frames *q);

/* The oldest frame, out of the queue: its payload and tag, for
 * held_frames_done once taken. NULL when none is held. */
struct held_frame *held_frames_pop(struct held_frames *q, void **ret_tag,
				   const uint8_t **ret_payload, size_t *ret_len);
void held_frames_done(struct held_frame *f);

/* Drops the frames tagged tag (their connection went), or every one (tag
 * NULL). */
void held_frames_drop(struct held_frames *q, const void *tag);
