/*
 * pockmcu_fully_connected_mve_s8 - int8 fully connected layer with per tensor requantization for Helium
 * (Armv8.1-M MVE, Cortex-M55), the CMSIS-NN API and bytes of arm_fully_connected_s8 (TFLM
 * FullyConnected, double rounding requantization).
 *
 * On a core with integer MVE: pockmcu_mve_fc (pockmcu_nn_support_mve.h), four output rows at a time
 * against one 16-byte input load, VMLADAVA dot products, the offsets folded in as
 * sum (w + fo)(x + io) = sum w x + io sum w + fo sum x + D fo io (wrapping int32, the same integer as
 * the portable sum), requantization over the four outputs. No scratch buffer (the FC buffer query
 * arm_fully_connected_s8_get_buffer_size returns 0).
 *
 * Elsewhere (cores without MVE, the host simulation) this function is the portable kernel: it runs
 * pockmcu_fully_connected_s8_loops exactly as arm_fully_connected_s8 does. The MVE path produces the same
 * bytes (tests/test_mve_kernels.py), so a model's host simulation equals its run on Cortex-M55.
 */
#include "pockmcu_layer_loops.h"
#include "pockmcu_nn_support_mve.h"

arm_cmsis_nn_status pockmcu_fully_connected_mve_s8(const cmsis_nn_context *ctx,
                                                   const cmsis_nn_fc_params *fc_params,
                                                   const cmsis_nn_per_tensor_quant_params *quant_params,
                                                   const cmsis_nn_dims *input_dims,
                                                   const int8_t *input_data,
                                                   const cmsis_nn_dims *filter_dims,
                                                   const int8_t *filter_data,
                                                   const cmsis_nn_dims *bias_dims,
                                                   const int32_t *bias_data,
                                                   const cmsis_nn_dims *output_dims,
                                                   int8_t *output_data)
{
    (void)ctx;
    (void)bias_dims;
#if POCKMCU_HAS_MVE
    return pockmcu_mve_fc(fc_params,
                          &quant_params->multiplier,
                          &quant_params->shift,
                          0,
                          input_dims,
                          input_data,
                          filter_dims,
                          filter_data,
                          bias_data,
                          output_dims,
                          output_data);
#else
    return pockmcu_fully_connected_s8_loops(fc_params,
                                            &quant_params->multiplier,
                                            &quant_params->shift,
                                            0,
                                            input_dims,
                                            input_data,
                                            filter_dims,
                                            filter_data,
                                            bias_data,
                                            output_dims,
                                            output_data,
                                            0);
#endif
}
