/*
 * pockmcu_depthwise_conv_3x3_dsp_s8 - int8 depthwise convolution for cores with the DSP extension (Cortex-M4, M7, M33,
 * M55): 3x3 filters, channel multiplier 1, no dilation, any stride and padding.
 *
 * The bytes of arm_depthwise_conv_wrapper_s8 for every input. Built from pockmcu_simd.h, so it also runs on the
 * host and on Cortex-M3, where it computes the same bytes more slowly.
 *
 * How: the output is walked line by line, a line being an output row (pixels along x) or, when that costs fewer
 * instructions (the cost rule of pockmcu_dw3_cost: short rows, as KWS's 5-wide maps), an output column (pixels
 * along y, the filter transposed); "along" is the direction of the line, "across" the other one. Channels are taken
 * 4 at a time (a group; the last group may hold 1 to 3, its missing lanes have weight 0). For a group the kernel
 * extends, once, each input line the windows need into a scratch ring of 3 lines: per column j and channel c the
 * word Q_c[j] = (x_c[j] + off, x_c[j + 1] + off) of two int16 lanes (SXTAB16 adds the input offset while
 * extending, PKHBT / PKHTB pair the lanes of neighbouring columns), zero for columns and lines outside the image,
 * so every output pixel sees a whole 3x3 window and a skipped tap contributes (x + off) * w = 0, as TFLM's skip
 * does. With the weights of a filter row stored as (w0, w1) per channel and (w2 of channel c, w2 of c + 1), a
 * filter row of an output pixel at column x is SMLAD(Q_c[x], (w0, w1)) plus SMLABB / SMLABT of Q_c[x + 2]; the
 * next pixel (stride 1) is SMLAD(Q_c[x + 1], (w0, w1)) plus SMLATB / SMLATT of the same Q_c[x + 2]. Three output
 * pixels of 2 channels are one pass (6 loads and 12 multiply-accumulates per filter row for 18 MACs), the rest of a
 * line pairs of pixels (and a single one). At stride 2 along the line a window reads only Q[x] of even columns and
 * the low lanes of Q[x + 2], so the ring is compacted: it holds Q'[i] = Q[2i] only (half the fill; the two input
 * words' halves are packed by PKHBT / PKHTB first, then one SXTAB16 extends a channel's pair), the next pixel's
 * window is the next ring column and three pixels are again one pass. The fills handle the columns at the image's
 * edges apart, so the columns inside take loops without tests. The weights are extended once per group, doubled (2w
 * fits 16 bits) and stored in the 3 orders the ring's rotation can take, so the tap loop has constant offsets; each
 * specialization of a line (stride 1 / 2 / other, activation clamp or not) is its own function.
 *
 * Requantization: accumulating 2 * acc saves the left shift of SaturatingRoundingDoublingHighMul: SMMULR(2 acc, m)
 * equals it while |2 acc| < 2^31. TFLM's RoundingDivideByPOT(x, e), e >= 1, is (x + 2^(e-1) - [x < 0]) >> e, and
 * [x < 0] = [acc < 0] for m >= 0 whenever it matters (x <= 0 when acc < 0, and x = 0 gives 0 either way); the
 * output offset adds out_off * 2^e before the shift. So one output is ADD (t = R + (acc >> 31), R = 2^(e-1) +
 * out_off * 2^e per channel), SMMLAR (x + t), ASR by e and SSAT #8; the activation clamp (when it is not the whole
 * int8 range) is a byte-wise max / min of 4 packed outputs.
 *
 * That holds when every channel's shift is <= -1, its multiplier >= 0, B = |bias| + 9 * 255 * 128 < 2^30 and
 * B + 3 + 129 * 2^e < 2^31 (checked per call; TFLM layers with a total scale below 1/2 meet it). Otherwise, for
 * another filter size, dilation or channel multiplier, or without the scratch (ctx->buf NULL or ctx->size below the
 * query's size), it runs pockmcu_depthwise_conv_dsp_s8 (the general DSP loops, exact too).
 */
#include "pockmcu_dw_dsp_loops.h"

#define POCKMCU_DW3_WROT_WORDS 102 /* 3 rotations x 2 channel pairs x 17 words (pockmcu_dw3_line) */

/* Ring columns of a line of n output pixels at stride s. */
static int32_t pockmcu_dw3_cols(int32_t n, int32_t s) { return (n - 1) * s + 3; }

/* Words of scratch (without the alignment slack): the larger ring of the two orientations. */
static int32_t pockmcu_dw3_words(int32_t out_h, int32_t out_w, int32_t stride_h, int32_t stride_w)
{
    const int32_t a = pockmcu_dw3_cols(out_w, stride_w), b = pockmcu_dw3_cols(out_h, stride_h);
    return POCKMCU_DW3_WROT_WORDS + 12 * (a > b ? a : b);
}

/* The cost rule (instructions per group, roughly): per line the ring fill of min(stride, 3) new input lines of
 * 12 instructions a column, a line's overhead, and an odd last pixel; the pixels' own work is the same both ways. */
static int32_t pockmcu_dw3_cost(int32_t lines, int32_t len, int32_t s_along, int32_t s_across)
{
    const int32_t fills = s_across < 3 ? s_across : 3;
    return lines * (fills * 12 * pockmcu_dw3_cols(len, s_along) + 80 + 20 * (len & 1));
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

/* One output's requantization: 2 acc in, the saturated output (offset added) out. */
#define POCKMCU_DW3_RQ(a, m, r, e) a = pockmcu_ssat8(pockmcu_smmlar(a, m, (r) + ((a) >> 31)) >> (e))

/* The words of one (rotation, channel pair) block of wp: per filter row k the words (w0, w1) of the pair's two
 * channels and (w2 of the first, w2 of the second) at 3k; then 2 bias, 2 multiplier, 2 R, 2 e. */
#define POCKMCU_DW3_BLOCK 17
#define POCKMCU_DW3_BIAS 9
#define POCKMCU_DW3_MULT 11
#define POCKMCU_DW3_R 13
#define POCKMCU_DW3_E 15

/* Filter row k of a pixel pair at stride S (1, or 2 with the ring compacted: only the even columns' Q, so the next
 * pixel's window is the next ring column): the pair's window at xp (ring slot k at xp + 4k). */
#define POCKMCU_DW3_PAIR_ROW(k, S)                                                                                     \
    do                                                                                                                 \
    {                                                                                                                  \
        uint32_t w0_, w1_, x0_, x1_, y0_, y1_, w2_;                                                                    \
        pockmcu_read_u32x2_at(wp, 3 * (k), &w0_, &w1_);                                                                \
        pockmcu_read_u32x2_at(xp, 4 * (k), &x0_, &x1_);                                                                \
        a0 = pockmcu_smlad(x0_, w0_, a0);                                                                              \
        a1 = pockmcu_smlad(x1_, w1_, a1);                                                                              \
        pockmcu_read_u32x2_at(xp, 12 + 4 * (k), &y0_, &y1_);                                                           \
        b0 = pockmcu_smlad(y0_, w0_, b0);                                                                              \
        b1 = pockmcu_smlad(y1_, w1_, b1);                                                                              \
        w2_ = wp[3 * (k) + 2];                                                                                         \
        if ((S) == 1)                                                                                                  \
        {                                                                                                              \
            pockmcu_read_u32x2_at(xp, 24 + 4 * (k), &x0_, &x1_);                                                       \
            a0 = pockmcu_smlabb(x0_, w2_, a0);                                                                         \
            a1 = pockmcu_smlabt(x1_, w2_, a1);                                                                         \
            b0 = pockmcu_smlatb(x0_, w2_, b0);                                                                         \
            b1 = pockmcu_smlatt(x1_, w2_, b1);                                                                         \
        }                                                                                                              \
        else                                                                                                           \
        {                                                                                                              \
            a0 = pockmcu_smlabb(y0_, w2_, a0);                                                                         \
            a1 = pockmcu_smlabt(y1_, w2_, a1);                                                                         \
            pockmcu_read_u32x2_at(xp, 24 + 4 * (k), &x0_, &x1_);                                                       \
            b0 = pockmcu_smlabb(x0_, w2_, b0);                                                                         \
            b1 = pockmcu_smlabt(x1_, w2_, b1);                                                                         \
        }                                                                                                              \
        POCKMCU_ORDER_AFTER(xp, b0);                                                                                   \
        POCKMCU_ORDER_AFTER(wp, b1);                                                                                   \
    } while (0)

/* Filter row k of three pixels at stride 1 (windows at xp, xp + 12, xp + 24): Q[x], Q[x + 1], Q[x + 2] take two
 * taps each by SMLAD, Q[x + 2] and Q[x + 3] the third taps; 6 loads and 12 multiply-accumulates for 18 MACs. */
#define POCKMCU_DW3_TRIPLE_ROW(k)                                                                                      \
    do                                                                                                                 \
    {                                                                                                                  \
        uint32_t w0_, w1_, x0_, x1_, w2_;                                                                              \
        pockmcu_read_u32x2_at(wp, 3 * (k), &w0_, &w1_);                                                                \
        pockmcu_read_u32x2_at(xp, 4 * (k), &x0_, &x1_);                                                                \
        a0 = pockmcu_smlad(x0_, w0_, a0);                                                                              \
        a1 = pockmcu_smlad(x1_, w1_, a1);                                                                              \
        POCKMCU_ORDER_AFTER(xp, a1);                                                                                   \
        pockmcu_read_u32x2_at(xp, 12 + 4 * (k), &x0_, &x1_);                                                           \
        b0 = pockmcu_smlad(x0_, w0_, b0);                                                                              \
        b1 = pockmcu_smlad(x1_, w1_, b1);                                                                              \
        POCKMCU_ORDER_AFTER(xp, b1);                                                                                   \
        pockmcu_read_u32x2_at(xp, 24 + 4 * (k), &x0_, &x1_);                                                           \
        c0 = pockmcu_smlad(x0_, w0_, c0);                                                                              \
        c1 = pockmcu_smlad(x1_, w1_, c1);                                                                              \
        POCKMCU_ORDER_AFTER(wp, c1);                                                                                   \
        w2_ = wp[3 * (k) + 2];                                                                                         \
        a0 = pockmcu_smlabb(x0_, w2_, a0);                                                                             \
        a1 = pockmcu_smlabt(x1_, w2_, a1);                                                                             \
        b0 = pockmcu_smlatb(x0_, w2_, b0);                                                                             \
        b1 = pockmcu_smlatt(x1_, w2_, b1);                                                                             \
        POCKMCU_ORDER_AFTER(xp, b1);                                                                                   \
        pockmcu_read_u32x2_at(xp, 36 + 4 * (k), &x0_, &x1_);                                                           \
        c0 = pockmcu_smlatb(x0_, w2_, c0);                                                                             \
        c1 = pockmcu_smlatt(x1_, w2_, c1);                                                                             \
        POCKMCU_ORDER_AFTER(xp, c0);                                                                                   \
        POCKMCU_ORDER_AFTER(wp, c1);                                                                                   \
    } while (0)

/* Filter row k of three pixels at stride 2 over the compacted ring (windows at xp, xp + 12, xp + 24: the even
 * columns' Q', so Q'[i] takes the two first taps of pixel i by SMLAD and its low lanes the third tap of pixel i - 1);
 * 6 loads and 12 multiply-accumulates for 18 MACs. */
#define POCKMCU_DW3_TRIPLE_ROW_S2(k)                                                                                   \
    do                                                                                                                 \
    {                                                                                                                  \
        uint32_t w0_, w1_, x0_, x1_, w2_;                                                                              \
        pockmcu_read_u32x2_at(wp, 3 * (k), &w0_, &w1_);                                                                \
        pockmcu_read_u32x2_at(xp, 4 * (k), &x0_, &x1_);                                                                \
        a0 = pockmcu_smlad(x0_, w0_, a0);                                                                              \
        a1 = pockmcu_smlad(x1_, w1_, a1);                                                                              \
        POCKMCU_ORDER_AFTER(xp, a1);                                                                                   \
        pockmcu_read_u32x2_at(xp, 12 + 4 * (k), &x0_, &x1_);                                                           \
        w2_ = wp[3 * (k) + 2];                                                                                         \
        b0 = pockmcu_smlad(x0_, w0_, b0);                                                                              \
        b1 = pockmcu_smlad(x1_, w1_, b1);                                                                              \
        a0 = pockmcu_smlabb(x0_, w2_, a0);                                                                             \
        a1 = pockmcu_smlabt(x1_, w2_, a1);                                                                             \
        POCKMCU_ORDER_AFTER(xp, a1);                                                                                   \
        pockmcu_read_u32x2_at(xp, 24 + 4 * (k), &x0_, &x1_);                                                           \
        c0 = pockmcu_smlad(x0_, w0_, c0);                                                                              \
        c1 = pockmcu_smlad(x1_, w1_, c1);                                                                              \
        b0 = pockmcu_smlabb(x0_, w2_, b0);                                                                             \
        b1 = pockmcu_smlabt(x1_, w2_, b1);                                                                             \
        POCKMCU_ORDER_AFTER(xp, b1);                                                                                   \
        pockmcu_read_u32x2_at(xp, 36 + 4 * (k), &x0_, &x1_);                                                           \
        c0 = pockmcu_smlabb(x0_, w2_, c0);                                                                             \
        c1 = pockmcu_smlabt(x1_, w2_, c1);                                                                             \
        POCKMCU_ORDER_AFTER(xp, c0);                                                                                   \
        POCKMCU_ORDER_AFTER(wp, c1);                                                                                   \
    } while (0)

/* Filter row k of a pixel pair at any stride (qb: ring words between the two windows). */
#define POCKMCU_DW3_PAIR_ROW_ANY(k)                                                                                    \
    do                                                                                                                 \
    {                                                                                                                  \
        const uint32_t *q_ = xp + 4 * (k);                                                                             \
        const uint32_t w0_ = wp[3 * (k)], w1_ = wp[3 * (k) + 1], w2_ = wp[3 * (k) + 2];                                \
        a0 = pockmcu_smlad(q_[0], w0_, a0);                                                                            \
        a1 = pockmcu_smlad(q_[1], w1_, a1);                                                                            \
        b0 = pockmcu_smlad(q_[qb], w0_, b0);                                                                           \
        b1 = pockmcu_smlad(q_[qb + 1], w1_, b1);                                                                       \
        a0 = pockmcu_smlabb(q_[24], w2_, a0);                                                                          \
        a1 = pockmcu_smlabt(q_[25], w2_, a1);                                                                          \
        b0 = pockmcu_smlabb(q_[qb + 24], w2_, b0);                                                                     \
        b1 = pockmcu_smlabt(q_[qb + 25], w2_, b1);                                                                     \
    } while (0)

/* A line of n output pixels of one channel pair: xp the ring at the first window's column and the pair's first
 * channel, wp the pair's block (weights in the ring's order, parameters), sl the stride along the line (S: 1 or 2
 * as a constant, 0: read sl), out_step the bytes between output pixels, clamp whether to apply lo4 / hi4, nch the
 * channels of the pair to store (1 or 2). */
POCKMCU_LOOPS_INLINE void pockmcu_dw3_line(const uint32_t *xp,
                                           const uint32_t *wp,
                                           int8_t *out,
                                           int32_t n,
                                           int32_t sl,
                                           int32_t out_step,
                                           uint32_t lo4,
                                           uint32_t hi4,
                                           const int32_t S,
                                           const int32_t clamp,
                                           const int32_t nch)
{
    const int32_t qb = S > 0 ? 12 : 12 * sl; /* ring words from a pixel's window to the next pixel's */
    const int32_t tq = S == 2 ? 12 : 24;     /* ring words from a pixel's window to its third tap's Q */
    const int32_t *prm = (const int32_t *)wp;
    int32_t i;
    if (S > 0 && nch == 2) /* three pixels a pass, then a pair and a single pixel as at any stride */
    {
        for (; n >= 3 && n != 4; n -= 3) /* n = 4 after them: two pairs (cheaper than a triple and a single) */
        {
            int32_t a0, a1, b0, b1, c0, c1;
            {
                uint32_t u0, u1;
                pockmcu_read_u32x2_at(wp, POCKMCU_DW3_BIAS, &u0, &u1);
                a0 = b0 = c0 = (int32_t)u0;
                a1 = b1 = c1 = (int32_t)u1;
            }
            if (S == 1)
            {
                POCKMCU_DW3_TRIPLE_ROW(0);
                POCKMCU_DW3_TRIPLE_ROW(1);
                POCKMCU_DW3_TRIPLE_ROW(2);
            }
            else
            {
                POCKMCU_DW3_TRIPLE_ROW_S2(0);
                POCKMCU_DW3_TRIPLE_ROW_S2(1);
                POCKMCU_DW3_TRIPLE_ROW_S2(2);
            }
            {
                uint32_t m0, m1, r0, r1, e0, e1;
                pockmcu_read_u32x2_at(wp, POCKMCU_DW3_MULT, &m0, &m1);
                pockmcu_read_u32x2_at(wp, POCKMCU_DW3_R, &r0, &r1);
                pockmcu_read_u32x2_at(wp, POCKMCU_DW3_E, &e0, &e1);
                POCKMCU_DW3_RQ(a0, (int32_t)m0, (int32_t)r0, (int32_t)e0);
                POCKMCU_DW3_RQ(b0, (int32_t)m0, (int32_t)r0, (int32_t)e0);
                POCKMCU_DW3_RQ(c0, (int32_t)m0, (int32_t)r0, (int32_t)e0);
                POCKMCU_DW3_RQ(a1, (int32_t)m1, (int32_t)r1, (int32_t)e1);
                POCKMCU_DW3_RQ(b1, (int32_t)m1, (int32_t)r1, (int32_t)e1);
                POCKMCU_DW3_RQ(c1, (int32_t)m1, (int32_t)r1, (int32_t)e1);
            }
            if (clamp)
            {
                const uint32_t p = pockmcu_min_s8x4(pockmcu_max_s8x4(pockmcu_pack_s8x4(a0, a1, b0, b1), lo4), hi4);
                const uint32_t pc = pockmcu_min_s8x4(pockmcu_max_s8x4(pockmcu_pack_s8x2(c0, c1), lo4), hi4);
                const uint16_t ha = (uint16_t)p, hb = (uint16_t)(p >> 16), hc = (uint16_t)pc;
                memcpy(out, &ha, 2);
                memcpy(out + out_step, &hb, 2);
                memcpy(out + 2 * out_step, &hc, 2);
            }
            else
            {
                const uint16_t ha = (uint16_t)pockmcu_pack_s8x2(a0, a1);
                const uint16_t hb = (uint16_t)pockmcu_pack_s8x2(b0, b1);
                const uint16_t hc = (uint16_t)pockmcu_pack_s8x2(c0, c1);
                memcpy(out, &ha, 2);
                memcpy(out + out_step, &hb, 2);
                memcpy(out + 2 * out_step, &hc, 2);
            }
            xp += 36;
            out += 3 * out_step;
        }
    }
    for (i = n >> 1; i > 0; i--)
    {
        int32_t a0, a1, b0, b1;
        {
            uint32_t u0, u1;
            pockmcu_read_u32x2_at(wp, POCKMCU_DW3_BIAS, &u0, &u1);
            a0 = b0 = (int32_t)u0;
            a1 = b1 = (int32_t)u1;
        }
        if (S > 0)
        {
            POCKMCU_DW3_PAIR_ROW(0, S);
            POCKMCU_DW3_PAIR_ROW(1, S);
            POCKMCU_DW3_PAIR_ROW(2, S);
        }
        else
        {
            POCKMCU_DW3_PAIR_ROW_ANY(0);
            POCKMCU_DW3_PAIR_ROW_ANY(1);
            POCKMCU_DW3_PAIR_ROW_ANY(2);
        }
        {
            uint32_t m0, m1, r0, r1, e0, e1;
            pockmcu_read_u32x2_at(wp, POCKMCU_DW3_MULT, &m0, &m1);
            pockmcu_read_u32x2_at(wp, POCKMCU_DW3_R, &r0, &r1);
            pockmcu_read_u32x2_at(wp, POCKMCU_DW3_E, &e0, &e1);
            POCKMCU_DW3_RQ(a0, (int32_t)m0, (int32_t)r0, (int32_t)e0);
            POCKMCU_DW3_RQ(b0, (int32_t)m0, (int32_t)r0, (int32_t)e0);
            POCKMCU_DW3_RQ(a1, (int32_t)m1, (int32_t)r1, (int32_t)e1);
            POCKMCU_DW3_RQ(b1, (int32_t)m1, (int32_t)r1, (int32_t)e1);
        }
        if (clamp)
        {
            const uint32_t packed = pockmcu_min_s8x4(pockmcu_max_s8x4(pockmcu_pack_s8x4(a0, a1, b0, b1), lo4), hi4);
            if (nch == 2)
            {
                const uint16_t ha = (uint16_t)packed, hb = (uint16_t)(packed >> 16);
                memcpy(out, &ha, 2);
                memcpy(out + out_step, &hb, 2);
            }
            else
            {
                out[0] = (int8_t)(uint8_t)packed;
                out[out_step] = (int8_t)(uint8_t)(packed >> 16);
            }
        }
        else if (nch == 2)
        {
            const uint16_t ha = (uint16_t)pockmcu_pack_s8x2(a0, a1);
            const uint16_t hb = (uint16_t)pockmcu_pack_s8x2(b0, b1);
            memcpy(out, &ha, 2);
            memcpy(out + out_step, &hb, 2);
        }
        else
        {
            out[0] = (int8_t)a0;
            out[out_step] = (int8_t)b0;
        }
        xp += 2 * qb;
        out += 2 * out_step;
    }
    if (n & 1)
    {
        int32_t a0 = prm[POCKMCU_DW3_BIAS], a1 = prm[POCKMCU_DW3_BIAS + 1];
        int32_t k;
        for (k = 0; k < 3; k++)
        {
            const uint32_t *q = xp + 4 * k;
            const uint32_t w0 = wp[3 * k], w1 = wp[3 * k + 1], w2 = wp[3 * k + 2];
            a0 = pockmcu_smlad(q[0], w0, a0);
            a1 = pockmcu_smlad(q[1], w1, a1);
            a0 = pockmcu_smlabb(q[tq], w2, a0);
            a1 = pockmcu_smlabt(q[tq + 1], w2, a1);
        }
        POCKMCU_DW3_RQ(a0, prm[POCKMCU_DW3_MULT], prm[POCKMCU_DW3_R], prm[POCKMCU_DW3_E]);
        POCKMCU_DW3_RQ(a1, prm[POCKMCU_DW3_MULT + 1], prm[POCKMCU_DW3_R + 1], prm[POCKMCU_DW3_E + 1]);
        if (clamp)
        {
            const uint32_t packed = pockmcu_min_s8x4(pockmcu_max_s8x4(pockmcu_pack_s8x4(a0, a1, 0, 0), lo4), hi4);
            a0 = (int32_t)packed;
            a1 = (int32_t)(packed >> 8);
        }
        out[0] = (int8_t)a0;
        if (nch == 2)
        {
            out[1] = (int8_t)a1;
        }
    }
}

#if defined(__GNUC__) || defined(__clang__)
    #define POCKMCU_DW3_NOINLINE static __attribute__((noinline))
#else
    #define POCKMCU_DW3_NOINLINE static
#endif

/* A line of both channel pairs of a group of 4 channels, one function per specialization (S, clamp): each has
 * the registers to itself. */
POCKMCU_DW3_NOINLINE void pockmcu_dw3_line4_s1(const uint32_t *ring,
                                               const uint32_t *wr,
                                               int8_t *out,
                                               int32_t n,
                                               int32_t sl,
                                               int32_t out_step,
                                               uint32_t lo4,
                                               uint32_t hi4)
{
    pockmcu_dw3_line(ring, wr, out, n, sl, out_step, lo4, hi4, 1, 0, 2);
    pockmcu_dw3_line(ring + 2, wr + POCKMCU_DW3_BLOCK, out + 2, n, sl, out_step, lo4, hi4, 1, 0, 2);
}

POCKMCU_DW3_NOINLINE void pockmcu_dw3_line4_s1c(const uint32_t *ring,
                                                const uint32_t *wr,
                                                int8_t *out,
                                                int32_t n,
                                                int32_t sl,
                                                int32_t out_step,
                                                uint32_t lo4,
                                                uint32_t hi4)
{
    pockmcu_dw3_line(ring, wr, out, n, sl, out_step, lo4, hi4, 1, 1, 2);
    pockmcu_dw3_line(ring + 2, wr + POCKMCU_DW3_BLOCK, out + 2, n, sl, out_step, lo4, hi4, 1, 1, 2);
}

POCKMCU_DW3_NOINLINE void pockmcu_dw3_line4_s2(const uint32_t *ring,
                                               const uint32_t *wr,
                                               int8_t *out,
                                               int32_t n,
                                               int32_t sl,
                                               int32_t out_step,
                                               uint32_t lo4,
                                               uint32_t hi4)
{
    pockmcu_dw3_line(ring, wr, out, n, sl, out_step, lo4, hi4, 2, 0, 2);
    pockmcu_dw3_line(ring + 2, wr + POCKMCU_DW3_BLOCK, out + 2, n, sl, out_step, lo4, hi4, 2, 0, 2);
}

POCKMCU_DW3_NOINLINE void pockmcu_dw3_line4_s2c(const uint32_t *ring,
                                                const uint32_t *wr,
                                                int8_t *out,
                                                int32_t n,
                                                int32_t sl,
                                                int32_t out_step,
                                                uint32_t lo4,
                                                uint32_t hi4)
{
    pockmcu_dw3_line(ring, wr, out, n, sl, out_step, lo4, hi4, 2, 1, 2);
    pockmcu_dw3_line(ring + 2, wr + POCKMCU_DW3_BLOCK, out + 2, n, sl, out_step, lo4, hi4, 2, 1, 2);
}

POCKMCU_DW3_NOINLINE void pockmcu_dw3_line4_any(const uint32_t *ring,
                                                const uint32_t *wr,
                                                int8_t *out,
                                                int32_t n,
                                                int32_t sl,
                                                int32_t out_step,
                                                uint32_t lo4,
                                                uint32_t hi4)
{
    pockmcu_dw3_line(ring, wr, out, n, sl, out_step, lo4, hi4, 0, 1, 2);
    pockmcu_dw3_line(ring + 2, wr + POCKMCU_DW3_BLOCK, out + 2, n, sl, out_step, lo4, hi4, 0, 1, 2);
}

/* Q words of one ring column (d + off) from the extended words of columns j (p02, p13) and j + 1 (c02, c13). */
#define POCKMCU_DW3_STORE_Q(d, off, p02, p13, c02, c13)                                                                \
    do                                                                                                                 \
    {                                                                                                                  \
        pockmcu_write_u32x2_at((d), (off), pockmcu_pkhbt_lsl16((p02), (c02)), pockmcu_pkhbt_lsl16((p13), (c13)));      \
        pockmcu_write_u32x2_at((d), (off) + 2, pockmcu_pkhtb_asr16((c02), (p02)), pockmcu_pkhtb_asr16((c13), (p13)));  \
    } while (0)

/* The extended words of column j of a line (e02: channels 0 and 2 of the group, e13: 1 and 3, input offset added),
 * zero outside the image [x_lo, x_hi); ip: the group's first channel at column x_lo, step bytes a column. */
POCKMCU_LOOPS_INLINE void pockmcu_dw3_ext(const int8_t *ip,
                                          int32_t step,
                                          int32_t j,
                                          int32_t x_lo,
                                          int32_t x_hi,
                                          int32_t nc,
                                          uint32_t off2,
                                          uint32_t *e02,
                                          uint32_t *e13)
{
    if (j >= x_lo && j < x_hi)
    {
        const uint32_t xv = pockmcu_dw3_gather(ip + (j - x_lo) * step, nc);
        *e02 = pockmcu_sxtab16(off2, xv);
        *e13 = pockmcu_sxtab16_ror8(off2, xv);
    }
    else
    {
        *e02 = *e13 = 0;
    }
}

/* Extends the 4-channel word at q (the input offset added): e02 channels 0 and 2, e13 channels 1 and 3. */
#define POCKMCU_DW3_EXT4(q, e02, e13)                                                                                  \
    do                                                                                                                 \
    {                                                                                                                  \
        const uint32_t xv_ = pockmcu_read_s8x4(q);                                                                     \
        e02 = pockmcu_sxtab16(off2, xv_);                                                                              \
        e13 = pockmcu_sxtab16_ror8(off2, xv_);                                                                         \
    } while (0)

/* Q words of one ring column (d + off) from the raw 4-channel words xa (column j) and xb (column j + 1): the two
 * words' halves packed first ([a0 a1 b0 b1], [a2 a3 b2 b3]), then SXTAB16 / SXTAB16 ROR #8 extend each channel's
 * pair with the input offset added (2 PKH and 4 SXTAB16 for the 4 channels). */
#define POCKMCU_DW3_PAIR_Q(d, off, xa, xb)                                                                             \
    do                                                                                                                 \
    {                                                                                                                  \
        const uint32_t xa_ = (xa), xb_ = (xb);                                                                         \
        const uint32_t t01_ = pockmcu_pkhbt_lsl16(xa_, xb_), t23_ = pockmcu_pkhtb_asr16(xb_, xa_);                     \
        pockmcu_write_u32x2_at((d), (off), pockmcu_sxtab16(off2, t01_), pockmcu_sxtab16_ror8(off2, t01_));             \
        pockmcu_write_u32x2_at((d), (off) + 2, pockmcu_sxtab16(off2, t23_), pockmcu_sxtab16_ror8(off2, t23_));         \
    } while (0)

/* One input line into a ring slot d (12 words a ring column), stride 1 along the line: ncol columns Q[j] =
 * (X[j], X[j + 1]), X[j] the input at position j - pad, in the image for j in [x_lo, x_hi) (ip: the group's first
 * channel at column x_lo, step bytes between positions), 0 outside. With 4 channels: the zero columns, the column
 * that enters the image, the columns whose X[j + 1] is in the image (a loop without tests, two a pass), the one that
 * leaves it and the zero columns after it, each without per-column tests. In its own function: the caller's
 * registers stay out of it. */
POCKMCU_DW3_NOINLINE void pockmcu_dw3_fill1(uint32_t *d,
                                            const int8_t *ip,
                                            int32_t step,
                                            int32_t ncol,
                                            int32_t x_lo,
                                            int32_t x_hi,
                                            int32_t nc,
                                            uint32_t off2)
{
    uint32_t p02, p13, c02, c13;
    int32_t j = 0;
    if (nc == 4)
    {
        const int32_t j_end = x_hi - 1 < ncol ? x_hi - 1 : ncol; /* j < j_end: X[j + 1] in the image */
        const int8_t *q;
        int32_t n;
        for (; j + 1 < x_lo && j < ncol; j++, d += 12) /* X[j] and X[j + 1] outside */
        {
            pockmcu_write_u32x2_at(d, 0, 0u, 0u);
            pockmcu_write_u32x2_at(d, 2, 0u, 0u);
        }
        p02 = p13 = 0;
        if (j >= x_lo && j < x_hi) /* x_lo = 0: X[0] in the image */
        {
            POCKMCU_DW3_EXT4(ip + (j - x_lo) * step, p02, p13);
        }
        q = ip + (j + 1 - x_lo) * step;        /* X[j + 1] */
        for (n = (j_end - j) >> 1; n > 0; n--) /* two columns a pass */
        {
            uint32_t a02, a13;
            POCKMCU_DW3_EXT4(q, a02, a13);
            POCKMCU_DW3_STORE_Q(d, 0, p02, p13, a02, a13);
            POCKMCU_DW3_EXT4(q + step, p02, p13);
            q += 2 * step;
            POCKMCU_DW3_STORE_Q(d, 12, a02, a13, p02, p13);
            d += 24;
        }
        if (j_end > j)
        {
            j += (j_end - j) & ~1;
        }
        if (j < j_end)
        {
            POCKMCU_DW3_EXT4(q, c02, c13);
            POCKMCU_DW3_STORE_Q(d, 0, p02, p13, c02, c13);
            p02 = c02;
            p13 = c13;
            j++;
            d += 12;
        }
        if (j < ncol) /* X[j + 1] outside */
        {
            POCKMCU_DW3_STORE_Q(d, 0, p02, p13, 0u, 0u);
            j++;
            d += 12;
        }
        for (; j < ncol; j++, d += 12)
        {
            pockmcu_write_u32x2_at(d, 0, 0u, 0u);
            pockmcu_write_u32x2_at(d, 2, 0u, 0u);
        }
        return;
    }
    /* 1 to 3 channels: p holds the extended X[j] at the top of each loop */
    pockmcu_dw3_ext(ip, step, 0, x_lo, x_hi, nc, off2, &p02, &p13);
    for (; j < ncol; j++, d += 12)
    {
        pockmcu_dw3_ext(ip, step, j + 1, x_lo, x_hi, nc, off2, &c02, &c13);
        POCKMCU_DW3_STORE_Q(d, 0, p02, p13, c02, c13);
        p02 = c02;
        p13 = c13;
    }
}

/* One input line into a ring slot d at stride 2 along the line, compacted: nq columns Q'[i] = (X[2i], X[2i + 1])
 * (the only ones a stride-2 window reads: its first two taps from Q'[i], its third from the low lanes of Q'[i + 1]);
 * arguments as for pockmcu_dw3_fill1, the same pieces without per-column tests for 4 channels. */
POCKMCU_DW3_NOINLINE void pockmcu_dw3_fill2(uint32_t *d,
                                            const int8_t *ip,
                                            int32_t step,
                                            int32_t nq,
                                            int32_t x_lo,
                                            int32_t x_hi,
                                            int32_t nc,
                                            uint32_t off2)
{
    uint32_t p02, p13, c02, c13;
    int32_t i = 0;
    if (nc == 4)
    {
        const int32_t i_end = x_hi / 2 < nq ? x_hi / 2 : nq; /* i < i_end: X[2i + 1] in the image */
        const int8_t *q;
        int32_t n;
        for (; 2 * i + 1 < x_lo && i < nq; i++, d += 12) /* X[2i] and X[2i + 1] outside */
        {
            pockmcu_write_u32x2_at(d, 0, 0u, 0u);
            pockmcu_write_u32x2_at(d, 2, 0u, 0u);
        }
        if (2 * i < x_lo && i < nq) /* 2i + 1 = x_lo: only X[2i + 1] can be in the image */
        {
            c02 = c13 = 0;
            if (2 * i + 1 < x_hi)
            {
                POCKMCU_DW3_EXT4(ip, c02, c13);
            }
            POCKMCU_DW3_STORE_Q(d, 0, 0u, 0u, c02, c13);
            i++;
            d += 12;
        }
        q = ip + (2 * i - x_lo) * step;                 /* X[2i] */
        for (n = (i_end - i) >> 1; n > 0; n--, d += 24) /* two columns a pass */
        {
            POCKMCU_DW3_PAIR_Q(d, 0, pockmcu_read_s8x4(q), pockmcu_read_s8x4(q + step));
            POCKMCU_DW3_PAIR_Q(d, 12, pockmcu_read_s8x4(q + 2 * step), pockmcu_read_s8x4(q + 3 * step));
            q += 4 * step;
        }
        if ((i_end - i) & 1 && i_end > i)
        {
            POCKMCU_DW3_PAIR_Q(d, 0, pockmcu_read_s8x4(q), pockmcu_read_s8x4(q + step));
            q += 2 * step;
            d += 12;
        }
        if (i_end > i)
        {
            i = i_end;
        }
        if (i < nq) /* X[2i + 1] outside */
        {
            p02 = p13 = 0;
            if (2 * i < x_hi && 2 * i >= x_lo)
            {
                POCKMCU_DW3_EXT4(q, p02, p13);
            }
            POCKMCU_DW3_STORE_Q(d, 0, p02, p13, 0u, 0u);
            i++;
            d += 12;
        }
        for (; i < nq; i++, d += 12)
        {
            pockmcu_write_u32x2_at(d, 0, 0u, 0u);
            pockmcu_write_u32x2_at(d, 2, 0u, 0u);
        }
        return;
    }
    for (; i < nq; i++, d += 12)
    {
        pockmcu_dw3_ext(ip, step, 2 * i, x_lo, x_hi, nc, off2, &p02, &p13);
        pockmcu_dw3_ext(ip, step, 2 * i + 1, x_lo, x_hi, nc, off2, &c02, &c13);
        POCKMCU_DW3_STORE_Q(d, 0, p02, p13, c02, c13);
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
    const int32_t in_off = dw_conv_params->input_offset;
    const int32_t out_off = dw_conv_params->output_offset;
    const int32_t act_min = dw_conv_params->activation.min;
    const int32_t act_max = dw_conv_params->activation.max;
    const int32_t *mult = quant_params->multiplier;
    const int32_t *shift = quant_params->shift;
    const uint32_t off2 = ((uint32_t)in_off & 0xFFFFu) | ((uint32_t)in_off << 16);
    const uint32_t lo4 = (uint32_t)(uint8_t)act_min * 0x01010101u;
    const uint32_t hi4 = (uint32_t)(uint8_t)act_max * 0x01010101u;
    const int32_t clamp = act_min > -128 || act_max < 127;
    int32_t ok = dw_conv_params->ch_mult == 1 && output_dims->c == ch && filter_dims->h == 3 && filter_dims->w == 3 &&
        dw_conv_params->dilation.h == 1 && dw_conv_params->dilation.w == 1 && stride_h >= 1 && stride_w >= 1 &&
        out_w >= 1 && out_h >= 1 && ctx != NULL && ctx->buf != NULL &&
        ctx->size >= 4 * pockmcu_dw3_words(out_h, out_w, stride_h, stride_w) + 4;
    /* the geometry of a line: transposed, lines are output columns */
    int32_t tr, lines, len, s_al, s_ac, pad_al, pad_ac, in_len, in_lines, in_step, in_line_step, out_step, out_line;
    int32_t ncol, nfill, x_lo, x_hi, sv, s3;
    uint32_t *buf, *wrot, *ring;
    int32_t b, c, k;

    if (ok) /* B = max |bias| + 9 * 255 * 128 < 2^30, then per channel 1 <= e <= e_max, m >= 0 */
    {
        uint32_t max_bias = 0, neg = 0;
        int32_t s_min = 0, s_max = -1;
        int64_t bound;
        int32_t e_max;
        for (c = 0; bias_data != NULL && c < ch; c++) /* the largest |bias| */
        {
            const int32_t bc = bias_data[c];
            const uint32_t a = bc < 0 ? 0u - (uint32_t)bc : (uint32_t)bc;
            max_bias = a > max_bias ? a : max_bias;
        }
        for (c = 0; c < ch; c++) /* the shifts' range, any negative multiplier */
        {
            const int32_t sc = shift[c];
            s_min = sc < s_min ? sc : s_min;
            s_max = sc > s_max ? sc : s_max;
            neg |= (uint32_t)mult[c];
        }
        bound = (int64_t)max_bias + 9 * 255 * 128;
        for (e_max = 0; e_max < 31 && bound + 3 + ((int64_t)129 << (e_max + 1)) < ((int64_t)1 << 31); e_max++)
        {
        }
        ok = bound < ((int64_t)1 << 30) && s_max <= -1 && -s_min <= e_max && (int32_t)neg >= 0;
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
    tr = pockmcu_dw3_cost(out_w, out_h, stride_h, stride_w) < pockmcu_dw3_cost(out_h, out_w, stride_w, stride_h);
    lines = tr ? out_w : out_h;
    len = tr ? out_h : out_w;
    s_al = tr ? stride_h : stride_w;
    s_ac = tr ? stride_w : stride_h;
    pad_al = tr ? dw_conv_params->padding.h : dw_conv_params->padding.w;
    pad_ac = tr ? dw_conv_params->padding.w : dw_conv_params->padding.h;
    in_len = tr ? in_h : in_w;
    in_lines = tr ? in_w : in_h;
    in_step = tr ? in_w * ch : ch;
    in_line_step = tr ? ch : in_w * ch;
    out_step = tr ? out_w * ch : ch;
    out_line = tr ? ch : out_w * ch;
    ncol = pockmcu_dw3_cols(len, s_al);
    /* the ring columns a line fills: stride 2 along the line keeps only the even columns' Q (compacted) */
    nfill = s_al == 2 ? len + 1 : ncol;
    x_lo = pad_al < ncol ? pad_al : ncol;
    x_hi = pad_al + in_len < ncol ? pad_al + in_len : ncol;
    sv = s_al <= 2 ? s_al : 0;
    s3 = pockmcu_dw3_mod3(s_ac);

    buf = (uint32_t *)(((uintptr_t)ctx->buf + 3u) & ~(uintptr_t)3u);
    wrot = buf;
    ring = buf + POCKMCU_DW3_WROT_WORDS;

    for (b = 0; b < batches; b++)
    {
        const int8_t *in_batch = input_data + b * in_h * in_w * ch;
        int8_t *out_batch = output_data + b * out_h * out_w * ch;
        for (c = 0; c < ch; c += 4)
        {
            const int32_t nc = ch - c < 4 ? ch - c : 4;
            const int8_t *in_lo = in_batch + (x_lo - pad_al) * in_step + c; /* line 0 at column x_lo */
            int32_t oy, h, ky, iy0, r0, last;
            /* the weights, rotation 0 (filter row ky in ring slot ky): per row and channel pair h the words (w0, w1)
             * of each channel and (w2, w2) of the pair, extended and doubled (2w fits 16 bits) */
            for (ky = 0; ky < 3; ky++)
            {
                const int32_t dt = tr ? 3 * ch : ch; /* taps (ky, 0), (ky, 1), (ky, 2) of the line's orientation */
                const int8_t *f = filter_data + (tr ? ky : 3 * ky) * ch + c;
                const uint32_t v0 = pockmcu_dw3_gather(f, nc), v1 = pockmcu_dw3_gather(f + dt, nc);
                const uint32_t v2 = pockmcu_dw3_gather(f + 2 * dt, nc);
                uint32_t e0 = pockmcu_sxtb16(v0), e1 = pockmcu_sxtb16(v1), e2 = pockmcu_sxtb16(v2);
                uint32_t o0 = pockmcu_sxtb16_ror8(v0), o1 = pockmcu_sxtb16_ror8(v1), o2 = pockmcu_sxtb16_ror8(v2);
                uint32_t *d0 = wrot + 3 * ky, *d1 = d0 + POCKMCU_DW3_BLOCK;
                e0 = pockmcu_sadd16(e0, e0);
                e1 = pockmcu_sadd16(e1, e1);
                e2 = pockmcu_sadd16(e2, e2);
                o0 = pockmcu_sadd16(o0, o0);
                o1 = pockmcu_sadd16(o1, o1);
                o2 = pockmcu_sadd16(o2, o2);
                d0[0] = pockmcu_pkhbt_lsl16(e0, e1);
                d0[1] = pockmcu_pkhbt_lsl16(o0, o1);
                d0[2] = pockmcu_pkhbt_lsl16(e2, o2);
                d1[0] = pockmcu_pkhtb_asr16(e1, e0);
                d1[1] = pockmcu_pkhtb_asr16(o1, o0);
                d1[2] = pockmcu_pkhtb_asr16(o2, e2);
            }
            for (k = 0; k < 4; k++) /* the parameters */
            {
                const int32_t e = k < nc ? -shift[c + k] : 1;
                int32_t *p = (int32_t *)wrot + (k >> 1) * POCKMCU_DW3_BLOCK + (k & 1);
                p[POCKMCU_DW3_BIAS] = k < nc && bias_data != NULL ? 2 * bias_data[c + k] : 0;
                p[POCKMCU_DW3_MULT] = k < nc ? mult[c + k] : 0;
                p[POCKMCU_DW3_R] = (int32_t)(((uint32_t)1 << (e - 1)) + (uint32_t)out_off * ((uint32_t)1 << e));
                p[POCKMCU_DW3_E] = e;
            }
            /* rotations 1 and 2 (filter row ky in slot (ky + r) % 3): rotation 0's rows permuted, its parameters */
            for (h = 0; h < 2; h++)
            {
                const uint32_t *s0 = wrot + h * POCKMCU_DW3_BLOCK;
                uint32_t *d1 = wrot + (2 + h) * POCKMCU_DW3_BLOCK, *d2 = wrot + (4 + h) * POCKMCU_DW3_BLOCK;
                uint32_t u0, u1, u2, u3;
                for (k = 0; k < 3; k++) /* rotation 1: slot k + 1 holds row k; rotation 2: slot k + 2 */
                {
                    const int32_t k1 = k == 2 ? 0 : k + 1, k2 = k == 0 ? 2 : k - 1;
                    pockmcu_read_u32x2_at(s0 + 3 * k, 0, &u0, &u1);
                    u2 = s0[3 * k + 2];
                    d1[3 * k1] = u0;
                    d1[3 * k1 + 1] = u1;
                    d1[3 * k1 + 2] = u2;
                    d2[3 * k2] = u0;
                    d2[3 * k2 + 1] = u1;
                    d2[3 * k2 + 2] = u2;
                }
                for (k = POCKMCU_DW3_BIAS; k < POCKMCU_DW3_BLOCK; k += 4) /* the parameters */
                {
                    pockmcu_read_u32x2_at(s0 + k + 2, 0, &u2, &u3);
                    u0 = s0[k];
                    u1 = s0[k + 1];
                    d1[k] = d2[k] = u0;
                    d1[k + 1] = d2[k + 1] = u1;
                    d1[k + 2] = d2[k + 2] = u2;
                    d1[k + 3] = d2[k + 3] = u3;
                }
            }

            /* the ring: input line iy in slot iy mod 3, each line extended once per group (last: the latest one) */
            iy0 = -pad_ac;
            r0 = pockmcu_dw3_mod3(iy0);
            last = iy0 - 1;
            for (oy = 0; oy < lines; oy++, iy0 += s_ac, r0 = r0 + s3 >= 3 ? r0 + s3 - 3 : r0 + s3)
            {
                const uint32_t *wr = wrot + r0 * 2 * POCKMCU_DW3_BLOCK;
                int8_t *out = out_batch + oy * out_line + c;
                int32_t iy = last + 1 > iy0 ? last + 1 : iy0;
                int32_t sl = r0 + iy - iy0 >= 3 ? r0 + iy - iy0 - 3 : r0 + iy - iy0; /* (iy - iy0 <= 2) */
                for (; iy < iy0 + 3; iy++, sl = sl == 2 ? 0 : sl + 1)
                {
                    uint32_t *d = ring + 4 * sl;
                    if (iy < 0 || iy >= in_lines)
                    {
                        int32_t j;
                        for (j = 0; j < nfill; j++, d += 12)
                        {
                            pockmcu_write_u32x2_at(d, 0, 0u, 0u);
                            pockmcu_write_u32x2_at(d, 2, 0u, 0u);
                        }
                    }
                    else if (s_al == 2)
                    {
                        pockmcu_dw3_fill2(d, in_lo + iy * in_line_step, in_step, nfill, x_lo, x_hi, nc, off2);
                    }
                    else
                    {
                        pockmcu_dw3_fill1(d, in_lo + iy * in_line_step, in_step, nfill, x_lo, x_hi, nc, off2);
                    }
                }
                last = iy0 + 2;

                if (nc == 4)
                {
                    if (s_al == 1 && !clamp)
                    {
                        pockmcu_dw3_line4_s1(ring, wr, out, len, 1, out_step, lo4, hi4);
                    }
                    else if (s_al == 1)
                    {
                        pockmcu_dw3_line4_s1c(ring, wr, out, len, 1, out_step, lo4, hi4);
                    }
                    else if (s_al == 2 && !clamp)
                    {
                        pockmcu_dw3_line4_s2(ring, wr, out, len, 2, out_step, lo4, hi4);
                    }
                    else if (s_al == 2)
                    {
                        pockmcu_dw3_line4_s2c(ring, wr, out, len, 2, out_step, lo4, hi4);
                    }
                    else
                    {
                        pockmcu_dw3_line4_any(ring, wr, out, len, s_al, out_step, lo4, hi4);
                    }
                }
                else
                {
                    for (h = 0; 2 * h < nc; h++)
                    {
                        pockmcu_dw3_line(ring + 2 * h,
                                         wr + POCKMCU_DW3_BLOCK * h,
                                         out + 2 * h,
                                         len,
                                         s_al,
                                         out_step,
                                         lo4,
                                         hi4,
                                         sv,
                                         1,
                                         nc - 2 * h >= 2 ? 2 : 1);
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
