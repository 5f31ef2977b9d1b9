/*
 * pockmcu_batch_matmul_s8 - int8 batched matrix product (TFLite BATCH_MATMUL), bit-exact with TFLite
 * Micro's reference_ops::BatchMatMul<int8_t, int32_t>.
 *
 * For each output batch (b0, b1), row i and column j: the int32 sum (wrapping, as TFLM's) over k of
 * (L[i,k] + input_offset) * (R[k,j] + filter_offset), requantized with one multiplier / shift (double
 * rounding), plus output_offset, clamped. L[i,k] is lhs[i*K + k] (lhs[k*ROWS + i] when adj_x), R[k,j] is
 * rhs[k*COLS + j] (rhs[j*K + k] when adj_y), in the batch (b0, b1) of each operand, or its only batch
 * where that dimension is 1 (broadcasting). TFLM's transposed copies are not needed: the kernel reads
 * the stored layout directly, so it takes no scratch buffer.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_batch_matmul_s8(const cmsis_nn_fc_params *fc_params,
                                            int32_t adj_x,
                                            int32_t adj_y,
                                            const cmsis_nn_per_tensor_quant_params *quant_params,
                                            const cmsis_nn_dims *lhs_dims,
                                            const int8_t *lhs,
                                            const cmsis_nn_dims *rhs_dims,
                                            const int8_t *rhs,
                                            const cmsis_nn_dims *output_dims,
                                            int8_t *output)
{
    const int32_t rows = output_dims->w;
    const int32_t cols = output_dims->c;
    const int32_t depth = adj_x ? lhs_dims->w : lhs_dims->c;
    const int32_t lhs_off = fc_params->input_offset;
    const int32_t rhs_off = fc_params->filter_offset;
    const int32_t out_off = fc_params->output_offset;
    const int32_t act_min = fc_params->activation.min;
    const int32_t act_max = fc_params->activation.max;
    /* element strides of the matrices: (row, depth) of L and (depth, col) of R as stored */
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
    for (b0 = 0; b0 < output_dims->n; b0++)
    {
        for (b1 = 0; b1 < output_dims->h; b1++)
        {
            const int32_t lb = (lhs_dims->n == 1 ? 0 : b0) * lhs_dims->h + (lhs_dims->h == 1 ? 0 : b1);
            const int32_t rb = (rhs_dims->n == 1 ? 0 : b0) * rhs_dims->h + (rhs_dims->h == 1 ? 0 : b1);
            const int8_t *l = lhs + lb * rows * depth;
            const int8_t *r = rhs + rb * depth * cols;
            int8_t *out = output + (b0 * output_dims->h + b1) * rows * cols;
            for (i = 0; i < rows; i++)
            {
                for (j = 0; j < cols; j++)
                {
                    int32_t acc = 0;
                    int32_t v;
                    for (k = 0; k < depth; k++)
                    {
                        acc = pockmcu_wrap_add(
                            acc, ((int32_t)l[i * l_i + k * l_k] + lhs_off) * ((int32_t)r[k * r_k + j * r_j] + rhs_off));
                    }
                    v = pockmcu_requantize(acc, quant_params->multiplier, quant_params->shift) + out_off;
                    out[i * cols + j] = (int8_t)pockmcu_clamp_i32(v, act_min, act_max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
