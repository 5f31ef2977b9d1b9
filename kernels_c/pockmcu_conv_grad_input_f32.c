/*
 * pockmcu_conv_grad_input_f32 - input gradient of a 2D convolution (float32).
 *
 * grad_input[n,h,w,c] = sum over (oh, ow, i, j, o) with
 *   h = oh*stride_h - pad_h + i*dil_h,  w = ow*stride_w - pad_w + j*dil_w
 * in bounds of grad_output[n,oh,ow,o] * filter_scale[o] * filter[o,i,j,c]
 * (gradient w.r.t. the real input; the real weight is filter_scale[o] * filter).
 * NHWC tensors, OHWI filter, input_dims->c == filter_dims->c (no groups),
 * output_dims->c == filter_dims->n. Padding = top/left, bottom/right implied.
 *
 * Summation order (fixed, the same on every target): grad_input is zeroed,
 * then for n, oh, ow, i, j, o (all ascending), c innermost:
 *   grad_input[n,h,w,c] += (grad_output[n,oh,ow,o] * filter_scale[o]) * (float)filter[o,i,j,c]
 * so each element sums its terms in (oh, ow, i, j, o) order starting from +0.
 * Terms with grad_output == 0 are skipped (bit-identical for finite scales).
 * The loops are pockmcu_conv_grad_input_f32_loops (pockmcu_layer_loops.h), shared with
 * pockmcu_conv_grad_input_split_f32.
 * grad_input is fully written. No scratch buffer.
 */
#include "pockmcu_layer_loops.h"
#include "pockmcu_train_fast.h"

arm_cmsis_nn_status pockmcu_conv_grad_input_f32(const cmsis_nn_conv_params *conv_params,
                                                const cmsis_nn_dims *input_dims,
                                                const cmsis_nn_dims *filter_dims,
                                                const int8_t *filter,
                                                const float *filter_scale,
                                                const cmsis_nn_dims *output_dims,
                                                const float *grad_output,
                                                float *grad_input)
{
    if (filter_dims->h == 1 && filter_dims->w == 1 && filter_dims->n > 0 && filter_dims->c == input_dims->c &&
        output_dims->c == filter_dims->n && conv_params->stride.h >= 1 && conv_params->stride.w >= 1 &&
        conv_params->dilation.h >= 1 && conv_params->dilation.w >= 1 && input_dims->n >= 0 && input_dims->h >= 0 &&
        input_dims->w >= 0 && input_dims->c >= 0)
    {
        pockmcu_conv_1x1_grad_input_fast(
            conv_params, input_dims, filter_dims, filter, NULL, 0, filter_scale, output_dims, grad_output, grad_input);
        return ARM_CMSIS_NN_SUCCESS;
    }
    return pockmcu_conv_grad_input_f32_loops(
        conv_params, input_dims, filter_dims, filter, NULL, 0, filter_scale, output_dims, grad_output, grad_input);
}
