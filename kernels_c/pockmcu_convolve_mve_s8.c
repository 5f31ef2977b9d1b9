/*
 * pockmcu_convolve_mve_s8 - int8 2D convolution for Helium (Armv8.1-M MVE, Cortex-M55), the CMSIS-NN
 * API and bytes of arm_convolve_wrapper_s8 (TFLM ConvPerChannel, double rounding requantization).
 *
 * On a core with integer MVE: four output pixels at a time, their receptive fields gathered into a
 * fixed 4 x POCKMCU_MVE_KCHUNK byte stack block (im2col; out-of-image taps hold the input zero point,
 * so they contribute (zp + input_offset) * w = 0), and for every output channel four VMLADAVA dot
 * products of 16 bytes per weight load. The input offset is not added to each input: the sum of the
 * weights (VADDVA in the same loop) times input_offset is added once, which is the same integer in
 * wrapping int32 arithmetic. Receptive fields longer than POCKMCU_MVE_KCHUNK are processed in chunks
 * with 4 x POCKMCU_MVE_ACC int32 accumulators on the stack. bias + input_offset * sum(w) is formed once
 * per block of POCKMCU_MVE_OCB output channels. Requantization is vectorised over the four
 * pixels (pockmcu_nn_support_mve.h: VSHL, VQRDMULH, VRSHL with the round-half-away fix-up, the same
 * bits as pockmcu_requantize). Grouped convolutions (filter_dims->c < input_dims->c) run the portable
 * loops. No scratch buffer (pockmcu_convolve_mve_s8_get_buffer_size returns 0); about 1.1 KB of stack.
 *
 * Elsewhere (cores without MVE, the host simulation) this function is the portable kernel: it runs
 * pockmcu_conv_s8_loops exactly as arm_convolve_wrapper_s8 does. The MVE path produces the same bytes
 * as those loops for every argument (tests/test_mve_kernels.py compares both in one QEMU M55 program
 * on hundreds of random geometries), so a model's host simulation equals its run on Cortex-M55.
 */
#include "pockmcu_layer_loops.h"
#include "pockmcu_nn_support_mve.h"

#if POCKMCU_HAS_MVE

    #define POCKMCU_MVE_KCHUNK 128 /* bytes of one pixel's receptive field per gather; a multiple of 16 */
    #define POCKMCU_MVE_OCB 64     /* output channels per block (their bias + offset terms on the stack) */
    #define POCKMCU_MVE_ACC 16     /* accumulators per sub-block when K > POCKMCU_MVE_KCHUNK */

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
    int32_t in_h, in_w, in_c, k_w, k_c, dil_h, dil_w;
    int8x16_t zp;
    int32_t output_offset;
    int32x4_t act_min, act_max;
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

/* Dot products of n bytes of four rows with w. No byte beyond n is read. */
POCKMCU_MVE_INLINE int32x4_t pockmcu_mve_dot4(const int8_t *const rows[4], const int8_t *w, int32_t n)
{
    const int8_t *r0 = rows[0];
    const int8_t *r1 = rows[1];
    const int8_t *r2 = rows[2];
    const int8_t *r3 = rows[3];
    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
    int32x4_t v;
    int32_t i;
    for (i = n >> 4; i > 0; i--)
    {
        const int8x16_t wv = vldrbq_s8(w);
        a0 = vmladavaq_s8(a0, vldrbq_s8(r0), wv);
        a1 = vmladavaq_s8(a1, vldrbq_s8(r1), wv);
        a2 = vmladavaq_s8(a2, vldrbq_s8(r2), wv);
        a3 = vmladavaq_s8(a3, vldrbq_s8(r3), wv);
        w += 16;
        r0 += 16;
        r1 += 16;
        r2 += 16;
        r3 += 16;
    }
    if (n & 15)
    {
        const mve_pred16_t p = vctp8q((uint32_t)(n & 15));
        const int8x16_t wv = vldrbq_z_s8(w, p);
        a0 = vmladavaq_s8(a0, vldrbq_z_s8(r0, p), wv);
        a1 = vmladavaq_s8(a1, vldrbq_z_s8(r1, p), wv);
        a2 = vmladavaq_s8(a2, vldrbq_z_s8(r2, p), wv);
        a3 = vmladavaq_s8(a3, vldrbq_z_s8(r3, p), wv);
    }
    v = vdupq_n_s32(a0);
    v = vsetq_lane_s32(a1, v, 1);
    v = vsetq_lane_s32(a2, v, 2);
    v = vsetq_lane_s32(a3, v, 3);
    return v;
}

/* pre = bias + input_offset * sum(w) of output channel oc (wrapping, like the portable int32 sums): the
 * input offset term of every dot product of that channel. */
POCKMCU_MVE_INLINE int32_t pockmcu_mve_conv_pre(const int8_t *w, int32_t n, int32_t input_offset, const int32_t *bias)
{
    int32_t s = 0;
    for (; n >= 16; n -= 16, w += 16)
    {
        s = vaddvaq_s8(s, vldrbq_s8(w));
    }
    if (n > 0)
    {
        s = vaddvaq_s8(s, vldrbq_z_s8(w, vctp8q((uint32_t)n)));
    }
    return (int32_t)((uint32_t)input_offset * (uint32_t)s + (bias != NULL ? (uint32_t)*bias : 0u));
}

/* Requantize the four pixels of output channel oc and scatter them (offsets: 0, C_OUT, 2 C_OUT, 3 C_OUT). */
POCKMCU_MVE_INLINE void pockmcu_mve_conv_store(int32x4_t v,
                                               int32_t pre,
                                               int32_t mult,
                                               int32_t shift,
                                               const pockmcu_mve_conv_geom *g,
                                               int8_t *out,
                                               uint32x4_t out_offsets,
                                               mve_pred16_t store)
{
    v = pockmcu_mve_requantize_n(vaddq_n_s32(v, pre), mult, shift);
    v = vminq_s32(vmaxq_s32(vaddq_n_s32(v, g->output_offset), g->act_min), g->act_max);
    vstrbq_scatter_offset_p_s32(out, out_offsets, v, store);
}

static arm_cmsis_nn_status pockmcu_convolve_mve(const cmsis_nn_conv_params *conv_params,
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
    const uint32x4_t out_offsets = vmulq_n_u32(vidupq_n_u32(0, 1), (uint32_t)out_c);
    pockmcu_mve_conv_geom g;
    int8_t col[4 * POCKMCU_MVE_KCHUNK] __attribute__((aligned(16)));
    int32x4_t acc[POCKMCU_MVE_ACC];
    int32_t pre[POCKMCU_MVE_OCB];
    int32_t b, p0, oc0;

    g.in_h = input_dims->h;
    g.in_w = input_dims->w;
    g.in_c = input_dims->c;
    g.k_w = filter_dims->w;
    g.k_c = filter_dims->c;
    g.dil_h = conv_params->dilation.h;
    g.dil_w = conv_params->dilation.w;
    g.zp = vdupq_n_s8((int8_t)-conv_params->input_offset);
    g.output_offset = conv_params->output_offset;
    g.act_min = vdupq_n_s32(conv_params->activation.min);
    g.act_max = vdupq_n_s32(conv_params->activation.max);

    for (oc0 = 0; oc0 < out_c; oc0 += POCKMCU_MVE_OCB)
    {
        const int32_t nb = pockmcu_min_i32(POCKMCU_MVE_OCB, out_c - oc0);
        int32_t j;
        for (j = 0; j < nb; j++)
        {
            pre[j] = pockmcu_mve_conv_pre(filter_data + (oc0 + j) * kk,
                                          kk,
                                          conv_params->input_offset,
                                          bias_data != NULL ? bias_data + oc0 + j : NULL);
        }
        for (b = 0; b < input_dims->n; b++)
        {
            int8_t *out_batch = output_data + b * n_pix * out_c + oc0;
            g.in = input_data + b * g.in_h * g.in_w * g.in_c;
            for (p0 = 0; p0 < n_pix; p0 += 4)
            {
                const int32_t np = pockmcu_min_i32(4, n_pix - p0);
                const mve_pred16_t store = vctp32q((uint32_t)np);
                int8_t *out = out_batch + p0 * out_c;
                pockmcu_mve_origin org[4];
                int32_t r, k0;
                for (r = 0; r < 4; r++)
                {
                    const int32_t p = p0 + pockmcu_min_i32(r, np - 1); /* missing pixels repeat the last one */
                    const int32_t oy = p / out_w;
                    org[r].y0 = oy * conv_params->stride.h - conv_params->padding.h;
                    org[r].x0 = (p - oy * out_w) * conv_params->stride.w - conv_params->padding.w;
                }
                if (kk <= POCKMCU_MVE_KCHUNK)
                {
                    /* one chunk: the rows are gathered once, or read in place when the receptive field is one
                     * contiguous run of the input (1xK filters, dilation 1 or K = 1, inside the image) */
                    const int8_t *rows[4];
                    const int8_t *w = filter_data + oc0 * kk;
                    for (r = 0; r < 4; r++)
                    {
                        if (direct && org[r].y0 >= 0 && org[r].y0 < g.in_h && org[r].x0 >= 0 &&
                            org[r].x0 + g.k_w <= g.in_w)
                        {
                            rows[r] = g.in + (org[r].y0 * g.in_w + org[r].x0) * g.in_c;
                        }
                        else
                        {
                            pockmcu_mve_gather(&g, org[r], 0, kk, col + r * POCKMCU_MVE_KCHUNK);
                            rows[r] = col + r * POCKMCU_MVE_KCHUNK;
                        }
                    }
                    for (j = 0; j < nb; j++, w += kk)
                    {
                        pockmcu_mve_conv_store(pockmcu_mve_dot4(rows, w, kk),
                                               pre[j],
                                               quant_params->multiplier[oc0 + j],
                                               quant_params->shift[oc0 + j],
                                               &g,
                                               out + j,
                                               out_offsets,
                                               store);
                    }
                    continue;
                }
                {
                    /* receptive fields longer than the stack block: chunks, accumulators per output channel */
                    const int8_t *rows[4] = {
                        col, col + POCKMCU_MVE_KCHUNK, col + 2 * POCKMCU_MVE_KCHUNK, col + 3 * POCKMCU_MVE_KCHUNK};
                    int32_t j0;
                    for (j0 = 0; j0 < nb; j0 += POCKMCU_MVE_ACC)
                    {
                        const int32_t j1 = pockmcu_min_i32(nb, j0 + POCKMCU_MVE_ACC);
                        for (k0 = 0; k0 < kk; k0 += POCKMCU_MVE_KCHUNK)
                        {
                            const int32_t n = pockmcu_min_i32(POCKMCU_MVE_KCHUNK, kk - k0);
                            for (r = 0; r < 4; r++)
                            {
                                pockmcu_mve_gather(&g, org[r], k0, k0 + n, col + r * POCKMCU_MVE_KCHUNK);
                            }
                            for (j = j0; j < j1; j++)
                            {
                                const int32x4_t v = pockmcu_mve_dot4(rows, filter_data + (oc0 + j) * kk + k0, n);
                                acc[j - j0] = k0 == 0 ? v : vaddq_s32(v, acc[j - j0]);
                            }
                        }
                        for (j = j0; j < j1; j++)
                        {
                            pockmcu_mve_conv_store(acc[j - j0],
                                                   pre[j],
                                                   quant_params->multiplier[oc0 + j],
                                                   quant_params->shift[oc0 + j],
                                                   &g,
                                                   out + j,
                                                   out_offsets,
                                                   store);
                        }
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
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
        return pockmcu_convolve_mve(conv_params,
                                    quant_params,
                                    input_dims,
                                    input_data,
                                    filter_dims,
                                    filter_data,
                                    bias_data,
                                    output_dims,
                                    output_data);
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
