/*
 * pockmcu_depthwise_conv_3x3_dsp_s8_get_buffer_size - scratch size of pockmcu_depthwise_conv_3x3_dsp_s8: the
 * extended weights (3 orders), the group's requantization parameters and a ring of 3 extended input rows
 * ((out_w - 1) * stride_w + 3 columns of 8 bytes each), plus 3 bytes to align it to a word.
 */
#include "pockmcu_nn.h"

int32_t pockmcu_depthwise_conv_3x3_dsp_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                          const cmsis_nn_dims *input_dims,
                                                          const cmsis_nn_dims *filter_dims,
                                                          const cmsis_nn_dims *output_dims)
{
    const int32_t stride_w = dw_conv_params->stride.w > 0 ? dw_conv_params->stride.w : 1;
    const int32_t out_w = output_dims->w > 0 ? output_dims->w : 1;
    (void)input_dims;
    (void)filter_dims;
    return 4 * (54 + 12 + 6 * ((out_w - 1) * stride_w + 3)) + 4;
}
