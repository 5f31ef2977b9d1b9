/*
 * pockmcu_depthwise_conv_wgrad_update_s8 - weight gradient of a depthwise
 * convolution fused with the int8 weight update.
 *
 * input (SAVED) = {N, H, W, k}: input channels [channel_begin,
 * channel_begin + k) of the layer's real input. filter_dims = {1, KH, KW,
 * C_out}, C_out = C_in * ch_mult, output channel oc = ic * ch_mult + m; the
 * trained output channels are [channel_begin*ch_mult,
 * (channel_begin+k)*ch_mult). coef has C_out entries (indexed by the real oc);
 * accum / velocity are NULL or KH*KW*k*ch_mult floats indexed [i][j][c'*ch_mult
 * + m].
 *
 * For each tap (i, j) (ascending, row-major):
 *   1. G (ctx->buf, k*ch_mult floats, [c'*ch_mult + m]) is zeroed, then for
 *      n, oh, ow ascending with (ih, iw) in bounds, c', m ascending:
 *        G[c'*ch_mult+m] += grad_output[n,oh,ow,oc] * (float)(input[n,ih,iw,c']
 * + input_offset) (oc = (channel_begin + c')*ch_mult + m): each element sums
 * over (n, oh, ow) ascending from +0;
 *   2. G[t] *= coef[oc], then pockmcu_update_s8 on the k*ch_mult contiguous
 *      elements filter[i][j][channel_begin*ch_mult + t] with coef 1.0f (this
 *      is bit-identical to the rule g = G * coef[oc], since x * 1.0f == x).
 * So the update visits the trainable elements in increasing [i][j][t] order.
 *
 * ctx->buf: at least k*ch_mult floats (the size query returns C_out floats,
 * an upper bound, as it does not know ch_mult), float aligned;
 * ARM_CMSIS_NN_ARG_ERROR if it is NULL or ctx->size is smaller than
 * k*ch_mult*4 bytes, or for bad parameters.
 */
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

/* ch_mult 1: g[c .. c + nc - 1] (from +0; nc 4 or 8) for one tap of channels
 * [c, c + nc) of the saved input: for each output row whose tap is inside the
 * image (the range computed once, pointers stepped row by row), the columns
 * whose input is inside the image [ox_lo, ox_hi) walked with two pointers, 4
 * gradients per VLDM and 4 input bytes widened at once (pockmcu_train_fast.h).
 * The same terms in the same (n, oh, ow) order as the loops below: the same
 * bits. */
static void dw_wgrad_block4(float *g,
                            const int8_t *input,
                            const float *grad_output,
                            const cmsis_nn_dw_conv_params *p,
                            const cmsis_nn_dims *input_dims,
                            const cmsis_nn_dims *output_dims,
                            int32_t out_c,
                            int32_t oc_begin,
                            int32_t c,
                            int32_t nc,
                            int32_t ky,
                            int32_t kx,
                            int32_t ox_lo,
                            int32_t ox_hi)
{
    const int32_t k_ch = input_dims->c;
    const int32_t off = p->input_offset;
    const uint32_t off2 = ((uint32_t)off & 0xFFFFu) | ((uint32_t)off << 16);
    const int32_t x_step = p->stride.w * k_ch;
    /* output rows whose tap ky reads an input row inside the image: [oy_lo,
     * oy_hi) */
    const int32_t first = ky * p->dilation.h - p->padding.h; /* input row of oy = 0 */
    const int32_t oy_lo = first < 0 ? (-first + p->stride.h - 1) / p->stride.h : 0;
    int32_t oy_hi = first >= input_dims->h ? 0 : (input_dims->h - 1 - first) / p->stride.h + 1;
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f, a4 = 0.0f, a5 = 0.0f, a6 = 0.0f, a7 = 0.0f;
    int32_t b, oy;
    oy_hi = oy_hi < output_dims->h ? oy_hi : output_dims->h;
    for (b = 0; b < input_dims->n && ox_lo < ox_hi; b++)
    {
        const int8_t *x_row = input +
            ((b * input_dims->h + first + oy_lo * p->stride.h) * input_dims->w + ox_lo * p->stride.w - p->padding.w +
             kx * p->dilation.w) *
                k_ch +
            c;
        const float *go_row =
            grad_output + ((b * output_dims->h + oy_lo) * output_dims->w + ox_lo) * out_c + oc_begin + c;
        for (oy = oy_lo; oy < oy_hi;
             oy++, x_row += p->stride.h * input_dims->w * k_ch, go_row += output_dims->w * out_c)
        {
            const int8_t *x = x_row;
            const float *go = go_row;
            int32_t n;
            if (nc == 8)
            {
                for (n = ox_hi - ox_lo; n > 0; n--, go += out_c, x += x_step)
                {
                    float gv[4], gw[4], xv[4], xw[4];
                    pockmcu_ld4_f32(go, gv);
                    pockmcu_ld4_f32_b(go + 4, gw);
                    pockmcu_cvt4_s8(x, off, off2, xv);
                    pockmcu_cvt4_s8(x + 4, off, off2, xw);
                    a0 = pockmcu_mla_f32(a0, gv[0], xv[0]);
                    a1 = pockmcu_mla_f32(a1, gv[1], xv[1]);
                    a2 = pockmcu_mla_f32(a2, gv[2], xv[2]);
                    a3 = pockmcu_mla_f32(a3, gv[3], xv[3]);
                    a4 = pockmcu_mla_f32(a4, gw[0], xw[0]);
                    a5 = pockmcu_mla_f32(a5, gw[1], xw[1]);
                    a6 = pockmcu_mla_f32(a6, gw[2], xw[2]);
                    a7 = pockmcu_mla_f32(a7, gw[3], xw[3]);
                }
            }
            else
            {
                for (n = ox_hi - ox_lo; n > 0; n--, go += out_c, x += x_step)
                {
                    float gv[4], xv[4];
                    pockmcu_ld4_f32(go, gv);
                    pockmcu_cvt4_s8(x, off, off2, xv);
                    a0 = pockmcu_mla_f32(a0, gv[0], xv[0]);
                    a1 = pockmcu_mla_f32(a1, gv[1], xv[1]);
                    a2 = pockmcu_mla_f32(a2, gv[2], xv[2]);
                    a3 = pockmcu_mla_f32(a3, gv[3], xv[3]);
                }
            }
        }
    }
    g[c] = a0;
    g[c + 1] = a1;
    g[c + 2] = a2;
    g[c + 3] = a3;
    if (nc == 8)
    {
        g[c + 4] = a4;
        g[c + 5] = a5;
        g[c + 6] = a6;
        g[c + 7] = a7;
    }
}

arm_cmsis_nn_status pockmcu_depthwise_conv_wgrad_update_s8(const cmsis_nn_context *ctx,
                                                           const cmsis_nn_dw_conv_params *dw_conv_params,
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
    const int32_t input_offset = dw_conv_params->input_offset;
    const int32_t oc_begin = channel_begin * ch_mult;
    const int32_t n_train = k_ch * ch_mult;
    float *g;
    int32_t ky, kx, b, oy, ox, c, m, t;

    if (stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1 || ch_mult < 1 || k_ch < 0 || channel_begin < 0 ||
        out_c % ch_mult != 0 || channel_begin + k_ch > out_c / ch_mult || output_dims->c != out_c || k_h < 0 || k_w < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    if (n_train == 0 || k_h == 0 || k_w == 0)
    {
        return ARM_CMSIS_NN_SUCCESS;
    }
    if (ctx == NULL || ctx->buf == NULL || ctx->size < (int32_t)(n_train * (int32_t)sizeof(float)))
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    g = (float *)ctx->buf;

    for (ky = 0; ky < k_h; ky++)
    {
        for (kx = 0; kx < k_w; kx++)
        {
            const int32_t tap = ky * k_w + kx;
            int32_t c0 = 0;
            if (ch_mult == 1 && input_offset >= -128 && input_offset <= 128)
            {
                /* output columns whose tap kx is inside the image */
                const int32_t first = kx * dil_w - pad_w;
                int32_t ox_lo = first < 0 ? (-first + stride_w - 1) / stride_w : 0;
                int32_t ox_hi = first + (out_w - 1) * stride_w < in_w
                    ? out_w
                    : (first >= in_w ? 0 : (in_w - 1 - first) / stride_w + 1);
                ox_hi = ox_hi > ox_lo ? ox_hi : ox_lo;
                for (; c0 + 4 <= k_ch; c0 += (c0 + 8 <= k_ch ? 8 : 4))
                {
                    dw_wgrad_block4(g,
                                    input,
                                    grad_output,
                                    dw_conv_params,
                                    input_dims,
                                    output_dims,
                                    out_c,
                                    oc_begin,
                                    c0,
                                    c0 + 8 <= k_ch ? 8 : 4,
                                    ky,
                                    kx,
                                    ox_lo,
                                    ox_hi);
                }
            }
            memset(g + c0 * ch_mult, 0, (size_t)(n_train - c0 * ch_mult) * sizeof(float));
            for (b = 0; b < batches && c0 < k_ch; b++)
            {
                for (oy = 0; oy < out_h; oy++)
                {
                    const int32_t iy = oy * stride_h - pad_h + ky * dil_h;
                    if (iy < 0 || iy >= in_h)
                    {
                        continue;
                    }
                    for (ox = 0; ox < out_w; ox++)
                    {
                        const int32_t ix = ox * stride_w - pad_w + kx * dil_w;
                        const int8_t *x;
                        const float *go;
                        if (ix < 0 || ix >= in_w)
                        {
                            continue;
                        }
                        x = input + ((b * in_h + iy) * in_w + ix) * k_ch;
                        go = grad_output + ((b * out_h + oy) * out_w + ox) * out_c + oc_begin;
                        for (c = c0; c < k_ch; c++)
                        {
                            const float xv = (float)((int32_t)x[c] + input_offset);
                            for (m = 0; m < ch_mult; m++)
                            {
                                g[c * ch_mult + m] += go[c * ch_mult + m] * xv;
                            }
                        }
                    }
                }
            }
            for (t = 0; t < n_train; t++)
            {
                g[t] = g[t] * coef[oc_begin + t];
            }
            pockmcu_update_s8(filter + tap * out_c + oc_begin,
                              g,
                              n_train,
                              1.0f,
                              accum != NULL ? accum + tap * n_train : NULL,
                              velocity != NULL ? velocity + tap * n_train : NULL,
                              opt,
                              rng);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
