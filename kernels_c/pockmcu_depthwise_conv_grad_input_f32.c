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
 *
 * Channel multiplier 1 with at most DW_GI_TAPS taps (any stride, dilation, padding) gathers instead: each
 * input element's terms are summed in a register from +0 in the same (oh, ow, i, j) order (i descending
 * gives oh ascending, then j descending gives ow ascending; one tap per (oh, ow)) and stored once, 4
 * channels at a time with their filter converted to float once: the same terms in the same order, the
 * same bits. With a stride above 1 the channel blocks of 4 are scattered instead (dw_gi_scatter4: the
 * loops above, each product grad_output * filter_scale formed once per output element), the channel tail
 * gathered: the same bits.
 */
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

#define DW_GI_TAPS 49

/* Channels [c0, c0 + len) (len 4, or 1 for the tail) of every input element, gathered (see above). */
static void dw_gi_gather(const cmsis_nn_dw_conv_params *p,
                         const cmsis_nn_dims *input_dims,
                         const cmsis_nn_dims *filter_dims,
                         const int8_t *filter,
                         const float *filter_scale,
                         const cmsis_nn_dims *output_dims,
                         const float *grad_output,
                         float *grad_input,
                         int32_t c0,
                         int32_t len)
{
    const int32_t in_h = input_dims->h, in_w = input_dims->w, in_c = input_dims->c;
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w;
    const int32_t out_h = output_dims->h, out_w = output_dims->w;
    const int32_t s_h = p->stride.h, s_w = p->stride.w, d_h = p->dilation.h, d_w = p->dilation.w;
    float wf[DW_GI_TAPS * 4];
    float fs[4];
    int32_t rows[DW_GI_TAPS], cols[DW_GI_TAPS]; /* (ky * k_w) and oy * out_w of the valid kernel rows */
    int32_t b, iy, ix, j, t;

    for (t = 0; t < k_h * k_w; t++)
    {
        for (j = 0; j < 4; j++)
        {
            wf[t * 4 + j] = j < len ? (float)filter[t * in_c + c0 + j] : 0.0f;
        }
    }
    for (j = 0; j < 4; j++)
    {
        fs[j] = j < len ? filter_scale[c0 + j] : 0.0f;
    }
    for (b = 0; b < input_dims->n; b++)
    {
        const float *go_b = grad_output + b * out_h * out_w * in_c + c0;
        float *gi_b = grad_input + b * in_h * in_w * in_c + c0;
        for (iy = 0; iy < in_h; iy++)
        {
            int32_t n_rows = 0, ky;
            for (ky = k_h - 1; ky >= 0; ky--) /* output rows ascending */
            {
                const int32_t u = iy + p->padding.h - ky * d_h;
                if (u >= 0 && u % s_h == 0 && u / s_h < out_h)
                {
                    rows[n_rows] = ky * k_w;
                    cols[n_rows++] = (u / s_h) * out_w;
                }
            }
            for (ix = 0; ix < in_w; ix++)
            {
                float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
                float *gi = gi_b + (iy * in_w + ix) * in_c;
                int32_t r, kx, n_rows_done = 0;
                if (len == 4 && d_w == 1)
                {
                    const float fs0 = fs[0], fs1 = fs[1], fs2 = fs[2], fs3 = fs[3];
                    /* kx = kx_top, kx_top - s_w, ...: the columns with (u - kx) % s_w == 0, ox = (u - kx) / s_w
                     * ascending while below out_w */
                    const int32_t u = ix + p->padding.w;
                    int32_t kx_top = u < k_w - 1 ? u : k_w - 1;
                    kx_top -= (u - kx_top) % s_w;
                    for (r = 0; r < n_rows && kx_top >= 0; r++)
                    {
                        const float *g = go_b + (cols[r] + (u - kx_top) / s_w) * in_c;
                        const float *w = wf + (rows[r] + kx_top) * 4;
                        int32_t ox = (u - kx_top) / s_w;
                        for (kx = kx_top; kx >= 0 && ox < out_w; kx -= s_w, ox++, g += in_c, w -= 4 * s_w)
                        {
                            float gv[4], wv[4];
                            pockmcu_ld4_f32(g, gv);
                            pockmcu_ld4_f32_b(w, wv);
                            a0 = pockmcu_mla_f32(a0, gv[0] * fs0, wv[0]);
                            a1 = pockmcu_mla_f32(a1, gv[1] * fs1, wv[1]);
                            a2 = pockmcu_mla_f32(a2, gv[2] * fs2, wv[2]);
                            a3 = pockmcu_mla_f32(a3, gv[3] * fs3, wv[3]);
                        }
                    }
                    n_rows_done = n_rows;
                }
                for (r = n_rows_done; r < n_rows; r++)
                {
                    for (kx = k_w - 1; kx >= 0; kx--) /* output columns ascending */
                    {
                        const int32_t u = ix + p->padding.w - kx * d_w;
                        const float *g;
                        const float *w;
                        if (u < 0 || u % s_w != 0 || u / s_w >= out_w)
                        {
                            continue;
                        }
                        g = go_b + (cols[r] + u / s_w) * in_c;
                        w = wf + (rows[r] + kx) * 4;
                        a0 = pockmcu_mla_f32(a0, g[0] * fs[0], w[0]);
                        if (len == 4)
                        {
                            a1 = pockmcu_mla_f32(a1, g[1] * fs[1], w[1]);
                            a2 = pockmcu_mla_f32(a2, g[2] * fs[2], w[2]);
                            a3 = pockmcu_mla_f32(a3, g[3] * fs[3], w[3]);
                        }
                    }
                }
                gi[0] = a0;
                if (len == 4)
                {
                    gi[1] = a1;
                    gi[2] = a2;
                    gi[3] = a3;
                }
            }
        }
    }
}

/* Channel multiplier 1, stride above 1 (each input element receives a few taps): channels [c0, c0 + 4) scattered
 * in the order of the loops below (n, oh, ow, i, j ascending) into grad_input zeroed by the caller, each
 * grad_output * filter_scale formed once per output element (the same float every tap formed) and added as
 * (g * fs) * w to the element's sum, which thus runs over the same terms in the same order from +0 as the
 * gather; on a core with a single-precision FPU a tap is one statement (VLDM of the 4 sums and the 4 weights,
 * 4 VMLA, VSTM). */
static void dw_gi_scatter4(const cmsis_nn_dw_conv_params *p,
                           const cmsis_nn_dims *input_dims,
                           const cmsis_nn_dims *filter_dims,
                           const int8_t *filter,
                           const float *filter_scale,
                           const cmsis_nn_dims *output_dims,
                           const float *grad_output,
                           float *grad_input,
                           int32_t c0)
{
    const int32_t in_h = input_dims->h, in_w = input_dims->w, in_c = input_dims->c;
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w;
    const int32_t out_h = output_dims->h, out_w = output_dims->w;
    const int32_t s_h = p->stride.h, s_w = p->stride.w, d_h = p->dilation.h, d_w = p->dilation.w;
    const float fs0 = filter_scale[c0], fs1 = filter_scale[c0 + 1], fs2 = filter_scale[c0 + 2],
                fs3 = filter_scale[c0 + 3];
    float wf[DW_GI_TAPS * 4];
    int32_t b, oy, ox, ky, kx, t;

    for (t = 0; t < k_h * k_w; t++)
    {
        pockmcu_cvt4_s8(filter + t * in_c + c0, 0, 0u, wf + t * 4);
    }
    for (b = 0; b < input_dims->n; b++)
    {
        const float *go = grad_output + b * out_h * out_w * in_c + c0;
        float *gi_b = grad_input + b * in_h * in_w * in_c + c0;
        for (oy = 0; oy < out_h; oy++)
        {
            for (ox = 0; ox < out_w; ox++, go += in_c)
            {
                const int32_t ix0 = ox * s_w - p->padding.w;
                float gv[4];
                /* the taps kx whose input column is inside the image */
                int32_t kx_lo = 0, kx_hi = k_w;
                while (kx_lo < k_w && ix0 + kx_lo * d_w < 0)
                {
                    kx_lo++;
                }
                while (kx_hi > kx_lo && ix0 + (kx_hi - 1) * d_w >= in_w)
                {
                    kx_hi--;
                }
                pockmcu_ld4_f32(go, gv);
                {
#if POCKMCU_VMLA_F32
                    register float g0 __asm__("s0") = gv[0] * fs0;
                    register float g1 __asm__("s1") = gv[1] * fs1;
                    register float g2 __asm__("s2") = gv[2] * fs2;
                    register float g3 __asm__("s3") = gv[3] * fs3;
#else
                    const float g0 = gv[0] * fs0, g1 = gv[1] * fs1, g2 = gv[2] * fs2, g3 = gv[3] * fs3;
#endif
                    for (ky = 0; ky < k_h; ky++)
                    {
                        const int32_t iy = oy * s_h - p->padding.h + ky * d_h;
                        float *gi;
                        const float *w;
                        if (iy < 0 || iy >= in_h)
                        {
                            continue;
                        }
                        gi = gi_b + (iy * in_w + ix0 + kx_lo * d_w) * in_c;
                        w = wf + (ky * k_w + kx_lo) * 4;
#if POCKMCU_VMLA_F32
                        if (kx_hi - kx_lo == 3) /* three taps: one statement, the 12 weights by one VLDM */
                        {
                            float *gi2 = gi + d_w * in_c;
                            float *gi3 = gi2 + d_w * in_c;
                            __asm__ volatile("vldmia %6, {s20-s31}\n\t"
                                             "vldmia %4, {s16-s19}\n\t"
                                             "vmla.f32 s16, %0, s20\n\t"
                                             "vmla.f32 s17, %1, s21\n\t"
                                             "vmla.f32 s18, %2, s22\n\t"
                                             "vmla.f32 s19, %3, s23\n\t"
                                             "vstmia %4, {s16-s19}\n\t"
                                             "vldmia %5, {s16-s19}\n\t"
                                             "vmla.f32 s16, %0, s24\n\t"
                                             "vmla.f32 s17, %1, s25\n\t"
                                             "vmla.f32 s18, %2, s26\n\t"
                                             "vmla.f32 s19, %3, s27\n\t"
                                             "vstmia %5, {s16-s19}\n\t"
                                             "vldmia %7, {s16-s19}\n\t"
                                             "vmla.f32 s16, %0, s28\n\t"
                                             "vmla.f32 s17, %1, s29\n\t"
                                             "vmla.f32 s18, %2, s30\n\t"
                                             "vmla.f32 s19, %3, s31\n\t"
                                             "vstmia %7, {s16-s19}"
                                             :
                                             : "t"(g0), "t"(g1), "t"(g2), "t"(g3), "r"(gi), "r"(gi2), "r"(w), "r"(gi3)
                                             : "s16",
                                               "s17",
                                               "s18",
                                               "s19",
                                               "s20",
                                               "s21",
                                               "s22",
                                               "s23",
                                               "s24",
                                               "s25",
                                               "s26",
                                               "s27",
                                               "s28",
                                               "s29",
                                               "s30",
                                               "s31",
                                               "memory");
                            continue;
                        }
#endif
                        for (kx = kx_lo; kx < kx_hi; kx++, gi += d_w * in_c, w += 4)
                        {
#if POCKMCU_VMLA_F32
                            __asm__ volatile("vldmia %4, {s16-s19}\n\t"
                                             "vldmia %5, {s20-s23}\n\t"
                                             "vmla.f32 s16, %0, s20\n\t"
                                             "vmla.f32 s17, %1, s21\n\t"
                                             "vmla.f32 s18, %2, s22\n\t"
                                             "vmla.f32 s19, %3, s23\n\t"
                                             "vstmia %4, {s16-s19}"
                                             :
                                             : "t"(g0), "t"(g1), "t"(g2), "t"(g3), "r"(gi), "r"(w)
                                             : "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23", "memory");
#else
                            gi[0] = pockmcu_mla_f32(gi[0], g0, w[0]);
                            gi[1] = pockmcu_mla_f32(gi[1], g1, w[1]);
                            gi[2] = pockmcu_mla_f32(gi[2], g2, w[2]);
                            gi[3] = pockmcu_mla_f32(gi[3], g3, w[3]);
#endif
                        }
                    }
                }
            }
        }
    }
}

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

    if (ch_mult == 1 && k_h * k_w <= DW_GI_TAPS && k_h >= 0 && k_w >= 0)
    {
        ic = 0;
        if (stride_h > 1 || stride_w > 1) /* a few taps per input element: scattered, 4 channels at a time */
        {
            memset(grad_input, 0, (size_t)batches * (size_t)in_h * (size_t)in_w * (size_t)in_c * sizeof(float));
            for (; ic + 4 <= in_c; ic += 4)
            {
                dw_gi_scatter4(dw_conv_params,
                               input_dims,
                               filter_dims,
                               filter,
                               filter_scale,
                               output_dims,
                               grad_output,
                               grad_input,
                               ic);
            }
        }
        for (; ic + 4 <= in_c; ic += 4)
        {
            dw_gi_gather(dw_conv_params,
                         input_dims,
                         filter_dims,
                         filter,
                         filter_scale,
                         output_dims,
                         grad_output,
                         grad_input,
                         ic,
                         4);
        }
        for (; ic < in_c; ic++)
        {
            dw_gi_gather(dw_conv_params,
                         input_dims,
                         filter_dims,
                         filter,
                         filter_scale,
                         output_dims,
                         grad_output,
                         grad_input,
                         ic,
                         1);
        }
        return ARM_CMSIS_NN_SUCCESS;
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
