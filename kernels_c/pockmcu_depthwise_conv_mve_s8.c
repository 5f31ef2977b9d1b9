/*
 * pockmcu_depthwise_conv_mve_s8 - int8 depthwise convolution for Helium (Armv8.1-M MVE, Cortex-M55), the
 * CMSIS-NN API and bytes of arm_depthwise_conv_wrapper_s8 (TFLM DepthwiseConvPerChannel, double
 * rounding requantization).
 *
 * On a core with integer MVE, channel multiplier 1 (any filter size, stride, dilation, padding, channel count
 * whose k_h rows of (k_w - 1) * dilation.w + 1 slots fit 64 slots and k_h * k_w <= 64 taps): groups of 16
 * channels; for each output row segment the k_h input rows under it are copied into zero-point padded 16-byte
 * slots (1 KB of stack) and the group's weights packed [tap][16] (1 KB), so every tap of every pixel, border or
 * not, is a widening load at an immediate offset (3x3 filters: one inline assembly block of 9 taps per pixel),
 * VMULLB / VMULLT into four int32 accumulators that start at bias + input_offset * sum(w) (an out-of-image tap
 * reads the zero point: (zp + input_offset) * w = 0, so the sum is the portable one in wrapping int32), and a
 * requantization per lane with a saturating narrow (assembly). The last group of fewer than 16 channels runs the
 * same code with zero lanes and a predicated store. Segments of 16 whole channels whose taps all lie inside the
 * image (not 3x3) read the taps in place instead (tall filters over one column, as in 1-D models: k_w == 1 is
 * one low-overhead loop over the k_h taps). ch_mult > 1 (filters of 10 to 256 taps, or channel counts the int16
 * path below would leave partly to scalar code): per input channel, each output pixel's window into a column (a
 * byte gather per row) and VMLADAVA against the channel's ch_mult filters transposed to [oc][tap], four output
 * channels per loop. Other geometries (3x3 and smaller filters with ch_mult > 1, very large filters): eight output
 * channels in int16 lanes (a gather of the input channels oc / ch_mult), the last out_c % 8 channels scalar code
 * with the portable loops' arithmetic. Requantization: the same bits as pockmcu_requantize
 * (pockmcu_nn_support_mve.h). No scratch buffer (pockmcu_depthwise_conv_mve_s8_get_buffer_size returns 0).
 *
 * Elsewhere (cores without MVE, the host simulation) this function is the portable kernel: it runs
 * pockmcu_depthwise_conv_s8_loops exactly as arm_depthwise_conv_wrapper_s8 does. The MVE path produces the
 * same bytes as those loops for every argument (tests/test_mve_kernels.py compares both in one QEMU M55
 * program on hundreds of random geometries), so a model's host simulation equals its run on Cortex-M55.
 */
#include "pockmcu_layer_loops.h"
#include "pockmcu_nn_support_mve.h"

#if POCKMCU_HAS_MVE

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
                        POCKMCU_MVE_DW_MAC(vldrbq_gather_offset_s16(px, in_ch), vldrbq_s16(w));
                        POCKMCU_MVE_DW_MAC(vldrbq_gather_offset_s16(px + in_c, in_ch), vldrbq_s16(w + out_c));
                        POCKMCU_MVE_DW_MAC(vldrbq_gather_offset_s16(px + 2 * in_c, in_ch), vldrbq_s16(w + 2 * out_c));
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
                                                   ? vldrbq_gather_offset_s16(row + kx * dil_w * in_c, in_ch)
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

/* -- ch_mult 1: sixteen channels per output pixel ------------------------------------------------------------
 * Two int16 vectors of eight channels each for the input and the weights (widening byte loads at offsets 0 and
 * 8 of one pointer); VMULLB / VMULLT put the products of the even and odd lanes into four int32 accumulators
 * (e0: channels 0, 2, 4, 6; o0: 1, 3, 5, 7; e1: 8, 10, 12, 14; o1: 9, 11, 13, 15). Requantization per lane,
 * + output_offset in int32, then a saturating narrow to int16 (VQMOVNB / VQMOVNT, which interleaves the even
 * and odd lanes back into channel order) and the clamp on eight int16 lanes: the clamp bounds lie inside int16,
 * so saturating first changes nothing. GCC 12 spills the vectors of these sequences: they are inline assembly. */

/* The per-channel constants of one group of 16 channels, in accumulator lane order (e0, o0, e1, o1), at the
 * byte offsets the assembly below uses: init 0, mult 64, left 128, right 192, clamp bounds (int16) 256, 272. */
typedef struct
{
    int32_t init[16], mult[16], left[16], right[16];
    int16_t act_min[8], act_max[8];
} pockmcu_mve_dw16_consts;

    #define POCKMCU_MVE_DW16_MUL(xv, wv, e, o)                                                                         \
        do                                                                                                             \
        {                                                                                                              \
            const int16x8_t xm_ = (xv);                                                                                \
            const int16x8_t wm_ = (wv);                                                                                \
            e = vaddq_s32(e, vmullbq_int_s16(xm_, wm_));                                                               \
            o = vaddq_s32(o, vmulltq_int_s16(xm_, wm_));                                                               \
        } while (0)

/* One tap of 16 channels at [p] (input) and [q] (weights) into e0, o0, e1, o1 (inline assembly operands). */
    #define POCKMCU_MVE_DW16_TAP_ASM                                                                                   \
        "vldrb.s16 %q[x], [%[p]]\n\t"                                                                                  \
        "vldrb.s16 %q[w], [%[q]]\n\t"                                                                                  \
        "vmullb.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[e0], %q[e0], %q[t]\n\t"                                                                           \
        "vmullt.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[o0], %q[o0], %q[t]\n\t"                                                                           \
        "vldrb.s16 %q[x], [%[p], #8]\n\t"                                                                              \
        "vldrb.s16 %q[w], [%[q], #8]\n\t"                                                                              \
        "vmullb.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[e1], %q[e1], %q[t]\n\t"                                                                           \
        "vmullt.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[o1], %q[o1], %q[t]\n\t"

    #define POCKMCU_MVE_DW16_TAP_OPERANDS                                                                              \
        [e0] "+w"(e0), [o0] "+w"(o0), [e1] "+w"(e1), [o1] "+w"(o1), [x] "=&w"(xv), [w] "=&w"(wv), [t] "=&w"(tv),       \
            [p] "+l"(p), [q] "+l"(q)

/* Requantization of accumulator a with the constants at [k, #mult], [k, #left], [k, #right] (t, u: scratch). */
    #define POCKMCU_MVE_DW16_RQ_ASM(a, mult, left, right)                                                              \
        "vldrw.32 %q[t], [%[k], #" #left "]\n\t"                                                                       \
        "vshl.s32 %q[" #a "], %q[" #a "], %q[t]\n\t"                                                                   \
        "vldrw.32 %q[t], [%[k], #" #mult "]\n\t"                                                                       \
        "vqrdmulh.s32 %q[" #a "], %q[" #a "], %q[t]\n\t"                                                               \
        "vldrw.32 %q[t], [%[k], #" #right "]\n\t"                                                                      \
        "vand %q[u], %q[" #a "], %q[t]\n\t"                                                                            \
        "vshr.s32 %q[u], %q[u], #31\n\t"                                                                               \
        "vqadd.s32 %q[" #a "], %q[" #a "], %q[u]\n\t"                                                                  \
        "vrshl.s32 %q[" #a "], %q[" #a "], %q[t]\n\t"                                                                  \
        "vadd.i32 %q[" #a "], %q[" #a "], %[oo]\n\t"

/* e0 / o0 -> channels 0..7 as int16 in e0, e1 / o1 -> channels 8..15 in e1, clamped (bounds at [k, #256/#272]). */
    #define POCKMCU_MVE_DW16_NARROW_ASM                                                                                \
        "vqmovnb.s32 %q[e0], %q[e0]\n\t"                                                                               \
        "vqmovnt.s32 %q[e0], %q[o0]\n\t"                                                                               \
        "vqmovnb.s32 %q[e1], %q[e1]\n\t"                                                                               \
        "vqmovnt.s32 %q[e1], %q[o1]\n\t"                                                                               \
        "vldrw.32 %q[t], [%[k], #256]\n\t"                                                                             \
        "vldrw.32 %q[u], [%[k], #272]\n\t"                                                                             \
        "vmax.s16 %q[e0], %q[e0], %q[t]\n\t"                                                                           \
        "vmax.s16 %q[e1], %q[e1], %q[t]\n\t"                                                                           \
        "vmin.s16 %q[e0], %q[e0], %q[u]\n\t"                                                                           \
        "vmin.s16 %q[e1], %q[e1], %q[u]\n\t"

/* Requantize, offset, clamp and store the 16 channels (n of them when tail) at out. */
POCKMCU_MVE_INLINE void pockmcu_mve_dw16_store(int32x4_t e0,
                                               int32x4_t o0,
                                               int32x4_t e1,
                                               int32x4_t o1,
                                               const pockmcu_mve_dw16_consts *k,
                                               const int32_t output_offset,
                                               const int32_t left,
                                               int8_t *out,
                                               mve_pred16_t p0,
                                               mve_pred16_t p1,
                                               const int32_t tail)
{
    int32x4_t t, u;
    if (left)
    {
        __asm__(POCKMCU_MVE_DW16_RQ_ASM(e0, 64, 128, 192) POCKMCU_MVE_DW16_RQ_ASM(o0, 80, 144, 208)
                    POCKMCU_MVE_DW16_RQ_ASM(e1, 96, 160, 224) POCKMCU_MVE_DW16_RQ_ASM(o1, 112, 176, 240)
                        POCKMCU_MVE_DW16_NARROW_ASM
                : [e0] "+w"(e0), [o0] "+w"(o0), [e1] "+w"(e1), [o1] "+w"(o1), [t] "=&w"(t), [u] "=&w"(u)
                : [k] "r"(k), [oo] "r"(output_offset)
                : "memory");
    }
    else
    {
        /* no channel of the group shifts left: the VSHL by 0 is left out */
    #define POCKMCU_MVE_DW16_RQ0_ASM(a, mult, right)                                                                   \
        "vldrw.32 %q[t], [%[k], #" #mult "]\n\t"                                                                       \
        "vqrdmulh.s32 %q[" #a "], %q[" #a "], %q[t]\n\t"                                                               \
        "vldrw.32 %q[t], [%[k], #" #right "]\n\t"                                                                      \
        "vand %q[u], %q[" #a "], %q[t]\n\t"                                                                            \
        "vshr.s32 %q[u], %q[u], #31\n\t"                                                                               \
        "vqadd.s32 %q[" #a "], %q[" #a "], %q[u]\n\t"                                                                  \
        "vrshl.s32 %q[" #a "], %q[" #a "], %q[t]\n\t"                                                                  \
        "vadd.i32 %q[" #a "], %q[" #a "], %[oo]\n\t"
        __asm__(POCKMCU_MVE_DW16_RQ0_ASM(e0, 64, 192) POCKMCU_MVE_DW16_RQ0_ASM(o0, 80, 208)
                    POCKMCU_MVE_DW16_RQ0_ASM(e1, 96, 224) POCKMCU_MVE_DW16_RQ0_ASM(o1, 112, 240)
                        POCKMCU_MVE_DW16_NARROW_ASM
                : [e0] "+w"(e0), [o0] "+w"(o0), [e1] "+w"(e1), [o1] "+w"(o1), [t] "=&w"(t), [u] "=&w"(u)
                : [k] "r"(k), [oo] "r"(output_offset)
                : "memory");
    }
    if (tail)
    {
        vstrbq_p_s16(out, vreinterpretq_s16_s32(e0), p0);
        vstrbq_p_s16(out + 8, vreinterpretq_s16_s32(e1), p1);
    }
    else
    {
        vstrbq_s16(out, vreinterpretq_s16_s32(e0));
        vstrbq_s16(out + 8, vreinterpretq_s16_s32(e1));
    }
}

/* -- ch_mult 1 through padded lines: the k_h input rows under one output row segment, 16 channels of the group
 * per pixel slot (16 bytes, tail lanes 0), out-of-image slots holding the input zero point; the group's weights
 * packed as [tap][16] (tail lanes 0). Every tap of every pixel is then one load at an immediate offset, and
 * border pixels run the same code as interior ones (the zero point cancels the tap's share of init). */
    #define POCKMCU_MVE_DW_LINE_SLOTS 64 /* 16-byte pixel slots of all k_h lines of one segment (1 KB of stack) */
    #define POCKMCU_MVE_DW_TAPS 64       /* taps of the packed weights (1 KB of stack) */

/* One pixel of a 3x3 filter with dilation 1: rows at p0, p1, p2 (slots of 16 bytes), weights at q ([9][16]). */
    #define POCKMCU_MVE_DW_ROW_ASM(P, QO)                                                                              \
        "vldrb.s16 %q[x], [%[" #P "]]\n\t"                                                                             \
        "vldrb.s16 %q[w], [%[q], #" #QO "]\n\t"                                                                        \
        "vmullb.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[e0], %q[e0], %q[t]\n\t"                                                                           \
        "vmullt.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[o0], %q[o0], %q[t]\n\t"                                                                           \
        "vldrb.s16 %q[x], [%[" #P "], #8]\n\t"                                                                         \
        "vldrb.s16 %q[w], [%[q], #" #QO "+8]\n\t"                                                                      \
        "vmullb.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[e1], %q[e1], %q[t]\n\t"                                                                           \
        "vmullt.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[o1], %q[o1], %q[t]\n\t"                                                                           \
        "vldrb.s16 %q[x], [%[" #P "], #16]\n\t"                                                                        \
        "vldrb.s16 %q[w], [%[q], #" #QO "+16]\n\t"                                                                     \
        "vmullb.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[e0], %q[e0], %q[t]\n\t"                                                                           \
        "vmullt.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[o0], %q[o0], %q[t]\n\t"                                                                           \
        "vldrb.s16 %q[x], [%[" #P "], #24]\n\t"                                                                        \
        "vldrb.s16 %q[w], [%[q], #" #QO "+24]\n\t"                                                                     \
        "vmullb.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[e1], %q[e1], %q[t]\n\t"                                                                           \
        "vmullt.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[o1], %q[o1], %q[t]\n\t"                                                                           \
        "vldrb.s16 %q[x], [%[" #P "], #32]\n\t"                                                                        \
        "vldrb.s16 %q[w], [%[q], #" #QO "+32]\n\t"                                                                     \
        "vmullb.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[e0], %q[e0], %q[t]\n\t"                                                                           \
        "vmullt.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[o0], %q[o0], %q[t]\n\t"                                                                           \
        "vldrb.s16 %q[x], [%[" #P "], #40]\n\t"                                                                        \
        "vldrb.s16 %q[w], [%[q], #" #QO "+40]\n\t"                                                                     \
        "vmullb.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[e1], %q[e1], %q[t]\n\t"                                                                           \
        "vmullt.s16 %q[t], %q[x], %q[w]\n\t"                                                                           \
        "vadd.i32 %q[o1], %q[o1], %q[t]\n\t"

/* seg output pixels of one segment of 16 whole channels whose taps all lie inside the image, read in place: pixel
 * j's taps at px + j * px_step + ky * row + kx * tap, weights packed [tap][16] at wblk. Out of line: inlined into
 * the padded lines loop, it costs that loop registers. */
static __attribute__((noinline)) void pockmcu_mve_dw_direct_seg(const int8_t *px,
                                                                const int8_t *wblk,
                                                                int8_t *out,
                                                                const int32_t seg,
                                                                const int32_t px_step,
                                                                const int32_t out_c,
                                                                const int32_t k_h,
                                                                const int32_t k_w,
                                                                const int32_t tap,
                                                                const int32_t row,
                                                                const pockmcu_mve_dw16_consts *k,
                                                                const int32_t output_offset,
                                                                const int32_t left)
{
    const int32_t row_skip = row - k_w * tap;
    int32_t j, ky, kx;
    for (j = 0; j < seg; j++, out += out_c, px += px_step)
    {
        int32x4_t e0 = vldrwq_s32(k->init);
        int32x4_t o0 = vldrwq_s32(k->init + 4);
        int32x4_t e1 = vldrwq_s32(k->init + 8);
        int32x4_t o1 = vldrwq_s32(k->init + 12);
        const int8_t *p = px;
        const int8_t *q = wblk;
        int16x8_t xv, wv;
        int32x4_t tv;
        if (k_w == 1)
        {
            /* one run of k_h taps dil_h rows apart: a low-overhead loop in the assembly */
            __asm__("dls lr, %[n]\n"
                    "1:\n\t" POCKMCU_MVE_DW16_TAP_ASM "add %[p], %[p], %[d]\n\t"
                    "adds %[q], %[q], #16\n\t"
                    "le lr, 1b"
                    : POCKMCU_MVE_DW16_TAP_OPERANDS
                    : [d] "r"(row), [n] "r"(k_h)
                    : "lr", "memory");
        }
        else
        {
            for (ky = 0; ky < k_h; ky++, p += row_skip)
            {
                for (kx = 0; kx < k_w; kx++)
                {
                    __asm__(POCKMCU_MVE_DW16_TAP_ASM "add %[p], %[p], %[d]\n\t"
                                                     "adds %[q], %[q], #16\n\t"
                            : POCKMCU_MVE_DW16_TAP_OPERANDS
                            : [d] "r"(tap)
                            : "memory");
                }
            }
        }
        pockmcu_mve_dw16_store(e0, o0, e1, o1, k, output_offset, left, out, 0, 0, 0);
    }
}

/* Whether the line path fits its stack blocks for this geometry. */
POCKMCU_MVE_INLINE int32_t pockmcu_mve_dw_lines_fit(const cmsis_nn_dw_conv_params *prm,
                                                    const cmsis_nn_dims *filter_dims)
{
    const int32_t eff_w = (filter_dims->w - 1) * prm->dilation.w + 1;
    return filter_dims->h * filter_dims->w <= POCKMCU_MVE_DW_TAPS && eff_w <= POCKMCU_MVE_DW_LINE_SLOTS &&
        filter_dims->h * eff_w <= POCKMCU_MVE_DW_LINE_SLOTS;
}

/* Output channels [c0, c0 + n), every output pixel, through padded lines (left: some channel shifts left). */
POCKMCU_MVE_INLINE void pockmcu_mve_dw_lines_group(const cmsis_nn_dw_conv_params *prm,
                                                   const cmsis_nn_dims *input_dims,
                                                   const int8_t *input_data,
                                                   const cmsis_nn_dims *filter_dims,
                                                   const int8_t *filter_data,
                                                   const cmsis_nn_dims *output_dims,
                                                   int8_t *output_data,
                                                   const int32_t c0,
                                                   const int32_t n,
                                                   const pockmcu_mve_dw16_consts *k,
                                                   const int32_t left)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t stride_w = prm->stride.w;
    const int32_t dil_h = prm->dilation.h;
    const int32_t dil_w = prm->dilation.w;
    const int32_t eff_w = (k_w - 1) * dil_w + 1;
    const int32_t fast3 = k_h == 3 && k_w == 3 && dil_w == 1;
    /* output pixels per segment: its k_h lines of (seg - 1) * stride_w + eff_w slots fit the block */
    const int32_t seg_max = (POCKMCU_MVE_DW_LINE_SLOTS / k_h - eff_w) / stride_w + 1;
    const mve_pred16_t pn = vctp8q((uint32_t)n);
    const mve_pred16_t p0 = vctp16q((uint32_t)n);
    const mve_pred16_t p1 = vctp16q((uint32_t)pockmcu_max_i32(n - 8, 0));
    const int8x16_t zp = vdupq_n_s8((int8_t)-prm->input_offset);
    int8_t lines[POCKMCU_MVE_DW_LINE_SLOTS * 16] __attribute__((aligned(16)));
    int8_t wblk[POCKMCU_MVE_DW_TAPS * 16] __attribute__((aligned(16)));
    int32_t b, oy, ox0, t;

    for (t = 0; t < k_h * k_w; t++)
    {
        vstrbq_s8(wblk + 16 * t, vldrbq_z_s8(filter_data + t * out_c + c0, pn));
    }
    for (b = 0; b < input_dims->n; b++)
    {
        const int8_t *in_batch = input_data + b * in_h * in_w * in_c + c0;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * prm->stride.h - prm->padding.h;
            int8_t *out_row = output_data + ((b * out_h + oy) * out_w) * out_c + c0;
            for (ox0 = 0; ox0 < out_w; ox0 += seg_max)
            {
                const int32_t seg = pockmcu_min_i32(seg_max, out_w - ox0);
                const int32_t seg_w = (seg - 1) * stride_w + eff_w;
                const int32_t in_x0 = ox0 * stride_w - prm->padding.w;
                /* slots [0, lead) and [lead + mid, seg_w) lie outside the image columns */
                const int32_t lead = pockmcu_min_i32(pockmcu_max_i32(-in_x0, 0), seg_w);
                const int32_t mid = pockmcu_max_i32(pockmcu_min_i32(in_w - in_x0, seg_w) - lead, 0);
                const int32_t line_bytes = seg_w * 16;
                int8_t *out = out_row + ox0 * out_c;
                int32_t ky, j;
                if (!fast3 && n == 16 && lead == 0 && mid == seg_w && in_y0 >= 0 && in_y0 + (k_h - 1) * dil_h < in_h)
                {
                    /* 16 whole channels, every tap of the segment inside the image (tall filters over narrow
                     * inputs, the layers of 1-D models): the taps read the input in place, no lines */
                    pockmcu_mve_dw_direct_seg(in_batch + (in_y0 * in_w + in_x0) * in_c,
                                              wblk,
                                              out,
                                              seg,
                                              stride_w * in_c,
                                              out_c,
                                              k_h,
                                              k_w,
                                              dil_w * in_c,
                                              dil_h * in_w * in_c,
                                              k,
                                              prm->output_offset,
                                              left);
                    continue;
                }
                for (ky = 0; ky < k_h; ky++)
                {
                    const int32_t iy = in_y0 + ky * dil_h;
                    int8_t *dst = lines + ky * line_bytes;
                    if ((uint32_t)iy >= (uint32_t)in_h)
                    {
                        for (j = 0; j < seg_w; j++, dst += 16)
                        {
                            vstrbq_s8(dst, zp);
                        }
                        continue;
                    }
                    for (j = 0; j < lead; j++, dst += 16)
                    {
                        vstrbq_s8(dst, zp);
                    }
                    {
                        const int8_t *src = in_batch + (iy * in_w + in_x0 + lead) * in_c;
                        for (j = 0; j < mid; j++, dst += 16, src += in_c)
                        {
                            vstrbq_s8(dst, vldrbq_z_s8(src, pn));
                        }
                    }
                    for (j = lead + mid; j < seg_w; j++, dst += 16)
                    {
                        vstrbq_s8(dst, zp);
                    }
                }
                for (j = 0; j < seg; j++, out += out_c)
                {
                    int32x4_t e0 = vldrwq_s32(k->init);
                    int32x4_t o0 = vldrwq_s32(k->init + 4);
                    int32x4_t e1 = vldrwq_s32(k->init + 8);
                    int32x4_t o1 = vldrwq_s32(k->init + 12);
                    const int8_t *p = lines + j * stride_w * 16;
                    const int8_t *q = wblk;
                    int16x8_t xv, wv;
                    int32x4_t tv;
                    if (fast3)
                    {
                        const int8_t *pb = p + line_bytes;
                        const int8_t *pc = pb + line_bytes;
                        __asm__(POCKMCU_MVE_DW_ROW_ASM(p, 0) POCKMCU_MVE_DW_ROW_ASM(
                                    pb, 48) "add %[q], %[q], #96\n\t" POCKMCU_MVE_DW_ROW_ASM(pc, 0)
                                : POCKMCU_MVE_DW16_TAP_OPERANDS, [pb] "+l"(pb), [pc] "+l"(pc)
                                :
                                : "memory");
                    }
                    else
                    {
                        for (ky = 0; ky < k_h; ky++)
                        {
                            const int8_t *pr = p + ky * line_bytes;
                            int32_t kx;
                            for (kx = 0; kx < k_w; kx++)
                            {
                                __asm__(POCKMCU_MVE_DW16_TAP_ASM "add %[p], %[p], %[d]\n\t"
                                                                 "adds %[q], %[q], #16\n\t"
                                        : [e0] "+w"(e0),
                                          [o0] "+w"(o0),
                                          [e1] "+w"(e1),
                                          [o1] "+w"(o1),
                                          [x] "=&w"(xv),
                                          [w] "=&w"(wv),
                                          [t] "=&w"(tv),
                                          [p] "+l"(pr),
                                          [q] "+l"(q)
                                        : [d] "r"(dil_w * 16)
                                        : "memory");
                            }
                        }
                    }
                    pockmcu_mve_dw16_store(e0, o0, e1, o1, k, prm->output_offset, left, out, p0, p1, n < 16);
                }
            }
        }
    }
}

/* The constants of the group of channels [c0, c0 + n), n <= 16; returns whether some channel shifts left. */
static int32_t pockmcu_mve_dw16_consts_of(const cmsis_nn_dw_conv_params *prm,
                                          const cmsis_nn_per_channel_quant_params *quant_params,
                                          const cmsis_nn_dims *filter_dims,
                                          const int8_t *filter_data,
                                          const int32_t *bias_data,
                                          const int32_t out_c,
                                          const int32_t c0,
                                          const int32_t n,
                                          pockmcu_mve_dw16_consts *k)
{
    const int32x4_t zero = vdupq_n_s32(0);
    const uint32x4_t even = vidupq_n_u32(0, 2);
    const mve_pred16_t p0 = vctp16q((uint32_t)n);
    const mve_pred16_t p1 = vctp16q((uint32_t)pockmcu_max_i32(n - 8, 0));
    const int16x8_t ones = vdupq_n_s16(1);
    int32x4_t e0 = zero, o0 = zero, e1 = zero, o1 = zero;
    int32_t t, q, left = 0;
    for (t = 0; t < filter_dims->h * filter_dims->w; t++)
    {
        const int8_t *w = filter_data + t * out_c + c0;
        POCKMCU_MVE_DW16_MUL(vldrbq_z_s16(w, p0), ones, e0, o0);
        POCKMCU_MVE_DW16_MUL(vldrbq_z_s16(w + 8, p1), ones, e1, o1);
    }
    vstrwq_s32(k->init, e0);
    vstrwq_s32(k->init + 4, o0);
    vstrwq_s32(k->init + 8, e1);
    vstrwq_s32(k->init + 12, o1);
    for (q = 0; q < 4; q++)
    {
        /* channels c0 + (q & 1) + 8 (q >> 1) + 2 i, i = 0..3; lanes past the group read channel c0 */
        const uint32x4_t ch = vaddq_n_u32(even, (uint32_t)((q & 1) + 8 * (q >> 1)));
        const uint32x4_t chs = vpselq_u32(vdupq_n_u32(0), ch, vcmpcsq_n_u32(ch, (uint32_t)n));
        const int32x4_t sh = vldrwq_gather_shifted_offset_s32(quant_params->shift + c0, chs);
        const int32x4_t bias = bias_data != NULL ? vldrwq_gather_shifted_offset_s32(bias_data + c0, chs) : zero;
        vstrwq_s32(k->init + 4 * q, vmlaq_n_s32(bias, vldrwq_s32(k->init + 4 * q), prm->input_offset));
        vstrwq_s32(k->mult + 4 * q, vldrwq_gather_shifted_offset_s32(quant_params->multiplier + c0, chs));
        vstrwq_s32(k->left + 4 * q, vmaxq_s32(sh, zero));
        vstrwq_s32(k->right + 4 * q, vminq_s32(sh, zero));
        left |= vmaxvq_s32(0, sh) > 0;
    }
    vstrhq_s16(k->act_min, vdupq_n_s16((int16_t)prm->activation.min));
    vstrhq_s16(k->act_max, vdupq_n_s16((int16_t)prm->activation.max));
    return left;
}

/* ch_mult 1, every channel. */
static void pockmcu_mve_dw_mult1(const cmsis_nn_dw_conv_params *prm,
                                 const cmsis_nn_per_channel_quant_params *quant_params,
                                 const cmsis_nn_dims *input_dims,
                                 const int8_t *input_data,
                                 const cmsis_nn_dims *filter_dims,
                                 const int8_t *filter_data,
                                 const int32_t *bias_data,
                                 const cmsis_nn_dims *output_dims,
                                 int8_t *output_data)
{
    const int32_t out_c = output_dims->c;
    pockmcu_mve_dw16_consts k __attribute__((aligned(16)));
    int32_t c0;
    for (c0 = 0; c0 < out_c; c0 += 16)
    {
        const int32_t n = pockmcu_min_i32(16, out_c - c0);
        const int32_t left =
            pockmcu_mve_dw16_consts_of(prm, quant_params, filter_dims, filter_data, bias_data, out_c, c0, n, &k);
        pockmcu_mve_dw_lines_group(
            prm, input_dims, input_data, filter_dims, filter_data, output_dims, output_data, c0, n, &k, left);
    }
}

/* -- ch_mult > 1: the ch_mult output channels of one input channel share its window. Per input channel, the
 * window of every output pixel is copied into col (k_h rows of k_w taps, out-of-image taps holding the input zero
 * point; a byte gather per row), and the channel's filters, transposed to [oc][tap] and zero padded to a multiple
 * of 16 taps, are dotted with it four output channels at a time by VMLADAVA (the accumulators start at bias +
 * input_offset * sum(w), as above), then requantized as one vector of four lanes. */
    #define POCKMCU_MVE_DWM_COL 256 /* taps of one window */
    #define POCKMCU_MVE_DWM_W 1024  /* bytes of the transposed filters of one input channel */

/* The constants of four output channels. */
typedef struct
{
    int32_t init[4], mult[4], left[4], right[4];
} pockmcu_mve_dwm_blk;

/* Whether the ch_mult > 1 path fits its stack blocks for this geometry. */
POCKMCU_MVE_INLINE int32_t pockmcu_mve_dwm_fits(const cmsis_nn_dw_conv_params *prm, const cmsis_nn_dims *filter_dims)
{
    const int32_t kk = filter_dims->h * filter_dims->w;
    return kk <= POCKMCU_MVE_DWM_COL && ((prm->ch_mult + 3) & ~3) * ((kk + 15) & ~15) <= POCKMCU_MVE_DWM_W;
}

static void pockmcu_mve_dw_multi(const cmsis_nn_dw_conv_params *prm,
                                 const cmsis_nn_per_channel_quant_params *quant_params,
                                 const cmsis_nn_dims *input_dims,
                                 const int8_t *input_data,
                                 const cmsis_nn_dims *filter_dims,
                                 const int8_t *filter_data,
                                 const int32_t *bias_data,
                                 const cmsis_nn_dims *output_dims,
                                 int8_t *output_data)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t dil_h = prm->dilation.h;
    const int32_t dil_w = prm->dilation.w;
    const int32_t m = prm->ch_mult;
    const int32_t kk = k_h * k_w;
    const int32_t kk16 = (kk + 15) & ~15;
    const int32_t n_blk = (m + 3) >> 2;
    /* a row of the window is one byte gather when its offsets fit 8 bits */
    const int32_t gather = k_w <= 16 && (k_w - 1) * dil_w * in_c <= 255;
    const uint8x16_t offs = vmulq_n_u8(vidupq_n_u8(0, 1), (uint8_t)(gather ? dil_w * in_c : 0));
    const mve_pred16_t p_kw = vctp8q((uint32_t)pockmcu_min_i32(k_w, 16));
    const int8x16_t zp = vdupq_n_s8((int8_t)-prm->input_offset);
    const int32x4_t oo = vdupq_n_s32(prm->output_offset);
    const int32x4_t lo = vdupq_n_s32(prm->activation.min);
    const int32x4_t hi = vdupq_n_s32(prm->activation.max);
    int8_t col[POCKMCU_MVE_DWM_COL + 16] __attribute__((aligned(16)));
    int8_t wt[POCKMCU_MVE_DWM_W] __attribute__((aligned(16)));
    pockmcu_mve_dwm_blk blk[POCKMCU_MVE_DWM_W / 64];
    int32_t ic, j, t, b, oy, ox;

    pockmcu_mve_fill_s8(col, vdupq_n_s8(0), kk16); /* the taps past kk meet zero weights */
    for (ic = 0; ic < in_c; ic++)
    {
        for (j = 0; j < 4 * n_blk; j++)
        {
            const int32_t oc = ic * m + (j < m ? j : 0);
            int8_t *wr = wt + j * kk16;
            int32_t sum = 0;
            pockmcu_mve_fill_s8(wr, vdupq_n_s8(0), kk16);
            if (j < m)
            {
                for (t = 0; t < kk; t++)
                {
                    wr[t] = filter_data[t * out_c + oc];
                    sum += wr[t];
                }
            }
            blk[j >> 2].init[j & 3] = (bias_data != NULL ? bias_data[oc] : 0) + prm->input_offset * sum;
            blk[j >> 2].mult[j & 3] = quant_params->multiplier[oc];
            blk[j >> 2].left[j & 3] = pockmcu_max_i32(quant_params->shift[oc], 0);
            blk[j >> 2].right[j & 3] = pockmcu_min_i32(quant_params->shift[oc], 0);
        }
        for (b = 0; b < input_dims->n; b++)
        {
            const int8_t *in_ch = input_data + b * in_h * in_w * in_c + ic;
            int8_t *out = output_data + b * out_h * out_w * out_c + ic * m;
            for (oy = 0; oy < out_h; oy++)
            {
                const int32_t in_y0 = oy * prm->stride.h - prm->padding.h;
                for (ox = 0; ox < out_w; ox++, out += out_c)
                {
                    const int32_t in_x0 = ox * prm->stride.w - prm->padding.w;
                    const int32_t kx_start = pockmcu_min_i32(pockmcu_window_start(in_x0, dil_w), k_w);
                    const int32_t kx_end = pockmcu_max_i32(pockmcu_window_end(in_x0, dil_w, in_w, k_w), kx_start);
                    int32_t ky, kx;
                    /* the window into col */
                    for (ky = 0; ky < k_h; ky++)
                    {
                        const int32_t iy = in_y0 + ky * dil_h;
                        int8_t *dst = col + ky * k_w;
                        const int8_t *row = in_ch + (iy * in_w + in_x0) * in_c;
                        if ((uint32_t)iy >= (uint32_t)in_h)
                        {
                            for (kx = 0; kx < k_w; kx += 16)
                            {
                                vstrbq_p_s8(dst + kx, zp, vctp8q((uint32_t)(k_w - kx)));
                            }
                        }
                        else if (gather)
                        {
                            const mve_pred16_t p = vctp8q((uint32_t)kx_end) & ~vctp8q((uint32_t)kx_start);
                            vstrbq_p_s8(dst, vpselq_s8(vldrbq_gather_offset_z_s8(row, offs, p), zp, p), p_kw);
                        }
                        else
                        {
                            for (kx = 0; kx < k_w; kx++)
                            {
                                dst[kx] =
                                    kx >= kx_start && kx < kx_end ? row[kx * dil_w * in_c] : (int8_t)-prm->input_offset;
                            }
                        }
                    }
                    /* four output channels per dot product loop */
                    for (j = 0; j < n_blk; j++)
                    {
                        const pockmcu_mve_dwm_blk *k = &blk[j];
                        const int8_t *x = col;
                        const int8_t *w0 = wt + 4 * j * kk16;
                        const int8_t *w1 = w0 + kk16;
                        const int8_t *w2 = w1 + kk16;
                        const int8_t *w3 = w2 + kk16;
                        int32_t a0 = 0, a1 = 0, a2 = 0, a3 = 0;
                        int32x4_t acc;
                        for (t = kk16 >> 4; t > 0; t--)
                        {
                            const int8x16_t xv = vldrbq_s8(x);
                            a0 = vmladavaq_s8(a0, xv, vldrbq_s8(w0));
                            a1 = vmladavaq_s8(a1, xv, vldrbq_s8(w1));
                            a2 = vmladavaq_s8(a2, xv, vldrbq_s8(w2));
                            a3 = vmladavaq_s8(a3, xv, vldrbq_s8(w3));
                            x += 16;
                            w0 += 16;
                            w1 += 16;
                            w2 += 16;
                            w3 += 16;
                        }
                        acc = vsetq_lane_s32(a3, vsetq_lane_s32(a2, vsetq_lane_s32(a1, vdupq_n_s32(a0), 1), 2), 3);
                        acc = vaddq_s32(acc, vldrwq_s32(k->init));
                        acc = pockmcu_mve_requantize_lr(
                            acc, vldrwq_s32(k->mult), vldrwq_s32(k->left), vldrwq_s32(k->right));
                        acc = vminq_s32(vmaxq_s32(vaddq_s32(acc, oo), lo), hi);
                        vstrbq_p_s32(out + 4 * j, acc, vctp32q((uint32_t)(m - 4 * j)));
                    }
                }
            }
        }
    }
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
    if (ch_mult >= 1 && out_c == input_dims->c * ch_mult && dw_conv_params->stride.h >= 1 &&
        dw_conv_params->stride.w >= 1 && dw_conv_params->dilation.h >= 1 && dw_conv_params->dilation.w >= 1)
    {
        int32_t oc0;
        (void)ctx;
        (void)bias_dims;
        if (ch_mult == 1 && pockmcu_mve_dw_lines_fit(dw_conv_params, filter_dims))
        {
            pockmcu_mve_dw_mult1(dw_conv_params,
                                 quant_params,
                                 input_dims,
                                 input_data,
                                 filter_dims,
                                 filter_data,
                                 bias_data,
                                 output_dims,
                                 output_data);
            return ARM_CMSIS_NN_SUCCESS;
        }
        /* the column path pays for its window copy on filters over 9 taps (3x3 filters: the gathers below) or
         * where the gathers would leave channels to the scalar loop */
        if (ch_mult > 1 && pockmcu_mve_dwm_fits(dw_conv_params, filter_dims) &&
            (filter_dims->h * filter_dims->w > 9 || out_c % 8 != 0))
        {
            pockmcu_mve_dw_multi(dw_conv_params,
                                 quant_params,
                                 input_dims,
                                 input_data,
                                 filter_dims,
                                 filter_data,
                                 bias_data,
                                 output_dims,
                                 output_data);
            return ARM_CMSIS_NN_SUCCESS;
        }
        for (oc0 = 0; oc0 + 8 <= out_c; oc0 += 8)
        {
            pockmcu_mve_dw_gather(dw_conv_params,
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
    /* the portable loops' answer to any other arguments (they check exactly the condition above) */
    return ARM_CMSIS_NN_ARG_ERROR;
#else
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
#endif
}
