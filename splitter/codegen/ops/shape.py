"""Data movement and type conversion: concat, pad, reshape, transpose, quantize, dequantize."""

from __future__ import annotations

from collections.abc import Mapping
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
from splitter.codegen.ops.literals import c_float
from splitter.codegen.ops.quant import Q_MAX, Q_MIN, qp, requant_call, round_away
from splitter.ir import Op, TensorSpec


class Concat(OpEmitter):
    """One ``k_concat_part`` per input: ``y[o*ytot + yoff + i] = x[o*xn + i]``."""

    kind = "concat"
    int8_checks = (*Q8_ELEMENTWISE, same_quant)

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
    """Constant pad of a rank-4 view; int8 pads with the quantised ``value``."""

    kind = "pad"
    float_checks = (constant_pads,)
    int8_checks = (*Q8_ELEMENTWISE, _q8_pads)

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
    """A view: nothing to do, or a copy when ping-pong placement moved the output."""

    kind = "reshape"
    int8_checks = Q8_ELEMENTWISE

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


class Transpose(OpEmitter):
    """Rank-4 transpose: ``k_transpose(x, y, ys, xstr)`` with the input's strides permuted."""

    kind = "transpose"
    float_checks = (rank4_or_less,)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        xs = pad4(ctx.shape(x))
        k = 4 - len(ctx.shape(x))
        perm = list(range(k)) + [int(p) + k for p in op.attr("perm")]
        xstrides = [prod(xs[d + 1 :]) for d in range(4)]
        return [
            "{",
            f"    static const int ys[4] = {{{ints(pad4(ctx.shape(y)))}}};",
            f"    static const int xst[4] = {{{ints([xstrides[p] for p in perm])}}};",
            f"    k_transpose({ctx.ptr(x)}, {ctx.ptr(y)}, ys, xst);",
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
    """float32 -> int8 (``k_q_quantize``), or int8 -> int8 requantisation."""

    kind = "quantize"
    int8_checks = (no_weights, dtypes(None, "int8"))

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

    kind = "dequantize"
    int8_checks = (no_weights, dtypes("int8", "float32"))

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        si, zi = qp(ctx.tensors[x])
        args = f"{ctx.tensors[y].size}, {c_float(si)}, {zi}"
        return [f"k_q_dequantize({ctx.p8(x)}, {ctx.pvoid(y)}, {args});"]
