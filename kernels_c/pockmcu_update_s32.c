/*
 * pockmcu_update_s32 - the training update rule for int32 parameters (bias).
 *
 * Same rule and order as pockmcu_update_s8 with a per-element coef[k] and
 * saturation to the int32 range:
 *   g = grad[k] * coef[k]
 *   if accum:    accum[k] += g; if !opt->apply: next k;
 *                g = accum[k] / (float)opt->batch; accum[k] = 0
 *   if velocity: velocity[k] = opt->momentum * velocity[k] + g; g = velocity[k]
 *   q[k] = saturate_int32(q[k] + pockmcu_stochastic_round(-opt->lr * g, rng))
 * for k ascending; one RNG draw per updated element, none when only
 * accumulating. A batch < 1 is taken as 1.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_common.h"
#include "pockmcu_train_fast.h"

void pockmcu_update_s32(int32_t *q,
                        const float *grad,
                        int32_t n,
                        const float *coef,
                        float *accum,
                        float *velocity,
                        const pockmcu_optimizer *opt,
                        uint32_t *rng)
{
    const float neg_lr = -opt->lr;
    const float momentum = opt->momentum;
    const float batch = (float)(opt->batch >= 1 ? opt->batch : 1);
    const int32_t apply = opt->apply;
    uint32_t state = *rng;
    uint32_t rm, rn;
    int32_t k;

    pockmcu_fpscr_modes(&rm, &rn);
    for (k = 0; k < n; k++)
    {
        float g = grad[k] * coef[k];
        int64_t v;
        if (accum != NULL)
        {
            accum[k] += g;
            if (!apply)
            {
                continue;
            }
            g = accum[k] / batch;
            accum[k] = 0.0f;
        }
        if (velocity != NULL)
        {
            velocity[k] = momentum * velocity[k] + g;
            g = velocity[k];
        }
        v = (int64_t)q[k] + (int64_t)pockmcu_sround_m(neg_lr * g, &state, rm, rn);
        q[k] = v > (int64_t)POCKMCU_INT32_MAX ? POCKMCU_INT32_MAX
                                              : (v < (int64_t)POCKMCU_INT32_MIN ? POCKMCU_INT32_MIN : (int32_t)v);
    }
    *rng = state;
}
