/* CRC-32C (Castagnoli), as iSCSI, ext4 and RDMA's iWARP use it. */
#pragma once

#include <stddef.h>
#include <stdint.h>

/* Continues a running checksum: crc32c(crc32c(0, a), b) == crc32c(0, a ++ b). */
uint32_t crc32c(uint32_t crc, const void *buf, size_t len);
