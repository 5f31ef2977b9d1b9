/*
 * pockmcu_mean_grad_f32 - input gradient of MEAN over H and W.
 *
 * input_dims = {N, H, W, C}, grad_output [N][C]:
 *   grad_input[n,h,w,c] = grad_output[n][c] / (float)(H * W)
 * (one float32 division per (n, c); any contiguous reduction can be folded
 * into {outer, reduced, 1, inner} as for pockmcu_mean_s8).
 */
#include "pockmcu_nn.h"

void pockmcu_mean_grad_f32(const cmsis_nn_dims *input_dims, const float *grad_output, float *grad_input)
{
    const int32_t batches = input_dims->n;
    const int32_t hw = input_dims->h * input_dims->w;
    const int32_t ch = input_dims->c;
    const float count = (float)hw;
    int32_t b, p, c;

    for (b = 0; b < batches; b++)
    {
        const float *go = grad_output + b * ch;
        float *gi = grad_input + b * hw * ch;
        for (c = 0; c < ch; c++)
        {
            const float v = go[c] / count;
            for (p = 0; p < hw; p++)
            {
                gi[p * ch + c] = v;
            }
        }
    }
}
