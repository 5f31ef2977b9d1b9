/*
 * pockmcu_nn_support.h - all static inline helpers of the kernel files, by family:
 *
 *   pockmcu_nn_support_common.h  min / max / clamp, wrapping int32 arithmetic, clz, window bounds
 *   pockmcu_nn_support_tflm.h    TFLite Micro's (gemmlowp) fixed-point primitives, bit-exact
 *   pockmcu_nn_support_ort.h     onnxruntime's float32 roundings and arithmetic, emulated in integers
 *
 * Kernel files include the family they use; this header is for code that wants them all (tests).
 * Not needed by generated code, which includes only pockmcu_nn.h.
 */
#ifndef POCKMCU_NN_SUPPORT_H
#define POCKMCU_NN_SUPPORT_H

#include "pockmcu_nn_support_common.h"
#include "pockmcu_nn_support_ort.h"
#include "pockmcu_nn_support_tflm.h"

#endif /* POCKMCU_NN_SUPPORT_H */
