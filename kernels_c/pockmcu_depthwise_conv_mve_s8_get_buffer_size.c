/*
 * pockmcu_depthwise_conv_mve_s8_get_buffer_size - scratch size of pockmcu_depthwise_conv_mve_s8 (CMSIS-NN API): none,
 * on every core (its Helium path works in a fixed stack block; elsewhere it is the portable kernel).
 */
#include "pockmcu_nn.h"

int32_t pockmcu_depthwise_conv_mve_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
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
