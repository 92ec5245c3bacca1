"""conv_transpose: the transposed 2-D convolution (ONNX ``ConvTranspose``), ``k_conv_transpose``.

The op class carries its importer (:func:`from_onnx`, ``onnx_converters``), its cost features
and its measurement grid, so adding it touched this module, ``kernels.c`` and ``kernels.h``
(CONTRIBUTING.md, "Adding an op").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import numpy as np

from splitter.codegen.ops.base import (
    EmitContext,
    OpEmitter,
    act_ok,
    act_record,
    block,
    image_batch1,
)
from splitter.codegen.ops.conv import window_record
from splitter.codegen.ops.formulas import Shape, act_macs
from splitter.codegen.ops.opdef import F32_NCHW, Kernel, OpDef, SourceUnsupported
from splitter.errors import ShapeError, quoted
from splitter.ir import Graph, Op, TensorSpec

#: the float32 NCHW kernel (kernels.c)
K_CONV_TRANSPOSE = Kernel("k_conv_transpose")


def transposed_out(size: int, k: int, stride: int, pads: int, out_pad: int, dil: int = 1) -> int:
    """Output length of a transposed convolution (ONNX ConvTranspose, ``output_shape`` unset):
    ``stride * (n - 1) + output_padding + (k - 1) * d + 1 - pad_begin - pad_end``."""
    return stride * (size - 1) + out_pad + (k - 1) * dil + 1 - pads


def _valid(n_out: int, k: int, stride: int, pad: int, dil: int, n_in: int) -> list[int]:
    """Per output position ``o``, the taps ``t`` the kernel takes: ``o + pad - t * d`` a
    multiple of ``stride`` whose quotient (the input position) lies in ``[0, n_in)``."""
    counts = []
    for o in range(n_out):
        taps = (o + pad - t * dil for t in range(k))
        counts.append(sum(1 for v in taps if v >= 0 and v % stride == 0 and v // stride < n_in))
    return counts


# ------------------------------------------------------------------------ the importer ----


def from_onnx(node: Any, ctx: Any) -> list[Op]:
    """ONNX ConvTranspose (``node``: an ``OnnxNode``, ``ctx``: its ``ImportContext``) ->
    conv_transpose with ``W`` ``(C, O, kh, kw)`` as ONNX stores it, optional bias ``B``.

    Supported: 2-D NCHW, ``group`` 1, explicit ``pads`` (or ``auto_pad`` NOTSET / VALID), any
    ``strides``, ``dilations`` and ``output_padding``; ``output_shape`` and ``SAME_*`` padding
    (whose pads follow from it) are refused with the reason."""
    x = node.inputs[0]
    if ctx.is_const(x):
        raise SourceUnsupported("data input is a constant")
    w = ctx.const(node.inputs[1])
    shape = ctx.shape(x)
    if len(shape) != 4 or w.ndim != 4:
        raise SourceUnsupported(f"only 2-D (NCHW) inputs are supported, got rank {len(shape)}")
    if int(node.attr("group", 1)) != 1:
        raise SourceUnsupported(f"group={node.attr('group')} (group 1 only)")
    if node.attr("output_shape") is not None:
        raise SourceUnsupported("output_shape (give pads and output_padding instead)")
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad not in ("NOTSET", "", "VALID"):
        raise SourceUnsupported(f"auto_pad={auto_pad} (explicit pads only)")
    if shape[1] != w.shape[0]:
        raise ShapeError(
            f"{ctx.path}: {node.label}: input {quoted(x)} has {shape[1]} channels but the "
            f"weights expect {w.shape[0]}; fix --input-shape or the model"
        )
    pads = (0, 0, 0, 0) if auto_pad == "VALID" else node.attr("pads", (0, 0, 0, 0))
    weights = {"W": np.asarray(w, dtype=w.dtype)}
    if node.input(2):
        weights["B"] = ctx.const(node.inputs[2]).reshape(-1)
    attrs = {
        "kernel": tuple(int(k) for k in node.attr("kernel_shape", w.shape[2:])),
        "strides": tuple(int(s) for s in node.attr("strides", (1, 1))),
        "pads": tuple(int(p) for p in pads),
        "dilations": tuple(int(d) for d in node.attr("dilations", (1, 1))),
        "output_padding": tuple(int(p) for p in node.attr("output_padding", (0, 0))),
        "groups": 1,
        "act": None,
    }
    out = (node.outputs[0],)
    return [Op(node.name, "conv_transpose", (x,), out, attrs, weights, (node.name,))]


# -------------------------------------------------------------------------- the checks ----


def _weights_and_groups(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Constant 4-D weights ``W`` ``(C, O, kh, kw)`` and one group."""
    if "W" not in op.weights or np.asarray(op.weights["W"]).ndim != 4:
        return "conv_transpose needs constant 4-D weights W"
    if int(op.attr("groups", 1)) != 1:
        return f"conv_transpose with groups {op.attr('groups')} (groups 1 only)"
    return None


# ---------------------------------------------------------------------------- the class ----


class ConvTranspose(OpEmitter):
    """``y = act(conv_transpose(x, W) + B)``: each input pixel scatters ``W[c]`` over the
    output (ONNX ConvTranspose); the kernel gathers instead, one output element at a time, so
    it needs no scratch: ``y[o, oy, ox] = B[o] + sum x[c, iy, ix] W[c, o, ky, kx]`` over the
    taps with ``oy + pt = iy * sh + ky * dh`` (and the same along x). Weights repacked to
    ``(O, kh, kw, C)`` (same element count) so the innermost channel loop reads them in order.

    Output ``OH = sh (H - 1) + output_padding + (kh - 1) dh + 1 - pt - pb`` (ONNX).
    MACs ``= H*W*C*O*kh*kw`` (the scatter form every input pixel makes, as fvcore's
    ``conv_flop_jit`` counts a transposed conv: ``prod(W.shape) * prod(x spatial)``)
    ``+ [bias] OH*OW*O + act``.
    """

    order = 15  # after conv2d in ``splitter ops``
    definition = OpDef(
        "conv_transpose",
        ("kernel", "strides", "pads", "dilations", "output_padding", "groups", "act"),
        onnx=("ConvTranspose",),
        kernels=frozenset({F32_NCHW}),
    )
    float_checks = (_weights_and_groups, image_batch1, act_ok)
    c_kernels = (K_CONV_TRANSPOSE,)
    op_class = "conv"
    onnx_converters = MappingProxyType({"ConvTranspose": from_onnx})

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        n, _, h, w = in_shapes[0]
        kh, kw = op.attr("kernel", op.weights["W"].shape[2:])
        sh, sw = op.attr("strides", (1, 1))
        pt, pl, pb, pr = op.attr("pads", (0, 0, 0, 0))
        dh, dw = op.attr("dilations", (1, 1))
        oph, opw = op.attr("output_padding", (0, 0))
        oh = transposed_out(int(h), int(kh), sh, pt + pb, oph, dh)
        ow = transposed_out(int(w), int(kw), sw, pl + pr, opw, dw)
        return (n, int(op.weights["W"].shape[1]), oh, ow)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        total = int(np.prod(op.weights["W"].shape)) * int(np.prod(ins[0].shape[2:]))
        if "B" in op.weights:
            total += out.size
        return total + act_macs(op, out, relu_free=True)

    # the kernel's loops: per output element a store (``out``), per (element, ky) a row test
    # (``edge``), per (element, valid ky, kx) a column test (``pix``), per valid tap the
    # channel loop's set-up (``inner``) and its C MACs (``mac``)
    cost_feature_names = ("call", "out", "edge", "pix", "inner", "mac")

    def cost_features(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> dict[str, float]:
        """The loop counts of ``k_conv_transpose`` (kernels.c), taps by :func:`_valid`."""
        _, c, h, w = (int(d) for d in ins[0].shape)
        _, o, oh, ow = (int(d) for d in out.shape)
        kh, kw = (int(d) for d in op.weights["W"].shape[2:])
        sh, sw = op.attr("strides", (1, 1))
        pt, pl = op.attr("pads", (0, 0, 0, 0))[:2]
        dh, dw = op.attr("dilations", (1, 1))
        vy = sum(_valid(oh, kh, sh, pt, dh, h))
        vx = sum(_valid(ow, kw, sw, pl, dw, w))
        return {"call": 1, "out": o * oh * ow, "edge": o * oh * ow * kh, "pix": o * vy * ow * kw,
                "inner": o * vy * vx, "mac": o * vy * vx * c}  # fmt: skip

    def grid_graphs(self) -> list[Graph]:
        """Decoder up-sampling steps (stride 2, kernel 2 / 3 / 4) and one stride-1 layer, float32
        NCHW, for the cost table (no model of ``models/`` has a transposed conv)."""
        rng = np.random.default_rng(28)
        steps = [(8, 8, 4, 2, 2, 0), (16, 6, 8, 3, 2, 1), (4, 10, 6, 4, 2, 1), (6, 7, 6, 3, 1, 1)]
        return [_one_op_graph(f"grid_convt_{k}", s, rng) for k, s in enumerate(steps)]

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        wt = np.asarray(op.weights["W"], dtype=np.float32)
        wn = ctx.const(op, "W", np.ascontiguousarray(wt.transpose(1, 2, 3, 0)))
        bn = ctx.const(op, "B") if "B" in op.weights else "0"
        params = window_record(op, ctx, wt.shape[2:], act=act_record(op))
        x, y = ctx.ptr(op.inputs[0]), ctx.ptr(op.outputs[0])
        return block(params, K_CONV_TRANSPOSE("&p", x, wn, bn, y))


def _one_op_graph(
    name: str, step: tuple[int, int, int, int, int, int], rng: np.random.Generator
) -> Graph:
    """A one-op float32 NCHW graph: ``C x H x H`` in, ``O`` channels, kernel ``k``, stride
    ``s``, pads ``p`` on every side."""
    c, h, o, k, s, p = step
    attrs = {"kernel": (k, k), "strides": (s, s), "pads": (p,) * 4, "dilations": (1, 1),
             "output_padding": (0, 0), "groups": 1, "act": None}  # fmt: skip
    w = rng.standard_normal((c, o, k, k)).astype(np.float32)
    op = Op(name, "conv_transpose", ("x",), ("y",), attrs, {"W": w}, (name,))
    oh = transposed_out(h, k, s, 2 * p, 0)
    tensors = {"x": TensorSpec("x", (1, c, h, h)), "y": TensorSpec("y", (1, o, oh, oh))}
    return Graph(name, (op,), tensors, ("x",), ("y",), "NCHW", "grid")
