/*
 * pockmcu_resize_bilinear_s8 - int8 RESIZE_BILINEAR (TFLM reference_ops::ResizeBilinearInteger).
 *
 * TFLM's integer path: 10-bit fixed-point source coordinates (ComputeInterpolationValuesInteger) give
 * for every output row y a top row y0, a bottom row y1 and a fraction fy = input_y - 1024 * y0 (in
 * [-512, 1024]; negative only where y0 == y1), and the same for columns; pockmcu computes these at
 * compile time (pockmcu.ops.resize) as rows[3 y .. 3 y + 2] = {y0, y1, fy}, cols likewise. Then
 *   v = x[y0,x0] (1024 - fy)(1024 - fx) + x[y1,x0] fy (1024 - fx) + x[y0,x1] (1024 - fy) fx + x[y1,x1] fy fx
 *   out = (v + (v > 0 ? 2^19 : -2^19)) / 2^20, dividing toward zero (TFLM's double-rounding build).
 * |v| < 2^31 for these weights, so 32 bits hold it. Input and output share their quantization.
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_resize_bilinear_s8(const cmsis_nn_dims *input_dims,
                                               const int8_t *input_data,
                                               const cmsis_nn_dims *output_dims,
                                               const int32_t *rows,
                                               const int32_t *cols,
                                               int8_t *output_data)
{
    const int32_t depth = input_dims->c;
    const int32_t row_len = input_dims->w * depth;
    int32_t b, y, x, c;

    if (depth != output_dims->c || input_dims->n != output_dims->n)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (b = 0; b < input_dims->n; b++)
    {
        const int8_t *in = input_data + b * input_dims->h * row_len;
        for (y = 0; y < output_dims->h; y++)
        {
            const int8_t *top = in + rows[3 * y] * row_len;
            const int8_t *bottom = in + rows[3 * y + 1] * row_len;
            const int32_t fy = rows[3 * y + 2];
            for (x = 0; x < output_dims->w; x++)
            {
                const int32_t x0 = cols[3 * x] * depth;
                const int32_t x1 = cols[3 * x + 1] * depth;
                const int32_t fx = cols[3 * x + 2];
                const int32_t w00 = (1024 - fy) * (1024 - fx);
                const int32_t w10 = fy * (1024 - fx);
                const int32_t w01 = (1024 - fy) * fx;
                const int32_t w11 = fy * fx;
                for (c = 0; c < depth; c++)
                {
                    const int32_t v =
                        top[x0 + c] * w00 + bottom[x0 + c] * w10 + top[x1 + c] * w01 + bottom[x1 + c] * w11;
                    *output_data++ = (int8_t)((v + (v > 0 ? (1 << 19) : -(1 << 19))) / (1 << 20));
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
