/* replay_stream.h */
#include "replay_stream.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "codec.h"
#include "frame.h"

int replay_send_frame(int fd, const ProtobufCMessage *m)
{
	uint8_t *payload, hdr[FRAME_HEADER_SIZE];
	size_t len;
	int r = codec_payload_pack(m, &payload, &len);

	if (r < 0)
		return r;
	frame_header_build(hdr, payload, len);
	if (send(fd, hdr, sizeof(hdr), MSG_NOSIGNAL | MSG_MORE) != (ssize_t)sizeof(hdr) ||
	    send(fd, payload, len, MSG_NOSIGNAL) != (ssize_t)len)
		r = errno ? -errno : -EIO;
	free(payload);
	return r;
}

int replay_stream_fill(struct replay_stream *s)
{
	char control[CMSG_SPACE(sizeof(int))];
	struct msghdr msg = { .msg_iovlen = 1,
			      .msg_control = control,
			      .msg_controllen = sizeof(control) };
	struct cmsghdr *cmsg;
	struct iovec iov;
	ssize_t n;

	if (s->cap - s->len < 65536) {
		size_t cap = s->cap ? 2 * s->cap : 1u << 20;
		uint8_t *b = realloc(s->buf, cap);

		if (!b)
			return -ENOMEM;
		s->buf = b;
		s->cap = cap;
	}
	iov = (struct iovec){ .iov_base = s->buf + s->len, .iov_len = s->cap - s->len };
	msg.msg_iov = &iov;
	n = recvmsg(s->fd, &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	if (n == 0)
		return -ECONNRESET;
	if (n < 0)
		return errno == EAGAIN ? 0 : -errno;
	s->len += (size_t)n;
	for (cmsg = CMSG_FIRSTHDR(&msg); cmsg; cmsg = CMSG_NXTHDR(&msg, cmsg))
		if (cmsg->cmsg_level == SOL_SOCKET && cmsg->cmsg_type == SCM_RIGHTS) {
			if (s->passed_fd >= 0)
				close(s->passed_fd);
			memcpy(&s->passed_fd, CMSG_DATA(cmsg), sizeof(int));
		}
	return 0;
}

int replay_stream_next(struct replay_stream *s, uint8_t **ret, size_t *ret_len, const char **why)
{
	const uint8_t *payload;
	size_t len;
	int r = frame_decode(s->buf, s->len, FRAME_MAX_PAYLOAD_DEFAULT, &payload, &len, why);

	if (r <= 0)
		return r;
	*ret = malloc(len ? len : 1);
	if (!*ret)
		return -ENOMEM;
	memcpy(*ret, payload, len);
	*ret_len = len;
	memmove(s->buf, s->buf + r, s->len - (size_t)r);
	s->len -= (size_t)r;
	return 1;
}
