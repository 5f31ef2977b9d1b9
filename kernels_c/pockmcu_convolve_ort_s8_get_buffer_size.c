/*
 * pockmcu_convolve_ort_s8_get_buffer_size - scratch size for pockmcu_convolve_ort_s8: none.
 */
#include "pockmcu_nn.h"

int32_t pockmcu_convolve_ort_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
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
