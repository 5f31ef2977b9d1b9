/*
 * pockmcu_requantize_s8 - int8 -> int8 with another scale and zero point.
 *
 * TFLM's int8 -> int8 QUANTIZE (reference_ops::Requantize):
 *   out = clamp(MultiplyByQuantizedMultiplier(x - in_zp, multiplier, shift)
 *               + out_zp, act_min, act_max)
 * with multiplier/shift = QuantizeMultiplier((double)s_in / (double)s_out),
 * TFLM's double-rounding requantization. When the scales are equal the
 * multiplier is 2^30 with shift 1 and the product is exact, so the op is a
 * pure zero-point change (and, with act_min/act_max, an exact clamp, which is
 * how a standalone ONNX Relu/Clip on a quantized tensor is lowered).
 * input_offset = -input_zero_point, output_offset = output_zero_point.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_requantize_s8(const int8_t *input_data,
                                          int32_t size,
                                          int32_t input_offset,
                                          int32_t multiplier,
                                          int32_t shift,
                                          int32_t output_offset,
                                          int32_t act_min,
                                          int32_t act_max,
                                          int8_t *output_data)
{
    int32_t i;
    for (i = 0; i < size; i++)
    {
        const int32_t x = (int32_t)input_data[i] + input_offset;
        const int32_t y = pockmcu_requantize(x, multiplier, shift) + output_offset;
        output_data[i] = (int8_t)pockmcu_clamp_i32(y, act_min, act_max);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
