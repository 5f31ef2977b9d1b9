/*
 * pockmcu_mask_apply_f32 - apply a 1-bit mask (pockmcu_mask_pack_s8 layout)
 * to a float32 gradient in place: grad[k] = 0.0f where bit k is 0, unchanged
 * where it is 1.
 *
 * Eight elements per mask byte: a byte of ones leaves its eight elements
 * alone, a zero byte clears them with no test each (stores of +0.0f, the
 * value a cleared element gets either way).
 */
#include "pockmcu_nn.h"

void pockmcu_mask_apply_f32(float *grad, const uint8_t *mask, int32_t n)
{
    int32_t k = 0;
    for (; k + 8 <= n; k += 8)
    {
        const uint32_t m = mask[k >> 3];
        float *g = grad + k;
        if (m == 0xFFu)
        {
            continue;
        }
        if (m == 0u)
        {
            g[0] = 0.0f;
            g[1] = 0.0f;
            g[2] = 0.0f;
            g[3] = 0.0f;
            g[4] = 0.0f;
            g[5] = 0.0f;
            g[6] = 0.0f;
            g[7] = 0.0f;
            continue;
        }
        if ((m & 1u) == 0u)
        {
            g[0] = 0.0f;
        }
        if ((m & 2u) == 0u)
        {
            g[1] = 0.0f;
        }
        if ((m & 4u) == 0u)
        {
            g[2] = 0.0f;
        }
        if ((m & 8u) == 0u)
        {
            g[3] = 0.0f;
        }
        if ((m & 16u) == 0u)
        {
            g[4] = 0.0f;
        }
        if ((m & 32u) == 0u)
        {
            g[5] = 0.0f;
        }
        if ((m & 64u) == 0u)
        {
            g[6] = 0.0f;
        }
        if ((m & 128u) == 0u)
        {
            g[7] = 0.0f;
        }
    }
    for (; k < n; k++)
    {
        if (((mask[k >> 3] >> (k & 7)) & 1u) == 0u)
        {
            grad[k] = 0.0f;
        }
    }
}
