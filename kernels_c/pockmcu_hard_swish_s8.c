/*
 * pockmcu_hard_swish_s8 - int8 HARD_SWISH, y = x * relu6(x + 3) / 6.
 *
 * Bit-exact with TFLM's reference_ops::HardSwish<int8_t>, which works in 16-bit fixed point:
 *   hires    = (x - zp_in) * 2^7                                  (the input on scale s_in / 128)
 *   preshift = SRDHM16(hires, output_multiplier)                  (on the output scale, not yet shifted)
 *   reluish  = hires rescaled by reluish_multiplier * 2^reluish_shift so that real 3.0 is 32768,
 *              saturating (a left shift: all but one bit before the multiply, the last bit after;
 *              a right shift: a rounding one after), then mapped from [-1, 1] to [0, 1]: (r + 2^15) >> 1
 *   y        = clamp(RDBPOT16(SDHM16(reluish, preshift), -output_shift) + zp_out, -128, 127)
 * SRDHM16 is gemmlowp's rounding doubling high multiply on int16, SDHM16 TFLM's truncating one and
 * RDBPOT16 gemmlowp's rounding shift on int16, whose mask is cut to 16 bits (from a shift of 16 on it
 * returns 1 for x >= 0 and -1 for x < 0). |SDHM16(...)| <= 32639, so TFLM's int16 sum with the zero point
 * never wraps. The parameters are TFLM HardSwishPrepare's (pockmcu/ops/hard_swish.py).
 */
#include "pockmcu_nn.h"

#define HS_INT16_MIN (-32768)
#define HS_INT16_MAX 32767

static int32_t hs_srdhm16(int32_t a, int32_t b)
{
    const int32_t ab = a * b;
    const int32_t nudge = ab >= 0 ? (1 << 14) : (1 - (1 << 14));
    if (a == HS_INT16_MIN && b == HS_INT16_MIN)
    {
        return HS_INT16_MAX;
    }
    return (ab + nudge) / (1 << 15); /* C99 division truncates toward zero, like C++ */
}

static int32_t hs_sdhm16(int32_t a, int32_t b)
{
    if (a == HS_INT16_MIN && b == HS_INT16_MIN)
    {
        return HS_INT16_MAX;
    }
    return (a * b) / (1 << 15);
}

static int32_t hs_rdbpot16(int32_t x, int32_t exponent)
{
    /* gemmlowp's int16 mask (1 << exponent) - 1, cut to 16 bits */
    const int32_t mask = exponent >= 16 ? -1 : (1 << exponent) - 1;
    const int32_t threshold = (mask >= 0 ? mask >> 1 : -1) + (x < 0 ? 1 : 0);
    const int32_t shifted = exponent >= 16 ? (x < 0 ? -1 : 0) : (x >> exponent);
    return shifted + ((x & mask) > threshold ? 1 : 0);
}

static int32_t hs_sat_shl16(int32_t x, int32_t amount)
{
    int64_t v;
    if (x == 0)
    {
        return 0;
    }
    if (amount >= 16)
    {
        return x > 0 ? HS_INT16_MAX : HS_INT16_MIN;
    }
    v = (int64_t)x * ((int64_t)1 << amount);
    return v > HS_INT16_MAX ? HS_INT16_MAX : (v < HS_INT16_MIN ? HS_INT16_MIN : (int32_t)v);
}

arm_cmsis_nn_status pockmcu_hard_swish_s8(const int8_t *input_data,
                                          int32_t size,
                                          int32_t input_offset,
                                          int16_t reluish_multiplier,
                                          int32_t reluish_shift,
                                          int16_t output_multiplier,
                                          int32_t output_shift,
                                          int32_t output_offset,
                                          int8_t *output_data)
{
    int32_t i;
    if (output_shift > 0 || output_shift < -31 || reluish_shift < -31)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (i = 0; i < size; i++)
    {
        const int32_t hires = ((int32_t)input_data[i] + input_offset) * (1 << 7);
        const int32_t preshift = hs_srdhm16(hires, output_multiplier);
        int32_t reluish = hires;
        int32_t out;
        if (reluish_shift > 0)
        {
            reluish = hs_sat_shl16(reluish, reluish_shift - 1);
        }
        reluish = hs_srdhm16(reluish, reluish_multiplier);
        if (reluish_shift > 0)
        {
            reluish = hs_sat_shl16(reluish, 1);
        }
        else if (reluish_shift < 0)
        {
            reluish = hs_rdbpot16(reluish, -reluish_shift);
        }
        reluish = (reluish + (1 << 15)) >> 1;
        out = hs_rdbpot16(hs_sdhm16(reluish, preshift), -output_shift) + output_offset;
        output_data[i] = (int8_t)(out < -128 ? -128 : (out > 127 ? 127 : out));
    }
    return ARM_CMSIS_NN_SUCCESS;
}
