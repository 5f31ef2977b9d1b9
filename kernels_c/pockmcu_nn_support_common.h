/*
 * pockmcu_nn_support_common.h - static inline integer helpers shared by every kernel family.
 *
 * Min / max / clamp, two's complement wrapping arithmetic on uint32_t (defined in C, the same bits as
 * the wrap-around TFLM relies on), count leading zeros, and the in-bounds range of a pooling or
 * convolution window. Right shifts of negative values are arithmetic on every compiler we target (gcc,
 * arm-none-eabi-gcc, clang).
 */
#ifndef POCKMCU_NN_SUPPORT_COMMON_H
#define POCKMCU_NN_SUPPORT_COMMON_H

#include <stdint.h>

#define POCKMCU_INT32_MIN ((int32_t)(-2147483647 - 1))
#define POCKMCU_INT32_MAX ((int32_t)2147483647)

static inline int32_t pockmcu_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int32_t pockmcu_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }

static inline int32_t pockmcu_clamp_i32(int32_t v, int32_t lo, int32_t hi) { return v < lo ? lo : (v > hi ? hi : v); }

/* Two's complement wrapping add / sub / negate / left shift (0 <= s <= 31). */
static inline int32_t pockmcu_wrap_add(int32_t a, int32_t b) { return (int32_t)((uint32_t)a + (uint32_t)b); }
static inline int32_t pockmcu_wrap_sub(int32_t a, int32_t b) { return (int32_t)((uint32_t)a - (uint32_t)b); }
static inline int32_t pockmcu_wrap_neg(int32_t a) { return (int32_t)(0u - (uint32_t)a); }
static inline int32_t pockmcu_wrap_shl(int32_t a, int32_t s) { return (int32_t)((uint32_t)a << s); }

/* Count leading zeros of a 32 bit value; 32 for 0. */
static inline int32_t pockmcu_clz_u32(uint32_t x)
{
#if defined(__GNUC__)
    return x == 0u ? 32 : (int32_t)__builtin_clz(x);
#else
    int32_t n = 0;
    if (x == 0u)
    {
        return 32;
    }
    while ((x & 0x80000000u) == 0u)
    {
        x <<= 1;
        n++;
    }
    return n;
#endif
}

/* First index k in [0, n) such that origin + k * step >= 0 (step >= 1). */
static inline int32_t pockmcu_window_start(int32_t origin, int32_t step)
{
    return origin >= 0 ? 0 : (-origin + step - 1) / step;
}

/* One past the last k (clamped to n) with origin + k * step < size. */
static inline int32_t pockmcu_window_end(int32_t origin, int32_t step, int32_t size, int32_t n)
{
    const int32_t room = size - origin;
    int32_t end;
    if (room <= 0)
    {
        return 0;
    }
    end = (room + step - 1) / step;
    return end < n ? end : n;
}

#endif /* POCKMCU_NN_SUPPORT_COMMON_H */
