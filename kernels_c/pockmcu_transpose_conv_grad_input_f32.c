/*
 * pockmcu_transpose_conv_grad_input_f32 - input gradient of a transpose convolution (float32): a
 * regular convolution of the output gradient with the same filter.
 *
 * grad_input[n,iy,ix,c] = sum over (ky, kx, o) with oy = iy*stride_h - pad_h + ky and
 * ox = ix*stride_w - pad_w + kx inside the output of
 *   grad_output[n,oy,ox,o] * filter_scale[o] * filter[o,ky,kx,c].
 *
 * Summation order (fixed, the same on every target): each grad_input element starts from +0 and adds,
 * for ky, kx, o ascending, (grad_output[n,oy,ox,o] * filter_scale[o]) * (float)filter[o,ky,kx,c];
 * terms whose scaled gradient is 0 are skipped (bit-identical for finite values). No scratch buffer.
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_transpose_conv_grad_input_f32(const cmsis_nn_conv_params *conv_params,
                                                          const cmsis_nn_dims *input_dims,
                                                          const cmsis_nn_dims *filter_dims,
                                                          const int8_t *filter,
                                                          const float *filter_scale,
                                                          const cmsis_nn_dims *output_dims,
                                                          const float *grad_output,
                                                          float *grad_input)
{
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t stride_h = conv_params->stride.h;
    const int32_t stride_w = conv_params->stride.w;
    const int32_t pad_h = conv_params->padding.h;
    const int32_t pad_w = conv_params->padding.w;
    int32_t b, iy, ix, ky, kx, o, c;

    if (stride_h < 1 || stride_w < 1 || filter_dims->c != in_c || filter_dims->n != out_c || output_dims->n != batches)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    memset(grad_input, 0, (size_t)batches * (size_t)in_h * (size_t)in_w * (size_t)in_c * sizeof(float));
    for (b = 0; b < batches; b++)
    {
        for (iy = 0; iy < in_h; iy++)
        {
            for (ix = 0; ix < in_w; ix++)
            {
                float *gi = grad_input + ((b * in_h + iy) * in_w + ix) * in_c;
                for (ky = 0; ky < k_h; ky++)
                {
                    const int32_t oy = iy * stride_h - pad_h + ky;
                    if (oy < 0 || oy >= out_h)
                    {
                        continue;
                    }
                    for (kx = 0; kx < k_w; kx++)
                    {
                        const int32_t ox = ix * stride_w - pad_w + kx;
                        const float *go;
                        if (ox < 0 || ox >= out_w)
                        {
                            continue;
                        }
                        go = grad_output + ((b * out_h + oy) * out_w + ox) * out_c;
                        for (o = 0; o < out_c; o++)
                        {
                            const float g = go[o] * filter_scale[o];
                            const int8_t *w = filter + ((o * k_h + ky) * k_w + kx) * in_c;
                            if (g == 0.0f)
                            {
                                continue;
                            }
                            for (c = 0; c < in_c; c++)
                            {
                                gi[c] += g * (float)w[c];
                            }
                        }
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
