/*
 * pockmcu_flip_sign_8 - uint8 <-> int8 with the same scale (x ^ 0x80).
 *
 * A uint8 tensor with zero point z holds the same real values as the int8
 * tensor q - 128 with zero point z - 128, and q - 128 (mod 256) is q with its
 * top bit flipped. One kernel serves both directions; exact. Used at the edges
 * of ONNX models with uint8 inputs or outputs (onnxruntime's default
 * activation type), everything inside runs in int8.
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status pockmcu_flip_sign_8(const void *input_data, int32_t size, void *output_data)
{
    const uint8_t *in = (const uint8_t *)input_data;
    uint8_t *out = (uint8_t *)output_data;
    int32_t i;
    for (i = 0; i < size; i++)
    {
        out[i] = (uint8_t)(in[i] ^ 0x80u);
    }
    return ARM_CMSIS_NN_SUCCESS;
}
