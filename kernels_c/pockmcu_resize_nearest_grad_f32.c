/*
 * pockmcu_resize_nearest_grad_f32 - input gradient of RESIZE_NEAREST_NEIGHBOR (a scatter-add).
 *
 * grad_input = 0, then for every output position in order (batch, y, x, channel):
 *   grad_input[n, rows[y], cols[x], c] += grad_output[n, y, x, c]
 * in float32 (rows / cols: the forward's compile-time source indices, see pockmcu_resize_nearest_s8).
 */
#include "pockmcu_nn.h"

void pockmcu_resize_nearest_grad_f32(const cmsis_nn_dims *input_dims,
                                     const cmsis_nn_dims *output_dims,
                                     const int32_t *rows,
                                     const int32_t *cols,
                                     const float *grad_output,
                                     float *grad_input)
{
    const int32_t depth = input_dims->c;
    const int32_t in_size = input_dims->h * input_dims->w * depth;
    int32_t b, y, x, c, k;

    for (k = 0; k < input_dims->n * in_size; k++)
    {
        grad_input[k] = 0.0f;
    }
    for (b = 0; b < input_dims->n; b++)
    {
        float *gi = grad_input + b * in_size;
        for (y = 0; y < output_dims->h; y++)
        {
            float *gi_row = gi + rows[y] * input_dims->w * depth;
            for (x = 0; x < output_dims->w; x++)
            {
                float *dst = gi_row + cols[x] * depth;
                for (c = 0; c < depth; c++)
                {
                    dst[c] += *grad_output++;
                }
            }
        }
    }
}
