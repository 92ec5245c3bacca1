"""conv2d (and depthwise, ``groups == C``): ``k_conv2d`` / ``k_conv2d_nhwc`` / ``k_q_conv2d``."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from codegen.ops.base import (
    EmitContext,
    OpEmitter,
    act_args,
    act_ok,
    all_int8,
    image_batch1,
    ints,
    nhwc_batch1,
    q8_act_ok,
)
from codegen.ops.quant import act_range, bias, gemm_rounding, qp, requant_arrays
from splitter.ir import Op, TensorSpec


def pack4(w2d: np.ndarray) -> np.ndarray:
    """Rows in blocks of 4 interleaved: block b holds ``w[4b + r, k]`` at ``(b*K + k)*4 + r``.

    The ``O % 4`` last rows stay row-major; same number of elements (no padding). This is the
    layout ``conv_pointwise``/``conv_blocked``/``k_dense`` in kernels.c read.
    """
    o, k = w2d.shape
    nb = o // 4
    blocks = w2d[: nb * 4].reshape(nb, 4, k).transpose(0, 2, 1).ravel()
    return np.concatenate([blocks, w2d[nb * 4 :].ravel()]).astype(np.float32)


def ohwi(w: np.ndarray) -> np.ndarray:
    """Canonical conv weights ``(O, C/groups, kh, kw)`` as TFLite's ``(O, kh, kw, C/groups)``.

    ``ohwi(w)[o, ky, kx, c] = w[o, c, ky, kx]``: the order ``k_conv2d_nhwc`` reads, so the
    innermost loop runs over contiguous input channels; same element count (FLASH unchanged).
    """
    return np.ascontiguousarray(np.asarray(w).transpose(0, 2, 3, 1))


def conv_geometry(op: Op) -> str:
    """``kh, kw, sh, sw, pt, pl, dh, dw, groups`` arguments of a convolution."""
    kh, kw = np.asarray(op.weights["W"]).shape[2:]
    sh, sw = op.attr("strides", (1, 1))
    pads = op.attr("pads", (0, 0, 0, 0))
    dh, dw = op.attr("dilations", (1, 1))
    return ints((kh, kw, sh, sw, pads[0], pads[1], dh, dw, int(op.attr("groups", 1))))


def weights_4d(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Constant 4-D weights ``W``."""
    if "W" not in op.weights or np.asarray(op.weights["W"]).ndim != 4:
        return "conv2d needs constant 4-D weights W"
    return None


def q8_weights(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """int8 ``W`` with zero weight zero points, one scale per tensor or output channel, int32
    ``B``: the TFLite full-integer convention conv and dense kernels assume."""
    w = op.weights.get("W")
    if w is None or np.asarray(w).dtype != np.int8:
        return "int8 op needs int8 weights W"
    scales = op.attr("w_scale") or ()
    if len(scales) not in (1, np.asarray(w).shape[0]):
        return f"{len(scales)} weight scales for {np.asarray(w).shape[0]} output channels"
    if any(int(z) != 0 for z in op.attr("w_zero_point") or ()):
        return "non-zero weight zero points"
    b = op.weights.get("B")
    if b is not None and np.asarray(b).dtype != np.int32:
        return f"bias is {np.asarray(b).dtype} (int32 only)"
    if set(op.weights) - {"W", "B"}:
        return f"unexpected constants {sorted(set(op.weights) - {'W', 'B'})}"
    return None


class Conv2D(OpEmitter):
    """``y = act(conv(x, W) + B)``; NCHW weights packed by :func:`pack4` (groups 1), NHWC and
    int8 weights as :func:`ohwi`; int8 requantises per output channel."""

    kind = "conv2d"
    float_checks = (weights_4d, image_batch1, act_ok)
    int8_checks = (all_int8, q8_weights, q8_act_ok, nhwc_batch1)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        if ctx.layout == "NHWC":
            return self._emit_nhwc(op, ctx)
        x, y = op.inputs[0], op.outputs[0]
        _, c, h, w = ctx.shape(x)
        _, o, oh, ow = ctx.shape(y)
        wt = np.asarray(op.weights["W"], dtype=np.float32)
        kh, kw = wt.shape[2], wt.shape[3]
        groups = int(op.attr("groups", 1))
        packed = pack4(wt.reshape(o, -1)) if groups == 1 else wt
        wn = ctx.const(op, "W", packed)
        bn = ctx.const(op, "B") if "B" in op.weights else "0"
        sh, sw = op.attr("strides", (1, 1))
        pads = op.attr("pads", (0, 0, 0, 0))
        dh, dw = op.attr("dilations", (1, 1))
        return [
            f"k_conv2d({ctx.ptr(x)}, {c}, {h}, {w}, {wn}, {bn}, {ctx.ptr(y)}, {o}, {oh}, {ow}, "
            f"{kh}, {kw}, {sh}, {sw}, {pads[0]}, {pads[1]}, {dh}, {dw}, {groups}, "
            f"{act_args(op)});"
        ]

    @staticmethod
    def _emit_nhwc(op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        _, h, w, c = ctx.shape(x)
        _, oh, ow, o = ctx.shape(y)
        wn = ctx.const(op, "W", ohwi(np.asarray(op.weights["W"], dtype=np.float32)))
        bn = ctx.const(op, "B") if "B" in op.weights else "0"
        return [
            f"k_conv2d_nhwc({ctx.ptr(x)}, {h}, {w}, {c}, {wn}, {bn}, {ctx.ptr(y)}, {oh}, {ow}, "
            f"{o}, {conv_geometry(op)}, {act_args(op)});"
        ]

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        _, h, w, c = ctx.shape(x)
        _, oh, ow, o = ctx.shape(y)
        _, in_zp = qp(ctx.tensors[x])
        _, out_zp = qp(ctx.tensors[y])
        wn = ctx.weights.add(f"{op.name}_W", ohwi(np.asarray(op.weights["W"])), np.int8)
        bn = bias(op, ctx)
        mult, shift, nq = requant_arrays(op, ctx)
        lo, hi = act_range(op, ctx.tensors[y])
        return [
            f"k_q_conv2d({ctx.p8(x)}, {h}, {w}, {c}, {in_zp}, {wn}, {bn}, {ctx.p8(y)}, {oh}, "
            f"{ow}, {o}, {conv_geometry(op)}, {mult}, {shift}, {nq}, {gemm_rounding(op)}, "
            f"{out_zp}, {lo}, {hi});"
        ]
