/*
 * splitter float32 kernel library (C99), see kernels.h for layout and conventions.
 * Hand-written because no MCU runtime (TFLM, CMSIS-NN) can be installed here.
 * Hot loops: 1x1 convolution as a register-blocked matrix multiply (4 output channels x 4
 * pixels), general convolution with 4 output channels x 2 pixels in the interior, 3x3 depthwise
 * with hoisted bounds, dense with 4 rows at once.
 */
#include "kernels.h"

/* Unrolled inner loops and fused multiply-add (vfma) even under -std=c99, which otherwise
 * implies -ffp-contract=off and doubles the FPU instructions per MAC. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("unroll-loops", "fp-contract=fast")
#endif

/* Hot inner kernels stay separate functions: inlined into their callers they share a register
 * file with the outer loops and spill. */
#if defined(__GNUC__)
#define K_NOINLINE __attribute__((noinline))
#define K_INLINE static inline __attribute__((always_inline))
#else
#define K_NOINLINE
#define K_INLINE static inline
#endif

/* ---------------------------------------------------------------- math ---- */

typedef union {
    float f;
    unsigned int u;
} k_fbits;

/* expf: x = k*ln2 + r, |r| <= ln2/2 (Cody-Waite, ln2 split in hi/lo), e^r by its degree 7
 * Taylor polynomial (truncation r^8/8! < 6e-9), 2^k built in the exponent bits. */
float k_expf(float x)
{
    const float log2e = 1.44269504f, ln2_hi = 0.693145752f, ln2_lo = 1.42860677e-6f;
    k_fbits s;
    float kf, r, p;
    int k;
    if (x > 88.7228317f) return 3.40282347e38f; /* saturate instead of +inf */
    if (x < -87.3365479f) return 0.0f;
    kf = x * log2e;
    k = (int)(kf < 0.0f ? kf - 0.5f : kf + 0.5f);
    kf = (float)k;
    r = (x - kf * ln2_hi) - kf * ln2_lo;
    p = 1.0f + r * (1.0f + r * (0.5f + r * (1.6666667e-1f + r * (4.1666668e-2f +
        r * (8.3333338e-3f + r * (1.3888889e-3f + r * 1.9841270e-4f))))));
    if (k > 127) {
        s.u = (unsigned int)(127 + 127) << 23;
        return p * s.f * 2.0f;
    }
    if (k < -126) {
        s.u = (unsigned int)(k + 126 + 127) << 23;
        return p * s.f * 1.17549435e-38f;
    }
    s.u = (unsigned int)(k + 127) << 23;
    return p * s.f;
}

float k_sigmoidf(float x)
{
    if (x >= 0.0f) return 1.0f / (1.0f + k_expf(-x));
    {
        float e = k_expf(x);
        return e / (1.0f + e);
    }
}

/* tanh(x) = sign(x) * (1 - t) / (1 + t), t = e^(-2|x|); for |x| < 0.125 the odd Taylor series
 * x - x^3/3 + 2x^5/15 - 17x^7/315 avoids the cancellation of 1 - t. */
float k_tanhf(float x)
{
    float a = x < 0.0f ? -x : x, t, r;
    if (a < 0.125f) {
        float x2 = x * x;
        return x * (1.0f + x2 * (-0.33333333f + x2 * (0.13333333f + x2 * -0.053968254f)));
    }
    t = k_expf(-2.0f * a);
    r = (1.0f - t) / (1.0f + t);
    return x < 0.0f ? -r : r;
}

/* erf: odd Taylor series to x^11 for |x| < 0.5 (truncation < 1e-7 relative); otherwise
 * 1 - t (a1 + t (a2 + t (a3 + t (a4 + t a5)))) e^(-x^2), t = 1 / (1 + 0.3275911 |x|)
 * (Abramowitz and Stegun 7.1.26, absolute error <= 1.5e-7), sign restored. */
float k_erff(float x)
{
    float a = x < 0.0f ? -x : x, t, r;
    if (a < 0.5f) {
        float x2 = x * x;
        return 1.12837917f * x *
               (1.0f + x2 * (-0.333333333f + x2 * (0.1f + x2 * (-0.0238095238f +
               x2 * (0.00462962963f + x2 * -0.000757575758f)))));
    }
    t = 1.0f / (1.0f + 0.3275911f * a);
    r = t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f +
        t * 1.061405429f)))) * k_expf(-a * a);
    return x < 0.0f ? r - 1.0f : 1.0f - r;
}

/* 1 + erf(x), without the cancellation of 1 + erf(x) for x << 0 (A&S 7.1.26 gives erfc). */
static float k_erf1p(float x)
{
    float a, t;
    if (x > -0.5f) return 1.0f + k_erff(x);
    a = -x;
    t = 1.0f / (1.0f + 0.3275911f * a);
    return t * (0.254829592f + t * (-0.284496736f + t * (1.421413741f + t * (-1.453152027f +
           t * 1.061405429f)))) * k_expf(-a * a);
}

static float k_act1(float v, int act, float p0, float p1)
{
    switch (act) {
    case K_ACT_RELU: return v > 0.0f ? v : 0.0f;
    case K_ACT_RELU6: return v < 0.0f ? 0.0f : (v > 6.0f ? 6.0f : v);
    case K_ACT_CLIP: return v < p0 ? p0 : (v > p1 ? p1 : v);
    case K_ACT_SIGMOID: return k_sigmoidf(v);
    case K_ACT_TANH: return k_tanhf(v);
    case K_ACT_HARDSWISH: {
        float g = v * (1.0f / 6.0f) + 0.5f;
        g = g < 0.0f ? 0.0f : (g > 1.0f ? 1.0f : g);
        return v * g;
    }
    case K_ACT_LEAKY: return v >= 0.0f ? v : v * p0;
    case K_ACT_HARDSIGMOID: {
        float g = p0 * v + p1;
        return g < 0.0f ? 0.0f : (g > 1.0f ? 1.0f : g);
    }
    case K_ACT_ERF: return k_erff(v);
    case K_ACT_GELU: return 0.5f * v * k_erf1p(v * 0.707106781f);
    case K_ACT_GELU_TANH:
        return 0.5f * v * (1.0f + k_tanhf(0.797884561f * (v + 0.044715f * v * v * v)));
    default: return v;
    }
}

#if defined(__GNUC__)
/* ReLU / ReLU6 on the IEEE-754 bits: a negative float has the sign bit set, so
 * v & ~(v >> 31) is max(x, 0) (GCC's >> of a negative int is arithmetic), and non-negative floats
 * order like their bit patterns, so min(x, 6) is an integer compare with 0x40C00000 (6.0f).
 * About half the instructions of the float compare / vmrs / select sequence on a Cortex-M4. */
typedef int k_i32_alias __attribute__((may_alias));

static void act_relu(const float *x, float *y, int n, int six)
{
    const k_i32_alias *xi = (const k_i32_alias *)x;
    k_i32_alias *yi = (k_i32_alias *)y;
    int i;
    if (six) {
        for (i = 0; i < n; i++) {
            int v = xi[i];
            v &= ~(v >> 31);
            yi[i] = v > 0x40C00000 ? 0x40C00000 : v;
        }
    } else {
        for (i = 0; i < n; i++) {
            int v = xi[i];
            yi[i] = v & ~(v >> 31);
        }
    }
}
#else
static void act_relu(const float *x, float *y, int n, int six)
{
    int i;
    for (i = 0; i < n; i++) {
        float v = x[i] > 0.0f ? x[i] : 0.0f;
        y[i] = six && v > 6.0f ? 6.0f : v;
    }
}
#endif

/* ln x for x > 0: x = m 2^e with m in [sqrt(1/2), sqrt(2)), ln x = e ln 2 + 2 atanh(s),
 * s = (m - 1) / (m + 1), atanh by its odd series to s^9 (|s| <= 0.172: truncation < 2e-9, so the
 * error is float32 rounding, ~1e-7 relative). x <= 0 or NaN gives -FLT_MAX. */
float k_logf(float x)
{
    union {
        float f;
        unsigned int u;
    } v;
    int e = 0;
    float m, s, s2;
    if (!(x > 0.0f)) return -3.40282347e38f;
    if (x < 1.17549435e-38f) { /* subnormal: scale into the normal range first */
        x *= 8388608.0f;
        e = -23;
    }
    v.f = x;
    e += (int)((v.u >> 23) & 0xffu) - 127;
    v.u = (v.u & 0x007fffffu) | 0x3f800000u; /* m in [1, 2) */
    m = v.f;
    if (m > 1.41421356f) {
        m *= 0.5f;
        e++;
    }
    s = (m - 1.0f) / (m + 1.0f);
    s2 = s * s;
    return (float)e * 0.693147181f +
           2.0f * s * (1.0f + s2 * (1.0f / 3 + s2 * (1.0f / 5 + s2 * (1.0f / 7 + s2 * (1.0f / 9)))));
}

void k_act(const float *x, float *y, int n, int act, float p0, float p1)
{
    int i;
    switch (act) {
    case K_ACT_NONE:
        if (x != y) k_copy(x, y, n);
        return;
    case K_ACT_RELU:
    case K_ACT_RELU6:
        act_relu(x, y, n, act == K_ACT_RELU6);
        return;
    case K_ACT_CLIP:
        for (i = 0; i < n; i++) {
            float v = x[i] < p0 ? p0 : x[i];
            y[i] = v > p1 ? p1 : v;
        }
        return;
    default:
        for (i = 0; i < n; i++) y[i] = k_act1(x[i], act, p0, p1);
    }
}

void k_pex_fill(float *restrict y, const float *restrict b, int O, int HW)
{
    int o, i;
    for (o = 0; o < O; o++) {
        const float v = b ? b[o] : 0.0f;
        float *yo = y + o * HW;
        for (i = 0; i < HW; i++) yo[i] = v;
    }
}

void k_pex_accumulate(const float *restrict x, const float *restrict w, int wstride, int O, int HW,
                      float *restrict y)
{
    int o, i;
    for (o = 0; o < O; o++) {
        const float wo = w[o * wstride];
        float *yo = y + o * HW;
        for (i = 0; i < HW; i++) yo[i] += wo * x[i];
    }
}

void k_copy(const float *x, float *y, int n)
{
    int i;
    if (x == y || n <= 0) return;
    if (y < x) {
        for (i = 0; i < n; i++) y[i] = x[i];
    } else {
        for (i = n - 1; i >= 0; i--) y[i] = x[i];
    }
}

/* --------------------------------------------------------- convolution ---- */

/* 1x1, stride 1, no pad, groups 1: Y (O, P) = W (O, C) X (C, P) + b, W packed by 4 rows. */
K_NOINLINE static void conv_pointwise(const float *restrict x, int C, int P,
                                      const float *restrict wp, const float *restrict b,
                                      float *restrict y, int O)
{
    int ob = 0, p, c, o;
    for (; ob + 4 <= O; ob += 4) {
        const float *wb = wp + ob * C;
        float b0 = b ? b[ob] : 0.0f, b1 = b ? b[ob + 1] : 0.0f;
        float b2 = b ? b[ob + 2] : 0.0f, b3 = b ? b[ob + 3] : 0.0f;
        float *y0 = y + ob * P, *y1 = y0 + P, *y2 = y1 + P, *y3 = y2 + P;
        for (p = 0; p + 4 <= P; p += 4) {
            float a00 = b0, a01 = b0, a02 = b0, a03 = b0, a10 = b1, a11 = b1, a12 = b1, a13 = b1;
            float a20 = b2, a21 = b2, a22 = b2, a23 = b2, a30 = b3, a31 = b3, a32 = b3, a33 = b3;
            const float *xp = x + p, *w = wb;
            for (c = 0; c < C; c++) {
                float x0 = xp[0], x1 = xp[1], x2 = xp[2], x3 = xp[3];
                float w0 = w[0], w1 = w[1], w2 = w[2], w3 = w[3];
                a00 += w0 * x0; a01 += w0 * x1; a02 += w0 * x2; a03 += w0 * x3;
                a10 += w1 * x0; a11 += w1 * x1; a12 += w1 * x2; a13 += w1 * x3;
                a20 += w2 * x0; a21 += w2 * x1; a22 += w2 * x2; a23 += w2 * x3;
                a30 += w3 * x0; a31 += w3 * x1; a32 += w3 * x2; a33 += w3 * x3;
                xp += P;
                w += 4;
            }
            y0[p] = a00; y0[p + 1] = a01; y0[p + 2] = a02; y0[p + 3] = a03;
            y1[p] = a10; y1[p + 1] = a11; y1[p + 2] = a12; y1[p + 3] = a13;
            y2[p] = a20; y2[p + 1] = a21; y2[p + 2] = a22; y2[p + 3] = a23;
            y3[p] = a30; y3[p + 1] = a31; y3[p + 2] = a32; y3[p + 3] = a33;
        }
        for (; p < P; p++) {
            float a0 = b0, a1 = b1, a2 = b2, a3 = b3;
            const float *xp = x + p, *w = wb;
            for (c = 0; c < C; c++) {
                float xv = *xp;
                a0 += w[0] * xv; a1 += w[1] * xv; a2 += w[2] * xv; a3 += w[3] * xv;
                xp += P;
                w += 4;
            }
            y0[p] = a0; y1[p] = a1; y2[p] = a2; y3[p] = a3;
        }
    }
    for (o = ob; o < O; o++) { /* remaining rows are stored row-major */
        const float *wr = wp + o * C;
        float bo = b ? b[o] : 0.0f;
        for (p = 0; p < P; p++) {
            float a = bo;
            for (c = 0; c < C; c++) a += wr[c] * x[c * P + p];
            y[o * P + p] = a;
        }
    }
}

/* Generic grouped convolution (any groups, weights in ONNX layout), rows o0..o0+On-1 of the
 * output: the fallback path. Per output pixel the valid tap ranges [ky0, ky1) x [kx0, kx1) are
 * computed once (hoisted bounds), so the tap loops run unchecked. */
K_NOINLINE static void conv_generic(const float *restrict x, int C, int H, int W,
                                    const float *restrict w, const float *restrict b,
                                    float *restrict y, int o0, int On, int O, int OH, int OW,
                                    int kh, int kw, int sh, int sw, int pt, int pl, int dh, int dw,
                                    int groups)
{
    int cg = C / groups, og = O / groups, o, oy, ox, c, ky, kx;
    for (o = o0; o < o0 + On; o++) {
        int g = o / og;
        const float *wo = w + (o - o0) * cg * kh * kw;
        const float *xg = x + g * cg * H * W;
        float bo = b ? b[o] : 0.0f;
        for (oy = 0; oy < OH; oy++) {
            int iy0 = oy * sh - pt, ky0 = 0, ky1 = kh;
            while (ky0 < kh && iy0 + ky0 * dh < 0) ky0++;
            while (ky1 > ky0 && iy0 + (ky1 - 1) * dh >= H) ky1--;
            for (ox = 0; ox < OW; ox++) {
                int ix0 = ox * sw - pl, kx0 = 0, kx1 = kw;
                float a = bo;
                if (sw == 1 && dw == 1 && ox + 3 < OW && ix0 >= 0 && ix0 + 2 + kw < W) {
                    /* four adjacent interior pixels: one weight load feeds 4 MACs */
                    float a1 = bo, a2 = bo, a3 = bo;
                    for (c = 0; c < cg; c++) {
                        for (ky = ky0; ky < ky1; ky++) {
                            const float *wr = wo + (c * kh + ky) * kw;
                            const float *xr = xg + (c * H + iy0 + ky * dh) * W + ix0;
                            for (kx = 0; kx < kw; kx++) {
                                float wv = wr[kx];
                                a += wv * xr[kx]; a1 += wv * xr[kx + 1];
                                a2 += wv * xr[kx + 2]; a3 += wv * xr[kx + 3];
                            }
                        }
                    }
                    y[(o * OH + oy) * OW + ox] = a;
                    y[(o * OH + oy) * OW + ox + 1] = a1;
                    y[(o * OH + oy) * OW + ox + 2] = a2;
                    y[(o * OH + oy) * OW + ox + 3] = a3;
                    ox += 3;
                    continue;
                }
                while (kx0 < kw && ix0 + kx0 * dw < 0) kx0++;
                while (kx1 > kx0 && ix0 + (kx1 - 1) * dw >= W) kx1--;
                for (c = 0; c < cg; c++) {
                    for (ky = ky0; ky < ky1; ky++) {
                        const float *wr = wo + (c * kh + ky) * kw;
                        const float *xr = xg + (c * H + iy0 + ky * dh) * W + ix0;
                        if (dw == 1) {
                            for (kx = kx0; kx < kx1; kx++) a += wr[kx] * xr[kx];
                        } else {
                            for (kx = kx0; kx < kx1; kx++) a += wr[kx] * xr[kx * dw];
                        }
                    }
                }
                y[(o * OH + oy) * OW + ox] = a;
            }
        }
    }
}

/* One output pixel of 4 packed output channels (border pixels): the valid tap ranges
 * [ky0, ky1) x [kx0, kx1) are computed once, then the taps run unchecked. */
K_NOINLINE static void conv4_pixel(const float *restrict x, int C, int H, int W,
                                   const float *restrict wb, int kh, int kw, int iy0, int ix0,
                                   int dh, int dw, float *acc)
{
    int c, ky, kx, ky0 = 0, ky1 = kh, kx0 = 0, kx1 = kw;
    float a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    while (ky0 < kh && iy0 + ky0 * dh < 0) ky0++;
    while (ky1 > ky0 && iy0 + (ky1 - 1) * dh >= H) ky1--;
    while (kx0 < kw && ix0 + kx0 * dw < 0) kx0++;
    while (kx1 > kx0 && ix0 + (kx1 - 1) * dw >= W) kx1--;
    for (c = 0; c < C; c++) {
        for (ky = ky0; ky < ky1; ky++) {
            const float *row = x + (c * H + iy0 + ky * dh) * W + ix0;
            const float *wk = wb + ((c * kh + ky) * kw) * 4;
            for (kx = kx0; kx < kx1; kx++) {
                float xv = row[kx * dw];
                a0 += wk[kx * 4] * xv; a1 += wk[kx * 4 + 1] * xv;
                a2 += wk[kx * 4 + 2] * xv; a3 += wk[kx * 4 + 3] * xv;
            }
        }
    }
    acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
}

/* Two horizontally adjacent interior output pixels (no bounds checks) of 4 packed channels:
 * per tap 2 input loads + 4 weight loads feed 8 multiply-accumulates. acc[0..3] / acc[4..7]
 * hold the 4 channels of the left / right pixel. */
K_NOINLINE static void conv4_pair(const float *restrict x, int C, int H, int W,
                                  const float *restrict wb, int kh, int kw, int iy0, int ix0,
                                  int sw, int dh, int dw, int ky0, int ky1, float *acc)
{
    int c, ky, kx;
    float a0 = acc[0], a1 = acc[1], a2 = acc[2], a3 = acc[3];
    float e0 = acc[4], e1 = acc[5], e2 = acc[6], e3 = acc[7];
    for (c = 0; c < C; c++) {
        for (ky = ky0; ky < ky1; ky++) {
            const float *ru = x + (c * H + iy0 + ky * dh) * W + ix0, *rv = ru + sw;
            const float *wk = wb + ((c * kh + ky) * kw) * 4;
            for (kx = 0; kx < kw; kx++) {
                float u = *ru, v = *rv;
                float w0 = wk[0], w1 = wk[1], w2 = wk[2], w3 = wk[3];
                a0 += w0 * u; a1 += w1 * u; a2 += w2 * u; a3 += w3 * u;
                e0 += w0 * v; e1 += w1 * v; e2 += w2 * v; e3 += w3 * v;
                wk += 4;
                ru += dw;
                rv += dw;
            }
        }
    }
    acc[0] = a0; acc[1] = a1; acc[2] = a2; acc[3] = a3;
    acc[4] = e0; acc[5] = e1; acc[6] = e2; acc[7] = e3;
}

/* n pairs of interior pixels from column ix0 on (any kernel), outputs stored straight to the
 * 4 output planes (plane stride P) at yo. */
static void conv4_run(const float *restrict x, int C, int H, int W, const float *restrict wb,
                      const float *restrict b4, int kh, int kw, int iy0, int ix0, int sw, int dh,
                      int dw, int ky0, int ky1, float *restrict yo, int P, int n)
{
    int i, r;
    for (i = 0; i < n; i++, ix0 += 2 * sw, yo += 2) {
        float acc[8];
        for (r = 0; r < 4; r++) acc[r] = acc[r + 4] = b4 ? b4[r] : 0.0f;
        conv4_pair(x, C, H, W, wb, kh, kw, iy0, ix0, sw, dh, dw, ky0, ky1, acc);
        for (r = 0; r < 4; r++) {
            yo[r * P] = acc[r];
            yo[r * P + 1] = acc[r + 4];
        }
    }
}

/* conv4_run for kw == 3, dw == 1 (the common 3x3 case): the three taps of a kernel row fully
 * unrolled with constant offsets, 6 input + 12 weight loads feed 24 multiply-accumulates. */
K_NOINLINE static void conv4_run_k3(const float *restrict x, int C, int H, int W,
                                    const float *restrict wb, const float *restrict b4, int kh,
                                    int iy0, int ix0, int sw, int dh, int ky0, int ky1,
                                    float *restrict yo, int P, int n)
{
    int i, c, ky;
    float b0 = b4 ? b4[0] : 0.0f, b1 = b4 ? b4[1] : 0.0f;
    float b2 = b4 ? b4[2] : 0.0f, b3 = b4 ? b4[3] : 0.0f;
    for (i = 0; i < n; i++, ix0 += 2 * sw, yo += 2) {
        float a0 = b0, a1 = b1, a2 = b2, a3 = b3, e0 = b0, e1 = b1, e2 = b2, e3 = b3;
        for (c = 0; c < C; c++) {
            const float *ru = x + (c * H + iy0 + ky0 * dh) * W + ix0;
            const float *wk = wb + (c * kh + ky0) * 12;
            for (ky = ky0; ky < ky1; ky++) {
                const float *rv = ru + sw;
                float u0 = ru[0], u1 = ru[1], u2 = ru[2], v0 = rv[0], v1 = rv[1], v2 = rv[2];
                a0 += wk[0] * u0; a1 += wk[1] * u0; a2 += wk[2] * u0; a3 += wk[3] * u0;
                e0 += wk[0] * v0; e1 += wk[1] * v0; e2 += wk[2] * v0; e3 += wk[3] * v0;
                a0 += wk[4] * u1; a1 += wk[5] * u1; a2 += wk[6] * u1; a3 += wk[7] * u1;
                e0 += wk[4] * v1; e1 += wk[5] * v1; e2 += wk[6] * v1; e3 += wk[7] * v1;
                a0 += wk[8] * u2; a1 += wk[9] * u2; a2 += wk[10] * u2; a3 += wk[11] * u2;
                e0 += wk[8] * v2; e1 += wk[9] * v2; e2 += wk[10] * v2; e3 += wk[11] * v2;
                ru += dh * W;
                wk += 12;
            }
        }
        yo[0] = a0; yo[1] = e0; yo[P] = a1; yo[P + 1] = e1;
        yo[2 * P] = a2; yo[2 * P + 1] = e2; yo[3 * P] = a3; yo[3 * P + 1] = e3;
    }
}

/* groups == 1, packed weights: 4 output channels at a time. */
K_NOINLINE static void conv_blocked(const float *restrict x, int C, int H, int W,
                                    const float *restrict wp, const float *restrict b,
                                    float *restrict y, int O, int OH, int OW, int kh, int kw,
                                    int sh, int sw, int pt, int pl, int dh, int dw)
{
    int K = C * kh * kw, ob, oy, ox, r;
    int P = OH * OW;
    /* interior columns [lo, hi): every tap of the pixel lies inside the input row */
    int lo = (pl + sw - 1) / sw, span = W - 1 - (kw - 1) * dw + pl;
    int hi = span < 0 ? 0 : span / sw + 1;
    if (hi > OW) hi = OW;
    if (lo > hi) lo = hi;
    for (ob = 0; ob + 4 <= O; ob += 4) {
        const float *wb = wp + ob * K, *b4 = b ? b + ob : 0;
        for (oy = 0; oy < OH; oy++) {
            int iy0 = oy * sh - pt, ky0 = 0, ky1 = kh, npair = (hi - lo) / 2;
            float *yo = y + ob * P + oy * OW;
            while (ky0 < kh && iy0 + ky0 * dh < 0) ky0++;
            while (ky1 > ky0 && iy0 + (ky1 - 1) * dh >= H) ky1--;
            if (kw == 3 && dw == 1)
                conv4_run_k3(x, C, H, W, wb, b4, kh, iy0, lo * sw - pl, sw, dh, ky0, ky1,
                             yo + lo, P, npair);
            else
                conv4_run(x, C, H, W, wb, b4, kh, kw, iy0, lo * sw - pl, sw, dh, dw, ky0, ky1,
                          yo + lo, P, npair);
            for (ox = 0; ox < OW; ox++) {
                float acc[4];
                if (ox == lo) ox += 2 * npair;
                if (ox >= OW) break;
                for (r = 0; r < 4; r++) acc[r] = b4 ? b4[r] : 0.0f;
                conv4_pixel(x, C, H, W, wb, kh, kw, iy0, ox * sw - pl, dh, dw, acc);
                for (r = 0; r < 4; r++) yo[r * P + ox] = acc[r];
            }
        }
    }
    if (ob < O)
        conv_generic(x, C, H, W, wp + ob * K, b, y, ob, O - ob, O, OH, OW, kh, kw, sh, sw, pt,
                     pl, dh, dw, 1);
}

/* One depthwise border pixel: rows outside the input already carry zero weights (vv) and a
 * valid dummy row pointer, so only the columns need checks. */
static float dw_edge(const float *b0, const float *b1, const float *b2, const float *vv, int ix0,
                     int dw, int W, float a)
{
    int kx;
    for (kx = 0; kx < 3; kx++) {
        int ix = ix0 + kx * dw;
        if (ix < 0 || ix >= W) continue;
        a += vv[kx] * b0[ix] + vv[3 + kx] * b1[ix] + vv[6 + kx] * b2[ix];
    }
    return a;
}

/* The 9 weights of a depthwise 3x3 channel (zero for a row outside the input) and its bias. */
typedef struct {
    float v00, v01, v02, v10, v11, v12, v20, v21, v22, bc;
} dw3_taps;

/* One interior output: bc + the 3x3 taps at r0, r1, r2 (kernel rows), columns 0, d, 2d. */
K_INLINE float dw3_at(const dw3_taps *k, const float *r0, const float *r1, const float *r2, int d)
{
    float a = k->bc + k->v00 * r0[0];
    a += k->v01 * r0[d]; a += k->v02 * r0[2 * d];
    a += k->v10 * r1[0]; a += k->v11 * r1[d]; a += k->v12 * r1[2 * d];
    a += k->v20 * r2[0]; a += k->v21 * r2[d]; a += k->v22 * r2[2 * d];
    return a;
}

/* n interior outputs of one row at stride s, dilation d, two at a time (their shared input
 * columns loaded once). Called with constant (s, d) for the common cases, so the inlined copy
 * uses constant offsets with the weights in registers. */
K_INLINE void dw3_run(const dw3_taps *k, const float *r0, const float *r1, const float *r2,
                      int s, int d, float *restrict yr, int n)
{
    int i;
    for (i = 0; i + 2 <= n; i += 2) {
        const float a = dw3_at(k, r0, r1, r2, d), e = dw3_at(k, r0 + s, r1 + s, r2 + s, d);
        yr[i] = a;
        yr[i + 1] = e;
        r0 += 2 * s; r1 += 2 * s; r2 += 2 * s;
    }
    if (i < n) yr[i] = dw3_at(k, r0, r1, r2, d);
}

/* Depthwise 3x3 (groups == C == O): the 9 weights in registers; per output row the interior
 * column range [lo, hi) is computed once (hoisted bounds), so interior pixels run unchecked
 * with the three input rows walked by pointers; dilation 1 uses constant offsets. */
K_NOINLINE static void conv_dw3x3(const float *restrict x, int C, int H, int W,
                                  const float *restrict w, const float *restrict b,
                                  float *restrict y, int OH, int OW, int sh, int sw, int pt,
                                  int pl, int dh, int dw)
{
    int c, oy, ox;
    int lo = (pl + sw - 1) / sw, hi = (W - 1 - 2 * dw + pl) / sw + 1;
    if (W - 1 - 2 * dw + pl < 0) hi = 0;
    if (hi > OW) hi = OW;
    if (lo > hi) lo = hi;
    for (c = 0; c < C; c++) {
        const float *xc = x + c * H * W, *wc = w + c * 9;
        float w00 = wc[0], w01 = wc[1], w02 = wc[2], w10 = wc[3], w11 = wc[4], w12 = wc[5];
        float w20 = wc[6], w21 = wc[7], w22 = wc[8], bc = b ? b[c] : 0.0f;
        float *yc = y + c * OH * OW;
        for (oy = 0; oy < OH; oy++) {
            int iy0 = oy * sh - pt;
            float *yr = yc + oy * OW;
            int ok0 = iy0 >= 0 && iy0 < H, ok1 = iy0 + dh >= 0 && iy0 + dh < H;
            int ok2 = iy0 + 2 * dh >= 0 && iy0 + 2 * dh < H;
            /* a row outside the input gets zero weights and a valid dummy row pointer */
            float v00 = ok0 ? w00 : 0.0f, v01 = ok0 ? w01 : 0.0f, v02 = ok0 ? w02 : 0.0f;
            float v10 = ok1 ? w10 : 0.0f, v11 = ok1 ? w11 : 0.0f, v12 = ok1 ? w12 : 0.0f;
            float v20 = ok2 ? w20 : 0.0f, v21 = ok2 ? w21 : 0.0f, v22 = ok2 ? w22 : 0.0f;
            int base = lo * sw - pl;
            const float *b0 = xc + (ok0 ? iy0 * W : 0), *b1 = xc + (ok1 ? (iy0 + dh) * W : 0);
            const float *b2 = xc + (ok2 ? (iy0 + 2 * dh) * W : 0);
            float vv[9];
            vv[0] = v00; vv[1] = v01; vv[2] = v02; vv[3] = v10; vv[4] = v11; vv[5] = v12;
            vv[6] = v20; vv[7] = v21; vv[8] = v22;
            for (ox = 0; ox < lo; ox++) yr[ox] = dw_edge(b0, b1, b2, vv, ox * sw - pl, dw, W, bc);
            if (lo < hi) {
                const float *r0 = b0 + base, *r1 = b1 + base, *r2 = b2 + base;
                const dw3_taps k = {v00, v01, v02, v10, v11, v12, v20, v21, v22, bc};
                if (dw == 1 && sw == 1) dw3_run(&k, r0, r1, r2, 1, 1, yr + lo, hi - lo);
                else if (dw == 1 && sw == 2) dw3_run(&k, r0, r1, r2, 2, 1, yr + lo, hi - lo);
                else dw3_run(&k, r0, r1, r2, sw, dw, yr + lo, hi - lo);
            }
            for (ox = hi; ox < OW; ox++) yr[ox] = dw_edge(b0, b1, b2, vv, ox * sw - pl, dw, W, bc);
        }
    }
}

void k_conv2d(const k_window_params *p, const float *restrict x, const float *restrict w,
              const float *restrict b, float *restrict y)
{
    const int C = p->C, H = p->H, W = p->W, O = p->O, OH = p->OH, OW = p->OW;
    const int kh = p->kh, kw = p->kw, sh = p->sh, sw = p->sw, pt = p->pt, pl = p->pl;
    const int dh = p->dh, dw = p->dw, groups = p->groups;
    if (groups == 1 && kh == 1 && kw == 1 && sh == 1 && sw == 1 && pt == 0 && pl == 0 &&
        OH == H && OW == W) {
        conv_pointwise(x, C, H * W, w, b, y, O);
    } else if (groups == 1) {
        conv_blocked(x, C, H, W, w, b, y, O, OH, OW, kh, kw, sh, sw, pt, pl, dh, dw);
    } else if (groups == C && O == C && kh == 3 && kw == 3) {
        conv_dw3x3(x, C, H, W, w, b, y, OH, OW, sh, sw, pt, pl, dh, dw);
    } else {
        conv_generic(x, C, H, W, w, b, y, 0, O, O, OH, OW, kh, kw, sh, sw, pt, pl, dh, dw,
                     groups);
    }
    if (p->act.code != K_ACT_NONE) k_act(y, y, O * OH * OW, p->act.code, p->act.p0, p->act.p1);
}

/* Transposed conv (ONNX ConvTranspose, groups 1), gathered: per output element the taps with
 * oy + pt = iy * sh + ky * dh (the same along x) and iy, ix inside the input; w is
 * (O, kh, kw, C), b may be NULL; no scratch. */
void k_conv_transpose(const k_window_params *p, const float *restrict x,
                      const float *restrict w, const float *restrict b, float *restrict y)
{
    const int C = p->C, H = p->H, W = p->W, O = p->O, OH = p->OH, OW = p->OW;
    const int kh = p->kh, kw = p->kw, sh = p->sh, sw = p->sw, pt = p->pt, pl = p->pl;
    const int dh = p->dh, dw = p->dw, plane = H * W;
    int o, oy, ox, ky, kx, c;
    for (o = 0; o < O; o++) {
        const float *wo = w + (size_t)o * kh * kw * C;
        for (oy = 0; oy < OH; oy++) {
            for (ox = 0; ox < OW; ox++) {
                float acc = b ? b[o] : 0.0f;
                for (ky = 0; ky < kh; ky++) {
                    const int ty = oy + pt - ky * dh;
                    if (ty < 0 || ty % sh != 0 || ty / sh >= H) continue;
                    for (kx = 0; kx < kw; kx++) {
                        const int tx = ox + pl - kx * dw;
                        const float *xp, *wp;
                        if (tx < 0 || tx % sw != 0 || tx / sw >= W) continue;
                        xp = x + (ty / sh) * W + tx / sw;
                        wp = wo + (ky * kw + kx) * C;
                        for (c = 0; c < C; c++) acc += xp[c * plane] * wp[c];
                    }
                }
                y[((size_t)o * OH + oy) * OW + ox] = acc;
            }
        }
    }
    if (p->act.code != K_ACT_NONE) k_act(y, y, O * OH * OW, p->act.code, p->act.p0, p->act.p1);
}

/* ---------------------------------------------------------- dense/matmul ---- */

void k_dense(const k_dense_params *p, const float *restrict x, const float *restrict wp,
             const float *restrict b, float *restrict y)
{
    const int in = p->in, out = p->out;
    int ob = 0, i, o;
    for (; ob + 4 <= out; ob += 4) {
        const float *w = wp + ob * in;
        float a0 = b ? b[ob] : 0.0f, a1 = b ? b[ob + 1] : 0.0f;
        float a2 = b ? b[ob + 2] : 0.0f, a3 = b ? b[ob + 3] : 0.0f;
        for (i = 0; i + 2 <= in; i += 2) {
            float x0 = x[i], x1 = x[i + 1];
            a0 += w[0] * x0; a1 += w[1] * x0; a2 += w[2] * x0; a3 += w[3] * x0;
            a0 += w[4] * x1; a1 += w[5] * x1; a2 += w[6] * x1; a3 += w[7] * x1;
            w += 8;
        }
        if (i < in) {
            float x0 = x[i];
            a0 += w[0] * x0; a1 += w[1] * x0; a2 += w[2] * x0; a3 += w[3] * x0;
        }
        y[ob] = a0; y[ob + 1] = a1; y[ob + 2] = a2; y[ob + 3] = a3;
    }
    for (o = ob; o < out; o++) {
        const float *wr = wp + o * in;
        float a = b ? b[o] : 0.0f;
        for (i = 0; i < in; i++) a += wr[i] * x[i];
        y[o] = a;
    }
    if (p->act.code != K_ACT_NONE) k_act(y, y, out, p->act.code, p->act.p0, p->act.p1);
}

void k_matmul(const k_matmul_params *p, const float *restrict a, const float *restrict bm,
              float *restrict y)
{
    const int M = p->M, K = p->K, N = p->N;
    int m, n, k;
    for (m = 0; m < M; m++) {
        for (n = 0; n < N; n++) y[m * N + n] = 0.0f;
        for (k = 0; k < K; k++) {
            float av = a[m * K + k];
            const float *br = bm + k * N;
            float *yr = y + m * N;
            for (n = 0; n < N; n++) yr[n] += av * br[n];
        }
    }
    if (p->act.code != K_ACT_NONE) k_act(y, y, M * N, p->act.code, p->act.p0, p->act.p1);
}

/* --------------------------------------------------------------- pooling ---- */

/* Max (avg == 0) or average (avg == 1) over each window's in-bounds taps, one channel plane at a
 * time; the average divides by the taps counted as count_include_pad says. Inlined with a
 * constant avg into each pool below. */
K_INLINE void pool_nchw(const k_window_params *p, const float *restrict x, float *restrict y,
                        int avg)
{
    const int C = p->C, H = p->H, W = p->W, OH = p->OH, OW = p->OW;
    const int kh = p->kh, kw = p->kw, sh = p->sh, sw = p->sw, pt = p->pt, pl = p->pl;
    const int pb = p->pb, pr = p->pr, count_include_pad = p->count_include_pad;
    int c, oy, ox, ky, kx;
    for (c = 0; c < C; c++) {
        const float *xc = x + c * H * W;
        for (oy = 0; oy < OH; oy++) {
            int iy0 = oy * sh - pt;
            int ya = iy0 < 0 ? 0 : iy0, yb = iy0 + kh > H ? H : iy0 + kh;
            int pa = iy0 < -pt ? -pt : iy0, pz = iy0 + kh > H + pb ? H + pb : iy0 + kh;
            for (ox = 0; ox < OW; ox++) {
                int ix0 = ox * sw - pl;
                int xa = ix0 < 0 ? 0 : ix0, xb = ix0 + kw > W ? W : ix0 + kw;
                int qa = ix0 < -pl ? -pl : ix0, qz = ix0 + kw > W + pr ? W + pr : ix0 + kw;
                float s = avg ? 0.0f : -3.40282347e38f;
                for (ky = ya; ky < yb; ky++)
                    for (kx = xa; kx < xb; kx++) {
                        float v = xc[ky * W + kx];
                        s = avg ? s + v : (v > s ? v : s);
                    }
                if (avg) {
                    int n = count_include_pad ? (pz - pa) * (qz - qa) : (yb - ya) * (xb - xa);
                    s = n > 0 ? s / (float)n : 0.0f;
                }
                y[(c * OH + oy) * OW + ox] = s;
            }
        }
    }
    if (p->act.code != K_ACT_NONE) k_act(y, y, C * OH * OW, p->act.code, p->act.p0, p->act.p1);
}

void k_maxpool(const k_window_params *p, const float *restrict x, float *restrict y)
{
    pool_nchw(p, x, y, 0);
}

void k_avgpool(const k_window_params *p, const float *restrict x, float *restrict y)
{
    pool_nchw(p, x, y, 1);
}

void k_mean(const k_reduce_params *p, const float *restrict x, float *restrict y)
{
    const int outer = p->outer, red = p->red, inner = p->inner;
    int o, r, i;
    float inv = 1.0f / (float)red;
    for (o = 0; o < outer; o++) {
        for (i = 0; i < inner; i++) {
            const float *xp = x + o * red * inner + i;
            float s = 0.0f;
            for (r = 0; r < red; r++) s += xp[r * inner];
            y[o * inner + i] = s * inv;
        }
    }
    if (p->act.code != K_ACT_NONE)
        k_act(y, y, outer * inner, p->act.code, p->act.p0, p->act.p1);
}

/* ------------------------------------------------------------ element-wise ---- */

void k_binary(const k_binary_params *p, const float *a, const float *b, float *y)
{
    const int op = p->op, *as = p->as, *bs = p->bs, *ys = p->ys;
    int i0, i1, i2, i3, n = 0;
    for (i0 = 0; i0 < ys[0]; i0++)
        for (i1 = 0; i1 < ys[1]; i1++)
            for (i2 = 0; i2 < ys[2]; i2++) {
                const float *ap = a + i0 * as[0] + i1 * as[1] + i2 * as[2];
                const float *bp = b + i0 * bs[0] + i1 * bs[1] + i2 * bs[2];
                for (i3 = 0; i3 < ys[3]; i3++) {
                    float u = ap[i3 * as[3]], v = bp[i3 * bs[3]], r;
                    switch (op) {
                    case K_ADD: r = u + v; break;
                    case K_SUB: r = u - v; break;
                    case K_MUL: r = u * v; break;
                    default: r = u / v; break;
                    }
                    y[n++] = r;
                }
            }
    if (p->act.code != K_ACT_NONE) k_act(y, y, n, p->act.code, p->act.p0, p->act.p1);
}

void k_concat_part(const float *restrict x, int outer, int xn, float *restrict y, int ytot,
                   int yoff)
{
    int o, i;
    for (o = 0; o < outer; o++)
        for (i = 0; i < xn; i++) y[o * ytot + yoff + i] = x[o * xn + i];
}

void k_slice_part(const float *restrict x, int outer, int xtot, int xoff, float *restrict y,
                  int yn)
{
    int o, i;
    for (o = 0; o < outer; o++)
        for (i = 0; i < yn; i++) y[o * yn + i] = x[o * xtot + xoff + i];
}

void k_softmax(const float *restrict x, int outer, int n, int inner, float *restrict y)
{
    int o, i, k;
    for (o = 0; o < outer; o++) {
        for (i = 0; i < inner; i++) {
            const float *xp = x + o * n * inner + i;
            float *yp = y + o * n * inner + i;
            float m = xp[0], s = 0.0f, inv;
            for (k = 1; k < n; k++) m = xp[k * inner] > m ? xp[k * inner] : m;
            for (k = 0; k < n; k++) {
                float e = k_expf(xp[k * inner] - m);
                yp[k * inner] = e;
                s += e;
            }
            inv = 1.0f / s;
            for (k = 0; k < n; k++) yp[k * inner] *= inv;
        }
    }
}

void k_batchnorm(const float *restrict x, int C, int HW, const float *restrict scale,
                 const float *restrict shift, float *restrict y)
{
    int c, i;
    for (c = 0; c < C; c++) {
        float s = scale[c], t = shift[c];
        for (i = 0; i < HW; i++) y[c * HW + i] = x[c * HW + i] * s + t;
    }
}

void k_pad(const k_pad_params *p, const float *restrict x, float *restrict y)
{
    const int *xs = p->xs, *ys = p->ys, *begins = p->begins;
    const float value = p->value;
    int i0, i1, i2, i3, n = ys[0] * ys[1] * ys[2] * ys[3];
    for (i0 = 0; i0 < n; i0++) y[i0] = value;
    for (i0 = 0; i0 < xs[0]; i0++)
        for (i1 = 0; i1 < xs[1]; i1++)
            for (i2 = 0; i2 < xs[2]; i2++) {
                const float *xr = x + ((i0 * xs[1] + i1) * xs[2] + i2) * xs[3];
                float *yr = y + (((i0 + begins[0]) * ys[1] + i1 + begins[1]) * ys[2] + i2 +
                                 begins[2]) * ys[3] + begins[3];
                for (i3 = 0; i3 < xs[3]; i3++) yr[i3] = xr[i3];
            }
}

void k_transpose(const float *restrict x, float *restrict y, const int *ys, const int *xstr)
{
    int i0, i1, i2, i3, n = 0;
    for (i0 = 0; i0 < ys[0]; i0++)
        for (i1 = 0; i1 < ys[1]; i1++)
            for (i2 = 0; i2 < ys[2]; i2++)
                for (i3 = 0; i3 < ys[3]; i3++)
                    y[n++] = x[i0 * xstr[0] + i1 * xstr[1] + i2 * xstr[2] + i3 * xstr[3]];
}

/* An odometer over y's index: y[n] = x[off], then step the last axis; an axis that wraps
 * takes its ys[d] * xstr[d] back off off and carries into the axis before it. */
void k_transpose_nd(const float *restrict x, float *restrict y, int rank, const int *ys,
                    const int *xstr)
{
    int idx[K_TRANSPOSE_MAX_RANK];
    int d, n, total = 1, off = 0;
    for (d = 0; d < rank; d++) {
        idx[d] = 0;
        total *= ys[d];
    }
    for (n = 0; n < total; n++) {
        y[n] = x[off];
        for (d = rank - 1; d >= 0; d--) {
            off += xstr[d];
            if (++idx[d] < ys[d]) break;
            off -= ys[d] * xstr[d];
            idx[d] = 0;
        }
    }
}

/* -------------------------------------------------------------------- lrn ---- */

void k_lrn(const k_lrn_params *p, const float *restrict x, float *restrict y)
{
    const int C = p->C, inner = p->inner;
    int o, c, i, k;
    for (o = 0; o < p->outer; o++) {
        const float *xo = x + (size_t)o * C * inner;
        float *yo = y + (size_t)o * C * inner;
        for (c = 0; c < C; c++) {
            const int k0 = c - p->lo < 0 ? 0 : c - p->lo;
            const int k1 = c + p->hi >= C ? C - 1 : c + p->hi;
            for (i = 0; i < inner; i++) {
                float sq = 0.0f, d;
                for (k = k0; k <= k1; k++) sq += xo[k * inner + i] * xo[k * inner + i];
                d = p->bias + p->alpha_over_size * sq;
                yo[c * inner + i] = xo[c * inner + i] * k_expf(-p->beta * k_logf(d));
            }
        }
    }
}

/* ------------------------------------------------------------- gathers ---- */

void k_gather_axes(const k_gather_params *p, const float *restrict x, float *restrict y)
{
    const int *m0 = p->map[0], *m1 = p->map[1], *m2 = p->map[2], *m3 = p->map[3];
    const int *ys = p->ys;
    int i0, i1, i2, i3;
    for (i0 = 0; i0 < ys[0]; i0++)
        for (i1 = 0; i1 < ys[1]; i1++) {
            const float *x01 = x + m0[i0] + m1[i1];
            for (i2 = 0; i2 < ys[2]; i2++) {
                const float *xr = x01 + m2[i2];
                for (i3 = 0; i3 < ys[3]; i3++) *y++ = xr[m3[i3]];
            }
        }
}

void k_resize_linear(const k_resize_params *p, const float *restrict x, float *restrict y)
{
    const int *ys = p->ys;
    int i0, i1, i2, i3;
    for (i0 = 0; i0 < ys[0]; i0++)
        for (i1 = 0; i1 < ys[1]; i1++) {
            const float *x01 = x + p->m0[i0] + p->m1[i1];
            for (i2 = 0; i2 < ys[2]; i2++) {
                const float *r0 = x01 + p->h0[i2], *r1 = x01 + p->h1[i2];
                const float fh = p->fh[i2];
                for (i3 = 0; i3 < ys[3]; i3++) {
                    const int a = p->w0[i3], b = p->w1[i3];
                    const float fw = p->fw[i3];
                    const float top = r0[a] + fw * (r0[b] - r0[a]);
                    const float bot = r1[a] + fw * (r1[b] - r1[a]);
                    *y++ = top + fh * (bot - top);
                }
            }
        }
}
