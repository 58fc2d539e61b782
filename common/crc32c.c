/* Debian 12 packages no C library for CRC-32C, so this is the classic table
 * form, with the SSE 4.2 instruction where the CPU has it (pages are hashed on
 * every write, so the fast path matters).
 *
 * The crc32 instruction takes 3 cycles but the CPU starts one every cycle, so
 * a single chain of them over a buffer runs at a third of the speed it could.
 * Long buffers are therefore cut into rounds of three equal blocks A B C of n
 * bytes, each checksummed as a chain of its own, B and C from a zero register,
 * and the three registers are joined. The register is linear in its start
 * value and in the data, so with reg(r, D) the register after data D from r:
 *
 *   reg(r, A B C) = zeros(zeros(reg(r, A)) ^ reg(0, B)) ^ reg(0, C)
 *
 * where zeros(r) = reg(r, n zero bytes) = r * x^(8n) mod P. zeros is linear in
 * r too: it is the xor of the images of r's set bits, which four tables, one
 * per byte of r, give in four lookups. Each block size has its tables, built
 * once by running each of the 32 single-bit registers through n zero bytes. */
#include "crc32c.h"

#include <pthread.h>

#define CRC32C_POLY_REFLECTED 0x82f63b78u
/* Block sizes of the interleaved rounds, multiples of 8: long blocks so that
 * one round covers a 4 KiB page but its last 16 bytes; short ones for what a
 * long buffer leaves and for buffers from 3 x 64 bytes (a 192-byte round took
 * 22-24 ns here against 28-31 ns in one chain; shorter blocks were not tried). */
#define BLOCK_LONG 1360u
#define BLOCK_SHORT 64u

/* zeros() for one block size: byte[k][b] is the image of register b << 8k. */
struct zeros_table {
	uint32_t byte[4][256];
};

static uint32_t table[256];
static struct zeros_table zeros_long, zeros_short;
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

/* The register after n zero bytes, one byte at a time. */
static uint32_t zeros_slow(uint32_t reg, size_t n)
{
	while (n--)
		reg = table[reg & 0xff] ^ (reg >> 8);
	return reg;
}

static void zeros_table_init(struct zeros_table *z, size_t n)
{
	uint32_t bit_image[32];

	for (int i = 0; i < 32; i++)
		bit_image[i] = zeros_slow(1u << i, n);
	for (int k = 0; k < 4; k++) {
		for (uint32_t b = 0; b < 256; b++) {
			uint32_t image = 0;

			for (int i = 0; i < 8; i++)
				if (b & (1u << i))
					image ^= bit_image[8 * k + i];
			z->byte[k][b] = image;
		}
	}
}

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
		table[i] = c;
	}
	zeros_table_init(&zeros_long, BLOCK_LONG);
	zeros_table_init(&zeros_short, BLOCK_SHORT);
}

static uint32_t crc32c_table(uint32_t crc, const uint8_t *p, size_t len)
{
	pthread_once(&table_once, table_init);
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
static uint32_t zeros(const struct zeros_table *z, uint32_t reg)
{
	return z->byte[0][reg & 0xff] ^ z->byte[1][(reg >> 8) & 0xff] ^
	       z->byte[2][(reg >> 16) & 0xff] ^ z->byte[3][reg >> 24];
}

static uint64_t load64(const uint8_t *p)
{
	uint64_t v;

	__builtin_memcpy(&v, p, 8);
	return v;
}

/* Rounds of three blocks of n bytes, as the top of this file says, while
 * the buffer holds one; moves *p and *len past them. */
__attribute__((target("sse4.2"))) static uint32_t
sse42_rounds(uint32_t crc, const uint8_t **p, size_t *len, size_t n, const struct zeros_table *z)
{
	for (; *len >= 3 * n; *p += 3 * n, *len -= 3 * n) {
		const uint8_t *a = *p, *b = a + n, *c = b + n;
		uint64_t ra = crc, rb = 0, rc = 0;

		for (size_t i = 0; i < n; i += 8) {
			ra = __builtin_ia32_crc32di(ra, load64(a + i));
			rb = __builtin_ia32_crc32di(rb, load64(b + i));
			rc = __builtin_ia32_crc32di(rc, load64(c + i));
		}
		crc = zeros(z, zeros(z, (uint32_t)ra) ^ (uint32_t)rb) ^ (uint32_t)rc;
	}
	return crc;
}

/* One chain: 8 bytes a step, then the tail a byte at a time. */
__attribute__((target("sse4.2"))) static uint32_t sse42_serial(uint32_t crc, const uint8_t *p,
							       size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		c = __builtin_ia32_crc32di(c, load64(p));
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
}

/* Kept out of line so that short buffers do not pay for its frame. */
__attribute__((target("sse4.2"), noinline)) static uint32_t
sse42_interleaved(uint32_t crc, const uint8_t *p, size_t len)
{
	pthread_once(&table_once, table_init);
	crc = sse42_rounds(crc, &p, &len, BLOCK_LONG, &zeros_long);
	crc = sse42_rounds(crc, &p, &len, BLOCK_SHORT, &zeros_short);
	return sse42_serial(crc, p, len);
}

__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
							       size_t len)
{
	if (len >= 3 * BLOCK_SHORT)
		return sse42_interleaved(crc, p, len);
	return sse42_serial(crc, p, len);
}
#endif

uint32_t crc32c(uint32_t crc, const void *buf, size_t len)
{
	crc = ~crc;
#if defined(__x86_64__)
	if (__builtin_cpu_supports("sse4.2"))
		return ~crc32c_sse42(crc, buf, len);
#endif
	return ~crc32c_table(crc, buf, len);
}
