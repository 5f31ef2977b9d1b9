/*
 * pockmcu_nn_backward.h - on-device training: input gradients, activation masks and losses (float32).
 *
 * Gradients are float32 with respect to REAL (dequantized) values; the int8 weights and saved
 * activations are dequantized on the fly. Every loop has a fixed, documented summation order (see each
 * kernels_c/pockmcu_*.c), so the host and Cortex-M give identical bits (build with -ffp-contract=off).
 * Kernels that write a whole gradient zero it first. The update rule is in pockmcu_nn_train.h.
 */
#ifndef POCKMCU_NN_BACKWARD_H
#define POCKMCU_NN_BACKWARD_H

#include "pockmcu_nn_train.h"
#include "pockmcu_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Input gradient of a 2D convolution (no groups).
 *
 * grad_input[n,h,w,c] = sum over (oh, ow, i, j, o) with h = oh * stride_h - pad_h + i * dil_h (w likewise)
 * in bounds of (grad_output[n,oh,ow,o] * filter_scale[o]) * filter[o,i,j,c], summed in that order from +0;
 * terms with grad_output == 0 are skipped. No scratch buffer and no size query.
 *
 * @param[in]      conv_params    The forward's stride, padding and dilation; the offsets and activation are not read.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      filter         Filter, int8, OHWI (real weight = filter_scale[o] * filter, zero point 0).
 * @param[in]      filter_scale   float32 [C_OUT] weight scales.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 NHWC.
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32 NHWC; fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if filter_dims->c != C_IN, output_dims->c != C_OUT,
 *         a stride or dilation is < 1 or an input dimension is negative.
 */
arm_cmsis_nn_status pockmcu_conv_grad_input_f32(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const int8_t *filter,
                                                const float *filter_scale,
                                                const cmsis_nn_dims *output_dims,
                                                const float *grad_output,
                                                float *grad_input);

/**
 * @brief pockmcu_conv_grad_input_f32 for a filter stored in two parts (as pockmcu_convolve_split_s8).
 *
 * The first head_c input channels of every tap are read from filter_head, the rest from filter; the
 * result is bit-identical to pockmcu_conv_grad_input_f32 on the merged filter.
 *
 * @param[in]      conv_params    As for pockmcu_conv_grad_input_f32.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      filter         Full filter, int8, OHWI; its first head_c values of every tap are not read.
 * @param[in]      filter_head    int8 [C_OUT][KH][KW][head_c]: channels [0, head_c) of every tap.
 * @param[in]      head_c         Channels read from filter_head, 0 < head_c <= C_IN.
 * @param[in]      filter_scale   float32 [C_OUT] weight scales.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 NHWC.
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32 NHWC; fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if head_c is out of range, filter_head is NULL, or
 *         as pockmcu_conv_grad_input_f32.
 */
arm_cmsis_nn_status pockmcu_conv_grad_input_split_f32(const cmsis_nn_conv_params *conv_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const int8_t *filter,
                                                      const int8_t *filter_head,
                                                      int32_t head_c,
                                                      const float *filter_scale,
                                                      const cmsis_nn_dims *output_dims,
                                                      const float *grad_output,
                                                      float *grad_input);

/**
 * @brief Input gradient of a depthwise convolution.
 *
 * grad_input[n,h,w,ic] = sum over (oh, ow, i, j, m), in that order from +0, of
 * (grad_output[n,oh,ow,oc] * filter_scale[oc]) * filter[i,j,oc], oc = ic * ch_mult + m.
 * No scratch buffer and no size query.
 *
 * @param[in]      dw_conv_params The forward's ch_mult, stride, padding and dilation; offsets and activation not read.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      filter_dims    Filter shape [1, KH, KW, C_OUT], C_OUT = C_IN * ch_mult.
 * @param[in]      filter         Filter, int8, 1HWC.
 * @param[in]      filter_scale   float32 [C_OUT] weight scales.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 NHWC.
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32 NHWC; fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for inconsistent channel counts, ch_mult < 1, a
 *         stride or dilation < 1 or a negative input dimension.
 */
arm_cmsis_nn_status pockmcu_depthwise_conv_grad_input_f32(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                          const cmsis_nn_dims *input_dims,
                                                          const cmsis_nn_dims *filter_dims,
                                                          const int8_t *filter,
                                                          const float *filter_scale,
                                                          const cmsis_nn_dims *output_dims,
                                                          const float *grad_output,
                                                          float *grad_input);

/** Channels per block of pockmcu_depthwise_conv_grad_input_rows_f32 (its ring holds this many). */
#define POCKMCU_DW_GRAD_ROWS_BLOCK 16

/**
 * @brief pockmcu_depthwise_conv_grad_input_f32 for stride 1, row by row, able to run in place.
 *
 * Bit-identical to pockmcu_depthwise_conv_grad_input_f32. Input rows are gathered for blocks of up to 16
 * channels into a ring in ctx->buf and stored once no later row reads the output row they overwrite, so
 * grad_input may be grad_output when their shapes match (ch_mult 1).
 *
 * @param[in]      ctx            ctx->buf: pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size() bytes,
 *                                float aligned; ctx->size is checked.
 * @param[in]      dw_conv_params As for pockmcu_depthwise_conv_grad_input_f32; stride must be 1.
 * @param[in]      input_dims     Input shape [N, H, W, C_IN].
 * @param[in]      filter_dims    Filter shape [1, KH, KW, C_OUT], C_OUT = C_IN * ch_mult.
 * @param[in]      filter         Filter, int8, 1HWC.
 * @param[in]      filter_scale   float32 [C_OUT] weight scales.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 NHWC.
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32 NHWC; fully written; may be grad_output.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride other than 1, inconsistent channel
 *         counts, ch_mult or dilation < 1, or a missing or too small ctx->buf.
 */
arm_cmsis_nn_status pockmcu_depthwise_conv_grad_input_rows_f32(const cmsis_nn_context *ctx,
                                                               const cmsis_nn_dw_conv_params *dw_conv_params,
                                                               const cmsis_nn_dims *input_dims,
                                                               const cmsis_nn_dims *filter_dims,
                                                               const int8_t *filter,
                                                               const float *filter_scale,
                                                               const cmsis_nn_dims *output_dims,
                                                               const float *grad_output,
                                                               float *grad_input);

/**
 * @brief Scratch size of pockmcu_depthwise_conv_grad_input_rows_f32: a ring of rows for a block of channels.
 *
 * max(1, (KH - 1) * dil_h - pad_h + 1) rows of W * min(C_IN, 16) floats.
 *
 * @param[in]      dw_conv_params Dilation and padding of the forward.
 * @param[in]      input_dims     Input shape; w and c are read.
 * @param[in]      filter_dims    Filter shape; h is read.
 *
 * @return Scratch bytes for ctx->buf.
 */
int32_t pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                                   const cmsis_nn_dims *input_dims,
                                                                   const cmsis_nn_dims *filter_dims);

/**
 * @brief Input gradient of a fully connected layer.
 *
 * grad_input[b][i] = sum over o ascending, from +0, of (grad_output[b][o] * filter_scale[o]) *
 * (filter[o][i] + filter_offset); terms with grad_output == 0 are skipped. No scratch buffer.
 *
 * @param[in]      input_dims     n = batches B, c = input features D.
 * @param[in]      filter_dims    n = D, c = output features C_OUT (as the forward).
 * @param[in]      filter         Weights, int8 [C_OUT][D].
 * @param[in]      filter_offset  -filter zero point.
 * @param[in]      filter_scale   float32 [C_OUT] weight scales (a per tensor scale repeated).
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 [B][C_OUT].
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32 [B][D]; fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if input_dims->c != filter_dims->n or a dimension
 *         is negative.
 */
arm_cmsis_nn_status pockmcu_fully_connected_grad_input_f32(const cmsis_nn_dims *input_dims,
                                                           const cmsis_nn_dims *filter_dims,
                                                           const int8_t *filter,
                                                           int32_t filter_offset,
                                                           const float *filter_scale,
                                                           const float *grad_output,
                                                           float *grad_input);

/**
 * @brief Packs the 1-bit activation mask of a ReLU / ReLU6 for its backward: bit k = (lo < x[k] < hi).
 *
 * Bit k is bit k % 8 (LSB first) of byte k / 8. All pockmcu_mask_bytes(n) bytes are written; the unused
 * high bits of the last byte are 0.
 *
 * @param[in]      x              Saved activation output, int8 [n].
 * @param[in]      n              Number of elements.
 * @param[in]      lo             The activation's lower clamp (act_min).
 * @param[in]      hi             Its upper clamp (act_max), or 128 when there is none.
 * @param[out]     mask           uint8 [pockmcu_mask_bytes(n)].
 */
void pockmcu_mask_pack_s8(const int8_t *x, int32_t n, int32_t lo, int32_t hi, uint8_t *mask);

/**
 * @brief Applies a 1-bit mask to a gradient in place: grad[k] = 0 where bit k is 0.
 *
 * @param[in,out]  grad           Gradient, float32 [n].
 * @param[in]      mask           Mask in pockmcu_mask_pack_s8's layout, uint8 [pockmcu_mask_bytes(n)].
 * @param[in]      n              Number of elements.
 */
void pockmcu_mask_apply_f32(float *grad, const uint8_t *mask, int32_t n);

/**
 * @brief Size of a 1-bit mask.
 *
 * @param[in]      n              Number of elements.
 *
 * @return Bytes of the mask: (n + 7) / 8.
 */
int32_t pockmcu_mask_bytes(int32_t n);

/**
 * @brief Input gradient of average pooling.
 *
 * Window geometry as arm_avgpool_s8; each output gradient divided by the count of in-bounds taps is added
 * to every in-bounds input of its window. The forward's activation clamp is not differentiated.
 *
 * @param[in]      pool_params    Stride (>= 1) and top/left padding; activation not read.
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      filter_dims    h, w = window KH, KW.
 * @param[in]      output_dims    h, w = OH, OW.
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 [N, OH, OW, C].
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32 [N, H, W, C]; fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride < 1, a negative dimension, or a window
 *         with no in-bounds input (grad_input is then partly written).
 */
arm_cmsis_nn_status pockmcu_avgpool_grad_f32(const cmsis_nn_pool_params *pool_params,
                                             const cmsis_nn_dims *input_dims,
                                             const cmsis_nn_dims *filter_dims,
                                             const cmsis_nn_dims *output_dims,
                                             const float *grad_output,
                                             float *grad_input);

/**
 * @brief Input gradient of max pooling: each output gradient goes to the first maximum of its window.
 *
 * First in scan order (row outer, column inner; in-bounds taps only), PyTorch's tie rule. The forward's
 * activation clamp is not differentiated.
 *
 * @param[in]      pool_params    Stride (>= 1) and top/left padding; activation not read.
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      input          The forward's saved input, int8, NHWC.
 * @param[in]      filter_dims    h, w = window KH, KW.
 * @param[in]      output_dims    h, w = OH, OW.
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 [N, OH, OW, C].
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32 [N, H, W, C]; fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride < 1 or a negative dimension.
 */
arm_cmsis_nn_status pockmcu_max_pool_grad_f32(const cmsis_nn_pool_params *pool_params,
                                              const cmsis_nn_dims *input_dims,
                                              const int8_t *input,
                                              const cmsis_nn_dims *filter_dims,
                                              const cmsis_nn_dims *output_dims,
                                              const float *grad_output,
                                              float *grad_input);

/**
 * @brief Input gradient of MEAN over H and W: grad_input[n,h,w,c] = grad_output[n][c] / (H * W).
 *
 * Any contiguous reduction folds onto this as for pockmcu_mean_s8.
 *
 * @param[in]      input_dims     Input shape [N, H, W, C].
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 [N][C].
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32 [N, H, W, C]; fully written.
 */
void pockmcu_mean_grad_f32(const cmsis_nn_dims *input_dims, const float *grad_output, float *grad_input);

/**
 * @brief Input gradient of HARD_SWISH: grad_input[k] = grad_output[k] * hard_swish'(x[k]).
 *
 * x[k] = input_scale * (float)(input[k] - input_zero_point), the dequantized forward input; the derivative
 * is 0 for x <= -3, x / 3 + 0.5 for -3 < x < 3 and 1 from 3 on, applied in float32 as PyTorch's
 * hardswish_backward does (0, grad_output * (x / 3 + 0.5), grad_output).
 *
 * @param[in]      input              The forward's input, int8 [size].
 * @param[in]      size               Number of elements.
 * @param[in]      input_scale        Its scale.
 * @param[in]      input_zero_point   Its zero point.
 * @param[in]      grad_output        Gradient w.r.t. the real output, float32 [size].
 * @param[out]     grad_input         Gradient w.r.t. the real input, float32 [size]; fully written; may be
 *                                    grad_output.
 */
void pockmcu_hard_swish_grad_f32(const int8_t *input,
                                 int32_t size,
                                 float input_scale,
                                 int32_t input_zero_point,
                                 const float *grad_output,
                                 float *grad_input);

/**
 * @brief Backward of a 1x1 stride-1 convolution whose output feeds a spatial mean, without the broadcast
 *        gradient tensor.
 *
 * dz[n,p,o] = bit (n * H * W + p) * C_OUT + o of mask ? grad_mean[n][o] / (H * W) : 0 is formed where it is
 * read; then, if bias != NULL, the bias update of pockmcu_bias_update_s32 on dz, and, if grad_input != NULL,
 * the input gradient of pockmcu_conv_grad_input_f32; bit-identical to that unfused sequence.
 *
 * @param[in]      output_dims    The convolution's output shape [N, H, W, C_OUT] (the mean's input).
 * @param[in]      grad_mean      Gradient w.r.t. the mean's real output, float32 [N][C_OUT].
 * @param[in]      mask           The convolution's activation mask (pockmcu_mask_pack_s8 layout) over N*H*W*C_OUT.
 * @param[in]      filter_dims    Filter shape [C_OUT, 1, 1, C_IN].
 * @param[in]      filter         Filter, int8 [C_OUT][C_IN]; read only when grad_input != NULL.
 * @param[in]      filter_scale   float32 [C_OUT] weight scales; read only when grad_input != NULL.
 * @param[in,out]  bias           Biases, int32 [C_OUT], updated; NULL when the bias does not train.
 * @param[in]      bias_coef      float32 [C_OUT], as coef of pockmcu_bias_update_s32; read only with bias.
 * @param[in,out]  accum          Bias batch accumulators, float32 [C_OUT], or NULL.
 * @param[in,out]  velocity       Bias momentum buffers, float32 [C_OUT], or NULL.
 * @param[in]      opt            Optimizer settings; read only with bias.
 * @param[in,out]  rng            xorshift32 state; read only with bias.
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32 [N, H, W, C_IN], fully written; or
 *                                NULL when nothing upstream trains.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if the filter is not C_OUT x 1 x 1, H * W < 1 or a
 *         dimension is negative.
 */
arm_cmsis_nn_status pockmcu_conv_1x1_grad_from_mean_f32(const cmsis_nn_dims *output_dims,
                                                        const float *grad_mean,
                                                        const uint8_t *mask,
                                                        const cmsis_nn_dims *filter_dims,
                                                        const int8_t *filter,
                                                        const float *filter_scale,
                                                        int32_t *bias,
                                                        const float *bias_coef,
                                                        float *accum,
                                                        float *velocity,
                                                        const pockmcu_optimizer *opt,
                                                        uint32_t *rng,
                                                        float *grad_input);

/**
 * @brief Input gradient of PAD: a crop of the padded gradient.
 *
 * grad_input[n,h,w,c] = grad_output[n + pre_pad->n, h + pre_pad->h, w + pre_pad->w, c + pre_pad->c].
 *
 * @param[in]      input_dims     The unpadded input shape [N, H, W, C].
 * @param[in]      pre_pad        Padding before the input in n, h, w, c (as arm_pad_s8).
 * @param[in]      post_pad       Padding after the input in n, h, w, c.
 * @param[in]      grad_output    Gradient w.r.t. the padded output, float32 NHWC of the padded shape.
 * @param[out]     grad_input     Gradient w.r.t. the input, float32 [N, H, W, C]; fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a negative pad or dimension.
 */
arm_cmsis_nn_status pockmcu_pad_grad_f32(const cmsis_nn_dims *input_dims,
                                         const cmsis_nn_dims *pre_pad,
                                         const cmsis_nn_dims *post_pad,
                                         const float *grad_output,
                                         float *grad_input);

/**
 * @brief Element-wise float32 sum out[k] = a[k] + b[k] (gradient fan-in).
 *
 * @param[in]      a              First addend, float32 [n].
 * @param[in]      b              Second addend, float32 [n].
 * @param[out]     out            Sum, float32 [n]; may be a or b.
 * @param[in]      n              Number of elements.
 */
void pockmcu_add_f32(const float *a, const float *b, float *out, int32_t n);

/**
 * @brief Softmax cross-entropy loss and its gradient w.r.t. the logits, from the int8 softmax output.
 *
 * grad_logits[c] = beta * ((probs[c] + 128) / 256 - (c == label)); one rounding, in the product by beta.
 *
 * @param[in]      probs          Softmax output, int8 [classes], scale 1/256, zero point -128.
 * @param[in]      classes        Number of classes.
 * @param[in]      label          True class; outside [0, classes) the one-hot term is left out.
 * @param[in]      beta           Loss scale (e.g. 1 / batch).
 * @param[in]      nll_table      float32 [256]: -ln(p) for each int8 probability, index value + 128.
 * @param[out]     grad_logits    Gradient, float32 [classes].
 *
 * @return The loss nll_table[probs[label] + 128], or 0 for a label outside [0, classes).
 */
float pockmcu_softmax_xent_grad_s8(const int8_t *probs,
                                   int32_t classes,
                                   int32_t label,
                                   float beta,
                                   const float *nll_table,
                                   float *grad_logits);

/**
 * @brief Mean squared error of an int8 output and its gradient w.r.t. the real output.
 *
 * d_k = scale * (y[k] - zero_point) - target[k]; grad[k] = 2 * d_k / n.
 *
 * @param[in]      y              Output, int8 [n].
 * @param[in]      n              Number of elements.
 * @param[in]      scale          Output scale.
 * @param[in]      zero_point     Output zero point.
 * @param[in]      target         Target, float32 [n], real values.
 * @param[out]     grad           Gradient, float32 [n].
 *
 * @return (sum over k ascending, from +0, of d_k^2) / n; 0 when n <= 0.
 */
float pockmcu_mse_grad_s8(const int8_t *y,
                          int32_t n,
                          float scale,
                          int32_t zero_point,
                          const float *target,
                          float *grad);

/**
 * @brief Mean squared error of a float32 output and its gradient: d_k = y[k] - target[k], grad[k] = 2 d_k / n.
 *
 * @param[in]      y              Output, float32 [n].
 * @param[in]      n              Number of elements.
 * @param[in]      target         Target, float32 [n].
 * @param[out]     grad           Gradient, float32 [n]; may be y.
 *
 * @return (sum over k ascending, from +0, of d_k^2) / n; 0 when n <= 0.
 */
float pockmcu_mse_grad_f32(const float *y, int32_t n, const float *target, float *grad);

/* ---- classifiers as users export them: softmax cross-entropy from int8 logits ---- */

/**
 * @brief Softmax cross-entropy loss and its gradient w.r.t. the logits, from int8 logits.
 *
 * For models whose scores are logits (no softmax, or a LOG_SOFTMAX after them). With d_c = max(q) - q_c:
 * e_c = exp_table[d_c], sum = e_0 + ... (float32, class order), grad_logits[c] = e_c / sum - (c == label).
 *
 * @param[in]      logits         Logits, int8 [classes].
 * @param[in]      classes        Number of classes.
 * @param[in]      label          True class; outside [0, classes) the one-hot term is left out.
 * @param[in]      scale          The logits' scale.
 * @param[in]      exp_table      float32 [256]: exp(-scale * d) for d = 0..255.
 * @param[out]     grad_logits    Gradient w.r.t. the real logits, float32 [classes].
 *
 * @return The loss -ln p_label = logf(sum) + scale * d_label, or 0 for a label outside [0, classes).
 */
float pockmcu_logits_xent_grad_s8(const int8_t *logits,
                                  int32_t classes,
                                  int32_t label,
                                  float scale,
                                  const float *exp_table,
                                  float *grad_logits);
/* ---- reductions over any axes and resampling: gradients (float32) ---- */

/**
 * @brief Input gradient of MEAN or SUM over any axes: grad_input = grad_output / (float)divisor, broadcast.
 *
 * @param[in]      shape          int32 [5] as for pockmcu_reduce_sum_s8 (the forward's input folded).
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 [outer][middle][inner].
 * @param[in]      divisor        The number of inputs per output for MEAN, 1 for SUM.
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32, the forward input's layout.
 */
void pockmcu_reduce_broadcast_grad_f32(const int32_t *shape,
                                       const float *grad_output,
                                       int32_t divisor,
                                       float *grad_input);

/**
 * @brief Input gradient of REDUCE_MAX / REDUCE_MIN: each output's gradient shared equally by the inputs equal
 * to it, (g / ties) * (equal ? 1 : 0) in float32 (PyTorch's amax / amin backward).
 *
 * @param[in]      shape          int32 [5] as for pockmcu_reduce_sum_s8.
 * @param[in]      input_data     The forward's saved input, int8.
 * @param[in]      output_data    The forward's output, int8 [outer][middle][inner].
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32 [outer][middle][inner].
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32, the input's layout.
 */
void pockmcu_reduce_extremum_grad_f32(const int32_t *shape,
                                      const int8_t *input_data,
                                      const int8_t *output_data,
                                      const float *grad_output,
                                      float *grad_input);

/**
 * @brief Input gradient of RESIZE_NEAREST_NEIGHBOR: zero, then grad_input[n, rows[y], cols[x], c] +=
 * grad_output[n, y, x, c] over the outputs in order (float32).
 *
 * @param[in]      input_dims     The forward's input shape [N, H, W, C].
 * @param[in]      output_dims    The forward's output shape [N, OH, OW, C].
 * @param[in]      rows           int32 [OH], the forward's source rows.
 * @param[in]      cols           int32 [OW], the forward's source columns.
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32, NHWC.
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32, NHWC.
 */
void pockmcu_resize_nearest_grad_f32(const cmsis_nn_dims *input_dims,
                                     const cmsis_nn_dims *output_dims,
                                     const int32_t *rows,
                                     const int32_t *cols,
                                     const float *grad_output,
                                     float *grad_input);

/**
 * @brief Input gradient of RESIZE_BILINEAR: the transposed interpolation with the forward's exact weights
 * (products of 10-bit fractions over 2^20), accumulated over the outputs in order (float32).
 *
 * @param[in]      input_dims     The forward's input shape [N, H, W, C].
 * @param[in]      output_dims    The forward's output shape [N, OH, OW, C].
 * @param[in]      rows           int32 [3 OH], the forward's {y0, y1, fy}.
 * @param[in]      cols           int32 [3 OW], the forward's {x0, x1, fx}.
 * @param[in]      grad_output    Gradient w.r.t. the real output, float32, NHWC.
 * @param[out]     grad_input     Gradient w.r.t. the real input, float32, NHWC.
 */
void pockmcu_resize_bilinear_grad_f32(const cmsis_nn_dims *input_dims,
                                      const cmsis_nn_dims *output_dims,
                                      const int32_t *rows,
                                      const int32_t *cols,
                                      const float *grad_output,
                                      float *grad_input);
/* ---- TRANSPOSE_CONV and BATCH_MATMUL gradients (issue 12) --------------------------------------- */

/**
 * @brief Input gradient of a transpose convolution (float32): a convolution of the output gradient.
 *
 * grad_input[n,iy,ix,c] = sum over (ky, kx, o), oy = iy*stride_h - pad_h + ky and ox = ix*stride_w - pad_w + kx
 * inside the output, of grad_output[n,oy,ox,o] * filter_scale[o] * filter[o,ky,kx,c]; each element sums from +0
 * over (ky, kx, o) ascending, terms (grad_output * filter_scale) * (float)filter, zero scaled gradients skipped.
 *
 * @param[in]      conv_params    The forward layer's parameters (stride, padding read).
 * @param[in]      input_dims     Forward input shape [N, H, W, C_IN] (the gradient's shape).
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 * @param[in]      filter         Filter, int8, OHWI.
 * @param[in]      filter_scale   Weight scale per output channel, float32 [C_OUT].
 * @param[in]      output_dims    Forward output shape [N, OH, OW, C_OUT].
 * @param[in]      grad_output    Output gradient, float32.
 * @param[out]     grad_input     Input gradient, float32, fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride < 1 or mismatched dimensions.
 */
arm_cmsis_nn_status pockmcu_transpose_conv_grad_input_f32(const cmsis_nn_conv_params *conv_params,
                                                          const cmsis_nn_dims *input_dims,
                                                          const cmsis_nn_dims *filter_dims,
                                                          const int8_t *filter,
                                                          const float *filter_scale,
                                                          const cmsis_nn_dims *output_dims,
                                                          const float *grad_output,
                                                          float *grad_input);

/**
 * @brief Weight gradient of a transpose convolution fused with the int8 weight update.
 *
 * Per output channel o: G[ky][kx][c'] = sum over (n, iy, ix) ascending of grad_output[n,oy,ox,o] *
 * (float)(input[n,iy,ix,c'] + input_offset) (oy, ox as in pockmcu_transpose_conv_grad_input_f32), then
 * pockmcu_update_s8 on filter[o][ky][kx][channel_begin ..] with coef[o], taps ascending.
 *
 * @param[in]      ctx            Scratch: pockmcu_transpose_conv_wgrad_update_s8_get_buffer_size() bytes.
 * @param[in]      conv_params    The forward layer's parameters (input_offset, stride, padding read).
 * @param[in]      input_dims     Saved input shape [N, H, W, k]: channels [channel_begin, channel_begin + k).
 * @param[in]      input          Saved input, int8.
 * @param[in]      filter_dims    Full filter shape [C_OUT, KH, KW, C_IN].
 * @param[in,out]  filter         Trainable filter, int8, OHWI (RAM), updated in place.
 * @param[in]      channel_begin  First trained input channel.
 * @param[in]      output_dims    Forward output shape [N, OH, OW, C_OUT].
 * @param[in]      grad_output    Output gradient, float32.
 * @param[in]      coef           Per output channel factor from the raw sums to stored-integer units.
 * @param[in,out]  accum          Batch accumulator (C_OUT*KH*KW*k floats) or NULL.
 * @param[in,out]  velocity       Momentum state (C_OUT*KH*KW*k floats) or NULL.
 * @param[in]      opt            Optimizer (learning rate, momentum, batch, apply).
 * @param[in,out]  rng            xorshift32 state of this tensor.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a missing or short scratch buffer, a stride < 1 or
 *         a channel range outside C_IN.
 */
arm_cmsis_nn_status pockmcu_transpose_conv_wgrad_update_s8(const cmsis_nn_context *ctx,
                                                           const cmsis_nn_conv_params *conv_params,
                                                           const cmsis_nn_dims *input_dims,
                                                           const int8_t *input,
                                                           const cmsis_nn_dims *filter_dims,
                                                           int8_t *filter,
                                                           int32_t channel_begin,
                                                           const cmsis_nn_dims *output_dims,
                                                           const float *grad_output,
                                                           const float *coef,
                                                           float *accum,
                                                           float *velocity,
                                                           const pockmcu_optimizer *opt,
                                                           uint32_t *rng);

/**
 * @brief Scratch bytes of pockmcu_transpose_conv_wgrad_update_s8: KH * KW * k floats.
 *
 * @param[in]      input_dims     Saved input shape [N, H, W, k].
 * @param[in]      filter_dims    Filter shape [C_OUT, KH, KW, C_IN].
 *
 * @return The buffer size in bytes.
 */
int32_t pockmcu_transpose_conv_wgrad_update_s8_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                               const cmsis_nn_dims *filter_dims);

/**
 * @brief Gradient of BATCH_MATMUL with respect to its lhs (float32).
 *
 * With L, R and the batches as in pockmcu_batch_matmul_s8 and R real = rhs_scale * (rhs + rhs_offset):
 * dL[i,k] = sum over j of grad_output[i,j] * R[k,j], summed over the output batches that read the same lhs
 * batch (broadcasting). grad_lhs (lhs_dims, stored layout: transposed when adj_x) is zeroed, then for each
 * output batch (b0, b1 ascending), i, k: s = sum over j ascending from +0 of grad_output * (float)(rhs +
 * rhs_offset); grad_lhs += s * rhs_scale.
 *
 * @param[in]      adj_x          As for pockmcu_batch_matmul_s8.
 * @param[in]      adj_y          As for pockmcu_batch_matmul_s8.
 * @param[in]      lhs_dims       lhs shape as stored.
 * @param[in]      rhs_dims       rhs shape as stored.
 * @param[in]      rhs            rhs, int8 (the forward's operand).
 * @param[in]      rhs_scale      rhs scale.
 * @param[in]      rhs_offset     -rhs zero point.
 * @param[in]      output_dims    Output shape {B0, B1, ROWS, COLS}.
 * @param[in]      grad_output    Output gradient, float32.
 * @param[out]     grad_lhs       lhs gradient, float32, fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for dimensions that do not match.
 */
arm_cmsis_nn_status pockmcu_batch_matmul_grad_lhs_f32(int32_t adj_x,
                                                      int32_t adj_y,
                                                      const cmsis_nn_dims *lhs_dims,
                                                      const cmsis_nn_dims *rhs_dims,
                                                      const int8_t *rhs,
                                                      float rhs_scale,
                                                      int32_t rhs_offset,
                                                      const cmsis_nn_dims *output_dims,
                                                      const float *grad_output,
                                                      float *grad_lhs);

/**
 * @brief Gradient of BATCH_MATMUL with respect to its rhs (float32).
 *
 * dR[k,j] = sum over i of L[i,k] * grad_output[i,j] (L real = lhs_scale * (lhs + lhs_offset)), summed over the
 * output batches that read the same rhs batch. grad_rhs (stored layout: transposed when adj_y) is zeroed, then
 * for each output batch (ascending), k, j: s = sum over i ascending from +0 of (float)(lhs + lhs_offset) *
 * grad_output; grad_rhs += s * lhs_scale.
 *
 * @param[in]      adj_x          As for pockmcu_batch_matmul_s8.
 * @param[in]      adj_y          As for pockmcu_batch_matmul_s8.
 * @param[in]      lhs_dims       lhs shape as stored.
 * @param[in]      lhs            lhs, int8 (the forward's operand).
 * @param[in]      lhs_scale      lhs scale.
 * @param[in]      lhs_offset     -lhs zero point.
 * @param[in]      rhs_dims       rhs shape as stored.
 * @param[in]      output_dims    Output shape {B0, B1, ROWS, COLS}.
 * @param[in]      grad_output    Output gradient, float32.
 * @param[out]     grad_rhs       rhs gradient, float32, fully written.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for dimensions that do not match.
 */
arm_cmsis_nn_status pockmcu_batch_matmul_grad_rhs_f32(int32_t adj_x,
                                                      int32_t adj_y,
                                                      const cmsis_nn_dims *lhs_dims,
                                                      const int8_t *lhs,
                                                      float lhs_scale,
                                                      int32_t lhs_offset,
                                                      const cmsis_nn_dims *rhs_dims,
                                                      const cmsis_nn_dims *output_dims,
                                                      const float *grad_output,
                                                      float *grad_rhs);
/* ---- gradients of the binary and unary element-wise ops (pockmcu/ops/binary.py, unary.py) -------------- */

/**
 * @brief Input gradient of ADD / SUB with broadcasting: coef * grad_output summed over the input's broadcast axes.
 *
 * @param[in]      grad_output    Output gradient, float32, the output's shape.
 * @param[in]      dims           15 values: the output shape as 5 dimensions (leading 1s), then the element
 *                                strides of this input (0 on its broadcast axes), then the other input's (not
 *                                read).
 * @param[in]      coef           1 (ADD, SUB's first input) or -1 (SUB's second input).
 * @param[in]      input_size     Elements of the input.
 * @param[out]     grad_input     Input gradient, float32 [input_size]: zeroed, then each output element's term
 *                                added in row-major output order. Must not overlap grad_output.
 */
void pockmcu_broadcast_grad_f32(const float *grad_output,
                                const int32_t *dims,
                                float coef,
                                int32_t input_size,
                                float *grad_input);

/**
 * @brief Input gradient of MUL: grad_output times the other input's real value, summed over broadcast axes.
 *
 * @param[in]      grad_output      Output gradient, float32, the output's shape.
 * @param[in]      other            The other input, int8 (saved forward input or constant).
 * @param[in]      dims             15 values: output shape, this input's strides, the other input's strides.
 * @param[in]      other_scale      Scale of the other input.
 * @param[in]      other_zero_point Its zero point.
 * @param[in]      input_size       Elements of this input.
 * @param[out]     grad_input       Input gradient, float32 [input_size] (zeroed, then summed in output order);
 *                                  must not overlap grad_output.
 */
void pockmcu_mul_grad_f32(const float *grad_output,
                          const int8_t *other,
                          const int32_t *dims,
                          float other_scale,
                          int32_t other_zero_point,
                          int32_t input_size,
                          float *grad_input);

/**
 * @brief Input gradient of SQUARED_DIFFERENCE: grad_output * (2 (x - o)), x this input's real value and o the
 *        other's, summed over broadcast axes.
 *
 * @param[in]      grad_output      Output gradient, float32, the output's shape.
 * @param[in]      input            This input, int8 (saved).
 * @param[in]      other            The other input, int8.
 * @param[in]      dims             15 values: output shape, this input's strides, the other input's strides.
 * @param[in]      input_scale      Scale of this input.
 * @param[in]      input_zero_point Its zero point.
 * @param[in]      other_scale      Scale of the other input.
 * @param[in]      other_zero_point Its zero point.
 * @param[in]      input_size       Elements of this input.
 * @param[out]     grad_input       Input gradient, float32 [input_size] (zeroed, then summed in output order);
 *                                  must not overlap grad_output.
 */
void pockmcu_squared_difference_grad_f32(const float *grad_output,
                                         const int8_t *input,
                                         const int8_t *other,
                                         const int32_t *dims,
                                         float input_scale,
                                         int32_t input_zero_point,
                                         float other_scale,
                                         int32_t other_zero_point,
                                         int32_t input_size,
                                         float *grad_input);

/**
 * @brief Input gradient of MAXIMUM: grad_output where this input's real value is the larger, half of it on a
 *        tie, summed over broadcast axes. Arguments as pockmcu_squared_difference_grad_f32.
 */
void pockmcu_maximum_grad_f32(const float *grad_output,
                              const int8_t *input,
                              const int8_t *other,
                              const int32_t *dims,
                              float input_scale,
                              int32_t input_zero_point,
                              float other_scale,
                              int32_t other_zero_point,
                              int32_t input_size,
                              float *grad_input);

/**
 * @brief Input gradient of MINIMUM: grad_output where this input's real value is the smaller, half of it on a
 *        tie, summed over broadcast axes. Arguments as pockmcu_squared_difference_grad_f32.
 */
void pockmcu_minimum_grad_f32(const float *grad_output,
                              const int8_t *input,
                              const int8_t *other,
                              const int32_t *dims,
                              float input_scale,
                              int32_t input_zero_point,
                              float other_scale,
                              int32_t other_zero_point,
                              int32_t input_size,
                              float *grad_input);

/**
 * @brief Input gradient of LEAKY_RELU: grad_output where input > zero point, grad_output * alpha elsewhere.
 *
 * @param[in]      input            Saved forward input, int8 [size].
 * @param[in]      size             Number of elements.
 * @param[in]      input_zero_point Input zero point.
 * @param[in]      alpha            The slope below 0 (float32).
 * @param[in]      grad_output      Output gradient, float32 [size].
 * @param[out]     grad_input       Input gradient, float32 [size]; may be grad_output.
 */
void pockmcu_leaky_relu_grad_f32(const int8_t *input,
                                 int32_t size,
                                 int32_t input_zero_point,
                                 float alpha,
                                 const float *grad_output,
                                 float *grad_input);

/**
 * @brief Input gradient of PRELU (alpha constant, broadcast): grad_output where input > zero point, else
 *        alpha's real value times grad_output.
 *
 * @param[in]      input            Saved forward input, int8, the output's shape.
 * @param[in]      alpha            Alpha, int8.
 * @param[in]      dims             15 values: the output shape, the input's strides (not read), alpha's strides.
 * @param[in]      input_zero_point Input zero point.
 * @param[in]      alpha_scale      Scale of alpha.
 * @param[in]      alpha_zero_point Zero point of alpha.
 * @param[in]      grad_output      Output gradient, float32.
 * @param[out]     grad_input       Input gradient, float32; may be grad_output.
 */
void pockmcu_prelu_grad_f32(const int8_t *input,
                            const int8_t *alpha,
                            const int32_t *dims,
                            int32_t input_zero_point,
                            float alpha_scale,
                            int32_t alpha_zero_point,
                            const float *grad_output,
                            float *grad_input);

/**
 * @brief Input gradient of RELU / RELU6 / RELU_N1_TO_1: grad_output where lo <= input <= hi, else 0.
 *
 * @param[in]      input          Saved forward input, int8 [size].
 * @param[in]      size           Number of elements.
 * @param[in]      lo             Smallest int8 input whose real value is strictly inside the activation's range.
 * @param[in]      hi             Largest such value.
 * @param[in]      grad_output    Output gradient, float32 [size].
 * @param[out]     grad_input     Input gradient, float32 [size]; may be grad_output.
 */
void pockmcu_clamp_grad_f32(const int8_t *input,
                            int32_t size,
                            int32_t lo,
                            int32_t hi,
                            const float *grad_output,
                            float *grad_input);

/**
 * @brief Input gradient of TANH from its saved output: grad_output * (1 - y^2), y the output's real value.
 *
 * @param[in]      output            Saved forward output, int8 [size].
 * @param[in]      size              Number of elements.
 * @param[in]      output_scale      Output scale.
 * @param[in]      output_zero_point Output zero point.
 * @param[in]      grad_output       Output gradient, float32 [size].
 * @param[out]     grad_input        Input gradient, float32 [size]; may be grad_output.
 */
void pockmcu_tanh_grad_f32(const int8_t *output,
                           int32_t size,
                           float output_scale,
                           int32_t output_zero_point,
                           const float *grad_output,
                           float *grad_input);

/* -- gradients of LOGISTIC, SOFTMAX and LOG_SOFTMAX inside a network, from their saved int8 outputs -- */

/**
 * @brief Input gradient of LOGISTIC: (grad_output * (1 - y)) * y, y the output's real value.
 *
 * @param[in]      output            Saved forward output, int8 [size].
 * @param[in]      size              Number of elements.
 * @param[in]      output_scale      Output scale.
 * @param[in]      output_zero_point Output zero point.
 * @param[in]      grad_output       Output gradient, float32 [size].
 * @param[out]     grad_input        Input gradient, float32 [size]; may be grad_output.
 */
void pockmcu_logistic_grad_f32(const int8_t *output,
                               int32_t size,
                               float output_scale,
                               int32_t output_zero_point,
                               const float *grad_output,
                               float *grad_input);

/**
 * @brief Input gradient of SOFTMAX over the last axis: y * (grad_output - sum(grad_output * y)) per row.
 *
 * @param[in]      output            Saved forward output, int8 [rows * depth].
 * @param[in]      rows              Number of rows.
 * @param[in]      depth             Elements per row (the softmax axis).
 * @param[in]      output_scale      Output scale.
 * @param[in]      output_zero_point Output zero point.
 * @param[in]      grad_output       Output gradient, float32 [rows * depth].
 * @param[out]     grad_input        Input gradient, float32 [rows * depth]; may be grad_output.
 */
void pockmcu_softmax_grad_f32(const int8_t *output,
                              int32_t rows,
                              int32_t depth,
                              float output_scale,
                              int32_t output_zero_point,
                              const float *grad_output,
                              float *grad_input);

/**
 * @brief Input gradient of LOG_SOFTMAX over the last axis: grad_output - exp(y) * sum(grad_output) per row.
 *
 * @param[in]      output            Saved forward output, int8 [rows * depth].
 * @param[in]      rows              Number of rows.
 * @param[in]      depth             Elements per row (the log-softmax axis).
 * @param[in]      exp_table         exp of the real value of output q at index q + 128, float32 bit patterns [256].
 * @param[in]      grad_output       Output gradient, float32 [rows * depth].
 * @param[out]     grad_input        Input gradient, float32 [rows * depth]; may be grad_output.
 */
void pockmcu_log_softmax_grad_f32(const int8_t *output,
                                  int32_t rows,
                                  int32_t depth,
                                  const uint32_t *exp_table,
                                  const float *grad_output,
                                  float *grad_input);

/* ---- issue 15 (fuzz15): trained biases inside the accumulator bound ---- */

/**
 * @brief pockmcu_conv_1x1_grad_from_mean_f32 with its bias update saturating at +-bias_limit instead of the
 *        int32 range.
 *
 * pockmcu_conv_1x1_grad_from_mean_f32, then, when it succeeded and updated the biases (bias != NULL, accum ==
 * NULL or opt->apply), pockmcu_bias_saturate_s32(bias, C_OUT, bias_limit). Arguments as
 * pockmcu_conv_1x1_grad_from_mean_f32, and:
 *
 * @param[in]      bias_limit     The largest |bias| (2^31 - 1 - C_IN * 2^15); below 0 taken as 0.
 *
 * @return As pockmcu_conv_1x1_grad_from_mean_f32.
 */
arm_cmsis_nn_status pockmcu_conv_1x1_grad_from_mean_bounded_f32(const cmsis_nn_dims *output_dims,
                                                                const float *grad_mean,
                                                                const uint8_t *mask,
                                                                const cmsis_nn_dims *filter_dims,
                                                                const int8_t *filter,
                                                                const float *filter_scale,
                                                                int32_t *bias,
                                                                const float *bias_coef,
                                                                float *accum,
                                                                float *velocity,
                                                                const pockmcu_optimizer *opt,
                                                                uint32_t *rng,
                                                                float *grad_input,
                                                                int32_t bias_limit);

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_BACKWARD_H */
