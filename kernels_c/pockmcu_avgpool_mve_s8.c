/*
 * pockmcu_avgpool_mve_s8 - int8 average pooling for Helium (Armv8.1-M MVE, Cortex-M55), the CMSIS-NN API and
 * bytes of arm_avgpool_s8 (TFLM reference_integer_ops::AveragePool).
 *
 * On a core with integer MVE: for each output pixel the window (clipped to the image as the portable kernel
 * clips it) is summed 16 channels at a time, widening byte loads into two int16 vectors when the window holds
 * fewer than 256 values (|sum| <= 255 * 128 fits int16, so the int16 sum is the exact integer) and into four
 * int32 vectors otherwise; tail channels use predicated loads. The rounding division (sum +/- count / 2) / count
 * (C truncation) and the clamp run per channel in scalar code, the portable expression. Windows are visited in
 * the portable order and an empty window returns ARM_CMSIS_NN_ARG_ERROR at the same point, so even a failing
 * call writes the same bytes. No scratch.
 *
 * Elsewhere (cores without MVE, the host simulation) this function is arm_avgpool_s8 itself, so a model's host
 * simulation equals its run on Cortex-M55 (tests/test_mve_kernels.py compares both on random geometries).
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_common.h"
#include "pockmcu_nn_support_mve.h"

#if POCKMCU_HAS_MVE

/* Channels [0, n) (n <= 16) of the window at p: rows rows of kw pixels (ch bytes apart, rows row_bytes apart),
 * divided by count with the portable rounding, clamped, stored at out. */
static void pockmcu_mve_pool_window(const int8_t *p,
                                    int32_t rows,
                                    int32_t kw,
                                    int32_t ch,
                                    int32_t row_bytes,
                                    int32_t n,
                                    int32_t count,
                                    int32_t act_min,
                                    int32_t act_max,
                                    int8_t *out)
{
    int32_t sums[16];
    int32_t r, k, c;
    if (count < 256)
    {
        const mve_pred16_t p0 = vctp16q((uint32_t)n);
        const mve_pred16_t p1 = vctp16q((uint32_t)pockmcu_max_i32(n - 8, 0));
        int16x8_t s0 = vdupq_n_s16(0), s1 = vdupq_n_s16(0);
        for (r = 0; r < rows; r++, p += row_bytes)
        {
            const int8_t *q = p;
            for (k = 0; k < kw; k++, q += ch)
            {
                s0 = vaddq_s16(s0, vldrbq_z_s16(q, p0));
                s1 = vaddq_s16(s1, vldrbq_z_s16(q + 8, p1));
            }
        }
        /* channel order: even lanes of each half, then odd ones */
        vstrwq_scatter_shifted_offset_s32(sums, vidupq_n_u32(0, 2), vmovlbq_s16(s0));
        vstrwq_scatter_shifted_offset_s32(sums, vidupq_n_u32(1, 2), vmovltq_s16(s0));
        vstrwq_scatter_shifted_offset_s32(sums, vidupq_n_u32(8, 2), vmovlbq_s16(s1));
        vstrwq_scatter_shifted_offset_s32(sums, vidupq_n_u32(9, 2), vmovltq_s16(s1));
    }
    else
    {
        const mve_pred16_t p0 = vctp32q((uint32_t)n);
        const mve_pred16_t p1 = vctp32q((uint32_t)pockmcu_max_i32(n - 4, 0));
        const mve_pred16_t p2 = vctp32q((uint32_t)pockmcu_max_i32(n - 8, 0));
        const mve_pred16_t p3 = vctp32q((uint32_t)pockmcu_max_i32(n - 12, 0));
        int32x4_t s0 = vdupq_n_s32(0), s1 = s0, s2 = s0, s3 = s0;
        for (r = 0; r < rows; r++, p += row_bytes)
        {
            const int8_t *q = p;
            for (k = 0; k < kw; k++, q += ch)
            {
                s0 = vaddq_s32(s0, vldrbq_z_s32(q, p0));
                s1 = vaddq_s32(s1, vldrbq_z_s32(q + 4, p1));
                s2 = vaddq_s32(s2, vldrbq_z_s32(q + 8, p2));
                s3 = vaddq_s32(s3, vldrbq_z_s32(q + 12, p3));
            }
        }
        vstrwq_s32(sums, s0);
        vstrwq_s32(sums + 4, s1);
        vstrwq_s32(sums + 8, s2);
        vstrwq_s32(sums + 12, s3);
    }
    for (c = 0; c < n; c++)
    {
        const int32_t sum = sums[c];
        const int32_t avg = sum > 0 ? (sum + count / 2) / count : (sum - count / 2) / count;
        out[c] = (int8_t)pockmcu_clamp_i32(avg, act_min, act_max);
    }
}

#endif /* POCKMCU_HAS_MVE */

arm_cmsis_nn_status pockmcu_avgpool_mve_s8(const cmsis_nn_context *ctx,
                                           const cmsis_nn_pool_params *pool_params,
                                           const cmsis_nn_dims *input_dims,
                                           const int8_t *input_data,
                                           const cmsis_nn_dims *filter_dims,
                                           const cmsis_nn_dims *output_dims,
                                           int8_t *output_data)
{
#if POCKMCU_HAS_MVE
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t ch = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    int32_t b, oy, ox, c0;
    (void)ctx;
    if (pool_params->stride.h < 1 || pool_params->stride.w < 1)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (b = 0; b < input_dims->n; b++)
    {
        const int8_t *in_batch = input_data + b * in_h * in_w * ch;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * pool_params->stride.h - pool_params->padding.h;
            const int32_t ky_start = pockmcu_max_i32(0, -in_y0);
            const int32_t ky_end = pockmcu_min_i32(k_h, in_h - in_y0);
            for (ox = 0; ox < out_w; ox++)
            {
                const int32_t in_x0 = ox * pool_params->stride.w - pool_params->padding.w;
                const int32_t kx_start = pockmcu_max_i32(0, -in_x0);
                const int32_t kx_end = pockmcu_min_i32(k_w, in_w - in_x0);
                int8_t *out = output_data + ((b * out_h + oy) * out_w + ox) * ch;
                const int8_t *p;
                if (ky_end <= ky_start || kx_end <= kx_start)
                {
                    return ARM_CMSIS_NN_ARG_ERROR;
                }
                p = in_batch + ((in_y0 + ky_start) * in_w + in_x0 + kx_start) * ch;
                for (c0 = 0; c0 < ch; c0 += 16)
                {
                    pockmcu_mve_pool_window(p + c0,
                                            ky_end - ky_start,
                                            kx_end - kx_start,
                                            ch,
                                            in_w * ch,
                                            pockmcu_min_i32(16, ch - c0),
                                            (ky_end - ky_start) * (kx_end - kx_start),
                                            pool_params->activation.min,
                                            pool_params->activation.max,
                                            out + c0);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
#else
    return arm_avgpool_s8(ctx, pool_params, input_dims, input_data, filter_dims, output_dims, output_data);
#endif
}
