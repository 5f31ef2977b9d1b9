/*
 * pockmcu_pad_grad_f32 - input gradient of PAD (a crop).
 *
 * input_dims: the unpadded shape; the padded gradient grad_output has shape
 * pre_pad + input_dims + post_pad in each of n, h, w, c (as arm_pad_s8).
 *   grad_input[n,h,w,c] = grad_output[n + pre.n, h + pre.h, w + pre.w, c + pre.c]
 * ARM_CMSIS_NN_ARG_ERROR for a negative pad or dimension.
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_pad_grad_f32(const cmsis_nn_dims *input_dims,
                                         const cmsis_nn_dims *pre_pad,
                                         const cmsis_nn_dims *post_pad,
                                         const float *grad_output,
                                         float *grad_input)
{
    const int32_t out_h = pre_pad->h + input_dims->h + post_pad->h;
    const int32_t out_w = pre_pad->w + input_dims->w + post_pad->w;
    const int32_t out_c = pre_pad->c + input_dims->c + post_pad->c;
    int32_t b, y, x;

    if (pre_pad->n < 0 || pre_pad->h < 0 || pre_pad->w < 0 || pre_pad->c < 0 || post_pad->n < 0 || post_pad->h < 0 ||
        post_pad->w < 0 || post_pad->c < 0 || input_dims->n < 0 || input_dims->h < 0 || input_dims->w < 0 ||
        input_dims->c < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    for (b = 0; b < input_dims->n; b++)
    {
        for (y = 0; y < input_dims->h; y++)
        {
            for (x = 0; x < input_dims->w; x++)
            {
                const float *src = grad_output +
                    (((b + pre_pad->n) * out_h + y + pre_pad->h) * out_w + x + pre_pad->w) * out_c + pre_pad->c;
                memcpy(grad_input, src, (size_t)input_dims->c * sizeof(float));
                grad_input += input_dims->c;
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
