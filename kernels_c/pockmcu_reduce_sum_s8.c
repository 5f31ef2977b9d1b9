/*
 * pockmcu_reduce_sum_s8 - int8 MEAN or SUM over any axes (TFLM QuantizedMeanOrSum).
 *
 * The tensor is folded at compile time into five groups of axes, shape = {outer, reduced0, middle,
 * reduced1, inner} (kept, reduced, kept, reduced, kept; any set of axes of a rank <= 4 tensor folds
 * so), and for every kept position (o, m, i):
 *   sum = sum of the reduced0 * reduced1 inputs, wrapping in 32 bits as TFLM's int32 accumulator;
 *   acc = (int32)(sum - input_zero_point * count);
 *   out = clamp(MultiplyByQuantizedMultiplier(acc, multiplier, shift) + output_zero_point, -128, 127).
 * TFLM's MEAN folds 1 / count into the multiplier at Eval; pockmcu does that fold at compile time
 * (pockmcu.fixedpoint.mean_adjusted_multiplier), so MEAN and SUM differ only in the multiplier and
 * shift passed here. The output is {outer, middle, inner} in order, with or without keep_dims.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_reduce_sum_s8(const int32_t *shape,
                                          const int8_t *input_data,
                                          int32_t input_offset,
                                          int32_t output_offset,
                                          int32_t multiplier,
                                          int32_t shift,
                                          int8_t *output_data)
{
    const int32_t outer = shape[0];
    const int32_t red0 = shape[1];
    const int32_t middle = shape[2];
    const int32_t red1 = shape[3];
    const int32_t inner = shape[4];
    const uint32_t count = (uint32_t)red0 * (uint32_t)red1;
    int32_t o, m, i, r0, r1;

    if (outer <= 0 || red0 <= 0 || middle <= 0 || red1 <= 0 || inner <= 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (o = 0; o < outer; o++)
    {
        for (m = 0; m < middle; m++)
        {
            for (i = 0; i < inner; i++)
            {
                uint32_t sum = 0;
                int32_t acc;
                for (r0 = 0; r0 < red0; r0++)
                {
                    const int8_t *row = input_data + ((o * red0 + r0) * middle + m) * red1 * inner + i;
                    for (r1 = 0; r1 < red1; r1++)
                    {
                        sum += (uint32_t)(int32_t)row[r1 * inner];
                    }
                }
                /* (int32)(sum - zp * count): two's complement wrap, as in TFLM */
                acc = (int32_t)(sum + (uint32_t)input_offset * count);
                acc = pockmcu_wrap_add(pockmcu_requantize(acc, multiplier, shift), output_offset);
                *output_data++ = (int8_t)pockmcu_clamp_i32(acc, -128, 127);
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
