/*
 * splitter int8 kernels (C99), see kernels_q8.h for the quantisation conventions.
 * Integer arithmetic as TFLite's reference integer kernels; TANH / LOGISTIC / SOFTMAX use
 * LiteRT's float lookup-table formulas (dequantise, f in float, round to the output scale).
 */
#include <string.h>

#include "k_dsp.h"
#include "k_window.h"
#include "kernels.h"
#include "kernels_q8.h"

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("unroll-loops")
#endif

#define Q_MIN (-128)
#define Q_MAX 127

static int clampi(int32_t v, int lo, int hi)
{
    return v < lo ? lo : (v > hi ? hi : (int)v);
}

/* gemmlowp::SaturatingRoundingDoublingHighMul: round(a * b / 2^31), saturating. */
static int32_t srdhm(int32_t a, int32_t b)
{
    int64_t ab;
    int64_t nudge;
    if (a == b && a == INT32_MIN) return INT32_MAX;
    ab = (int64_t)a * (int64_t)b;
    nudge = ab >= 0 ? ((int64_t)1 << 30) : (1 - ((int64_t)1 << 30));
    return (int32_t)((ab + nudge) / ((int64_t)1 << 31));
}

/* gemmlowp::RoundingDivideByPOT: x / 2^e rounded half away from zero. */
static int32_t rdbpot(int32_t x, int e)
{
    const int32_t mask = (int32_t)(((int64_t)1 << e) - 1);
    const int32_t remainder = x & mask;
    const int32_t threshold = (mask >> 1) + (x < 0 ? 1 : 0);
    return (x >> e) + (remainder > threshold ? 1 : 0);
}

int32_t k_q_mul(int32_t x, int32_t m, int s)
{
    const int left = s > 0 ? s : 0, right = s > 0 ? 0 : -s;
    return rdbpot(srdhm((int32_t)((int64_t)x * ((int64_t)1 << left)), m), right);
}

/* LiteRT's GEMM path (ruy): rounding doubling high multiply and rounding right shift that both
 * round ties upward (ARM SQRDMULH + SRSHL semantics; ruy's x86 kernels match them), instead of
 * gemmlowp's ties-away-from-zero. Used by k_q_conv2d (groups == 1) and k_q_dense when
 * round_up is set; differs from k_q_mul only on exact ties. */
int32_t k_q_mul_up(int32_t x, int32_t m, int s)
{
    const int left = s > 0 ? s : 0, right = s > 0 ? 0 : -s;
    const int64_t xl = (int64_t)x * ((int64_t)1 << left);
    int64_t hi = ((int64_t)(int32_t)xl * m + ((int64_t)1 << 30)) >> 31;
    if (hi > INT32_MAX) hi = INT32_MAX;
    if (right > 0) hi = (hi + ((int64_t)1 << (right - 1))) >> right;
    return (int32_t)hi;
}

/* std::round (half away from zero) for |x| < 2^31, without libm. */
static float roundf_away(float x)
{
    float t = (float)(int32_t)x;
    if (x - t >= 0.5f) t += 1.0f;
    else if (t - x >= 0.5f) t -= 1.0f;
    return t;
}

static double round_away(double x)
{
    double t = (double)(int64_t)x;
    if (x - t >= 0.5) t += 1.0;
    else if (t - x >= 0.5) t -= 1.0;
    return t;
}

/* Explicit row / column loops rather than the k_pixel walk (k_window.h): with int8 stores, which
 * may alias any object, the walk's state costs 1-3 % more instructions here. */
void k_q_conv2d(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict y)
{
    const int C = p->C, H = p->H, W = p->W, O = p->O, OH = p->OH, OW = p->OW;
    const int kh = p->kh, kw = p->kw, sh = p->sh, sw = p->sw, pt = p->pt, pl = p->pl;
    const int dh = p->dh, dw = p->dw, groups = p->groups;
    const int in_zp = q->in_zp, out_zp = q->out_zp, act_min = q->act_min, act_max = q->act_max;
    const int nq = q->nq, round_up = q->round_up;
    const int32_t *mult = q->mult, *shift = q->shift;
    const int cg = C / groups, og = O / groups;
    int oy, ox, o, ky, kx, ci, ky0, ky1, kx0, kx1;
    for (oy = 0; oy < OH; oy++) {
        const int iy0 = oy * sh - pt;
        k_tap_range(iy0, H, kh, dh, &ky0, &ky1);
        for (ox = 0; ox < OW; ox++) {
            const int ix0 = ox * sw - pl;
            int8_t *yo = y + ((size_t)oy * OW + ox) * O;
            k_tap_range(ix0, W, kw, dw, &kx0, &kx1);
            for (o = 0; o < O; o++) {
                const int c0 = (o / og) * cg, k = nq > 1 ? o : 0;
                int32_t acc = 0;
                for (ky = ky0; ky < ky1; ky++) {
                    const int8_t *xr = x + ((size_t)(iy0 + ky * dh) * W) * C + c0;
                    const int8_t *wr = w + ((size_t)o * kh + ky) * kw * cg;
                    for (kx = kx0; kx < kx1; kx++) {
                        const int8_t *xp = xr + (size_t)(ix0 + kx * dw) * C;
                        const int8_t *wp = wr + (size_t)kx * cg;
                        for (ci = 0; ci < cg; ci++) acc += (int32_t)wp[ci] * (xp[ci] - in_zp);
                    }
                }
                if (b) acc += b[o];
                acc = round_up ? k_q_mul_up(acc, mult[k], shift[k])
                               : k_q_mul(acc, mult[k], shift[k]);
                yo[o] = (int8_t)clampi(acc + out_zp, act_min, act_max);
            }
        }
    }
}

void k_q_dw_plane(const k_window_params *p, const k_q_params *q, const int8_t *x, int xs,
                  const int8_t *restrict w, const int32_t *b, int8_t *y, int ys)
{
    const int H = p->H, W = p->W, OH = p->OH, OW = p->OW, kh = p->kh, kw = p->kw;
    const int sh = p->sh, sw = p->sw, pt = p->pt, pl = p->pl, dh = p->dh, dw = p->dw;
    const int in_zp = q->in_zp;
    int oy, ox, ky, kx, ky0, ky1, kx0, kx1;
    for (oy = 0; oy < OH; oy++) {
        const int iy0 = oy * sh - pt;
        k_tap_range(iy0, H, kh, dh, &ky0, &ky1);
        for (ox = 0; ox < OW; ox++) {
            const int ix0 = ox * sw - pl;
            int32_t acc = 0;
            k_tap_range(ix0, W, kw, dw, &kx0, &kx1);
            for (ky = ky0; ky < ky1; ky++) {
                const int8_t *xr = x + (size_t)(iy0 + ky * dh) * W * xs;
                for (kx = kx0; kx < kx1; kx++)
                    acc += (int32_t)w[ky * kw + kx] * (xr[(size_t)(ix0 + kx * dw) * xs] - in_zp);
            }
            if (b) acc += *b;
            acc = q->round_up ? k_q_mul_up(acc, q->mult[0], q->shift[0])
                              : k_q_mul(acc, q->mult[0], q->shift[0]);
            y[((size_t)oy * OW + ox) * ys] = (int8_t)clampi(acc + q->out_zp, q->act_min, q->act_max);
        }
    }
}

/* A 4-byte copy the compiler inlines even with -ffreestanding (an unaligned LDR / STR on the
 * M4 / M7, byte loads on the M0+): the accumulators sit at any byte offset of the arena. */
#define K_MEMCPY4(dst, src) __builtin_memcpy((dst), (src), 4)

void k_q_pex_pointwise(const k_q_params *q, const int8_t *restrict x, int C, int HW,
                       const int8_t *restrict w, const int32_t *b, int8_t *restrict y)
{
    int32_t base = b ? *b : 0;
    int i, k;
    for (k = 0; k < C; k++) base -= (int32_t)w[k] * q->in_zp;
    for (i = 0; i < HW; i++) {
        const int8_t *xi = x + (size_t)i * C;
        int32_t acc = base;
        for (k = 0; k < C; k++) acc += (int32_t)w[k] * xi[k];
        acc = q->round_up ? k_q_mul_up(acc, q->mult[0], q->shift[0])
                          : k_q_mul(acc, q->mult[0], q->shift[0]);
        y[i] = (int8_t)clampi(acc + q->out_zp, q->act_min, q->act_max);
    }
}

void k_q_pex_fill(void *acc, const int32_t *b, int O, int HW)
{
    unsigned char *a = (unsigned char *)acc;
    int i, o;
    for (i = 0; i < HW; i++)
        for (o = 0; o < O; o++) {
            const int32_t v = b ? b[o] : 0;
            K_MEMCPY4(a + ((size_t)i * O + o) * 4, &v);
        }
}

void k_q_pex_accumulate(const int8_t *restrict x, const int8_t *restrict w, int wstride,
                        int in_zp, int O, int HW, void *acc)
{
    unsigned char *a = (unsigned char *)acc;
    int i, o;
    for (i = 0; i < HW; i++) {
        const int32_t xv = (int32_t)x[i] - in_zp;
        unsigned char *ai = a + (size_t)i * O * 4;
        for (o = 0; o < O; o++) {
            int32_t v;
            K_MEMCPY4(&v, ai + (size_t)o * 4);
            v += (int32_t)w[(size_t)o * wstride] * xv;
            K_MEMCPY4(ai + (size_t)o * 4, &v);
        }
    }
}

void k_q_pex_accumulate_g(const int8_t *restrict x, int G, const int8_t *restrict w, int wstride,
                          int O, int HW, void *acc)
{
    unsigned char *a = (unsigned char *)acc;
    int i, o, g;
    for (i = 0; i < HW; i++) {
        const int8_t *xi = x + (size_t)i * G;
        unsigned char *ai = a + (size_t)i * O * 4;
        for (o = 0; o < O; o++) {
            const int8_t *wo = w + (size_t)o * wstride;
            int32_t v;
            K_MEMCPY4(&v, ai + (size_t)o * 4);
            for (g = 0; g < G; g++) v += (int32_t)wo[g] * xi[g];
            K_MEMCPY4(ai + (size_t)o * 4, &v);
        }
    }
}

void k_q_pex_put(const int8_t *restrict x, int G, int8_t *restrict y, int C, int n)
{
    const int G4 = G & ~3;
    int i, g;
    for (i = 0; i < n; i++, x += G, y += C) {
        for (g = 0; g < G4; g += 4) K_MEMCPY4(y + g, x + g);
        for (; g < G; g++) y[g] = x[g];
    }
}

/* One requantised accumulator, as k_q_conv2d's last steps. */
static int8_t pex_out(const k_q_params *q, const unsigned char *a, int n, int o)
{
    const int k = q->nq > 1 ? o : 0;
    int32_t v;
    K_MEMCPY4(&v, a + (size_t)n * 4);
    v = q->round_up ? k_q_mul_up(v, q->mult[k], q->shift[k]) : k_q_mul(v, q->mult[k], q->shift[k]);
    return (int8_t)clampi(v + q->out_zp, q->act_min, q->act_max);
}

void k_q_pex_requant(const k_q_params *q, const void *acc, int O, int HW, int8_t *y)
{
    const unsigned char *a = (const unsigned char *)acc;
    const int n = O * HW;
    int i;
    if ((const unsigned char *)y <= a) {
        for (i = 0; i < n; i++) y[i] = pex_out(q, a, i, i % O); /* byte i <= word i's bytes */
    } else {
        for (i = n - 1; i >= 0; i--) y[i] = pex_out(q, a, i, i % O); /* y = a + 3n: above */
    }
}

void k_q_dense(const k_dense_params *p, const k_q_params *q, const int8_t *restrict x,
               const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict y)
{
    const int in = p->in, out = p->out, in_zp = q->in_zp, out_zp = q->out_zp;
    const int act_min = q->act_min, act_max = q->act_max, nq = q->nq, round_up = q->round_up;
    const int32_t *mult = q->mult, *shift = q->shift;
    int o, i;
    for (o = 0; o < out; o++) {
        const int8_t *wr = w + (size_t)o * in;
        const int k = nq > 1 ? o : 0;
        int32_t acc = 0;
        for (i = 0; i < in; i++) acc += (int32_t)wr[i] * (x[i] - in_zp);
        if (b) acc += b[o];
        acc = round_up ? k_q_mul_up(acc, mult[k], shift[k]) : k_q_mul(acc, mult[k], shift[k]);
        y[o] = (int8_t)clampi(acc + out_zp, act_min, act_max);
    }
}

/* k_q_mul(x, m, s) with the shift's parts precomputed once per tensor (an element-wise op
 * applies one multiplier to every element): left = max(s, 0), right = max(-s, 0) <= 30,
 * mask = 2^right - 1, thr = mask / 2. srdhm is floor((x' m + 2^30) / 2^31) for x' = x << left
 * (its nudge 1 - 2^30 for a negative product with C's truncating division gives the same
 * floor; it cannot saturate since m >= 0), rdbpot adds 1 when the remainder exceeds thr, or
 * thr + 1 for a negative value (ties away from zero). Same bits as k_q_mul, no calls. */
typedef struct {
    int32_t m, mask, thr;
    int left, right;
} q_rq;

static q_rq q_rq_of(int32_t m, int s)
{
    q_rq r;
    r.m = m;
    r.left = s > 0 ? s : 0;
    r.right = s > 0 ? 0 : -s;
    r.mask = (int32_t)((1u << r.right) - 1u);
    r.thr = r.mask >> 1;
    return r;
}

/* q_rq_mul for right shifts only (left 0) and |x| < 2^30: srdhm(x, m) is then
 * SMMULR(2 x, m) = (2 x m + 2^31) >> 32, one instruction on a DSP core (k_dsp.h). */
static inline int32_t q_rq_mul_small(int32_t x, const q_rq *r)
{
    const int32_t h = K_SMMULR((int32_t)((uint32_t)x << 1), r->m);
    const int32_t thr = r->thr + (int32_t)((uint32_t)h >> 31);
    return (h >> r->right) + ((h & r->mask) > thr ? 1 : 0);
}

static inline int32_t q_rq_mul(int32_t x, const q_rq *r)
{
    const int32_t xl = (int32_t)((uint32_t)x << r->left);
    const int32_t h = (int32_t)(((int64_t)xl * r->m + ((int64_t)1 << 30)) >> 31);
    const int32_t thr = r->thr + (int32_t)((uint32_t)h >> 31);
    return (h >> r->right) + ((h & r->mask) > thr ? 1 : 0);
}

/* k_q_add with q_rq_mul (every right shift <= 30): the operands' and the result's rescales
 * computed once. */
static void q_add_fast(const k_q_requant_params *q, const int8_t *a, const int8_t *b, int8_t *y)
{
    const q_rq ra = q_rq_of(q->a_m, q->a_s), rb = q_rq_of(q->b_m, q->b_s);
    const q_rq ro = q_rq_of(q->m, q->s);
    const int n = q->n, a_zp = q->a_zp, b_zp = q->b_zp, out_zp = q->out_zp;
    const int act_min = q->act_min, act_max = q->act_max;
    int i;
    if (!ra.left && !rb.left && !ro.left) {
        /* |(a - a_zp) 2^20| < 2^28, and each rescaled operand is no larger (m 2^(s - 31) < 1),
         * so every operand of the three multiplies is under 2^30 in magnitude */
        for (i = 0; i < n; i++) {
            const int32_t va = q_rq_mul_small((a[i] - a_zp) * (1 << 20), &ra);
            const int32_t vb = q_rq_mul_small((b[i] - b_zp) * (1 << 20), &rb);
            y[i] = (int8_t)clampi(q_rq_mul_small(va + vb, &ro) + out_zp, act_min, act_max);
        }
        return;
    }
    for (i = 0; i < n; i++) {
        const int32_t va = q_rq_mul((a[i] - a_zp) * (1 << 20), &ra);
        const int32_t vb = q_rq_mul((b[i] - b_zp) * (1 << 20), &rb);
        y[i] = (int8_t)clampi(q_rq_mul(va + vb, &ro) + out_zp, act_min, act_max);
    }
}

void k_q_add(const k_q_requant_params *q, const int8_t *a, const int8_t *b, int8_t *y)
{
    const int n = q->n, a_zp = q->a_zp, b_zp = q->b_zp, out_zp = q->out_zp;
    const int32_t m1 = q->a_m, m2 = q->b_m, mo = q->m;
    const int s1 = q->a_s, s2 = q->b_s, so = q->s, act_min = q->act_min, act_max = q->act_max;
    int i;
    if (s1 >= -30 && s2 >= -30 && so >= -30 && s1 <= 31 && s2 <= 31 && so <= 31) {
        q_add_fast(q, a, b, y);
        return;
    }
    for (i = 0; i < n; i++) {
        const int32_t va = k_q_mul((a[i] - a_zp) * (1 << 20), m1, s1);
        const int32_t vb = k_q_mul((b[i] - b_zp) * (1 << 20), m2, s2);
        y[i] = (int8_t)clampi(k_q_mul(va + vb, mo, so) + out_zp, act_min, act_max);
    }
}

void k_q_mul_ew(const k_q_requant_params *q, const int8_t *a, const int8_t *b, int8_t *y)
{
    const int n = q->n, a_zp = q->a_zp, b_zp = q->b_zp, out_zp = q->out_zp;
    const int32_t m = q->m;
    const int s = q->s, act_min = q->act_min, act_max = q->act_max;
    int i;
    for (i = 0; i < n; i++) {
        const int32_t p = (int32_t)(a[i] - a_zp) * (b[i] - b_zp);
        y[i] = (int8_t)clampi(k_q_mul(p, m, s) + out_zp, act_min, act_max);
    }
}

void k_q_requant(const k_q_requant_params *q, const int8_t *x, int8_t *y)
{
    const int n = q->n, in_zp = q->a_zp, out_zp = q->out_zp, lo = q->act_min, hi = q->act_max;
    const int32_t m = q->m;
    const int s = q->s;
    int i;
    for (i = 0; i < n; i++) y[i] = (int8_t)clampi(k_q_mul(x[i] - in_zp, m, s) + out_zp, lo, hi);
}

/* Max pool with the channel loop innermost (contiguous NHWC reads), the running maximum kept in
 * the output itself, then clamped. */
void k_q_maxpool(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                 int8_t *restrict y)
{
    const int C = p->C, act_min = q->act_min, act_max = q->act_max;
    int c, ky, kx;
    k_pixel t;
    for (k_pixel_first(p, 1, 1, &t); t.oy < p->OH; k_pixel_next(p, &t)) {
        int8_t *yo = y + ((size_t)t.oy * p->OW + t.ox) * C;
        memset(yo, Q_MIN, (size_t)C);
        for (ky = t.ky0; ky < t.ky1; ky++)
            for (kx = t.kx0; kx < t.kx1; kx++) {
                const int8_t *xp = x + k_tap_at(&t, ky, kx);
                for (c = 0; c < C; c++) yo[c] = xp[c] > yo[c] ? xp[c] : yo[c];
            }
        for (c = 0; c < C; c++) yo[c] = (int8_t)clampi(yo[c], act_min, act_max);
    }
}

/* Average pool: per channel the int32 sum over the in-bounds taps, divided by their count
 * rounding half away from zero, clamped. */
void k_q_avgpool(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                 int8_t *restrict y)
{
    const int C = p->C, act_min = q->act_min, act_max = q->act_max;
    int c, ky, kx;
    k_pixel t;
    for (k_pixel_first(p, 1, 1, &t); t.oy < p->OH; k_pixel_next(p, &t)) {
        int8_t *yo = y + ((size_t)t.oy * p->OW + t.ox) * C;
        const int n = k_taps(&t);
        for (c = 0; c < C; c++) {
            int32_t acc = 0;
            for (ky = t.ky0; ky < t.ky1; ky++) {
                const int8_t *xr = x + k_tap_at(&t, ky, 0) + c;
                for (kx = t.kx0; kx < t.kx1; kx++) acc += xr[(size_t)kx * C];
            }
            if (n > 0) acc = acc > 0 ? (acc + n / 2) / n : (acc - n / 2) / n;
            yo[c] = (int8_t)clampi(acc, act_min, act_max);
        }
    }
}

void k_q_mean(const k_reduce_params *p, const k_q_requant_params *q, const int8_t *restrict x,
              int8_t *restrict y)
{
    const int outer = p->outer, red = p->red, inner = p->inner;
    const int in_zp = q->a_zp, out_zp = q->out_zp, act_min = q->act_min, act_max = q->act_max;
    const int32_t m = q->m;
    const int s = q->s;
    int o, r, i;
    for (o = 0; o < outer; o++)
        for (i = 0; i < inner; i++) {
            int32_t acc = 0;
            for (r = 0; r < red; r++) acc += x[((size_t)o * red + r) * inner + i];
            acc -= in_zp * red;
            acc = k_q_mul(acc, m, s) + out_zp;
            y[(size_t)o * inner + i] = (int8_t)clampi(acc, act_min, act_max);
        }
}

void k_q_lut_act(const k_q_float_params *p, const int8_t *x, int8_t *y)
{
    const int n = p->n, fn = p->fn, in_zp = p->in_zp, out_zp = p->out_zp;
    const float in_scale = p->in_scale, inv_out_scale = p->out_inv_scale;
    int i;
    for (i = 0; i < n; i++) {
        const float v = in_scale * (float)(x[i] - in_zp);
        const float f = fn == K_ACT_TANH ? k_tanhf(v) : 1.0f / (1.0f + k_expf(-v));
        const float r = roundf_away(f * inv_out_scale);
        y[i] = (int8_t)clampi((int32_t)(r + (float)out_zp), Q_MIN, Q_MAX);
    }
}

void k_q_softmax(const k_q_float_params *p, const int8_t *restrict x, int8_t *restrict y)
{
    const int rows = p->rows, n = p->n, out_zp = p->out_zp;
    const float in_scale_beta = p->in_scale, out_scale = p->out_scale;
    int r, j;
    for (r = 0; r < rows; r++) {
        const int8_t *xr = x + (size_t)r * n;
        int8_t *yr = y + (size_t)r * n;
        int mx = Q_MIN;
        float sum = 0.0f, inv;
        for (j = 0; j < n; j++) mx = xr[j] > mx ? xr[j] : mx;
        for (j = 0; j < n; j++) sum += k_expf(-in_scale_beta * (float)(mx - xr[j]));
        inv = 1.0f / (sum * out_scale);
        for (j = 0; j < n; j++) {
            const float p = k_expf(-in_scale_beta * (float)(mx - xr[j])) * inv;
            yr[j] = (int8_t)clampi((int32_t)roundf_away(p) + out_zp, Q_MIN, Q_MAX);
        }
    }
}

void k_q_pad(const k_pad_params *p, const int8_t *restrict x, int8_t *restrict y)
{
    const int *xs = p->xs, *ys = p->ys, *begins = p->begins;
    int a, b, c;
    memset(y, p->qvalue, (size_t)ys[0] * ys[1] * ys[2] * ys[3]);
    for (a = 0; a < xs[0]; a++)
        for (b = 0; b < xs[1]; b++)
            for (c = 0; c < xs[2]; c++) {
                const int8_t *xp = x + (((size_t)a * xs[1] + b) * xs[2] + c) * xs[3];
                int8_t *yp = y + ((((size_t)(a + begins[0]) * ys[1] + (b + begins[1])) * ys[2] +
                                   (c + begins[2])) * ys[3] + begins[3]);
                memcpy(yp, xp, (size_t)xs[3]);
            }
}

void k_q_slice_part(const int8_t *restrict x, int outer, int xtot, int xoff, int8_t *restrict y,
                    int yn)
{
    int o;
    for (o = 0; o < outer; o++)
        memcpy(y + (size_t)o * yn, x + (size_t)o * xtot + xoff, (size_t)yn);
}

void k_q_concat_part(const int8_t *restrict x, int outer, int xn, int8_t *restrict y, int ytot,
                     int yoff)
{
    int o;
    for (o = 0; o < outer; o++)
        memcpy(y + (size_t)o * ytot + yoff, x + (size_t)o * xn, (size_t)xn);
}

void k_q_quantize(const void *x, int8_t *y, int n, double scale, int zp)
{
    const unsigned char *xb = (const unsigned char *)x;
    int i;
    for (i = 0; i < n; i++) {
        float v;
        double r;
        memcpy(&v, xb + (size_t)i * 4, 4);
        r = round_away((double)v / scale);
        r = r < -1e9 ? -1e9 : (r > 1e9 ? 1e9 : r);
        y[i] = (int8_t)clampi((int32_t)r + zp, Q_MIN, Q_MAX);
    }
}

void k_q_dequantize(const int8_t *x, void *y, int n, float scale, int zp)
{
    unsigned char *yb = (unsigned char *)y;
    int i;
    for (i = 0; i < n; i++) {
        const float v = scale * (float)(x[i] - zp);
        memcpy(yb + (size_t)i * 4, &v, 4);
    }
}

void k_q_copy(const int8_t *x, int8_t *y, int n)
{
    memmove(y, x, (size_t)n);
}

/* A row loop's window slide (codegen/pex_rows.py): its rows moved to the front, y below x (a
 * forward copy is then a memmove): four words per step (K_LD4 / K_ST4, one LDR / STR each on
 * Armv7-M), then the n % 16 last bytes; memmove for a y above x inside it. Apart from k_q_copy,
 * whose reshapes stay a memmove: this one is 0.5 KB of code at -O2. */
void k_q_slide(const int8_t *x, int8_t *y, int n)
{
    int i = 0;
    if (y > x && y < x + n) {
        memmove(y, x, (size_t)n);
        return;
    }
    for (; i + 16 <= n; i += 16) {
        const uint32_t a = K_LD4(x + i), b = K_LD4(x + i + 4), c = K_LD4(x + i + 8),
                       d = K_LD4(x + i + 12);
        K_ST4(y + i, a);
        K_ST4(y + i + 4, b);
        K_ST4(y + i + 8, c);
        K_ST4(y + i + 12, d);
    }
    for (; i < n; i++) y[i] = x[i];
}

void k_q_lrn(const k_lrn_params *p, const int8_t *restrict x, int8_t *restrict y)
{
    const int C = p->C, inner = p->inner;
    int o, c, i, k;
    for (o = 0; o < p->outer; o++) {
        const int8_t *xo = x + (size_t)o * C * inner;
        int8_t *yo = y + (size_t)o * C * inner;
        for (c = 0; c < C; c++) {
            const int k0 = c - p->lo < 0 ? 0 : c - p->lo;
            const int k1 = c + p->hi >= C ? C - 1 : c + p->hi;
            for (i = 0; i < inner; i++) {
                float sq = 0.0f, v, r;
                for (k = k0; k <= k1; k++) {
                    v = p->in_scale * (float)(xo[k * inner + i] - p->in_zp);
                    sq += v * v;
                }
                v = p->in_scale * (float)(xo[c * inner + i] - p->in_zp);
                v *= k_expf(-p->beta * k_logf(p->bias + p->alpha_over_size * sq));
                r = roundf_away(v * p->out_inv_scale);
                r = r > 512.0f ? 512.0f : (r < -512.0f ? -512.0f : r); /* no int overflow */
                yo[c * inner + i] = (int8_t)clampi((int32_t)(r + (float)p->out_zp), Q_MIN, Q_MAX);
            }
        }
    }
}
