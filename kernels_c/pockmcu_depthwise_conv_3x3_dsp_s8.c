/*
 * pockmcu_depthwise_conv_3x3_dsp_s8 - int8 depthwise convolution for cores with the DSP extension (Cortex-M4, M7, M33,
 * M55): 3x3 filters, channel multiplier 1, no dilation, any stride and padding.
 *
 * The bytes of arm_depthwise_conv_wrapper_s8 for every input. Built from pockmcu_simd.h, so it also runs on the
 * host and on Cortex-M3, where it computes the same bytes more slowly.
 *
 * How: channels are taken 4 at a time (a group; the last group may hold 1 to 3, its missing lanes have weight 0).
 * For a group the kernel sign-extends, once, each input row the windows need into a scratch ring of 3 rows: per
 * column two words, (x0 + off, x2 + off) and (x1 + off, x3 + off) (SXTAB16 adds the input offset while extending),
 * with zero words for columns and rows outside the image, so every output pixel sees a whole 3x3 window and a
 * skipped tap contributes (x + off) * w = 0, as TFLM's skip does. The 9 taps' weights are extended once per group,
 * doubled (2w fits 16 bits) and stored in the 3 orders the ring's rotation can take, so the tap loop is 9 x
 * (2 loads + SMLABB/SMLATT per channel) with constant offsets. Accumulating 2 * acc saves the left shift of
 * SaturatingRoundingDoublingHighMul: SMMULR(2 acc, m) equals it while |2 acc| < 2^31. The rounding right shift by
 * e >= 1, the output offset and the saturation are ((x - [x < 0]) >> (e - 1) + 1 + 2 out_off) >> 1 saturated
 * (SSAT #8, ASR #1), equal to TFLM's RoundingDivideByPOT(x, e) + out_off clamped to int8; the activation clamp
 * is a byte-wise max / min of the 4 packed outputs.
 *
 * That requantization holds when every channel's shift is <= -1 and |bias| + 9 * 255 * 128 < 2^30 (checked per
 * call; TFLM layers with a total scale below 1/2 meet it). Otherwise, for another filter size, dilation or
 * channel multiplier, or without the scratch (ctx->buf NULL or ctx->size below the query's size), it runs
 * pockmcu_depthwise_conv_dsp_s8 (the general DSP loops, exact too).
 */
#include "pockmcu_dw_dsp_loops.h"

#define POCKMCU_DW3_WROT_WORDS 54 /* 3 rotations x 9 taps x 2 words */
#define POCKMCU_DW3_PRM_WORDS 12  /* 2 * bias, then (multiplier, e - 1) per lane */

/* Words of scratch for an output width and stride (without the alignment slack). */
static int32_t pockmcu_dw3_words(int32_t out_w, int32_t stride_w)
{
    return POCKMCU_DW3_WROT_WORDS + POCKMCU_DW3_PRM_WORDS + 6 * ((out_w - 1) * stride_w + 3);
}

/* 1 to 4 int8 from p as one word, missing lanes 0. */
static uint32_t pockmcu_dw3_gather(const int8_t *p, int32_t n)
{
    uint32_t v = 0;
    int32_t i;
    if (n == 4)
    {
        return pockmcu_read_s8x4(p);
    }
    for (i = 0; i < n; i++)
    {
        v |= (uint32_t)(uint8_t)p[i] << (8 * i);
    }
    return v;
}

static int32_t pockmcu_dw3_mod3(int32_t v) { return ((v % 3) + 3) % 3; }

/* One tap of 4 channels: the ring's two words at word offset xo, the weights' two at wo. */
#define POCKMCU_DW3_TAP(xo, wo)                                                                                        \
    do                                                                                                                 \
    {                                                                                                                  \
        const uint32_t x02_ = xp[(xo)], x13_ = xp[(xo) + 1];                                                           \
        const uint32_t w02_ = wr[(wo)], w13_ = wr[(wo) + 1];                                                           \
        a0 = pockmcu_smlabb(x02_, w02_, a0);                                                                           \
        a2 = pockmcu_smlatt(x02_, w02_, a2);                                                                           \
        a1 = pockmcu_smlabb(x13_, w13_, a1);                                                                           \
        a3 = pockmcu_smlatt(x13_, w13_, a3);                                                                           \
    } while (0)

/* The requantization of one lane: 2 acc in, the saturated output (offset added) out. */
#define POCKMCU_DW3_RQ(a, k)                                                                                           \
    do                                                                                                                 \
    {                                                                                                                  \
        const int32_t x_ = pockmcu_smmulr(a, prm[4 + 2 * (k)]);                                                        \
        a = pockmcu_ssat8_asr1(((x_ + (x_ >> 31)) >> prm[5 + 2 * (k)]) + k_out);                                       \
    } while (0)

/* A row of n output pixels of one group: xp the ring at the first window's column, wr the weights in the
 * ring's order, x_step the ring words between windows, nc a constant where inlined. */
POCKMCU_LOOPS_INLINE void pockmcu_dw3_row(const uint32_t *xp,
                                          const uint32_t *wr,
                                          const int32_t *prm,
                                          int8_t *out,
                                          int32_t n,
                                          int32_t x_step,
                                          int32_t out_step,
                                          int32_t k_out,
                                          uint32_t lo4,
                                          uint32_t hi4,
                                          int32_t nc)
{
    int32_t i, k;
    for (i = 0; i < n; i++, xp += x_step, out += out_step)
    {
        int32_t a0 = prm[0], a1 = prm[1], a2 = prm[2], a3 = prm[3];
        uint32_t packed;
        /* ring word offset (kx * 6 + s * 2), weight offset ((s * 3 + kx) * 2) for slot s, column kx */
        POCKMCU_DW3_TAP(0, 0);
        POCKMCU_DW3_TAP(6, 2);
        POCKMCU_DW3_TAP(12, 4);
        POCKMCU_DW3_TAP(2, 6);
        POCKMCU_DW3_TAP(8, 8);
        POCKMCU_DW3_TAP(14, 10);
        POCKMCU_DW3_TAP(4, 12);
        POCKMCU_DW3_TAP(10, 14);
        POCKMCU_DW3_TAP(16, 16);
        POCKMCU_DW3_RQ(a0, 0);
        POCKMCU_DW3_RQ(a1, 1);
        POCKMCU_DW3_RQ(a2, 2);
        POCKMCU_DW3_RQ(a3, 3);
        packed = pockmcu_pack_s8x4(a0, a1, a2, a3);
        packed = pockmcu_min_s8x4(pockmcu_max_s8x4(packed, lo4), hi4);
        if (nc == 4)
        {
            memcpy(out, &packed, 4);
        }
        else
        {
            for (k = 0; k < nc; k++)
            {
                out[k] = (int8_t)(uint8_t)(packed >> (8 * k));
            }
        }
    }
}

arm_cmsis_nn_status pockmcu_depthwise_conv_3x3_dsp_s8(const cmsis_nn_context *ctx,
                                                      const cmsis_nn_dw_conv_params *dw_conv_params,
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
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t ch = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t stride_h = dw_conv_params->stride.h;
    const int32_t stride_w = dw_conv_params->stride.w;
    const int32_t pad_h = dw_conv_params->padding.h;
    const int32_t pad_w = dw_conv_params->padding.w;
    const int32_t in_off = dw_conv_params->input_offset;
    const int32_t act_min = dw_conv_params->activation.min;
    const int32_t act_max = dw_conv_params->activation.max;
    const int32_t *mult = quant_params->multiplier;
    const int32_t *shift = quant_params->shift;
    const uint32_t off2 = ((uint32_t)in_off & 0xFFFFu) | ((uint32_t)in_off << 16);
    const int32_t k_out = 1 + 2 * dw_conv_params->output_offset;
    const uint32_t lo4 = (uint32_t)(uint8_t)act_min * 0x01010101u;
    const uint32_t hi4 = (uint32_t)(uint8_t)act_max * 0x01010101u;
    const int32_t pw = (out_w - 1) * stride_w + 3;
    int32_t ok = dw_conv_params->ch_mult == 1 && output_dims->c == ch && filter_dims->h == 3 && filter_dims->w == 3 &&
        dw_conv_params->dilation.h == 1 && dw_conv_params->dilation.w == 1 && stride_h >= 1 && stride_w >= 1 &&
        out_w >= 1 && ctx != NULL && ctx->buf != NULL && ctx->size >= 4 * pockmcu_dw3_words(out_w, stride_w) + 4;
    uint32_t *buf, *wrot, *cols;
    int32_t *prm;
    int32_t b, c, k;

    for (c = 0; ok && c < ch; c++)
    {
        const int64_t bc = bias_data != NULL ? (int64_t)bias_data[c] : 0;
        ok = shift[c] <= -1 && (bc < 0 ? -bc : bc) + 9 * 255 * 128 < ((int64_t)1 << 30);
    }
    if (!ok)
    {
        return pockmcu_depthwise_conv_dsp_s8(ctx,
                                             dw_conv_params,
                                             quant_params,
                                             input_dims,
                                             input_data,
                                             filter_dims,
                                             filter_data,
                                             bias_dims,
                                             bias_data,
                                             output_dims,
                                             output_data);
    }
    (void)bias_dims;
    buf = (uint32_t *)(((uintptr_t)ctx->buf + 3u) & ~(uintptr_t)3u);
    wrot = buf;
    prm = (int32_t *)(buf + POCKMCU_DW3_WROT_WORDS);
    cols = buf + POCKMCU_DW3_WROT_WORDS + POCKMCU_DW3_PRM_WORDS;

    for (b = 0; b < batches; b++)
    {
        const int8_t *in_batch = input_data + b * in_h * in_w * ch;
        int8_t *out_batch = output_data + b * out_h * out_w * ch;
        for (c = 0; c < ch; c += 4)
        {
            const int32_t nc = ch - c < 4 ? ch - c : 4;
            const int32_t x_lo = pad_w < pw ? pad_w : pw;
            const int32_t x_hi = pad_w + in_w < pw ? pad_w + in_w : pw;
            int32_t slot_row[3];
            int32_t oy, tap;
            /* the weights: extended, doubled, in the order of each ring rotation r (row ky in slot (r + ky) % 3) */
            for (tap = 0; tap < 9; tap++)
            {
                const uint32_t wv = pockmcu_dw3_gather(filter_data + tap * ch + c, nc);
                const uint32_t w02 = pockmcu_sxtb16(wv);
                const uint32_t w13 = pockmcu_sxtb16_ror8(wv);
                const int32_t ky = tap / 3, kx = tap % 3;
                int32_t r;
                for (r = 0; r < 3; r++)
                {
                    uint32_t *d = wrot + r * 18 + (((r + ky) % 3) * 3 + kx) * 2;
                    d[0] = pockmcu_sadd16(w02, w02);
                    d[1] = pockmcu_sadd16(w13, w13);
                }
            }
            for (k = 0; k < 4; k++)
            {
                prm[k] = k < nc && bias_data != NULL ? 2 * bias_data[c + k] : 0;
                prm[4 + 2 * k] = k < nc ? mult[c + k] : 0;
                prm[5 + 2 * k] = k < nc ? -shift[c + k] - 1 : 0;
            }
            slot_row[0] = slot_row[1] = slot_row[2] = INT32_MIN;

            for (oy = 0; oy < out_h; oy++)
            {
                const int32_t iy0 = oy * stride_h - pad_h;
                const uint32_t *wr = wrot + pockmcu_dw3_mod3(iy0) * 18;
                const uint32_t *xp = cols;
                int8_t *out = out_batch + oy * out_w * ch + c;
                int32_t iy;
                /* the ring: the rows iy0 .. iy0 + 2, each extended once per group */
                for (iy = iy0; iy < iy0 + 3; iy++)
                {
                    const int32_t s = pockmcu_dw3_mod3(iy);
                    uint32_t *d = cols + 2 * s;
                    int32_t pc;
                    if (slot_row[s] == iy)
                    {
                        continue;
                    }
                    slot_row[s] = iy;
                    if (iy < 0 || iy >= in_h)
                    {
                        for (pc = 0; pc < pw; pc++, d += 6)
                        {
                            d[0] = d[1] = 0;
                        }
                        continue;
                    }
                    for (pc = 0; pc < x_lo; pc++, d += 6)
                    {
                        d[0] = d[1] = 0;
                    }
                    {
                        const int8_t *ip = in_batch + (iy * in_w + (x_lo - pad_w)) * ch + c;
                        if (nc == 4)
                        {
                            for (; pc < x_hi; pc++, d += 6, ip += ch)
                            {
                                const uint32_t xv = pockmcu_read_s8x4(ip);
                                d[0] = pockmcu_sxtab16(off2, xv);
                                d[1] = pockmcu_sxtab16_ror8(off2, xv);
                            }
                        }
                        else
                        {
                            for (; pc < x_hi; pc++, d += 6, ip += ch)
                            {
                                const uint32_t xv = pockmcu_dw3_gather(ip, nc);
                                d[0] = pockmcu_sxtab16(off2, xv);
                                d[1] = pockmcu_sxtab16_ror8(off2, xv);
                            }
                        }
                    }
                    for (; pc < pw; pc++, d += 6)
                    {
                        d[0] = d[1] = 0;
                    }
                }

                if (nc == 4)
                {
                    pockmcu_dw3_row(xp, wr, prm, out, out_w, 6 * stride_w, ch, k_out, lo4, hi4, 4);
                }
                else
                {
                    pockmcu_dw3_row(xp, wr, prm, out, out_w, 6 * stride_w, ch, k_out, lo4, hi4, nc);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
