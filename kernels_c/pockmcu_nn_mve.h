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
 * None needs scratch memory.
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
 * MVE: four output pixels' receptive fields gathered (im2col) into a fixed 512-byte stack block (about 1.1 KB of stack
 * in all), 16-byte VMLADAVA dot products, requantization over four pixels. Grouped convolutions run the portable loops.
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
 * MVE: eight output channels per int16 vector (a gather for ch_mult > 1), requantization per lane.
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
 * MVE: four output rows per 16-byte input load, VMLADAVA dot products, offsets folded in once.
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

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_MVE_H */
