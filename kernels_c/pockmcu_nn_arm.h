/*
 * pockmcu_nn_arm.h - the int8 forward layers with CMSIS-NN's names and API (arm_*).
 *
 * Portable C99 implementations live in kernels_c/arm_*.c; they compute what TFLite Micro's reference
 * integer kernels compute, bit for bit (TFLM's double rounding MultiplyByQuantizedMultiplier). With
 * POCKMCU_USE_CMSIS_NN defined, Arm's "arm_nnfunctions.h" declares these functions instead and the
 * build links Arm's CMSIS-NN in place of kernels_c/arm_*.c.
 *
 * Every kernel with a cmsis_nn_context argument has a *_get_buffer_size query, as in CMSIS-NN; the
 * portable kernels need no scratch and their queries return 0.
 */
#ifndef POCKMCU_NN_ARM_H
#define POCKMCU_NN_ARM_H

#include "pockmcu_nn_types.h"

#ifdef POCKMCU_USE_CMSIS_NN

    #include "arm_nnfunctions.h"

#else /* !POCKMCU_USE_CMSIS_NN */

    #ifdef __cplusplus
extern "C" {
    #endif

/**
 * @brief int8 2D convolution with per output channel requantization (TFLM ConvPerChannel).
 *
 * Out-of-image taps contribute nothing (they read the input zero point). Grouped convolution when
 * input_dims->c is a multiple of filter_dims->c: groups = C_IN / filter_dims->c, and output channel o
 * reads input channels [(o / (C_OUT / groups)) * filter_dims->c, + filter_dims->c).
 *
 * @param[in]      ctx            Scratch context; not read (arm_convolve_wrapper_s8_get_buffer_size() returns 0).
 * @param[in]      conv_params    input_offset = -input zero point, output_offset = output zero point,
 *                                stride and dilation (>= 1), top/left padding, activation clamp (int8 domain).
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: QuantizeMultiplier(s_in * s_w[o] / s_out).
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN / groups].
 * @param[in]      filter_data    Filter, int8, OHWI.
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT] in units of s_in * s_w[o], or NULL for none.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if filter_dims->c does not divide C_IN, groups
 *         does not divide C_OUT, or a stride or dilation is < 1.
 */
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
                                            int8_t *output_data);

/**
 * @brief Scratch size of arm_convolve_wrapper_s8.
 *
 * @param[in]      conv_params    As for arm_convolve_wrapper_s8; not read.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN]; not read.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN / groups]; not read.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT]; not read.
 *
 * @return Scratch bytes for ctx->buf: 0 for the portable kernel.
 */
int32_t arm_convolve_wrapper_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const cmsis_nn_dims *output_dims);

/**
 * @brief int8 depthwise convolution with per output channel requantization (TFLM DepthwiseConvPerChannel).
 *
 * Output channel oc = ic * ch_mult + m reads input channel ic with the weights filter[0][ky][kx][oc].
 *
 * @param[in]      ctx            Scratch context; not read (arm_depthwise_conv_wrapper_s8_get_buffer_size() returns 0).
 * @param[in]      dw_conv_params input_offset = -input zero point, output_offset = output zero point,
 *                                ch_mult (>= 1), stride and dilation (>= 1), top/left padding, activation clamp.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: QuantizeMultiplier(s_in * s_w[oc] / s_out).
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [1, KH, KW, C_OUT], C_OUT = C_IN * ch_mult.
 * @param[in]      filter_data    Filter, int8, 1HWC.
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT] in units of s_in * s_w[oc], or NULL for none.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if ch_mult < 1, output_dims->c != C_IN * ch_mult,
 *         or a stride or dilation is < 1.
 */
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
                                                  int8_t *output_data);

/**
 * @brief Scratch size of arm_depthwise_conv_wrapper_s8.
 *
 * @param[in]      dw_conv_params As for arm_depthwise_conv_wrapper_s8; not read.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN]; not read.
 * @param[in]      filter_dims    Filter shape [1, KH, KW, C_OUT]; not read.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT]; not read.
 *
 * @return Scratch bytes for ctx->buf: 0 for the portable kernel.
 */
int32_t arm_depthwise_conv_wrapper_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const cmsis_nn_dims *output_dims);

/**
 * @brief int8 fully connected layer with per tensor requantization (TFLM FullyConnected).
 *
 * out[b][o] = clamp(requantize(sum_d (filter[o][d] + filter_offset) * (input[b][d] + input_offset) + bias[o])
 *             + output_offset), d over the accumulation depth D = filter_dims->n.
 *
 * @param[in]      ctx            Scratch context; not read (arm_fully_connected_s8_get_buffer_size() returns 0).
 * @param[in]      fc_params      input_offset = -input zero point, filter_offset = -filter zero point,
 *                                output_offset = output zero point, activation clamp (int8 domain).
 * @param[in]      quant_params   multiplier, shift: QuantizeMultiplier(s_in * s_w / s_out).
 * @param[in]      input_dims     n = batches B; the other fields are not read.
 * @param[in]      input_data     Input, int8 [B][D].
 * @param[in]      filter_dims    n = accumulation depth D; the other fields are not read.
 * @param[in]      filter_data    Weights, int8 [C_OUT][D], row major.
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT] in units of s_in * s_w, or NULL for none.
 * @param[in]      output_dims    c = output depth C_OUT; the other fields are not read.
 * @param[out]     output_data    Output, int8 [B][C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx,
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
 * @brief int8 fully connected layer with per output channel requantization (TFLM FullyConnectedPerChannel).
 *
 * As arm_fully_connected_s8, with multiplier[o] and shift[o] for output o. filter_offset is applied as
 * in the per tensor kernel (TFLM and CMSIS-NN require it to be 0 for per-channel weights).
 *
 * @param[in]      ctx            Scratch context; not read (arm_fully_connected_s8_get_buffer_size() returns 0).
 * @param[in]      fc_params      input_offset, filter_offset, output_offset and activation clamp, as for
 *                                arm_fully_connected_s8.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: QuantizeMultiplier(s_in * s_w[o] / s_out).
 * @param[in]      input_dims     n = batches B; the other fields are not read.
 * @param[in]      input_data     Input, int8 [B][D].
 * @param[in]      filter_dims    n = accumulation depth D; the other fields are not read.
 * @param[in]      filter_data    Weights, int8 [C_OUT][D], row major.
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT] in units of s_in * s_w[o], or NULL for none.
 * @param[in]      output_dims    c = output depth C_OUT; the other fields are not read.
 * @param[out]     output_data    Output, int8 [B][C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status arm_fully_connected_per_channel_s8(const cmsis_nn_context *ctx,
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
 * @brief Scratch size of arm_fully_connected_s8 and arm_fully_connected_per_channel_s8.
 *
 * @param[in]      filter_dims    Filter shape, n = accumulation depth; not read.
 *
 * @return Scratch bytes for ctx->buf: 0 for the portable kernels.
 */
int32_t arm_fully_connected_s8_get_buffer_size(const cmsis_nn_dims *filter_dims);

/**
 * @brief int8 average pooling (TFLM AveragePool).
 *
 * Each window is clipped to the image; its in-bounds values are summed and divided by their count,
 * rounding half away from zero, then clamped to the activation range.
 *
 * @param[in]      ctx            Scratch context; not read (arm_avgpool_s8_get_buffer_size() returns 0).
 * @param[in]      pool_params    Stride (>= 1), top/left padding, activation clamp (int8 domain).
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    h, w = window KH, KW; n and c are not read.
 * @param[in]      output_dims    h, w = OH, OW; n and c are not read (N and C come from input_dims).
 * @param[out]     output_data    Output, int8 [N, OH, OW, C].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride < 1 or a window with no in-bounds
 *         input (as TFLM; output_data is then partly written).
 */
arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context *ctx,
                                   const cmsis_nn_pool_params *pool_params,
                                   const cmsis_nn_dims *input_dims,
                                   const int8_t *input_data,
                                   const cmsis_nn_dims *filter_dims,
                                   const cmsis_nn_dims *output_dims,
                                   int8_t *output_data);

/**
 * @brief Scratch size of arm_avgpool_s8.
 *
 * @param[in]      dim_dst_width  Output width OW; not read.
 * @param[in]      ch_src         Input channels C; not read.
 *
 * @return Scratch bytes for ctx->buf: 0 for the portable kernel.
 */
int32_t arm_avgpool_s8_get_buffer_size(const int dim_dst_width, const int ch_src);

/**
 * @brief int8 max pooling (TFLM MaxPool).
 *
 * The maximum over each window clipped to the image (padded positions are ignored; an empty window
 * gives -128), clamped to the activation range. No scratch buffer and no size query.
 *
 * @param[in]      ctx            Scratch context; not read.
 * @param[in]      pool_params    Stride (>= 1), top/left padding, activation clamp (int8 domain).
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    h, w = window KH, KW; n and c are not read.
 * @param[in]      output_dims    h, w = OH, OW; n and c are not read (N and C come from input_dims).
 * @param[out]     output_data    Output, int8 [N, OH, OW, C].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride < 1.
 */
arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx,
                                    const cmsis_nn_pool_params *pool_params,
                                    const cmsis_nn_dims *input_dims,
                                    const int8_t *input_data,
                                    const cmsis_nn_dims *filter_dims,
                                    const cmsis_nn_dims *output_dims,
                                    int8_t *output_data);

/**
 * @brief int8 element-wise addition of two same-shape tensors (TFLM ADD).
 *
 * a = requantize((x1 + input_1_offset) << left_shift, input_1_mult, input_1_shift), b likewise for x2;
 * out = clamp(requantize(a + b, out_mult, out_shift) + out_offset). Each output element depends only on
 * the input elements at its own index. No scratch buffer.
 *
 * @param[in]      input_1_vect       First input, int8 [block_size].
 * @param[in]      input_2_vect       Second input, int8 [block_size].
 * @param[in]      input_1_offset     -zero point of the first input.
 * @param[in]      input_1_mult       Multiplier of the first input: QuantizeMultiplier(s_1 / (2 * max(s_1, s_2))).
 * @param[in]      input_1_shift      Its shift, <= 0 (TFLM's SmallerThanOneExp).
 * @param[in]      input_2_offset     -zero point of the second input.
 * @param[in]      input_2_mult       Multiplier of the second input: QuantizeMultiplier(s_2 / (2 * max(s_1, s_2))).
 * @param[in]      input_2_shift      Its shift, <= 0.
 * @param[in]      left_shift         Headroom shift applied to both inputs: 20 for int8 (TFLM).
 * @param[out]     output             Output, int8 [block_size].
 * @param[in]      out_offset         Output zero point.
 * @param[in]      out_mult           Output multiplier: QuantizeMultiplier(2 * max(s_1, s_2) / (2^left_shift * s_out)).
 * @param[in]      out_shift          Output shift.
 * @param[in]      out_activation_min Lower clamp (int8 domain).
 * @param[in]      out_activation_max Upper clamp (int8 domain).
 * @param[in]      block_size         Number of elements.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status arm_elementwise_add_s8(const int8_t *input_1_vect,
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

/**
 * @brief int8 softmax over each row (TFLM Softmax<int8_t, int8_t>, integer exp path).
 *
 * Output zero point -128, scale 1/256. Entries with x - max(row) < diff_min give -128. Rows whose sum of
 * exponentials reaches 512 (where TFLM would abort) give -128 everywhere. No scratch buffer.
 *
 * @param[in]      input          Input, int8 [num_rows][row_size].
 * @param[in]      num_rows       Number of rows.
 * @param[in]      row_size       Elements per row (the softmax axis).
 * @param[in]      mult           Input multiplier from TFLM's PreprocessSoftmaxScaling(beta, s_in, 5 integer bits).
 * @param[in]      shift          Its input_left_shift, >= 0.
 * @param[in]      diff_min       Smallest x - max(row) that counts: -CalculateInputRadius(5, shift, 31).
 * @param[out]     output         Output, int8 [num_rows][row_size].
 */
void arm_softmax_s8(const int8_t *input,
                    const int32_t num_rows,
                    const int32_t row_size,
                    const int32_t mult,
                    const int32_t shift,
                    const int32_t diff_min,
                    int8_t *output);

/**
 * @brief int8 concatenation along x, the innermost axis of tensors seen as [w][z][y][x].
 *
 * Copies the input into the output rows (of output_x values) starting at x = offset_x; pure data
 * movement (TFLM CONCATENATION with equal input and output quantization). No scratch buffer.
 *
 * @param[in]      input          Input, int8 [input_w][input_z][input_y][input_x].
 * @param[in]      input_x        Input extent along x.
 * @param[in]      input_y        Input extent along y.
 * @param[in]      input_z        Input extent along z.
 * @param[in]      input_w        Input extent along w.
 * @param[in,out]  output         Output, int8 [input_w][input_z][input_y][output_x]; only the input's slot is written.
 * @param[in]      output_x       Output extent along x.
 * @param[in]      offset_x       x index in the output of the input's first column.
 */
void arm_concatenation_s8_x(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint16_t output_x,
                            const uint32_t offset_x);

/**
 * @brief int8 concatenation along y of tensors seen as [w][z][y][x].
 *
 * @param[in]      input          Input, int8 [input_w][input_z][input_y][input_x].
 * @param[in]      input_x        Input extent along x (same in the output).
 * @param[in]      input_y        Input extent along y.
 * @param[in]      input_z        Input extent along z.
 * @param[in]      input_w        Input extent along w.
 * @param[in,out]  output         Output, int8 [input_w][input_z][output_y][input_x]; only the input's slot is written.
 * @param[in]      output_y       Output extent along y.
 * @param[in]      offset_y       y index in the output of the input's first row.
 */
void arm_concatenation_s8_y(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint16_t output_y,
                            const uint32_t offset_y);

/**
 * @brief int8 concatenation along z of tensors seen as [w][z][y][x].
 *
 * @param[in]      input          Input, int8 [input_w][input_z][input_y][input_x].
 * @param[in]      input_x        Input extent along x (same in the output).
 * @param[in]      input_y        Input extent along y (same in the output).
 * @param[in]      input_z        Input extent along z.
 * @param[in]      input_w        Input extent along w.
 * @param[in,out]  output         Output, int8 [input_w][output_z][input_y][input_x]; only the input's slot is written.
 * @param[in]      output_z       Output extent along z.
 * @param[in]      offset_z       z index in the output of the input's first plane.
 */
void arm_concatenation_s8_z(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint16_t output_z,
                            const uint32_t offset_z);

/**
 * @brief int8 concatenation along w, the outermost axis of tensors seen as [w][z][y][x].
 *
 * Copies the whole input to output + offset_w * input_x * input_y * input_z.
 *
 * @param[in]      input          Input, int8 [input_w][input_z][input_y][input_x].
 * @param[in]      input_x        Input extent along x (same in the output).
 * @param[in]      input_y        Input extent along y (same in the output).
 * @param[in]      input_z        Input extent along z (same in the output).
 * @param[in]      input_w        Input extent along w.
 * @param[in,out]  output         Output, int8 [output_w][input_z][input_y][input_x]; only the input's slot is written.
 * @param[in]      offset_w       w index in the output of the input's first block.
 */
void arm_concatenation_s8_w(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint32_t offset_w);

/**
 * @brief int8 constant padding of an NHWC tensor in all four dimensions (TFLM PAD / PADV2).
 *
 * Output shape = pre_pad + input_size + post_pad in each of n, h, w, c; every position outside the
 * copied input holds pad_value. No scratch buffer.
 *
 * @param[in]      input          Input, int8, NHWC of shape input_size.
 * @param[out]     output         Output, int8, NHWC of the padded shape; fully written.
 * @param[in]      pad_value      Fill value (the output zero point, or PADV2's constant, quantized).
 * @param[in]      input_size     Input shape [N, H, W, C].
 * @param[in]      pre_pad        Elements inserted before the input in n, h, w, c (>= 0).
 * @param[in]      post_pad       Elements appended after the input in n, h, w, c (>= 0).
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status arm_pad_s8(const int8_t *input,
                               int8_t *output,
                               const int8_t pad_value,
                               const cmsis_nn_dims *input_size,
                               const cmsis_nn_dims *pre_pad,
                               const cmsis_nn_dims *post_pad);

    #ifdef __cplusplus
}
    #endif

#endif /* POCKMCU_USE_CMSIS_NN */

#endif /* POCKMCU_NN_ARM_H */
