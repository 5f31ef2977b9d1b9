/*
 * pockmcu_transpose_s8 - permute the axes of a 4-D int8 tensor.
 *
 * output[i0][i1][i2][i3] = input[j] where the input index along axis perm[k]
 * is i_k, i.e. output shape[k] = input shape[perm[k]] (numpy's
 * x.transpose(perm)). Lower-rank tensors are padded with leading axes of
 * size 1 (and perm with the identity on them) by the code generator. Used
 * by the ONNX frontend where an NCHW tensor must be seen as NHWC (or back)
 * and no layout rewrite can make the move free. Pure data movement: no
 * quantization change, no scratch buffer.
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_transpose_s8(const int8_t *input_data,
                                         const cmsis_nn_dims *input_dims,
                                         const int32_t *perm,
                                         int8_t *output_data)
{
    int32_t in_shape[4];
    int32_t in_stride[4];
    int32_t out_shape[4];
    int32_t step[4];
    int32_t seen = 0;
    int32_t k, i0, i1, i2, i3;

    in_shape[0] = input_dims->n;
    in_shape[1] = input_dims->h;
    in_shape[2] = input_dims->w;
    in_shape[3] = input_dims->c;
    in_stride[3] = 1;
    in_stride[2] = in_shape[3];
    in_stride[1] = in_shape[2] * in_stride[2];
    in_stride[0] = in_shape[1] * in_stride[1];
    for (k = 0; k < 4; k++)
    {
        if (perm[k] < 0 || perm[k] > 3 || (seen & (1 << perm[k])) != 0)
        {
            return ARM_CMSIS_NN_ARG_ERROR;
        }
        seen |= 1 << perm[k];
        out_shape[k] = in_shape[perm[k]];
        step[k] = in_stride[perm[k]];
    }
    for (i0 = 0; i0 < out_shape[0]; i0++)
    {
        for (i1 = 0; i1 < out_shape[1]; i1++)
        {
            for (i2 = 0; i2 < out_shape[2]; i2++)
            {
                const int8_t *src = input_data + i0 * step[0] + i1 * step[1] + i2 * step[2];
                for (i3 = 0; i3 < out_shape[3]; i3++)
                {
                    *output_data++ = src[i3 * step[3]];
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
