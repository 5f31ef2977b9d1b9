/*
 * pockmcu_layer_loops.h - the loops of the int8 conv / depthwise / fully connected kernels, shared by
 * the TFLite Micro rounding kernels (arm_*, CMSIS-NN API), their onnxruntime rounding variants
 * (pockmcu_*_ort_s8) and the split-filter variants (pockmcu_*_split_*: a channel-sparse update keeps
 * the trained input channels of a filter in RAM, the rest stays in flash), and the loop of the conv
 * input gradient. Each kernel file is a one-line call with ort_rounding constant, which the
 * compiler folds: 0 requantizes with TFLM's double-rounding MultiplyByQuantizedMultiplier
 * (pockmcu_requantize), 1 with onnxruntime's float32 requantization emulated in integers
 * (pockmcu_requantize_ort; multiplier/shift then hold a float32 scale's mantissa and exponent).
 */
#ifndef POCKMCU_LAYER_LOOPS_H
#define POCKMCU_LAYER_LOOPS_H

#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_nn_support_ort.h"
#include "pockmcu_nn_support_tflm.h"

/* The loops must be inlined into each kernel for the constant rounding flag to fold away: left to
 * its own judgment gcc keeps the large function out of line and the kernels run ~57% more
 * instructions (KWS on Cortex-M4). */
#if defined(__GNUC__) || defined(__clang__)
    #define POCKMCU_LOOPS_INLINE static inline __attribute__((always_inline))
#else
    #define POCKMCU_LOOPS_INLINE static inline
#endif

/* One accumulator requantized the TFLM way or the onnxruntime way (ort_rounding is a constant). */
POCKMCU_LOOPS_INLINE int32_t pockmcu_requantize_as(int32_t acc, int32_t mult, int32_t shift, int32_t ort_rounding)
{
    return ort_rounding ? pockmcu_requantize_ort(acc, mult, shift) : pockmcu_requantize(acc, mult, shift);
}

/* filter_head / head_c: split weight storage (pockmcu_convolve_split_s8). The first head_c input
 * channels of every filter tap (o, ky, kx) are read from filter_head, rows of head_c values in
 * (o, ky, kx) order; the rest from filter (full OHWI, its first head_c values per tap unread).
 * Callers without a split pass the constants NULL, 0: the head loop folds away and the code is
 * the unsplit kernel's. Integer sums are exact, so the result equals the unsplit convolution with
 * the head merged into filter. head_c > 0 needs groups == 1 (checked by the split kernel). */
POCKMCU_LOOPS_INLINE arm_cmsis_nn_status pockmcu_conv_s8_loops(const cmsis_nn_context *ctx,
                                                               const cmsis_nn_conv_params *conv_params,
                                                               const cmsis_nn_per_channel_quant_params *quant_params,
                                                               const cmsis_nn_dims *input_dims,
                                                               const int8_t *input_data,
                                                               const cmsis_nn_dims *filter_dims,
                                                               const int8_t *filter_data,
                                                               const int8_t *filter_head,
                                                               const int32_t head_c,
                                                               const cmsis_nn_dims *bias_dims,
                                                               const int32_t *bias_data,
                                                               const cmsis_nn_dims *output_dims,
                                                               int8_t *output_data,
                                                               const int32_t ort_rounding)
{
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t out_c = output_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t k_c = filter_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t stride_h = conv_params->stride.h;
    const int32_t stride_w = conv_params->stride.w;
    const int32_t dil_h = conv_params->dilation.h;
    const int32_t dil_w = conv_params->dilation.w;
    const int32_t pad_h = conv_params->padding.h;
    const int32_t pad_w = conv_params->padding.w;
    const int32_t input_offset = conv_params->input_offset;
    const int32_t output_offset = conv_params->output_offset;
    const int32_t act_min = conv_params->activation.min;
    const int32_t act_max = conv_params->activation.max;
    int32_t groups;
    int32_t out_per_group;
    int32_t b, oy, ox, oc;

    (void)ctx;
    (void)bias_dims;

    if (k_c <= 0 || in_c % k_c != 0 || stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    groups = in_c / k_c;
    if (out_c % groups != 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    out_per_group = out_c / groups;

    for (b = 0; b < batches; b++)
    {
        const int8_t *in_batch = input_data + (int32_t)b * in_h * in_w * in_c;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * stride_h - pad_h;
            const int32_t ky_start = pockmcu_window_start(in_y0, dil_h);
            const int32_t ky_end = pockmcu_window_end(in_y0, dil_h, in_h, k_h);
            for (ox = 0; ox < out_w; ox++)
            {
                const int32_t in_x0 = ox * stride_w - pad_w;
                const int32_t kx_start = pockmcu_window_start(in_x0, dil_w);
                const int32_t kx_end = pockmcu_window_end(in_x0, dil_w, in_w, k_w);
                int8_t *out = output_data + (((int32_t)b * out_h + oy) * out_w + ox) * out_c;

                for (oc = 0; oc < out_c; oc++)
                {
                    const int32_t group_in = (oc / out_per_group) * k_c;
                    const int8_t *filter_oc = filter_data + (int32_t)oc * k_h * k_w * k_c;
                    int32_t acc = 0;
                    int32_t ky, kx, ci;

                    for (ky = ky_start; ky < ky_end; ky++)
                    {
                        const int32_t in_y = in_y0 + ky * dil_h;
                        for (kx = kx_start; kx < kx_end; kx++)
                        {
                            const int32_t in_x = in_x0 + kx * dil_w;
                            const int8_t *in_px = in_batch + (in_y * in_w + in_x) * in_c + group_in;
                            const int8_t *w_px = filter_oc + (ky * k_w + kx) * k_c;
                            if (head_c > 0) /* split storage: channels [0, head_c) of this tap */
                            {
                                const int8_t *h_px = filter_head + (((int32_t)oc * k_h + ky) * k_w + kx) * head_c;
                                for (ci = 0; ci < head_c; ci++)
                                {
                                    acc += (int32_t)h_px[ci] * ((int32_t)in_px[ci] + input_offset);
                                }
                            }
                            for (ci = head_c; ci < k_c; ci++)
                            {
                                acc += (int32_t)w_px[ci] * ((int32_t)in_px[ci] + input_offset);
                            }
                        }
                    }
                    if (bias_data != NULL)
                    {
                        acc += bias_data[oc];
                    }
                    acc =
                        pockmcu_requantize_as(acc, quant_params->multiplier[oc], quant_params->shift[oc], ort_rounding);
                    acc += output_offset;
                    out[oc] = (int8_t)pockmcu_clamp_i32(acc, act_min, act_max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

POCKMCU_LOOPS_INLINE arm_cmsis_nn_status
pockmcu_depthwise_conv_s8_loops(const cmsis_nn_context *ctx,
                                const cmsis_nn_dw_conv_params *dw_conv_params,
                                const cmsis_nn_per_channel_quant_params *quant_params,
                                const cmsis_nn_dims *input_dims,
                                const int8_t *input_data,
                                const cmsis_nn_dims *filter_dims,
                                const int8_t *filter_data,
                                const cmsis_nn_dims *bias_dims,
                                const int32_t *bias_data,
                                const cmsis_nn_dims *output_dims,
                                int8_t *output_data,
                                const int32_t ort_rounding)
{
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t ch_mult = dw_conv_params->ch_mult;
    const int32_t stride_h = dw_conv_params->stride.h;
    const int32_t stride_w = dw_conv_params->stride.w;
    const int32_t dil_h = dw_conv_params->dilation.h;
    const int32_t dil_w = dw_conv_params->dilation.w;
    const int32_t pad_h = dw_conv_params->padding.h;
    const int32_t pad_w = dw_conv_params->padding.w;
    const int32_t input_offset = dw_conv_params->input_offset;
    const int32_t output_offset = dw_conv_params->output_offset;
    const int32_t act_min = dw_conv_params->activation.min;
    const int32_t act_max = dw_conv_params->activation.max;
    int32_t b, oy, ox, oc;

    (void)ctx;
    (void)bias_dims;

    if (ch_mult < 1 || out_c != in_c * ch_mult || stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    for (b = 0; b < batches; b++)
    {
        const int8_t *in_batch = input_data + (int32_t)b * in_h * in_w * in_c;
        for (oy = 0; oy < out_h; oy++)
        {
            const int32_t in_y0 = oy * stride_h - pad_h;
            const int32_t ky_start = pockmcu_window_start(in_y0, dil_h);
            const int32_t ky_end = pockmcu_window_end(in_y0, dil_h, in_h, k_h);
            for (ox = 0; ox < out_w; ox++)
            {
                const int32_t in_x0 = ox * stride_w - pad_w;
                const int32_t kx_start = pockmcu_window_start(in_x0, dil_w);
                const int32_t kx_end = pockmcu_window_end(in_x0, dil_w, in_w, k_w);
                int8_t *out = output_data + (((int32_t)b * out_h + oy) * out_w + ox) * out_c;

                for (oc = 0; oc < out_c; oc++)
                {
                    const int32_t ic = oc / ch_mult;
                    int32_t acc = 0;
                    int32_t ky, kx;

                    for (ky = ky_start; ky < ky_end; ky++)
                    {
                        const int32_t in_y = in_y0 + ky * dil_h;
                        const int8_t *in_row = in_batch + in_y * in_w * in_c + ic;
                        const int8_t *w_row = filter_data + ky * k_w * out_c + oc;
                        for (kx = kx_start; kx < kx_end; kx++)
                        {
                            const int32_t in_x = in_x0 + kx * dil_w;
                            acc += (int32_t)w_row[kx * out_c] * ((int32_t)in_row[in_x * in_c] + input_offset);
                        }
                    }
                    if (bias_data != NULL)
                    {
                        acc += bias_data[oc];
                    }
                    acc =
                        pockmcu_requantize_as(acc, quant_params->multiplier[oc], quant_params->shift[oc], ort_rounding);
                    acc += output_offset;
                    out[oc] = (int8_t)pockmcu_clamp_i32(acc, act_min, act_max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

/* Fully connected, per-tensor (per_channel 0: multiplier[0], shift[0]) or per-channel (1: multiplier[o],
 * shift[o]) requantization; per_channel and ort_rounding are constants at every call and fold away. */
POCKMCU_LOOPS_INLINE arm_cmsis_nn_status pockmcu_fully_connected_s8_loops(const cmsis_nn_fc_params *fc_params,
                                                                          const int32_t *multiplier,
                                                                          const int32_t *shift,
                                                                          const int32_t per_channel,
                                                                          const cmsis_nn_dims *input_dims,
                                                                          const int8_t *input_data,
                                                                          const cmsis_nn_dims *filter_dims,
                                                                          const int8_t *filter_data,
                                                                          const int32_t *bias_data,
                                                                          const cmsis_nn_dims *output_dims,
                                                                          int8_t *output_data,
                                                                          const int32_t ort_rounding)
{
    const int32_t batches = input_dims->n;
    const int32_t accum_depth = filter_dims->n;
    const int32_t out_depth = output_dims->c;
    const int32_t input_offset = fc_params->input_offset;
    const int32_t filter_offset = fc_params->filter_offset;
    const int32_t output_offset = fc_params->output_offset;
    const int32_t act_min = fc_params->activation.min;
    const int32_t act_max = fc_params->activation.max;
    const int32_t mult0 = multiplier[0];
    const int32_t shift0 = shift[0];
    int32_t b, o, d;

    for (b = 0; b < batches; b++)
    {
        const int8_t *in = input_data + b * accum_depth;
        int8_t *out = output_data + b * out_depth;
        for (o = 0; o < out_depth; o++)
        {
            const int8_t *w = filter_data + o * accum_depth;
            int32_t acc = 0;
            for (d = 0; d < accum_depth; d++)
            {
                acc += ((int32_t)w[d] + filter_offset) * ((int32_t)in[d] + input_offset);
            }
            if (bias_data != NULL)
            {
                acc += bias_data[o];
            }
            acc = pockmcu_requantize_as(
                      acc, per_channel ? multiplier[o] : mult0, per_channel ? shift[o] : shift0, ort_rounding) +
                output_offset;
            out[o] = (int8_t)pockmcu_clamp_i32(acc, act_min, act_max);
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

/* The input gradient of a 2D convolution (pockmcu_conv_grad_input_f32 describes it); the first head_c
 * input channels of every filter tap are read from filter_head (rows of head_c) when head_c > 0. The
 * unsplit kernel passes NULL, 0 as constants, and the head code folds away. */
POCKMCU_LOOPS_INLINE arm_cmsis_nn_status pockmcu_conv_grad_input_f32_loops(const cmsis_nn_conv_params *conv_params,
                                                                           const cmsis_nn_dims *input_dims,
                                                                           const cmsis_nn_dims *filter_dims,
                                                                           const int8_t *filter,
                                                                           const int8_t *filter_head,
                                                                           const int32_t head_c,
                                                                           const float *filter_scale,
                                                                           const cmsis_nn_dims *output_dims,
                                                                           const float *grad_output,
                                                                           float *grad_input)
{
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t out_c = filter_dims->n;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t stride_h = conv_params->stride.h;
    const int32_t stride_w = conv_params->stride.w;
    const int32_t dil_h = conv_params->dilation.h;
    const int32_t dil_w = conv_params->dilation.w;
    const int32_t pad_h = conv_params->padding.h;
    const int32_t pad_w = conv_params->padding.w;
    int32_t b, oy, ox, ky, kx, o, c;

    if (filter_dims->c != in_c || output_dims->c != out_c || stride_h < 1 || stride_w < 1 || dil_h < 1 || dil_w < 1 ||
        batches < 0 || in_h < 0 || in_w < 0 || in_c < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    memset(grad_input, 0, (size_t)batches * (size_t)in_h * (size_t)in_w * (size_t)in_c * sizeof(float));

    for (b = 0; b < batches; b++)
    {
        for (oy = 0; oy < out_h; oy++)
        {
            for (ox = 0; ox < out_w; ox++)
            {
                const float *go = grad_output + ((b * out_h + oy) * out_w + ox) * out_c;
                for (ky = 0; ky < k_h; ky++)
                {
                    const int32_t iy = oy * stride_h - pad_h + ky * dil_h;
                    if (iy < 0 || iy >= in_h)
                    {
                        continue;
                    }
                    for (kx = 0; kx < k_w; kx++)
                    {
                        const int32_t ix = ox * stride_w - pad_w + kx * dil_w;
                        float *gi;
                        if (ix < 0 || ix >= in_w)
                        {
                            continue;
                        }
                        gi = grad_input + ((b * in_h + iy) * in_w + ix) * in_c;
                        for (o = 0; o < out_c; o++)
                        {
                            const int32_t row = (o * k_h + ky) * k_w + kx;
                            const int8_t *w = filter + row * in_c;
                            float s;
                            if (go[o] == 0.0f)
                            {
                                continue;
                            }
                            s = go[o] * filter_scale[o];
                            if (head_c > 0)
                            {
                                const int8_t *wh = filter_head + row * head_c;
                                for (c = 0; c < head_c; c++)
                                {
                                    gi[c] += s * (float)wh[c];
                                }
                            }
                            for (c = head_c; c < in_c; c++)
                            {
                                gi[c] += s * (float)w[c];
                            }
                        }
                    }
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}

#endif /* POCKMCU_LAYER_LOOPS_H */
