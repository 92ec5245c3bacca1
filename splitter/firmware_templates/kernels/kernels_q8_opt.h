/*
 * splitter int8 kernels tuned for Cortex-M (C99, NHWC, batch 1): conv (groups 1, through an
 * im2col scratch), pointwise, depthwise and fully connected, each in two variants that compute
 * the same bits:
 *
 *   _dsp   the Armv7E-M DSP extension (SXTB16 / SXTAB16 / SMLAD / SMLABB / SMLATT through
 *          k_dsp.h): Cortex-M4, M7, M33; on a host the portable emulation of k_dsp_emu.h;
 *   _plain plain C with 32-bit multiplies, for the Cortex-M0+ (no DSP, no unaligned access).
 *
 * codegen/ops/q8_variants.py picks the variant per core and names it (the C function is
 * k_q_<kernel>_<variant>, e.g. k_q_conv_dsp). Arithmetic is TFLite's (kernels_q8.h): int32
 * accumulators of w * (x - in_zp), then k_q_mul (round_up 0) or k_q_mul_up (round_up 1), + out_zp,
 * clamp; the results equal k_q_conv2d / k_q_dense bit for bit (tests/test_kernels_q8_opt.py).
 * The requantisation of an output channel (multiplier, shift split into left / right, rounding
 * mask) is computed once per channel block, outside the MAC loops.
 *
 * Weight layouts (the generator writes them; same bytes as TFLite's, only reordered):
 *   conv / pointwise: OHWI rows of K = kh * kw * C bytes, each row's groups of four bytes
 *     stored as (0, 2, 1, 3), the K % 4 last bytes in order (so SXTB16 of a group gives the
 *     pairs (w0, w1) and (w2, w3) matching the im2col column's int16 pairs);
 *   depthwise (groups == C == O): channel blocks of 4, each (kh * kw, 4) taps-major, then the
 *     C % 4 last channels (channel, kh * kw);
 *   dense: (out, in) as TFLite.
 * Scratch (conv, pointwise): k_q_conv_scratch(p) bytes of the arena, two im2col columns of
 * x - in_zp as int16 (K rounded up to even), 4-byte aligned inside the block.
 */
#ifndef SPLITTER_KERNELS_Q8_OPT_H
#define SPLITTER_KERNELS_Q8_OPT_H

#include <stdint.h>

#include "kernels.h"
#include "kernels_q8.h"

/* Bytes of scratch k_q_conv_* / k_q_pointwise_* need: 4 + 2 columns * 2 bytes * (K + K % 2),
 * or 4 + 2 * 2 * K' + 2 * O * K' when the conv re-lays its columns and weights (as int16) at
 * K' = ceil8(K) (conv_padded_k: K % 4 != 0, O K' <= 2048; splitter/codegen/ops/conv.py,
 * Conv2D.scratch_bytes, computes the same). */
int k_q_conv_scratch(const k_window_params *p);

/* Convolution with groups == 1 (any kernel, stride, padding, dilation) as an im2col GEMM:
 * two output pixels x two output channels per inner loop. */
void k_q_conv_dsp(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                  const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict s,
                  int8_t *restrict y);
void k_q_conv_plain(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                    const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict s,
                    int8_t *restrict y);

/* 1x1 convolution, stride 1, no padding: the conv GEMM with a column copy for im2col. */
void k_q_pointwise_dsp(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                       const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict s,
                       int8_t *restrict y);
void k_q_pointwise_plain(const k_window_params *p, const k_q_params *q,
                         const int8_t *restrict x, const int8_t *restrict w,
                         const int32_t *restrict b, int8_t *restrict s, int8_t *restrict y);

/* Bytes of scratch k_q_depthwise_* need: for a 3 x 3 kernel, dilation 1, stride 1,
 * C == O >= 4 and max(H, W) >= 4, 4 + 2 bytes * 3 lines * 4 channels * RW, RW = L + W + pr + 3
 * rounded up to even, L = pl rounded up to even (the padded input ring; H, pt, pb in their
 * place when H > W); else 0 (splitter/codegen/ops/conv.py, Conv2DHandler.scratch_bytes,
 * computes the same). */
int k_q_depthwise_scratch(const k_window_params *p);

/* Depthwise convolution (groups == C == O): four channels per pass; _dsp runs 3 x 3 stride-1
 * kernels through a padded int16 ring of three input lines in the scratch s (four output pixels
 * per inner step, SMLAD on weight pairs), other kernels (and _plain all, leaving s unused) over
 * the window with border checks (s may be 0 when k_q_depthwise_scratch is 0). */
void k_q_depthwise_dsp(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                       const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict s,
                       int8_t *restrict y);
void k_q_depthwise_plain(const k_window_params *p, const k_q_params *q,
                         const int8_t *restrict x, const int8_t *restrict w,
                         const int32_t *restrict b, int8_t *restrict s, int8_t *restrict y);

/* Fully connected: four output rows per pass over the input. */
void k_q_dense_dsp(const k_dense_params *p, const k_q_params *q, const int8_t *restrict x,
                   const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict y);
void k_q_dense_plain(const k_dense_params *p, const k_q_params *q, const int8_t *restrict x,
                     const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict y);

#endif /* SPLITTER_KERNELS_Q8_OPT_H */
