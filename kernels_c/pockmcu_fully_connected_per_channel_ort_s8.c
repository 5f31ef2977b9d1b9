/*
 * pockmcu_fully_connected_per_channel_ort_s8 - arm_fully_connected_per_channel_s8 with onnxruntime's requantization.
 *
 * Same loops, layouts and parameters as arm_fully_connected_per_channel_s8; only the requantization
 * differs: quant_params multiplier/shift hold each channel's float32 scale
 * (s_x * s_w[c]) / s_y as a 24-bit mantissa and a power of two, and the
 * accumulator (plus bias) is requantized by pockmcu_requantize_ort, which
 * reproduces MLAS's RoundHalfEven(float32(float32(acc) * scale)) exactly with
 * integer arithmetic. Needs no scratch buffer.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support.h"

arm_cmsis_nn_status pockmcu_fully_connected_per_channel_ort_s8(const cmsis_nn_context *ctx,
                                                       const cmsis_nn_fc_params *fc_params,
                                                       const cmsis_nn_per_channel_quant_params *quant_params,
                                                       const cmsis_nn_dims *input_dims,
                                                       const int8_t *input_data,
                                                       const cmsis_nn_dims *filter_dims,
                                                       const int8_t *filter_data,
                                                       const cmsis_nn_dims *bias_dims,
                                                       const int32_t *bias_data,
                                                       const cmsis_nn_dims *output_dims,
                                                       int8_t *output_data)
{
    const int32_t batches = input_dims->n;
    const int32_t accum_depth = filter_dims->n;
    const int32_t out_depth = output_dims->c;
    const int32_t input_offset = fc_params->input_offset;
    const int32_t filter_offset = fc_params->filter_offset;
    const int32_t output_offset = fc_params->output_offset;
    const int32_t act_min = fc_params->activation.min;
    const int32_t act_max = fc_params->activation.max;
    int32_t b, o, d;

    (void)ctx;
    (void)bias_dims;

    for (b = 0; b < batches; b++)
    {
        const int8_t *in = input_data + b * accum_depth;
        int8_t *out = output_data + b * out_depth;
        for (o = 0; o < out_depth; o++)
        {
            const int8_t *w = filter_data + o * accum_depth;
            int32_t acc = 0;
            for (d = 0; d < accum_depth; d++)
            {
                acc += ((int32_t)w[d] + filter_offset) * ((int32_t)in[d] + input_offset);
            }
            if (bias_data != NULL)
            {
                acc += bias_data[o];
            }
            acc = pockmcu_requantize_ort(acc, quant_params->multiplier[o], quant_params->shift[o]) + output_offset;
            out[o] = (int8_t)pockmcu_clamp_i32(acc, act_min, act_max);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
