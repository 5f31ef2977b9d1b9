/*
 * pockmcu_reduce_max_s8 - int8 REDUCE_MAX over any axes (TFLM ReduceGeneric).
 *
 * shape = {outer, reduced0, middle, reduced1, inner} as for pockmcu_reduce_sum_s8. Every output
 * (o, m, i), in that order, is the largest of its reduced0 * reduced1 inputs. TFLM requires the input
 * and output quantization to be equal, so no rescaling is done.
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_reduce_max_s8(const int32_t *shape, const int8_t *input_data, int8_t *output_data)
{
    const int32_t outer = shape[0];
    const int32_t red0 = shape[1];
    const int32_t middle = shape[2];
    const int32_t red1 = shape[3];
    const int32_t inner = shape[4];
    int32_t o, m, i, r0, r1;

    if (outer <= 0 || red0 <= 0 || middle <= 0 || red1 <= 0 || inner <= 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (o = 0; o < outer; o++)
    {
        for (m = 0; m < middle; m++)
        {
            for (i = 0; i < inner; i++)
            {
                int8_t best = -128;
                for (r0 = 0; r0 < red0; r0++)
                {
                    const int8_t *row = input_data + ((o * red0 + r0) * middle + m) * red1 * inner + i;
                    for (r1 = 0; r1 < red1; r1++)
                    {
                        const int8_t v = row[r1 * inner];
                        best = v > best ? v : best;
                    }
                }
                *output_data++ = best;
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
