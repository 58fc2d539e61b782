/* A listening unix stream socket at a path, for the node's sockets (the
 * client API, NBD): made with the file's mode and group before anyone can
 * connect, replacing a stale socket file a dead process left, and removed
 * at the end only if it is still the file made. */
#pragma once

#include <sys/types.h>

struct unix_listen_id {
	dev_t dev;
	ino_t ino;
};

/* A nonblocking, close-on-exec socket listening at path with backlog; the
 * file gets group (unless (gid_t)-1) and mode. Returns the fd, or
 * -EADDRINUSE when a live process answers on path, -EEXIST when path is
 * something other than a socket, -ENAMETOOLONG, -errno. *ret_id names the
 * file made. */
int unix_listen(const char *path, mode_t mode, gid_t group, int backlog,
		struct unix_listen_id *ret_id);
/* Removes path if it is still the file id names (a successor may have
 * replaced it). */
void unix_listen_unlink(const char *path, const struct unix_listen_id *id);
