/*
 * pockmcu_bias_saturate_s32 - trained int32 biases held inside the accumulator bound.
 *
 *   bias[o] = min(max(bias[o], -limit), limit)   for o ascending; a limit below 0 is taken as 0.
 *
 * limit = 2^31 - 1 - K * 2^15, K the products the layer's accumulator adds per output channel: bias
 * + K products of an int8 weight (|w| <= 128) and an int8 input minus its zero point (<= 256) then
 * stays inside int32 for any weights and inputs, however long the bias and the weights train (the
 * bound of the board's WRITE_PARAMS check, firmware/PROTOCOL.md "Parameter limits"). Applied after
 * the int32-saturating update by pockmcu_bias_update_bounded_s32 and
 * pockmcu_conv_1x1_grad_from_mean_bounded_f32, it makes the update rule saturate at +-limit.
 */
#include "pockmcu_nn.h"

void pockmcu_bias_saturate_s32(int32_t *bias, int32_t channels, int32_t limit)
{
    const int32_t hi = limit > 0 ? limit : 0;
    const int32_t lo = -hi;
    int32_t o;

    for (o = 0; o < channels; o++)
    {
        const int32_t b = bias[o];
        bias[o] = b > hi ? hi : (b < lo ? lo : b);
    }
}
