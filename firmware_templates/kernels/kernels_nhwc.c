/*
 * splitter float32 NHWC kernels (C99), see kernels_nhwc.h for layout and conventions.
 * Direct loops; the channel loop is innermost so weights and inputs are read contiguously.
 */
#include "kernels_nhwc.h"
#include "k_window.h"
#include "kernels.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("unroll-loops", "fp-contract=fast")
#endif

void k_conv2d_nhwc(const k_window_params *p, const float *restrict x, const float *restrict w,
                   const float *restrict b, float *restrict y)
{
    const int O = p->O, kh = p->kh, kw = p->kw, dh = p->dh, dw = p->dw;
    const int cg = p->C / p->groups, og = O / p->groups;
    int o, ky, kx, ci;
    k_pixel t;
    for (k_pixel_first(p, dh, dw, &t); t.oy < p->OH; k_pixel_next(p, &t)) {
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
    if (p->act.code != K_ACT_NONE)
        k_act(y, y, p->OH * p->OW * O, p->act.code, p->act.p0, p->act.p1);
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
