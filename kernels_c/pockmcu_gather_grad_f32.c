/*
 * pockmcu_gather_grad_f32 - input gradient of GATHER (batch_dims 0): a scatter-add.
 *
 * grad_input [outer][axis_size][inner] is zeroed, then grad_output [outer][count][inner] is added
 * row by row: grad_input[o][indices[p]][:] += grad_output[o][p][:], in order of p (an index that repeats
 * sums its rows in that order; rows never picked get 0). ARM_CMSIS_NN_ARG_ERROR for an index outside
 * [0, axis_size).
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_gather_grad_f32(const float *grad_output,
                                            int32_t outer,
                                            int32_t axis_size,
                                            int32_t inner,
                                            const int32_t *indices,
                                            int32_t count,
                                            float *grad_input)
{
    int32_t o, p, i;
    for (p = 0; p < count; p++)
    {
        if (indices[p] < 0 || indices[p] >= axis_size)
        {
            return ARM_CMSIS_NN_ARG_ERROR;
        }
    }
    memset(grad_input, 0, (size_t)outer * (size_t)axis_size * (size_t)inner * sizeof(float));
    for (o = 0; o < outer; o++)
    {
        for (p = 0; p < count; p++)
        {
            float *row = grad_input + (o * axis_size + indices[p]) * inner;
            for (i = 0; i < inner; i++)
            {
                row[i] += grad_output[i];
            }
            grad_output += inner;
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
