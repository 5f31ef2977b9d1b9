/*
 * pockmcu_leaky_relu_grad_f32 - input gradient of LEAKY_RELU (and of PRELU with one alpha).
 *
 *   grad_input[k] = input[k] > input_zero_point ? grad_output[k] : grad_output[k] * alpha
 * (a positive real input passes the gradient, 0 and below take the slope alpha, as PyTorch's
 * leaky_relu_backward). grad_input may be grad_output.
 */
#include "pockmcu_nn.h"

void pockmcu_leaky_relu_grad_f32(const int8_t *input,
                                 int32_t size,
                                 int32_t input_zero_point,
                                 float alpha,
                                 const float *grad_output,
                                 float *grad_input)
{
    int32_t k;
    for (k = 0; k < size; k++)
    {
        const float g = grad_output[k];
        grad_input[k] = (int32_t)input[k] > input_zero_point ? g : g * alpha;
    }
}
