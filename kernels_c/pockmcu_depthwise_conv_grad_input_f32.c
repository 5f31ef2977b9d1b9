/*
 * pockmcu_depthwise_conv_grad_input_f32 - input gradient of a depthwise
 * convolution (float32).
 *
 * Filter 1HWC with C = C_in * ch_mult, output channel oc = ic * ch_mult + m:
 * grad_input[n,h,w,ic] = sum over (oh, ow, i, j, m) with
 *   h = oh*stride_h - pad_h + i*dil_h,  w = ow*stride_w - pad_w + j*dil_w
 * in bounds of grad_output[n,oh,ow,oc] * filter_scale[oc] * filter[0,i,j,oc].
 * input_dims->c * ch_mult == filter_dims->c == output_dims->c.
 *
 * Summation order: grad_input is zeroed, then for n, oh, ow, i, j, ic, m (all
 * ascending):
 *   grad_input[n,h,w,ic] += (grad_output[n,oh,ow,oc] * filter_scale[oc]) * (float)filter[i,j,oc]
 * i.e. each element sums its terms in (oh, ow, i, j, m) order from +0.
 * grad_input is fully written. No scratch buffer.
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_depthwise_conv_grad_input_f32(const cmsis_nn_dw_conv_params *dw_conv_params,
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
    const int32_t ch_mult = dw_conv_params->ch_mult;
    const int32_t out_c = filter_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t stride_h = dw_conv_params->stride.h;
    const int32_t stride_w = dw_conv_params->stride.w;
    const int32_t dil_h = dw_conv_params->dilation.h;
    const int32_t dil_w = dw_conv_params->dilation.w;
    const int32_t pad_h = dw_conv_params->padding.h;
    const int32_t pad_w = dw_conv_params->padding.w;
    int32_t b, oy, ox, ky, kx, ic, m;

    if (ch_mult < 1 || in_c < 0 || in_c * ch_mult != out_c || output_dims->c != out_c || stride_h < 1 || stride_w < 1 ||
        dil_h < 1 || dil_w < 1 || batches < 0 || in_h < 0 || in_w < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    memset(grad_input, 0, (size_t)batches * (size_t)in_h * (size_t)in_w * (size_t)in_c * sizeof(float));

    for (b = 0; b < batches; b++)
    {
        for (oy = 0; oy < out_h; oy++)
        {
            for (ox = 0; ox < out_w; ox++)
            {
                const float *go = grad_output + ((b * out_h + oy) * out_w + ox) * out_c;
                for (ky = 0; ky < k_h; ky++)
                {
                    const int32_t iy = oy * stride_h - pad_h + ky * dil_h;
                    if (iy < 0 || iy >= in_h)
                    {
                        continue;
                    }
                    for (kx = 0; kx < k_w; kx++)
                    {
                        const int32_t ix = ox * stride_w - pad_w + kx * dil_w;
                        const int8_t *w = filter + (ky * k_w + kx) * out_c;
                        float *gi;
                        if (ix < 0 || ix >= in_w)
                        {
                            continue;
                        }
                        gi = grad_input + ((b * in_h + iy) * in_w + ix) * in_c;
                        for (ic = 0; ic < in_c; ic++)
                        {
                            for (m = 0; m < ch_mult; m++)
                            {
                                const int32_t oc = ic * ch_mult + m;
                                gi[ic] += (go[oc] * filter_scale[oc]) * (float)w[oc];
                            }
                        }
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
