/*
 * pockmcu_reduce_extremum_grad_f32 - input gradient of REDUCE_MAX or REDUCE_MIN over any axes.
 *
 * shape = {outer, reduced0, middle, reduced1, inner} as for pockmcu_reduce_sum_s8; input is the
 * saved int8 forward input and output the forward's int8 result (the extremum itself, same
 * quantization). For every output (o, m, i), with t the number of its inputs equal to the output:
 *   grad_input[k] = (grad_output[o, m, i] / (float)t) * (input[k] == output ? 1.0f : 0.0f)
 * in float32: ties share the gradient equally, and the operations are PyTorch's amax / amin backward
 * (so a negative gradient leaves -0.0 at the other positions, as there).
 */
#include "pockmcu_nn.h"

void pockmcu_reduce_extremum_grad_f32(const int32_t *shape,
                                      const int8_t *input_data,
                                      const int8_t *output_data,
                                      const float *grad_output,
                                      float *grad_input)
{
    const int32_t outer = shape[0];
    const int32_t red0 = shape[1];
    const int32_t middle = shape[2];
    const int32_t red1 = shape[3];
    const int32_t inner = shape[4];
    int32_t o, m, i, r0, r1;

    for (o = 0; o < outer; o++)
    {
        for (m = 0; m < middle; m++)
        {
            for (i = 0; i < inner; i++)
            {
                const int32_t at = (o * middle + m) * inner + i;
                const int8_t best = output_data[at];
                int32_t ties = 0;
                float v;
                for (r0 = 0; r0 < red0; r0++)
                {
                    const int8_t *row = input_data + ((o * red0 + r0) * middle + m) * red1 * inner + i;
                    for (r1 = 0; r1 < red1; r1++)
                    {
                        ties += row[r1 * inner] == best;
                    }
                }
                v = grad_output[at] / (float)ties;
                for (r0 = 0; r0 < red0; r0++)
                {
                    const int32_t base = ((o * red0 + r0) * middle + m) * red1 * inner + i;
                    for (r1 = 0; r1 < red1; r1++)
                    {
                        grad_input[base + r1 * inner] = v * (input_data[base + r1 * inner] == best ? 1.0f : 0.0f);
                    }
                }
            }
        }
    }
}
