/*
 * pockmcu_mask_pack_s8 - 1-bit activation mask for ReLU / ReLU6 backward.
 *
 * Bit k (byte k / 8, bit k % 8, LSB first) of mask is 1 iff lo < x[k] < hi
 * (x: the saved int8 activation output; lo = act_min, hi = act_max, or 128
 * for no upper clamp). All pockmcu_mask_bytes(n) bytes are written; the
 * unused high bits of the last byte are 0.
 *
 * On a core with the DSP extension, 8 elements per step: SSUB8 sets a GE flag per byte where
 * x - (lo + 1) >= 0 and SEL keeps those bytes, a second SSUB8 / SEL keeps the bytes with
 * (hi - 1) - x >= 0, and the surviving 0xFF bytes are folded into 4 bits per word by a mask and a
 * multiply (the same bits as the loop, which runs for the tail and for bounds outside int8).
 */
#include "pockmcu_nn.h"

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
    #include <string.h>

/* 0xFF in each byte of x with lo1 <= x[i] <= hi1 (signed bytes), else 0x00 */
static inline __attribute__((always_inline)) uint32_t mask_bytes(uint32_t x, uint32_t lo1, uint32_t hi1)
{
    uint32_t t, m;
    __asm__("ssub8 %0, %2, %3\n\tsel %1, %4, %5\n\tssub8 %0, %6, %2\n\tsel %1, %1, %5"
            : "=&r"(t), "=&r"(m)
            : "r"(x), "r"(lo1), "r"(0xFFFFFFFFu), "r"(0u), "r"(hi1)
            : "cc");
    return m;
}
#endif

void pockmcu_mask_pack_s8(const int8_t *x, int32_t n, int32_t lo, int32_t hi, uint8_t *mask)
{
    int32_t k0 = 0, t;
#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP && defined(__GNUC__)
    if (lo >= -128 && lo <= 126 && hi >= -127 && hi <= 128)
    {
        const uint32_t lo1 = (uint32_t)(uint8_t)(int8_t)(lo + 1) * 0x01010101u;
        const uint32_t hi1 = (uint32_t)(uint8_t)(int8_t)(hi - 1) * 0x01010101u;
        for (; k0 + 8 <= n; k0 += 8)
        {
            uint32_t a, b;
            memcpy(&a, x + k0, 4);
            memcpy(&b, x + k0 + 4, 4);
            a = mask_bytes(a, lo1, hi1) & 0x08040201u;
            b = mask_bytes(b, lo1, hi1) & 0x80402010u;
            mask[k0 / 8] = (uint8_t)(((a | b) * 0x01010101u) >> 24);
        }
    }
#endif
    for (; k0 < n; k0 += 8)
    {
        const int32_t len = n - k0 < 8 ? n - k0 : 8;
        uint32_t byte = 0u;
        for (t = 0; t < len; t++)
        {
            const int32_t v = x[k0 + t];
            if (lo < v && v < hi)
            {
                byte |= 1u << t;
            }
        }
        mask[k0 / 8] = (uint8_t)byte;
    }
}
