/*
 * CRC-32 (IEEE 802.3, reflected, polynomial 0xEDB88320, init and final XOR
 * 0xFFFFFFFF): the same value as zlib's crc32() / Python's zlib.crc32().
 * crc = pk_crc32(0, data, n); continue with pk_crc32(crc, more, m).
 */
#ifndef POCKMCU_PROTO_CRC32_H
#define POCKMCU_PROTO_CRC32_H

#include <stdint.h>

uint32_t pk_crc32(uint32_t crc, const void *data, uint32_t len);

#endif
