"""Pools and reductions: maxpool, avgpool, global_avgpool, mean."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
from splitter.codegen.ops.formulas import Shape, act_macs, spatial_axes, window_out
from splitter.codegen.ops.opdef import ALL, F32_NCHW, POOL_HOSTS, OpDef
from splitter.codegen.ops.quant import mean_multiplier, qp, requant_record
from splitter.ir import Op, TensorSpec


class _Pool(OpEmitter):
    """A pool over a :func:`~splitter.codegen.ops.conv.window_record`: ``<fn>[_nhwc](&p, x, y)`` /
    ``k_q_<fn>(&p, &q, x, y)``.

    maxpool / avgpool: one MAC-equivalent per output element per kernel tap (``kh*kw``).
    """

    fn = ""
    float_checks = (image_batch1, act_ok)
    int8_checks = (*Q8_ELEMENTWISE, same_quant, nhwc_batch1, q8_act_ok)

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        _, h_ax, w_ax = spatial_axes(layout, len(x))
        kh, kw = op.attr("kernel")
        sh, sw = op.attr("strides", (kh, kw))
        pt, pl, pb, pr = op.attr("pads", (0, 0, 0, 0))
        out = list(x)
        out[h_ax] = window_out(x[h_ax], kh, sh, pt + pb)
        out[w_ax] = window_out(x[w_ax], kw, sw, pl + pr)
        return tuple(out)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        kh, kw = op.attr("kernel")
        return out.size * int(kh) * int(kw) + act_macs(op, out)

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

    order = 40
    definition = OpDef(
        "maxpool",
        ("kernel", "strides", "pads", "act"),
        joins=POOL_HOSTS,
        pool=True,
        onnx=("MaxPool", "GlobalMaxPool"),
        tflite=("MAX_POOL_2D",),
        kernels=ALL,
    )
    fn = "k_maxpool"


class AvgPool(_Pool):
    """Average over the window (``count_include_pad`` as ONNX; int8: in-bounds taps, TFLite)."""

    order = 50
    definition = OpDef(
        "avgpool",
        ("kernel", "strides", "pads", "count_include_pad", "act"),
        joins=POOL_HOSTS,
        pool=True,
        onnx=("AveragePool",),
        tflite=("AVERAGE_POOL_2D",),
        kernels=ALL,
    )
    fn = "k_avgpool"


class GlobalAvgPool(OpEmitter):
    """``k_mean`` over the spatial axes of an NCHW tensor.

    global_avgpool: one MAC-equivalent per input element (``H*W`` taps per output).
    """

    order = 60
    definition = OpDef(
        "global_avgpool",
        ("act",),
        joins=POOL_HOSTS,
        pool=True,
        onnx=("GlobalAveragePool",),
        kernels=frozenset({F32_NCHW}),
    )
    float_checks = (act_ok,)

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        _, h_ax, w_ax = spatial_axes(layout, len(x))
        out = list(x)
        out[h_ax] = out[w_ax] = 1
        return tuple(out)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return ins[0].size + act_macs(op, out)

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
    """Mean over contiguous ``axes``: ``k_mean`` / ``k_q_mean``.

    mean over ``axes``: one MAC-equivalent per input element.
    """

    order = 70
    definition = OpDef(
        "mean",
        ("axes", "keepdims", "act"),
        onnx=("ReduceMean",),
        tflite=("MEAN",),
        kernels=ALL,
    )
    float_checks = (contiguous_axes, act_ok)
    int8_checks = (*Q8_ELEMENTWISE, contiguous_axes)

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        x = in_shapes[0]
        axes = {int(a) % len(x) for a in op.attr("axes", range(len(x)))}
        if op.attr("keepdims", True):
            return tuple(1 if i in axes else d for i, d in enumerate(x))
        return tuple(d for i, d in enumerate(x) if i not in axes)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return ins[0].size + act_macs(op, out)

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
