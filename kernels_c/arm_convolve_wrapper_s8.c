/*
 * arm_convolve_wrapper_s8 - portable int8 2D convolution (CMSIS-NN API).
 *
 * Computes TFLM's reference_integer_ops::ConvPerChannel: NHWC input, OHWI
 * filter, per output channel requantization with TFLM's double rounding
 * MultiplyByQuantizedMultiplier, output offset, activation clamp. Any stride,
 * dilation, kernel size and top/left padding; bottom/right padding is implied
 * by the output size (out-of-image taps contribute nothing, i.e. they read the
 * input zero point). Grouped convolution when input_dims->c is a multiple of
 * filter_dims->c, like TFLM and CMSIS-NN. bias_data may be NULL.
 * Needs no scratch buffer.
 */
#include "pockmcu_layer_loops.h"

arm_cmsis_nn_status arm_convolve_wrapper_s8(const cmsis_nn_context *ctx,
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
                                 0);
}
