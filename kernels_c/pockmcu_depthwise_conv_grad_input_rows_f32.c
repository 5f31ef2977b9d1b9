/*
 * pockmcu_depthwise_conv_grad_input_rows_f32 - input gradient of a stride-1
 * int8 depthwise convolution, row by row, able to run in place.
 *
 * Same result as pockmcu_depthwise_conv_grad_input_f32, bit for bit: every
 * element of grad_input is the float sum of the same terms
 * (grad_output[oc] * filter_scale[oc]) * filter[oc] in the same order (output
 * rows, then output columns, then the channel multiplier, ascending), gathered
 * per input row instead of scattered per output position.
 *
 * grad_input may be the same buffer as grad_output (in_dims == output_dims,
 * ch_mult 1): input row iy reads output rows iy + pad - (k_h - 1) * dil_h ..
 * iy + pad, so a finished row waits in a ring (ctx->buf) until no later row
 * reads the output row it overwrites. Channels are independent, so the rows
 * are gathered for a block of up to POCKMCU_DW_GRAD_ROWS_BLOCK input channels
 * at a time: the ring holds that many channels of max(1, (k_h - 1) * dil_h -
 * pad + 1) rows, the size pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size()
 * returns. Stride 1 only.
 */
#include <string.h>

#include "pockmcu_nn.h"
#include "pockmcu_train_fast.h"

/* Copy channels [c0, c0 + len) of ring row `row` to input row `row` of the gradient. */
static void store_row(float *gi_b,
                      const float *ring,
                      int32_t row,
                      int32_t rows,
                      int32_t in_w,
                      int32_t in_c,
                      int32_t c0,
                      int32_t len)
{
    const float *src = ring + (row % rows) * in_w * len;
    float *dst = gi_b + row * in_w * in_c + c0;
    int32_t ix;
    if (len == 4)
    {
        for (ix = 0; ix < in_w; ix++, dst += in_c, src += 4)
        {
            float v[4];
            pockmcu_ld4_f32(src, v);
            dst[0] = v[0];
            dst[1] = v[1];
            dst[2] = v[2];
            dst[3] = v[3];
        }
        return;
    }
    for (ix = 0; ix < in_w; ix++)
    {
        memcpy(dst + ix * in_c, src + ix * len, (size_t)len * sizeof(float));
    }
}

/* One input pixel of 4 channels from the scaled gradients: out[k] = the sum from +0 over r < n_rows
 * (output rows ascending), then kx = kx_hi down to kx_lo (output columns ascending), of
 * g_row[r][goff + (kx_hi - kx) * gstep + k] * w_row[r][kx * 4 + k], each product rounded before its addition
 * (pockmcu_mla_f32). row3 (kx_hi = 2, kx_lo = 0, gstep = 4): a row's three columns are 12 contiguous floats.
 * On a core with a single-precision FPU the sums stay in s0-s3 and each statement loads its gradients and
 * weights by VLDM and multiply-adds them by VMLA (the compiler cannot move the loads or copy the sums). */
POCKMCU_FAST_INLINE void dw_pixel(float out[4],
                                  const float *const *g_row,
                                  const float *const *w_row,
                                  int32_t n_rows,
                                  int32_t goff,
                                  int32_t kx_hi,
                                  int32_t kx_lo,
                                  int32_t gstep,
                                  int32_t row3)
{
    int32_t r, kx;
#if POCKMCU_VMLA_F32
    register float a0 __asm__("s0") = 0.0f;
    register float a1 __asm__("s1") = 0.0f;
    register float a2 __asm__("s2") = 0.0f;
    register float a3 __asm__("s3") = 0.0f;
    if (row3)
    {
        for (r = 0; r < n_rows; r++)
        {
            const float *g = g_row[r] + goff;
            const float *w = w_row[r];
            __asm__("vldmia %4, {s16-s27}\n\t"
                    "vldmia %5, {s4-s15}\n\t"
                    "vmla.f32 %0, s16, s12\n\t"
                    "vmla.f32 %1, s17, s13\n\t"
                    "vmla.f32 %2, s18, s14\n\t"
                    "vmla.f32 %3, s19, s15\n\t"
                    "vmla.f32 %0, s20, s8\n\t"
                    "vmla.f32 %1, s21, s9\n\t"
                    "vmla.f32 %2, s22, s10\n\t"
                    "vmla.f32 %3, s23, s11\n\t"
                    "vmla.f32 %0, s24, s4\n\t"
                    "vmla.f32 %1, s25, s5\n\t"
                    "vmla.f32 %2, s26, s6\n\t"
                    "vmla.f32 %3, s27, s7"
                    : "+t"(a0), "+t"(a1), "+t"(a2), "+t"(a3)
                    : "r"(g), "r"(w), "m"(*(const float(*)[12])g), "m"(*(const float(*)[12])w)
                    : "s4",
                      "s5",
                      "s6",
                      "s7",
                      "s8",
                      "s9",
                      "s10",
                      "s11",
                      "s12",
                      "s13",
                      "s14",
                      "s15",
                      "s16",
                      "s17",
                      "s18",
                      "s19",
                      "s20",
                      "s21",
                      "s22",
                      "s23",
                      "s24",
                      "s25",
                      "s26",
                      "s27");
        }
    }
    else
    {
        for (r = 0; r < n_rows; r++)
        {
            const float *g = g_row[r] + goff;
            const float *w = w_row[r] + kx_hi * 4;
            for (kx = kx_hi; kx >= kx_lo; kx--, g += gstep, w -= 4)
            {
                __asm__("vldmia %4, {s16-s19}\n\t"
                        "vldmia %5, {s20-s23}\n\t"
                        "vmla.f32 %0, s16, s20\n\t"
                        "vmla.f32 %1, s17, s21\n\t"
                        "vmla.f32 %2, s18, s22\n\t"
                        "vmla.f32 %3, s19, s23"
                        : "+t"(a0), "+t"(a1), "+t"(a2), "+t"(a3)
                        : "r"(g), "r"(w), "m"(*(const float(*)[4])g), "m"(*(const float(*)[4])w)
                        : "s16", "s17", "s18", "s19", "s20", "s21", "s22", "s23");
            }
        }
    }
#else
    float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
    (void)row3;
    for (r = 0; r < n_rows; r++)
    {
        const float *g = g_row[r] + goff;
        const float *w = w_row[r] + kx_hi * 4;
        for (kx = kx_hi; kx >= kx_lo; kx--, g += gstep, w -= 4)
        {
            a0 = pockmcu_mla_f32(a0, g[0], w[0]);
            a1 = pockmcu_mla_f32(a1, g[1], w[1]);
            a2 = pockmcu_mla_f32(a2, g[2], w[2]);
            a3 = pockmcu_mla_f32(a3, g[3], w[3]);
        }
    }
#endif
    out[0] = a0;
    out[1] = a1;
    out[2] = a2;
    out[3] = a3;
}

#if POCKMCU_VMLA_F32
/* dw_pixel for 3 kernel rows of 3 taps (row3, n_rows 3), the sums stored to dst[0..3]: one statement, the sums
 * in s28-s31 set to +0 and every product added by VMLA (rounded before its addition, as pockmcu_mla_f32), the
 * rows and taps in dw_pixel's order. */
POCKMCU_FAST_INLINE void dw_pixel3x3(float *dst,
                                     const float *g0,
                                     const float *g1,
                                     const float *g2,
                                     const float *w0,
                                     const float *w1,
                                     const float *w2)
{
    __asm__ volatile("vmov.f32 s28, %7\n\t"
                     "vmov.f32 s29, %7\n\t"
                     "vmov.f32 s30, %7\n\t"
                     "vmov.f32 s31, %7\n\t"
                     "vldmia %1, {s16-s27}\n\t"
                     "vldmia %4, {s4-s15}\n\t"
                     "vmla.f32 s28, s16, s12\n\t"
                     "vmla.f32 s29, s17, s13\n\t"
                     "vmla.f32 s30, s18, s14\n\t"
                     "vmla.f32 s31, s19, s15\n\t"
                     "vmla.f32 s28, s20, s8\n\t"
                     "vmla.f32 s29, s21, s9\n\t"
                     "vmla.f32 s30, s22, s10\n\t"
                     "vmla.f32 s31, s23, s11\n\t"
                     "vmla.f32 s28, s24, s4\n\t"
                     "vmla.f32 s29, s25, s5\n\t"
                     "vmla.f32 s30, s26, s6\n\t"
                     "vmla.f32 s31, s27, s7\n\t"
                     "vldmia %2, {s16-s27}\n\t"
                     "vldmia %5, {s4-s15}\n\t"
                     "vmla.f32 s28, s16, s12\n\t"
                     "vmla.f32 s29, s17, s13\n\t"
                     "vmla.f32 s30, s18, s14\n\t"
                     "vmla.f32 s31, s19, s15\n\t"
                     "vmla.f32 s28, s20, s8\n\t"
                     "vmla.f32 s29, s21, s9\n\t"
                     "vmla.f32 s30, s22, s10\n\t"
                     "vmla.f32 s31, s23, s11\n\t"
                     "vmla.f32 s28, s24, s4\n\t"
                     "vmla.f32 s29, s25, s5\n\t"
                     "vmla.f32 s30, s26, s6\n\t"
                     "vmla.f32 s31, s27, s7\n\t"
                     "vldmia %3, {s16-s27}\n\t"
                     "vldmia %6, {s4-s15}\n\t"
                     "vmla.f32 s28, s16, s12\n\t"
                     "vmla.f32 s29, s17, s13\n\t"
                     "vmla.f32 s30, s18, s14\n\t"
                     "vmla.f32 s31, s19, s15\n\t"
                     "vmla.f32 s28, s20, s8\n\t"
                     "vmla.f32 s29, s21, s9\n\t"
                     "vmla.f32 s30, s22, s10\n\t"
                     "vmla.f32 s31, s23, s11\n\t"
                     "vmla.f32 s28, s24, s4\n\t"
                     "vmla.f32 s29, s25, s5\n\t"
                     "vmla.f32 s30, s26, s6\n\t"
                     "vmla.f32 s31, s27, s7\n\t"
                     "vstmia %0, {s28-s31}"
                     :
                     : "r"(dst), "r"(g0), "r"(g1), "r"(g2), "r"(w0), "r"(w1), "r"(w2), "t"(0.0f)
                     : "s4",
                       "s5",
                       "s6",
                       "s7",
                       "s8",
                       "s9",
                       "s10",
                       "s11",
                       "s12",
                       "s13",
                       "s14",
                       "s15",
                       "s16",
                       "s17",
                       "s18",
                       "s19",
                       "s20",
                       "s21",
                       "s22",
                       "s23",
                       "s24",
                       "s25",
                       "s26",
                       "s27",
                       "s28",
                       "s29",
                       "s30",
                       "s31",
                       "memory");
}
#endif

/* The columns of a row of scaled gradients: out_w, after DW_SC_LEFT zero columns for the taps left of the
 * image and before zero columns for those right of it (input column in_w - 1 reads output column
 * in_w - 1 + pad_w at most). */
#define DW_SC_LEFT(k_w, dil_w, pad_w) ((k_w - 1) * dil_w > pad_w ? (k_w - 1) * dil_w - pad_w : 0)
#define DW_SC_COLS(in_w, out_w, k_w, dil_w, pad_w)                                                                     \
    (DW_SC_LEFT(k_w, dil_w, pad_w) + (in_w + pad_w > out_w ? in_w + pad_w : out_w))

/* Taps up to which the channel-multiplier-1 path converts the filter of 4 channels once (on the stack). */
#define POCKMCU_DW_FAST_TAPS 49

/* ch_mult 1, at most POCKMCU_DW_FAST_TAPS taps: 4 channels at a time (the ring holds 4 channels), each
 * element's sum gathered in a register over its taps in the order above (output rows, then columns,
 * ascending) from +0 and stored once: the same terms (grad_output * filter_scale) * filter in the same
 * order as the scatter, so the same bits. The filter of the 4 channels is converted to float once.
 * sc (NULL: unused): room for sc_rows = (k_h - 1) * dil_h + 1 rows of DW_SC_COLS columns of 4 floats:
 * out_w columns where each product grad_output * filter_scale of the 4 channels is formed once per output
 * element (the same float each tap formed before) when the first input row reading its output row starts,
 * between zero columns for the taps left and right of the image. An output row is read no more once
 * sc_rows later rows are scaled; in place, grad_output is read no later than without sc (earlier), so the
 * ring lag is unchanged. Every input pixel then takes all k_w taps of each valid kernel row: a tap in a
 * zero column adds +-0 (0 * a finite weight) to a sum that is never -0 (it starts at +0, and x + -x is
 * +0), which changes no bit, so the sums are those of the valid taps in the same order.
 * direct (sc != NULL; grad_input apart from grad_output, or in place with the same dims, where input row iy
 * overwrites output row iy once it is scaled): the sums are stored straight to grad_input, the ring unused. */
static void rows_mult1(const float *go_b,
                       float *gi_b,
                       float *ring,
                       int32_t rows,
                       int32_t lag,
                       float *sc,
                       int32_t sc_rows,
                       int32_t direct,
                       const int8_t *filter,
                       const float *filter_scale,
                       int32_t c0,
                       int32_t len,
                       int32_t in_h,
                       int32_t in_w,
                       int32_t in_c,
                       int32_t out_h,
                       int32_t out_w,
                       int32_t k_h,
                       int32_t k_w,
                       int32_t dil_h,
                       int32_t dil_w,
                       int32_t pad_h,
                       int32_t pad_w)
{
    float wf[POCKMCU_DW_FAST_TAPS * 4];
    float fs[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    int32_t written = 0;
    int32_t scaled = 0;                                        /* output rows [0, scaled) have been scaled into sc */
    const int32_t straight = direct && sc != NULL && len == 4; /* no ring: stored straight to grad_input */
    int32_t iy, ix, ky, kx, j;

    for (ky = 0; ky < k_h * k_w; ky++)
    {
        for (j = 0; j < 4; j++)
        {
            wf[ky * 4 + j] = j < len ? (float)filter[ky * in_c + c0 + j] : 0.0f;
        }
    }
    for (j = 0; j < len; j++)
    {
        fs[j] = filter_scale[c0 + j];
    }
    if (sc != NULL && len == 4) /* the zero columns (the image columns are written before they are read) */
    {
        memset(sc, 0, (size_t)(sc_rows * DW_SC_COLS(in_w, out_w, k_w, dil_w, pad_w) * 4) * sizeof(float));
    }
    for (iy = 0; iy < in_h; iy++)
    {
        float *gi = ring + (iy % rows) * in_w * len;
        int32_t last;
        if (len == 4 && sc != NULL)
        {
            /* the scaled gradients (grad_output * filter_scale) of the output rows this input row reads, each
             * product formed once (the same float the tap loops below would form), 4 floats per column */
            const int32_t oy_end = iy + pad_h < out_h ? iy + pad_h + 1 : out_h;
            const int32_t sw = DW_SC_COLS(in_w, out_w, k_w, dil_w, pad_w);
            const int32_t pl = DW_SC_LEFT(k_w, dil_w, pad_w);
            const int32_t row3 = k_w == 3 && dil_w == 1;
            float *dst = direct ? gi_b + iy * in_w * in_c + c0 : gi;
            const int32_t dstep = direct ? in_c : 4;
            const float *g_row[POCKMCU_DW_FAST_TAPS];
            const float *w_row[POCKMCU_DW_FAST_TAPS];
            int32_t n_rows = 0;
            for (; scaled < oy_end; scaled++)
            {
                const float *src = go_b + scaled * out_w * in_c + c0;
                float *d = sc + ((scaled % sc_rows) * sw + pl) * 4;
                const float fs0 = fs[0], fs1 = fs[1], fs2 = fs[2], fs3 = fs[3];
                for (ix = 0; ix < out_w; ix++, src += in_c, d += 4)
                {
                    float gv[4];
                    pockmcu_ld4_f32(src, gv);
                    d[0] = gv[0] * fs0;
                    d[1] = gv[1] * fs1;
                    d[2] = gv[2] * fs2;
                    d[3] = gv[3] * fs3;
                }
            }
            for (ky = k_h - 1; ky >= 0; ky--) /* the valid kernel rows (output rows ascending) */
            {
                const int32_t oy = iy + pad_h - ky * dil_h;
                if (oy >= 0 && oy < out_h)
                {
                    /* column of the tap kx = k_w - 1 of input column 0 */
                    g_row[n_rows] = sc + ((oy % sc_rows) * sw + pl + pad_w - (k_w - 1) * dil_w) * 4;
                    w_row[n_rows++] = wf + ky * k_w * 4;
                }
            }
            ix = 0;
#if POCKMCU_VMLA_F32
            if (row3 && n_rows == 3) /* 3x3 inside the image rows: a pixel's 36 taps in one statement */
            {
                const float *g0 = g_row[0], *g1 = g_row[1], *g2 = g_row[2];
                const float *w0 = w_row[0], *w1 = w_row[1], *w2 = w_row[2];
                for (; ix < in_w; ix++, dst += dstep, g0 += 4, g1 += 4, g2 += 4)
                {
                    dw_pixel3x3(dst, g0, g1, g2, w0, w1, w2);
                }
            }
#endif
            for (; ix < in_w; ix++, dst += dstep)
            {
                float a[4];
                dw_pixel(a, g_row, w_row, n_rows, ix * 4, k_w - 1, 0, dil_w * 4, row3);
                dst[0] = a[0];
                dst[1] = a[1];
                dst[2] = a[2];
                dst[3] = a[3];
            }
            if (straight)
            {
                continue; /* nothing waits in the ring */
            }
        }
        else if (len == 4)
        {
            /* the scales in registers (an array is reloaded every tap) */
            const float fs0 = fs[0], fs1 = fs[1], fs2 = fs[2], fs3 = fs[3];
            /* the valid kernel rows of this input row (output rows ascending) */
            const float *g_row[POCKMCU_DW_FAST_TAPS];
            const float *w_row[POCKMCU_DW_FAST_TAPS];
            int32_t n_rows = 0;
            for (ky = k_h - 1; ky >= 0; ky--)
            {
                const int32_t oy = iy + pad_h - ky * dil_h;
                if (oy >= 0 && oy < out_h)
                {
                    g_row[n_rows] = go_b + oy * out_w * in_c + c0;
                    w_row[n_rows++] = wf + ky * k_w * 4;
                }
            }
            for (ix = 0; ix < in_w; ix++)
            {
                /* kx with 0 <= ix + pad_w - kx * dil_w < out_w, taken descending (output columns ascending) */
                const int32_t u = ix + pad_w;
                const int32_t v = u - out_w + 1; /* kx >= ceil(v / dil_w) */
                const int32_t q_hi = dil_w == 1 ? u : u / dil_w;
                const int32_t kx_hi = q_hi < k_w - 1 ? q_hi : k_w - 1;
                const int32_t kx_lo = v <= 0 ? 0 : (dil_w == 1 ? v : (v + dil_w - 1) / dil_w);
                float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
                int32_t r;
                if (k_w == 3 && kx_lo == 0 && kx_hi == 2) /* all three columns: the taps unrolled */
                {
                    const int32_t step = dil_w * in_c;
                    for (r = 0; r < n_rows; r++)
                    {
                        const float *g = g_row[r] + (u - 2 * dil_w) * in_c;
                        const float *w = w_row[r];
                        float gv[4], wv[4];
                        pockmcu_ld4_f32(g, gv);
                        pockmcu_ld4_f32_b(w + 8, wv);
                        a0 = pockmcu_mla_f32(a0, gv[0] * fs0, wv[0]);
                        a1 = pockmcu_mla_f32(a1, gv[1] * fs1, wv[1]);
                        a2 = pockmcu_mla_f32(a2, gv[2] * fs2, wv[2]);
                        a3 = pockmcu_mla_f32(a3, gv[3] * fs3, wv[3]);
                        pockmcu_ld4_f32(g + step, gv);
                        pockmcu_ld4_f32_b(w + 4, wv);
                        a0 = pockmcu_mla_f32(a0, gv[0] * fs0, wv[0]);
                        a1 = pockmcu_mla_f32(a1, gv[1] * fs1, wv[1]);
                        a2 = pockmcu_mla_f32(a2, gv[2] * fs2, wv[2]);
                        a3 = pockmcu_mla_f32(a3, gv[3] * fs3, wv[3]);
                        pockmcu_ld4_f32(g + 2 * step, gv);
                        pockmcu_ld4_f32_b(w, wv);
                        a0 = pockmcu_mla_f32(a0, gv[0] * fs0, wv[0]);
                        a1 = pockmcu_mla_f32(a1, gv[1] * fs1, wv[1]);
                        a2 = pockmcu_mla_f32(a2, gv[2] * fs2, wv[2]);
                        a3 = pockmcu_mla_f32(a3, gv[3] * fs3, wv[3]);
                    }
                    gi[ix * 4] = a0;
                    gi[ix * 4 + 1] = a1;
                    gi[ix * 4 + 2] = a2;
                    gi[ix * 4 + 3] = a3;
                    continue;
                }
                for (r = 0; r < n_rows; r++)
                {
                    const float *g = g_row[r] + (u - kx_hi * dil_w) * in_c;
                    const float *w = w_row[r] + kx_hi * 4;
                    for (kx = kx_hi; kx >= kx_lo; kx--, g += dil_w * in_c, w -= 4)
                    {
                        float gv[4], wv[4];
                        pockmcu_ld4_f32(g, gv);
                        pockmcu_ld4_f32_b(w, wv);
                        a0 = pockmcu_mla_f32(a0, gv[0] * fs0, wv[0]);
                        a1 = pockmcu_mla_f32(a1, gv[1] * fs1, wv[1]);
                        a2 = pockmcu_mla_f32(a2, gv[2] * fs2, wv[2]);
                        a3 = pockmcu_mla_f32(a3, gv[3] * fs3, wv[3]);
                    }
                }
                gi[ix * 4] = a0;
                gi[ix * 4 + 1] = a1;
                gi[ix * 4 + 2] = a2;
                gi[ix * 4 + 3] = a3;
            }
        }
        for (ix = 0; ix < in_w && len < 4; ix++)
        {
            float a0 = 0.0f, a1 = 0.0f, a2 = 0.0f, a3 = 0.0f;
            for (ky = k_h - 1; ky >= 0; ky--) /* output rows ascending */
            {
                const int32_t oy = iy + pad_h - ky * dil_h;
                if (oy < 0 || oy >= out_h)
                {
                    continue;
                }
                for (kx = k_w - 1; kx >= 0; kx--) /* output columns ascending */
                {
                    const int32_t ox = ix + pad_w - kx * dil_w;
                    const float *g;
                    const float *w;
                    if (ox < 0 || ox >= out_w)
                    {
                        continue;
                    }
                    g = go_b + (oy * out_w + ox) * in_c + c0;
                    w = wf + (ky * k_w + kx) * 4;
                    if (len == 4)
                    {
                        a0 = pockmcu_mla_f32(a0, g[0] * fs[0], w[0]);
                        a1 = pockmcu_mla_f32(a1, g[1] * fs[1], w[1]);
                        a2 = pockmcu_mla_f32(a2, g[2] * fs[2], w[2]);
                        a3 = pockmcu_mla_f32(a3, g[3] * fs[3], w[3]);
                    }
                    else
                    {
                        a0 = pockmcu_mla_f32(a0, g[0] * fs[0], w[0]);
                        if (len > 1)
                        {
                            a1 = pockmcu_mla_f32(a1, g[1] * fs[1], w[1]);
                        }
                        if (len > 2)
                        {
                            a2 = pockmcu_mla_f32(a2, g[2] * fs[2], w[2]);
                        }
                    }
                }
            }
            gi[ix * len] = a0;
            if (len > 1)
            {
                gi[ix * len + 1] = a1;
            }
            if (len > 2)
            {
                gi[ix * len + 2] = a2;
            }
            if (len > 3)
            {
                gi[ix * len + 3] = a3;
            }
        }
        last = iy + lag < iy ? iy + lag : iy;
        for (; written <= last && written < in_h; written++)
        {
            store_row(gi_b, ring, written, rows, in_w, in_c, c0, len);
        }
    }
    for (; written < in_h && !straight; written++)
    {
        store_row(gi_b, ring, written, rows, in_w, in_c, c0, len);
    }
}

arm_cmsis_nn_status pockmcu_depthwise_conv_grad_input_rows_f32(const cmsis_nn_context *ctx,
                                                               const cmsis_nn_dw_conv_params *dw_conv_params,
                                                               const cmsis_nn_dims *input_dims,
                                                               const cmsis_nn_dims *filter_dims,
                                                               const int8_t *filter,
                                                               const float *filter_scale,
                                                               const cmsis_nn_dims *output_dims,
                                                               const float *grad_output,
                                                               float *grad_input)
{
    const int32_t in_h = input_dims->h;
    const int32_t in_w = input_dims->w;
    const int32_t in_c = input_dims->c;
    const int32_t ch_mult = dw_conv_params->ch_mult;
    const int32_t out_c = filter_dims->c;
    const int32_t k_h = filter_dims->h;
    const int32_t k_w = filter_dims->w;
    const int32_t out_h = output_dims->h;
    const int32_t out_w = output_dims->w;
    const int32_t dil_h = dw_conv_params->dilation.h;
    const int32_t dil_w = dw_conv_params->dilation.w;
    const int32_t pad_h = dw_conv_params->padding.h;
    const int32_t pad_w = dw_conv_params->padding.w;
    /* input rows up to iy + lag are final once input row iy is (their output rows are read no more) */
    const int32_t lag = pad_h - (k_h - 1) * dil_h;
    /* the ring: input rows iy + lag .. iy, at least one (the rows get_buffer_size counts) */
    const int32_t rows = lag < 0 ? 1 - lag : 1;
    const int32_t block = in_c < POCKMCU_DW_GRAD_ROWS_BLOCK ? in_c : POCKMCU_DW_GRAD_ROWS_BLOCK;
    float *ring = (float *)ctx->buf;
    /* the scaled-gradient rows of the ch_mult 1 path, after its ring (4 channels) when ctx->buf holds both */
    const int32_t sc_rows = (k_h - 1) * dil_h + 1;
    float *sc = NULL;
    int32_t b, c0;

    if (ch_mult < 1 || in_c * ch_mult != out_c || output_dims->c != out_c || dw_conv_params->stride.h != 1 ||
        dw_conv_params->stride.w != 1 || dil_h < 1 || dil_w < 1 || ring == NULL ||
        ctx->size < pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size(dw_conv_params, input_dims, filter_dims))
    {
        return ARM_CMSIS_NN_ARG_ERROR;
    }

    int32_t direct = 0;
    if (ch_mult == 1 &&
        ctx->size / (int32_t)sizeof(float) >= (rows * in_w + sc_rows * DW_SC_COLS(in_w, out_w, k_w, dil_w, pad_w)) * 4)
    {
        const size_t n_in = (size_t)input_dims->n * (size_t)(in_h * in_w * in_c);
        const size_t n_out = (size_t)input_dims->n * (size_t)(out_h * out_w * out_c);
        sc = ring + rows * in_w * 4;
        /* grad_input apart from grad_output (compared as addresses), or in place with the same dims: input row
         * iy is written after output rows up to iy + pad_h >= iy are scaled, and it is output row iy's memory */
        direct = (uintptr_t)(grad_input + n_in) <= (uintptr_t)grad_output ||
            (uintptr_t)(grad_output + n_out) <= (uintptr_t)grad_input ||
            (grad_input == grad_output && in_h == out_h && in_w == out_w);
    }
    for (b = 0; b < input_dims->n; b++)
    {
        const float *go_b = grad_output + (int32_t)b * out_h * out_w * out_c;
        float *gi_b = grad_input + (int32_t)b * in_h * in_w * in_c;
        if (ch_mult == 1 && k_h * k_w <= POCKMCU_DW_FAST_TAPS)
        {
            for (c0 = 0; c0 < in_c; c0 += 4)
            {
                rows_mult1(go_b,
                           gi_b,
                           ring,
                           rows,
                           lag,
                           sc,
                           sc_rows,
                           direct,
                           filter,
                           filter_scale,
                           c0,
                           in_c - c0 < 4 ? in_c - c0 : 4,
                           in_h,
                           in_w,
                           in_c,
                           out_h,
                           out_w,
                           k_h,
                           k_w,
                           dil_h,
                           dil_w,
                           pad_h,
                           pad_w);
            }
            continue;
        }
        for (c0 = 0; c0 < in_c; c0 += block)
        {
            const int32_t len = in_c - c0 < block ? in_c - c0 : block;
            int32_t written = 0; /* input rows [0, written) of this block are stored */
            int32_t iy;
            for (iy = 0; iy < in_h; iy++)
            {
                float *gi = ring + (iy % rows) * in_w * len;
                int32_t ky, kx, ix, t, m, last;
                memset(gi, 0, (size_t)(in_w * len) * sizeof(float));
                for (ky = k_h - 1; ky >= 0; ky--) /* output rows ascending */
                {
                    const int32_t oy = iy + pad_h - ky * dil_h;
                    if (oy < 0 || oy >= out_h)
                    {
                        continue;
                    }
                    for (kx = k_w - 1; kx >= 0; kx--) /* output columns ascending */
                    {
                        const int8_t *w = filter + (ky * k_w + kx) * out_c + c0 * ch_mult;
                        const float *fs = filter_scale + c0 * ch_mult;
                        for (ix = 0; ix < in_w; ix++)
                        {
                            const int32_t ox = ix + pad_w - kx * dil_w;
                            const float *go;
                            float *g;
                            if (ox < 0 || ox >= out_w)
                            {
                                continue;
                            }
                            go = go_b + (oy * out_w + ox) * out_c + c0 * ch_mult;
                            g = gi + ix * len;
                            for (t = 0; t < len; t++)
                            {
                                for (m = 0; m < ch_mult; m++)
                                {
                                    const int32_t oc = t * ch_mult + m;
                                    g[t] += (go[oc] * fs[oc]) * (float)w[oc];
                                }
                            }
                        }
                    }
                }
                last = iy + lag < iy ? iy + lag : iy;
                for (; written <= last && written < in_h; written++)
                {
                    store_row(gi_b, ring, written, rows, in_w, in_c, c0, len);
                }
            }
            for (; written < in_h; written++)
            {
                store_row(gi_b, ring, written, rows, in_w, in_c, c0, len);
            }
        }
    }
    return ARM_CMSIS_NN_SUCCESS;
}
