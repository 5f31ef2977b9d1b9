/*
 * pockmcu_convolve_split_s8 - int8 2D convolution whose filter is stored in two parts.
 *
 * Computes exactly what arm_convolve_wrapper_s8 (ort_rounding 0: TFLM's double rounding) or
 * pockmcu_convolve_ort_s8 (ort_rounding 1: onnxruntime's float32 requantization) computes with
 * the filter W[o][ky][kx][c] (OHWI, filter_dims = {O, KH, KW, C_in}) given as
 *   W[o][ky][kx][c] = filter_head[((o * KH + ky) * KW + kx) * head_c + c]   for c <  head_c
 *                   = filter[((o * KH + ky) * KW + kx) * C_in + c]          for c >= head_c
 * i.e. the first head_c input channels of every tap come from filter_head (rows of head_c values,
 * the trained part a channel-sparse update keeps in RAM) and the rest from filter (the full
 * tensor in flash; its first head_c values of every tap are not read). Integer sums are exact, so
 * the output is bit-identical to the unsplit kernel on the merged filter.
 *
 * No groups: input_dims->c must equal filter_dims->c; 0 <= head_c <= C_in, and filter_head may be
 * NULL only when head_c is 0. ARM_CMSIS_NN_ARG_ERROR otherwise. Needs no scratch buffer.
 */
#include "pockmcu_layer_loops.h"

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
                                              int32_t ort_rounding)
{
    if (input_dims->c != filter_dims->c || head_c < 0 || head_c > filter_dims->c || (head_c > 0 && filter_head == NULL))
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    return pockmcu_conv_s8_loops(ctx,
                                 conv_params,
                                 quant_params,
                                 input_dims,
                                 input_data,
                                 filter_dims,
                                 filter_data,
                                 filter_head,
                                 head_c,
                                 bias_dims,
                                 bias_data,
                                 output_dims,
                                 output_data,
                                 ort_rounding != 0);
}
