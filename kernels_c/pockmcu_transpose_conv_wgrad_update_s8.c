/*
 * pockmcu_transpose_conv_wgrad_update_s8 - weight gradient of a transpose convolution fused with the
 * int8 weight update (no full weight-gradient tensor is stored).
 *
 * input (the SAVED activation) holds only the trainable input channels: input_dims = {N, H, W, k} are
 * channels [channel_begin, channel_begin + k) of the layer's input. filter_dims is the full OHWI
 * filter {O, KH, KW, C_in}; output_dims = {N, OH, OW, O}.
 *
 * For each output channel o (ascending):
 *   1. G (ctx->buf, KH*KW*k floats, layout [ky][kx][c']) is zeroed, then for n, iy, ix, ky, kx
 *      ascending (taps whose output position oy = iy*stride_h - pad_h + ky, ox likewise, lies inside
 *      the output; terms with grad_output == 0 skipped, which is bit-identical), c':
 *        G[ky][kx][c'] += grad_output[n,oy,ox,o] * (float)(input[n,iy,ix,c'] + input_offset)
 *   2. for (ky, kx) ascending, pockmcu_update_s8 on the k elements filter[o][ky][kx][channel_begin + c']
 *      with grad G[ky][kx][.], coef[o] and accum / velocity (NULL or O*KH*KW*k floats, [o][ky][kx][c']).
 * The update visits the trainable elements in increasing [o][ky][kx][c'] order (one RNG draw each
 * when applying).
 *
 * ctx->buf: pockmcu_transpose_conv_wgrad_update_s8_get_buffer_size() bytes, float aligned;
 * ARM_CMSIS_NN_ARG_ERROR if it is NULL or smaller, for bad strides or a channel range outside C_in.
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_transpose_conv_wgrad_update_s8(const cmsis_nn_context *ctx,
                                                           const cmsis_nn_conv_params *conv_params,
                                                           const cmsis_nn_dims *input_dims,
                                                           const int8_t *input,
                                                           const cmsis_nn_dims *filter_dims,
                                                           int8_t *filter,
                                                           int32_t channel_begin,
                                                           const cmsis_nn_dims *output_dims,
                                                           const float *grad_output,
                                                           const float *coef,
                                                           float *accum,
                                                           float *velocity,
                                                           const pockmcu_optimizer *opt,
                                                           uint32_t *rng)
{
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t k_ch = input_dims->c;
    const int32_t out_c = filter_dims->n;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t full_c = filter_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t stride_h = conv_params->stride.h;
    const int32_t stride_w = conv_params->stride.w;
    const int32_t pad_h = conv_params->padding.h;
    const int32_t pad_w = conv_params->padding.w;
    const int32_t input_offset = conv_params->input_offset;
    const int32_t taps = k_h * k_w;
    float *g_buf;
    int32_t o, b, iy, ix, ky, kx, c, tap;

    if (stride_h < 1 || stride_w < 1 || k_ch < 0 || channel_begin < 0 || channel_begin + k_ch > full_c ||
        output_dims->c != out_c || k_h < 0 || k_w < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    if (k_ch == 0 || taps == 0)
    {
        return ARM_CMSIS_NN_SUCCESS;
    }
    if (ctx == NULL || ctx->buf == NULL || ctx->size < (int32_t)(taps * k_ch * (int32_t)sizeof(float)))
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    g_buf = (float *)ctx->buf;

    for (o = 0; o < out_c; o++)
    {
        memset(g_buf, 0, (size_t)taps * (size_t)k_ch * sizeof(float));
        for (b = 0; b < batches; b++)
        {
            for (iy = 0; iy < in_h; iy++)
            {
                for (ix = 0; ix < in_w; ix++)
                {
                    const int8_t *x = input + ((b * in_h + iy) * in_w + ix) * k_ch;
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
                            float go;
                            float *g;
                            if (ox < 0 || ox >= out_w)
                            {
                                continue;
                            }
                            go = grad_output[((b * out_h + oy) * out_w + ox) * out_c + o];
                            if (go == 0.0f)
                            {
                                continue;
                            }
                            g = g_buf + (ky * k_w + kx) * k_ch;
                            for (c = 0; c < k_ch; c++)
                            {
                                g[c] += go * (float)((int32_t)x[c] + input_offset);
                            }
                        }
                    }
                }
            }
        }
        for (tap = 0; tap < taps; tap++)
        {
            const int32_t state_idx = (o * taps + tap) * k_ch;
            pockmcu_update_s8(filter + (o * taps + tap) * full_c + channel_begin,
                              g_buf + tap * k_ch,
                              k_ch,
                              coef[o],
                              accum != NULL ? accum + state_idx : NULL,
                              velocity != NULL ? velocity + state_idx : NULL,
                              opt,
                              rng);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
