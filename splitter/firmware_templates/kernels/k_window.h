/*
 * Window iteration shared by the NHWC spatial kernels (float kernels_nhwc.c, int8 kernels_q8.c):
 * the output pixels of a k_window_params layer in row-major order, each with the input position
 * of its tap (0, 0) and the range of its taps that land inside the input, so the kernels never
 * read the padding. Header-only: the walk (K_INLINE) compiles into each kernel's loop nest (the
 * row range is recomputed once per output row, the column range once per pixel); k_tap_range is
 * a plain static function.
 */
#ifndef SPLITTER_K_WINDOW_H
#define SPLITTER_K_WINDOW_H

#include <stddef.h>

#include "kernels.h" /* k_window_params */

/* K_INLINE: a helper the compiler must inline, so that its state stays in registers and a call
 * with constant arguments (a pool's kind, a stride) gets its loop specialised, as a C++ template
 * would. K_HELPER: a static helper some including files do not call. */
#if defined(__GNUC__)
#define K_INLINE static inline __attribute__((always_inline))
#define K_HELPER static __attribute__((unused))
#else
#define K_INLINE static inline
#define K_HELPER static
#endif

/* One output pixel (oy, ox): input row iy0 = oy * sh - pt and column ix0 = ox * sw - pl of tap
 * (0, 0); the taps ky in [ky0, ky1), kx in [kx0, kx1) read input rows iy0 + ky * dh and columns
 * ix0 + kx * dw inside [0, H) x [0, W). The dilations and the input's strides (W * C a row, C a
 * column) are kept here, in registers, rather than read from the record: an int8 kernel's stores
 * may alias any object (C's character-type rule), so a field read through the record pointer
 * would be read again after every store. */
typedef struct {
    int oy, ox;
    int iy0, ix0;
    int ky0, ky1, kx0, kx1;
    int dh, dw;
    size_t row, col;
} k_pixel;

/* [lo, hi): the taps t < k with start + t * d inside [0, n). Plain static, not inline: GCC
 * keeps it out of line (specialising it per caller), and k_q_conv2d measured 1-3 % fewer
 * instructions than with it forced inline or forced out of line. */
K_HELPER void k_tap_range(int start, int n, int k, int d, int *lo, int *hi)
{
    int t0 = 0, t1 = k;
    while (t0 < k && start + t0 * d < 0) t0++;
    while (t1 > t0 && start + (t1 - 1) * d >= n) t1--;
    *lo = t0;
    *hi = t1;
}

K_INLINE void k_pixel_row(const k_window_params *p, k_pixel *t)
{
    t->iy0 = t->oy * p->sh - p->pt;
    k_tap_range(t->iy0, p->H, p->kh, t->dh, &t->ky0, &t->ky1);
}

K_INLINE void k_pixel_col(const k_window_params *p, k_pixel *t)
{
    t->ix0 = t->ox * p->sw - p->pl;
    k_tap_range(t->ix0, p->W, p->kw, t->dw, &t->kx0, &t->kx1);
}

/* The first output pixel (0, 0) of the walk with dilations dh, dw (1, 1 for pools); oy = OH
 * (the end) when the output is empty. Walk: for (k_pixel_first(p, dh, dw, &t); t.oy < p->OH;
 * k_pixel_next(p, &t)). */
K_INLINE void k_pixel_first(const k_window_params *p, int dh, int dw, k_pixel *t)
{
    t->oy = p->OW > 0 ? 0 : p->OH;
    t->ox = 0;
    t->dh = dh;
    t->dw = dw;
    t->col = (size_t)p->C;
    t->row = (size_t)p->W * t->col;
    k_pixel_row(p, t);
    k_pixel_col(p, t);
}

/* Advance to the next output pixel, row-major; oy becomes OH after the last one. */
K_INLINE void k_pixel_next(const k_window_params *p, k_pixel *t)
{
    if (++t->ox == p->OW) {
        t->ox = 0;
        if (++t->oy == p->OH) return;
        k_pixel_row(p, t);
    }
    k_pixel_col(p, t);
}

/* Element offset of input pixel (iy0 + ky * dh, ix0 + kx * dw), channel 0, of the H x W x C
 * input. */
K_INLINE size_t k_tap_at(const k_pixel *t, int ky, int kx)
{
    return (size_t)(t->iy0 + ky * t->dh) * t->row + (size_t)(t->ix0 + kx * t->dw) * t->col;
}

/* The number of in-bounds taps of the pixel (average pool without count_include_pad). */
K_INLINE int k_taps(const k_pixel *t)
{
    return (t->ky1 - t->ky0) * (t->kx1 - t->kx0);
}

/* The number of taps inside the padded input [-pt, H + pb) x [-pl, W + pr) (average pool with
 * count_include_pad, ONNX). */
K_INLINE int k_padded_taps(const k_window_params *p, const k_pixel *t)
{
    const int a0 = t->iy0 < -p->pt ? -p->pt : t->iy0;
    const int a1 = t->iy0 + p->kh > p->H + p->pb ? p->H + p->pb : t->iy0 + p->kh;
    const int b0 = t->ix0 < -p->pl ? -p->pl : t->ix0;
    const int b1 = t->ix0 + p->kw > p->W + p->pr ? p->W + p->pr : t->ix0 + p->kw;
    return (a1 - a0) * (b1 - b0);
}

#endif /* SPLITTER_K_WINDOW_H */
