/*
 * pockmcu_fully_connected_grad_input_f32 - input gradient of a fully
 * connected layer (float32).
 *
 * input_dims: n = batches, c = in features; filter_dims: n = in, c = out (as
 * the forward); filter [out][in] with real value
 * filter_scale[o] * (filter[o][i] + filter_offset).
 *   grad_input[b][i] = sum over o of grad_output[b][o] * filter_scale[o] * (filter[o][i] + filter_offset)
 * Summation order: grad_input is zeroed, then for b, o (ascending), i innermost:
 *   grad_input[b][i] += (grad_output[b][o] * filter_scale[o]) * (float)(filter[o][i] + filter_offset)
 * i.e. each element sums over o ascending from +0. Terms with grad_output == 0
 * are skipped (bit-identical for finite scales). No scratch buffer.
 *
 * Up to 16 outputs with filter_offset in [-128, 128] gather instead: the scaled
 * gradients of the nonzero outputs listed once per batch, then 4 inputs at a
 * time summed in registers over the list (o ascending) from +0, their weights
 * converted 4 at a time: the same terms in the same order, the same bits.
 */
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

#define FC_GI_LIST 16

arm_cmsis_nn_status pockmcu_fully_connected_grad_input_f32(const cmsis_nn_dims *input_dims,
                                                           const cmsis_nn_dims *filter_dims,
                                                           const int8_t *filter,
                                                           int32_t filter_offset,
                                                           const float *filter_scale,
                                                           const float *grad_output,
                                                           float *grad_input)
{
    const int32_t batches = input_dims->n;
    const int32_t in_f = filter_dims->n;
    const int32_t out_f = filter_dims->c;
    int32_t b, o, i;

    if (input_dims->c != in_f || batches < 0 || in_f < 0 || out_f < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    if (out_f <= FC_GI_LIST && filter_offset >= -128 && filter_offset <= 128)
    {
        const uint32_t off2 = ((uint32_t)filter_offset & 0xFFFFu) | ((uint32_t)filter_offset << 16);
        for (b = 0; b < batches; b++)
        {
            const float *go = grad_output + b * out_f;
            float *gi = grad_input + b * in_f;
            float sv[FC_GI_LIST];
            int32_t list[FC_GI_LIST];
            int32_t n = 0, k;
            for (o = 0; o < out_f; o++)
            {
                if (go[o] != 0.0f)
                {
                    sv[n] = go[o] * filter_scale[o];
                    list[n++] = o * in_f;
                }
            }
            for (i = 0; i + 4 <= in_f; i += 4)
            {
                float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
                for (k = 0; k < n; k++)
                {
                    float wv[4];
                    const float sk = sv[k];
                    pockmcu_cvt4_s8(filter + list[k] + i, filter_offset, off2, wv);
                    a0 = pockmcu_mla_f32(a0, sk, wv[0]);
                    a1 = pockmcu_mla_f32(a1, sk, wv[1]);
                    a2 = pockmcu_mla_f32(a2, sk, wv[2]);
                    a3 = pockmcu_mla_f32(a3, sk, wv[3]);
                }
                gi[i] = a0;
                gi[i + 1] = a1;
                gi[i + 2] = a2;
                gi[i + 3] = a3;
            }
            for (; i < in_f; i++)
            {
                float a = 0.0f;
                for (k = 0; k < n; k++)
                {
                    a = pockmcu_mla_f32(a, sv[k], (float)((int32_t)filter[list[k] + i] + filter_offset));
                }
                gi[i] = a;
            }
        }
        return ARM_CMSIS_NN_SUCCESS;
    }

    memset(grad_input, 0, (size_t)batches * (size_t)in_f * sizeof(float));

    for (b = 0; b < batches; b++)
    {
        const float *go = grad_output + b * out_f;
        float *gi = grad_input + b * in_f;
        for (o = 0; o < out_f; o++)
        {
            const int8_t *w = filter + o * in_f;
            float s;
            if (go[o] == 0.0f)
            {
                continue;
            }
            s = go[o] * filter_scale[o];
            for (i = 0; i < in_f; i++)
            {
                gi[i] += s * (float)((int32_t)w[i] + filter_offset);
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
