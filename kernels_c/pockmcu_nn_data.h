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

#ifdef __cplusplus
}
#endif

#endif /* POCKMCU_NN_DATA_H */
