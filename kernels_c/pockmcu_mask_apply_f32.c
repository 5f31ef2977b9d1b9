/*
 * pockmcu_mask_apply_f32 - apply a 1-bit mask (pockmcu_mask_pack_s8 layout)
 * to a float32 gradient in place: grad[k] = 0.0f where bit k is 0, unchanged
 * where it is 1.
 *
 * Eight elements per mask byte: a byte of ones leaves its eight elements
 * alone, a zero byte clears them with no test each (stores of +0.0f, the
 * value a cleared element gets either way).
 *
 * On a core with VSEL (FPv5: M7, M33, M55) the elements go 32 at a time (one
 * 32-bit mask word): four groups of 8 floats loaded by one VLDM, each element
 * replaced by +0.0f (VSELGE, after LSLS puts its bit in N) or kept, stored
 * back by one VSTM: the same values as the byte loop.
 */
#include <string.h>

#include "pockmcu_nn.h"

#if defined(__arm__) && defined(__GNUC__) && defined(__ARM_FP) && ((__ARM_FP & 4) != 0) &&                             \
    (__ARM_ARCH >= 8 || (__ARM_FP & 8) != 0)
    #define MASK_VSEL 1
#else
    #define MASK_VSEL 0
#endif

#if MASK_VSEL
/* g[j] = bit j of m ? g[j] : +0.0f for j < 32 (LSLS puts bit j in N; CMP first clears V, so GE, N == V, is
 * "bit clear"); returns g + 32. */
static inline float *mask32_vsel(float *g, uint32_t m, float zero)
{
    uint32_t t;
    __asm__ volatile("cmp %2, #0\n\t"
                     "vldmia %1, {s0-s7}\n\t"
                     "lsls %0, %2, #31\n\t"
                     "vselge.f32 s0, %3, s0\n\t"
                     "lsls %0, %2, #30\n\t"
                     "vselge.f32 s1, %3, s1\n\t"
                     "lsls %0, %2, #29\n\t"
                     "vselge.f32 s2, %3, s2\n\t"
                     "lsls %0, %2, #28\n\t"
                     "vselge.f32 s3, %3, s3\n\t"
                     "lsls %0, %2, #27\n\t"
                     "vselge.f32 s4, %3, s4\n\t"
                     "lsls %0, %2, #26\n\t"
                     "vselge.f32 s5, %3, s5\n\t"
                     "lsls %0, %2, #25\n\t"
                     "vselge.f32 s6, %3, s6\n\t"
                     "lsls %0, %2, #24\n\t"
                     "vselge.f32 s7, %3, s7\n\t"
                     "vstmia %1!, {s0-s7}\n\t"
                     "vldmia %1, {s0-s7}\n\t"
                     "lsls %0, %2, #23\n\t"
                     "vselge.f32 s0, %3, s0\n\t"
                     "lsls %0, %2, #22\n\t"
                     "vselge.f32 s1, %3, s1\n\t"
                     "lsls %0, %2, #21\n\t"
                     "vselge.f32 s2, %3, s2\n\t"
                     "lsls %0, %2, #20\n\t"
                     "vselge.f32 s3, %3, s3\n\t"
                     "lsls %0, %2, #19\n\t"
                     "vselge.f32 s4, %3, s4\n\t"
                     "lsls %0, %2, #18\n\t"
                     "vselge.f32 s5, %3, s5\n\t"
                     "lsls %0, %2, #17\n\t"
                     "vselge.f32 s6, %3, s6\n\t"
                     "lsls %0, %2, #16\n\t"
                     "vselge.f32 s7, %3, s7\n\t"
                     "vstmia %1!, {s0-s7}\n\t"
                     "vldmia %1, {s0-s7}\n\t"
                     "lsls %0, %2, #15\n\t"
                     "vselge.f32 s0, %3, s0\n\t"
                     "lsls %0, %2, #14\n\t"
                     "vselge.f32 s1, %3, s1\n\t"
                     "lsls %0, %2, #13\n\t"
                     "vselge.f32 s2, %3, s2\n\t"
                     "lsls %0, %2, #12\n\t"
                     "vselge.f32 s3, %3, s3\n\t"
                     "lsls %0, %2, #11\n\t"
                     "vselge.f32 s4, %3, s4\n\t"
                     "lsls %0, %2, #10\n\t"
                     "vselge.f32 s5, %3, s5\n\t"
                     "lsls %0, %2, #9\n\t"
                     "vselge.f32 s6, %3, s6\n\t"
                     "lsls %0, %2, #8\n\t"
                     "vselge.f32 s7, %3, s7\n\t"
                     "vstmia %1!, {s0-s7}\n\t"
                     "vldmia %1, {s0-s7}\n\t"
                     "lsls %0, %2, #7\n\t"
                     "vselge.f32 s0, %3, s0\n\t"
                     "lsls %0, %2, #6\n\t"
                     "vselge.f32 s1, %3, s1\n\t"
                     "lsls %0, %2, #5\n\t"
                     "vselge.f32 s2, %3, s2\n\t"
                     "lsls %0, %2, #4\n\t"
                     "vselge.f32 s3, %3, s3\n\t"
                     "lsls %0, %2, #3\n\t"
                     "vselge.f32 s4, %3, s4\n\t"
                     "lsls %0, %2, #2\n\t"
                     "vselge.f32 s5, %3, s5\n\t"
                     "lsls %0, %2, #1\n\t"
                     "vselge.f32 s6, %3, s6\n\t"
                     "lsls %0, %2, #0\n\t"
                     "vselge.f32 s7, %3, s7\n\t"
                     "vstmia %1!, {s0-s7}"
                     : "=&r"(t), "+r"(g)
                     : "r"(m), "t"(zero)
                     : "s0", "s1", "s2", "s3", "s4", "s5", "s6", "s7", "cc", "memory");
    return g;
}
#endif

void pockmcu_mask_apply_f32(float *grad, const uint8_t *mask, int32_t n)
{
    int32_t k = 0;
#if MASK_VSEL
    const float zero = 0.0f;
    for (; k + 32 <= n; k += 32)
    {
        uint32_t m;
        memcpy(&m, mask + (k >> 3), sizeof m); /* bytes k/8 .. k/8 + 3, element k + j at bit j */
        if (m != 0xFFFFFFFFu)
        {
            (void)mask32_vsel(grad + k, m, zero);
        }
    }
#endif
    for (; k + 8 <= n; k += 8)
    {
        const uint32_t m = mask[k >> 3];
        float *g = grad + k;
        if (m == 0xFFu)
        {
            continue;
        }
        if (m == 0u)
        {
            g[0] = 0.0f;
            g[1] = 0.0f;
            g[2] = 0.0f;
            g[3] = 0.0f;
            g[4] = 0.0f;
            g[5] = 0.0f;
            g[6] = 0.0f;
            g[7] = 0.0f;
            continue;
        }
        if ((m & 1u) == 0u)
        {
            g[0] = 0.0f;
        }
        if ((m & 2u) == 0u)
        {
            g[1] = 0.0f;
        }
        if ((m & 4u) == 0u)
        {
            g[2] = 0.0f;
        }
        if ((m & 8u) == 0u)
        {
            g[3] = 0.0f;
        }
        if ((m & 16u) == 0u)
        {
            g[4] = 0.0f;
        }
        if ((m & 32u) == 0u)
        {
            g[5] = 0.0f;
        }
        if ((m & 64u) == 0u)
        {
            g[6] = 0.0f;
        }
        if ((m & 128u) == 0u)
        {
            g[7] = 0.0f;
        }
    }
    for (; k < n; k++)
    {
        if (((mask[k >> 3] >> (k & 7)) & 1u) == 0u)
        {
            grad[k] = 0.0f;
        }
    }
}
