/*
 * pockmcu_nn_mve.h - int8 forward kernels for Helium (Armv8.1-M MVE, Cortex-M55): pockmcu_*_mve_s8.
 *
 * Each takes exactly the arguments of the portable kernel it stands in for (pockmcu_nn_arm.h) and
 * writes the same bytes, so the kernel table (pockmcu/kernel_table.py, rows with features ("mve",))
 * swaps one function name for the other. The MVE code is compiled only where __ARM_FEATURE_MVE has
 * bit 0 set (integer MVE); on every other core and on the host each function runs the portable
 * loops of pockmcu_layer_loops.h, the very code of the arm_* kernel. Host simulation therefore equals
 * QEMU on Cortex-M55 because the MVE path equals the portable path byte for byte, which
 * tests/test_mve_kernels.py checks in QEMU on hundreds of random geometries and extreme parameters.
 * None needs scratch memory (the conv and depthwise kernels use up to about 2.5 KB of stack).
 */
#ifndef POCKMCU_NN_MVE_H
#define POCKMCU_NN_MVE_H

#include "pockmcu_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief int8 2D convolution, TFLM ConvPerChannel: arm_convolve_wrapper_s8's arguments and bytes.
 *
 * MVE: one output pixel at a time, its receptive field read in place (1x1 and 1xK rows inside the image) or
 * gathered into a 512-byte stack block, four output channels per tail-predicated VMLADAVA loop whose accumulators
 * start at bias + input_offset * sum(w), requantization of the four channels as a vector (about 2 KB of stack in
 * all). Receptive fields over 512 bytes: four pixels gathered in chunks. Grouped convolutions run the portable
 * loops.
 *
 * @param[in]      ctx            Scratch context; not read (pockmcu_convolve_mve_s8_get_buffer_size() returns 0).
 * @param[in]      conv_params    As for arm_convolve_wrapper_s8: offsets, stride, padding, dilation, clamp.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT].
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN / groups].
 * @param[in]      filter_data    Filter, int8, OHWI.
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return As arm_convolve_wrapper_s8.
 */
arm_cmsis_nn_status pockmcu_convolve_mve_s8(const cmsis_nn_context *ctx,
                                            const cmsis_nn_conv_params *conv_params,
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
 * @brief Scratch size of pockmcu_convolve_mve_s8.
 *
 * @param[in]      conv_params    Not read.
 * @param[in]      input_dims     Not read.
 * @param[in]      filter_dims    Not read.
 * @param[in]      output_dims    Not read.
 *
 * @return 0: the kernel needs no scratch.
 */
int32_t pockmcu_convolve_mve_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const cmsis_nn_dims *output_dims);

/**
 * @brief int8 depthwise convolution, TFLM DepthwiseConvPerChannel: arm_depthwise_conv_wrapper_s8's
 *        arguments and bytes.
 *
 * MVE, ch_mult 1: 16 channels per pixel from zero-point padded copies of the input rows under each output row
 * segment (1 KB of stack) and the group's packed weights (1 KB): every tap a widening load at an immediate
 * offset, VMULLB / VMULLT into int32 accumulators starting at bias + input_offset * sum(w), requantization per
 * lane; interior 16-channel segments of other filters read the taps in place. ch_mult > 1: per input channel, each
 * window gathered into a column and VMLADAVA against the ch_mult filters transposed (about 2.3 KB of stack); very
 * large filters: eight output channels per int16 vector (a gather).
 *
 * @param[in]      ctx            Scratch context; not read (pockmcu_depthwise_conv_mve_s8_get_buffer_size() returns 0).
 * @param[in]      dw_conv_params As for arm_depthwise_conv_wrapper_s8: offsets, ch_mult, stride, padding,
 *                                dilation, clamp.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT].
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [1, KH, KW, C_OUT], C_OUT = C_IN * ch_mult.
 * @param[in]      filter_data    Filter, int8, 1HWC.
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return As arm_depthwise_conv_wrapper_s8.
 */
arm_cmsis_nn_status pockmcu_depthwise_conv_mve_s8(const cmsis_nn_context *ctx,
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
 * @brief Scratch size of pockmcu_depthwise_conv_mve_s8.
 *
 * @param[in]      dw_conv_params Not read.
 * @param[in]      input_dims     Not read.
 * @param[in]      filter_dims    Not read.
 * @param[in]      output_dims    Not read.
 *
 * @return 0: the kernel needs no scratch.
 */
int32_t pockmcu_depthwise_conv_mve_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const cmsis_nn_dims *output_dims);

/**
 * @brief int8 fully connected layer, per tensor requantization (TFLM FullyConnected):
 *        arm_fully_connected_s8's arguments and bytes.
 *
 * MVE: four output rows per 16-byte input load, VMLADAVA dot products, offsets folded in once; layers of 16
 * inputs or fewer: one predicated load per row and the requantization constants formed once per call.
 *
 * @param[in]      ctx            Scratch context; not read (arm_fully_connected_s8_get_buffer_size() returns 0).
 * @param[in]      fc_params      input_offset, filter_offset, output_offset, activation clamp.
 * @param[in]      quant_params   multiplier, shift.
 * @param[in]      input_dims     n = batches B.
 * @param[in]      input_data     Input, int8 [B][D].
 * @param[in]      filter_dims    n = accumulation depth D.
 * @param[in]      filter_data    Weights, int8 [C_OUT][D], row major.
 * @param[in]      bias_dims      Not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    c = output depth C_OUT.
 * @param[out]     output_data    Output, int8 [B][C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_fully_connected_mve_s8(const cmsis_nn_context *ctx,
                                                   const cmsis_nn_fc_params *fc_params,
                                                   const cmsis_nn_per_tensor_quant_params *quant_params,
                                                   const cmsis_nn_dims *input_dims,
                                                   const int8_t *input_data,
                                                   const cmsis_nn_dims *filter_dims,
                                                   const int8_t *filter_data,
                                                   const cmsis_nn_dims *bias_dims,
                                                   const int32_t *bias_data,
                                                   const cmsis_nn_dims *output_dims,
                                                   int8_t *output_data);

/**
 * @brief int8 fully connected layer, per output channel requantization (TFLM FullyConnectedPerChannel):
 *        arm_fully_connected_per_channel_s8's arguments and bytes.
 *
 * @param[in]      ctx            Scratch context; not read (arm_fully_connected_s8_get_buffer_size() returns 0).
 * @param[in]      fc_params      input_offset, filter_offset, output_offset, activation clamp.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT].
 * @param[in]      input_dims     n = batches B.
 * @param[in]      input_data     Input, int8 [B][D].
 * @param[in]      filter_dims    n = accumulation depth D.
 * @param[in]      filter_data    Weights, int8 [C_OUT][D], row major.
 * @param[in]      bias_dims      Not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    c = output depth C_OUT.
 * @param[out]     output_data    Output, int8 [B][C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_fully_connected_per_channel_mve_s8(const cmsis_nn_context *ctx,
                                                               const cmsis_nn_fc_params *fc_params,
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
 * @brief int8 average pooling (TFLM AveragePool): arm_avgpool_s8's arguments and bytes.
 *
 * MVE: each window summed 16 channels at a time (int16 lanes for windows of fewer than 256 values, int32
 * lanes otherwise), the rounding division and clamp per channel as the portable kernel does them.
 *
 * @param[in]      ctx            Scratch context; not read (arm_avgpool_s8_get_buffer_size() returns 0).
 * @param[in]      pool_params    Stride (>= 1), top/left padding, activation clamp (int8 domain).
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    h, w = window KH, KW; n and c are not read.
 * @param[in]      output_dims    h, w = OH, OW; n and c are not read (N and C come from input_dims).
 * @param[out]     output_data    Output, int8 [N, OH, OW, C].
 *
 * @return As arm_avgpool_s8 (ARM_CMSIS_NN_ARG_ERROR for a stride < 1 or an empty window, at the same point).
 */
arm_cmsis_nn_status pockmcu_avgpool_mve_s8(const cmsis_nn_context *ctx,
                                           const cmsis_nn_pool_params *pool_params,
                                           const cmsis_nn_dims *input_dims,
                                           const int8_t *input_data,
                                           const cmsis_nn_dims *filter_dims,
                                           const cmsis_nn_dims *output_dims,
                                           int8_t *output_data);

/**
 * @brief int8 element-wise addition of two same-shape tensors (TFLM ADD): arm_elementwise_add_s8's arguments and
 *        bytes.
 *
 * MVE: four elements per int32 vector, the three requantizations per vector (the bits of pockmcu_requantize).
 *
 * @param[in]      input_1_vect       First input, int8 [block_size].
 * @param[in]      input_2_vect       Second input, int8 [block_size].
 * @param[in]      input_1_offset     -zero point of the first input.
 * @param[in]      input_1_mult       Multiplier of the first input.
 * @param[in]      input_1_shift      Its shift.
 * @param[in]      input_2_offset     -zero point of the second input.
 * @param[in]      input_2_mult       Multiplier of the second input.
 * @param[in]      input_2_shift      Its shift.
 * @param[in]      left_shift         Headroom shift applied to both inputs (20 for int8); outside [0, 31] the
 *                                    portable kernel runs.
 * @param[out]     output             Output, int8 [block_size].
 * @param[in]      out_offset         Output zero point.
 * @param[in]      out_mult           Output multiplier.
 * @param[in]      out_shift          Output shift.
 * @param[in]      out_activation_min Lower clamp (int8 domain).
 * @param[in]      out_activation_max Upper clamp (int8 domain).
 * @param[in]      block_size         Number of elements.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_elementwise_add_mve_s8(const int8_t *input_1_vect,
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

#endif /* POCKMCU_NN_MVE_H */
