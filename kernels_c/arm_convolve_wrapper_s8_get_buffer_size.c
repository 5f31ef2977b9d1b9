/*
 * arm_convolve_wrapper_s8_get_buffer_size - scratch size for the portable
 * arm_convolve_wrapper_s8 (CMSIS-NN API). The portable kernel needs none.
 */
#include "pockmcu_nn.h"

int32_t arm_convolve_wrapper_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const cmsis_nn_dims *output_dims)
{
    (void)conv_params;
    (void)input_dims;
    (void)filter_dims;
    (void)output_dims;
    return 0;
}
