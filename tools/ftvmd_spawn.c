/* ftvmd_spawn.h */
#define _GNU_SOURCE /* readlink of /proc/self/exe, setsid */
#include "ftvmd_spawn.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <unistd.h>

int ftvmd_find(const char *given, char *buf, size_t len)
{
	char self[PATH_MAX];
	ssize_t n;

	if (given) {
		snprintf(buf, len, "%s", given);
		return access(buf, X_OK) == 0 ? 0 : -errno;
	}
	n = readlink("/proc/self/exe", self, sizeof(self) - 1);
	if (n < 0)
		return -errno;
	self[n] = '\0';
	if (snprintf(buf, len, "%s/ftvmd", dirname(self)) >= (int)len)
		return -ENAMETOOLONG;
	if (access(buf, X_OK) == 0)
		return 0;
	if (snprintf(buf, len, "%s/../node/ftvmd", self) >= (int)len)
		return -ENAMETOOLONG;
	return access(buf, X_OK) == 0 ? 0 : -ENOENT;
}

int ftvmd_spawn(const char *ftvmd, const char *config_path, const char *log_path, pid_t *ret_pid)
{
	pid_t pid = fork();
	int fd;

	if (pid < 0)
		return -errno;
	if (pid == 0) {
		setsid();
		fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
		if (fd >= 0) {
			dup2(fd, STDOUT_FILENO);
			dup2(fd, STDERR_FILENO);
		}
		execl(ftvmd, "ftvmd", "--config", config_path, (char *)NULL);
		_exit(127);
	}
	if (ret_pid)
		*ret_pid = pid;
	return 0;
}
