/*
 * pockmcu_requantize_u8_s8 - uint8 -> int8 with another scale and zero point.
 *
 * TFLM's uint8 -> int8 QUANTIZE (reference_ops::Requantize<uint8_t, int8_t>, general path):
 *   out = clamp(MultiplyByQuantizedMultiplier(x - in_zp, multiplier, shift) + out_zp, -128, 127)
 * with multiplier/shift = QuantizeMultiplier((double)s_in / (double)s_out).
 * input_offset = -input_zero_point, output_offset = output_zero_point. TFLM's
 * fast path (equal scales, zero points 128 apart) is pockmcu_flip_sign_8, which
 * gives the same bytes.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_requantize_u8_s8(const uint8_t *input_data,
                                             int32_t size,
                                             int32_t input_offset,
                                             int32_t multiplier,
                                             int32_t shift,
                                             int32_t output_offset,
                                             int8_t *output_data)
{
    int32_t i;
    for (i = 0; i < size; i++)
    {
        const int32_t x = (int32_t)input_data[i] + input_offset;
        const int32_t y = pockmcu_requantize(x, multiplier, shift) + output_offset;
        output_data[i] = (int8_t)pockmcu_clamp_i32(y, -128, 127);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
