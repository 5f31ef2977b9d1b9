/*
 * arm_fully_connected_s8_get_buffer_size - scratch size for the portable
 * arm_fully_connected_s8 (CMSIS-NN API). It needs none.
 */
#include "pockmcu_nn.h"

int32_t arm_fully_connected_s8_get_buffer_size(const cmsis_nn_dims *filter_dims)
{
    (void)filter_dims;
    return 0;
}
