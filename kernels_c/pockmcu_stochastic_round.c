/*
 * pockmcu_stochastic_round - unbiased stochastic rounding of a float to int32.
 *
 * Draws exactly one number r = pockmcu_xorshift32(rng), u = (r >> 8) * 2^-24
 * (exact, in [0, 1)). x is clamped to [-2^30, 2^30] (a NaN is taken as 0),
 * then t = x + u is computed in float32 (round to nearest) and floor(t) is
 * returned. E[result] = x up to the float32 rounding of x + u.
 * floor() is done without libm: truncate, then step down if the truncation
 * went up (exact, since |t| <= 2^30 and a float >= 2^24 is an integer).
 */
#include "pockmcu_nn.h"

int32_t pockmcu_stochastic_round(float x, uint32_t *rng)
{
    const uint32_t r = pockmcu_xorshift32(rng);
    const float u = (float)(int32_t)(r >> 8) * 0x1p-24f;
    float t;
    int32_t i;

    if (x > 1073741824.0f)
    {
        x = 1073741824.0f;
    }
    else if (x < -1073741824.0f)
    {
        x = -1073741824.0f;
    }
    else if (x != x)
    {
        x = 0.0f;
    }
    t = x + u;
    i = (int32_t)t;
    if ((float)i > t)
    {
        i--;
    }
    return i;
}
