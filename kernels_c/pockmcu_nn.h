/*
 * pockmcu_nn.h - the single header included by pockmcu-generated code.
 *
 * It declares every kernel in kernels_c/ by including one header per family:
 *
 *   pockmcu_nn_types.h     CMSIS-NN compatible types (cmsis_nn_dims, *_params, arm_cmsis_nn_status)
 *   pockmcu_nn_arm.h       int8 forward layers with CMSIS-NN's names and API (kernels_c/arm_*.c)
 *   pockmcu_nn_forward.h   pockmcu's own int8 forward kernels with TFLite Micro's numerics
 *   pockmcu_nn_ort.h       int8 forward kernels with onnxruntime's numerics (*_ort_*, pockmcu_lut_s8)
 *   pockmcu_nn_data.h      data movement: transpose, uint8 <-> int8, row slices and pastes
 *   pockmcu_nn_train.h     training: the update rule, fused weight / bias gradient + update kernels
 *   pockmcu_nn_backward.h  training: input gradients, activation masks, losses (float32)
 *
 * Each prototype is documented there argument by argument, with the scratch size query it pairs with
 * (CMSIS-NN's *_get_buffer_size convention). The static inline helpers the kernel files share are in
 * pockmcu_nn_support.h, which generated code does not need.
 *
 * If POCKMCU_USE_CMSIS_NN is defined, Arm's "arm_nn_types.h" and "arm_nnfunctions.h" provide the types
 * and the arm_* prototypes, and the build links Arm's CMSIS-NN kernels in place of kernels_c/arm_*.c.
 *
 * Conventions (identical to CMSIS-NN / TFLM):
 *   - activations NHWC, conv filters OHWI, depthwise filters 1HWC (C = C_IN * ch_mult, output
 *     channel = in_channel * ch_mult + m), FC filters [out][accum] row major;
 *   - input_offset = -input_zero_point, output_offset = +output_zero_point,
 *     filter_offset = -filter_zero_point;
 *   - padding = top/left padding; bottom/right padding is implied by the output size and handled by
 *     bounds checks (asymmetric SAME works);
 *   - multiplier/shift: TFLM QuantizeMultiplier, shift > 0 is a left shift, requantization uses TFLM's
 *     (default, double rounding) MultiplyByQuantizedMultiplier (onnxruntime numerics: see pockmcu_nn_ort.h).
 */
#ifndef POCKMCU_NN_H
#define POCKMCU_NN_H

#include "pockmcu_nn_types.h"

#include "pockmcu_nn_arm.h"
#include "pockmcu_nn_backward.h"
#include "pockmcu_nn_data.h"
#include "pockmcu_nn_dsp.h"
#include "pockmcu_nn_dsp_dw.h"
#include "pockmcu_nn_forward.h"
#include "pockmcu_nn_mve.h"
#include "pockmcu_nn_ort.h"
#include "pockmcu_nn_train.h"

#endif /* POCKMCU_NN_H */
