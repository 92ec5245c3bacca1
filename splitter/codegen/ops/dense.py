"""dense (``y = x @ W.T + B``) and matmul of two activations."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod

import numpy as np

from splitter.codegen.ops.base import (
    EmitContext,
    OpEmitter,
    act_ok,
    act_record,
    all_int8,
    block,
    q8_act_ok,
    record,
)
from splitter.codegen.ops.conv import pack4, q8_weights, q_record
from splitter.codegen.ops.formulas import Shape, act_macs
from splitter.codegen.ops.opdef import ALL, FLOAT, OpDef
from splitter.codegen.ops.q8_variants import dense_weights, variant_name
from splitter.codegen.ops.quant import bias, gemm_rounding, requant_arrays
from splitter.errors import ShapeError
from splitter.ir import Op, TensorSpec


def weights_2d(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Constant ``W (out, in)`` whose ``in`` is the input's size."""
    if "W" not in op.weights or np.asarray(op.weights["W"]).ndim != 2:
        return "dense needs constant 2-D weights W (out, in)"
    if tensors[op.inputs[0]].size != np.asarray(op.weights["W"]).shape[1]:
        return "dense input size differs from W's in dimension"
    return None


class Dense(OpEmitter):
    """``k_dense`` (W packed by :func:`~splitter.codegen.ops.conv.pack4`) / ``k_q_dense``.

    dense ``y = x @ W.T + B``, W ``(out, in)``: MACs ``= in*out + [bias] out + act``.
    """

    # y = x @ W.T + B, W (out, in); x flattened to (1, in)
    order = 20
    definition = OpDef(
        "dense",
        ("act",),
        onnx=("Gemm", "MatMul"),
        tflite=("FULLY_CONNECTED",),
        kernels=ALL,
    )
    float_checks = (weights_2d, act_ok)
    int8_checks = (all_int8, q8_weights, q8_act_ok)

    op_class = "dense"

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        n_out, n_in = (int(d) for d in op.weights["W"].shape)
        total = prod(in_shapes[0])
        if total % n_in:
            raise ShapeError(f"{op.name}: input of {total} elements is not a multiple of {n_in}")
        return (total // n_in, n_out)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        n_out, n_in = (int(d) for d in op.weights["W"].shape)
        rows = out.size // n_out
        total = rows * n_in * n_out
        if "B" in op.weights:
            total += out.size
        return total + act_macs(op, out)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        wt = np.asarray(op.weights["W"], dtype=np.float32)
        wn = ctx.const(op, "W", pack4(wt))
        bn = ctx.const(op, "B") if "B" in op.weights else "0"
        x, y = ctx.ptr(op.inputs[0]), ctx.ptr(op.outputs[0])
        params = dense_record(wt.shape, act_record(op))
        return block(params, f"k_dense(&p, {x}, {wn}, {bn}, {y})")

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        wt = np.asarray(op.weights["W"])
        wn = ctx.weights.add(f"{op.name}_W", dense_weights(wt), np.int8)
        bn = bias(op, ctx)
        params = dense_record(wt.shape)
        params += q_record(op, ctx, requant_arrays(op, ctx), gemm_rounding(op))
        x, y = ctx.p8(op.inputs[0]), ctx.p8(op.outputs[0])
        return block(params, f"k_{variant_name('dense', ctx.isa)}(&p, &q, {x}, {wn}, {bn}, {y})")


def dense_record(w_shape: tuple[int, ...], act: str = "{K_ACT_NONE, 0.0f, 0.0f}") -> list[str]:
    """The ``k_dense_params p`` record (kernels.h) of weights ``(out, in)``."""
    out, inn = (int(d) for d in w_shape)
    return record("k_dense_params", "p", [[("in", inn), ("out", out), ("act", act)]])


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
    """``k_matmul``: ``y (M, N) = a (M, K) @ b (K, N)``.

    matmul of two activations ``(..., M, K) @ (..., K, N)``: MACs ``= prod(out) * K + act``.
    """

    # both operands activations
    order = 30
    definition = OpDef("matmul", ("act",), onnx=("Gemm", "MatMul"), kernels=FLOAT)
    float_checks = (two_unbatched_operands, act_ok)

    op_class = "dense"

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        a, b = in_shapes[0], in_shapes[1]
        batch = np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2]))
        return (*batch, a[-2], b[-1])

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return out.size * int(ins[0].shape[-1]) + act_macs(op, out)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        m, k = ctx.shape(a)[-2:]
        n = ctx.shape(b)[-1]
        row = [("M", m), ("K", k), ("N", n), ("act", act_record(op))]
        params = record("k_matmul_params", "p", [row])
        return block(params, f"k_matmul(&p, {ctx.ptr(a)}, {ctx.ptr(b)}, {ctx.ptr(y)})")
