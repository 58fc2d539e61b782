#define LOG_SUBSYSTEM "listen"

#include "unix_listen.h"

#include <errno.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "log.h"

/* Makes path free for bind(): nothing there, or a socket file nobody answers
 * on (left by a process that died), which is removed. */
static int claim_path(const struct sockaddr_un *sa)
{
	struct stat st;
	int fd, r;

	if (lstat(sa->sun_path, &st) < 0)
		return errno == ENOENT ? 0 : -errno;
	if (!S_ISSOCK(st.st_mode))
		return -EEXIST;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	r = connect(fd, (const struct sockaddr *)sa, sizeof(*sa)) < 0 ? -errno : 0;
	close(fd);
	if (r == 0 || r == -EAGAIN)
		return -EADDRINUSE; /* someone answers, or their backlog is full */
	if (r != -ECONNREFUSED)
		return r;
	if (unlink(sa->sun_path) < 0 && errno != ENOENT)
		return -errno;
	log_debug("removed stale socket %s", sa->sun_path);
	return 0;
}

int unix_listen(const char *path, mode_t mode, gid_t group, int backlog,
		struct unix_listen_id *ret_id)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct stat st;
	int fd, r;

	if (path[0] == '\0' || strlen(path) >= sizeof(sa.sun_path))
		return -ENAMETOOLONG;
	strcpy(sa.sun_path, path);
	r = claim_path(&sa);
	if (r < 0)
		return r;
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	/* Before listen(): nobody can connect yet, so nobody slips in under the
	 * umask's mode. */
	if ((group != (gid_t)-1 && chown(path, (uid_t)-1, group) < 0) || chmod(path, mode) < 0 ||
	    lstat(path, &st) < 0 || listen(fd, backlog) < 0) {
		r = -errno;
		unlink(path);
		close(fd);
		return r;
	}
	ret_id->dev = st.st_dev;
	ret_id->ino = st.st_ino;
	return fd;
}

void unix_listen_unlink(const char *path, const struct unix_listen_id *id)
{
	struct stat st;

	if (lstat(path, &st) == 0 && st.st_dev == id->dev && st.st_ino == id->ino)
		unlink(path);
}
