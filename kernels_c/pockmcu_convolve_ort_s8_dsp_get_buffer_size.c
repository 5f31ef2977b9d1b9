/*
 * pockmcu_convolve_ort_s8_dsp_get_buffer_size - scratch bytes of pockmcu_convolve_ort_s8_dsp: the int16 column of four
 * output pixels (fewer when there are fewer) and one int8 receptive field (pockmcu_dsp_conv_buffer_size).
 */
#include "pockmcu_dsp_loops.h"

int32_t pockmcu_convolve_ort_s8_dsp_get_buffer_size(const cmsis_nn_conv_params *conv_params,
                                                    const cmsis_nn_dims *input_dims,
                                                    const cmsis_nn_dims *filter_dims,
                                                    const cmsis_nn_dims *output_dims)
{
    (void)conv_params;
    return pockmcu_dsp_conv_buffer_size(input_dims, filter_dims, output_dims, 0);
}
