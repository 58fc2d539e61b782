#include "keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "reason.h"

int keyfile_load(const char *path, uint8_t buf[KEYFILE_MAX], size_t *ret_len, char *err,
		 size_t err_len)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
	struct stat st;
	ssize_t n;
	int r;

	if (fd < 0)
		return reason_fail(err, err_len, -errno, "cannot read %s: %s", path,
				   strerror(errno));
	if (fstat(fd, &st) < 0) {
		r = reason_fail(err, err_len, -errno, "cannot stat %s: %s", path, strerror(errno));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		r = reason_fail(err, err_len, -EINVAL, "%s is not a regular file", path);
		goto out;
	}
	if (st.st_mode & 077) {
		r = reason_fail(err, err_len, -EINVAL,
				"%s has mode %04o: group or others may read it, so it is no "
				"secret (chmod 600 %s)",
				path, (unsigned)(st.st_mode & 07777), path);
		goto out;
	}
	n = read(fd, buf, KEYFILE_MAX);
	if (n < 0) {
		r = reason_fail(err, err_len, -errno, "cannot read %s: %s", path, strerror(errno));
		goto out;
	}
	if (n == KEYFILE_MAX && st.st_size > KEYFILE_MAX) {
		r = reason_fail(err, err_len, -EINVAL, "%s has %lld bytes, more than a key (%u)",
				path, (long long)st.st_size, KEYFILE_MAX);
		goto wipe;
	}
	if ((size_t)n < KEYFILE_MIN) {
		r = reason_fail(err, err_len, -EINVAL,
				"%s has %zd bytes; a key needs at least %u (make one with "
				"`ftvmctl keygen %s`)",
				path, n, KEYFILE_MIN, path);
		goto wipe;
	}
	*ret_len = (size_t)n;
	r = 0;
	goto out;
wipe:
	explicit_bzero(buf, KEYFILE_MAX);
out:
	close(fd);
	return r;
}

int keyfile_generate(const char *path, char *err, size_t err_len)
{
	static const char hex[] = "0123456789abcdef";
	uint8_t random[KEYFILE_RANDOM_BYTES];
	char text[2 * KEYFILE_RANDOM_BYTES + 1];
	int fd, r = 0;

	if (getrandom(random, sizeof(random), 0) != (ssize_t)sizeof(random))
		return reason_fail(err, err_len, -EIO, "no random bytes from the kernel: %s",
				   strerror(errno));
	for (size_t i = 0; i < sizeof(random); i++) {
		text[2 * i] = hex[random[i] >> 4];
		text[2 * i + 1] = hex[random[i] & 15];
	}
	text[sizeof(text) - 1] = '\n';
	explicit_bzero(random, sizeof(random));
	fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
	if (fd < 0) {
		r = -errno;
		reason_fail(err, err_len, r, "cannot create %s: %s%s", path, strerror(-r),
			    r == -EEXIST ? " (a key is never overwritten: remove it first)" : "");
		goto out;
	}
	/* The umask cannot widen 0600, but fchmod makes it exact. */
	if (fchmod(fd, 0600) < 0 || write(fd, text, sizeof(text)) != (ssize_t)sizeof(text) ||
	    fsync(fd) < 0) {
		r = -(errno ? errno : EIO);
		reason_fail(err, err_len, r, "cannot write %s: %s", path, strerror(-r));
		unlink(path);
	}
	close(fd);
out:
	explicit_bzero(text, sizeof(text));
	return r;
}
