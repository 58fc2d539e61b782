/* main() for builds without libFuzzer (systemd's fuzz-main.c idea): every
 * file in the directories and every file named on the command line runs once
 * through LLVMFuzzerTestOneInput, so each target's corpus is a regression
 * test on every `meson test`. A crash or abort fails the test; a path that
 * cannot be read is an error too, so a moved corpus is not a silent pass. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	size_t len = 0, cap = 0;
	int r = 0;

	if (!f) {
		r = -errno;
		fprintf(stderr, "%s: %s\n", path, strerror(-r));
		return r;
	}
	for (;;) {
		size_t n;

		if (len == cap) {
			uint8_t *p;

			cap = cap ? 2 * cap : 4096;
			p = realloc(buf, cap);
			if (!p) {
				fprintf(stderr, "%s: out of memory\n", path);
				r = -ENOMEM;
				goto out;
			}
			buf = p;
		}
		n = fread(buf + len, 1, cap - len, f);
		len += n;
		if (n == 0)
			break;
	}
	if (ferror(f)) {
		fprintf(stderr, "%s: read error\n", path);
		r = -EIO;
		goto out;
	}
	/* The input is exactly len bytes long, so ASan catches reads past it. */
	{
		uint8_t *exact = malloc(len ? len : 1);

		if (!exact) {
			r = -ENOMEM;
			goto out;
		}
		if (len)
			memcpy(exact, buf, len);
		LLVMFuzzerTestOneInput(exact, len);
		free(exact);
	}
out:
	free(buf);
	fclose(f);
	return r;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Runs the regular files of dir in name order; returns how many, or -errno. */
static int run_dir(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char **names = NULL;
	size_t n = 0, cap = 0;
	int r = 0, ran = 0;

	if (!d) {
		r = -errno;
		fprintf(stderr, "%s: %s\n", dir, strerror(-r));
		return r;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		if (n == cap) {
			char **p;

			cap = cap ? 2 * cap : 64;
			p = realloc(names, cap * sizeof(*names));
			if (!p) {
				r = -ENOMEM;
				goto out;
			}
			names = p;
		}
		names[n] = malloc(strlen(dir) + strlen(de->d_name) + 2);
		if (!names[n]) {
			r = -ENOMEM;
			goto out;
		}
		sprintf(names[n], "%s/%s", dir, de->d_name);
		n++;
	}
	if (n)
		qsort(names, n, sizeof(*names), compare_names);
	for (size_t i = 0; i < n; i++) {
		struct stat st;

		if (stat(names[i], &st) < 0 || !S_ISREG(st.st_mode))
			continue;
		r = run_file(names[i]);
		if (r < 0)
			goto out;
		ran++;
	}
	r = ran;
out:
	for (size_t i = 0; i < n; i++)
		free(names[i]);
	free(names);
	closedir(d);
	return r;
}

int main(int argc, char **argv)
{
	int total = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s CORPUS_DIR|FILE...\n", argv[0]);
		return 1;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;
		int r;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		r = S_ISDIR(st.st_mode) ? run_dir(argv[i]) : run_file(argv[i]);
		if (r < 0)
			return 1;
		total += S_ISDIR(st.st_mode) ? r : 1;
	}
	printf("%d input(s) ran through %s\n", total, argv[0]);
	return 0;
}
