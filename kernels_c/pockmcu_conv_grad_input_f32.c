/*
 * pockmcu_conv_grad_input_f32 - input gradient of a 2D convolution (float32).
 *
 * grad_input[n,h,w,c] = sum over (oh, ow, i, j, o) with
 *   h = oh*stride_h - pad_h + i*dil_h,  w = ow*stride_w - pad_w + j*dil_w
 * in bounds of grad_output[n,oh,ow,o] * filter_scale[o] * filter[o,i,j,c]
 * (gradient w.r.t. the real input; the real weight is filter_scale[o] * filter).
 * NHWC tensors, OHWI filter, input_dims->c == filter_dims->c (no groups),
 * output_dims->c == filter_dims->n. Padding = top/left, bottom/right implied.
 *
 * Summation order (fixed, the same on every target): grad_input is zeroed,
 * then for n, oh, ow, i, j, o (all ascending), c innermost:
 *   grad_input[n,h,w,c] += (grad_output[n,oh,ow,o] * filter_scale[o]) * (float)filter[o,i,j,c]
 * so each element sums its terms in (oh, ow, i, j, o) order starting from +0.
 * Terms with grad_output == 0 are skipped (bit-identical for finite scales).
 *
 * Split storage (filter_head != NULL, 0 < head_c <= C): filter[o,i,j,c] for c < head_c is read
 * from filter_head[((o*KH + i)*KW + j)*head_c + c] (the RAM copy of the trained channels), the
 * rest from filter (full OHWI). Same operations in the same order: bit-identical to the unsplit
 * call on the merged filter. NULL, 0: unsplit.
 * grad_input is fully written. No scratch buffer.
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_conv_grad_input_f32(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const int8_t *filter,
                                                const int8_t *filter_head,
                                                int32_t head_c,
                                                const float *filter_scale,
                                                const cmsis_nn_dims *output_dims,
                                                const float *grad_output,
                                                float *grad_input)
{
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t out_c = filter_dims->n;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t stride_h = conv_params->stride.h;
    const int32_t stride_w = conv_params->stride.w;
    const int32_t dil_h = conv_params->dilation.h;
    const int32_t dil_w = conv_params->dilation.w;
    const int32_t pad_h = conv_params->padding.h;
    const int32_t pad_w = conv_params->padding.w;
    int32_t b, oy, ox, ky, kx, o, c;

    if (filter_dims->c != in_c || output_dims->c != out_c || stride_h < 1 || stride_w < 1 || dil_h < 1 ||
        dil_w < 1 || batches < 0 || in_h < 0 || in_w < 0 || in_c < 0 || head_c < 0 || head_c > in_c ||
        (head_c > 0 && filter_head == NULL))
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
                        float *gi;
                        if (ix < 0 || ix >= in_w)
                        {
                            continue;
                        }
                        gi = grad_input + ((b * in_h + iy) * in_w + ix) * in_c;
                        for (o = 0; o < out_c; o++)
                        {
                            const int32_t row = (o * k_h + ky) * k_w + kx;
                            const int8_t *w = filter + row * in_c;
                            float s;
                            if (go[o] == 0.0f)
                            {
                                continue;
                            }
                            s = go[o] * filter_scale[o];
                            if (head_c > 0)
                            {
                                const int8_t *wh = filter_head + row * head_c;
                                for (c = 0; c < head_c; c++)
                                {
                                    gi[c] += s * (float)wh[c];
                                }
                            }
                            for (c = head_c; c < in_c; c++)
                            {
                                gi[c] += s * (float)w[c];
                            }
                        }
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
