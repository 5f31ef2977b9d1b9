/*
 * pockmcu_conv_wgrad_update_s8 - weight gradient of a 2D convolution fused
 * with the int8 weight update (no full weight-gradient tensor is ever stored).
 *
 * input (the SAVED activation) holds only the trainable input channels:
 * input_dims = {N, H, W, k} are channels [channel_begin, channel_begin + k)
 * of the layer's real input (H, W the real input's). filter_dims is the full
 * OHWI filter {O, KH, KW, C_in}; output_dims = {N, OH, OW, O}.
 *
 * For each output channel o (ascending):
 *   1. G (ctx->buf, KH*KW*k floats, layout [i][j][c']) is zeroed, then for
 *      n, oh, ow (ascending; positions with grad_output == 0 skipped, which
 *      is bit-identical), i, j (in-bounds taps only), c':
 *        G[i][j][c'] += grad_output[n,oh,ow,o] * (float)(input[n,ih,iw,c'] +
 * input_offset) with ih = oh*stride_h - pad_h + i*dil_h (same for iw): each G
 * element sums over (n, oh, ow) ascending from +0.
 *   2. for (i, j) ascending, pockmcu_update_s8 on the k elements
 *      filter[o][i][j][channel_begin + c'] (c' ascending) with grad G[i][j][.],
 *      coef[o] and accum / velocity (NULL or O*KH*KW*k floats, [o][i][j][c']).
 * So the update visits the trainable elements in increasing [o][i][j][c']
 * order (one RNG draw each when applying, none when only accumulating).
 *
 * Up to 4 output channels are computed at a time (as many whole rows of
 * KH*KW*k floats as ctx->buf holds, at most 4; get_buffer_size asks for
 * min(4, O) rows), 4 output x 4 input channels in registers so that each input
 * value is converted once per 4 output channels; each G element is still the
 * sum over (n, oh, ow) ascending from +0 of the same products (skipping none:
 * a zero grad_output adds +-0 to a sum that is never -0), and the updates
 * still run in [o][i][j][c'] order: the same bits as one channel at a time.
 *
 * ctx->buf: at least KH*KW*k floats, float aligned
 * (pockmcu_conv_wgrad_update_s8_get_buffer_size() bytes is best);
 * ARM_CMSIS_NN_ARG_ERROR if it is NULL or ctx->size is smaller than one row.
 * Also ARG_ERROR for bad strides/dilations or a channel range outside C_in.
 */
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

/* The loop geometry shared by the helpers. */
typedef struct
{
    int32_t batches, in_h, in_w, k_ch, out_c, k_w, out_h, out_w;
    int32_t stride_h, stride_w, dil_h, dil_w, pad_h, pad_w, input_offset;
} wgrad_geom;

/* G[q][tap][c] for q < 4 (output channels o0 + q; rows `row` floats apart),
 * channels [c, c + 4) of one tap (ky, kx): the sum over the positions (n, oh,
 * ow) ascending, from +0, of grad_output[n,oh,ow,o] * (float)(input +
 * input_offset) (positions whose tap is in the padding add nothing). 16
 * accumulators: each converted input value serves 4 output channels. */
static void wgrad_block4(const wgrad_geom *q,
                         float *g,
                         int32_t row,
                         const int8_t *input,
                         const float *grad_output,
                         int32_t o0,
                         int32_t c,
                         int32_t ky,
                         int32_t kx)
{
    float a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f;
    float a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f;
    float a20 = 0.0f, a21 = 0.0f, a22 = 0.0f, a23 = 0.0f;
    float a30 = 0.0f, a31 = 0.0f, a32 = 0.0f, a33 = 0.0f;
    const int32_t off = q->input_offset;
    int32_t b, oy, ox;

    for (b = 0; b < q->batches; b++)
    {
        for (oy = 0; oy < q->out_h; oy++)
        {
            const int32_t iy = oy * q->stride_h - q->pad_h + ky * q->dil_h;
            if (iy < 0 || iy >= q->in_h)
            {
                continue;
            }
            for (ox = 0; ox < q->out_w; ox++)
            {
                const int32_t ix = ox * q->stride_w - q->pad_w + kx * q->dil_w;
                const float *go;
                const int8_t *x;
                float x0, x1, x2, x3;
                if (ix < 0 || ix >= q->in_w)
                {
                    continue;
                }
                go = grad_output + ((b * q->out_h + oy) * q->out_w + ox) * q->out_c + o0;
                if ((pockmcu_f32_magnitude_bits(go) | pockmcu_f32_magnitude_bits(go + 1) |
                     pockmcu_f32_magnitude_bits(go + 2) | pockmcu_f32_magnitude_bits(go + 3)) == 0u)
                {
                    continue; /* four zero gradients: sixteen +-0 terms */
                }
                x = input + ((b * q->in_h + iy) * q->in_w + ix) * q->k_ch + c;
                x0 = (float)((int32_t)x[0] + off);
                x1 = (float)((int32_t)x[1] + off);
                x2 = (float)((int32_t)x[2] + off);
                x3 = (float)((int32_t)x[3] + off);
                a00 = pockmcu_mla_f32(a00, go[0], x0);
                a01 = pockmcu_mla_f32(a01, go[0], x1);
                a02 = pockmcu_mla_f32(a02, go[0], x2);
                a03 = pockmcu_mla_f32(a03, go[0], x3);
                a10 = pockmcu_mla_f32(a10, go[1], x0);
                a11 = pockmcu_mla_f32(a11, go[1], x1);
                a12 = pockmcu_mla_f32(a12, go[1], x2);
                a13 = pockmcu_mla_f32(a13, go[1], x3);
                a20 = pockmcu_mla_f32(a20, go[2], x0);
                a21 = pockmcu_mla_f32(a21, go[2], x1);
                a22 = pockmcu_mla_f32(a22, go[2], x2);
                a23 = pockmcu_mla_f32(a23, go[2], x3);
                a30 = pockmcu_mla_f32(a30, go[3], x0);
                a31 = pockmcu_mla_f32(a31, go[3], x1);
                a32 = pockmcu_mla_f32(a32, go[3], x2);
                a33 = pockmcu_mla_f32(a33, go[3], x3);
            }
        }
    }
    g[c] = a00;
    g[c + 1] = a01;
    g[c + 2] = a02;
    g[c + 3] = a03;
    g += row;
    g[c] = a10;
    g[c + 1] = a11;
    g[c + 2] = a12;
    g[c + 3] = a13;
    g += row;
    g[c] = a20;
    g[c + 1] = a21;
    g[c + 2] = a22;
    g[c + 3] = a23;
    g += row;
    g[c] = a30;
    g[c + 1] = a31;
    g[c + 2] = a32;
    g[c + 3] = a33;
}

/* The output columns ox in [*lo, *hi) whose tap kx reads an input column inside
 * the image. */
static void wgrad_cols(const wgrad_geom *q, int32_t kx, int32_t *lo, int32_t *hi)
{
    const int32_t first = kx * q->dil_w - q->pad_w; /* input column of ox = 0 */
    int32_t a = 0, b = q->out_w;
    if (first < 0)
    {
        a = (-first + q->stride_w - 1) / q->stride_w;
    }
    if (first + (b - 1) * q->stride_w >= q->in_w)
    {
        b = first >= q->in_w ? 0 : (q->in_w - 1 - first) / q->stride_w + 1;
    }
    *lo = a;
    *hi = b > a ? b : a;
}

/* wgrad_block4 for channels [c, c + nc), nc <= 4, without looking at the
 * gradients: each row of output positions walks only its in-image columns with
 * two pointers (no per-position tests), the 4 gradients loaded by one VLDM and
 * the nc input values converted once for the 4 channels. Every sum runs over
 * the same positions in the same (n, oh, ow) ascending order from +0 as
 * wgrad_block4 (which skips zero gradients: +-0 terms, which change no sum), so
 * the bits are the same. */
POCKMCU_FAST_INLINE void wgrad_block4_dense(const wgrad_geom *q,
                                            float *g,
                                            int32_t row,
                                            const int8_t *input,
                                            const float *grad_output,
                                            int32_t o0,
                                            int32_t c,
                                            int32_t nc,
                                            int32_t ky,
                                            int32_t kx,
                                            int32_t skip_zero)
{
    float a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f;
    float a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f;
    float a20 = 0.0f, a21 = 0.0f, a22 = 0.0f, a23 = 0.0f;
    float a30 = 0.0f, a31 = 0.0f, a32 = 0.0f, a33 = 0.0f;
    const int32_t off = q->input_offset;
    const uint32_t off2 = ((uint32_t)off & 0xFFFFu) | ((uint32_t)off << 16);
    const int32_t x_step = q->stride_w * q->k_ch;
    int32_t b, oy, ox_lo, ox_hi, k;
    float *gq;

    /* a pointwise tap reading the pixel it writes (1x1, stride 1, no padding):
     * every position in one run */
    const int32_t whole = q->out_h == q->in_h && q->out_w == q->in_w && q->stride_h == 1 && q->stride_w == 1 &&
        ky * q->dil_h == q->pad_h && kx * q->dil_w == q->pad_w && q->pad_h == 0 && q->pad_w == 0;
    const int32_t n_b = whole ? 1 : q->batches;
    const int32_t n_y = whole ? 1 : q->out_h;
    wgrad_cols(q, kx, &ox_lo, &ox_hi);
    if (whole)
    {
        ox_hi = q->batches * q->out_h * q->out_w;
    }
    for (b = 0; b < n_b; b++)
    {
        for (oy = 0; oy < n_y; oy++)
        {
            const int32_t iy = oy * q->stride_h - q->pad_h + ky * q->dil_h;
            const float *go;
            const int8_t *x;
            int32_t n;
            if (iy < 0 || iy >= q->in_h || ox_lo >= ox_hi)
            {
                continue;
            }
            go = grad_output + ((b * q->out_h + oy) * q->out_w + ox_lo) * q->out_c + o0;
            x = input + ((b * q->in_h + iy) * q->in_w + ox_lo * q->stride_w - q->pad_w + kx * q->dil_w) * q->k_ch + c;
            n = ox_hi - ox_lo;
            if (nc == 4 && skip_zero)
            {
                for (; n > 0; n--, go += q->out_c, x += x_step)
                {
                    float gv[4], xv[4];
                    uint32_t w0, w1, w2, w3;
                    pockmcu_ld4_bits(go, &w0, &w1, &w2, &w3);
                    if (((w0 | w1 | w2 | w3) << 1) == 0u)
                    {
                        continue; /* four zero gradients: sixteen +-0 terms */
                    }
                    pockmcu_f32_from_bits4(w0, w1, w2, w3, gv);
                    pockmcu_cvt4_s8(x, off, off2, xv);
                    a00 = pockmcu_mla_f32(a00, gv[0], xv[0]);
                    a01 = pockmcu_mla_f32(a01, gv[0], xv[1]);
                    a02 = pockmcu_mla_f32(a02, gv[0], xv[2]);
                    a03 = pockmcu_mla_f32(a03, gv[0], xv[3]);
                    a10 = pockmcu_mla_f32(a10, gv[1], xv[0]);
                    a11 = pockmcu_mla_f32(a11, gv[1], xv[1]);
                    a12 = pockmcu_mla_f32(a12, gv[1], xv[2]);
                    a13 = pockmcu_mla_f32(a13, gv[1], xv[3]);
                    a20 = pockmcu_mla_f32(a20, gv[2], xv[0]);
                    a21 = pockmcu_mla_f32(a21, gv[2], xv[1]);
                    a22 = pockmcu_mla_f32(a22, gv[2], xv[2]);
                    a23 = pockmcu_mla_f32(a23, gv[2], xv[3]);
                    a30 = pockmcu_mla_f32(a30, gv[3], xv[0]);
                    a31 = pockmcu_mla_f32(a31, gv[3], xv[1]);
                    a32 = pockmcu_mla_f32(a32, gv[3], xv[2]);
                    a33 = pockmcu_mla_f32(a33, gv[3], xv[3]);
                }
            }
            else if (nc == 4)
            {
                for (; n > 0; n--)
                {
                    float gv[4], xv[4];
                    pockmcu_ld4_f32(go, gv);
                    pockmcu_cvt4_s8(x, off, off2, xv);
                    go += q->out_c;
                    x += x_step;
                    a00 = pockmcu_mla_f32(a00, gv[0], xv[0]);
                    a01 = pockmcu_mla_f32(a01, gv[0], xv[1]);
                    a02 = pockmcu_mla_f32(a02, gv[0], xv[2]);
                    a03 = pockmcu_mla_f32(a03, gv[0], xv[3]);
                    a10 = pockmcu_mla_f32(a10, gv[1], xv[0]);
                    a11 = pockmcu_mla_f32(a11, gv[1], xv[1]);
                    a12 = pockmcu_mla_f32(a12, gv[1], xv[2]);
                    a13 = pockmcu_mla_f32(a13, gv[1], xv[3]);
                    a20 = pockmcu_mla_f32(a20, gv[2], xv[0]);
                    a21 = pockmcu_mla_f32(a21, gv[2], xv[1]);
                    a22 = pockmcu_mla_f32(a22, gv[2], xv[2]);
                    a23 = pockmcu_mla_f32(a23, gv[2], xv[3]);
                    a30 = pockmcu_mla_f32(a30, gv[3], xv[0]);
                    a31 = pockmcu_mla_f32(a31, gv[3], xv[1]);
                    a32 = pockmcu_mla_f32(a32, gv[3], xv[2]);
                    a33 = pockmcu_mla_f32(a33, gv[3], xv[3]);
                }
            }
            else /* one input channel (the tail of 1 to 3): 4 sums */
            {
                for (; n > 0; n--)
                {
                    float gv[4];
                    const float x0 = (float)((int32_t)x[0] + off);
                    pockmcu_ld4_f32(go, gv);
                    go += q->out_c;
                    x += x_step;
                    a00 = pockmcu_mla_f32(a00, gv[0], x0);
                    a10 = pockmcu_mla_f32(a10, gv[1], x0);
                    a20 = pockmcu_mla_f32(a20, gv[2], x0);
                    a30 = pockmcu_mla_f32(a30, gv[3], x0);
                }
            }
        }
    }
    gq = g + c;
    for (k = 0; k < 4; k++, gq += row)
    {
        const float r0 = k == 0 ? a00 : (k == 1 ? a10 : (k == 2 ? a20 : a30));
        const float r1 = k == 0 ? a01 : (k == 1 ? a11 : (k == 2 ? a21 : a31));
        const float r2 = k == 0 ? a02 : (k == 1 ? a12 : (k == 2 ? a22 : a32));
        const float r3 = k == 0 ? a03 : (k == 1 ? a13 : (k == 2 ? a23 : a33));
        gq[0] = r0;
        if (nc == 4)
        {
            gq[1] = r1;
            gq[2] = r2;
            gq[3] = r3;
        }
    }
}

/* wgrad_block4_dense for a pointwise tap reading the pixel it writes (1x1, stride 1, no padding: every position
 * in one run) and 4 input channels, with nothing else per block: g[q * row + j] (q, j < 4) = the sum over the n
 * positions ascending, from +0, of go[p * out_c + q] * (float)(x[p * k_ch + j] + offset), each product rounded
 * before its addition: the same sums as wgrad_block4_dense. */
POCKMCU_GI_ROWS_ATTR void wgrad_whole4(const float *go,
                                       int32_t out_c,
                                       const int8_t *x,
                                       int32_t k_ch,
                                       int32_t n,
                                       int32_t off,
                                       uint32_t off2,
                                       float *g,
                                       int32_t row)
{
    float a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f;
    float a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f;
    float a20 = 0.0f, a21 = 0.0f, a22 = 0.0f, a23 = 0.0f;
    float a30 = 0.0f, a31 = 0.0f, a32 = 0.0f, a33 = 0.0f;
    for (; n > 0; n--, go += out_c, x += k_ch)
    {
        float gv[4], xv[4];
        pockmcu_ld4_f32(go, gv);
        pockmcu_cvt4_s8(x, off, off2, xv);
        a00 = pockmcu_mla_f32(a00, gv[0], xv[0]);
        a01 = pockmcu_mla_f32(a01, gv[0], xv[1]);
        a02 = pockmcu_mla_f32(a02, gv[0], xv[2]);
        a03 = pockmcu_mla_f32(a03, gv[0], xv[3]);
        a10 = pockmcu_mla_f32(a10, gv[1], xv[0]);
        a11 = pockmcu_mla_f32(a11, gv[1], xv[1]);
        a12 = pockmcu_mla_f32(a12, gv[1], xv[2]);
        a13 = pockmcu_mla_f32(a13, gv[1], xv[3]);
        a20 = pockmcu_mla_f32(a20, gv[2], xv[0]);
        a21 = pockmcu_mla_f32(a21, gv[2], xv[1]);
        a22 = pockmcu_mla_f32(a22, gv[2], xv[2]);
        a23 = pockmcu_mla_f32(a23, gv[2], xv[3]);
        a30 = pockmcu_mla_f32(a30, gv[3], xv[0]);
        a31 = pockmcu_mla_f32(a31, gv[3], xv[1]);
        a32 = pockmcu_mla_f32(a32, gv[3], xv[2]);
        a33 = pockmcu_mla_f32(a33, gv[3], xv[3]);
    }
    g[0] = a00, g[1] = a01, g[2] = a02, g[3] = a03;
    g += row;
    g[0] = a10, g[1] = a11, g[2] = a12, g[3] = a13;
    g += row;
    g[0] = a20, g[1] = a21, g[2] = a22, g[3] = a23;
    g += row;
    g[0] = a30, g[1] = a31, g[2] = a32, g[3] = a33;
}

/* wgrad_block4_dense for the channel blocks [c, c + nc) of [c_begin, c_end), in
 * one call. */
static void wgrad_block4_range(const wgrad_geom *q,
                               float *g,
                               int32_t row,
                               const int8_t *input,
                               const float *grad_output,
                               int32_t o0,
                               int32_t c_begin,
                               int32_t c_end,
                               int32_t nc,
                               int32_t ky,
                               int32_t kx,
                               int32_t skip_zero)
{
    int32_t c;
    for (c = c_begin; c + nc <= c_end; c += nc)
    {
        wgrad_block4_dense(q, g, row, input, grad_output, o0, c, nc, ky, kx, skip_zero);
    }
}

/* Input-channel counts below 4 (first layers), dilation 1 along the width: the
 * k_w * k_ch values of kernel row ky are contiguous in the filter row and in
 * the input, so they are taken as one row of "merged channels" m = kx * k_ch +
 * c, 4 at a time (m0 .. m0 + nj - 1, nj <= 4) for output channels [o0, o0 + 4):
 * in each output row the columns where all 4 taps are inside the image run the
 * 4x4 dense loop, the others add the terms of the taps inside one by one, in
 * ascending columns; every sum still runs over its positions in (n, oh, ow)
 * order from +0: the same bits. */
static void wgrad_merged(const wgrad_geom *q,
                         float *g,
                         int32_t row,
                         const int8_t *input,
                         const float *grad_output,
                         int32_t o0,
                         int32_t ky,
                         int32_t m0,
                         int32_t nj)
{
    float a00 = 0.0f, a01 = 0.0f, a02 = 0.0f, a03 = 0.0f;
    float a10 = 0.0f, a11 = 0.0f, a12 = 0.0f, a13 = 0.0f;
    float a20 = 0.0f, a21 = 0.0f, a22 = 0.0f, a23 = 0.0f;
    float a30 = 0.0f, a31 = 0.0f, a32 = 0.0f, a33 = 0.0f;
    const int32_t off = q->input_offset;
    const uint32_t off2 = ((uint32_t)off & 0xFFFFu) | ((uint32_t)off << 16);
    const int32_t x_step = q->stride_w * q->k_ch;
    int32_t lo[4], hi[4];
    int32_t all_lo = q->out_w, all_hi = 0, com_lo = 0, com_hi = q->out_w;
    int32_t b, oy, j, k;
    float *gq;
    for (j = 0; j < 4; j++)
    {
        lo[j] = 0;
        hi[j] = 0;
        if (j < nj)
        {
            wgrad_cols(q, (m0 + j) / q->k_ch, &lo[j], &hi[j]);
        }
        all_lo = j < nj && lo[j] < all_lo ? lo[j] : all_lo;
        all_hi = j < nj && hi[j] > all_hi ? hi[j] : all_hi;
        com_lo = lo[j] > com_lo ? lo[j] : com_lo;
        com_hi = hi[j] < com_hi ? hi[j] : com_hi;
    }
    if (nj < 4 || com_lo >= com_hi)
    {
        com_lo = all_hi; /* no dense part: every column one by one */
        com_hi = all_hi;
    }
    for (b = 0; b < q->batches; b++)
    {
        for (oy = 0; oy < q->out_h; oy++)
        {
            const int32_t iy = oy * q->stride_h - q->pad_h + ky * q->dil_h;
            const float *go_row;
            const int8_t *x_row;
            int32_t ox;
            if (iy < 0 || iy >= q->in_h)
            {
                continue;
            }
            go_row = grad_output + (b * q->out_h + oy) * q->out_w * q->out_c + o0;
            x_row = input + ((b * q->in_h + iy) * q->in_w - q->pad_w) * q->k_ch + m0; /* + ox * x_step */
            for (ox = all_lo; ox < all_hi; ox++)
            {
                float gv[4];
                const int8_t *x = x_row + ox * x_step;
                if (ox == com_lo && com_lo < com_hi) /* the dense columns */
                {
                    const float *go = go_row + ox * q->out_c;
                    int32_t n;
                    for (n = com_hi - com_lo; n > 0; n--, go += q->out_c, x += x_step)
                    {
                        float xv[4];
                        pockmcu_ld4_f32(go, gv);
                        pockmcu_cvt4_s8(x, off, off2, xv);
                        a00 = pockmcu_mla_f32(a00, gv[0], xv[0]);
                        a01 = pockmcu_mla_f32(a01, gv[0], xv[1]);
                        a02 = pockmcu_mla_f32(a02, gv[0], xv[2]);
                        a03 = pockmcu_mla_f32(a03, gv[0], xv[3]);
                        a10 = pockmcu_mla_f32(a10, gv[1], xv[0]);
                        a11 = pockmcu_mla_f32(a11, gv[1], xv[1]);
                        a12 = pockmcu_mla_f32(a12, gv[1], xv[2]);
                        a13 = pockmcu_mla_f32(a13, gv[1], xv[3]);
                        a20 = pockmcu_mla_f32(a20, gv[2], xv[0]);
                        a21 = pockmcu_mla_f32(a21, gv[2], xv[1]);
                        a22 = pockmcu_mla_f32(a22, gv[2], xv[2]);
                        a23 = pockmcu_mla_f32(a23, gv[2], xv[3]);
                        a30 = pockmcu_mla_f32(a30, gv[3], xv[0]);
                        a31 = pockmcu_mla_f32(a31, gv[3], xv[1]);
                        a32 = pockmcu_mla_f32(a32, gv[3], xv[2]);
                        a33 = pockmcu_mla_f32(a33, gv[3], xv[3]);
                    }
                    ox = com_hi - 1;
                    continue;
                }
                pockmcu_ld4_f32(go_row + ox * q->out_c, gv);
                if (ox >= lo[0] && ox < hi[0])
                {
                    const float x0 = (float)((int32_t)x[0] + off);
                    a00 = pockmcu_mla_f32(a00, gv[0], x0);
                    a10 = pockmcu_mla_f32(a10, gv[1], x0);
                    a20 = pockmcu_mla_f32(a20, gv[2], x0);
                    a30 = pockmcu_mla_f32(a30, gv[3], x0);
                }
                if (ox >= lo[1] && ox < hi[1])
                {
                    const float x1 = (float)((int32_t)x[1] + off);
                    a01 = pockmcu_mla_f32(a01, gv[0], x1);
                    a11 = pockmcu_mla_f32(a11, gv[1], x1);
                    a21 = pockmcu_mla_f32(a21, gv[2], x1);
                    a31 = pockmcu_mla_f32(a31, gv[3], x1);
                }
                if (ox >= lo[2] && ox < hi[2])
                {
                    const float x2 = (float)((int32_t)x[2] + off);
                    a02 = pockmcu_mla_f32(a02, gv[0], x2);
                    a12 = pockmcu_mla_f32(a12, gv[1], x2);
                    a22 = pockmcu_mla_f32(a22, gv[2], x2);
                    a32 = pockmcu_mla_f32(a32, gv[3], x2);
                }
                if (ox >= lo[3] && ox < hi[3])
                {
                    const float x3 = (float)((int32_t)x[3] + off);
                    a03 = pockmcu_mla_f32(a03, gv[0], x3);
                    a13 = pockmcu_mla_f32(a13, gv[1], x3);
                    a23 = pockmcu_mla_f32(a23, gv[2], x3);
                    a33 = pockmcu_mla_f32(a33, gv[3], x3);
                }
            }
        }
    }
    gq = g + ky * q->k_w * q->k_ch + m0;
    for (k = 0; k < 4; k++, gq += row)
    {
        const float r0 = k == 0 ? a00 : (k == 1 ? a10 : (k == 2 ? a20 : a30));
        const float r1 = k == 0 ? a01 : (k == 1 ? a11 : (k == 2 ? a21 : a31));
        const float r2 = k == 0 ? a02 : (k == 1 ? a12 : (k == 2 ? a22 : a32));
        const float r3 = k == 0 ? a03 : (k == 1 ? a13 : (k == 2 ? a23 : a33));
        gq[0] = r0;
        if (nj > 1)
        {
            gq[1] = r1;
        }
        if (nj > 2)
        {
            gq[2] = r2;
        }
        if (nj > 3)
        {
            gq[3] = r3;
        }
    }
}

/* Positions (n, oh, ow) where the 4 gradients of output channels [o0, o0 + 4)
 * are all zero, times 4, against the number of positions: testing each position
 * pays when a fifth or more are zero. */
static int32_t wgrad_mostly_zero(const wgrad_geom *q, const float *grad_output, int32_t o0)
{
    const int32_t positions = q->batches * q->out_h * q->out_w;
    const float *go = grad_output + o0;
    int32_t p, zeros = 0;
    for (p = 0; p < positions; p++, go += q->out_c)
    {
        zeros += (pockmcu_f32_magnitude_bits(go) | pockmcu_f32_magnitude_bits(go + 1) |
                  pockmcu_f32_magnitude_bits(go + 2) | pockmcu_f32_magnitude_bits(go + 3)) == 0u;
    }
    return zeros * 5 >= positions;
}

/* One output channel o, input channels [c0, k_ch) of every tap: g[tap * k_ch +
 * c] (the original loops, accumulating in g from +0; grad_output == 0 positions
 * skipped). */
static void wgrad_row(const wgrad_geom *q,
                      float *g,
                      int32_t c0,
                      int32_t taps,
                      const int8_t *input,
                      const float *grad_output,
                      int32_t o)
{
    int32_t b, oy, ox, tap, c;
    for (tap = 0; tap < taps; tap++)
    {
        for (c = c0; c < q->k_ch; c++)
        {
            g[tap * q->k_ch + c] = 0.0f;
        }
    }
    for (b = 0; b < q->batches; b++)
    {
        for (oy = 0; oy < q->out_h; oy++)
        {
            for (ox = 0; ox < q->out_w; ox++)
            {
                const float go = grad_output[((b * q->out_h + oy) * q->out_w + ox) * q->out_c + o];
                if (go == 0.0f)
                {
                    continue;
                }
                for (tap = 0; tap < taps; tap++)
                {
                    const int32_t iy = oy * q->stride_h - q->pad_h + (tap / q->k_w) * q->dil_h;
                    const int32_t ix = ox * q->stride_w - q->pad_w + (tap % q->k_w) * q->dil_w;
                    const int8_t *x;
                    float *gt;
                    if (iy < 0 || iy >= q->in_h || ix < 0 || ix >= q->in_w)
                    {
                        continue;
                    }
                    x = input + ((b * q->in_h + iy) * q->in_w + ix) * q->k_ch;
                    gt = g + tap * q->k_ch;
                    for (c = c0; c < q->k_ch; c++)
                    {
                        gt[c] += go * (float)((int32_t)x[c] + q->input_offset);
                    }
                }
            }
        }
    }
}

arm_cmsis_nn_status pockmcu_conv_wgrad_update_s8(const cmsis_nn_context *ctx,
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
    const int32_t k_ch = input_dims->c;
    const int32_t out_c = filter_dims->n;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t full_c = filter_dims->c;
    const int32_t taps = k_h * k_w;
    wgrad_geom q;
    float *g_buf;
    int32_t o, tap, rows, dense;

    if (conv_params->stride.h < 1 || conv_params->stride.w < 1 || conv_params->dilation.h < 1 ||
        conv_params->dilation.w < 1 || k_ch < 0 || channel_begin < 0 || channel_begin + k_ch > full_c ||
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
    rows = ctx->size / (int32_t)(taps * k_ch * (int32_t)sizeof(float));
    q.batches = input_dims->n;
    q.in_h = input_dims->h;
    q.in_w = input_dims->w;
    q.k_ch = k_ch;
    q.out_c = out_c;
    q.k_w = k_w;
    q.out_h = output_dims->h;
    q.out_w = output_dims->w;
    q.stride_h = conv_params->stride.h;
    q.stride_w = conv_params->stride.w;
    q.dil_h = conv_params->dilation.h;
    q.dil_w = conv_params->dilation.w;
    q.pad_h = conv_params->padding.h;
    q.pad_w = conv_params->padding.w;
    q.input_offset = conv_params->input_offset;
    dense = q.input_offset >= -128 && q.input_offset <= 128; /* the SXTAB16 lanes hold x + offset exactly */

    for (o = 0; o < out_c;)
    {
        const int32_t n_o = (rows >= 4 && o + 4 <= out_c && (k_ch >= 4 || dense)) ? 4 : 1;
        int32_t r, taps_done = 0;
        if (n_o == 4 && dense && k_ch < 4 && q.dil_w == 1)
        {
            const int32_t merged = k_w * k_ch;
            int32_t ky, m0;
            for (ky = 0; ky < k_h; ky++)
            {
                for (m0 = 0; m0 < merged; m0 += 4)
                {
                    wgrad_merged(
                        &q, g_buf, taps * k_ch, input, grad_output, o, ky, m0, merged - m0 < 4 ? merged - m0 : 4);
                }
            }
        }
        else if (n_o == 4 && dense)
        {
            const int32_t skip = wgrad_mostly_zero(&q, grad_output, o);
            /* (few positions: there the per-block work of wgrad_block4_dense weighs; over many, its loop is as
             * fast or faster, e.g. on the M4) */
            const int32_t whole = taps == 1 && q.stride_h == 1 && q.stride_w == 1 && q.pad_h == 0 && q.pad_w == 0 &&
                q.out_h == q.in_h && q.out_w == q.in_w && q.batches * q.out_h * q.out_w <= 64;
            int32_t c;
            if (whole && !skip) /* pointwise: each block of 4 input channels in one run over the positions */
            {
                const uint32_t off2 = ((uint32_t)q.input_offset & 0xFFFFu) | ((uint32_t)q.input_offset << 16);
                for (c = 0; c + 4 <= k_ch; c += 4)
                {
                    wgrad_whole4(grad_output + o,
                                 out_c,
                                 input + c,
                                 k_ch,
                                 q.batches * q.out_h * q.out_w,
                                 q.input_offset,
                                 off2,
                                 g_buf + c,
                                 k_ch);
                }
                wgrad_block4_range(&q, g_buf, k_ch, input, grad_output, o, c, k_ch, 1, 0, 0, 0);
                taps_done = 1;
            }
            for (tap = taps_done; tap < taps; tap++)
            {
                c = k_ch - k_ch % 4;
                wgrad_block4_range(
                    &q, g_buf + tap * k_ch, taps * k_ch, input, grad_output, o, 0, c, 4, tap / k_w, tap % k_w, skip);
                wgrad_block4_range(
                    &q, g_buf + tap * k_ch, taps * k_ch, input, grad_output, o, c, k_ch, 1, tap / k_w, tap % k_w, 0);
            }
        }
        else if (n_o == 4)
        {
            int32_t c = 0;
            for (tap = 0; tap < taps; tap++)
            {
                for (c = 0; c + 4 <= k_ch; c += 4)
                {
                    wgrad_block4(&q, g_buf + tap * k_ch, taps * k_ch, input, grad_output, o, c, tap / k_w, tap % k_w);
                }
            }
            for (r = 0; r < 4 && c < k_ch; r++) /* channel tail */
            {
                wgrad_row(&q, g_buf + r * taps * k_ch, c, taps, input, grad_output, o + r);
            }
        }
        else
        {
            wgrad_row(&q, g_buf, 0, taps, input, grad_output, o);
        }
        for (r = 0; r < n_o && k_ch == full_c; r++, o++) /* whole rows are contiguous: one call per row */
        {
            pockmcu_update_s8(filter + o * taps * full_c,
                              g_buf + r * taps * k_ch,
                              taps * k_ch,
                              coef[o],
                              accum != NULL ? accum + o * taps * k_ch : NULL,
                              velocity != NULL ? velocity + o * taps * k_ch : NULL,
                              opt,
                              rng);
        }
        for (r = 0; r < n_o && k_ch != full_c; r++, o++)
        {
            for (tap = 0; tap < taps; tap++) /* (i, j) row-major */
            {
                const int32_t state_idx = (o * taps + tap) * k_ch;
                pockmcu_update_s8(filter + (o * taps + tap) * full_c + channel_begin,
                                  g_buf + (r * taps + tap) * k_ch,
                                  k_ch,
                                  coef[o],
                                  accum != NULL ? accum + state_idx : NULL,
                                  velocity != NULL ? velocity + state_idx : NULL,
                                  opt,
                                  rng);
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
