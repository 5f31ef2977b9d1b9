/*
 * pockmcu_mse_grad_s8 - mean squared error of an int8 output and its gradient.
 *
 *   d_k = scale * (float)(y[k] - zero_point) - target[k]
 *   grad[k] = (2.0f * d_k) / (float)n
 *   returns (sum over k ascending, from +0, of d_k * d_k) / (float)n
 * (gradient w.r.t. the real output). n <= 0 returns 0.
 */
#include "pockmcu_nn.h"

float pockmcu_mse_grad_s8(const int8_t *y, int32_t n, float scale, int32_t zero_point, const float *target, float *grad)
{
    float sum = 0.0f;
    float count;
    int32_t k;
    if (n <= 0)
    {
        return 0.0f;
    }
    count = (float)n;
    for (k = 0; k < n; k++)
    {
        const float d = scale * (float)((int32_t)y[k] - zero_point) - target[k];
        grad[k] = (2.0f * d) / count;
        sum += d * d;
    }
    return sum / count;
}
