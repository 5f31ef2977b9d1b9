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
 */
#include <string.h>

#include "pockmcu_nn.h"

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
