/*
 * arm_avgpool_s8 - portable int8 average pooling (CMSIS-NN API).
 *
 * Computes TFLM's reference_integer_ops::AveragePool: the window is clipped to
 * the image (top/left padding given, bottom/right implied), only valid
 * positions are summed and counted, the mean is rounded half away from zero
 * with C integer division ((sum +/- count/2) / count), then clamped to the
 * activation range. Batches = input_dims->n; filter size from filter_dims->h/w.
 * Returns ARM_CMSIS_NN_ARG_ERROR if a window holds no valid input (TFLM fails
 * the op in that case). Needs no scratch buffer.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_common.h"

arm_cmsis_nn_status arm_avgpool_s8(const cmsis_nn_context *ctx,
                                   const cmsis_nn_pool_params *pool_params,
                                   const cmsis_nn_dims *input_dims,
                                   const int8_t *input_data,
                                   const cmsis_nn_dims *filter_dims,
                                   const cmsis_nn_dims *output_dims,
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
    const int32_t act_min = pool_params->activation.min;
    const int32_t act_max = pool_params->activation.max;
    int32_t b, oy, ox, c;

    (void)ctx;

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
                int32_t count;

                if (ky_end <= ky_start || kx_end <= kx_start)
                {
                    return ARM_CMSIS_NN_ARG_ERROR;
                }
                count = (ky_end - ky_start) * (kx_end - kx_start);

                for (c = 0; c < ch; c++)
                {
                    int32_t sum = 0;
                    int32_t ky, kx;
                    for (ky = ky_start; ky < ky_end; ky++)
                    {
                        const int8_t *in_row = in_batch + ((in_y0 + ky) * in_w + in_x0 + kx_start) * ch + c;
                        for (kx = 0; kx < kx_end - kx_start; kx++)
                        {
                            sum += in_row[kx * ch];
                        }
                    }
                    sum = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
                    out[c] = (int8_t)pockmcu_clamp_i32(sum, act_min, act_max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
