"""Data movement and type conversion: concat, pad, reshape, transpose, quantize, dequantize."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod

import numpy as np

from splitter.codegen.escape import c_comment
from splitter.codegen.ops.base import (
    Q8_ELEMENTWISE,
    Check,
    EmitContext,
    OpEmitter,
    block,
    ints,
    no_weights,
    pad4,
    rank4_or_less,
    record,
    same_quant,
)
from splitter.codegen.ops.formulas import Shape
from splitter.codegen.ops.literals import c_float
from splitter.codegen.ops.opdef import ALL, FLOAT, I8_NHWC, Kernel, OpDef
from splitter.codegen.ops.quant import Q_MAX, Q_MIN, qp, requant_call, round_away
from splitter.errors import ShapeError
from splitter.ir import Op, TensorSpec


class Concat(OpEmitter):
    """One ``k_concat_part`` per input: ``y[o*ytot + yoff + i] = x[o*xn + i]``.

    concat along ``axis``: one MAC-equivalent (a copy) per output element.
    """

    order = 120
    definition = OpDef(
        "concat", ("axis",), onnx=("Concat",), tflite=("CONCATENATION",), kernels=ALL
    )
    int8_checks = (*Q8_ELEMENTWISE, same_quant)
    #: per input one ``k_concat_part`` call (``in``), its ``outer`` blocks (``rows``: the
    #: outer loop, many short copies for a channel concat of NHWC pixels) and the elements
    #: copied (``out``)
    cost_feature_names = ("call", "in", "rows", "out")

    def cost_features(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> dict[str, float]:
        axis = int(op.attr("axis", 1)) % len(out.shape)
        outer = prod(out.shape[:axis])
        return {"call": 1, "in": len(ins), "rows": len(ins) * outer, "out": out.size}

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        axis = int(op.attr("axis", 0)) % len(in_shapes[0])
        out = list(in_shapes[0])
        out[axis] = sum(int(s[axis]) for s in in_shapes)
        return tuple(out)

    @staticmethod
    def _parts(op: Op, ctx: EmitContext, fn: str, ptr: str) -> list[str]:
        y = op.outputs[0]
        ys = ctx.shape(y)
        axis = int(op.attr("axis", 1)) % len(ys)
        outer, ytot, lines, yoff = prod(ys[:axis]), prod(ys[axis:]), [], 0
        at = getattr(ctx, ptr)
        for name in op.inputs:
            xn = prod(ctx.shape(name)[axis:])
            lines.append(f"{fn}({at(name)}, {outer}, {xn}, {at(y)}, {ytot}, {yoff});")
            yoff += xn
        return lines

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        return self._parts(op, ctx, "k_concat_part", "ptr")

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        return self._parts(op, ctx, "k_q_concat_part", "p8")


def constant_pads(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Non-negative constant padding of a tensor of rank <= 4."""
    if any(int(p) < 0 for p in op.attr("pads", ())):
        return "negative pads (cropping)"
    if op.attr("mode", "constant") != "constant":
        return f"pad mode {op.attr('mode')!r} (constant only)"
    return rank4_or_less(op, tensors)


def _q8_pads(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if any(int(p) < 0 for p in op.attr("pads", ())):
        return "negative pads (cropping)"
    if len(tensors[op.inputs[0]].shape) > 4:
        return "pad of rank > 4"
    return None


class Pad(OpEmitter):
    """Constant pad of a rank-4 view; int8 pads with the quantised ``value``.

    pad, ``pads`` = begins of every axis then ends (ONNX): one copy per output element.
    """

    # pads in ONNX order: begins of every axis, then ends
    order = 270
    definition = OpDef(
        "pad", ("pads", "value"), onnx=("Pad",), tflite=("PAD", "PADV2"), kernels=ALL
    )
    float_checks = (constant_pads,)
    int8_checks = (*Q8_ELEMENTWISE, _q8_pads)

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        pads = tuple(int(p) for p in op.attr("pads"))
        rank = len(x)
        return tuple(x[i] + pads[i] + pads[i + rank] for i in range(rank))

    @staticmethod
    def _call(op: Op, ctx: EmitContext, fn: str, ptr: str, value: tuple[str, object]) -> list[str]:
        """``fn(&p, x, y)`` with the ``k_pad_params p`` record and its pad ``value`` field."""
        x, y = op.inputs[0], op.outputs[0]
        rank = len(ctx.shape(x))
        begins = [0] * (4 - rank) + [int(p) for p in op.attr("pads")[:rank]]
        rows: list[list[tuple[str, object]]] = [
            [("xs", f"{{{ints(pad4(ctx.shape(x)))}}}")],
            [("ys", f"{{{ints(pad4(ctx.shape(y)))}}}")],
            [("begins", f"{{{ints(begins)}}}")],
            [value],
        ]
        at = getattr(ctx, ptr)
        return block(record("k_pad_params", "p", rows), f"{fn}(&p, {at(x)}, {at(y)})")

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        value = ("value", c_float(op.attr("value", 0.0)))
        return self._call(op, ctx, "k_pad", "ptr", value)

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        so, zo = qp(ctx.tensors[op.outputs[0]])
        value = zo + round_away(float(np.float32(op.attr("value", 0.0)) / np.float32(so)))
        return self._call(op, ctx, "k_q_pad", "p8", ("qvalue", max(Q_MIN, min(Q_MAX, value))))


class Reshape(OpEmitter):
    """A view: nothing to do, or a copy when ping-pong placement moved the output.

    reshape (Flatten, Squeeze, Unsqueeze): zero MACs, the output aliases the input's bytes.

    ``shape`` may hold one ``-1`` (inferred) and ``0`` (copy the input's dimension, ONNX).
    """

    order = 310
    definition = OpDef(
        "reshape",
        ("shape",),
        zero_cost=True,
        onnx=("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast"),
        tflite=("RESHAPE", "SQUEEZE", "EXPAND_DIMS"),
        kernels=ALL,
    )
    int8_checks = Q8_ELEMENTWISE

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        target = [int(d) for d in op.attr("shape")]
        target = [x[i] if d == 0 and i < len(x) else d for i, d in enumerate(target)]
        if -1 in target:
            known = prod(d for d in target if d != -1)
            target[target.index(-1)] = prod(x) // known if known else 0
        if prod(target) != prod(x):
            raise ShapeError(f"{op.name}: cannot reshape {x} to {tuple(target)}")
        return tuple(target)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return 0

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        if ctx.offsets[x] == ctx.offsets[y]:
            return [f"/* {c_comment(op.name)}: reshape, zero-copy */"]
        n = ctx.tensors[x].size
        return [f"k_copy({ctx.ptr(x)}, {ctx.ptr(y)}, {n}); /* {c_comment(op.name)}: reshape */"]

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        if ctx.offsets[x] == ctx.offsets[y]:
            return [f"/* {c_comment(op.name)}: reshape, zero-copy */"]
        return [f"k_q_copy({ctx.p8(x)}, {ctx.p8(y)}, {ctx.tensors[x].size}); /* reshape */"]


#: The largest rank ``k_transpose_nd`` takes (``K_TRANSPOSE_MAX_RANK``, kernels.h).
TRANSPOSE_MAX_RANK = 6


def transpose_rank(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """The input has rank <= :data:`TRANSPOSE_MAX_RANK` (``k_transpose_nd``'s index array)."""
    rank = len(tensors[op.inputs[0]].shape)
    if rank > TRANSPOSE_MAX_RANK:
        return f"transpose of rank {rank} > {TRANSPOSE_MAX_RANK}"
    return None


class Transpose(OpEmitter):
    """``y = x.transpose(perm)``: ``k_transpose(x, y, ys, xstr)`` up to rank 4,
    ``k_transpose_nd(x, y, rank, ys, xstr)`` for ranks 5 and 6 (ShuffleNet's channel shuffle
    ``(1, g, C/g, H, W) -> (1, C/g, g, H, W)``); ``xstr[d]`` is the input's row-major stride of
    axis ``perm[d]``.

    Shape: ``y.shape[d] = x.shape[perm[d]]`` (reversed axes without ``perm``, ONNX). MACs: one
    copy per output element.
    """

    order = 320
    definition = OpDef(
        "transpose", ("perm",), onnx=("Transpose",), tflite=("TRANSPOSE",), kernels=FLOAT
    )
    float_checks = (transpose_rank,)
    RANK4 = Kernel("k_transpose")
    ND = Kernel("k_transpose_nd")
    c_kernels = (RANK4, ND)

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        perm = op.attr("perm") or tuple(reversed(range(len(x))))
        return tuple(x[int(p)] for p in perm)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        if len(ctx.shape(x)) > 4:
            return self._emit_nd(op, ctx)
        xs = pad4(ctx.shape(x))
        k = 4 - len(ctx.shape(x))
        perm = list(range(k)) + [int(p) + k for p in op.attr("perm")]
        xstrides = [prod(xs[d + 1 :]) for d in range(4)]
        return [
            "{",
            f"    static const int ys[4] = {{{ints(pad4(ctx.shape(y)))}}};",
            f"    static const int xst[4] = {{{ints([xstrides[p] for p in perm])}}};",
            f"    {self.RANK4(ctx.ptr(x), ctx.ptr(y), 'ys', 'xst')};",
            "}",
        ]

    def _emit_nd(self, op: Op, ctx: EmitContext) -> list[str]:
        """``k_transpose_nd`` over the input's own rank (no padding to 4)."""
        x, y = op.inputs[0], op.outputs[0]
        xs, rank = ctx.shape(x), len(ctx.shape(x))
        perm = [int(p) for p in op.attr("perm")]
        xstrides = [prod(xs[d + 1 :]) for d in range(rank)]
        return [
            "{",
            f"    static const int ys[{rank}] = {{{ints(ctx.shape(y))}}};",
            f"    static const int xst[{rank}] = {{{ints([xstrides[p] for p in perm])}}};",
            f"    {self.ND(ctx.ptr(x), ctx.ptr(y), rank, 'ys', 'xst')};",
            "}",
        ]


def dtypes(x: str | None, y: str) -> Check:
    """A check that the op converts ``x`` (``None``: float32 or int8) to ``y``."""

    def check(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
        src, dst = tensors[op.inputs[0]].dtype, tensors[op.outputs[0]].dtype
        if (x is None or src == x) and dst == y:
            return None
        return f"{op.kind} {src} -> {dst} ({x or 'any'} -> {y} only)"

    return check


class Quantize(OpEmitter):
    """float32 -> int8 (``k_q_quantize``), or int8 -> int8 requantisation.

    quantize / dequantize: one per element; the shape transposed by ``perm`` when given
    (a QDQ ONNX input: float NCHW -> int8 NHWC, ``splitter.importers.onnx_qdq``).
    """

    # perm: the transpose from the float tensor's layout to the int8 tensor's (None: same
    # layout; (0, 2, 3, 1) at a QDQ ONNX graph's NCHW input, int8 tensors being NHWC)
    order = 330
    definition = OpDef(
        "quantize",
        ("perm",),
        onnx=("QuantizeLinear",),
        tflite=("QUANTIZE",),
        kernels=frozenset({I8_NHWC}),
    )
    int8_checks = (no_weights, dtypes(None, "int8"))

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x, perm = in_shapes[0], op.attr("perm")
        return tuple(x) if perm is None else tuple(x[int(p)] for p in perm)

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        if ctx.tensors[x].dtype == "int8":
            return requant_call(op, ctx, Q_MIN, Q_MAX)
        so, zo = qp(ctx.tensors[y])
        args = f"{ctx.tensors[y].size}, {float(so)!r}, {zo}"
        if op.attr("perm") is None:
            return [f"k_q_quantize({ctx.pvoid(x)}, {ctx.p8(y)}, {args});"]
        return _quantize_to_nhwc(op, ctx, args)


def _quantize_to_nhwc(op: Op, ctx: EmitContext, args: str) -> list[str]:
    """float NCHW ``x`` -> int8 NHWC ``y`` (``perm == (0, 2, 3, 1)``, a QDQ ONNX input):
    quantise in place into the first ``n`` bytes of ``x`` (byte ``i`` is written after float
    ``i`` is read and never overlaps a float still to read), then scatter each channel plane
    into ``y`` with stride ``C`` (``k_q_concat_part`` of ``H * W`` rows of 1 byte)."""
    x, y = op.inputs[0], op.outputs[0]
    if tuple(op.attr("perm")) != (0, 2, 3, 1) or len(ctx.shape(x)) != 4:
        raise ValueError(f"{op.name}: quantize with perm {op.attr('perm')} (NCHW -> NHWC only)")
    _, c, h, w = ctx.shape(x)
    q = f"(int8_t *)(A8 + {ctx.offsets[x]})"
    return [
        "{",
        "    int c;",
        f"    k_q_quantize({ctx.pvoid(x)}, {q}, {args});",
        f"    for (c = 0; c < {c}; c++)",
        f"        k_q_concat_part({q} + c * {h * w}, {h * w}, 1, {ctx.p8(y)}, {c}, c);",
        "}",
    ]


class Dequantize(OpEmitter):
    """int8 -> float32: ``y = s (q - zp)``."""

    order = 340
    definition = OpDef(
        "dequantize",
        ("perm",),
        onnx=("DequantizeLinear",),
        tflite=("DEQUANTIZE",),
        kernels=frozenset({I8_NHWC}),
    )
    int8_checks = (no_weights, dtypes("int8", "float32"))

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x, perm = in_shapes[0], op.attr("perm")
        return tuple(x) if perm is None else tuple(x[int(p)] for p in perm)

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        si, zi = qp(ctx.tensors[x])
        args = f"{ctx.tensors[y].size}, {c_float(si)}, {zi}"
        return [f"k_q_dequantize({ctx.p8(x)}, {ctx.pvoid(y)}, {args});"]
