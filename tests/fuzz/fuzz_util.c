/* fuzz_util.h. Everything here aborts on a failure of the machine (no /tmp,
 * a full disk): that is no finding about the parser, but carrying on would
 * make the target say something false about it. */
#define _GNU_SOURCE /* asprintf */
#include "fuzz_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
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

/* How many entries the scratch directory holds at its top. */
static size_t tmp_count(void)
{
	DIR *d = opendir(tmp_dir);
	struct dirent *de;
	size_t n = 0;

	if (!d)
		abort();
	while ((de = readdir(d)))
		if (strcmp(de->d_name, ".") != 0 && strcmp(de->d_name, "..") != 0)
			n++;
	closedir(d);
	return n;
}

static int remove_entry(const char *path, const struct stat *st, int type, struct FTW *ftw)
{
	remove(path);
	return 0;
}

/* Depth first, so a target's subdirectories (a node's state_dir) go too. */
static void tmp_remove(void)
{
	nftw(tmp_dir, remove_entry, 16, FTW_DEPTH | FTW_PHYS);
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
	return tmp_count();
}
