/*
 * pockmcu_mask_apply_f32 - apply a 1-bit mask (pockmcu_mask_pack_s8 layout)
 * to a float32 gradient in place: grad[k] = 0.0f where bit k is 0, unchanged
 * where it is 1.
 */
#include "pockmcu_nn.h"

void pockmcu_mask_apply_f32(float *grad, const uint8_t *mask, int32_t n)
{
    int32_t k;
    for (k = 0; k < n; k++)
    {
        if (((mask[k >> 3] >> (k & 7)) & 1u) == 0u)
        {
            grad[k] = 0.0f;
        }
    }
}
