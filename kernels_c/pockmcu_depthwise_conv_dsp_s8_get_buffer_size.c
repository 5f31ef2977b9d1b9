/*
 * pockmcu_depthwise_conv_dsp_s8_get_buffer_size - scratch size of pockmcu_depthwise_conv_dsp_s8. It needs none.
 */
#include "pockmcu_nn.h"

int32_t pockmcu_depthwise_conv_dsp_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                      const cmsis_nn_dims *input_dims,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const cmsis_nn_dims *output_dims)
{
    (void)dw_conv_params;
    (void)input_dims;
    (void)filter_dims;
    (void)output_dims;
    return 0;
}
