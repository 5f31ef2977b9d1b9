/*
 * pockmcu_prelu_s8 - int8 PRELU with an alpha tensor broadcast against the input (rank <= 5).
 *
 * TFLite Micro's int8 PRELU (reference_ops::BroadcastPrelu4DSlow), element by element, x = input + input_offset:
 *   out = clamp(MultiplyByQuantizedMultiplier(x, output_mult_1, output_shift_1) + output_offset)      x >= 0
 *       = clamp(MultiplyByQuantizedMultiplier(x * (alpha + alpha_offset), output_mult_2, output_shift_2)
 *               + output_offset)                                                                     x < 0
 * clamped to [-128, 127]. dims: the output shape, then the input's and alpha's strides (see
 * pockmcu_add_broadcast_s8). The output may be the input when their shapes are equal.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_prelu_s8(const int8_t *input_data,
                                     const int8_t *alpha_data,
                                     const int32_t *dims,
                                     int32_t input_offset,
                                     int32_t alpha_offset,
                                     int32_t output_mult_1,
                                     int32_t output_shift_1,
                                     int32_t output_mult_2,
                                     int32_t output_shift_2,
                                     int32_t output_offset,
                                     int8_t *output_data)
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
                    const int8_t *a = input_data + i0 * dims[5] + i1 * dims[6] + i2 * dims[7] + i3 * dims[8];
                    const int8_t *b = alpha_data + i0 * dims[10] + i1 * dims[11] + i2 * dims[12] + i3 * dims[13];
                    for (i4 = 0; i4 < dims[4]; i4++)
                    {
                        const int32_t x = (int32_t)a[i4 * dims[9]] + input_offset;
                        int32_t y;
                        if (x >= 0)
                        {
                            y = pockmcu_requantize(x, output_mult_1, output_shift_1);
                        }
                        else
                        {
                            y = pockmcu_requantize(
                                x * ((int32_t)b[i4 * dims[14]] + alpha_offset), output_mult_2, output_shift_2);
                        }
                        output_data[k++] = (int8_t)pockmcu_clamp_i32(y + output_offset, -128, 127);
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
