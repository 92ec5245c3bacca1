/*
 * splitter float32 kernel library (C99).
 *
 * Written for this project because no MCU inference runtime (TensorFlow Lite Micro, CMSIS-NN,
 * onnx2c, X-CUBE-AI) can be installed from the registries the project can reach. Every kernel
 * is plain C99: no malloc, no libc (k_libc.c provides memcpy/memset/memmove as weak symbols for
 * -nostdlib builds), no hidden scratch buffers, `restrict` pointers and fixed-shape inner loops
 * the compiler can unroll.
 *
 * Layout: NCHW with batch 1 (the layout of ONNX models). A feature map of C channels, H rows and
 * W columns is x[(c * H + y) * W + x]. Conv weights are (O, I/groups, kh, kw) as in ONNX; dense
 * weights are (out, in). For groups == 1 convolutions and dense layers the generator repacks the
 * weights "4 rows at a time" (see k_pack4 in codegen/model_c.py): rows are taken in blocks of 4
 * output channels, block b stores element k of its 4 rows interleaved, wp[(b*K + k)*4 + r]; the
 * O % 4 remaining rows follow unchanged (row-major). The byte count is identical to the source
 * weights (no padding).
 *
 * Pads are ONNX order for 2-D ops: top, left, bottom, right.
 * Activations (k_act codes below) are applied in place after the op's main loop.
 * Accuracy: k_expf has max relative error ~2e-7 on [-87, 88] (Cody-Waite range reduction + degree
 * 7 Taylor polynomial); k_tanhf/k_sigmoidf are built on it (absolute error <= ~3e-7).
 */
#ifndef SPLITTER_KERNELS_H
#define SPLITTER_KERNELS_H

#include <stddef.h>

enum {
    K_ACT_NONE = 0,
    K_ACT_RELU = 1,
    K_ACT_RELU6 = 2,
    K_ACT_CLIP = 3,        /* p0 = min, p1 = max */
    K_ACT_SIGMOID = 4,
    K_ACT_TANH = 5,
    K_ACT_HARDSWISH = 6,   /* x * clip(x/6 + 1/2, 0, 1) */
    K_ACT_LEAKY = 7,       /* p0 = alpha */
    K_ACT_HARDSIGMOID = 8  /* clip(p0 * x + p1, 0, 1), p0 = alpha, p1 = beta */
};

enum { K_ADD = 0, K_SUB = 1, K_MUL = 2, K_DIV = 3 };

float k_expf(float x);
float k_sigmoidf(float x);
float k_tanhf(float x);

/* y[i] = act(x[i]); x may equal y (element-wise, same index). */
void k_act(const float *x, float *y, int n, int act, float p0, float p1);

/* 2-D convolution, NCHW, weights packed as described above when groups == 1, else ONNX
 * (O, C/groups, kh, kw). b may be NULL. Output size (O, OH, OW) comes from the model. */
void k_conv2d(const float *restrict x, int C, int H, int W, const float *restrict w,
              const float *restrict b, float *restrict y, int O, int OH, int OW, int kh, int kw,
              int sh, int sw, int pt, int pl, int dh, int dw, int groups, int act, float p0,
              float p1);

/* y = W x + b, W packed 4 rows at a time ((out, in) source), b may be NULL. */
void k_dense(const float *restrict x, int in, const float *restrict wp, const float *restrict b,
             float *restrict y, int out, int act, float p0, float p1);

/* y (M, N) = a (M, K) @ bm (K, N), all activations. */
void k_matmul(const float *restrict a, const float *restrict bm, float *restrict y, int M, int K,
              int N, int act, float p0, float p1);

void k_maxpool(const float *restrict x, int C, int H, int W, float *restrict y, int OH, int OW,
               int kh, int kw, int sh, int sw, int pt, int pl, int act, float p0, float p1);

/* Average pool; count_include_pad counts the pad cells inside [-pt, H + pb) x [-pl, W + pr). */
void k_avgpool(const float *restrict x, int C, int H, int W, float *restrict y, int OH, int OW,
               int kh, int kw, int sh, int sw, int pt, int pl, int pb, int pr,
               int count_include_pad, int act, float p0, float p1);

/* y[o, i] = mean_r x[o, r, i] over a (outer, red, inner) view (global avgpool: inner = 1). */
void k_mean(const float *restrict x, int outer, int red, int inner, float *restrict y, int act,
            float p0, float p1);

/* Element-wise a OP b with numpy broadcasting over a rank-4 view: shape ys[4], element strides
 * as[4] and bs[4] (0 on broadcast axes). a/b may alias y only element for element. */
void k_binary(int op, const float *a, const int *as, const float *b, const int *bs, float *y,
              const int *ys, int act, float p0, float p1);

/* Concatenation part: y[o*ytot + yoff + i] = x[o*xn + i] for o < outer, i < xn. */
void k_concat_part(const float *restrict x, int outer, int xn, float *restrict y, int ytot,
                   int yoff);

/* Softmax over the middle axis of an (outer, n, inner) view. */
void k_softmax(const float *restrict x, int outer, int n, int inner, float *restrict y);

/* y[c, i] = x[c, i] * scale[c] + shift[c] for C channels of HW elements each. */
void k_batchnorm(const float *restrict x, int C, int HW, const float *restrict scale,
                 const float *restrict shift, float *restrict y);

/* Constant pad of a rank-4 tensor xs[4] into ys[4], begins[4] leading pad per axis. */
void k_pad(const float *restrict x, const int *xs, float *restrict y, const int *ys,
           const int *begins, float value);

/* Rank-4 transpose: y has shape ys[4]; xstr[d] is the element stride in x of output axis d. */
void k_transpose(const float *restrict x, float *restrict y, const int *ys, const int *xstr);

/* Copy n floats, regions may overlap (zero-copy reshape that ping-pong placement moved). */
void k_copy(const float *x, float *y, int n);

#endif /* SPLITTER_KERNELS_H */
