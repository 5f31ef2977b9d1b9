/*
 * pockmcu_convolve_1x1_s8_dsp - pointwise int8 convolution (1x1 filter, stride 1, no padding) as a matrix multiply,
 * TFLite Micro's numerics.
 *
 * Armv7E-M / Armv8-M DSP kernel (SXTAB16, SXTB16, SMLAD; portable C with the same bits on other cores and
 * the host); loops in pockmcu_dsp_loops.h. Same arguments and bytes as arm_convolve_wrapper_s8; ctx->buf holds
 * pockmcu_convolve_1x1_s8_dsp_get_buffer_size() bytes. Calls arm_convolve_wrapper_s8 when the fast path does not apply.
 */
#include "pockmcu_dsp_loops.h"

arm_cmsis_nn_status pockmcu_convolve_1x1_s8_dsp(const cmsis_nn_context *ctx,
                                                const cmsis_nn_conv_params *conv_params,
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
    const arm_cmsis_nn_status status = pockmcu_dsp_conv_s8_loops(ctx,
                                                                 conv_params,
                                                                 quant_params,
                                                                 input_dims,
                                                                 input_data,
                                                                 filter_dims,
                                                                 filter_data,
                                                                 bias_data,
                                                                 output_dims,
                                                                 output_data,
                                                                 1,
                                                                 0);
    if (status != ARM_CMSIS_NN_NO_IMPL_ERROR)
    {
        return status;
    }
    return arm_convolve_wrapper_s8(ctx,
                                   conv_params,
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
