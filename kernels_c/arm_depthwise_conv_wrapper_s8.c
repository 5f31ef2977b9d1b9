/*
 * arm_depthwise_conv_wrapper_s8 - portable int8 depthwise convolution
 * (CMSIS-NN API).
 *
 * Computes TFLM's reference_integer_ops::DepthwiseConvPerChannel: NHWC input,
 * filter 1HWC with C = C_IN * ch_mult and output channel
 * oc = in_channel * ch_mult + m, per output channel requantization (TFLM
 * double rounding), output offset, activation clamp. Any depth multiplier,
 * stride, dilation, kernel size, batch count; top/left padding with
 * bottom/right implied by the output size. bias_data may be NULL.
 * Needs no scratch buffer.
 */
#include "pockmcu_layer_loops.h"

arm_cmsis_nn_status arm_depthwise_conv_wrapper_s8(const cmsis_nn_context *ctx,
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
    return pockmcu_depthwise_conv_s8_loops(ctx,
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
                                           0);
}
