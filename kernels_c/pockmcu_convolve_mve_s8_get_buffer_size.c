/*
 * pockmcu_convolve_mve_s8_get_buffer_size - scratch size of pockmcu_convolve_mve_s8 (CMSIS-NN API): none,
 * on every core (its Helium path works in a fixed stack block; elsewhere it is the portable kernel).
 */
#include "pockmcu_nn.h"

int32_t pockmcu_convolve_mve_s8_get_buffer_size(const cmsis_nn_conv_params *conv_params,
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
