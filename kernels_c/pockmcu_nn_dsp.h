/*
 * pockmcu_nn_dsp.h - int8 convolution and fully connected kernels for cores with the Armv7E-M / Armv8-M
 * DSP extension (Cortex-M4, M7, M33, M55), CMSIS-NN API.
 *
 * Each kernel takes the arguments of its portable counterpart (arm_convolve_wrapper_s8,
 * arm_fully_connected_s8, arm_fully_connected_per_channel_s8 and their onnxruntime variants
 * pockmcu_convolve_ort_s8, pockmcu_fully_connected_ort_s8, pockmcu_fully_connected_per_channel_ort_s8)
 * and writes the same bytes, plus a scratch buffer sized by its *_get_buffer_size query. They are
 * written with pockmcu_simd.h only: SXTAB16 / SXTB16 / SMLAD on a DSP core, bit-exact portable C
 * elsewhere (Cortex-M3, the host simulation), so every core and the host run the same loops
 * (pockmcu_dsp_loops.h explains them: input offset added while the input is widened to int16 once
 * per output pixel, 4 pixels x 1 output channel per inner loop, any channel count).
 *
 * When the fast path does not apply (input_offset outside [-127, 128], a negative multiplier (TFLM
 * numerics), act_min > act_max, grouped convolution, a non-zero FC filter_offset, no or too small
 * scratch, a "1x1" kernel given another geometry) the kernel calls its portable counterpart, so every
 * call is correct.
 */
#ifndef POCKMCU_NN_DSP_H
#define POCKMCU_NN_DSP_H

#include "pockmcu_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Pointwise convolution (1x1 filter, stride 1, no padding) as a matrix multiply, no im2col;
 *        TFLite Micro's numerics (the bytes of arm_convolve_wrapper_s8).
 *
 * @param[in, out] ctx            Scratch, 4-byte aligned, of
 *                                pockmcu_convolve_1x1_s8_dsp_get_buffer_size() bytes.
 * @param[in]      conv_params    input_offset (-input zero point), output_offset, stride, padding (top, left),
 *                                dilation, activation range; as for arm_convolve_wrapper_s8.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: TFLM QuantizeMultiplier of
 *                                s_in * s_w[oc] / s_out (double rounding).
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      filter_data    Filter, int8, OHWI (flash or RAM; read as stored).
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    Output shape [N, H_OUT, W_OUT, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or the portable kernel's status.
 */
arm_cmsis_nn_status pockmcu_convolve_1x1_s8_dsp(const cmsis_nn_context *ctx,
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
 * @brief Scratch bytes of pockmcu_convolve_1x1_s8_dsp.
 *
 * @param[in]      conv_params    Not read.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      output_dims    Not read.
 *
 * @return with R = 4 output pixels (2 or 1 when there are fewer): 4 * R * (2 * (C_IN / 4) + C_IN % 4),
 *         the int16 column.
 */
int32_t pockmcu_convolve_1x1_s8_dsp_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                    const cmsis_nn_dims *input_dims,
                                                    const cmsis_nn_dims *filter_dims,
                                                    const cmsis_nn_dims *output_dims);

/**
 * @brief Convolution of any filter size, stride, dilation and padding: im2col of four output pixels
 *        into scratch, then the matrix multiply; TFLite Micro's numerics (the bytes of arm_convolve_wrapper_s8).
 *
 * @param[in, out] ctx            Scratch, 4-byte aligned, of
 *                                pockmcu_convolve_s8_dsp_get_buffer_size() bytes.
 * @param[in]      conv_params    input_offset (-input zero point), output_offset, stride, padding (top, left),
 *                                dilation, activation range; as for arm_convolve_wrapper_s8.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: TFLM QuantizeMultiplier of
 *                                s_in * s_w[oc] / s_out (double rounding).
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      filter_data    Filter, int8, OHWI (flash or RAM; read as stored).
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    Output shape [N, H_OUT, W_OUT, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or the portable kernel's status.
 */
arm_cmsis_nn_status pockmcu_convolve_s8_dsp(const cmsis_nn_context *ctx,
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
 * @brief Scratch bytes of pockmcu_convolve_s8_dsp.
 *
 * @param[in]      conv_params    Not read.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      output_dims    Not read.
 *
 * @return with D = KH * KW * C_IN and R = 4 output pixels (2 or 1 when there are fewer):
 *         4 * R * (2 * (D / 4) + D % 4) (the int16 column) + D rounded up to a multiple of 4 (one int8
 *         receptive field).
 */
int32_t pockmcu_convolve_s8_dsp_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const cmsis_nn_dims *output_dims);

/**
 * @brief pockmcu_convolve_1x1_s8_dsp with onnxruntime's requantization (the bytes of
 *        pockmcu_convolve_ort_s8).
 *
 * @param[in, out] ctx            Scratch, 4-byte aligned, of
 *                                pockmcu_convolve_1x1_ort_s8_dsp_get_buffer_size() bytes.
 * @param[in]      conv_params    input_offset (-input zero point), output_offset, stride, padding (top, left),
 *                                dilation, activation range; as for arm_convolve_wrapper_s8.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: mantissa and exponent of
 *                                the float32 scale float32(s_in * s_w[oc]) / s_out (onnxruntime).
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      filter_data    Filter, int8, OHWI (flash or RAM; read as stored).
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    Output shape [N, H_OUT, W_OUT, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or the portable kernel's status.
 */
arm_cmsis_nn_status pockmcu_convolve_1x1_ort_s8_dsp(const cmsis_nn_context *ctx,
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
 * @brief Scratch bytes of pockmcu_convolve_1x1_ort_s8_dsp.
 *
 * @param[in]      conv_params    Not read.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      output_dims    Not read.
 *
 * @return with R = 4 output pixels (2 or 1 when there are fewer): 4 * R * (2 * (C_IN / 4) + C_IN % 4),
 *         the int16 column.
 */
int32_t pockmcu_convolve_1x1_ort_s8_dsp_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                        const cmsis_nn_dims *input_dims,
                                                        const cmsis_nn_dims *filter_dims,
                                                        const cmsis_nn_dims *output_dims);

/**
 * @brief pockmcu_convolve_s8_dsp with onnxruntime's requantization (the bytes of
 *        pockmcu_convolve_ort_s8).
 *
 * @param[in, out] ctx            Scratch, 4-byte aligned, of
 *                                pockmcu_convolve_ort_s8_dsp_get_buffer_size() bytes.
 * @param[in]      conv_params    input_offset (-input zero point), output_offset, stride, padding (top, left),
 *                                dilation, activation range; as for arm_convolve_wrapper_s8.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: mantissa and exponent of
 *                                the float32 scale float32(s_in * s_w[oc]) / s_out (onnxruntime).
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      input_data     Input, int8, NHWC.
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      filter_data    Filter, int8, OHWI (flash or RAM; read as stored).
 * @param[in]      bias_dims      Bias shape [C_OUT]; not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    Output shape [N, H_OUT, W_OUT, C_OUT].
 * @param[out]     output_data    Output, int8, NHWC.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or the portable kernel's status.
 */
arm_cmsis_nn_status pockmcu_convolve_ort_s8_dsp(const cmsis_nn_context *ctx,
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
 * @brief Scratch bytes of pockmcu_convolve_ort_s8_dsp.
 *
 * @param[in]      conv_params    Not read.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      output_dims    Not read.
 *
 * @return with D = KH * KW * C_IN and R = 4 output pixels (2 or 1 when there are fewer):
 *         4 * R * (2 * (D / 4) + D % 4) (the int16 column) + D rounded up to a multiple of 4 (one int8
 *         receptive field).
 */
int32_t pockmcu_convolve_ort_s8_dsp_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                    const cmsis_nn_dims *input_dims,
                                                    const cmsis_nn_dims *filter_dims,
                                                    const cmsis_nn_dims *output_dims);

/**
 * @brief Fully connected layer, per-tensor requantization, TFLite Micro's numerics (the bytes of
 *        arm_fully_connected_s8).
 *
 * @param[in, out] ctx            Scratch, 4-byte aligned, of
 *                                pockmcu_fully_connected_s8_dsp_get_buffer_size() bytes.
 * @param[in]      fc_params      input_offset (-input zero point), filter_offset (must be 0 for the fast path),
 *                                output_offset, activation range.
 * @param[in]      quant_params   multiplier, shift: TFLM QuantizeMultiplier of float32(s_in * s_w) / s_out.
 * @param[in]      input_dims     n = batches; the input is read as [n, D].
 * @param[in]      input_data     Input, int8 [n, D].
 * @param[in]      filter_dims    n = D (accumulation depth).
 * @param[in]      filter_data    Filter, int8 [C_OUT][D] row major (flash or RAM; read as stored).
 * @param[in]      bias_dims      Not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    c = C_OUT.
 * @param[out]     output_data    Output, int8 [n, C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or the portable kernel's status.
 */
arm_cmsis_nn_status pockmcu_fully_connected_s8_dsp(const cmsis_nn_context *ctx,
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
 * @brief Scratch bytes of pockmcu_fully_connected_s8_dsp.
 *
 * @param[in]      input_dims     n = batches.
 * @param[in]      filter_dims    n = D (accumulation depth).
 *
 * @return 4 * R * (2 * (D / 4) + D % 4) with R = 4 rows when n >= 4, else 2 or 1: the int16 column.
 */
int32_t pockmcu_fully_connected_s8_dsp_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                       const cmsis_nn_dims *filter_dims);

/**
 * @brief Fully connected layer, per-channel requantization, TFLite Micro's numerics (the bytes of
 *        arm_fully_connected_per_channel_s8).
 *
 * @param[in, out] ctx            Scratch, 4-byte aligned, of
 *                                pockmcu_fully_connected_per_channel_s8_dsp_get_buffer_size() bytes.
 * @param[in]      fc_params      input_offset (-input zero point), filter_offset (must be 0 for the fast path),
 *                                output_offset, activation range.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: TFLM QuantizeMultiplier of s_in * s_w[o] / s_out.
 * @param[in]      input_dims     n = batches; the input is read as [n, D].
 * @param[in]      input_data     Input, int8 [n, D].
 * @param[in]      filter_dims    n = D (accumulation depth).
 * @param[in]      filter_data    Filter, int8 [C_OUT][D] row major (flash or RAM; read as stored).
 * @param[in]      bias_dims      Not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    c = C_OUT.
 * @param[out]     output_data    Output, int8 [n, C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or the portable kernel's status.
 */
arm_cmsis_nn_status pockmcu_fully_connected_per_channel_s8_dsp(const cmsis_nn_context *ctx,
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
 * @brief Scratch bytes of pockmcu_fully_connected_per_channel_s8_dsp.
 *
 * @param[in]      input_dims     n = batches.
 * @param[in]      filter_dims    n = D (accumulation depth).
 *
 * @return 4 * R * (2 * (D / 4) + D % 4) with R = 4 rows when n >= 4, else 2 or 1: the int16 column.
 */
int32_t pockmcu_fully_connected_per_channel_s8_dsp_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                                   const cmsis_nn_dims *filter_dims);

/**
 * @brief pockmcu_fully_connected_s8_dsp with onnxruntime's requantization (the bytes of
 *        pockmcu_fully_connected_ort_s8).
 *
 * @param[in, out] ctx            Scratch, 4-byte aligned, of
 *                                pockmcu_fully_connected_ort_s8_dsp_get_buffer_size() bytes.
 * @param[in]      fc_params      input_offset (-input zero point), filter_offset (must be 0 for the fast path),
 *                                output_offset, activation range.
 * @param[in]      quant_params   mantissa and exponent of the float32 scale (onnxruntime).
 * @param[in]      input_dims     n = batches; the input is read as [n, D].
 * @param[in]      input_data     Input, int8 [n, D].
 * @param[in]      filter_dims    n = D (accumulation depth).
 * @param[in]      filter_data    Filter, int8 [C_OUT][D] row major (flash or RAM; read as stored).
 * @param[in]      bias_dims      Not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    c = C_OUT.
 * @param[out]     output_data    Output, int8 [n, C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or the portable kernel's status.
 */
arm_cmsis_nn_status pockmcu_fully_connected_ort_s8_dsp(const cmsis_nn_context *ctx,
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
 * @brief Scratch bytes of pockmcu_fully_connected_ort_s8_dsp.
 *
 * @param[in]      input_dims     n = batches.
 * @param[in]      filter_dims    n = D (accumulation depth).
 *
 * @return 4 * R * (2 * (D / 4) + D % 4) with R = 4 rows when n >= 4, else 2 or 1: the int16 column.
 */
int32_t pockmcu_fully_connected_ort_s8_dsp_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                           const cmsis_nn_dims *filter_dims);

/**
 * @brief pockmcu_fully_connected_per_channel_s8_dsp with onnxruntime's requantization (the bytes of
 *        pockmcu_fully_connected_per_channel_ort_s8).
 *
 * @param[in, out] ctx            Scratch, 4-byte aligned, of
 *                                pockmcu_fully_connected_per_channel_ort_s8_dsp_get_buffer_size() bytes.
 * @param[in]      fc_params      input_offset (-input zero point), filter_offset (must be 0 for the fast path),
 *                                output_offset, activation range.
 * @param[in]      quant_params   multiplier[C_OUT], shift[C_OUT]: mantissa and exponent of each float32 scale
 * (onnxruntime).
 * @param[in]      input_dims     n = batches; the input is read as [n, D].
 * @param[in]      input_data     Input, int8 [n, D].
 * @param[in]      filter_dims    n = D (accumulation depth).
 * @param[in]      filter_data    Filter, int8 [C_OUT][D] row major (flash or RAM; read as stored).
 * @param[in]      bias_dims      Not read.
 * @param[in]      bias_data      Bias, int32 [C_OUT], or NULL.
 * @param[in]      output_dims    c = C_OUT.
 * @param[out]     output_data    Output, int8 [n, C_OUT].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or the portable kernel's status.
 */
arm_cmsis_nn_status
pockmcu_fully_connected_per_channel_ort_s8_dsp(const cmsis_nn_context *ctx,
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
 * @brief Scratch bytes of pockmcu_fully_connected_per_channel_ort_s8_dsp.
 *
 * @param[in]      input_dims     n = batches.
 * @param[in]      filter_dims    n = D (accumulation depth).
 *
 * @return 4 * R * (2 * (D / 4) + D % 4) with R = 4 rows when n >= 4, else 2 or 1: the int16 column.
 */
int32_t pockmcu_fully_connected_per_channel_ort_s8_dsp_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                                       const cmsis_nn_dims *filter_dims);

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_DSP_H */
