/*
 * arm_pad_s8 - int8 constant padding of an NHWC tensor (CMSIS-NN API).
 *
 * output dims = pre_pad + input_size + post_pad in each of n, h, w, c; every
 * position outside the copied input holds pad_value. Matches TFLM's PAD /
 * PADV2 for int8 (pad_value = output zero point, or the given constant).
 */
#include <string.h>

#include "pockmcu_nn.h"

arm_cmsis_nn_status arm_pad_s8(const int8_t *input,
                               int8_t *output,
                               const int8_t pad_value,
                               const cmsis_nn_dims *input_size,
                               const cmsis_nn_dims *pre_pad,
                               const cmsis_nn_dims *post_pad)
{
    const int32_t out_h = pre_pad->h + input_size->h + post_pad->h;
    const int32_t out_w = pre_pad->w + input_size->w + post_pad->w;
    const int32_t out_c = pre_pad->c + input_size->c + post_pad->c;
    const int32_t batch_block = out_h * out_w * out_c;
    const int32_t row_block = out_w * out_c;
    int32_t b, y, x;

    memset(output, pad_value, (size_t)(batch_block * pre_pad->n));
    output += batch_block * pre_pad->n;
    for (b = 0; b < input_size->n; b++)
    {
        memset(output, pad_value, (size_t)(row_block * pre_pad->h));
        output += row_block * pre_pad->h;
        for (y = 0; y < input_size->h; y++)
        {
            memset(output, pad_value, (size_t)(out_c * pre_pad->w));
            output += out_c * pre_pad->w;
            for (x = 0; x < input_size->w; x++)
            {
                memset(output, pad_value, (size_t)pre_pad->c);
                output += pre_pad->c;
                memcpy(output, input, (size_t)input_size->c);
                output += input_size->c;
                input += input_size->c;
                memset(output, pad_value, (size_t)post_pad->c);
                output += post_pad->c;
            }
            memset(output, pad_value, (size_t)(out_c * post_pad->w));
            output += out_c * post_pad->w;
        }
        memset(output, pad_value, (size_t)(row_block * post_pad->h));
        output += row_block * post_pad->h;
    }
    memset(output, pad_value, (size_t)(batch_block * post_pad->n));
    return ARM_CMSIS_NN_SUCCESS;
}
