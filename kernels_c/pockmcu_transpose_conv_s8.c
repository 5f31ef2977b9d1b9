/*
 * pockmcu_transpose_conv_s8 - int8 transpose convolution (TFLite TRANSPOSE_CONV), bit-exact with
 * TFLite Micro's reference_integer_ops::TransposeConv.
 *
 * TFLM scatters every input element into an int32 output-sized buffer; this kernel gathers: output
 * (n, oy, ox, o) sums, for every tap (ky, kx) with oy + pad_h - ky = iy * stride_h and
 * ox + pad_w - kx = ix * stride_w inside the input, (input[n,iy,ix,c] + input_offset) * filter[o,ky,kx,c]
 * over c. Integer sums (wrapping as int32, like TFLM's accumulator) do not depend on the order, so the
 * result is the same without TFLM's scratch buffer. Then bias[o] is added (wrapping), the sum is
 * requantized with multiplier[o] / shift[o] (double rounding), output_offset is added and the result
 * is clamped to the activation range.
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_tflm.h"

arm_cmsis_nn_status pockmcu_transpose_conv_s8(const cmsis_nn_conv_params *conv_params,
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
    const int32_t batches = input_dims->n;
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t stride_h = conv_params->stride.h;
    const int32_t stride_w = conv_params->stride.w;
    const int32_t pad_h = conv_params->padding.h;
    const int32_t pad_w = conv_params->padding.w;
    const int32_t input_offset = conv_params->input_offset;
    const int32_t output_offset = conv_params->output_offset;
    const int32_t act_min = conv_params->activation.min;
    const int32_t act_max = conv_params->activation.max;
    int32_t b, oy, ox, o, ky, kx, c;

    (void)bias_dims;
    if (stride_h < 1 || stride_w < 1 || filter_dims->c != in_c || filter_dims->n != out_c || output_dims->n != batches)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }
    for (b = 0; b < batches; b++)
    {
        for (oy = 0; oy < out_h; oy++)
        {
            for (ox = 0; ox < out_w; ox++)
            {
                int8_t *out = output_data + ((b * out_h + oy) * out_w + ox) * out_c;
                for (o = 0; o < out_c; o++)
                {
                    int32_t acc = 0;
                    int32_t v;
                    for (ky = 0; ky < k_h; ky++)
                    {
                        const int32_t ty = oy + pad_h - ky;
                        int32_t iy;
                        if (ty < 0 || ty % stride_h != 0)
                        {
                            continue;
                        }
                        iy = ty / stride_h;
                        if (iy >= in_h)
                        {
                            continue;
                        }
                        for (kx = 0; kx < k_w; kx++)
                        {
                            const int32_t tx = ox + pad_w - kx;
                            const int8_t *x;
                            const int8_t *w;
                            int32_t ix;
                            if (tx < 0 || tx % stride_w != 0)
                            {
                                continue;
                            }
                            ix = tx / stride_w;
                            if (ix >= in_w)
                            {
                                continue;
                            }
                            x = input_data + ((b * in_h + iy) * in_w + ix) * in_c;
                            w = filter_data + ((o * k_h + ky) * k_w + kx) * in_c;
                            for (c = 0; c < in_c; c++)
                            {
                                acc = pockmcu_wrap_add(acc, ((int32_t)x[c] + input_offset) * (int32_t)w[c]);
                            }
                        }
                    }
                    if (bias_data != NULL)
                    {
                        acc = pockmcu_wrap_add(acc, bias_data[o]);
                    }
                    v = pockmcu_requantize(acc, quant_params->multiplier[o], quant_params->shift[o]) + output_offset;
                    out[o] = (int8_t)pockmcu_clamp_i32(v, act_min, act_max);
                }
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
