/* fuzz_util.h. Everything here aborts on a failure of the machine (no /tmp,
 * a full disk): that is no finding about the parser, but carrying on would
 * make the target say something false about it. */
#define _GNU_SOURCE /* asprintf */
#include "fuzz_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char tmp_dir[] = "/tmp/ftvm-fuzz-XXXXXX";
static int tmp_made;

const uint8_t *fuzz_data(const uint8_t *data)
{
	return data ? data : (const uint8_t *)"";
}

/* Counts the scratch directory's entries, unlinking each when remove is set
 * (only files are made in it). */
static size_t tmp_walk(bool remove)
{
	DIR *d = opendir(tmp_dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		abort();
	while ((de = readdir(d))) {
		if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
			continue;
		if (remove)
			unlinkat(dirfd(d), de->d_name, 0);
		n++;
	}
	closedir(d);
	return n;
}

static void tmp_remove(void)
{
	tmp_walk(true);
	rmdir(tmp_dir);
}

char *fuzz_tmp_path(const char *name)
{
	char *path;

	if (!tmp_made) {
		if (!mkdtemp(tmp_dir)) {
			perror("fuzz: mkdtemp");
			abort();
		}
		tmp_made = 1;
		atexit(tmp_remove);
	}
	if (asprintf(&path, "%s/%s", tmp_dir, name) < 0)
		abort();
	return path;
}

void fuzz_write_file(const char *path, const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	size_t done = 0;

	if (fd < 0) {
		perror(path);
		abort();
	}
	while (done < size) {
		ssize_t n = write(fd, data + done, size - done);

		if (n <= 0) {
			perror(path);
			abort();
		}
		done += (size_t)n;
	}
	close(fd);
}

size_t fuzz_tmp_entries(void)
{
	return tmp_walk(false);
}
