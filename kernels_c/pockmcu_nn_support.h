/*
 * pockmcu_nn_support.h - shared static inline fixed-point helpers.
 *
 * Bit-exact C99 versions of the integer primitives TFLite Micro uses:
 * gemmlowp's SaturatingRoundingDoublingHighMul, RoundingDivideByPOT,
 * saturating multiply by a power of two, exp_on_negative_values,
 * one_over_one_plus_x_for_x_in_0_1 and logistic, TFLM's (double rounding)
 * MultiplyByQuantizedMultiplier and the softmax GetReciprocal helper.
 *
 * Where TFLM relies on two's complement wrap-around (x * (1 << shift), plain
 * int32 adds inside gemmlowp) the arithmetic is done on uint32_t, which is
 * defined in C and yields the same bits. Right shifts of negative values are
 * arithmetic on every compiler we target (gcc, arm-none-eabi-gcc, clang).
 */
#ifndef POCKMCU_NN_SUPPORT_H
#define POCKMCU_NN_SUPPORT_H

#include <stdint.h>

#define POCKMCU_INT32_MIN ((int32_t)(-2147483647 - 1))
#define POCKMCU_INT32_MAX ((int32_t)2147483647)

static inline int32_t pockmcu_max_i32(int32_t a, int32_t b) { return a > b ? a : b; }
static inline int32_t pockmcu_min_i32(int32_t a, int32_t b) { return a < b ? a : b; }

static inline int32_t pockmcu_clamp_i32(int32_t v, int32_t lo, int32_t hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

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
    const int32_t constant_term = 1895147668;     /* exp(-1/8) */
    const int32_t constant_1_over_3 = 715827883; /* 1/3 */
    const int32_t x = pockmcu_wrap_add(a, (int32_t)1 << 28);
    const int32_t x2 = pockmcu_srdhm(x, x);
    const int32_t x3 = pockmcu_srdhm(x2, x);
    const int32_t x4 = pockmcu_srdhm(x2, x2);
    const int32_t x4_over_4 = pockmcu_rdbpot(x4, 2);
    const int32_t poly = pockmcu_rdbpot(
        pockmcu_wrap_add(pockmcu_srdhm(pockmcu_wrap_add(x4_over_4, x3), constant_1_over_3), x2), 1);
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
    result_if_positive =
        pockmcu_one_over_one_plus_x_for_x_in_0_1(pockmcu_exp_on_negative_values(pockmcu_wrap_neg(abs_input), integer_bits));
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

/* ---- onnxruntime numerics: float32 roundings emulated exactly with integers ----
 * MLAS requantizes an int32 accumulator as RoundHalfEven(float32(float32(acc) * scale));
 * scale = mant * 2^exp with 2^23 <= mant < 2^24 is split at compile time. Mirrors
 * pockmcu.fixedpoint.requantize_ort; results saturate to +-POCKMCU_ORT_SAT. */
#define POCKMCU_ORT_SAT 32768

/* Number of significant bits of x (0 for 0). */
static inline int32_t pockmcu_bitlen_u64(uint64_t x)
{
    const uint32_t hi = (uint32_t)(x >> 32);
    return hi != 0u ? 64 - pockmcu_clz_u32(hi) : 32 - pockmcu_clz_u32((uint32_t)x);
}

/* Round(x / 2^k) half to even, for a magnitude x and 0 <= k <= 63. */
static inline uint64_t pockmcu_rne_shr_u64(uint64_t x, int32_t k)
{
    uint64_t q, rem, half;
    if (k == 0)
    {
        return x;
    }
    q = x >> k;
    rem = x - (q << k);
    half = (uint64_t)1 << (k - 1);
    if (rem > half || (rem == half && (q & 1u) != 0u))
    {
        q++;
    }
    return q;
}

/* Round(x / 2^k) half to even for 32-bit x, 0 <= k <= 31. */
static inline uint32_t pockmcu_rne_shr_u32(uint32_t x, int32_t k)
{
    uint32_t q, rem, half;
    if (k == 0)
    {
        return x;
    }
    q = x >> k;
    rem = x & ((1u << k) - 1u);
    half = 1u << (k - 1);
    return q + ((rem > half || (rem == half && (q & 1u) != 0u)) ? 1u : 0u);
}

static inline int32_t pockmcu_requantize_ort(int32_t acc, int32_t mant, int32_t exp)
{
    uint32_t mag = acc < 0 ? 0u - (uint32_t)acc : (uint32_t)acc;
    int32_t ka = 0, kp = 0, bl, e;
    uint64_t p;
    uint32_t hi, lo, pp, r;
    if (mag >= 0x1000000u) /* float32(acc) rounds: keep 24 significant bits */
    {
        ka = 8 - pockmcu_clz_u32(mag);
        mag = pockmcu_rne_shr_u32(mag, ka); /* <= 2^24 */
    }
    p = (uint64_t)mag * (uint32_t)mant; /* < 2^49, exact */
    hi = (uint32_t)(p >> 32);
    lo = (uint32_t)p;
    bl = hi != 0u ? 64 - pockmcu_clz_u32(hi) : 32 - pockmcu_clz_u32(lo);
    if (p == 0u)
    {
        return 0;
    }
    pp = (uint32_t)p;
    if (bl > 24) /* float32(a * scale): round to 24 significant bits (kp <= 25) */
    {
        uint32_t rem, half;
        kp = bl - 24;
        pp = (uint32_t)(p >> kp);
        rem = lo & ((1u << kp) - 1u);
        half = 1u << (kp - 1);
        if (rem > half || (rem == half && (pp & 1u) != 0u))
        {
            pp++; /* may reach 2^24 */
        }
    }
    e = ka + kp + exp; /* value = pp * 2^e, pp <= 2^24 */
    if (e >= -8)
    {
        r = POCKMCU_ORT_SAT; /* >= 2^23 * 2^-8 > POCKMCU_ORT_SAT */
    }
    else if (e < -26)
    {
        r = 0u; /* pp * 2^e <= 2^-2 */
    }
    else
    {
        r = pockmcu_rne_shr_u32(pp, -e); /* cvtps2dq: half to even */
        if (r > POCKMCU_ORT_SAT)
        {
            r = POCKMCU_ORT_SAT;
        }
    }
    return acc < 0 ? -(int32_t)r : (int32_t)r;
}

/* ---- float32 arithmetic on IEEE bit patterns, in integers (onnxruntime numerics) ----
 * Add, multiply, divide and round-to-integer of float32 values held as uint32_t
 * bit patterns, each correctly rounded to nearest, ties to even, subnormals
 * included (no infinities or NaNs reach them). Used where onnxruntime computes an
 * op in float32 (average pooling, softmax); the numpy reference does the same
 * operations in numpy float32, and the tests compare them bit for bit. */

/* bits -> (-1)^neg * m * 2^e with m < 2^24 */
static inline void pockmcu_f32_unpack(uint32_t bits, int32_t *neg, uint64_t *m, int32_t *e)
{
    const uint32_t ex = (bits >> 23) & 0xFFu;
    const uint32_t fr = bits & 0x7FFFFFu;
    *neg = (int32_t)(bits >> 31);
    if (ex == 0u)
    {
        *m = fr;
        *e = -149;
    }
    else
    {
        *m = fr | 0x800000u;
        *e = (int32_t)ex - 150;
    }
}

/* (-1)^neg * (mag + something in (0, 1) if sticky) * 2^e rounded to float32 bits. */
static inline uint32_t pockmcu_f32_round_pack(int32_t neg, uint64_t mag, int32_t e, int32_t sticky)
{
    const uint32_t sign = neg ? 0x80000000u : 0u;
    int32_t k;
    if (mag == 0u)
    {
        return sign;
    }
    k = pockmcu_bitlen_u64(mag) - 24;
    if (e + k < -149)
    {
        k = -149 - e;
    }
    if (k > 0)
    {
        uint64_t q, rem, half;
        if (k > 64)
        {
            q = 0u;
            rem = mag;
            half = ~(uint64_t)0; /* mag < 2^64 <= 2^(k-1): below half */
        }
        else if (k == 64)
        {
            q = 0u;
            rem = mag;
            half = (uint64_t)1 << 63;
        }
        else
        {
            q = mag >> k;
            rem = mag - (q << k);
            half = (uint64_t)1 << (k - 1);
        }
        if (rem > half || (rem == half && (sticky || (q & 1u) != 0u)))
        {
            q++;
        }
        mag = q;
        e += k;
    }
    else if (k < 0)
    {
        mag <<= -k;
        e += k;
    }
    if (mag == ((uint64_t)1 << 24))
    {
        mag >>= 1;
        e += 1;
    }
    if (mag >= 0x800000u)
    {
        if (e + 150 >= 255)
        {
            return sign | 0x7F800000u;
        }
        return sign | ((uint32_t)(e + 150) << 23) | ((uint32_t)mag & 0x7FFFFFu);
    }
    return sign | (uint32_t)mag; /* subnormal (e == -149) */
}

static inline uint32_t pockmcu_f32_from_int(int32_t x)
{
    const uint64_t mag = x < 0 ? (uint64_t)0 - (uint64_t)(int64_t)x : (uint64_t)x;
    return pockmcu_f32_round_pack(x < 0, mag, 0, 0);
}

static inline uint32_t pockmcu_f32_add(uint32_t a, uint32_t b)
{
    int32_t na, nb, ea, eb, e, d, sticky = 0, neg;
    uint64_t ma, mb, big, small, mag;
    pockmcu_f32_unpack(a, &na, &ma, &ea);
    pockmcu_f32_unpack(b, &nb, &mb, &eb);
    if (mb == 0u)
    {
        return ma == 0u ? (a & b) : a;
    }
    if (ma == 0u)
    {
        return b;
    }
    if (ea < eb)
    {
        uint64_t tm = ma;
        int32_t te = ea, tn = na;
        ma = mb;
        ea = eb;
        na = nb;
        mb = tm;
        eb = te;
        nb = tn;
    }
    d = ea - eb;
    if (d <= 38)
    {
        big = ma << d;
        small = mb;
        e = eb;
    }
    else
    {
        const int32_t sh = d - 38;
        big = ma << 38;
        e = ea - 38;
        small = sh >= 64 ? 0u : (mb >> sh);
        sticky = sh >= 64 ? 1 : ((mb & (((uint64_t)1 << sh) - 1u)) != 0u);
    }
    if (na == nb)
    {
        mag = big + small;
        neg = na;
    }
    else if (big >= small)
    {
        mag = big - small;
        neg = na;
        if (sticky)
        {
            mag -= 1u; /* big - (small + delta) = (big - small - 1) + (1 - delta) */
        }
    }
    else
    {
        mag = small - big; /* only when d <= 38: exact */
        neg = nb;
    }
    if (mag == 0u && !sticky)
    {
        return 0u;
    }
    return pockmcu_f32_round_pack(neg, mag, e, sticky);
}

static inline uint32_t pockmcu_f32_mul(uint32_t a, uint32_t b)
{
    int32_t na, nb, ea, eb;
    uint64_t ma, mb;
    pockmcu_f32_unpack(a, &na, &ma, &ea);
    pockmcu_f32_unpack(b, &nb, &mb, &eb);
    return pockmcu_f32_round_pack(na ^ nb, ma * mb, ea + eb, 0);
}

/* a / b for b != 0 */
static inline uint32_t pockmcu_f32_div(uint32_t a, uint32_t b)
{
    int32_t na, nb, ea, eb;
    uint64_t ma, mb, num;
    pockmcu_f32_unpack(a, &na, &ma, &ea);
    pockmcu_f32_unpack(b, &nb, &mb, &eb);
    if (ma == 0u)
    {
        return (uint32_t)(na ^ nb) << 31;
    }
    while (ma < 0x800000u)
    {
        ma <<= 1;
        ea--;
    }
    while (mb < 0x800000u)
    {
        mb <<= 1;
        eb--;
    }
    num = ma << 40;
    return pockmcu_f32_round_pack(na ^ nb, num / mb, ea - eb - 40, (num % mb) != 0u);
}

/* nearbyintf (half to even) as int32, saturated to +-2^30. */
static inline int32_t pockmcu_f32_rint(uint32_t a)
{
    int32_t neg, e;
    uint64_t m, r;
    pockmcu_f32_unpack(a, &neg, &m, &e);
    if (m == 0u)
    {
        return 0;
    }
    if (e >= 0)
    {
        r = e > 7 ? ((uint64_t)1 << 30) : (m << e);
    }
    else
    {
        r = pockmcu_rne_shr_u64(m, -e > 63 ? 63 : -e);
    }
    if (r > ((uint64_t)1 << 30))
    {
        r = (uint64_t)1 << 30;
    }
    return neg ? -(int32_t)r : (int32_t)r;
}

#endif /* POCKMCU_NN_SUPPORT_H */
