/*
 * pockmcu_nn_support_tflm.h - TFLite Micro's fixed-point primitives, bit-exact, as static inline C99.
 *
 * gemmlowp's SaturatingRoundingDoublingHighMul, RoundingDivideByPOT, saturating multiply by a power of
 * two, exp_on_negative_values, one_over_one_plus_x_for_x_in_0_1 and logistic; TFLM's (double rounding)
 * MultiplyByQuantizedMultiplier and the softmax GetReciprocal helper; std::round without libm. Where
 * TFLM relies on two's complement wrap-around (x * (1 << shift), plain int32 adds inside gemmlowp) the
 * arithmetic is done on uint32_t (pockmcu_wrap_*), which yields the same bits.
 */
#ifndef POCKMCU_NN_SUPPORT_TFLM_H
#define POCKMCU_NN_SUPPORT_TFLM_H

#include <stdint.h>

#include "pockmcu_nn_support_common.h"

/* gemmlowp SaturatingRoundingDoublingHighMul (ARM VQRDMULH). */
static inline int32_t pockmcu_srdhm(int32_t a, int32_t b)
{
    const int64_t ab = (int64_t)a * (int64_t)b;
    const int64_t nudge = ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
    if (a == POCKMCU_INT32_MIN && b == POCKMCU_INT32_MIN)
    {
        return POCKMCU_INT32_MAX;
    }
    /* C99 division truncates toward zero, like C++. */
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

/* gemmlowp RoundingDivideByPOT: round to nearest, ties away from zero.
 * 0 <= exponent <= 31. */
static inline int32_t pockmcu_rdbpot(int32_t x, int32_t exponent)
{
    const int32_t mask = (int32_t)(((int64_t)1 << exponent) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> exponent) + (remainder > threshold ? 1 : 0);
}

/* gemmlowp SaturatingRoundingMultiplyByPOT<exponent> for exponent >= 0
 * (saturating left shift). */
static inline int32_t pockmcu_sat_shl(int32_t x, int32_t exponent)
{
    int32_t threshold;
    if (exponent == 0)
    {
        return x;
    }
    threshold = (int32_t)(((int64_t)1 << (31 - exponent)) - 1);
    if (x > threshold)
    {
        return POCKMCU_INT32_MAX;
    }
    if (x < -threshold)
    {
        return POCKMCU_INT32_MIN;
    }
    return pockmcu_wrap_shl(x, exponent);
}

/* TFLM MultiplyByQuantizedMultiplier (double rounding, the TFLM default):
 * RoundingDivideByPOT(SRDHM(x * 2^max(shift,0), mult), max(-shift,0)).
 * -31 <= shift <= 31. */
static inline int32_t pockmcu_requantize(int32_t x, int32_t mult, int32_t shift)
{
    const int32_t left_shift = shift > 0 ? shift : 0;
    const int32_t right_shift = shift > 0 ? 0 : -shift;
    return pockmcu_rdbpot(pockmcu_srdhm(pockmcu_wrap_shl(x, left_shift), mult), right_shift);
}

/* gemmlowp RoundingHalfSum for int32. */
static inline int32_t pockmcu_rounding_half_sum(int32_t a, int32_t b)
{
    const int64_t sum = (int64_t)a + (int64_t)b;
    const int64_t sign = sum >= 0 ? 1 : -1;
    return (int32_t)((sum + sign) / 2);
}

/* gemmlowp exp_on_interval_between_negative_one_quarter_and_0_excl, Q0.31. */
static inline int32_t pockmcu_exp_on_interval_between_negative_one_quarter_and_0_excl(int32_t a)
{
    const int32_t constant_term = 1895147668;    /* exp(-1/8) */
    const int32_t constant_1_over_3 = 715827883; /* 1/3 */
    const int32_t x = pockmcu_wrap_add(a, (int32_t)1 << 28);
    const int32_t x2 = pockmcu_srdhm(x, x);
    const int32_t x3 = pockmcu_srdhm(x2, x);
    const int32_t x4 = pockmcu_srdhm(x2, x2);
    const int32_t x4_over_4 = pockmcu_rdbpot(x4, 2);
    const int32_t poly =
        pockmcu_rdbpot(pockmcu_wrap_add(pockmcu_srdhm(pockmcu_wrap_add(x4_over_4, x3), constant_1_over_3), x2), 1);
    return pockmcu_wrap_add(constant_term, pockmcu_srdhm(constant_term, pockmcu_wrap_add(x, poly)));
}

/* gemmlowp exp_on_negative_values for an input FixedPoint<int32, integer_bits>
 * (1 <= integer_bits <= 5 as used by TFLM); result in Q0.31. */
static inline int32_t pockmcu_exp_on_negative_values(int32_t a, int32_t integer_bits)
{
    static const int32_t multipliers[7] = {
        1672461947, /* exp(-1/4) */
        1302514674, /* exp(-1/2) */
        790015084,  /* exp(-1)   */
        290630308,  /* exp(-2)   */
        39332535,   /* exp(-4)   */
        720401,     /* exp(-8)   */
        242         /* exp(-16)  */
    };
    const int32_t fractional_bits = 31 - integer_bits;
    const int32_t one_quarter = (int32_t)1 << (fractional_bits - 2);
    const int32_t mask = one_quarter - 1;
    const int32_t a_mod_quarter_minus_one_quarter = (a & mask) - one_quarter;
    const int32_t remainder = pockmcu_wrap_sub(a_mod_quarter_minus_one_quarter, a);
    int32_t result = pockmcu_exp_on_interval_between_negative_one_quarter_and_0_excl(
        pockmcu_sat_shl(a_mod_quarter_minus_one_quarter, integer_bits));
    int32_t i;

    for (i = 0; i < 7; i++)
    {
        const int32_t exponent = i - 2;
        if (integer_bits > exponent)
        {
            const int32_t bit = (int32_t)1 << (fractional_bits + exponent);
            if (remainder & bit)
            {
                result = pockmcu_srdhm(result, multipliers[i]);
            }
        }
    }
    if (integer_bits > 5)
    {
        const int32_t clamp = -((int32_t)1 << (36 - integer_bits));
        if (a < clamp)
        {
            result = 0;
        }
    }
    if (a == 0)
    {
        result = POCKMCU_INT32_MAX;
    }
    return result;
}

/* gemmlowp one_over_one_plus_x_for_x_in_0_1, Q0.31 in and out. */
static inline int32_t pockmcu_one_over_one_plus_x_for_x_in_0_1(int32_t a)
{
    const int32_t half_denominator = pockmcu_rounding_half_sum(a, POCKMCU_INT32_MAX);
    const int32_t constant_48_over_17 = 1515870810;      /* Q2.29 */
    const int32_t constant_neg_32_over_17 = -1010580540; /* Q2.29 */
    const int32_t one_q2 = (int32_t)1 << 29;
    int32_t x = pockmcu_wrap_add(constant_48_over_17, pockmcu_srdhm(half_denominator, constant_neg_32_over_17));
    int32_t i;
    for (i = 0; i < 3; i++)
    {
        const int32_t half_denominator_times_x = pockmcu_srdhm(half_denominator, x);
        const int32_t one_minus = pockmcu_wrap_sub(one_q2, half_denominator_times_x);
        x = pockmcu_wrap_add(x, pockmcu_sat_shl(pockmcu_srdhm(x, one_minus), 2));
    }
    return pockmcu_sat_shl(x, 1);
}

/* gemmlowp logistic for an input FixedPoint<int32, integer_bits>; Q0.31 out. */
static inline int32_t pockmcu_logistic_fixed(int32_t a, int32_t integer_bits)
{
    int32_t abs_input;
    int32_t result_if_positive;
    if (a == 0)
    {
        return (int32_t)1 << 30;
    }
    abs_input = a > 0 ? a : pockmcu_wrap_neg(a);
    result_if_positive = pockmcu_one_over_one_plus_x_for_x_in_0_1(
        pockmcu_exp_on_negative_values(pockmcu_wrap_neg(abs_input), integer_bits));
    return a > 0 ? result_if_positive : pockmcu_wrap_sub(POCKMCU_INT32_MAX, result_if_positive);
}

/* TFLM GetReciprocal (common.h), x > 0. */
static inline int32_t pockmcu_get_reciprocal(int32_t x, int32_t x_integer_digits, int32_t *num_bits_over_unit)
{
    const int32_t headroom_plus_one = pockmcu_clz_u32((uint32_t)x);
    const uint32_t shifted = headroom_plus_one >= 32 ? 0u : ((uint32_t)x << headroom_plus_one);
    const int32_t shifted_sum_minus_one = (int32_t)(shifted - 0x80000000u);
    *num_bits_over_unit = x_integer_digits - headroom_plus_one;
    return pockmcu_one_over_one_plus_x_for_x_in_0_1(shifted_sum_minus_one);
}

/* Round half away from zero of a float (std::round / roundf), without libm.
 * Exact: the fractional part of a float is exactly representable. */
static inline float pockmcu_roundf(float x)
{
    if (!(x > -8388608.0f && x < 8388608.0f))
    {
        return x; /* |x| >= 2^23 is already integral (or inf / NaN) */
    }
    {
        const float t = (float)(int32_t)x; /* truncation toward zero */
        const float frac = x - t;
        if (frac >= 0.5f)
        {
            return t + 1.0f;
        }
        if (frac <= -0.5f)
        {
            return t - 1.0f;
        }
        return t;
    }
}

#endif /* POCKMCU_NN_SUPPORT_TFLM_H */
