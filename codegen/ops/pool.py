"""Pools and reductions: maxpool, avgpool, global_avgpool, mean."""

from __future__ import annotations

from collections.abc import Mapping
from math import prod

from codegen.ops.base import (
    Q8_ELEMENTWISE,
    EmitContext,
    OpEmitter,
    act_args,
    act_ok,
    act_record,
    block,
    image_batch1,
    nhwc_batch1,
    q8_act_ok,
    same_quant,
)
from codegen.ops.conv import q_record, window_record
from codegen.ops.quant import mean_multiplier, qp
from splitter.ir import Op, TensorSpec


class _Pool(OpEmitter):
    """A pool over a :func:`~codegen.ops.conv.window_record`: ``<fn>[_nhwc](&p, x, y)`` /
    ``k_q_<fn>(&p, &q, x, y)``."""

    fn = ""
    float_checks = (image_batch1, act_ok)
    int8_checks = (*Q8_ELEMENTWISE, same_quant, nhwc_batch1, q8_act_ok)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        fn = self.fn + ("_nhwc" if ctx.layout == "NHWC" else "")
        params = window_record(op, ctx, op.attr("kernel"), act=act_record(op))
        return block(params, f"{fn}(&p, {ctx.ptr(op.inputs[0])}, {ctx.ptr(op.outputs[0])})")

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        params = window_record(op, ctx, op.attr("kernel")) + q_record(op, ctx)
        x, y = ctx.p8(op.inputs[0]), ctx.p8(op.outputs[0])
        return block(params, f"k_q_{self.fn[2:]}(&p, &q, {x}, {y})")


class MaxPool(_Pool):
    """Max over the window's in-bounds taps."""

    kind, fn = "maxpool", "k_maxpool"


class AvgPool(_Pool):
    """Average over the window (``count_include_pad`` as ONNX; int8: in-bounds taps, TFLite)."""

    kind, fn = "avgpool", "k_avgpool"


class GlobalAvgPool(OpEmitter):
    """``k_mean`` over the spatial axes of an NCHW tensor."""

    kind = "global_avgpool"
    float_checks = (act_ok,)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        shape = ctx.shape(x)
        return [
            f"k_mean({ctx.ptr(x)}, {prod(shape[:2])}, {prod(shape[2:])}, 1, {ctx.ptr(y)}, "
            f"{act_args(op)});"
        ]


def _axes(op: Op, tensors: Mapping[str, TensorSpec]) -> list[int]:
    rank = len(tensors[op.inputs[0]].shape)
    return sorted(int(a) % rank for a in op.attr("axes", range(rank)))


def contiguous_axes(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """The reduced axes are contiguous (an ``(outer, red, inner)`` view)."""
    axes = _axes(op, tensors)
    if axes != list(range(axes[0], axes[-1] + 1)):
        return f"mean over non-contiguous axes {axes}"
    return None


def _view(op: Op, ctx: EmitContext) -> tuple[int, int, int]:
    """``(outer, red, inner)`` of the reduction."""
    shape = ctx.shape(op.inputs[0])
    axes = _axes(op, ctx.tensors)
    outer, red = prod(shape[: axes[0]]), prod(shape[axes[0] : axes[-1] + 1])
    return outer, red, prod(shape[axes[-1] + 1 :])


class Mean(OpEmitter):
    """Mean over contiguous ``axes``: ``k_mean`` / ``k_q_mean``."""

    kind = "mean"
    float_checks = (contiguous_axes, act_ok)
    int8_checks = (*Q8_ELEMENTWISE, contiguous_axes)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        outer, red, inner = _view(op, ctx)
        return [f"k_mean({ctx.ptr(x)}, {outer}, {red}, {inner}, {ctx.ptr(y)}, {act_args(op)});"]

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        outer, red, inner = _view(op, ctx)
        si, zi = qp(ctx.tensors[x])
        so, zo = qp(ctx.tensors[y])
        m, s = mean_multiplier(si, so, red)
        return [
            f"k_q_mean({ctx.p8(x)}, {outer}, {red}, {inner}, {zi}, {ctx.p8(y)}, {m}, {s}, {zo});"
        ]
