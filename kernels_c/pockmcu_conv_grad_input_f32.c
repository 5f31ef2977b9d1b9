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
 * The loops are pockmcu_conv_grad_input_f32_loops (pockmcu_layer_loops.h), shared with
 * pockmcu_conv_grad_input_split_f32.
 * grad_input is fully written. No scratch buffer.
 *
 * Other filters (up to GI_MAX_K rows) are gathered: each input element's sum is kept in a register from +0
 * over its terms in the same (oh, ow, i, j, o) order (i descending is oh ascending, j descending is ow
 * ascending; one tap per (oh, ow)), for 4 input pixels of one row spaced by the stride (their valid taps
 * are the same when the first and the last agree) x 4 channels, each weight widened once per 4 pixels;
 * zero gradients are not skipped (+-0 terms change no sum that starts at +0): the same bits. When fewer than
 * 70% of the output gradients are nonzero the scatter loops, which skip the zero ones, run instead.
 */
#include "pockmcu_layer_loops.h"
#include "pockmcu_train_fast.h"

#define GI_MAX_K 16

typedef struct
{
    const int8_t *filter;
    const float *scale;
    const float *go_b;            /* this batch's output gradient */
    int32_t out_c, out_w, taps_c; /* taps_c: k_h * k_w * in_c, the filter's o stride */
    int32_t n_rows;
    int32_t ky[GI_MAX_K], oy[GI_MAX_K]; /* the valid kernel rows of this input row, output rows ascending */
} gi_rows;

/* The sums of np (1 or 4) pixels x nc (1 or 4) channels [c, c + nc): pixel k at input column ix + k * s_w,
 * whose tap kx reads output column ox0[kx] + k (ok[kx]: valid for all np pixels). Stored to gi (pixel k at
 * gi + k * gi_step). */
static void gi_block(const gi_rows *q,
                     int32_t k_w,
                     const int32_t *ox0,
                     const int32_t *ok,
                     int32_t c,
                     int32_t nc,
                     int32_t np,
                     int32_t in_c,
                     float *gi,
                     int32_t gi_step)
{
    float a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f, a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f;
    float a20 = 0.0f, a21 = 0.0f, a22 = 0.0f, a23 = 0.0f, a30 = 0.0f, a31 = 0.0f, a32 = 0.0f, a33 = 0.0f;
    const int32_t oc = q->out_c;
    int32_t r, kx, o;
    for (r = 0; r < q->n_rows; r++)
    {
        for (kx = k_w - 1; kx >= 0; kx--)
        {
            const float *g;
            const int8_t *w;
            if (!ok[kx])
            {
                continue;
            }
            g = q->go_b + (q->oy[r] * q->out_w + ox0[kx]) * oc;
            w = q->filter + (q->ky[r] * k_w + kx) * in_c + c;
            if (np == 4 && nc == 4)
            {
                for (o = 0; o < oc; o++, g++, w += q->taps_c)
                {
                    float wv[4];
                    const float sc = q->scale[o];
                    const float s0 = g[0] * sc, s1 = g[oc] * sc, s2 = g[2 * oc] * sc, s3 = g[3 * oc] * sc;
                    pockmcu_cvt4_s8(w, 0, 0u, wv);
                    a00 = pockmcu_mla_f32(a00, s0, wv[0]);
                    a01 = pockmcu_mla_f32(a01, s0, wv[1]);
                    a02 = pockmcu_mla_f32(a02, s0, wv[2]);
                    a03 = pockmcu_mla_f32(a03, s0, wv[3]);
                    a10 = pockmcu_mla_f32(a10, s1, wv[0]);
                    a11 = pockmcu_mla_f32(a11, s1, wv[1]);
                    a12 = pockmcu_mla_f32(a12, s1, wv[2]);
                    a13 = pockmcu_mla_f32(a13, s1, wv[3]);
                    a20 = pockmcu_mla_f32(a20, s2, wv[0]);
                    a21 = pockmcu_mla_f32(a21, s2, wv[1]);
                    a22 = pockmcu_mla_f32(a22, s2, wv[2]);
                    a23 = pockmcu_mla_f32(a23, s2, wv[3]);
                    a30 = pockmcu_mla_f32(a30, s3, wv[0]);
                    a31 = pockmcu_mla_f32(a31, s3, wv[1]);
                    a32 = pockmcu_mla_f32(a32, s3, wv[2]);
                    a33 = pockmcu_mla_f32(a33, s3, wv[3]);
                }
            }
            else if (nc == 4) /* one pixel */
            {
                for (o = 0; o < oc; o++, g++, w += q->taps_c)
                {
                    float wv[4];
                    const float s0 = g[0] * q->scale[o];
                    pockmcu_cvt4_s8(w, 0, 0u, wv);
                    a00 = pockmcu_mla_f32(a00, s0, wv[0]);
                    a01 = pockmcu_mla_f32(a01, s0, wv[1]);
                    a02 = pockmcu_mla_f32(a02, s0, wv[2]);
                    a03 = pockmcu_mla_f32(a03, s0, wv[3]);
                }
            }
            else if (np == 4) /* one channel */
            {
                for (o = 0; o < oc; o++, g++, w += q->taps_c)
                {
                    const float sc = q->scale[o];
                    const float wv = (float)w[0];
                    a00 = pockmcu_mla_f32(a00, g[0] * sc, wv);
                    a10 = pockmcu_mla_f32(a10, g[oc] * sc, wv);
                    a20 = pockmcu_mla_f32(a20, g[2 * oc] * sc, wv);
                    a30 = pockmcu_mla_f32(a30, g[3 * oc] * sc, wv);
                }
            }
            else
            {
                for (o = 0; o < oc; o++, g++, w += q->taps_c)
                {
                    a00 = pockmcu_mla_f32(a00, g[0] * q->scale[o], (float)w[0]);
                }
            }
        }
    }
    gi[c] = a00;
    if (nc == 4)
    {
        gi[c + 1] = a01, gi[c + 2] = a02, gi[c + 3] = a03;
    }
    if (np == 4)
    {
        gi += gi_step;
        gi[c] = a10;
        if (nc == 4)
        {
            gi[c + 1] = a11, gi[c + 2] = a12, gi[c + 3] = a13;
        }
        gi += gi_step;
        gi[c] = a20;
        if (nc == 4)
        {
            gi[c + 1] = a21, gi[c + 2] = a22, gi[c + 3] = a23;
        }
        gi += gi_step;
        gi[c] = a30;
        if (nc == 4)
        {
            gi[c + 1] = a31, gi[c + 2] = a32, gi[c + 3] = a33;
        }
    }
}

/* 1 when at least 70% of the n output gradients are nonzero: the gather computes every term at ~2.5 (4 pixels)
 * instructions per MAC, the scatter loops skip zero gradients at ~8 per MAC of the others (ReLU-masked
 * gradients are often mostly zero); both give the same bits. */
static int32_t gi_mostly_nonzero(const float *go, int32_t n)
{
    int32_t k, nonzero = 0;
    for (k = 0; k < n; k++)
    {
        nonzero += pockmcu_f32_magnitude_bits(go + k) != 0u;
    }
    return nonzero * 10 >= n * 7;
}

/* The gathered kernel (see the file comment); dimensions checked by the caller. */
static void gi_gather(const cmsis_nn_conv_params *p,
                      const cmsis_nn_dims *input_dims,
                      const cmsis_nn_dims *filter_dims,
                      const int8_t *filter,
                      const float *filter_scale,
                      const cmsis_nn_dims *output_dims,
                      const float *grad_output,
                      float *grad_input)
{
    const int32_t in_h = input_dims->h, in_w = input_dims->w, in_c = input_dims->c;
    const int32_t k_h = filter_dims->h, k_w = filter_dims->w;
    const int32_t out_h = output_dims->h, out_w = output_dims->w;
    const int32_t s_h = p->stride.h, s_w = p->stride.w, d_h = p->dilation.h, d_w = p->dilation.w;
    gi_rows q;
    int32_t b, iy, ix, ky, kx, c;
    q.filter = filter;
    q.scale = filter_scale;
    q.out_c = output_dims->c;
    q.out_w = out_w;
    q.taps_c = k_h * k_w * in_c;
    for (b = 0; b < input_dims->n; b++)
    {
        q.go_b = grad_output + b * out_h * out_w * q.out_c;
        for (iy = 0; iy < in_h; iy++)
        {
            float *gi_row = grad_input + (b * in_h + iy) * in_w * in_c;
            q.n_rows = 0;
            for (ky = k_h - 1; ky >= 0; ky--)
            {
                const int32_t u = iy + p->padding.h - ky * d_h;
                if (u >= 0 && u % s_h == 0 && u / s_h < out_h)
                {
                    q.ky[q.n_rows] = ky;
                    q.oy[q.n_rows++] = u / s_h;
                }
            }
            for (ix = 0; ix < in_w; ix++)
            {
                /* pixels ix, ix + s_w, ix + 2 s_w, ix + 3 s_w as a block when their taps agree; each pixel once:
                 * a block starts at ix whose class (ix % s_w) has no pixel done at ix */
                const int32_t pos = ix / s_w;
                int32_t ox0[GI_MAX_K], ok[GI_MAX_K];
                int32_t np = 4, k;
                if (pos % 4 != 0)
                {
                    continue; /* done by the block of its class that started 1..3 steps before */
                }
                for (k = 0; k < 4; k++)
                {
                    int32_t px = ix + k * s_w, j;
                    if (px >= in_w)
                    {
                        np = 1;
                        break;
                    }
                    for (j = 0; j < k_w; j++)
                    {
                        const int32_t u = px + p->padding.w - j * d_w;
                        const int32_t valid = u >= 0 && u % s_w == 0 && u / s_w < out_w;
                        if (k == 0)
                        {
                            ok[j] = valid;
                            ox0[j] = valid ? u / s_w : 0;
                        }
                        else if (valid != ok[j] || (valid && u / s_w != ox0[j] + k))
                        {
                            np = 1;
                        }
                    }
                }
                for (k = 0; k < (np == 4 ? 1 : 4); k++) /* a block, or up to 4 single pixels */
                {
                    const int32_t px = ix + k * s_w;
                    if (px >= in_w)
                    {
                        break;
                    }
                    if (np == 1)
                    {
                        for (kx = 0; kx < k_w; kx++)
                        {
                            const int32_t u = px + p->padding.w - kx * d_w;
                            ok[kx] = u >= 0 && u % s_w == 0 && u / s_w < out_w;
                            ox0[kx] = ok[kx] ? u / s_w : 0;
                        }
                    }
                    for (c = 0; c + 4 <= in_c; c += 4)
                    {
                        gi_block(&q, k_w, ox0, ok, c, 4, np, in_c, gi_row + px * in_c, s_w * in_c);
                    }
                    for (; c < in_c; c++)
                    {
                        gi_block(&q, k_w, ox0, ok, c, 1, np, in_c, gi_row + px * in_c, s_w * in_c);
                    }
                }
            }
        }
    }
}

arm_cmsis_nn_status pockmcu_conv_grad_input_f32(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const int8_t *filter,
                                                const float *filter_scale,
                                                const cmsis_nn_dims *output_dims,
                                                const float *grad_output,
                                                float *grad_input)
{
    if (filter_dims->h == 1 && filter_dims->w == 1 && filter_dims->n > 0 && filter_dims->c == input_dims->c &&
        output_dims->c == filter_dims->n && conv_params->stride.h >= 1 && conv_params->stride.w >= 1 &&
        conv_params->dilation.h >= 1 && conv_params->dilation.w >= 1 && input_dims->n >= 0 && input_dims->h >= 0 &&
        input_dims->w >= 0 && input_dims->c >= 0)
    {
        pockmcu_conv_1x1_grad_input_fast(
            conv_params, input_dims, filter_dims, filter, NULL, 0, filter_scale, output_dims, grad_output, grad_input);
        return ARM_CMSIS_NN_SUCCESS;
    }
    if (filter_dims->h <= GI_MAX_K && filter_dims->w <= GI_MAX_K && filter_dims->h >= 0 && filter_dims->w >= 0 &&
        filter_dims->c == input_dims->c && output_dims->c == filter_dims->n && conv_params->stride.h >= 1 &&
        conv_params->stride.w >= 1 && conv_params->dilation.h >= 1 && conv_params->dilation.w >= 1 &&
        input_dims->n >= 0 && input_dims->h >= 0 && input_dims->w >= 0 && input_dims->c >= 0 &&
        gi_mostly_nonzero(grad_output, output_dims->n * output_dims->h * output_dims->w * output_dims->c))
    {
        gi_gather(conv_params, input_dims, filter_dims, filter, filter_scale, output_dims, grad_output, grad_input);
        return ARM_CMSIS_NN_SUCCESS;
    }
    return pockmcu_conv_grad_input_f32_loops(
        conv_params, input_dims, filter_dims, filter, NULL, 0, filter_scale, output_dims, grad_output, grad_input);
}
