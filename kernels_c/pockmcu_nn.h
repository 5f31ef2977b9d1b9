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

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_H */
