"""softmax over one axis: ``k_softmax`` (float, any axis) / ``k_q_softmax`` (int8, last axis)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod

import numpy as np

from splitter.codegen.ops.base import Q8_ELEMENTWISE, EmitContext, OpEmitter, block, record
from splitter.codegen.ops.formulas import SOFTMAX_MACS_PER_ELEMENT
from splitter.codegen.ops.literals import c_float
from splitter.codegen.ops.opdef import ALL, OpDef
from splitter.codegen.ops.quant import qp
from splitter.ir import Op, TensorSpec


def beta_one(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """The float kernel computes ``exp(x) / sum`` (TFLite's ``beta`` 1 only)."""
    if float(op.attr("beta", 1.0)) != 1.0:
        return f"softmax beta {op.attr('beta')} (beta 1 only)"
    return None


def last_axis(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """The int8 kernel reduces the last axis."""
    shape = tensors[op.inputs[0]].shape
    if int(op.attr("axis", -1)) % len(shape) != len(shape) - 1:
        return "int8 softmax over an axis other than the last"
    return None


class Softmax(OpEmitter):
    """``exp(beta x) / sum`` over ``axis``.

    softmax: :data:`SOFTMAX_MACS_PER_ELEMENT` (15, X-CUBE-AI) per output element.
    """

    order = 250
    definition = OpDef(
        "softmax",
        ("axis",),
        joins=frozenset({"dense"}),
        onnx=("Softmax",),
        tflite=("SOFTMAX",),
        kernels=ALL,
    )
    float_checks = (beta_one,)
    int8_checks = (*Q8_ELEMENTWISE, last_axis)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return SOFTMAX_MACS_PER_ELEMENT * out.size

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        shape = ctx.shape(x)
        axis = int(op.attr("axis", -1)) % len(shape)
        outer, n, inner = prod(shape[:axis]), shape[axis], prod(shape[axis + 1 :])
        return [f"k_softmax({ctx.ptr(x)}, {outer}, {n}, {inner}, {ctx.ptr(y)});"]

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        shape = ctx.shape(x)
        si, _ = qp(ctx.tensors[x])
        so, zo = qp(ctx.tensors[y])
        beta = float(np.float32(si) * np.float32(op.attr("beta", 1.0)))
        n = shape[-1]
        rows: list[list[tuple[str, object]]] = [
            [("rows", prod(shape) // n), ("n", n)],
            [("in_scale", c_float(beta))],
            [("out_scale", c_float(so)), ("out_zp", zo)],
        ]
        params = record("k_q_float_params", "p", rows)
        return block(params, f"k_q_softmax(&p, {ctx.p8(x)}, {ctx.p8(y)})")
