/*
 * pockmcu_nn.h - the single header included by pockmcu-generated code.
 *
 * Declares the CMSIS-NN compatible types and the CMSIS-NN named int8 forward
 * kernels (portable C99 implementations live in kernels_c/arm_*.c), plus
 * pockmcu's own kernels (kernels_c/pockmcu_*.c).
 *
 * If POCKMCU_USE_CMSIS_NN is defined, Arm's "arm_nnfunctions.h" is included
 * instead for the types and the arm_* prototypes, and the build links Arm's
 * CMSIS-NN kernels in place of kernels_c/arm_*.c.
 *
 * Conventions (identical to CMSIS-NN / TFLM):
 *   - activations NHWC, conv filters OHWI, depthwise filters 1HWC (C = C_IN *
 *     ch_mult, output channel = in_channel * ch_mult + m), FC filters
 *     [out][accum] row major;
 *   - input_offset = -input_zero_point, output_offset = +output_zero_point,
 *     filter_offset = -filter_zero_point;
 *   - padding = top/left padding; bottom/right padding is implied by the
 *     output size and handled by bounds checks (asymmetric SAME works);
 *   - multiplier/shift: TFLM QuantizeMultiplier, shift > 0 is a left shift,
 *     requantization uses TFLM's (default, double rounding)
 *     MultiplyByQuantizedMultiplier.
 */
#ifndef POCKMCU_NN_H
#define POCKMCU_NN_H

#include <stddef.h>
#include <stdint.h>

#ifdef POCKMCU_USE_CMSIS_NN

#include "arm_nnfunctions.h"

#else /* !POCKMCU_USE_CMSIS_NN */

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CMSIS-NN compatible types (same names, same field names) ---------- */

typedef enum
{
    ARM_CMSIS_NN_SUCCESS = 0,
    ARM_CMSIS_NN_ARG_ERROR = -1,
    ARM_CMSIS_NN_NO_IMPL_ERROR = -2,
    ARM_CMSIS_NN_FAILURE = -3
} arm_cmsis_nn_status;

typedef struct
{
    int32_t w;
    int32_t h;
} cmsis_nn_tile;

typedef struct
{
    void *buf;
    int32_t size;
} cmsis_nn_context;

typedef struct
{
    int32_t n; /* batch, or output channels for conv filters */
    int32_t h;
    int32_t w;
    int32_t c;
} cmsis_nn_dims;

typedef struct
{
    int32_t *multiplier;
    int32_t *shift;
} cmsis_nn_per_channel_quant_params;

typedef struct
{
    int32_t multiplier;
    int32_t shift;
} cmsis_nn_per_tensor_quant_params;

typedef struct
{
    int32_t min;
    int32_t max;
} cmsis_nn_activation;

typedef struct
{
    int32_t input_offset;
    int32_t output_offset;
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_conv_params;

typedef struct
{
    int32_t input_offset;
    int32_t output_offset;
    int32_t ch_mult;
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_tile dilation;
    cmsis_nn_activation activation;
} cmsis_nn_dw_conv_params;

typedef struct
{
    cmsis_nn_tile stride;
    cmsis_nn_tile padding;
    cmsis_nn_activation activation;
} cmsis_nn_pool_params;

typedef struct
{
    int32_t input_offset;
    int32_t filter_offset;
    int32_t output_offset;
    cmsis_nn_activation activation;
} cmsis_nn_fc_params;

/* ---- CMSIS-NN named kernels ------------------------------------------- */

/* Convolution, NHWC input, OHWI filter (filter_dims = {C_OUT, KH, KW, C_IN /
 * groups}); grouped convolution when input_dims->c > filter_dims->c. */
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

int32_t arm_convolve_wrapper_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const cmsis_nn_dims *output_dims);

/* arm_convolve_wrapper_s8 (ort_rounding 0) or pockmcu_convolve_ort_s8 (ort_rounding 1) with the
 * filter split in two (no groups): the first head_c input channels of every tap (o, ky, kx) from
 * filter_head (rows of head_c: the RAM copy of a channel-sparse update's trained channels), the
 * rest from filter (full OHWI). Bit-identical to the unsplit kernel on the merged filter. No scratch. */
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

/* Depthwise convolution, filter_dims = {1, KH, KW, C_OUT}. */
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

int32_t arm_depthwise_conv_wrapper_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const cmsis_nn_dims *output_dims);

/* Fully connected: batches = input_dims->n, accumulation depth =
 * filter_dims->n, output depth = output_dims->c. */
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

int32_t arm_fully_connected_s8_get_buffer_size(const cmsis_nn_dims *filter_dims);

/* Pooling: input_dims = {N, H, W, C}, filter_dims = {-, KH, KW, -},
 * output_dims = {N, OH, OW, C}. */
arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context *ctx,
                                   const cmsis_nn_pool_params *pool_params,
                                   const cmsis_nn_dims *input_dims,
                                   const int8_t *input_data,
                                   const cmsis_nn_dims *filter_dims,
                                   const cmsis_nn_dims *output_dims,
                                   int8_t *output_data);

int32_t arm_avgpool_s8_get_buffer_size(const int dim_dst_width, const int ch_src);

arm_cmsis_nn_status arm_max_pool_s8(const cmsis_nn_context *ctx,
                                    const cmsis_nn_pool_params *pool_params,
                                    const cmsis_nn_dims *input_dims,
                                    const int8_t *input_data,
                                    const cmsis_nn_dims *filter_dims,
                                    const cmsis_nn_dims *output_dims,
                                    int8_t *output_data);

/* TFLM int8 ADD (same shapes): left_shift = 20, input shifts <= 0. */
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

/* TFLM int8 -> int8 SOFTMAX over rows; shift = input_left_shift (>= 0);
 * output zero point -128, scale 1/256. */
void arm_softmax_s8(const int8_t *input,
                    const int32_t num_rows,
                    const int32_t row_size,
                    const int32_t mult,
                    const int32_t shift,
                    const int32_t diff_min,
                    int8_t *output);

/* Concatenation: tensors are seen as [w][z][y][x] with x innermost. */
void arm_concatenation_s8_x(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint16_t output_x,
                            const uint32_t offset_x);

void arm_concatenation_s8_y(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint16_t output_y,
                            const uint32_t offset_y);

void arm_concatenation_s8_z(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint16_t output_z,
                            const uint32_t offset_z);

void arm_concatenation_s8_w(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint32_t offset_w);

/* Constant pad of an NHWC tensor in all four dimensions. */
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

/* ---- pockmcu's own kernels (always ours) ------------------------------- */

#ifdef __cplusplus
extern "C" {
#endif

/*
 * TFLM int8 MEAN over the H and W axes of input_dims = {N, H, W, C}; output
 * is {N, C} (identical memory layout with or without keep_dims). Any reduction
 * over a contiguous run of axes can be expressed by folding dimensions:
 * n = product of the outer axes, h * w = product of the reduced axes, c =
 * product of the inner axes.
 * multiplier/shift = QuantizeMultiplier(input_scale / output_scale), exactly as
 * TFLM's Prepare computes them; the kernel folds in 1/num_elements exactly
 * like TFLM's QuantizedMeanOrSum does at eval time.
 * input_offset = -input_zero_point, output_offset = output_zero_point.
 */
arm_cmsis_nn_status pockmcu_mean_s8(const cmsis_nn_dims *input_dims,
                                    const int8_t *input_data,
                                    int32_t input_offset,
                                    int32_t output_offset,
                                    int32_t multiplier,
                                    int32_t shift,
                                    int8_t *output_data);

/*
 * TFLM int8 LOGISTIC (output zero point -128, scale 1/256).
 * input_offset = -input_zero_point; input_range_radius, input_multiplier and
 * input_left_shift as computed by TFLM's CalculateArithmeticOpDataLogistic.
 */
arm_cmsis_nn_status pockmcu_logistic_s8(const int8_t *input_data,
                                        int32_t size,
                                        int32_t input_offset,
                                        int32_t input_range_radius,
                                        int32_t input_multiplier,
                                        int32_t input_left_shift,
                                        int8_t *output_data);

/* TFLM AffineQuantize float32 -> int8: round_half_away(x / scale) + zp, clamped. */
arm_cmsis_nn_status pockmcu_quantize_f32_s8(const float *input_data,
                                            int32_t size,
                                            float scale,
                                            int32_t zero_point,
                                            int8_t *output_data);

/* TFLM Dequantize int8 -> float32: (float)((double)scale * (x - zp)). */
arm_cmsis_nn_status pockmcu_dequantize_s8_f32(const int8_t *input_data,
                                              int32_t size,
                                              float scale,
                                              int32_t zero_point,
                                              float *output_data);

/*
 * Axis permutation of a 4-D int8 tensor: output shape[k] = input shape[perm[k]]
 * (numpy x.transpose(perm)); perm holds 4 entries. Lower ranks are padded
 * with leading size-1 axes.
 */
arm_cmsis_nn_status pockmcu_transpose_s8(const int8_t *input_data,
                                         const cmsis_nn_dims *input_dims,
                                         const int32_t *perm,
                                         int8_t *output_data);

/*
 * TFLM int8 -> int8 requantization (QUANTIZE int8 -> int8):
 * clamp(MultiplyByQuantizedMultiplier(x + input_offset, multiplier, shift)
 * + output_offset, act_min, act_max); multiplier/shift from
 * QuantizeMultiplier(s_in / s_out). input_offset = -input_zero_point.
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

/*
 * Average pooling with requantization in one rounding: per output, the sum of
 * the in-bounds (x - input_zero_point), times QuantizeMultiplier(s_in / (s_out *
 * count)) taken from multipliers/shifts[count - 1], plus output_offset, clamped
 * to pool_params->activation. Dims and padding as arm_avgpool_s8.
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

/* uint8 <-> int8 at the same scale (zero point +-128): x ^ 0x80, either direction. */
arm_cmsis_nn_status pockmcu_flip_sign_8(const void *input_data, int32_t size, void *output_data);

/* ==== training kernels (backward + update) ============================== */
/*
 * Gradients are float32 w.r.t. REAL (dequantized) values; saved activations
 * are int8 and dequantized on the fly. Every loop has a fixed, documented
 * summation order (see each kernels_c/pockmcu_*.c) so host and Cortex-M give
 * identical bits (build with -ffp-contract=off; no FMA, no libm, no malloc).
 *
 * Update rule (pockmcu_update_s8 / _s32, used by every *_update_* kernel),
 * per trainable element k in increasing k:
 *   g = grad[k] * coef        (QAS folded into coef by the compiler)
 *   if accum:    accum[k] += g; if !opt->apply: next k;
 *                g = accum[k] / (float)opt->batch; accum[k] = 0
 *   if velocity: velocity[k] = opt->momentum * velocity[k] + g; g = velocity[k]
 *   q[k] = saturate(q[k] + pockmcu_stochastic_round(-opt->lr * g, rng))
 *          (int8: [-127, 127]; int32: int32 range)
 * One RNG draw per updated element, none for accumulate-only calls.
 */
typedef struct
{
    float lr;       /* learning rate */
    float momentum; /* 0: plain SGD */
    int32_t batch;  /* samples per update, >= 1 */
    int32_t apply;  /* 1: this sample ends a batch, apply the update; 0: only accumulate */
} pockmcu_optimizer;

/* x ^= x << 13; x ^= x >> 17; x ^= x << 5; returns new x; state != 0 */
uint32_t pockmcu_xorshift32(uint32_t *state);

/* floor(x + u), u = (xorshift32(rng) >> 8) * 2^-24; x clamped to +-2^30
 * first (NaN -> 0); x + u in float32. */
int32_t pockmcu_stochastic_round(float x, uint32_t *rng);

void pockmcu_update_s8(int8_t *q,
                       const float *grad,
                       int32_t n,
                       float coef,
                       float *accum,
                       float *velocity,
                       const pockmcu_optimizer *opt,
                       uint32_t *rng);

/* coef per element; int32 saturation. */
void pockmcu_update_s32(int32_t *q,
                        const float *grad,
                        int32_t n,
                        const float *coef,
                        float *accum,
                        float *velocity,
                        const pockmcu_optimizer *opt,
                        uint32_t *rng);

/* grad_input (fully written) [n,h,w,c] = sum over (oh,ow,i,j,o), h = oh*stride_h
 * - pad_h + i*dil_h (same for w) in bounds, of grad_output[n,oh,ow,o] *
 * filter_scale[o] * filter[o,i,j,c]. No groups (input c == filter c). */
arm_cmsis_nn_status pockmcu_conv_grad_input_f32(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const int8_t *filter,
                                                const float *filter_scale,
                                                const cmsis_nn_dims *output_dims,
                                                const float *grad_output,
                                                float *grad_input);
/* The same, bit for bit, with split storage as in pockmcu_convolve_split_s8: channels c < head_c of
 * every tap read from filter_head (rows of head_c), the rest from filter; 0 < head_c <= c. */
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

/* Depthwise: filter 1HWC, oc = ic*ch_mult + m, filter_scale per oc. */
arm_cmsis_nn_status pockmcu_depthwise_conv_grad_input_f32(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                          const cmsis_nn_dims *input_dims,
                                                          const cmsis_nn_dims *filter_dims,
                                                          const int8_t *filter,
                                                          const float *filter_scale,
                                                          const cmsis_nn_dims *output_dims,
                                                          const float *grad_output,
                                                          float *grad_input);
/* The same, bit for bit, for stride 1, row by row; grad_input may be grad_output (ch_mult 1): finished
 * rows wait in a ring in ctx->buf of the size below until their output row is read no more. */
arm_cmsis_nn_status pockmcu_depthwise_conv_grad_input_rows_f32(const cmsis_nn_context *ctx,
                                                               const cmsis_nn_dw_conv_params *dw_conv_params,
                                                               const cmsis_nn_dims *input_dims,
                                                               const cmsis_nn_dims *filter_dims,
                                                               const int8_t *filter,
                                                               const float *filter_scale,
                                                               const cmsis_nn_dims *output_dims,
                                                               const float *grad_output,
                                                               float *grad_input);
int32_t pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                                   const cmsis_nn_dims *input_dims,
                                                                   const cmsis_nn_dims *filter_dims);

/* input_dims: n = batches, c = in features; filter_dims: n = in, c = out (as the
 * forward); real weight = filter_scale[o] * (filter[o][i] + filter_offset). */
arm_cmsis_nn_status pockmcu_fully_connected_grad_input_f32(const cmsis_nn_dims *input_dims,
                                                           const cmsis_nn_dims *filter_dims,
                                                           const int8_t *filter,
                                                           int32_t filter_offset,
                                                           const float *filter_scale,
                                                           const float *grad_output,
                                                           float *grad_input);

/*
 * Conv weight gradient fused with the update. input = saved trainable input
 * channels [channel_begin, channel_begin + k), input_dims->c = k; filter_dims
 * the full OHWI filter. Per output channel o: G[i][j][c'] (in ctx->buf) = sum
 * over n, oh, ow of grad_output[n,oh,ow,o] * (input[n,ih,iw,c'] + input_offset),
 * then the update rule on filter[o][i][j][channel_begin + c'] with coef[o];
 * accum / velocity NULL or O*KH*KW*k floats [o][i][j][c'].
 * ctx->buf: get_buffer_size() bytes (KH*KW*k floats), ctx->size checked.
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

int32_t pockmcu_conv_wgrad_update_s8_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                     const cmsis_nn_dims *filter_dims);

/*
 * Depthwise weight gradient fused with the update. input_dims->c = k saved
 * input channels from channel_begin; filter_dims = {1, KH, KW, C_out}; output
 * channels [channel_begin*ch_mult, (channel_begin+k)*ch_mult) are trained;
 * coef per output channel (length C_out); accum / velocity NULL or
 * KH*KW*k*ch_mult floats [i][j][c'*ch_mult+m]. Processed tap by tap (i, j);
 * ctx->buf needs k*ch_mult floats, get_buffer_size() returns the bound
 * C_out floats (in bytes); ctx->size checked.
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

int32_t pockmcu_depthwise_conv_wgrad_update_s8_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                               const cmsis_nn_dims *filter_dims);

/* FC weight gradient fused with the update: input_dims n = batches, c = k saved
 * features; G[o][i'] = sum over b of grad_output[b][o] * (input[b][i'] +
 * input_offset); update filter[o][channel_begin + i'] with coef[o];
 * accum / velocity NULL or out*k floats [o][i']. */
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

/* g[o] = sum over p ascending of grad_output[p*channels + o]; then the update
 * rule with coef[o] (int32 saturation); accum / velocity NULL or channels floats. */
void pockmcu_bias_update_s32(int32_t *bias,
                             const float *grad_output,
                             int32_t positions,
                             int32_t channels,
                             const float *coef,
                             float *accum,
                             float *velocity,
                             const pockmcu_optimizer *opt,
                             uint32_t *rng);

/* 1-bit masks: bit k (byte k/8, bit k%8, LSB first) = 1 iff lo < x[k] < hi. */
void pockmcu_mask_pack_s8(const int8_t *x, int32_t n, int32_t lo, int32_t hi, uint8_t *mask);
/* grad[k] = 0 where bit k is 0 (in place). */
void pockmcu_mask_apply_f32(float *grad, const uint8_t *mask, int32_t n);
/* (n + 7) / 8 */
int32_t pockmcu_mask_bytes(int32_t n);

/* Average pooling backward: each output gradient / (in-bounds taps of its
 * window, as the forward counts) added to each in-bounds input of the window. */
arm_cmsis_nn_status pockmcu_avgpool_grad_f32(const cmsis_nn_pool_params *pool_params,
                                             const cmsis_nn_dims *input_dims,
                                             const cmsis_nn_dims *filter_dims,
                                             const cmsis_nn_dims *output_dims,
                                             const float *grad_output,
                                             float *grad_input);

/* Max pooling backward: each output gradient goes to the FIRST maximum of its
 * window in scan order (i outer, j inner), in-bounds taps only. */
arm_cmsis_nn_status pockmcu_max_pool_grad_f32(const cmsis_nn_pool_params *pool_params,
                                              const cmsis_nn_dims *input_dims,
                                              const int8_t *input,
                                              const cmsis_nn_dims *filter_dims,
                                              const cmsis_nn_dims *output_dims,
                                              const float *grad_output,
                                              float *grad_input);

/* MEAN over H, W backward: grad_input = grad_output[n][c] / (h*w) everywhere. */
void pockmcu_mean_grad_f32(const cmsis_nn_dims *input_dims, const float *grad_output, float *grad_input);

/* Backward of a 1x1 stride-1 convolution (output_dims) whose output feeds a spatial mean: the
 * broadcast gradient grad_mean[n][o] / (h*w), masked by the conv's 1-bit mask, formed where it is
 * read; then (bias != NULL) pockmcu_bias_update_s32 and (grad_input != NULL) the input gradient of
 * pockmcu_conv_grad_input_f32, bit for bit, without the N x H x W x C_out gradient tensor. */
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

/* PAD backward (crop); input_dims unpadded, as arm_pad_s8. */
arm_cmsis_nn_status pockmcu_pad_grad_f32(const cmsis_nn_dims *input_dims,
                                         const cmsis_nn_dims *pre_pad,
                                         const cmsis_nn_dims *post_pad,
                                         const float *grad_output,
                                         float *grad_input);

/* dst[r][0..chunk) = src[r][offset..offset+chunk), r < outer, rows of src_row. */
void pockmcu_slice_f32(const float *src, int32_t outer, int32_t src_row, int32_t offset, int32_t chunk, float *dst);
void pockmcu_slice_s8(const int8_t *src, int32_t outer, int32_t src_row, int32_t offset, int32_t chunk, int8_t *dst);
/* dst[r][offset..offset+chunk) = src[r][0..chunk), r < outer, rows of dst_row (writes a tile). */
void pockmcu_paste_s8(const int8_t *src, int32_t outer, int32_t dst_row, int32_t offset, int32_t chunk, int8_t *dst);
/* out[k] = a[k] + b[k]; out may alias a or b. */
void pockmcu_add_f32(const float *a, const float *b, float *out, int32_t n);

/* probs: int8 softmax output (scale 1/256, zp -128); grad_logits[c] = beta *
 * ((probs[c] + 128) / 256 - (c == label)); returns nll_table[probs[label] + 128]. */
float pockmcu_softmax_xent_grad_s8(const int8_t *probs,
                                   int32_t classes,
                                   int32_t label,
                                   float beta,
                                   const float *nll_table,
                                   float *grad_logits);

/* d_k = scale * (y[k] - zero_point) - target[k]; grad[k] = 2 * d_k / n;
 * returns (sum_k d_k^2, ascending) / n. */
float pockmcu_mse_grad_s8(const int8_t *y, int32_t n, float scale, int32_t zero_point, const float *target,
                          float *grad);
float pockmcu_mse_grad_f32(const float *y, int32_t n, const float *target, float *grad);

/* ==== end of training kernels ========================================== */

/* ==== onnxruntime numerics: the same kernels with MLAS's float32 requantization,
 * emulated exactly in integers (see pockmcu_requantize_ort in pockmcu_nn_support.h):
 * quant_params multiplier/shift hold a float32 scale's 24-bit mantissa and exponent. */
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
int32_t pockmcu_convolve_ort_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const cmsis_nn_dims *output_dims);
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
int32_t pockmcu_depthwise_conv_ort_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const cmsis_nn_dims *output_dims);
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

arm_cmsis_nn_status pockmcu_mean_ort_s8(const cmsis_nn_dims *input_dims,
                                        const int8_t *input_data,
                                        int32_t input_offset,
                                        int32_t output_offset,
                                        int32_t mant,
                                        int32_t exp,
                                        int8_t *output_data);
/* output[i] = table[input[i] + 128] (a compile-time table of an int8 -> int8 function). */
arm_cmsis_nn_status pockmcu_lut_s8(const int8_t *input_data, int32_t size, const int8_t *table, int8_t *output_data);

/* Average pooling as onnxruntime's QLinearAveragePool computes it in float32 (bit patterns, see
 * pockmcu_avgpool_ort_s8.c); dims and padding as arm_avgpool_s8. */
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

/* Softmax over rows as onnxruntime's QLinearSoftmax computes it in float32 (bit patterns, see
 * pockmcu_softmax_ort_s8.c): exp_table holds 256 float32 bit patterns made at compile time. */
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

#endif /* POCKMCU_NN_H */
