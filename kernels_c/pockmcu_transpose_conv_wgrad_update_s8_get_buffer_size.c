/*
 * pockmcu_transpose_conv_wgrad_update_s8_get_buffer_size - scratch bytes needed by
 * pockmcu_transpose_conv_wgrad_update_s8: one output channel's gradient slice, KH * KW * k floats
 * (k = input_dims->c, the saved trainable channels).
 */
#include "pockmcu_nn.h"

int32_t pockmcu_transpose_conv_wgrad_update_s8_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                               const cmsis_nn_dims *filter_dims)
{
    return filter_dims->h * filter_dims->w * input_dims->c * (int32_t)sizeof(float);
}
