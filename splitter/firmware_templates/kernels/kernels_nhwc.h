/*
 * splitter float32 NHWC kernels (C99): the layout of TFLite models.
 *
 * A feature map of H rows, W columns and C channels is x[(y * W + x) * C + c] (batch 1).
 * Conv weights, by the record's groups (codegen/ops/conv.py, nhwc_weights; same byte count as the
 * canonical (O, C/groups, kh, kw) array, no padding):
 *   groups == 1: TFLite's OHWI order (O, kh, kw, C) packed 4 rows at a time as kernels.h says
 *     (block b stores element k = (ky * kw + kx) * C + c of its 4 rows interleaved, the O % 4
 *     last rows follow row-major);
 *   groups == C (depthwise, O = C * depth_multiplier): (kh, kw, O), TFLite's own depthwise order;
 *   otherwise: OHWI (O, kh, kw, C / groups).
 * Pads: top, left (the kernels never read outside the input; bottom/right come from OH/OW).
 * Same rules as kernels.h: no malloc, no libc, no scratch; the element-wise and reshape-like
 * kernels of kernels.h (k_act, k_binary, k_concat_part, k_mean, k_softmax, k_pad, ...) are
 * layout-free and serve NHWC too. The window walk (output pixels, in-bounds taps) is shared with
 * the int8 kernels in k_window.h.
 */
#ifndef SPLITTER_KERNELS_NHWC_H
#define SPLITTER_KERNELS_NHWC_H

#include "kernels.h" /* k_window_params */

/* y[oy, ox, o] = act(b[o] + sum_{ky, kx, ci} x[iy, ix, g * Cg + ci] * w[o, ky, kx, ci]) with
 * g = o / (O / groups), Cg = C / groups, iy = oy * sh - pt + ky * dh (taps outside skipped),
 * w stored as described above. groups == 1 runs 4 output pixels x 4 output channels per inner
 * loop, a depthwise convolution 4 pixels x 4 channels per tap (the NCHW kernels' blocking). */
void k_conv2d_nhwc(const k_window_params *p, const float *restrict x, const float *restrict w,
                   const float *restrict b, float *restrict y);

/* Max pool over the window's in-bounds taps. */
void k_maxpool_nhwc(const k_window_params *p, const float *restrict x, float *restrict y);

/* Average pool; count_include_pad counts the pad cells inside [-pt, H + pb) x [-pl, W + pr),
 * else only the in-bounds taps (TFLite SAME padding). */
void k_avgpool_nhwc(const k_window_params *p, const float *restrict x, float *restrict y);

#endif /* SPLITTER_KERNELS_NHWC_H */
