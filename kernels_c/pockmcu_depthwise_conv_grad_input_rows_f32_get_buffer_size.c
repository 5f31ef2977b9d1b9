/*
 * pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size - scratch bytes
 * needed by pockmcu_depthwise_conv_grad_input_rows_f32: its ring of
 * max(1, (KH - 1) * dil_h - pad_h + 1) input rows of W floats
 * for a block of min(C_IN, POCKMCU_DW_GRAD_ROWS_BLOCK) channels (2 x 8 x 16
 * floats = 1 KB for a 3x3 filter over 8 columns, whatever the channel count).
 */
#include "pockmcu_nn.h"

int32_t pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size(const cmsis_nn_dw_conv_params *dw_conv_params,
                                                                   const cmsis_nn_dims *input_dims,
                                                                   const cmsis_nn_dims *filter_dims)
{
    const int32_t lag = (filter_dims->h - 1) * dw_conv_params->dilation.h - dw_conv_params->padding.h;
    const int32_t rows = lag > 0 ? lag + 1 : 1;
    const int32_t block = input_dims->c < POCKMCU_DW_GRAD_ROWS_BLOCK ? input_dims->c : POCKMCU_DW_GRAD_ROWS_BLOCK;
    return rows * input_dims->w * block * (int32_t)sizeof(float);
}
