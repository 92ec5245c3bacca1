"""lrn: local response normalisation across the channel axis, ``k_lrn`` / ``k_q_lrn``."""

from __future__ import annotations

from math import prod

from splitter.codegen.ops.base import Q8_ELEMENTWISE, EmitContext, OpEmitter, block, record
from splitter.codegen.ops.literals import c_float
from splitter.codegen.ops.quant import qp
from splitter.ir import Op


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
    view follows ``axis``); int8 dequantises, computes in float and requantises."""

    kind = "lrn"
    int8_checks = Q8_ELEMENTWISE

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = ctx.ptr(op.inputs[0]), ctx.ptr(op.outputs[0])
        return block(lrn_record(op, ctx), f"k_lrn(&p, {x}, {y})")

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = ctx.p8(op.inputs[0]), ctx.p8(op.outputs[0])
        return block(lrn_record(op, ctx, int8=True), f"k_q_lrn(&p, {x}, {y})")
