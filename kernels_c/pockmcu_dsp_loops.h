/*
 * pockmcu_dsp_loops.h - the loops of the DSP int8 convolution and fully connected kernels
 * (pockmcu_convolve_*_dsp, pockmcu_fully_connected_*_dsp), written only with the wrappers of
 * pockmcu_simd.h: on a core with the DSP extension (Cortex-M4, M7, M33, M55) they are SXTAB16,
 * SXTB16 and SMLAD; elsewhere (Cortex-M3, the host simulation) bit-exact portable C, so the host runs
 * these very loops and its results equal the device's.
 *
 * Every kernel is a matrix multiply out[p][o] = requantize(bias[o] + sum_k col[p][k] * w[o][k]) of
 * "rows" p (output pixels, or FC batches) by filter rows o (output channels, OHWI / [out][in] as
 * stored: weights are read as the model gives them, in flash or in RAM while they train).
 *
 * - Column: the input values of two rows, plus input_offset, are expanded once into int16 lanes in
 *   the caller's scratch (pockmcu_dsp_expand_2), reordered per group of four values (x0 x1 x2 x3) as
 *   the words (x0, x2) and (x1, x3): SXTB16 and SXTB16 ROR #8 of a weight word give (w0, w2) and
 *   (w1, w3), so two SMLAD take four products with no further shuffling. SXTAB16 adds the input
 *   offset in the same instruction that sign-extends, so the offset costs nothing at run time and
 *   needs no compile-time sum of the weights (the kernels serve trained weights in RAM unchanged).
 *   A pointwise convolution expands its input rows directly; any other convolution first gathers
 *   the receptive field of the pixel into int8 (im2col; padding taps hold the input zero point
 *   -input_offset, which the offset turns into 0).
 * - Register blocking: 4 rows x 1 output channel = 4 accumulators; per 4 depth values 4 LDRD of the
 *   column, 1 weight word, 2 sign extensions and 8 SMLAD for 16 MACs (8 depth values per iteration:
 *   about 35 instructions for 32 MACs on Cortex-M4). The accumulators of 8 channels wait on the stack
 *   so that the requantization runs with free registers. The last 1 to 3 rows run 2x2, 2x1, 1x2 and
 *   1x1 versions of the loop (one FC batch: 1x2); the depth % 4 last values are stored one per word
 *   and multiplied by SMLABB.
 * - Small depth (up to 64 values, 16 or more rows): output channel outer over a chunk of rows (pockmcu_dsp_chunk),
 *   see "Small depth" below.
 * - Requantization: TFLite Micro's double rounding MultiplyByQuantizedMultiplier with both roundings
 *   in one 64-bit multiply-accumulate (SMLAL; pockmcu_dsp_requantize shows why it is exact for
 *   multipliers >= 0, which is all QuantizeMultiplier produces); or onnxruntime's
 *   (pockmcu_requantize_ort), with ort_rounding set.
 *
 * The kernels hand a call to the portable kernel (same bytes, no scratch) when the fast path's
 * preconditions do not hold: -127 <= input_offset <= 128 (an int8 zero point), multipliers >= 0 (TFLM
 * numerics), act_min <= act_max, no grouped convolution, a zero FC filter_offset, and a scratch buffer
 * of the size the *_get_buffer_size query asks for.
 */
#ifndef POCKMCU_DSP_LOOPS_H
#define POCKMCU_DSP_LOOPS_H

#include <stdint.h>
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_nn_support_ort.h"
#include "pockmcu_nn_support_tflm.h"
#include "pockmcu_simd.h"

#if defined(__GNUC__) || defined(__clang__)
    #define POCKMCU_DSP_INLINE static inline __attribute__((always_inline))
#else
    #define POCKMCU_DSP_INLINE static inline
#endif

/* Scratch words of the expanded column of `rows` (1, 2 or 4) rows of `depth` values. */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_col_words(int32_t depth, int32_t rows)
{
    return rows * ((depth >> 2) * 2 + (depth & 3));
}

/* TFLM's MultiplyByQuantizedMultiplier (double rounding) for mult >= 0, split into what depends on the
 * channel (pockmcu_dsp_channel, computed once per channel) and what depends on the accumulator. */
typedef struct
{
    int32_t mult;   /* multiplier (TFLM) or mantissa (onnxruntime) */
    int32_t shift;  /* shift (TFLM) or exponent (onnxruntime) */
    int32_t left;   /* max(shift, 0) */
    int32_t right;  /* max(-shift, 0) */
    int32_t right1; /* right - 1 when right > 0 */
    int64_t base;   /* 2^30 + 2^(right - 1) * 2^31 when right > 0 */
} pockmcu_dsp_channel;

POCKMCU_DSP_INLINE pockmcu_dsp_channel pockmcu_dsp_channel_of(int32_t mult, int32_t shift)
{
    pockmcu_dsp_channel c;
    c.mult = mult;
    c.shift = shift;
    c.left = shift > 0 ? shift : 0;
    c.right = shift > 0 ? 0 : -shift;
    c.right1 = c.right > 0 ? c.right - 1 : 0;
    /* 2^30 + 2^(right + 30) as its two words (no variable 64-bit shift). TFLM's shifts give right <= 31;
     * an onnxruntime exponent (ort rounding, which never reads base) reaches -35 for a scale of 2^-12 and
     * beyond: no shift of 32 bits or more is made for it. */
    c.base = (int64_t)(((uint64_t)(c.right >= 2 && c.right <= 33 ? (uint32_t)1 << (c.right - 2) : 0u) << 32) |
                       (c.right == 1 ? 0xC0000000u : 0x40000000u));
    return c;
}

/* TFLM: RoundingDivideByPOT(SaturatingRoundingDoublingHighMul(acc * 2^left, mult), right), mult >= 0.
 * - floor((x * m + 2^30) / 2^31) is SaturatingRoundingDoublingHighMul(x, m) for all x, m but
 *   x = m = INT32_MIN (the floor of the nudged product equals gemmlowp's truncation toward zero with
 *   its signed nudge);
 * - RoundingDivideByPOT(h, r), r > 0 (half away from zero), is floor((h + 2^(r-1) - [h < 0]) / 2^r), and
 *   floor((floor(P / 2^31) + n) / 2^r) = floor((P + n 2^31) / 2^(31 + r)): both roundings are one 64-bit
 *   multiply-accumulate (SMLAL, no int32 overflow for any h) whose high word shifted right by r - 1 is the
 *   result. [h < 0] may be read as [acc < 0] when m >= 0: they differ only when acc * m lies in
 *   [-2^30, 0), where both sums floor to 0.
 * left > 0 implies right = 0. */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_requantize(int32_t acc, const pockmcu_dsp_channel *c)
{
    if (c->right == 0)
    {
        const int64_t p = (int64_t)pockmcu_wrap_shl(acc, c->left) * (int64_t)c->mult + ((int64_t)1 << 30);
        return (int32_t)(p >> 31);
    }
    else
    {
        /* base - 2^31 when acc < 0, as 2^31 - 2^32 (one AND, ADDS, ADC on the halves) */
        const int64_t init =
            c->base + (int64_t)((uint32_t)acc & 0x80000000u) + (int64_t)(acc >> 31) * ((int64_t)1 << 32);
        const int64_t p = init + (int64_t)acc * (int64_t)c->mult;
        return (int32_t)(p >> 32) >> c->right1;
    }
}

/* Bias, requantization and output stage of the kernels. */
typedef struct
{
    const int32_t *bias;       /* NULL: none */
    const int32_t *multiplier; /* per channel, or [0] for all */
    const int32_t *shift;
    int32_t output_offset;
    int32_t act_min;
    int32_t act_max;
    int32_t fast;  /* pockmcu_dsp_fast_requant_ok: the SMMLAR requantization of pockmcu_dsp_out_fast is exact */
    int32_t clamp; /* the activation range is narrower than int8 */
    int32_t m0;    /* per tensor and fast: multiplier[0], -shift[0] and the r of pockmcu_dsp_out_fast, once a call */
    int32_t e0;
    int32_t r0;
} pockmcu_dsp_requant;

/* Whether pockmcu_dsp_out_fast equals TFLM's requantization for every accumulator of this call: per channel
 * (n of them) shift in [-31, -1] (a scale below 1/2), multiplier >= 0, and with B = a bound of |bias| (below twice
 * the largest) + depth * 255 * 128 (|x + input_offset| <= 255, |w| <= 128) B < 2^30 and B + 3 + 129 * 2^-shift <
 * 2^31 (the folded output offset and rounding of pockmcu_dsp_out_fast stay in 32 bits). O(1) a channel: a call of
 * a small layer cannot amortize more. */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_fast_requant_ok(const int32_t *bias,
                                                       const int32_t *mult,
                                                       const int32_t *shift,
                                                       int32_t n,
                                                       int32_t n_bias,
                                                       int32_t depth)
{
    /* |b| <= (b ^ (b >> 31)) + 1 <= bits + 1, bits the OR of every b ^ (b >> 31) (below 2^31): a bound within
     * twice the largest |b| for three instructions a bias */
    uint32_t bits = 0, max_bias, bound;
    int32_t i;
    for (i = 0; bias != NULL && i + 2 <= n_bias; i += 2)
    {
        bits |= (uint32_t)(bias[i] ^ (bias[i] >> 31)) | (uint32_t)(bias[i + 1] ^ (bias[i + 1] >> 31));
    }
    if (bias != NULL && i < n_bias)
    {
        bits |= (uint32_t)(bias[i] ^ (bias[i] >> 31));
    }
    max_bias = bits + 1u;
    if (max_bias >= (1u << 30) || depth < 0 || depth > 32896)
    {
        return 0;
    }
    bound = max_bias + (uint32_t)depth * (255u * 128u); /* < 2^30 + 2^30: no wrap */
    if (bound >= (1u << 30))
    {
        return 0;
    }
    /* e = -shift: 1 <= e and B + 3 + 129 * 2^e < 2^31, which needs e <= 23 (129 * 2^24 > 2^31), so the sum of
     * B < 2^30 and 129 * 2^e < 2^31 is computed without wrap in 32 bits */
    for (i = 0; i < n; i++)
    {
        const int32_t e = -shift[i];
        if (e < 1 || e > 23 || mult[i] < 0 || bound + 3u + (129u << e) >= (1u << 31))
        {
            return 0;
        }
    }
    return 1;
}

/* TFLM's requantization, output offset and int8 saturation when pockmcu_dsp_fast_requant_ok holds:
 * SMMULR(2 acc, m) is SaturatingRoundingDoublingHighMul(acc, m) (|2 acc| < 2^31); RoundingDivideByPOT(x, e),
 * e >= 1, is (x + 2^(e-1) - [x < 0]) >> e, and [x < 0] may be read as [acc < 0] for m >= 0 (x <= 0 when
 * acc < 0, and x = 0 rounds to 0 either way); out_off * 2^e added before the shift adds out_off after it. So:
 * ADD (r + (acc >> 31), r = 2^(e-1) + out_off * 2^e), SMMLAR, ASR, SSAT #8. */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_out_fast(int32_t acc, int32_t m, int32_t r, int32_t e)
{
    return pockmcu_ssat8(pockmcu_smmlar((int32_t)((uint32_t)acc << 1), m, r + (acc >> 31)) >> e);
}

/* r of pockmcu_dsp_out_fast for a right shift e >= 1 and an output offset. */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_fast_round(int32_t e, int32_t out_off)
{
    return (int32_t)(((uint32_t)1 << (e - 1)) + (uint32_t)out_off * ((uint32_t)1 << e));
}

/* q->m0, e0, r0 from multiplier[0] and shift[0] (read only for a per-tensor layer with q->fast). */
POCKMCU_DSP_INLINE void pockmcu_dsp_requant_per_tensor(pockmcu_dsp_requant *q)
{
    q->m0 = q->multiplier[0];
    q->e0 = -q->shift[0];
    q->r0 = q->fast ? pockmcu_dsp_fast_round(q->e0, q->output_offset) : 0;
}

/* Requantization constants of output channel o (per_channel constant). */
POCKMCU_DSP_INLINE pockmcu_dsp_channel pockmcu_dsp_channel_at(const pockmcu_dsp_requant *q,
                                                              int32_t o,
                                                              const int32_t per_channel)
{
    return pockmcu_dsp_channel_of(q->multiplier[per_channel ? o : 0], q->shift[per_channel ? o : 0]);
}

POCKMCU_DSP_INLINE int32_t pockmcu_dsp_bias_at(const pockmcu_dsp_requant *q, int32_t o)
{
    return q->bias != NULL ? q->bias[o] : 0;
}

POCKMCU_DSP_INLINE int8_t pockmcu_dsp_out(int32_t acc,
                                          const pockmcu_dsp_channel *c,
                                          const pockmcu_dsp_requant *q,
                                          const int32_t ort_rounding)
{
    int32_t v = ort_rounding ? pockmcu_requantize_ort(acc, c->mult, c->shift) : pockmcu_dsp_requantize(acc, c);
    v += q->output_offset;
    v = v < q->act_min ? q->act_min : v; /* = pockmcu_clamp_i32 as act_min <= act_max (checked on entry) */
    v = v > q->act_max ? q->act_max : v;
    return (int8_t)v;
}

/* The output of channel o: pockmcu_dsp_out_fast when the call allows it (q->fast), else pockmcu_dsp_out. */
POCKMCU_DSP_INLINE int8_t pockmcu_dsp_out_at(int32_t acc,
                                             int32_t o,
                                             const pockmcu_dsp_requant *q,
                                             const int32_t per_channel,
                                             const int32_t ort_rounding)
{
    if (!ort_rounding && q->fast)
    {
        const int32_t e = per_channel ? -q->shift[o] : q->e0;
        const int32_t r = per_channel ? pockmcu_dsp_fast_round(e, q->output_offset) : q->r0;
        int32_t v = pockmcu_dsp_out_fast(acc, per_channel ? q->multiplier[o] : q->m0, r, e);
        if (q->clamp)
        {
            v = v < q->act_min ? q->act_min : v;
            v = v > q->act_max ? q->act_max : v;
        }
        return (int8_t)v;
    }
    else
    {
        const pockmcu_dsp_channel c = pockmcu_dsp_channel_at(q, o, per_channel);
        return pockmcu_dsp_out(acc, &c, q, ort_rounding);
    }
}

/* The int8 clamp of four outputs to [act_min, act_max] (q->clamp): one packed word, SIMD byte min and max. */
POCKMCU_DSP_INLINE uint32_t pockmcu_dsp_clamp_4(const pockmcu_dsp_requant *q, uint32_t p)
{
    const uint32_t lo4 = (uint32_t)(uint8_t)q->act_min * 0x01010101u;
    const uint32_t hi4 = (uint32_t)(uint8_t)q->act_max * 0x01010101u;
    return pockmcu_min_s8x4(pockmcu_max_s8x4(p, lo4), hi4);
}

/* Outputs o .. o + 3 of the accumulators s[0..3] into out[0..3]: with the fast requantization the
 * constants of a per-tensor layer are the call's (q->m0, e0, r0) and the clamp, when there is one, takes the
 * four values at once; else pockmcu_dsp_out_at. */
POCKMCU_DSP_INLINE void pockmcu_dsp_out_4(const int32_t *s,
                                          int32_t o,
                                          const pockmcu_dsp_requant *q,
                                          int8_t *out,
                                          const int32_t per_channel,
                                          const int32_t ort_rounding)
{
    if (!ort_rounding && q->fast)
    {
        uint32_t p;
        if (per_channel)
        {
            const int32_t e0 = -q->shift[o], e1 = -q->shift[o + 1], e2 = -q->shift[o + 2], e3 = -q->shift[o + 3];
            p = pockmcu_pack_s8x4(
                pockmcu_dsp_out_fast(s[0], q->multiplier[o], pockmcu_dsp_fast_round(e0, q->output_offset), e0),
                pockmcu_dsp_out_fast(s[1], q->multiplier[o + 1], pockmcu_dsp_fast_round(e1, q->output_offset), e1),
                pockmcu_dsp_out_fast(s[2], q->multiplier[o + 2], pockmcu_dsp_fast_round(e2, q->output_offset), e2),
                pockmcu_dsp_out_fast(s[3], q->multiplier[o + 3], pockmcu_dsp_fast_round(e3, q->output_offset), e3));
        }
        else
        {
            const int32_t m = q->m0, e = q->e0, r = q->r0;
            p = pockmcu_pack_s8x4(pockmcu_dsp_out_fast(s[0], m, r, e),
                                  pockmcu_dsp_out_fast(s[1], m, r, e),
                                  pockmcu_dsp_out_fast(s[2], m, r, e),
                                  pockmcu_dsp_out_fast(s[3], m, r, e));
        }
        if (q->clamp)
        {
            p = pockmcu_dsp_clamp_4(q, p);
        }
        out[0] = (int8_t)p;
        out[1] = (int8_t)(p >> 8);
        out[2] = (int8_t)(p >> 16);
        out[3] = (int8_t)(p >> 24);
    }
    else if (!per_channel) /* unrolled: s[] stays in registers (the per-channel kernels, convolutions among them,
                            * allocate their registers better with the loop) */
    {
        out[0] = pockmcu_dsp_out_at(s[0], o, q, per_channel, ort_rounding);
        out[1] = pockmcu_dsp_out_at(s[1], o + 1, q, per_channel, ort_rounding);
        out[2] = pockmcu_dsp_out_at(s[2], o + 2, q, per_channel, ort_rounding);
        out[3] = pockmcu_dsp_out_at(s[3], o + 3, q, per_channel, ort_rounding);
    }
    else
    {
        int32_t k;
        for (k = 0; k < 4; k++)
        {
            out[k] = pockmcu_dsp_out_at(s[k], o + k, q, per_channel, ort_rounding);
        }
    }
}

/* Whether a multiplier array holds a negative value (QuantizeMultiplier never makes one; the fast TFLM
 * requantization assumes none). */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_has_negative_multiplier(const int32_t *mult, int32_t n)
{
    int32_t i;
    for (i = 0; i < n; i++)
    {
        if (mult[i] < 0)
        {
            return 1;
        }
    }
    return 0;
}

/* Row r of a column of `rows` rows: `depth` int8 values plus offset (offset2: the offset in both 16-bit
 * lanes). Per group of four values (x0 x1 x2 x3) the column holds, row after row, the words (x0, x2) and
 * (x1, x3) as int16 lanes (2 * rows words a group); then the depth % 4 last values, one word each, row
 * after row per value. */
POCKMCU_DSP_INLINE void pockmcu_dsp_expand(const int8_t *src,
                                           int32_t depth,
                                           uint32_t offset2,
                                           int32_t offset,
                                           int32_t rows,
                                           int32_t r,
                                           uint32_t *col)
{
    uint32_t *dst = col + 2 * r;
    int32_t g;
    for (g = depth >> 2; g > 0; g--)
    {
        const uint32_t v = pockmcu_read_s8x4_ia(&src);
        dst[0] = pockmcu_sxtab16(offset2, v);
        dst[1] = pockmcu_sxtab16_ror8(offset2, v);
        dst += 2 * rows;
    }
    dst -= r;
    for (g = depth & 3; g > 0; g--)
    {
        *dst = (uint32_t)((int32_t)*src++ + offset);
        dst += rows;
    }
}

/* One group of four depth values of the 4-row column (col advances by 8 words) against the expanded weight
 * words (w02, w13): s[r] += 4 products. */
#define POCKMCU_DSP_STEP_4X1X(col, w02, w13, s0, s1, s2, s3)                                                           \
    do                                                                                                                 \
    {                                                                                                                  \
        uint32_t x02_, x13_;                                                                                           \
        pockmcu_read_u32x2_ia(&(col), &x02_, &x13_);                                                                   \
        s0 = pockmcu_smlad(x02_, w02, s0);                                                                             \
        s0 = pockmcu_smlad(x13_, w13, s0);                                                                             \
        pockmcu_read_u32x2_ia(&(col), &x02_, &x13_);                                                                   \
        s1 = pockmcu_smlad(x02_, w02, s1);                                                                             \
        s1 = pockmcu_smlad(x13_, w13, s1);                                                                             \
        pockmcu_read_u32x2_ia(&(col), &x02_, &x13_);                                                                   \
        s2 = pockmcu_smlad(x02_, w02, s2);                                                                             \
        s2 = pockmcu_smlad(x13_, w13, s2);                                                                             \
        pockmcu_read_u32x2_ia(&(col), &x02_, &x13_);                                                                   \
        s3 = pockmcu_smlad(x02_, w02, s3);                                                                             \
        s3 = pockmcu_smlad(x13_, w13, s3);                                                                             \
    } while (0)

/* One group of four depth values of the 4-row column (read at col, which advances by 8 words) against one
 * weight word v: s[r] += 4 products (v sign-extended, then POCKMCU_DSP_STEP_4X1X). */
#define POCKMCU_DSP_STEP_4X1(col, v, s0, s1, s2, s3)                                                                   \
    do                                                                                                                 \
    {                                                                                                                  \
        const uint32_t w02_ = pockmcu_sxtb16(v);                                                                       \
        const uint32_t w13_ = pockmcu_sxtb16_ror8(v);                                                                  \
        POCKMCU_DSP_STEP_4X1X(col, w02_, w13_, s0, s1, s2, s3);                                                        \
    } while (0)

/* s[r] = bias + row r of the 4-row column . filter row w, r < 4: 16 MACs per weight word, 8 depth values
 * per iteration. aligned (a constant): w is word-aligned and depth % 4 == 0, so the two weight words of an
 * iteration are one LDRD. */
POCKMCU_DSP_INLINE void pockmcu_dsp_dot_4x1(const uint32_t *col,
                                            const int8_t *w,
                                            int32_t depth,
                                            int32_t bias,
                                            int32_t *s,
                                            const int32_t aligned)
{
    int32_t a0 = bias, a1 = bias, a2 = bias, a3 = bias;
    int32_t g;
    for (g = depth >> 3; g > 0; g--)
    {
        uint32_t v0, v1;
        if (aligned)
        {
            pockmcu_read_s8x8_ia(&w, &v0, &v1);
        }
        else
        {
            v0 = pockmcu_read_s8x4_ia(&w);
            v1 = pockmcu_read_s8x4_ia(&w);
        }
        POCKMCU_DSP_STEP_4X1(col, v0, a0, a1, a2, a3);
        POCKMCU_DSP_STEP_4X1(col, v1, a0, a1, a2, a3);
    }
    if (depth & 4)
    {
        const uint32_t v0 = pockmcu_read_s8x4_ia(&w);
        POCKMCU_DSP_STEP_4X1(col, v0, a0, a1, a2, a3);
    }
    if (!aligned)
    {
        for (g = depth & 3; g > 0; g--)
        {
            const uint32_t u = (uint32_t)(int32_t)*w++;
            a0 = pockmcu_smlabb(col[0], u, a0);
            a1 = pockmcu_smlabb(col[1], u, a1);
            a2 = pockmcu_smlabb(col[2], u, a2);
            a3 = pockmcu_smlabb(col[3], u, a3);
            col += 4;
        }
    }
    s[0] = a0;
    s[1] = a1;
    s[2] = a2;
    s[3] = a3;
}

/* s[r][c] += row r of the 2-row column . filter row c (wa, wb), over depth values. */
POCKMCU_DSP_INLINE void pockmcu_dsp_dot_2x2(const uint32_t *col,
                                            const int8_t *wa,
                                            const int8_t *wb,
                                            int32_t depth,
                                            int32_t *s00,
                                            int32_t *s01,
                                            int32_t *s10,
                                            int32_t *s11)
{
    int32_t a00 = *s00, a01 = *s01, a10 = *s10, a11 = *s11;
    int32_t g;
    for (g = depth >> 2; g > 0; g--)
    {
        const uint32_t x02 = col[0];
        const uint32_t x13 = col[1];
        const uint32_t y02 = col[2];
        const uint32_t y13 = col[3];
        uint32_t w = pockmcu_read_s8x4_ia(&wa);
        uint32_t w02 = pockmcu_sxtb16(w);
        uint32_t w13 = pockmcu_sxtb16_ror8(w);
        col += 4;
        a00 = pockmcu_smlad(x02, w02, a00);
        a00 = pockmcu_smlad(x13, w13, a00);
        a10 = pockmcu_smlad(y02, w02, a10);
        a10 = pockmcu_smlad(y13, w13, a10);
        w = pockmcu_read_s8x4_ia(&wb);
        w02 = pockmcu_sxtb16(w);
        w13 = pockmcu_sxtb16_ror8(w);
        a01 = pockmcu_smlad(x02, w02, a01);
        a01 = pockmcu_smlad(x13, w13, a01);
        a11 = pockmcu_smlad(y02, w02, a11);
        a11 = pockmcu_smlad(y13, w13, a11);
    }
    for (g = depth & 3; g > 0; g--)
    {
        const uint32_t u = (uint32_t)(int32_t)*wa++;
        const uint32_t v = (uint32_t)(int32_t)*wb++;
        a00 = pockmcu_smlabb(col[0], u, a00);
        a01 = pockmcu_smlabb(col[0], v, a01);
        a10 = pockmcu_smlabb(col[1], u, a10);
        a11 = pockmcu_smlabb(col[1], v, a11);
        col += 2;
    }
    *s00 = a00;
    *s01 = a01;
    *s10 = a10;
    *s11 = a11;
}

/* s[r] += row r of the 2-row column . filter row w. */
POCKMCU_DSP_INLINE void
pockmcu_dsp_dot_2x1(const uint32_t *col, const int8_t *w, int32_t depth, int32_t *s0, int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1;
    int32_t g;
    for (g = depth >> 2; g > 0; g--)
    {
        const uint32_t v = pockmcu_read_s8x4_ia(&w);
        const uint32_t w02 = pockmcu_sxtb16(v);
        const uint32_t w13 = pockmcu_sxtb16_ror8(v);
        a0 = pockmcu_smlad(col[0], w02, a0);
        a0 = pockmcu_smlad(col[1], w13, a0);
        a1 = pockmcu_smlad(col[2], w02, a1);
        a1 = pockmcu_smlad(col[3], w13, a1);
        col += 4;
    }
    for (g = depth & 3; g > 0; g--)
    {
        const uint32_t u = (uint32_t)(int32_t)*w++;
        a0 = pockmcu_smlabb(col[0], u, a0);
        a1 = pockmcu_smlabb(col[1], u, a1);
        col += 2;
    }
    *s0 = a0;
    *s1 = a1;
}

/* s[c] += the 1-row column . filter row c (wa, wb). */
POCKMCU_DSP_INLINE void
pockmcu_dsp_dot_1x2(const uint32_t *col, const int8_t *wa, const int8_t *wb, int32_t depth, int32_t *s0, int32_t *s1)
{
    int32_t a0 = *s0, a1 = *s1;
    int32_t g;
    uint32_t x02, x13, v;
    for (g = depth >> 2; g > 0; g--)
    {
        pockmcu_read_u32x2_ia(&col, &x02, &x13);
        v = pockmcu_read_s8x4_ia(&wa);
        a0 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a0);
        a0 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a0);
        v = pockmcu_read_s8x4_ia(&wb);
        a1 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a1);
        a1 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a1);
    }
    for (g = depth & 3; g > 0; g--)
    {
        a0 = pockmcu_smlabb(col[0], (uint32_t)(int32_t)*wa++, a0);
        a1 = pockmcu_smlabb(col[0], (uint32_t)(int32_t)*wb++, a1);
        col++;
    }
    *s0 = a0;
    *s1 = a1;
}

/* s[c] += the 1-row column . filter row c (w, w + depth, w + 2 depth, w + 3 depth): 4 output channels a pass share
 * each column load (16 MACs per LDRD of the column, 4 weight words). */
POCKMCU_DSP_INLINE void pockmcu_dsp_dot_1x4(const uint32_t *col, const int8_t *w, int32_t depth, int32_t *s)
{
    const int8_t *wa = w, *wb = w + depth, *wc = w + 2 * depth, *wd = w + 3 * depth;
    int32_t a0 = s[0], a1 = s[1], a2 = s[2], a3 = s[3];
    int32_t g;
    uint32_t x02, x13, v;
    for (g = depth >> 3; g > 0; g--) /* 8 depth values a pass: the loop test once per 32 MACs */
    {
        pockmcu_read_u32x2_ia(&col, &x02, &x13);
        v = pockmcu_read_s8x4_ia(&wa);
        a0 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a0);
        a0 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a0);
        POCKMCU_ORDER_AFTER(wb, a0);
        v = pockmcu_read_s8x4_ia(&wb);
        a1 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a1);
        a1 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a1);
        POCKMCU_ORDER_AFTER(wc, a1);
        v = pockmcu_read_s8x4_ia(&wc);
        a2 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a2);
        a2 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a2);
        POCKMCU_ORDER_AFTER(wd, a2);
        v = pockmcu_read_s8x4_ia(&wd);
        a3 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a3);
        a3 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a3);
        POCKMCU_ORDER_AFTER(wa, a3);
        pockmcu_read_u32x2_ia(&col, &x02, &x13);
        v = pockmcu_read_s8x4_ia(&wa);
        a0 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a0);
        a0 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a0);
        POCKMCU_ORDER_AFTER(wb, a0);
        v = pockmcu_read_s8x4_ia(&wb);
        a1 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a1);
        a1 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a1);
        POCKMCU_ORDER_AFTER(wc, a1);
        v = pockmcu_read_s8x4_ia(&wc);
        a2 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a2);
        a2 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a2);
        POCKMCU_ORDER_AFTER(wd, a2);
        v = pockmcu_read_s8x4_ia(&wd);
        a3 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a3);
        a3 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a3);
        POCKMCU_ORDER_AFTER(wa, a3);
    }
    if (depth & 4)
    {
        pockmcu_read_u32x2_ia(&col, &x02, &x13);
        v = pockmcu_read_s8x4_ia(&wa);
        a0 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a0);
        a0 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a0);
        POCKMCU_ORDER_AFTER(wb, a0);
        v = pockmcu_read_s8x4_ia(&wb);
        a1 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a1);
        a1 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a1);
        POCKMCU_ORDER_AFTER(wc, a1);
        v = pockmcu_read_s8x4_ia(&wc);
        a2 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a2);
        a2 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a2);
        POCKMCU_ORDER_AFTER(wd, a2);
        v = pockmcu_read_s8x4_ia(&wd);
        a3 = pockmcu_smlad(x02, pockmcu_sxtb16(v), a3);
        a3 = pockmcu_smlad(x13, pockmcu_sxtb16_ror8(v), a3);
        POCKMCU_ORDER_AFTER(wa, a3);
    }
    for (g = depth & 3; g > 0; g--)
    {
        a0 = pockmcu_smlabb(col[0], (uint32_t)(int32_t)*wa++, a0);
        a1 = pockmcu_smlabb(col[0], (uint32_t)(int32_t)*wb++, a1);
        a2 = pockmcu_smlabb(col[0], (uint32_t)(int32_t)*wc++, a2);
        a3 = pockmcu_smlabb(col[0], (uint32_t)(int32_t)*wd++, a3);
        col++;
    }
    s[0] = a0;
    s[1] = a1;
    s[2] = a2;
    s[3] = a3;
}

/* s += the 1-row column . filter row w. */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_dot_1x1(const uint32_t *col, const int8_t *w, int32_t depth, int32_t s)
{
    int32_t g;
    for (g = depth >> 2; g > 0; g--)
    {
        const uint32_t v = pockmcu_read_s8x4_ia(&w);
        s = pockmcu_smlad(col[0], pockmcu_sxtb16(v), s);
        s = pockmcu_smlad(col[1], pockmcu_sxtb16_ror8(v), s);
        col += 2;
    }
    for (g = depth & 3; g > 0; g--)
    {
        s = pockmcu_smlabb(col[0], (uint32_t)(int32_t)*w++, s);
        col++;
    }
    return s;
}

/* Output channels per pass of pockmcu_dsp_rows_4: their accumulators wait on the stack, so that the matrix
 * multiply and the requantization each run with the registers to themselves. */
#define POCKMCU_DSP_CHUNK 8

/* Every output channel of four rows (a 4-row column) into out + r * out_stride, r < 4. */
POCKMCU_DSP_INLINE void pockmcu_dsp_rows_4(const uint32_t *col,
                                           const int8_t *filter,
                                           int32_t depth,
                                           int32_t out_c,
                                           const pockmcu_dsp_requant *q,
                                           int8_t *out,
                                           int32_t out_stride,
                                           const int32_t per_channel,
                                           const int32_t ort_rounding)
{
    int32_t acc[4 * POCKMCU_DSP_CHUNK];
    int8_t stage[4 * POCKMCU_DSP_CHUNK];
    const int8_t *w = filter;
    int32_t o0, i, r;
    for (o0 = 0; o0 < out_c; o0 += POCKMCU_DSP_CHUNK)
    {
        const int32_t n = out_c - o0 < POCKMCU_DSP_CHUNK ? out_c - o0 : POCKMCU_DSP_CHUNK;
        if ((((uintptr_t)filter) & 3u) == 0u && (depth & 3) == 0)
        {
            for (i = 0; i < n; i++)
            {
                pockmcu_dsp_dot_4x1(col, w, depth, pockmcu_dsp_bias_at(q, o0 + i), acc + 4 * i, 1);
                w += depth;
            }
        }
        else
        {
            for (i = 0; i < n; i++)
            {
                pockmcu_dsp_dot_4x1(col, w, depth, pockmcu_dsp_bias_at(q, o0 + i), acc + 4 * i, 0);
                w += depth;
            }
        }
        /* outputs go to stage[r][i] (constant offsets), then row by row to out */
        if (!ort_rounding && q->fast)
        {
            const int32_t *a = acc;
            for (i = 0; i < n; i++, a += 4)
            {
                const int32_t m = per_channel ? q->multiplier[o0 + i] : q->m0;
                const int32_t e = per_channel ? -q->shift[o0 + i] : q->e0;
                const int32_t rr = per_channel ? pockmcu_dsp_fast_round(e, q->output_offset) : q->r0;
                int32_t v0 = pockmcu_dsp_out_fast(a[0], m, rr, e), v1 = pockmcu_dsp_out_fast(a[1], m, rr, e);
                int32_t v2 = pockmcu_dsp_out_fast(a[2], m, rr, e), v3 = pockmcu_dsp_out_fast(a[3], m, rr, e);
                int8_t *st = stage + i;
                if (q->clamp)
                {
                    const uint32_t lo4 = (uint32_t)(uint8_t)q->act_min * 0x01010101u;
                    const uint32_t hi4 = (uint32_t)(uint8_t)q->act_max * 0x01010101u;
                    const uint32_t p = pockmcu_min_s8x4(pockmcu_max_s8x4(pockmcu_pack_s8x4(v0, v1, v2, v3), lo4), hi4);
                    v0 = (int32_t)p;
                    v1 = (int32_t)(p >> 8);
                    v2 = (int32_t)(p >> 16);
                    v3 = (int32_t)(p >> 24);
                }
                st[0] = (int8_t)v0;
                st[POCKMCU_DSP_CHUNK] = (int8_t)v1;
                st[2 * POCKMCU_DSP_CHUNK] = (int8_t)v2;
                st[3 * POCKMCU_DSP_CHUNK] = (int8_t)v3;
            }
        }
        else
        {
            for (i = 0; i < n; i++)
            {
                const pockmcu_dsp_channel c = pockmcu_dsp_channel_at(q, o0 + i, per_channel);
                int8_t *s = stage + i;
                s[0] = pockmcu_dsp_out(acc[4 * i], &c, q, ort_rounding);
                s[POCKMCU_DSP_CHUNK] = pockmcu_dsp_out(acc[4 * i + 1], &c, q, ort_rounding);
                s[2 * POCKMCU_DSP_CHUNK] = pockmcu_dsp_out(acc[4 * i + 2], &c, q, ort_rounding);
                s[3 * POCKMCU_DSP_CHUNK] = pockmcu_dsp_out(acc[4 * i + 3], &c, q, ort_rounding);
            }
        }
        if (n == POCKMCU_DSP_CHUNK)
        {
            for (r = 0; r < 4; r++)
            {
                memcpy(out + r * out_stride + o0, stage + r * POCKMCU_DSP_CHUNK, POCKMCU_DSP_CHUNK);
            }
        }
        else
        {
            for (r = 0; r < 4; r++)
            {
                memcpy(out + r * out_stride + o0, stage + r * POCKMCU_DSP_CHUNK, (size_t)n);
            }
        }
    }
}

/* Every output channel of two rows (a 2-row column) into out and out + out_stride. */
POCKMCU_DSP_INLINE void pockmcu_dsp_rows_2(const uint32_t *col,
                                           const int8_t *filter,
                                           int32_t depth,
                                           int32_t out_c,
                                           const pockmcu_dsp_requant *q,
                                           int8_t *out,
                                           int32_t out_stride,
                                           const int32_t per_channel,
                                           const int32_t ort_rounding)
{
    const int8_t *w = filter;
    int32_t o;
    for (o = 0; o + 2 <= out_c; o += 2)
    {
        const int32_t b0 = pockmcu_dsp_bias_at(q, o);
        const int32_t b1 = pockmcu_dsp_bias_at(q, o + 1);
        int32_t s00 = b0, s01 = b1, s10 = b0, s11 = b1;
        pockmcu_dsp_dot_2x2(col, w, w + depth, depth, &s00, &s01, &s10, &s11);
        w += 2 * depth;
        out[o] = pockmcu_dsp_out_at(s00, o, q, per_channel, ort_rounding);
        out[o + 1] = pockmcu_dsp_out_at(s01, o + 1, q, per_channel, ort_rounding);
        out[out_stride + o] = pockmcu_dsp_out_at(s10, o, q, per_channel, ort_rounding);
        out[out_stride + o + 1] = pockmcu_dsp_out_at(s11, o + 1, q, per_channel, ort_rounding);
    }
    if (o < out_c)
    {
        const int32_t b0 = pockmcu_dsp_bias_at(q, o);
        int32_t s0 = b0, s1 = b0;
        pockmcu_dsp_dot_2x1(col, w, depth, &s0, &s1);
        out[o] = pockmcu_dsp_out_at(s0, o, q, per_channel, ort_rounding);
        out[out_stride + o] = pockmcu_dsp_out_at(s1, o, q, per_channel, ort_rounding);
    }
}

/* Every output channel of one row (a 1-row column) into out: 4 channels a pass, then 2, then 1. */
POCKMCU_DSP_INLINE void pockmcu_dsp_rows_1(const uint32_t *col,
                                           const int8_t *filter,
                                           int32_t depth,
                                           int32_t out_c,
                                           const pockmcu_dsp_requant *q,
                                           int8_t *out,
                                           const int32_t per_channel,
                                           const int32_t ort_rounding)
{
    const int8_t *w = filter;
    int32_t o;
    for (o = 0; o + 4 <= out_c; o += 4)
    {
        int32_t s[4] = {0, 0, 0, 0};
        if (q->bias != NULL)
        {
            s[0] = q->bias[o];
            s[1] = q->bias[o + 1];
            s[2] = q->bias[o + 2];
            s[3] = q->bias[o + 3];
        }
        pockmcu_dsp_dot_1x4(col, w, depth, s);
        w += 4 * depth;
        pockmcu_dsp_out_4(s, o, q, out + o, per_channel, ort_rounding);
    }
    if (o + 2 <= out_c)
    {
        int32_t s0 = pockmcu_dsp_bias_at(q, o);
        int32_t s1 = pockmcu_dsp_bias_at(q, o + 1);
        pockmcu_dsp_dot_1x2(col, w, w + depth, depth, &s0, &s1);
        w += 2 * depth;
        out[o] = pockmcu_dsp_out_at(s0, o, q, per_channel, ort_rounding);
        out[o + 1] = pockmcu_dsp_out_at(s1, o + 1, q, per_channel, ort_rounding);
        o += 2;
    }
    if (o < out_c)
    {
        const int32_t s = pockmcu_dsp_dot_1x1(col, w, depth, pockmcu_dsp_bias_at(q, o));
        out[o] = pockmcu_dsp_out_at(s, o, q, per_channel, ort_rounding);
    }
}

/* -- Small depth (pwsmall, issue 14): channel-outer over a chunk of expanded rows -------------------------------
 * At a small depth (a pointwise convolution of up to 64 input channels, MobileNetV2's 8 to 32) the per-output work
 * (bias, requantization constants, stores) costs more than the multiply-accumulates. For up to POCKMCU_DSP_SMALL_BYTES
 * of column (a chunk of rows, a multiple of 4, pockmcu_dsp_chunk_rows) the loops turn around: per output channel its
 * filter row is sign-extended once into int16 words (the column's (w0, w2), (w1, w3) order; doubled for the fast
 * requantization, which then needs no shift of the accumulator) and its bias and requantization constants are set
 * once, then every 4-row block of the chunk takes 4 LDRD of the column and 1 LDRD of the weights per 4 depth values,
 * and its four outputs go straight to their rows (STRB at a stride of out_c, no staging). */

/* Column bytes a chunk of the small-depth path may take (the planned scratch grows by at most this much). */
#define POCKMCU_DSP_SMALL_BYTES 2048

/* Rows per chunk of the small-depth path for `count` rows of `depth` values: as many 4-row blocks as
 * POCKMCU_DSP_SMALL_BYTES of column hold (at most the count's, rounded down to 4); 0 (the row-block loops of
 * pockmcu_dsp_rows_4) when fewer than 16 rows fit (a depth above 64) or there are fewer than 16 rows. */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_chunk_rows(int32_t depth, int32_t count)
{
    const int32_t row_bytes = 4 * pockmcu_dsp_col_words(depth, 1);
    int32_t rows;
    if (depth < 1 || count < 16)
    {
        return 0;
    }
    rows = (POCKMCU_DSP_SMALL_BYTES / row_bytes) & ~3;
    if (rows < 16)
    {
        return 0;
    }
    return rows < (count & ~3) ? rows : (count & ~3);
}

/* The weight word v (w0 w1 w2 w3) as the column's words (w0, w2), (w1, w3) in int16 lanes at dst, doubled when
 * `twice` (a constant). */
POCKMCU_DSP_INLINE void pockmcu_dsp_widen_w(uint32_t v, uint32_t *dst, const int32_t twice)
{
    uint32_t a = pockmcu_sxtb16(v);
    uint32_t b = pockmcu_sxtb16_ror8(v);
    if (twice)
    {
        a = pockmcu_sadd16(a, a);
        b = pockmcu_sadd16(b, b);
    }
    dst[0] = a;
    dst[1] = b;
}

/* Filter row w (depth int8 values) as the column's words: per group of four (w0, w2), (w1, w3) in int16 lanes,
 * then the depth % 4 last values one per word (low lane); each value doubled when `twice` (a constant). */
POCKMCU_DSP_INLINE void pockmcu_dsp_expand_w(const int8_t *w, int32_t depth, uint32_t *dst, const int32_t twice)
{
    int32_t g;
    for (g = depth >> 2; g > 0; g--)
    {
        pockmcu_dsp_widen_w(pockmcu_read_s8x4_ia(&w), dst, twice);
        dst += 2;
    }
    for (g = depth & 3; g > 0; g--)
    {
        const int32_t x = *w++;
        *dst++ = (uint32_t)(twice ? 2 * x : x);
    }
}

/* pockmcu_dsp_expand_w for a column whose depth is `depth` rounded up to a multiple of 4: the depth % 4 last values
 * and zeros make one more group of four, so the dot products need no tail loop (the column's padding values are 0:
 * the im2col field's bytes past depth hold the input zero point). Used for depth % 4 of 2 or 3, where the padded
 * column takes no more words than the unpadded one (pockmcu_dsp_col_words), so the planned scratch holds it. */
POCKMCU_DSP_INLINE void pockmcu_dsp_expand_w_pad(const int8_t *w, int32_t depth, uint32_t *dst, const int32_t twice)
{
    const int32_t rest = depth & 3;
    pockmcu_dsp_expand_w(w, depth - rest, dst, twice);
    if (rest > 0)
    {
        const int8_t *t = w + depth - rest;
        uint32_t v = (uint32_t)(uint8_t)t[0];
        v |= rest > 1 ? (uint32_t)(uint8_t)t[1] << 8 : 0u;
        v |= rest > 2 ? (uint32_t)(uint8_t)t[2] << 16 : 0u;
        pockmcu_dsp_widen_w(v, dst + 2 * (depth >> 2), twice);
    }
}

/* a0..a3 += row r of the 4-row column at *col . the expanded filter row wx, r < 4; *col advances past the block.
 * kdepth (a constant): 0, depth known at run time (8 depth values a pass, then 4, then the depth % 4 last ones);
 * else depth itself, a multiple of 4 up to 32: unrolled, the weight words at constant offsets. */
POCKMCU_DSP_INLINE void pockmcu_dsp_dot_4x1x(const uint32_t **col,
                                             const uint32_t *wx,
                                             int32_t depth,
                                             const int32_t kdepth,
                                             int32_t *s0,
                                             int32_t *s1,
                                             int32_t *s2,
                                             int32_t *s3)
{
    const uint32_t *c = *col;
    int32_t a0 = *s0, a1 = *s1, a2 = *s2, a3 = *s3;
    uint32_t w02, w13;
    int32_t g;
    if (kdepth > 0)
    {
/* group g of a constant depth: the weight words at the constant offset 2 g (unrolled by hand: the offset is an
 * immediate of the instruction) */
#define POCKMCU_DSP_KGROUP(g)                                                                                          \
    if (4 * (g) < kdepth)                                                                                              \
    {                                                                                                                  \
        pockmcu_read_u32x2_at(wx, 2 * (g), &w02, &w13);                                                                \
        POCKMCU_DSP_STEP_4X1X(c, w02, w13, a0, a1, a2, a3);                                                            \
    }
        POCKMCU_DSP_KGROUP(0)
        POCKMCU_DSP_KGROUP(1)
        POCKMCU_DSP_KGROUP(2)
        POCKMCU_DSP_KGROUP(3)
        POCKMCU_DSP_KGROUP(4)
        POCKMCU_DSP_KGROUP(5)
        POCKMCU_DSP_KGROUP(6)
        POCKMCU_DSP_KGROUP(7)
#undef POCKMCU_DSP_KGROUP
    }
    else
    {
        for (g = depth >> 3; g > 0; g--)
        {
            pockmcu_read_u32x2_ia(&wx, &w02, &w13);
            POCKMCU_DSP_STEP_4X1X(c, w02, w13, a0, a1, a2, a3);
            pockmcu_read_u32x2_ia(&wx, &w02, &w13);
            POCKMCU_DSP_STEP_4X1X(c, w02, w13, a0, a1, a2, a3);
        }
        if (depth & 4)
        {
            pockmcu_read_u32x2_ia(&wx, &w02, &w13);
            POCKMCU_DSP_STEP_4X1X(c, w02, w13, a0, a1, a2, a3);
        }
        for (g = depth & 3; g > 0; g--)
        {
            const uint32_t u = *wx++;
            a0 = pockmcu_smlabb(c[0], u, a0);
            a1 = pockmcu_smlabb(c[1], u, a1);
            a2 = pockmcu_smlabb(c[2], u, a2);
            a3 = pockmcu_smlabb(c[3], u, a3);
            c += 4;
        }
    }
    *col = c;
    *s0 = a0;
    *s1 = a1;
    *s2 = a2;
    *s3 = a3;
}

/* An empty statement after which the accumulators and the requantization constants are new values: the multiply-
 * accumulates of a block end before its requantization starts, and the constants, spilled during the products,
 * are reloaded once a block (GCC would else interleave the two and reload each constant for every output). No
 * instruction; the portable build ignores it. */
#if POCKMCU_HAS_DSP && (defined(__GNUC__) || defined(__clang__))
    #define POCKMCU_DSP_FENCE(a0, a1, a2, a3, m, e, r)                                                                 \
        __asm__("" : "+r"(a0), "+r"(a1), "+r"(a2), "+r"(a3), "+r"(m), "+r"(e), "+r"(r))
#else
    #define POCKMCU_DSP_FENCE(a0, a1, a2, a3, m, e, r) ((void)0)
#endif

/* Four outputs of one channel into four rows: *dst, then dst advances by out_c, four times (one STRB and one ADD an
 * output, out_c in one register; GCC would keep out_c, 2 out_c, 3 out_c and sums of them in registers or on the
 * stack). */
#if POCKMCU_HAS_DSP && (defined(__GNUC__) || defined(__clang__))
    #define POCKMCU_DSP_STORE_4(dst, out_c, v0, v1, v2, v3)                                                            \
        __asm__ volatile("strb %1, [%0]\n\t"                                                                           \
                         "add %0, %0, %5\n\t"                                                                          \
                         "strb %2, [%0]\n\t"                                                                           \
                         "add %0, %0, %5\n\t"                                                                          \
                         "strb %3, [%0]\n\t"                                                                           \
                         "add %0, %0, %5\n\t"                                                                          \
                         "strb %4, [%0]\n\t"                                                                           \
                         "add %0, %0, %5"                                                                              \
                         : "+r"(dst)                                                                                   \
                         : "r"(v0), "r"(v1), "r"(v2), "r"(v3), "r"(out_c)                                              \
                         : "memory")
#else
    #define POCKMCU_DSP_STORE_4(dst, out_c, v0, v1, v2, v3)                                                            \
        do                                                                                                             \
        {                                                                                                              \
            (dst)[0] = (int8_t)(v0);                                                                                   \
            (dst)[(out_c)] = (int8_t)(v1);                                                                             \
            (dst)[2 * (out_c)] = (int8_t)(v2);                                                                         \
            (dst)[3 * (out_c)] = (int8_t)(v3);                                                                         \
            (dst) += 4 * (out_c);                                                                                      \
        } while (0)
#endif

/* Every output channel of a chunk of `rows` rows (a multiple of 4: rows / 4 blocks of the 4-row column, one after
 * the other, at col) into out + r * out_c; wx: scratch for one expanded filter row. fast (a constant): q->fast and
 * not ort_rounding: doubled weights and bias, so the accumulator is 2 acc and pockmcu_dsp_out_fast's shift is
 * gone; clamp (a constant): q->clamp; kdepth (a constant): 0 or depth (pockmcu_dsp_dot_4x1x); at 4 and 8 the
 * weight words stay in registers for the whole chunk. wdepth: the filter's row length: depth itself, or for a
 * column padded to a multiple of 4 (an im2col field, POCKMCU_DSP_CHUNKS_INLINE) the unpadded depth. */
POCKMCU_DSP_INLINE void pockmcu_dsp_chunk_of(const uint32_t *col,
                                             uint32_t *wx,
                                             int32_t rows,
                                             const int8_t *filter,
                                             int32_t depth,
                                             int32_t wdepth,
                                             int32_t out_c,
                                             const pockmcu_dsp_requant *q,
                                             int8_t *out,
                                             const int32_t per_channel,
                                             const int32_t ort_rounding,
                                             const int32_t fast,
                                             const int32_t clamp,
                                             const int32_t kdepth)
{
    const uint32_t *c_end = col + (rows >> 2) * pockmcu_dsp_col_words(depth, 4);
    const int32_t lo = q->act_min, hi = q->act_max;
    int32_t o;
    for (o = 0; o < out_c; o++)
    {
        const int32_t bias = pockmcu_dsp_bias_at(q, o);
        const uint32_t *c = col;
        int8_t *dst = out + o;
        if (wdepth == depth)
        {
            pockmcu_dsp_expand_w(filter + o * depth, depth, wx, fast);
        }
        else
        {
            pockmcu_dsp_expand_w_pad(filter + o * wdepth, wdepth, wx, fast);
        }
        if (fast)
        {
            const int32_t m = per_channel ? q->multiplier[o] : q->m0;
            const int32_t e = per_channel ? -q->shift[o] : q->e0;
            const int32_t r = per_channel ? pockmcu_dsp_fast_round(e, q->output_offset) : q->r0;
            const int32_t bias2 = (int32_t)((uint32_t)bias << 1);
            uint32_t w0 = 0, w1 = 0, w2 = 0, w3 = 0;
            if (kdepth == 4 || kdepth == 8)
            {
                pockmcu_read_u32x2_at(wx, 0, &w0, &w1);
                if (kdepth == 8)
                {
                    pockmcu_read_u32x2_at(wx, 2, &w2, &w3);
                }
            }
            do
            {
                int32_t a0 = bias2, a1 = bias2, a2 = bias2, a3 = bias2, v0, v1, v2, v3, mb, eb, rb;
                if (kdepth == 4 || kdepth == 8)
                {
                    POCKMCU_DSP_STEP_4X1X(c, w0, w1, a0, a1, a2, a3);
                    if (kdepth == 8)
                    {
                        POCKMCU_DSP_STEP_4X1X(c, w2, w3, a0, a1, a2, a3);
                    }
                }
                else
                {
                    pockmcu_dsp_dot_4x1x(&c, wx, depth, kdepth, &a0, &a1, &a2, &a3);
                }
                mb = m;
                eb = e;
                rb = r;
                POCKMCU_DSP_FENCE(a0, a1, a2, a3, mb, eb, rb);
                /* pockmcu_dsp_out_fast(acc, m, r, e) with a0 = 2 acc (|acc| < 2^30: the sign is acc's) */
                v0 = pockmcu_ssat8(pockmcu_smmlar(a0, mb, rb + (a0 >> 31)) >> eb);
                v1 = pockmcu_ssat8(pockmcu_smmlar(a1, mb, rb + (a1 >> 31)) >> eb);
                v2 = pockmcu_ssat8(pockmcu_smmlar(a2, mb, rb + (a2 >> 31)) >> eb);
                v3 = pockmcu_ssat8(pockmcu_smmlar(a3, mb, rb + (a3 >> 31)) >> eb);
                if (clamp)
                {
                    v0 = v0 < lo ? lo : (v0 > hi ? hi : v0);
                    v1 = v1 < lo ? lo : (v1 > hi ? hi : v1);
                    v2 = v2 < lo ? lo : (v2 > hi ? hi : v2);
                    v3 = v3 < lo ? lo : (v3 > hi ? hi : v3);
                }
                POCKMCU_DSP_STORE_4(dst, out_c, v0, v1, v2, v3);
            } while (c != c_end);
        }
        else
        {
            const pockmcu_dsp_channel ch = pockmcu_dsp_channel_at(q, o, per_channel);
            do
            {
                int32_t a0 = bias, a1 = bias, a2 = bias, a3 = bias;
                pockmcu_dsp_dot_4x1x(&c, wx, depth, 0, &a0, &a1, &a2, &a3);
                dst[0] = pockmcu_dsp_out(a0, &ch, q, ort_rounding);
                dst[out_c] = pockmcu_dsp_out(a1, &ch, q, ort_rounding);
                dst += 2 * out_c;
                dst[0] = pockmcu_dsp_out(a2, &ch, q, ort_rounding);
                dst[out_c] = pockmcu_dsp_out(a3, &ch, q, ort_rounding);
                dst += 2 * out_c;
            } while (c != c_end);
        }
    }
}

#if defined(__GNUC__) || defined(__clang__)
    #define POCKMCU_DSP_NOINLINE static __attribute__((noinline, unused))
#else
    #define POCKMCU_DSP_NOINLINE static inline
#endif

/* The variants of pockmcu_dsp_chunk_of, each a function of its own (not inlined: GCC allocates the registers of
 * its loops far better alone than inside a kernel); per_channel and ort_rounding are the same at every call in a
 * kernel, so they stay constants. */
#define POCKMCU_DSP_CHUNK_FN(name, fast, clamp, kdepth)                                                                \
    POCKMCU_DSP_NOINLINE void name(const uint32_t *col,                                                                \
                                   uint32_t *wx,                                                                       \
                                   int32_t rows,                                                                       \
                                   const int8_t *filter,                                                               \
                                   int32_t depth,                                                                      \
                                   int32_t wdepth,                                                                     \
                                   int32_t out_c,                                                                      \
                                   const pockmcu_dsp_requant *q,                                                       \
                                   int8_t *out,                                                                        \
                                   const int32_t per_channel,                                                          \
                                   const int32_t ort_rounding)                                                         \
    {                                                                                                                  \
        pockmcu_dsp_chunk_of(                                                                                          \
            col, wx, rows, filter, depth, wdepth, out_c, q, out, per_channel, ort_rounding, fast, clamp, kdepth);      \
    }
POCKMCU_DSP_CHUNK_FN(pockmcu_dsp_chunk_any, 0, 0, 0)
POCKMCU_DSP_CHUNK_FN(pockmcu_dsp_chunk_fast, 1, 0, 0)
POCKMCU_DSP_CHUNK_FN(pockmcu_dsp_chunk_fast_8, 1, 0, 8)
POCKMCU_DSP_CHUNK_FN(pockmcu_dsp_chunk_fast_16, 1, 0, 16)
POCKMCU_DSP_CHUNK_FN(pockmcu_dsp_chunk_fast_24, 1, 0, 24)
POCKMCU_DSP_CHUNK_FN(pockmcu_dsp_chunk_fast_32, 1, 0, 32)
POCKMCU_DSP_CHUNK_FN(pockmcu_dsp_chunk_clamp, 1, 1, 0)
#undef POCKMCU_DSP_CHUNK_FN

/* Every output channel of a chunk (pockmcu_dsp_chunk_of) with the constants of the call: q->fast, q->clamp, and
 * for the fast requantization without a clamp the depths 8, 16, 24 and 32 (MobileNetV2's pointwise inputs). */
POCKMCU_DSP_INLINE void pockmcu_dsp_chunk(const uint32_t *col,
                                          uint32_t *wx,
                                          int32_t rows,
                                          const int8_t *filter,
                                          int32_t depth,
                                          int32_t wdepth,
                                          int32_t out_c,
                                          const pockmcu_dsp_requant *q_,
                                          int8_t *out,
                                          const int32_t per_channel,
                                          const int32_t ort_rounding)
{
    /* a copy, field by field: the kernel's own q is neither copied whole nor has its address escape into the calls
     * (either keeps it in memory, and its fields are then reloaded in the kernel's other loops) */
    pockmcu_dsp_requant qc;
    const pockmcu_dsp_requant *q = &qc;
    qc.bias = q_->bias;
    qc.multiplier = q_->multiplier;
    qc.shift = q_->shift;
    qc.output_offset = q_->output_offset;
    qc.act_min = q_->act_min;
    qc.act_max = q_->act_max;
    qc.fast = q_->fast;
    qc.clamp = q_->clamp;
    qc.m0 = q_->m0;
    qc.e0 = q_->e0;
    qc.r0 = q_->r0;
    if (ort_rounding || !q->fast)
    {
        pockmcu_dsp_chunk_any(col, wx, rows, filter, depth, wdepth, out_c, q, out, per_channel, ort_rounding);
    }
    else if (q->clamp)
    {
        pockmcu_dsp_chunk_clamp(col, wx, rows, filter, depth, wdepth, out_c, q, out, per_channel, 0);
    }
    else if (depth == 8)
    {
        pockmcu_dsp_chunk_fast_8(col, wx, rows, filter, depth, wdepth, out_c, q, out, per_channel, 0);
    }
    else if (depth == 16)
    {
        pockmcu_dsp_chunk_fast_16(col, wx, rows, filter, depth, wdepth, out_c, q, out, per_channel, 0);
    }
    else if (depth == 24)
    {
        pockmcu_dsp_chunk_fast_24(col, wx, rows, filter, depth, wdepth, out_c, q, out, per_channel, 0);
    }
    else if (depth == 32)
    {
        pockmcu_dsp_chunk_fast_32(col, wx, rows, filter, depth, wdepth, out_c, q, out, per_channel, 0);
    }
    else
    {
        pockmcu_dsp_chunk_fast(col, wx, rows, filter, depth, wdepth, out_c, q, out, per_channel, 0);
    }
}

/* Rows p_ onwards, 4 at a time (then 2, then 1: POCKMCU_DSP_ROWS_TAIL), each block expanded into col and multiplied
 * by every filter row; out row r at out + r * out_c. ROW_OF(r) is a statement that sets `src` to the int8 values of
 * row r. */
#define POCKMCU_DSP_ROWS_FROM(count, ROW_OF)                                                                           \
    do                                                                                                                 \
    {                                                                                                                  \
        for (; p_ + 4 <= (count); p_ += 4)                                                                             \
        {                                                                                                              \
            for (r_ = 0; r_ < 4; r_++)                                                                                 \
            {                                                                                                          \
                const int8_t *src;                                                                                     \
                ROW_OF(p_ + r_);                                                                                       \
                pockmcu_dsp_expand(src, depth, offset2, offset, 4, r_, col);                                           \
            }                                                                                                          \
            pockmcu_dsp_rows_4(                                                                                        \
                col, filter_data, depth, out_c, &q, output_data + p_ * out_c, out_c, per_channel, ort_rounding);       \
        }                                                                                                              \
    } while (0)

/* Rows p_ onwards when fewer than 4 are left: 2, then 1 (POCKMCU_DSP_ROWS_FROM). */
#define POCKMCU_DSP_ROWS_TAIL(count, ROW_OF)                                                                           \
    do                                                                                                                 \
    {                                                                                                                  \
        if (p_ + 2 <= (count))                                                                                         \
        {                                                                                                              \
            for (r_ = 0; r_ < 2; r_++)                                                                                 \
            {                                                                                                          \
                const int8_t *src;                                                                                     \
                ROW_OF(p_ + r_);                                                                                       \
                pockmcu_dsp_expand(src, depth, offset2, offset, 2, r_, col);                                           \
            }                                                                                                          \
            pockmcu_dsp_rows_2(                                                                                        \
                col, filter_data, depth, out_c, &q, output_data + p_ * out_c, out_c, per_channel, ort_rounding);       \
            p_ += 2;                                                                                                   \
        }                                                                                                              \
        if (p_ < (count))                                                                                              \
        {                                                                                                              \
            const int8_t *src;                                                                                         \
            ROW_OF(p_);                                                                                                \
            pockmcu_dsp_expand(src, depth, offset2, offset, 1, 0, col);                                                \
            pockmcu_dsp_rows_1(                                                                                        \
                col, filter_data, depth, out_c, &q, output_data + p_ * out_c, per_channel, ort_rounding);              \
        }                                                                                                              \
    } while (0)

/* The small-depth path of POCKMCU_DSP_ALL_ROWS, rows p_ onwards: chunks of pockmcu_dsp_chunk_rows rows (the last
 * one shorter, a multiple of 4), each expanded into col (4-row blocks one after the other) and multiplied by every
 * filter row (pockmcu_dsp_chunk); the last 1 to 3 rows are left to POCKMCU_DSP_ROWS_FROM. */
#define POCKMCU_DSP_CHUNKS_INLINE(count, ROW_OF, PAD)                                                                  \
    do                                                                                                                 \
    {                                                                                                                  \
        const int32_t chunk_ = pockmcu_dsp_chunk_rows(depth, (count));                                                 \
        const int32_t cdepth_ = (PAD) && (depth & 3) >= 2 ? (depth + 3) & ~3 : depth;                                  \
        const int32_t block_words_ = pockmcu_dsp_col_words(cdepth_, 4);                                                \
        uint32_t *wx_ = col + chunk_ * pockmcu_dsp_col_words(depth, 1);                                                \
        while (p_ + 4 <= (count))                                                                                      \
        {                                                                                                              \
            const int32_t n_ = (count)-p_ >= chunk_ ? chunk_ : (((count)-p_) & ~3);                                    \
            for (r_ = 0; r_ < n_; r_++)                                                                                \
            {                                                                                                          \
                const int8_t *src;                                                                                     \
                ROW_OF(p_ + r_);                                                                                       \
                pockmcu_dsp_expand(src, cdepth_, offset2, offset, 4, r_ & 3, col + (r_ >> 2) * block_words_);          \
            }                                                                                                          \
            pockmcu_dsp_chunk(col,                                                                                     \
                              wx_,                                                                                     \
                              n_,                                                                                      \
                              filter_data,                                                                             \
                              cdepth_,                                                                                 \
                              depth,                                                                                   \
                              out_c,                                                                                   \
                              &q,                                                                                      \
                              output_data + p_ * out_c,                                                                \
                              per_channel,                                                                             \
                              ort_rounding);                                                                           \
            p_ += n_;                                                                                                  \
        }                                                                                                              \
    } while (0)

/* POCKMCU_DSP_CHUNKS_INLINE for rows read from memory (row r at input + r * stride) as a function of its own (returns
 * the rows done): inline,
 * its loops would change how GCC allocates the registers of the kernel's large-depth loops (and cost them up to 1%).
 * The requantization by its fields: the kernel's own q is neither copied whole nor has its address escape (either
 * keeps it in memory, and its fields are then reloaded in the kernel's other loops). */
POCKMCU_DSP_NOINLINE int32_t pockmcu_dsp_chunks_strided(const int8_t *input,
                                                        int32_t stride,
                                                        int32_t count,
                                                        int32_t depth,
                                                        uint32_t offset2,
                                                        int32_t offset,
                                                        uint32_t *col,
                                                        const int8_t *filter_data,
                                                        int32_t out_c,
                                                        const int32_t *bias,
                                                        const int32_t *multiplier,
                                                        const int32_t *shift,
                                                        int32_t output_offset,
                                                        int32_t act_min,
                                                        int32_t act_max,
                                                        int32_t fast,
                                                        int8_t *output_data,
                                                        const int32_t per_channel,
                                                        const int32_t ort_rounding)
{
    int32_t p_ = 0, r_;
    pockmcu_dsp_requant q;
    q.bias = bias;
    q.multiplier = multiplier;
    q.shift = shift;
    q.output_offset = output_offset;
    q.act_min = act_min;
    q.act_max = act_max;
    q.fast = fast;
    q.clamp = act_min > -128 || act_max < 127;
    pockmcu_dsp_requant_per_tensor(&q);
#define POCKMCU_DSP_STRIDED_ROW(p) src = input + (p)*stride
    POCKMCU_DSP_CHUNKS_INLINE(count, POCKMCU_DSP_STRIDED_ROW, 0);
#undef POCKMCU_DSP_STRIDED_ROW
    return p_;
}

/* The small-depth path of POCKMCU_DSP_ALL_ROWS by the name of its ROW_OF: the function for input rows and FC
 * batches, inline for the im2col fields. */
#define POCKMCU_DSP_CHUNKS_STRIDED(count, stride)                                                                      \
    p_ = pockmcu_dsp_chunks_strided(input_data,                                                                        \
                                    (stride),                                                                          \
                                    (count),                                                                           \
                                    depth,                                                                             \
                                    offset2,                                                                           \
                                    offset,                                                                            \
                                    col,                                                                               \
                                    filter_data,                                                                       \
                                    out_c,                                                                             \
                                    q.bias,                                                                            \
                                    q.multiplier,                                                                      \
                                    q.shift,                                                                           \
                                    q.output_offset,                                                                   \
                                    q.act_min,                                                                         \
                                    q.act_max,                                                                         \
                                    q.fast,                                                                            \
                                    output_data,                                                                       \
                                    per_channel,                                                                       \
                                    ort_rounding)
#define POCKMCU_DSP_CHUNKS_POCKMCU_DSP_INPUT_ROW(count) POCKMCU_DSP_CHUNKS_STRIDED(count, in_c)
#define POCKMCU_DSP_CHUNKS_POCKMCU_DSP_BATCH_ROW(count) POCKMCU_DSP_CHUNKS_STRIDED(count, depth)
/* Whether POCKMCU_DSP_ALL_ROWS takes the small-depth path, by the name of its ROW_OF: the convolutions do; the fully
 * connected layers do not (16 or more batches of a small depth are rare, and the path's code would add some 10 KB
 * to each FC kernel; pockmcu_dsp_fc_buffer_size agrees). */
#define POCKMCU_DSP_SMALL_POCKMCU_DSP_INPUT_ROW 1
#define POCKMCU_DSP_SMALL_POCKMCU_DSP_FIELD_ROW 1
#define POCKMCU_DSP_SMALL_POCKMCU_DSP_BATCH_ROW 0
#define POCKMCU_DSP_CHUNKS_POCKMCU_DSP_FIELD_ROW(count) POCKMCU_DSP_CHUNKS_INLINE(count, POCKMCU_DSP_FIELD_ROW, 1)

/* `count` rows (row r from ROW_OF(r)): at a small depth (pockmcu_dsp_chunk_rows) the chunks of the small-depth path,
 * else POCKMCU_DSP_ROWS_FROM, then POCKMCU_DSP_ROWS_TAIL; out row r at out + r * out_c. ROW_OF(r) is a statement that
 * sets `src` to the int8 values of row r (an im2col into a field of scratch, or an input row): POCKMCU_DSP_INPUT_ROW,
 * POCKMCU_DSP_BATCH_ROW or POCKMCU_DSP_FIELD_ROW. */
#define POCKMCU_DSP_ALL_ROWS(count, ROW_OF)                                                                            \
    do                                                                                                                 \
    {                                                                                                                  \
        int32_t p_ = 0;                                                                                                \
        int32_t r_;                                                                                                    \
        if (POCKMCU_DSP_SMALL_##ROW_OF && pockmcu_dsp_chunk_rows(depth, (count)) > 0)                                  \
        {                                                                                                              \
            POCKMCU_DSP_CHUNKS_##ROW_OF(count);                                                                        \
        }                                                                                                              \
        else                                                                                                           \
        {                                                                                                              \
            POCKMCU_DSP_ROWS_FROM(count, ROW_OF);                                                                      \
        }                                                                                                              \
        POCKMCU_DSP_ROWS_TAIL(count, ROW_OF);                                                                          \
    } while (0)

/* Copies of at most POCKMCU_DSP_SHORT bytes in an im2col row are inlined: a word, then bytes, at a time (memcpy's
 * and memset's calls cost more than such a copy). The empty asm keeps gcc from turning the loops back into calls. */
#define POCKMCU_DSP_SHORT 32
#if POCKMCU_HAS_DSP && (defined(__GNUC__) || defined(__clang__))
    #define POCKMCU_DSP_KEEP_LOOP(v) __asm__("" : "+r"(v))
#else
    #define POCKMCU_DSP_KEEP_LOOP(v) ((void)0)
#endif

POCKMCU_DSP_INLINE void pockmcu_dsp_copy_short(int8_t *dst, const int8_t *src, int32_t n)
{
    if (n > POCKMCU_DSP_SHORT)
    {
        memcpy(dst, src, (size_t)n);
        return;
    }
    for (; n >= 4; n -= 4)
    {
        uint32_t v;
        memcpy(&v, src, 4);
        POCKMCU_DSP_KEEP_LOOP(v);
        memcpy(dst, &v, 4);
        src += 4;
        dst += 4;
    }
    for (; n > 0; n--)
    {
        int8_t b = *src++;
        POCKMCU_DSP_KEEP_LOOP(b);
        *dst++ = b;
    }
}

/* n bytes of value pad4 (the pad byte in all four lanes) at dst. */
POCKMCU_DSP_INLINE void pockmcu_dsp_fill_short(int8_t *dst, uint32_t pad4, int32_t n)
{
    if (n > POCKMCU_DSP_SHORT)
    {
        memset(dst, (int)(int8_t)pad4, (size_t)n);
        return;
    }
    for (; n >= 4; n -= 4)
    {
        POCKMCU_DSP_KEEP_LOOP(pad4);
        memcpy(dst, &pad4, 4);
        dst += 4;
    }
    for (; n > 0; n--)
    {
        POCKMCU_DSP_KEEP_LOOP(pad4);
        *dst++ = (int8_t)pad4;
    }
}

/* The output pixel an im2col walk is at: image b, row oy, column ox, in the order the kernels run the rows
 * (pockmcu_dsp_next_pixel; no division a pixel). */
typedef struct
{
    int32_t b;
    int32_t oy;
    int32_t ox;
} pockmcu_dsp_pixel;

POCKMCU_DSP_INLINE void pockmcu_dsp_next_pixel(pockmcu_dsp_pixel *px, const cmsis_nn_dims *output_dims)
{
    if (++px->ox == output_dims->w)
    {
        px->ox = 0;
        if (++px->oy == output_dims->h)
        {
            px->oy = 0;
            px->b++;
        }
    }
}

/* The int8 receptive field of output pixel (oy, ox) in (ky, kx, c) order, k_h * k_w * in_c bytes;
 * taps outside the image hold pad (the input zero point). A field inside the image (no dilation) is k_h
 * runs of k_w * in_c input bytes copied whole. */
POCKMCU_DSP_INLINE void pockmcu_dsp_im2col(const int8_t *in_batch,
                                           const cmsis_nn_dims *input_dims,
                                           const cmsis_nn_dims *filter_dims,
                                           const cmsis_nn_conv_params *conv_params,
                                           int32_t oy,
                                           int32_t ox,
                                           int8_t pad,
                                           int8_t *dst)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t dil_h = conv_params->dilation.h;
    const int32_t dil_w = conv_params->dilation.w;
    const int32_t y0 = oy * conv_params->stride.h - conv_params->padding.h;
    const int32_t x0 = ox * conv_params->stride.w - conv_params->padding.w;
    const int32_t row_bytes = k_w * in_c;
    const uint32_t pad4 = (uint32_t)(uint8_t)pad * 0x01010101u;
    int32_t kx_start, kx_end;
    int32_t ky, kx;

    if (dil_w == 1)
    {
        kx_start = x0 >= 0 ? 0 : -x0;
        kx_end = in_w - x0 < k_w ? in_w - x0 : k_w;
        if (dil_h == 1 && kx_start == 0 && kx_end == k_w && y0 >= 0 && y0 + k_h <= in_h)
        {
            const int8_t *src = in_batch + (y0 * in_w + x0) * in_c;
            for (ky = 0; ky < k_h; ky++)
            {
                pockmcu_dsp_copy_short(dst, src, row_bytes);
                dst += row_bytes;
                src += in_w * in_c;
            }
            return;
        }
    }
    else
    {
        kx_start = pockmcu_window_start(x0, dil_w);
        kx_end = pockmcu_window_end(x0, dil_w, in_w, k_w);
    }
    kx_start = kx_start < k_w ? kx_start : k_w;
    kx_end = kx_end > kx_start ? kx_end : kx_start;
    for (ky = 0; ky < k_h; ky++)
    {
        const int32_t y = y0 + ky * dil_h;
        if (y < 0 || y >= in_h || kx_start == kx_end)
        {
            pockmcu_dsp_fill_short(dst, pad4, row_bytes);
        }
        else if (dil_w == 1)
        {
            const int32_t lead = kx_start * in_c;
            const int32_t body = (kx_end - kx_start) * in_c;
            pockmcu_dsp_fill_short(dst, pad4, lead);
            pockmcu_dsp_copy_short(dst + lead, in_batch + (y * in_w + x0 + kx_start) * in_c, body);
            pockmcu_dsp_fill_short(dst + lead + body, pad4, row_bytes - lead - body);
        }
        else
        {
            for (kx = 0; kx < k_w; kx++)
            {
                if (kx >= kx_start && kx < kx_end)
                {
                    memcpy(dst + kx * in_c, in_batch + (y * in_w + x0 + kx * dil_w) * in_c, (size_t)in_c);
                }
                else
                {
                    memset(dst + kx * in_c, pad, (size_t)in_c);
                }
            }
        }
        dst += row_bytes;
    }
}

/* Rows of the DSP kernels' column: 4 when there are 4 or more, else 2 or 1. */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_block_rows(int32_t count) { return count >= 4 ? 4 : (count >= 2 ? 2 : 1); }

/* Scratch words of the DSP kernels' column for `count` rows of `depth` values: a chunk of rows plus one expanded
 * filter row (small depth), else the column of 4 rows (2 or 1 when there are fewer). */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_col_total_words(int32_t depth, int32_t count)
{
    const int32_t chunk = pockmcu_dsp_chunk_rows(depth, count);
    return chunk > 0 ? (chunk + 1) * pockmcu_dsp_col_words(depth, 1)
                     : pockmcu_dsp_col_words(depth, pockmcu_dsp_block_rows(count));
}

/* Scratch bytes of the DSP convolution: the column of 4 output pixels (fewer when there are fewer; at a small depth a
 * chunk of pixels and one expanded filter row, pockmcu_dsp_col_total_words), and unless pointwise one int8 receptive
 * field. */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_conv_buffer_size(const cmsis_nn_dims *input_dims,
                                                        const cmsis_nn_dims *filter_dims,
                                                        const cmsis_nn_dims *output_dims,
                                                        const int32_t pointwise)
{
    const int32_t depth = filter_dims->h * filter_dims->w * input_dims->c;
    const int32_t col = 4 * pockmcu_dsp_col_total_words(depth, input_dims->n * output_dims->h * output_dims->w);
    return pointwise ? col : col + ((depth + 3) & ~3);
}

/* Whether a convolution is pointwise (1x1 filter, stride 1, no padding; dilation is then moot). */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_is_pointwise(const cmsis_nn_conv_params *conv_params,
                                                    const cmsis_nn_dims *input_dims,
                                                    const cmsis_nn_dims *filter_dims,
                                                    const cmsis_nn_dims *output_dims)
{
    return filter_dims->h == 1 && filter_dims->w == 1 && conv_params->stride.h == 1 && conv_params->stride.w == 1 &&
        conv_params->padding.h == 0 && conv_params->padding.w == 0 && output_dims->h == input_dims->h &&
        output_dims->w == input_dims->w;
}

/* The DSP convolution; returns ARM_CMSIS_NN_NO_IMPL_ERROR when the fast path does not apply (the
 * kernel then calls the portable one). pointwise: the caller's geometry is pockmcu_dsp_is_pointwise
 * (the input rows are the rows of the matrix, no im2col). */
POCKMCU_DSP_INLINE arm_cmsis_nn_status pockmcu_dsp_conv_s8_loops(const cmsis_nn_context *ctx,
                                                                 const cmsis_nn_conv_params *conv_params,
                                                                 const cmsis_nn_per_channel_quant_params *quant_params,
                                                                 const cmsis_nn_dims *input_dims,
                                                                 const int8_t *input_data,
                                                                 const cmsis_nn_dims *filter_dims,
                                                                 const int8_t *filter_data,
                                                                 const int32_t *bias_data,
                                                                 const cmsis_nn_dims *output_dims,
                                                                 int8_t *output_data,
                                                                 const int32_t pointwise,
                                                                 const int32_t ort_rounding)
{
    const int32_t per_channel = 1;
    const int32_t in_c = input_dims->c;
    const int32_t out_c = output_dims->c;
    const int32_t out_w = output_dims->w;
    const int32_t out_hw = output_dims->h * out_w;
    const int32_t pixels = input_dims->n * out_hw;
    const int32_t depth = filter_dims->h * filter_dims->w * in_c;
    const int32_t in_image = input_dims->h * input_dims->w * in_c;
    const int32_t offset = conv_params->input_offset;
    const uint32_t offset2 = ((uint32_t)offset & 0xFFFFu) | ((uint32_t)offset << 16);
    const int8_t pad = (int8_t)(-offset);
    pockmcu_dsp_requant q;
    uint32_t *col;
    int8_t *field;

    if (filter_dims->c != in_c || filter_dims->n != out_c || offset < -127 || offset > 128 ||
        conv_params->activation.min > conv_params->activation.max || ctx == NULL || ctx->buf == NULL ||
        ctx->size < pockmcu_dsp_conv_buffer_size(input_dims, filter_dims, output_dims, pointwise) ||
        (pointwise && !pockmcu_dsp_is_pointwise(conv_params, input_dims, filter_dims, output_dims)) ||
        conv_params->stride.h < 1 || conv_params->stride.w < 1 || conv_params->dilation.h < 1 ||
        conv_params->dilation.w < 1 ||
        (!ort_rounding && pockmcu_dsp_has_negative_multiplier(quant_params->multiplier, out_c)))
    {
        return ARM_CMSIS_NN_NO_IMPL_ERROR;
    }
    q.bias = bias_data;
    q.multiplier = quant_params->multiplier;
    q.shift = quant_params->shift;
    q.output_offset = conv_params->output_offset;
    q.act_min = conv_params->activation.min;
    q.act_max = conv_params->activation.max;
    q.fast = !ort_rounding && pockmcu_dsp_fast_requant_ok(bias_data, q.multiplier, q.shift, out_c, out_c, depth);
    q.clamp = q.act_min > -128 || q.act_max < 127;
    pockmcu_dsp_requant_per_tensor(&q);
    col = (uint32_t *)ctx->buf;
    field = (int8_t *)(col + pockmcu_dsp_col_total_words(depth, pixels));

    if (pointwise)
    {
#define POCKMCU_DSP_INPUT_ROW(p) src = input_data + (p)*in_c
        POCKMCU_DSP_ALL_ROWS(pixels, POCKMCU_DSP_INPUT_ROW);
#undef POCKMCU_DSP_INPUT_ROW
    }
    else
    {
        pockmcu_dsp_pixel px = {0, 0, 0};
        /* the field's bytes past depth (to a multiple of 4) hold the input zero point: 0 once offset, the padding
         * group of the small-depth path (pockmcu_dsp_expand_w_pad); im2col never writes them */
        if ((depth & 3) >= 2)
        {
            memset(field + depth, pad, (size_t)(4 - (depth & 3)));
        }
#define POCKMCU_DSP_FIELD_ROW(p)                                                                                       \
    do                                                                                                                 \
    {                                                                                                                  \
        (void)(p); /* the rows run in order: px is row p's pixel */                                                    \
        pockmcu_dsp_im2col(                                                                                            \
            input_data + px.b * in_image, input_dims, filter_dims, conv_params, px.oy, px.ox, pad, field);             \
        pockmcu_dsp_next_pixel(&px, output_dims);                                                                      \
        src = field;                                                                                                   \
    } while (0)
        POCKMCU_DSP_ALL_ROWS(pixels, POCKMCU_DSP_FIELD_ROW);
#undef POCKMCU_DSP_FIELD_ROW
    }
    return ARM_CMSIS_NN_SUCCESS;
}

/* Scratch bytes of the DSP fully connected layer: the column of 4 batches (fewer when there are fewer; no small-depth
 * path, POCKMCU_DSP_SMALL_POCKMCU_DSP_BATCH_ROW). */
POCKMCU_DSP_INLINE int32_t pockmcu_dsp_fc_buffer_size(const cmsis_nn_dims *input_dims, const cmsis_nn_dims *filter_dims)
{
    return 4 * pockmcu_dsp_col_words(filter_dims->n, pockmcu_dsp_block_rows(input_dims->n));
}

/* The DSP fully connected layer (per_channel, ort_rounding constants); ARM_CMSIS_NN_NO_IMPL_ERROR
 * when the fast path does not apply. */
POCKMCU_DSP_INLINE arm_cmsis_nn_status pockmcu_dsp_fc_s8_loops(const cmsis_nn_context *ctx,
                                                               const cmsis_nn_fc_params *fc_params,
                                                               const int32_t *multiplier,
                                                               const int32_t *shift,
                                                               const cmsis_nn_dims *input_dims,
                                                               const int8_t *input_data,
                                                               const cmsis_nn_dims *filter_dims,
                                                               const int8_t *filter_data,
                                                               const int32_t *bias_data,
                                                               const cmsis_nn_dims *output_dims,
                                                               int8_t *output_data,
                                                               const int32_t per_channel,
                                                               const int32_t ort_rounding)
{
    const int32_t batches = input_dims->n;
    const int32_t depth = filter_dims->n;
    const int32_t out_c = output_dims->c;
    const int32_t offset = fc_params->input_offset;
    const uint32_t offset2 = ((uint32_t)offset & 0xFFFFu) | ((uint32_t)offset << 16);
    pockmcu_dsp_requant q;
    uint32_t *col;

    if (fc_params->filter_offset != 0 || offset < -127 || offset > 128 ||
        fc_params->activation.min > fc_params->activation.max || ctx == NULL || ctx->buf == NULL ||
        ctx->size < pockmcu_dsp_fc_buffer_size(input_dims, filter_dims) ||
        (!ort_rounding && pockmcu_dsp_has_negative_multiplier(multiplier, per_channel ? out_c : 1)))
    {
        return ARM_CMSIS_NN_NO_IMPL_ERROR;
    }
    q.bias = bias_data;
    q.multiplier = multiplier;
    q.shift = shift;
    q.output_offset = fc_params->output_offset;
    q.act_min = fc_params->activation.min;
    q.act_max = fc_params->activation.max;
    q.fast = !ort_rounding &&
        pockmcu_dsp_fast_requant_ok(bias_data, multiplier, shift, per_channel ? out_c : 1, out_c, depth);
    q.clamp = q.act_min > -128 || q.act_max < 127;
    pockmcu_dsp_requant_per_tensor(&q);
    col = (uint32_t *)ctx->buf;
#define POCKMCU_DSP_BATCH_ROW(p) src = input_data + (p)*depth
    POCKMCU_DSP_ALL_ROWS(batches, POCKMCU_DSP_BATCH_ROW);
#undef POCKMCU_DSP_BATCH_ROW
    return ARM_CMSIS_NN_SUCCESS;
}

#endif /* POCKMCU_DSP_LOOPS_H */
