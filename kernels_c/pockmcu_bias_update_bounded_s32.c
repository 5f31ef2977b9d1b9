/*
 * pockmcu_bias_update_bounded_s32 - the bias update of pockmcu_bias_update_s32 saturating at +-limit,
 * the accumulator bound, instead of the int32 range.
 *
 * pockmcu_bias_update_s32, then, when it updated the biases (accum == NULL or opt->apply),
 * pockmcu_bias_saturate_s32(bias, channels, limit): min(max(q + delta, int32 range), +-limit) is
 * min(max(q + delta, -limit), limit), as limit <= 2^31 - 1.
 *
 * Plain SGD (accum and velocity NULL) runs fused, chunks of 16 channels: the sums of
 * pockmcu_bias_update_s32 (over the positions ascending from +0), then per channel ascending
 * q = min(max(q + pockmcu_stochastic_round(-lr * (g * coef)), -limit), limit) with the same RNG draws:
 * the same bits as the two calls.
 */
#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

#define BIAS_CHUNK 16

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
    if (accum == NULL && velocity == NULL)
    {
        const int64_t hi = limit > 0 ? limit : 0;
        const float neg_lr = -opt->lr;
        uint32_t state = *rng;
        uint32_t rm, rn;
        float g[BIAS_CHUNK];
        int32_t o0, t, p;
        pockmcu_fpscr_modes(&rm, &rn);
        for (o0 = 0; o0 < channels; o0 += BIAS_CHUNK)
        {
            const int32_t len = channels - o0 < BIAS_CHUNK ? channels - o0 : BIAS_CHUNK;
            t = 0;
#if POCKMCU_VMLA_F32
            if (len == BIAS_CHUNK)
            {
                pockmcu_bias_sums16(g, grad_output + o0, positions, channels);
                t = len;
            }
#endif
            for (; t < len; t++)
            {
                const float *go = grad_output + o0 + t;
                float a = 0.0f;
                for (p = 0; p < positions; p++, go += channels)
                {
                    a += go[0];
                }
                g[t] = a;
            }
            for (t = 0; t < len; t++)
            {
                const int64_t v =
                    (int64_t)bias[o0 + t] + (int64_t)pockmcu_sround_m(neg_lr * (g[t] * coef[o0 + t]), &state, rm, rn);
                bias[o0 + t] = (int32_t)(v > hi ? hi : (v < -hi ? -hi : v));
            }
        }
        *rng = state;
        return;
    }
    pockmcu_bias_update_s32(bias, grad_output, positions, channels, coef, accum, velocity, opt, rng);
    if (accum == NULL || opt->apply)
    {
        pockmcu_bias_saturate_s32(bias, channels, limit);
    }
}
