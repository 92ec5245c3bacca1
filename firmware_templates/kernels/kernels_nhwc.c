/*
 * splitter float32 NHWC kernels (C99), see kernels_nhwc.h for layout and conventions.
 * Direct loops; the channel loop is innermost so weights and inputs are read contiguously.
 */
#include "kernels_nhwc.h"
#include "kernels.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("unroll-loops", "fp-contract=fast")
#endif

/* Clamp [lo, hi) of the kernel taps that land inside [0, n): first/last valid tap index. */
static void tap_range(int start, int n, int k, int d, int *lo, int *hi)
{
    int t0 = 0, t1 = k;
    while (t0 < k && start + t0 * d < 0) t0++;
    while (t1 > t0 && start + (t1 - 1) * d >= n) t1--;
    *lo = t0;
    *hi = t1;
}

void k_conv2d_nhwc(const k_window_params *p, const float *restrict x, const float *restrict w,
                   const float *restrict b, float *restrict y)
{
    const int C = p->C, H = p->H, W = p->W, O = p->O, OH = p->OH, OW = p->OW;
    const int kh = p->kh, kw = p->kw, sh = p->sh, sw = p->sw, pt = p->pt, pl = p->pl;
    const int dh = p->dh, dw = p->dw, groups = p->groups;
    const int cg = C / groups, og = O / groups;
    int oy, ox, o, ky, kx, ci, ky0, ky1, kx0, kx1;
    for (oy = 0; oy < OH; oy++) {
        const int iy0 = oy * sh - pt;
        tap_range(iy0, H, kh, dh, &ky0, &ky1);
        for (ox = 0; ox < OW; ox++) {
            const int ix0 = ox * sw - pl;
            float *yo = y + ((size_t)oy * OW + ox) * O;
            tap_range(ix0, W, kw, dw, &kx0, &kx1);
            for (o = 0; o < O; o++) {
                const int c0 = (o / og) * cg;
                float acc = b ? b[o] : 0.0f;
                for (ky = ky0; ky < ky1; ky++) {
                    const float *xr = x + ((size_t)(iy0 + ky * dh) * W) * C + c0;
                    const float *wr = w + ((size_t)o * kh + ky) * kw * cg;
                    for (kx = kx0; kx < kx1; kx++) {
                        const float *xp = xr + (size_t)(ix0 + kx * dw) * C;
                        const float *wp = wr + (size_t)kx * cg;
                        for (ci = 0; ci < cg; ci++) acc += xp[ci] * wp[ci];
                    }
                }
                yo[o] = acc;
            }
        }
    }
    if (p->act.code != K_ACT_NONE) k_act(y, y, OH * OW * O, p->act.code, p->act.p0, p->act.p1);
}

void k_maxpool_nhwc(const k_window_params *p, const float *restrict x, float *restrict y)
{
    const int C = p->C, H = p->H, W = p->W, OH = p->OH, OW = p->OW;
    const int kh = p->kh, kw = p->kw, sh = p->sh, sw = p->sw, pt = p->pt, pl = p->pl;
    int oy, ox, c, ky, kx, ky0, ky1, kx0, kx1;
    for (oy = 0; oy < OH; oy++) {
        const int iy0 = oy * sh - pt;
        tap_range(iy0, H, kh, 1, &ky0, &ky1);
        for (ox = 0; ox < OW; ox++) {
            const int ix0 = ox * sw - pl;
            float *yo = y + ((size_t)oy * OW + ox) * C;
            tap_range(ix0, W, kw, 1, &kx0, &kx1);
            for (c = 0; c < C; c++) yo[c] = -3.40282347e38f;
            for (ky = ky0; ky < ky1; ky++)
                for (kx = kx0; kx < kx1; kx++) {
                    const float *xp = x + ((size_t)(iy0 + ky) * W + (ix0 + kx)) * C;
                    for (c = 0; c < C; c++) yo[c] = xp[c] > yo[c] ? xp[c] : yo[c];
                }
        }
    }
    if (p->act.code != K_ACT_NONE) k_act(y, y, OH * OW * C, p->act.code, p->act.p0, p->act.p1);
}

void k_avgpool_nhwc(const k_window_params *p, const float *restrict x, float *restrict y)
{
    const int C = p->C, H = p->H, W = p->W, OH = p->OH, OW = p->OW;
    const int kh = p->kh, kw = p->kw, sh = p->sh, sw = p->sw, pt = p->pt, pl = p->pl;
    const int pb = p->pb, pr = p->pr, count_include_pad = p->count_include_pad;
    int oy, ox, c, ky, kx, ky0, ky1, kx0, kx1;
    for (oy = 0; oy < OH; oy++) {
        const int iy0 = oy * sh - pt;
        tap_range(iy0, H, kh, 1, &ky0, &ky1);
        for (ox = 0; ox < OW; ox++) {
            const int ix0 = ox * sw - pl;
            float *yo = y + ((size_t)oy * OW + ox) * C;
            float inv;
            int n;
            tap_range(ix0, W, kw, 1, &kx0, &kx1);
            if (count_include_pad) {
                int a0 = iy0 < -pt ? -pt : iy0, a1 = iy0 + kh > H + pb ? H + pb : iy0 + kh;
                int b0 = ix0 < -pl ? -pl : ix0, b1 = ix0 + kw > W + pr ? W + pr : ix0 + kw;
                n = (a1 - a0) * (b1 - b0);
            } else {
                n = (ky1 - ky0) * (kx1 - kx0);
            }
            inv = n > 0 ? 1.0f / (float)n : 0.0f;
            for (c = 0; c < C; c++) yo[c] = 0.0f;
            for (ky = ky0; ky < ky1; ky++)
                for (kx = kx0; kx < kx1; kx++) {
                    const float *xp = x + ((size_t)(iy0 + ky) * W + (ix0 + kx)) * C;
                    for (c = 0; c < C; c++) yo[c] += xp[c];
                }
            for (c = 0; c < C; c++) yo[c] *= inv;
        }
    }
    if (p->act.code != K_ACT_NONE) k_act(y, y, OH * OW * C, p->act.code, p->act.p0, p->act.p1);
}
