"""dense (``y = x @ W.T + B``) and matmul of two activations."""

from __future__ import annotations

from collections.abc import Mapping
from math import prod

import numpy as np

from codegen.ops.base import EmitContext, OpEmitter, act_args, act_ok, all_int8, q8_act_ok
from codegen.ops.conv import pack4, q8_weights
from codegen.ops.quant import act_range, bias, gemm_rounding, qp, requant_arrays
from splitter.ir import Op, TensorSpec


def weights_2d(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Constant ``W (out, in)`` whose ``in`` is the input's size."""
    if "W" not in op.weights or np.asarray(op.weights["W"]).ndim != 2:
        return "dense needs constant 2-D weights W (out, in)"
    if tensors[op.inputs[0]].size != np.asarray(op.weights["W"]).shape[1]:
        return "dense input size differs from W's in dimension"
    return None


class Dense(OpEmitter):
    """``k_dense`` (W packed by :func:`~codegen.ops.conv.pack4`) / ``k_q_dense``."""

    kind = "dense"
    float_checks = (weights_2d, act_ok)
    int8_checks = (all_int8, q8_weights, q8_act_ok)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        wt = np.asarray(op.weights["W"], dtype=np.float32)
        out, inn = wt.shape
        wn = ctx.const(op, "W", pack4(wt))
        bn = ctx.const(op, "B") if "B" in op.weights else "0"
        return [f"k_dense({ctx.ptr(x)}, {inn}, {wn}, {bn}, {ctx.ptr(y)}, {out}, {act_args(op)});"]

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        wt = np.asarray(op.weights["W"])
        out, inn = wt.shape
        _, in_zp = qp(ctx.tensors[x])
        _, out_zp = qp(ctx.tensors[y])
        wn = ctx.weights.add(f"{op.name}_W", wt, np.int8)
        bn = bias(op, ctx)
        mult, shift, nq = requant_arrays(op, ctx)
        lo, hi = act_range(op, ctx.tensors[y])
        return [
            f"k_q_dense({ctx.p8(x)}, {inn}, {in_zp}, {wn}, {bn}, {ctx.p8(y)}, {out}, {mult}, "
            f"{shift}, {nq}, {gemm_rounding(op)}, {out_zp}, {lo}, {hi});"
        ]


def two_unbatched_operands(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Two activation operands without batch dimensions."""
    if len(op.inputs) != 2:
        return "matmul needs two activation operands (a constant one is a dense op)"
    for name in op.inputs:
        shape = tensors[name].shape
        if len(shape) < 2 or prod(shape[:-2]) != 1:
            return f"batched matmul operand {name} {shape}"
    return None


class MatMul(OpEmitter):
    """``k_matmul``: ``y (M, N) = a (M, K) @ b (K, N)``."""

    kind = "matmul"
    float_checks = (two_unbatched_operands, act_ok)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        m, k = ctx.shape(a)[-2:]
        n = ctx.shape(b)[-1]
        return [
            f"k_matmul({ctx.ptr(a)}, {ctx.ptr(b)}, {ctx.ptr(y)}, {m}, {k}, {n}, {act_args(op)});"
        ]
