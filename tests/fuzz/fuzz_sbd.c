/* libFuzzer target: the fence slots and mailboxes in the shared store
 * (node/storage/sbd.c), through sbd_slot_decode() and sbd_mailbox_decode(), what
 * the fence thread runs on every sector it reads from the partner.
 *
 * The input's first byte chooses how the rest is read: with bit 0 set the
 * checksum is made right before decoding, as a writer would, so the fuzzer
 * gets past it; the rest, cut or padded with zeroes to a sector, is the
 * sector. Nothing may crash or read past the sector. A sector that decodes
 * has a NUL-terminated node name (and a slot a known state) and encodes back
 * to a sector that decodes to the same fields; one that does not is
 * -ENOENT (all zeroes) or -EBADMSG. */
#include <endian.h>
#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "crc32c.h"
#include "sbd.h"
#include "store.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint8_t sector[STORE_SECTOR], again[STORE_SECTOR];

static void check_error(int r)
{
	if (r != -ENOENT && r != -EBADMSG)
		abort();
}

static void check_slot(void)
{
	struct sbd_slot s, s2;
	int r = sbd_slot_decode(sector, &s);

	if (r < 0) {
		check_error(r);
		return;
	}
	if (!memchr(s.node, '\0', sizeof(s.node)) || s.state > SBD_STATE_STOPPED ||
	    strcmp(sbd_state_name(s.state), "invalid") == 0)
		abort();
	sbd_slot_encode(&s, again);
	if (sbd_slot_decode(again, &s2) != 0 || strcmp(s.node, s2.node) != 0 ||
	    s.state != s2.state || s.epoch != s2.epoch || s.counter != s2.counter)
		abort();
}

static void check_mailbox(void)
{
	struct sbd_mailbox m, m2;
	int r = sbd_mailbox_decode(sector, &m);

	if (r < 0) {
		check_error(r);
		return;
	}
	if (!memchr(m.from, '\0', sizeof(m.from)))
		abort();
	sbd_mailbox_encode(&m, again);
	if (sbd_mailbox_decode(again, &m2) != 0 || strcmp(m.from, m2.from) != 0 ||
	    m.epoch != m2.epoch || m.counter != m2.counter)
		abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	if (size < 1)
		return 0;
	memset(sector, 0, sizeof(sector));
	memcpy(sector, data + 1, size - 1 < STORE_SECTOR ? size - 1 : STORE_SECTOR);
	if (data[0] & 1) {
		uint32_t crc = htole32(crc32c(0, sector, SBD_CRC_OFFSET));

		memcpy(sector + SBD_CRC_OFFSET, &crc, sizeof(crc));
	}
	check_slot();
	check_mailbox();
	return 0;
}
