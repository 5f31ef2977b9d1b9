/*
 * pockmcu_nn_ort.h - int8 forward kernels with onnxruntime's numerics.
 *
 * The ONNX frontend's default numerics (--numerics ort): outputs byte-equal to onnxruntime's CPU
 * provider. Where onnxruntime (MLAS) requantizes an int32 accumulator as
 * RoundHalfEven(float32(float32(acc) * scale)), the kernels do the same exactly with integers
 * (pockmcu_requantize_ort in pockmcu_nn_support_ort.h): multiplier/shift hold the float32 scale as a
 * 24-bit mantissa m (2^23 <= m < 2^24) and an exponent e, scale = m * 2^e
 * (pockmcu.fixedpoint_ort.f32_mant_exp). Where onnxruntime computes in float32 (average pooling, softmax,
 * DequantizeLinear -> QuantizeLinear), the float32 operations are done on IEEE bit patterns with
 * integers (pockmcu_f32_*) or tabulated at compile time. None of them needs scratch memory.
 */
#ifndef POCKMCU_NN_ORT_H
#define POCKMCU_NN_ORT_H

#include "pockmcu_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief arm_convolve_wrapper_s8 with onnxruntime's requantization (QLinearConv).
 *
 * Same loops, layouts, parameters and argument checks as arm_convolve_wrapper_s8; only the
 * requantization of the accumulator (plus bias) differs.
 *
 * @param[in]      ctx            Scratch context; not read (pockmcu_convolve_ort_s8_get_buffer_size() returns 0).
 * @param[in]      conv_params    As for arm_convolve_wrapper_s8.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: mantissa and exponent of the float32 scale
 *                                float32(s_in * s_w[o]) / s_out.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN / groups].
 * @param[in]      filter_data    Filter, int8, OHWI.
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL for none.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR as arm_convolve_wrapper_s8.
 */
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
                                            int8_t *output_data);

/**
 * @brief Scratch size of pockmcu_convolve_ort_s8.
 *
 * @param[in]      conv_params    Not read.
 * @param[in]      input_dims     Not read.
 * @param[in]      filter_dims    Not read.
 * @param[in]      output_dims    Not read.
 *
 * @return Scratch bytes for ctx->buf: 0.
 */
int32_t pockmcu_convolve_ort_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const cmsis_nn_dims *output_dims);

/**
 * @brief arm_depthwise_conv_wrapper_s8 with onnxruntime's requantization (QLinearConv, group = C_IN).
 *
 * @param[in]      ctx            Scratch context; not read (pockmcu_depthwise_conv_ort_s8_get_buffer_size() returns 0).
 * @param[in]      dw_conv_params As for arm_depthwise_conv_wrapper_s8.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: mantissa and exponent of the float32 scale
 *                                float32(s_in * s_w[oc]) / s_out.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [1, KH, KW, C_OUT], C_OUT = C_IN * ch_mult.
 * @param[in]      filter_data    Filter, int8, 1HWC.
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL for none.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR as arm_depthwise_conv_wrapper_s8.
 */
arm_cmsis_nn_status pockmcu_depthwise_conv_ort_s8(const cmsis_nn_context *ctx,
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
 * @brief Scratch size of pockmcu_depthwise_conv_ort_s8.
 *
 * @param[in]      dw_conv_params Not read.
 * @param[in]      input_dims     Not read.
 * @param[in]      filter_dims    Not read.
 * @param[in]      output_dims    Not read.
 *
 * @return Scratch bytes for ctx->buf: 0.
 */
int32_t pockmcu_depthwise_conv_ort_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const cmsis_nn_dims *output_dims);

/**
 * @brief arm_fully_connected_s8 (per tensor) with onnxruntime's requantization (QGemm / QLinearMatMul).
 *
 * @param[in]      ctx            Scratch context; not read (arm_fully_connected_s8_get_buffer_size() returns 0).
 * @param[in]      fc_params      As for arm_fully_connected_s8.
 * @param[in]      quant_params   multiplier, shift: mantissa and exponent of the float32 scale
 *                                float32(s_in * s_w) / s_out.
 * @param[in]      input_dims     n = batches B; the other fields are not read.
 * @param[in]      input_data     Input, int8 [B][D].
 * @param[in]      filter_dims    n = accumulation depth D; the other fields are not read.
 * @param[in]      filter_data    Weights, int8 [C_OUT][D], row major.
 * @param[in]      bias_dims      Not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL for none.
 * @param[in]      output_dims    c = output depth C_OUT; the other fields are not read.
 * @param[out]     output_data    Output, int8 [B][C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_fully_connected_ort_s8(const cmsis_nn_context *ctx,
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
 * @brief arm_fully_connected_per_channel_s8 with onnxruntime's requantization.
 *
 * @param[in]      ctx            Scratch context; not read (arm_fully_connected_s8_get_buffer_size() returns 0).
 * @param[in]      fc_params      As for arm_fully_connected_s8.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: mantissa and exponent of the float32 scale
 *                                float32(s_in * s_w[o]) / s_out.
 * @param[in]      input_dims     n = batches B; the other fields are not read.
 * @param[in]      input_data     Input, int8 [B][D].
 * @param[in]      filter_dims    n = accumulation depth D; the other fields are not read.
 * @param[in]      filter_data    Weights, int8 [C_OUT][D], row major.
 * @param[in]      bias_dims      Not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL for none.
 * @param[in]      output_dims    c = output depth C_OUT; the other fields are not read.
 * @param[out]     output_data    Output, int8 [B][C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_fully_connected_per_channel_ort_s8(const cmsis_nn_context *ctx,
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
 * @brief int8 MEAN over the H and W axes with onnxruntime's arithmetic (QLinearGlobalAveragePool).
 *
 * acc = sum(x) + input_offset * H * W (int32); out = clamp(RoundHalfEven(float32(float32(acc) * scale))
 * + output_offset, -128, 127), scale = float32(s_in / float32(s_out * H * W)) = mant * 2^exp.
 *
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      input_offset   -input zero point.
 * @param[in]      output_offset  Output zero point.
 * @param[in]      mant           Mantissa of scale, 2^23 <= mant < 2^24.
 * @param[in]      exp            Exponent of scale.
 * @param[out]     output_data    Output, int8 [N][C].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_mean_ort_s8(const cmsis_nn_dims *input_dims,
                                        const int8_t *input_data,
                                        int32_t input_offset,
                                        int32_t output_offset,
                                        int32_t mant,
                                        int32_t exp,
                                        int8_t *output_data);

/**
 * @brief Element-wise int8 to int8 function by table look-up: output[i] = table[input[i] + 128].
 *
 * The table holds a function computed at compile time for every int8 value, e.g. onnxruntime's
 * DequantizeLinear -> QuantizeLinear in float32, clamp included (pockmcu.fixedpoint_ort.ort_requantize_table).
 *
 * @param[in]      input_data     Input, int8 [size].
 * @param[in]      size           Number of elements.
 * @param[in]      table          int8 [256], indexed by input value + 128.
 * @param[out]     output_data    Output, int8 [size]; may be input_data (in place).
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_lut_s8(const int8_t *input_data, int32_t size, const int8_t *table, int8_t *output_data);

/**
 * @brief int8 average pooling as onnxruntime's QLinearAveragePool computes it, in float32.
 *
 * Per output: d = dq_table[x + 128] summed over the in-bounds taps (row by row, left to right), divided
 * by their count, divided by the output scale, plus the output zero point, rounded half to even, minus
 * zp_offset, clamped to pool_params->activation. Every float32 operation is IEEE-exact on bit patterns.
 * Window geometry as arm_avgpool_s8.
 *
 * @param[in]      pool_params    Stride (>= 1), top/left padding, activation clamp (int8 domain).
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    h, w = window KH, KW; n and c are not read.
 * @param[in]      output_dims    h, w = OH, OW; n and c are not read.
 * @param[in]      dq_table       float32 bit patterns [256]: float32(s_in * (x - input zero point)), index x + 128.
 * @param[in]      out_scale_bits float32 bit pattern of the output scale.
 * @param[in]      zp_bits        float32 bit pattern of the output zero point in the model's own domain
 *                                (e.g. 128 for a uint8 model).
 * @param[in]      zp_offset      Subtracted after rounding to map that domain to int8 (128 for uint8, else 0).
 * @param[out]     output_data    Output, int8 [N, OH, OW, C].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride < 1 or a window with no in-bounds
 *         input (output_data is then partly written).
 */
arm_cmsis_nn_status pockmcu_avgpool_ort_s8(const cmsis_nn_pool_params *pool_params,
                                           const cmsis_nn_dims *input_dims,
                                           const int8_t *input_data,
                                           const cmsis_nn_dims *filter_dims,
                                           const cmsis_nn_dims *output_dims,
                                           const uint32_t *dq_table,
                                           uint32_t out_scale_bits,
                                           uint32_t zp_bits,
                                           int32_t zp_offset,
                                           int8_t *output_data);

/**
 * @brief int8 softmax over each row as onnxruntime computes it, in float32.
 *
 * t = exp_table[255 - max(row) + x]; vsum = sum of t in row order. qlinear (QLinearSoftmax):
 * q = nearbyint(float32(t * y_scale) / vsum) + zp_onnx; otherwise (float Softmax between
 * DequantizeLinear and QuantizeLinear): q = nearbyint((t * float32(1 / vsum)) / y_scale) + zp_onnx.
 * q is saturated to the model's type and mapped to int8 (uint8: q - 128). Every float32 operation is
 * IEEE-exact on bit patterns.
 *
 * @param[in]      input          Input, int8 [num_rows][row_size].
 * @param[in]      num_rows       Number of rows.
 * @param[in]      row_size       Elements per row (the softmax axis).
 * @param[in]      exp_table      float32 bit patterns [256] made at compile time
 *                                (pockmcu.fixedpoint_ort.ort_softmax_table).
 * @param[in]      y_scale_bits   float32 bit pattern of floor(1 / output scale) (qlinear) or of the output scale.
 * @param[in]      zp_onnx        Output zero point in the model's own domain.
 * @param[in]      is_uint8       Nonzero if the model's output type is uint8.
 * @param[in]      qlinear        Nonzero for QLinearSoftmax's arithmetic, 0 for the float Softmax's.
 * @param[out]     output         Output, int8 [num_rows][row_size].
 */
void pockmcu_softmax_ort_s8(const int8_t *input,
                            int32_t num_rows,
                            int32_t row_size,
                            const uint32_t *exp_table,
                            uint32_t y_scale_bits,
                            int32_t zp_onnx,
                            int32_t is_uint8,
                            int32_t qlinear,
                            int8_t *output);

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_ORT_H */
