/*
 * pockmcu_conv_1x1_grad_from_mean_bounded_f32 - pockmcu_conv_1x1_grad_from_mean_f32 with its bias
 * update saturating at +-bias_limit, the accumulator bound, instead of the int32 range.
 *
 * pockmcu_conv_1x1_grad_from_mean_f32, then, when it succeeded and updated the biases (bias != NULL,
 * accum == NULL or opt->apply), pockmcu_bias_saturate_s32(bias, C_OUT, bias_limit); bit-identical to
 * the unfused pockmcu_bias_update_bounded_s32 sequence.
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_conv_1x1_grad_from_mean_bounded_f32(const cmsis_nn_dims *output_dims,
                                                                const float *grad_mean,
                                                                const uint8_t *mask,
                                                                const cmsis_nn_dims *filter_dims,
                                                                const int8_t *filter,
                                                                const float *filter_scale,
                                                                int32_t *bias,
                                                                const float *bias_coef,
                                                                float *accum,
                                                                float *velocity,
                                                                const pockmcu_optimizer *opt,
                                                                uint32_t *rng,
                                                                float *grad_input,
                                                                int32_t bias_limit)
{
    const arm_cmsis_nn_status status = pockmcu_conv_1x1_grad_from_mean_f32(output_dims,
                                                                           grad_mean,
                                                                           mask,
                                                                           filter_dims,
                                                                           filter,
                                                                           filter_scale,
                                                                           bias,
                                                                           bias_coef,
                                                                           accum,
                                                                           velocity,
                                                                           opt,
                                                                           rng,
                                                                           grad_input);
    if (status == ARM_CMSIS_NN_SUCCESS && bias != NULL && (accum == NULL || opt->apply))
    {
        pockmcu_bias_saturate_s32(bias, output_dims->c, bias_limit);
    }
    return status;
}
