/*
 * pockmcu_train_fast.h - inline helpers of the training kernels (not part of the public API).
 *
 * Every helper performs exactly the float32 operations its portable form spells out, in the same
 * order, so the host (compiled with -ffp-contract=off) and every Cortex-M give the same bits:
 *
 * - pockmcu_mla_f32(acc, a, b) = acc + a * b with the product rounded before the addition (two
 *   roundings, never a fused multiply-add). On a core with a single-precision FPU it is one VMLA.F32,
 *   the Arm "chained" multiply-accumulate, which the Arm ARM defines as FPMul then FPAdd, each
 *   rounded (gcc never emits it under -ffp-contract=off, hence the inline assembly); elsewhere (the
 *   host, M3) the C expression, which -ffp-contract=off compiles to a multiply and an add.
 * - pockmcu_sround(x, &state): pockmcu_stochastic_round (pockmcu_stochastic_round.c) with the
 *   xorshift32 state in a local variable, for loops that draw once per element.
 */
#ifndef POCKMCU_TRAIN_FAST_H
#define POCKMCU_TRAIN_FAST_H

#include <stdint.h>
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_simd.h"

#if defined(__GNUC__) || defined(__clang__)
    #define POCKMCU_FAST_INLINE static inline __attribute__((always_inline))
#else
    #define POCKMCU_FAST_INLINE static inline
#endif

#if defined(__arm__) && defined(__ARM_FP) && ((__ARM_FP & 4) != 0) && defined(__GNUC__)
    #define POCKMCU_VMLA_F32 1
#else
    #define POCKMCU_VMLA_F32 0
#endif

/* acc + a * b, rounded after the multiply and after the add (see the file comment). */
POCKMCU_FAST_INLINE float pockmcu_mla_f32(float acc, float a, float b)
{
#if POCKMCU_VMLA_F32
    __asm__("vmla.f32 %0, %1, %2" : "+t"(acc) : "t"(a), "t"(b));
    return acc;
#else
    return acc + a * b;
#endif
}

/* pockmcu_xorshift32 on a local state. */
POCKMCU_FAST_INLINE uint32_t pockmcu_xorshift32_step(uint32_t x)
{
    x ^= x << 13;
    x ^= x >> 17;
    x ^= x << 5;
    return x;
}

/* pockmcu_stochastic_round(x, state): floor(clamp(x) + u), u = (xorshift32 >> 8) * 2^-24. The same
 * value by cheaper tests: |x| <= 2^30 (the common case) is one integer compare of the bits (a NaN's
 * are larger), and floor is VCVTM where the core has it (FPv5: M7, M33, M55), else the truncation
 * corrected by one; both give floor(t) exactly for |t| <= 2^30 + 1. */
/* FPv4 (single precision FPU without VRINTM: Cortex-M4): floor(t) is one VCVTR under round-toward-minus-
 * infinity, FPSCR switched to that mode (fpscr_rm) and back (fpscr_rn) around it only; pockmcu_fpscr_modes
 * gives both words (the current FPSCR with its rounding field set to RM, and unchanged). */
#if defined(__arm__) && defined(__GNUC__) && defined(__ARM_FP) && !(__ARM_ARCH >= 8 || (__ARM_FP & 8) != 0) &&         \
    POCKMCU_VMLA_F32
    #define POCKMCU_FLOOR_VCVTR 1
#else
    #define POCKMCU_FLOOR_VCVTR 0
#endif

POCKMCU_FAST_INLINE void pockmcu_fpscr_modes(uint32_t *fpscr_rm, uint32_t *fpscr_rn)
{
#if POCKMCU_FLOOR_VCVTR
    uint32_t f;
    __asm__ volatile("vmrs %0, fpscr" : "=r"(f));
    *fpscr_rn = f;
    *fpscr_rm = (f & ~0x00C00000u) | 0x00800000u;
#else
    *fpscr_rm = 0u;
    *fpscr_rn = 0u;
#endif
}

POCKMCU_FAST_INLINE int32_t pockmcu_sround_m(float x, uint32_t *state, uint32_t fpscr_rm, uint32_t fpscr_rn)
{
    const uint32_t r = pockmcu_xorshift32_step(*state);
    uint32_t bits;
    float t, u;
    int32_t i;

#if POCKMCU_VMLA_F32
    /* (r >> 8) as an unsigned fixed-point number with 24 fraction bits: the same exact value */
    __asm__("vmov %0, %1\n\tvcvt.f32.u32 %0, %0, #24" : "=t"(u) : "r"(r >> 8));
#else
    u = (float)(int32_t)(r >> 8) * 0x1p-24f;
#endif
    *state = r;
    memcpy(&bits, &x, sizeof bits);
    if ((bits & 0x7FFFFFFFu) > 0x4E800000u) /* |x| > 2^30, or NaN */
    {
        if (x > 1073741824.0f)
        {
            x = 1073741824.0f;
        }
        else if (x < -1073741824.0f)
        {
            x = -1073741824.0f;
        }
        else
        {
            x = 0.0f;
        }
    }
    t = x + u;
#if POCKMCU_FLOOR_VCVTR
    {
        float f;
        __asm__ volatile("vmsr fpscr, %2\n\tvcvtr.s32.f32 %0, %1\n\tvmsr fpscr, %3"
                         : "=&t"(f)
                         : "t"(t), "r"(fpscr_rm), "r"(fpscr_rn));
        memcpy(&i, &f, sizeof i);
    }
#elif defined(__arm__) && defined(__GNUC__) && defined(__ARM_FP) && (__ARM_ARCH >= 8 || (__ARM_FP & 8) != 0)
    (void)fpscr_rm;
    (void)fpscr_rn;
    {
        float f; /* VCVTM: floor(t) as an int32 in one instruction (VRINTM and VCVT in two) */
        __asm__("vcvtm.s32.f32 %0, %1" : "=t"(f) : "t"(t));
        memcpy(&i, &f, sizeof i);
    }
#else
    (void)fpscr_rm;
    (void)fpscr_rn;
    i = (int32_t)t;
    if ((float)i > t)
    {
        i--;
    }
#endif
    return i;
}

/* pockmcu_sround_m reading FPSCR itself (loops call pockmcu_fpscr_modes once and pockmcu_sround_m). */
POCKMCU_FAST_INLINE int32_t pockmcu_sround(float x, uint32_t *state)
{
    uint32_t rm, rn;
    pockmcu_fpscr_modes(&rm, &rn);
    return pockmcu_sround_m(x, state, rm, rn);
}

/* ---------------------------------------------------------------- loads and int8 -> float widening
 * pockmcu_ld4_f32(p, v): v[0..3] = p[0..3]; one VLDM on a core with a single-precision FPU (_b: into s4-s7).
 * pockmcu_cvt4_s8(x, off, off2, v): v[k] = (float)((int32_t)x[k] + off) for k < 4 (exact: |x + off| <= 255);
 * on a DSP + FPU core the bytes are widened with the offset added two at a time (SXTAB16, off2 = off in both
 * 16-bit lanes) and the low lanes converted by VCVT.F32.S16, the high lanes by VCVT.F32.S32 after a shift. */
/* four floats from p (any float-aligned address) */
POCKMCU_FAST_INLINE void pockmcu_ld4_f32(const float *p, float v[4])
{
#if POCKMCU_VMLA_F32
    register float r0 __asm__("s0");
    register float r1 __asm__("s1");
    register float r2 __asm__("s2");
    register float r3 __asm__("s3");
    __asm__("vldmia %4, {s0-s3}" : "=t"(r0), "=t"(r1), "=t"(r2), "=t"(r3) : "r"(p), "m"(*(const float(*)[4])p));
    v[0] = r0;
    v[1] = r1;
    v[2] = r2;
    v[3] = r3;
#else
    v[0] = p[0];
    v[1] = p[1];
    v[2] = p[2];
    v[3] = p[3];
#endif
}

/* pockmcu_ld4_f32 into s4-s7 (so that two loads in a row need no moves). */
POCKMCU_FAST_INLINE void pockmcu_ld4_f32_b(const float *p, float v[4])
{
#if POCKMCU_VMLA_F32
    register float r0 __asm__("s4");
    register float r1 __asm__("s5");
    register float r2 __asm__("s6");
    register float r3 __asm__("s7");
    __asm__("vldmia %4, {s4-s7}" : "=t"(r0), "=t"(r1), "=t"(r2), "=t"(r3) : "r"(p), "m"(*(const float(*)[4])p));
    v[0] = r0;
    v[1] = r1;
    v[2] = r2;
    v[3] = r3;
#else
    v[0] = p[0];
    v[1] = p[1];
    v[2] = p[2];
    v[3] = p[3];
#endif
}

/* The bits of p[0..3] (float aligned): two LDRD on a core with an FPU. */
POCKMCU_FAST_INLINE void pockmcu_ld4_bits(const float *p, uint32_t *w0, uint32_t *w1, uint32_t *w2, uint32_t *w3)
{
#if POCKMCU_VMLA_F32
    __asm__("ldrd %0, %1, [%4]\n\tldrd %2, %3, [%4, #8]"
            : "=&r"(*w0), "=&r"(*w1), "=&r"(*w2), "=&r"(*w3)
            : "r"(p), "m"(*(const float(*)[4])p));
#else
    memcpy(w0, p, 4);
    memcpy(w1, p + 1, 4);
    memcpy(w2, p + 2, 4);
    memcpy(w3, p + 3, 4);
#endif
}

/* The four floats whose bits are w0..w3 (two VMOV of register pairs on a core with an FPU). */
POCKMCU_FAST_INLINE void pockmcu_f32_from_bits4(uint32_t w0, uint32_t w1, uint32_t w2, uint32_t w3, float v[4])
{
#if POCKMCU_VMLA_F32
    register float r0 __asm__("s0");
    register float r1 __asm__("s1");
    register float r2 __asm__("s2");
    register float r3 __asm__("s3");
    __asm__("vmov s0, s1, %4, %5\n\tvmov s2, s3, %6, %7"
            : "=t"(r0), "=t"(r1), "=t"(r2), "=t"(r3)
            : "r"(w0), "r"(w1), "r"(w2), "r"(w3));
    v[0] = r0;
    v[1] = r1;
    v[2] = r2;
    v[3] = r3;
#else
    memcpy(&v[0], &w0, 4);
    memcpy(&v[1], &w1, 4);
    memcpy(&v[2], &w2, 4);
    memcpy(&v[3], &w3, 4);
#endif
}

/* eight floats from p (float aligned): one VLDM into s16-s23 on a core with a single-precision FPU */
POCKMCU_FAST_INLINE void pockmcu_ld8_f32(const float *p, float v[8])
{
#if POCKMCU_VMLA_F32
    register float r0 __asm__("s16");
    register float r1 __asm__("s17");
    register float r2 __asm__("s18");
    register float r3 __asm__("s19");
    register float r4 __asm__("s20");
    register float r5 __asm__("s21");
    register float r6 __asm__("s22");
    register float r7 __asm__("s23");
    __asm__("vldmia %8, {s16-s23}"
            : "=t"(r0), "=t"(r1), "=t"(r2), "=t"(r3), "=t"(r4), "=t"(r5), "=t"(r6), "=t"(r7)
            : "r"(p), "m"(*(const float(*)[8])p));
    v[0] = r0, v[1] = r1, v[2] = r2, v[3] = r3, v[4] = r4, v[5] = r5, v[6] = r6, v[7] = r7;
#else
    int32_t k;
    for (k = 0; k < 8; k++)
    {
        v[k] = p[k];
    }
#endif
}

/* v[0] = (float)x[0], v[1] = (float)x[1]: on a core with a single-precision FPU one VMOV of the two bytes
 * into s24-s25 and two VCVT */
POCKMCU_FAST_INLINE void pockmcu_cvt2_s8(const int8_t *x, float v[2])
{
#if POCKMCU_VMLA_F32
    register float r0 __asm__("s24");
    register float r1 __asm__("s25");
    const int32_t x0 = x[0], x1 = x[1];
    __asm__("vmov s24, s25, %2, %3\n\tvcvt.f32.s32 s24, s24\n\tvcvt.f32.s32 s25, s25"
            : "=t"(r0), "=t"(r1)
            : "r"(x0), "r"(x1));
    v[0] = r0;
    v[1] = r1;
#else
    v[0] = (float)x[0];
    v[1] = (float)x[1];
#endif
}

#if POCKMCU_VMLA_F32 && POCKMCU_HAS_DSP
/* (float) of the signed low 16-bit lane of w */
POCKMCU_FAST_INLINE float pockmcu_cvt_lo16(uint32_t w)
{
    float f;
    __asm__("vmov %0, %1\n\tvcvt.f32.s16 %0, %0, #0" : "=&t"(f) : "r"(w));
    return f;
}
#endif

/* v[k] = (float)((int32_t)x[k] + off), k < 4 */
POCKMCU_FAST_INLINE void pockmcu_cvt4_s8(const int8_t *x, int32_t off, uint32_t off2, float v[4])
{
#if POCKMCU_VMLA_F32 && POCKMCU_HAS_DSP
    const uint32_t w = pockmcu_read_s8x4(x);
    const uint32_t a = pockmcu_sxtab16(off2, w);      /* x0 + off | x2 + off */
    const uint32_t b = pockmcu_sxtab16_ror8(off2, w); /* x1 + off | x3 + off */
    const uint32_t ah = (uint32_t)((int32_t)a >> 16), bh = (uint32_t)((int32_t)b >> 16);
    register float r0 __asm__("s8");
    register float r1 __asm__("s9");
    register float r2 __asm__("s10");
    register float r3 __asm__("s11");
    (void)off;
    /* two core registers per VMOV; VCVT.F32.S16 reads the low lane, the high lanes are shifted down first */
    __asm__("vmov s8, s9, %4, %5\n\tvcvt.f32.s16 s8, s8, #0\n\tvcvt.f32.s16 s9, s9, #0\n\t"
            "vmov s10, s11, %6, %7\n\tvcvt.f32.s32 s10, s10\n\tvcvt.f32.s32 s11, s11"
            : "=&t"(r0), "=&t"(r1), "=&t"(r2), "=&t"(r3)
            : "r"(a), "r"(b), "r"(ah), "r"(bh));
    v[0] = r0;
    v[1] = r1;
    v[2] = r2;
    v[3] = r3;
#else
    (void)off2;
    v[0] = (float)((int32_t)x[0] + off);
    v[1] = (float)((int32_t)x[1] + off);
    v[2] = (float)((int32_t)x[2] + off);
    v[3] = (float)((int32_t)x[3] + off);
#endif
}

/* v clamped to [-127, 127] (SSAT to [-128, 127], then -128 -> -127, on Arm). */
POCKMCU_FAST_INLINE int8_t pockmcu_clamp127(int32_t v)
{
#if defined(__arm__) && defined(__GNUC__) && defined(__ARM_FEATURE_SAT)
    __asm__("ssat %0, #8, %0" : "+r"(v));
    return (int8_t)(v < -127 ? -127 : v);
#else
    return (int8_t)(v > 127 ? 127 : (v < -127 ? -127 : v));
#endif
}

/* ---------------------------------------------------------------- bias gradient sums */
#if POCKMCU_VMLA_F32
/* (pockmcu_bias_update_s32: one VLDM per 8 gradients of a position, the 16 sums in s16-s31) */
/* g[t] = sum over p < positions (ascending, from +0) of go[p * channels + t], t < 16 */
POCKMCU_FAST_INLINE void pockmcu_bias_sums16(float *g, const float *go, int32_t positions, int32_t channels)
{
    register float a0 __asm__("s16") = 0.0f;
    register float a1 __asm__("s17") = 0.0f;
    register float a2 __asm__("s18") = 0.0f;
    register float a3 __asm__("s19") = 0.0f;
    register float a4 __asm__("s20") = 0.0f;
    register float a5 __asm__("s21") = 0.0f;
    register float a6 __asm__("s22") = 0.0f;
    register float a7 __asm__("s23") = 0.0f;
    register float a8 __asm__("s24") = 0.0f;
    register float a9 __asm__("s25") = 0.0f;
    register float a10 __asm__("s26") = 0.0f;
    register float a11 __asm__("s27") = 0.0f;
    register float a12 __asm__("s28") = 0.0f;
    register float a13 __asm__("s29") = 0.0f;
    register float a14 __asm__("s30") = 0.0f;
    register float a15 __asm__("s31") = 0.0f;
    int32_t p;
    for (p = 0; p < positions; p++, go += channels)
    {
        __asm__("vldmia %8, {s0-s7}\n\t"
                "vadd.f32 %0, %0, s0\n\t"
                "vadd.f32 %1, %1, s1\n\t"
                "vadd.f32 %2, %2, s2\n\t"
                "vadd.f32 %3, %3, s3\n\t"
                "vadd.f32 %4, %4, s4\n\t"
                "vadd.f32 %5, %5, s5\n\t"
                "vadd.f32 %6, %6, s6\n\t"
                "vadd.f32 %7, %7, s7"
                : "+t"(a0), "+t"(a1), "+t"(a2), "+t"(a3), "+t"(a4), "+t"(a5), "+t"(a6), "+t"(a7)
                : "r"(go), "m"(*(const float(*)[8])go)
                : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7");
        __asm__("vldmia %8, {s0-s7}\n\t"
                "vadd.f32 %0, %0, s0\n\t"
                "vadd.f32 %1, %1, s1\n\t"
                "vadd.f32 %2, %2, s2\n\t"
                "vadd.f32 %3, %3, s3\n\t"
                "vadd.f32 %4, %4, s4\n\t"
                "vadd.f32 %5, %5, s5\n\t"
                "vadd.f32 %6, %6, s6\n\t"
                "vadd.f32 %7, %7, s7"
                : "+t"(a8), "+t"(a9), "+t"(a10), "+t"(a11), "+t"(a12), "+t"(a13), "+t"(a14), "+t"(a15)
                : "r"(go + 8), "m"(*(const float(*)[8])(go + 8))
                : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7");
    }
    g[0] = a0, g[1] = a1, g[2] = a2, g[3] = a3, g[4] = a4, g[5] = a5, g[6] = a6, g[7] = a7;
    g[8] = a8, g[9] = a9, g[10] = a10, g[11] = a11, g[12] = a12, g[13] = a13, g[14] = a14, g[15] = a15;
}
#endif

/* ---------------------------------------------------------------- 1x1 convolution input gradient */

/* The bits of a float with the sign dropped: 0 for +0.0f and -0.0f only. */
POCKMCU_FAST_INLINE uint32_t pockmcu_f32_magnitude_bits(const float *p)
{
    uint32_t b;
    memcpy(&b, p, sizeof b);
    return b << 1;
}

/* Output channels per chunk of pockmcu_gi_1x1_rows' list of the channels with a nonzero gradient. */
#define POCKMCU_GI_CHUNK 64

/* Channels [0, len) of up to 4 input pixels: gi[p][c] = sum over o ascending, from +0, of
 * (go[p][o] * scale[o]) * (float)w[o * w_stride + c] (pockmcu_conv_grad_input_f32's terms for a 1x1
 * filter, in its order; it skips go == 0, and a term with go == 0 adds +-0 to a sum that is never -0,
 * so which zero terms are skipped changes no bit). The sums are STORED to gi[p][c].
 * 4 pixels: output channels in chunks of POCKMCU_GI_CHUNK, of which only those with a nonzero
 * gradient at one of the 4 pixels are visited (ReLU-masked gradients are mostly zero); register
 * block 4 pixels x 4 channels (16 accumulators, kept in gi between chunks), each weight converted
 * once per 4 pixels, the channel tail (1 to 3) 4 pixels x 1 channel over the same list. Fewer pixels: one pixel at a
 * time, zero terms skipped. */
#if defined(__GNUC__) || defined(__clang__)
    #define POCKMCU_GI_ROWS_ATTR static __attribute__((noinline, unused)) /* one copy, its own registers */
#else
    #define POCKMCU_GI_ROWS_ATTR static inline
#endif

POCKMCU_GI_ROWS_ATTR void pockmcu_gi_1x1_rows(const float *const go[4],
                                              float *const gi[4],
                                              int32_t np,
                                              const int8_t *w,
                                              int32_t w_stride,
                                              int32_t len,
                                              const float *scale,
                                              int32_t out_c)
{
    int32_t c = 0;
    int32_t o;
    if (np == 4 && len >= 4)
    {
        const float *g0 = go[0], *g1 = go[1], *g2 = go[2], *g3 = go[3];
        int16_t list[POCKMCU_GI_CHUNK];
        float sv[POCKMCU_GI_CHUNK * 4];
        int32_t o0, k;
        for (o0 = 0; o0 < out_c; o0 += POCKMCU_GI_CHUNK)
        {
            const int32_t o_end = out_c - o0 < POCKMCU_GI_CHUNK ? out_c : o0 + POCKMCU_GI_CHUNK;
            int32_t n = 0;
            for (o = o0; o < o_end; o++)
            {
                if ((pockmcu_f32_magnitude_bits(g0 + o) | pockmcu_f32_magnitude_bits(g1 + o) |
                     pockmcu_f32_magnitude_bits(g2 + o) | pockmcu_f32_magnitude_bits(g3 + o)) != 0u)
                {
                    list[n++] = (int16_t)(o - o0);
                }
            }
            if (n == 0 && o0 > 0)
            {
                continue;
            }
            for (k = 0; k < n; k++) /* the scaled gradients of the listed channels, once per chunk */
            {
                const int32_t oo = o0 + list[k];
                const float sc = scale[oo];
                sv[4 * k] = g0[oo] * sc;
                sv[4 * k + 1] = g1[oo] * sc;
                sv[4 * k + 2] = g2[oo] * sc;
                sv[4 * k + 3] = g3[oo] * sc;
            }
            for (c = 0; c + 4 <= len; c += 4)
            {
                float a00, a01, a02, a03, a10, a11, a12, a13, a20, a21, a22, a23, a30, a31, a32, a33;
                const int8_t *wc = w + o0 * w_stride + c;
                if (o0 == 0)
                {
                    a00 = a01 = a02 = a03 = a10 = a11 = a12 = a13 = 0.0f;
                    a20 = a21 = a22 = a23 = a30 = a31 = a32 = a33 = 0.0f;
                }
                else
                {
                    a00 = gi[0][c], a01 = gi[0][c + 1], a02 = gi[0][c + 2], a03 = gi[0][c + 3];
                    a10 = gi[1][c], a11 = gi[1][c + 1], a12 = gi[1][c + 2], a13 = gi[1][c + 3];
                    a20 = gi[2][c], a21 = gi[2][c + 1], a22 = gi[2][c + 2], a23 = gi[2][c + 3];
                    a30 = gi[3][c], a31 = gi[3][c + 1], a32 = gi[3][c + 2], a33 = gi[3][c + 3];
                }
                for (k = 0; k < n; k++)
                {
                    float sg[4], wv[4];
                    float s0, s1, s2, s3, w0, w1, w2, w3;
                    pockmcu_ld4_f32(sv + 4 * k, sg);
                    pockmcu_cvt4_s8(wc + list[k] * w_stride, 0, 0u, wv);
                    s0 = sg[0], s1 = sg[1], s2 = sg[2], s3 = sg[3];
                    w0 = wv[0], w1 = wv[1], w2 = wv[2], w3 = wv[3];
                    a00 = pockmcu_mla_f32(a00, s0, w0);
                    a01 = pockmcu_mla_f32(a01, s0, w1);
                    a02 = pockmcu_mla_f32(a02, s0, w2);
                    a03 = pockmcu_mla_f32(a03, s0, w3);
                    a10 = pockmcu_mla_f32(a10, s1, w0);
                    a11 = pockmcu_mla_f32(a11, s1, w1);
                    a12 = pockmcu_mla_f32(a12, s1, w2);
                    a13 = pockmcu_mla_f32(a13, s1, w3);
                    a20 = pockmcu_mla_f32(a20, s2, w0);
                    a21 = pockmcu_mla_f32(a21, s2, w1);
                    a22 = pockmcu_mla_f32(a22, s2, w2);
                    a23 = pockmcu_mla_f32(a23, s2, w3);
                    a30 = pockmcu_mla_f32(a30, s3, w0);
                    a31 = pockmcu_mla_f32(a31, s3, w1);
                    a32 = pockmcu_mla_f32(a32, s3, w2);
                    a33 = pockmcu_mla_f32(a33, s3, w3);
                }
                gi[0][c] = a00, gi[0][c + 1] = a01, gi[0][c + 2] = a02, gi[0][c + 3] = a03;
                gi[1][c] = a10, gi[1][c + 1] = a11, gi[1][c + 2] = a12, gi[1][c + 3] = a13;
                gi[2][c] = a20, gi[2][c + 1] = a21, gi[2][c + 2] = a22, gi[2][c + 3] = a23;
                gi[3][c] = a30, gi[3][c + 1] = a31, gi[3][c + 2] = a32, gi[3][c + 3] = a33;
            }
            for (; c < len; c++) /* the channel tail (1 to 3), one channel at a time over the listed channels */
            {
                float a0, a1, a2, a3;
                const int8_t *wc = w + o0 * w_stride + c;
                if (o0 == 0)
                {
                    a0 = a1 = a2 = a3 = 0.0f;
                }
                else
                {
                    a0 = gi[0][c], a1 = gi[1][c], a2 = gi[2][c], a3 = gi[3][c];
                }
                for (k = 0; k < n; k++)
                {
                    float sg[4];
                    const float w0 = (float)wc[list[k] * w_stride];
                    pockmcu_ld4_f32(sv + 4 * k, sg);
                    a0 = pockmcu_mla_f32(a0, sg[0], w0);
                    a1 = pockmcu_mla_f32(a1, sg[1], w0);
                    a2 = pockmcu_mla_f32(a2, sg[2], w0);
                    a3 = pockmcu_mla_f32(a3, sg[3], w0);
                }
                gi[0][c] = a0, gi[1][c] = a1, gi[2][c] = a2, gi[3][c] = a3;
            }
        }
        c = len;
    }
    for (int32_t p = 0; p < np; p++) /* fewer than 4 pixels, or the channel tail: one pixel at a time */
    {
        const float *g = go[p];
        int32_t cc = c;
        for (; cc + 4 <= len; cc += 4)
        {
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            const int8_t *wp = w + cc;
            for (o = 0; o < out_c; o++, wp += w_stride)
            {
                float s0;
                if (g[o] == 0.0f)
                {
                    continue;
                }
                s0 = g[o] * scale[o];
                a0 = pockmcu_mla_f32(a0, s0, (float)wp[0]);
                a1 = pockmcu_mla_f32(a1, s0, (float)wp[1]);
                a2 = pockmcu_mla_f32(a2, s0, (float)wp[2]);
                a3 = pockmcu_mla_f32(a3, s0, (float)wp[3]);
            }
            gi[p][cc] = a0;
            gi[p][cc + 1] = a1;
            gi[p][cc + 2] = a2;
            gi[p][cc + 3] = a3;
        }
        for (; cc < len; cc++)
        {
            float a = 0.0f;
            const int8_t *wp = w + cc;
            for (o = 0; o < out_c; o++, wp += w_stride)
            {
                if (g[o] != 0.0f)
                {
                    a = pockmcu_mla_f32(a, g[o] * scale[o], (float)*wp);
                }
            }
            gi[p][cc] = a;
        }
    }
}

/* pockmcu_gi_1x1_rows for 8 pixels (the same sums, stored): output channels in chunks of POCKMCU_GI_CHUNK8, of
 * which only those with a nonzero gradient at one of the 8 pixels are visited; register block 8 pixels x 2
 * channels (16 accumulators, kept in gi between chunks): per listed channel two VLDM of the 8 scaled gradients,
 * 2 weights converted, 16 multiply-adds. An odd last channel runs pockmcu_gi_1x1_rows' one-pixel loop. */
#define POCKMCU_GI_CHUNK8 32

POCKMCU_GI_ROWS_ATTR void pockmcu_gi_1x1_rows8(const float *const go[8],
                                               float *const gi[8],
                                               const int8_t *w,
                                               int32_t w_stride,
                                               int32_t len,
                                               const float *scale,
                                               int32_t out_c)
{
    int16_t list[POCKMCU_GI_CHUNK8];
    float sv[POCKMCU_GI_CHUNK8 * 8];
    int32_t o0, k, c, o, q;
    for (o0 = 0; o0 < out_c; o0 += POCKMCU_GI_CHUNK8)
    {
        const int32_t o_end = out_c - o0 < POCKMCU_GI_CHUNK8 ? out_c : o0 + POCKMCU_GI_CHUNK8;
        int32_t n = 0;
        for (o = o0; o < o_end; o++)
        {
            uint32_t any = 0u;
            for (q = 0; q < 8; q++)
            {
                any |= pockmcu_f32_magnitude_bits(go[q] + o);
            }
            if (any != 0u)
            {
                list[n++] = (int16_t)(o - o0);
            }
        }
        if (n == 0 && o0 > 0)
        {
            continue;
        }
        for (k = 0; k < n; k++) /* the scaled gradients of the listed channels, once per chunk */
        {
            const int32_t oo = o0 + list[k];
            const float sc = scale[oo];
            for (q = 0; q < 8; q++)
            {
                sv[8 * k + q] = go[q][oo] * sc;
            }
        }
        for (c = 0; c + 2 <= len; c += 2)
        {
            float a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51, a60, a61, a70, a71;
            const int8_t *wc = w + o0 * w_stride + c;
            const float *sp = sv;
            if (o0 == 0)
            {
                a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = 0.0f;
                a40 = a41 = a50 = a51 = a60 = a61 = a70 = a71 = 0.0f;
            }
            else
            {
                a00 = gi[0][c], a01 = gi[0][c + 1], a10 = gi[1][c], a11 = gi[1][c + 1];
                a20 = gi[2][c], a21 = gi[2][c + 1], a30 = gi[3][c], a31 = gi[3][c + 1];
                a40 = gi[4][c], a41 = gi[4][c + 1], a50 = gi[5][c], a51 = gi[5][c + 1];
                a60 = gi[6][c], a61 = gi[6][c + 1], a70 = gi[7][c], a71 = gi[7][c + 1];
            }
            if (n == o_end - o0) /* every channel of the chunk listed (dense gradients): weights w_stride apart */
            {
                const int8_t *wk = wc;
                for (k = 0; k < n; k++, sp += 8, wk += w_stride)
                {
                    float s8[8], wv[2];
                    float w0, w1;
                    pockmcu_ld8_f32(sp, s8);
                    pockmcu_cvt2_s8(wk, wv);
                    w0 = wv[0], w1 = wv[1];
                    a00 = pockmcu_mla_f32(a00, s8[0], w0);
                    a01 = pockmcu_mla_f32(a01, s8[0], w1);
                    a10 = pockmcu_mla_f32(a10, s8[1], w0);
                    a11 = pockmcu_mla_f32(a11, s8[1], w1);
                    a20 = pockmcu_mla_f32(a20, s8[2], w0);
                    a21 = pockmcu_mla_f32(a21, s8[2], w1);
                    a30 = pockmcu_mla_f32(a30, s8[3], w0);
                    a31 = pockmcu_mla_f32(a31, s8[3], w1);
                    a40 = pockmcu_mla_f32(a40, s8[4], w0);
                    a41 = pockmcu_mla_f32(a41, s8[4], w1);
                    a50 = pockmcu_mla_f32(a50, s8[5], w0);
                    a51 = pockmcu_mla_f32(a51, s8[5], w1);
                    a60 = pockmcu_mla_f32(a60, s8[6], w0);
                    a61 = pockmcu_mla_f32(a61, s8[6], w1);
                    a70 = pockmcu_mla_f32(a70, s8[7], w0);
                    a71 = pockmcu_mla_f32(a71, s8[7], w1);
                }
            }
            else
            {
                for (k = 0; k < n; k++, sp += 8)
                {
                    float s8[8], wv[2];
                    float w0, w1;
                    pockmcu_ld8_f32(sp, s8);
                    pockmcu_cvt2_s8(wc + list[k] * w_stride, wv);
                    w0 = wv[0], w1 = wv[1];
                    a00 = pockmcu_mla_f32(a00, s8[0], w0);
                    a01 = pockmcu_mla_f32(a01, s8[0], w1);
                    a10 = pockmcu_mla_f32(a10, s8[1], w0);
                    a11 = pockmcu_mla_f32(a11, s8[1], w1);
                    a20 = pockmcu_mla_f32(a20, s8[2], w0);
                    a21 = pockmcu_mla_f32(a21, s8[2], w1);
                    a30 = pockmcu_mla_f32(a30, s8[3], w0);
                    a31 = pockmcu_mla_f32(a31, s8[3], w1);
                    a40 = pockmcu_mla_f32(a40, s8[4], w0);
                    a41 = pockmcu_mla_f32(a41, s8[4], w1);
                    a50 = pockmcu_mla_f32(a50, s8[5], w0);
                    a51 = pockmcu_mla_f32(a51, s8[5], w1);
                    a60 = pockmcu_mla_f32(a60, s8[6], w0);
                    a61 = pockmcu_mla_f32(a61, s8[6], w1);
                    a70 = pockmcu_mla_f32(a70, s8[7], w0);
                    a71 = pockmcu_mla_f32(a71, s8[7], w1);
                }
            }
            gi[0][c] = a00, gi[0][c + 1] = a01, gi[1][c] = a10, gi[1][c + 1] = a11;
            gi[2][c] = a20, gi[2][c + 1] = a21, gi[3][c] = a30, gi[3][c + 1] = a31;
            gi[4][c] = a40, gi[4][c + 1] = a41, gi[5][c] = a50, gi[5][c + 1] = a51;
            gi[6][c] = a60, gi[6][c + 1] = a61, gi[7][c] = a70, gi[7][c + 1] = a71;
        }
    }
    if (len & 1) /* the last channel, one pixel at a time */
    {
        c = len - 1;
        for (q = 0; q < 8; q++)
        {
            const float *g = go[q];
            const int8_t *wp = w + c;
            float a = 0.0f;
            for (o = 0; o < out_c; o++, wp += w_stride)
            {
                if (g[o] != 0.0f)
                {
                    a = pockmcu_mla_f32(a, g[o] * scale[o], (float)*wp);
                }
            }
            gi[q][c] = a;
        }
    }
}

/* Whether pockmcu_gi_1x1_rows8 runs 8 pixels: when every output channel with a nonzero gradient at one of the 8
 * pixels has one in each half (pixels 0-3 and 4-7), as dense gradients do; the two pockmcu_gi_1x1_rows calls then
 * visit twice the channels rows8 visits, which makes rows8 cheaper (ReLU-masked gradients, often zero, are
 * cheaper 4 pixels at a time). Either way the same bits. */
POCKMCU_FAST_INLINE int32_t pockmcu_gi_1x1_take8(const float *const go[8], int32_t out_c)
{
    int32_t o;
    for (o = 0; o < out_c; o++)
    {
        const uint32_t a = pockmcu_f32_magnitude_bits(go[0] + o) | pockmcu_f32_magnitude_bits(go[1] + o) |
            pockmcu_f32_magnitude_bits(go[2] + o) | pockmcu_f32_magnitude_bits(go[3] + o);
        const uint32_t b = pockmcu_f32_magnitude_bits(go[4] + o) | pockmcu_f32_magnitude_bits(go[5] + o) |
            pockmcu_f32_magnitude_bits(go[6] + o) | pockmcu_f32_magnitude_bits(go[7] + o);
        if ((a == 0u) != (b == 0u))
        {
            return 0;
        }
    }
    return 1;
}

/* Up to 8 pixels of one segment: by pockmcu_gi_1x1_rows8 when take8 (8 pixels, 2 channels or more), else in
 * groups of 4 by pockmcu_gi_1x1_rows. */
POCKMCU_FAST_INLINE void pockmcu_gi_1x1_segment(const float *const go[8],
                                                float *const gi[8],
                                                int32_t np,
                                                int32_t take8,
                                                const int8_t *w,
                                                int32_t w_stride,
                                                int32_t len,
                                                const float *scale,
                                                int32_t out_c)
{
    if (np == 8 && take8 && len >= 2)
    {
        pockmcu_gi_1x1_rows8(go, gi, w, w_stride, len, scale, out_c);
        return;
    }
    pockmcu_gi_1x1_rows(go, gi, np < 4 ? np : 4, w, w_stride, len, scale, out_c);
    if (np > 4)
    {
        pockmcu_gi_1x1_rows(go + 4, gi + 4, np - 4, w, w_stride, len, scale, out_c);
    }
}

/* The 1x1 input gradient of up to 8 pixels over both parts of a split filter (head_c = 0: no split). */
POCKMCU_FAST_INLINE void pockmcu_gi_1x1_flush(const float *const go[8],
                                              float *const gi[8],
                                              int32_t np,
                                              const int8_t *filter,
                                              const int8_t *filter_head,
                                              int32_t head_c,
                                              int32_t in_c,
                                              const float *scale,
                                              int32_t out_c)
{
    const int32_t take8 = np == 8 && pockmcu_gi_1x1_take8(go, out_c);
    if (head_c > 0)
    {
        float *gi2[8];
        int32_t p;
        pockmcu_gi_1x1_segment(go, gi, np, take8, filter_head, head_c, head_c, scale, out_c);
        for (p = 0; p < 8; p++)
        {
            gi2[p] = p < np ? gi[p] + head_c : gi[0];
        }
        pockmcu_gi_1x1_segment(go, gi2, np, take8, filter + head_c, in_c, in_c - head_c, scale, out_c);
    }
    else
    {
        pockmcu_gi_1x1_segment(go, gi, np, take8, filter, in_c, in_c, scale, out_c);
    }
}

/* pockmcu_conv_grad_input_f32 (and its split form) for a 1x1 filter, any stride and padding: every
 * input pixel receives the terms of at most one output pixel, summed over o ascending from +0, which
 * is the order of the general loops; bit-identical to them. Dimensions checked by the caller. */
POCKMCU_FAST_INLINE void pockmcu_conv_1x1_grad_input_fast(const cmsis_nn_conv_params *conv_params,
                                                          const cmsis_nn_dims *input_dims,
                                                          const cmsis_nn_dims *filter_dims,
                                                          const int8_t *filter,
                                                          const int8_t *filter_head,
                                                          int32_t head_c,
                                                          const float *filter_scale,
                                                          const cmsis_nn_dims *output_dims,
                                                          const float *grad_output,
                                                          float *grad_input)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t out_c = filter_dims->n;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t stride_h = conv_params->stride.h;
    const int32_t stride_w = conv_params->stride.w;
    const int32_t pad_h = conv_params->padding.h;
    const int32_t pad_w = conv_params->padding.w;
    const float *go[8];
    float *gi[8];
    int32_t np = 0;
    int32_t b, oy, ox;

    if (!(stride_h == 1 && stride_w == 1 && pad_h == 0 && pad_w == 0 && out_h == in_h && out_w == in_w))
    {
        memset(grad_input, 0, (size_t)input_dims->n * (size_t)in_h * (size_t)in_w * (size_t)in_c * sizeof(float));
    }
    for (b = 0; b < input_dims->n; b++)
    {
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t iy = oy * stride_h - pad_h;
            if (iy < 0 || iy >= in_h)
            {
                continue;
            }
            for (ox = 0; ox < out_w; ox++)
            {
                const int32_t ix = ox * stride_w - pad_w;
                if (ix < 0 || ix >= in_w)
                {
                    continue;
                }
                go[np] = grad_output + ((b * out_h + oy) * out_w + ox) * out_c;
                gi[np] = grad_input + ((b * in_h + iy) * in_w + ix) * in_c;
                if (++np == 8)
                {
                    pockmcu_gi_1x1_flush(go, gi, 8, filter, filter_head, head_c, in_c, filter_scale, out_c);
                    np = 0;
                }
            }
        }
    }
    if (np > 0)
    {
        pockmcu_gi_1x1_flush(go, gi, np, filter, filter_head, head_c, in_c, filter_scale, out_c);
    }
}

#endif /* POCKMCU_TRAIN_FAST_H */
