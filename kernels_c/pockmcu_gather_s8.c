/*
 * pockmcu_gather_s8 - GATHER with batch_dims 0: rows of an int8 tensor picked by constant indices.
 *
 * The input is seen as [outer][axis_size][inner] (axis = the gathered axis), the output as
 * [outer][count][inner]: output[o][p][:] = input[o][indices[p]][:], as TFLite Micro's Gather copies
 * it (one memcpy of inner bytes per index). Indices are checked: ARM_CMSIS_NN_ARG_ERROR for one outside
 * [0, axis_size) (the code generator checks them at compile time too).
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_gather_s8(const int8_t *input,
                                      int32_t outer,
                                      int32_t axis_size,
                                      int32_t inner,
                                      const int32_t *indices,
                                      int32_t count,
                                      int8_t *output)
{
    int32_t o, p;
    for (p = 0; p < count; p++)
    {
        if (indices[p] < 0 || indices[p] >= axis_size)
        {
            return ARM_CMSIS_NN_ARG_ERROR;
        }
    }
    for (o = 0; o < outer; o++)
    {
        for (p = 0; p < count; p++)
        {
            memcpy(output, input + (o * axis_size + indices[p]) * inner, (size_t)inner);
            output += inner;
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
