/* Debian 12 packages no C library for CRC-32C, so this is the classic table
 * form, with the SSE 4.2 instruction where the CPU has it (pages are hashed on
 * every write, so the fast path matters). */
#include "crc32c.h"

#include <pthread.h>

#define CRC32C_POLY_REFLECTED 0x82f63b78u

static uint32_t table[256];
static pthread_once_t table_once = PTHREAD_ONCE_INIT;

static void table_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c & 1) ? (c >> 1) ^ CRC32C_POLY_REFLECTED : c >> 1;
		table[i] = c;
	}
}

static uint32_t crc32c_table(uint32_t crc, const uint8_t *p, size_t len)
{
	pthread_once(&table_once, table_init);
	while (len--)
		crc = table[(crc ^ *p++) & 0xff] ^ (crc >> 8);
	return crc;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p,
							       size_t len)
{
	uint64_t c = crc;

	while (len >= 8) {
		uint64_t v;
		__builtin_memcpy(&v, p, 8);
		c = __builtin_ia32_crc32di(c, v);
		p += 8;
		len -= 8;
	}
	crc = (uint32_t)c;
	while (len--)
		crc = __builtin_ia32_crc32qi(crc, *p++);
	return crc;
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
