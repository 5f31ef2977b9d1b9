/*
 * pockmcu_add_f32 - elementwise float32 sum out[k] = a[k] + b[k] (gradient
 * fan-in); out may alias a or b.
 */
#include "pockmcu_nn.h"

void pockmcu_add_f32(const float *a, const float *b, float *out, int32_t n)
{
    int32_t k;
    for (k = 0; k < n; k++)
    {
        out[k] = a[k] + b[k];
    }
}
