/*
 * pockmcu_logistic_grad_f32 - input gradient of LOGISTIC from its saved int8 output.
 *
 *   y = output_scale * (float)(output[k] - output_zero_point)
 *   grad_input[k] = (grad_output[k] * (1.0f - y)) * y
 * in float32, in that order (PyTorch's sigmoid_backward at the output y). grad_input may be grad_output.
 */
#include "pockmcu_nn.h"

void pockmcu_logistic_grad_f32(const int8_t *output,
                               int32_t size,
                               float output_scale,
                               int32_t output_zero_point,
                               const float *grad_output,
                               float *grad_input)
{
    int32_t k;
    for (k = 0; k < size; k++)
    {
        const float y = output_scale * (float)((int32_t)output[k] - output_zero_point);
        grad_input[k] = (grad_output[k] * (1.0f - y)) * y;
    }
}
