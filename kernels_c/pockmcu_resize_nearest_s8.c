/*
 * pockmcu_resize_nearest_s8 - int8 RESIZE_NEAREST_NEIGHBOR (TFLM reference_ops::ResizeNearestNeighbor).
 *
 * output[n, y, x, :] = input[n, rows[y], cols[x], :]. TFLM computes each source row and column
 * with float32 arithmetic (GetNearestNeighbor: the align_corners / half_pixel_centers scale, floor or
 * round, clamp); pockmcu computes the same indices at compile time (pockmcu.ops.resize) and the kernel
 * only copies. Input and output share their quantization, as in TFLM (no rescaling).
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_resize_nearest_s8(const cmsis_nn_dims *input_dims,
                                              const int8_t *input_data,
                                              const cmsis_nn_dims *output_dims,
                                              const int32_t *rows,
                                              const int32_t *cols,
                                              int8_t *output_data)
{
    const int32_t depth = input_dims->c;
    int32_t b, y, x, c;

    if (depth != output_dims->c || input_dims->n != output_dims->n)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (b = 0; b < input_dims->n; b++)
    {
        const int8_t *in = input_data + b * input_dims->h * input_dims->w * depth;
        for (y = 0; y < output_dims->h; y++)
        {
            const int8_t *in_row = in + rows[y] * input_dims->w * depth;
            for (x = 0; x < output_dims->w; x++)
            {
                const int8_t *src = in_row + cols[x] * depth;
                for (c = 0; c < depth; c++)
                {
                    *output_data++ = src[c];
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
