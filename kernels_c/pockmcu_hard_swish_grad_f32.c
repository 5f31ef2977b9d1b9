/*
 * pockmcu_hard_swish_grad_f32 - input gradient of HARD_SWISH.
 *
 * x = input_scale * (float)(input[k] - input_zero_point) (the dequantized forward input), then
 *   grad_input[k] = 0                                    for x <= -3
 *                 = grad_output[k] * (x / 3 + 0.5)       for -3 < x < 3
 *                 = grad_output[k]                       for x >= 3
 * in float32, in that order; at the kinks the outer pieces' slopes, as PyTorch's hardswish_backward.
 * grad_input may be grad_output.
 */
#include "pockmcu_nn.h"

void pockmcu_hard_swish_grad_f32(const int8_t *input,
                                 int32_t size,
                                 float input_scale,
                                 int32_t input_zero_point,
                                 const float *grad_output,
                                 float *grad_input)
{
    int32_t k;
    for (k = 0; k < size; k++)
    {
        const float x = input_scale * (float)((int32_t)input[k] - input_zero_point);
        const float g = grad_output[k];
        if (x <= -3.0f)
        {
            grad_input[k] = 0.0f;
        }
        else if (x < 3.0f)
        {
            grad_input[k] = g * (x / 3.0f + 0.5f);
        }
        else
        {
            grad_input[k] = g;
        }
    }
}
