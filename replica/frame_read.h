/* Reading frames (frame.h) off a socket bufferevent. */
#pragma once

#include <stddef.h>

struct bufferevent;
struct frame_reader;

/* Reads bev's socket in bev's stead, into bev's input buffer, and runs bev's
 * own read and event callbacks as the bufferevent would: the read callback
 * after bytes came, the event callback with BEV_EVENT_READING and
 * BEV_EVENT_EOF, or BEV_EVENT_ERROR with errno set, after reading stopped for
 * good (the reader disables itself first). Writing stays with bev, which must
 * not have EV_READ enabled. Either callback may free the reader and bev.
 * Returns 0, or -ENOMEM. */
int frame_reader_new(struct bufferevent *bev, size_t max_payload, struct frame_reader **ret);

/* Stops reading; must come before bev is freed. Accepts NULL. */
void frame_reader_free(struct frame_reader *r);

/* Stops and restarts reading, as bufferevent_disable/enable(EV_READ) would. */
void frame_reader_disable(struct frame_reader *r);
int frame_reader_enable(struct frame_reader *r);
