/*
 * pockmcu_logistic_s8 - int8 LOGISTIC (sigmoid).
 *
 * Bit-exact with TFLM's reference_integer_ops::Logistic (int8): x' = x - zp;
 * x' <= -radius -> -128, x' >= radius -> 127, otherwise
 * q4 = MultiplyByQuantizedMultiplier(x', input_multiplier, input_left_shift)
 * is fed to gemmlowp::logistic as Q4.27 and the Q0.31 result is rounded to
 * Q0.8 (RoundingDivideByPOT by 23), offset by -128 and clamped. Output zero
 * point -128, scale 1/256. input_offset = -input_zero_point; the other
 * parameters as TFLM's CalculateArithmeticOpDataLogistic computes them
 * (see pockmcu.fixedpoint.logistic_params).
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_logistic_s8(const int8_t *input_data,
                                        int32_t size,
                                        int32_t input_offset,
                                        int32_t input_range_radius,
                                        int32_t input_multiplier,
                                        int32_t input_left_shift,
                                        int8_t *output_data)
{
    int32_t i;
    for (i = 0; i < size; i++)
    {
        const int32_t x = (int32_t)input_data[i] + input_offset;
        if (x <= -input_range_radius)
        {
            output_data[i] = -128;
        }
        else if (x >= input_range_radius)
        {
            output_data[i] = 127;
        }
        else
        {
            const int32_t q4 = pockmcu_requantize(x, input_multiplier, input_left_shift);
            const int32_t q0 = pockmcu_logistic_fixed(q4, 4);
            const int32_t q23 = pockmcu_rdbpot(q0, 31 - 8) - 128;
            output_data[i] = (int8_t)pockmcu_clamp_i32(q23, -128, 127);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
