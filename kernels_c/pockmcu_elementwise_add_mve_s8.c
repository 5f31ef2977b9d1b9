/*
 * pockmcu_elementwise_add_mve_s8 - int8 element-wise add of two same-shape tensors for Helium (Armv8.1-M MVE,
 * Cortex-M55), the CMSIS-NN API and bytes of arm_elementwise_add_s8 (TFLM reference_integer_ops AddFunc).
 *
 * On a core with integer MVE: four elements per int32 vector (widening byte loads), (x + offset) << left_shift
 * by VSHL (wrapping, as the portable pockmcu_wrap_shl), the three per-tensor requantizations by
 * pockmcu_mve_requantize_n (VQRDMULH and the rounding right shift with the round-half-away fix-up: the bits of
 * pockmcu_requantize for every shift), wrapping int32 adds (VADD), clamp, narrowing store; the last block of
 * fewer than four elements is predicated. A left_shift outside [0, 31] (the portable C shift would be undefined)
 * runs the portable kernel.
 *
 * Elsewhere (cores without MVE, the host simulation) this function is arm_elementwise_add_s8 itself, so a model's
 * host simulation equals its run on Cortex-M55 (tests/test_mve_kernels.py compares both on random cases).
 */
#include "pockmcu_nn.h"
#include "pockmcu_nn_support_mve.h"

#if POCKMCU_HAS_MVE

/* Four elements at x1, x2 (lanes of p only): the portable AddFunc arithmetic on int32 lanes. */
POCKMCU_MVE_INLINE int32x4_t pockmcu_mve_add4(const int8_t *x1,
                                              const int8_t *x2,
                                              mve_pred16_t p,
                                              const int32_t *k,
                                              int32_t input_1_offset,
                                              int32_t input_2_offset,
                                              int32_t left_shift,
                                              int32_t out_offset,
                                              int32_t act_min,
                                              int32_t act_max)
{
    int32x4_t a = vshlq_r_s32(vaddq_n_s32(vldrbq_z_s32(x1, p), input_1_offset), left_shift);
    int32x4_t b = vshlq_r_s32(vaddq_n_s32(vldrbq_z_s32(x2, p), input_2_offset), left_shift);
    a = pockmcu_mve_requantize_n(a, k[0], k[1]);
    b = pockmcu_mve_requantize_n(b, k[2], k[3]);
    a = pockmcu_mve_requantize_n(vaddq_s32(a, b), k[4], k[5]);
    a = vaddq_n_s32(a, out_offset);
    return vminq_s32(vmaxq_s32(a, vdupq_n_s32(act_min)), vdupq_n_s32(act_max));
}

#endif /* POCKMCU_HAS_MVE */

arm_cmsis_nn_status pockmcu_elementwise_add_mve_s8(const int8_t *input_1_vect,
                                                   const int8_t *input_2_vect,
                                                   const int32_t input_1_offset,
                                                   const int32_t input_1_mult,
                                                   const int32_t input_1_shift,
                                                   const int32_t input_2_offset,
                                                   const int32_t input_2_mult,
                                                   const int32_t input_2_shift,
                                                   const int32_t left_shift,
                                                   int8_t *output,
                                                   const int32_t out_offset,
                                                   const int32_t out_mult,
                                                   const int32_t out_shift,
                                                   const int32_t out_activation_min,
                                                   const int32_t out_activation_max,
                                                   const int32_t block_size)
{
#if POCKMCU_HAS_MVE
    if (left_shift >= 0 && left_shift < 32)
    {
        const int32_t k[6] = {input_1_mult, input_1_shift, input_2_mult, input_2_shift, out_mult, out_shift};
        const mve_pred16_t all = vctp32q(4u);
        int32_t i;
        for (i = 0; i + 4 <= block_size; i += 4)
        {
            vstrbq_s32(output + i,
                       pockmcu_mve_add4(input_1_vect + i,
                                        input_2_vect + i,
                                        all,
                                        k,
                                        input_1_offset,
                                        input_2_offset,
                                        left_shift,
                                        out_offset,
                                        out_activation_min,
                                        out_activation_max));
        }
        if (i < block_size)
        {
            const mve_pred16_t p = vctp32q((uint32_t)(block_size - i));
            vstrbq_p_s32(output + i,
                         pockmcu_mve_add4(input_1_vect + i,
                                          input_2_vect + i,
                                          p,
                                          k,
                                          input_1_offset,
                                          input_2_offset,
                                          left_shift,
                                          out_offset,
                                          out_activation_min,
                                          out_activation_max),
                         p);
        }
        return ARM_CMSIS_NN_SUCCESS;
    }
#endif
    return arm_elementwise_add_s8(input_1_vect,
                                  input_2_vect,
                                  input_1_offset,
                                  input_1_mult,
                                  input_1_shift,
                                  input_2_offset,
                                  input_2_mult,
                                  input_2_shift,
                                  left_shift,
                                  output,
                                  out_offset,
                                  out_mult,
                                  out_shift,
                                  out_activation_min,
                                  out_activation_max,
                                  block_size);
}
