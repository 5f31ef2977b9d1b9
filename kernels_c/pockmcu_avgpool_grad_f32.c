/*
 * pockmcu_avgpool_grad_f32 - input gradient of average pooling (float32).
 *
 * Window geometry as arm_avgpool_s8: top/left padding given, bottom/right
 * implied, the window is clipped to the image and count = number of in-bounds
 * taps. Each output gradient divided by (float)count is added to every
 * in-bounds input of its window. The activation clamp of the forward is not
 * differentiated (mask grad_output first if it matters).
 *
 * Order: grad_input is zeroed, then for n, oh, ow, c (ascending):
 *   v = grad_output[n,oh,ow,c] / (float)count; for i, j ascending:
 *   grad_input[n,h,w,c] += v
 * so each element sums over (oh, ow) ascending from +0.
 * ARM_CMSIS_NN_ARG_ERROR for a window without valid input (as the forward)
 * or a stride < 1; grad_input is then partially written.
 */
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_nn_support_common.h"

arm_cmsis_nn_status pockmcu_avgpool_grad_f32(const cmsis_nn_pool_params *pool_params,
                                             const cmsis_nn_dims *input_dims,
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
        float *gi_batch = grad_input + b * in_h * in_w * ch;
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
                float count;

                if (ky_end <= ky_start || kx_end <= kx_start)
                {
                    return ARM_CMSIS_NN_ARG_ERROR;
                }
                count = (float)((ky_end - ky_start) * (kx_end - kx_start));

                for (c = 0; c < ch; c++)
                {
                    const float v = go[c] / count;
                    for (ky = ky_start; ky < ky_end; ky++)
                    {
                        float *gi_row = gi_batch + ((in_y0 + ky) * in_w + in_x0) * ch + c;
                        for (kx = kx_start; kx < kx_end; kx++)
                        {
                            gi_row[kx * ch] += v;
                        }
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
