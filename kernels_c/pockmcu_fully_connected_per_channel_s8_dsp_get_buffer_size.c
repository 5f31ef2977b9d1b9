/*
 * pockmcu_fully_connected_per_channel_s8_dsp_get_buffer_size - scratch bytes of
 * pockmcu_fully_connected_per_channel_s8_dsp: the int16 column of four batches, fewer when there are fewer
 * (pockmcu_dsp_fc_buffer_size).
 */
#include "pockmcu_dsp_loops.h"

int32_t pockmcu_fully_connected_per_channel_s8_dsp_get_buffer_size(const cmsis_nn_dims *input_dims,
                                                                   const cmsis_nn_dims *filter_dims)
{
    return pockmcu_dsp_fc_buffer_size(input_dims, filter_dims);
}
