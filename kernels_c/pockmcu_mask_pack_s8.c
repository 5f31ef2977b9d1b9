/*
 * pockmcu_mask_pack_s8 - 1-bit activation mask for ReLU / ReLU6 backward.
 *
 * Bit k (byte k / 8, bit k % 8, LSB first) of mask is 1 iff lo < x[k] < hi
 * (x: the saved int8 activation output; lo = act_min, hi = act_max, or 128
 * for no upper clamp). All pockmcu_mask_bytes(n) bytes are written; the
 * unused high bits of the last byte are 0.
 */
#include "pockmcu_nn.h"

void pockmcu_mask_pack_s8(const int8_t *x, int32_t n, int32_t lo, int32_t hi, uint8_t *mask)
{
    int32_t k0, t;
    for (k0 = 0; k0 < n; k0 += 8)
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
