/*
 * pockmcu_elementwise_add_s8_dsp - int8 element-wise add of two same-shape tensors for Armv7E-M / Armv8-M DSP
 * cores (Cortex-M4, M7, M33): the CMSIS-NN API and bytes of arm_elementwise_add_s8 (TFLM AddFunc).
 *
 * Four elements a loop: one word load per input, x + offset for two elements at once (SXTAB16), then per
 * element TFLM's arithmetic with one SMMLAR per MultiplyByQuantizedMultiplier:
 * - t = (x + offset) << (left_shift + 1 + max(shift, 0)) is 2 a without wrap (checked on entry), so
 *   SMMLAR(t, m, c) = SaturatingRoundingDoublingHighMul(a, m) + c (m >= 0, checked);
 * - RoundingDivideByPOT(h, r), r >= 1, is (h + 2^(r-1) - [h < 0]) >> r, and [h < 0] may be read as [a < 0] for
 *   m >= 0 (they differ only when h = 0, which rounds to 0 either way), so c = 2^(r-1) - [a < 0] (c = 0 for r = 0);
 * - the output's right shift (r >= 1, checked) takes the output offset as out_offset * 2^r in c, then SSAT #8,
 *   and the activation clamp on the four packed bytes (SSUB8 / SEL) when it is narrower than int8.
 * The input whose r is 0, if one is, is taken first (ADD commutes), and it is a plain SMMULR: the loop has three
 * forms (both r = 0, first r = 0, both r >= 1), each with its constants in registers (about 20 instructions an
 * element on Cortex-M4 against about 107 for the portable loop).
 * Every input/output range is bounded exactly on entry (each requantization is monotonic in x for m >= 0, so the
 * extremes come from the extreme x); any call outside these conditions (offsets beyond the int16 lanes, a shifted
 * value that would wrap, shl below 16 or differing between the inputs, negative multipliers, shifts outside
 * [-31, 31], an output shift >= 0, activation bounds outside int8, sums near int32 overflow, block_size <= 0) runs
 * the portable kernel. The last 1 to 3 elements run the same arithmetic one at a time.
 *
 * On cores without DSP and on the host the functions of pockmcu_simd.h are plain C of the same bits, so the
 * host simulation runs this very loop (tests/test_add_dsp.py compares it with arm_elementwise_add_s8).
 */
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"
#include "pockmcu_simd.h"

/* The constants of one input's requantization. */
typedef struct
{
    int32_t mult;  /* multiplier (>= 0) */
    int32_t shl;   /* left_shift + 1 + max(shift, 0): x + offset -> 2 a */
    int32_t round; /* 2^(r-1), or 0 for r = 0 */
    int32_t neg;   /* -1 for r >= 1 (the [a < 0] term), else 0 */
    int32_t right; /* r = max(-shift, 0) */
} pockmcu_add_dsp_input;

/* One input's requantized value of t = 2 a (the fields of pockmcu_add_dsp_input as values: registers in the loop). */
static inline int32_t pockmcu_add_dsp_in_t(int32_t t, int32_t mult, int32_t round, int32_t neg, int32_t right)
{
    return pockmcu_smmlar(t, mult, round + (neg & (t >> 31))) >> right;
}

/* One input's requantized value of v = x + offset. */
static inline int32_t pockmcu_add_dsp_in(int32_t v, const pockmcu_add_dsp_input *c)
{
    return pockmcu_add_dsp_in_t((int32_t)((uint32_t)v << c->shl), c->mult, c->round, c->neg, c->right);
}

/* The output byte (before the activation clamp) of a sum: r_out >= 1, out_round = 2^(r_out-1) + out_offset 2^r_out. */
static inline int32_t pockmcu_add_dsp_out(int32_t sum, int32_t out_mult, int32_t out_round, int32_t out_right)
{
    return pockmcu_ssat8(pockmcu_smmlar((int32_t)((uint32_t)sum << 1), out_mult, out_round + (sum >> 31)) >> out_right);
}

/* Whether the fast arithmetic holds for one input: offset within [-32640, 32639] (x + offset in an int16 lane), the
 * shifted value without wrap, multiplier >= 0, -31 <= shift <= 31 (the portable C's domain); sets c and the exact
 * extremes of the requantized value. */
static int32_t pockmcu_add_dsp_input_ok(int32_t offset,
                                        int32_t mult,
                                        int32_t shift,
                                        int32_t left_shift,
                                        pockmcu_add_dsp_input *c,
                                        int64_t *lo,
                                        int64_t *hi)
{
    const int32_t left = shift > 0 ? shift : 0;
    int64_t vmin, vmax, lim;
    if (offset < -32640 || offset > 32639 || mult < 0 || shift < -31 || shift > 31 || left_shift > 30 - left)
    {
        return 0;
    }
    c->mult = mult;
    c->shl = left_shift + 1 + left;
    c->right = shift > 0 ? 0 : -shift;
    c->round = c->right > 0 ? (int32_t)1 << (c->right - 1) : 0;
    c->neg = c->right > 0 ? -1 : 0;
    vmin = (int64_t)offset - 128;
    vmax = (int64_t)offset + 127;
    lim = (int64_t)1 << (31 - c->shl); /* |v| 2^shl within int32: -lim <= v < lim */
    if (vmin < -lim || vmax >= lim)
    {
        return 0;
    }
    *lo = pockmcu_requantize(pockmcu_wrap_shl((int32_t)vmin, left_shift), mult, shift);
    *hi = pockmcu_requantize(pockmcu_wrap_shl((int32_t)vmax, left_shift), mult, shift);
    return 1;
}

/* The constants of the four-element loop (input a, input b: the inputs in the order the loop takes them). */
typedef struct
{
    uint32_t off_a, off_b; /* offsets in both int16 lanes */
    int32_t shl;           /* the shl of both inputs, >= 16 */
    int32_t ma, ra, sa;    /* input a: multiplier, 2^(r-1), r */
    int32_t mb, rb, sb;    /* input b */
    int32_t out_mult, out_round, out_right;
    int32_t clamp;
    uint32_t lo4, hi4; /* the activation bounds in four bytes */
} pockmcu_add_dsp_loop;

/* One input's value of t = 2 a: r = 0 (zero set) is SMMULR alone, r >= 1 SMMLAR with 2^(r-1) - [a < 0], ASR. */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline int32_t
pockmcu_add_dsp_in_k(int32_t t, int32_t m, int32_t round, int32_t right, const int32_t zero)
{
    return zero ? pockmcu_smmulr(t, m) : pockmcu_smmlar(t, m, round + (t >> 31)) >> right;
}

/* words groups of four elements: word loads, SXTAB16 offsets, a t of a low lane the lane word shifted by
 * shl >= 16 (the high lane drops out), of a high lane its top half shifted; za, zb: r = 0 for input a, b (constant
 * per call site, so each of the three forms is its own loop). */
#if defined(__GNUC__) || defined(__clang__)
__attribute__((always_inline))
#endif
static inline void
pockmcu_add_dsp_words(const int8_t *pa,
                      const int8_t *pb,
                      int8_t *po,
                      int32_t words,
                      const pockmcu_add_dsp_loop *k,
                      const int32_t za,
                      const int32_t zb)
{
    const uint32_t off_a = k->off_a, off_b = k->off_b, lo4 = k->lo4, hi4 = k->hi4;
    const int32_t shl = k->shl, ma = k->ma, ra = k->ra, sa = k->sa, mb = k->mb, rb = k->rb, sb = k->sb;
    const int32_t om = k->out_mult, orr = k->out_round, os = k->out_right, clamp = k->clamp;
    while (words-- > 0)
    {
        const uint32_t wa = pockmcu_read_s8x4_ia(&pa);
        const uint32_t wb = pockmcu_read_s8x4_ia(&pb);
        const uint32_t ea = pockmcu_sxtab16(off_a, wa), oa = pockmcu_sxtab16_ror8(off_a, wa);
        const uint32_t eb = pockmcu_sxtab16(off_b, wb), ob = pockmcu_sxtab16_ror8(off_b, wb);
        const int32_t s0 = pockmcu_add_dsp_in_k((int32_t)(ea << shl), ma, ra, sa, za) +
            pockmcu_add_dsp_in_k((int32_t)(eb << shl), mb, rb, sb, zb);
        const int32_t s1 = pockmcu_add_dsp_in_k((int32_t)(oa << shl), ma, ra, sa, za) +
            pockmcu_add_dsp_in_k((int32_t)(ob << shl), mb, rb, sb, zb);
        const int32_t s2 = pockmcu_add_dsp_in_k((int32_t)((ea >> 16) << shl), ma, ra, sa, za) +
            pockmcu_add_dsp_in_k((int32_t)((eb >> 16) << shl), mb, rb, sb, zb);
        const int32_t s3 = pockmcu_add_dsp_in_k((int32_t)((oa >> 16) << shl), ma, ra, sa, za) +
            pockmcu_add_dsp_in_k((int32_t)((ob >> 16) << shl), mb, rb, sb, zb);
        uint32_t p = pockmcu_pack_s8x4(pockmcu_add_dsp_out(s0, om, orr, os),
                                       pockmcu_add_dsp_out(s1, om, orr, os),
                                       pockmcu_add_dsp_out(s2, om, orr, os),
                                       pockmcu_add_dsp_out(s3, om, orr, os));
        if (clamp)
        {
            p = pockmcu_min_s8x4(pockmcu_max_s8x4(p, lo4), hi4);
        }
        memcpy(po, &p, 4);
        po += 4;
    }
}

arm_cmsis_nn_status pockmcu_elementwise_add_s8_dsp(const int8_t *input_1_vect,
                                                   const int8_t *input_2_vect,
                                                   const int32_t input_1_offset,
                                                   const int32_t input_1_mult,
                                                   const int32_t input_1_shift,
                                                   const int32_t input_2_offset,
                                                   const int32_t input_2_mult,
                                                   const int32_t input_2_shift,
                                                   const int32_t left_shift,
                                                   int8_t *output,
                                                   const int32_t out_offset,
                                                   const int32_t out_mult,
                                                   const int32_t out_shift,
                                                   const int32_t out_activation_min,
                                                   const int32_t out_activation_max,
                                                   const int32_t block_size)
{
    pockmcu_add_dsp_input c1, c2;
    int64_t lo1 = 0, hi1 = 0, lo2 = 0, hi2 = 0;
    int32_t ok = block_size > 0 && left_shift >= 0 && out_mult >= 0 && out_shift <= -1 && out_shift >= -31 &&
        out_activation_min >= -128 && out_activation_max <= 127 && out_activation_min <= out_activation_max &&
        pockmcu_add_dsp_input_ok(input_1_offset, input_1_mult, input_1_shift, left_shift, &c1, &lo1, &hi1) &&
        pockmcu_add_dsp_input_ok(input_2_offset, input_2_mult, input_2_shift, left_shift, &c2, &lo2, &hi2);
    int32_t out_right = 0, out_round = 0;
    if (ok)
    {
        /* sums within [-2^30, 2^30): 2 sum without wrap; the output SMMLAR's accumulator within int32 */
        const int64_t smin = lo1 + lo2, smax = hi1 + hi2;
        ok = c1.shl == c2.shl && c1.shl >= 16 && smin >= -((int64_t)1 << 30) && smax < ((int64_t)1 << 30);
        if (ok)
        {
            const int64_t r64 = ((int64_t)1 << (-out_shift - 1)) + (int64_t)out_offset * ((int64_t)1 << -out_shift);
            const int64_t hmin = pockmcu_srdhm((int32_t)smin, out_mult) + r64 - 1;
            const int64_t hmax = pockmcu_srdhm((int32_t)smax, out_mult) + r64;
            ok = hmin >= POCKMCU_INT32_MIN && hmax <= POCKMCU_INT32_MAX;
            out_right = -out_shift;
            out_round = (int32_t)r64;
        }
    }
    if (!ok)
    {
        return arm_elementwise_add_s8(input_1_vect,
                                      input_2_vect,
                                      input_1_offset,
                                      input_1_mult,
                                      input_1_shift,
                                      input_2_offset,
                                      input_2_mult,
                                      input_2_shift,
                                      left_shift,
                                      output,
                                      out_offset,
                                      out_mult,
                                      out_shift,
                                      out_activation_min,
                                      out_activation_max,
                                      block_size);
    }
    {
        /* ADD commutes: the input with r = 0 (if one has) goes first, so the loop is one of three forms */
        const int32_t swap = c1.right > 0 && c2.right == 0;
        const pockmcu_add_dsp_input *ca = swap ? &c2 : &c1, *cb = swap ? &c1 : &c2;
        const int8_t *pa = swap ? input_2_vect : input_1_vect, *pb = swap ? input_1_vect : input_2_vect;
        const int32_t off_a = swap ? input_2_offset : input_1_offset, off_b = swap ? input_1_offset : input_2_offset;
        pockmcu_add_dsp_loop k;
        k.off_a = ((uint32_t)off_a & 0xFFFFu) * 0x10001u;
        k.off_b = ((uint32_t)off_b & 0xFFFFu) * 0x10001u;
        k.shl = ca->shl;
        k.ma = ca->mult;
        k.ra = ca->round;
        k.sa = ca->right;
        k.mb = cb->mult;
        k.rb = cb->round;
        k.sb = cb->right;
        k.out_mult = out_mult;
        k.out_round = out_round;
        k.out_right = out_right;
        k.clamp = out_activation_min > -128 || out_activation_max < 127;
        k.lo4 = (uint32_t)(uint8_t)out_activation_min * 0x01010101u;
        k.hi4 = (uint32_t)(uint8_t)out_activation_max * 0x01010101u;
        if (ca->right == 0 && cb->right == 0)
        {
            pockmcu_add_dsp_words(pa, pb, output, block_size >> 2, &k, 1, 1);
        }
        else if (ca->right == 0)
        {
            pockmcu_add_dsp_words(pa, pb, output, block_size >> 2, &k, 1, 0);
        }
        else
        {
            pockmcu_add_dsp_words(pa, pb, output, block_size >> 2, &k, 0, 0);
        }
        {
            const int32_t done = block_size & ~3;
            int32_t i;
            for (i = done; i < block_size; i++)
            {
                const int32_t s = pockmcu_add_dsp_in((int32_t)input_1_vect[i] + input_1_offset, &c1) +
                    pockmcu_add_dsp_in((int32_t)input_2_vect[i] + input_2_offset, &c2);
                output[i] = (int8_t)pockmcu_clamp_i32(
                    pockmcu_add_dsp_out(s, out_mult, out_round, out_right), out_activation_min, out_activation_max);
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
