/* What the unit tests share: failure and check counters, the CHECK macros,
 * a seedable xorshift32 and the ways out on a setup error. Each test is one
 * translation unit that includes this once; it exits 0 when every check
 * passed, 1 when any failed and 99 (die, xmalloc) when it could not run. */
#ifndef FTVM_TESTS_UNIT_CHECK_H
#define FTVM_TESTS_UNIT_CHECK_H

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Checks that failed, and checks made by the CHECK macros (a test may count
 * more of its own). */
static int failures __attribute__((unused));
static int checks __attribute__((unused));

#define FAIL(...)                                                    \
	do {                                                         \
		fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                        \
		fputc('\n', stderr);                                 \
		failures++;                                          \
	} while (0)

/* Fails, naming the condition and then the message, unless cond holds. */
#define CHECK(cond, ...)                                                                \
	do {                                                                            \
		checks++;                                                               \
		if (!(cond)) {                                                          \
			failures++;                                                     \
			fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                   \
			fputc('\n', stderr);                                            \
		}                                                                       \
	} while (0)

#define CHECK_INT(what, expected, got)                                       \
	do {                                                                 \
		long long e_ = (long long)(expected), g_ = (long long)(got); \
		checks++;                                                    \
		if (e_ != g_)                                                \
			FAIL("%s: expected %lld, got %lld", (what), e_, g_); \
	} while (0)

#define CHECK_STR(what, expected, got)                                                           \
	do {                                                                                     \
		const char *e_ = (expected), *g_ = (got);                                        \
		checks++;                                                                        \
		if (!g_ || strcmp(e_, g_) != 0)                                                  \
			FAIL("%s: expected \"%s\", got \"%s\"", (what), e_, g_ ? g_ : "(null)"); \
	} while (0)

/* CHECK_INT for 32-bit values best read in hex, such as checksums. */
#define CHECK_HEX32(what, expected, got)                                                          \
	do {                                                                                      \
		uint32_t e_ = (expected), g_ = (got);                                             \
		checks++;                                                                         \
		if (e_ != g_) {                                                                   \
			fprintf(stderr, "FAIL %s:%d %s: expected 0x%08x, got 0x%08x\n", __FILE__, \
				__LINE__, (what), e_, g_);                                        \
			failures++;                                                               \
		}                                                                                 \
	} while (0)

/* xorshift32: a fixed sequence from a fixed seed, so a failure reproduces.
 * Seed it once, first thing, with a test's own nonzero seed. */
static uint32_t rng_state = 1;

static inline void rng_seed(uint32_t seed)
{
	rng_state = seed;
}

static inline uint32_t rng(void)
{
	uint32_t x = rng_state;

	x ^= x << 13;
	x ^= x >> 17;
	x ^= x << 5;
	return rng_state = x;
}

/* A setup step failed: what, and errno's reason. */
static inline __attribute__((noreturn)) void die(const char *what)
{
	fprintf(stderr, "ERROR %s: %s\n", what, strerror(errno));
	exit(99);
}

static inline void *xmalloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (!p) {
		fprintf(stderr, "out of memory\n");
		exit(99);
	}
	return p;
}

/* xmalloc, zeroed. */
static inline void *xcalloc(size_t n)
{
	return memset(xmalloc(n), 0, n);
}

/* A new directory $TMPDIR/NAME-XXXXXX (or under /tmp) into dir. */
static inline void scratch_dir_make(char *dir, size_t size, const char *name)
{
	const char *tmp = getenv("TMPDIR");

	snprintf(dir, size, "%s/%s-XXXXXX", tmp && *tmp ? tmp : "/tmp", name);
	if (!mkdtemp(dir))
		die("mkdtemp");
}

/* Removes dir and the files in it (no subdirectories). */
static inline void scratch_dir_remove(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	char path[4096];

	if (!d)
		return;
	while ((e = readdir(d))) {
		if (e->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
		unlink(path);
	}
	closedir(d);
	rmdir(dir);
}

#endif
