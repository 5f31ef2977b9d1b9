"""The fast paths of the backward / update kernels against straightforward loops in their documented order.

Each case runs a kernel and a plain C spelling of its header comment (the same float operations in the same
order, products rounded before their additions) on random shapes (odd channel counts, strides, dilations,
padding, in place and not, zero and dense gradients, all-zero / all-one / random masks), and compares the bytes
in C: the workload's first 4 bytes are 1 when every case matched. The workload runs on the host and in QEMU on
every core, whose bytes (the kernels' outputs) must be the host's: the VMLA / VLDM / VSEL paths of the FPU
cores, the portable C elsewhere.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from conftest import build_kernel_lib  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
KERNELS = REPO / "kernels_c"

KERNEL_FILES = ["pockmcu_depthwise_conv_grad_input_f32.c", "pockmcu_depthwise_conv_grad_input_rows_f32.c",
                "pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size.c", "pockmcu_mask_apply_f32.c",
                "pockmcu_bias_update_s32.c", "pockmcu_bias_update_bounded_s32.c", "pockmcu_bias_saturate_s32.c",
                "pockmcu_update_s32.c", "pockmcu_update_s8.c", "pockmcu_fully_connected_wgrad_update_s8.c",
                "pockmcu_conv_wgrad_update_s8.c", "pockmcu_conv_wgrad_update_s8_get_buffer_size.c",
                "pockmcu_stochastic_round.c", "pockmcu_xorshift32.c",
                "pockmcu_fully_connected_grad_input_f32.c"]

WORKLOAD_C = r"""
#include <string.h>

#include "pockmcu_nn.h"

static uint32_t rs = 2463534242u;
static uint32_t rnd(void)
{
    rs ^= rs << 13;
    rs ^= rs >> 17;
    rs ^= rs << 5;
    return rs;
}
static int32_t rndi(int32_t lo, int32_t hi) { return lo + (int32_t)(rnd() % (uint32_t)(hi - lo + 1)); }
static float rndf(void) { return (float)(int32_t)(rnd() >> 9) * 0x1p-22f - 1.0f; }
static void fill_s8(int8_t *p, int32_t n)
{
    for (int32_t i = 0; i < n; i++)
    {
        p[i] = (int8_t)rndi(-128, 127);
    }
}
/* zero_pct % of exact zeros (both signs), the rest of mixed magnitudes */
static void fill_f(float *p, int32_t n, int32_t zero_pct)
{
    for (int32_t i = 0; i < n; i++)
    {
        const int32_t z = (int32_t)(rnd() % 100u) < zero_pct;
        const float v = rndf(); /* (one draw per statement: the same sequence on every compiler) */
        const uint32_t r = rnd();
        p[i] = z ? ((r & 1u) ? -0.0f : 0.0f) : v * ((r & 14u) == 0u ? 300.0f : 1.0f);
    }
}

static uint32_t hash[8]; /* FNV-1a of the emitted bytes, 8 lanes by case number */
static int32_t ok = 1, bad_case = -1, case_no = 0;
static void emit(const void *p, int32_t n)
{
    const uint8_t *b = (const uint8_t *)p;
    uint32_t *h = &hash[case_no & 7];
    for (int32_t i = 0; i < n; i++)
    {
        *h = (*h ^ b[i]) * 16777619u;
    }
}
static void check(int cond)
{
    if (!cond && ok)
    {
        ok = 0;
        bad_case = case_no;
    }
}

static int8_t w8[8192], w8b[8192], xin[8192];
static float go[8192], gi[8192], gref[8192], scale[1024], buf[8192], coefs[1024];
static float vel1[8192], vel2[8192];
static uint8_t maskb[4096];
static int32_t bias1[1024], bias2[1024];

/* ---- depthwise input gradient: the scatter loops of pockmcu_depthwise_conv_grad_input_f32's header */
static void dw_ref(const cmsis_nn_dw_conv_params *p, const cmsis_nn_dims *in_d, const cmsis_nn_dims *f_d,
                   const cmsis_nn_dims *o_d, const float *g, float *out)
{
    const int32_t in_c = in_d->c, m_ = p->ch_mult, out_c = f_d->c;
    memset(out, 0, (size_t)(in_d->n * in_d->h * in_d->w * in_c) * sizeof(float));
    for (int32_t b = 0; b < in_d->n; b++)
        for (int32_t oy = 0; oy < o_d->h; oy++)
            for (int32_t ox = 0; ox < o_d->w; ox++)
                for (int32_t i = 0; i < f_d->h; i++)
                    for (int32_t j = 0; j < f_d->w; j++)
                    {
                        const int32_t iy = oy * p->stride.h - p->padding.h + i * p->dilation.h;
                        const int32_t ix = ox * p->stride.w - p->padding.w + j * p->dilation.w;
                        if (iy < 0 || iy >= in_d->h || ix < 0 || ix >= in_d->w)
                        {
                            continue;
                        }
                        for (int32_t ic = 0; ic < in_c; ic++)
                            for (int32_t m = 0; m < m_; m++)
                            {
                                const int32_t oc = ic * m_ + m;
                                const float t = g[((b * o_d->h + oy) * o_d->w + ox) * out_c + oc] * scale[oc];
                                float *e = &out[((b * in_d->h + iy) * in_d->w + ix) * in_c + ic];
                                *e = *e + t * (float)w8[(i * f_d->w + j) * out_c + oc];
                            }
                    }
}

static void dw_case(int32_t n, int32_t ih, int32_t iw, int32_t c, int32_t m, int32_t k, int32_t s, int32_t pad,
                    int32_t dil, int32_t zero_pct)
{
    cmsis_nn_dw_conv_params dp;
    cmsis_nn_dims in_d = {n, ih, iw, c}, f_d = {1, k, k, c * m}, o_d;
    const int32_t n_in = n * ih * iw * c;
    int32_t n_out;
    memset(&dp, 0, sizeof dp);
    dp.ch_mult = m;
    dp.stride.h = dp.stride.w = s;
    dp.dilation.h = dp.dilation.w = dil;
    dp.padding.h = dp.padding.w = pad;
    o_d.n = n;
    o_d.h = (ih + 2 * pad - (k - 1) * dil - 1) / s + 1;
    o_d.w = (iw + 2 * pad - (k - 1) * dil - 1) / s + 1;
    o_d.c = c * m;
    n_out = n * o_d.h * o_d.w * c * m;
    fill_s8(w8, k * k * c * m);
    for (int32_t i = 0; i < c * m; i++)
    {
        scale[i] = 0.001f + 0.05f * (rndf() + 1.0f);
    }
    fill_f(go, n_out, zero_pct);
    dw_ref(&dp, &in_d, &f_d, &o_d, go, gref);
    fill_f(gi, n_in, 0);
    check(pockmcu_depthwise_conv_grad_input_f32(&dp, &in_d, &f_d, w8, scale, &o_d, go, gi) == 0);
    check(memcmp(gi, gref, (size_t)n_in * sizeof(float)) == 0);
    emit(gi, n_in * (int32_t)sizeof(float));
    if (s == 1)
    {
        cmsis_nn_context ctx;
        const int32_t need = pockmcu_depthwise_conv_grad_input_rows_f32_get_buffer_size(&dp, &in_d, &f_d);
        for (int32_t extra = 0; extra <= 1; extra++) /* the asked size, and room for the scaled rows */
        {
            ctx.buf = buf;
            ctx.size = extra ? (int32_t)sizeof buf : need;
            fill_f(gi, n_in, 0);
            check(pockmcu_depthwise_conv_grad_input_rows_f32(&ctx, &dp, &in_d, &f_d, w8, scale, &o_d, go, gi) == 0);
            check(memcmp(gi, gref, (size_t)n_in * sizeof(float)) == 0);
            emit(gi, n_in * (int32_t)sizeof(float));
            if (m == 1 && n_in == n_out) /* in place */
            {
                memcpy(gi, go, (size_t)n_out * sizeof(float));
                check(pockmcu_depthwise_conv_grad_input_rows_f32(&ctx, &dp, &in_d, &f_d, w8, scale, &o_d, gi, gi) ==
                      0);
                check(memcmp(gi, gref, (size_t)n_in * sizeof(float)) == 0);
            }
        }
    }
    case_no++;
}

/* ---- mask apply */
static void mask_case(int32_t n, int32_t kind, int32_t goff)
{
    float *g = gi + goff;
    for (int32_t i = 0; i < (n + 7) / 8; i++)
    {
        maskb[i] = kind == 0 ? 0u : (kind == 1 ? 0xFFu : (uint8_t)(kind == 2 ? rnd() : (rnd() & rnd())));
    }
    fill_f(g, n, 20);
    memcpy(gref, g, (size_t)n * sizeof(float));
    for (int32_t k = 0; k < n; k++)
    {
        if (((maskb[k >> 3] >> (k & 7)) & 1u) == 0u)
        {
            gref[k] = 0.0f;
        }
    }
    g[n] = 7.0f; /* past the end: untouched */
    pockmcu_mask_apply_f32(g, maskb, n);
    check(memcmp(g, gref, (size_t)n * sizeof(float)) == 0 && g[n] == 7.0f);
    emit(g, n * (int32_t)sizeof(float));
    case_no++;
}

/* ---- the update rules spelled out (pockmcu_update_s8 / _s32 headers) */
static int8_t upd_s8(int8_t q, float g, float coef, const pockmcu_optimizer *opt, float *vel, uint32_t *r)
{
    int32_t v;
    g = g * coef;
    if (vel != NULL)
    {
        *vel = opt->momentum * *vel + g;
        g = *vel;
    }
    v = (int32_t)q + pockmcu_stochastic_round(-opt->lr * g, r);
    return (int8_t)(v > 127 ? 127 : (v < -127 ? -127 : v));
}

static void bias_case(int32_t positions, int32_t channels, int32_t zero_pct, int32_t limit, int momentum)
{
    pockmcu_optimizer opt = {0.7f, momentum ? 0.9f : 0.0f, 1, 1};
    uint32_t r1 = rnd(), r2 = r1;
    const int32_t hi = limit > 0 ? limit : 0;
    fill_f(go, positions * channels, zero_pct);
    for (int32_t o = 0; o < channels; o++)
    {
        const int32_t sh = rnd() & 1u ? 1 : 20;
        bias1[o] = bias2[o] = (int32_t)rnd() >> sh;
        coefs[o] = (rnd() & 3u) ? 1e3f * (rndf() + 1.0f) : 3e9f;
        vel1[o] = vel2[o] = rndf();
    }
    pockmcu_bias_update_bounded_s32(bias1, go, positions, channels, coefs, NULL, momentum ? vel1 : NULL, &opt, &r1,
                                    limit);
    for (int32_t o = 0; o < channels; o++)
    {
        float g = 0.0f;
        int64_t v;
        for (int32_t p = 0; p < positions; p++)
        {
            g += go[p * channels + o];
        }
        g = g * coefs[o];
        if (momentum)
        {
            vel2[o] = opt.momentum * vel2[o] + g;
            g = vel2[o];
        }
        v = (int64_t)bias2[o] + pockmcu_stochastic_round(-opt.lr * g, &r2);
        v = v > INT32_MAX ? INT32_MAX : (v < INT32_MIN ? INT32_MIN : v);
        bias2[o] = (int32_t)(v > hi ? hi : (v < -hi ? -hi : v));
    }
    check(memcmp(bias1, bias2, (size_t)channels * sizeof(int32_t)) == 0 && r1 == r2);
    check(!momentum || memcmp(vel1, vel2, (size_t)channels * sizeof(float)) == 0);
    emit(bias1, channels * (int32_t)sizeof(int32_t));
    case_no++;
}

static void fc_case(int32_t batches, int32_t k_ch, int32_t in_f, int32_t cb, int32_t out_f, int32_t off, int momentum,
                    int32_t zero_pct)
{
    cmsis_nn_dims in_d = {batches, 1, 1, k_ch}, f_d = {in_f, 1, 1, out_f};
    pockmcu_optimizer opt = {0.25f, momentum ? 0.9f : 0.0f, 1, 1};
    uint32_t r1 = rnd(), r2 = r1;
    fill_s8(xin, batches * k_ch);
    fill_s8(w8, out_f * in_f);
    memcpy(w8b, w8, (size_t)(out_f * in_f));
    fill_f(go, batches * out_f, zero_pct);
    for (int32_t o = 0; o < out_f; o++)
    {
        coefs[o] = 10.0f * (rndf() + 1.1f);
    }
    for (int32_t i = 0; i < out_f * k_ch; i++)
    {
        vel1[i] = vel2[i] = rndf();
    }
    check(pockmcu_fully_connected_wgrad_update_s8(&in_d, xin, off, &f_d, w8, cb, go, coefs, NULL,
                                                  momentum ? vel1 : NULL, &opt, &r1) == 0);
    for (int32_t o = 0; o < out_f; o++)
    {
        for (int32_t i = 0; i < k_ch; i++)
        {
            float g = 0.0f;
            for (int32_t b = 0; b < batches; b++)
            {
                g += go[b * out_f + o] * (float)((int32_t)xin[b * k_ch + i] + off);
            }
            w8b[o * in_f + cb + i] = upd_s8(w8b[o * in_f + cb + i], g, coefs[o], &opt,
                                            momentum ? &vel2[o * k_ch + i] : NULL, &r2);
        }
    }
    check(memcmp(w8, w8b, (size_t)(out_f * in_f)) == 0 && r1 == r2);
    check(!momentum || memcmp(vel1, vel2, (size_t)(out_f * k_ch) * sizeof(float)) == 0);
    emit(w8, out_f * in_f);
    case_no++;
}

/* ---- FC input gradient: grad_input zeroed, then for b, o ascending (go == 0 skipped), i innermost */
static void fc_gi_case(int32_t batches, int32_t in_f, int32_t out_f, int32_t off, int32_t zero_pct)
{
    cmsis_nn_dims in_d = {batches, 1, 1, in_f}, f_d = {in_f, 1, 1, out_f};
    fill_s8(w8, out_f * in_f);
    fill_f(go, batches * out_f, zero_pct);
    for (int32_t o = 0; o < out_f; o++)
    {
        scale[o] = 0.001f + 0.05f * (rndf() + 1.0f);
    }
    memset(gref, 0, (size_t)(batches * in_f) * sizeof(float));
    for (int32_t b = 0; b < batches; b++)
        for (int32_t o = 0; o < out_f; o++)
        {
            const float g = go[b * out_f + o];
            if (g == 0.0f)
            {
                continue;
            }
            for (int32_t i = 0; i < in_f; i++)
            {
                float *e = &gref[b * in_f + i];
                *e = *e + (g * scale[o]) * (float)((int32_t)w8[o * in_f + i] + off);
            }
        }
    fill_f(gi, batches * in_f, 0);
    check(pockmcu_fully_connected_grad_input_f32(&in_d, &f_d, w8, off, scale, go, gi) == 0);
    check(memcmp(gi, gref, (size_t)(batches * in_f) * sizeof(float)) == 0);
    emit(gi, batches * in_f * (int32_t)sizeof(float));
    case_no++;
}

/* ---- conv weight gradient + update: pockmcu_conv_wgrad_update_s8's header loops */
static void wgrad_case(int32_t n, int32_t ih, int32_t iw, int32_t k_ch, int32_t cin, int32_t cb, int32_t cout,
                       int32_t k, int32_t s, int32_t pad, int32_t off, int momentum, int32_t zero_pct)
{
    cmsis_nn_conv_params cp;
    cmsis_nn_dims in_d = {n, ih, iw, k_ch}, f_d = {cout, k, k, cin}, o_d;
    cmsis_nn_context ctx;
    pockmcu_optimizer opt = {0.5f, momentum ? 0.9f : 0.0f, 1, 1};
    uint32_t r1 = rnd(), r2 = r1;
    memset(&cp, 0, sizeof cp);
    cp.stride.h = cp.stride.w = s;
    cp.dilation.h = cp.dilation.w = 1;
    cp.padding.h = cp.padding.w = pad;
    cp.input_offset = off;
    o_d.n = n;
    o_d.h = (ih + 2 * pad - k) / s + 1;
    o_d.w = (iw + 2 * pad - k) / s + 1;
    o_d.c = cout;
    fill_s8(xin, n * ih * iw * k_ch);
    fill_s8(w8, cout * k * k * cin);
    memcpy(w8b, w8, (size_t)(cout * k * k * cin));
    fill_f(go, n * o_d.h * o_d.w * cout, zero_pct);
    for (int32_t o = 0; o < cout; o++)
    {
        coefs[o] = 3.0f * (rndf() + 1.1f);
    }
    for (int32_t i = 0; i < cout * k * k * k_ch; i++)
    {
        vel1[i] = vel2[i] = rndf();
    }
    ctx.buf = buf;
    ctx.size = pockmcu_conv_wgrad_update_s8_get_buffer_size(&in_d, &f_d);
    check(pockmcu_conv_wgrad_update_s8(&ctx, &cp, &in_d, xin, &f_d, w8, cb, &o_d, go, coefs, NULL,
                                       momentum ? vel1 : NULL, &opt, &r1) == 0);
    for (int32_t o = 0; o < cout; o++)
    {
        for (int32_t t = 0; t < k * k * k_ch; t++)
        {
            gref[t] = 0.0f;
        }
        for (int32_t b = 0; b < n; b++)
            for (int32_t oy = 0; oy < o_d.h; oy++)
                for (int32_t ox = 0; ox < o_d.w; ox++)
                {
                    const float g = go[((b * o_d.h + oy) * o_d.w + ox) * cout + o];
                    for (int32_t i = 0; i < k; i++)
                        for (int32_t j = 0; j < k; j++)
                        {
                            const int32_t y = oy * s - pad + i, x = ox * s - pad + j;
                            if (y < 0 || y >= ih || x < 0 || x >= iw)
                            {
                                continue;
                            }
                            for (int32_t c = 0; c < k_ch; c++)
                            {
                                float *e = &gref[(i * k + j) * k_ch + c];
                                *e = *e + g * (float)((int32_t)xin[((b * ih + y) * iw + x) * k_ch + c] + off);
                            }
                        }
                }
        for (int32_t t = 0; t < k * k; t++)
        {
            for (int32_t c = 0; c < k_ch; c++)
            {
                int8_t *q = &w8b[(o * k * k + t) * cin + cb + c];
                *q = upd_s8(*q, gref[t * k_ch + c], coefs[o], &opt, momentum ? &vel2[(o * k * k + t) * k_ch + c] : NULL,
                            &r2);
            }
        }
    }
    check(memcmp(w8, w8b, (size_t)(cout * k * k * cin)) == 0 && r1 == r2);
    emit(w8, cout * k * k * cin);
    case_no++;
}

int32_t bwdk_workload(uint8_t *dst, int32_t cap)
{
    static const int32_t chans[] = {1, 3, 4, 5, 7, 8, 13, 16, 18, 33};
    ok = 1;
    for (int32_t i = 0; i < 8; i++)
    {
        hash[i] = 2166136261u;
    }
    /* depthwise: the MobileNetV2 shapes, then random ones */
    dw_case(1, 8, 8, 24, 1, 3, 1, 1, 1, 50);
    dw_case(1, 4, 4, 20, 1, 3, 1, 1, 1, 50);
    dw_case(1, 8, 8, 20, 1, 3, 2, 0, 1, 50);
    dw_case(1, 9, 9, 18, 1, 3, 2, 1, 1, 100);
    for (int32_t t = 0; t < 40; t++)
    {
        const int32_t k = t % 4 == 3 ? 5 : (t % 7 == 6 ? 1 : 3);
        const int32_t s = t % 3 == 2 ? 2 : (t % 11 == 10 ? 3 : 1);
        const int32_t dil = s == 1 && t % 5 == 4 ? 2 : 1;
        const int32_t n = t % 9 == 8 ? 2 : 1, m = t % 13 == 12 ? 2 : 1;
        int32_t c = chans[t % 10];
        const int32_t pad = rndi(0, (k - 1) * dil);
        int32_t ih = rndi(k * dil, k * dil + 7), iw = rndi(k * dil, k * dil + 9);
        while (n * (ih + 2 * pad) * (iw + 2 * pad) * c * m > 6000) /* the static buffers */
        {
            if (ih == k * dil && iw == k * dil)
            {
                c = c > 1 ? c / 2 : c;
            }
            ih = ih > k * dil ? ih - 1 : ih;
            iw = iw > k * dil ? iw - 1 : iw;
        }
        dw_case(n, ih, iw, c, m, k, s, pad, dil, (t * 37) % 101);
    }
    for (int32_t t = 0; t < 40; t++)
    {
        mask_case(rndi(1, 300), t % 4, t % 3);
    }
    mask_case(5376, 2, 0);
    for (int32_t t = 0; t < 30; t++)
    {
        const int32_t ch = t < 3 ? 336 : (t % 5 == 0 ? 16 * rndi(1, 4) : rndi(1, 70));
        const int32_t positions = rndi(1, 20);
        const int32_t limit = t % 4 == 0 ? rndi(-5, 1000) : 2147483647 - rndi(0, 1 << 20);
        bias_case(positions, ch, (t * 23) % 101, limit, t % 6 == 5);
    }
    for (int32_t t = 0; t < 16; t++)
    {
        const int32_t k_ch = rndi(1, 45), cb = rndi(0, 5), in_f = k_ch + cb + rndi(0, 3), out_f = rndi(1, 12);
        const int32_t off = t % 5 == 4 ? 128 : (t % 5 == 3 ? -129 : rndi(-128, 127));
        fc_case(t % 4 == 3 ? 2 : 1, k_ch, in_f, cb, out_f, off, t % 7 == 6, (t * 31) % 101);
    }
    for (int32_t t = 0; t < 24; t++)
    {
        const int32_t k = t % 3 == 0 ? 3 : 1, s = t % 5 == 4 ? 2 : 1, cin = chans[t % 10] + 2;
        const int32_t k_ch = t % 2 ? cin : rndi(1, cin), cb = rndi(0, cin - k_ch);
        const int32_t ih = rndi(k, k + 5), iw = rndi(k, k + 5), cout = rndi(1, 13), pad = k == 3 ? rndi(0, 1) : 0;
        const int32_t off = t % 6 == 5 ? -200 : rndi(-128, 127);
        wgrad_case(t % 7 == 6 ? 2 : 1, ih, iw, k_ch, cin, cb, cout, k, s, pad, off, t % 8 == 7, (t * 29) % 101);
    }
    for (int32_t t = 0; t < 16; t++)
    {
        const int32_t in_f = rndi(1, 70), out_f = t % 5 == 4 ? rndi(17, 24) : rndi(1, 16);
        const int32_t off = t % 6 == 5 ? 130 : rndi(-128, 128);
        fc_gi_case(t % 4 == 3 ? 3 : 1, in_f, out_f, off, (t * 41) % 101);
    }
    if (cap < 40)
    {
        return 0;
    }
    memcpy(dst, &ok, 4);
    memcpy(dst + 4, &bad_case, 4);
    memcpy(dst + 8, hash, sizeof hash);
    return 40;
}
"""

MAIN_C = r"""
#include <stdint.h>
#include "semihost.h"
int32_t bwdk_workload(uint8_t *dst, int32_t cap);
static uint8_t out[64];
int main(void)
{
    int32_t n = bwdk_workload(out, (int32_t)sizeof out);
    int fd = sh_open("out.bin", SH_MODE_WB);
    if (fd < 0 || n > (int32_t)sizeof out || sh_write(fd, out, (uint32_t)n) != 0)
    {
        return 2;
    }
    sh_close(fd);
    return 0;
}
"""


@pytest.fixture(scope="module")
def host_bytes(tmp_path_factory):
    import cffi

    tmp = tmp_path_factory.mktemp("bwdk")
    (tmp / "workload.c").write_text(WORKLOAD_C)
    so = build_kernel_lib(tmp / "libbwdk.so", [KERNELS / f for f in KERNEL_FILES] + [tmp / "workload.c"])
    ffi = cffi.FFI()
    ffi.cdef("int32_t bwdk_workload(uint8_t *dst, int32_t cap);")
    lib = ffi.dlopen(str(so))
    buf = ffi.new("uint8_t[64]")
    n = lib.bwdk_workload(buf, 64)
    assert n == 40
    return bytes(ffi.buffer(buf, n))


def test_fast_paths_equal_the_documented_loops(host_bytes):
    """On the host (portable C of every fast path) each kernel equals its header's loops, byte for byte."""
    bad = int.from_bytes(host_bytes[4:8], "little", signed=True)
    assert host_bytes[:4] == (1).to_bytes(4, "little"), f"case {bad} differs from the documented loops"


@pytest.mark.qemu
@pytest.mark.parametrize("target", ["qemu-m3", "qemu-m4", "qemu-m7", "qemu-m33", "qemu-m55"])
def test_fast_paths_host_equals_qemu(tmp_path, target, host_bytes):
    """In QEMU (VMLA / VLDM / VSEL on the FPU cores, soft float on M3) the same checks pass and the outputs hash
    to the host's."""
    from tests.qemu_c import build_program, run_program

    (tmp_path / "src").mkdir()
    wl = tmp_path / "src" / "workload.c"
    wl.write_text(WORKLOAD_C)
    elf = build_program(tmp_path, target, MAIN_C + "\n#include \"" + str(wl) + "\"\n", KERNEL_FILES)
    out = run_program(elf, target, {}, ["out.bin"])["out.bin"]
    bad = int.from_bytes(out[4:8], "little", signed=True)
    assert out[:4] == (1).to_bytes(4, "little"), f"{target}: case {bad} differs from the documented loops"
    assert out == host_bytes, f"{target}: {sum(a != b for a, b in zip(out, host_bytes))} bytes differ from the host"
