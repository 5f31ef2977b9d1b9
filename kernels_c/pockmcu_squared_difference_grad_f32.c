/*
 * pockmcu_squared_difference_grad_f32 - input gradient of SQUARED_DIFFERENCE, (x - o)^2 in real values:
 * 2 (x - o) times the output gradient, summed over the input's broadcast axes.
 *
 *   x = input_scale * (float)(input[t(k)] - input_zero_point), o likewise from other
 *   grad_input[t(k)] += grad_output[k] * (2.0f * (x - o))
 * (for the second input this is minus the first input's term, exactly).
 * dims (15 values): the output shape as 5 dimensions (leading 1s), then the element strides of the input
 * whose gradient is computed (0 on its broadcast axes), then those of the other input. grad_input (input_size
 * elements, the input's shape) is set to 0, then each output element's contribution is added at the input's
 * broadcast index, output elements in row-major order (float32 adds in that order). grad_input must not
 * overlap grad_output.
 */
#include "pockmcu_nn.h"

void pockmcu_squared_difference_grad_f32(const float *grad_output,
                                         const int8_t *input,
                                         const int8_t *other,
                                         const int32_t *dims,
                                         float input_scale,
                                         int32_t input_zero_point,
                                         float other_scale,
                                         int32_t other_zero_point,
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
                    const int32_t base_o = i0 * dims[10] + i1 * dims[11] + i2 * dims[12] + i3 * dims[13];
                    for (i4 = 0; i4 < dims[4]; i4++)
                    {
                        const int32_t t = base_t + i4 * dims[9];
                        const float x = input_scale * (float)((int32_t)input[t] - input_zero_point);
                        const float o =
                            other_scale * (float)((int32_t)other[base_o + i4 * dims[14]] - other_zero_point);
                        grad_input[t] += grad_output[k++] * (2.0f * (x - o));
                    }
                }
            }
        }
    }
}
