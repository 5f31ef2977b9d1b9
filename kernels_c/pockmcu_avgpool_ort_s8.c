/*
 * pockmcu_avgpool_ort_s8 - int8 average pooling with onnxruntime's arithmetic
 * (QLinearAveragePool, contrib_ops/cpu/quantization/qlinear_pool.cc), which
 * works in float32:
 *   d = float32(s_in * (x - zp_in))                  (dq_table[x + 128])
 *   y = d_0 + d_1 + ...  over the in-bounds taps, row by row, left to right
 *   y = y / count
 *   q = nearbyint(float32(y / s_out) + zp_out)       (zp_out in the model's own
 *       domain, e.g. 128 for uint8; zp_offset maps it back to int8: q - zp_offset)
 * clamped to pool_params->activation. Every float32 operation is done on bit
 * patterns with integer arithmetic (pockmcu_f32_* in pockmcu_nn_support_ort.h),
 * rounded as IEEE float32 rounds. dq_table, out_scale_bits and zp_bits are
 * float32 bit patterns made at compile time. Needs no scratch buffer.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_ort.h"

arm_cmsis_nn_status pockmcu_avgpool_ort_s8(const cmsis_nn_pool_params *pool_params,
                                           const cmsis_nn_dims *input_dims,
                                           const int8_t *input_data,
                                           const cmsis_nn_dims *filter_dims,
                                           const cmsis_nn_dims *output_dims,
                                           const uint32_t *dq_table,
                                           uint32_t out_scale_bits,
                                           uint32_t zp_bits,
                                           int32_t zp_offset,
                                           int8_t *output_data)
{
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t ch = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t stride_h = pool_params->stride.h;
    const int32_t stride_w = pool_params->stride.w;
    const int32_t pad_h = pool_params->padding.h;
    const int32_t pad_w = pool_params->padding.w;
    int32_t b, oy, ox, c;

    if (stride_h < 1 || stride_w < 1)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (b = 0; b < batches; b++)
    {
        const int8_t *in_batch = input_data + b * in_h * in_w * ch;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * stride_h - pad_h;
            const int32_t ky_start = pockmcu_max_i32(0, -in_y0);
            const int32_t ky_end = pockmcu_min_i32(k_h, in_h - in_y0);
            for (ox = 0; ox < out_w; ox++)
            {
                const int32_t in_x0 = ox * stride_w - pad_w;
                const int32_t kx_start = pockmcu_max_i32(0, -in_x0);
                const int32_t kx_end = pockmcu_min_i32(k_w, in_w - in_x0);
                int8_t *out = output_data + ((b * out_h + oy) * out_w + ox) * ch;
                uint32_t count_bits;

                if (ky_end <= ky_start || kx_end <= kx_start)
                {
                    return ARM_CMSIS_NN_ARG_ERROR;
                }
                count_bits = pockmcu_f32_from_int((ky_end - ky_start) * (kx_end - kx_start));
                for (c = 0; c < ch; c++)
                {
                    uint32_t sum = 0u; /* +0.0f */
                    int32_t ky, kx, q;
                    for (ky = ky_start; ky < ky_end; ky++)
                    {
                        const int8_t *in_row = in_batch + ((in_y0 + ky) * in_w + in_x0 + kx_start) * ch + c;
                        for (kx = 0; kx < kx_end - kx_start; kx++)
                        {
                            sum = pockmcu_f32_add(sum, dq_table[(int32_t)in_row[kx * ch] + 128]);
                        }
                    }
                    sum = pockmcu_f32_div(sum, count_bits);
                    sum = pockmcu_f32_add(pockmcu_f32_div(sum, out_scale_bits), zp_bits);
                    q = pockmcu_f32_rint(sum) - zp_offset;
                    out[c] = (int8_t)pockmcu_clamp_i32(q, pool_params->activation.min, pool_params->activation.max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
