/*
 * pockmcu_mse_grad_f32 - mean squared error of a float32 output and its
 * gradient:
 *   d_k = y[k] - target[k];  grad[k] = (2.0f * d_k) / (float)n
 *   returns (sum over k ascending, from +0, of d_k * d_k) / (float)n
 * n <= 0 returns 0. grad may alias y.
 */
#include "pockmcu_nn.h"

float pockmcu_mse_grad_f32(const float *y, int32_t n, const float *target, float *grad)
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
        const float d = y[k] - target[k];
        grad[k] = (2.0f * d) / count;
        sum += d * d;
    }
    return sum / count;
}
