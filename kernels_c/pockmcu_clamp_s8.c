/*
 * pockmcu_clamp_s8 - int8 clamp to [lo, hi] without requantization.
 *
 * TFLite Micro's int8 RELU6 (Relu6Quantized): output[k] = min(max(input[k], lo), hi), lo the input's zero
 * point and hi the input's quantized 6. In place is allowed.
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status
pockmcu_clamp_s8(const int8_t *input_data, int32_t size, int32_t lo, int32_t hi, int8_t *output_data)
{
    int32_t k;
    for (k = 0; k < size; k++)
    {
        const int32_t x = input_data[k];
        output_data[k] = (int8_t)(x > hi ? hi : (x < lo ? lo : x));
    }
    return ARM_CMSIS_NN_SUCCESS;
}
