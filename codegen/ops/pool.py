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
    image_batch1,
    ints,
    nhwc_batch1,
    q8_act_ok,
    same_quant,
)
from codegen.ops.quant import act_range, mean_multiplier, qp
from splitter.ir import Op, TensorSpec


def _geometry(op: Op, ctx: EmitContext) -> tuple[str, str]:
    """``x, C, H, W, y, OH, OW, kh, kw, sh, sw`` and the four pads of an NCHW pool."""
    x, y = op.inputs[0], op.outputs[0]
    _, c, h, w = ctx.shape(x)
    _, _, oh, ow = ctx.shape(y)
    kh, kw = op.attr("kernel")
    sh, sw = op.attr("strides", (1, 1))
    return (
        f"{ctx.ptr(x)}, {c}, {h}, {w}, {ctx.ptr(y)}, {oh}, {ow}, {kh}, {kw}, {sh}, {sw}",
        ints(op.attr("pads", (0, 0, 0, 0))),
    )


def _geometry_nhwc(op: Op, ctx: EmitContext) -> str:
    """``x, H, W, C, y, OH, OW, kh, kw, sh, sw`` arguments of an NHWC pool."""
    x, y = op.inputs[0], op.outputs[0]
    _, h, w, c = ctx.shape(x)
    _, oh, ow, _ = ctx.shape(y)
    kh, kw = op.attr("kernel")
    sh, sw = op.attr("strides", (1, 1))
    return f"{ctx.ptr(x)}, {h}, {w}, {c}, {ctx.ptr(y)}, {oh}, {ow}, {ints((kh, kw, sh, sw))}"


def _q8_args(op: Op, ctx: EmitContext) -> str:
    """``x, H, W, C, y, OH, OW, kh, kw, sh, sw, pt, pl, act_min, act_max`` of an int8 pool."""
    x, y = op.inputs[0], op.outputs[0]
    _, h, w, c = ctx.shape(x)
    _, oh, ow, _ = ctx.shape(y)
    kh, kw = op.attr("kernel")
    sh, sw = op.attr("strides", (1, 1))
    pt, pl = op.attr("pads", (0, 0, 0, 0))[:2]
    lo, hi = act_range(op, ctx.tensors[y])
    return (
        f"{ctx.p8(x)}, {h}, {w}, {c}, {ctx.p8(y)}, {oh}, {ow}, "
        f"{ints((kh, kw, sh, sw, pt, pl, lo, hi))}"
    )


class _Pool(OpEmitter):
    float_checks = (image_batch1, act_ok)
    int8_checks = (*Q8_ELEMENTWISE, same_quant, nhwc_batch1, q8_act_ok)


class MaxPool(_Pool):
    """Max over the window's in-bounds taps."""

    kind = "maxpool"

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        if ctx.layout == "NHWC":
            pt, pl = op.attr("pads", (0, 0, 0, 0))[:2]
            return [f"k_maxpool_nhwc({_geometry_nhwc(op, ctx)}, {pt}, {pl}, {act_args(op)});"]
        geo, pads = _geometry(op, ctx)
        pt, pl = pads.split(", ")[:2]
        return [f"k_maxpool({geo}, {pt}, {pl}, {act_args(op)});"]

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        return [f"k_q_maxpool({_q8_args(op, ctx)});"]


class AvgPool(_Pool):
    """Average over the window (``count_include_pad`` as ONNX)."""

    kind = "avgpool"

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        cip = 1 if op.attr("count_include_pad", 0) else 0
        if ctx.layout == "NHWC":
            pads = ints(op.attr("pads", (0, 0, 0, 0)))
            geo = _geometry_nhwc(op, ctx)
            return [f"k_avgpool_nhwc({geo}, {pads}, {cip}, {act_args(op)});"]
        geo, pads = _geometry(op, ctx)
        pt, pl, pb, pr = pads.split(", ")
        return [f"k_avgpool({geo}, {pt}, {pl}, {pb}, {pr}, {cip}, {act_args(op)});"]

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        return [f"k_q_avgpool({_q8_args(op, ctx)});"]


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
