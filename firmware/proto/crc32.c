/* CRC-32 with a 16-entry (nibble) table: 64 bytes of flash, two lookups per byte. */
#include "crc32.h"

static const uint32_t pk_crc_nibble[16] = {
    0x00000000u,
    0x1DB71064u,
    0x3B6E20C8u,
    0x26D930ACu,
    0x76DC4190u,
    0x6B6B51F4u,
    0x4DB26158u,
    0x5005713Cu,
    0xEDB88320u,
    0xF00F9344u,
    0xD6D6A3E8u,
    0xCB61B38Cu,
    0x9B64C2B0u,
    0x86D3D2D4u,
    0xA00AE278u,
    0xBDBDF21Cu,
};

uint32_t pk_crc32(uint32_t crc, const void *data, uint32_t len)
{
    const uint8_t *p = (const uint8_t *)data;
    uint32_t c = crc ^ 0xFFFFFFFFu;
    for (uint32_t i = 0; i < len; i++)
    {
        c ^= p[i];
        c = (c >> 4) ^ pk_crc_nibble[c & 0xFu];
        c = (c >> 4) ^ pk_crc_nibble[c & 0xFu];
    }
    return c ^ 0xFFFFFFFFu;
}
