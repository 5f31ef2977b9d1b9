/*
 * pockmcu_dw_dsp_loops.h - the loops of the DSP int8 depthwise convolution kernels
 * (pockmcu_depthwise_conv_dsp_s8, pockmcu_depthwise_conv_3x3_dsp_s8), written with the wrappers of
 * pockmcu_simd.h only: on a core with the DSP extension they are the instructions, elsewhere (the host
 * simulation, Cortex-M3) bit-exact C, so the host runs these very loops.
 *
 * How (channel multiplier 1): NHWC input and 1HWC filter keep channels contiguous, so one 32-bit load
 * reads 4 channels of a tap. SXTAB16 / SXTAB16 ROR #8 sign-extend the input bytes into two 16-bit
 * lanes and add the input offset in the same instruction (x + input_offset fits 16 bits), SXTB16 /
 * SXTB16 ROR #8 extend the weights, SMLABB / SMLATT accumulate each channel's product. Two output
 * pixels of a row with the same in-image window share every loaded and extended weight. Taps outside
 * the image are skipped, as TFLM does. Channels that do not fill a group of 4 run one at a time.
 *
 * Requantization: TFLM's MultiplyByQuantizedMultiplier with double rounding. SaturatingRoundingDoubling-
 * HighMul(a, m) = (a * m + 2^30) >> 31 for every pair but INT32_MIN * INT32_MIN, which is SMMULR(2a, m)
 * when 2a fits 32 bits; RoundingDivideByPOT(x, e) = (x + 2^(e-1) - [x < 0]) >> e for e >= 1 when that
 * sum does not overflow. The kernel checks once per call that every channel's accumulator bound
 * (|bias| + taps * 255 * 128) shifted left by its left shift + 1 stays below 2^31 (then |x| < 2^30 too);
 * otherwise it runs the portable loops (pockmcu_layer_loops.h), so every call equals
 * arm_depthwise_conv_wrapper_s8 byte for byte, as it does for a channel multiplier above 1 (the section
 * "channel multiplier above 1" below has the loops of pockmcu_depthwise_conv_mult_dsp_s8 for those).
 */
#ifndef POCKMCU_DW_DSP_LOOPS_H
#define POCKMCU_DW_DSP_LOOPS_H

#include "pockmcu_layer_loops.h"
#include "pockmcu_simd.h"

/* Whether the SMMULR requantization is exact for every accumulator this layer can produce. */
POCKMCU_LOOPS_INLINE int32_t pockmcu_dw_fast_requant_ok(const int32_t *bias,
                                                        const int32_t *shift,
                                                        int32_t channels,
                                                        int32_t taps)
{
    int32_t c;
    for (c = 0; c < channels; c++)
    {
        const int64_t b = bias != NULL ? (int64_t)bias[c] : 0;
        const int64_t bound = (b < 0 ? -b : b) + (int64_t)taps * (255 * 128);
        const int32_t ls = shift[c] > 0 ? shift[c] : 0;
        if (ls > 29 || bound >= ((int64_t)1 << (30 - ls)))
        {
            return 0;
        }
    }
    return 1;
}

/* The parameters of one channel's fast requantization. */
typedef struct
{
    int32_t mult;  /* the multiplier */
    int32_t lsh;   /* left shift + 1 (the doubling of SRDHM) */
    int32_t rsh;   /* right shift e */
    int32_t round; /* 2^(e-1), 0 for e = 0 */
    int32_t neg;   /* -1 if e > 0 (ties of negatives round down), else 0 */
} pockmcu_dw_rq;

POCKMCU_LOOPS_INLINE pockmcu_dw_rq pockmcu_dw_rq_of(int32_t mult, int32_t shift)
{
    pockmcu_dw_rq q;
    q.mult = mult;
    q.lsh = (shift > 0 ? shift : 0) + 1;
    q.rsh = shift > 0 ? 0 : -shift;
    q.round = (int32_t)(((uint32_t)1 << q.rsh) >> 1);
    q.neg = q.rsh > 0 ? -1 : 0;
    return q;
}

/* TFLM's requantization of acc, the output offset and the activation clamp (see the header comment). */
POCKMCU_LOOPS_INLINE int8_t pockmcu_dw_out(int32_t acc, pockmcu_dw_rq q, int32_t out_off, int32_t lo, int32_t hi)
{
    int32_t x = pockmcu_smmulr((int32_t)((uint32_t)acc << q.lsh), q.mult);
    x = (x + q.round + ((x >> 31) & q.neg)) >> q.rsh;
    return (int8_t)pockmcu_clamp_i32(x + out_off, lo, hi);
}

/* One tap of 4 channels: the input word extended with the offset added, the weight word extended,
 * one 16 x 16 multiply-accumulate per channel into a0..a3. */
#define POCKMCU_DW_TAP(ip, wp)                                                                                         \
    do                                                                                                                 \
    {                                                                                                                  \
        const uint32_t w_ = pockmcu_read_s8x4(wp);                                                                     \
        const uint32_t x_ = pockmcu_read_s8x4(ip);                                                                     \
        const uint32_t w02_ = pockmcu_sxtb16(w_);                                                                      \
        const uint32_t x02_ = pockmcu_sxtab16(off2, x_);                                                               \
        const uint32_t w13_ = pockmcu_sxtb16_ror8(w_);                                                                 \
        const uint32_t x13_ = pockmcu_sxtab16_ror8(off2, x_);                                                          \
        a0 = pockmcu_smlabb(x02_, w02_, a0);                                                                           \
        a2 = pockmcu_smlatt(x02_, w02_, a2);                                                                           \
        a1 = pockmcu_smlabb(x13_, w13_, a1);                                                                           \
        a3 = pockmcu_smlatt(x13_, w13_, a3);                                                                           \
    } while (0)

/* The loops of channel multiplier 1 (after the checks of pockmcu_depthwise_conv_dsp_loops): ch channels of input
 * and filter (filter row stride ch), output channel c at out[c * ocs] of pixels ch * ocs bytes apart (ocs 1, or
 * ch_mult for one output of each input channel), bias / mult / shift indexed by c. */
POCKMCU_LOOPS_INLINE void pockmcu_dw_c1_loops(const cmsis_nn_dw_conv_params *dw_conv_params,
                                              const cmsis_nn_dims *input_dims,
                                              const int8_t *input_data,
                                              const int32_t k_h,
                                              const int32_t k_w,
                                              const int8_t *filter_data,
                                              const int32_t *bias_data,
                                              const int32_t *mult,
                                              const int32_t *shift,
                                              const int32_t out_h,
                                              const int32_t out_w,
                                              int8_t *output_data,
                                              const int32_t ocs)
{
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t ch = input_dims->c;
    const int32_t stride_h = dw_conv_params->stride.h;
    const int32_t stride_w = dw_conv_params->stride.w;
    const int32_t dil_h = dw_conv_params->dilation.h;
    const int32_t dil_w = dw_conv_params->dilation.w;
    const int32_t pad_h = dw_conv_params->padding.h;
    const int32_t pad_w = dw_conv_params->padding.w;
    const int32_t in_off = dw_conv_params->input_offset;
    const int32_t out_off = dw_conv_params->output_offset;
    const int32_t act_min = dw_conv_params->activation.min;
    const int32_t act_max = dw_conv_params->activation.max;
    const uint32_t off2 = ((uint32_t)in_off & 0xFFFFu) | ((uint32_t)in_off << 16);
    const int32_t ch4 = ch & ~3;
    int32_t b, oy, ox, c;

    for (b = 0; b < batches; b++)
    {
        const int8_t *in_batch = input_data + (int32_t)b * in_h * in_w * ch;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * stride_h - pad_h;
            const int32_t ky_start = pockmcu_window_start(in_y0, dil_h);
            const int32_t ky_end = pockmcu_window_end(in_y0, dil_h, in_h, k_h);
            int8_t *out_row = output_data + ((int32_t)b * out_h + oy) * out_w * ch * ocs;
            for (ox = 0; ox < out_w; ox++)
            {
                const int32_t in_x0 = ox * stride_w - pad_w;
                const int32_t kx_start = pockmcu_window_start(in_x0, dil_w);
                const int32_t kx_end = pockmcu_window_end(in_x0, dil_w, in_w, k_w);
                const int32_t full = ky_start == 0 && ky_end == k_h && kx_start == 0 && kx_end == k_w;
                const int8_t *in_px = in_batch + ((in_y0 + ky_start * dil_h) * in_w + in_x0 + kx_start * dil_w) * ch;
                const int8_t *w_px = filter_data + (ky_start * k_w + kx_start) * ch;
                const int32_t row_step = dil_h * in_w * ch;
                const int32_t col_step = dil_w * ch;
                int8_t *out = out_row + ox * ch * ocs;

                for (c = 0; c < ch4; c += 4)
                {
                    int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                    int32_t ky, kx;
                    if (bias_data != NULL)
                    {
                        a0 = bias_data[c];
                        a1 = bias_data[c + 1];
                        a2 = bias_data[c + 2];
                        a3 = bias_data[c + 3];
                    }
                    if (full) /* the whole window in the image: constant trip counts when specialized */
                    {
                        const int8_t *row = in_px + c;
                        const int8_t *wp = w_px + c;
                        for (ky = 0; ky < k_h; ky++)
                        {
                            const int8_t *ip = row;
                            for (kx = 0; kx < k_w; kx++)
                            {
                                POCKMCU_DW_TAP(ip, wp);
                                ip += col_step;
                                wp += ch;
                            }
                            row += row_step;
                        }
                    }
                    else
                    {
                        const int8_t *row = in_px + c;
                        const int8_t *wrow = w_px + c;
                        for (ky = ky_start; ky < ky_end; ky++)
                        {
                            const int8_t *ip = row;
                            const int8_t *wp = wrow;
                            for (kx = kx_start; kx < kx_end; kx++)
                            {
                                POCKMCU_DW_TAP(ip, wp);
                                ip += col_step;
                                wp += ch;
                            }
                            row += row_step;
                            wrow += k_w * ch;
                        }
                    }
                    out[c * ocs] = pockmcu_dw_out(a0, pockmcu_dw_rq_of(mult[c], shift[c]), out_off, act_min, act_max);
                    out[(c + 1) * ocs] =
                        pockmcu_dw_out(a1, pockmcu_dw_rq_of(mult[c + 1], shift[c + 1]), out_off, act_min, act_max);
                    out[(c + 2) * ocs] =
                        pockmcu_dw_out(a2, pockmcu_dw_rq_of(mult[c + 2], shift[c + 2]), out_off, act_min, act_max);
                    out[(c + 3) * ocs] =
                        pockmcu_dw_out(a3, pockmcu_dw_rq_of(mult[c + 3], shift[c + 3]), out_off, act_min, act_max);
                }
                for (; c < ch; c++) /* the last 1 to 3 channels, one at a time */
                {
                    int32_t acc = bias_data != NULL ? bias_data[c] : 0;
                    const int8_t *row = in_px + c;
                    const int8_t *wrow = w_px + c;
                    int32_t ky, kx;
                    for (ky = ky_start; ky < ky_end; ky++)
                    {
                        for (kx = 0; kx < kx_end - kx_start; kx++)
                        {
                            acc += (int32_t)wrow[kx * ch] * ((int32_t)row[kx * col_step] + in_off);
                        }
                        row += row_step;
                        wrow += k_w * ch;
                    }
                    out[c * ocs] = pockmcu_dw_out(acc, pockmcu_dw_rq_of(mult[c], shift[c]), out_off, act_min, act_max);
                }
            }
        }
    }
}

/* -- channel multiplier above 1 (dwmult, issue 13) --------------------------------------------------------------
 *
 * Each input channel is a small convolution with one input channel and ch_mult outputs. Per input channel c the
 * kernel extends that channel's weights once into int16 rows (k4 = kh * kw rounded up to 4 entries per output,
 * zero beyond the taps), then for two output pixels at a time gathers the windows' taps of channel c into int16
 * columns (x + input_offset; 0 for a tap outside the image, which adds nothing, as TFLM skips it) and accumulates
 * 2 pixels x 2 outputs with SMLAD. Layout: the two columns interleaved word by word (entry i of pixel j at
 * pockmcu_dwm_ix(i, j)), as are the weight rows of outputs m and m + 1 (entry i of output m + j at the same
 * index), so one LDRD loads a word of both pixels and one a word of both outputs: 4 loads and 8 SMLAD per 16
 * MACs. An odd last output has a plain row. Tap order: per filter row, the taps of each group of 4 as 0, 2, 1, 3
 * (what SXTAB16 / SXTAB16 ROR #8 of one loaded word give, so a contiguous window row of a 1-channel input is
 * extended 4 taps per load), the remaining taps in order; integer sums do not depend on the order.
 * Requantization: the exact fast path above when pockmcu_dw_fast_requant_ok proves it, else TFLM's
 * pockmcu_requantize, per output.
 */

/* The scratch bytes of the channel-multiplier loops: weight rows, two columns, requantization parameters,
 * alignment. */
POCKMCU_LOOPS_INLINE int32_t pockmcu_dwm_buffer_size(int32_t ch_mult, int32_t in_c, int32_t k_h, int32_t k_w)
{
    const int32_t k4 = (k_h * ((k_w + 1) & ~1) + 3) & ~3;
    const int32_t cols = 2 * k4 * (ch_mult + 2) + (int32_t)sizeof(pockmcu_dw_rq) * ch_mult + 4;
    /* 4 or more input channels: one multiplier's filter and requantization parameters (pockmcu_dw_c1_loops) */
    const int32_t split = in_c >= 4 ? ((k_h * k_w * in_c + 3) & ~3) + 12 * in_c + 4 : 0;
    return cols > split ? cols : split;
}

/* The position of tap kx of a filter row in its row of the column (groups of 4 as 0, 2, 1, 3). */
POCKMCU_LOOPS_INLINE int32_t pockmcu_dwm_pos(int32_t kx, int32_t k_w4)
{
    return kx < k_w4 ? (kx & ~3) | ((kx & 1) << 1) | ((kx >> 1) & 1) : kx;
}

/* The index of entry i of pixel (or output) j in two rows interleaved word by word. */
POCKMCU_LOOPS_INLINE int32_t pockmcu_dwm_ix(int32_t i, int32_t j) { return ((i >> 1) << 2) + (j << 1) + (i & 1); }

/* Stores int16 entry k of the word array a (through memcpy: the array is read as words). */
POCKMCU_LOOPS_INLINE void pockmcu_dwm_put(uint32_t *a, int32_t k, int32_t v)
{
    const int16_t h = (int16_t)v;
    memcpy((int8_t *)(void *)a + 2 * k, &h, 2);
}

/* The geometry the column gathers read. */
typedef struct
{
    const int8_t *in; /* the batch's input at channel c */
    int32_t in_h, in_w, in_c, k_h, k_w, dil_h, dil_w;
    int32_t ext_h, ext_w; /* (k - 1) * dilation: the last tap's distance from the first */
    uint32_t off2;        /* the input offset in both 16-bit lanes */
} pockmcu_dwm_geo;

/* One filter row of column j: the words of its k_we entries at dst[0], dst[2], ... (dst: the row's first word of
 * pixel j); ip: the row's first tap in the input (may be outside the image when not every tap is inside); taps
 * kx_start <= kx < kx_end are inside, the others 0. */
POCKMCU_LOOPS_INLINE void pockmcu_dwm_row(uint32_t *dst,
                                          const int8_t *ip,
                                          const pockmcu_dwm_geo *g,
                                          int32_t kx_start,
                                          int32_t kx_end,
                                          uint32_t off2)
{
    const int32_t k_w = g->k_w;
    const int32_t k_w4 = k_w & ~3;
    const int32_t step = g->dil_w * g->in_c;
    int32_t kx;
    if (kx_start == 0 && kx_end == k_w)
    {
        if (step == 1)
        {
            for (kx = 0; kx < k_w4; kx += 4) /* 4 contiguous taps per load, extended with the offset */
            {
                const uint32_t x = pockmcu_read_s8x4(ip + kx);
                dst[0] = pockmcu_sxtab16(off2, x);
                dst[2] = pockmcu_sxtab16_ror8(off2, x);
                dst += 4;
            }
        }
        else
        {
            for (kx = 0; kx < k_w4; kx += 4) /* taps 0, 2 in one word, 1, 3 in the next */
            {
                const int32_t t0 = ip[0], t1 = ip[step], t2 = ip[2 * step], t3 = ip[3 * step];
                dst[0] = pockmcu_sadd16(pockmcu_pkhbt_lsl16((uint32_t)t0, (uint32_t)t2), off2);
                dst[2] = pockmcu_sadd16(pockmcu_pkhbt_lsl16((uint32_t)t1, (uint32_t)t3), off2);
                dst += 4;
                ip += 4 * step;
            }
            ip -= k_w4 * step;
        }
        for (kx = k_w4; kx < k_w; kx += 2) /* the last 1 to 3 taps in order (a lone last one with a 0) */
        {
            const int32_t x1 = kx + 1 < k_w ? ip[(kx + 1) * step] : 0;
            *dst = pockmcu_sadd16(pockmcu_pkhbt_lsl16((uint32_t)(int32_t)ip[kx * step], (uint32_t)x1),
                                  kx + 1 < k_w ? off2 : off2 & 0xFFFFu);
            dst += 2;
        }
    }
    else
    {
        /* tap k, or 0 outside the image (one unsigned compare for kx_start <= k < kx_end) */
#define POCKMCU_DWM_TAP(k) ((uint32_t)((k)-kx_start) < n_in ? (int32_t)ip[(k)*step] + in_off : 0)
        const int32_t in_off = (int32_t)(int16_t)(uint16_t)(off2 & 0xFFFFu);
        const uint32_t n_in = (uint32_t)(kx_end - kx_start);
        for (kx = 0; kx < k_w4; kx += 4) /* taps 0, 2 in one word, 1, 3 in the next */
        {
            const int32_t t0 = POCKMCU_DWM_TAP(kx), t1 = POCKMCU_DWM_TAP(kx + 1);
            const int32_t t2 = POCKMCU_DWM_TAP(kx + 2), t3 = POCKMCU_DWM_TAP(kx + 3);
            dst[0] = pockmcu_pkhbt_lsl16((uint32_t)t0, (uint32_t)t2);
            dst[2] = pockmcu_pkhbt_lsl16((uint32_t)t1, (uint32_t)t3);
            dst += 4;
        }
        for (; kx < k_w; kx += 2) /* the last 1 to 3 taps in order (a lone last one with a 0) */
        {
            const int32_t t0 = POCKMCU_DWM_TAP(kx), t1 = kx + 1 < k_w ? POCKMCU_DWM_TAP(kx + 1) : 0;
            *dst = pockmcu_pkhbt_lsl16((uint32_t)t0, (uint32_t)t1);
            dst += 2;
        }
#undef POCKMCU_DWM_TAP
    }
}

/* Out of line: the channel-multiplier loops get their own register allocation (inlined into the kernel with the
 * loops of multiplier 1 they spill in their inner loops). */
#if defined(__GNUC__) || defined(__clang__)
    #define POCKMCU_DWM_NOINLINE static __attribute__((noinline, unused))
#else
    #define POCKMCU_DWM_NOINLINE static inline
#endif

/* Column j (0 or 1) of channel c of the window at (y0, x0) (top left tap, may be outside the image). Column rows
 * are k_we = k_w rounded up to even entries (an odd row's last entry 0). */
POCKMCU_DWM_NOINLINE void pockmcu_dwm_gather(uint32_t *col, int32_t j, const pockmcu_dwm_geo *g, int32_t y0, int32_t x0)
{
    const int32_t k_h = g->k_h;
    const int32_t k_we = (g->k_w + 1) & ~1;
    const int32_t row_step = g->dil_h * g->in_w * g->in_c;
    const int8_t *row = g->in + (y0 * g->in_w + x0) * g->in_c;
    uint32_t *dst = col + j; /* word w of pixel j: dst[2 * w] */
    int32_t ky_start, ky_end, kx_start, kx_end, ky, w;

    if (y0 >= 0 && y0 + g->ext_h < g->in_h && x0 >= 0 && x0 + g->ext_w < g->in_w) /* every tap in the image */
    {
        const int32_t k_w4 = g->k_w & ~3;
        if (g->dil_w * g->in_c == 1 && k_w4 == g->k_w)
        {
            /* the whole window in the image, contiguous rows of whole groups of 4 taps */
            const uint32_t off2 = g->off2;
            for (ky = 0; ky < k_h; ky++)
            {
                const int8_t *ip = row;
                uint32_t *d = dst;
                w = k_w4 >> 2; /* at least 1 */
                do
                {
                    const uint32_t x = pockmcu_read_s8x4_ia(&ip);
                    d[0] = pockmcu_sxtab16(off2, x);
                    d[2] = pockmcu_sxtab16_ror8(off2, x);
                    d += 4;
                } while (--w != 0);
                dst += k_we;
                row += row_step;
            }
            return;
        }
        for (ky = 0; ky < k_h; ky++) /* the whole window in the image */
        {
            pockmcu_dwm_row(dst, row, g, 0, g->k_w, g->off2);
            dst += k_we;
            row += row_step;
        }
        return;
    }
    ky_start = pockmcu_window_start(y0, g->dil_h);
    ky_end = pockmcu_window_end(y0, g->dil_h, g->in_h, k_h);
    kx_start = pockmcu_window_start(x0, g->dil_w);
    kx_end = pockmcu_window_end(x0, g->dil_w, g->in_w, g->k_w);
    for (ky = 0; ky < k_h; ky++) /* a window across the border: taps outside are 0 */
    {
        if (ky < ky_start || ky >= ky_end || kx_start >= kx_end)
        {
            for (w = 0; w < k_we; w += 2)
            {
                dst[w] = 0;
            }
        }
        else
        {
            pockmcu_dwm_row(dst, row, g, kx_start, kx_end, g->off2);
        }
        dst += k_we;
        row += row_step;
    }
}

/* Two pixels (the interleaved columns col) x 2 outputs (the interleaved rows w) over k4 / 4 steps: acc[2 * m + j]
 * for output m, pixel j. */
/* One word of both pixels x both outputs. */
#define POCKMCU_DWM_STEP2()                                                                                            \
    do                                                                                                                 \
    {                                                                                                                  \
        uint32_t x0_, x1_, w0_, w1_;                                                                                   \
        pockmcu_read_u32x2_ia(&col, &x0_, &x1_);                                                                       \
        pockmcu_read_u32x2_ia(&w, &w0_, &w1_);                                                                         \
        a00 = pockmcu_smlad(x0_, w0_, a00);                                                                            \
        a01 = pockmcu_smlad(x1_, w0_, a01);                                                                            \
        a10 = pockmcu_smlad(x0_, w1_, a10);                                                                            \
        a11 = pockmcu_smlad(x1_, w1_, a11);                                                                            \
    } while (0)

POCKMCU_LOOPS_INLINE void pockmcu_dwm_block2(const uint32_t *col, const uint32_t *w, int32_t steps, int32_t *acc)
{
    int32_t a00 = acc[0], a01 = acc[1], a10 = acc[2], a11 = acc[3];
    if (steps & 1) /* steps of 4 taps: an odd one first, then pairs (8 taps per loop trip) */
    {
        POCKMCU_DWM_STEP2();
        POCKMCU_DWM_STEP2();
    }
    steps >>= 1;
    if (steps != 0)
    {
        do
        {
            POCKMCU_DWM_STEP2();
            POCKMCU_DWM_STEP2();
            POCKMCU_DWM_STEP2();
            POCKMCU_DWM_STEP2();
        } while (--steps != 0);
    }
    acc[0] = a00;
    acc[1] = a01;
    acc[2] = a10;
    acc[3] = a11;
}

/* Two pixels x 1 output (a plain row w). */
POCKMCU_LOOPS_INLINE void pockmcu_dwm_block1(const uint32_t *col, const uint32_t *w, int32_t steps, int32_t *acc)
{
    int32_t a00 = acc[0], a01 = acc[1];
    do
    {
        uint32_t x0a, x1a, x0b, x1b, wa, wb;
        pockmcu_read_u32x2_ia(&col, &x0a, &x1a);
        pockmcu_read_u32x2_ia(&col, &x0b, &x1b);
        pockmcu_read_u32x2_ia(&w, &wa, &wb);
        a00 = pockmcu_smlad(x0a, wa, a00);
        a01 = pockmcu_smlad(x1a, wa, a01);
        a00 = pockmcu_smlad(x0b, wb, a00);
        a01 = pockmcu_smlad(x1b, wb, a01);
    } while (--steps != 0);
    acc[0] = a00;
    acc[1] = a01;
}

/* One accumulator to its output byte: the fast requantization when fast, else TFLM's. */
POCKMCU_LOOPS_INLINE int8_t pockmcu_dwm_out(int32_t acc,
                                            int32_t fast,
                                            const pockmcu_dw_rq *q,
                                            int32_t shift,
                                            int32_t out_off,
                                            int32_t lo,
                                            int32_t hi)
{
    if (fast)
    {
        return pockmcu_dw_out(acc, *q, out_off, lo, hi);
    }
    return (int8_t)pockmcu_clamp_i32(pockmcu_requantize(acc, q->mult, shift) + out_off, lo, hi);
}

/* The channel-multiplier loops with the fast requantization (fast 1, a constant) or TFLM's (0). */
POCKMCU_LOOPS_INLINE arm_cmsis_nn_status pockmcu_dwm_loops_as(void *buf,
                                                              const cmsis_nn_dw_conv_params *dw_conv_params,
                                                              const cmsis_nn_per_channel_quant_params *quant_params,
                                                              const cmsis_nn_dims *input_dims,
                                                              const int8_t *input_data,
                                                              const cmsis_nn_dims *filter_dims,
                                                              const int8_t *filter_data,
                                                              const int32_t *bias_data,
                                                              const cmsis_nn_dims *output_dims,
                                                              int8_t *output_data,
                                                              const int32_t fast)
{
    const int32_t in_c = input_dims->c;
    const int32_t ch_mult = dw_conv_params->ch_mult;
    const int32_t out_c = output_dims->c;
    const int32_t out_w = output_dims->w;
    const int32_t pixels = output_dims->h * out_w;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t k_w4 = k_w & ~3;
    const int32_t k_we = (k_w + 1) & ~1;
    const int32_t k4 = (k_h * k_we + 3) & ~3;
    const int32_t stride_h = dw_conv_params->stride.h;
    const int32_t stride_w = dw_conv_params->stride.w;
    const int32_t pad_h = dw_conv_params->padding.h;
    const int32_t pad_w = dw_conv_params->padding.w;
    const int32_t out_off = dw_conv_params->output_offset;
    const int32_t act_min = dw_conv_params->activation.min;
    const int32_t act_max = dw_conv_params->activation.max;
    const int32_t *shift = quant_params->shift;
    uint32_t *const wrows = (uint32_t *)(((uintptr_t)buf + 3) & ~(uintptr_t)3); /* k4 / 2 words per output */
    uint32_t *const col = wrows + ch_mult * (k4 >> 1);
    pockmcu_dw_rq *const rq = (pockmcu_dw_rq *)(void *)(col + k4);
    pockmcu_dwm_geo g;
    int32_t b, c, m, p, ky, kx;

    g.in_h = input_dims->h;
    g.in_w = input_dims->w;
    g.in_c = in_c;
    g.k_h = k_h;
    g.k_w = k_w;
    g.dil_h = dw_conv_params->dilation.h;
    g.dil_w = dw_conv_params->dilation.w;
    g.ext_h = (k_h - 1) * g.dil_h;
    g.ext_w = (k_w - 1) * g.dil_w;
    g.off2 = ((uint32_t)dw_conv_params->input_offset & 0xFFFFu) | ((uint32_t)dw_conv_params->input_offset << 16);
    for (p = 0; p < k4; p++) /* the entries the gathers never write (their weights are 0 too) */
    {
        col[p] = 0;
    }
    for (b = 0; b < input_dims->n; b++)
    {
        for (c = 0; c < in_c; c++)
        {
            const int32_t oc0 = c * ch_mult;
            int8_t *out_c0 = output_data + (int32_t)b * pixels * out_c + oc0;
            g.in = input_data + (int32_t)b * g.in_h * g.in_w * in_c + c;
            for (m = 0; m < ch_mult; m++) /* channel c's weights and requantization parameters */
            {
                const int32_t pair = m + 1 < ch_mult || (m & 1); /* output m has an interleaved row */
                uint32_t *wr = wrows + (m & ~1) * (k4 >> 1);
                for (p = 0; p < k4; p++) /* the padding entries 0 */
                {
                    pockmcu_dwm_put(wr, pair ? pockmcu_dwm_ix(p, m & 1) : p, 0);
                }
                for (ky = 0; ky < k_h; ky++)
                {
                    for (kx = 0; kx < k_w; kx++)
                    {
                        const int32_t i = ky * k_we + pockmcu_dwm_pos(kx, k_w4);
                        pockmcu_dwm_put(
                            wr, pair ? pockmcu_dwm_ix(i, m & 1) : i, filter_data[(ky * k_w + kx) * out_c + oc0 + m]);
                    }
                }
                rq[m] = pockmcu_dw_rq_of(quant_params->multiplier[oc0 + m], shift[oc0 + m]);
            }
            /* pixels p and p + 1 at windows (y0, x0) and (y1, x1), stepped without divisions */
            int32_t y0 = -pad_h, x0 = -pad_w, ox0 = 0;
            for (p = 0; p < pixels; p += 2)
            {
                /* the last pixel alone computes its column twice */
                const int32_t p1 = p + 1 < pixels ? p + 1 : p;
                const int32_t wrap = p1 != p && ox0 + 1 == out_w;
                const int32_t y1 = wrap ? y0 + stride_h : y0;
                const int32_t x1 = wrap ? -pad_w : (p1 != p ? x0 + stride_w : x0);
                int8_t *out0 = out_c0 + p * out_c;
                int8_t *out1 = out_c0 + p1 * out_c;
                pockmcu_dwm_gather(col, 0, &g, y0, x0);
                pockmcu_dwm_gather(col, 1, &g, y1, x1);
                /* the next pair starts one pixel after (y1, x1) */
                ox0 = wrap ? 1 : ox0 + 2;
                x0 = x1 + stride_w;
                y0 = y1;
                if (ox0 >= out_w)
                {
                    ox0 -= out_w;
                    x0 = -pad_w + ox0 * stride_w;
                    y0 += stride_h;
                }
                for (m = 0; m + 1 < ch_mult; m += 2)
                {
                    const int32_t oc = oc0 + m;
                    int32_t acc[4];
                    acc[0] = acc[1] = bias_data != NULL ? bias_data[oc] : 0;
                    acc[2] = acc[3] = bias_data != NULL ? bias_data[oc + 1] : 0;
                    pockmcu_dwm_block2(col, wrows + m * (k4 >> 1), k4 >> 2, acc);
                    out0[m] = pockmcu_dwm_out(acc[0], fast, &rq[m], shift[oc], out_off, act_min, act_max);
                    out1[m] = pockmcu_dwm_out(acc[1], fast, &rq[m], shift[oc], out_off, act_min, act_max);
                    out0[m + 1] = pockmcu_dwm_out(acc[2], fast, &rq[m + 1], shift[oc + 1], out_off, act_min, act_max);
                    out1[m + 1] = pockmcu_dwm_out(acc[3], fast, &rq[m + 1], shift[oc + 1], out_off, act_min, act_max);
                }
                if (m < ch_mult) /* an odd last output */
                {
                    const int32_t oc = oc0 + m;
                    int32_t acc[2];
                    acc[0] = acc[1] = bias_data != NULL ? bias_data[oc] : 0;
                    pockmcu_dwm_block1(col, wrows + m * (k4 >> 1), k4 >> 2, acc);
                    out0[m] = pockmcu_dwm_out(acc[0], fast, &rq[m], shift[oc], out_off, act_min, act_max);
                    out1[m] = pockmcu_dwm_out(acc[1], fast, &rq[m], shift[oc], out_off, act_min, act_max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

/* 4 or more input channels (and the fast requantization): each multiplier m on its own as a depthwise convolution
 * of multiplier 1 (pockmcu_dw_c1_loops, 4 channels per word) over a copy of its filter and requantization
 * parameters in the scratch. */
POCKMCU_DWM_NOINLINE arm_cmsis_nn_status pockmcu_dwm_split_loops(void *buf,
                                                                 const cmsis_nn_dw_conv_params *dw_conv_params,
                                                                 const cmsis_nn_per_channel_quant_params *quant_params,
                                                                 const cmsis_nn_dims *input_dims,
                                                                 const int8_t *input_data,
                                                                 const cmsis_nn_dims *filter_dims,
                                                                 const int8_t *filter_data,
                                                                 const int32_t *bias_data,
                                                                 const cmsis_nn_dims *output_dims,
                                                                 int8_t *output_data)
{
    const int32_t in_c = input_dims->c;
    const int32_t ch_mult = dw_conv_params->ch_mult;
    const int32_t out_c = output_dims->c;
    const int32_t taps = filter_dims->h * filter_dims->w;
    int8_t *const wm = (int8_t *)(((uintptr_t)buf + 3) & ~(uintptr_t)3);
    int32_t *const bm = (int32_t *)(void *)(wm + ((taps * in_c + 3) & ~3));
    int32_t *const mm = bm + in_c;
    int32_t *const sm = mm + in_c;
    int32_t m, t, c;
    for (m = 0; m < ch_mult; m++)
    {
        for (t = 0; t < taps; t++)
        {
            for (c = 0; c < in_c; c++)
            {
                wm[t * in_c + c] = filter_data[t * out_c + c * ch_mult + m];
            }
        }
        for (c = 0; c < in_c; c++)
        {
            bm[c] = bias_data != NULL ? bias_data[c * ch_mult + m] : 0;
            mm[c] = quant_params->multiplier[c * ch_mult + m];
            sm[c] = quant_params->shift[c * ch_mult + m];
        }
        pockmcu_dw_c1_loops(dw_conv_params,
                            input_dims,
                            input_data,
                            filter_dims->h,
                            filter_dims->w,
                            wm,
                            bm,
                            mm,
                            sm,
                            output_dims->h,
                            output_dims->w,
                            output_data + m,
                            ch_mult);
    }
    return ARM_CMSIS_NN_SUCCESS;
}

/* The channel-multiplier loops; scratch: pockmcu_dwm_buffer_size bytes at buf (any alignment). */
POCKMCU_DWM_NOINLINE arm_cmsis_nn_status
pockmcu_depthwise_conv_mult_dsp_loops(void *buf,
                                      const cmsis_nn_dw_conv_params *dw_conv_params,
                                      const cmsis_nn_per_channel_quant_params *quant_params,
                                      const cmsis_nn_dims *input_dims,
                                      const int8_t *input_data,
                                      const cmsis_nn_dims *filter_dims,
                                      const int8_t *filter_data,
                                      const int32_t *bias_data,
                                      const cmsis_nn_dims *output_dims,
                                      int8_t *output_data)
{
    const int32_t in_c = input_dims->c;
    const int32_t out_c = output_dims->c;
    const int32_t taps = filter_dims->h * filter_dims->w;
    const int32_t fast = pockmcu_dw_fast_requant_ok(bias_data, quant_params->shift, out_c, taps);
    if (in_c >= 4 && fast)
    {
        return pockmcu_dwm_split_loops(buf,
                                       dw_conv_params,
                                       quant_params,
                                       input_dims,
                                       input_data,
                                       filter_dims,
                                       filter_data,
                                       bias_data,
                                       output_dims,
                                       output_data);
    }
    if (fast)
    {
        return pockmcu_dwm_loops_as(buf,
                                    dw_conv_params,
                                    quant_params,
                                    input_dims,
                                    input_data,
                                    filter_dims,
                                    filter_data,
                                    bias_data,
                                    output_dims,
                                    output_data,
                                    1);
    }
    return pockmcu_dwm_loops_as(buf,
                                dw_conv_params,
                                quant_params,
                                input_dims,
                                input_data,
                                filter_dims,
                                filter_data,
                                bias_data,
                                output_dims,
                                output_data,
                                0);
}

/* k_h_c, k_w_c: the filter size as constants (a specialization; 0: read filter_dims). */
POCKMCU_LOOPS_INLINE arm_cmsis_nn_status
pockmcu_depthwise_conv_dsp_loops(const cmsis_nn_context *ctx,
                                 const cmsis_nn_dw_conv_params *dw_conv_params,
                                 const cmsis_nn_per_channel_quant_params *quant_params,
                                 const cmsis_nn_dims *input_dims,
                                 const int8_t *input_data,
                                 const cmsis_nn_dims *filter_dims,
                                 const int8_t *filter_data,
                                 const cmsis_nn_dims *bias_dims,
                                 const int32_t *bias_data,
                                 const cmsis_nn_dims *output_dims,
                                 int8_t *output_data,
                                 const int32_t k_h_c,
                                 const int32_t k_w_c)
{
    const int32_t ch = input_dims->c;
    const int32_t k_h = k_h_c > 0 ? k_h_c : filter_dims->h;
    const int32_t k_w = k_w_c > 0 ? k_w_c : filter_dims->w;
    const int32_t stride_h = dw_conv_params->stride.h;
    const int32_t stride_w = dw_conv_params->stride.w;
    const int32_t dil_h = dw_conv_params->dilation.h;
    const int32_t dil_w = dw_conv_params->dilation.w;
    const int32_t *mult = quant_params->multiplier;
    const int32_t *shift = quant_params->shift;

    if (dw_conv_params->ch_mult != 1 || output_dims->c != ch || filter_dims->h != k_h || filter_dims->w != k_w ||
        stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1 ||
        !pockmcu_dw_fast_requant_ok(bias_data, shift, ch, k_h * k_w))
    {
        return pockmcu_depthwise_conv_s8_loops(ctx,
                                               dw_conv_params,
                                               quant_params,
                                               input_dims,
                                               input_data,
                                               filter_dims,
                                               filter_data,
                                               bias_dims,
                                               bias_data,
                                               output_dims,
                                               output_data,
                                               0);
    }
    (void)ctx;
    (void)bias_dims;

    pockmcu_dw_c1_loops(dw_conv_params,
                        input_dims,
                        input_data,
                        k_h,
                        k_w,
                        filter_data,
                        bias_data,
                        mult,
                        shift,
                        output_dims->h,
                        output_dims->w,
                        output_data,
                        1);
    return ARM_CMSIS_NN_SUCCESS;
}

#endif /* POCKMCU_DW_DSP_LOOPS_H */
