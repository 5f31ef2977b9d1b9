/*
 * pockmcu_conv_grad_input_split_f32 - pockmcu_conv_grad_input_f32 for a filter stored in two parts.
 *
 * The filter W[o][i][j][c] (OHWI, filter_dims = {O, KH, KW, C_in}) is
 *   filter_head[((o * KH + i) * KW + j) * head_c + c]   for c <  head_c (the trained channels, in RAM)
 *   filter[((o * KH + i) * KW + j) * C_in + c]          for c >= head_c (the full tensor, in flash)
 * Same float operations in the same order as pockmcu_conv_grad_input_f32 on the merged filter:
 * bit-identical. 0 < head_c <= C_in and filter_head != NULL, else ARM_CMSIS_NN_ARG_ERROR.
 */
#include "pockmcu_layer_loops.h"
#include "pockmcu_train_fast.h"

arm_cmsis_nn_status pockmcu_conv_grad_input_split_f32(const cmsis_nn_conv_params *conv_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const int8_t *filter,
                                                      const int8_t *filter_head,
                                                      int32_t head_c,
                                                      const float *filter_scale,
                                                      const cmsis_nn_dims *output_dims,
                                                      const float *grad_output,
                                                      float *grad_input)
{
    if (head_c < 1 || head_c > filter_dims->c || filter_head == NULL)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    if (filter_dims->h == 1 && filter_dims->w == 1 && filter_dims->n > 0 && filter_dims->c == input_dims->c &&
        output_dims->c == filter_dims->n && conv_params->stride.h >= 1 && conv_params->stride.w >= 1 &&
        conv_params->dilation.h >= 1 && conv_params->dilation.w >= 1 && input_dims->n >= 0 && input_dims->h >= 0 &&
        input_dims->w >= 0 && input_dims->c >= 0)
    {
        pockmcu_conv_1x1_grad_input_fast(conv_params,
                                         input_dims,
                                         filter_dims,
                                         filter,
                                         filter_head,
                                         head_c,
                                         filter_scale,
                                         output_dims,
                                         grad_output,
                                         grad_input);
        return ARM_CMSIS_NN_SUCCESS;
    }
    return pockmcu_conv_grad_input_f32_loops(conv_params,
                                             input_dims,
                                             filter_dims,
                                             filter,
                                             filter_head,
                                             head_c,
                                             filter_scale,
                                             output_dims,
                                             grad_output,
                                             grad_input);
}
