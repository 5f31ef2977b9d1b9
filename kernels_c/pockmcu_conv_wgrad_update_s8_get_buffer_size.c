/*
 * pockmcu_conv_wgrad_update_s8_get_buffer_size - scratch bytes needed by
 * pockmcu_conv_wgrad_update_s8: the gradient slices of min(4, O) output
 * channels, KH * KW * k floats each (k = input_dims->c, the saved trainable
 * channels), so that the kernel works on 4 output channels at a time.
 */
#include "pockmcu_nn.h"

int32_t pockmcu_conv_wgrad_update_s8_get_buffer_size(const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims)
{
    const int32_t rows = filter_dims->n < 4 ? filter_dims->n : 4;
    return (rows > 1 ? rows : 1) * filter_dims->h * filter_dims->w * input_dims->c * (int32_t)sizeof(float);
}
