/*
 * splitter int8 kernels tuned for Cortex-M, _dsp and _plain variants (see kernels_q8_opt.h).
 * Each kernel is one K_INLINE engine taking `dsp` as a constant, instantiated twice, so the two
 * variants share their loop structure, weight layout and scratch and differ only in the MAC
 * steps.
 */
#include <stddef.h>

#include "k_dsp.h"
#include "k_window.h"
#include "kernels_q8_opt.h"

/* ------------------------------------------------------------------ requantisation ---- */

/* One output channel's requantisation, computed once per channel block: M = m * 2^(s - 31)
 * split into a left shift (s > 0) and a rounding right shift (s <= 0), the right shift's
 * remainder mask and tie threshold, and `away` (1: ties away from zero, k_q_mul; 0: ties up,
 * k_q_mul_up). */
typedef struct {
    int32_t m;
    int left, right;
    int32_t mask, thr, away;
} k_rq;

K_INLINE k_rq rq_channel(const k_q_params *q, int c)
{
    k_rq r;
    const int k = q->nq > 1 ? c : 0;
    const int s = (int)q->shift[k];
    r.m = q->mult[k];
    r.left = s > 0 ? s : 0;
    r.right = s > 0 ? 0 : -s;
    r.mask = (int32_t)((1u << r.right) - 1u);
    r.thr = r.mask >> 1;
    r.away = q->round_up ? 0 : 1;
    return r;
}

/* k_q_mul (away) or k_q_mul_up (!away) of acc, + zp, clamped to [lo, hi]. The high multiply
 * round((acc << left) * m / 2^31) is gemmlowp's SaturatingRoundingDoublingHighMul (which rounds
 * ties up, like ruy's); it cannot saturate since m >= 0. The right shift rounds as
 * RoundingDivideByPOT: +1 when the remainder exceeds mask / 2 (+ 1 for a negative value when
 * ties go away from zero); no sum can overflow. */
K_INLINE int8_t rq_apply(int32_t acc, const k_rq *r, int zp, int lo, int hi)
{
    const int32_t x = (int32_t)((uint32_t)acc << r->left);
    const int32_t h = (int32_t)(((int64_t)x * r->m + ((int64_t)1 << 30)) >> 31);
    const int32_t thr = r->thr + (r->away & (int32_t)((uint32_t)h >> 31));
    int32_t v = (h >> r->right) + ((h & r->mask) > thr ? 1 : 0) + zp;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return (int8_t)v;
}

/* ----------------------------------------------------------------------- im2col ---- */

/* Aligned int16 / word access to the 4-byte aligned scratch (memcpy: the arena is typed float). */
K_INLINE uint32_t ld4a(const int16_t *p)
{
    return K_LD4(__builtin_assume_aligned(p, 4));
}

K_INLINE int32_t ld2a(const int16_t *p)
{
    int16_t v;
    __builtin_memcpy(&v, __builtin_assume_aligned(p, 2), 2);
    return v;
}

K_INLINE void st2a(int16_t *p, int32_t v)
{
    const int16_t h = (int16_t)v;
    __builtin_memcpy(__builtin_assume_aligned(p, 2), &h, 2);
}

/* d[i] = x[i] - zp as int16, n values (off2: -zp in both halfwords). DSP: four at a time,
 * SXTAB16 of the word and of its rotation, repacked to (x0, x1), (x2, x3). */
K_INLINE void col_copy(const int8_t *x, int16_t *d, int n, int zp, uint32_t off2, int dsp)
{
    int i = 0;
    if (dsp) {
        for (; i + 4 <= n; i += 4) {
            const uint32_t v = K_LD4(x + i);
            const uint32_t e = K_SXTAB16(off2, v), o = K_SXTAB16(off2, K_ROR8(v));
            K_ST4(d + i, (e & 0xFFFFu) | (o << 16));
            K_ST4(d + i + 2, (e >> 16) | (o & 0xFFFF0000u));
        }
    }
    for (; i < n; i++) st2a(d + i, x[i] - zp);
}

K_INLINE void col_zero(int16_t *d, int n)
{
    int i;
    for (i = 0; i < n; i++) st2a(d + i, 0);
}

/* The im2col column of output pixel n: for every tap (ky, kx) its C input values minus in_zp,
 * zeros for taps in the padding (TFLite skips them: x - in_zp = 0 there). */
K_INLINE void col_fill(const k_window_params *p, const int8_t *x, int n, int16_t *d, int zp,
                       uint32_t off2, int dsp)
{
    const int C = p->C, kw = p->kw, oy = n / p->OW, ox = n - oy * p->OW;
    const int iy0 = oy * p->sh - p->pt, ix0 = ox * p->sw - p->pl;
    int ky, kx;
    for (ky = 0; ky < p->kh; ky++) {
        const int iy = iy0 + ky * p->dh;
        if (iy < 0 || iy >= p->H) {
            col_zero(d, kw * C);
            d += kw * C;
            continue;
        }
        for (kx = 0; kx < kw; kx++, d += C) {
            const int ix = ix0 + kx * p->dw;
            if (ix < 0 || ix >= p->W) col_zero(d, C);
            else col_copy(x + ((size_t)iy * p->W + ix) * C, d, C, zp, off2, dsp);
        }
    }
}

/* ------------------------------------------------------------------------- GEMM ---- */

/* acc[r][j] += row r of w (K bytes, groups of four as (0, 2, 1, 3)) . column j, for rows
 * w0, w1 (w1 == NULL: one row) and columns c0, c1 (c1 == NULL: one column). */
typedef struct {
    int32_t a00, a01, a10, a11;
} k_acc4;

K_INLINE void gemm_block(const int8_t *w0, const int8_t *w1, const int16_t *c0,
                         const int16_t *c1, int K, k_acc4 *a, int dsp)
{
    const int K4 = K & ~3;
    int32_t a00 = a->a00, a01 = a->a01, a10 = a->a10, a11 = a->a11;
    int k;
    if (dsp) {
        for (k = 0; k < K4; k += 4) {
            const uint32_t wv = K_LD4(w0 + k);
            const uint32_t wl = K_SXTB16(wv), wh = K_SXTB16(K_ROR8(wv));
            const uint32_t x0 = ld4a(c0 + k), x1 = ld4a(c0 + k + 2);
            a00 = K_SMLAD(wl, x0, a00);
            a00 = K_SMLAD(wh, x1, a00);
            if (c1) {
                const uint32_t y0 = ld4a(c1 + k), y1 = ld4a(c1 + k + 2);
                a01 = K_SMLAD(wl, y0, a01);
                a01 = K_SMLAD(wh, y1, a01);
            }
            if (w1) {
                const uint32_t vv = K_LD4(w1 + k);
                const uint32_t vl = K_SXTB16(vv), vh = K_SXTB16(K_ROR8(vv));
                a10 = K_SMLAD(vl, x0, a10);
                a10 = K_SMLAD(vh, x1, a10);
                if (c1) {
                    const uint32_t y0 = ld4a(c1 + k), y1 = ld4a(c1 + k + 2);
                    a11 = K_SMLAD(vl, y0, a11);
                    a11 = K_SMLAD(vh, y1, a11);
                }
            }
        }
    } else {
        for (k = 0; k < K4; k += 4) {
            const int32_t x0 = ld2a(c0 + k), x1 = ld2a(c0 + k + 1);
            const int32_t x2 = ld2a(c0 + k + 2), x3 = ld2a(c0 + k + 3);
            a00 += w0[k] * x0 + w0[k + 1] * x2 + w0[k + 2] * x1 + w0[k + 3] * x3;
            if (w1) a10 += w1[k] * x0 + w1[k + 1] * x2 + w1[k + 2] * x1 + w1[k + 3] * x3;
            if (c1) {
                const int32_t y0 = ld2a(c1 + k), y1 = ld2a(c1 + k + 1);
                const int32_t y2 = ld2a(c1 + k + 2), y3 = ld2a(c1 + k + 3);
                a01 += w0[k] * y0 + w0[k + 1] * y2 + w0[k + 2] * y1 + w0[k + 3] * y3;
                if (w1) a11 += w1[k] * y0 + w1[k + 1] * y2 + w1[k + 2] * y1 + w1[k + 3] * y3;
            }
        }
    }
    for (k = K4; k < K; k++) {
        const int32_t x0 = ld2a(c0 + k);
        a00 += w0[k] * x0;
        if (w1) a10 += w1[k] * x0;
        if (c1) {
            const int32_t y0 = ld2a(c1 + k);
            a01 += w0[k] * y0;
            if (w1) a11 += w1[k] * y0;
        }
    }
    a->a00 = a00;
    a->a01 = a01;
    a->a10 = a10;
    a->a11 = a11;
}

/* All O output channels of the pixels whose columns are c0 (into y0) and c1 (into y1; NULL:
 * none), two channels at a time, each pair's requantisation computed once for both pixels. */
K_INLINE void gemm_pixels(const k_window_params *p, const k_q_params *q, const int8_t *w,
                          const int32_t *b, const int16_t *c0, const int16_t *c1, int K,
                          int8_t *y0, int8_t *y1, int dsp)
{
    const int O = p->O, zp = q->out_zp, lo = q->act_min, hi = q->act_max;
    int o;
    for (o = 0; o + 2 <= O; o += 2) {
        const int32_t b0 = b ? b[o] : 0, b1 = b ? b[o + 1] : 0;
        k_acc4 a = {b0, b0, b1, b1};
        k_rq r0, r1;
        if (c1) gemm_block(w + (size_t)o * K, w + (size_t)(o + 1) * K, c0, c1, K, &a, dsp);
        else gemm_block(w + (size_t)o * K, w + (size_t)(o + 1) * K, c0, NULL, K, &a, dsp);
        r0 = rq_channel(q, o);
        r1 = rq_channel(q, o + 1);
        y0[o] = rq_apply(a.a00, &r0, zp, lo, hi);
        y0[o + 1] = rq_apply(a.a10, &r1, zp, lo, hi);
        if (c1) {
            y1[o] = rq_apply(a.a01, &r0, zp, lo, hi);
            y1[o + 1] = rq_apply(a.a11, &r1, zp, lo, hi);
        }
    }
    if (o < O) {
        const int32_t b0 = b ? b[o] : 0;
        k_acc4 a = {b0, b0, 0, 0};
        k_rq r0;
        if (c1) gemm_block(w + (size_t)o * K, NULL, c0, c1, K, &a, dsp);
        else gemm_block(w + (size_t)o * K, NULL, c0, NULL, K, &a, dsp);
        r0 = rq_channel(q, o);
        y0[o] = rq_apply(a.a00, &r0, zp, lo, hi);
        if (c1) y1[o] = rq_apply(a.a01, &r0, zp, lo, hi);
    }
}

int k_q_conv_scratch(const k_window_params *p)
{
    const int K = p->kh * p->kw * p->C;
    return 3 + 2 * 2 * (K + (K & 1));
}

/* Output pixels two at a time: their columns into the scratch, then the GEMM. */
K_INLINE void conv_engine(const k_window_params *p, const k_q_params *q, const int8_t *x,
                          const int8_t *w, const int32_t *b, int8_t *s, int8_t *y, int dsp,
                          int pointwise)
{
    const int K = p->kh * p->kw * p->C, Kp = K + (K & 1), O = p->O, npix = p->OH * p->OW;
    const int zp = q->in_zp;
    const uint32_t off2 = ((uint32_t)(-zp) & 0xFFFFu) * 0x10001u;
    int16_t *c0 = (int16_t *)(void *)(s + ((4u - ((uintptr_t)s & 3u)) & 3u));
    int16_t *c1 = c0 + Kp;
    int n;
    for (n = 0; n < npix; n += 2) {
        const int two = n + 1 < npix;
        if (pointwise && two && K == Kp) {
            col_copy(x + (size_t)n * K, c0, 2 * K, zp, off2, dsp); /* c1 follows c0 */
        } else if (pointwise) {
            col_copy(x + (size_t)n * K, c0, K, zp, off2, dsp);
            if (two) col_copy(x + (size_t)(n + 1) * K, c1, K, zp, off2, dsp);
        } else {
            col_fill(p, x, n, c0, zp, off2, dsp);
            if (two) col_fill(p, x, n + 1, c1, zp, off2, dsp);
        }
        if (two) gemm_pixels(p, q, w, b, c0, c1, K, y + (size_t)n * O, y + (size_t)(n + 1) * O, dsp);
        else gemm_pixels(p, q, w, b, c0, NULL, K, y + (size_t)n * O, NULL, dsp);
    }
}

void k_q_conv_dsp(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                  const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict s,
                  int8_t *restrict y)
{
    conv_engine(p, q, x, w, b, s, y, 1, 0);
}

void k_q_conv_plain(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                    const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict s,
                    int8_t *restrict y)
{
    conv_engine(p, q, x, w, b, s, y, 0, 0);
}

void k_q_pointwise_dsp(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                       const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict s,
                       int8_t *restrict y)
{
    conv_engine(p, q, x, w, b, s, y, 1, 1);
}

void k_q_pointwise_plain(const k_window_params *p, const k_q_params *q,
                         const int8_t *restrict x, const int8_t *restrict w,
                         const int32_t *restrict b, int8_t *restrict s, int8_t *restrict y)
{
    conv_engine(p, q, x, w, b, s, y, 0, 1);
}

/* -------------------------------------------------------------------- depthwise ---- */

/* Four channels c..c+3 of one output pixel: taps of rows [ky0, ky1) x columns [kx0, kx1),
 * wb the block's (taps, 4) weights. DSP: one word of inputs and one of weights per tap,
 * SXTAB16 / SXTB16 into (0, 2) and (1, 3) halfword pairs, SMLABB / SMLATT per channel. */
K_INLINE void dw_block4(const k_window_params *p, const k_pixel *t, const int8_t *x,
                        const int8_t *wb, int c, int zp, uint32_t off2, int32_t acc[4], int dsp)
{
    const int kw = p->kw;
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    const size_t step = (size_t)t->dw * t->col;
    int ky, kx;
    for (ky = t->ky0; ky < t->ky1; ky++) {
        const int8_t *xp = x + k_tap_at(t, ky, t->kx0) + c;
        const int8_t *wp = wb + ((size_t)ky * kw + t->kx0) * 4;
        for (kx = t->kx0; kx < t->kx1; kx++, xp += step, wp += 4) {
            if (dsp) {
                const uint32_t xv = K_LD4(xp), wv = K_LD4(wp);
                const uint32_t x02 = K_SXTAB16(off2, xv), x13 = K_SXTAB16(off2, K_ROR8(xv));
                const uint32_t w02 = K_SXTB16(wv), w13 = K_SXTB16(K_ROR8(wv));
                a0 = K_SMLABB(x02, w02, a0);
                a2 = K_SMLATT(x02, w02, a2);
                a1 = K_SMLABB(x13, w13, a1);
                a3 = K_SMLATT(x13, w13, a3);
            } else {
                a0 += wp[0] * (xp[0] - zp);
                a1 += wp[1] * (xp[1] - zp);
                a2 += wp[2] * (xp[2] - zp);
                a3 += wp[3] * (xp[3] - zp);
            }
        }
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

/* One channel c (a tail channel, weights (taps) at wc) of one output pixel. */
K_INLINE int32_t dw_one(const k_window_params *p, const k_pixel *t, const int8_t *x,
                        const int8_t *wc, int c, int zp, int32_t acc)
{
    const size_t step = (size_t)t->dw * t->col;
    int ky, kx;
    for (ky = t->ky0; ky < t->ky1; ky++) {
        const int8_t *xp = x + k_tap_at(t, ky, t->kx0) + c;
        for (kx = t->kx0; kx < t->kx1; kx++, xp += step) acc += wc[ky * p->kw + kx] * (*xp - zp);
    }
    return acc;
}

K_INLINE void dw_engine(const k_window_params *p, const k_q_params *q, const int8_t *x,
                        const int8_t *w, const int32_t *b, int8_t *y, int dsp)
{
    const int C = p->C, T = p->kh * p->kw, C4 = C & ~3;
    const int zp = q->in_zp, ozp = q->out_zp, lo = q->act_min, hi = q->act_max;
    const uint32_t off2 = ((uint32_t)(-zp) & 0xFFFFu) * 0x10001u;
    k_pixel t;
    int c, j;
    for (k_pixel_first(p, p->dh, p->dw, &t); t.oy < p->OH; k_pixel_next(p, &t)) {
        int8_t *yo = y + ((size_t)t.oy * p->OW + t.ox) * C;
        for (c = 0; c < C4; c += 4) {
            int32_t acc[4];
            for (j = 0; j < 4; j++) acc[j] = b ? b[c + j] : 0;
            dw_block4(p, &t, x, w + (size_t)c * T, c, zp, off2, acc, dsp);
            for (j = 0; j < 4; j++) {
                const k_rq r = rq_channel(q, c + j);
                yo[c + j] = rq_apply(acc[j], &r, ozp, lo, hi);
            }
        }
        for (; c < C; c++) {
            const k_rq r = rq_channel(q, c);
            const int32_t acc = dw_one(p, &t, x, w + (size_t)c * T, c, zp, b ? b[c] : 0);
            yo[c] = rq_apply(acc, &r, ozp, lo, hi);
        }
    }
}

void k_q_depthwise_dsp(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                       const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict y)
{
    dw_engine(p, q, x, w, b, y, 1);
}

void k_q_depthwise_plain(const k_window_params *p, const k_q_params *q,
                         const int8_t *restrict x, const int8_t *restrict w,
                         const int32_t *restrict b, int8_t *restrict y)
{
    dw_engine(p, q, x, w, b, y, 0);
}

/* ------------------------------------------------------------------------ dense ---- */

/* Rows o..o+3 of w (four rows; w1..w3 may repeat w0 for a short last block) dotted with
 * x - zp. DSP: one input word -> (0, 2), (1, 3) halfword pairs with the offset added by
 * SXTAB16, reused by the four rows; each row word SXTB16'd and SMLAD'ed twice. */
K_INLINE void dense_rows(const int8_t *x, const int8_t *w0, const int8_t *w1, const int8_t *w2,
                         const int8_t *w3, int in, int zp, uint32_t off2, int32_t acc[4],
                         int dsp)
{
    const int in4 = in & ~3;
    int32_t a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    int i;
    if (dsp) {
        for (i = 0; i < in4; i += 4) {
            const uint32_t xv = K_LD4(x + i);
            const uint32_t x02 = K_SXTAB16(off2, xv), x13 = K_SXTAB16(off2, K_ROR8(xv));
            uint32_t v = K_LD4(w0 + i);
            a0 = K_SMLAD(K_SXTB16(v), x02, a0);
            a0 = K_SMLAD(K_SXTB16(K_ROR8(v)), x13, a0);
            v = K_LD4(w1 + i);
            a1 = K_SMLAD(K_SXTB16(v), x02, a1);
            a1 = K_SMLAD(K_SXTB16(K_ROR8(v)), x13, a1);
            v = K_LD4(w2 + i);
            a2 = K_SMLAD(K_SXTB16(v), x02, a2);
            a2 = K_SMLAD(K_SXTB16(K_ROR8(v)), x13, a2);
            v = K_LD4(w3 + i);
            a3 = K_SMLAD(K_SXTB16(v), x02, a3);
            a3 = K_SMLAD(K_SXTB16(K_ROR8(v)), x13, a3);
        }
    } else {
        for (i = 0; i < in4; i += 2) {
            const int32_t x0 = x[i] - zp, x1 = x[i + 1] - zp;
            a0 += w0[i] * x0 + w0[i + 1] * x1;
            a1 += w1[i] * x0 + w1[i + 1] * x1;
            a2 += w2[i] * x0 + w2[i + 1] * x1;
            a3 += w3[i] * x0 + w3[i + 1] * x1;
        }
    }
    for (i = in4; i < in; i++) {
        const int32_t xi = x[i] - zp;
        a0 += w0[i] * xi;
        a1 += w1[i] * xi;
        a2 += w2[i] * xi;
        a3 += w3[i] * xi;
    }
    acc[0] = a0;
    acc[1] = a1;
    acc[2] = a2;
    acc[3] = a3;
}

K_INLINE void dense_engine(const k_dense_params *p, const k_q_params *q, const int8_t *x,
                           const int8_t *w, const int32_t *b, int8_t *y, int dsp)
{
    const int in = p->in, out = p->out, zp = q->in_zp;
    const int ozp = q->out_zp, lo = q->act_min, hi = q->act_max;
    const uint32_t off2 = ((uint32_t)(-zp) & 0xFFFFu) * 0x10001u;
    int o, j;
    for (o = 0; o < out; o += 4) {
        const int n = out - o < 4 ? out - o : 4;
        const int8_t *w0 = w + (size_t)o * in;
        int32_t acc[4];
        for (j = 0; j < 4; j++) acc[j] = b && j < n ? b[o + j] : 0;
        dense_rows(x, w0, w0 + (n > 1 ? in : 0), w0 + (size_t)(n > 2 ? 2 * in : 0),
                   w0 + (size_t)(n > 3 ? 3 * in : 0), in, zp, off2, acc, dsp);
        for (j = 0; j < n; j++) {
            const k_rq r = rq_channel(q, o + j);
            y[o + j] = rq_apply(acc[j], &r, ozp, lo, hi);
        }
    }
}

void k_q_dense_dsp(const k_dense_params *p, const k_q_params *q, const int8_t *restrict x,
                   const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict y)
{
    dense_engine(p, q, x, w, b, y, 1);
}

void k_q_dense_plain(const k_dense_params *p, const k_q_params *q, const int8_t *restrict x,
                     const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict y)
{
    dense_engine(p, q, x, w, b, y, 0);
}
