/*
 * pockmcu_dequantize_s8_f32 - int8 -> float32 DEQUANTIZE.
 *
 * TFLM's reference_ops::Dequantize: (float)((double)scale * (x - zp)).
 * The double product of a float32 scale and an integer in [-255, 255] is
 * exact, so rounding it once to float equals the correctly rounded float32
 * product computed here (no double arithmetic needed on the FPU-less or
 * single-precision targets). Assumes the FPU is not in flush-to-zero mode
 * (only relevant for subnormal scales).
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status
pockmcu_dequantize_s8_f32(const int8_t *input_data, int32_t size, float scale, int32_t zero_point, float *output_data)
{
    int32_t i;
    for (i = 0; i < size; i++)
    {
        output_data[i] = scale * (float)((int32_t)input_data[i] - zero_point);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
