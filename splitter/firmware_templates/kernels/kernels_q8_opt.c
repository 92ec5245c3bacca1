/*
 * splitter int8 kernels tuned for Cortex-M, _dsp and _plain variants (see kernels_q8_opt.h).
 * Each kernel is one K_INLINE engine taking `dsp` as a constant, instantiated twice, so the two
 * variants share their loop structure, weight layout and scratch and differ only in the MAC
 * steps.
 */
#include <stddef.h>

#include "k_dsp.h"
#include "k_rq.h"
#include "k_window.h"
#include "kernels_q8_opt.h"

/* ------------------------------------------------------------------ requantisation ---- */

/* One output channel's requantisation (K_RQ_SPLIT of k_rq.h), computed once per channel block.
 * m, half and right first: the 3 x 3 depthwise's assembly reads them at fixed offsets (k_dw3a). */
typedef struct {
    int32_t m;
    int32_t half; /* 2^(right - 1), 0 when right == 0 (rq_fast); depthwise rq mode 2: fc */
    int right, left;
    int32_t mask, thr, away;
} k_rq;

K_INLINE k_rq rq_channel(const k_q_params *q, int c)
{
    k_rq r;
    const int k = q->nq > 1 ? c : 0;
    K_RQ_SPLIT(r, q, k);
    K_RQ_HALF(r);
    return r;
}

/* rq_value(acc, r, away): k_q_mul (away) or k_q_mul_up (!away) of acc, before the zero point;
 * rq_fast(acc, r): the same by SMMULR for a channel that passes rq_fast_ok (k_rq.h). */
K_RQ_FUNCTIONS(k_rq, rq_value, rq_fast)

/* 1 when rq_fast computes rq_value for the channel: left 0, right > 0, ties away, and every
 * sum of bias b and T taps under 2^30 in magnitude (k_rq_fast_bound). */
K_INLINE int rq_fast_ok(const k_rq *r, int32_t b, int T)
{
    const int fits = k_rq_fast_bound(b, T);
    return r->left == 0 && r->right > 0 && r->away && fits;
}

/* rq_value with the channel's rounding, + zp, clamped to [lo, hi]. */
K_INLINE int8_t rq_apply(int32_t acc, const k_rq *r, int zp, int lo, int hi)
{
    int32_t v = rq_value(acc, r, r->away) + zp;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return (int8_t)v;
}

/* 1 when every channel of q can use k_rq_up: GEMM rounding, shifts in [-22, -2]. */
K_INLINE int rqup_ok(const k_q_params *q)
{
    int k;
    if (!q->round_up) return 0;
    for (k = 0; k < q->nq; k++)
        if (q->shift[k] > -2 || q->shift[k] < -22) return 0;
    return 1;
}

/* Two requantised values (zero point included) clamped to [lo, hi] and stored at y[0], y[1]
 * (any alignment). DSP: SSAT #8 both, BFI into one halfword, SSUB8 / SEL clamp, one store. */
K_INLINE void st2_clamped(int8_t *y, int32_t v0, int32_t v1, int lo, int hi, uint32_t lo4,
                          uint32_t hi4, int dsp)
{
    if (dsp) {
        uint32_t w = K_BFI8((uint32_t)K_SSAT8(v0), (uint32_t)K_SSAT8(v1), 8);
        const uint16_t h = (uint16_t)K_MIN8(K_MAX8(w, lo4), hi4);
        __builtin_memcpy(y, &h, 2);
    } else {
        y[0] = (int8_t)(v0 < lo ? lo : (v0 > hi ? hi : v0));
        y[1] = (int8_t)(v1 < lo ? lo : (v1 > hi ? hi : v1));
    }
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

/* The two im2col columns (pixels p = 0, 1) are interleaved by int16 pairs: element k of
 * column p sits at col_at(k, p) = (k / 2) * 4 + 2 p + k % 2, so one pointer walks both and a
 * 4-element step reads the words (x0, x1), (y0, y1), (x2, x3), (y2, y3). */
K_INLINE size_t col_at(int k, int p)
{
    return ((size_t)(k >> 1) << 2) + ((size_t)p << 1) + (size_t)(k & 1);
}

/* Elements k0 .. k0 + n - 1 of column p: x[i] - zp as int16 (off2: -zp in both halfwords).
 * DSP: four at a time from an even k, SXTAB16 of the word and of its ROR 8, repacked. */
K_INLINE void col_copy(const int8_t *x, int16_t *col, int k0, int n, int p, int zp,
                       uint32_t off2, int dsp)
{
    int i = 0;
    if (dsp) {
        if ((k0 & 1) && n > 0) {
            st2a(col + col_at(k0, p), x[0] - zp);
            i = 1;
        }
        if (i + 4 <= n) { /* k0 + i even: four elements are 8 halfwords further */
            const int8_t *xs = x + i, *const xe = xs + ((n - i) & ~3);
            int16_t *d = col + col_at(k0 + i, p);
            for (; xs != xe; xs += 4, d += 8) {
                const uint32_t v = K_LD4(xs);
                const uint32_t e = K_SXTAB16(off2, v), o = K_SXTAB16_ROR8(off2, v);
                K_ST4(__builtin_assume_aligned(d, 4), K_PKHBT16(e, o));
                K_ST4(__builtin_assume_aligned(d + 4, 4), K_PKHTB16(o, e));
            }
            i += (n - i) & ~3;
        }
    }
    for (; i < n; i++) st2a(col + col_at(k0 + i, p), x[i] - zp);
}

K_INLINE void col_zero(int16_t *col, int k0, int n, int p)
{
    int i;
    for (i = 0; i < n; i++) st2a(col + col_at(k0 + i, p), 0);
}

/* Column p of output pixel n: for every tap (ky, kx) its C input values minus in_zp, zeros for
 * taps in the padding (TFLite skips them: x - in_zp = 0 there). */
K_INLINE void col_fill(const k_window_params *p, const int8_t *x, int n, int16_t *col, int pc,
                       int zp, uint32_t off2, int dsp)
{
    const int C = p->C, kw = p->kw, oy = n / p->OW, ox = n - oy * p->OW;
    const int iy0 = oy * p->sh - p->pt, ix0 = ox * p->sw - p->pl;
    int ky, kx, k = 0;
    for (ky = 0; ky < p->kh; ky++) {
        const int iy = iy0 + ky * p->dh;
        if (iy < 0 || iy >= p->H) {
            col_zero(col, k, kw * C, pc);
            k += kw * C;
            continue;
        }
        if (p->dw == 1 && ix0 >= 0 && ix0 + kw <= p->W) {
            /* the row's kw taps are kw * C contiguous bytes: one copy (small C: 3 x 3 x 3) */
            col_copy(x + ((size_t)iy * p->W + ix0) * C, col, k, kw * C, pc, zp, off2, dsp);
            k += kw * C;
            continue;
        }
        for (kx = 0; kx < kw; kx++, k += C) {
            const int ix = ix0 + kx * p->dw;
            if (ix < 0 || ix >= p->W) col_zero(col, k, C, pc);
            else col_copy(x + ((size_t)iy * p->W + ix) * C, col, k, C, pc, zp, off2, dsp);
        }
    }
}

/* ------------------------------------------------------------------------- GEMM ---- */

#if K_DSP_NATIVE
/* The 2 x 2 GEMM loop on the core (gemm_block, gemm_pixels_up8): accumulators (a00, a01) of
 * row 0 and (a10, a11) of row 1 for the two interleaved im2col columns, over the weight pointer
 * w and the column pointer c until c reaches ce (a multiple of eight elements). Per four
 * elements: LDRD of both rows' weight words, SXTB16 / SXTB16 ROR 8 of each, LDRD of the
 * columns' (x0, x1), (y0, y1) pairs and of their (x2, x3), (y2, y3), eight SMLAD: 15
 * instructions per 16 MACs, unrolled twice (GCC's schedule of the C loop takes about 20).
 * w must be word-aligned (LDRD); both pointers advance past what was read. */
#define K_G22_STEP                                                                             \
    "ldrd %[wa], %[wb], [%[w]], #8\n\t"                                                         \
    "ldrd %[c0], %[c1], [%[c]], #8\n\t"                                                         \
    "sxtb16 %[t], %[wa]\n\t"                                                                   \
    "smlad %[a00], %[t], %[c0], %[a00]\n\t"                                                    \
    "smlad %[a01], %[t], %[c1], %[a01]\n\t"                                                    \
    "sxtb16 %[t], %[wb]\n\t"                                                                   \
    "smlad %[a10], %[t], %[c0], %[a10]\n\t"                                                    \
    "smlad %[a11], %[t], %[c1], %[a11]\n\t"                                                    \
    "ldrd %[c0], %[c1], [%[c]], #8\n\t"                                                         \
    "sxtb16 %[t], %[wa], ror #8\n\t"                                                           \
    "smlad %[a00], %[t], %[c0], %[a00]\n\t"                                                    \
    "smlad %[a01], %[t], %[c1], %[a01]\n\t"                                                    \
    "sxtb16 %[t], %[wb], ror #8\n\t"                                                           \
    "smlad %[a10], %[t], %[c0], %[a10]\n\t"                                                    \
    "smlad %[a11], %[t], %[c1], %[a11]\n\t"
/* K_G22_STEP over weights already widened to int16 (conv_pad_weights16: per four elements
 * the words row 0 (w0, w1), row 1 (w0, w1), row 0 (w2, w3), row 1 (w2, w3)): two LDRD of
 * weight words, two of column words, eight SMLAD: 12 instructions per 16 MACs. */
#define K_G22_STEP16                                                                           \
    "ldrd %[wa], %[wb], [%[w]], #8\n\t"                                                         \
    "ldrd %[c0], %[c1], [%[c]], #8\n\t"                                                         \
    "smlad %[a00], %[wa], %[c0], %[a00]\n\t"                                                   \
    "smlad %[a01], %[wa], %[c1], %[a01]\n\t"                                                   \
    "smlad %[a10], %[wb], %[c0], %[a10]\n\t"                                                   \
    "smlad %[a11], %[wb], %[c1], %[a11]\n\t"                                                   \
    "ldrd %[wa], %[wb], [%[w]], #8\n\t"                                                         \
    "ldrd %[c0], %[c1], [%[c]], #8\n\t"                                                         \
    "smlad %[a00], %[wa], %[c0], %[a00]\n\t"                                                   \
    "smlad %[a01], %[wa], %[c1], %[a01]\n\t"                                                   \
    "smlad %[a10], %[wb], %[c0], %[a10]\n\t"                                                   \
    "smlad %[a11], %[wb], %[c1], %[a11]\n\t"
#define K_GEMM22_LOOP(A00, A01, A10, A11, W, C, CE)                                            \
    do {                                                                                       \
        uint32_t wa_, wb_, c0_, c1_, t_;                                                       \
        __asm__ volatile("1:\n\t" K_G22_STEP K_G22_STEP "cmp %[c], %[ce]\n\t"                 \
                         "bne 1b\n\t"                                                          \
                         : [a00] "+r"(A00), [a01] "+r"(A01), [a10] "+r"(A10), [a11] "+r"(A11),   \
                           [w] "+r"(W), [c] "+r"(C), [wa] "=&r"(wa_), [wb] "=&r"(wb_),         \
                           [c0] "=&r"(c0_), [c1] "=&r"(c1_), [t] "=&r"(t_)                     \
                         : [ce] "r"(CE)                                                        \
                         : "cc", "memory");                                                    \
    } while (0)
#endif

/* a = (a00, a01, a10, a11) += rows (r0, r1) of a channel pair times the columns (c0, c1) of the
 * interleaved im2col buffer col. w: the pair's 2 K bytes, groups of four stored (0, 2, 1, 3)
 * and alternating between the rows, then row 0's K % 4 last bytes, then row 1's (nr == 1: one
 * row, K bytes). nr, nc (rows, columns used: 1 or 2) and dsp are constants at every call. DSP:
 * SXTB16 / SXTB16 ROR 8 of a row word give (w0, w1), (w2, w3), SMLAD'ed with the column words
 * (x0, x1), (x2, x3): 20 instructions per 16 MACs with one weight and one column pointer. */
K_INLINE void gemm_block(const int8_t *w, const int16_t *col, int K, int32_t a[4], int nr,
                         int nc, int dsp)
{
    const int K4 = K & ~3;
    const int8_t *wend = w + (size_t)K4 * nr;
    const int16_t *c = col;
    int32_t a00 = a[0], a01 = a[1], a10 = a[2], a11 = a[3];
    int k;
#if K_DSP_NATIVE
    /* 2 x 2 on the core (K_GEMM22_LOOP) over the multiple of eight elements, the C loop after
     * it for the rest. LDRD needs word alignment: the generator's weight arrays are 4-aligned
     * and K % 4 == 0 keeps every pair's rows so; otherwise only the C loop runs. */
    if (dsp && nr == 2 && nc == 2 && !((uintptr_t)w & 3u) && K4 >= 8) {
        const int16_t *const cend = c + (size_t)(K4 >> 3) * 16;
        K_GEMM22_LOOP(a00, a01, a10, a11, w, c, cend);
    }
#endif
    for (; w != wend; w += 4 * nr, c += 8) {
        if (dsp) {
            const uint32_t x0 = ld4a(c), x1 = ld4a(c + 4);
            const uint32_t y0 = nc == 2 ? ld4a(c + 2) : 0, y1 = nc == 2 ? ld4a(c + 6) : 0;
            const uint32_t wv = K_LD4(w);
            const uint32_t wl = K_SXTB16(wv), wh = K_SXTB16_ROR8(wv);
            a00 = K_SMLAD(wl, x0, a00);
            a00 = K_SMLAD(wh, x1, a00);
            if (nc == 2) a01 = K_SMLAD(wl, y0, a01);
            if (nc == 2) a01 = K_SMLAD(wh, y1, a01);
            if (nr == 2) {
                const uint32_t vv = K_LD4(w + 4);
                const uint32_t vl = K_SXTB16(vv), vh = K_SXTB16_ROR8(vv);
                a10 = K_SMLAD(vl, x0, a10);
                a10 = K_SMLAD(vh, x1, a10);
                if (nc == 2) a11 = K_SMLAD(vl, y0, a11);
                if (nc == 2) a11 = K_SMLAD(vh, y1, a11);
            }
        } else {
            const int32_t x0 = ld2a(c), x1 = ld2a(c + 1), x2 = ld2a(c + 4), x3 = ld2a(c + 5);
            a00 += w[0] * x0 + w[1] * x2 + w[2] * x1 + w[3] * x3;
            if (nr == 2) a10 += w[4] * x0 + w[5] * x2 + w[6] * x1 + w[7] * x3;
            if (nc == 2) {
                const int32_t y0 = ld2a(c + 2), y1 = ld2a(c + 3);
                const int32_t y2 = ld2a(c + 6), y3 = ld2a(c + 7);
                a01 += w[0] * y0 + w[1] * y2 + w[2] * y1 + w[3] * y3;
                if (nr == 2) a11 += w[4] * y0 + w[5] * y2 + w[6] * y1 + w[7] * y3;
            }
        }
    }
    for (k = K4; k < K; k++) {
        const int32_t w0 = w[k - K4], w1 = nr == 2 ? w[k - K4 + (K - K4)] : 0;
        const int32_t x0 = ld2a(col + col_at(k, 0));
        a00 += w0 * x0;
        if (nr == 2) a10 += w1 * x0;
        if (nc == 2) {
            const int32_t y0 = ld2a(col + col_at(k, 1));
            a01 += w0 * y0;
            if (nr == 2) a11 += w1 * y0;
        }
    }
    a[0] = a00;
    a[1] = a01;
    a[2] = a10;
    a[3] = a11;
}

/* gemm_pixels for two pixels and a q whose channels all pass rqup_ok: the record's fields in
 * locals (an int8 store may alias them, so GCC would reload them after each), each channel
 * pair's two outputs of a pixel requantised by k_rq_up and stored by st2_clamped. */
K_INLINE void gemm_pixels_up(const k_window_params *p, const k_q_params *q, const int8_t *w,
                             const int32_t *b, const int16_t *col, int K, int8_t *y0, int8_t *y1,
                             int dsp)
{
    const int O = p->O, lo = q->act_min, hi = q->act_max, per = q->nq > 1;
    const int32_t zp2 = 2 * q->out_zp + 1, *mult = q->mult, *shift = q->shift;
    const uint32_t lo4 = ((uint32_t)lo & 0xFFu) * 0x01010101u;
    const uint32_t hi4 = ((uint32_t)hi & 0xFFu) * 0x01010101u;
    const size_t step = (size_t)2 * K;
    int o;
    for (o = 0; o + 2 <= O; o += 2, w += step) {
        const int k0 = per ? o : 0, k1 = per ? o + 1 : 0;
        const int r0 = -(int)shift[k0], r1 = -(int)shift[k1];
        const int32_t m0 = mult[k0], m1 = mult[k1];
        const int32_t h0 = (int32_t)((uint32_t)zp2 << (r0 - 2));
        const int32_t h1 = (int32_t)((uint32_t)zp2 << (r1 - 2));
        int32_t a[4];
        a[0] = a[1] = b ? b[o] : 0;
        a[2] = a[3] = b ? b[o + 1] : 0;
        gemm_block(w, col, K, a, 2, 2, dsp);
        st2_clamped(y0 + o, k_rq_up(a[0], m0, h0, r0 - 1), k_rq_up(a[2], m1, h1, r1 - 1), lo,
                    hi, lo4, hi4, dsp);
        st2_clamped(y1 + o, k_rq_up(a[1], m0, h0, r0 - 1), k_rq_up(a[3], m1, h1, r1 - 1), lo,
                    hi, lo4, hi4, dsp);
    }
    if (o < O) {
        const int k0 = per ? o : 0, r0 = -(int)shift[k0];
        const int32_t m0 = mult[k0], h0 = (int32_t)((uint32_t)zp2 << (r0 - 2));
        int32_t a[4], v;
        a[0] = a[1] = b ? b[o] : 0;
        a[2] = a[3] = 0;
        gemm_block(w, col, K, a, 1, 2, dsp);
        v = k_rq_up(a[0], m0, h0, r0 - 1);
        y0[o] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
        v = k_rq_up(a[1], m0, h0, r0 - 1);
        y1[o] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
    }
}

#if K_DSP_NATIVE
/* The record gemm_pairs_asm reads (byte offsets in the assembly): the column buffer and its
 * end (0, 4), the next channel pair's multipliers (8), the bytes from a pair's multipliers to
 * the next pair's shifts (12), the next pair's biases (16), its outputs of pixel 0 (20), the
 * bytes to pixel 1's (24), the packed clamp bounds (28, 32), 2 out_zp + 1 (36), the end of
 * pixel 0's outputs (40). */
typedef struct {
    const int16_t *col, *cend;
    const int32_t *mq;
    int32_t sdelta;
    const int32_t *bq;
    int8_t *y0;
    int32_t dy;
    uint32_t lo4, hi4;
    int32_t zp2;
    const int8_t *yend;
} k_g22p;

/* k_rq_up of accumulator ACC with multiplier M and rs = r - 1 in RS, h = zp2 << (r - 2) in
 * %[u]: SMLAL onto (h, 2^30), the high word shifted by rs, SSAT #8. */
#define K_G22_RQ(ACC, M, RS)                                                                   \
    "mov %[t], #0x40000000\n\t"                                                               \
    "mov %[c], %[u]\n\t"                                                                      \
    "smlal %[t], %[c], " ACC ", " M "\n\t"                                                    \
    "asr %[c], %[c], " RS "\n\t"                                                              \
    "ssat " ACC ", #8, %[c]\n\t"
/* CLAMP of the two packed output halfwords: SSUB8 / SEL against lo4, hi4 (K_MAX8 / K_MIN8). */
#define K_G22_CLAMP                                                                            \
    "ldrd %[c], %[ce], [%[kp], #28]\n\t"                                                      \
    "ssub8 %[t], %[a00], %[c]\n\t"                                                            \
    "sel %[a00], %[a00], %[c]\n\t"                                                            \
    "ssub8 %[t], %[ce], %[a00]\n\t"                                                           \
    "sel %[a00], %[a00], %[ce]\n\t"                                                           \
    "ssub8 %[t], %[a01], %[c]\n\t"                                                            \
    "sel %[a01], %[a01], %[c]\n\t"                                                            \
    "ssub8 %[t], %[ce], %[a01]\n\t"                                                           \
    "sel %[a01], %[a01], %[ce]\n\t"
/* Every channel pair of two pixels in one assembly loop: per pair the biases (LDRD), the 2 x 2
 * GEMM (K_G22_STEP) over the columns, then per channel m and the shift (LDRD each pair), rs =
 * -s - 1 (MVN), h = zp2 << (rs - 1), four k_rq_up (K_G22_RQ), BFI into one halfword per
 * pixel, the optional clamp and two STRH. */
#define K_G22_PAIRS(STEP, ENTRY, CLAMP)                                                        \
    __asm__ volatile(                                                                          \
        "0:\n\t"                                                                               \
        "ldr %[t], [%[kp], #16]\n\t"                                                          \
        "ldrd %[a00], %[a10], [%[t]], #8\n\t"                                                  \
        "str %[t], [%[kp], #16]\n\t"                                                          \
        "mov %[a01], %[a00]\n\t"                                                              \
        "mov %[a11], %[a10]\n\t"                                                              \
        "ldrd %[c], %[ce], [%[kp]]\n\t"                                                       \
        ENTRY "1:\n\t" STEP "2:\n\t" STEP "cmp %[c], %[ce]\n\t"                              \
        "bne 1b\n\t"                                                                           \
        "ldr %[t], [%[kp], #8]\n\t"                                                           \
        "ldrd %[wa], %[wb], [%[t]], #8\n\t"                                                    \
        "str %[t], [%[kp], #8]\n\t"                                                           \
        "ldr %[c0], [%[kp], #12]\n\t"                                                         \
        "add %[t], %[t], %[c0]\n\t"                                                           \
        "ldrd %[c0], %[c1], [%[t]]\n\t"                                                       \
        "mvn %[c0], %[c0]\n\t"                                                                \
        "mvn %[c1], %[c1]\n\t"                                                                \
        "ldr %[ce], [%[kp], #36]\n\t"                                                         \
        "sub %[t], %[c0], #1\n\t"                                                             \
        "lsl %[u], %[ce], %[t]\n\t" K_G22_RQ("%[a00]", "%[wa]", "%[c0]")                      \
            K_G22_RQ("%[a01]", "%[wa]", "%[c0]") "sub %[t], %[c1], #1\n\t"                     \
        "lsl %[u], %[ce], %[t]\n\t" K_G22_RQ("%[a10]", "%[wb]", "%[c1]")                      \
            K_G22_RQ("%[a11]", "%[wb]", "%[c1]") "bfi %[a00], %[a10], #8, #8\n\t"               \
        "bfi %[a01], %[a11], #8, #8\n\t" CLAMP "ldr %[t], [%[kp], #20]\n\t"                  \
        "ldr %[c], [%[kp], #24]\n\t"                                                          \
        "strh %[a01], [%[t], %[c]]\n\t"                                                       \
        "strh %[a00], [%[t]], #2\n\t"                                                         \
        "str %[t], [%[kp], #20]\n\t"                                                          \
        "ldr %[c], [%[kp], #40]\n\t"                                                          \
        "cmp %[t], %[c]\n\t"                                                                  \
        "bne 0b\n\t"                                                                           \
        : [w] "+r"(w), [a00] "=&r"(a00), [a01] "=&r"(a01), [a10] "=&r"(a10),                  \
          [a11] "=&r"(a11), [c] "=&r"(c), [ce] "=&r"(ce), [wa] "=&r"(wa), [wb] "=&r"(wb),       \
          [c0] "=&r"(c0), [c1] "=&r"(c1), [t] "=&r"(t), [u] "=&r"(u)                            \
        : [kp] "r"(kp)                                                                         \
        : "cc", "memory")

/* The entry of K_G22_PAIRS's GEMM loop over int16 weights, whose K may be 4 mod 8 (ceil4 of a
 * re-laid K): the column bytes 4 K = ce - c with bit 4 set (LSLS #28 moves it into the carry)
 * start at the loop's second step. */
#define K_G22_HALF                                                                             \
    "subs %[t], %[ce], %[c]\n\t"                                                               \
    "lsls %[t], %[t], #28\n\t"                                                                 \
    "bcs 2f\n\t"

/* The O & ~1 first channels of two pixels (y0, y0 + dy) through K_G22_PAIRS: per-channel
 * multipliers and shifts, biases, K % 8 == 0, 4-aligned weights (conv_engine checks). */
static void gemm_pairs_asm(k_g22p *kp, const int8_t *w, int clamp)
{
    uint32_t a00, a01, a10, a11, c, ce, wa, wb, c0, c1, t, u;
    if (clamp) K_G22_PAIRS(K_G22_STEP, "", K_G22_CLAMP);
    else K_G22_PAIRS(K_G22_STEP, "", "");
}

/* gemm_pairs_asm over int16 weights (conv_pad_weights16; K % 4 == 0, K_G22_HALF). */
static void gemm_pairs16_asm(k_g22p *kp, const int8_t *w, int clamp)
{
    uint32_t a00, a01, a10, a11, c, ce, wa, wb, c0, c1, t, u;
    if (clamp) K_G22_PAIRS(K_G22_STEP16, K_G22_HALF, K_G22_CLAMP);
    else K_G22_PAIRS(K_G22_STEP16, K_G22_HALF, "");
}

/* gemm_pixels_up on the core for K % 8 == 0 and 4-aligned weights (checked once per call by
 * conv_engine): per channel pair one assembly loop over K (gemm_block's, with no C tail, the
 * weight pointer running on into the next pair), then k_rq_up and st2_clamped; the
 * multipliers, shifts and biases walked by pointers (step 0 when per tensor / no bias). */
K_INLINE void gemm_pixels_up8(const k_window_params *p, const k_q_params *q, const int8_t *w,
                              const int32_t *b, const int16_t *col, int K, int8_t *y0,
                              int8_t *y1)
{
    static const int32_t zero2[2] = {0, 0};
    const int lo = q->act_min, hi = q->act_max, qs = q->nq > 1 ? 2 : 0, bs = b ? 2 : 0;
    const int32_t zp2 = 2 * q->out_zp + 1, *mp = q->mult, *sp = q->shift;
    const int32_t *bp = b ? b : zero2;
    const uint32_t lo4 = ((uint32_t)lo & 0xFFu) * 0x01010101u;
    const uint32_t hi4 = ((uint32_t)hi & 0xFFu) * 0x01010101u;
    const int16_t *const cend = col + (size_t)2 * K;
    int8_t *const yend = y0 + (p->O & ~1);
    if (qs && bs && y0 != yend) {
        k_g22p kp = {col, cend, mp, (int32_t)((q->shift - q->mult) * 4) - 8, bp, y0,
                     (int32_t)(y1 - y0), lo4, hi4, zp2, yend};
        gemm_pairs_asm(&kp, w, lo != -128 || hi != 127);
        w += (size_t)K * (p->O & ~1);
        y1 += yend - y0;
        y0 = yend;
    }
    for (; y0 != yend; y0 += 2, y1 += 2, mp += qs, sp += qs, bp += bs) {
        int32_t a00 = bp[0], a01 = bp[0], a10 = bp[bs ? 1 : 0], a11 = a10;
        const int16_t *c = col;
        int r0, r1;
        K_GEMM22_LOOP(a00, a01, a10, a11, w, c, cend);
        r0 = -(int)sp[0];
        r1 = -(int)sp[qs ? 1 : 0];
        {
            const int32_t m0 = mp[0], m1 = mp[qs ? 1 : 0];
            const int32_t h0 = (int32_t)((uint32_t)zp2 << (r0 - 2));
            const int32_t h1 = (int32_t)((uint32_t)zp2 << (r1 - 2));
            st2_clamped(y0, k_rq_up(a00, m0, h0, r0 - 1), k_rq_up(a10, m1, h1, r1 - 1),
                        lo, hi, lo4, hi4, 1);
            st2_clamped(y1, k_rq_up(a01, m0, h0, r0 - 1), k_rq_up(a11, m1, h1, r1 - 1),
                        lo, hi, lo4, hi4, 1);
        }
    }
    if (p->O & 1) {
        const int o = p->O - 1, k0 = qs ? o : 0, r0 = -(int)q->shift[k0];
        const int32_t m0 = q->mult[k0], h0 = (int32_t)((uint32_t)zp2 << (r0 - 2));
        int32_t a[4], v;
        a[0] = a[1] = b ? b[o] : 0;
        a[2] = a[3] = 0;
        gemm_block(w, col, K, a, 1, 2, 1);
        v = k_rq_up(a[0], m0, h0, r0 - 1);
        y0[0] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
        v = k_rq_up(a[1], m0, h0, r0 - 1);
        y1[0] = (int8_t)(v < lo ? lo : (v > hi ? hi : v));
    }
}
#endif

/* All O output channels of one or two pixels (nc) whose interleaved columns are col, into y0,
 * y1; two channels at a time, each pair's requantisation computed once for both pixels. */
K_INLINE void gemm_pixels(const k_window_params *p, const k_q_params *q, const int8_t *w,
                          const int32_t *b, const int16_t *col, int K, int8_t *y0, int8_t *y1,
                          int nc, int dsp)
{
    const int O = p->O, zp = q->out_zp, lo = q->act_min, hi = q->act_max;
    int o;
    for (o = 0; o + 2 <= O; o += 2) {
        const int32_t b0 = b ? b[o] : 0, b1 = b ? b[o + 1] : 0;
        int32_t a[4];
        k_rq r0, r1;
        a[0] = a[1] = b0;
        a[2] = a[3] = b1;
        gemm_block(w + (size_t)o * K, col, K, a, 2, nc, dsp);
        r0 = rq_channel(q, o);
        r1 = rq_channel(q, o + 1);
        y0[o] = rq_apply(a[0], &r0, zp, lo, hi);
        y0[o + 1] = rq_apply(a[2], &r1, zp, lo, hi);
        if (nc == 2) {
            y1[o] = rq_apply(a[1], &r0, zp, lo, hi);
            y1[o + 1] = rq_apply(a[3], &r1, zp, lo, hi);
        }
    }
    if (o < O) {
        const int32_t b0 = b ? b[o] : 0;
        int32_t a[4];
        k_rq r0;
        a[0] = a[1] = b0;
        a[2] = a[3] = 0;
        gemm_block(w + (size_t)o * K, col, K, a, 1, nc, dsp);
        r0 = rq_channel(q, o);
        y0[o] = rq_apply(a[0], &r0, zp, lo, hi);
        if (nc == 2) y1[o] = rq_apply(a[1], &r0, zp, lo, hi);
    }
}

/* Most re-laid weights (conv_padded_k) a conv copies into its scratch (as int16 there:
 * conv_pad_weights16). */
#define K_CONV_PADW 2048

/* K' of the re-laid im2col, 0 when the conv keeps K: a conv whose K = kh * kw * C is not a
 * multiple of 4 (the assembly GEMM needs a multiple of 8: a first layer's 3 x 3 x 3 = 27; a
 * K % 8 == 4 keeps K, its last four elements in C, and its scratch) with dilation 1
 * along a row and O K' <= K_CONV_PADW gets K' = ceil8(K): element j of kernel row ky (R = kw C
 * elements, R4 = R & ~3) at ky R4 + j for j < R4, the rows' R % 4 last elements after all
 * rows' words, at kh R4 + ky (R - R4) + j - R4, zeros from K to K'. So each row's first R4
 * column elements are whole SXTAB16 words and the GEMM runs on the core; the weights are
 * copied into the scratch in that order once per call (conv_pad_weights). */
K_INLINE int conv_padded_k(const k_window_params *p)
{
    const int K = p->kh * p->kw * p->C, Kp = (K + 7) & ~7;
    if (K % 4 == 0 || p->dw != 1 || p->O * Kp > K_CONV_PADW) return 0;
    return Kp;
}

int k_q_conv_scratch(const k_window_params *p)
{
    const int K = p->kh * p->kw * p->C, Kp = conv_padded_k(p);
    if (Kp) return 4 + 2 * 2 * Kp + 2 * p->O * Kp;
    return 4 + 2 * 2 * (K + (K & 1));
}

/* Byte offset of weight (o, k) in the conv_weights layout of O rows of K (q8_variants.py):
 * channel pairs, each group of four as (0, 2, 1, 3) per row and alternating between the pair's
 * rows, then row 0's K % 4 last bytes, then row 1's; an odd last row alone. */
K_INLINE size_t conv_w_at(int O, int K, int o, int k)
{
    static const unsigned char perm[4] = {0, 2, 1, 3};
    const int K4 = K & ~3, r = o & 1;
    if (o >= (O & ~1)) {
        const size_t base = (size_t)(O - 1) * K;
        return base + (size_t)(k < K4 ? (k & ~3) + perm[k & 3] : k);
    }
    {
        const size_t base = (size_t)(o >> 1) * 2 * K;
        if (k < K4) return base + (size_t)((k >> 2) * 8 + r * 4 + perm[k & 3]);
        return base + (size_t)(2 * K4 + r * (K - K4) + (k - K4));
    }
}

/* Position in the re-laid order (conv_padded_k) of element j of kernel row ky. */
K_INLINE int conv_padded_at(int kh, int R, int ky, int j)
{
    const int R4 = R & ~3;
    return j < R4 ? ky * R4 + j : kh * R4 + ky * (R - R4) + (j - R4);
}

/* The weights w (K = kh kw C) in the conv_weights layout of K' = Kp elements in the re-laid
 * order (conv_padded_k), zeros from K on, into wp. */
K_INLINE void conv_pad_weights(const k_window_params *p, const int8_t *w, int Kp, int8_t *wp)
{
    const int O = p->O, R = p->kw * p->C, K = p->kh * R;
    int o, k;
    for (o = 0; o < O; o++) {
        for (k = K; k < Kp; k++) wp[conv_w_at(O, Kp, o, k)] = 0;
        for (k = 0; k < K; k++)
            wp[conv_w_at(O, Kp, o, conv_padded_at(p->kh, R, k / R, k % R))] =
                w[conv_w_at(O, K, o, k)];
    }
}

/* conv_pad_weights for gemm_pairs_asm's K_G22_STEP16 (an even O) at Kp = ceil4(K) (at most
 * conv_padded_k's ceil8, so inside the scratch): per channel pair and group of four re-laid
 * elements k the int16 words row 0 (w_k, w_k+1), row 1 (w_k, w_k+1), row 0 (w_k+2, w_k+3),
 * row 1 (w_k+2, w_k+3); zeros from K on. */
K_INLINE void conv_pad_weights16(const k_window_params *p, const int8_t *w, int Kp, int16_t *wp)
{
    const int O = p->O, R = p->kw * p->C, K = p->kh * R;
    int o, k;
    for (k = 0; k < O * Kp; k++) wp[k] = 0;
    for (o = 0; o < O; o++) {
        int16_t *pair = wp + (size_t)(o >> 1) * 2 * Kp + 2 * (o & 1);
        for (k = 0; k < K; k++) {
            const int t = conv_padded_at(p->kh, R, k / R, k % R);
            pair[(t >> 2) * 8 + (t & 2) * 2 + (t & 1)] = w[conv_w_at(O, K, o, k)];
        }
    }
}

/* Column pc of output pixel n in the re-laid order (conv_padded_k), elements [0, K): per
 * kernel row its kw C values minus in_zp (zeros in the padding), the row's words through
 * col_copy when the row lies inside the input. */
static __attribute__((noinline)) void col_fill_padded(const k_window_params *p,
                                                      const int8_t *x, int n, int16_t *col,
                                                      int pc, int zp, uint32_t off2)
{
    const int C = p->C, kw = p->kw, kh = p->kh, R = kw * C, R4 = R & ~3;
    const int oy = n / p->OW, ox = n - oy * p->OW;
    const int iy0 = oy * p->sh - p->pt, ix0 = ox * p->sw - p->pl;
    const int inside = ix0 >= 0 && ix0 + kw <= p->W;
    int ky, j;
    if (inside && iy0 >= 0 && iy0 + (kh - 1) * p->dh < p->H) {
        /* every row inside (most pixels): the rows' words, then their R % 4 last values */
        const int8_t *row = x + ((ptrdiff_t)iy0 * p->W + ix0) * C;
        const size_t rs = (size_t)p->dh * p->W * C;
        int t = kh * R4;
        for (ky = 0; ky < kh; ky++, row += rs) {
            col_copy(row, col, ky * R4, R4, pc, zp, off2, 1);
            for (j = R4; j < R; j++, t++) st2a(col + col_at(t, pc), row[j] - zp);
        }
        return;
    }
    for (ky = 0; ky < kh; ky++) {
        const int iy = iy0 + ky * p->dh, in = iy >= 0 && iy < p->H;
        const int8_t *row = x + ((ptrdiff_t)iy * p->W + ix0) * C;
        if (in && inside) {
            col_copy(row, col, ky * R4, R4, pc, zp, off2, 1);
            for (j = R4; j < R; j++) st2a(col + col_at(conv_padded_at(kh, R, ky, j), pc), row[j] - zp);
            continue;
        }
        for (j = 0; j < R; j++) {
            const int ix = ix0 + j / C;
            st2a(col + col_at(conv_padded_at(kh, R, ky, j), pc),
                 in && ix >= 0 && ix < p->W ? row[j] - zp : 0);
        }
    }
}

/* Column pc of a pixel whose window lies inside the input, in the re-laid order
 * (conv_padded_k): kernel row ky's R4 = R & ~3 first values from row + ky rs as words of four
 * (SXTAB16 of the word and of its ROR 8 against off2 = -in_zp twice, PKHBT / PKHTB into the
 * pairs (0, 1), (2, 3): one LDR and two STR per four values; group g's words of column pc sit
 * at 32-bit index 4 g + pc and 4 g + 2 + pc, col_at), then its R - R4 last values at
 * kh R4 + ky (R - R4) (col_at). Called with constant kh, R for a first layer's 3 x 3 x 3, so
 * GCC unrolls it (the host build; col333_asm on the core). */
K_INLINE void col_rows_inside(const int8_t *row, size_t rs, int kh, int R, int16_t *col, int pc,
                              int zp, uint32_t off2)
{
    const int R4 = R & ~3, nt = R - R4;
    uint32_t *d = (uint32_t *)__builtin_assume_aligned(col, 4) + pc;
    int ky, i, t = kh * R4;
    for (ky = 0; ky < kh; ky++, row += rs) {
        for (i = 0; i < R4; i += 4, d += 4) {
            const uint32_t v = K_LD4(row + i);
            const uint32_t e = K_SXTAB16(off2, v), o = K_SXTAB16_ROR8(off2, v);
            K_ST4(d, K_PKHBT16(e, o));
            K_ST4(d + 2, K_PKHTB16(o, e));
        }
        for (i = 0; i < nt; i++, t++) st2a(col + col_at(t, pc), row[R4 + i] - zp);
    }
}

#if K_DSP_NATIVE
/* col_rows_inside of a 3 x 3 x 3 window on the core (18 instructions per kernel row): the
 * row's eight first values as two words into the column's group words at byte offsets
 * 32 ky + (0, 8, 16, 24) from d (col + 4 pc), its ninth value at 96, 98, 104 (col_at of
 * 24 + ky, relative to d). */
#define K_COL333_ROW(G, T)                                                                     \
    "ldr %[v0], [%[r]]\n\t"                                                                   \
    "ldr %[v1], [%[r], #4]\n\t"                                                               \
    "ldrsb %[t], [%[r], #8]\n\t"                                                              \
    "add %[r], %[r], %[rs]\n\t"                                                               \
    "sxtab16 %[e], %[off2], %[v0]\n\t"                                                        \
    "sxtab16 %[v0], %[off2], %[v0], ror #8\n\t"                                               \
    "pkhbt %[o], %[e], %[v0], lsl #16\n\t"                                                    \
    "str %[o], [%[d], #" #G "]\n\t"                                                           \
    "pkhtb %[o], %[v0], %[e], asr #16\n\t"                                                    \
    "str %[o], [%[d], #" #G "+8]\n\t"                                                         \
    "sxtab16 %[e], %[off2], %[v1]\n\t"                                                        \
    "sxtab16 %[v1], %[off2], %[v1], ror #8\n\t"                                               \
    "pkhbt %[o], %[e], %[v1], lsl #16\n\t"                                                    \
    "str %[o], [%[d], #" #G "+16]\n\t"                                                        \
    "pkhtb %[o], %[v1], %[e], asr #16\n\t"                                                    \
    "str %[o], [%[d], #" #G "+24]\n\t"                                                        \
    "sub %[t], %[t], %[zp]\n\t"                                                               \
    "strh %[t], [%[d], #" #T "]\n\t"

static inline __attribute__((always_inline)) void col333_asm(const int8_t *r, size_t rs,
                                                             int16_t *col, int pc, int zp,
                                                             uint32_t off2)
{
    int16_t *d = col + 2 * pc;
    uint32_t v0, v1, e, o, t;
    __asm__ volatile(K_COL333_ROW(0, 96) K_COL333_ROW(32, 98) K_COL333_ROW(64, 104)
                     : [r] "+r"(r), [v0] "=&r"(v0), [v1] "=&r"(v1), [e] "=&r"(e), [o] "=&r"(o),
                       [t] "=&r"(t)
                     : [rs] "r"(rs), [d] "r"(d), [zp] "r"(zp), [off2] "r"(off2)
                     : "memory");
}
#endif

/* The padded im2col's geometry (conv_padded_k) in locals, read once per call: the output
 * width, the last window origins inside the input (xmax, ymax), the input bytes per kernel row
 * step (rs) and per input row (xr). */
typedef struct {
    int OW, C, kh, R, sh, sw, pt, pl, xmax, ymax;
    size_t rs, xr;
} k_padg;

K_INLINE k_padg padded_geom(const k_window_params *p)
{
    k_padg g;
    g.OW = p->OW;
    g.C = p->C;
    g.kh = p->kh;
    g.R = p->kw * p->C;
    g.sh = p->sh;
    g.sw = p->sw;
    g.pt = p->pt;
    g.pl = p->pl;
    g.xmax = p->W - p->kw;
    g.ymax = p->H - 1 - (p->kh - 1) * p->dh;
    g.rs = (size_t)p->dh * p->W * p->C;
    g.xr = (size_t)p->W * p->C;
    return g;
}

/* Column pc of output pixel n = (oy, ox) in the re-laid order: a 3 x 3 x 3 window inside the
 * input through col333_asm (col_rows_inside off the core), any other through col_fill_padded
 * (out of line, one copy for both columns: code size). */
K_INLINE void padded_col(const k_padg *g, const k_window_params *p, const int8_t *x, int n,
                         int oy, int ox, int16_t *col, int pc, int zp, uint32_t off2)
{
    const int iy0 = oy * g->sh - g->pt, ix0 = ox * g->sw - g->pl;
    if (ix0 >= 0 && ix0 <= g->xmax && iy0 >= 0 && iy0 <= g->ymax) {
        const int8_t *row = x + (size_t)iy0 * g->xr + (size_t)ix0 * g->C;
#if K_DSP_NATIVE
        if (g->kh == 3 && g->R == 9) {
            col333_asm(row, g->rs, col, pc, zp, off2);
            return;
        }
#else
        if (g->kh == 3 && g->R == 9) {
            col_rows_inside(row, g->rs, 3, 9, col, pc, zp, off2);
            return;
        }
#endif
    }
    col_fill_padded(p, x, n, col, pc, zp, off2);
}

/* The im2col columns of output pixels n and (two) n + 1 into col (a conv without the re-laid
 * order, padded_col): a pointwise's input pixels as they are, else col_fill. */
K_INLINE void conv_cols(const k_window_params *p, const int8_t *x, int n, int two, int16_t *col,
                        int K, int pointwise, int zp, uint32_t off2, int dsp)
{
    if (pointwise) {
        col_copy(x + (size_t)n * K, col, 0, K, 0, zp, off2, dsp);
        if (two) col_copy(x + (size_t)(n + 1) * K, col, 0, K, 1, zp, off2, dsp);
    } else {
        col_fill(p, x, n, col, 0, zp, off2, dsp);
        if (two) col_fill(p, x, n + 1, col, 1, zp, off2, dsp);
    }
}

/* Output pixels two at a time: their columns into the scratch, then the GEMM. On the core
 * with K % 8 == 0, k_rq_up, per-channel multipliers, biases and an even O, every pair of
 * pixels goes through gemm_pairs_asm with its record set up once per call. */
K_INLINE void conv_engine(const k_window_params *p, const k_q_params *q, const int8_t *x,
                          const int8_t *w, const int32_t *b, int8_t *s, int8_t *y, int dsp,
                          int pointwise)
{
    const int Kp = dsp && !pointwise ? conv_padded_k(p) : 0;
    const int K = Kp ? Kp : p->kh * p->kw * p->C, O = p->O, npix = p->OH * p->OW;
    const int zp = q->in_zp;
    const uint32_t off2 = ((uint32_t)(-zp) & 0xFFFFu) * 0x10001u;
    int16_t *col = (int16_t *)(void *)(s + ((4u - ((uintptr_t)s & 3u)) & 3u));
    const int up = rqup_ok(q);
#if K_DSP_NATIVE
    const int up8 = up && dsp && K % 8 == 0 && K > 0 && !((uintptr_t)w & 3u);
#endif
    const k_padg pg = padded_geom(p);
    int n = 0, oy = 0, ox = 0;
#if K_DSP_NATIVE
    const int pairs = up8 && q->nq > 1 && b && O >= 2 && !(O & 1);
    /* int16 weights need K % 4 == 0 only (K_G22_HALF): the re-laid K rounded up to 4 */
    const int K16 = (p->kh * p->kw * p->C + 3) & ~3;
    int w16 = 0;
#endif
    if (Kp) { /* the weights re-laid after the columns; the columns' tails [K, K') zero */
        int8_t *wp = (int8_t *)(col + 2 * Kp);
#if K_DSP_NATIVE
        w16 = pairs;
        if (w16) conv_pad_weights16(p, w, K16, (int16_t *)(void *)wp);
        else
#endif
            conv_pad_weights(p, w, Kp, wp);
        w = wp;
        col_zero(col, p->kh * p->kw * p->C, Kp - p->kh * p->kw * p->C, 0);
        col_zero(col, p->kh * p->kw * p->C, Kp - p->kh * p->kw * p->C, 1);
    }
#if K_DSP_NATIVE
    k_g22p kp = {col, col + (size_t)2 * (w16 ? K16 : K), q->mult, (int32_t)((q->shift - q->mult) * 4) - 8, b, y,
                 O, ((uint32_t)q->act_min & 0xFFu) * 0x01010101u,
                 ((uint32_t)q->act_max & 0xFFu) * 0x01010101u, 2 * q->out_zp + 1, y};
    const int clamp = q->act_min != -128 || q->act_max != 127;
#endif
    for (; n < npix; n += 2) {
        const int two = n + 1 < npix;
        if (Kp) { /* pixels (oy, ox) and the next, stepped along the output rows */
            padded_col(&pg, p, x, n, oy, ox, col, 0, zp, off2);
            if (++ox == pg.OW) ox = 0, oy++;
            if (two) padded_col(&pg, p, x, n + 1, oy, ox, col, 1, zp, off2);
            if (++ox == pg.OW) ox = 0, oy++;
        } else conv_cols(p, x, n, two, col, K, pointwise, zp, off2, dsp);
#if K_DSP_NATIVE
        if (two && pairs) { /* the record set up once; per pair of pixels its pointers */
            kp.mq = q->mult;
            kp.bq = b;
            kp.y0 = y + (size_t)n * O;
            kp.yend = kp.y0 + O;
            if (w16) gemm_pairs16_asm(&kp, w, clamp);
            else gemm_pairs_asm(&kp, w, clamp);
        } else if (w16) { /* the last pixel alone: column 1's outputs land on column 0's, which
                             * the assembly stores last (y0 + dy = y0) */
            kp.mq = q->mult;
            kp.bq = b;
            kp.y0 = y + (size_t)n * O;
            kp.yend = kp.y0 + O;
            kp.dy = 0;
            gemm_pairs16_asm(&kp, w, clamp);
        } else if (two && up8)
            gemm_pixels_up8(p, q, w, b, col, K, y + (size_t)n * O, y + (size_t)(n + 1) * O);
        else
#endif
        if (two && up)
            gemm_pixels_up(p, q, w, b, col, K, y + (size_t)n * O, y + (size_t)(n + 1) * O, dsp);
        else if (two)
            gemm_pixels(p, q, w, b, col, K, y + (size_t)n * O, y + (size_t)(n + 1) * O, 2, dsp);
        else gemm_pixels(p, q, w, b, col, K, y + (size_t)n * O, y, 1, dsp);
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

/* Most taps (kh * kw) whose offsets (and, DSP, pre-extended weights) the depthwise keeps on
 * the stack (5 x 5: with the compiler's copies a frame of about 1 KiB); larger kernels run
 * channel by channel through dw_one. */
#define K_DW_MAXT 25

/* A depthwise block's constants: its four requantisations, biases, the output zero point and
 * clamp (also as four bytes for SSUB8 / SEL), -in_zp in both halfwords, the taps' byte offsets
 * from tap (0, 0) and (DSP) each tap's weights as (w0, w2), (w1, w3) halfword pairs. */
typedef struct {
    k_rq r[4];
    int32_t bias[4];
    int zp, ozp, lo, hi;
    uint32_t lo4, hi4, off2;
    int32_t toff[K_DW_MAXT];
    uint32_t wq[2 * K_DW_MAXT];
} k_dwb;

/* rq mode 2 of a block (dw_block): the weights and biases doubled, so acc2 = 2 acc; then
 * rq_fast(acc) + out_zp = (SMMLAR(acc2, m, fc) - [acc2 < 0]) >> right with
 * fc = 2^(right - 1) + out_zp 2^right (kept in the channel's k_rq.half, which rq mode 2 does
 * not otherwise use, so the block's stack frame does not grow): SMMLAR gives h + fc with
 * h = SMMULR(2 acc, m) =
 * round(acc m / 2^31), and the rounding shift's tie correction [h < 0] equals [acc < 0] when
 * m > 2^30 (h = 0 for acc = -1 only if m = 2^30). Three instructions, zero point included. */
K_INLINE int32_t dw_rq2(int32_t acc2, const k_rq *r)
{
    return (K_SMMLAR(acc2, r->m, r->half) - (int32_t)((uint32_t)acc2 >> 31)) >> r->right;
}

/* Requantise four channels' sums and store them at yo. DSP: SSAT #8 each, packed into a word
 * by BFI, clamped by SSUB8 / SEL against the packed bounds, one store. */
K_INLINE void dw_out4(int8_t *yo, int32_t a0, int32_t a1, int32_t a2, int32_t a3,
                      const k_dwb *k, int fast, int dsp)
{
#define DW_RQ(a, j)                                                                            \
    (fast == 2 ? dw_rq2((a), &k->r[j])                                                         \
               : (fast ? rq_fast((a), &k->r[j]) : rq_value((a), &k->r[j], k->r[j].away)) + k->ozp)
    const int32_t v0 = DW_RQ(a0, 0), v1 = DW_RQ(a1, 1), v2 = DW_RQ(a2, 2), v3 = DW_RQ(a3, 3);
#undef DW_RQ
    if (dsp) {
        uint32_t w = (uint32_t)(uint8_t)K_SSAT8(v0);
        w = K_BFI8(w, (uint32_t)K_SSAT8(v1), 8);
        w = K_BFI8(w, (uint32_t)K_SSAT8(v2), 16);
        w = K_BFI8(w, (uint32_t)K_SSAT8(v3), 24);
        K_ST4(yo, K_MIN8(K_MAX8(w, k->lo4), k->hi4));
    } else {
        yo[0] = (int8_t)(v0 < k->lo ? k->lo : (v0 > k->hi ? k->hi : v0));
        yo[1] = (int8_t)(v1 < k->lo ? k->lo : (v1 > k->hi ? k->hi : v1));
        yo[2] = (int8_t)(v2 < k->lo ? k->lo : (v2 > k->hi ? k->hi : v2));
        yo[3] = (int8_t)(v3 < k->lo ? k->lo : (v3 > k->hi ? k->hi : v3));
    }
}

/* (a0..a3) += tap j of four channels: the input word at xp against the weights (DSP: the
 * pre-extended pairs wq[2 j], wq[2 j + 1]; plain: wb[4 j..4 j + 3]). */
#define DW_TAP(xp, j)                                                                          \
    do {                                                                                       \
        if (dsp) {                                                                             \
            const uint32_t xv_ = K_LD4(xp);                                                    \
            const uint32_t x02_ = K_SXTAB16(k->off2, xv_);                                     \
            const uint32_t x13_ = K_SXTAB16_ROR8(k->off2, xv_);                                \
            const uint32_t w02_ = k->wq[2 * (j)], w13_ = k->wq[2 * (j) + 1];                   \
            a0 = K_SMLABB(x02_, w02_, a0);                                                     \
            a2 = K_SMLATT(x02_, w02_, a2);                                                     \
            a1 = K_SMLABB(x13_, w13_, a1);                                                     \
            a3 = K_SMLATT(x13_, w13_, a3);                                                     \
        } else {                                                                               \
            const int8_t *xq_ = (xp), *wp_ = wb + 4 * (j);                                     \
            a0 += wp_[0] * (xq_[0] - k->zp);                                                   \
            a1 += wp_[1] * (xq_[1] - k->zp);                                                   \
            a2 += wp_[2] * (xq_[2] - k->zp);                                                   \
            a3 += wp_[3] * (xq_[3] - k->zp);                                                   \
        }                                                                                      \
    } while (0)

/* Output pixels ox in [ox0, ox1) of row oy whose window lies inside the input: every tap at
 * its precomputed offset, no bounds checks (T is a constant, 9, for 3 x 3 kernels). */
K_INLINE void dw_run_inside(const k_window_params *p, const int8_t *x, const int8_t *wb,
                            const k_dwb *k, int c, int oy, int ox0, int ox1, int8_t *y, int T,
                            int fast, int dsp)
{
    const int C = p->C;
    const size_t xstep = (size_t)p->sw * C;
    const int8_t *xp0 = x + ((size_t)(oy * p->sh - p->pt) * p->W + (ox0 * p->sw - p->pl)) * C + c;
    int8_t *yo = y + ((size_t)oy * p->OW + ox0) * C + c;
    int ox, j;
    for (ox = ox0; ox < ox1; ox++, xp0 += xstep, yo += C) {
        int32_t a0 = k->bias[0], a1 = k->bias[1], a2 = k->bias[2], a3 = k->bias[3];
        if (T == 9) {
#if defined(__GNUC__)
#pragma GCC unroll 9
#endif
            for (j = 0; j < 9; j++) DW_TAP(xp0 + k->toff[j], j);
        } else {
            for (j = 0; j < T; j++) DW_TAP(xp0 + k->toff[j], j);
        }
        dw_out4(yo, a0, a1, a2, a3, k, fast, dsp);
    }
}

/* [t0, t1): the taps t < k with start + t * d inside [0, n), in closed form. */
K_INLINE void dw_taps(int start, int n, int k, int d, int *t0, int *t1)
{
    int a = start < 0 ? (-start + d - 1) / d : 0, b = n - start <= 0 ? 0 : (n - start + d - 1) / d;
    b = b > k ? k : b;
    *t0 = a > b ? b : a;
    *t1 = b;
}

/* One output pixel near the border, its rows [ky0, ky1) inside the input: only the taps inside
 * the input (TFLite skips the others), each at its precomputed offset. */
K_INLINE void dw_pixel_edge(const k_window_params *p, const int8_t *x, const int8_t *wb,
                            const k_dwb *k, int c, int oy, int ky0, int ky1, int ox, int8_t *y,
                            int fast, int dsp)
{
    const int C = p->C, iy0 = oy * p->sh - p->pt, ix0 = ox * p->sw - p->pl;
    const ptrdiff_t base = ((ptrdiff_t)iy0 * p->W + ix0) * C + c;
    int32_t a0 = k->bias[0], a1 = k->bias[1], a2 = k->bias[2], a3 = k->bias[3];
    int ky, kx, kx0, kx1;
    dw_taps(ix0, p->W, p->kw, p->dw, &kx0, &kx1);
    for (ky = ky0; ky < ky1; ky++)
        for (kx = kx0; kx < kx1; kx++) {
            const int j = ky * p->kw + kx;
            DW_TAP(x + (base + k->toff[j]), j);
        }
    dw_out4(y + ((size_t)oy * p->OW + ox) * C + c, a0, a1, a2, a3, k, fast, dsp);
}

/* [lo, hi): the output columns whose window lies inside the input columns. */
K_INLINE void dw_inside_cols(const k_window_params *p, int *lo, int *hi)
{
    const int last = p->W - 1 - (p->kw - 1) * p->dw + p->pl; /* ix0 + span <= W - 1 */
    int a = (p->pl + p->sw - 1) / p->sw, b = last < 0 ? 0 : last / p->sw + 1;
    b = b > p->OW ? p->OW : b;
    a = a > b ? b : a;
    *lo = a;
    *hi = b;
}

/* Every output pixel of one block, row by row: the border pixels through dw_pixel_edge, the
 * others through dw_run_inside (T a constant 9 for 3 x 3 kernels). */
K_INLINE void dw_rows(const k_window_params *p, const int8_t *x, const int8_t *wb,
                      const k_dwb *k, int c, int8_t *y, int fast, int dsp)
{
    const int T = p->kh * p->kw;
    int oy, ox, lo, hi;
    dw_inside_cols(p, &lo, &hi);
    for (oy = 0; oy < p->OH; oy++) {
        int ky0, ky1, inside, a, e;
        dw_taps(oy * p->sh - p->pt, p->H, p->kh, p->dh, &ky0, &ky1);
        inside = ky0 == 0 && ky1 == p->kh && lo < hi;
        a = inside ? lo : p->OW;
        e = inside ? hi : p->OW;
        for (ox = 0; ox < a; ox++) dw_pixel_edge(p, x, wb, k, c, oy, ky0, ky1, ox, y, fast, dsp);
        if (inside && T == 9) dw_run_inside(p, x, wb, k, c, oy, a, e, y, 9, fast, dsp);
        else if (inside) dw_run_inside(p, x, wb, k, c, oy, a, e, y, T, fast, dsp);
        for (ox = e; ox < p->OW; ox++) dw_pixel_edge(p, x, wb, k, c, oy, ky0, ky1, ox, y, fast, dsp);
    }
}

/* Channels c..c+3 (weights wb, (taps, 4); T <= K_DW_MAXT taps) of every output pixel: the
 * block's constants once (requantisations, biases, packed clamp, tap offsets, DSP: the
 * weights pre-extended), then dw_rows; DSP with rq_fast when the block's sums allow it. Per
 * tap the DSP path does one input word, SXTAB16 (+ -in_zp) into (x0, x2), (x1, x3), and
 * SMLABB / SMLATT against the pre-extended weights. */
K_INLINE void dw_block(const k_window_params *p, const k_q_params *q, const int8_t *x,
                       const int8_t *wb, const int32_t *b, int c, int8_t *y, int dsp)
{
    const int T = p->kh * p->kw;
    k_dwb k;
    int j, fast = 1;
    for (j = 0; j < 4; j++) {
        k.r[j] = rq_channel(q, c + j);
        k.bias[j] = b ? b[c + j] : 0;
        fast &= rq_fast_ok(&k.r[j], k.bias[j], T);
    }
    k.zp = q->in_zp;
    k.ozp = q->out_zp;
    k.lo = q->act_min;
    k.hi = q->act_max;
    k.lo4 = ((uint32_t)k.lo & 0xFFu) * 0x01010101u;
    k.hi4 = ((uint32_t)k.hi & 0xFFu) * 0x01010101u;
    k.off2 = ((uint32_t)(-k.zp) & 0xFFFFu) * 0x10001u;
    for (j = 0; j < T; j++) {
        k.toff[j] = ((j / p->kw) * p->dh * p->W + (j % p->kw) * p->dw) * p->C;
        if (dsp) {
            const uint32_t v = K_LD4(wb + 4 * j);
            k.wq[2 * j] = K_SXTB16(v);
            k.wq[2 * j + 1] = K_SXTB16_ROR8(v);
        }
    }
    if (dsp && fast) {
        int f2 = 1;
        for (j = 0; j < 4; j++) f2 &= k.r[j].m > (1 << 30) && k.r[j].right <= 22;
        if (f2) {
            /* rq mode 2 (dw_rq2): weights and biases doubled (|2 acc| < 2^31 by rq_fast_ok;
             * each halfword lane of wq doubled, bit 16 cleared of the low lane's sign) */
            for (j = 0; j < 4; j++) {
                k.bias[j] *= 2;
                k.r[j].half = (int32_t)(1u << (k.r[j].right - 1)) +
                              (int32_t)((uint32_t)k.ozp << k.r[j].right);
            }
            for (j = 0; j < 2 * T; j++) k.wq[j] = (k.wq[j] << 1) & 0xFFFEFFFFu;
            dw_rows(p, x, wb, &k, c, y, 2, dsp);
            return;
        }
    }
    /* rq_fast (mode 1) would be exact here too; mode 0 keeps one copy of the loops less */
    dw_rows(p, x, wb, &k, c, y, 0, dsp);
}

/* Channel c of every output pixel, its weight of tap j at wc[j * ws] (a tail channel: ws 1; a
 * channel of a block, for kernels over K_DW_MAXT taps: ws 4). */
K_INLINE void dw_one(const k_window_params *p, const k_q_params *q, const int8_t *x,
                     const int8_t *wc, int ws, const int32_t *b, int c, int8_t *y)
{
    const k_rq r = rq_channel(q, c);
    const int zp = q->in_zp;
    k_pixel t;
    for (k_pixel_first(p, p->dh, p->dw, &t); t.oy < p->OH; k_pixel_next(p, &t)) {
        const size_t step = (size_t)t.dw * t.col;
        int32_t acc = b ? b[c] : 0;
        int ky, kx;
        for (ky = t.ky0; ky < t.ky1; ky++) {
            const int8_t *xp = x + k_tap_at(&t, ky, t.kx0) + c;
            for (kx = t.kx0; kx < t.kx1; kx++, xp += step)
                acc += wc[(ky * p->kw + kx) * ws] * (*xp - zp);
        }
        y[((size_t)t.oy * p->OW + t.ox) * p->C + c] =
            rq_apply(acc, &r, q->out_zp, q->act_min, q->act_max);
    }
}

/* ------------------------------------------------- 3 x 3 depthwise over a padded ring ---- */

/* The 3 x 3 depthwise (dilation 1, stride 1, at least 4 pixels along the input's longer axis,
 * below which the ring's set-up costs more than it saves; dw3_ok) of a block of four channels
 * works on the scratch (k_q_depthwise_scratch): a ring of three padded input lines, each as four
 * int16 planes (one per channel) of rw halfwords, the line's pixel i at halfword lead + i and
 * in_zp everywhere else. A padded position holding in_zp adds w * (in_zp - in_zp) = 0, as
 * TFLite's skipped taps do, so with the bias folded to b - in_zp * sum(w) every output pixel is
 * the same nine raw products: no border code. The lines are the input's rows, or its columns
 * when it is taller than wide (dw3_geom: the longer axis along the line, fewer pixels wasted at
 * a line's end). Per line and channel the DSP loop (dw3_lines_asm) takes four output pixels at
 * once, their windows starting at an even (word-aligned) column: per kernel line the words
 * (x0, x1), (x2, x3) (one LDRD), (x4, x5) against the packed weights (w0, w1), (w1, w2) by
 * SMLAD / SMLATB / SMLABT (DW3_ASM_LINE): 36 MACs in 61 instructions with the requantisation
 * and the stores (69 with a ReLU clamp, 72 with both bounds). Per block and output line C code
 * loads one ring line (dw3_load_line, 16 instructions per pixel pair) and calls the assembly
 * once (dw3_rows_asm): 2.46 instructions per MAC on the 16 x 16 x 32 benchmark layer. */
K_INLINE int dw3_ok(const k_window_params *p)
{
    return p->kh == 3 && p->kw == 3 && p->dh == 1 && p->dw == 1 && p->sh == 1 && p->sw == 1 &&
           p->C == p->O && p->C >= 4 && (p->H > p->W ? p->H : p->W) >= 4;
}

/* The ring's orientation: tr 1 when the lines are the input's columns (H > W). n: lines (input
 * rows or columns), len: pixels per line, lead / trail: the padding before / after a line, top:
 * the padding before the first line; xs / xl: input bytes from a pixel to the next one of its
 * line / of the next line; ys / yl: the same for the output; on / ol: output lines and pixels
 * per output line; rw: halfwords per plane line (lead rounded up to even + len + trail + 3,
 * rounded up to even: a four-pixel group's loads read up to three columns past the last
 * window; the ring's lines start at column 0 and put pixel i at column lead + i, using at most
 * lead + len + trail + 3 of them); h: 1 for an odd lead (the first pixel loaded alone, so that
 * the np pixel pairs after it start at an even column, an aligned word), odd: 1 when a last
 * pixel is left after the pairs. */
typedef struct {
    int tr, n, len, lead, trail, top, on, ol, rw, h, np, odd;
    size_t xs, xl, ys, yl;
} k_dw3g;

K_INLINE void dw3_geom(const k_window_params *p, k_dw3g *g)
{
    const size_t C = (size_t)p->C;
    int m;
    g->tr = p->H > p->W;
    g->n = g->tr ? p->W : p->H;
    g->len = g->tr ? p->H : p->W;
    g->lead = g->tr ? p->pt : p->pl;
    g->trail = g->tr ? p->pb : p->pr;
    g->top = g->tr ? p->pl : p->pt;
    g->on = g->tr ? p->OW : p->OH;
    g->ol = g->tr ? p->OH : p->OW;
    g->xs = g->tr ? (size_t)p->W * C : C;
    g->xl = g->tr ? C : (size_t)p->W * C;
    g->ys = g->tr ? (size_t)p->OW * C : C;
    g->yl = g->tr ? C : (size_t)p->OW * C;
    m = g->lead + (g->lead & 1) + g->len + g->trail + 3;
    g->rw = m + (m & 1);
    g->h = g->lead & 1;
    g->np = (g->len - g->h) >> 1;
    g->odd = (g->len - g->h) & 1;
}

int k_q_depthwise_scratch(const k_window_params *p)
{
    k_dw3g g;
    if (!dw3_ok(p)) return 0;
    dw3_geom(p, &g);
    return 4 + 2 * 3 * 4 * g.rw;
}

/* One channel's constants: per kernel line u the weights as the int16 pairs w[2 u] = (w0, w1)
 * and w[2 u + 1] = (w1, w2), the folded bias (rq mode 2: all doubled) and the
 * requantisation. */
typedef struct {
    uint32_t w[6];
    int32_t bias;
    k_rq r;
} k_dw3c;

/* A channel's constants with what the assembly (dw3_lines_asm) reads besides (byte offsets
 * in it: k 0..55, the weights at 0..20, the bias at 24, m, fc (k.r.half), right at 28, 32,
 * 36): the output stride along a line (56), the clamp bytes (60, 64), the four-pixel groups
 * per line (68; 0 in a fifth record after the block's four: the end), the plane and output
 * steps to the next channel (72, 76). */
typedef struct {
    k_dw3c k;
    int32_t ys;
    uint32_t lo4, hi4;
    int32_t n, qstep, ystep;
} k_dw3a;

/* The offsets above, checked at compile time (a negative array size otherwise). */
typedef char k_dw3a_layout[offsetof(k_dw3a, k.r.m) == 28 && offsetof(k_dw3a, k.r.half) == 32 &&
                                   offsetof(k_dw3a, k.r.right) == 36 &&
                                   offsetof(k_dw3a, ys) == 56 && offsetof(k_dw3a, n) == 68 &&
                                   offsetof(k_dw3a, ystep) == 76 && sizeof(k_dw3a) == 80
                               ? 1
                               : -1];

/* Input pixel xr (channels c..c+3) into column col of the slot's four planes: one word,
 * SXTB16 into (c0, c2) and (c1, c3), four halfword stores. */
K_INLINE void dw3_pixel(int16_t *slot, int rw, int col, const int8_t *xr)
{
    const uint32_t v = K_LD4(xr), e = K_SXTB16(v), o = K_SXTB16_ROR8(v);
    int16_t *const s = slot + col;
    s[0] = (int16_t)e;
    s[rw] = (int16_t)o;
    s[2 * rw] = (int16_t)(e >> 16);
    s[3 * rw] = (int16_t)(o >> 16);
}

/* n halfwords at s (n a multiple of 8) all zp: two halfwords a store, four stores a step. */
K_INLINE void dw3_fill(int16_t *s, int n, int zp)
{
    const uint32_t z2 = ((uint32_t)zp & 0xFFFFu) * 0x10001u;
    int16_t *const e = s + n;
    for (; s != e; s += 8) {
        K_ST4(s, z2);
        K_ST4(s + 2, z2);
        K_ST4(s + 4, z2);
        K_ST4(s + 6, z2);
    }
}

#if K_DSP_NATIVE
/* One pixel pair of dw3_load_line: the NHWC words at xp, xp + xs (xp stepped by 2 xs) by
 * SXTB16 into (c0, c2), (c1, c3) each, PKHBT / PKHTB into one word per plane (planes 0, 1 at
 * p0, p0 + rwb, planes 2, 3 at p2, p2 + rwb; p0, p2 stepped by 4): 15 instructions. */
#define DW3_LD_PAIR                                                                            \
    "ldr %[v0], [%[xp]]\n\t"                                                                   \
    "ldr %[v1], [%[xp], %[xs]]\n\t"                                                            \
    "add %[xp], %[xp], %[xs], lsl #1\n\t"                                                      \
    "sxtb16 %[e0], %[v0]\n\t"                                                                  \
    "sxtb16 %[f0], %[v1]\n\t"                                                                  \
    "sxtb16 %[v0], %[v0], ror #8\n\t"                                                          \
    "sxtb16 %[v1], %[v1], ror #8\n\t"                                                          \
    "pkhbt %[t], %[v0], %[v1], lsl #16\n\t"                                                    \
    "str %[t], [%[p0], %[rwb]]\n\t"                                                            \
    "pkhbt %[t], %[e0], %[f0], lsl #16\n\t"                                                    \
    "str %[t], [%[p0]], #4\n\t"                                                                \
    "pkhtb %[t], %[v1], %[v0], asr #16\n\t"                                                    \
    "str %[t], [%[p2], %[rwb]]\n\t"                                                            \
    "pkhtb %[t], %[f0], %[e0], asr #16\n\t"                                                    \
    "str %[t], [%[p2]], #4\n\t"
#endif

/* The input line at xr (channels c..c+3, NHWC) into the ring slot at column lead (s = slot +
 * lead): an odd lead's first pixel alone (dw3_pixel), the np pairs from an even column (DSP:
 * DW3_LD_PAIR two pairs a loop step, 16 instructions a pair), the odd last pixel alone. Out of
 * line: called once per line from the row loops. */
static __attribute__((noinline)) void dw3_load_line(const k_dw3g *g, const int8_t *xr,
                                                    int16_t *s)
{
    const int rw = g->rw, h = g->h, ne = h + 2 * g->np;
    const size_t xs = g->xs;
    int16_t *p0 = s + h;
    const int8_t *xp = xr + (size_t)h * xs, *const xe = xr + (size_t)ne * xs;
    if (h) dw3_pixel(s, rw, 0, xr);
#if K_DSP_NATIVE
    if (xp != xe) {
        int16_t *p2 = p0 + 2 * rw;
        const int32_t rwb = 2 * rw;
        uint32_t v0, v1, e0, f0, t;
        __asm__ volatile("cmp %[od], #0\n\t" /* an odd count: in at the second pair */
                         "bne 2f\n\t"
                         "1:\n\t" DW3_LD_PAIR "2:\n\t" DW3_LD_PAIR
                         "cmp %[xp], %[xe]\n\t"
                         "bne 1b\n\t"
                         : [xp] "+r"(xp), [p0] "+r"(p0), [p2] "+r"(p2), [v0] "=&r"(v0),
                           [v1] "=&r"(v1), [e0] "=&r"(e0), [f0] "=&r"(f0), [t] "=&r"(t)
                         : [xs] "r"(xs), [xe] "r"(xe), [rwb] "r"(rwb), [od] "r"(g->np & 1)
                         : "cc", "memory");
    }
#else
    for (; xp != xe; xp += 2 * xs, p0 += 2) { /* the same steps, one pointer per plane */
        const uint32_t v0 = K_LD4(xp), v1 = K_LD4(xp + xs);
        const uint32_t e0 = K_SXTB16(v0), f0 = K_SXTB16(v1);
        const uint32_t e1 = K_SXTB16_ROR8(v0), f1 = K_SXTB16_ROR8(v1);
        K_ST4(p0, K_PKHBT16(e0, f0));
        K_ST4(p0 + rw, K_PKHBT16(e1, f1));
        K_ST4(p0 + 2 * rw, K_PKHTB16(f0, e0));
        K_ST4(p0 + 3 * rw, K_PKHTB16(f1, e1));
    }
#endif
    if (g->odd) dw3_pixel(s, rw, ne, xe);
}

/* Ring line ry (input line ry - top, or padding) of channels c..c+3 into the slot. */
K_INLINE void dw3_ring_line(const k_dw3g *g, const int8_t *x, int c, int ry, int16_t *slot,
                            int zp)
{
    const int iy = ry - g->top;
    if (iy < 0 || iy >= g->n) dw3_fill(slot, 4 * g->rw, zp); /* a line of the padding */
    else dw3_load_line(g, x + (size_t)iy * g->xl + c, slot + g->lead);
}

/* Sum of the nine taps of the output pixel whose window starts at column col of lines
 * r0..r2 (any alignment). */
K_INLINE int32_t dw3_one(const int16_t *r0, const int16_t *r1, const int16_t *r2, int col,
                         const k_dw3c *k)
{
    const int16_t *r[3] = {r0 + col, r1 + col, r2 + col};
    int32_t a = k->bias;
    int ky;
    for (ky = 0; ky < 3; ky++)
        a += (int16_t)(k->w[2 * ky] & 0xFFFFu) * r[ky][0] + (int16_t)(k->w[2 * ky] >> 16) * r[ky][1] +
             (int16_t)(k->w[2 * ky + 1] >> 16) * r[ky][2];
    return a;
}

/* The requantised, clamped int8 of a sum (rq mode: 2 dw_rq2, 1 rq_fast, 0 rq_value; fast 3:
 * dw_rq2 and an activation range of all int8, SSAT alone; fast 4: dw_rq2 and act_max 127,
 * whose assembly clamps the low end only). */
K_INLINE int8_t dw3_out(int32_t a, const k_dw3c *k, int ozp, int lo, int hi, int fast)
{
    int32_t v;
    if (fast == 3) return (int8_t)K_SSAT8(dw_rq2(a, &k->r));
    v = fast >= 2 ? dw_rq2(a, &k->r)
                  : (fast ? rq_fast(a, &k->r) : rq_value(a, &k->r, k->r.away)) + ozp;
    v = v < lo ? lo : v;
    v = v > hi ? hi : v;
    return (int8_t)v;
}

#if K_DSP_NATIVE
/* One kernel line of four output pixels: line pointer R (word-aligned, post-incremented by
 * 8: the next group's start), the line's weight pairs P = (w0, w1), Q = (w1, w2) at byte WO, accumulators
 * from ACC0..ACC3 (the bias, a3, on the first line). The words (x0, x1), (x2, x3), (x4, x5)
 * give every product: pixel 0 SMLAD (x0, x1) P + SMLABT x2 w2, pixel 1 SMLATB x1 w0 +
 * SMLAD (x2, x3) Q, pixel 2 SMLAD (x2, x3) P + SMLABT x4 w2, pixel 3 SMLATB x3 w0 +
 * SMLAD (x4, x5) Q: 12 MACs in two loads (R word-aligned: LDRD), one LDRD of weights and
 * eight instructions. */
#define DW3_ASM_LINE(R, WO, ACC0, ACC1, ACC2, ACC3)                                            \
    "ldrd %[P], %[Q], [%[kp], #" #WO "]\n\t"                                                   \
    "ldrd %[A], %[B], [" R "], #8\n\t"                                                         \
    "smlad %[a0], %[A], %[P], " ACC0 "\n\t"                                                    \
    "smlatb %[a1], %[A], %[P], " ACC1 "\n\t"                                                   \
    "smlad %[a2], %[B], %[P], " ACC2 "\n\t"                                                    \
    "smlatb %[a3], %[B], %[P], " ACC3 "\n\t"                                                   \
    "ldr %[A], [" R "]\n\t"                                                                    \
    "smlabt %[a0], %[B], %[Q], %[a0]\n\t"                                                      \
    "smlad %[a1], %[B], %[Q], %[a1]\n\t"                                                       \
    "smlabt %[a2], %[A], %[Q], %[a2]\n\t"                                                      \
    "smlad %[a3], %[A], %[Q], %[a3]\n\t"
/* dw_rq2 of the sum in V, in place, SSAT #8 (m, fc in P, Q; right in B; A a temporary). */
#define DW3_ASM_RQ(V)                                                                          \
    "smmlar %[A], " V ", %[P], %[Q]\n\t"                                                       \
    "add " V ", %[A], " V ", asr #31\n\t"                                                      \
    "asr " V ", " V ", %[B]\n\t"                                                               \
    "ssat " V ", #8, " V "\n\t"
/* CLAMP: the four bytes into one word (BFI), clamped by SSUB8 / SEL (K_MAX8 against lo4, then
 * for both bounds K_MIN8 against hi4), back into four registers; each variant leaves the output
 * stride ys in B (one LDRD with lo4). */
#define DW3_ASM_YS "ldr %[B], [%[kp], #56]\n\t"
#define DW3_ASM_PACK "bfi %[a0], %[a1], #8, #8\n\tbfi %[a0], %[a2], #16, #8\n\tbfi %[a0], %[a3], #24, #8\n\t"
#define DW3_ASM_UNPACK "lsr %[a1], %[a0], #8\n\tlsr %[a2], %[a0], #16\n\tlsr %[a3], %[a0], #24\n\t"
#define DW3_ASM_CLAMP_LO                                                                       \
    DW3_ASM_PACK "ldrd %[B], %[P], [%[kp], #56]\n\t"                                           \
                 "ssub8 %[A], %[a0], %[P]\n\t"                                                 \
                 "sel %[a0], %[a0], %[P]\n\t" DW3_ASM_UNPACK
#define DW3_ASM_CLAMP_BOTH                                                                     \
    DW3_ASM_PACK "ldrd %[B], %[P], [%[kp], #56]\n\t"                                           \
                 "ldr %[Q], [%[kp], #64]\n\t"                                                  \
                 "ssub8 %[A], %[a0], %[P]\n\t"                                                 \
                 "sel %[a0], %[a0], %[P]\n\t"                                                  \
                 "ssub8 %[A], %[Q], %[a0]\n\t"                                                 \
                 "sel %[a0], %[a0], %[Q]\n\t" DW3_ASM_UNPACK
/* Every channel of the block (kp[0..3], kp[4].n 0) over one output line: kp->n groups of four pixels from
 * the ring lines at q0, q1, q2 (bytes; channel j's planes 2 rw bytes further each), the outputs
 * at yo (channel j's at yo + j). Per group: 34 instructions for the 36 MACs, 18 for the
 * requantisation, 7 for the stores and 2 for the loop: 61 without a clamp, 69 with the low
 * bound only (CLAMP 8 more), 72 with both (11 more). */
#define DW3_ASM_LOOP(CLAMP)                                                                    \
    __asm__ volatile(                                                                          \
        "ldr %[n], [%[kp], #68]\n\t"                                                           \
        "1:\n\t"                                                                               \
        "ldr %[a3], [%[kp], #24]\n\t" DW3_ASM_LINE("%[q0]", 0, "%[a3]", "%[a3]", "%[a3]",      \
                                                   "%[a3]")                                    \
            DW3_ASM_LINE("%[q1]", 8, "%[a0]", "%[a1]", "%[a2]", "%[a3]")                       \
                DW3_ASM_LINE("%[q2]", 16, "%[a0]", "%[a1]", "%[a2]", "%[a3]")                  \
        "ldrd %[P], %[Q], [%[kp], #28]\n\t"                                                    \
        "ldr %[B], [%[kp], #36]\n\t" DW3_ASM_RQ("%[a0]") DW3_ASM_RQ("%[a1]")                   \
            DW3_ASM_RQ("%[a2]") DW3_ASM_RQ("%[a3]") CLAMP                                      \
        "strb %[a0], [%[yo]]\n\t"                                                              \
        "strb %[a1], [%[yo], %[B]]\n\t"                                                        \
        "add %[yo], %[yo], %[B], lsl #1\n\t"                                                   \
        "strb %[a2], [%[yo]]\n\t"                                                              \
        "strb %[a3], [%[yo], %[B]]\n\t"                                                        \
        "add %[yo], %[yo], %[B], lsl #1\n\t"                                                   \
        "subs %[n], %[n], #1\n\t"                                                              \
        "bne 1b\n\t"                                                                           \
        "ldrd %[A], %[B], [%[kp], #72]\n\t"                                                    \
        "add %[q0], %[q0], %[A]\n\t"                                                           \
        "add %[q1], %[q1], %[A]\n\t"                                                           \
        "add %[q2], %[q2], %[A]\n\t"                                                           \
        "add %[yo], %[yo], %[B]\n\t"                                                           \
        "ldr %[n], [%[kp], #148]\n\t"                                                          \
        "adds %[kp], %[kp], #80\n\t"                                                           \
        "cmp %[n], #0\n\t"                                                                     \
        "bne 1b\n\t"                                                                           \
        : [q0] "+r"(q0), [q1] "+r"(q1), [q2] "+r"(q2), [yo] "+r"(yo), [kp] "+r"(kp),         \
          [n] "=&r"(n), [a0] "=&r"(a0), [a1] "=&r"(a1), [a2] "=&r"(a2), [a3] "=&r"(a3),        \
          [A] "=&r"(A), [B] "=&r"(B), [P] "=&r"(P), [Q] "=&r"(Q)                               \
        :                                                                                      \
        : "memory", "cc")

/* The block's four channels over one output line (kp->n >= 1 groups each) from the ring lines
 * r0, r1, r2 (channel 0's planes); clamp 0: none (SSAT alone), 1: lo4 only (hi 127), 2: both. */
static void dw3_lines_asm(const int16_t *r0, const int16_t *r1, const int16_t *r2, int clamp,
                          const k_dw3a *kp, int8_t *yo)
{
    const char *q0 = (const char *)r0, *q1 = (const char *)r1, *q2 = (const char *)r2;
    uint32_t n, a0, a1, a2, a3, A, B, P, Q;
    if (clamp == 0) DW3_ASM_LOOP(DW3_ASM_YS);
    else if (clamp == 1) DW3_ASM_LOOP(DW3_ASM_CLAMP_LO);
    else DW3_ASM_LOOP(DW3_ASM_CLAMP_BOTH);
}
#endif

/* The block's rq mode (dw3_out's fast) for channels c..c+3, biases b: 2 (3 without clamp, 4
 * with act_max 127) on the DSP variant when every channel allows dw_rq2: rq_fast (no left
 * shift, a right one, ties away from zero, |bias| + 9 * 128 * 255 < 2^30: rq_fast_ok) with
 * m > 2^30 and right <= 22; else 0 (rq_value). */
K_INLINE int dw3_mode(const k_q_params *q, const int32_t *b, int c, int dsp)
{
    int j, ok = dsp && !q->round_up;
    for (j = 0; j < 4 && ok; j++) {
        const int k = q->nq > 1 ? c + j : 0;
        const int32_t bj = b ? b[c + j] : 0;
        ok = q->shift[k] < 0 && q->shift[k] >= -22 && q->mult[k] > (1 << 30) &&
             bj < (1 << 30) - 293760 && bj > -((1 << 30) - 293760);
    }
    if (!ok) return 0;
    if (q->act_max != 127) return 2;
    return q->act_min == -128 ? 3 : 4;
}

/* Channel j's constants of the block at wb (taps-major, 4 channels), bias b; lines along the
 * kernel's rows (taps 3 u, 3 u + 1, 3 u + 2), or (tr) its columns (taps u, u + 3, u + 6). rq
 * mode 2 (fast >= 2, dw_rq2): weights and folded bias doubled (|2 acc| < 2^31 by dw3_mode's
 * bound), fc = 2^(right - 1) + out_zp 2^right in r.half. */
K_INLINE void dw3_channel(const k_q_params *q, const int8_t *wb, int j, int32_t b, int c,
                          int tr, int fast, k_dw3c *k)
{
    const int st = tr ? 12 : 4, lt = tr ? 4 : 12; /* bytes between taps of a line, lines */
    const int d = fast >= 2 ? 2 : 1;
    int32_t sw = 0;
    int u;
    for (u = 0; u < 3; u++) {
        const int8_t *t = wb + lt * u + j;
        const int32_t w0 = t[0], w1 = t[st], w2 = t[2 * st];
        k->w[2 * u] = ((uint32_t)(d * w0) & 0xFFFFu) | ((uint32_t)(d * w1) << 16);
        k->w[2 * u + 1] = ((uint32_t)(d * w1) & 0xFFFFu) | ((uint32_t)(d * w2) << 16);
        sw += w0 + w1 + w2;
    }
    k->bias = (int32_t)((uint32_t)(b - q->in_zp * sw) * (uint32_t)d);
    if (d == 1) {
        k->r = rq_channel(q, c + j);
    } else { /* what dw_rq2 reads */
        const int kq = q->nq > 1 ? c + j : 0;
        k->r.m = q->mult[kq];
        k->r.right = -(int)q->shift[kq];
        k->r.half = (int32_t)(1u << (k->r.right - 1)) + (int32_t)((uint32_t)q->out_zp << k->r.right);
    }
}

/* Sets the block's records to n groups per line (the plane and output steps to the next
 * channel follow from n). */
K_INLINE void dw3_groups(const k_dw3g *g, int n, k_dw3a *ka)
{
    int j;
    for (j = 0; j < 4; j++) {
        ka[j].n = n;
        ka[j].qstep = 2 * g->rw - 8 * n;
        ka[j].ystep = 1 - 4 * n * (int32_t)g->ys;
    }
}

/* The assembly's constants of the block's channels besides k: rows with (ol + 3) / 4 groups
 * over the whole line (the last group's extra pixels landing on the next output line's first
 * pixels, which that line then overwrites; dw3_rows_asm sets the last row to the ol / 4 groups
 * inside it), columns with the ol / 4 groups inside the line. */
K_INLINE void dw3_asm_consts(const k_dw3g *g, const k_q_params *q, k_dw3a *ka)
{
    const uint32_t lo4 = ((uint32_t)q->act_min & 0xFFu) * 0x01010101u;
    const uint32_t hi4 = ((uint32_t)q->act_max & 0xFFu) * 0x01010101u;
    int j;
    for (j = 0; j < 4; j++) {
        ka[j].ys = (int32_t)g->ys;
        ka[j].lo4 = lo4;
        ka[j].hi4 = hi4;
    }
    ka[4].n = 0;
    dw3_groups(g, g->tr ? g->ol >> 2 : (g->ol + 3) >> 2, ka);
}

/* The block's output line at yo from the ring lines r0..r2 (channel 0's planes; channel j's
 * j rw halfwords further), pixel by pixel (dw3_one, dw3_out). */
K_INLINE void dw3_line(const k_dw3g *g, const int16_t *r0, const int16_t *r1,
                       const int16_t *r2, const k_dw3a *ka, const k_q_params *q, int8_t *yo,
                       int fast)
{
    const int rw = g->rw;
    int j, ox;
    for (j = 0; j < 4; j++)
        for (ox = 0; ox < g->ol; ox++)
            yo[(size_t)ox * g->ys + j] =
                dw3_out(dw3_one(r0 + j * rw, r1 + j * rw, r2 + j * rw, ox, &ka[j].k), &ka[j].k,
                        q->out_zp, q->act_min, q->act_max, fast);
}

/* Every output line of the block (channels c..c+3, constants ka, rq mode fast) through the
 * ring, pixel by pixel: input line ry (padding lines included) into the slot l2, then, from
 * ry = 2, output line ry - 2 from the slots l0, l1, l2 (lines ry - 2..ry); the slots'
 * pointers rotate. */
static __attribute__((noinline)) void dw3_rows(const k_dw3g *g, const k_q_params *q,
                                               const int8_t *x, int c, int16_t *ring,
                                               const k_dw3a *ka, int8_t *y, int fast)
{
    int16_t *l0 = ring, *l1 = ring + 4 * g->rw, *l2 = ring + 8 * g->rw, *t;
    int ry;
    for (ry = 0; ry < g->on + 2; ry++) {
        dw3_ring_line(g, x, c, ry, l2, q->in_zp);
        if (ry >= 2) dw3_line(g, l0, l1, l2, ka, q, y + (size_t)(ry - 2) * g->yl + c, fast);
        t = l0;
        l0 = l1;
        l1 = l2;
        l2 = t;
    }
}

#if K_DSP_NATIVE
/* The ol - 4 n (1..3) pixels of an output line its n groups do not reach: one more group from
 * column 4 n (even: its words aligned; it reads at most column ol + 4 < rw) into t, four bytes
 * (the block's channels) per pixel (the records' output stride 4 for it), the pixels inside
 * the line copied to yo a word each. */
static __attribute__((noinline)) void dw3_tail(const k_dw3g *g, const int16_t *r0,
                                               const int16_t *r1, const int16_t *r2,
                                               k_dw3a *ka, int8_t *yo, int clamp)
{
    const int n = ka->n, st = 4 * n;
    int8_t t[16];
    int j, k;
    for (j = 0; j < 4; j++) {
        ka[j].n = 1;
        ka[j].qstep = 2 * g->rw - 8;
        ka[j].ys = 4;
        ka[j].ystep = 1 - 16;
    }
    dw3_lines_asm(r0 + st, r1 + st, r2 + st, clamp, ka, t);
    for (j = 0; j < 4; j++) ka[j].ys = (int32_t)g->ys;
    dw3_groups(g, n, ka);
    for (k = 0; k < g->ol - st; k++) K_ST4(yo + (size_t)(st + k) * g->ys, K_LD4(t + 4 * k));
}

/* dw3_rows with rq mode 2 on the core, ol >= 4: each output line through dw3_lines_asm (ka's
 * groups, dw3_asm_consts), then, where they stop short of the line's end, dw3_tail. */
static __attribute__((noinline)) void dw3_rows_asm(const k_dw3g *g, const k_q_params *q,
                                                   const int8_t *x, int c, int16_t *ring,
                                                   k_dw3a *ka, int8_t *y, int fast)
{
    const int clamp = fast == 3 ? 0 : fast == 4 ? 1 : 2;
    int16_t *l0 = ring, *l1 = ring + 4 * g->rw, *l2 = ring + 8 * g->rw, *t;
    int8_t *yo = y + c;
    int oy;
    dw3_ring_line(g, x, c, 0, l0, q->in_zp);
    dw3_ring_line(g, x, c, 1, l1, q->in_zp);
    for (oy = 0; oy < g->on; oy++) {
        dw3_ring_line(g, x, c, oy + 2, l2, q->in_zp);
        if (oy == g->on - 1) dw3_groups(g, g->ol >> 2, ka);
        dw3_lines_asm(l0, l1, l2, clamp, ka, yo);
        if (4 * ka->n < g->ol) dw3_tail(g, l0, l1, l2, ka, yo, clamp);
        yo += g->yl;
        t = l0;
        l0 = l1;
        l1 = l2;
        l2 = t;
    }
}
#endif

/* Channels c..c+3 of every output pixel through the ring (the scratch's zp-filled lines): the
 * channels' constants, then dw3_rows_asm or dw3_rows. */
K_INLINE void dw3_block(const k_dw3g *g, const k_q_params *q, const int8_t *x,
                        const int8_t *wb, const int32_t *b, int c, int16_t *ring, int8_t *y,
                        int dsp)
{
    k_dw3a ka[5]; /* the fifth: dw3_lines_asm's end mark */
    const int fast = dw3_mode(q, b, c, dsp);
    int j;
    for (j = 0; j < 4; j++) dw3_channel(q, wb, j, b ? b[c + j] : 0, c, g->tr, fast, &ka[j].k);
#if K_DSP_NATIVE
    if (fast >= 2 && g->ol >= 4) {
        dw3_asm_consts(g, q, ka);
        dw3_rows_asm(g, q, x, c, ring, ka, y, fast);
        return;
    }
#endif
    dw3_rows(g, q, x, c, ring, ka, y, fast);
}

/* Every 4-channel block of a dw3_ok layer through the ring in the scratch s (4-aligned inside
 * it; the whole ring in_zp first, so the padding columns hold in_zp for good). */
static __attribute__((noinline)) void dw3_blocks(const k_window_params *p, const k_q_params *q,
                                                 const int8_t *x, const int8_t *w,
                                                 const int32_t *b, int8_t *s, int8_t *y)
{
    const int dsp = 1; /* only the _dsp variant has the ring; out of line, so that its
                        * registers leave the window loops' (dw_block) code alone */
    int16_t *ring = (int16_t *)(void *)(s + ((4u - ((uintptr_t)s & 3u)) & 3u));
    k_dw3g g;
    int c, C4 = p->C & ~3;
    dw3_geom(p, &g);
    dw3_fill(ring, 3 * 4 * g.rw, q->in_zp);
    for (c = 0; c < C4; c += 4) dw3_block(&g, q, x, w + (size_t)c * 9, b, c, ring, y, dsp);
}

/* Blocks of four channels, then the C % 4 last channels one by one (every channel one by one
 * for kernels over K_DW_MAXT taps). */
K_INLINE void dw_engine(const k_window_params *p, const k_q_params *q, const int8_t *x,
                        const int8_t *w, const int32_t *b, int8_t *s, int8_t *y, int dsp)
{
    const int C = p->C, T = p->kh * p->kw, C4 = C & ~3;
    int c = 0;
    if (dsp && s && dw3_ok(p)) { /* the plain variant, and a call without the ring (a PEX row
                                    * loop), keep the window loops */
        dw3_blocks(p, q, x, w, b, s, y);
        c = C4;
    }
    for (; c < C4 && T <= K_DW_MAXT; c += 4) dw_block(p, q, x, w + (size_t)c * T, b, c, y, dsp);
    for (; c < C4; c++) dw_one(p, q, x, w + (size_t)(c & ~3) * T + (c & 3), 4, b, c, y);
    for (; c < C; c++) dw_one(p, q, x, w + (size_t)C4 * T + (size_t)(c - C4) * T, 1, b, c, y);
}

void k_q_depthwise_dsp(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                       const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict s,
                       int8_t *restrict y)
{
    dw_engine(p, q, x, w, b, s, y, 1);
}

void k_q_depthwise_plain(const k_window_params *p, const k_q_params *q,
                         const int8_t *restrict x, const int8_t *restrict w,
                         const int32_t *restrict b, int8_t *restrict s, int8_t *restrict y)
{
    dw_engine(p, q, x, w, b, s, y, 0);
}

/* ------------------------------------------------------------------------ dense ---- */

/* a[0..nr-1] += rows of a block dotted with x - zp. Blocks of four rows (nr == 4) store each
 * group of four inputs' weights row after row (16 bytes), then the rows' in % 4 last bytes,
 * row after row; a lone row (nr == 1) is stored as is. DSP: one input word -> (x0, x2), (x1, x3)
 * halfword pairs with -zp added by SXTAB16, reused by the four rows; per row one word,
 * SXTB16 / SXTB16 ROR 8, two SMLAD. */
K_INLINE void dense_block(const int8_t *x, const int8_t *w, int in, int zp, uint32_t off2,
                          int32_t a[4], int nr, int dsp)
{
    const int in4 = in & ~3;
    const int8_t *xend = x + in4;
    int32_t a0 = a[0], a1 = a[1], a2 = a[2], a3 = a[3];
    int i;
#if K_DSP_NATIVE
    /* Four rows on the core: eight inputs per iteration in assembly, each four of them one LDR
     * and two SXTAB16 for the input, two LDRD for the four rows' weight words, eight SXTB16,
     * eight SMLAD: 21 instructions per 16 MACs. LDRD needs the block word-aligned (a 4-aligned
     * array and in % 4 == 0); otherwise the C loop runs. */
    if (dsp && nr == 4 && !((uintptr_t)w & 3u) && in4 >= 8) {
        const int8_t *x8 = x + (in4 & ~7);
        uint32_t xv, x13, wa, wb, t;
#define K_D4_STEP                                                                              \
    "ldr %[xv], [%[x]], #4\n\t"                                                                 \
    "sxtab16 %[x13], %[off], %[xv], ror #8\n\t"                                                 \
    "sxtab16 %[xv], %[off], %[xv]\n\t"                                                          \
    "ldrd %[wa], %[wb], [%[w]], #8\n\t"                                                         \
    "sxtb16 %[t], %[wa]\n\t"                                                                   \
    "smlad %[a0], %[t], %[xv], %[a0]\n\t"                                                      \
    "sxtb16 %[t], %[wa], ror #8\n\t"                                                           \
    "smlad %[a0], %[t], %[x13], %[a0]\n\t"                                                     \
    "sxtb16 %[t], %[wb]\n\t"                                                                   \
    "smlad %[a1], %[t], %[xv], %[a1]\n\t"                                                      \
    "sxtb16 %[t], %[wb], ror #8\n\t"                                                           \
    "smlad %[a1], %[t], %[x13], %[a1]\n\t"                                                     \
    "ldrd %[wa], %[wb], [%[w]], #8\n\t"                                                         \
    "sxtb16 %[t], %[wa]\n\t"                                                                   \
    "smlad %[a2], %[t], %[xv], %[a2]\n\t"                                                      \
    "sxtb16 %[t], %[wa], ror #8\n\t"                                                           \
    "smlad %[a2], %[t], %[x13], %[a2]\n\t"                                                     \
    "sxtb16 %[t], %[wb]\n\t"                                                                   \
    "smlad %[a3], %[t], %[xv], %[a3]\n\t"                                                      \
    "sxtb16 %[t], %[wb], ror #8\n\t"                                                           \
    "smlad %[a3], %[t], %[x13], %[a3]\n\t"
        __asm__ volatile("1:\n\t" K_D4_STEP K_D4_STEP "cmp %[x], %[xe]\n\t"
                         "bne 1b\n\t"
                         : [a0] "+r"(a0), [a1] "+r"(a1), [a2] "+r"(a2), [a3] "+r"(a3),
                           [x] "+r"(x), [w] "+r"(w), [xv] "=&r"(xv), [x13] "=&r"(x13),
                           [wa] "=&r"(wa), [wb] "=&r"(wb), [t] "=&r"(t)
                         : [xe] "r"(x8), [off] "r"(off2)
                         : "cc", "memory");
#undef K_D4_STEP
    }
#endif
    for (; x != xend; x += 4, w += 4 * nr) {
        if (dsp) {
            const uint32_t xv = K_LD4(x);
            const uint32_t x02 = K_SXTAB16(off2, xv), x13 = K_SXTAB16_ROR8(off2, xv);
            uint32_t v = K_LD4(w);
            a0 = K_SMLAD(K_SXTB16(v), x02, a0);
            a0 = K_SMLAD(K_SXTB16_ROR8(v), x13, a0);
            if (nr == 4) {
                v = K_LD4(w + 4);
                a1 = K_SMLAD(K_SXTB16(v), x02, a1);
                a1 = K_SMLAD(K_SXTB16_ROR8(v), x13, a1);
                v = K_LD4(w + 8);
                a2 = K_SMLAD(K_SXTB16(v), x02, a2);
                a2 = K_SMLAD(K_SXTB16_ROR8(v), x13, a2);
                v = K_LD4(w + 12);
                a3 = K_SMLAD(K_SXTB16(v), x02, a3);
                a3 = K_SMLAD(K_SXTB16_ROR8(v), x13, a3);
            }
        } else {
            const int32_t x0 = x[0] - zp, x1 = x[1] - zp, x2 = x[2] - zp, x3 = x[3] - zp;
            a0 += w[0] * x0 + w[1] * x1 + w[2] * x2 + w[3] * x3;
            if (nr == 4) {
                a1 += w[4] * x0 + w[5] * x1 + w[6] * x2 + w[7] * x3;
                a2 += w[8] * x0 + w[9] * x1 + w[10] * x2 + w[11] * x3;
                a3 += w[12] * x0 + w[13] * x1 + w[14] * x2 + w[15] * x3;
            }
        }
    }
    for (i = 0; i < in - in4; i++) {
        const int32_t xi = x[i] - zp;
        a0 += w[i] * xi;
        if (nr == 4) {
            a1 += w[(in - in4) + i] * xi;
            a2 += w[2 * (in - in4) + i] * xi;
            a3 += w[3 * (in - in4) + i] * xi;
        }
    }
    a[0] = a0;
    a[1] = a1;
    a[2] = a2;
    a[3] = a3;
}

K_INLINE void dense_engine(const k_dense_params *p, const k_q_params *q, const int8_t *x,
                           const int8_t *w, const int32_t *b, int8_t *y, int dsp)
{
    const int in = p->in, out = p->out, zp = q->in_zp;
    const int ozp = q->out_zp, lo = q->act_min, hi = q->act_max;
    const uint32_t off2 = ((uint32_t)(-zp) & 0xFFFFu) * 0x10001u;
    int o, j;
    for (o = 0; o < out;) {
        const int nr = out - o >= 4 ? 4 : 1;
        int32_t a[4] = {0, 0, 0, 0};
        for (j = 0; j < nr; j++) a[j] = b ? b[o + j] : 0;
        if (nr == 4) dense_block(x, w + (size_t)o * in, in, zp, off2, a, 4, dsp);
        else dense_block(x, w + (size_t)o * in, in, zp, off2, a, 1, dsp);
        for (j = 0; j < nr; j++) {
            const k_rq r = rq_channel(q, o + j);
            y[o + j] = rq_apply(a[j], &r, ozp, lo, hi);
        }
        o += nr;
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
