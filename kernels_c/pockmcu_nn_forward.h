/*
 * pockmcu_nn_forward.h - pockmcu's own int8 forward kernels with TFLite Micro's numerics.
 *
 * Operators CMSIS-NN has no kernel for (MEAN, LOGISTIC, QUANTIZE, DEQUANTIZE, int8 requantization),
 * the single-rounding average pool the ONNX frontend needs, and the convolution over a filter split
 * between RAM and flash that a channel-sparse on-device update uses. Requantization is TFLM's double
 * rounding MultiplyByQuantizedMultiplier unless stated otherwise; multiplier/shift pairs are TFLM's
 * QuantizeMultiplier (shift > 0 is a left shift). None of them needs scratch memory.
 */
#ifndef POCKMCU_NN_FORWARD_H
#define POCKMCU_NN_FORWARD_H

#include "pockmcu_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief int8 MEAN over the H and W axes (TFLM QuantizedMeanOrSum).
 *
 * Any reduction over a contiguous run of axes maps onto this by folding dimensions: n = product of
 * the outer axes, h * w = product of the reduced axes, c = product of the inner axes. The kernel
 * folds 1 / (H * W) into the multiplier at run time exactly as TFLM's Eval does; the result is clamped
 * to [-128, 127]. An empty reduction (H * W <= 0) writes zeros, as TFLM leaves its output.
 *
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      input_offset   -input zero point.
 * @param[in]      output_offset  Output zero point.
 * @param[in]      multiplier     QuantizeMultiplier(s_in / s_out), as TFLM's Prepare computes it.
 * @param[in]      shift          Its shift.
 * @param[out]     output_data    Output, int8 [N][C] (the same bytes with or without keep_dims).
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_mean_s8(const cmsis_nn_dims *input_dims,
                                    const int8_t *input_data,
                                    int32_t input_offset,
                                    int32_t output_offset,
                                    int32_t multiplier,
                                    int32_t shift,
                                    int8_t *output_data);

/**
 * @brief int8 LOGISTIC (sigmoid), bit-exact with TFLM's reference_integer_ops::Logistic.
 *
 * Output zero point -128, scale 1/256. The last three parameters are TFLM's
 * CalculateArithmeticOpDataLogistic results (pockmcu.fixedpoint.logistic_params).
 *
 * @param[in]      input_data         Input, int8 [size].
 * @param[in]      size               Number of elements.
 * @param[in]      input_offset       -input zero point.
 * @param[in]      input_range_radius |x - zero point| at or beyond which the output saturates to -128 or 127.
 * @param[in]      input_multiplier   Multiplier taking x - zero point to Q4.27.
 * @param[in]      input_left_shift   Its shift.
 * @param[out]     output_data        Output, int8 [size].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_logistic_s8(const int8_t *input_data,
                                        int32_t size,
                                        int32_t input_offset,
                                        int32_t input_range_radius,
                                        int32_t input_multiplier,
                                        int32_t input_left_shift,
                                        int8_t *output_data);

/**
 * @brief int8 HARD_SWISH, y = x * relu6(x + 3) / 6, bit-exact with TFLM's reference_ops::HardSwish<int8_t>.
 *
 * 16-bit fixed point as TFLM computes it (see kernels_c/pockmcu_hard_swish_s8.c); the multipliers and
 * shifts are TFLM HardSwishPrepare's: QuantizeMultiplier of the float32 quotients, cut to 16 bits by
 * DownScaleInt32ToInt16Multiplier (pockmcu.ops.hard_swish.hard_swish_params).
 *
 * @param[in]      input_data         Input, int8 [size].
 * @param[in]      size               Number of elements.
 * @param[in]      input_offset       -input zero point.
 * @param[in]      reluish_multiplier 16-bit multiplier taking (x - zp_in) * 2^7 to the scale on which real 3.0
 *                                    is 32768: (s_in / 128) / (3 / 32768).
 * @param[in]      reluish_shift      Its shift (> 0: left shift, saturating; >= -31).
 * @param[in]      output_multiplier  16-bit multiplier taking (x - zp_in) * 2^7 to the output scale:
 *                                    (s_in / 128) / s_out.
 * @param[in]      output_shift       Its shift, in [-31, 0] (TFLM refuses a model that needs a left shift).
 * @param[in]      output_offset      Output zero point.
 * @param[out]     output_data        Output, int8 [size]; may be input_data.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a shift out of range.
 */
arm_cmsis_nn_status pockmcu_hard_swish_s8(const int8_t *input_data,
                                          int32_t size,
                                          int32_t input_offset,
                                          int16_t reluish_multiplier,
                                          int32_t reluish_shift,
                                          int16_t output_multiplier,
                                          int32_t output_shift,
                                          int32_t output_offset,
                                          int8_t *output_data);

/**
 * @brief float32 to int8 QUANTIZE (TFLM AffineQuantize).
 *
 * q = round_half_away(x / scale) + zero_point (float32 division, no libm), clamped to [-128, 127];
 * +-inf and huge values saturate, NaN gives the zero point (as TFLM on Arm).
 *
 * @param[in]      input_data     Input, float32 [size].
 * @param[in]      size           Number of elements.
 * @param[in]      scale          Output scale.
 * @param[in]      zero_point     Output zero point.
 * @param[out]     output_data    Output, int8 [size].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status
pockmcu_quantize_f32_s8(const float *input_data, int32_t size, float scale, int32_t zero_point, int8_t *output_data);

/**
 * @brief int8 to float32 DEQUANTIZE (TFLM Dequantize): scale * (x - zero_point).
 *
 * The float32 product equals TFLM's (float)((double)scale * (x - zero_point)) exactly (assumes no
 * flush-to-zero, which only matters for subnormal scales).
 *
 * @param[in]      input_data     Input, int8 [size].
 * @param[in]      size           Number of elements.
 * @param[in]      scale          Input scale.
 * @param[in]      zero_point     Input zero point.
 * @param[out]     output_data    Output, float32 [size].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status
pockmcu_dequantize_s8_f32(const int8_t *input_data, int32_t size, float scale, int32_t zero_point, float *output_data);

/**
 * @brief int8 to int8 requantization (TFLM QUANTIZE int8 -> int8).
 *
 * out = clamp(MultiplyByQuantizedMultiplier(x + input_offset, multiplier, shift) + output_offset,
 * act_min, act_max). With equal scales (multiplier 2^30, shift 1) it is an exact zero point change
 * and clamp, which is how a standalone ONNX Relu / Clip on a quantized tensor is lowered.
 *
 * @param[in]      input_data     Input, int8 [size].
 * @param[in]      size           Number of elements.
 * @param[in]      input_offset   -input zero point.
 * @param[in]      multiplier     QuantizeMultiplier(s_in / s_out).
 * @param[in]      shift          Its shift.
 * @param[in]      output_offset  Output zero point.
 * @param[in]      act_min        Lower clamp (int8 domain).
 * @param[in]      act_max        Upper clamp (int8 domain).
 * @param[out]     output_data    Output, int8 [size].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_requantize_s8(const int8_t *input_data,
                                          int32_t size,
                                          int32_t input_offset,
                                          int32_t multiplier,
                                          int32_t shift,
                                          int32_t output_offset,
                                          int32_t act_min,
                                          int32_t act_max,
                                          int8_t *output_data);

/**
 * @brief int8 average pooling into another scale and zero point, with one rounding.
 *
 * Per output: out = clamp(MultiplyByQuantizedMultiplier(sum of the in-bounds (x + input_offset),
 * multipliers[count - 1], shifts[count - 1]) + output_offset), count = number of in-bounds taps.
 * Window geometry as arm_avgpool_s8. Lowers onnxruntime's QLinearAveragePool with differing input and
 * output quantization, where an average followed by a requantization would round twice.
 *
 * @param[in]      pool_params    Stride (>= 1), top/left padding, activation clamp (int8 domain).
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    h, w = window KH, KW; n and c are not read.
 * @param[in]      output_dims    h, w = OH, OW; n and c are not read.
 * @param[in]      input_offset   -input zero point.
 * @param[in]      output_offset  Output zero point.
 * @param[in]      multipliers    [KH * KW]: entry k - 1 = QuantizeMultiplier(s_in / (s_out * k)).
 * @param[in]      shifts         [KH * KW]: the matching shifts.
 * @param[out]     output_data    Output, int8 [N, OH, OW, C].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride < 1 or a window with no in-bounds
 *         input (output_data is then partly written).
 */
arm_cmsis_nn_status pockmcu_avgpool_requant_s8(const cmsis_nn_pool_params *pool_params,
                                               const cmsis_nn_dims *input_dims,
                                               const int8_t *input_data,
                                               const cmsis_nn_dims *filter_dims,
                                               const cmsis_nn_dims *output_dims,
                                               int32_t input_offset,
                                               int32_t output_offset,
                                               const int32_t *multipliers,
                                               const int32_t *shifts,
                                               int8_t *output_data);

/**
 * @brief int8 2D convolution whose filter is stored in two parts (channel-sparse training).
 *
 * Computes what arm_convolve_wrapper_s8 (ort_rounding 0) or pockmcu_convolve_ort_s8 (ort_rounding 1)
 * computes on the merged filter W, bit for bit:
 *   W[o][ky][kx][c] = filter_head[((o * KH + ky) * KW + kx) * head_c + c]   for c <  head_c
 *                   = filter_data[((o * KH + ky) * KW + kx) * C_IN + c]     for c >= head_c
 * No groups. No scratch buffer and no size query.
 *
 * @param[in]      ctx            Scratch context; not read.
 * @param[in]      conv_params    As for arm_convolve_wrapper_s8.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: TFLM QuantizeMultiplier pairs (ort_rounding
 *                                0) or float32 scale mantissas and exponents (1, see pockmcu_convolve_ort_s8).
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      filter_data    Full filter, int8, OHWI (in flash); its first head_c values of every tap are
 *                                not read.
 * @param[in]      filter_head    The first head_c input channels of every tap, int8 [C_OUT][KH][KW][head_c]
 *                                (the trained part, in RAM); NULL allowed when head_c is 0.
 * @param[in]      head_c         Channels read from filter_head, 0 <= head_c <= C_IN.
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL for none.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 * @param[in]      ort_rounding   0: TFLM's requantization; nonzero: onnxruntime's.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if input_dims->c != filter_dims->c, head_c is out of
 *         range, filter_head is NULL with head_c > 0, or as arm_convolve_wrapper_s8.
 */
arm_cmsis_nn_status pockmcu_convolve_split_s8(const cmsis_nn_context *ctx,
                                              const cmsis_nn_conv_params *conv_params,
                                              const cmsis_nn_per_channel_quant_params *quant_params,
                                              const cmsis_nn_dims *input_dims,
                                              const int8_t *input_data,
                                              const cmsis_nn_dims *filter_dims,
                                              const int8_t *filter_data,
                                              const int8_t *filter_head,
                                              int32_t head_c,
                                              const cmsis_nn_dims *bias_dims,
                                              const int32_t *bias_data,
                                              const cmsis_nn_dims *output_dims,
                                              int8_t *output_data,
                                              int32_t ort_rounding);

/* ---- classifiers as users export them (LOG_SOFTMAX, uint8 <-> int8 requantization) ---- */

/**
 * @brief int8 LOG_SOFTMAX over rows, bit-exact with TFLM's reference_ops::LogSoftmaxQuantized<int8_t>.
 *
 * Output scale 16/256, zero point 127; see kernels_c/pockmcu_log_softmax_s8.c for the arithmetic. The
 * constants are TFLM's (PreprocessLogSoftmaxScalingExp with beta 1, CalculateInputRadius;
 * pockmcu.ops.log_softmax.log_softmax_params).
 *
 * @param[in]      input                       Input, int8 [num_rows * row_size].
 * @param[in]      num_rows                    Number of rows.
 * @param[in]      row_size                    Elements per row (the log-softmax axis).
 * @param[in]      mult                        Multiplier taking x - max into Q5.26 (s_in * 2^26) ...
 * @param[in]      shift                       ... and its left shift (>= 0).
 * @param[in]      reverse_scaling_divisor     Multiplier of the inverse rescaling ...
 * @param[in]      reverse_scaling_left_shift  ... and its shift (<= 0).
 * @param[in]      diff_min                    x - max below this is left out of the sum and gives -128.
 * @param[out]     output                      Output, int8 [num_rows * row_size]; must not be input.
 */
void pockmcu_log_softmax_s8(const int8_t *input,
                            int32_t num_rows,
                            int32_t row_size,
                            int32_t mult,
                            int32_t shift,
                            int32_t reverse_scaling_divisor,
                            int32_t reverse_scaling_left_shift,
                            int32_t diff_min,
                            int8_t *output);

/**
 * @brief uint8 to int8 requantization (TFLM QUANTIZE uint8 -> int8, reference_ops::Requantize).
 *
 * out = clamp(MultiplyByQuantizedMultiplier(x + input_offset, multiplier, shift) + output_offset, -128, 127).
 * TFLM's fast path for equal scales and zero points 128 apart is pockmcu_flip_sign_8 (the same bytes).
 *
 * @param[in]      input_data     Input, uint8 [size].
 * @param[in]      size           Number of elements.
 * @param[in]      input_offset   -input zero point.
 * @param[in]      multiplier     QuantizeMultiplier(s_in / s_out).
 * @param[in]      shift          Its shift.
 * @param[in]      output_offset  Output zero point.
 * @param[out]     output_data    Output, int8 [size]; may be input_data.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_requantize_u8_s8(const uint8_t *input_data,
                                             int32_t size,
                                             int32_t input_offset,
                                             int32_t multiplier,
                                             int32_t shift,
                                             int32_t output_offset,
                                             int8_t *output_data);

/**
 * @brief int8 to uint8 requantization (TFLM QUANTIZE int8 -> uint8, reference_ops::Requantize).
 *
 * out = clamp(MultiplyByQuantizedMultiplier(x + input_offset, multiplier, shift) + output_offset, 0, 255).
 * TFLM's fast path for equal scales and zero points 128 apart is pockmcu_flip_sign_8 (the same bytes).
 *
 * @param[in]      input_data     Input, int8 [size].
 * @param[in]      size           Number of elements.
 * @param[in]      input_offset   -input zero point.
 * @param[in]      multiplier     QuantizeMultiplier(s_in / s_out).
 * @param[in]      shift          Its shift.
 * @param[in]      output_offset  Output zero point.
 * @param[out]     output_data    Output, uint8 [size]; may be input_data.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_requantize_s8_u8(const int8_t *input_data,
                                             int32_t size,
                                             int32_t input_offset,
                                             int32_t multiplier,
                                             int32_t shift,
                                             int32_t output_offset,
                                             uint8_t *output_data);
/* ---- reductions over any axes and resampling (MEAN / SUM / REDUCE_MAX / REDUCE_MIN, RESIZE_*) ---- */

/**
 * @brief int8 MEAN or SUM over any axes (TFLM QuantizedMeanOrSum), the axes folded into five groups.
 *
 * For each kept position the wrapped int32 sum of its inputs, minus input zero point * count, is
 * requantized (MultiplyByQuantizedMultiplier), offset and clamped to [-128, 127]. MEAN passes TFLM's
 * Eval-time multiplier (1 / count folded in, pockmcu.fixedpoint.mean_adjusted_multiplier), SUM the
 * Prepare-time one.
 *
 * @param[in]      shape          int32 [5]: {outer, reduced0, middle, reduced1, inner}, all > 0: the input
 *                                as kept, reduced, kept, reduced, kept axes (any axes of a rank <= 4 tensor).
 * @param[in]      input_data     Input, int8, in that layout.
 * @param[in]      input_offset   -input zero point.
 * @param[in]      output_offset  Output zero point.
 * @param[in]      multiplier     Requantization multiplier (MEAN: with 1 / count folded in).
 * @param[in]      shift          Its shift (> 0: left).
 * @param[out]     output_data    Output, int8 [outer][middle][inner].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if a group is <= 0.
 */
arm_cmsis_nn_status pockmcu_reduce_sum_s8(const int32_t *shape,
                                          const int8_t *input_data,
                                          int32_t input_offset,
                                          int32_t output_offset,
                                          int32_t multiplier,
                                          int32_t shift,
                                          int8_t *output_data);

/**
 * @brief int8 REDUCE_MAX over any axes (TFLM ReduceGeneric; input and output quantization equal).
 *
 * @param[in]      shape          int32 [5] as for pockmcu_reduce_sum_s8.
 * @param[in]      input_data     Input, int8.
 * @param[out]     output_data    Output, int8 [outer][middle][inner]: the largest of each reduced set.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if a group is <= 0.
 */
arm_cmsis_nn_status pockmcu_reduce_max_s8(const int32_t *shape, const int8_t *input_data, int8_t *output_data);

/**
 * @brief int8 REDUCE_MIN over any axes (TFLM ReduceGeneric; input and output quantization equal).
 *
 * @param[in]      shape          int32 [5] as for pockmcu_reduce_sum_s8.
 * @param[in]      input_data     Input, int8.
 * @param[out]     output_data    Output, int8 [outer][middle][inner]: the smallest of each reduced set.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if a group is <= 0.
 */
arm_cmsis_nn_status pockmcu_reduce_min_s8(const int32_t *shape, const int8_t *input_data, int8_t *output_data);

/**
 * @brief int8 RESIZE_NEAREST_NEIGHBOR from compile-time source indices (TFLM ResizeNearestNeighbor).
 *
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      output_dims    Output shape [N, OH, OW, C].
 * @param[in]      rows           int32 [OH]: the source row of each output row, in [0, H).
 * @param[in]      cols           int32 [OW]: the source column of each output column, in [0, W).
 * @param[out]     output_data    Output, int8, NHWC (same quantization as the input).
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if N or C differ between input and output.
 */
arm_cmsis_nn_status pockmcu_resize_nearest_s8(const cmsis_nn_dims *input_dims,
                                              const int8_t *input_data,
                                              const cmsis_nn_dims *output_dims,
                                              const int32_t *rows,
                                              const int32_t *cols,
                                              int8_t *output_data);

/**
 * @brief int8 RESIZE_BILINEAR, TFLM's integer path (ResizeBilinearInteger, 10-bit coordinates).
 *
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      output_dims    Output shape [N, OH, OW, C].
 * @param[in]      rows           int32 [3 OH]: {y0, y1, fy} per output row (TFLM's lower and upper source
 *                                rows and input_y - 1024 y0), computed at compile time.
 * @param[in]      cols           int32 [3 OW]: {x0, x1, fx} per output column.
 * @param[out]     output_data    Output, int8, NHWC (same quantization as the input).
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if N or C differ between input and output.
 */
arm_cmsis_nn_status pockmcu_resize_bilinear_s8(const cmsis_nn_dims *input_dims,
                                               const int8_t *input_data,
                                               const cmsis_nn_dims *output_dims,
                                               const int32_t *rows,
                                               const int32_t *cols,
                                               int8_t *output_data);
/* ---- TRANSPOSE_CONV and BATCH_MATMUL (issue 12: decoders and attention) ------------------------- */

/**
 * @brief int8 transpose convolution (TFLite TRANSPOSE_CONV), bit-exact with TFLite Micro's
 *        reference_integer_ops::TransposeConv.
 *
 * output[n,oy,ox,o] = clamp(requantize(sum of (input[n,iy,ix,c] + input_offset) * filter[o,ky,kx,c] over the
 * taps with oy = iy*stride_h - pad_h + ky, ox = ix*stride_w - pad_w + kx, + bias[o]) + output_offset), the
 * int32 sum wrapping as TFLM's. Computed by gathering (no scratch buffer, no size query).
 *
 * @param[in]      conv_params    input_offset (-input zero point), output_offset (output zero point), stride,
 *                                padding (TFLM's top/left padding_values), activation (clamp); dilation not read.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: QuantizeMultiplier of s_in * s_w[o] / s_out.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      filter_data    Filter, int8, OHWI, symmetric (zero point 0).
 * @param[in]      bias_dims      Bias shape; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL for none.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT] (any size: taps outside it are dropped).
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride < 1 or mismatched dimensions.
 */
arm_cmsis_nn_status pockmcu_transpose_conv_s8(const cmsis_nn_conv_params *conv_params,
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
 * @brief int8 batched matrix product (TFLite BATCH_MATMUL), bit-exact with TFLite Micro's
 *        reference_ops::BatchMatMul for int8.
 *
 * output[b0,b1,i,j] = clamp(requantize(sum over k of (L[i,k] + input_offset) * (R[k,j] + filter_offset)) +
 * output_offset), the int32 sum wrapping, with L the lhs matrix of batch (b0, b1) (its transpose as stored when
 * adj_x) and R the rhs matrix (its transpose as stored when adj_y). A batch dimension of 1 in an operand is
 * broadcast. No scratch buffer.
 *
 * @param[in]      fc_params      input_offset (-lhs zero point), filter_offset (-rhs zero point), output_offset
 *                                (output zero point), activation (clamp).
 * @param[in]      adj_x          Nonzero: lhs is stored [B0, B1, K, ROWS] (transposed).
 * @param[in]      adj_y          Nonzero: rhs is stored [B0, B1, COLS, K] (transposed).
 * @param[in]      quant_params   multiplier, shift: QuantizeMultiplier of s_lhs * s_rhs / s_out.
 * @param[in]      lhs_dims       lhs shape as stored {B0 or 1, B1 or 1, ROWS, K} ({.., K, ROWS} when adj_x).
 * @param[in]      lhs            lhs, int8.
 * @param[in]      rhs_dims       rhs shape as stored {B0 or 1, B1 or 1, K, COLS} ({.., COLS, K} when adj_y).
 * @param[in]      rhs            rhs, int8.
 * @param[in]      output_dims    Output shape {B0, B1, ROWS, COLS}.
 * @param[out]     output         Output, int8.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for dimensions that do not match.
 */
arm_cmsis_nn_status pockmcu_batch_matmul_s8(const cmsis_nn_fc_params *fc_params,
                                            int32_t adj_x,
                                            int32_t adj_y,
                                            const cmsis_nn_per_tensor_quant_params *quant_params,
                                            const cmsis_nn_dims *lhs_dims,
                                            const int8_t *lhs,
                                            const cmsis_nn_dims *rhs_dims,
                                            const int8_t *rhs,
                                            const cmsis_nn_dims *output_dims,
                                            int8_t *output);
/* ---- binary and unary element-wise ops (ADD/SUB/MUL/SQUARED_DIFFERENCE/MAXIMUM/MINIMUM with broadcasting,
 * PRELU, LEAKY_RELU, RELU6; pockmcu/ops/binary.py, unary.py) ---------------------------------------------- */

/**
 * @brief int8 ADD of two NumPy-broadcastable tensors (rank <= 5), TFLite Micro's arithmetic (BroadcastAdd6DSlow).
 *
 * Per output element: both inputs offset and shifted left by left_shift, each rescaled with
 * MultiplyByQuantizedMultiplierSmallerThanOneExp, summed, rescaled by the output multiplier, offset, clamped.
 *
 * @param[in]      input1_data    First input, int8.
 * @param[in]      input2_data    Second input, int8.
 * @param[in]      dims           15 values: the output shape as 5 dimensions (leading 1s), then input1's element
 *                                strides (0 on its broadcast axes), then input2's.
 * @param[in]      input1_offset  -zero point of input1.
 * @param[in]      input1_mult    input1's multiplier (Q31), scale1 / (2 max(scale1, scale2)).
 * @param[in]      input1_shift   Its exponent (<= 0).
 * @param[in]      input2_offset  -zero point of input2.
 * @param[in]      input2_mult    input2's multiplier (Q31).
 * @param[in]      input2_shift   Its exponent (<= 0).
 * @param[in]      left_shift     20 for int8.
 * @param[out]     output_data    Output, int8, row-major; may be an input whose shape is the output's.
 * @param[in]      output_offset  Output zero point.
 * @param[in]      output_mult    Output multiplier (Q31).
 * @param[in]      output_shift   Its exponent (<= 0).
 * @param[in]      act_min        Lower clamp (fused activation).
 * @param[in]      act_max        Upper clamp.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_add_broadcast_s8(const int8_t *input1_data,
                                             const int8_t *input2_data,
                                             const int32_t *dims,
                                             int32_t input1_offset,
                                             int32_t input1_mult,
                                             int32_t input1_shift,
                                             int32_t input2_offset,
                                             int32_t input2_mult,
                                             int32_t input2_shift,
                                             int32_t left_shift,
                                             int8_t *output_data,
                                             int32_t output_offset,
                                             int32_t output_mult,
                                             int32_t output_shift,
                                             int32_t act_min,
                                             int32_t act_max);

/**
 * @brief int8 SUB of two NumPy-broadcastable tensors (rank <= 5), TFLite Micro's arithmetic (BroadcastQuantSubSlow).
 *
 * Arguments as pockmcu_add_broadcast_s8; the rescaled inputs are subtracted (input1 - input2).
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_sub_s8(const int8_t *input1_data,
                                   const int8_t *input2_data,
                                   const int32_t *dims,
                                   int32_t input1_offset,
                                   int32_t input1_mult,
                                   int32_t input1_shift,
                                   int32_t input2_offset,
                                   int32_t input2_mult,
                                   int32_t input2_shift,
                                   int32_t left_shift,
                                   int8_t *output_data,
                                   int32_t output_offset,
                                   int32_t output_mult,
                                   int32_t output_shift,
                                   int32_t act_min,
                                   int32_t act_max);

/**
 * @brief int8 MUL of two NumPy-broadcastable tensors (rank <= 5), TFLite Micro's arithmetic (MulElementwise,
 *        no left shift).
 *
 * @param[in]      input1_data    First input, int8.
 * @param[in]      input2_data    Second input, int8.
 * @param[in]      dims           15 values, as for pockmcu_add_broadcast_s8.
 * @param[in]      input1_offset  -zero point of input1.
 * @param[in]      input2_offset  -zero point of input2.
 * @param[out]     output_data    Output, int8, row-major; may be an input whose shape is the output's.
 * @param[in]      output_offset  Output zero point.
 * @param[in]      output_mult    QuantizeMultiplier(scale1 * scale2 / scale_out): multiplier ...
 * @param[in]      output_shift   ... and exponent (> 0: left shift).
 * @param[in]      act_min        Lower clamp (fused activation).
 * @param[in]      act_max        Upper clamp.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_mul_s8(const int8_t *input1_data,
                                   const int8_t *input2_data,
                                   const int32_t *dims,
                                   int32_t input1_offset,
                                   int32_t input2_offset,
                                   int8_t *output_data,
                                   int32_t output_offset,
                                   int32_t output_mult,
                                   int32_t output_shift,
                                   int32_t act_min,
                                   int32_t act_max);

/**
 * @brief int8 SQUARED_DIFFERENCE of two NumPy-broadcastable tensors (rank <= 5), TFLite Micro's arithmetic.
 *
 * Inputs rescaled as in pockmcu_add_broadcast_s8 (left_shift 7), subtracted, squared, rescaled with
 * MultiplyByQuantizedMultiplier, offset and clamped to [-128, 127].
 *
 * @param[in]      input1_data    First input, int8.
 * @param[in]      input2_data    Second input, int8.
 * @param[in]      dims           15 values, as for pockmcu_add_broadcast_s8.
 * @param[in]      input1_offset  -zero point of input1.
 * @param[in]      input1_mult    input1's multiplier (Q31), scale1 / (2 max(scale1, scale2)).
 * @param[in]      input1_shift   Its exponent (<= 0).
 * @param[in]      input2_offset  -zero point of input2.
 * @param[in]      input2_mult    input2's multiplier (Q31).
 * @param[in]      input2_shift   Its exponent (<= 0).
 * @param[in]      left_shift     7 for int8.
 * @param[out]     output_data    Output, int8, row-major; may be an input whose shape is the output's.
 * @param[in]      output_offset  Output zero point.
 * @param[in]      output_mult    QuantizeMultiplier((2 max scale)^2 / (2^14 scale_out)): multiplier ...
 * @param[in]      output_shift   ... and exponent (> 0: left shift).
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_squared_difference_s8(const int8_t *input1_data,
                                                  const int8_t *input2_data,
                                                  const int32_t *dims,
                                                  int32_t input1_offset,
                                                  int32_t input1_mult,
                                                  int32_t input1_shift,
                                                  int32_t input2_offset,
                                                  int32_t input2_mult,
                                                  int32_t input2_shift,
                                                  int32_t left_shift,
                                                  int8_t *output_data,
                                                  int32_t output_offset,
                                                  int32_t output_mult,
                                                  int32_t output_shift);

/**
 * @brief int8 MAXIMUM of two NumPy-broadcastable tensors (rank <= 5): the larger stored value (TFLite Micro
 *        compares the int8 values; no requantization).
 *
 * @param[in]      input1_data    First input, int8.
 * @param[in]      input2_data    Second input, int8.
 * @param[in]      dims           15 values, as for pockmcu_add_broadcast_s8.
 * @param[out]     output_data    Output, int8, row-major; may be an input whose shape is the output's.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status
pockmcu_maximum_s8(const int8_t *input1_data, const int8_t *input2_data, const int32_t *dims, int8_t *output_data);

/**
 * @brief int8 MINIMUM of two NumPy-broadcastable tensors (rank <= 5): the smaller stored value.
 *
 * Arguments as pockmcu_maximum_s8.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status
pockmcu_minimum_s8(const int8_t *input1_data, const int8_t *input2_data, const int32_t *dims, int8_t *output_data);

/**
 * @brief int8 PRELU, alpha broadcast against the input (rank <= 5), TFLite Micro's arithmetic
 *        (BroadcastPrelu4DSlow).
 *
 * @param[in]      input_data     Input, int8.
 * @param[in]      alpha_data     Alpha, int8 (a constant).
 * @param[in]      dims           15 values: the output shape as 5 dimensions, the input's strides, alpha's.
 * @param[in]      input_offset   -zero point of the input.
 * @param[in]      alpha_offset   -zero point of alpha.
 * @param[in]      output_mult_1  QuantizeMultiplier(scale_in / scale_out) for x >= 0: multiplier ...
 * @param[in]      output_shift_1 ... and exponent.
 * @param[in]      output_mult_2  QuantizeMultiplier(scale_in * scale_alpha / scale_out) for x < 0 ...
 * @param[in]      output_shift_2 ... and exponent.
 * @param[in]      output_offset  Output zero point.
 * @param[out]     output_data    Output, int8, row-major; may be the input when their shapes are equal.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_prelu_s8(const int8_t *input_data,
                                     const int8_t *alpha_data,
                                     const int32_t *dims,
                                     int32_t input_offset,
                                     int32_t alpha_offset,
                                     int32_t output_mult_1,
                                     int32_t output_shift_1,
                                     int32_t output_mult_2,
                                     int32_t output_shift_2,
                                     int32_t output_offset,
                                     int8_t *output_data);

/**
 * @brief int8 LEAKY_RELU, TFLite Micro's arithmetic (QuantizeLeakyRelu, negative alpha included).
 *
 * @param[in]      input_data        Input, int8.
 * @param[in]      size              Number of elements.
 * @param[in]      input_zero_point  Input zero point.
 * @param[in]      mult_identity     QuantizeMultiplier(scale_in / scale_out) for x >= 0: multiplier ...
 * @param[in]      shift_identity    ... and exponent.
 * @param[in]      mult_alpha        QuantizeMultiplier(scale_in * alpha / scale_out) for x < 0 (negative for a
 *                                   negative alpha; not INT32_MIN) ...
 * @param[in]      shift_alpha       ... and exponent.
 * @param[in]      output_zero_point Output zero point.
 * @param[out]     output_data       Output, int8; may be input_data.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_leaky_relu_s8(const int8_t *input_data,
                                          int32_t size,
                                          int32_t input_zero_point,
                                          int32_t mult_identity,
                                          int32_t shift_identity,
                                          int32_t mult_alpha,
                                          int32_t shift_alpha,
                                          int32_t output_zero_point,
                                          int8_t *output_data);

/**
 * @brief int8 clamp without requantization (TFLite Micro's int8 RELU6).
 *
 * @param[in]      input_data     Input, int8.
 * @param[in]      size           Number of elements.
 * @param[in]      lo             Lower bound (the input's zero point for RELU6).
 * @param[in]      hi             Upper bound (the input's quantized 6).
 * @param[out]     output_data    Output, int8; may be input_data.
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status
pockmcu_clamp_s8(const int8_t *input_data, int32_t size, int32_t lo, int32_t hi, int8_t *output_data);

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_FORWARD_H */
