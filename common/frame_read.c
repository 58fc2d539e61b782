#include "frame_read.h"

#include <event2/buffer.h>
#include <event2/bufferevent.h>

void frame_read_rest(struct bufferevent *bev, size_t total)
{
	struct evbuffer *in = bufferevent_get_input(bev);
	evutil_socket_t fd = bufferevent_getfd(bev);
	size_t have = evbuffer_get_length(in);

	if (have >= total)
		return;
	/* A socket bufferevent keeps the end of its input frozen but for its
	 * own reads, which is what this one is. Each evbuffer_read takes at
	 * most 4 KiB too, but within this turn. */
	evbuffer_unfreeze(in, 0);
	while (have < total && evbuffer_read(in, fd, (int)(total - have)) > 0)
		have = evbuffer_get_length(in);
	evbuffer_freeze(in, 0);
}
