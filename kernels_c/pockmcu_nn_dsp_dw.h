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
 * A channel multiplier above 1 (pockmcu_depthwise_conv_mult_dsp_s8 is the kernel for those), or a layer
 * whose accumulators could leave that range, runs the portable loops.
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
 * @brief int8 depthwise convolution for 3x3 filters, channel multiplier 1, no dilation, any stride and
 *        padding (TFLM DepthwiseConvPerChannel); the bytes of arm_depthwise_conv_wrapper_s8.
 *
 * Per group of 4 channels: the input rows the windows need sign-extended once into a ring of 3 rows in
 * the scratch as int16 pairs of neighbouring columns (input offset added, zero words for padding; at stride
 * 2 only the even columns' pairs), the weights extended and doubled once, three output pixels of 2 channels
 * a pass with SMLAD for two taps of a filter row and SMLABB/SMLATB for the third; requantization
 * through SMMULR and SSAT with the rounding of TFLM (see the kernel file). Needs every channel's shift
 * <= -1 and |bias| + 9 * 255 * 128 < 2^30 (checked per call); otherwise, for another shape, or without
 * the scratch, it runs pockmcu_depthwise_conv_dsp_s8.
 *
 * @param[in]      ctx            Scratch: buf of at least the *_get_buffer_size bytes (any alignment);
 *                                buf NULL runs pockmcu_depthwise_conv_dsp_s8.
 * Other arguments and result as for pockmcu_depthwise_conv_dsp_s8.
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
 * @brief Scratch size of pockmcu_depthwise_conv_3x3_dsp_s8: 4 * (66 + 6 * ((output_dims->w - 1) *
 *        stride.w + 3)) + 4 bytes (weights, requantization parameters, 3 extended input rows, alignment).
 */
int32_t pockmcu_depthwise_conv_3x3_dsp_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                          const cmsis_nn_dims *input_dims,
                                                          const cmsis_nn_dims *filter_dims,
                                                          const cmsis_nn_dims *output_dims);

/**
 * @brief int8 depthwise convolution with a channel multiplier above 1, any input channel count, filter size,
 *        stride, dilation and padding (TFLM DepthwiseConvPerChannel); the bytes of arm_depthwise_conv_wrapper_s8.
 *
 * With 4 or more input channels and TFLM's requantization proven exact through SMMULR: each multiplier m as a
 * multiplier-1 layer over a copy of its filter in the scratch (the loops of pockmcu_depthwise_conv_dsp_s8, 4
 * channels per word, output channels ch_mult apart). Otherwise each input channel as a convolution with
 * ch_mult outputs: the channel's weights extended once to int16 rows in the scratch, per two output pixels the
 * windows' taps gathered into int16 columns (input offset added, 0 outside the image), 2 pixels x 2 outputs
 * per SMLAD step with LDRD loads, the exact fast requantization where proven, TFLM's otherwise.
 *
 * @param[in]      ctx            Scratch: buf of at least the *_get_buffer_size bytes (any alignment); buf NULL,
 *                                a smaller size or a channel multiplier of 1 runs arm_depthwise_conv_wrapper_s8.
 * Other arguments and result as for pockmcu_depthwise_conv_dsp_s8.
 */
arm_cmsis_nn_status pockmcu_depthwise_conv_mult_dsp_s8(const cmsis_nn_context *ctx,
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
 * @brief Scratch size of pockmcu_depthwise_conv_mult_dsp_s8: 0 for a channel multiplier of 1, else the larger
 *        of 2 * k4 * (ch_mult + 2) + 20 * ch_mult + 4 bytes with k4 = KH * (KW rounded up to even) rounded up
 *        to 4 (weight rows, two columns, requantization parameters, alignment) and, with C_IN >= 4,
 *        (KH * KW * C_IN rounded up to 4) + 12 * C_IN + 4 (one multiplier's filter and requantization
 *        parameters). Reads dw_conv_params->ch_mult, input_dims->c and the filter size.
 */
int32_t pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                           const cmsis_nn_dims *input_dims,
                                                           const cmsis_nn_dims *filter_dims,
                                                           const cmsis_nn_dims *output_dims);

/**
 * @brief int8 element-wise addition of two same-shape tensors (TFLM ADD) for DSP cores: arm_elementwise_add_s8's
 *        arguments and bytes.
 *
 * Four elements a loop (word loads and store, offsets added by SXTAB16, one SMMLAR per requantization with the
 * rounding shift folded in); a call whose parameters leave the proven-exact ranges (offsets beyond int16 lanes,
 * negative multipliers, an output shift >= 0, activation bounds outside int8, sums near int32 overflow) runs
 * arm_elementwise_add_s8. Arguments and result as for arm_elementwise_add_s8.
 */
arm_cmsis_nn_status pockmcu_elementwise_add_s8_dsp(const int8_t *input_1_vect,
                                                   const int8_t *input_2_vect,
                                                   const int32_t input_1_offset,
                                                   const int32_t input_1_mult,
                                                   const int32_t input_1_shift,
                                                   const int32_t input_2_offset,
                                                   const int32_t input_2_mult,
                                                   const int32_t input_2_shift,
                                                   const int32_t left_shift,
                                                   int8_t *output,
                                                   const int32_t out_offset,
                                                   const int32_t out_mult,
                                                   const int32_t out_shift,
                                                   const int32_t out_activation_min,
                                                   const int32_t out_activation_max,
                                                   const int32_t block_size);

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_DSP_DW_H */
