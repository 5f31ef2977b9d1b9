#include "cobs.h"

void pk_cobs_emit(const uint8_t *src, uint32_t len, void (*put)(void *ctx, uint8_t b), void *ctx)
{
    uint32_t start = 0;
    for (;;)
    {
        /* one block: up to 254 non-zero bytes, ended by a zero, the 254 limit or the end */
        uint32_t n = 0;
        while (start + n < len && n < 254u && src[start + n] != 0u)
        {
            n++;
        }
        put(ctx, (uint8_t)(n + 1u));
        for (uint32_t i = 0; i < n; i++)
        {
            put(ctx, src[start + i]);
        }
        start += n;
        if (start >= len)
        {
            break; /* the implicit trailing zero is dropped */
        }
        if (n < 254u)
        {
            start++; /* this block ended at a zero: skip it */
            /* ... and it was the last byte: one more empty block */
            if (start == len)
            {
                put(ctx, 1u);
                break;
            }
        }
    }
}

int32_t pk_cobs_decode(const uint8_t *src, uint32_t len, uint8_t *dst)
{
    uint32_t in = 0, out = 0;
    while (in < len)
    {
        uint8_t code = src[in++];
        if (code == 0u)
        {
            return -1;
        }
        uint32_t n = (uint32_t)code - 1u;
        if (in + n > len)
        {
            return -1;
        }
        for (uint32_t i = 0; i < n; i++)
        {
            uint8_t b = src[in++];
            if (b == 0u)
            {
                return -1;
            }
            dst[out++] = b;
        }
        if (code != 0xFFu && in < len)
        {
            dst[out++] = 0u;
        }
    }
    return (int32_t)out;
}
