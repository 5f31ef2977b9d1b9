/*
 * arm_concatenation_s8_x - int8 concatenation along X (CMSIS-NN API).
 *
 * Tensors are viewed as [w][z][y][x] with x innermost. Copies the input into
 * the output (whose x extent is output_x) starting at x = offset_x. Pure data
 * movement, matching TFLM's CONCATENATION for equal input/output quantization.
 */
#include <string.h>

#include "pockmcu_nn.h"

void arm_concatenation_s8_x(const int8_t *input,
                            const uint16_t input_x,
                            const uint16_t input_y,
                            const uint16_t input_z,
                            const uint16_t input_w,
                            int8_t *output,
                            const uint16_t output_x,
                            const uint32_t offset_x)
{
    const uint32_t rows = (uint32_t)input_y * input_z * input_w;
    uint32_t i;
    output += offset_x;
    for (i = 0; i < rows; i++)
    {
        memcpy(output, input, input_x);
        input += input_x;
        output += output_x;
    }
}
