/*
 * pockmcu_bias_update_s32 - int32 bias gradient fused with the bias update.
 *
 *   g[o] = sum over p = 0 .. positions-1 (ascending, from +0) of
 *          grad_output[p * channels + o]
 * (positions = N*OH*OW for a conv, batches for FC), then the update rule of
 * pockmcu_update_s32 with coef[o] for o ascending (int32 saturation). The
 * sums are formed in chunks of up to 16 channels (64-byte stack array).
 * accum / velocity: NULL or `channels` floats.
 */
#include "pockmcu_nn.h"

#define POCKMCU_BIAS_CHUNK 16

void pockmcu_bias_update_s32(int32_t *bias,
                             const float *grad_output,
                             int32_t positions,
                             int32_t channels,
                             const float *coef,
                             float *accum,
                             float *velocity,
                             const pockmcu_optimizer *opt,
                             uint32_t *rng)
{
    float g[POCKMCU_BIAS_CHUNK];
    int32_t o0, t, p;

    for (o0 = 0; o0 < channels; o0 += POCKMCU_BIAS_CHUNK)
    {
        const int32_t len = channels - o0 < POCKMCU_BIAS_CHUNK ? channels - o0 : POCKMCU_BIAS_CHUNK;
        for (t = 0; t < len; t++)
        {
            g[t] = 0.0f;
        }
        for (p = 0; p < positions; p++)
        {
            const float *go = grad_output + p * channels + o0;
            for (t = 0; t < len; t++)
            {
                g[t] += go[t];
            }
        }
        pockmcu_update_s32(bias + o0,
                           g,
                           len,
                           coef + o0,
                           accum != NULL ? accum + o0 : NULL,
                           velocity != NULL ? velocity + o0 : NULL,
                           opt,
                           rng);
    }
}
