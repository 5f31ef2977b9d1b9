/*
 * pockmcu_maximum_s8 - int8 MAXIMUM of two tensors of NumPy-broadcastable shapes (rank <= 5).
 *
 * TFLite Micro's MAXIMUM (reference_ops::MaximumMinimumBroadcastSlow): the larger stored int8 value,
 * no requantization (the converter gives both inputs and the output one quantization). The output is
 * visited in row-major order; each input is read at its broadcast index (dims: see
 * pockmcu_add_broadcast_s8). The output may be an input whose shape is the output's.
 */
#include "pockmcu_nn.h"

arm_cmsis_nn_status
pockmcu_maximum_s8(const int8_t *input1_data, const int8_t *input2_data, const int32_t *dims, int8_t *output_data)
{
    int32_t i0, i1, i2, i3, i4;
    int32_t k = 0;
    for (i0 = 0; i0 < dims[0]; i0++)
    {
        for (i1 = 0; i1 < dims[1]; i1++)
        {
            for (i2 = 0; i2 < dims[2]; i2++)
            {
                for (i3 = 0; i3 < dims[3]; i3++)
                {
                    const int8_t *a = input1_data + i0 * dims[5] + i1 * dims[6] + i2 * dims[7] + i3 * dims[8];
                    const int8_t *b = input2_data + i0 * dims[10] + i1 * dims[11] + i2 * dims[12] + i3 * dims[13];
                    for (i4 = 0; i4 < dims[4]; i4++)
                    {
                        const int8_t x1 = a[i4 * dims[9]];
                        const int8_t x2 = b[i4 * dims[14]];
                        output_data[k++] = x1 > x2 ? x1 : x2;
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
