/*
 * pockmcu_strided_copy_s8 - copy a strided int8 index grid into another (pure data movement).
 *
 * The copy walks an index grid of shape dims[0 .. rank) in row-major order; the element at grid index
 * (i_0, .., i_{rank-1}) is read at input[sum_k i_k * dims[rank + k]] and written at
 * output[sum_k i_k * dims[2 * rank + k]]. Strides are in elements and may be negative (reversed slices)
 * or 0 (repeats: TILE); the callers' pointers already point at the first element. Every data-movement
 * operator that is an affine re-indexing compiles to it: TRANSPOSE, SLICE, STRIDED_SLICE, SPLIT,
 * SPLIT_V, PACK, UNPACK, TILE, CONCATENATION above rank 4, DEPTH_TO_SPACE, SPACE_TO_DEPTH; the code
 * generator merges axes that are contiguous in both tensors, so most calls have rank 1 to 3.
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_strided_copy_s8(const int8_t *input, int32_t rank, const int32_t *dims, int8_t *output)
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
            if (in_step == 1 && out_step == 1)
            {
                memcpy(output + out_pos, input + in_pos, (size_t)count);
            }
            else
            {
                for (i = 0; i < count; i++)
                {
                    output[out_pos + i * out_step] = input[in_pos + i * in_step];
                }
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
