/*
 * pockmcu_lut_s8 - element-wise int8 -> int8 through a 256-entry table:
 * output[i] = table[input[i] + 128].
 *
 * Used for onnxruntime numerics, where an int8 -> int8 requantization is
 * DequantizeLinear then QuantizeLinear in float32; the table holds that
 * float computation for every input value, made at compile time (clamp
 * included). In place is allowed (output_data == input_data).
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_lut_s8(const int8_t *input_data, int32_t size, const int8_t *table, int8_t *output_data)
{
    int32_t i;
    for (i = 0; i < size; i++)
    {
        output_data[i] = table[(int32_t)input_data[i] + 128];
    }
    return ARM_CMSIS_NN_SUCCESS;
}
