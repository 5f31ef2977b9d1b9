/*
 * pockmcu_quantize_f32_s8 - float32 -> int8 QUANTIZE.
 *
 * TFLM's reference_ops::AffineQuantize: q = (int32)round(x / scale) + zp,
 * clamped to [-128, 127], where x / scale is a float32 division and round is
 * std::round on float (half away from zero; done without libm here).
 * Outside int32 range TFLM's float -> int conversion is undefined behaviour;
 * here +-inf and huge values saturate and NaN maps to the zero point (what
 * TFLM gives on Arm, whose VCVT saturates and maps NaN to 0).
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status
pockmcu_quantize_f32_s8(const float *input_data, int32_t size, float scale, int32_t zero_point, int8_t *output_data)
{
    int32_t i;
    for (i = 0; i < size; i++)
    {
        const float r = pockmcu_roundf(input_data[i] / scale);
        int32_t q;
        if (r != r)
        {
            q = 0;
        }
        else if (r > 1024.0f)
        {
            q = 1024;
        }
        else if (r < -1024.0f)
        {
            q = -1024;
        }
        else
        {
            q = (int32_t)r;
        }
        output_data[i] = (int8_t)pockmcu_clamp_i32(q + zero_point, -128, 127);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
