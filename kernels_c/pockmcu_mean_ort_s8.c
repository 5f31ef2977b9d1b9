/*
 * pockmcu_mean_ort_s8 - int8 MEAN over the H and W axes of an NHWC tensor with
 * onnxruntime's arithmetic (QLinearGlobalAveragePool).
 *
 * MLAS computes acc = sum(x) - in_zp * num (int32) and
 *   out = clamp(RoundHalfEven(float32(float32(acc) * scale)) + out_zp, -128, 127)
 * with scale = float32(s_in / float32(s_out * num)), passed in as its 24-bit
 * mantissa and exponent (scale = mant * 2^exp) and applied exactly with
 * integers by pockmcu_requantize_ort. input_offset = -input_zero_point,
 * output_offset = output_zero_point. Output layout {N, C}. Needs no scratch.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_ort.h"

arm_cmsis_nn_status pockmcu_mean_ort_s8(const cmsis_nn_dims *input_dims,
                                        const int8_t *input_data,
                                        int32_t input_offset,
                                        int32_t output_offset,
                                        int32_t mant,
                                        int32_t exp,
                                        int8_t *output_data)
{
    const int32_t batches = input_dims->n;
    const int32_t channels = input_dims->c;
    const int32_t num = input_dims->h * input_dims->w;
    int32_t b, c, i;

    for (b = 0; b < batches; b++)
    {
        const int8_t *in = input_data + b * num * channels;
        int8_t *out = output_data + b * channels;
        for (c = 0; c < channels; c++)
        {
            uint32_t sum = 0;
            int32_t acc;
            for (i = 0; i < num; i++)
            {
                sum += (uint32_t)(int32_t)in[i * channels + c];
            }
            acc = (int32_t)(sum + (uint32_t)input_offset * (uint32_t)num);
            acc = pockmcu_requantize_ort(acc, mant, exp) + output_offset;
            out[c] = (int8_t)pockmcu_clamp_i32(acc, -128, 127);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
