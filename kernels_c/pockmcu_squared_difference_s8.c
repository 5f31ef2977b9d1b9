/*
 * pockmcu_squared_difference_s8 - int8 SQUARED_DIFFERENCE of two tensors of NumPy-broadcastable shapes (rank <= 5).
 *
 * TFLite Micro's int8 SQUARED_DIFFERENCE (squared_difference.cc, left_shift 7), element by element:
 *   a = MultiplyByQuantizedMultiplierSmallerThanOneExp((input1 + input1_offset) << left_shift, input1_mult,
 * input1_shift) b = likewise for input2 out = clamp(MultiplyByQuantizedMultiplier((a - b) * (a - b), output_mult,
 * output_shift) + output_offset, -128, 127) The output is visited in row-major order; each input is read at its
 * broadcast index (dims: see pockmcu_add_broadcast_s8). The output may be an input whose shape is the output's.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_squared_difference_s8(const int8_t *input1_data,
                                                  const int8_t *input2_data,
                                                  const int32_t *dims,
                                                  int32_t input1_offset,
                                                  int32_t input1_mult,
                                                  int32_t input1_shift,
                                                  int32_t input2_offset,
                                                  int32_t input2_mult,
                                                  int32_t input2_shift,
                                                  int32_t left_shift,
                                                  int8_t *output_data,
                                                  int32_t output_offset,
                                                  int32_t output_mult,
                                                  int32_t output_shift)
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
                    const int8_t *a = input1_data + i0 * dims[5] + i1 * dims[6] + i2 * dims[7] + i3 * dims[8];
                    const int8_t *b = input2_data + i0 * dims[10] + i1 * dims[11] + i2 * dims[12] + i3 * dims[13];
                    for (i4 = 0; i4 < dims[4]; i4++)
                    {
                        const int32_t x1 = pockmcu_wrap_shl((int32_t)a[i4 * dims[9]] + input1_offset, left_shift);
                        const int32_t x2 = pockmcu_wrap_shl((int32_t)b[i4 * dims[14]] + input2_offset, left_shift);
                        const int32_t s1 = pockmcu_rdbpot(pockmcu_srdhm(x1, input1_mult), -input1_shift);
                        const int32_t s2 = pockmcu_rdbpot(pockmcu_srdhm(x2, input2_mult), -input2_shift);
                        const int32_t diff = s1 - s2;
                        const int32_t y = pockmcu_requantize(diff * diff, output_mult, output_shift) + output_offset;
                        output_data[k++] = (int8_t)pockmcu_clamp_i32(y, -128, 127);
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
