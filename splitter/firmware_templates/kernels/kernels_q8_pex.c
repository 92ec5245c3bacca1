/*
 * splitter int8 kernels of the PEX channel loops, DSP variants (see kernels_q8_pex.h).
 */
#include <stddef.h>

#include "k_dsp.h"
#include "k_rq.h"
#include "k_window.h"
#include "kernels_q8_pex.h"

/* The arena is typed float: int32 accumulators are read through an aliasing type. */
typedef int32_t k_pex_i32 __attribute__((may_alias));

/* ---------------------------------------------------------------- requantisation ---- */

/* One channel's k_q_mul (away = 1) or k_q_mul_up (away = 0) split once (K_RQ_SPLIT of k_rq.h,
 * the arithmetic kernels_q8_opt.c uses too), with the output zero point zp. `mode` picks the
 * shortest exact form: PEX_RQ_UP (GEMM rounding, right shift r in [2, 22]: k_rq_up, one 64-bit
 * multiply-add, zp folded in, h = (2 zp + 1) 2^(r - 2)), PEX_RQ_FAST (ties away, no left shift,
 * a right shift, every sum under 2^30 in magnitude: SMMULR), else PEX_RQ_ANY. */
enum { PEX_RQ_ANY, PEX_RQ_UP, PEX_RQ_FAST };

typedef struct {
    int32_t m, mask, thr, away, h, half;
    int left, right, zp, mode;
} pex_rq;

K_RQ_FUNCTIONS(pex_rq, pex_rq_any, pex_rq_fast)

/* The requantisation of sums of a bias b and T products w (x - in_zp) (|w| <= 128,
 * |x - in_zp| <= 255). */
K_INLINE pex_rq pex_rq_of(const k_q_params *q, int k, int32_t b, int T)
{
    pex_rq r;
    const int fits = k_rq_fast_bound(b, T);
    K_RQ_SPLIT(r, q, k);
    r.zp = q->out_zp;
    K_RQ_HALF(r);
    r.h = r.right >= 2 ? (int32_t)((uint32_t)(2 * q->out_zp + 1) << (r.right - 2)) : 0;
    r.mode = PEX_RQ_ANY;
    if (q->round_up && r.right >= 2 && r.right <= 22) r.mode = PEX_RQ_UP;
    else if (!q->round_up && !r.left && r.right > 0 && fits) r.mode = PEX_RQ_FAST;
    return r;
}

/* requant(acc) + zp clamped to [lo, hi] (pex_rq_of), in the record's mode (k_rq.h). */
K_INLINE int8_t pex_out(int32_t acc, const pex_rq *r, int lo, int hi)
{
    int32_t v;
    if (r->mode == PEX_RQ_UP) {
        /* k_rq_up (k_rq.h) written out: through the call the Cortex-M0+ code differs */
        const int64_t t = (int64_t)acc * r->m + (int64_t)(((uint64_t)(uint32_t)r->h << 32) | (1u << 30));
        v = (int32_t)(t >> 32) >> (r->right - 1);
    } else if (r->mode == PEX_RQ_FAST) {
        v = pex_rq_fast(acc, r) + r->zp;
    } else {
        v = pex_rq_any(acc, r, r->away) + r->zp;
    }
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return (int8_t)v;
}

/* ------------------------------------------------------------- 1x1 generating conv ---- */

/* One pixel's dot product with the filter, from a zero-point-folded base. */
K_INLINE int32_t pw_one(const int8_t *x, const int8_t *w, int C, int32_t acc)
{
    int k;
    for (k = 0; k + 4 <= C; k += 4) {
        const uint32_t wv = K_LD4(w + k), v = K_LD4(x + k);
        acc = K_SMLAD(K_SXTB16(wv), K_SXTB16(v), acc);
        acc = K_SMLAD(K_SXTB16_ROR8(wv), K_SXTB16_ROR8(v), acc);
    }
    for (; k < C; k++) acc += (int32_t)w[k] * x[k];
    return acc;
}

void k_q_pex_pointwise_dsp(const k_q_params *q, const int8_t *restrict x, int C, int HW,
                           const int8_t *restrict w, const int32_t *b, int8_t *restrict y)
{
    const pex_rq r = pex_rq_of(q, 0, b ? *b : 0, C);
    const int lo = q->act_min, hi = q->act_max, C4 = C & ~3;
    const size_t c1 = (size_t)C, c2 = 2 * c1, c3 = 3 * c1;
    int32_t base = b ? *b : 0;
    int i, k;
    for (k = 0; k < C; k++) base -= (int32_t)w[k] * q->in_zp;
    for (i = 0; i + 4 <= HW; i += 4) {
        const int8_t *xi = x + (size_t)i * c1;
        int32_t a0 = base, a1 = base, a2 = base, a3 = base;
        for (k = 0; k < C4; k += 4) {
            const uint32_t wv = K_LD4(w + k);
            const uint32_t wl = K_SXTB16(wv), wh = K_SXTB16_ROR8(wv);
            uint32_t v = K_LD4(xi + k);
            a0 = K_SMLAD(wl, K_SXTB16(v), a0);
            a0 = K_SMLAD(wh, K_SXTB16_ROR8(v), a0);
            v = K_LD4(xi + c1 + k);
            a1 = K_SMLAD(wl, K_SXTB16(v), a1);
            a1 = K_SMLAD(wh, K_SXTB16_ROR8(v), a1);
            v = K_LD4(xi + c2 + k);
            a2 = K_SMLAD(wl, K_SXTB16(v), a2);
            a2 = K_SMLAD(wh, K_SXTB16_ROR8(v), a2);
            v = K_LD4(xi + c3 + k);
            a3 = K_SMLAD(wl, K_SXTB16(v), a3);
            a3 = K_SMLAD(wh, K_SXTB16_ROR8(v), a3);
        }
        for (; k < C; k++) {
            const int32_t wk = w[k];
            a0 += wk * xi[k];
            a1 += wk * xi[c1 + k];
            a2 += wk * xi[c2 + k];
            a3 += wk * xi[c3 + k];
        }
        y[i] = pex_out(a0, &r, lo, hi);
        y[i + 1] = pex_out(a1, &r, lo, hi);
        y[i + 2] = pex_out(a2, &r, lo, hi);
        y[i + 3] = pex_out(a3, &r, lo, hi);
    }
    for (; i < HW; i++) y[i] = pex_out(pw_one(x + (size_t)i * c1, w, C, base), &r, lo, hi);
}

/* ------------------------------------------------------------ accumulating conv ---- */

#if K_DSP_NATIVE
/* Four accumulators at P += the weights (w0, w2) = WL, (w1, w3) = WH times X (low halfword):
 * LDM, SMLABB / SMLATB, STM with write-back (P word-aligned; r7 is left to the frame). */
#define K_PEX_ACC4(P, WL, WH, X)                                                               \
    __asm__ volatile("ldm %[p], {r4, r5, r6, r8}\n\t"                                          \
                     "smlabb r4, %[wl], %[x], r4\n\t"                                          \
                     "smlabb r5, %[wh], %[x], r5\n\t"                                          \
                     "smlatb r6, %[wl], %[x], r6\n\t"                                          \
                     "smlatb r8, %[wh], %[x], r8\n\t"                                          \
                     "stm %[p]!, {r4, r5, r6, r8}\n\t"                                         \
                     : [p] "+r"(P)                                                             \
                     : [wl] "r"(WL), [wh] "r"(WH), [x] "r"(X)                                  \
                     : "r4", "r5", "r6", "r8", "memory")
#else
#define K_PEX_ACC4(P, WL, WH, X)                                                               \
    do {                                                                                       \
        const uint32_t xx_ = ((uint32_t)(X) & 0xFFFFu) * 0x10001u;                             \
        (P)[0] = K_SMLABB((WL), xx_, (P)[0]);                                                  \
        (P)[1] = K_SMLABB((WH), xx_, (P)[1]);                                                  \
        (P)[2] = K_SMLATT((WL), xx_, (P)[2]);                                                  \
        (P)[3] = K_SMLATT((WH), xx_, (P)[3]);                                                  \
        (P) += 4;                                                                              \
    } while (0)
#endif

/* The O % 4 last outputs of one pixel (p past its first O & ~3 accumulators). */
K_INLINE void acc_tail(k_pex_i32 *p, const int8_t *w, int n, int32_t xv)
{
    int o;
    for (o = 0; o < n; o++) p[o] += (int32_t)w[o] * xv;
}

void k_q_pex_accumulate_dsp(const int8_t *restrict x, const int8_t *restrict w, int in_zp, int O,
                            int HW, void *acc)
{
    const int O4 = O & ~3, rest = O - O4;
    k_pex_i32 *a = (k_pex_i32 *)acc;
    int i, o;
    if ((uintptr_t)acc & 3u) {
        k_q_pex_accumulate(x, w, 1, in_zp, O, HW, acc);
        return;
    }
    for (i = 0; i + 2 <= HW; i += 2) {
        const int32_t x0 = (int32_t)x[i] - in_zp, x1 = (int32_t)x[i + 1] - in_zp;
        k_pex_i32 *p0 = a + (size_t)i * O, *p1 = p0 + O;
        for (o = 0; o < O4; o += 4) {
            const uint32_t wv = K_LD4(w + o);
            const uint32_t wl = K_SXTB16(wv), wh = K_SXTB16_ROR8(wv);
            K_PEX_ACC4(p0, wl, wh, x0);
            K_PEX_ACC4(p1, wl, wh, x1);
        }
        acc_tail(p0, w + O4, rest, x0);
        acc_tail(p1, w + O4, rest, x1);
    }
    if (i < HW) {
        const int32_t x0 = (int32_t)x[i] - in_zp;
        k_pex_i32 *p0 = a + (size_t)i * O;
        for (o = 0; o < O4; o += 4) {
            const uint32_t wv = K_LD4(w + o);
            const uint32_t wl = K_SXTB16(wv), wh = K_SXTB16_ROR8(wv);
            K_PEX_ACC4(p0, wl, wh, x0);
        }
        acc_tail(p0, w + O4, rest, x0);
    }
}

/* Channels k .. k + n - 1 of the slab (pixel stride G) into outputs o0 .. o1 - 1, one MAC at a
 * time (the G % 4 last channels, the O % 4 last outputs). */
static void accg_rest(const int8_t *x, int G, const int8_t *w, int wstride, int k, int n, int o0,
                      int o1, int O, int HW, k_pex_i32 *a)
{
    int i, o, g;
    for (i = 0; i < HW; i++) {
        const int8_t *xi = x + (size_t)i * G + k;
        k_pex_i32 *ai = a + (size_t)i * O;
        for (o = o0; o < o1; o++) {
            const int8_t *wo = w + (size_t)o * wstride + k;
            int32_t v = ai[o];
            for (g = 0; g < n; g++) v += (int32_t)wo[g] * xi[g];
            ai[o] = v;
        }
    }
}

/* Outputs per block of unpacked weights (2 words each on the stack). */
#define K_PEX_OBLOCK 32

#if K_DSP_NATIVE
/* The accumulators p[0 .. n-1] (n % 4 == 0) += the pixel's channel pairs XL = (x0, x2),
 * XH = (x1, x3) times the unpacked weight pairs wp[2o], wp[2o + 1]: per four outputs one LDM,
 * eight SMLAD (the weights two words per LDM), one STM with write-back. */
#define K_PEX_QUADS(P, WP, N, XL, XH)                                                          \
    do {                                                                                       \
        int32_t *p_ = (P);                                                                     \
        const uint32_t *w_ = (WP);                                                             \
        const int32_t *e_ = p_ + (N);                                                          \
        __asm__ volatile("1:\n\t"                                                              \
                         "ldm %[p], {r4, r5, r6, r8}\n\t"                                      \
                         "ldm %[w]!, {r9, r10}\n\t"                                            \
                         "smlad r4, r9, %[xl], r4\n\t"                                         \
                         "smlad r4, r10, %[xh], r4\n\t"                                        \
                         "ldm %[w]!, {r9, r10}\n\t"                                            \
                         "smlad r5, r9, %[xl], r5\n\t"                                         \
                         "smlad r5, r10, %[xh], r5\n\t"                                        \
                         "ldm %[w]!, {r9, r10}\n\t"                                            \
                         "smlad r6, r9, %[xl], r6\n\t"                                         \
                         "smlad r6, r10, %[xh], r6\n\t"                                        \
                         "ldm %[w]!, {r9, r10}\n\t"                                            \
                         "smlad r8, r9, %[xl], r8\n\t"                                         \
                         "smlad r8, r10, %[xh], r8\n\t"                                        \
                         "stm %[p]!, {r4, r5, r6, r8}\n\t"                                     \
                         "cmp %[p], %[e]\n\t"                                                  \
                         "bne 1b\n\t"                                                          \
                         : [p] "+r"(p_), [w] "+r"(w_)                                          \
                         : [xl] "r"(XL), [xh] "r"(XH), [e] "r"(e_)                             \
                         : "r4", "r5", "r6", "r8", "r9", "r10", "cc", "memory");               \
    } while (0)
#else
#define K_PEX_QUADS(P, WP, N, XL, XH)                                                          \
    do {                                                                                       \
        int o_;                                                                                \
        for (o_ = 0; o_ < (N); o_++)                                                           \
            (P)[o_] = K_SMLAD((WP)[2 * o_ + 1], (XH), K_SMLAD((WP)[2 * o_], (XL), (P)[o_]));   \
    } while (0)
#endif

/* Four input channels (slab bytes x[i * G .. + 3]) into outputs 0 .. n - 1 (n % 4 == 0, at most
 * K_PEX_OBLOCK) of every pixel's accumulators a[i * O ..]: the weights of row o (stride wstride)
 * unpacked once into the SXTB16 pairs (w0, w2), (w1, w3) that meet the codes' (x0, x2),
 * (x1, x3); then per pixel its codes' pairs and K_PEX_QUADS. */
static void accg_block(const int8_t *x, int G, const int8_t *w, int wstride, int n, int O, int HW,
                       k_pex_i32 *a)
{
    uint32_t wp[2 * K_PEX_OBLOCK];
    int o, i;
    for (o = 0; o < n; o++) {
        const uint32_t v = K_LD4(w + (size_t)o * wstride);
        wp[2 * o] = K_SXTB16(v);
        wp[2 * o + 1] = K_SXTB16_ROR8(v);
    }
    for (i = 0; i < HW; i++, x += G, a += O) {
        const uint32_t v = K_LD4(x), xl = K_SXTB16(v), xh = K_SXTB16_ROR8(v);
        K_PEX_QUADS((int32_t *)a, wp, n, xl, xh);
    }
}

void k_q_pex_accumulate_g_dsp(const int8_t *restrict x, int G, const int8_t *restrict w,
                              int wstride, int O, int HW, void *acc)
{
    const int G4 = G & ~3, O4 = O & ~3;
    k_pex_i32 *a = (k_pex_i32 *)acc;
    int k, o;
    if ((uintptr_t)acc & 3u) {
        k_q_pex_accumulate_g(x, G, w, wstride, O, HW, acc);
        return;
    }
    for (k = 0; k < G4; k += 4)
        for (o = 0; o < O4; o += K_PEX_OBLOCK) {
            const int n = O4 - o < K_PEX_OBLOCK ? O4 - o : K_PEX_OBLOCK;
            accg_block(x + k, G, w + (size_t)o * wstride + k, wstride, n, O, HW, a + o);
        }
    if (O4 < O) accg_rest(x, G, w, wstride, 0, G4, O4, O, O, HW, a);
    if (G4 < G) accg_rest(x, G, w, wstride, G4, G - G4, 0, O, O, HW, a);
}

/* One pixel's O accumulators (bytes a) requantised into y[0 .. O-1]. */
K_INLINE void requant_pixel(const k_q_params *q, const unsigned char *a, int O, int8_t *y,
                            int forward)
{
    const int per = q->nq > 1, lo = q->act_min, hi = q->act_max;
    int n;
    for (n = 0; n < O; n++) {
        const int o = forward ? n : O - 1 - n;
        const pex_rq r = pex_rq_of(q, per ? o : 0, INT32_MAX, 0); /* any sum: no PEX_RQ_FAST */
        int32_t v;
        __builtin_memcpy(&v, a + (size_t)o * 4, 4);
        y[o] = pex_out(v, &r, lo, hi);
    }
}

void k_q_pex_requant_dsp(const k_q_params *q, const void *acc, int O, int HW, int8_t *y)
{
    const unsigned char *a = (const unsigned char *)acc;
    int i;
    if ((const unsigned char *)y <= a) { /* byte i <= word i's bytes */
        for (i = 0; i < HW; i++) requant_pixel(q, a + (size_t)i * O * 4, O, y + (size_t)i * O, 1);
    } else { /* y = a + 3n: above every word not yet read */
        for (i = HW - 1; i >= 0; i--)
            requant_pixel(q, a + (size_t)i * O * 4, O, y + (size_t)i * O, 0);
    }
}

/* -------------------------------------------------------------- depthwise plane ---- */

/* Border pixel (oy, ox): the in-bounds taps of x - in_zp, as k_q_dw_plane. */
K_INLINE int32_t dw_border(const k_window_params *p, const int8_t *x, int xs, const int8_t *w,
                           int in_zp, int oy, int ox, int32_t acc)
{
    const int iy0 = oy * p->sh - p->pt, ix0 = ox * p->sw - p->pl;
    int ky, kx, ky0, ky1, kx0, kx1;
    k_tap_range(iy0, p->H, p->kh, p->dh, &ky0, &ky1);
    k_tap_range(ix0, p->W, p->kw, p->dw, &kx0, &kx1);
    for (ky = ky0; ky < ky1; ky++) {
        const int8_t *xr = x + (size_t)(iy0 + ky * p->dh) * p->W * xs;
        for (kx = kx0; kx < kx1; kx++)
            acc += (int32_t)w[ky * p->kw + kx] * (xr[(size_t)(ix0 + kx * p->dw) * xs] - in_zp);
    }
    return acc;
}

/* First and one-past-last output index whose 3 taps (stride s, pad pad) lie in [0, n). */
K_INLINE void interior(int out, int s, int pad, int n, int *lo, int *hi)
{
    int a = (pad + s - 1) / s, e = n - 3 + pad >= 0 ? (n - 3 + pad) / s + 1 : 0;
    if (e > out) e = out;
    if (a > e) a = e;
    *lo = a;
    *hi = e;
}

/* Halfwords (a, b) of one word. */
K_INLINE uint32_t pair16(int32_t a, int32_t b)
{
    return ((uint32_t)a & 0xFFFFu) | ((uint32_t)b << 16);
}

/* Two interior pixels of an output row, stride 1, xs == 1: input row bytes x0 .. x3 as the
 * SXTB16 pairs (x0, x2), (x1, x3); per kernel row SMLAD with (w0, w2) and SMLABB / SMLATT with
 * (w1, w1): out0 = w0 x0 + w1 x1 + w2 x2, out1 = w0 x1 + w1 x2 + w2 x3. */
K_INLINE void dw_pair(const int8_t *xr, int W, const uint32_t wp[6], int32_t *a0, int32_t *a1)
{
    int ky;
    for (ky = 0; ky < 3; ky++) {
        const uint32_t v = K_LD4(xr + (size_t)ky * W);
        const uint32_t e = K_SXTB16(v), o = K_SXTB16_ROR8(v);
        *a0 = K_SMLAD(wp[2 * ky], e, *a0);
        *a0 = K_SMLABB(wp[2 * ky + 1], o, *a0);
        *a1 = K_SMLAD(wp[2 * ky], o, *a1);
        *a1 = K_SMLATT(wp[2 * ky + 1], e, *a1);
    }
}

/* One interior pixel: the nine taps at (row stride rs, column stride xs) of raw codes. */
K_INLINE int32_t dw_nine(const int8_t *x0, size_t rs, int xs, const int8_t *w, int32_t acc)
{
    int ky;
    for (ky = 0; ky < 3; ky++) {
        const int8_t *xr = x0 + ky * rs;
        acc += (int32_t)w[3 * ky] * xr[0] + (int32_t)w[3 * ky + 1] * xr[xs] +
               (int32_t)w[3 * ky + 2] * xr[2 * xs];
    }
    return acc;
}

/* One output row: border pixels one by one, interior ones [lo, hi) from the folded base (one
 * copy of the code, called for the plane and for its padded copy). */
static void dw_row(const k_window_params *p, const k_q_params *q, const int8_t *x, int xs,
                     const int8_t *w, int32_t bias, int8_t *y, int ys, int oy, int lo, int hi,
                     int32_t base, const uint32_t wp[6], int full)
{
    const pex_rq r = pex_rq_of(q, 0, bias, 9);
    const int amin = q->act_min, amax = q->act_max, OW = p->OW;
    const size_t rs = (size_t)p->W * xs;
    const int8_t *xr = full ? x + (size_t)(oy * p->sh - p->pt) * rs : x;
    int8_t *yr = y + (size_t)oy * OW * ys;
    int ox = 0;
    if (!full) lo = hi = OW; /* a border row */
    for (; ox < lo; ox++)
        yr[(size_t)ox * ys] = pex_out(dw_border(p, x, xs, w, q->in_zp, oy, ox, bias), &r, amin, amax);
    if (p->sw == 1 && xs == 1) {
        for (; ox + 2 <= hi; ox += 2) {
            int32_t a0 = base, a1 = base;
            dw_pair(xr + (ox - p->pl), p->W, wp, &a0, &a1);
            yr[(size_t)ox * ys] = pex_out(a0, &r, amin, amax);
            yr[(size_t)(ox + 1) * ys] = pex_out(a1, &r, amin, amax);
        }
    }
    for (; ox < hi; ox++) {
        const int8_t *x0 = xr + (size_t)(ox * p->sw - p->pl) * xs;
        yr[(size_t)ox * ys] = pex_out(dw_nine(x0, rs, xs, w, base), &r, amin, amax);
    }
    for (; ox < OW; ox++)
        yr[(size_t)ox * ys] = pex_out(dw_border(p, x, xs, w, q->in_zp, oy, ox, bias), &r, amin, amax);
}

/* Bytes of the zero-point-padded copy of a small plane on the stack (18 x 18 with a pad of 1). */
#define K_PEX_PAD_MAX 400

/* The plane's rows -pt .. Hp - pt - 1 and columns -pl .. Wp - pl - 1, contiguous, in_zp outside
 * the input: x - in_zp = 0 there, so every tap adds what TFLite's skipped taps add (nothing) and
 * every output pixel is an interior one of the copy. */
K_INLINE void pad_copy(const k_window_params *p, const int8_t *x, int xs, int zp, int Hp, int Wp,
                       int8_t *pad)
{
    const int c0 = p->pl, c1 = p->pl + p->W < Wp ? p->pl + p->W : Wp; /* input columns */
    int r, c;
    for (r = 0; r < Hp; r++) {
        const int iy = r - p->pt;
        int8_t *d = pad + (size_t)r * Wp;
        if (iy < 0 || iy >= p->H) {
            for (c = 0; c < Wp; c++) d[c] = (int8_t)zp;
            continue;
        }
        {
            const int8_t *s = x + (size_t)iy * p->W * xs;
            int8_t *e = d + c0;
            for (c = 0; c < c0; c++) d[c] = (int8_t)zp;
            if (xs == 1)
                for (c = 0; c < c1 - c0; c++) e[c] = s[c];
            else
                for (c = 0; c < c1 - c0; c++) e[c] = s[(size_t)c * xs];
            for (c = c1; c < Wp; c++) d[c] = (int8_t)zp;
            for (; c < Wp; c++) d[c] = (int8_t)zp;
        }
    }
}

void k_q_dw_plane_dsp(const k_window_params *p, const k_q_params *q, const int8_t *x, int xs,
                      const int8_t *restrict w, const int32_t *b, int8_t *y, int ys)
{
    const int32_t bias = b ? *b : 0;
    const int Hp = (p->OH - 1) * p->sh + 3, Wp = (p->OW - 1) * p->sw + 3;
    int32_t base = bias;
    uint32_t wp[6];
    int oy, ylo, yhi, xlo, xhi, k;
    if (p->kh != 3 || p->kw != 3 || p->dh != 1 || p->dw != 1) {
        k_q_dw_plane(p, q, x, xs, w, b, y, ys);
        return;
    }
    for (k = 0; k < 9; k++) base -= (int32_t)w[k] * q->in_zp;
    for (k = 0; k < 3; k++) {
        wp[2 * k] = pair16(w[3 * k], w[3 * k + 2]);
        wp[2 * k + 1] = pair16(w[3 * k + 1], w[3 * k + 1]);
    }
    if (Hp * Wp <= K_PEX_PAD_MAX && (p->pt || p->pl || p->pb || p->pr)) {
        /* a small plane, mostly border: pad a copy, then every pixel is interior */
        int8_t pad[K_PEX_PAD_MAX];
        k_window_params pp = *p;
        pad_copy(p, x, xs, q->in_zp, Hp, Wp, pad);
        pp.H = Hp;
        pp.W = Wp;
        pp.pt = pp.pl = pp.pb = pp.pr = 0;
        for (oy = 0; oy < p->OH; oy++)
            dw_row(&pp, q, pad, 1, w, bias, y, ys, oy, 0, p->OW, base, wp, 1);
        return;
    }
    interior(p->OH, p->sh, p->pt, p->H, &ylo, &yhi);
    interior(p->OW, p->sw, p->pl, p->W, &xlo, &xhi);
    for (oy = 0; oy < p->OH; oy++)
        dw_row(p, q, x, xs, w, bias, y, ys, oy, xlo, xhi, base, wp, oy >= ylo && oy < yhi);
}
