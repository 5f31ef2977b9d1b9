/*
 * pockmcu_reduce_broadcast_grad_f32 - input gradient of MEAN or SUM over any axes.
 *
 * shape = {outer, reduced0, middle, reduced1, inner} as for pockmcu_reduce_sum_s8, grad_output
 * [outer][middle][inner]:
 *   grad_input[o, r0, m, r1, i] = grad_output[o, m, i] / (float)divisor
 * with one float32 division per output (divisor = the count reduced for MEAN, 1 for SUM, where the
 * division is exact).
 */
#include "pockmcu_nn.h"

void pockmcu_reduce_broadcast_grad_f32(const int32_t *shape,
                                       const float *grad_output,
                                       int32_t divisor,
                                       float *grad_input)
{
    const int32_t outer = shape[0];
    const int32_t red0 = shape[1];
    const int32_t middle = shape[2];
    const int32_t red1 = shape[3];
    const int32_t inner = shape[4];
    const float d = (float)divisor;
    int32_t o, m, i, r0, r1;

    for (o = 0; o < outer; o++)
    {
        for (m = 0; m < middle; m++)
        {
            const float *go = grad_output + (o * middle + m) * inner;
            for (i = 0; i < inner; i++)
            {
                const float v = go[i] / d;
                for (r0 = 0; r0 < red0; r0++)
                {
                    float *row = grad_input + ((o * red0 + r0) * middle + m) * red1 * inner + i;
                    for (r1 = 0; r1 < red1; r1++)
                    {
                        row[r1 * inner] = v;
                    }
                }
            }
        }
    }
}
