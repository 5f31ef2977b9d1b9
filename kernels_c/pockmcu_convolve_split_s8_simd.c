/*
 * pockmcu_convolve_split_s8_simd - pockmcu_convolve_split_s8 (a convolution whose filter is stored in two
 * parts: the first head_c input channels of every tap in filter_head, RAM rows of head_c values, the rest in
 * the full OHWI filter in flash) on the Armv7E-M / Armv8-M DSP extension.
 *
 * Same arguments, same checks and the same bytes as pockmcu_convolve_split_s8: each output is the exact
 * int32 sum of the same products (integer sums do not depend on their order), then the same bias, the same
 * requantization (ort_rounding 0: TFLM's double rounding, 1: onnxruntime's float32 scale) and clamp.
 * The products: 2 output pixels x 2 output channels per inner loop, 4 input channels per step; the input
 * bytes are widened with the input offset added (SXTAB16: lanes x0 + off, x2 + off and x1 + off, x3 + off,
 * exact in 16 bits for |off| <= 128 wherever an int8 input is read), the filter bytes with SXTB16, and SMLAD
 * multiplies and adds two lanes at a time. Taps in the padding contribute nothing (the portable kernel
 * skips them too). No scratch: inputs and filters are read where they are (unaligned words).
 * Written with pockmcu_simd.h only, so the host and cores without DSP run the same loops in portable C.
 * input_offset outside [-128, 128] (never from an int8 zero point) runs the portable kernel.
 *
 * Pointwise layers (1x1 filter, stride 1, no padding) run as the DSP 1x1 convolution does (pockmcu_dsp_loops.h)
 * when ctx->buf holds the int16 column of 4 pixels (pockmcu_dsp_col_words(C_in, 4) words: the scratch the plan
 * gives a 1x1 layer on a DSP core) and its preconditions hold (-127 <= input_offset, multipliers >= 0 for TFLM
 * rounding, act_min <= act_max): 4 pixels are expanded once into the column (input offset added), and each
 * output channel's filter row is read as one row of C_in values whose words come from filter_head (channels below
 * head_c), from filter (the others) or from both (the one group of 4 that straddles head_c); then the same
 * requantization as the DSP kernels (pockmcu_dsp_out_at, exact for TFLM's and onnxruntime's roundings). The last
 * 1 to 3 pixels of an image run the loops below.
 */
#include "pockmcu_dsp_loops.h"
#include "pockmcu_layer_loops.h"
#include "pockmcu_nn_train.h"
#include "pockmcu_simd.h"

#if defined(__GNUC__) || defined(__clang__)
    #define SPLIT_INLINE static inline __attribute__((always_inline))
#else
    #define SPLIT_INLINE static inline
#endif

/* The four sums of 2 pixels (xa, xb) x 2 filter rows (wa, wb) over len channels. */
SPLIT_INLINE void split_dot_2x2(const int8_t *xa,
                                const int8_t *xb,
                                const int8_t *wa,
                                const int8_t *wb,
                                int32_t len,
                                uint32_t off2,
                                int32_t off,
                                int32_t s[4])
{
    int32_t s00 = s[0], s01 = s[1], s10 = s[2], s11 = s[3];
    int32_t n;
    for (n = len >> 2; n > 0; n--)
    {
        const uint32_t a = pockmcu_read_s8x4_ia(&xa);
        const uint32_t b = pockmcu_read_s8x4_ia(&xb);
        const uint32_t a02 = pockmcu_sxtab16(off2, a);
        const uint32_t a13 = pockmcu_sxtab16_ror8(off2, a);
        const uint32_t b02 = pockmcu_sxtab16(off2, b);
        const uint32_t b13 = pockmcu_sxtab16_ror8(off2, b);
        uint32_t w = pockmcu_read_s8x4_ia(&wa);
        uint32_t w02 = pockmcu_sxtb16(w);
        uint32_t w13 = pockmcu_sxtb16_ror8(w);
        s00 = pockmcu_smlad(a02, w02, s00);
        s00 = pockmcu_smlad(a13, w13, s00);
        s10 = pockmcu_smlad(b02, w02, s10);
        s10 = pockmcu_smlad(b13, w13, s10);
        w = pockmcu_read_s8x4_ia(&wb);
        w02 = pockmcu_sxtb16(w);
        w13 = pockmcu_sxtb16_ror8(w);
        s01 = pockmcu_smlad(a02, w02, s01);
        s01 = pockmcu_smlad(a13, w13, s01);
        s11 = pockmcu_smlad(b02, w02, s11);
        s11 = pockmcu_smlad(b13, w13, s11);
    }
    for (n = len & 3; n > 0; n--)
    {
        const int32_t a = (int32_t)*xa++ + off;
        const int32_t b = (int32_t)*xb++ + off;
        const int32_t u = *wa++;
        const int32_t v = *wb++;
        s00 += a * u;
        s01 += a * v;
        s10 += b * u;
        s11 += b * v;
    }
    s[0] = s00;
    s[1] = s01;
    s[2] = s10;
    s[3] = s11;
}

/* The two sums of 1 pixel x 2 filter rows over len channels (s[0] += x.wa, s[1] += x.wb). */
SPLIT_INLINE void split_dot_1x2(const int8_t *x,
                                const int8_t *wa,
                                const int8_t *wb,
                                int32_t len,
                                uint32_t off2,
                                int32_t off,
                                int32_t *s0,
                                int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1;
    int32_t n;
    for (n = len >> 2; n > 0; n--)
    {
        const uint32_t a = pockmcu_read_s8x4_ia(&x);
        const uint32_t a02 = pockmcu_sxtab16(off2, a);
        const uint32_t a13 = pockmcu_sxtab16_ror8(off2, a);
        uint32_t w = pockmcu_read_s8x4_ia(&wa);
        a0 = pockmcu_smlad(a02, pockmcu_sxtb16(w), a0);
        a0 = pockmcu_smlad(a13, pockmcu_sxtb16_ror8(w), a0);
        w = pockmcu_read_s8x4_ia(&wb);
        a1 = pockmcu_smlad(a02, pockmcu_sxtb16(w), a1);
        a1 = pockmcu_smlad(a13, pockmcu_sxtb16_ror8(w), a1);
    }
    for (n = len & 3; n > 0; n--)
    {
        const int32_t a = (int32_t)*x++ + off;
        a0 += a * *wa++;
        a1 += a * *wb++;
    }
    *s0 = a0;
    *s1 = a1;
}

/* The sum of 1 pixel x 1 filter row over len channels, added to s. */
SPLIT_INLINE int32_t split_dot_1x1(const int8_t *x, const int8_t *w, int32_t len, uint32_t off2, int32_t off, int32_t s)
{
    int32_t n;
    for (n = len >> 2; n > 0; n--)
    {
        const uint32_t a = pockmcu_read_s8x4_ia(&x);
        const uint32_t v = pockmcu_read_s8x4_ia(&w);
        s = pockmcu_smlad(pockmcu_sxtab16(off2, a), pockmcu_sxtb16(v), s);
        s = pockmcu_smlad(pockmcu_sxtab16_ror8(off2, a), pockmcu_sxtb16_ror8(v), s);
    }
    for (n = len & 3; n > 0; n--)
    {
        s += ((int32_t)*x++ + off) * *w++;
    }
    return s;
}

/* The loop geometry. */
typedef struct
{
    const int8_t *in_batch;
    const int8_t *filter;
    const int8_t *head;
    int32_t in_h, in_w, in_c, head_c, k_h, k_w;
    int32_t dil_h, dil_w, off;
    uint32_t off2;
} split_geom;

/* The input pixel of tap (ky, kx) of an output pixel whose window starts at (y0, x0), or NULL in the padding. */
SPLIT_INLINE const int8_t *split_tap(const split_geom *q, int32_t y0, int32_t x0, int32_t ky, int32_t kx)
{
    const int32_t y = y0 + ky * q->dil_h;
    const int32_t x = x0 + kx * q->dil_w;
    if (y < 0 || y >= q->in_h || x < 0 || x >= q->in_w)
    {
        return NULL;
    }
    return q->in_batch + (y * q->in_w + x) * q->in_c;
}

/* Sums of output channels (oc, oc + 1) at pixels a (window at ya, xa) and b (window at yb, xb; has_b 0: none):
 * s[0] = a.oc, s[1] = a.oc+1, s[2] = b.oc, s[3] = b.oc+1 (from 0). */
SPLIT_INLINE void split_sums_2(const split_geom *q,
                               int32_t oc,
                               int32_t ya,
                               int32_t xa,
                               int32_t yb,
                               int32_t xb,
                               int32_t has_b,
                               int32_t s[4])
{
    const int32_t head_c = q->head_c;
    const int32_t rest = q->in_c - head_c;
    int32_t ky, kx;
    s[0] = 0;
    s[1] = 0;
    s[2] = 0;
    s[3] = 0;
    for (ky = 0; ky < q->k_h; ky++)
    {
        for (kx = 0; kx < q->k_w; kx++)
        {
            const int32_t tap = (oc * q->k_h + ky) * q->k_w + kx;
            const int32_t next = q->k_h * q->k_w;
            const int8_t *pa = split_tap(q, ya, xa, ky, kx);
            const int8_t *pb = has_b ? split_tap(q, yb, xb, ky, kx) : NULL;
            const int8_t *ha = q->head + tap * head_c;
            const int8_t *fa = q->filter + tap * q->in_c + head_c;
            if (pa != NULL && pb != NULL)
            {
                split_dot_2x2(pa, pb, ha, ha + next * head_c, head_c, q->off2, q->off, s);
                split_dot_2x2(pa + head_c, pb + head_c, fa, fa + next * q->in_c, rest, q->off2, q->off, s);
            }
            else if (pa != NULL)
            {
                split_dot_1x2(pa, ha, ha + next * head_c, head_c, q->off2, q->off, &s[0], &s[1]);
                split_dot_1x2(pa + head_c, fa, fa + next * q->in_c, rest, q->off2, q->off, &s[0], &s[1]);
            }
            else if (pb != NULL)
            {
                split_dot_1x2(pb, ha, ha + next * head_c, head_c, q->off2, q->off, &s[2], &s[3]);
                split_dot_1x2(pb + head_c, fa, fa + next * q->in_c, rest, q->off2, q->off, &s[2], &s[3]);
            }
        }
    }
}

/* The sum of output channel oc at the pixel whose window starts at (ya, xa). */
SPLIT_INLINE int32_t split_sum_1(const split_geom *q, int32_t oc, int32_t ya, int32_t xa)
{
    const int32_t head_c = q->head_c;
    int32_t s = 0;
    int32_t ky, kx;
    for (ky = 0; ky < q->k_h; ky++)
    {
        for (kx = 0; kx < q->k_w; kx++)
        {
            const int32_t tap = (oc * q->k_h + ky) * q->k_w + kx;
            const int8_t *p = split_tap(q, ya, xa, ky, kx);
            if (p != NULL)
            {
                s = split_dot_1x1(p, q->head + tap * head_c, head_c, q->off2, q->off, s);
                s = split_dot_1x1(p + head_c, q->filter + tap * q->in_c + head_c, q->in_c - head_c, q->off2, q->off, s);
            }
        }
    }
    return s;
}

/* The weight word of input channels [c, c + 4) of a split filter row: head bytes below head_c, flash bytes from it. */
SPLIT_INLINE uint32_t split_word(const int8_t *hrow, const int8_t *frow, int32_t c, int32_t head_c)
{
    uint32_t w = 0;
    int32_t k;
    for (k = 0; k < 4; k++)
    {
        const int8_t v = c + k < head_c ? hrow[c + k] : frow[c + k];
        w |= (uint32_t)(uint8_t)v << (8 * k);
    }
    return w;
}

/* s[r] = bias + row r of the 4-row column (pockmcu_dsp_expand's layout) . the split filter row (hrow: head_c values
 * in RAM, frow: the row of in_c values in flash whose first head_c are not read). */
SPLIT_INLINE void split_dot_4x1(const uint32_t *col,
                                const int8_t *hrow,
                                const int8_t *frow,
                                int32_t in_c,
                                int32_t head_c,
                                int32_t bias,
                                int32_t *s)
{
    int32_t a0 = bias, a1 = bias, a2 = bias, a3 = bias;
    const int32_t n_groups = in_c >> 2;
    int32_t g = head_c >> 2 < n_groups ? head_c >> 2 : n_groups;
    const int8_t *w = hrow;
    int32_t n, c;
    for (n = g; n > 0; n--)
    {
        const uint32_t v = pockmcu_read_s8x4_ia(&w);
        POCKMCU_DSP_STEP_4X1(col, v, a0, a1, a2, a3);
    }
    if ((head_c & 3) != 0 && g < n_groups)
    {
        const uint32_t v = split_word(hrow, frow, 4 * g, head_c);
        POCKMCU_DSP_STEP_4X1(col, v, a0, a1, a2, a3);
        g++;
    }
    w = frow + 4 * g;
    for (n = (n_groups - g) >> 1; n > 0; n--)
    {
        const uint32_t v0 = pockmcu_read_s8x4_ia(&w);
        const uint32_t v1 = pockmcu_read_s8x4_ia(&w);
        POCKMCU_DSP_STEP_4X1(col, v0, a0, a1, a2, a3);
        POCKMCU_DSP_STEP_4X1(col, v1, a0, a1, a2, a3);
    }
    if (((n_groups - g) & 1) != 0)
    {
        const uint32_t v = pockmcu_read_s8x4_ia(&w);
        POCKMCU_DSP_STEP_4X1(col, v, a0, a1, a2, a3);
    }
    for (c = 4 * n_groups; c < in_c; c++)
    {
        const uint32_t u = (uint32_t)(int32_t)(c < head_c ? hrow[c] : frow[c]);
        a0 = pockmcu_smlabb(col[0], u, a0);
        a1 = pockmcu_smlabb(col[1], u, a1);
        a2 = pockmcu_smlabb(col[2], u, a2);
        a3 = pockmcu_smlabb(col[3], u, a3);
        col += 4;
    }
    s[0] = a0;
    s[1] = a1;
    s[2] = a2;
    s[3] = a3;
}

/* Pixels [0, 4 * (n_pix / 4)) of one image of a pointwise split layer (see the file comment); returns how many. */
SPLIT_INLINE int32_t split_pointwise_blocks(uint32_t *col,
                                            const int8_t *in,
                                            int32_t n_pix,
                                            int32_t in_c,
                                            const int8_t *filter,
                                            const int8_t *head,
                                            int32_t head_c,
                                            int32_t out_c,
                                            int32_t offset,
                                            const pockmcu_dsp_requant *q,
                                            int8_t *out,
                                            const int32_t ort_rounding)
{
    const uint32_t offset2 = ((uint32_t)offset & 0xFFFFu) | ((uint32_t)offset << 16);
    int32_t p, r, o;
    for (p = 0; p + 4 <= n_pix; p += 4)
    {
        int8_t *y = out + p * out_c;
        for (r = 0; r < 4; r++)
        {
            pockmcu_dsp_expand(in + (p + r) * in_c, in_c, offset2, offset, 4, r, col);
        }
        for (o = 0; o < out_c; o++)
        {
            int32_t s[4];
            split_dot_4x1(col, head + o * head_c, filter + o * in_c, in_c, head_c, pockmcu_dsp_bias_at(q, o), s);
            if (!ort_rounding && q->fast) /* pockmcu_dsp_out_at's fast branch, the channel's constants once */
            {
                const int32_t m = q->multiplier[o], e = -q->shift[o];
                const int32_t rr = pockmcu_dsp_fast_round(e, q->output_offset);
                int32_t v0 = pockmcu_dsp_out_fast(s[0], m, rr, e), v1 = pockmcu_dsp_out_fast(s[1], m, rr, e);
                int32_t v2 = pockmcu_dsp_out_fast(s[2], m, rr, e), v3 = pockmcu_dsp_out_fast(s[3], m, rr, e);
                if (q->clamp)
                {
                    v0 = pockmcu_clamp_i32(v0, q->act_min, q->act_max);
                    v1 = pockmcu_clamp_i32(v1, q->act_min, q->act_max);
                    v2 = pockmcu_clamp_i32(v2, q->act_min, q->act_max);
                    v3 = pockmcu_clamp_i32(v3, q->act_min, q->act_max);
                }
                y[o] = (int8_t)v0;
                y[out_c + o] = (int8_t)v1;
                y[2 * out_c + o] = (int8_t)v2;
                y[3 * out_c + o] = (int8_t)v3;
            }
            else
            {
                const pockmcu_dsp_channel ch = pockmcu_dsp_channel_at(q, o, 1);
                y[o] = pockmcu_dsp_out(s[0], &ch, q, ort_rounding);
                y[out_c + o] = pockmcu_dsp_out(s[1], &ch, q, ort_rounding);
                y[2 * out_c + o] = pockmcu_dsp_out(s[2], &ch, q, ort_rounding);
                y[3 * out_c + o] = pockmcu_dsp_out(s[3], &ch, q, ort_rounding);
            }
        }
    }
    return p;
}

#if defined(__GNUC__) || defined(__clang__)
    #define SPLIT_OUT_OF_LINE static __attribute__((noinline))
#else
    #define SPLIT_OUT_OF_LINE static
#endif

/* split_pointwise_blocks for each rounding, out of line (its loops get the registers to themselves). */
SPLIT_OUT_OF_LINE int32_t split_pointwise_tflm(uint32_t *col,
                                               const int8_t *in,
                                               int32_t n_pix,
                                               int32_t in_c,
                                               const int8_t *filter,
                                               const int8_t *head,
                                               int32_t head_c,
                                               int32_t out_c,
                                               int32_t offset,
                                               const pockmcu_dsp_requant *q,
                                               int8_t *out)
{
    return split_pointwise_blocks(col, in, n_pix, in_c, filter, head, head_c, out_c, offset, q, out, 0);
}

SPLIT_OUT_OF_LINE int32_t split_pointwise_ort(uint32_t *col,
                                              const int8_t *in,
                                              int32_t n_pix,
                                              int32_t in_c,
                                              const int8_t *filter,
                                              const int8_t *head,
                                              int32_t head_c,
                                              int32_t out_c,
                                              int32_t offset,
                                              const pockmcu_dsp_requant *q,
                                              int8_t *out)
{
    return split_pointwise_blocks(col, in, n_pix, in_c, filter, head, head_c, out_c, offset, q, out, 1);
}

arm_cmsis_nn_status pockmcu_convolve_split_s8_simd(const cmsis_nn_context *ctx,
                                                   const cmsis_nn_conv_params *conv_params,
                                                   const cmsis_nn_per_channel_quant_params *quant_params,
                                                   const cmsis_nn_dims *input_dims,
                                                   const int8_t *input_data,
                                                   const cmsis_nn_dims *filter_dims,
                                                   const int8_t *filter_data,
                                                   const int8_t *filter_head,
                                                   int32_t head_c,
                                                   const cmsis_nn_dims *bias_dims,
                                                   const int32_t *bias_data,
                                                   const cmsis_nn_dims *output_dims,
                                                   int8_t *output_data,
                                                   int32_t ort_rounding)
{
    const int32_t out_c = output_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t stride_h = conv_params->stride.h;
    const int32_t stride_w = conv_params->stride.w;
    const int32_t out_off = conv_params->output_offset;
    const int32_t act_min = conv_params->activation.min;
    const int32_t act_max = conv_params->activation.max;
    const int32_t *mult = quant_params->multiplier;
    const int32_t *shift = quant_params->shift;
    const int8_t *head_rows = filter_head;
    split_geom q;
    pockmcu_dsp_requant rq;
    int32_t pointwise;
    int32_t b, oy, ox, oc;

    if (input_dims->c != filter_dims->c || head_c < 0 || head_c > filter_dims->c || (head_c > 0 && filter_head == NULL))
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    if (stride_h < 1 || stride_w < 1 || conv_params->dilation.h < 1 || conv_params->dilation.w < 1 ||
        filter_dims->c <= 0 || output_dims->c != filter_dims->n || conv_params->input_offset < -128 ||
        conv_params->input_offset > 128)
    {
        return pockmcu_convolve_split_s8(ctx,
                                         conv_params,
                                         quant_params,
                                         input_dims,
                                         input_data,
                                         filter_dims,
                                         filter_data,
                                         filter_head,
                                         head_c,
                                         bias_dims,
                                         bias_data,
                                         output_dims,
                                         output_data,
                                         ort_rounding);
    }
    if (head_c == 0)
    {
        head_rows = filter_data; /* never read: every head segment has length 0 */
    }
    q.filter = filter_data;
    q.head = head_rows;
    q.in_h = input_dims->h;
    q.in_w = input_dims->w;
    q.in_c = input_dims->c;
    q.head_c = head_c;
    q.k_h = filter_dims->h;
    q.k_w = filter_dims->w;
    q.dil_h = conv_params->dilation.h;
    q.dil_w = conv_params->dilation.w;
    q.off = conv_params->input_offset;
    q.off2 = ((uint32_t)q.off & 0xFFFFu) | ((uint32_t)q.off << 16);
    pointwise = ctx != NULL && ctx->buf != NULL && q.off >= -127 &&
        pockmcu_dsp_is_pointwise(conv_params, input_dims, filter_dims, output_dims) &&
        ctx->size >= 4 * pockmcu_dsp_col_words(q.in_c, 4) && act_min <= act_max &&
        (ort_rounding != 0 || !pockmcu_dsp_has_negative_multiplier(mult, out_c));
    rq.bias = bias_data;
    rq.multiplier = mult;
    rq.shift = shift;
    rq.output_offset = out_off;
    rq.act_min = act_min;
    rq.act_max = act_max;
    rq.fast = pointwise && !ort_rounding &&
        pockmcu_dsp_fast_requant_ok(bias_data, mult, shift, out_c, out_c, filter_dims->h * filter_dims->w * q.in_c);
    rq.clamp = act_min > -128 || act_max < 127;

    for (b = 0; b < input_dims->n; b++)
    {
        int32_t pix = 0;
        const int32_t n_pix = out_h * out_w;
        int8_t *out_batch = output_data + b * n_pix * out_c;
        q.in_batch = input_data + b * q.in_h * q.in_w * q.in_c;
        if (pointwise)
        {
            pix = ort_rounding ? split_pointwise_ort((uint32_t *)ctx->buf,
                                                     q.in_batch,
                                                     n_pix,
                                                     q.in_c,
                                                     filter_data,
                                                     head_rows,
                                                     head_c,
                                                     out_c,
                                                     q.off,
                                                     &rq,
                                                     out_batch)
                               : split_pointwise_tflm((uint32_t *)ctx->buf,
                                                      q.in_batch,
                                                      n_pix,
                                                      q.in_c,
                                                      filter_data,
                                                      head_rows,
                                                      head_c,
                                                      out_c,
                                                      q.off,
                                                      &rq,
                                                      out_batch);
        }
        for (; pix < n_pix; pix += 2)
        {
            const int32_t has_b = pix + 1 < n_pix;
            int32_t ya, xa, yb = 0, xb = 0;
            int8_t *out_a = out_batch + pix * out_c;
            int8_t *out_b = out_a + out_c;
            oy = pix / out_w;
            ox = pix % out_w;
            ya = oy * stride_h - conv_params->padding.h;
            xa = ox * stride_w - conv_params->padding.w;
            if (has_b)
            {
                yb = ((pix + 1) / out_w) * stride_h - conv_params->padding.h;
                xb = ((pix + 1) % out_w) * stride_w - conv_params->padding.w;
            }
            for (oc = 0; oc < out_c; oc += 2)
            {
                int32_t s[4];
                const int32_t n_oc = oc + 1 < out_c ? 2 : 1;
                int32_t k;
                if (n_oc == 2)
                {
                    split_sums_2(&q, oc, ya, xa, yb, xb, has_b, s);
                }
                else
                {
                    s[0] = split_sum_1(&q, oc, ya, xa);
                    s[1] = 0;
                    s[2] = has_b ? split_sum_1(&q, oc, yb, xb) : 0;
                    s[3] = 0;
                }
                for (k = 0; k < n_oc; k++)
                {
                    const int32_t o = oc + k;
                    const int32_t bias = bias_data != NULL ? bias_data[o] : 0;
                    int32_t acc = pockmcu_requantize_as(s[k] + bias, mult[o], shift[o], ort_rounding) + out_off;
                    out_a[o] = (int8_t)pockmcu_clamp_i32(acc, act_min, act_max);
                    if (has_b)
                    {
                        acc = pockmcu_requantize_as(s[2 + k] + bias, mult[o], shift[o], ort_rounding) + out_off;
                        out_b[o] = (int8_t)pockmcu_clamp_i32(acc, act_min, act_max);
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
