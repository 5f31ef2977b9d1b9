/*
 * pockmcu_update_s8 - the training update rule for int8 parameters.
 *
 * For k = 0 .. n-1 (ascending), all arithmetic in float32, no FMA:
 *   g = grad[k] * coef
 *   if accum:    accum[k] += g; if !opt->apply: next k;
 *                g = accum[k] / (float)opt->batch; accum[k] = 0
 *   if velocity: velocity[k] = opt->momentum * velocity[k] + g; g = velocity[k]
 *   q[k] = clamp(q[k] + pockmcu_stochastic_round(-opt->lr * g, rng), -127, 127)
 * One RNG draw per updated element; accumulate-only calls draw none.
 * accum / velocity may be NULL (no batching / plain SGD). A batch < 1 is
 * taken as 1.
 */
#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

void pockmcu_update_s8(int8_t *q,
                       const float *grad,
                       int32_t n,
                       float coef,
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
    if (accum == NULL && velocity == NULL) /* plain SGD, the common case: no state to read */
    {
        for (k = 0; k < n; k++)
        {
            const int32_t v = (int32_t)q[k] + pockmcu_sround_m(neg_lr * (grad[k] * coef), &state, rm, rn);
            q[k] = pockmcu_clamp127(v);
        }
        *rng = state;
        return;
    }
    for (k = 0; k < n; k++)
    {
        float g = grad[k] * coef;
        int32_t v;
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
        v = (int32_t)q[k] + pockmcu_sround_m(neg_lr * g, &state, rm, rn);
        q[k] = pockmcu_clamp127(v);
    }
    *rng = state;
}
