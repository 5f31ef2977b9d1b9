/*
 * pockmcu_mean_s8 - int8 MEAN over the H and W axes of an NHWC tensor.
 *
 * Follows TFLM's MEAN for int8 exactly (micro/kernels/reduce_common.cc ->
 * reference_ops::QuantizedMeanOrSum, used for every int8 MEAN whatever the
 * axes, keep_dims or quantization):
 *   Prepare:  multiplier, shift = QuantizeMultiplier(in_scale / out_scale)
 *             (passed in as multiplier / shift);
 *   Eval:     num = H * W; s = min(floor(log2(num)), 32, 31 + shift);
 *             m' = (int32)(((int64)multiplier << s) / num); shift' = shift - s;
 *             acc = (int32)(sum(x) - in_zp * num);
 *             out = clamp(MultiplyByQuantizedMultiplier(acc, m', shift')
 *                         + out_zp, -128, 127).
 * input_offset = -input_zero_point, output_offset = output_zero_point.
 * Output layout {N, C}. Reductions over any contiguous run of axes map onto
 * this by folding dimensions (see pockmcu_nn_forward.h). Needs no scratch buffer.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_mean_s8(const cmsis_nn_dims *input_dims,
                                    const int8_t *input_data,
                                    int32_t input_offset,
                                    int32_t output_offset,
                                    int32_t multiplier,
                                    int32_t shift,
                                    int8_t *output_data)
{
    const int32_t batches = input_dims->n;
    const int32_t channels = input_dims->c;
    const int32_t num = input_dims->h * input_dims->w;
    int32_t log2_num;
    int32_t adj_mult;
    int32_t adj_shift;
    int32_t b, c, i;

    if (num <= 0)
    {
        /* TFLM leaves the zero-initialised output when the input is empty. */
        for (i = 0; i < batches * channels; i++)
        {
            output_data[i] = 0;
        }
        return ARM_CMSIS_NN_SUCCESS;
    }

    log2_num = 31 - pockmcu_clz_u32((uint32_t)num);
    log2_num = pockmcu_min_i32(log2_num, 32);
    log2_num = pockmcu_min_i32(log2_num, 31 + shift);
    adj_mult = (int32_t)(((int64_t)multiplier * ((int64_t)1 << log2_num)) / num);
    adj_shift = shift - log2_num;

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
            /* (int32)(sum - zp * num): two's complement wrap, as in TFLM */
            acc = (int32_t)(sum + (uint32_t)input_offset * (uint32_t)num);
            acc = pockmcu_wrap_add(pockmcu_requantize(acc, adj_mult, adj_shift), output_offset);
            out[c] = (int8_t)pockmcu_clamp_i32(acc, -128, 127);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
