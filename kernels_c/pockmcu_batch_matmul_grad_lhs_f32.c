/*
 * pockmcu_batch_matmul_grad_lhs_f32 - gradient of BATCH_MATMUL with respect to its lhs (float32).
 *
 * dL[i,k] = rhs_scale * sum over j of grad_output[i,j] * (R[k,j] + rhs_offset), with L, R and the batch
 * broadcasting as in pockmcu_batch_matmul_s8; a broadcast lhs batch sums the gradients of every output
 * batch that read it. Order (fixed): grad_lhs is zeroed; for each output batch (b0, b1 ascending), i, k:
 * s = +0, then s += grad_output[i,j] * (float)(R[k,j] + rhs_offset) for j ascending; grad_lhs[.] += s *
 * rhs_scale. grad_lhs is written in lhs's stored layout (transposed when adj_x). No scratch buffer.
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_batch_matmul_grad_lhs_f32(int32_t adj_x,
                                                      int32_t adj_y,
                                                      const cmsis_nn_dims *lhs_dims,
                                                      const cmsis_nn_dims *rhs_dims,
                                                      const int8_t *rhs,
                                                      float rhs_scale,
                                                      int32_t rhs_offset,
                                                      const cmsis_nn_dims *output_dims,
                                                      const float *grad_output,
                                                      float *grad_lhs)
{
    const int32_t rows = output_dims->w;
    const int32_t cols = output_dims->c;
    const int32_t depth = adj_x ? lhs_dims->w : lhs_dims->c;
    const int32_t l_i = adj_x ? 1 : depth;
    const int32_t l_k = adj_x ? rows : 1;
    const int32_t r_k = adj_y ? 1 : cols;
    const int32_t r_j = adj_y ? depth : 1;
    int32_t b0, b1, i, j, k;

    if ((adj_x ? lhs_dims->c : lhs_dims->w) != rows || (adj_y ? rhs_dims->w : rhs_dims->c) != cols ||
        (adj_y ? rhs_dims->c : rhs_dims->w) != depth || (lhs_dims->n != 1 && lhs_dims->n != output_dims->n) ||
        (lhs_dims->h != 1 && lhs_dims->h != output_dims->h) || (rhs_dims->n != 1 && rhs_dims->n != output_dims->n) ||
        (rhs_dims->h != 1 && rhs_dims->h != output_dims->h))
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    memset(grad_lhs, 0, (size_t)lhs_dims->n * (size_t)lhs_dims->h * (size_t)rows * (size_t)depth * sizeof(float));
    for (b0 = 0; b0 < output_dims->n; b0++)
    {
        for (b1 = 0; b1 < output_dims->h; b1++)
        {
            const int32_t lb = (lhs_dims->n == 1 ? 0 : b0) * lhs_dims->h + (lhs_dims->h == 1 ? 0 : b1);
            const int32_t rb = (rhs_dims->n == 1 ? 0 : b0) * rhs_dims->h + (rhs_dims->h == 1 ? 0 : b1);
            const int8_t *r = rhs + rb * depth * cols;
            const float *go = grad_output + (b0 * output_dims->h + b1) * rows * cols;
            float *gl = grad_lhs + lb * rows * depth;
            for (i = 0; i < rows; i++)
            {
                for (k = 0; k < depth; k++)
                {
                    float s = 0.0f;
                    for (j = 0; j < cols; j++)
                    {
                        s += go[i * cols + j] * (float)((int32_t)r[k * r_k + j * r_j] + rhs_offset);
                    }
                    gl[i * l_i + k * l_k] += s * rhs_scale;
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
