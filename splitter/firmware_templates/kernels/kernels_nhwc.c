/*
 * splitter float32 NHWC kernels (C99), see kernels_nhwc.h for layout and conventions.
 * Blocked like the NCHW kernels of kernels.c, the layout being the only difference: a groups == 1
 * convolution (1x1 included) runs 4 output pixels x 4 output channels per inner loop (16
 * accumulators in registers, 4 input + 4 weight loads feed 16 multiply-accumulates), the
 * channels of a tap being contiguous in NHWC; a depthwise convolution runs 4 output pixels x 4
 * channels, and with 3 taps a row at stride 1 or 2 loads each input column once for all 4
 * pixels (the NCHW depthwise kernel's shared columns). Border pixels (taps in the padding) run
 * one pixel at a time over their in-bounds taps only.
 */
#include "kernels_nhwc.h"
#include "k_window.h"
#include "kernels.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("unroll-loops", "fp-contract=fast")
#endif

/* Hot inner kernels stay separate functions, as in kernels.c: inlined into the pixel walk they
 * share the register file with it and spill. */
#if defined(__GNUC__)
#define K_NOINLINE __attribute__((noinline))
#else
#define K_NOINLINE
#endif

/* A tile of 4 output pixels i x 4 output channels r held in 16 accumulators a<i><r> (the
 * register blocking of conv_4x4, dw_4x4 and the dw3_4x4 kernels): K_TILE_INIT declares them, each
 * at its channel's bias bb[r]; K_TILE_STORE writes pixel i's 4 channels at yt + i * ys (yt is
 * advanced past the third pixel). */
#define K_TILE_INIT(bb)                                                                        \
    float a00 = (bb)[0], a01 = (bb)[1], a02 = (bb)[2], a03 = (bb)[3];                          \
    float a10 = (bb)[0], a11 = (bb)[1], a12 = (bb)[2], a13 = (bb)[3];                          \
    float a20 = (bb)[0], a21 = (bb)[1], a22 = (bb)[2], a23 = (bb)[3];                          \
    float a30 = (bb)[0], a31 = (bb)[1], a32 = (bb)[2], a33 = (bb)[3]
#define K_TILE_STORE(yt, ys)                                                                   \
    (yt)[0] = a00; (yt)[1] = a01; (yt)[2] = a02; (yt)[3] = a03;                                \
    (yt) += (ys);                                                                              \
    (yt)[0] = a10; (yt)[1] = a11; (yt)[2] = a12; (yt)[3] = a13;                                \
    (yt) += (ys);                                                                              \
    (yt)[0] = a20; (yt)[1] = a21; (yt)[2] = a22; (yt)[3] = a23;                                \
    (yt) += (ys);                                                                              \
    (yt)[0] = a30; (yt)[1] = a31; (yt)[2] = a32; (yt)[3] = a33

/* The in-bounds taps of one output pixel (or of a block of pixels that share them) as runs of
 * contiguous input elements: rows runs of cols runs of n elements; run (r, c) starts at input
 * element offset r * xrow + c * xcol from the pixel's first in-bounds tap, and its weights at
 * weight index r * wrow + c * n from that tap's (times 4 in a block of 4 packed rows, whose
 * element k is interleaved 4 wide). With dilation 1 along the width, a row's in-bounds taps are
 * one run of (kx1 - kx0) * C elements (cols == 1). */
typedef struct {
    int rows, cols, n;
    size_t xrow, xcol, wrow;
} k_runs;

/* The runs of pixel t's in-bounds taps for input channels C (groups == 1 conv). */
K_INLINE k_runs conv_runs(const k_window_params *p, const k_pixel *t)
{
    k_runs r;
    const int nkx = t->kx1 - t->kx0;
    r.rows = t->ky1 - t->ky0;
    r.cols = t->dw == 1 ? 1 : nkx;
    r.n = t->dw == 1 ? nkx * p->C : p->C;
    r.xrow = (size_t)t->dh * t->row;
    r.xcol = (size_t)t->dw * t->col;
    r.wrow = (size_t)p->kw * p->C;
    return r;
}

/* Four pixels x 4 output channels (weights packed by 4, wb at the first in-bounds tap):
 * y_i[r] = b[r] + sum over the runs of x_i[k] * wb[4 k + r], x_i = x0 + i * xs. */
K_NOINLINE static void conv_4x4(const float *restrict x0, size_t xs, const float *restrict wb,
                                const k_runs *rn, const float *restrict b, float *restrict y,
                                size_t ys)
{
    const float bz[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float *bb = b ? b : bz;
    K_TILE_INIT(bb);
    const int n = rn->n;
    int r, c, k;
    for (r = 0; r < rn->rows; r++) {
        for (c = 0; c < rn->cols; c++) {
            const float *p0 = x0 + r * rn->xrow + c * rn->xcol, *p1 = p0 + xs, *p2 = p1 + xs;
            const float *p3 = p2 + xs, *w = wb + (r * rn->wrow + (size_t)c * n) * 4;
            for (k = 0; k < n; k++) {
                const float u0 = p0[k], u1 = p1[k], u2 = p2[k], u3 = p3[k];
                const float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
                a00 += w0 * u0; a01 += w1 * u0; a02 += w2 * u0; a03 += w3 * u0;
                a10 += w0 * u1; a11 += w1 * u1; a12 += w2 * u1; a13 += w3 * u1;
                a20 += w0 * u2; a21 += w1 * u2; a22 += w2 * u2; a23 += w3 * u2;
                a30 += w0 * u3; a31 += w1 * u3; a32 += w2 * u3; a33 += w3 * u3;
                w += 4;
            }
        }
    }
    K_TILE_STORE(y, ys);
}

/* One pixel x 4 output channels: y[r] = b[r] + sum over the runs of x0[k] * wb[4 k + r]. */
K_NOINLINE static void conv_1x4(const float *restrict x0, const float *restrict wb,
                                const k_runs *rn, const float *restrict b, float *restrict y)
{
    float a0 = b ? b[0] : 0.0f, a1 = b ? b[1] : 0.0f, a2 = b ? b[2] : 0.0f, a3 = b ? b[3] : 0.0f;
    const int n = rn->n;
    int r, c, k;
    for (r = 0; r < rn->rows; r++) {
        for (c = 0; c < rn->cols; c++) {
            const float *p0 = x0 + r * rn->xrow + c * rn->xcol;
            const float *w = wb + (r * rn->wrow + (size_t)c * n) * 4;
            for (k = 0; k < n; k++) {
                const float u = p0[k];
                a0 += w[0] * u; a1 += w[1] * u; a2 += w[2] * u; a3 += w[3] * u;
                w += 4;
            }
        }
    }
    y[0] = a0; y[1] = a1; y[2] = a2; y[3] = a3;
}

/* One pixel, one output channel of the O % 4 rows stored unblocked (wr: the row, OHWI). */
static float conv_1x1(const float *restrict x0, const float *restrict wr, const k_runs *rn,
                      float a)
{
    const int n = rn->n;
    int r, c, k;
    for (r = 0; r < rn->rows; r++)
        for (c = 0; c < rn->cols; c++) {
            const float *p0 = x0 + r * rn->xrow + c * rn->xcol;
            const float *w = wr + r * rn->wrow + (size_t)c * n;
            for (k = 0; k < n; k++) a += p0[k] * w[k];
        }
    return a;
}

/* The columns [lo, hi) of output pixels whose taps all lie inside the input row. */
static void interior_cols(const k_window_params *p, int *lo, int *hi)
{
    const int span = p->W - 1 - (p->kw - 1) * p->dw + p->pl;
    int l = (p->pl + p->sw - 1) / p->sw, h = span < 0 ? 0 : span / p->sw + 1;
    if (h > p->OW) h = p->OW;
    if (l > h) l = h;
    *lo = l;
    *hi = h;
}

/* Output pixel t, all O output channels, one at a time (border pixels, leftovers). */
static void conv_pixel(const k_window_params *p, const k_pixel *t, const float *restrict x,
                       const float *restrict wp, const float *restrict b, float *restrict y)
{
    const int O = p->O, K = p->kh * p->kw * p->C;
    const k_runs rn = conv_runs(p, t);
    const float *x0 = x + k_tap_at(t, t->ky0, t->kx0);
    const size_t w0 = ((size_t)t->ky0 * p->kw + t->kx0) * p->C;
    float *yo = y + ((size_t)t->oy * p->OW + t->ox) * O;
    int o = 0;
    for (; o + 4 <= O; o += 4)
        conv_1x4(x0, wp + (size_t)o * K + w0 * 4, &rn, b ? b + o : 0, yo + o);
    for (; o < O; o++) yo[o] = conv_1x1(x0, wp + (size_t)o * K + w0, &rn, b ? b[o] : 0.0f);
}

/* groups == 1, weights (O, kh, kw, C) packed 4 rows at a time (kernels.h, pack4): per output
 * row, the interior pixels 4 at a time x 4 output channels, the rest one pixel at a time. */
static void conv_nhwc_blocked(const k_window_params *p, const float *restrict x,
                              const float *restrict wp, const float *restrict b, float *restrict y)
{
    const int O = p->O, K = p->kh * p->kw * p->C;
    const size_t xs = (size_t)p->sw * p->C;
    int lo, hi, o, i;
    k_pixel t;
    interior_cols(p, &lo, &hi);
    for (k_pixel_first(p, p->dh, p->dw, &t); t.oy < p->OH; t.oy++) {
        k_pixel_row(p, &t);
        for (t.ox = 0; t.ox < p->OW;) {
            k_pixel_col(p, &t);
            if (t.ox >= lo && t.ox + 4 <= hi) { /* 4 interior pixels: every kx in bounds */
                const k_runs rn = conv_runs(p, &t);
                const size_t w0 = (size_t)t.ky0 * p->kw * p->C;
                const float *x0 = x + k_tap_at(&t, t.ky0, 0);
                float *yo = y + ((size_t)t.oy * p->OW + t.ox) * O;
                for (o = 0; o + 4 <= O; o += 4)
                    conv_4x4(x0, xs, wp + (size_t)o * K + w0 * 4, &rn, b ? b + o : 0, yo + o,
                             (size_t)O);
                for (; o < O; o++)
                    for (i = 0; i < 4; i++)
                        yo[(size_t)i * O + o] =
                            conv_1x1(x0 + i * xs, wp + (size_t)o * K + w0, &rn, b ? b[o] : 0.0f);
                t.ox += 4;
            } else {
                conv_pixel(p, &t, x, wp, b, y);
                t.ox++;
            }
        }
    }
}

/* The in-bounds taps of a depthwise pixel (or block): rows x cols taps, tap (r, c) at input
 * element offset r * xrow + c * xcol and weight offset r * wrow + c * wcol from the first. */
typedef struct {
    int rows, cols;
    size_t xrow, xcol, wrow, wcol;
} k_dwtaps;

K_INLINE k_dwtaps dw_taps(const k_window_params *p, const k_pixel *t)
{
    k_dwtaps r;
    r.rows = t->ky1 - t->ky0;
    r.cols = t->kx1 - t->kx0;
    r.xrow = (size_t)t->dh * t->row;
    r.xcol = (size_t)t->dw * t->col;
    r.wrow = (size_t)p->kw * p->O;
    r.wcol = (size_t)p->O;
    return r;
}

/* Four pixels x 4 channels of a depthwise convolution (weights (kh, kw, C), w at the first
 * in-bounds tap's channel c): y_i[r] = b[r] + sum over the taps of x_i[tap + r] * w[tap + r]. */
K_NOINLINE static void dw_4x4(const float *restrict x0, size_t xs, const float *restrict w,
                              const k_dwtaps *tp, const float *restrict b, float *restrict y,
                              size_t ys)
{
    const float bz[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    const float *bb = b ? b : bz;
    K_TILE_INIT(bb);
    int r, c;
    for (r = 0; r < tp->rows; r++) {
        const float *q0 = x0 + r * tp->xrow, *wr = w + r * tp->wrow;
        for (c = 0; c < tp->cols; c++) {
            const float *p0 = q0 + c * tp->xcol, *p1 = p0 + xs, *p2 = p1 + xs, *p3 = p2 + xs;
            const float *wc = wr + c * tp->wcol;
            const float w0 = wc[0], w1 = wc[1], w2 = wc[2], w3 = wc[3];
            a00 += w0 * p0[0]; a01 += w1 * p0[1]; a02 += w2 * p0[2]; a03 += w3 * p0[3];
            a10 += w0 * p1[0]; a11 += w1 * p1[1]; a12 += w2 * p1[2]; a13 += w3 * p1[3];
            a20 += w0 * p2[0]; a21 += w1 * p2[1]; a22 += w2 * p2[2]; a23 += w3 * p2[3];
            a30 += w0 * p3[0]; a31 += w1 * p3[1]; a32 += w2 * p3[2]; a33 += w3 * p3[3];
        }
    }
    K_TILE_STORE(y, ys);
}

/* Depthwise 3-tap rows at dilation 1, stride S (1 or 2), 4 pixels x 4 channels: per kernel row
 * the 3 taps' 12 weights are loaded once and each of the 3 S + 3 input columns the 4 pixels read
 * (pixel i reads columns S i .. S i + 2) is loaded once and feeds every pixel that reads it:
 * 6 (S = 1) or 9 (S = 2) column loads of 4 channels instead of 12. DW_ACC(i, k) adds tap k's
 * weights times the loaded column to pixel i's 4 accumulators; DW_COL(j) loads column j (the
 * columns in order, one pointer stepping col elements: immediate offsets, no address table). */
#define DW_ACC(i, k)                                                                           \
    a##i##0 += w##k##0 * u0; a##i##1 += w##k##1 * u1;                                          \
    a##i##2 += w##k##2 * u2; a##i##3 += w##k##3 * u3
#define DW_COL(j)                                                                              \
    u0 = xc[0]; u1 = xc[1]; u2 = xc[2]; u3 = xc[3];                                            \
    xc += col

/* For each of nb blocks of 4 channels (one call per 4 pixels: the call's cost is shared by all
 * channels), the 16 accumulators start at the bias; after the kernel rows, the 4 pixels'
 * outputs are stored ys apart. Shared by dw3_4x4_s1 and dw3_4x4_s2 through DW3_BODY. */
#define DW3_BODY(COLUMNS)                                                                      \
    const float bz[4] = {0.0f, 0.0f, 0.0f, 0.0f};                                              \
    int blk, r;                                                                                \
    for (blk = 0; blk < nb; blk++) {                                                           \
        const float *bb = b ? b + 4 * blk : bz, *xb = x0 + 4 * blk, *wb = w + 4 * blk;         \
        float *yb = y + 4 * blk;                                                               \
        K_TILE_INIT(bb);                                                                       \
        for (r = 0; r < tp->rows; r++) {                                                       \
            const float *xc = xb + r * tp->xrow, *wr = wb + r * tp->wrow;                      \
            const float *w1 = wr + tp->wcol, *w2 = w1 + tp->wcol;                              \
            const float w00 = wr[0], w01 = wr[1], w02 = wr[2], w03 = wr[3];                    \
            const float w10 = w1[0], w11 = w1[1], w12 = w1[2], w13 = w1[3];                    \
            const float w20 = w2[0], w21 = w2[1], w22 = w2[2], w23 = w2[3];                    \
            float u0, u1, u2, u3;                                                              \
            COLUMNS                                                                            \
        }                                                                                      \
        K_TILE_STORE(yb, ys);                                                                  \
    }

/* Stride 1: column j feeds pixels i = j - k for taps k = 0..2. */
K_NOINLINE static void dw3_4x4_s1(const float *restrict x0, size_t col, const float *restrict w,
                                  const k_dwtaps *tp, const float *restrict b, float *restrict y,
                                  size_t ys, int nb)
{
    DW3_BODY(DW_COL(0); DW_ACC(0, 0);
             DW_COL(1); DW_ACC(0, 1); DW_ACC(1, 0);
             DW_COL(2); DW_ACC(0, 2); DW_ACC(1, 1); DW_ACC(2, 0);
             DW_COL(3); DW_ACC(1, 2); DW_ACC(2, 1); DW_ACC(3, 0);
             DW_COL(4); DW_ACC(2, 2); DW_ACC(3, 1);
             DW_COL(5); DW_ACC(3, 2););
}

/* Stride 2: column j feeds pixels i = (j - k) / 2 for the taps k = 0..2 of the same parity. */
K_NOINLINE static void dw3_4x4_s2(const float *restrict x0, size_t col, const float *restrict w,
                                  const k_dwtaps *tp, const float *restrict b, float *restrict y,
                                  size_t ys, int nb)
{
    DW3_BODY(DW_COL(0); DW_ACC(0, 0);
             DW_COL(1); DW_ACC(0, 1);
             DW_COL(2); DW_ACC(0, 2); DW_ACC(1, 0);
             DW_COL(3); DW_ACC(1, 1);
             DW_COL(4); DW_ACC(1, 2); DW_ACC(2, 0);
             DW_COL(5); DW_ACC(2, 1);
             DW_COL(6); DW_ACC(2, 2); DW_ACC(3, 0);
             DW_COL(7); DW_ACC(3, 1);
             DW_COL(8); DW_ACC(3, 2););
}

/* One pixel of a depthwise convolution, nb blocks of 4 channels, 4 accumulators a block. */
K_NOINLINE static void dw_1x4(const float *restrict x0, const float *restrict w, const k_dwtaps *tp,
                              const float *restrict b, float *restrict y, int nb)
{
    int blk, r, c;
    for (blk = 0; blk < nb; blk++, x0 += 4, w += 4, y += 4) {
        const float *bb = b ? b + 4 * blk : 0;
        float a0 = bb ? bb[0] : 0.0f, a1 = bb ? bb[1] : 0.0f;
        float a2 = bb ? bb[2] : 0.0f, a3 = bb ? bb[3] : 0.0f;
        for (r = 0; r < tp->rows; r++) {
            const float *xc = x0 + r * tp->xrow, *wc = w + r * tp->wrow;
            for (c = 0; c < tp->cols; c++, xc += tp->xcol, wc += tp->wcol) {
                a0 += wc[0] * xc[0]; a1 += wc[1] * xc[1];
                a2 += wc[2] * xc[2]; a3 += wc[3] * xc[3];
            }
        }
        y[0] = a0; y[1] = a1; y[2] = a2; y[3] = a3;
    }
}

/* One pixel, one output channel o of a depthwise convolution with depth multiplier M (input
 * channel o / M): x0 at the first in-bounds tap's channel 0, w at its weights' channel 0. */
static float dw_1x1(const float *restrict x0, const float *restrict w, const k_dwtaps *tp, int o,
                    int M, float a)
{
    int r, c;
    for (r = 0; r < tp->rows; r++)
        for (c = 0; c < tp->cols; c++)
            a += x0[r * tp->xrow + c * tp->xcol + o / M] * w[r * tp->wrow + c * tp->wcol + o];
    return a;
}

/* Output pixel t of a depthwise convolution, all channels: 4 at a time (M == 1), else one. */
static void dw_pixel(const k_window_params *p, const k_pixel *t, const float *restrict x,
                     const float *restrict w, const float *restrict b, float *restrict y)
{
    const int O = p->O, M = O / p->C;
    const k_dwtaps tp = dw_taps(p, t);
    const float *x0 = x + k_tap_at(t, t->ky0, t->kx0);
    const float *w0 = w + ((size_t)t->ky0 * p->kw + t->kx0) * O;
    float *yo = y + ((size_t)t->oy * p->OW + t->ox) * O;
    int o = M == 1 ? O - O % 4 : 0;
    if (M == 1) dw_1x4(x0, w0, &tp, b, yo, O / 4);
    for (; o < O; o++) yo[o] = dw_1x1(x0, w0, &tp, o, M, b ? b[o] : 0.0f);
}

/* Depthwise (groups == C, O = C * M), weights (kh, kw, O) (TFLite's own depthwise order): per
 * output row, the interior pixels 4 at a time x 4 channels (M == 1), the rest one at a time. */
static void conv_nhwc_depthwise(const k_window_params *p, const float *restrict x,
                                const float *restrict w, const float *restrict b,
                                float *restrict y)
{
    const int O = p->O;
    const size_t xs = (size_t)p->sw * p->C;
    /* 3 taps a row at dilation 1 and stride 1 or 2: the column-sharing kernels above */
    const int fast = p->kw == 3 && p->dw == 1 && (p->sw == 1 || p->sw == 2) ? p->sw : 0;
    int lo, hi, o;
    k_pixel t;
    interior_cols(p, &lo, &hi);
    if (O != p->C) lo = hi = 0; /* depth multiplier > 1: one pixel, one channel at a time */
    for (k_pixel_first(p, p->dh, p->dw, &t); t.oy < p->OH; t.oy++) {
        k_pixel_row(p, &t);
        for (t.ox = 0; t.ox < p->OW;) {
            k_pixel_col(p, &t);
            if (t.ox >= lo && t.ox + 4 <= hi) {
                const k_dwtaps tp = dw_taps(p, &t);
                const float *x0 = x + k_tap_at(&t, t.ky0, 0);
                const float *w0 = w + (size_t)t.ky0 * p->kw * O;
                float *yo = y + ((size_t)t.oy * p->OW + t.ox) * O;
                if (fast == 1) dw3_4x4_s1(x0, t.col, w0, &tp, b, yo, O, O / 4);
                else if (fast == 2) dw3_4x4_s2(x0, t.col, w0, &tp, b, yo, O, O / 4);
                else
                    for (o = 0; o + 4 <= O; o += 4)
                        dw_4x4(x0 + o, xs, w0 + o, &tp, b ? b + o : 0, yo + o, (size_t)O);
                for (o = O - O % 4; o < O; o++) {
                    int i;
                    for (i = 0; i < 4; i++)
                        yo[(size_t)i * O + o] =
                            dw_1x1(x0 + i * xs, w0, &tp, o, 1, b ? b[o] : 0.0f);
                }
                t.ox += 4;
            } else {
                dw_pixel(p, &t, x, w, b, y);
                t.ox++;
            }
        }
    }
}

/* Any other grouped convolution, weights (O, kh, kw, C / groups): one pixel, one output at a
 * time over the in-bounds taps. */
static void conv_nhwc_grouped(const k_window_params *p, const float *restrict x,
                              const float *restrict w, const float *restrict b, float *restrict y)
{
    const int O = p->O, kh = p->kh, kw = p->kw;
    const int cg = p->C / p->groups, og = O / p->groups;
    int o, ky, kx, ci;
    k_pixel t;
    for (k_pixel_first(p, p->dh, p->dw, &t); t.oy < p->OH; k_pixel_next(p, &t)) {
        float *yo = y + ((size_t)t.oy * p->OW + t.ox) * O;
        for (o = 0; o < O; o++) {
            const float *xo = x + (o / og) * cg, *wo = w + (size_t)o * kh * kw * cg;
            float acc = b ? b[o] : 0.0f;
            for (ky = t.ky0; ky < t.ky1; ky++)
                for (kx = t.kx0; kx < t.kx1; kx++) {
                    const float *xp = xo + k_tap_at(&t, ky, kx);
                    const float *wp = wo + ((size_t)ky * kw + kx) * cg;
                    for (ci = 0; ci < cg; ci++) acc += xp[ci] * wp[ci];
                }
            yo[o] = acc;
        }
    }
}

void k_conv2d_nhwc(const k_window_params *p, const float *restrict x, const float *restrict w,
                   const float *restrict b, float *restrict y)
{
    if (p->groups == 1)
        conv_nhwc_blocked(p, x, w, b, y);
    else if (p->groups == p->C)
        conv_nhwc_depthwise(p, x, w, b, y);
    else
        conv_nhwc_grouped(p, x, w, b, y);
    if (p->act.code != K_ACT_NONE)
        k_act(y, y, p->OH * p->OW * p->O, p->act.code, p->act.p0, p->act.p1);
}

/* Max (avg == 0) or average (avg == 1) over each window's in-bounds taps, the channel loop
 * innermost; the average divides by the taps counted as count_include_pad says. Inlined with a
 * constant avg into each pool below. */
K_INLINE void pool_nhwc(const k_window_params *p, const float *restrict x, float *restrict y,
                        int avg)
{
    const int C = p->C;
    int c, ky, kx;
    k_pixel t;
    for (k_pixel_first(p, 1, 1, &t); t.oy < p->OH; k_pixel_next(p, &t)) {
        float *yo = y + ((size_t)t.oy * p->OW + t.ox) * C;
        for (c = 0; c < C; c++) yo[c] = avg ? 0.0f : -3.40282347e38f;
        for (ky = t.ky0; ky < t.ky1; ky++)
            for (kx = t.kx0; kx < t.kx1; kx++) {
                const float *xp = x + k_tap_at(&t, ky, kx);
                if (avg)
                    for (c = 0; c < C; c++) yo[c] += xp[c];
                else
                    for (c = 0; c < C; c++) yo[c] = xp[c] > yo[c] ? xp[c] : yo[c];
            }
        if (avg) {
            const int n = p->count_include_pad ? k_padded_taps(p, &t) : k_taps(&t);
            const float inv = n > 0 ? 1.0f / (float)n : 0.0f;
            for (c = 0; c < C; c++) yo[c] *= inv;
        }
    }
    if (p->act.code != K_ACT_NONE)
        k_act(y, y, p->OH * p->OW * C, p->act.code, p->act.p0, p->act.p1);
}

void k_maxpool_nhwc(const k_window_params *p, const float *restrict x, float *restrict y)
{
    pool_nhwc(p, x, y, 0);
}

void k_avgpool_nhwc(const k_window_params *p, const float *restrict x, float *restrict y)
{
    pool_nhwc(p, x, y, 1);
}
