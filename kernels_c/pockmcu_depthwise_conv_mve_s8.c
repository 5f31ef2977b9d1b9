/*
 * pockmcu_depthwise_conv_mve_s8 - int8 depthwise convolution for Helium (Armv8.1-M MVE, Cortex-M55), the
 * CMSIS-NN API and bytes of arm_depthwise_conv_wrapper_s8 (TFLM DepthwiseConvPerChannel, double
 * rounding requantization).
 *
 * On a core with integer MVE: eight output channels in int16 lanes (widening byte loads; with ch_mult > 1
 * a gather of the input channels oc / ch_mult), products widened by VMULLB / VMULLT into even / odd int32
 * accumulators, channel groups outermost so that the
 * sum of each channel's weights and its requantization vectors are formed once per group. Every output
 * pixel starts from bias + input_offset * sum(w) over all taps; an in-image tap adds x * w, a tap outside
 * the image adds zp * w (it reads the input zero point: (zp + input_offset) * w = 0 in total), which is
 * the portable sum in wrapping int32 arithmetic. The 3x3 interior is unrolled (inline assembly for ch_mult 1); the last
 * out_c % 8 channels run scalar code with the portable loops' arithmetic. Requantization
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

/* Eight input channels (int16 lanes) for the output channels [oc0, oc0 + 8) at input pixel px: contiguous
 * (ch_mult 1, px already offset by oc0) or gathered at lane offsets in_ch = oc / ch_mult. */
POCKMCU_MVE_INLINE int16x8_t pockmcu_mve_dw_x(const int8_t *px, uint16x8_t in_ch, int32_t mult1)
{
    return mult1 ? vldrbq_s16(px) : vldrbq_gather_offset_s16(px, in_ch);
}

/* The per-group constants, read through one pointer. Lanes: even = channels oc0 + 0, 2, 4, 6; odd = 1, 3, 5, 7. */
typedef struct
{
    int32x4_t init_e, init_o, mult_e, mult_o, left_e, left_o, right_e, right_o, act_min, act_max;
} pockmcu_mve_dw_consts;

/* acc += x * w over eight channels: the products of the even lanes into acc_e, of the odd lanes into acc_o. */
    #define POCKMCU_MVE_DW_MAC(x, w)                                                                                   \
        do                                                                                                             \
        {                                                                                                              \
            const int16x8_t x_ = (x);                                                                                  \
            const int16x8_t w_ = (w);                                                                                  \
            acc_e = vaddq_s32(acc_e, vmullbq_int_s16(x_, w_));                                                         \
            acc_o = vaddq_s32(acc_o, vmulltq_int_s16(x_, w_));                                                         \
        } while (0)

/* Output channels [oc0, oc0 + 8) over every output pixel (mult1: ch_mult == 1, a constant). */
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
                                             const int32_t mult1)
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
    const int32_t fast3 = k_h == 3 && k_w == 3 && dil_h == 1 && dil_w == 1;
    const int16x8_t zp = vdupq_n_s16((int16_t)-prm->input_offset);
    const uint32x4_t even = vidupq_n_u32(0, 2);
    const uint32x4_t odd = vidupq_n_u32(1, 2);
    uint16_t lane_ch[8];
    uint16x8_t in_ch = vdupq_n_u16(0);
    const int32_t x_off = mult1 ? oc0 : 0;
    const int8_t *w_grp = filter_data + oc0;
    const int32_t row_bytes = in_w * in_c;
    pockmcu_mve_dw_consts k;
    const pockmcu_mve_dw_consts *kp = &k;
    int32_t t, b, oy, ox;

    if (!mult1)
    {
        for (t = 0; t < 8; t++)
        {
            lane_ch[t] = (uint16_t)((oc0 + t) / prm->ch_mult);
        }
        in_ch = vldrhq_u16(lane_ch);
    }
    {
        const int32x4_t zero = vdupq_n_s32(0);
        const int32x4_t shift_e = vldrwq_gather_shifted_offset_s32(quant_params->shift + oc0, even);
        const int32x4_t shift_o = vldrwq_gather_shifted_offset_s32(quant_params->shift + oc0, odd);
        int16x8_t sw;
        int32x4_t sw_e = zero, sw_o = zero;
        k.mult_e = vldrwq_gather_shifted_offset_s32(quant_params->multiplier + oc0, even);
        k.mult_o = vldrwq_gather_shifted_offset_s32(quant_params->multiplier + oc0, odd);
        k.left_e = vmaxq_s32(shift_e, zero);
        k.left_o = vmaxq_s32(shift_o, zero);
        k.right_e = vminq_s32(shift_e, zero);
        k.right_o = vminq_s32(shift_o, zero);
        k.act_min = vdupq_n_s32(prm->activation.min);
        k.act_max = vdupq_n_s32(prm->activation.max);
        k.init_e = bias_data == NULL ? zero : vldrwq_gather_shifted_offset_s32(bias_data + oc0, even);
        k.init_o = bias_data == NULL ? zero : vldrwq_gather_shifted_offset_s32(bias_data + oc0, odd);
        /* bias + input_offset * (sum of the channel's weights over all taps), in int32 */
        for (t = 0; t < k_h * k_w; t++)
        {
            sw = vldrbq_s16(w_grp + t * out_c);
            sw_e = vaddq_s32(sw_e, vmovlbq_s16(sw));
            sw_o = vaddq_s32(sw_o, vmovltq_s16(sw));
        }
        k.init_e = vmlaq_n_s32(k.init_e, sw_e, prm->input_offset);
        k.init_o = vmlaq_n_s32(k.init_o, sw_o, prm->input_offset);
    }

    for (b = 0; b < input_dims->n; b++)
    {
        const int8_t *in_batch = input_data + b * in_h * in_w * in_c + x_off;
        int8_t *out = output_data + b * out_h * out_w * out_c + oc0;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * stride_h - prm->padding.h;
            const int32_t ky_start = pockmcu_window_start(in_y0, dil_h);
            const int32_t ky_end = pockmcu_window_end(in_y0, dil_h, in_h, k_h);
            for (ox = 0; ox < out_w; ox++, out += out_c)
            {
                const int32_t in_x0 = ox * stride_w - prm->padding.w;
                int32x4_t acc_e = kp->init_e;
                int32x4_t acc_o = kp->init_o;
                int16x8_t r16;
                if (fast3 && ky_end - ky_start == 3 && in_x0 >= 0 && in_x0 + 3 <= in_w)
                {
                    /* all nine taps inside */
                    const int8_t *px = in_batch + (in_y0 * in_w + in_x0) * in_c;
                    const int8_t *w = w_grp;
                    for (t = 0; t < 3; t++)
                    {
                        if (mult1)
                        {
                            /* one kernel row: GCC 12 spills this sequence's vectors, hand-scheduled it is six
                             * instructions and two pointer steps per tap */
                            const int8_t *p = px;
                            const int8_t *q = w;
                            int16x8_t xv, wv;
                            int32x4_t tv;
                            __asm__("vldrb.s16 %q[x], [%[p]]\n\t"
                                    "vldrb.s16 %q[w], [%[q]]\n\t"
                                    "add %[p], %[p], %[ic]\n\t"
                                    "add %[q], %[q], %[oc]\n\t"
                                    "vmullb.s16 %q[t], %q[x], %q[w]\n\t"
                                    "vadd.i32 %q[e], %q[e], %q[t]\n\t"
                                    "vmullt.s16 %q[t], %q[x], %q[w]\n\t"
                                    "vadd.i32 %q[o], %q[o], %q[t]\n\t"
                                    "vldrb.s16 %q[x], [%[p]]\n\t"
                                    "vldrb.s16 %q[w], [%[q]]\n\t"
                                    "add %[p], %[p], %[ic]\n\t"
                                    "add %[q], %[q], %[oc]\n\t"
                                    "vmullb.s16 %q[t], %q[x], %q[w]\n\t"
                                    "vadd.i32 %q[e], %q[e], %q[t]\n\t"
                                    "vmullt.s16 %q[t], %q[x], %q[w]\n\t"
                                    "vadd.i32 %q[o], %q[o], %q[t]\n\t"
                                    "vldrb.s16 %q[x], [%[p]]\n\t"
                                    "vldrb.s16 %q[w], [%[q]]\n\t"
                                    "vmullb.s16 %q[t], %q[x], %q[w]\n\t"
                                    "vadd.i32 %q[e], %q[e], %q[t]\n\t"
                                    "vmullt.s16 %q[t], %q[x], %q[w]\n\t"
                                    "vadd.i32 %q[o], %q[o], %q[t]"
                                    : [e] "+w"(acc_e),
                                      [o] "+w"(acc_o),
                                      [x] "=&w"(xv),
                                      [w] "=&w"(wv),
                                      [t] "=&w"(tv),
                                      [p] "+r"(p),
                                      [q] "+r"(q)
                                    : [ic] "r"(in_c), [oc] "r"(out_c)
                                    : "memory");
                        }
                        else
                        {
                            POCKMCU_MVE_DW_MAC(pockmcu_mve_dw_x(px, in_ch, mult1), vldrbq_s16(w));
                            POCKMCU_MVE_DW_MAC(pockmcu_mve_dw_x(px + in_c, in_ch, mult1), vldrbq_s16(w + out_c));
                            POCKMCU_MVE_DW_MAC(pockmcu_mve_dw_x(px + 2 * in_c, in_ch, mult1),
                                               vldrbq_s16(w + 2 * out_c));
                        }
                        px += row_bytes;
                        w += 3 * out_c;
                    }
                }
                else
                {
                    const int32_t kx_start = pockmcu_window_start(in_x0, dil_w);
                    const int32_t kx_end = pockmcu_window_end(in_x0, dil_w, in_w, k_w);
                    const int8_t *w = w_grp;
                    int32_t ky, kx;
                    for (ky = 0; ky < k_h; ky++)
                    {
                        const int32_t row_in = ky >= ky_start && ky < ky_end;
                        const int8_t *row = in_batch + ((in_y0 + ky * dil_h) * in_w + in_x0) * in_c;
                        for (kx = 0; kx < k_w; kx++, w += out_c)
                        {
                            /* a tap outside the image reads the input zero point */
                            POCKMCU_MVE_DW_MAC(row_in && kx >= kx_start && kx < kx_end
                                                   ? pockmcu_mve_dw_x(row + kx * dil_w * in_c, in_ch, mult1)
                                                   : zp,
                                               vldrbq_s16(w));
                        }
                    }
                }
                acc_e = pockmcu_mve_requantize_lr(acc_e, kp->mult_e, kp->left_e, kp->right_e);
                acc_o = pockmcu_mve_requantize_lr(acc_o, kp->mult_o, kp->left_o, kp->right_o);
                acc_e = vminq_s32(vmaxq_s32(vaddq_n_s32(acc_e, prm->output_offset), kp->act_min), kp->act_max);
                acc_o = vminq_s32(vmaxq_s32(vaddq_n_s32(acc_o, prm->output_offset), kp->act_min), kp->act_max);
                r16 = vmovnbq_s32(vdupq_n_s16(0), acc_e);
                r16 = vmovntq_s32(r16, acc_o);
                vstrbq_s16(out, r16);
            }
        }
    }
}

static void pockmcu_mve_dw_mult1(const cmsis_nn_dw_conv_params *prm,
                                 const cmsis_nn_per_channel_quant_params *quant_params,
                                 const cmsis_nn_dims *input_dims,
                                 const int8_t *input_data,
                                 const cmsis_nn_dims *filter_dims,
                                 const int8_t *filter_data,
                                 const int32_t *bias_data,
                                 const cmsis_nn_dims *output_dims,
                                 int8_t *output_data,
                                 const int32_t oc0)
{
    pockmcu_mve_dw_group(prm,
                         quant_params,
                         input_dims,
                         input_data,
                         filter_dims,
                         filter_data,
                         bias_data,
                         output_dims,
                         output_data,
                         oc0,
                         1);
}

static void pockmcu_mve_dw_gather(const cmsis_nn_dw_conv_params *prm,
                                  const cmsis_nn_per_channel_quant_params *quant_params,
                                  const cmsis_nn_dims *input_dims,
                                  const int8_t *input_data,
                                  const cmsis_nn_dims *filter_dims,
                                  const int8_t *filter_data,
                                  const int32_t *bias_data,
                                  const cmsis_nn_dims *output_dims,
                                  int8_t *output_data,
                                  const int32_t oc0)
{
    pockmcu_mve_dw_group(prm,
                         quant_params,
                         input_dims,
                         input_data,
                         filter_dims,
                         filter_data,
                         bias_data,
                         output_dims,
                         output_data,
                         oc0,
                         0);
}

/* The last out_c % 8 channels from oc0 on: the portable loops' arithmetic, one channel at a time. */
static void pockmcu_mve_dw_scalar(const cmsis_nn_dw_conv_params *prm,
                                  const cmsis_nn_per_channel_quant_params *quant_params,
                                  const cmsis_nn_dims *input_dims,
                                  const int8_t *input_data,
                                  const cmsis_nn_dims *filter_dims,
                                  const int8_t *filter_data,
                                  const int32_t *bias_data,
                                  const cmsis_nn_dims *output_dims,
                                  int8_t *output_data,
                                  const int32_t oc0)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    int32_t b, oy, ox, oc, ky, kx;
    for (b = 0; b < input_dims->n; b++)
    {
        const int8_t *in_batch = input_data + b * in_h * in_w * in_c;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * prm->stride.h - prm->padding.h;
            const int32_t ky_start = pockmcu_window_start(in_y0, prm->dilation.h);
            const int32_t ky_end = pockmcu_window_end(in_y0, prm->dilation.h, in_h, k_h);
            for (ox = 0; ox < out_w; ox++)
            {
                const int32_t in_x0 = ox * prm->stride.w - prm->padding.w;
                const int32_t kx_start = pockmcu_window_start(in_x0, prm->dilation.w);
                const int32_t kx_end = pockmcu_window_end(in_x0, prm->dilation.w, in_w, k_w);
                int8_t *out = output_data + ((b * out_h + oy) * out_w + ox) * out_c;
                for (oc = oc0; oc < out_c; oc++)
                {
                    int32_t acc = 0;
                    for (ky = ky_start; ky < ky_end; ky++)
                    {
                        const int8_t *in_row =
                            in_batch + (in_y0 + ky * prm->dilation.h) * in_w * in_c + oc / prm->ch_mult;
                        for (kx = kx_start; kx < kx_end; kx++)
                        {
                            acc += (int32_t)filter_data[(ky * k_w + kx) * out_c + oc] *
                                ((int32_t)in_row[(in_x0 + kx * prm->dilation.w) * in_c] + prm->input_offset);
                        }
                    }
                    if (bias_data != NULL)
                    {
                        acc += bias_data[oc];
                    }
                    acc = pockmcu_requantize(acc, quant_params->multiplier[oc], quant_params->shift[oc]) +
                        prm->output_offset;
                    out[oc] = (int8_t)pockmcu_clamp_i32(acc, prm->activation.min, prm->activation.max);
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
        for (oc0 = 0; oc0 + 8 <= out_c; oc0 += 8)
        {
            (ch_mult == 1 ? pockmcu_mve_dw_mult1 : pockmcu_mve_dw_gather)(dw_conv_params,
                                                                          quant_params,
                                                                          input_dims,
                                                                          input_data,
                                                                          filter_dims,
                                                                          filter_data,
                                                                          bias_data,
                                                                          output_dims,
                                                                          output_data,
                                                                          oc0);
        }
        if (oc0 < out_c)
        {
            pockmcu_mve_dw_scalar(dw_conv_params,
                                  quant_params,
                                  input_dims,
                                  input_data,
                                  filter_dims,
                                  filter_data,
                                  bias_data,
                                  output_dims,
                                  output_data,
                                  oc0);
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
