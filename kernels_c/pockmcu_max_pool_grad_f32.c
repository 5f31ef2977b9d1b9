/*
 * pockmcu_max_pool_grad_f32 - input gradient of max pooling (float32).
 *
 * input: the saved int8 input of the forward. Window geometry as
 * arm_max_pool_s8 (top/left padding given, window clipped to the image).
 * Each output's gradient goes to the FIRST maximum of its window in scan
 * order (row i outer, column j inner; in-bounds taps only), PyTorch's tie
 * rule. An empty window passes no gradient. The activation clamp of the
 * forward is not differentiated (mask grad_output first if it matters).
 *
 * Order: grad_input is zeroed, then for n, oh, ow, c ascending the gradient
 * is added to the selected input, so each element sums over (oh, ow)
 * ascending from +0. ARM_CMSIS_NN_ARG_ERROR for a stride < 1.
 */
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_nn_support_common.h"

arm_cmsis_nn_status pockmcu_max_pool_grad_f32(const cmsis_nn_pool_params *pool_params,
                                              const cmsis_nn_dims *input_dims,
                                              const int8_t *input,
                                              const cmsis_nn_dims *filter_dims,
                                              const cmsis_nn_dims *output_dims,
                                              const float *grad_output,
                                              float *grad_input)
{
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t ch = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t stride_h = pool_params->stride.h;
    const int32_t stride_w = pool_params->stride.w;
    const int32_t pad_h = pool_params->padding.h;
    const int32_t pad_w = pool_params->padding.w;
    int32_t b, oy, ox, c, ky, kx;

    if (stride_h < 1 || stride_w < 1 || batches < 0 || in_h < 0 || in_w < 0 || ch < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    memset(grad_input, 0, (size_t)batches * (size_t)in_h * (size_t)in_w * (size_t)ch * sizeof(float));

    for (b = 0; b < batches; b++)
    {
        const int32_t batch_base = b * in_h * in_w * ch;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * stride_h - pad_h;
            const int32_t ky_start = pockmcu_max_i32(0, -in_y0);
            const int32_t ky_end = pockmcu_min_i32(k_h, in_h - in_y0);
            for (ox = 0; ox < out_w; ox++)
            {
                const int32_t in_x0 = ox * stride_w - pad_w;
                const int32_t kx_start = pockmcu_max_i32(0, -in_x0);
                const int32_t kx_end = pockmcu_min_i32(k_w, in_w - in_x0);
                const float *go = grad_output + ((b * out_h + oy) * out_w + ox) * ch;

                for (c = 0; c < ch; c++)
                {
                    int32_t best = -1;
                    int32_t best_val = 0;
                    for (ky = ky_start; ky < ky_end; ky++)
                    {
                        for (kx = kx_start; kx < kx_end; kx++)
                        {
                            const int32_t idx = batch_base + ((in_y0 + ky) * in_w + in_x0 + kx) * ch + c;
                            const int32_t v = input[idx];
                            if (best < 0 || v > best_val)
                            {
                                best = idx;
                                best_val = v;
                            }
                        }
                    }
                    if (best >= 0)
                    {
                        grad_input[best] += go[c];
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
