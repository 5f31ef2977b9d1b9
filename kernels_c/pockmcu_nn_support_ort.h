/*
 * pockmcu_nn_support_ort.h - onnxruntime's float32 arithmetic emulated exactly with integers.
 *
 * MLAS's requantization RoundHalfEven(float32(float32(acc) * scale)) (pockmcu_requantize_ort, mirroring
 * pockmcu.fixedpoint_ort.requantize_ort), and float32 add / multiply / divide / round-to-integer on IEEE bit
 * patterns (pockmcu_f32_*), each correctly rounded, for the ops onnxruntime computes in float32. Bit-exact
 * on every target, with or without an FPU.
 */
#ifndef POCKMCU_NN_SUPPORT_ORT_H
#define POCKMCU_NN_SUPPORT_ORT_H

#include <stdint.h>

#include "pockmcu_nn_support_common.h"

/* ---- onnxruntime numerics: float32 roundings emulated exactly with integers ----
 * MLAS requantizes an int32 accumulator as RoundHalfEven(float32(float32(acc) * scale));
 * scale = mant * 2^exp with 2^23 <= mant < 2^24 is split at compile time. Mirrors
 * pockmcu.fixedpoint_ort.requantize_ort; results saturate to +-POCKMCU_ORT_SAT. */
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

#endif /* POCKMCU_NN_SUPPORT_ORT_H */
