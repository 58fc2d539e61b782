/* Frames to and from a node on a socket, for the trace replayer: the
 * partner channel it dials, and each client connection (whose replies may
 * carry a descriptor, the frame pool, as MapReply's do). */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

struct replay_stream {
	int fd;
	uint8_t *buf;
	size_t len, cap;
	int passed_fd; /* a descriptor that came with the bytes, -1 */
};

/* Packs m into one frame and sends it whole (blocking). */
int replay_send_frame(int fd, const ProtobufCMessage *m);
/* Reads what the socket has now. -ECONNRESET when the node closed it. */
int replay_stream_fill(struct replay_stream *s);
/* 1 with the first whole frame's payload (the caller frees it), 0 when none
 * is whole yet, -EBADMSG with why. */
int replay_stream_next(struct replay_stream *s, uint8_t **ret, size_t *ret_len, const char **why);
