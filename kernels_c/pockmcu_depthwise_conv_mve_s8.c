/*
 * pockmcu_depthwise_conv_mve_s8 - int8 depthwise convolution for Helium (Armv8.1-M MVE, Cortex-M55), the
 * CMSIS-NN API and bytes of arm_depthwise_conv_wrapper_s8 (TFLM DepthwiseConvPerChannel, double
 * rounding requantization).
 *
 * On a core with integer MVE: four output channels in the lanes of an int32 vector (widening byte loads;
 * with ch_mult > 1 a gather of the input channels oc / ch_mult), channel groups outermost so that the
 * sum of each channel's weights and its requantization vectors are formed once per group. Every output
 * pixel starts from bias + input_offset * sum(w) over all taps; an in-image tap adds x * w, a tap outside
 * the image adds zp * w (it reads the input zero point: (zp + input_offset) * w = 0 in total), which is
 * the portable sum in wrapping int32 arithmetic. The 3x3 stride-1 interior is unrolled. Requantization
 * per lane (pockmcu_nn_support_mve.h: the same bits as pockmcu_requantize). No scratch buffer
 * (pockmcu_depthwise_conv_mve_s8_get_buffer_size returns 0).
 *
 * Elsewhere (cores without MVE, the host simulation) this function is the portable kernel: it runs
 * pockmcu_depthwise_conv_s8_loops exactly as arm_depthwise_conv_wrapper_s8 does. The MVE path produces the
 * same bytes as those loops for every argument (tests/test_mve_kernels.py compares both in one QEMU M55
 * program on hundreds of random geometries), so a model's host simulation equals its run on Cortex-M55.
 */
#include "pockmcu_layer_loops.h"
#include "pockmcu_nn_support_mve.h"

#if POCKMCU_HAS_MVE

/* Four input channels for the output channels of the group: contiguous (ch_mult 1) or gathered. */
POCKMCU_MVE_INLINE int32x4_t
pockmcu_mve_dw_load_x(const int8_t *px, int32_t oc0, uint32x4_t in_ch, int32_t mult1, int32_t tail, mve_pred16_t p)
{
    if (mult1)
    {
        return tail ? vldrbq_z_s32(px + oc0, p) : vldrbq_s32(px + oc0);
    }
    return tail ? vldrbq_gather_offset_z_s32(px, in_ch, p) : vldrbq_gather_offset_s32(px, in_ch);
}

POCKMCU_MVE_INLINE int32x4_t pockmcu_mve_dw_load_w(const int8_t *w, int32_t tail, mve_pred16_t p)
{
    return tail ? vldrbq_z_s32(w, p) : vldrbq_s32(w);
}

/* One group of four output channels [oc0, oc0 + 4) over every output pixel. */
POCKMCU_MVE_INLINE void pockmcu_mve_dw_group(const cmsis_nn_dw_conv_params *prm,
                                             const cmsis_nn_per_channel_quant_params *quant_params,
                                             const cmsis_nn_dims *input_dims,
                                             const int8_t *input_data,
                                             const cmsis_nn_dims *filter_dims,
                                             const int8_t *filter_data,
                                             const int32_t *bias_data,
                                             const cmsis_nn_dims *output_dims,
                                             int8_t *output_data,
                                             const int32_t oc0,
                                             const int32_t mult1,
                                             const int32_t tail)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t stride_h = prm->stride.h;
    const int32_t stride_w = prm->stride.w;
    const int32_t dil_h = prm->dilation.h;
    const int32_t dil_w = prm->dilation.w;
    const int32_t zp = -prm->input_offset;
    const mve_pred16_t p = vctp32q((uint32_t)(out_c - oc0));
    /* input channel of each lane: oc / ch_mult (only read with ch_mult > 1) */
    const uint32_t lane_ch[4] = {(uint32_t)(oc0 / prm->ch_mult),
                                 (uint32_t)((oc0 + 1) / prm->ch_mult),
                                 (uint32_t)((oc0 + 2) / prm->ch_mult),
                                 (uint32_t)((oc0 + 3) / prm->ch_mult)};
    const uint32x4_t in_ch = vldrwq_u32(lane_ch);
    const int32x4_t mult =
        tail ? vldrwq_z_s32(quant_params->multiplier + oc0, p) : vldrwq_s32(quant_params->multiplier + oc0);
    const int32x4_t shift = tail ? vldrwq_z_s32(quant_params->shift + oc0, p) : vldrwq_s32(quant_params->shift + oc0);
    int32x4_t init =
        bias_data == NULL ? vdupq_n_s32(0) : (tail ? vldrwq_z_s32(bias_data + oc0, p) : vldrwq_s32(bias_data + oc0));
    int32_t t, b, oy, ox;

    /* bias + input_offset * (sum of the channel's weights over all taps) */
    {
        int32x4_t sw = vdupq_n_s32(0);
        for (t = 0; t < k_h * k_w; t++)
        {
            sw = vaddq_s32(sw, pockmcu_mve_dw_load_w(filter_data + t * out_c + oc0, tail, p));
        }
        init = vmlaq_n_s32(init, sw, prm->input_offset);
    }

    for (b = 0; b < input_dims->n; b++)
    {
        const int8_t *in_batch = input_data + b * in_h * in_w * in_c;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * stride_h - prm->padding.h;
            const int32_t ky_start = pockmcu_window_start(in_y0, dil_h);
            const int32_t ky_end = pockmcu_window_end(in_y0, dil_h, in_h, k_h);
            int8_t *out_row = output_data + ((b * out_h + oy) * out_w) * out_c + oc0;
            for (ox = 0; ox < out_w; ox++)
            {
                const int32_t in_x0 = ox * stride_w - prm->padding.w;
                const int32_t kx_start = pockmcu_window_start(in_x0, dil_w);
                const int32_t kx_end = pockmcu_window_end(in_x0, dil_w, in_w, k_w);
                int32x4_t acc = init;
                int32_t ky, kx;
                if (k_h == 3 && k_w == 3 && dil_h == 1 && dil_w == 1 && ky_start == 0 && ky_end == 3 && kx_start == 0 &&
                    kx_end == 3)
                {
                    /* all nine taps inside: unrolled */
                    const int8_t *px = in_batch + (in_y0 * in_w + in_x0) * in_c;
                    const int8_t *w = filter_data + oc0;
                    for (ky = 0; ky < 3; ky++)
                    {
                        acc = vaddq_s32(acc,
                                        vmulq_s32(pockmcu_mve_dw_load_x(px, oc0, in_ch, mult1, tail, p),
                                                  pockmcu_mve_dw_load_w(w, tail, p)));
                        acc = vaddq_s32(acc,
                                        vmulq_s32(pockmcu_mve_dw_load_x(px + in_c, oc0, in_ch, mult1, tail, p),
                                                  pockmcu_mve_dw_load_w(w + out_c, tail, p)));
                        acc = vaddq_s32(acc,
                                        vmulq_s32(pockmcu_mve_dw_load_x(px + 2 * in_c, oc0, in_ch, mult1, tail, p),
                                                  pockmcu_mve_dw_load_w(w + 2 * out_c, tail, p)));
                        px += in_w * in_c;
                        w += 3 * out_c;
                    }
                }
                else
                {
                    for (ky = 0; ky < k_h; ky++)
                    {
                        const int32_t in_y = in_y0 + ky * dil_h;
                        const int32_t row_in = ky >= ky_start && ky < ky_end;
                        const int8_t *w = filter_data + ky * k_w * out_c + oc0;
                        for (kx = 0; kx < k_w; kx++)
                        {
                            const int32x4_t wv = pockmcu_mve_dw_load_w(w + kx * out_c, tail, p);
                            if (row_in && kx >= kx_start && kx < kx_end)
                            {
                                const int8_t *px = in_batch + (in_y * in_w + in_x0 + kx * dil_w) * in_c;
                                acc = vaddq_s32(acc,
                                                vmulq_s32(pockmcu_mve_dw_load_x(px, oc0, in_ch, mult1, tail, p), wv));
                            }
                            else
                            {
                                acc = vmlaq_n_s32(acc, wv, zp); /* outside: the input zero point */
                            }
                        }
                    }
                }
                acc = pockmcu_mve_requantize(acc, mult, shift);
                acc = pockmcu_mve_finish(acc, prm->output_offset, prm->activation.min, prm->activation.max);
                if (tail)
                {
                    vstrbq_p_s32(out_row + ox * out_c, acc, p);
                }
                else
                {
                    vstrbq_s32(out_row + ox * out_c, acc);
                }
            }
        }
    }
}

#endif /* POCKMCU_HAS_MVE */

arm_cmsis_nn_status pockmcu_depthwise_conv_mve_s8(const cmsis_nn_context *ctx,
                                                  const cmsis_nn_dw_conv_params *dw_conv_params,
                                                  const cmsis_nn_per_channel_quant_params *quant_params,
                                                  const cmsis_nn_dims *input_dims,
                                                  const int8_t *input_data,
                                                  const cmsis_nn_dims *filter_dims,
                                                  const int8_t *filter_data,
                                                  const cmsis_nn_dims *bias_dims,
                                                  const int32_t *bias_data,
                                                  const cmsis_nn_dims *output_dims,
                                                  int8_t *output_data)
{
#if POCKMCU_HAS_MVE
    const int32_t out_c = output_dims->c;
    const int32_t ch_mult = dw_conv_params->ch_mult;
    /* the checks of the portable loops (which return the error) */
    if (ch_mult >= 1 && out_c == input_dims->c * ch_mult && dw_conv_params->stride.h >= 1 &&
        dw_conv_params->stride.w >= 1 && dw_conv_params->dilation.h >= 1 && dw_conv_params->dilation.w >= 1)
    {
        int32_t oc0;
        (void)ctx;
        (void)bias_dims;
        for (oc0 = 0; oc0 + 4 <= out_c; oc0 += 4)
        {
            if (ch_mult == 1)
            {
                pockmcu_mve_dw_group(dw_conv_params,
                                     quant_params,
                                     input_dims,
                                     input_data,
                                     filter_dims,
                                     filter_data,
                                     bias_data,
                                     output_dims,
                                     output_data,
                                     oc0,
                                     1,
                                     0);
            }
            else
            {
                pockmcu_mve_dw_group(dw_conv_params,
                                     quant_params,
                                     input_dims,
                                     input_data,
                                     filter_dims,
                                     filter_data,
                                     bias_data,
                                     output_dims,
                                     output_data,
                                     oc0,
                                     0,
                                     0);
            }
        }
        if (oc0 < out_c)
        {
            pockmcu_mve_dw_group(dw_conv_params,
                                 quant_params,
                                 input_dims,
                                 input_data,
                                 filter_dims,
                                 filter_data,
                                 bias_data,
                                 output_dims,
                                 output_data,
                                 oc0,
                                 ch_mult == 1,
                                 1);
        }
        return ARM_CMSIS_NN_SUCCESS;
    }
#endif
    return pockmcu_depthwise_conv_s8_loops(ctx,
                                           dw_conv_params,
                                           quant_params,
                                           input_dims,
                                           input_data,
                                           filter_dims,
                                           filter_data,
                                           bias_dims,
                                           bias_data,
                                           output_dims,
                                           output_data,
                                           0);
}
