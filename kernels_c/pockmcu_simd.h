/*
 * pockmcu_simd.h - the Armv7E-M / Armv8-M DSP instructions the optimized kernels use, as inline
 * functions, with a portable C equivalent of each (bit for bit) where the core or the host lacks them.
 *
 * On a core with the DSP extension (__ARM_FEATURE_DSP: Cortex-M4, M7, M33, M55) each function is the
 * one instruction (ACLE intrinsics from arm_acle.h, inline assembly for SXTB16 with ROR #8, which
 * GCC 12's ACLE lacks). Elsewhere (Cortex-M3, the host simulation) each is plain C that computes the
 * same 32 bits, so the host runs the very loops of the DSP kernels and host = QEMU holds for them
 * too. Lanes: "lo" is bits 15..0, "hi" bits 31..16; all arithmetic wraps modulo 2^32 as the
 * instructions do (none of these set a result other than the architected one; the Q flag of
 * SMLAD is never read).
 */
#ifndef POCKMCU_SIMD_H
#define POCKMCU_SIMD_H

#include <stdint.h>
#include <string.h>

#if defined(__ARM_FEATURE_DSP) && __ARM_FEATURE_DSP
    #include <arm_acle.h>
    #define POCKMCU_HAS_DSP 1
#else
    #define POCKMCU_HAS_DSP 0
#endif

#if defined(__GNUC__) || defined(__clang__)
    #define POCKMCU_SIMD_INLINE static inline __attribute__((always_inline))
#else
    #define POCKMCU_SIMD_INLINE static inline
#endif

/* Four int8 values from any address as one word (byte 0 in bits 7..0, little-endian). */
POCKMCU_SIMD_INLINE uint32_t pockmcu_read_s8x4(const int8_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* The same, advancing the pointer by 4. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_read_s8x4_ia(const int8_t **p)
{
    uint32_t v;
    memcpy(&v, *p, 4);
    *p += 4;
    return v;
}

/* Two int16 values from any address as one word. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_read_s16x2(const int16_t *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

#if !POCKMCU_HAS_DSP
/* Helpers of the portable equivalents: a lane as a signed value, two lanes into a word. */
POCKMCU_SIMD_INLINE int32_t pockmcu_lo16(uint32_t x) { return (int32_t)(int16_t)(uint16_t)(x & 0xFFFFu); }

POCKMCU_SIMD_INLINE int32_t pockmcu_hi16(uint32_t x) { return (int32_t)(int16_t)(uint16_t)(x >> 16); }

POCKMCU_SIMD_INLINE uint32_t pockmcu_pack16(int32_t lo, int32_t hi)
{
    return ((uint32_t)lo & 0xFFFFu) | ((uint32_t)hi << 16);
}
#endif

/* SXTB16: bytes 0 and 2 of x, sign-extended to the two 16-bit lanes. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_sxtb16(uint32_t x)
{
#if POCKMCU_HAS_DSP
    return __sxtb16(x);
#else
    return pockmcu_pack16((int8_t)(uint8_t)(x & 0xFFu), (int8_t)(uint8_t)((x >> 16) & 0xFFu));
#endif
}

/* SXTB16 x, ROR #8: bytes 1 and 3 of x, sign-extended to the two 16-bit lanes. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_sxtb16_ror8(uint32_t x)
{
#if POCKMCU_HAS_DSP
    uint32_t r;
    __asm__("sxtb16 %0, %1, ror #8" : "=r"(r) : "r"(x));
    return r;
#else
    return pockmcu_pack16((int8_t)(uint8_t)((x >> 8) & 0xFFu), (int8_t)(uint8_t)(x >> 24));
#endif
}

/* SXTAB16 acc, x: acc's lanes plus bytes 0 and 2 of x sign-extended (each lane wraps). */
POCKMCU_SIMD_INLINE uint32_t pockmcu_sxtab16(uint32_t acc, uint32_t x)
{
#if POCKMCU_HAS_DSP
    return __sxtab16(acc, x);
#else
    return pockmcu_pack16(pockmcu_lo16(acc) + (int8_t)(uint8_t)(x & 0xFFu),
                          pockmcu_hi16(acc) + (int8_t)(uint8_t)((x >> 16) & 0xFFu));
#endif
}

/* SXTAB16 acc, x, ROR #8: acc's lanes plus bytes 1 and 3 of x sign-extended. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_sxtab16_ror8(uint32_t acc, uint32_t x)
{
#if POCKMCU_HAS_DSP
    uint32_t r;
    __asm__("sxtab16 %0, %1, %2, ror #8" : "=r"(r) : "r"(acc), "r"(x));
    return r;
#else
    return pockmcu_pack16(pockmcu_lo16(acc) + (int8_t)(uint8_t)((x >> 8) & 0xFFu),
                          pockmcu_hi16(acc) + (int8_t)(uint8_t)(x >> 24));
#endif
}

/* SADD16: lane-wise 16-bit addition (each lane wraps). */
POCKMCU_SIMD_INLINE uint32_t pockmcu_sadd16(uint32_t x, uint32_t y)
{
#if POCKMCU_HAS_DSP
    return __sadd16(x, y);
#else
    return pockmcu_pack16(pockmcu_lo16(x) + pockmcu_lo16(y), pockmcu_hi16(x) + pockmcu_hi16(y));
#endif
}

/* SMLAD: acc + lo(x) * lo(y) + hi(x) * hi(y), wrapping modulo 2^32. */
POCKMCU_SIMD_INLINE int32_t pockmcu_smlad(uint32_t x, uint32_t y, int32_t acc)
{
#if POCKMCU_HAS_DSP
    return __smlad(x, y, acc);
#else
    return (int32_t)((uint32_t)acc + (uint32_t)(pockmcu_lo16(x) * pockmcu_lo16(y)) +
                     (uint32_t)(pockmcu_hi16(x) * pockmcu_hi16(y)));
#endif
}

/* SMLADX: acc + lo(x) * hi(y) + hi(x) * lo(y), wrapping modulo 2^32. */
POCKMCU_SIMD_INLINE int32_t pockmcu_smladx(uint32_t x, uint32_t y, int32_t acc)
{
#if POCKMCU_HAS_DSP
    return __smladx(x, y, acc);
#else
    return (int32_t)((uint32_t)acc + (uint32_t)(pockmcu_lo16(x) * pockmcu_hi16(y)) +
                     (uint32_t)(pockmcu_hi16(x) * pockmcu_lo16(y)));
#endif
}

/* SMLABB: acc + lo(x) * lo(y). */
POCKMCU_SIMD_INLINE int32_t pockmcu_smlabb(uint32_t x, uint32_t y, int32_t acc)
{
#if POCKMCU_HAS_DSP
    return __smlabb(x, y, acc);
#else
    return (int32_t)((uint32_t)acc + (uint32_t)(pockmcu_lo16(x) * pockmcu_lo16(y)));
#endif
}

/* SMLATT: acc + hi(x) * hi(y). */
POCKMCU_SIMD_INLINE int32_t pockmcu_smlatt(uint32_t x, uint32_t y, int32_t acc)
{
#if POCKMCU_HAS_DSP
    return __smlatt(x, y, acc);
#else
    return (int32_t)((uint32_t)acc + (uint32_t)(pockmcu_hi16(x) * pockmcu_hi16(y)));
#endif
}

/* PKHBT x, y, LSL #16: lo(x) in the low lane, lo(y) in the high lane. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_pkhbt(uint32_t x, uint32_t y) { return (x & 0xFFFFu) | (y << 16); }

/* PKHTB x, y, ASR #16: hi(y) in the low lane, hi(x) in the high lane. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_pkhtb(uint32_t x, uint32_t y) { return (x & 0xFFFF0000u) | (y >> 16); }

/* -- dspdw: depthwise / pooling / ADD kernels (pockmcu_nn_dsp_dw.h) ------------------------------- */

/* SMMULR: the high word of a * b, rounded: (a * b + 2^31) >> 32. */
POCKMCU_SIMD_INLINE int32_t pockmcu_smmulr(int32_t a, int32_t b)
{
#if POCKMCU_HAS_DSP
    int32_t r;
    __asm__("smmulr %0, %1, %2" : "=r"(r) : "r"(a), "r"(b));
    return r;
#else
    return (int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 31)) >> 32);
#endif
}

/* SSAT Rd, #8, Rn, ASR #1: x >> 1 (arithmetic) saturated to [-128, 127]. */
POCKMCU_SIMD_INLINE int32_t pockmcu_ssat8_asr1(int32_t x)
{
#if POCKMCU_HAS_DSP
    int32_t r;
    __asm__("ssat %0, #8, %1, asr #1" : "=r"(r) : "r"(x));
    return r;
#else
    const int32_t h = x >> 1;
    return h < -128 ? -128 : (h > 127 ? 127 : h);
#endif
}

/* SSUB8 + SEL: the byte-wise maximum of two words of 4 int8 (lane i: max(a_i, b_i)). */
POCKMCU_SIMD_INLINE uint32_t pockmcu_max_s8x4(uint32_t a, uint32_t b)
{
#if POCKMCU_HAS_DSP
    uint32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %1, %2" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
#else
    uint32_t r = 0;
    int i;
    for (i = 0; i < 32; i += 8)
    {
        const int8_t x = (int8_t)(uint8_t)(a >> i), y = (int8_t)(uint8_t)(b >> i);
        r |= (uint32_t)(uint8_t)(x > y ? x : y) << i;
    }
    return r;
#endif
}

/* SSUB8 + SEL: the byte-wise minimum of two words of 4 int8 (lane i: min(a_i, b_i)). */
POCKMCU_SIMD_INLINE uint32_t pockmcu_min_s8x4(uint32_t a, uint32_t b)
{
#if POCKMCU_HAS_DSP
    uint32_t r;
    __asm__("ssub8 %0, %1, %2\n\tsel %0, %2, %1" : "=&r"(r) : "r"(a), "r"(b) : "cc");
    return r;
#else
    uint32_t r = 0;
    int i;
    for (i = 0; i < 32; i += 8)
    {
        const int8_t x = (int8_t)(uint8_t)(a >> i), y = (int8_t)(uint8_t)(b >> i);
        r |= (uint32_t)(uint8_t)(x < y ? x : y) << i;
    }
    return r;
#endif
}

/* The low bytes of four words packed into one (a in bits 7..0, d in bits 31..24): BFI on Arm. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_pack_s8x4(int32_t a, int32_t b, int32_t c, int32_t d)
{
#if POCKMCU_HAS_DSP
    uint32_t r = (uint32_t)a;
    __asm__("bfi %0, %1, #8, #8\n\tbfi %0, %2, #16, #8\n\tbfi %0, %3, #24, #8" : "+r"(r) : "r"(b), "r"(c), "r"(d));
    return r;
#else
    return ((uint32_t)a & 0xFFu) | (((uint32_t)b & 0xFFu) << 8) | (((uint32_t)c & 0xFFu) << 16) | ((uint32_t)d << 24);
#endif
}

/* -- dspconv (issue 13): loads for the DSP convolution / fully connected kernels (pockmcu_dsp_loops.h) -- */

/* LDRD with post-increment: the words p[0] and p[1] of a word-aligned p, then p += 2. GCC's Cortex-M
 * tuning splits 64-bit loads into two LDRs; this is the one instruction. */
POCKMCU_SIMD_INLINE void pockmcu_read_u32x2_ia(const uint32_t **p, uint32_t *lo, uint32_t *hi)
{
#if POCKMCU_HAS_DSP
    const uint32_t *q = *p;
    uint32_t a, b;
    __asm__("ldrd %0, %1, [%2], #8" : "=&r"(a), "=&r"(b), "+r"(q) : "m"(q[0]), "m"(q[1]));
    *lo = a;
    *hi = b;
    *p = q;
#else
    *lo = (*p)[0];
    *hi = (*p)[1];
    *p += 2;
#endif
}

/* LDRD with post-increment of eight int8 values at a word-aligned p (the caller guarantees the alignment):
 * bytes 0..3 in lo, 4..7 in hi, then p += 8. */
POCKMCU_SIMD_INLINE void pockmcu_read_s8x8_ia(const int8_t **p, uint32_t *lo, uint32_t *hi)
{
#if POCKMCU_HAS_DSP
    const int8_t *q = *p;
    uint32_t a, b;
    __asm__("ldrd %0, %1, [%2], #8" : "=&r"(a), "=&r"(b), "+r"(q) : "m"(*(const int8_t(*)[8])q));
    *lo = a;
    *hi = b;
    *p = q;
#else
    memcpy(lo, *p, 4);
    memcpy(hi, *p + 4, 4);
    *p += 8;
#endif
}

/* -- dsp13c (issue 13): paired-lane multiplies and the folded requantization of the DSP kernels -------------- */

/* SMLABT: acc + lo(x) * hi(y). */
POCKMCU_SIMD_INLINE int32_t pockmcu_smlabt(uint32_t x, uint32_t y, int32_t acc)
{
#if POCKMCU_HAS_DSP
    return __smlabt(x, y, acc);
#else
    return (int32_t)((uint32_t)acc + (uint32_t)(pockmcu_lo16(x) * pockmcu_hi16(y)));
#endif
}

/* SMLATB: acc + hi(x) * lo(y). */
POCKMCU_SIMD_INLINE int32_t pockmcu_smlatb(uint32_t x, uint32_t y, int32_t acc)
{
#if POCKMCU_HAS_DSP
    return __smlatb(x, y, acc);
#else
    return (int32_t)((uint32_t)acc + (uint32_t)(pockmcu_hi16(x) * pockmcu_lo16(y)));
#endif
}

/* SMMLAR: the low word of (acc * 2^32 + a * b + 2^31) >> 32, i.e. acc + SMMULR(a, b) modulo 2^32. */
POCKMCU_SIMD_INLINE int32_t pockmcu_smmlar(int32_t a, int32_t b, int32_t acc)
{
#if POCKMCU_HAS_DSP
    int32_t r;
    __asm__("smmlar %0, %1, %2, %3" : "=r"(r) : "r"(a), "r"(b), "r"(acc));
    return r;
#else
    return (int32_t)((uint32_t)acc + (uint32_t)(int32_t)(((int64_t)a * (int64_t)b + ((int64_t)1 << 31)) >> 32));
#endif
}

/* SSAT Rd, #8, Rn: x saturated to [-128, 127]. */
POCKMCU_SIMD_INLINE int32_t pockmcu_ssat8(int32_t x)
{
#if POCKMCU_HAS_DSP
    return __ssat(x, 8);
#else
    return x < -128 ? -128 : (x > 127 ? 127 : x);
#endif
}

/* LDRD at a constant word offset: the words p[off] and p[off + 1] of a word-aligned p (GCC's Cortex-M tuning
 * would split the 64-bit load into two LDRs), off + 1 < 128. */
POCKMCU_SIMD_INLINE void pockmcu_read_u32x2_at(const uint32_t *p, const int32_t off, uint32_t *lo, uint32_t *hi)
{
#if POCKMCU_HAS_DSP
    uint32_t a, b;
    /* the memory operand names p's first 128 words (the kernels' offsets stay below): an address gcc has in p */
    __asm__("ldrd %0, %1, [%2, %3]" : "=r"(a), "=r"(b) : "r"(p), "n"(off * 4), "m"(*(const uint32_t(*)[128])p));
    *lo = a;
    *hi = b;
#else
    *lo = p[off];
    *hi = p[off + 1];
#endif
}

/* The low bytes of two words packed into the low half of one (a in bits 7..0, b in 15..8; bits 31..16 are
 * left over): BFI on Arm. Only the low 16 bits are defined. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_pack_s8x2(int32_t a, int32_t b)
{
#if POCKMCU_HAS_DSP
    uint32_t r = (uint32_t)a;
    __asm__("bfi %0, %1, #8, #8" : "+r"(r) : "r"(b));
    return r;
#else
    return ((uint32_t)a & 0xFFu) | (((uint32_t)b & 0xFFu) << 8);
#endif
}

/* PKHBT x, y, LSL #16 as the instruction: lo(x) in the low lane, lo(y) in the high lane (GCC does not find it
 * in the C of pockmcu_pkhbt). */
POCKMCU_SIMD_INLINE uint32_t pockmcu_pkhbt_lsl16(uint32_t x, uint32_t y)
{
#if POCKMCU_HAS_DSP
    uint32_t r;
    __asm__("pkhbt %0, %1, %2, lsl #16" : "=r"(r) : "r"(x), "r"(y));
    return r;
#else
    return (x & 0xFFFFu) | (y << 16);
#endif
}

/* PKHTB x, y, ASR #16 as the instruction: hi(y) in the low lane, hi(x) in the high lane. */
POCKMCU_SIMD_INLINE uint32_t pockmcu_pkhtb_asr16(uint32_t x, uint32_t y)
{
#if POCKMCU_HAS_DSP
    uint32_t r;
    __asm__("pkhtb %0, %1, %2, asr #16" : "=r"(r) : "r"(x), "r"(y));
    return r;
#else
    return (x & 0xFFFF0000u) | (y >> 16);
#endif
}

/* An empty statement that makes pointer p depend on value v: loads through p are then scheduled after v is
 * computed, which keeps GCC from hoisting every load of an unrolled loop (and spilling) ahead of its
 * multiply-accumulates. No instruction; the portable build ignores it. */
#if POCKMCU_HAS_DSP && (defined(__GNUC__) || defined(__clang__))
    #define POCKMCU_ORDER_AFTER(p, v) __asm__("" : "+r"(p) : "r"(v))
#else
    #define POCKMCU_ORDER_AFTER(p, v) ((void)0)
#endif

/* STRD at a constant word offset: lo to p[off], hi to p[off + 1] of a word-aligned p, off + 1 < 128. */
POCKMCU_SIMD_INLINE void pockmcu_write_u32x2_at(uint32_t *p, const int32_t off, uint32_t lo, uint32_t hi)
{
#if POCKMCU_HAS_DSP
    __asm__("strd %1, %2, [%3, %4]" : "=m"(*(uint32_t(*)[128])p) : "r"(lo), "r"(hi), "r"(p), "n"(off * 4));
#else
    p[off] = lo;
    p[off + 1] = hi;
#endif
}

#endif /* POCKMCU_SIMD_H */
