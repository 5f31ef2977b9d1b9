/*
 * pockmcu_conv_1x1_grad_from_mean_f32 - backward of a 1x1 convolution whose
 * output feeds a spatial mean (MEAN over H, W, or an average pool whose one
 * window is the whole input), without the broadcast gradient tensor.
 *
 * The mean's input gradient is its output gradient divided by the count,
 * the same at every position; the unfused backward writes it out whole
 * (N x H x W x C_out floats) before masking it. Here it is formed element by
 * element where it is read:
 *
 *   dz[n,p,o] = (bit (p * C_out + o) of mask) ? grad_mean[n,o] / (float)(H*W) : 0.0f
 *
 * then, if bias != NULL, the bias update of pockmcu_bias_update_s32 on dz
 * (sums over n, p ascending from +0, in chunks of 16 channels), and, if
 * grad_input != NULL, the input gradient of pockmcu_conv_grad_input_f32 for a
 * 1x1 filter with stride 1 and no padding:
 *
 *   grad_input[n,p,c] = sum over o ascending, from +0, skipping dz == 0, of
 *                       (dz[n,p,o] * filter_scale[o]) * (float)filter[o,c]
 *
 * Every float operation is the one the unfused sequence (pockmcu_mean_grad_f32
 * or pockmcu_avgpool_grad_f32, pockmcu_mask_apply_f32, pockmcu_bias_update_s32,
 * pockmcu_conv_grad_input_f32) performs, in the same order, so the results are
 * bit-identical; the sign of a zero gradient may differ, which none of them
 * can observe. output_dims: the convolution's output (= the mean's input);
 * filter_dims: C_out x 1 x 1 x C_in. No scratch buffer.
 */
#include <string.h>

#include "pockmcu_nn.h"

#define POCKMCU_BIAS_CHUNK 16

static float masked_mean_grad(const float *grad_mean, const uint8_t *mask, int32_t k, int32_t o, float count)
{
    return ((mask[k >> 3] >> (k & 7)) & 1u) != 0u ? grad_mean[o] / count : 0.0f;
}

arm_cmsis_nn_status pockmcu_conv_1x1_grad_from_mean_f32(const cmsis_nn_dims *output_dims,
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
                                                        float *grad_input)
{
    const int32_t batches = output_dims->n;
    const int32_t hw = output_dims->h * output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t in_c = filter_dims->c;
    const float count = (float)hw;
    int32_t b, p, o, c;

    if (filter_dims->n != out_c || filter_dims->h != 1 || filter_dims->w != 1 || batches < 0 || hw < 1 || in_c < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    if (bias != NULL)
    {
        float g[POCKMCU_BIAS_CHUNK];
        int32_t o0, t;
        for (o0 = 0; o0 < out_c; o0 += POCKMCU_BIAS_CHUNK)
        {
            const int32_t len = out_c - o0 < POCKMCU_BIAS_CHUNK ? out_c - o0 : POCKMCU_BIAS_CHUNK;
            for (t = 0; t < len; t++)
            {
                g[t] = 0.0f;
            }
            for (b = 0; b < batches; b++)
            {
                const float *gm = grad_mean + b * out_c;
                for (p = 0; p < hw; p++)
                {
                    const int32_t k0 = (b * hw + p) * out_c + o0;
                    for (t = 0; t < len; t++)
                    {
                        g[t] += masked_mean_grad(gm, mask, k0 + t, o0 + t, count);
                    }
                }
            }
            pockmcu_update_s32(bias + o0,
                               g,
                               len,
                               bias_coef + o0,
                               accum != NULL ? accum + o0 : NULL,
                               velocity != NULL ? velocity + o0 : NULL,
                               opt,
                               rng);
        }
    }

    if (grad_input != NULL)
    {
        memset(grad_input, 0, (size_t)batches * (size_t)hw * (size_t)in_c * sizeof(float));
        for (b = 0; b < batches; b++)
        {
            const float *gm = grad_mean + b * out_c;
            for (p = 0; p < hw; p++)
            {
                float *gi = grad_input + (b * hw + p) * in_c;
                const int32_t k0 = (b * hw + p) * out_c;
                for (o = 0; o < out_c; o++)
                {
                    const float dz = masked_mean_grad(gm, mask, k0 + o, o, count);
                    const int8_t *w = filter + o * in_c;
                    float s;
                    if (dz == 0.0f)
                    {
                        continue;
                    }
                    s = dz * filter_scale[o];
                    for (c = 0; c < in_c; c++)
                    {
                        gi[c] += s * (float)w[c];
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
