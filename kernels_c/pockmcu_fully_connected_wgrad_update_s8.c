/*
 * pockmcu_fully_connected_wgrad_update_s8 - weight gradient of a fully
 * connected layer fused with the int8 weight update.
 *
 * input (SAVED) = {n = batches, c = k}: input features [channel_begin,
 * channel_begin + k) of the layer's real input, input[b][i'].
 * filter_dims = {n = in, c = out}, filter [out][in]. coef: one per out.
 * accum / velocity: NULL or out*k floats indexed [o][i'].
 *   G[o][i'] = sum over b (ascending, from +0) of
 *              grad_output[b][o] * (float)(input[b][i'] + input_offset)
 * For o ascending, i' ascending, G is computed in chunks of up to 16
 * consecutive i' (a 64-byte stack array; no ctx needed) and each chunk goes
 * through pockmcu_update_s8 on filter[o][channel_begin + i'] with coef[o].
 * The trainable elements are therefore updated in increasing [o][i'] order.
 * ARM_CMSIS_NN_ARG_ERROR if the channel range is outside [0, in).
 *
 * Plain SGD (accum and velocity NULL) runs fused: each G[o][i'] (the same sum,
 * the first term added to +0) goes straight through pockmcu_update_s8's rule,
 * q = clamp(q + pockmcu_stochastic_round(-lr * (G * coef[o])), -127, 127),
 * in the same [o][i'] order with the same RNG draws; one batch converts 4
 * inputs at a time.
 */
#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

#define POCKMCU_FC_WGRAD_CHUNK 16

arm_cmsis_nn_status pockmcu_fully_connected_wgrad_update_s8(const cmsis_nn_dims *input_dims,
                                                            const int8_t *input,
                                                            int32_t input_offset,
                                                            const cmsis_nn_dims *filter_dims,
                                                            int8_t *filter,
                                                            int32_t channel_begin,
                                                            const float *grad_output,
                                                            const float *coef,
                                                            float *accum,
                                                            float *velocity,
                                                            const pockmcu_optimizer *opt,
                                                            uint32_t *rng)
{
    const int32_t batches = input_dims->n;
    const int32_t k_ch = input_dims->c;
    const int32_t in_f = filter_dims->n;
    const int32_t out_f = filter_dims->c;
    float g[POCKMCU_FC_WGRAD_CHUNK];
    int32_t o, i0, t, b;

    if (k_ch < 0 || channel_begin < 0 || channel_begin + k_ch > in_f || out_f < 0 || batches < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    if (accum == NULL && velocity == NULL)
    {
        const float neg_lr = -opt->lr;
        const uint32_t off2 = ((uint32_t)input_offset & 0xFFFFu) | ((uint32_t)input_offset << 16);
        const int32_t cvt4 = input_offset >= -128 && input_offset <= 128; /* x + offset exact in 16 bits */
        uint32_t state = *rng;
        uint32_t rm, rn;
        pockmcu_fpscr_modes(&rm, &rn);
        for (o = 0; o < out_f; o++)
        {
            const float co = coef[o];
            int8_t *q = filter + o * in_f + channel_begin;
            t = 0;
            if (batches == 1)
            {
                const float go = grad_output[o];
                for (; cvt4 && t + 4 <= k_ch; t += 4)
                {
                    float xv[4];
                    int32_t j;
                    pockmcu_cvt4_s8(input + t, input_offset, off2, xv);
                    for (j = 0; j < 4; j++)
                    {
                        const float gt = 0.0f + go * xv[j];
                        q[t + j] =
                            pockmcu_clamp127((int32_t)q[t + j] + pockmcu_sround_m(neg_lr * (gt * co), &state, rm, rn));
                    }
                }
            }
            for (; t < k_ch; t++)
            {
                float gt = 0.0f;
                for (b = 0; b < batches; b++)
                {
                    gt += grad_output[b * out_f + o] * (float)((int32_t)input[b * k_ch + t] + input_offset);
                }
                q[t] = pockmcu_clamp127((int32_t)q[t] + pockmcu_sround_m(neg_lr * (gt * co), &state, rm, rn));
            }
        }
        *rng = state;
        return ARM_CMSIS_NN_SUCCESS;
    }
    for (o = 0; o < out_f; o++)
    {
        for (i0 = 0; i0 < k_ch; i0 += POCKMCU_FC_WGRAD_CHUNK)
        {
            const int32_t len = k_ch - i0 < POCKMCU_FC_WGRAD_CHUNK ? k_ch - i0 : POCKMCU_FC_WGRAD_CHUNK;
            const int32_t state_idx = o * k_ch + i0;
            for (t = 0; t < len; t++)
            {
                g[t] = 0.0f;
            }
            for (b = 0; b < batches; b++)
            {
                const float go = grad_output[b * out_f + o];
                const int8_t *x = input + b * k_ch + i0;
                for (t = 0; t < len; t++)
                {
                    g[t] += go * (float)((int32_t)x[t] + input_offset);
                }
            }
            pockmcu_update_s8(filter + o * in_f + channel_begin + i0,
                              g,
                              len,
                              coef[o],
                              accum != NULL ? accum + state_idx : NULL,
                              velocity != NULL ? velocity + state_idx : NULL,
                              opt,
                              rng);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
