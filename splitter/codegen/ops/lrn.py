"""lrn: local response normalisation across the channel axis, ``k_lrn`` / ``k_q_lrn``."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

from splitter.codegen.ops.base import Q8_ELEMENTWISE, EmitContext, OpEmitter, block, record
from splitter.codegen.ops.literals import c_float
from splitter.codegen.ops.opdef import ALL, OpDef
from splitter.codegen.ops.quant import qp
from splitter.ir import Op, TensorSpec


def lrn_record(op: Op, ctx: EmitContext, int8: bool = False) -> list[str]:
    """The ``k_lrn_params p`` record: the ``(outer, C, inner)`` view around ``axis``, the window
    ``[c - lo, c + hi]`` with ``lo = (size - 1) // 2``, ``hi = size - 1 - lo`` (ONNX LRN),
    ``alpha / size``, ``beta``, ``bias`` and, for int8, the input and output quantisation."""
    x, y = op.inputs[0], op.outputs[0]
    shape = ctx.shape(x)
    axis = int(op.attr("axis", 1)) % len(shape)
    size = int(op.attr("size"))
    lo = (size - 1) // 2
    si, zi, so, zo = 1.0, 0, 1.0, 0
    if int8:
        (si, zi), (so, zo) = qp(ctx.tensors[x]), qp(ctx.tensors[y])
    rows: list[list[tuple[str, object]]] = [
        [("outer", prod(shape[:axis])), ("C", shape[axis]), ("inner", prod(shape[axis + 1 :]))],
        [("lo", lo), ("hi", size - 1 - lo)],
        [("alpha_over_size", c_float(float(op.attr("alpha")) / size))],
        [("beta", c_float(op.attr("beta"))), ("bias", c_float(op.attr("bias")))],
        [("in_scale", c_float(si)), ("out_inv_scale", c_float(1.0 / so))],
        [("in_zp", zi), ("out_zp", zo)],
    ]
    return record("k_lrn_params", "p", rows)


class LRN(OpEmitter):
    """``y = x (bias + alpha / size * sum x^2)^-beta``; one kernel serves NCHW and NHWC (the
    view follows ``axis``); int8 dequantises, computes in float and requantises.

    lrn: ``size`` MAC-equivalents per output element for the window's sum of squares plus
    one for the scaling ``x * (bias + alpha / size * sum)^-beta`` (the element-wise rule):
    MACs ``= out * (size + 1)``. No thesis profile has an LRN row; this is splitter's rule.
    """

    # y = x / (bias + alpha / size * sum of x^2 over `size` neighbours along `axis`) ** beta
    order = 240
    definition = OpDef(
        "lrn",
        ("size", "alpha", "beta", "bias", "axis"),
        onnx=("LRN",),
        tflite=("LOCAL_RESPONSE_NORMALIZATION",),
        kernels=ALL,
    )
    int8_checks = Q8_ELEMENTWISE

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return out.size * (int(op.attr("size")) + 1)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = ctx.ptr(op.inputs[0]), ctx.ptr(op.outputs[0])
        return block(lrn_record(op, ctx), f"k_lrn(&p, {x}, {y})")

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = ctx.p8(op.inputs[0]), ctx.p8(op.outputs[0])
        return block(lrn_record(op, ctx, int8=True), f"k_q_lrn(&p, {x}, {y})")
