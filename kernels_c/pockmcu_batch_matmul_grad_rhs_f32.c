/*
 * pockmcu_batch_matmul_grad_rhs_f32 - gradient of BATCH_MATMUL with respect to its rhs (float32).
 *
 * dR[k,j] = lhs_scale * sum over i of (L[i,k] + lhs_offset) * grad_output[i,j], with L, R and the batch
 * broadcasting as in pockmcu_batch_matmul_s8; a broadcast rhs batch sums the gradients of every output
 * batch that read it. Order (fixed): grad_rhs is zeroed; for each output batch (b0, b1 ascending), k, j:
 * s = +0, then s += (float)(L[i,k] + lhs_offset) * grad_output[i,j] for i ascending; grad_rhs[.] += s *
 * lhs_scale. grad_rhs is written in rhs's stored layout (transposed when adj_y). No scratch buffer.
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_batch_matmul_grad_rhs_f32(int32_t adj_x,
                                                      int32_t adj_y,
                                                      const cmsis_nn_dims *lhs_dims,
                                                      const int8_t *lhs,
                                                      float lhs_scale,
                                                      int32_t lhs_offset,
                                                      const cmsis_nn_dims *rhs_dims,
                                                      const cmsis_nn_dims *output_dims,
                                                      const float *grad_output,
                                                      float *grad_rhs)
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
    memset(grad_rhs, 0, (size_t)rhs_dims->n * (size_t)rhs_dims->h * (size_t)depth * (size_t)cols * sizeof(float));
    for (b0 = 0; b0 < output_dims->n; b0++)
    {
        for (b1 = 0; b1 < output_dims->h; b1++)
        {
            const int32_t lb = (lhs_dims->n == 1 ? 0 : b0) * lhs_dims->h + (lhs_dims->h == 1 ? 0 : b1);
            const int32_t rb = (rhs_dims->n == 1 ? 0 : b0) * rhs_dims->h + (rhs_dims->h == 1 ? 0 : b1);
            const int8_t *l = lhs + lb * rows * depth;
            const float *go = grad_output + (b0 * output_dims->h + b1) * rows * cols;
            float *gr = grad_rhs + rb * depth * cols;
            for (k = 0; k < depth; k++)
            {
                for (j = 0; j < cols; j++)
                {
                    float s = 0.0f;
                    for (i = 0; i < rows; i++)
                    {
                        s += (float)((int32_t)l[i * l_i + k * l_k] + lhs_offset) * go[i * cols + j];
                    }
                    gr[k * r_k + j * r_j] += s * lhs_scale;
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
