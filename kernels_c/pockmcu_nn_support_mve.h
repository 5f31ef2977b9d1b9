/*
 * pockmcu_nn_support_mve.h - static inline Helium (Armv8.1-M MVE) helpers of the *_mve_s8 kernels.
 *
 * Only defined where the core has integer MVE (__ARM_FEATURE_MVE bit 0: Cortex-M55 and later); on every
 * other core and on the host the *_mve_s8 kernels compile to calls of the portable loops
 * (pockmcu_layer_loops.h) and this header declares nothing but POCKMCU_HAS_MVE = 0.
 *
 * Requantization, bit for bit TFLM's (double rounding) MultiplyByQuantizedMultiplier
 * (pockmcu_requantize in pockmcu_nn_support_tflm.h), four lanes at a time:
 *   - x * 2^left (wrapping) is VSHL by a non-negative register amount (no saturation, no rounding);
 *   - gemmlowp's SaturatingRoundingDoublingHighMul is exactly VQRDMULH: for ab >= 0 both give
 *     floor((ab + 2^30) / 2^31); for ab < 0 gemmlowp truncates (ab + 1 - 2^30) / 2^31 toward zero,
 *     which is ceil((ab + 1 - 2^30) / 2^31) = floor((ab + 2^30) / 2^31); both saturate only for
 *     INT32_MIN * INT32_MIN;
 *   - RoundingDivideByPOT (round half away from zero) is VRSHL by -right (round half up) of x - 1 for
 *     negative x when right > 0 (the fix-up CMSIS-NN's arm_divide_by_power_of_two_mve uses); the
 *     saturating subtract only matters for INT32_MIN, where floor((x - 1 + 2^(r-1)) / 2^r) equals
 *     floor((x + 2^(r-1)) / 2^r) because x + 2^(r-1) is not a multiple of 2^r.
 * tests/test_mve_kernels.py checks every kernel against the portable one in the same QEMU program.
 */
#ifndef POCKMCU_NN_SUPPORT_MVE_H
#define POCKMCU_NN_SUPPORT_MVE_H

#include <stdint.h>

#include "pockmcu_nn_support_common.h"
#include "pockmcu_nn_types.h"

#if defined(__ARM_FEATURE_MVE) && (__ARM_FEATURE_MVE & 1)
    #define POCKMCU_HAS_MVE 1
#else
    #define POCKMCU_HAS_MVE 0
#endif

#if POCKMCU_HAS_MVE

    #include <arm_mve.h>

    #if defined(__GNUC__) || defined(__clang__)
        #define POCKMCU_MVE_INLINE static inline __attribute__((always_inline))
    #else
        #define POCKMCU_MVE_INLINE static inline
    #endif

/* TFLM MultiplyByQuantizedMultiplier of four lanes, one multiplier and shift per lane. */
POCKMCU_MVE_INLINE int32x4_t pockmcu_mve_requantize(int32x4_t x, int32x4_t mult, int32x4_t shift)
{
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t left = vmaxq_s32(shift, zero);
    const int32x4_t right = vminq_s32(shift, zero); /* -right shift, <= 0 */
    int32x4_t fixup;
    x = vqrdmulhq_s32(vshlq_s32(x, left), mult);
    fixup = vshrq_n_s32(vandq_s32(x, right), 31); /* -1 where x < 0 and a right shift follows */
    return vrshlq_s32(vqaddq_s32(x, fixup), right);
}

/* The same with the shift split into left = max(shift, 0) and right = min(shift, 0), formed once. */
POCKMCU_MVE_INLINE int32x4_t pockmcu_mve_requantize_lr(int32x4_t x, int32x4_t mult, int32x4_t left, int32x4_t right)
{
    int32x4_t fixup;
    x = vqrdmulhq_s32(vshlq_s32(x, left), mult);
    fixup = vshrq_n_s32(vandq_s32(x, right), 31);
    return vrshlq_s32(vqaddq_s32(x, fixup), right);
}

/* The same with one multiplier and shift for all four lanes. */
POCKMCU_MVE_INLINE int32x4_t pockmcu_mve_requantize_n(int32x4_t x, int32_t mult, int32_t shift)
{
    if (shift > 0)
    {
        return vqrdmulhq_n_s32(vshlq_r_s32(x, shift), mult);
    }
    x = vqrdmulhq_n_s32(x, mult);
    if (shift < 0)
    {
        const int32x4_t fixup = vshrq_n_s32(x, 31);
        x = vrshlq_n_s32(vqaddq_s32(x, fixup), shift);
    }
    return x;
}

/* requantized + output_offset, clamped to [act_min, act_max]: the int8 results in the low bytes. */
POCKMCU_MVE_INLINE int32x4_t pockmcu_mve_finish(int32x4_t x, int32_t output_offset, int32_t act_min, int32_t act_max)
{
    x = vaddq_n_s32(x, output_offset);
    x = vmaxq_s32(x, vdupq_n_s32(act_min));
    return vminq_s32(x, vdupq_n_s32(act_max));
}

/* Copy n >= 0 bytes (tail predicated; no byte outside [dst, dst + n) is written). */
POCKMCU_MVE_INLINE void pockmcu_mve_copy_s8(int8_t *dst, const int8_t *src, int32_t n)
{
    while (n > 0)
    {
        const mve_pred16_t p = vctp8q((uint32_t)n);
        vstrbq_p_s8(dst, vldrbq_z_s8(src, p), p);
        dst += 16;
        src += 16;
        n -= 16;
    }
}

/* Fill n >= 0 bytes with the lanes of v. */
POCKMCU_MVE_INLINE void pockmcu_mve_fill_s8(int8_t *dst, int8x16_t v, int32_t n)
{
    while (n > 0)
    {
        const mve_pred16_t p = vctp8q((uint32_t)n);
        vstrbq_p_s8(dst, v, p);
        dst += 16;
        n -= 16;
    }
}

/* Fully connected with depth <= 16 (tiny layers: the fixed cost per call and per block of four outputs counts,
 * not the MACs): the input row is one predicated load per batch, each weight row one predicated load, VMLADAV
 * for sum w x and VADDV for sum w, the requantization constants formed once per call. The arithmetic of
 * pockmcu_mve_fc below. */
POCKMCU_MVE_INLINE arm_cmsis_nn_status pockmcu_mve_fc_small(const cmsis_nn_fc_params *fc_params,
                                                            const int32_t *multiplier,
                                                            const int32_t *shift,
                                                            const int32_t per_channel,
                                                            const cmsis_nn_dims *input_dims,
                                                            const int8_t *input_data,
                                                            const cmsis_nn_dims *filter_dims,
                                                            const int8_t *filter_data,
                                                            const int32_t *bias_data,
                                                            const cmsis_nn_dims *output_dims,
                                                            int8_t *output_data)
{
    const int32_t depth = filter_dims->n;
    const int32_t out_depth = output_dims->c;
    const int32_t io = fc_params->input_offset;
    const int32_t fo = fc_params->filter_offset;
    const mve_pred16_t p = vctp8q((uint32_t)depth);
    const int32x4_t zero = vdupq_n_s32(0);
    const int32x4_t oo = vdupq_n_s32(fc_params->output_offset);
    const int32x4_t lo = vdupq_n_s32(fc_params->activation.min);
    const int32x4_t hi = vdupq_n_s32(fc_params->activation.max);
    const int32x4_t mult0 = vdupq_n_s32(multiplier[0]);
    const int32x4_t left0 = vdupq_n_s32(pockmcu_max_i32(shift[0], 0));
    const int32x4_t right0 = vdupq_n_s32(pockmcu_min_i32(shift[0], 0));
    int32_t b, o0;

    for (b = 0; b < input_dims->n; b++)
    {
        const int8x16_t xv = vldrbq_z_s8(input_data + b * depth, p);
        const int32_t sum_x = vaddvq_s8(xv);
        const int32x4_t base =
            vdupq_n_s32((int32_t)((uint32_t)fo * (uint32_t)sum_x + (uint32_t)depth * (uint32_t)fo * (uint32_t)io));
        int8_t *out = output_data + b * out_depth;
        const int8_t *w = filter_data;
        for (o0 = 0; o0 < out_depth; o0 += 4, w += 4 * depth)
        {
            const int32_t no = out_depth - o0;
            const mve_pred16_t store = vctp32q((uint32_t)no);
            int32x4_t acc = vdupq_n_s32(0), sw = vdupq_n_s32(0);
            int8x16_t wv = vldrbq_z_s8(w, p);
            int32_t a0 = vmladavq_s8(xv, wv), a1 = 0, a2 = 0, a3 = 0;
            int32_t s0 = vaddvq_s8(wv), s1 = 0, s2 = 0, s3 = 0;
            if (no > 1)
            {
                wv = vldrbq_z_s8(w + depth, p);
                a1 = vmladavq_s8(xv, wv);
                s1 = vaddvq_s8(wv);
            }
            if (no > 2)
            {
                wv = vldrbq_z_s8(w + 2 * depth, p);
                a2 = vmladavq_s8(xv, wv);
                s2 = vaddvq_s8(wv);
            }
            if (no > 3)
            {
                wv = vldrbq_z_s8(w + 3 * depth, p);
                a3 = vmladavq_s8(xv, wv);
                s3 = vaddvq_s8(wv);
            }
            /* two lanes per VMOV */
            __asm__("vmov %q[v][2], %q[v][0], %[a0], %[a2]\n\t"
                    "vmov %q[v][3], %q[v][1], %[a1], %[a3]\n\t"
                    "vmov %q[u][2], %q[u][0], %[s0], %[s2]\n\t"
                    "vmov %q[u][3], %q[u][1], %[s1], %[s3]"
                    : [v] "+w"(acc), [u] "+w"(sw)
                    : [a0] "r"(a0),
                      [a1] "r"(a1),
                      [a2] "r"(a2),
                      [a3] "r"(a3),
                      [s0] "r"(s0),
                      [s1] "r"(s1),
                      [s2] "r"(s2),
                      [s3] "r"(s3));
            acc = vaddq_s32(vmlaq_n_s32(acc, sw, io), base);
            if (bias_data != NULL)
            {
                acc = vaddq_s32(acc, vldrwq_z_s32(bias_data + o0, store));
            }
            if (per_channel)
            {
                const int32x4_t sh = vldrwq_z_s32(shift + o0, store);
                acc = pockmcu_mve_requantize_lr(
                    acc, vldrwq_z_s32(multiplier + o0, store), vmaxq_s32(sh, zero), vminq_s32(sh, zero));
            }
            else
            {
                acc = pockmcu_mve_requantize_lr(acc, mult0, left0, right0);
            }
            acc = vminq_s32(vmaxq_s32(vaddq_s32(acc, oo), lo), hi);
            vstrbq_p_s32(out + o0, acc, store);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

/* Fully connected (pockmcu_fully_connected_s8_loops' arithmetic), per tensor (per_channel 0: multiplier[0],
 * shift[0]) or per output channel (1), both constants at the call. Four output rows at a time share each
 * 16-byte input load; the offsets are folded in as sum (w + fo)(x + io) = sum w x + io sum w + fo sum x
 * + D fo io in wrapping int32, the integer the portable sum gives. */
POCKMCU_MVE_INLINE arm_cmsis_nn_status pockmcu_mve_fc(const cmsis_nn_fc_params *fc_params,
                                                      const int32_t *multiplier,
                                                      const int32_t *shift,
                                                      const int32_t per_channel,
                                                      const cmsis_nn_dims *input_dims,
                                                      const int8_t *input_data,
                                                      const cmsis_nn_dims *filter_dims,
                                                      const int8_t *filter_data,
                                                      const int32_t *bias_data,
                                                      const cmsis_nn_dims *output_dims,
                                                      int8_t *output_data)
{
    const int32_t depth = filter_dims->n;
    const int32_t out_depth = output_dims->c;
    const int32_t io = fc_params->input_offset;
    const int32_t fo = fc_params->filter_offset;
    const int32_t tail = depth & 15;
    const mve_pred16_t tail_p = vctp8q((uint32_t)tail);
    int32_t b, o0, d;

    if (depth <= 16)
    {
        return pockmcu_mve_fc_small(fc_params,
                                    multiplier,
                                    shift,
                                    per_channel,
                                    input_dims,
                                    input_data,
                                    filter_dims,
                                    filter_data,
                                    bias_data,
                                    output_dims,
                                    output_data);
    }

    for (b = 0; b < input_dims->n; b++)
    {
        const int8_t *in = input_data + b * depth;
        int8_t *out = output_data + b * out_depth;
        uint32_t base;
        int32_t sum_x = 0;
        for (d = 0; d + 16 <= depth; d += 16)
        {
            sum_x = vaddvaq_s8(sum_x, vldrbq_s8(in + d));
        }
        if (tail)
        {
            sum_x = vaddvaq_s8(sum_x, vldrbq_z_s8(in + d, tail_p));
        }
        base = (uint32_t)fo * (uint32_t)sum_x + (uint32_t)depth * (uint32_t)fo * (uint32_t)io;
        for (o0 = 0; o0 < out_depth; o0 += 4)
        {
            const int32_t no = out_depth - o0 < 4 ? out_depth - o0 : 4;
            const mve_pred16_t store = vctp32q((uint32_t)no);
            const int8_t *w0 = filter_data + o0 * depth;
            const int8_t *w1 = no > 1 ? w0 + depth : w0; /* missing rows repeat the first one */
            const int8_t *w2 = no > 2 ? w0 + 2 * depth : w0;
            const int8_t *w3 = no > 3 ? w0 + 3 * depth : w0;
            const int8_t *x = in;
            int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0, s0 = 0, s1 = 0, s2 = 0, s3 = 0;
            int32x4_t acc, sw;
            for (d = depth >> 4; d > 0; d--)
            {
                const int8x16_t xv = vldrbq_s8(x);
                int8x16_t wv = vldrbq_s8(w0);
                a0 = vmladavaq_s8(a0, xv, wv);
                s0 = vaddvaq_s8(s0, wv);
                wv = vldrbq_s8(w1);
                a1 = vmladavaq_s8(a1, xv, wv);
                s1 = vaddvaq_s8(s1, wv);
                wv = vldrbq_s8(w2);
                a2 = vmladavaq_s8(a2, xv, wv);
                s2 = vaddvaq_s8(s2, wv);
                wv = vldrbq_s8(w3);
                a3 = vmladavaq_s8(a3, xv, wv);
                s3 = vaddvaq_s8(s3, wv);
                x += 16;
                w0 += 16;
                w1 += 16;
                w2 += 16;
                w3 += 16;
            }
            if (tail)
            {
                const int8x16_t xv = vldrbq_z_s8(x, tail_p);
                int8x16_t wv = vldrbq_z_s8(w0, tail_p);
                a0 = vmladavaq_s8(a0, xv, wv);
                s0 = vaddvaq_s8(s0, wv);
                wv = vldrbq_z_s8(w1, tail_p);
                a1 = vmladavaq_s8(a1, xv, wv);
                s1 = vaddvaq_s8(s1, wv);
                wv = vldrbq_z_s8(w2, tail_p);
                a2 = vmladavaq_s8(a2, xv, wv);
                s2 = vaddvaq_s8(s2, wv);
                wv = vldrbq_z_s8(w3, tail_p);
                a3 = vmladavaq_s8(a3, xv, wv);
                s3 = vaddvaq_s8(s3, wv);
            }
            acc = vsetq_lane_s32(a3, vsetq_lane_s32(a2, vsetq_lane_s32(a1, vdupq_n_s32(a0), 1), 2), 3);
            sw = vsetq_lane_s32(s3, vsetq_lane_s32(s2, vsetq_lane_s32(s1, vdupq_n_s32(s0), 1), 2), 3);
            acc = vmlaq_n_s32(acc, sw, io);
            acc = vaddq_n_s32(acc, (int32_t)base);
            if (bias_data != NULL)
            {
                acc = vaddq_s32(acc, vldrwq_z_s32(bias_data + o0, store));
            }
            if (per_channel)
            {
                acc =
                    pockmcu_mve_requantize(acc, vldrwq_z_s32(multiplier + o0, store), vldrwq_z_s32(shift + o0, store));
            }
            else
            {
                acc = pockmcu_mve_requantize_n(acc, multiplier[0], shift[0]);
            }
            acc =
                pockmcu_mve_finish(acc, fc_params->output_offset, fc_params->activation.min, fc_params->activation.max);
            vstrbq_p_s32(out + o0, acc, store);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

#endif /* POCKMCU_HAS_MVE */

#endif /* POCKMCU_NN_SUPPORT_MVE_H */
