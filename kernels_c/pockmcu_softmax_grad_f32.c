/*
 * pockmcu_softmax_grad_f32 - input gradient of a SOFTMAX (last axis) from its saved int8 output.
 *
 * Per row of depth elements, y[k] = output_scale * (float)(output[k] - output_zero_point):
 *   dot = sum over k = 0 .. depth-1 of grad_output[k] * y[k]   (one float32 accumulator, in order)
 *   grad_input[k] = y[k] * (grad_output[k] - dot)
 * (PyTorch's softmax backward). A row's dot product is formed before any of its elements is written,
 * so grad_input may be grad_output.
 */
#include "pockmcu_nn.h"

void pockmcu_softmax_grad_f32(const int8_t *output,
                              int32_t rows,
                              int32_t depth,
                              float output_scale,
                              int32_t output_zero_point,
                              const float *grad_output,
                              float *grad_input)
{
    int32_t r, k;
    for (r = 0; r < rows; r++)
    {
        const int8_t *y_row = output + (size_t)r * (size_t)depth;
        const float *dy = grad_output + (size_t)r * (size_t)depth;
        float *dx = grad_input + (size_t)r * (size_t)depth;
        float dot = 0.0f;
        for (k = 0; k < depth; k++)
        {
            dot += dy[k] * (output_scale * (float)((int32_t)y_row[k] - output_zero_point));
        }
        for (k = 0; k < depth; k++)
        {
            const float y = output_scale * (float)((int32_t)y_row[k] - output_zero_point);
            dx[k] = y * (dy[k] - dot);
        }
    }
}
