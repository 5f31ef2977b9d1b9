/*
 * pockmcu_prelu_grad_f32 - input gradient of PRELU (alpha broadcast against the input; alpha not trained).
 *
 *   a = alpha_scale * (float)(alpha[o(k)] - alpha_zero_point)
 *   grad_input[k] = input[k] > input_zero_point ? grad_output[k] : a * grad_output[k]
 * as PyTorch's prelu backward for its input. dims: the input (= output) shape as 5 dimensions, then the
 * input's strides (not read: the input is visited in order), then alpha's (0 on its broadcast axes).
 * grad_input may be grad_output.
 */
#include "pockmcu_nn.h"

void pockmcu_prelu_grad_f32(const int8_t *input,
                            const int8_t *alpha,
                            const int32_t *dims,
                            int32_t input_zero_point,
                            float alpha_scale,
                            int32_t alpha_zero_point,
                            const float *grad_output,
                            float *grad_input)
{
    int32_t i0, i1, i2, i3, i4;
    int32_t k = 0;
    for (i0 = 0; i0 < dims[0]; i0++)
    {
        for (i1 = 0; i1 < dims[1]; i1++)
        {
            for (i2 = 0; i2 < dims[2]; i2++)
            {
                for (i3 = 0; i3 < dims[3]; i3++)
                {
                    const int8_t *al = alpha + i0 * dims[10] + i1 * dims[11] + i2 * dims[12] + i3 * dims[13];
                    for (i4 = 0; i4 < dims[4]; i4++)
                    {
                        const float g = grad_output[k];
                        const float a = alpha_scale * (float)((int32_t)al[i4 * dims[14]] - alpha_zero_point);
                        grad_input[k] = (int32_t)input[k] > input_zero_point ? g : a * g;
                        k++;
                    }
                }
            }
        }
    }
}
