/*
 * pockmcu_conv_1x1_grad_from_mean_f32 - backward of a 1x1 convolution whose
 * output feeds a spatial mean (MEAN over H, W, or an average pool whose one
 * window is the whole input), without the broadcast gradient tensor.
 *
 * The mean's input gradient is its output gradient divided by the count,
 * the same at every position; the unfused backward writes it out whole
 * (N x H x W x C_out floats) before masking it. Here it is formed element by
 * element where it is read:
 *
 *   dz[n,p,o] = (bit (p * C_out + o) of mask) ? grad_mean[n,o] / (float)(H*W) : 0.0f
 *
 * then, if bias != NULL, the bias update of pockmcu_bias_update_s32 on dz
 * (sums over n, p ascending from +0, in chunks of 16 channels), and, if
 * grad_input != NULL, the input gradient of pockmcu_conv_grad_input_f32 for a
 * 1x1 filter with stride 1 and no padding:
 *
 *   grad_input[n,p,c] = sum over o ascending, from +0, skipping dz == 0, of
 *                       (dz[n,p,o] * filter_scale[o]) * (float)filter[o,c]
 *
 * Every float operation is the one the unfused sequence (pockmcu_mean_grad_f32
 * or pockmcu_avgpool_grad_f32, pockmcu_mask_apply_f32, pockmcu_bias_update_s32,
 * pockmcu_conv_grad_input_f32) performs, in the same order, so the results are
 * bit-identical; the sign of a zero gradient may differ, which none of them
 * can observe. output_dims: the convolution's output (= the mean's input);
 * filter_dims: C_out x 1 x 1 x C_in. No scratch buffer.
 */
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

#define POCKMCU_BIAS_CHUNK 16

static float masked_mean_grad(const float *grad_mean, const uint8_t *mask, int32_t k, int32_t o, float count)
{
    return ((mask[k >> 3] >> (k & 7)) & 1u) != 0u ? grad_mean[o] / count : 0.0f;
}

/* Up to 32 mask bits starting at bit k (bit k in bit 0), reading only bytes that hold them. */
static uint32_t mask_bits(const uint8_t *mask, int32_t k, int32_t n)
{
    const uint8_t *m = mask + (k >> 3);
    const int32_t sh = k & 7;
    const int32_t nbytes = (sh + n + 7) >> 3;
    uint64_t v = 0;
    int32_t i;
    for (i = 0; i < nbytes; i++)
    {
        v |= (uint64_t)m[i] << (8 * i);
    }
    v >>= sh;
    return n >= 32 ? (uint32_t)v : (uint32_t)v & ((1u << n) - 1u);
}

/* grad_input of np (1..4) consecutive pixels, output channels [o0, o0 + len) (len <= 32, their scaled gradients
 * s_o = (grad_mean[o] / count) * filter_scale[o] in s), rows of in_c floats from gi (fully written), their mask
 * bits starting at k0 (pixel q's bit for channel o is k0 + q * out_c + o). The term
 * t = ((grad_mean[o] / count) * filter_scale[o]) * (float)filter[o][c] is the same for every pixel;
 * each pixel whose mask bit is set adds it, o ascending from +0, exactly the unfused sum (which skips
 * the pixels whose dz is 0: those add nothing). Output channels run in chunks of 32: the chunk's
 * s_o = dz * scale on the stack, each pixel's 32 mask bits in a register; the sums stay in gi between
 * chunks. Register block: 4 pixels x 4 channels. */
static void from_mean_pixels_branch(const float *s,
                                    const uint8_t *mask,
                                    int32_t k0,
                                    int32_t np,
                                    int32_t o0,
                                    int32_t len,
                                    const int8_t *filter,
                                    int32_t out_c,
                                    int32_t in_c,
                                    float *gi)
{
    uint32_t mw[4];
    int32_t q, c, o;

    {
        const int32_t first = o0 == 0;
        for (q = 0; q < 4; q++)
        {
            mw[q] = q < np ? mask_bits(mask, k0 + q * out_c + o0, len) : 0u;
        }
        for (c = 0; c + 4 <= in_c; c += 4)
        {
            float a[4][4];
            uint32_t m0 = mw[0], m1 = mw[1], m2 = mw[2], m3 = mw[3];
            const int8_t *wp = filter + o0 * in_c + c;
            for (q = 0; q < 4; q++)
            {
                int32_t j;
                for (j = 0; j < 4; j++)
                {
                    a[q][j] = (first || q >= np) ? 0.0f : gi[q * in_c + c + j];
                }
            }
            {
                float a00 = a[0][0], a01 = a[0][1], a02 = a[0][2], a03 = a[0][3];
                float a10 = a[1][0], a11 = a[1][1], a12 = a[1][2], a13 = a[1][3];
                float a20 = a[2][0], a21 = a[2][1], a22 = a[2][2], a23 = a[2][3];
                float a30 = a[3][0], a31 = a[3][1], a32 = a[3][2], a33 = a[3][3];
                for (o = 0; o < len; o++)
                {
                    const float so = s[o];
                    if (((m0 | m1 | m2 | m3) & 1u) == 0u) /* no pixel takes this term */
                    {
                        m0 >>= 1;
                        m1 >>= 1;
                        m2 >>= 1;
                        m3 >>= 1;
                        wp += in_c;
                        continue;
                    }
                    const float t0 = so * (float)wp[0];
                    const float t1 = so * (float)wp[1];
                    const float t2 = so * (float)wp[2];
                    const float t3 = so * (float)wp[3];
                    wp += in_c;
                    if (m0 & 1u)
                    {
                        a00 += t0;
                        a01 += t1;
                        a02 += t2;
                        a03 += t3;
                    }
                    if (m1 & 1u)
                    {
                        a10 += t0;
                        a11 += t1;
                        a12 += t2;
                        a13 += t3;
                    }
                    if (m2 & 1u)
                    {
                        a20 += t0;
                        a21 += t1;
                        a22 += t2;
                        a23 += t3;
                    }
                    if (m3 & 1u)
                    {
                        a30 += t0;
                        a31 += t1;
                        a32 += t2;
                        a33 += t3;
                    }
                    m0 >>= 1;
                    m1 >>= 1;
                    m2 >>= 1;
                    m3 >>= 1;
                }
                a[0][0] = a00, a[0][1] = a01, a[0][2] = a02, a[0][3] = a03;
                a[1][0] = a10, a[1][1] = a11, a[1][2] = a12, a[1][3] = a13;
                a[2][0] = a20, a[2][1] = a21, a[2][2] = a22, a[2][3] = a23;
                a[3][0] = a30, a[3][1] = a31, a[3][2] = a32, a[3][3] = a33;
            }
            for (q = 0; q < np; q++)
            {
                int32_t j;
                for (j = 0; j < 4; j++)
                {
                    gi[q * in_c + c + j] = a[q][j];
                }
            }
        }
        for (; c < in_c; c++) /* channel tail */
        {
            for (q = 0; q < np; q++)
            {
                uint32_t m = mw[q];
                float acc = first ? 0.0f : gi[q * in_c + c];
                const int8_t *wp = filter + o0 * in_c + c;
                for (o = 0; o < len; o++)
                {
                    if (m & 1u)
                    {
                        acc += s[o] * (float)*wp;
                    }
                    m >>= 1;
                    wp += in_c;
                }
                gi[q * in_c + c] = acc;
            }
        }
    }
}

#if defined(__GNUC__) || defined(__clang__)
    #define POCKMCU_FROM_MEAN_OUT_OF_LINE __attribute__((noinline)) /* its loops get the registers to themselves */
#else
    #define POCKMCU_FROM_MEAN_OUT_OF_LINE
#endif

/* 2^120: a scaled gradient below it in magnitude times an int8 weight (|w| <= 128) stays finite. */
#define POCKMCU_FROM_MEAN_FINITE 1.329228e36f

/* from_mean_pixels_branch's sums without its branches, for np (1..8) pixels: the term of pixel q and channel o
 * is added as t * m[o][q] with m = 1.0f where the mask bit is set and 0.0f elsewhere (pockmcu_mla_f32: the
 * product, exact, then the add). t * 1.0f = t, so a pixel whose bit is set adds the same term in the same order;
 * a pixel whose bit is clear adds +-0, which leaves every sum that starts at +0 unchanged (such a sum is never
 * -0: x + y rounds to -0 only when both are -0), so the bits are those of the skipping loop. Needs every term
 * finite (t * 0 would be a NaN): the caller runs this only when every |s_o| < 2^120. Register block 8 pixels x
 * 2 channels: per channel o, two VLDM of the 8 pixels' m, 2 weights converted, 2 products, 16 multiply-adds. */
static POCKMCU_FROM_MEAN_OUT_OF_LINE void from_mean_pixels_flat(const float *s,
                                                                const uint8_t *mask,
                                                                int32_t k0,
                                                                int32_t np,
                                                                int32_t o0,
                                                                int32_t len,
                                                                const int8_t *filter,
                                                                int32_t out_c,
                                                                int32_t in_c,
                                                                float *gi)
{
    float m[32 * 8];
    float *row[8];
    int32_t step[8]; /* row q = row q - 1 + step[q] (row 0 again from np on) */
    int32_t q, c, o;
    const int32_t first = o0 == 0;
    for (q = 0; q < 8; q++)
    {
        const uint32_t mw = q < np ? mask_bits(mask, k0 + q * out_c + o0, len) : 0u;
        for (o = 0; o < len; o++)
        {
            m[8 * o + q] = ((mw >> o) & 1u) != 0u ? 1.0f : 0.0f;
        }
        row[q] = gi + (q < np ? q : 0) * in_c; /* rows past np: read, never stored */
        step[q] = q > 0 && q < np ? in_c : (q == np ? -(np - 1) * in_c : 0);
    }
    for (c = 0; c + 2 <= in_c; c += 2)
    {
        float a00, a01, a10, a11, a20, a21, a30, a31, a40, a41, a50, a51, a60, a61, a70, a71;
        const int8_t *wp = filter + o0 * in_c + c;
        const float *mp = m;
        if (first)
        {
            a00 = a01 = a10 = a11 = a20 = a21 = a30 = a31 = 0.0f;
            a40 = a41 = a50 = a51 = a60 = a61 = a70 = a71 = 0.0f;
        }
        else
        {
            /* rows past np read row 0 (step 0): loaded, never stored */
            const float *r = gi + c;
            a00 = r[0], a01 = r[1], r += step[1], a10 = r[0], a11 = r[1], r += step[2];
            a20 = r[0], a21 = r[1], r += step[3], a30 = r[0], a31 = r[1], r += step[4];
            a40 = r[0], a41 = r[1], r += step[5], a50 = r[0], a51 = r[1], r += step[6];
            a60 = r[0], a61 = r[1], r += step[7], a70 = r[0], a71 = r[1];
        }
        for (o = 0; o < len; o++, wp += in_c, mp += 8)
        {
            float mv[4], mu[4];
            const float so = s[o];
            const float t0 = so * (float)wp[0];
            const float t1 = so * (float)wp[1];
            pockmcu_ld4_f32(mp, mv);
            a00 = pockmcu_mla_f32(a00, t0, mv[0]);
            a01 = pockmcu_mla_f32(a01, t1, mv[0]);
            a10 = pockmcu_mla_f32(a10, t0, mv[1]);
            a11 = pockmcu_mla_f32(a11, t1, mv[1]);
            a20 = pockmcu_mla_f32(a20, t0, mv[2]);
            a21 = pockmcu_mla_f32(a21, t1, mv[2]);
            a30 = pockmcu_mla_f32(a30, t0, mv[3]);
            a31 = pockmcu_mla_f32(a31, t1, mv[3]);
            pockmcu_ld4_f32_b(mp + 4, mu);
            a40 = pockmcu_mla_f32(a40, t0, mu[0]);
            a41 = pockmcu_mla_f32(a41, t1, mu[0]);
            a50 = pockmcu_mla_f32(a50, t0, mu[1]);
            a51 = pockmcu_mla_f32(a51, t1, mu[1]);
            a60 = pockmcu_mla_f32(a60, t0, mu[2]);
            a61 = pockmcu_mla_f32(a61, t1, mu[2]);
            a70 = pockmcu_mla_f32(a70, t0, mu[3]);
            a71 = pockmcu_mla_f32(a71, t1, mu[3]);
        }
        row[0][c] = a00, row[0][c + 1] = a01;
        if (np > 1)
        {
            row[1][c] = a10, row[1][c + 1] = a11;
        }
        if (np > 2)
        {
            row[2][c] = a20, row[2][c + 1] = a21;
        }
        if (np > 3)
        {
            row[3][c] = a30, row[3][c + 1] = a31;
        }
        if (np > 4)
        {
            row[4][c] = a40, row[4][c + 1] = a41;
        }
        if (np > 5)
        {
            row[5][c] = a50, row[5][c + 1] = a51;
        }
        if (np > 6)
        {
            row[6][c] = a60, row[6][c + 1] = a61;
        }
        if (np > 7)
        {
            row[7][c] = a70, row[7][c + 1] = a71;
        }
    }
    for (; c < in_c; c++) /* odd channel */
    {
        for (q = 0; q < np; q++)
        {
            float acc = first ? 0.0f : gi[q * in_c + c];
            const int8_t *wp = filter + o0 * in_c + c;
            for (o = 0; o < len; o++, wp += in_c)
            {
                acc = pockmcu_mla_f32(acc, s[o] * (float)*wp, m[8 * o + q]);
            }
            gi[q * in_c + c] = acc;
        }
    }
}

/* The set bits of w. */
static uint32_t from_mean_popcount(uint32_t w)
{
    w = w - ((w >> 1) & 0x55555555u);
    w = (w & 0x33333333u) + ((w >> 2) & 0x33333333u);
    w = (w + (w >> 4)) & 0x0F0F0F0Fu;
    return (w * 0x01010101u) >> 24;
}

/* Whether at least 1 in 5 of the mask bits of the np pixels x len channels is set: the branchless loops then cost
 * less than the branching ones, which skip the channels no pixel of a group of 4 takes (they win on sparser
 * masks). Either way the same bits. */
static int32_t from_mean_dense(const uint8_t *mask, int32_t k0, int32_t np, int32_t o0, int32_t len, int32_t out_c)
{
    uint32_t set = 0u;
    int32_t q;
    for (q = 0; q < np; q++)
    {
        set += from_mean_popcount(mask_bits(mask, k0 + q * out_c + o0, len));
    }
    return (int32_t)set * 5 >= np * len;
}

/* grad_input of np (1..8) consecutive pixels: per chunk of 32 output channels, from_mean_pixels_flat when every
 * scaled gradient of the chunk is below 2^120 in magnitude and the mask is dense enough (from_mean_dense), else
 * from_mean_pixels_branch's loops. */
static void from_mean_pixels(const float *gm,
                             const uint8_t *mask,
                             int32_t k0,
                             int32_t np,
                             float count,
                             const int8_t *filter,
                             const float *filter_scale,
                             int32_t out_c,
                             int32_t in_c,
                             float *gi)
{
    float s[32];
    int32_t o0, o;
    for (o0 = 0; o0 < out_c; o0 += 32)
    {
        const int32_t len = out_c - o0 < 32 ? out_c - o0 : 32;
        int32_t finite = 1;
        for (o = 0; o < len; o++)
        {
            s[o] = (gm[o0 + o] / count) * filter_scale[o0 + o];
            finite &= s[o] < POCKMCU_FROM_MEAN_FINITE && s[o] > -POCKMCU_FROM_MEAN_FINITE;
        }
        if (finite && from_mean_dense(mask, k0, np, o0, len, out_c))
        {
            from_mean_pixels_flat(s, mask, k0, np, o0, len, filter, out_c, in_c, gi);
        }
        else
        {
            from_mean_pixels_branch(s, mask, k0, np < 4 ? np : 4, o0, len, filter, out_c, in_c, gi);
            if (np > 4)
            {
                from_mean_pixels_branch(s, mask, k0 + 4 * out_c, np - 4, o0, len, filter, out_c, in_c, gi + 4 * in_c);
            }
        }
    }
}

arm_cmsis_nn_status pockmcu_conv_1x1_grad_from_mean_f32(const cmsis_nn_dims *output_dims,
                                                        const float *grad_mean,
                                                        const uint8_t *mask,
                                                        const cmsis_nn_dims *filter_dims,
                                                        const int8_t *filter,
                                                        const float *filter_scale,
                                                        int32_t *bias,
                                                        const float *bias_coef,
                                                        float *accum,
                                                        float *velocity,
                                                        const pockmcu_optimizer *opt,
                                                        uint32_t *rng,
                                                        float *grad_input)
{
    const int32_t batches = output_dims->n;
    const int32_t hw = output_dims->h * output_dims->w;
    const int32_t out_c = output_dims->c;
    const int32_t in_c = filter_dims->c;
    const float count = (float)hw;
    int32_t b, p;

    if (filter_dims->n != out_c || filter_dims->h != 1 || filter_dims->w != 1 || batches < 0 || hw < 1 || in_c < 0)
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    if (bias != NULL)
    {
        float g[POCKMCU_BIAS_CHUNK];
        int32_t o0, t;
        for (o0 = 0; o0 < out_c; o0 += POCKMCU_BIAS_CHUNK)
        {
            const int32_t len = out_c - o0 < POCKMCU_BIAS_CHUNK ? out_c - o0 : POCKMCU_BIAS_CHUNK;
            for (t = 0; t < len; t++)
            {
                g[t] = 0.0f;
            }
            for (b = 0; b < batches; b++)
            {
                const float *gm = grad_mean + b * out_c;
                for (p = 0; p < hw; p++)
                {
                    const int32_t k0 = (b * hw + p) * out_c + o0;
                    for (t = 0; t < len; t++)
                    {
                        g[t] += masked_mean_grad(gm, mask, k0 + t, o0 + t, count);
                    }
                }
            }
            pockmcu_update_s32(bias + o0,
                               g,
                               len,
                               bias_coef + o0,
                               accum != NULL ? accum + o0 : NULL,
                               velocity != NULL ? velocity + o0 : NULL,
                               opt,
                               rng);
        }
    }

    if (grad_input != NULL)
    {
        for (b = 0; b < batches; b++)
        {
            for (p = 0; p < hw; p += 8)
            {
                const int32_t np = hw - p < 8 ? hw - p : 8;
                from_mean_pixels(grad_mean + b * out_c,
                                 mask,
                                 (b * hw + p) * out_c,
                                 np,
                                 count,
                                 filter,
                                 filter_scale,
                                 out_c,
                                 in_c,
                                 grad_input + (b * hw + p) * in_c);
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
