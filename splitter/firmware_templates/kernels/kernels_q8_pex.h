/*
 * splitter int8 kernels of the PEX partial execution channel loops (splitter/codegen/pex.py),
 * tuned with the Armv7E-M DSP extension (the _dsp variants: Cortex-M4, M7, M33; the portable
 * emulation of k_dsp_emu.h on a host). Each computes the bytes of its generic counterpart in
 * kernels_q8.c (k_q_pex_pointwise, k_q_dw_plane, k_q_pex_accumulate, k_q_pex_requant), which
 * the Cortex-M0+ keeps (tests/test_kernels_q8_pex.py checks both against each other).
 *
 * Zero points: a 1x1 generating conv and a depthwise conv's interior pixels (every tap inside
 * the input) fold the input zero point into the bias, b - in_zp * sum(w) (TFLite's
 * sum w * (x - in_zp) rearranged: same integer sum), so the MACs read raw int8 codes.
 */
#ifndef SPLITTER_KERNELS_Q8_PEX_H
#define SPLITTER_KERNELS_Q8_PEX_H

#include <stdint.h>

#include "kernels.h"
#include "kernels_q8.h"

/* Output channel c of a 1x1, stride-1, unpadded conv (k_q_pex_pointwise): y[i] =
 * requant(b + sum_k w[k] * (x[i * C + k] - in_zp)) for the HW pixels; four pixels per pass
 * over the C weights (SXTB16 + SMLAD: two MACs per instruction), then one pixel at a time. */
void k_q_pex_pointwise_dsp(const k_q_params *q, const int8_t *restrict x, int C, int HW,
                           const int8_t *restrict w, const int32_t *b, int8_t *restrict y);

/* Input channel c's contribution to a pointwise conv's int32 accumulators (HW x O, NHWC, at any
 * byte offset): acc[i, o] += w[o] * (x[i] - in_zp), w the O contiguous weights of input channel
 * c (the generator stores the weights transposed, (C, O)). Word-aligned accumulators: four
 * outputs per LDM / STM (asm on the core), four weights per word; else as k_q_pex_accumulate. */
void k_q_pex_accumulate_dsp(const int8_t *restrict x, const int8_t *restrict w, int in_zp, int O,
                            int HW, void *acc);

/* G input channels' contribution (k_q_pex_accumulate_g, same bytes): per four input channels
 * and block of up to 32 outputs the weights unpacked once into SXTB16 pairs on the stack, then
 * per pixel its four codes' pairs and, per four outputs, one LDM of the accumulators, eight
 * SMLAD and one STM (asm on the core); G % 4 channels and O % 4 outputs as
 * k_q_pex_accumulate_g. Word-aligned accumulators (else k_q_pex_accumulate_g). */
void k_q_pex_accumulate_g_dsp(const int8_t *restrict x, int G, const int8_t *restrict w,
                              int wstride, int O, int HW, void *acc);

/* The accumulators requantised in place into the int8 output (k_q_pex_requant, same bytes):
 * each channel's multiplier and shift split once per output, no call per value. */
void k_q_pex_requant_dsp(const k_q_params *q, const void *acc, int O, int HW, int8_t *y);

/* One channel of a depthwise conv (k_q_dw_plane: input / output channel strides xs, ys).
 * 3x3 kernels: interior pixels with the nine weights in registers (stride 1 and xs == 1: two
 * pixels per pass, SXTB16 pairs of input bytes and SMLAD), the border pixels as k_q_dw_plane;
 * a padded plane of at most 400 bytes (18 x 18 with a pad of 1) is first copied to the stack
 * with the input zero point around it, where every pixel is interior; other kernel sizes are
 * k_q_dw_plane. */
void k_q_dw_plane_dsp(const k_window_params *p, const k_q_params *q, const int8_t *x, int xs,
                      const int8_t *restrict w, const int32_t *b, int8_t *y, int ys);

#endif /* SPLITTER_KERNELS_Q8_PEX_H */
