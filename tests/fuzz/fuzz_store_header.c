/* libFuzzer target: the header at the start of the shared store
 * (node/storage/store.c), through store_header_decode(), the checks and the
 * partition claim store_open() runs on the bytes it reads from disk.
 *
 * The input's first byte chooses how the rest is read (so that one corpus
 * holds both the checksum's refusals and what lies behind the checksum):
 *   bit 0  the checksum is made right before decoding, as a writer would;
 *   bit 1  the node asking is "b" (else "a");
 *   bit 2  its page size is the header's own (else 4096).
 * The rest, cut or padded with zeroes to STORE_HEADER_SIZE, is the header.
 *
 * Nothing may crash or read past the header. A refused header gets one of
 * store_open()'s errors and a message naming the store. An accepted one
 * gives the node a partition that lies inside the store, after the
 * header's space and apart from the other node's; a claim leaves a header
 * that decodes to the same partition with nothing more to claim. */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "store.h"

#define NAME "fuzz.store"
#define SIZE_OFFSET 32u	     /* the store's size in the header, little-endian */
#define PAGE_SIZE_OFFSET 12u /* and its page size */
#define PARTITION_OFFSET 40u /* the two partitions: node, pad, start, length */
#define PARTITION_SIZE 56u
#define PARTITION_START 40u /* in a partition */

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t le64_at(const uint8_t *hdr, size_t off)
{
	uint64_t v;

	memcpy(&v, hdr + off, sizeof(v));
	return le64toh(v);
}

/* The node's partition lies inside the store and clear of the other's. */
static void check_layout(const uint8_t *hdr, const struct store_partition *p)
{
	const uint8_t *other = hdr + PARTITION_OFFSET + (1 - p->index) * PARTITION_SIZE;
	uint64_t o_start = le64_at(other, PARTITION_START),
		 o_len = le64_at(other, PARTITION_START + 8);
	uint64_t size = le64_at(hdr, SIZE_OFFSET);

	if (p->index > 1 || p->start < STORE_HEADER_SPACE || p->length > size ||
	    p->start > size - p->length)
		abort();
	if (p->start < o_start + o_len && o_start < p->start + p->length)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_Alignas(8) uint8_t hdr[STORE_HEADER_SIZE] = { 0 };
	struct store_partition part, again;
	const char *node;
	uint32_t page_size = 4096, crc;
	bool changed = false, changed_again = false;
	char err[512];
	int r;

	if (size < 1)
		return 0;
	memcpy(hdr, data + 1, size - 1 < STORE_HEADER_SIZE ? size - 1 : STORE_HEADER_SIZE);
	if (data[0] & 1) {
		crc = htole32(crc32c(0, hdr, STORE_HEADER_CRC_OFFSET));
		memcpy(hdr + STORE_HEADER_CRC_OFFSET, &crc, sizeof(crc));
	}
	node = data[0] & 2 ? "b" : "a";
	if (data[0] & 4) {
		memcpy(&page_size, hdr + PAGE_SIZE_OFFSET, sizeof(page_size));
		page_size = le32toh(page_size);
	}

	err[0] = '\0';
	r = store_header_decode(hdr, NAME, page_size, node, &part, &changed, err, sizeof(err));
	if (r < 0) {
		if ((r != -EBADMSG && r != -EPROTONOSUPPORT && r != -EINVAL && r != -EPERM) ||
		    strncmp(err, NAME, strlen(NAME)) != 0)
			abort();
		return 0;
	}
	check_layout(hdr, &part);
	r = store_header_decode(hdr, NAME, page_size, node, &again, &changed_again, err,
				sizeof(err));
	if (r < 0 || changed_again || again.index != part.index || again.start != part.start ||
	    again.length != part.length)
		abort();
	return 0;
}
