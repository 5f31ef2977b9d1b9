/*
 * pockmcu_bias_update_s32 - int32 bias gradient fused with the bias update.
 *
 *   g[o] = sum over p = 0 .. positions-1 (ascending, from +0) of
 *          grad_output[p * channels + o]
 * (positions = N*OH*OW for a conv, batches for FC), then the update rule of
 * pockmcu_update_s32 with coef[o] for o ascending (int32 saturation). The
 * sums are formed in chunks of up to 16 channels (64-byte stack array).
 * accum / velocity: NULL or `channels` floats.
 *
 * On a core with a single-precision FPU a position's 16 (or 8) gradients of
 * a chunk are loaded by one VLDM and added to the 16 (8) sums kept in
 * registers: the same additions in the same order.
 */
#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

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
        t = 0;
#if POCKMCU_VMLA_F32
        if (len == 16)
        {
            pockmcu_bias_sums16(g, grad_output + o0, positions, channels);
            t = 16;
        }
#endif
        for (; t + 8 <= len; t += 8) /* 8 sums in registers, each over p ascending from +0 */
        {
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
            const float *go = grad_output + o0 + t;
            for (p = 0; p < positions; p++, go += channels)
            {
                a0 += go[0];
                a1 += go[1];
                a2 += go[2];
                a3 += go[3];
                a4 += go[4];
                a5 += go[5];
                a6 += go[6];
                a7 += go[7];
            }
            g[t] = a0;
            g[t + 1] = a1;
            g[t + 2] = a2;
            g[t + 3] = a3;
            g[t + 4] = a4;
            g[t + 5] = a5;
            g[t + 6] = a6;
            g[t + 7] = a7;
        }
        for (; t < len; t++)
        {
            float a = 0.0f;
            const float *go = grad_output + o0 + t;
            for (p = 0; p < positions; p++, go += channels)
            {
                a += go[0];
            }
            g[t] = a;
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
