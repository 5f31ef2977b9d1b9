/*
 * pockmcu_strided_add_f32 - accumulate a strided float32 index grid into another: output[...] += input[...].
 *
 * The input gradient of an operator that reads an element more than once (TILE: the sum over its
 * repeats), into a gradient the caller zeroed; additions happen in grid order.
 *
 * Same index grid as pockmcu_strided_copy_s8 (see there).
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_strided_add_f32(const float *input, int32_t rank, const int32_t *dims, float *output)
{
    int32_t index[POCKMCU_STRIDED_MAX_RANK];
    int32_t in_pos = 0;
    int32_t out_pos = 0;
    int32_t k, i;

    if (rank < 1 || rank > POCKMCU_STRIDED_MAX_RANK)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (k = 0; k < rank; k++)
    {
        if (dims[k] <= 0)
        {
            return dims[k] == 0 ? ARM_CMSIS_NN_SUCCESS : ARM_CMSIS_NN_ARG_ERROR;
        }
        index[k] = 0;
    }
    {
        const int32_t last = rank - 1;
        const int32_t count = dims[last];
        const int32_t in_step = dims[rank + last];
        const int32_t out_step = dims[2 * rank + last];
        for (;;)
        {
            for (i = 0; i < count; i++)
            {
                output[out_pos + i * out_step] += input[in_pos + i * in_step];
            }
            for (k = last - 1; k >= 0; k--)
            {
                in_pos += dims[rank + k];
                out_pos += dims[2 * rank + k];
                if (++index[k] < dims[k])
                {
                    break;
                }
                in_pos -= dims[k] * dims[rank + k];
                out_pos -= dims[k] * dims[2 * rank + k];
                index[k] = 0;
            }
            if (k < 0)
            {
                return ARM_CMSIS_NN_SUCCESS;
            }
        }
    }
}
