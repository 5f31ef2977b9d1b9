/*
 * pockmcu_nn_data.h - data movement kernels: no arithmetic on the values, any element type's bytes.
 *
 * Layout changes (transpose), the uint8 <-> int8 sign flip at the edges of ONNX models, and the row
 * slices and pastes that save a layer's trainable input channels and write a finished tile into a
 * whole tensor. (CONCATENATION and PAD keep CMSIS-NN's arm_* names, in pockmcu_nn_arm.h.) None of
 * them needs scratch memory.
 */
#ifndef POCKMCU_NN_DATA_H
#define POCKMCU_NN_DATA_H

#include "pockmcu_nn_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @brief Permutes the axes of a 4-D int8 tensor: output shape[k] = input shape[perm[k]] (numpy transpose).
 *
 * Lower-rank tensors are padded with leading size-1 axes (and perm with the identity on them) by the
 * code generator.
 *
 * @param[in]      input_data     Input, int8, of shape input_dims (n, h, w, c = axes 0..3).
 * @param[in]      input_dims     Input shape.
 * @param[in]      perm           int32 [4], a permutation of 0..3.
 * @param[out]     output_data    Output, int8, of shape [input_dims[perm[0]], .., input_dims[perm[3]]].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR if perm is not a permutation of 0..3.
 */
arm_cmsis_nn_status pockmcu_transpose_s8(const int8_t *input_data,
                                         const cmsis_nn_dims *input_dims,
                                         const int32_t *perm,
                                         int8_t *output_data);

/**
 * @brief uint8 <-> int8 at the same scale: x ^ 0x80 (zero point +-128), in either direction; exact.
 *
 * @param[in]      input_data     Input, uint8 or int8 [size].
 * @param[in]      size           Number of elements.
 * @param[out]     output_data    Output, int8 or uint8 [size].
 *
 * @return ARM_CMSIS_NN_SUCCESS.
 */
arm_cmsis_nn_status pockmcu_flip_sign_8(const void *input_data, int32_t size, void *output_data);

/**
 * @brief Copies a column range out of float32 rows: dst[r][0 .. chunk) = src[r][offset .. offset + chunk).
 *
 * @param[in]      src            Source, float32 [outer][src_row].
 * @param[in]      outer          Number of rows.
 * @param[in]      src_row        Source row length (elements).
 * @param[in]      offset         First column copied, offset + chunk <= src_row.
 * @param[in]      chunk          Columns copied.
 * @param[out]     dst            Destination, float32 [outer][chunk].
 */
void pockmcu_slice_f32(const float *src, int32_t outer, int32_t src_row, int32_t offset, int32_t chunk, float *dst);

/**
 * @brief Copies a column range out of int8 rows: dst[r][0 .. chunk) = src[r][offset .. offset + chunk).
 *
 * Saves the trainable input channels of an activation for a weight gradient.
 *
 * @param[in]      src            Source, int8 [outer][src_row].
 * @param[in]      outer          Number of rows.
 * @param[in]      src_row        Source row length (elements).
 * @param[in]      offset         First column copied, offset + chunk <= src_row.
 * @param[in]      chunk          Columns copied.
 * @param[out]     dst            Destination, int8 [outer][chunk].
 */
void pockmcu_slice_s8(const int8_t *src, int32_t outer, int32_t src_row, int32_t offset, int32_t chunk, int8_t *dst);

/**
 * @brief Copies packed int8 rows into a column range: dst[r][offset .. offset + chunk) = src[r][0 .. chunk).
 *
 * The inverse of pockmcu_slice_s8; writes a finished tile into a whole tensor.
 *
 * @param[in]      src            Source, int8 [outer][chunk].
 * @param[in]      outer          Number of rows.
 * @param[in]      dst_row        Destination row length (elements).
 * @param[in]      offset         First column written, offset + chunk <= dst_row.
 * @param[in]      chunk          Columns written.
 * @param[in,out]  dst            Destination, int8 [outer][dst_row]; the other columns are left unchanged.
 */
void pockmcu_paste_s8(const int8_t *src, int32_t outer, int32_t dst_row, int32_t offset, int32_t chunk, int8_t *dst);

/* ---- shape and data movement operators (TFLite TRANSPOSE, SLICE, STRIDED_SLICE, SPLIT, SPLIT_V, PACK,
 * UNPACK, TILE, GATHER, CONCATENATION, DEPTH_TO_SPACE, SPACE_TO_DEPTH) and their gradients ----------- */

/** The largest index-grid rank of the pockmcu_strided_* kernels (a rank-6 TILE needs 12). */
#define POCKMCU_STRIDED_MAX_RANK 12

/**
 * @brief Copies an int8 index grid: output[sum_k i_k * out_stride[k]] = input[sum_k i_k * in_stride[k]].
 *
 * The grid of shape dims[0 .. rank) is walked in row-major order. Strides are in elements, may be
 * negative (a reversed slice: the input pointer is then at the first element read, inside the tensor)
 * or 0 (an element read again: TILE). Rows with both innermost strides 1 are one memcpy.
 *
 * @param[in]      input          First element read, int8.
 * @param[in]      rank           Grid rank, 1 .. POCKMCU_STRIDED_MAX_RANK.
 * @param[in]      dims           int32 [3 * rank]: the grid shape (dims[0 .. rank)), the input strides
 *                                (dims[rank .. 2 rank)) and the output strides (dims[2 rank .. 3 rank)).
 * @param[out]     output         First element written, int8.
 *
 * @return ARM_CMSIS_NN_SUCCESS (nothing is written for an empty grid), or ARM_CMSIS_NN_ARG_ERROR for a
 *         rank outside 1 .. POCKMCU_STRIDED_MAX_RANK or a negative grid dimension.
 */
arm_cmsis_nn_status pockmcu_strided_copy_s8(const int8_t *input, int32_t rank, const int32_t *dims, int8_t *output);

/**
 * @brief The float32 twin of pockmcu_strided_copy_s8: the input gradient of an injective data-movement
 *        operator is its forward grid with the input and output strides swapped.
 *
 * @param[in]      input          First element read, float32.
 * @param[in]      rank           Grid rank, 1 .. POCKMCU_STRIDED_MAX_RANK.
 * @param[in]      dims           int32 [3 * rank]: grid shape, input strides, output strides.
 * @param[out]     output         First element written, float32.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR as pockmcu_strided_copy_s8.
 */
arm_cmsis_nn_status pockmcu_strided_copy_f32(const float *input, int32_t rank, const int32_t *dims, float *output);

/**
 * @brief Accumulates a float32 index grid: output[sum_k i_k * out_stride[k]] += input[sum_k i_k * in_stride[k]].
 *
 * The input gradient of an operator that reads some input element more than once (TILE), into a
 * gradient the caller zeroed; the additions happen in grid order.
 *
 * @param[in]      input          First element read, float32.
 * @param[in]      rank           Grid rank, 1 .. POCKMCU_STRIDED_MAX_RANK.
 * @param[in]      dims           int32 [3 * rank]: grid shape, input strides, output strides.
 * @param[in,out]  output         First element accumulated into, float32.
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR as pockmcu_strided_copy_s8.
 */
arm_cmsis_nn_status pockmcu_strided_add_f32(const float *input, int32_t rank, const int32_t *dims, float *output);

/**
 * @brief GATHER (batch_dims 0) of int8 rows by constant indices: output[o][p][:] = input[o][indices[p]][:].
 *
 * @param[in]      input          Input, int8 [outer][axis_size][inner] (axis_size: the gathered axis).
 * @param[in]      outer          Product of the input dimensions before the axis.
 * @param[in]      axis_size      Size of the gathered axis.
 * @param[in]      inner          Product of the input dimensions after the axis.
 * @param[in]      indices        int32 [count], each in [0, axis_size).
 * @param[in]      count          Number of indices (the product of the indices' shape).
 * @param[out]     output         Output, int8 [outer][count][inner].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for an index outside [0, axis_size).
 */
arm_cmsis_nn_status pockmcu_gather_s8(const int8_t *input,
                                      int32_t outer,
                                      int32_t axis_size,
                                      int32_t inner,
                                      const int32_t *indices,
                                      int32_t count,
                                      int8_t *output);

/**
 * @brief Input gradient of GATHER (batch_dims 0), a scatter-add: grad_input is zeroed, then
 *        grad_input[o][indices[p]][:] += grad_output[o][p][:] for p in order.
 *
 * @param[in]      grad_output    float32 [outer][count][inner].
 * @param[in]      outer          Product of the input dimensions before the axis.
 * @param[in]      axis_size      Size of the gathered axis.
 * @param[in]      inner          Product of the input dimensions after the axis.
 * @param[in]      indices        int32 [count], each in [0, axis_size).
 * @param[in]      count          Number of indices.
 * @param[out]     grad_input     float32 [outer][axis_size][inner].
 *
 * @return ARM_CMSIS_NN_SUCCESS, or ARM_CMSIS_NN_ARG_ERROR for an index outside [0, axis_size).
 */
arm_cmsis_nn_status pockmcu_gather_grad_f32(const float *grad_output,
                                            int32_t outer,
                                            int32_t axis_size,
                                            int32_t inner,
                                            const int32_t *indices,
                                            int32_t count,
                                            float *grad_input);

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_DATA_H */
