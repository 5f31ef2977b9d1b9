/*
 * pockmcu_depthwise_conv_wgrad_update_s8_get_buffer_size - scratch bytes for
 * pockmcu_depthwise_conv_wgrad_update_s8: one tap's gradient slice needs
 * k * ch_mult floats; ch_mult is not known here, so this returns the upper
 * bound C_out = filter_dims->c floats (k * ch_mult <= C_out). A caller that
 * knows ch_mult may pass a buffer of exactly input_dims->c * ch_mult floats.
 */
#include "pockmcu_nn.h"

int32_t pockmcu_depthwise_conv_wgrad_update_s8_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                               const cmsis_nn_dims *filter_dims)
{
    (void)input_dims;
    return filter_dims->c * (int32_t)sizeof(float);
}
