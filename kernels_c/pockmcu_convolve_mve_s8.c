/*
 * pockmcu_convolve_mve_s8 - int8 2D convolution for Helium (Armv8.1-M MVE, Cortex-M55), the CMSIS-NN
 * API and bytes of arm_convolve_wrapper_s8 (TFLM ConvPerChannel, double rounding requantization).
 *
 * On a core with integer MVE: one output pixel at a time. Its receptive field is read in place when it is one
 * contiguous run of the input (1x1 and 1xK filters with dilation 1 inside the image), else gathered (im2col) into
 * a 512-byte stack block, out-of-image taps holding the input zero point (they contribute (zp + input_offset) * w
 * = 0); longer fields are gathered and summed in 512-byte chunks. Four output channels per tail-predicated
 * low-overhead loop (DLSTP / LETP) of 16-byte VMLADAVA dot products, their accumulators starting at
 * bias + input_offset * sum(w) (formed once per call and block of 64 output channels: the same integer as the
 * portable sum of (x + input_offset) * w in wrapping int32), then requantization of the four channels as one
 * vector (VSHL, VQRDMULH, VRSHL with the round-half-away fix-up: the bits of pockmcu_requantize), offset, clamp
 * and a 4-byte store, all in one inline assembly block (GCC 12 spills the vectors of such sequences). Grouped
 * convolutions (filter_dims->c < input_dims->c) run the portable loops. No scratch buffer
 * (pockmcu_convolve_mve_s8_get_buffer_size returns 0); about 2 KB of stack.
 *
 * Elsewhere (cores without MVE, the host simulation) this function is the portable kernel: it runs
 * pockmcu_conv_s8_loops exactly as arm_convolve_wrapper_s8 does. The MVE path produces the same bytes
 * as those loops for every argument (tests/test_mve_kernels.py compares both in one QEMU M55 program
 * on hundreds of random geometries), so a model's host simulation equals its run on Cortex-M55.
 */
#include "pockmcu_layer_loops.h"
#include "pockmcu_nn_support_mve.h"

#if POCKMCU_HAS_MVE

    #define POCKMCU_MVE_COL 512 /* bytes of one pixel's receptive field per gather */

/* Where the receptive field of one output pixel starts in the input. */
typedef struct
{
    int32_t y0;
    int32_t x0;
} pockmcu_mve_origin;

/* Geometry shared by the gathers of one call. */
typedef struct
{
    const int8_t *in;
    int32_t in_h, in_w, in_c, k_h, k_w, k_c, dil_h, dil_w;
    int8x16_t zp;
} pockmcu_mve_conv_geom;

/* Bytes [k0, k1) of the flattened (ky, kx, ci) receptive field of the pixel at origin o, into dst. */
static void
pockmcu_mve_gather(const pockmcu_mve_conv_geom *g, pockmcu_mve_origin o, int32_t k0, int32_t k1, int8_t *dst)
{
    const int32_t row = g->k_w * g->k_c;
    int32_t f = k0;
    while (f < k1)
    {
        const int32_t ky = f / row;
        const int32_t r = f - ky * row;
        const int32_t kx = r / g->k_c;
        const int32_t ci = r - kx * g->k_c;
        const int32_t iy = o.y0 + ky * g->dil_h;
        int32_t span;
        int32_t valid;
        int32_t ix = o.x0 + kx * g->dil_w;
        if (iy < 0 || iy >= g->in_h)
        {
            span = row - r; /* the rest of the kernel row is outside */
            valid = 0;
        }
        else if (g->dil_w == 1)
        {
            /* taps kx .. of this row are contiguous in the input while they stay inside it */
            if (ix < 0)
            {
                span = -ix * g->k_c - ci;
                valid = 0;
            }
            else if (ix >= g->in_w)
            {
                span = row - r;
                valid = 0;
            }
            else
            {
                const int32_t last = pockmcu_min_i32(g->k_w, g->in_w - o.x0); /* one past the last inside kx */
                span = (last - kx) * g->k_c - ci;
                valid = 1;
            }
        }
        else
        {
            span = g->k_c - ci;
            valid = ix >= 0 && ix < g->in_w;
        }
        span = pockmcu_min_i32(span, k1 - f);
        if (valid)
        {
            pockmcu_mve_copy_s8(dst, g->in + (iy * g->in_w + ix) * g->in_c + ci, span);
        }
        else
        {
            pockmcu_mve_fill_s8(dst, g->zp, span);
        }
        dst += span;
        f += span;
    }
}

/* The whole receptive field of the pixel at origin o into dst, for dilation.w 1 and k_c == in_c: each kernel row
 * is one contiguous run of k_w * in_c input bytes, clipped to the image (the rest holds the input zero point). */
static void pockmcu_mve_gather_rows(const pockmcu_mve_conv_geom *g, pockmcu_mve_origin o, int8_t *dst)
{
    const int32_t row = g->k_w * g->k_c;
    const int32_t lead = pockmcu_min_i32(pockmcu_max_i32(-o.x0, 0), g->k_w) * g->k_c;
    const int32_t mid = pockmcu_max_i32(pockmcu_min_i32(g->in_w - o.x0, g->k_w) * g->k_c - lead, 0);
    int32_t ky;
    for (ky = 0; ky < g->k_h; ky++, dst += row)
    {
        const int32_t iy = o.y0 + ky * g->dil_h;
        if ((uint32_t)iy >= (uint32_t)g->in_h)
        {
            pockmcu_mve_fill_s8(dst, g->zp, row);
            continue;
        }
        pockmcu_mve_fill_s8(dst, g->zp, lead);
        pockmcu_mve_copy_s8(dst + lead, g->in + (iy * g->in_w + o.x0) * g->in_c + lead, mid);
        pockmcu_mve_fill_s8(dst + lead + mid, g->zp, row - lead - mid);
    }
}

/* Everything one block of four output channels needs, read by the assembly below at fixed offsets. Rows past
 * the layer's last channel repeat the block's first row (their results are not stored). */
typedef struct
{
    const int8_t *w[4]; /*  0: the four weight rows */
    int32_t pre[4];     /* 16: bias + input_offset * sum(w) */
    int32_t mult[4];    /* 32: multipliers */
    int32_t left[4];    /* 48: max(shift, 0) */
    int32_t right[4];   /* 64: min(shift, 0) */
    int32_t kk;         /* 80: bytes per weight row */
} pockmcu_mve_conv_blk;

/* The constants of block k: output channels oc .. oc + nrow - 1 (nrow 1 to 4; the rows past the last repeat the
 * first), their weight rows of kk bytes, starting sums pre = bias + input_offset * sum(w) (wrapping int32, the four
 * row sums in one pass over the rows), multipliers and the shift split in two, all by vector; returns whether some
 * channel shifts left. Formed once per call and block of 64 channels: tiled (streamed) layers call the kernel
 * once per tile, so this cost counts. */
static int32_t pockmcu_mve_conv_blk_init(pockmcu_mve_conv_blk *k,
                                         int32_t *pre0,
                                         const int8_t *filter_data,
                                         const int32_t kk,
                                         const int32_t oc,
                                         const int32_t nrow,
                                         const int32_t input_offset,
                                         const cmsis_nn_per_channel_quant_params *quant_params,
                                         const int32_t *bias_data)
{
    const mve_pred16_t p = vctp32q((uint32_t)nrow);
    const int32x4_t zero = vdupq_n_s32(0);
    const int8_t *w0 = filter_data + oc * kk;
    const int8_t *w1 = nrow > 1 ? w0 + kk : w0;
    const int8_t *w2 = nrow > 2 ? w0 + 2 * kk : w0;
    const int8_t *w3 = nrow > 3 ? w0 + 3 * kk : w0;
    int32_t s0 = 0, s1 = 0, s2 = 0, s3 = 0, d;
    int32x4_t sums = zero, sh, pre;
    k->w[0] = w0;
    k->w[1] = w1;
    k->w[2] = w2;
    k->w[3] = w3;
    k->kk = kk;
    for (d = kk >> 4; d > 0; d--)
    {
        s0 = vaddvaq_s8(s0, vldrbq_s8(w0));
        s1 = vaddvaq_s8(s1, vldrbq_s8(w1));
        s2 = vaddvaq_s8(s2, vldrbq_s8(w2));
        s3 = vaddvaq_s8(s3, vldrbq_s8(w3));
        w0 += 16;
        w1 += 16;
        w2 += 16;
        w3 += 16;
    }
    if (kk & 15)
    {
        const mve_pred16_t t = vctp8q((uint32_t)(kk & 15));
        s0 = vaddvaq_s8(s0, vldrbq_z_s8(w0, t));
        s1 = vaddvaq_s8(s1, vldrbq_z_s8(w1, t));
        s2 = vaddvaq_s8(s2, vldrbq_z_s8(w2, t));
        s3 = vaddvaq_s8(s3, vldrbq_z_s8(w3, t));
    }
    __asm__("vmov %q[v][2], %q[v][0], %[a0], %[a2]\n\t"
            "vmov %q[v][3], %q[v][1], %[a1], %[a3]"
            : [v] "+w"(sums)
            : [a0] "r"(s0), [a1] "r"(s1), [a2] "r"(s2), [a3] "r"(s3));
    pre = bias_data != NULL ? vldrwq_z_s32(bias_data + oc, p) : zero;
    pre = vmlaq_n_s32(pre, sums, input_offset);
    vstrwq_s32(k->pre, pre);
    vstrwq_s32(pre0, pre);
    vstrwq_s32(k->mult, vldrwq_z_s32(quant_params->multiplier + oc, p));
    sh = vldrwq_z_s32(quant_params->shift + oc, p);
    vstrwq_s32(k->left, vmaxq_s32(sh, zero));
    vstrwq_s32(k->right, vminq_s32(sh, zero));
    return vmaxvq_s32(0, sh) > 0;
}

/* The four output channels of block k for the receptive field row, requantized, + output_offset, clamped.
 * Dot products: one tail-predicated low-overhead loop (DLSTP / LETP: the last iteration loads and accumulates
 * only the kk % 16 remaining bytes), 16-byte VMLADAVA into four general registers that start at pre (even
 * numbered, as the instruction requires: r0, r2, r4, r6, named in the assembly). Requantization as in
 * pockmcu_mve_requantize_lr (the left shift left out when no channel of the block array shifts left). */
    #define POCKMCU_MVE_CONV_DOT_ASM                                                                                   \
        "ldrd %[w0], %[w1], [%[k]]\n\t"                                                                                \
        "ldrd %[w2], %[w3], [%[k], #8]\n\t"                                                                            \
        "ldrd r0, r2, [%[k], #16]\n\t"                                                                                 \
        "ldrd r4, r6, [%[k], #24]\n\t"                                                                                 \
        "ldr %[x], [%[k], #80]\n\t"                                                                                    \
        "dlstp.8 lr, %[x]\n\t"                                                                                         \
        "mov %[x], %[row]\n"                                                                                           \
        "1:\n\t"                                                                                                       \
        "vldrb.8 %q[xv], [%[x]], #16\n\t"                                                                              \
        "vldrb.8 %q[wv], [%[w0]], #16\n\t"                                                                             \
        "vmladava.s8 r0, %q[xv], %q[wv]\n\t"                                                                           \
        "vldrb.8 %q[wv], [%[w1]], #16\n\t"                                                                             \
        "vmladava.s8 r2, %q[xv], %q[wv]\n\t"                                                                           \
        "vldrb.8 %q[wv], [%[w2]], #16\n\t"                                                                             \
        "vmladava.s8 r4, %q[xv], %q[wv]\n\t"                                                                           \
        "vldrb.8 %q[wv], [%[w3]], #16\n\t"                                                                             \
        "vmladava.s8 r6, %q[xv], %q[wv]\n\t"                                                                           \
        "letp lr, 1b\n\t"                                                                                              \
        "vmov %q[v][2], %q[v][0], r0, r4\n\t"                                                                          \
        "vmov %q[v][3], %q[v][1], r2, r6\n\t"
    #define POCKMCU_MVE_CONV_LEFT_ASM                                                                                  \
        "vldrw.32 %q[wv], [%[k], #48]\n\t"                                                                             \
        "vshl.s32 %q[v], %q[v], %q[wv]\n\t"
    #define POCKMCU_MVE_CONV_RQ_ASM                                                                                    \
        "vldrw.32 %q[wv], [%[k], #32]\n\t"                                                                             \
        "vqrdmulh.s32 %q[v], %q[v], %q[wv]\n\t"                                                                        \
        "vldrw.32 %q[wv], [%[k], #64]\n\t"                                                                             \
        "vand %q[xv], %q[v], %q[wv]\n\t"                                                                               \
        "vshr.s32 %q[xv], %q[xv], #31\n\t"                                                                             \
        "vqadd.s32 %q[v], %q[v], %q[xv]\n\t"                                                                           \
        "vrshl.s32 %q[v], %q[v], %q[wv]\n\t"                                                                           \
        "vadd.i32 %q[v], %q[v], %q[oo]\n\t"                                                                            \
        "vmax.s32 %q[v], %q[v], %q[lo]\n\t"                                                                            \
        "vmin.s32 %q[v], %q[v], %q[hi]"
    #define POCKMCU_MVE_CONV_OPERANDS                                                                                  \
        [v] "=&w"(v), [xv] "=&w"(xv), [wv] "=&w"(wv), [x] "=&r"(x), [w0] "=&r"(w0), [w1] "=&r"(w1), [w2] "=&r"(w2),    \
            [w3] "=&r"(w3)
    #define POCKMCU_MVE_CONV_INPUTS [k] "r"(k), [row] "r"(row), [oo] "w"(oo), [lo] "w"(lo), [hi] "w"(hi)

/* The dot products of block k over its kk bytes of row added to its pre (a receptive field chunk that is not the
 * last one: the sums so far, read by the next chunk as its starting values; volatile: its only result is in
 * memory). */
POCKMCU_MVE_INLINE void pockmcu_mve_conv_4oc_partial(pockmcu_mve_conv_blk *k, const int8_t *row)
{
    int32x4_t v;
    int8x16_t xv, wv;
    const int8_t *x, *w0, *w1, *w2, *w3;
    __asm__ volatile(POCKMCU_MVE_CONV_DOT_ASM "strd r0, r2, [%[k], #16]\n\t"
                                              "strd r4, r6, [%[k], #24]"
                     : POCKMCU_MVE_CONV_OPERANDS
                     : [k] "r"(k), [row] "r"(row)
                     : "r0", "r2", "r4", "r6", "lr", "memory");
    (void)v;
}

POCKMCU_MVE_INLINE int32x4_t pockmcu_mve_conv_4oc(const pockmcu_mve_conv_blk *k,
                                                  const int8_t *row,
                                                  const int32_t left,
                                                  int32x4_t oo,
                                                  int32x4_t lo,
                                                  int32x4_t hi)
{
    int32x4_t v;
    int8x16_t xv, wv;
    const int8_t *x, *w0, *w1, *w2, *w3;
    if (left)
    {
        __asm__(POCKMCU_MVE_CONV_DOT_ASM POCKMCU_MVE_CONV_LEFT_ASM POCKMCU_MVE_CONV_RQ_ASM:POCKMCU_MVE_CONV_OPERANDS
:POCKMCU_MVE_CONV_INPUTS
                : "r0", "r2", "r4", "r6", "lr", "memory");
    }
    else
    {
        __asm__(POCKMCU_MVE_CONV_DOT_ASM POCKMCU_MVE_CONV_RQ_ASM:POCKMCU_MVE_CONV_OPERANDS:POCKMCU_MVE_CONV_INPUTS
                : "r0", "r2", "r4", "r6", "lr", "memory");
    }
    return v;
}

    #define POCKMCU_MVE_PX_OCB 64 /* output channels per pockmcu_mve_conv_blk array (1344 bytes of stack) */

/* The no output channels of blocks blk[0 ..] of one pixel whose receptive field is row, stored contiguously at
 * out. Kept out of line: inlined into the pixel loop, GCC 12 finds no registers for the assembly. */
static __attribute__((noinline)) void pockmcu_mve_conv_pixel(const pockmcu_mve_conv_blk *blk,
                                                             int32_t no,
                                                             const int32_t left,
                                                             const int8_t *row,
                                                             int8_t *out,
                                                             const cmsis_nn_conv_params *prm)
{
    const int32x4_t oo = vdupq_n_s32(prm->output_offset);
    const int32x4_t lo = vdupq_n_s32(prm->activation.min);
    const int32x4_t hi = vdupq_n_s32(prm->activation.max);
    for (; no >= 4; no -= 4, blk++, out += 4)
    {
        vstrbq_s32(out, pockmcu_mve_conv_4oc(blk, row, left, oo, lo, hi));
    }
    if (no > 0)
    {
        vstrbq_p_s32(out, pockmcu_mve_conv_4oc(blk, row, left, oo, lo, hi), vctp32q((uint32_t)no));
    }
}

/* The receptive field of one pixel in chunks of POCKMCU_MVE_COL bytes gathered into col: every chunk but the last
 * leaves its sums in the blocks' pre (and moves their weight rows on), the last one is requantized and stored;
 * then the blocks are restored (pre0: the blocks' starting values). */
static __attribute__((noinline)) void pockmcu_mve_conv_chunks(const pockmcu_mve_conv_geom *g,
                                                              pockmcu_mve_origin org,
                                                              pockmcu_mve_conv_blk *blk,
                                                              const int32_t *pre0,
                                                              int32_t nb,
                                                              int32_t kk,
                                                              int32_t left,
                                                              int8_t *col,
                                                              int8_t *out,
                                                              const cmsis_nn_conv_params *prm)
{
    const int32_t n_blk = (nb + 3) >> 2;
    int32_t k0, j, i;
    for (k0 = 0; k0 < kk; k0 += POCKMCU_MVE_COL)
    {
        const int32_t n = pockmcu_min_i32(POCKMCU_MVE_COL, kk - k0);
        pockmcu_mve_gather(g, org, k0, k0 + n, col);
        for (j = 0; j < n_blk; j++)
        {
            blk[j].kk = n;
        }
        if (k0 + n == kk)
        {
            pockmcu_mve_conv_pixel(blk, nb, left, col, out, prm);
            break;
        }
        for (j = 0; j < n_blk; j++)
        {
            pockmcu_mve_conv_4oc_partial(&blk[j], col);
            for (i = 0; i < 4; i++)
            {
                blk[j].w[i] += n;
            }
        }
    }
    for (j = 0; j < n_blk; j++)
    {
        for (i = 0; i < 4; i++)
        {
            blk[j].w[i] -= kk - (kk - 1) % POCKMCU_MVE_COL - 1;
            blk[j].pre[i] = pre0[4 * j + i];
        }
        blk[j].kk = kk;
    }
}

/* One output pixel at a time: its receptive field read in place (a contiguous run of the input: 1xK filters with
 * dilation 1 or K = 1, inside the image) or gathered into col (in chunks beyond POCKMCU_MVE_COL bytes), then
 * pockmcu_mve_conv_pixel for each block of POCKMCU_MVE_PX_OCB output channels. */
static void pockmcu_convolve_mve_px(const cmsis_nn_conv_params *conv_params,
                                    const cmsis_nn_per_channel_quant_params *quant_params,
                                    const cmsis_nn_dims *input_dims,
                                    const int8_t *input_data,
                                    const cmsis_nn_dims *filter_dims,
                                    const int8_t *filter_data,
                                    const int32_t *bias_data,
                                    const cmsis_nn_dims *output_dims,
                                    int8_t *output_data)
{
    const int32_t out_c = output_dims->c;
    const int32_t out_w = output_dims->w;
    const int32_t n_pix = output_dims->h * out_w;
    const int32_t kk = filter_dims->h * filter_dims->w * filter_dims->c;
    const int32_t direct = filter_dims->h == 1 && (conv_params->dilation.w == 1 || filter_dims->w == 1);
    pockmcu_mve_conv_geom g;
    pockmcu_mve_conv_blk blk[POCKMCU_MVE_PX_OCB / 4];
    int32_t pre0[POCKMCU_MVE_PX_OCB];
    int8_t col[POCKMCU_MVE_COL];
    int32_t b, p, oc0, j;

    g.in_h = input_dims->h;
    g.in_w = input_dims->w;
    g.in_c = input_dims->c;
    g.k_h = filter_dims->h;
    g.k_w = filter_dims->w;
    g.k_c = filter_dims->c;
    g.dil_h = conv_params->dilation.h;
    g.dil_w = conv_params->dilation.w;
    g.zp = vdupq_n_s8((int8_t)-conv_params->input_offset);

    for (oc0 = 0; oc0 < out_c; oc0 += POCKMCU_MVE_PX_OCB)
    {
        const int32_t nb = pockmcu_min_i32(POCKMCU_MVE_PX_OCB, out_c - oc0);
        int32_t left = 0;
        for (j = 0; j < nb; j += 4)
        {
            left |= pockmcu_mve_conv_blk_init(&blk[j >> 2],
                                              pre0 + j,
                                              filter_data,
                                              kk,
                                              oc0 + j,
                                              pockmcu_min_i32(4, nb - j),
                                              conv_params->input_offset,
                                              quant_params,
                                              bias_data);
        }
        for (b = 0; b < input_dims->n; b++)
        {
            int8_t *out = output_data + b * n_pix * out_c + oc0;
            g.in = input_data + b * g.in_h * g.in_w * g.in_c;
            for (p = 0; p < n_pix; p++, out += out_c)
            {
                const int32_t oy = p / out_w;
                pockmcu_mve_origin org;
                org.y0 = oy * conv_params->stride.h - conv_params->padding.h;
                org.x0 = (p - oy * out_w) * conv_params->stride.w - conv_params->padding.w;
                if (direct && org.y0 >= 0 && org.y0 < g.in_h && org.x0 >= 0 && org.x0 + g.k_w <= g.in_w)
                {
                    pockmcu_mve_conv_pixel(blk, nb, left, g.in + (org.y0 * g.in_w + org.x0) * g.in_c, out, conv_params);
                }
                else if (kk > POCKMCU_MVE_COL)
                {
                    pockmcu_mve_conv_chunks(&g, org, blk, pre0, nb, kk, left, col, out, conv_params);
                }
                else
                {
                    if (g.dil_w == 1)
                    {
                        pockmcu_mve_gather_rows(&g, org, col);
                    }
                    else
                    {
                        pockmcu_mve_gather(&g, org, 0, kk, col);
                    }
                    pockmcu_mve_conv_pixel(blk, nb, left, col, out, conv_params);
                }
            }
        }
    }
}

#endif /* POCKMCU_HAS_MVE */

arm_cmsis_nn_status pockmcu_convolve_mve_s8(const cmsis_nn_context *ctx,
                                            const cmsis_nn_conv_params *conv_params,
                                            const cmsis_nn_per_channel_quant_params *quant_params,
                                            const cmsis_nn_dims *input_dims,
                                            const int8_t *input_data,
                                            const cmsis_nn_dims *filter_dims,
                                            const int8_t *filter_data,
                                            const cmsis_nn_dims *bias_dims,
                                            const int32_t *bias_data,
                                            const cmsis_nn_dims *output_dims,
                                            int8_t *output_data)
{
#if POCKMCU_HAS_MVE
    /* the checks of the portable loops; grouped convolutions run the portable loops too */
    if (filter_dims->c == input_dims->c && input_dims->c > 0 && conv_params->stride.h >= 1 &&
        conv_params->stride.w >= 1 && conv_params->dilation.h >= 1 && conv_params->dilation.w >= 1)
    {
        (void)ctx;
        (void)bias_dims;
        pockmcu_convolve_mve_px(conv_params,
                                quant_params,
                                input_dims,
                                input_data,
                                filter_dims,
                                filter_data,
                                bias_data,
                                output_dims,
                                output_data);
        return ARM_CMSIS_NN_SUCCESS;
    }
#endif
    return pockmcu_conv_s8_loops(ctx,
                                 conv_params,
                                 quant_params,
                                 input_dims,
                                 input_data,
                                 filter_dims,
                                 filter_data,
                                 NULL,
                                 0,
                                 bias_dims,
                                 bias_data,
                                 output_dims,
                                 output_data,
                                 0);
}
