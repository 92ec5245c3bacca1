/*
 * int8 requantisation arithmetic of the tuned kernels (kernels_q8_opt.c) and the PEX channel
 * loops (kernels_q8_pex.c), written once: kernels_q8.c's k_q_mul (ties away from zero) and
 * k_q_mul_up (ties up, LiteRT's GEMM rounding) of M = m * 2^(s - 31), split per channel into a
 * left shift (s > 0) or a rounding right shift (s <= 0), in the three exact forms the kernels
 * pick from. Each result is before the output zero point unless said. Header-only (K_INLINE).
 */
#ifndef SPLITTER_K_RQ_H
#define SPLITTER_K_RQ_H

#include <stdint.h>

#include "k_dsp.h"    /* K_SMMULR */
#include "k_window.h" /* K_INLINE */

/* Channel k of q split into the fields of the record r (any struct with them): m, the shifts
 * left and right, the right shift's remainder mask and tie threshold thr, and away (1: ties away
 * from zero, k_q_mul; 0: ties up, k_q_mul_up). K_RQ_HALF(r) then sets the FAST form's rounding
 * constant half = 2^(right - 1) (0 when right == 0). */
#define K_RQ_SPLIT(r, q, k)                                                                    \
    do {                                                                                       \
        const int s_ = (int)(q)->shift[k];                                                     \
        (r).m = (q)->mult[k];                                                                  \
        (r).left = s_ > 0 ? s_ : 0;                                                            \
        (r).right = s_ > 0 ? 0 : -s_;                                                          \
        (r).mask = (int32_t)((1u << (r).right) - 1u);                                          \
        (r).thr = (r).mask >> 1;                                                               \
        (r).away = (q)->round_up ? 0 : 1;                                                      \
    } while (0)
#define K_RQ_HALF(r) ((r).half = (r).right > 0 ? (int32_t)(1u << ((r).right - 1)) : 0)

/* K_RQ_FUNCTIONS(T, ANY, FAST) defines, for a record type T split by K_RQ_SPLIT, the two
 * requantisations of one sum acc before the zero point (the record read through its pointer
 * inside them, as the kernels' loops keep it):
 *
 * ANY(acc, r, away), any channel: the high multiply round((acc << left) * m / 2^31) is
 * gemmlowp's SaturatingRoundingDoublingHighMul (which rounds ties up, like ruy's); it cannot
 * saturate since m >= 0. The right shift rounds as RoundingDivideByPOT: +1 when the remainder
 * exceeds mask / 2 (+ 1 for a negative value when `away`, ties away from zero); no sum can
 * overflow.
 *
 * FAST(acc, r): ANY of a channel without left shift, with a right shift and ties away from zero
 * (what TFLite's depthwise does), for a sum with |acc| < 2^30 (k_rq_fast_bound): the doubling
 * high multiply is then SMMULR(2 acc, m) = (2 acc m + 2^31) >> 32, and the rounding shift
 * (h + 2^(right - 1) - [h < 0]) >> right cannot overflow since |h| < 2^30. */
#define K_RQ_FUNCTIONS(T, ANY, FAST)                                                           \
    K_INLINE int32_t ANY(int32_t acc, const T *r, int32_t away)                                \
    {                                                                                          \
        const int32_t x = (int32_t)((uint32_t)acc << r->left);                                 \
        const int32_t h = (int32_t)(((int64_t)x * r->m + ((int64_t)1 << 30)) >> 31);          \
        const int32_t thr = r->thr + (away & (int32_t)((uint32_t)h >> 31));                    \
        return (h >> r->right) + ((h & r->mask) > thr ? 1 : 0);                                \
    }                                                                                          \
    K_INLINE int32_t FAST(int32_t acc, const T *r)                                             \
    {                                                                                          \
        const int32_t h = K_SMMULR((int32_t)((uint32_t)acc << 1), r->m);                       \
        return (h + r->half - (int32_t)((uint32_t)h >> 31)) >> r->right;                       \
    }

/* 1 when every sum of bias b and T taps of int8 weights (|w| <= 128) times x - in_zp
 * (|x - in_zp| <= 255) is under 2^30 in magnitude, as FAST of K_RQ_FUNCTIONS needs. */
K_INLINE int k_rq_fast_bound(int32_t b, int T)
{
    const int64_t bound = (b < 0 ? -(int64_t)b : (int64_t)b) + (int64_t)T * 128 * 255;
    return bound < ((int64_t)1 << 30);
}

/* LiteRT's GEMM requantisation (k_q_mul_up, ties up in both steps) plus the zero point, for a
 * channel with a right shift r in [2, 22] and no left shift, in one 64-bit multiply-add:
 * k_q_mul_up(acc) + zp = floor((floor((acc m + 2^30) / 2^31) + 2^(r-1)) / 2^r) + zp
 *                      = floor((acc m + 2^30 + (2 zp + 1) 2^(30+r)) / 2^(31+r))
 * (floor((floor(a / N) + c) / M) = floor((a + c N) / (N M)) for integer c), and with
 * h = (2 zp + 1) 2^(r-2) the 64-bit constant is h 2^32 + 2^30, so the value is
 * ((acc m + h 2^32 + 2^30) >> 32) >> (r - 1): SMLAL and one shift (rs = r - 1). |acc m| < 2^62
 * and |h| < 2^29 (r <= 22), so nothing overflows and k_q_mul_up's saturation never applies
 * (m >= 0). Zero point included. */
K_INLINE int32_t k_rq_up(int32_t acc, int32_t m, int32_t h, int rs)
{
    const int64_t v = (int64_t)acc * m + (int64_t)(((uint64_t)(uint32_t)h << 32) | (1u << 30));
    return (int32_t)(v >> 32) >> rs;
}

#endif
