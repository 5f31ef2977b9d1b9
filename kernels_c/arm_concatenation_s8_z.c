/*
 * arm_concatenation_s8_z - int8 concatenation along Z (CMSIS-NN API).
 *
 * Tensors are viewed as [w][z][y][x] with x innermost. Copies the input into
 * the output (whose z extent is output_z) starting at z = offset_z. Pure data
 * movement, matching TFLM's CONCATENATION for equal input/output quantization.
 */
#include <string.h>

#include "pockmcu_nn.h"

void arm_concatenation_s8_z(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint16_t output_z,
                            const uint32_t offset_z)
{
    const uint32_t copy_size = (uint32_t)input_x * input_y * input_z;
    const uint32_t out_stride = (uint32_t)input_x * input_y * output_z;
    uint32_t i;
    output += offset_z * ((uint32_t)input_x * input_y);
    for (i = 0; i < input_w; i++)
    {
        memcpy(output, input, copy_size);
        input += copy_size;
        output += out_stride;
    }
}
