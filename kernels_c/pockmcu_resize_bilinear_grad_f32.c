/*
 * pockmcu_resize_bilinear_grad_f32 - input gradient of RESIZE_BILINEAR (the transposed interpolation).
 *
 * The forward's weights (rows / cols as for pockmcu_resize_bilinear_s8) as real coefficients:
 * k00 = (1024 - fy)(1024 - fx) / 2^20, k10 = fy (1024 - fx) / 2^20, k01 = (1024 - fy) fx / 2^20,
 * k11 = fy fx / 2^20 (each exact in float32). grad_input = 0, then for every output position in
 * order (batch, y, x, channel), with g = grad_output[n, y, x, c]:
 *   grad_input[y0, x0] += g * k00; grad_input[y1, x0] += g * k10;
 *   grad_input[y0, x1] += g * k01; grad_input[y1, x1] += g * k11
 * in float32, in that order. Input and output share their quantization, so the real-valued map is the
 * same linear map and its transpose is the gradient.
 */
#include "pockmcu_nn.h"

void pockmcu_resize_bilinear_grad_f32(const cmsis_nn_dims *input_dims,
                                      const cmsis_nn_dims *output_dims,
                                      const int32_t *rows,
                                      const int32_t *cols,
                                      const float *grad_output,
                                      float *grad_input)
{
    const int32_t depth = input_dims->c;
    const int32_t row_len = input_dims->w * depth;
    const int32_t in_size = input_dims->h * row_len;
    const float unit = 1.0f / 1048576.0f;
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
            float *top = gi + rows[3 * y] * row_len;
            float *bottom = gi + rows[3 * y + 1] * row_len;
            const int32_t fy = rows[3 * y + 2];
            for (x = 0; x < output_dims->w; x++)
            {
                const int32_t x0 = cols[3 * x] * depth;
                const int32_t x1 = cols[3 * x + 1] * depth;
                const int32_t fx = cols[3 * x + 2];
                const float k00 = (float)((1024 - fy) * (1024 - fx)) * unit;
                const float k10 = (float)(fy * (1024 - fx)) * unit;
                const float k01 = (float)((1024 - fy) * fx) * unit;
                const float k11 = (float)(fy * fx) * unit;
                for (c = 0; c < depth; c++)
                {
                    const float g = *grad_output++;
                    top[x0 + c] += g * k00;
                    bottom[x0 + c] += g * k10;
                    top[x1 + c] += g * k01;
                    bottom[x1 + c] += g * k11;
                }
            }
        }
    }
}
