/*
 * arm_elementwise_add_s8 - portable int8 element-wise add (CMSIS-NN API).
 *
 * Computes TFLM's reference_integer_ops AddFunc for same-shape inputs:
 *   a = (x1 + input_1_offset) << left_shift   (left_shift = 20 for int8)
 *   b = (x2 + input_2_offset) << left_shift
 *   a = MultiplyByQuantizedMultiplier(a, input_1_mult, input_1_shift)
 *   b = MultiplyByQuantizedMultiplier(b, input_2_mult, input_2_shift)
 *   out = clamp(MultiplyByQuantizedMultiplier(a + b, out_mult, out_shift)
 *               + out_offset, out_activation_min, out_activation_max)
 * TFLM's shifts are <= 0 here (SmallerThanOneExp), for which the general
 * double rounding requantization used below is identical.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status arm_elementwise_add_s8(const int8_t *input_1_vect,
                                           const int8_t *input_2_vect,
                                           const int32_t input_1_offset,
                                           const int32_t input_1_mult,
                                           const int32_t input_1_shift,
                                           const int32_t input_2_offset,
                                           const int32_t input_2_mult,
                                           const int32_t input_2_shift,
                                           const int32_t left_shift,
                                           int8_t *output,
                                           const int32_t out_offset,
                                           const int32_t out_mult,
                                           const int32_t out_shift,
                                           const int32_t out_activation_min,
                                           const int32_t out_activation_max,
                                           const int32_t block_size)
{
    int32_t i;
    for (i = 0; i < block_size; i++)
    {
        const int32_t a = pockmcu_wrap_shl((int32_t)input_1_vect[i] + input_1_offset, left_shift);
        const int32_t b = pockmcu_wrap_shl((int32_t)input_2_vect[i] + input_2_offset, left_shift);
        const int32_t sum = pockmcu_wrap_add(pockmcu_requantize(a, input_1_mult, input_1_shift),
                                             pockmcu_requantize(b, input_2_mult, input_2_shift));
        const int32_t out = pockmcu_wrap_add(pockmcu_requantize(sum, out_mult, out_shift), out_offset);
        output[i] = (int8_t)pockmcu_clamp_i32(out, out_activation_min, out_activation_max);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
