/*
 * splitter int8 kernels (C99, NHWC, batch 1): TFLite's full-integer quantised models.
 *
 * Real values are scale * (q - zero_point). Every kernel follows TFLite's reference integer
 * kernels (tensorflow/lite/kernels/internal/reference/integer_ops/ and the builtin kernels
 * LiteRT runs): int32 accumulators, and a real rescale factor M given as a fixed-point
 * multiplier m (Q0.31, in [2^30, 2^31)) and a power-of-two exponent s with M = m * 2^(s - 31),
 * applied by k_q_mul (tflite::MultiplyByQuantizedMultiplier: saturating rounding doubling high
 * multiply, then rounding divide by 2^-s). The generator computes m and s as
 * tflite::QuantizeMultiplier does (codegen/ops/quant.py, quantize_multiplier).
 * Conv weights are int8 OHWI (O, kh, kw, C/groups), dense weights (out, in), biases int32;
 * mult/shift arrays hold one entry per output channel (per-channel) or one (per-tensor:
 * nq == 1). Outputs are clamped to [act_min, act_max] (the fused activation's range).
 * Float tensors (QUANTIZE input, DEQUANTIZE output) may sit at any byte offset of the arena,
 * so those kernels read/write them with memcpy.
 * No malloc, no libc beyond memcpy (k_libc.c); only the tuned conv kernels take a scratch
 * block of the arena (kernels_q8_opt.h).
 */
#ifndef SPLITTER_KERNELS_Q8_H
#define SPLITTER_KERNELS_Q8_H

#include <stdint.h>

#include "kernels.h" /* k_window_params, k_dense_params, k_reduce_params, k_pad_params */

/* Requantisation of one int8 layer, a static const record in flash beside its k_window_params /
 * k_dense_params (CMSIS-NN's cmsis_nn_per_channel_quant_params with the zero points and
 * activation clamp of cmsis_nn_conv_params): input and output zero points, the clamp
 * [act_min, act_max] of the fused activation, nq multipliers mult / shift (1 per tensor or one
 * per output channel; 0 for pools), round_up for LiteRT's GEMM rounding (k_q_mul_up). */
typedef struct {
    int in_zp, out_zp;
    int act_min, act_max;
    int nq, round_up;
    const int32_t *mult, *shift;
} k_q_params;

/* Per-tensor requantisation of an element-wise or reduction int8 op, a static const record in
 * flash: n elements (element-wise ops), the zero points of the operands a, b and the output,
 * the rescales (a_m, a_s), (b_m, b_s) of the operands (ADD only) and (m, s) of the result, and
 * the clamp [act_min, act_max] of the fused activation (int8 range when there is none). */
typedef struct {
    int n;
    int a_zp, b_zp, out_zp;
    int32_t a_m, b_m, m;
    int a_s, b_s, s;
    int act_min, act_max;
} k_q_requant_params;

/* An int8 op computed in float, LiteRT's lookup-table rule (TANH, LOGISTIC, SOFTMAX):
 * v = in_scale * (q - in_zp), then the function, then the output rescale. n elements
 * (k_q_lut_act) or the row length (k_q_softmax, rows rows); fn K_ACT_TANH or K_ACT_SIGMOID
 * (k_q_lut_act); out_scale (k_q_softmax) and its float32 inverse out_inv_scale (k_q_lut_act). */
typedef struct {
    int n, rows, fn;
    float in_scale;
    int in_zp;
    float out_scale, out_inv_scale;
    int out_zp;
} k_q_float_params;

/* round(x * m * 2^(s - 31)) with TFLite's double rounding (MultiplyByQuantizedMultiplier). */
int32_t k_q_mul(int32_t x, int32_t m, int s);

/* k_q_mul with LiteRT's GEMM rounding (ties upward in both steps, see kernels_q8.c). */
int32_t k_q_mul_up(int32_t x, int32_t m, int s);

/* Grouped / depthwise conv (as k_conv2d_nhwc): acc = b[o] + sum w * (x - in_zp);
 * y = clamp(k_q_mul(acc, mult[o], shift[o]) + out_zp, act_min, act_max), k_q_mul_up when
 * round_up (the generator sets it for groups == 1, which LiteRT runs as a GEMM). */
void k_q_conv2d(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict y);

/* Fully connected: y[o] = requant(b[o] + sum_i w[o, i] * (x[i] - in_zp)), round_up as conv. */
void k_q_dense(const k_dense_params *p, const k_q_params *q, const int8_t *restrict x,
               const int8_t *restrict w, const int32_t *restrict b, int8_t *restrict y);

/* ADD (reference_integer_ops::Add): both inputs shifted left by 20, rescaled by (a_m, a_s) and
 * (b_m, b_s) to a common scale, summed, rescaled by (m, s). Same-shape operands. */
void k_q_add(const k_q_requant_params *q, const int8_t *a, const int8_t *b, int8_t *y);

/* MUL (reference_integer_ops::Mul): y = requant((a - a_zp) * (b - b_zp)). Same shapes. */
void k_q_mul_ew(const k_q_requant_params *q, const int8_t *a, const int8_t *b, int8_t *y);

/* y = clamp(k_q_mul(x - a_zp, m, s) + out_zp, act_min, act_max): QUANTIZE int8 -> int8
 * (Requantize), RELU / RELU6 (ReluX). x may equal y. */
void k_q_requant(const k_q_requant_params *q, const int8_t *x, int8_t *y);

/* Max pool over in-bounds taps, clamped to [act_min, act_max]. */
void k_q_maxpool(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                 int8_t *restrict y);

/* Average pool (same scale in and out): sum over in-bounds taps, divided by their count
 * rounding half away from zero, clamped. */
void k_q_avgpool(const k_window_params *p, const k_q_params *q, const int8_t *restrict x,
                 int8_t *restrict y);

/* MEAN over the middle axis of the (outer, red, inner) view of r (QuantizedMeanOrSum):
 * y = clamp(k_q_mul(sum - a_zp * red, m, s) + out_zp, act_min, act_max) with m, s already
 * including 1/red. */
void k_q_mean(const k_reduce_params *r, const k_q_requant_params *q, const int8_t *restrict x,
              int8_t *restrict y);

/* Element-wise function through TFLite's lookup-table rule: v = in_scale * (q - in_zp),
 * y = clamp(round(f(v) * out_inv_scale) + out_zp); fn K_ACT_TANH or K_ACT_SIGMOID. */
void k_q_lut_act(const k_q_float_params *p, const int8_t *x, int8_t *y);

/* Softmax over the last axis (rows of n) of int8 codes, TFLite's float-table kernel, in_scale
 * already multiplied by beta: e_j = exp(-in_scale * (max - x_j)),
 * y_j = round(e_j / (sum e * out_scale)) + out_zp. */
void k_q_softmax(const k_q_float_params *p, const int8_t *restrict x, int8_t *restrict y);

/* Constant pad of a rank-4 int8 tensor (see k_pad_params), pad value p->qvalue. */
void k_q_pad(const k_pad_params *p, const int8_t *restrict x, int8_t *restrict y);

/* Slice part (bytes), see k_slice_part. */
void k_q_slice_part(const int8_t *restrict x, int outer, int xtot, int xoff, int8_t *restrict y,
                    int yn);

/* Concatenation part (bytes), see k_concat_part. */
void k_q_concat_part(const int8_t *restrict x, int outer, int xn, int8_t *restrict y, int ytot,
                     int yoff);

/* QUANTIZE float -> int8: y = clamp(round((double)x / scale) + zp). x is float32 bytes. */
void k_q_quantize(const void *x, int8_t *y, int n, double scale, int zp);

/* DEQUANTIZE int8 -> float: y = scale * (q - zp). y is float32 bytes. */
void k_q_dequantize(const int8_t *x, void *y, int n, float scale, int zp);

/* Copy n bytes, regions may overlap (a reshape that ping-pong placement moved). */
void k_q_copy(const int8_t *x, int8_t *y, int n);

/* Copy n bytes to y at or below x (a PEX row loop's window slide), four words per step. */
void k_q_slide(const int8_t *x, int8_t *y, int n);

/* LRN (k_lrn, kernels.h) on int8: dequantise with in_scale, in_zp, compute in float, round half
 * away from zero to out_zp + y * out_inv_scale, clamp. TFLite has no int8 LRN kernel; the
 * generator validates this one against the float formula within one quantisation step. */
void k_q_lrn(const k_lrn_params *p, const int8_t *restrict x, int8_t *restrict y);

/* PEX partial execution (codegen/pex.py) of a pointwise conv that accumulates one input channel
 * at a time: acc holds HW x O int32 accumulators (NHWC order, any byte alignment: read and
 * written with memcpy). k_q_pex_fill sets acc[i, o] = b[o] (0 when b is NULL);
 * k_q_pex_accumulate adds input plane x (HW int8 codes) times column w[o * wstride] of the
 * (O, C) weights: acc[i, o] += w[o * wstride] * (x[i] - in_zp); k_q_pex_requant then writes
 * y[i, o] = clamp(requant(acc[i, o]) + out_zp) exactly as k_q_conv2d rounds (round_up, per
 * channel mult / shift when nq > 1). y is either acc's first byte (written forward) or its last
 * HW * O bytes (written backward), so the int8 result replaces the accumulators in place. */
/* One channel of an int8 depthwise conv (PEX loops): the window of p (C = O = 1), input pixel
 * (iy, ix) at x[(iy * W + ix) * xs], output pixel (oy, ox) at y[(oy * OW + ox) * ys] (stride 1 for
 * a one-channel plane, C for channel c of a full NHWC tensor), taps w[ky * kw + kx], bias *b
 * (b NULL: 0), requantised by q->mult[0], q->shift[0] as k_q_conv2d does. */
void k_q_dw_plane(const k_window_params *p, const k_q_params *q, const int8_t *x, int xs,
                  const int8_t *restrict w, const int32_t *b, int8_t *y, int ys);
/* Output channel c of an int8 1x1, stride-1, unpadded conv (PEX loops): y[i] = clamp(requant(
 * *b + sum_k w[k] * (x[i * C + k] - in_zp)) + out_zp) for HW pixels of C channels, w the C
 * weights of channel c, b its bias (NULL: 0), q->mult[0], q->shift[0] its rescale, as
 * k_q_conv2d computes it (sum_k w[k] * x[..] - in_zp * sum_k w[k]: the same integer). */
void k_q_pex_pointwise(const k_q_params *q, const int8_t *restrict x, int C, int HW,
                       const int8_t *restrict w, const int32_t *b, int8_t *restrict y);
void k_q_pex_fill(void *acc, const int32_t *b, int O, int HW);
void k_q_pex_accumulate(const int8_t *restrict x, const int8_t *restrict w, int wstride,
                        int in_zp, int O, int HW, void *acc);
void k_q_pex_requant(const k_q_params *q, const void *acc, int O, int HW, int8_t *y);
/* A loop of G channels per iteration (splitter.cost.pex_chain.loop_steps): input channels
 * c .. c + G - 1 added at once, acc[i, o] += sum_g w[o * wstride + g] * x[i * G + g] for the
 * HW x G NHWC slab x and the (O, C) weights from column c; raw codes: the generator folds
 * -in_zp * sum_c w[o, c] into the bias k_q_pex_fill sets (the same integer sum). */
void k_q_pex_accumulate_g(const int8_t *restrict x, int G, const int8_t *restrict w, int wstride,
                          int O, int HW, void *acc);
/* The n pixels of an n x G NHWC slab x into channels 0 .. G - 1 of y (pixel stride C): a loop's
 * last depthwise, run on G channels into the loop's scratch, writes its full output. */
void k_q_pex_put(const int8_t *restrict x, int G, int8_t *restrict y, int C, int n);

/* The tuned variants (k_q_conv_dsp, k_q_depthwise_plain, ...) the generator calls for conv,
 * depthwise and dense layers; the generic loops above stay the reference they are tested
 * against and run grouped convs. */
#include "kernels_q8_opt.h"
/* The tuned kernels of the PEX channel loops (k_q_pex_pointwise_dsp, ...). */
#include "kernels_q8_pex.h"

#endif /* SPLITTER_KERNELS_Q8_H */
