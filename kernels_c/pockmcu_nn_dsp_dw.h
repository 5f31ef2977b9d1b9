/*
 * pockmcu_nn_dsp_dw.h - int8 depthwise convolution, pooling and element-wise kernels for cores with the
 * Armv7E-M / Armv8-M DSP extension (Cortex-M4, M7, M33, M55).
 *
 * Each kernel has the API of the portable kernel it stands in for (named in its comment) and produces
 * its bytes for every input. They are written with the wrappers of pockmcu_simd.h only, so they compile
 * and run bit-exact on every core and on the host (where each wrapper is plain C); kernel_table.py
 * chooses them on cores with the "dsp" feature.
 */
#ifndef POCKMCU_NN_DSP_DW_H
#define POCKMCU_NN_DSP_DW_H

#include "pockmcu_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief int8 depthwise convolution, DSP loops (TFLM DepthwiseConvPerChannel); the bytes of
 *        arm_depthwise_conv_wrapper_s8.
 *
 * Four channels per 32-bit load with the input offset added during sign extension (SXTAB16), SMLABB /
 * SMLATT per channel, two output pixels of a row sharing the weights; TFLM's double-rounding
 * requantization through SMMULR where the layer's bias and shifts prove it exact (checked per call).
 * A channel multiplier above 1, or a layer whose accumulators could leave that range, runs the
 * portable loops.
 *
 * @param[in]      ctx            Scratch context; not read (the *_get_buffer_size query returns 0).
 * @param[in]      dw_conv_params input_offset (-input zero point), output_offset, ch_mult, stride,
 *                                padding (top / left; bottom / right implied), dilation, activation.
 * @param[in]      quant_params   Per output channel multiplier and shift (TFLM QuantizeMultiplier).
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [1, KH, KW, C_OUT].
 * @param[in]      filter_data    Filter, int8, 1HWC (output channel = input channel * ch_mult + m).
 * @param[in]      bias_dims      Bias shape; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for inconsistent shapes or strides.
 */
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
                                                  int8_t *output_data);

/**
 * @brief Scratch size of pockmcu_depthwise_conv_dsp_s8: 0. Arguments as for the kernel; not read.
 */
int32_t pockmcu_depthwise_conv_dsp_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const cmsis_nn_dims *output_dims);

/**
 * @brief pockmcu_depthwise_conv_dsp_s8 specialized for 3x3 filters (filter size as a constant, the tap
 *        loops unrolled). Arguments and result as for pockmcu_depthwise_conv_dsp_s8; another filter
 *        size runs the portable loops (correct, not fast).
 */
arm_cmsis_nn_status pockmcu_depthwise_conv_3x3_dsp_s8(const cmsis_nn_context *ctx,
                                                      const cmsis_nn_dw_conv_params *dw_conv_params,
                                                      const cmsis_nn_per_channel_quant_params *quant_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const int8_t *input_data,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const int8_t *filter_data,
                                                      const cmsis_nn_dims *bias_dims,
                                                      const int32_t *bias_data,
                                                      const cmsis_nn_dims *output_dims,
                                                      int8_t *output_data);

/**
 * @brief Scratch size of pockmcu_depthwise_conv_3x3_dsp_s8: 0. Arguments as for the kernel; not read.
 */
int32_t pockmcu_depthwise_conv_3x3_dsp_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                          const cmsis_nn_dims *input_dims,
                                                          const cmsis_nn_dims *filter_dims,
                                                          const cmsis_nn_dims *output_dims);

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_DSP_DW_H */
