/*
 * pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size - scratch size of pockmcu_depthwise_conv_mult_dsp_s8: for a
 * channel multiplier above 1 the int16 weight rows of one input channel, two gathered columns and the
 * requantization parameters, or with 4 or more input channels at least one multiplier's filter copy and
 * requantization parameters (pockmcu_dwm_buffer_size in pockmcu_dw_dsp_loops.h); 0 otherwise.
 */
#include "pockmcu_dw_dsp_loops.h"

int32_t pockmcu_depthwise_conv_mult_dsp_s8_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                           const cmsis_nn_dims *input_dims,
                                                           const cmsis_nn_dims *filter_dims,
                                                           const cmsis_nn_dims *output_dims)
{
    (void)output_dims;
    if (dw_conv_params->ch_mult <= 1)
    {
        return 0;
    }
    return pockmcu_dwm_buffer_size(dw_conv_params->ch_mult, input_dims->c, filter_dims->h, filter_dims->w);
}
