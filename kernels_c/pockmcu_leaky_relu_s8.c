/*
 * pockmcu_leaky_relu_s8 - int8 LEAKY_RELU.
 *
 * TFLite Micro's int8 LEAKY_RELU (reference_ops::QuantizeLeakyRelu), element by element,
 * x = input - input_zero_point:
 *   out = clamp(output_zero_point + MultiplyByQuantizedMultiplier(x, mult_identity, shift_identity))    x >= 0
 *       = clamp(output_zero_point +- MultiplyByQuantizedMultiplier(x, |mult_alpha|, shift_alpha))       x < 0
 * the sign that of mult_alpha (a negative alpha is applied after the rescale, as TFLM does), clamped to
 * [-128, 127]. In place is allowed.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_leaky_relu_s8(const int8_t *input_data,
                                          int32_t size,
                                          int32_t input_zero_point,
                                          int32_t mult_identity,
                                          int32_t shift_identity,
                                          int32_t mult_alpha,
                                          int32_t shift_alpha,
                                          int32_t output_zero_point,
                                          int8_t *output_data)
{
    const int32_t negative = mult_alpha < 0;
    const int32_t safe_alpha = negative ? pockmcu_wrap_neg(mult_alpha) : mult_alpha;
    int32_t k;
    for (k = 0; k < size; k++)
    {
        const int32_t x = (int32_t)input_data[k] - input_zero_point;
        int32_t y = output_zero_point;
        if (x >= 0)
        {
            y += pockmcu_requantize(x, mult_identity, shift_identity);
        }
        else
        {
            const int32_t scaled = pockmcu_requantize(x, safe_alpha, shift_alpha);
            y += negative ? -scaled : scaled;
        }
        output_data[k] = (int8_t)pockmcu_clamp_i32(y, -128, 127);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
