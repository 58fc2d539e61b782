#include "frame_read.h"

#include <errno.h>
#include <unistd.h>

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
	 * own reads, which is what this one is. evbuffer_read would take at
	 * most 4 KiB a call and ask FIONREAD before each: read(2) the rest
	 * straight into space reserved for it instead, one call for all the
	 * socket holds of it. */
	evbuffer_unfreeze(in, 0);
	while (have < total) {
		struct evbuffer_iovec v;
		ssize_t n;

		if (evbuffer_reserve_space(in, (ev_ssize_t)(total - have), &v, 1) != 1)
			break;
		do
			n = read(fd, v.iov_base, total - have);
		while (n < 0 && errno == EINTR);
		if (n <= 0)
			break; /* not committed: the reservation is dropped */
		v.iov_len = (size_t)n;
		if (evbuffer_commit_space(in, &v, 1) < 0)
			break;
		have += (size_t)n;
	}
	evbuffer_freeze(in, 0);
}
