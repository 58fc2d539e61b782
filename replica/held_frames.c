/* A FIFO of copied frames (held_frames.h). */
#include "held_frames.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct held_frame {
	struct held_frame *next;
	void *tag;
	size_t len;
	uint8_t payload[];
};

int held_frames_push(struct held_frames *q, void *tag, const uint8_t *payload, size_t len)
{
	struct held_frame *f = malloc(sizeof(*f) + len);

	if (!f)
		return -ENOMEM;
	f->next = NULL;
	f->tag = tag;
	f->len = len;
	memcpy(f->payload, payload, len);
	if (q->last)
		q->last->next = f;
	else
		q->first = f;
	q->last = f;
	q->n++;
	q->bytes += len;
	return 0;
}

void *held_frames_first_tag(const struct held_frames *q)
{
	return q->first ? q->first->tag : NULL;
}

struct held_frame *held_frames_pop(struct held_frames *q, void **ret_tag,
				   const uint8_t **ret_payload, size_t *ret_len)
{
	struct held_frame *f = q->first;

	if (!f)
		return NULL;
	q->first = f->next;
	if (!q->first)
		q->last = NULL;
	q->n--;
	q->bytes -= f->len;
	*ret_tag = f->tag;
	*ret_payload = f->payload;
	*ret_len = f->len;
	return f;
}

void held_frames_done(struct held_frame *f)
{
	free(f);
}

void held_frames_drop(struct held_frames *q, const void *tag)
{
	struct held_frame **p = &q->first, *f;

	q->last = NULL;
	while ((f = *p)) {
		if (tag && f->tag != tag) {
			q->last = f;
			p = &f->next;
			continue;
		}
		*p = f->next;
		q->n--;
		q->bytes -= f->len;
		free(f);
	}
}
