"""Pools and reductions: maxpool, avgpool, global_avgpool, mean."""

from __future__ import annotations

from collections.abc import Mapping
from math import prod

from splitter.codegen.ops.base import (
    Q8_ELEMENTWISE,
    EmitContext,
    OpEmitter,
    act_ok,
    act_record,
    block,
    image_batch1,
    nhwc_batch1,
    q8_act_ok,
    record,
    same_quant,
)
from splitter.codegen.ops.conv import q_record, window_record
from splitter.codegen.ops.quant import mean_multiplier, qp, requant_record
from splitter.ir import Op, TensorSpec


class _Pool(OpEmitter):
    """A pool over a :func:`~splitter.codegen.ops.conv.window_record`: ``<fn>[_nhwc](&p, x, y)`` /
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
        shape = ctx.shape(op.inputs[0])
        return _mean_float(op, ctx, (prod(shape[:2]), prod(shape[2:]), 1))


def reduce_record(view: tuple[int, int, int], act: str = "{K_ACT_NONE, 0.0f, 0.0f}") -> list[str]:
    """The ``k_reduce_params p`` record (kernels.h) of an ``(outer, red, inner)`` view."""
    outer, red, inner = view
    row = [("outer", outer), ("red", red), ("inner", inner), ("act", act)]
    return record("k_reduce_params", "p", [row])


def _mean_float(op: Op, ctx: EmitContext, view: tuple[int, int, int]) -> list[str]:
    """``k_mean(&p, x, y)`` over ``view`` with the op's fused activation."""
    x, y = ctx.ptr(op.inputs[0]), ctx.ptr(op.outputs[0])
    return block(reduce_record(view, act_record(op)), f"k_mean(&p, {x}, {y})")


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
        return _mean_float(op, ctx, _view(op, ctx))

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        view = _view(op, ctx)
        si, zi = qp(ctx.tensors[x])
        so, zo = qp(ctx.tensors[y])
        m, s = mean_multiplier(si, so, view[1])
        fields = {"a_zp": zi, "out_zp": zo, "m": m, "s": s}
        params = reduce_record(view) + requant_record(fields)
        return block(params, f"k_q_mean(&p, &q, {ctx.p8(x)}, {ctx.p8(y)})")
