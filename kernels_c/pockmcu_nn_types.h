/*
 * pockmcu_nn_types.h - the CMSIS-NN compatible types every pockmcu kernel takes.
 *
 * Same type names, field names and status codes as CMSIS-NN's arm_nn_types.h, so the arm_* kernels
 * keep CMSIS-NN's API and generated code builds against either implementation. With
 * POCKMCU_USE_CMSIS_NN defined, Arm's own "arm_nn_types.h" is included instead.
 *
 * Dimension conventions (as CMSIS-NN / TFLM): activations NHWC; conv filters OHWI; depthwise
 * filters 1HWC; fully connected filters [out][accum] row major; see pockmcu_nn.h.
 */
#ifndef POCKMCU_NN_TYPES_H
#define POCKMCU_NN_TYPES_H

#include <stddef.h>
#include <stdint.h>

#ifdef POCKMCU_USE_CMSIS_NN

    #include "arm_nn_types.h"

#else /* !POCKMCU_USE_CMSIS_NN */

    #ifdef __cplusplus
extern "C" {
    #endif

/** Status returned by the kernels. */
typedef enum
{
    ARM_CMSIS_NN_SUCCESS = 0,        /**< No error */
    ARM_CMSIS_NN_ARG_ERROR = -1,     /**< An argument is out of range or inconsistent */
    ARM_CMSIS_NN_NO_IMPL_ERROR = -2, /**< No implementation for these arguments */
    ARM_CMSIS_NN_FAILURE = -3        /**< Any other failure */
} arm_cmsis_nn_status;

/** A 2D extent or offset: width and height. */
typedef struct
{
    int32_t w; /**< Width */
    int32_t h; /**< Height */
} cmsis_nn_tile;

/** Scratch memory handed to a kernel: size bytes at buf (see each kernel's *_get_buffer_size). */
typedef struct
{
    void *buf;    /**< Scratch buffer, or NULL when the kernel needs none */
    int32_t size; /**< Size of buf in bytes */
} cmsis_nn_context;

/** A 4-D shape, NHWC; the meaning of each field for filters is given per kernel. */
typedef struct
{
    int32_t n; /**< Batch, or output channels for conv filters */
    int32_t h; /**< Height */
    int32_t w; /**< Width */
    int32_t c; /**< Channels */
} cmsis_nn_dims;

/** Per output channel requantization: multiplier[C_OUT] and shift[C_OUT]. */
typedef struct
{
    int32_t *multiplier; /**< Q31 multipliers, one per output channel */
    int32_t *shift;      /**< Shifts, one per output channel; > 0 is a left shift */
} cmsis_nn_per_channel_quant_params;

/** Per tensor requantization: one multiplier and shift. */
typedef struct
{
    int32_t multiplier; /**< Q31 multiplier */
    int32_t shift;      /**< Shift; > 0 is a left shift */
} cmsis_nn_per_tensor_quant_params;

/** Activation clamp, in the output's quantized domain. */
typedef struct
{
    int32_t min; /**< Smallest output value */
    int32_t max; /**< Largest output value */
} cmsis_nn_activation;

/** Parameters of a convolution. */
typedef struct
{
    int32_t input_offset;           /**< -input zero point, added to every input value */
    int32_t output_offset;          /**< Output zero point, added after requantization */
    cmsis_nn_tile stride;           /**< Stride, >= 1 */
    cmsis_nn_tile padding;          /**< Top / left padding; bottom / right follow from the output size */
    cmsis_nn_tile dilation;         /**< Dilation, >= 1 */
    cmsis_nn_activation activation; /**< Output clamp */
} cmsis_nn_conv_params;

/** Parameters of a depthwise convolution. */
typedef struct
{
    int32_t input_offset;           /**< -input zero point, added to every input value */
    int32_t output_offset;          /**< Output zero point, added after requantization */
    int32_t ch_mult;                /**< Channel multiplier: output channels = input channels * ch_mult */
    cmsis_nn_tile stride;           /**< Stride, >= 1 */
    cmsis_nn_tile padding;          /**< Top / left padding; bottom / right follow from the output size */
    cmsis_nn_tile dilation;         /**< Dilation, >= 1 */
    cmsis_nn_activation activation; /**< Output clamp */
} cmsis_nn_dw_conv_params;

/** Parameters of a pooling layer. */
typedef struct
{
    cmsis_nn_tile stride;           /**< Stride, >= 1 */
    cmsis_nn_tile padding;          /**< Top / left padding; bottom / right follow from the output size */
    cmsis_nn_activation activation; /**< Output clamp */
} cmsis_nn_pool_params;

/** Parameters of a fully connected layer. */
typedef struct
{
    int32_t input_offset;           /**< -input zero point, added to every input value */
    int32_t filter_offset;          /**< -filter zero point, added to every weight */
    int32_t output_offset;          /**< Output zero point, added after requantization */
    cmsis_nn_activation activation; /**< Output clamp */
} cmsis_nn_fc_params;

    #ifdef __cplusplus
}
    #endif

#endif /* POCKMCU_USE_CMSIS_NN */

#endif /* POCKMCU_NN_TYPES_H */
