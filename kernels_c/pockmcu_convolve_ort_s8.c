/*
 * pockmcu_convolve_ort_s8 - arm_convolve_wrapper_s8 with onnxruntime's requantization.
 *
 * Same loops, layouts and parameters as arm_convolve_wrapper_s8; only the requantization
 * differs: quant_params multiplier/shift hold each channel's float32 scale
 * (s_x * s_w[c]) / s_y as a 24-bit mantissa and a power of two, and the
 * accumulator (plus bias) is requantized by pockmcu_requantize_ort, which
 * reproduces MLAS's RoundHalfEven(float32(float32(acc) * scale)) exactly with
 * integer arithmetic. Needs no scratch buffer.
 */
#include "pockmcu_layer_loops.h"

arm_cmsis_nn_status pockmcu_convolve_ort_s8(const cmsis_nn_context *ctx,
                                            const cmsis_nn_conv_params *conv_params,
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
    return pockmcu_conv_s8_loops(ctx,
                                 conv_params,
                                 quant_params,
                                 input_dims,
                                 input_data,
                                 filter_dims,
                                 filter_data,
                                 NULL,
                                 0,
                                 bias_dims,
                                 bias_data,
                                 output_dims,
                                 output_data,
                                 1);
}
