/* A node played in a test (played_node.h). */
#include "played_node.h"

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "frame.h"

static int write_all(int fd, const uint8_t *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return -1;
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

int played_node_reply(int fd, const Ftvm__Client__ClientReply *reply)
{
	size_t len = ftvm__client__client_reply__get_packed_size(reply);
	uint8_t *frame = malloc(FRAME_HEADER_SIZE + len);
	int r;

	if (!frame)
		return -1;
	ftvm__client__client_reply__pack(reply, frame + FRAME_HEADER_SIZE);
	frame_seal(frame, len);
	r = write_all(fd, frame, FRAME_HEADER_SIZE + len);
	free(frame);
	return r;
}

int played_node_serve(int fd, played_answer_fn answer, void *arg, const char **why)
{
	static _Thread_local uint8_t buf[1 << 16];
	size_t have = 0;

	for (;;) {
		const uint8_t *payload;
		size_t payload_len;
		ssize_t n = read(fd, buf + have, sizeof(buf) - have);
		int len;

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return 0;
		have += (size_t)n;
		while ((len = frame_decode(buf, have, sizeof(buf), &payload, &payload_len, why)) >
		       0) {
			Ftvm__Client__ClientRequest *req =
				ftvm__client__client_request__unpack(NULL, payload_len, payload);
			int r;

			if (!req) {
				*why = "a request that does not parse";
				return -EBADMSG;
			}
			r = answer(fd, req, arg);
			ftvm__client__client_request__free_unpacked(req, NULL);
			if (r < 0)
				return r;
			memmove(buf, buf + len, have - (size_t)len);
			have -= (size_t)len;
		}
		if (len < 0)
			return -EBADMSG;
	}
}

int played_node_listen(const char *path, int backlog)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd;

	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return -1;
	}
	strcpy(sa.sun_path, path);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -1;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, backlog) < 0) {
		int e = errno;

		close(fd);
		errno = e;
		return -1;
	}
	return fd;
}

int played_node_serve_one(int lfd, played_answer_fn answer, void *arg, const char **why)
{
	int fd = accept(lfd, NULL, NULL), r;

	if (fd < 0)
		return -errno;
	r = played_node_serve(fd, answer, arg, why);
	close(fd);
	return r;
}

void *played_node_thread(void *arg)
{
	struct played_node *node = arg;

	node->why = "";
	node->result = played_node_serve_one(node->lfd, node->answer, node->arg, &node->why);
	return NULL;
}
