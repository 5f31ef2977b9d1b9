/*
 * pockmcu_depthwise_conv_3x3_dsp_s8_get_buffer_size - scratch size of pockmcu_depthwise_conv_3x3_dsp_s8: the
 * extended weights and requantization parameters of a group (3 orders x 2 channel pairs x 17 words) and a ring of 3
 * extended input lines of 12 words a column, for the longer of the two line orientations ((out_w - 1) * stride_w + 3 or
 * (out_h - 1) * stride_h + 3 columns), plus 3 bytes to align it to a word.
 */
#include "pockmcu_nn.h"

int32_t pockmcu_depthwise_conv_3x3_dsp_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                          const cmsis_nn_dims *input_dims,
                                                          const cmsis_nn_dims *filter_dims,
                                                          const cmsis_nn_dims *output_dims)
{
    const int32_t stride_w = dw_conv_params->stride.w > 0 ? dw_conv_params->stride.w : 1;
    const int32_t stride_h = dw_conv_params->stride.h > 0 ? dw_conv_params->stride.h : 1;
    const int32_t out_w = output_dims->w > 0 ? output_dims->w : 1;
    const int32_t out_h = output_dims->h > 0 ? output_dims->h : 1;
    const int32_t cols_w = (out_w - 1) * stride_w + 3;
    const int32_t cols_h = (out_h - 1) * stride_h + 3;
    (void)input_dims;
    (void)filter_dims;
    return 4 * (102 + 12 * (cols_w > cols_h ? cols_w : cols_h)) + 4;
}
