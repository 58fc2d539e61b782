/* crc32c(): known vectors, incremental use, and agreement with an independent
 * bitwise reference over many lengths and alignments.
 *
 * crc32c.c picks ISA-L for long buffers and, for short ones, the SSE 4.2 path
 * or the table path at run time, all static, so crc32c() alone exercises
 * each only for the lengths it gives it on a given CPU. To check every path
 * at every length, this file also compiles crc32c.c a second time with its
 * one exported name changed, which puts the static paths in reach. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "check.h"
#include "crc32c.h"

uint32_t crc32c_under_test(uint32_t crc, const void *buf, size_t len);
#define crc32c crc32c_under_test
#include "../../common/crc32c.c"
#undef crc32c

/* One bit at a time, straight from the definition (reflected Castagnoli
 * polynomial): shares no code and no table with crc32c.c. */
static uint32_t crc32c_bitwise(uint32_t crc, const uint8_t *p, size_t len)
{
	crc = ~crc;
	while (len--) {
		crc ^= *p++;
		for (int k = 0; k < 8; k++)
			crc = (crc >> 1) ^ (0x82f63b78u & (0u - (crc & 1)));
	}
	return ~crc;
}

static void test_vectors(void)
{
	static const char check[] = "123456789";
	uint8_t zeros[32], ones[32];

	memset(zeros, 0, sizeof(zeros));
	memset(ones, 0xff, sizeof(ones));

	CHECK_HEX32("crc32c(\"123456789\")", 0xe3069283u, crc32c(0, check, 9));
	CHECK_HEX32("crc32c(32 x 0x00)", 0x8a9136aau, crc32c(0, zeros, sizeof(zeros)));
	CHECK_HEX32("crc32c(32 x 0xff)", 0x62a8ab43u, crc32c(0, ones, sizeof(ones)));
	CHECK_HEX32("crc32c(empty)", 0u, crc32c(0, "", 0));
	/* An empty buffer leaves a running checksum alone. */
	CHECK_HEX32("crc32c(c, empty)", 0xe3069283u, crc32c(0xe3069283u, "", 0));
	/* The reference agrees with the published vectors too, or it proves nothing. */
	CHECK_HEX32("reference(\"123456789\")", 0xe3069283u,
		    crc32c_bitwise(0, (const uint8_t *)check, 9));
	CHECK_HEX32("reference(32 x 0x00)", 0x8a9136aau, crc32c_bitwise(0, zeros, sizeof(zeros)));
	CHECK_HEX32("reference(32 x 0xff)", 0x62a8ab43u, crc32c_bitwise(0, ones, sizeof(ones)));
}

static void test_incremental(void)
{
	uint8_t buf[300];
	uint32_t whole;

	for (size_t i = 0; i < sizeof(buf); i++)
		buf[i] = (uint8_t)rng();
	whole = crc32c(0, buf, sizeof(buf));

	for (size_t cut = 0; cut <= sizeof(buf); cut++) {
		uint32_t c = crc32c(crc32c(0, buf, cut), buf + cut, sizeof(buf) - cut);
		char what[64];

		snprintf(what, sizeof(what), "split at %zu of %zu", cut, sizeof(buf));
		CHECK_HEX32(what, whole, c);
	}

	/* Three pieces, odd sizes, so the 8-byte loop and the byte tail both run
	 * on a running value. */
	for (size_t a = 0; a <= 40; a++) {
		for (size_t b = a; b <= 80; b += 3) {
			uint32_t c = crc32c(0, buf, a);
			char what[64];

			c = crc32c(c, buf + a, b - a);
			c = crc32c(c, buf + b, sizeof(buf) - b);
			snprintf(what, sizeof(what), "split at %zu and %zu", a, b);
			CHECK_HEX32(what, whole, c);
		}
	}
}

static void test_reference(void)
{
	/* Room for a 300-byte buffer at any of 16 offsets. */
	static uint8_t storage[300 + 16 + 8] __attribute__((aligned(16)));

	for (int round = 0; round < 8; round++) {
		for (size_t i = 0; i < sizeof(storage); i++)
			storage[i] = (uint8_t)rng();
		for (size_t align = 0; align < 16; align++) {
			for (size_t len = 0; len <= 300; len++) {
				const uint8_t *p = storage + align;
				uint32_t seed = round & 1 ? rng() : 0;
				uint32_t e = crc32c_bitwise(seed, p, len);
				uint32_t g = crc32c(seed, p, len);

				if (e != g) {
					fprintf(stderr,
						"FAIL reference: round %d, offset %zu, length %zu, "
						"seed 0x%08x: expected 0x%08x, got 0x%08x\n",
						round, align, len, seed, e, g);
					failures++;
				}
			}
		}
	}
}

/* The paths take and return the inverted running value, as crc32c() passes it. */
static uint32_t via_table(uint32_t crc, const uint8_t *p, size_t len)
{
	return ~crc32c_table(~crc, p, len);
}

static uint32_t via_isal(uint32_t crc, const uint8_t *p, size_t len)
{
	return ~crc32c_isal(~crc, p, len);
}

#if defined(__x86_64__)
static uint32_t via_sse42(uint32_t crc, const uint8_t *p, size_t len)
{
	return ~crc32c_sse42(~crc, p, len);
}
#endif

static const struct {
	const char *name;
	uint32_t (*fn)(uint32_t, const uint8_t *, size_t);
} paths[] = {
	{ "table", via_table },
	{ "isa-l", via_isal },
#if defined(__x86_64__)
	{ "sse4.2", via_sse42 }, /* last: left out where the CPU lacks it */
#endif
};
static size_t n_paths = sizeof(paths) / sizeof(paths[0]);

/* Every path against the reference on one buffer; says where it differs. */
static void check_paths(const uint8_t *p, size_t len, uint32_t seed, size_t offset)
{
	uint32_t e = crc32c_bitwise(seed, p, len);

	for (size_t k = 0; k < n_paths; k++) {
		uint32_t g = paths[k].fn(seed, p, len);

		checks++;
		if (e != g) {
			fprintf(stderr,
				"FAIL %s path: offset %zu, length %zu, seed 0x%08x: "
				"expected 0x%08x, got 0x%08x\n",
				paths[k].name, offset, len, seed, e, g);
			failures++;
		}
	}
}

/* Leaves out the paths this CPU cannot run. */
static void paths_init(void)
{
#if defined(__x86_64__)
	if (!__builtin_cpu_supports("sse4.2")) {
		printf("crc32c: this CPU lacks SSE 4.2, checking the table path only\n");
		n_paths--;
	}
#endif
}

static void test_paths(void)
{
	static uint8_t storage[300 + 16 + 8] __attribute__((aligned(16)));

	CHECK_HEX32("table(\"123456789\")", 0xe3069283u,
		    via_table(0, (const uint8_t *)"123456789", 9));
	for (size_t i = 0; i < sizeof(storage); i++)
		storage[i] = (uint8_t)rng();
	for (size_t align = 0; align < 16; align++)
		for (size_t len = 0; len <= 300; len++)
			check_paths(storage + align, len, len & 1 ? rng() : 0, align);
	/* And the copy compiled here is the same code the library runs. */
	CHECK_HEX32("library vs included copy", crc32c_under_test(0, storage, 300),
		    crc32c(0, storage, 300));
}

/* Every length to past a page frame's, from unaligned starts: across the
 * threshold between the paths, and every way ISA-L's folding of 64 bytes a
 * step leaves a tail. */
static void test_lengths(void)
{
	enum {
		MAX_LEN = 4200
	};
	static uint8_t storage[MAX_LEN + 16] __attribute__((aligned(16)));

	for (size_t i = 0; i < sizeof(storage); i++)
		storage[i] = (uint8_t)rng();
	for (size_t len = 0; len <= MAX_LEN; len++)
		check_paths(storage + len % 16, len, len & 1 ? rng() : 0, len % 16);
}

/* Long buffers: many of ISA-L's steps, then what is left. */
static void test_long(void)
{
	static const size_t lens[] = { (64u << 10) + 1, (64u << 10) + 13, (192u << 10) + 5,
				       (1u << 20) + 3 };
	static const size_t offsets[] = { 0, 1, 5 };
	uint8_t *storage = xmalloc((1u << 20) + 16);

	for (size_t i = 0; i < (1u << 20) + 16; i++)
		storage[i] = (uint8_t)rng();
	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
		for (size_t k = 0; k < sizeof(offsets) / sizeof(offsets[0]); k++)
			check_paths(storage + offsets[k], lens[i], k ? rng() : 0, offsets[k]);
	free(storage);
}

int main(void)
{
	rng_seed(0x2545f491u);
	paths_init();
	test_vectors();
	test_paths();
	test_lengths();
	test_long();
	test_incremental();
	test_reference();
	if (failures) {
		fprintf(stderr, "%d check(s) failed\n", failures);
		return 1;
	}
	printf("crc32c: all checks passed\n");
	return 0;
}
