/*
 * arm_fully_connected_s8 - portable int8 fully connected layer (CMSIS-NN API),
 * per-tensor requantization.
 *
 * Computes TFLM's reference_integer_ops::FullyConnected:
 *   acc = sum_d (filter[o][d] + filter_offset) * (input[b][d] + input_offset)
 *         + bias[o]
 *   out = clamp(MultiplyByQuantizedMultiplier(acc, mult, shift) + output_offset)
 * with batches = input_dims->n, accumulation depth = filter_dims->n and output
 * depth = output_dims->c (CMSIS-NN's conventions). bias_data may be NULL.
 * Needs no scratch buffer (ctx->buf is ignored).
 */
#include "pockmcu_layer_loops.h"

arm_cmsis_nn_status arm_fully_connected_s8(const cmsis_nn_context *ctx,
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
}
