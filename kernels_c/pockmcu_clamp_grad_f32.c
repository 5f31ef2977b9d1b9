/*
 * pockmcu_clamp_grad_f32 - input gradient of RELU, RELU6 and RELU_N1_TO_1.
 *
 *   grad_input[k] = lo <= input[k] <= hi ? grad_output[k] : 0
 * [lo, hi]: the int8 input values whose real value lies strictly inside the activation's range (x > 0 for
 * RELU; 0 < x < 6 for RELU6, -1 < x < 1 for RELU_N1_TO_1: PyTorch's relu and hardtanh backward), found at
 * compile time. grad_input may be grad_output.
 */
#include "pockmcu_nn.h"

void pockmcu_clamp_grad_f32(const int8_t *input,
                            int32_t size,
                            int32_t lo,
                            int32_t hi,
                            const float *grad_output,
                            float *grad_input)
{
    int32_t k;
    for (k = 0; k < size; k++)
    {
        const int32_t x = input[k];
        grad_input[k] = (x >= lo && x <= hi) ? grad_output[k] : 0.0f;
    }
}
