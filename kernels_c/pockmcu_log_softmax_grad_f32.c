/*
 * pockmcu_log_softmax_grad_f32 - input gradient of a LOG_SOFTMAX (last axis) from its saved int8 output.
 *
 * Per row of depth elements:
 *   total = sum over k = 0 .. depth-1 of grad_output[k]          (one float32 accumulator, in order)
 *   grad_input[k] = grad_output[k] - exp_table[output[k] + 128] * total
 * (PyTorch's log_softmax backward). exp_table holds exp of the real value of each int8 output as
 * float32 bit patterns, computed at compile time: no expf at run time, so host and device agree to
 * the bit. A row's sum is formed before any of its elements is written: grad_input may be grad_output.
 */
#include <string.h>

#include "pockmcu_nn.h"

void pockmcu_log_softmax_grad_f32(const int8_t *output,
                                  int32_t rows,
                                  int32_t depth,
                                  const uint32_t *exp_table,
                                  const float *grad_output,
                                  float *grad_input)
{
    int32_t r, k;
    for (r = 0; r < rows; r++)
    {
        const int8_t *y = output + (size_t)r * (size_t)depth;
        const float *dy = grad_output + (size_t)r * (size_t)depth;
        float *dx = grad_input + (size_t)r * (size_t)depth;
        float total = 0.0f;
        for (k = 0; k < depth; k++)
        {
            total += dy[k];
        }
        for (k = 0; k < depth; k++)
        {
            float e;
            memcpy(&e, &exp_table[(int32_t)y[k] + 128], sizeof e);
            dx[k] = dy[k] - e * total;
        }
    }
}
