/*
 * pockmcu_broadcast_grad_f32 - input gradient of ADD / SUB with broadcasting: the output gradient, times coef
 * (1 or -1), summed over the input's broadcast axes.
 *
 *   grad_input[t(k)] += coef * grad_output[k]
 * dims (15 values): the output shape as 5 dimensions (leading 1s), then the element strides of the input
 * whose gradient is computed (0 on its broadcast axes), then those of the other input. grad_input (input_size
 * elements, the input's shape) is set to 0, then each output element's contribution is added at the input's
 * broadcast index, output elements in row-major order (float32 adds in that order). grad_input must not
 * overlap grad_output.
 * The other input's strides (dims[10..14]) are not read.
 */
#include "pockmcu_nn.h"

void pockmcu_broadcast_grad_f32(const float *grad_output,
                                const int32_t *dims,
                                float coef,
                                int32_t input_size,
                                float *grad_input)
{
    int32_t i0, i1, i2, i3, i4;
    int32_t k = 0;
    for (k = 0; k < input_size; k++)
    {
        grad_input[k] = 0.0f;
    }
    k = 0;
    for (i0 = 0; i0 < dims[0]; i0++)
    {
        for (i1 = 0; i1 < dims[1]; i1++)
        {
            for (i2 = 0; i2 < dims[2]; i2++)
            {
                for (i3 = 0; i3 < dims[3]; i3++)
                {
                    const int32_t base_t = i0 * dims[5] + i1 * dims[6] + i2 * dims[7] + i3 * dims[8];
                    for (i4 = 0; i4 < dims[4]; i4++)
                    {
                        grad_input[base_t + i4 * dims[9]] += coef * grad_output[k++];
                    }
                }
            }
        }
    }
}
