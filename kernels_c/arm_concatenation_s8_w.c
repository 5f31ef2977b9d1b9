/*
 * arm_concatenation_s8_w - int8 concatenation along W, the outermost axis
 * (CMSIS-NN API).
 *
 * Tensors are viewed as [w][z][y][x] with x innermost. Copies the whole input
 * to output + offset_w * (input_x * input_y * input_z). Pure data movement,
 * matching TFLM's CONCATENATION for equal input/output quantization.
 */
#include <string.h>

#include "pockmcu_nn.h"

void arm_concatenation_s8_w(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint32_t offset_w)
{
    const uint32_t block = (uint32_t)input_x * input_y * input_z;
    memcpy(output + offset_w * block, input, block * input_w);
}
