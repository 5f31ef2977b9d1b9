/*
 * pockmcu_bias_update_bounded_s32 - the bias update of pockmcu_bias_update_s32 saturating at +-limit,
 * the accumulator bound, instead of the int32 range.
 *
 * pockmcu_bias_update_s32, then, when it updated the biases (accum == NULL or opt->apply),
 * pockmcu_bias_saturate_s32(bias, channels, limit): min(max(q + delta, int32 range), +-limit) is
 * min(max(q + delta, -limit), limit), as limit <= 2^31 - 1.
 */
#include "pockmcu_nn.h"

void pockmcu_bias_update_bounded_s32(int32_t *bias,
                                     const float *grad_output,
                                     int32_t positions,
                                     int32_t channels,
                                     const float *coef,
                                     float *accum,
                                     float *velocity,
                                     const pockmcu_optimizer *opt,
                                     uint32_t *rng,
                                     int32_t limit)
{
    pockmcu_bias_update_s32(bias, grad_output, positions, channels, coef, accum, velocity, opt, rng);
    if (accum == NULL || opt->apply)
    {
        pockmcu_bias_saturate_s32(bias, channels, limit);
    }
}
