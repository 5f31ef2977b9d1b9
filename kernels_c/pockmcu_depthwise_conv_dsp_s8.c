/*
 * pockmcu_depthwise_conv_dsp_s8 - int8 depthwise convolution for cores with the DSP extension (Cortex-M4, M7, M33,
 * M55): any filter size, stride, dilation and padding.
 *
 * The bytes of arm_depthwise_conv_wrapper_s8 for every input (pockmcu_dw_dsp_loops.h explains the
 * loops and when they fall back to the portable ones). Built from pockmcu_simd.h, so it also runs on
 * the host and on Cortex-M3, where it computes the same bytes more slowly. Needs no scratch buffer.
 */
#include "pockmcu_dw_dsp_loops.h"

arm_cmsis_nn_status pockmcu_depthwise_conv_dsp_s8(const cmsis_nn_context *ctx,
                                                  const cmsis_nn_dw_conv_params *dw_conv_params,
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
    return pockmcu_depthwise_conv_dsp_loops(ctx,
                                            dw_conv_params,
                                            quant_params,
                                            input_dims,
                                            input_data,
                                            filter_dims,
                                            filter_data,
                                            bias_dims,
                                            bias_data,
                                            output_dims,
                                            output_data,
                                            0,
                                            0);
}
