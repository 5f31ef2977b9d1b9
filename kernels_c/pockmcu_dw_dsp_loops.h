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
 * otherwise, and for a channel multiplier above 1, it runs the portable loops (pockmcu_layer_loops.h),
 * so every call equals arm_depthwise_conv_wrapper_s8 byte for byte.
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
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t ch = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t k_h = k_h_c > 0 ? k_h_c : filter_dims->h;
    const int32_t k_w = k_w_c > 0 ? k_w_c : filter_dims->w;
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
    const int32_t *mult = quant_params->multiplier;
    const int32_t *shift = quant_params->shift;
    const uint32_t off2 = ((uint32_t)in_off & 0xFFFFu) | ((uint32_t)in_off << 16);
    const int32_t ch4 = ch & ~3;
    int32_t b, oy, ox, c;

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

    for (b = 0; b < batches; b++)
    {
        const int8_t *in_batch = input_data + (int32_t)b * in_h * in_w * ch;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * stride_h - pad_h;
            const int32_t ky_start = pockmcu_window_start(in_y0, dil_h);
            const int32_t ky_end = pockmcu_window_end(in_y0, dil_h, in_h, k_h);
            int8_t *out_row = output_data + ((int32_t)b * out_h + oy) * out_w * ch;
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
                int8_t *out = out_row + ox * ch;

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
                    out[c] = pockmcu_dw_out(a0, pockmcu_dw_rq_of(mult[c], shift[c]), out_off, act_min, act_max);
                    out[c + 1] =
                        pockmcu_dw_out(a1, pockmcu_dw_rq_of(mult[c + 1], shift[c + 1]), out_off, act_min, act_max);
                    out[c + 2] =
                        pockmcu_dw_out(a2, pockmcu_dw_rq_of(mult[c + 2], shift[c + 2]), out_off, act_min, act_max);
                    out[c + 3] =
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
                    out[c] = pockmcu_dw_out(acc, pockmcu_dw_rq_of(mult[c], shift[c]), out_off, act_min, act_max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

#endif /* POCKMCU_DW_DSP_LOOPS_H */
