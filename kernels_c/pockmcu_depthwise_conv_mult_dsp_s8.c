/*
 * pockmcu_depthwise_conv_mult_dsp_s8 - int8 depthwise convolution with a channel multiplier above 1 for cores with
 * the DSP extension (Cortex-M4, M7, M33, M55): any input channel count, filter size, stride, dilation and padding.
 *
 * The bytes of arm_depthwise_conv_wrapper_s8 for every input (pockmcu_dw_dsp_loops.h, section "channel
 * multiplier above 1", explains the loops). Built from pockmcu_simd.h, so it also runs on the host and on
 * Cortex-M3. Scratch: the *_get_buffer_size query's bytes; without them (buf NULL or a smaller size), or for a
 * channel multiplier of 1, it runs arm_depthwise_conv_wrapper_s8.
 */
#include "pockmcu_dw_dsp_loops.h"

arm_cmsis_nn_status pockmcu_depthwise_conv_mult_dsp_s8(const cmsis_nn_context *ctx,
                                                       const cmsis_nn_dw_conv_params *dw_conv_params,
                                                       const cmsis_nn_per_channel_quant_params *quant_params,
                                                       const cmsis_nn_dims *input_dims,
                                                       const int8_t *input_data,
                                                       const cmsis_nn_dims *filter_dims,
                                                       const int8_t *filter_data,
                                                       const cmsis_nn_dims *bias_dims,
                                                       const int32_t *bias_data,
                                                       const cmsis_nn_dims *output_dims,
                                                       int8_t *output_data)
{
    const int32_t ch_mult = dw_conv_params->ch_mult;
    if (ch_mult > 1 && output_dims->c == input_dims->c * ch_mult && dw_conv_params->stride.h >= 1 &&
        dw_conv_params->stride.w >= 1 && dw_conv_params->dilation.h >= 1 && dw_conv_params->dilation.w >= 1 &&
        ctx != NULL && ctx->buf != NULL &&
        ctx->size >= pockmcu_dwm_buffer_size(ch_mult, input_dims->c, filter_dims->h, filter_dims->w))
    {
        return pockmcu_depthwise_conv_mult_dsp_loops(ctx->buf,
                                                     dw_conv_params,
                                                     quant_params,
                                                     input_dims,
                                                     input_data,
                                                     filter_dims,
                                                     filter_data,
                                                     bias_data,
                                                     output_dims,
                                                     output_data);
    }
    return arm_depthwise_conv_wrapper_s8(ctx,
                                         dw_conv_params,
                                         quant_params,
                                         input_dims,
                                         input_data,
                                         filter_dims,
                                         filter_data,
                                         bias_dims,
                                         bias_data,
                                         output_dims,
                                         output_data);
}
