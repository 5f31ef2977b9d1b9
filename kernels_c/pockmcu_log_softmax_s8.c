/*
 * pockmcu_log_softmax_s8 - int8 -> int8 log-softmax over rows (TFLM's LOG_SOFTMAX).
 *
 * Bit-exact with TFLM's reference_ops::LogSoftmaxQuantized<int8_t>: per row,
 * diff = x - max(row) is rescaled into Q5.26 with MultiplyByQuantizedMultiplier
 * (mult, shift = input_left_shift); the exps of the entries with diff >= diff_min
 * are summed in Q12.19; log(sum) is gemmlowp's
 * log_x_for_x_greater_than_or_equal_to_1 (Q5.26 out); an entry with diff above
 * max(diff_min - 1, the inverse rescaling of log(sum) + INT32_MIN) gives
 * RoundingDivideByPOT(scaled - log_sum, 22) + 127 clamped to int8, the others
 * -128. Output scale 16/256, zero point 127. Constants from TFLM's
 * PreprocessLogSoftmaxScalingExp and CalculateInputRadius
 * (pockmcu.ops.log_softmax.log_softmax_params).
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

#define POCKMCU_LOG_SOFTMAX_INPUT_BITS 5
#define POCKMCU_LOG_SOFTMAX_ACCUM_BITS 12
#define POCKMCU_LOG_SOFTMAX_OUTPUT_BITS 4

static int32_t pockmcu_sat_add_i32(int32_t a, int32_t b)
{
    const int64_t s = (int64_t)a + (int64_t)b;
    return s > POCKMCU_INT32_MAX ? POCKMCU_INT32_MAX : (s < POCKMCU_INT32_MIN ? POCKMCU_INT32_MIN : (int32_t)s);
}

/* gemmlowp log_x_for_x_greater_than_or_equal_to_1<5>(FixedPoint<int32, 12> x), raw; x > 0. */
static int32_t pockmcu_log_q12_to_q5(int32_t x)
{
    const int32_t input_bits = POCKMCU_LOG_SOFTMAX_ACCUM_BITS;
    const int32_t accum_bits = POCKMCU_LOG_SOFTMAX_INPUT_BITS + 1;
    const int32_t log_2 = 1488522236;
    const int32_t sqrt_sqrt_half = 1805811301;
    const int32_t sqrt_half = 1518500250;
    const int32_t alpha_n = 117049297;
    const int32_t alpha_d = 127690142;
    const int32_t alpha_i = 1057819769;
    const int32_t alpha_f = 638450708;
    const int32_t shifted_quarter = pockmcu_rdbpot(536870912, accum_bits);
    const int32_t z_a_headroom_plus_1 = pockmcu_clz_u32((uint32_t)x);
    const int32_t r_a_tmp = pockmcu_sat_shl(x, z_a_headroom_plus_1 - 1);
    const int32_t r_a_raw = pockmcu_sat_shl(pockmcu_srdhm(r_a_tmp, sqrt_half), 1);
    const int32_t z_a_pow_2_adj =
        pockmcu_sat_add_i32(pockmcu_sat_shl(input_bits - z_a_headroom_plus_1, 31 - accum_bits), shifted_quarter);
    const int32_t z_b = pockmcu_srdhm(x, sqrt_half);
    const int32_t z_b_headroom = pockmcu_clz_u32((uint32_t)z_b) - 1;
    const int32_t r_b_raw = pockmcu_sat_shl(x, z_b_headroom);
    const int32_t z_b_pow_2_adj =
        pockmcu_sat_add_i32(pockmcu_sat_shl(input_bits - z_b_headroom, 31 - accum_bits), -shifted_quarter);
    const int32_t r = r_a_raw < r_b_raw ? r_a_raw : r_b_raw;
    const int32_t z_pow_2_adj = z_a_pow_2_adj > z_b_pow_2_adj ? z_a_pow_2_adj : z_b_pow_2_adj;
    const int32_t p = pockmcu_rounding_half_sum(r, sqrt_sqrt_half);
    int32_t q = pockmcu_wrap_sub(r, sqrt_sqrt_half);
    int32_t common_sq, num, denom_minus_one_0, recip_denom, total;
    q = pockmcu_wrap_add(q, q);
    common_sq = pockmcu_srdhm(q, q);
    num = pockmcu_wrap_add(pockmcu_srdhm(q, r), pockmcu_srdhm(pockmcu_srdhm(q, common_sq), alpha_n));
    denom_minus_one_0 = pockmcu_wrap_add(
        pockmcu_srdhm(p, pockmcu_wrap_add(pockmcu_wrap_add(alpha_i, q), pockmcu_srdhm(alpha_d, common_sq))),
        pockmcu_srdhm(alpha_f, q));
    recip_denom = pockmcu_one_over_one_plus_x_for_x_in_0_1(denom_minus_one_0);
    total = pockmcu_wrap_add(pockmcu_srdhm(z_pow_2_adj, log_2),
                             pockmcu_srdhm(pockmcu_rdbpot(num, accum_bits), recip_denom));
    return pockmcu_sat_shl(total, accum_bits - POCKMCU_LOG_SOFTMAX_INPUT_BITS);
}

void pockmcu_log_softmax_s8(const int8_t *input,
                            int32_t num_rows,
                            int32_t row_size,
                            int32_t mult,
                            int32_t shift,
                            int32_t reverse_scaling_divisor,
                            int32_t reverse_scaling_left_shift,
                            int32_t diff_min,
                            int8_t *output)
{
    int32_t r, c;
    for (r = 0; r < num_rows; r++)
    {
        const int8_t *in = input + r * row_size;
        int8_t *out = output + r * row_size;
        int32_t max = -128;
        int32_t sum = 0;
        int32_t log_sum, adjusted_diff_min, threshold;
        for (c = 0; c < row_size; c++)
        {
            max = in[c] > max ? in[c] : max;
        }
        for (c = 0; c < row_size; c++)
        {
            const int32_t diff = (int32_t)in[c] - max;
            if (diff >= diff_min)
            {
                const int32_t scaled = pockmcu_requantize(diff, mult, shift);
                const int32_t e = pockmcu_exp_on_negative_values(scaled, POCKMCU_LOG_SOFTMAX_INPUT_BITS);
                sum = pockmcu_wrap_add(sum, pockmcu_rdbpot(e, POCKMCU_LOG_SOFTMAX_ACCUM_BITS));
            }
        }
        log_sum = pockmcu_log_q12_to_q5(sum);
        threshold = pockmcu_requantize(
            pockmcu_wrap_add(log_sum, POCKMCU_INT32_MIN), reverse_scaling_divisor, reverse_scaling_left_shift);
        adjusted_diff_min = diff_min - 1 > threshold ? diff_min - 1 : threshold;
        for (c = 0; c < row_size; c++)
        {
            const int32_t diff = (int32_t)in[c] - max;
            if (diff > adjusted_diff_min)
            {
                const int32_t scaled = pockmcu_requantize(diff, mult, shift);
                const int32_t v = pockmcu_rdbpot(pockmcu_wrap_sub(scaled, log_sum),
                                                 31 - POCKMCU_LOG_SOFTMAX_INPUT_BITS - POCKMCU_LOG_SOFTMAX_OUTPUT_BITS);
                out[c] = (int8_t)pockmcu_clamp_i32(v + 127, -128, 127);
            }
            else
            {
                out[c] = -128;
            }
        }
    }
}
