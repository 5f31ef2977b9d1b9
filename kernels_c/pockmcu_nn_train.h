/*
 * pockmcu_nn_train.h - on-device training: the update rule and the weight / bias gradients fused with it.
 *
 * Gradients are float32 with respect to REAL (dequantized) values; saved activations are int8 and
 * dequantized on the fly. Every loop has a fixed, documented summation order (see each
 * kernels_c/pockmcu_*.c), so the host and Cortex-M give identical bits (build with -ffp-contract=off;
 * no FMA, no libm, no malloc).
 *
 * Update rule (pockmcu_update_s8 / _s32, used by every *_update_* kernel), per trainable element k in
 * increasing k:
 *   g = grad[k] * coef        (the compiler folds scales and QAS into coef)
 *   if accum:    accum[k] += g; if !opt->apply: next k;
 *                g = accum[k] / (float)opt->batch; accum[k] = 0
 *   if velocity: velocity[k] = opt->momentum * velocity[k] + g; g = velocity[k]
 *   q[k] = saturate(q[k] + pockmcu_stochastic_round(-opt->lr * g, rng))
 *          (int8: [-127, 127]; int32: int32 range)
 * One RNG draw per updated element, none for accumulate-only calls.
 *
 * The input gradients and losses are in pockmcu_nn_backward.h.
 */
#ifndef POCKMCU_NN_TRAIN_H
#define POCKMCU_NN_TRAIN_H

#include "pockmcu_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/** Optimizer settings shared by every update kernel of one training step. */
typedef struct
{
    float lr;       /**< Learning rate */
    float momentum; /**< Momentum; 0 for plain SGD (pass velocity NULL) */
    int32_t batch;  /**< Samples per update, >= 1 (a smaller value is taken as 1) */
    int32_t apply;  /**< 1: this sample ends a batch, apply the update; 0: only accumulate */
} pockmcu_optimizer;

/**
 * @brief Marsaglia's xorshift32 generator: x ^= x << 13; x ^= x >> 17; x ^= x << 5.
 *
 * @param[in,out]  state          Generator state, nonzero (zero is a fixed point); replaced by the new x.
 *
 * @return The new x.
 */
uint32_t pockmcu_xorshift32(uint32_t *state);

/**
 * @brief Unbiased stochastic rounding of a float32 to int32: floor(x + u), u uniform in [0, 1).
 *
 * u = (pockmcu_xorshift32(rng) >> 8) * 2^-24 (exactly one draw); x is clamped to [-2^30, 2^30] first (NaN
 * is taken as 0) and x + u is computed in float32.
 *
 * @param[in]      x              Value to round.
 * @param[in,out]  rng            xorshift32 state, advanced once.
 *
 * @return floor(x + u).
 */
int32_t pockmcu_stochastic_round(float x, uint32_t *rng);

/**
 * @brief The update rule on int8 parameters (see the file comment), q saturated to [-127, 127].
 *
 * @param[in,out]  q              Parameters, int8 [n].
 * @param[in]      grad           Gradient, float32 [n], in the units coef expects.
 * @param[in]      n              Number of elements.
 * @param[in]      coef           Factor applied to every grad[k].
 * @param[in,out]  accum          Batch accumulators, float32 [n], or NULL for no batching.
 * @param[in,out]  velocity       Momentum buffers, float32 [n], or NULL for plain SGD.
 * @param[in]      opt            Optimizer settings.
 * @param[in,out]  rng            xorshift32 state; one draw per updated element.
 */
void pockmcu_update_s8(int8_t *q,
                       const float *grad,
                       int32_t n,
                       float coef,
                       float *accum,
                       float *velocity,
                       const pockmcu_optimizer *opt,
                       uint32_t *rng);

/**
 * @brief The update rule on int32 parameters (biases), with one coef per element and int32 saturation.
 *
 * @param[in,out]  q              Parameters, int32 [n].
 * @param[in]      grad           Gradient, float32 [n].
 * @param[in]      n              Number of elements.
 * @param[in]      coef           Factors, float32 [n], applied to grad[k].
 * @param[in,out]  accum          Batch accumulators, float32 [n], or NULL.
 * @param[in,out]  velocity       Momentum buffers, float32 [n], or NULL.
 * @param[in]      opt            Optimizer settings.
 * @param[in,out]  rng            xorshift32 state; one draw per updated element.
 */
void pockmcu_update_s32(int32_t *q,
                        const float *grad,
                        int32_t n,
                        const float *coef,
                        float *accum,
                        float *velocity,
                        const pockmcu_optimizer *opt,
                        uint32_t *rng);

/**
 * @brief Weight gradient of a 2D convolution fused with the int8 weight update.
 *
 * Per output channel o (ascending): G[i][j][c'] = sum over n, oh, ow (ascending, from +0) of
 * grad_output[n,oh,ow,o] * (input[n,ih,iw,c'] + input_offset) in ctx->buf, then pockmcu_update_s8 on
 * filter[o][i][j][channel_begin + c'] with coef[o], taps (i, j) ascending. No weight-gradient tensor is
 * ever stored. Only the k saved input channels [channel_begin, channel_begin + k) are trained.
 *
 * @param[in]      ctx            ctx->buf: pockmcu_conv_wgrad_update_s8_get_buffer_size() bytes, float aligned
 *                                (min(4, C_OUT) rows of KH * KW * k floats; at least one row, and the kernel
 *                                works on as many output channels at a time as rows fit, up to 4, with the same
 *                                result); ctx->size is checked. Not read when k or KH * KW is 0.
 * @param[in]      conv_params    The forward's input_offset (-input zero point), stride, padding and dilation;
 *                                output_offset and activation are not read.
 * @param[in]      input_dims     Saved input shape [N, H, W, k] (H, W of the forward's input).
 * @param[in]      input          Saved input, int8, NHWC: the forward input's channels [channel_begin, + k).
 * @param[in]      filter_dims    Full filter shape [C_OUT, KH, KW, C_IN].
 * @param[in,out]  filter         Filter, int8, OHWI; channels [channel_begin, + k) of every tap are updated.
 * @param[in]      channel_begin  First trained input channel; channel_begin + k <= C_IN.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[in]      grad_output    Gradient w.r.t. the real conv output (after the activation mask), float32 NHWC.
 * @param[in]      coef           float32 [C_OUT]: raw sum to stored-integer gradient, s_in * s_w[o] (s_in / s_w[o]
 *                                with QAS).
 * @param[in,out]  accum          Batch accumulators, float32 [C_OUT][KH][KW][k], or NULL.
 * @param[in,out]  velocity       Momentum buffers, float32 [C_OUT][KH][KW][k], or NULL.
 * @param[in]      opt            Optimizer settings.
 * @param[in,out]  rng            xorshift32 state; one draw per updated element, in [o][i][j][c'] order.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for a stride or dilation < 1, a channel range
 *         outside C_IN, output_dims->c != C_OUT, or a missing or too small ctx->buf.
 */
arm_cmsis_nn_status pockmcu_conv_wgrad_update_s8(const cmsis_nn_context *ctx,
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
 * @brief Scratch size of pockmcu_conv_wgrad_update_s8: min(4, C_OUT) output channels' gradients, KH * KW * k
 * floats each.
 *
 * @param[in]      input_dims     Saved input shape; c = k.
 * @param[in]      filter_dims    Filter shape; h, w = KH, KW.
 *
 * @return Scratch bytes for ctx->buf.
 */
int32_t pockmcu_conv_wgrad_update_s8_get_buffer_size(const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims);

/**
 * @brief Weight gradient of a depthwise convolution fused with the int8 weight update.
 *
 * Trains output channels [channel_begin * ch_mult, (channel_begin + k) * ch_mult). Per tap (i, j)
 * (ascending): G[c' * ch_mult + m] = sum over n, oh, ow (ascending, from +0) of grad_output[..., oc] *
 * (input[n,ih,iw,c'] + input_offset) in ctx->buf, scaled by coef[oc], then pockmcu_update_s8 with coef 1.
 *
 * @param[in]      ctx            ctx->buf: at least k * ch_mult floats, float aligned
 *                                (pockmcu_depthwise_conv_wgrad_update_s8_get_buffer_size() returns the bound
 *                                C_OUT floats); ctx->size is checked. Not read when nothing is trained.
 * @param[in]      dw_conv_params The forward's input_offset, ch_mult, stride, padding and dilation;
 *                                output_offset and activation are not read.
 * @param[in]      input_dims     Saved input shape [N, H, W, k].
 * @param[in]      input          Saved input, int8, NHWC: the forward input's channels [channel_begin, + k).
 * @param[in]      filter_dims    Filter shape [1, KH, KW, C_OUT], C_OUT = C_IN * ch_mult.
 * @param[in,out]  filter         Filter, int8, 1HWC; the trained output channels of every tap are updated.
 * @param[in]      channel_begin  First trained input channel; channel_begin + k <= C_IN.
 * @param[in]      output_dims    Output shape [N, OH, OW, C_OUT].
 * @param[in]      grad_output    Gradient w.r.t. the real output (after the activation mask), float32 NHWC.
 * @param[in]      coef           float32 [C_OUT], indexed by the real output channel (as for
 *                                pockmcu_conv_wgrad_update_s8).
 * @param[in,out]  accum          Batch accumulators, float32 [KH][KW][k * ch_mult], or NULL.
 * @param[in,out]  velocity       Momentum buffers, float32 [KH][KW][k * ch_mult], or NULL.
 * @param[in]      opt            Optimizer settings.
 * @param[in,out]  rng            xorshift32 state; one draw per updated element, in [i][j][t] order.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for bad strides, dilations or ch_mult, a channel
 *         range outside C_IN, output_dims->c != C_OUT, or a missing or too small ctx->buf.
 */
arm_cmsis_nn_status pockmcu_depthwise_conv_wgrad_update_s8(const cmsis_nn_context *ctx,
                                                           const cmsis_nn_dw_conv_params *dw_conv_params,
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
 * @brief Scratch size of pockmcu_depthwise_conv_wgrad_update_s8: C_OUT floats, an upper bound of k * ch_mult.
 *
 * @param[in]      input_dims     Saved input shape; not read.
 * @param[in]      filter_dims    Filter shape; c = C_OUT.
 *
 * @return Scratch bytes for ctx->buf.
 */
int32_t pockmcu_depthwise_conv_wgrad_update_s8_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                               const cmsis_nn_dims *filter_dims);

/**
 * @brief Weight gradient of a fully connected layer fused with the int8 weight update.
 *
 * G[o][i'] = sum over b (ascending, from +0) of grad_output[b][o] * (input[b][i'] + input_offset), formed
 * in chunks of up to 16 i' on the stack and applied with pockmcu_update_s8 to filter[o][channel_begin + i']
 * with coef[o], in [o][i'] order. No scratch buffer and no size query.
 *
 * @param[in]      input_dims     n = batches B, c = k saved input features.
 * @param[in]      input          Saved input, int8 [B][k]: the forward input's features [channel_begin, + k).
 * @param[in]      input_offset   -input zero point.
 * @param[in]      filter_dims    n = input features D, c = output features C_OUT.
 * @param[in,out]  filter         Weights, int8 [C_OUT][D]; columns [channel_begin, + k) are updated.
 * @param[in]      channel_begin  First trained input feature; channel_begin + k <= D.
 * @param[in]      grad_output    Gradient w.r.t. the real output (after the activation mask), float32 [B][C_OUT].
 * @param[in]      coef           float32 [C_OUT] (as for pockmcu_conv_wgrad_update_s8).
 * @param[in,out]  accum          Batch accumulators, float32 [C_OUT][k], or NULL.
 * @param[in,out]  velocity       Momentum buffers, float32 [C_OUT][k], or NULL.
 * @param[in]      opt            Optimizer settings.
 * @param[in,out]  rng            xorshift32 state; one draw per updated element.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if the feature range is outside [0, D) or a
 *         dimension is negative.
 */
arm_cmsis_nn_status pockmcu_fully_connected_wgrad_update_s8(const cmsis_nn_dims *input_dims,
                                                            const int8_t *input,
                                                            int32_t input_offset,
                                                            const cmsis_nn_dims *filter_dims,
                                                            int8_t *filter,
                                                            int32_t channel_begin,
                                                            const float *grad_output,
                                                            const float *coef,
                                                            float *accum,
                                                            float *velocity,
                                                            const pockmcu_optimizer *opt,
                                                            uint32_t *rng);

/**
 * @brief Bias gradient fused with the int32 bias update.
 *
 * g[o] = sum over p ascending (from +0) of grad_output[p * channels + o], in chunks of up to 16 channels
 * on the stack, then pockmcu_update_s32 with coef[o]. No scratch buffer and no size query.
 *
 * @param[in,out]  bias           Biases, int32 [channels].
 * @param[in]      grad_output    Gradient w.r.t. the layer's real output, float32 [positions][channels].
 * @param[in]      positions      Rows summed: N * OH * OW for a convolution, batches for a fully connected layer.
 * @param[in]      channels       Output channels.
 * @param[in]      coef           float32 [channels]: s_b (1 / s_b with QAS), s_b the bias scale.
 * @param[in,out]  accum          Batch accumulators, float32 [channels], or NULL.
 * @param[in,out]  velocity       Momentum buffers, float32 [channels], or NULL.
 * @param[in]      opt            Optimizer settings.
 * @param[in,out]  rng            xorshift32 state; one draw per updated element.
 */
void pockmcu_bias_update_s32(int32_t *bias,
                             const float *grad_output,
                             int32_t positions,
                             int32_t channels,
                             const float *coef,
                             float *accum,
                             float *velocity,
                             const pockmcu_optimizer *opt,
                             uint32_t *rng);

/* ---- issue 15 (fuzz15): trained biases inside the accumulator bound ---- */

/**
 * @brief Saturate int32 biases at +-limit.
 *
 * bias[o] = min(max(bias[o], -limit), limit), o ascending. With limit = 2^31 - 1 - K * 2^15 (K: the products
 * the layer's accumulator adds per output channel) bias + K products of int8 weights and int8 inputs minus
 * their zero point stay inside int32 for any values (the WRITE_PARAMS bound). No scratch buffer.
 *
 * @param[in,out]  bias           Biases, int32 [channels].
 * @param[in]      channels       Output channels.
 * @param[in]      limit          The largest |bias|; below 0 taken as 0.
 */
void pockmcu_bias_saturate_s32(int32_t *bias, int32_t channels, int32_t limit);

/**
 * @brief pockmcu_bias_update_s32 saturating at +-limit instead of the int32 range.
 *
 * pockmcu_bias_update_s32, then, when it updated (accum == NULL or opt->apply), pockmcu_bias_saturate_s32.
 * Arguments as pockmcu_bias_update_s32, and:
 *
 * @param[in]      limit          The largest |bias| (2^31 - 1 - K * 2^15, K the layer's products per output
 *                                channel); below 0 taken as 0.
 */
void pockmcu_bias_update_bounded_s32(int32_t *bias,
                                     const float *grad_output,
                                     int32_t positions,
                                     int32_t channels,
                                     const float *coef,
                                     float *accum,
                                     float *velocity,
                                     const pockmcu_optimizer *opt,
                                     uint32_t *rng,
                                     int32_t limit);

/**
 * @brief pockmcu_convolve_split_s8 (split-stored filter: the first head_c input channels of every tap in
 *        filter_head, the rest in the full OHWI filter) on the DSP extension: SXTAB16 / SXTB16 / SMLAD,
 *        2 output pixels x 2 output channels per inner loop, no scratch (ctx is not read). Same arguments,
 *        same status and the same bytes as pockmcu_convolve_split_s8 (portable C of the same loops where the
 *        core has no DSP, as on the host).
 */
arm_cmsis_nn_status pockmcu_convolve_split_s8_simd(const cmsis_nn_context *ctx,
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

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_TRAIN_H */
