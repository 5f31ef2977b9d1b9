/*
 * arm_concatenation_s8_y - int8 concatenation along Y (CMSIS-NN API).
 *
 * Tensors are viewed as [w][z][y][x] with x innermost. Copies the input into
 * the output (whose y extent is output_y) starting at y = offset_y. Pure data
 * movement, matching TFLM's CONCATENATION for equal input/output quantization.
 */
#include <string.h>

#include "pockmcu_nn.h"

void arm_concatenation_s8_y(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint16_t output_y,
                            const uint32_t offset_y)
{
    const uint32_t tiles = (uint32_t)input_z * input_w;
    const uint32_t copy_size = (uint32_t)input_x * input_y;
    const uint32_t out_stride = (uint32_t)input_x * output_y;
    uint32_t i;
    output += offset_y * input_x;
    for (i = 0; i < tiles; i++)
    {
        memcpy(output, input, copy_size);
        input += copy_size;
        output += out_stride;
    }
}
