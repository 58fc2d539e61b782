/* libFuzzer target: the header at the start of the shared store or a flash
 * device (node/storage/store_layout.c), through store_layout_decode() and
 * the partition claim that store_open() runs on the bytes it reads.
 *
 * The input's first byte chooses how the rest is read (so that one corpus
 * holds both the checksum's refusals and what lies behind the checksum):
 *   bit 0  the checksum is made right before decoding, as a writer would
 *          (in version 1's place or version 2's, as the version field says);
 *   bit 1  the node asking is "b" (else "a").
 * The rest, cut or padded with zeroes to STORE_HEADER_SECTOR, is the header.
 *
 * Nothing may crash or read past the header. A refused header gets one of
 * the decoder's errors and a message naming the store. An accepted one
 * passes the rules again by this file's own reading: every partition inside
 * the device after the header's space, none overlapping. A claim gives the
 * node a writable partition named for it; the claimed layout, written and
 * read again, is the same and gives the same partition with nothing more to
 * claim. */
#include <endian.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "store_layout.h"

#define NAME "fuzz.store"
#define VERSION_OFFSET 8u
/* Where each version keeps its checksum, of the bytes before it. */
#define CRC_OFFSET_V1 152u
#define CRC_OFFSET_V2 1072u

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check_rules(const struct store_layout *l)
{
	for (unsigned i = 0; i < l->n; i++) {
		const struct store_layout_partition *p = &l->part[i];

		if (p->start < STORE_HEADER_SPACE || p->length > l->size ||
		    p->start > l->size - p->length)
			abort();
		for (unsigned j = 0; j < i; j++)
			if (p->start < l->part[j].start + l->part[j].length &&
			    l->part[j].start < p->start + p->length)
				abort();
	}
}

static bool same(const struct store_layout *x, const struct store_layout *y)
{
	if (x->version != y->version || x->kind != y->kind || x->page_size != y->page_size ||
	    x->size != y->size || x->n != y->n || memcmp(x->id, y->id, sizeof(x->id)) != 0)
		return false;
	for (unsigned i = 0; i < x->n; i++)
		if (strcmp(x->part[i].id, y->part[i].id) != 0 ||
		    x->part[i].start != y->part[i].start ||
		    x->part[i].length != y->part[i].length ||
		    x->part[i].access != y->part[i].access)
			return false;
	return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	_Alignas(8) uint8_t hdr[STORE_HEADER_SECTOR] = { 0 }, out[STORE_HEADER_SECTOR];
	struct store_layout l, again;
	const char *node;
	uint32_t version, crc;
	bool claimed = false, claimed_again = false;
	char err[512];
	int r, mine;

	if (size < 1)
		return 0;
	memcpy(hdr, data + 1, size - 1 < sizeof(hdr) ? size - 1 : sizeof(hdr));
	if (data[0] & 1) {
		size_t at;

		memcpy(&version, hdr + VERSION_OFFSET, sizeof(version));
		at = le32toh(version) == 1 ? CRC_OFFSET_V1 : CRC_OFFSET_V2;
		crc = htole32(crc32c(0, hdr, at));
		memcpy(hdr + at, &crc, sizeof(crc));
	}
	node = data[0] & 2 ? "b" : "a";

	err[0] = '\0';
	r = store_layout_decode(hdr, sizeof(hdr), NAME, &l, err, sizeof(err));
	if (r < 0) {
		if ((r != -EBADMSG && r != -EPROTONOSUPPORT) ||
		    strncmp(err, NAME, strlen(NAME)) != 0)
			abort();
		return 0;
	}
	check_rules(&l);
	mine = store_layout_claim(&l, NAME, node, &claimed, err, sizeof(err));
	if (mine < 0) {
		if (mine != -EPERM || strncmp(err, NAME, strlen(NAME)) != 0)
			abort();
		return 0;
	}
	if ((unsigned)mine >= l.n || l.part[mine].access != STORE_ACCESS_RW ||
	    strcmp(l.part[mine].id, node) != 0)
		abort();
	store_layout_encode(&l, out);
	if (store_layout_decode(out, sizeof(out), NAME, &again, err, sizeof(err)) < 0 ||
	    !same(&l, &again))
		abort();
	if (store_layout_claim(&again, NAME, node, &claimed_again, err, sizeof(err)) != mine ||
	    claimed_again)
		abort();
	return 0;
}
