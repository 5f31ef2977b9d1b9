/*
 * pockmcu_wgrad_fast.h - inline helpers of the fused weight-gradient + update kernels (not part of the public
 * API). Each computes exactly the float32 values its portable form spells out:
 *
 * - pockmcu_ld4_f32(p, v): v[0..3] = p[0..3]; one VLDM on a core with a single-precision FPU.
 * - pockmcu_cvt4_s8(x, off, off2, v): v[k] = (float)((int32_t)x[k] + off) for k < 4 (exact: |x + off| <= 255);
 *   on a DSP + FPU core the bytes are widened with the offset added two at a time (SXTAB16, off2 = off in both
 *   16-bit lanes) and the low lanes converted by VCVT.F32.S16, the high lanes by VCVT.F32.S32 after a shift.
 */
#ifndef POCKMCU_WGRAD_FAST_H
#define POCKMCU_WGRAD_FAST_H

#include <stdint.h>
#include <string.h>

#include "pockmcu_simd.h"
#include "pockmcu_train_fast.h"

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
    (void)off;
    v[0] = pockmcu_cvt_lo16(a);
    v[1] = pockmcu_cvt_lo16(b);
    v[2] = (float)((int32_t)a >> 16);
    v[3] = (float)((int32_t)b >> 16);
#else
    (void)off2;
    v[0] = (float)((int32_t)x[0] + off);
    v[1] = (float)((int32_t)x[1] + off);
    v[2] = (float)((int32_t)x[2] + off);
    v[3] = (float)((int32_t)x[3] + off);
#endif
}

#endif /* POCKMCU_WGRAD_FAST_H */
