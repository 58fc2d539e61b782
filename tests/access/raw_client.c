/* ftvm-raw-client: a client that does what libftvm never would, for the
 * access and bound tests (tests/e2e/test_client_access.sh,
 * test_client_bounds.sh). It speaks the client protocol itself.
 *
 *   ftvm-raw-client SOCKET truncate
 *   ftvm-raw-client SOCKET flood GUID PAGE COUNT
 *
 * truncate: asks for the frame pool's memfd (MapRequest) and tries to change
 * its size every way a client could (ftruncate to 0, ftruncate larger,
 * fallocate past its end). Prints "refused: REASON" and exits 1 when the node
 * does not pass the memfd; otherwise a line per attempt, "kept" when the
 * kernel refused it, and exits 0 when every attempt was refused, 4 when one
 * changed the size.
 *
 * flood: sends COUNT ReadPage requests for GUID page PAGE without reading a
 * reply, as a client that asks and never reads. Prints "sent N" when all
 * went, then holds the connection until its standard input reaches end of
 * file; prints "dropped after N" (exit 0) when the node closed the
 * connection on it first.
 *
 * Exit: 0 as above, 1 refused, 2 usage, 3 the node cannot be reached. */
#define _GNU_SOURCE /* fallocate */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "client.pb-c.h"
#include "frame.h"

static int connect_to(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		fprintf(stderr, "ftvm-raw-client: cannot connect to %s: %s\n", path,
			strerror(errno));
		exit(3);
	}
	return fd;
}

/* req packed into a frame; the caller frees it. */
static uint8_t *frame_of(Ftvm__Client__ClientRequest *req, size_t *ret_len)
{
	size_t len = ftvm__client__client_request__get_packed_size(req);
	uint8_t *frame = malloc(FRAME_HEADER_SIZE + len);

	if (!frame) {
		fprintf(stderr, "ftvm-raw-client: out of memory\n");
		exit(1);
	}
	ftvm__client__client_request__pack(req, frame + FRAME_HEADER_SIZE);
	frame_seal(frame, len);
	*ret_len = FRAME_HEADER_SIZE + len;
	return frame;
}

/* Reads one reply frame, and the descriptor that may ride on it. */
static Ftvm__Client__ClientReply *read_reply(int fd, int *ret_fd)
{
	static uint8_t buf[FRAME_HEADER_SIZE + 65536];
	char control[CMSG_SPACE(sizeof(int))];
	size_t have = 0, need = FRAME_HEADER_SIZE;
	const uint8_t *payload;
	size_t payload_len;
	const char *why;

	*ret_fd = -1;
	while (have < need) {
		struct iovec iov = { .iov_base = buf + have, .iov_len = need - have };
		struct msghdr msg = { .msg_iov = &iov,
				      .msg_iovlen = 1,
				      .msg_control = control,
				      .msg_controllen = sizeof(control) };
		ssize_t n = recvmsg(fd, &msg, MSG_CMSG_CLOEXEC);
		struct cmsghdr *cm = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
		int r;

		if (n <= 0) {
			fprintf(stderr, "ftvm-raw-client: no reply: %s\n",
				n < 0 ? strerror(errno) : "the node closed the connection");
			exit(3);
		}
		if (cm && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
			memcpy(ret_fd, CMSG_DATA(cm), sizeof(int));
		have += (size_t)n;
		if (have == FRAME_HEADER_SIZE) {
			r = frame_header_check(buf, sizeof(buf) - FRAME_HEADER_SIZE, &why);
			if (r < 0) {
				fprintf(stderr, "ftvm-raw-client: bad reply: %s\n", why);
				exit(1);
			}
			need += (size_t)r;
		}
	}
	if (frame_decode(buf, have, sizeof(buf) - FRAME_HEADER_SIZE, &payload, &payload_len,
			 &why) <= 0) {
		fprintf(stderr, "ftvm-raw-client: bad reply frame\n");
		exit(1);
	}
	return ftvm__client__client_reply__unpack(NULL, payload_len, payload);
}

/* "kept" when the kernel refused the change and the size stayed. */
static int try_resize(int pool, const char *what, int r, off_t size)
{
	struct stat st;
	int e = errno;

	if (fstat(pool, &st) < 0)
		return 1;
	printf("%s: %s, size %lld\n", what, r < 0 && st.st_size == size ? "kept" : "CHANGED",
	       (long long)st.st_size);
	if (r < 0)
		printf("  (%s)\n", strerror(e));
	return r < 0 && st.st_size == size ? 0 : 1;
}

static int do_truncate(int fd)
{
	Ftvm__Client__MapRequest map = FTVM__CLIENT__MAP_REQUEST__INIT;
	Ftvm__Client__ClientRequest req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	Ftvm__Client__ClientReply *reply;
	size_t len;
	uint8_t *frame;
	struct stat st;
	int pool, changed = 0;

	req.id = 1;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_MAP;
	req.map = &map;
	frame = frame_of(&req, &len);
	if (send(fd, frame, len, MSG_NOSIGNAL) != (ssize_t)len) {
		fprintf(stderr, "ftvm-raw-client: cannot send: %s\n", strerror(errno));
		return 3;
	}
	free(frame);
	reply = read_reply(fd, &pool);
	if (!reply || reply->status != FTVM__PARTNER__STATUS__STATUS_OK || pool < 0) {
		printf("refused: %s\n", reply && reply->reason[0] ? reply->reason : "no memfd");
		if (reply)
			ftvm__client__client_reply__free_unpacked(reply, NULL);
		return 1;
	}
	ftvm__client__client_reply__free_unpacked(reply, NULL);
	if (fstat(pool, &st) < 0)
		return 1;
	printf("memfd of %lld bytes\n", (long long)st.st_size);
	changed |= try_resize(pool, "ftruncate to 0", ftruncate(pool, 0), st.st_size);
	changed |=
		try_resize(pool, "ftruncate larger", ftruncate(pool, st.st_size * 2), st.st_size);
	changed |= try_resize(pool, "fallocate past the end",
			      fallocate(pool, 0, st.st_size, 1 << 20), st.st_size);
	return changed ? 4 : 0;
}

static int do_flood(int fd, const char *guid, uint64_t page, unsigned long count)
{
	Ftvm__Client__ReadPageRequest rp = FTVM__CLIENT__READ_PAGE_REQUEST__INIT;
	Ftvm__Client__ClientRequest req = FTVM__CLIENT__CLIENT_REQUEST__INIT;
	char c;

	rp.guid = (char *)guid;
	rp.page = page;
	req.request_case = FTVM__CLIENT__CLIENT_REQUEST__REQUEST_READ_PAGE;
	req.read_page = &rp;
	for (unsigned long i = 0; i < count; i++) {
		size_t len;
		uint8_t *frame;
		ssize_t n;

		req.id = i + 1;
		frame = frame_of(&req, &len);
		n = send(fd, frame, len, MSG_NOSIGNAL);
		free(frame);
		if (n != (ssize_t)len) {
			printf("dropped after %lu\n", i);
			return 0;
		}
	}
	printf("sent %lu\n", count);
	fflush(stdout);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	return 0;
}

int main(int argc, char **argv)
{
	int fd;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc == 3 && strcmp(argv[2], "truncate") == 0) {
		fd = connect_to(argv[1]);
		return do_truncate(fd);
	}
	if (argc == 6 && strcmp(argv[2], "flood") == 0) {
		fd = connect_to(argv[1]);
		return do_flood(fd, argv[3], strtoull(argv[4], NULL, 10),
				strtoul(argv[5], NULL, 10));
	}
	fprintf(stderr, "usage: ftvm-raw-client SOCKET truncate\n"
			"       ftvm-raw-client SOCKET flood GUID PAGE COUNT\n");
	return 2;
}
