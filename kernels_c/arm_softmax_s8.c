/*
 * arm_softmax_s8 - portable int8 -> int8 softmax (CMSIS-NN API).
 *
 * Bit-exact with TFLM's reference_ops::Softmax<int8_t, int8_t> (the integer
 * exp path): per row, diff = x - max(row); entries with diff < diff_min give
 * -128; the others are rescaled with MultiplyByQuantizedMultiplierGreaterThanOne
 * (mult, shift = input_left_shift) into Q5.26, exponentiated with gemmlowp's
 * exp_on_negative_values, summed in Q12.19, and normalised with TFLM's
 * GetReciprocal; output zero point -128, scale 1/256. Where TFLM's
 * TFLITE_CHECK(exponent <= 31) would abort (rows whose sum of exps reaches
 * 512), every output of the row is -128.
 * mult / shift / diff_min come from TFLM's PreprocessSoftmaxScaling and
 * CalculateInputRadius (see pockmcu.fixedpoint.softmax_params).
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

#define POCKMCU_SOFTMAX_SCALED_DIFF_INTEGER_BITS 5
#define POCKMCU_SOFTMAX_ACCUM_INTEGER_BITS 12

static int32_t pockmcu_softmax_exp(int32_t diff, int32_t mult, int32_t shift)
{
    const int32_t rescaled = pockmcu_srdhm(pockmcu_wrap_shl(diff, shift), mult);
    return pockmcu_exp_on_negative_values(rescaled, POCKMCU_SOFTMAX_SCALED_DIFF_INTEGER_BITS);
}

void arm_softmax_s8(const int8_t *input,
                    const int32_t num_rows,
                    const int32_t row_size,
                    const int32_t mult,
                    const int32_t shift,
                    const int32_t diff_min,
                    int8_t *output)
{
    int32_t r, c;
    for (r = 0; r < num_rows; r++)
    {
        const int8_t *in = input + r * row_size;
        int8_t *out = output + r * row_size;
        int32_t max = -128;
        int32_t sum = 0;
        int32_t num_bits_over_unit;
        int32_t shifted_scale;
        int32_t exponent;

        for (c = 0; c < row_size; c++)
        {
            max = in[c] > max ? in[c] : max;
        }
        for (c = 0; c < row_size; c++)
        {
            const int32_t diff = (int32_t)in[c] - max;
            if (diff >= diff_min)
            {
                /* Rescale<12>(Q0.31 value) == RoundingDivideByPOT(x, 12) */
                const int32_t e = pockmcu_softmax_exp(diff, mult, shift);
                sum = pockmcu_wrap_add(sum, pockmcu_rdbpot(e, POCKMCU_SOFTMAX_ACCUM_INTEGER_BITS));
            }
        }
        shifted_scale = pockmcu_get_reciprocal(sum, POCKMCU_SOFTMAX_ACCUM_INTEGER_BITS, &num_bits_over_unit);
        exponent = num_bits_over_unit + 31 - 8;

        for (c = 0; c < row_size; c++)
        {
            const int32_t diff = (int32_t)in[c] - max;
            if (diff >= diff_min)
            {
                const int32_t e = pockmcu_softmax_exp(diff, mult, shift);
                /* TFLM aborts when exponent > 31 (sum of exps >= 512, i.e. more
                 * than ~512 entries near the row max); the exact extension of
                 * the division rounds to 0 there. */
                const int32_t unsat = exponent > 31 ? 0 : pockmcu_rdbpot(pockmcu_srdhm(shifted_scale, e), exponent);
                out[c] = (int8_t)pockmcu_clamp_i32(pockmcu_wrap_add(unsat, -128), -128, 127);
            }
            else
            {
                out[c] = -128;
            }
        }
    }
}
