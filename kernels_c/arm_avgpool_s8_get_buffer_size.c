/*
 * arm_avgpool_s8_get_buffer_size - scratch size for the portable
 * arm_avgpool_s8 (CMSIS-NN API). It needs none.
 */
#include "pockmcu_nn.h"

int32_t arm_avgpool_s8_get_buffer_size(const int dim_dst_width, const int ch_src)
{
    (void)dim_dst_width;
    (void)ch_src;
    return 0;
}
