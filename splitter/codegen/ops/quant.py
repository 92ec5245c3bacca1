"""Requantisation arithmetic of the int8 emitters (``kernels_q8.c``, NHWC, batch 1).

Requantisation follows TFLite (``tensorflow/lite/kernels``, the builtin kernels LiteRT runs):

* a real factor ``M`` becomes ``(m, s)`` by :func:`quantize_multiplier` (tflite::
  QuantizeMultiplier: ``M = q * 2^s`` with ``q`` in [0.5, 1) by ``frexp``, ``m = round(q * 2^31)``);
* conv / depthwise / dense: ``M_c = in_scale * w_scale[c] / out_scale`` in double
  (PopulateConvolutionQuantizationParams), one ``(m, s)`` per output channel (per-channel) or
  one (per-tensor), emitted as two int32 arrays in ``.weights``: FLASH of such an op is
  ``W.nbytes + B.nbytes + 8 * len(w_scale)`` (``splitter.cost.handlers.op_flash``);
* ADD: inputs shifted left by 20, ``M_i = s_i / (2 max(s_1, s_2))``,
  ``M_out = 2 max(s_1, s_2) / (2^20 s_out)`` (add.cc); MUL: ``M = s_1 s_2 / s_out`` in float32
  (mul.cc); RELU / RELU6 / QUANTIZE int8->int8: ``M = s_in / s_out`` (ReluX, Requantize);
* MEAN: ``M = s_in / s_out`` with ``1 / n`` folded in as QuantizedMeanOrSum does
  (``shift = min(floor(log2 n), 32, 31 + s)``, ``m' = (m << shift) // n``, ``s' = s - shift``);
* fused activation range: ``zp + round(f / s_out)`` of 0 / 6 / clip bounds, clamped to int8
  (CalculateActivationRangeQuantized).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from splitter.codegen.ops.base import EmitContext, block, record
from splitter.ir import Op, TensorSpec

Q_MIN, Q_MAX = -128, 127


def quantize_multiplier(real: float) -> tuple[int, int]:
    """``(m, s)`` with ``real ~= m * 2^(s - 31)``: tflite::QuantizeMultiplier.

    ``q, s = frexp(real)``; ``m = round(q * 2^31)`` half away from zero; ``m == 2^31`` becomes
    ``2^30`` with ``s + 1``; ``s < -31`` flushes to ``(0, 0)``; ``s > 30`` saturates.
    """
    if real == 0.0:
        return 0, 0
    q, s = math.frexp(real)
    m = math.floor(abs(q) * 2**31 + 0.5) * (1 if q >= 0 else -1)
    if m == 2**31:
        m, s = m // 2, s + 1
    if s < -31:
        return 0, 0
    if s > 30:
        return 2**31 - 1, 30
    return m, s


def round_away(x: float) -> int:
    """std::round: half away from zero."""
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def qp(spec: TensorSpec) -> tuple[float, int]:
    """(scale as float32, zero point) of a per-tensor quantised tensor."""
    assert spec.quant is not None
    return float(np.float32(spec.quant.scale[0])), int(spec.quant.zero_point[0])


def act_range(op: Op, out: TensorSpec, act: str | None = None) -> tuple[int, int]:
    """int8 clamp of a fused activation: ``zp + round(f / scale)`` (float32 division)."""
    scale, zp = qp(out)
    act = op.attr("act") if act is None else act

    def quant(f: float) -> int:
        return zp + round_away(float(np.float32(f) / np.float32(scale)))

    lo, hi = Q_MIN, Q_MAX
    if act in ("relu", "relu6"):
        lo = max(Q_MIN, quant(0.0))
    if act == "relu6":
        hi = min(Q_MAX, quant(6.0))
    if act == "clip":
        amin, amax = op.attr("act_min", -math.inf), op.attr("act_max", math.inf)
        lo = lo if math.isinf(amin) else max(Q_MIN, quant(amin))
        hi = hi if math.isinf(amax) else min(Q_MAX, quant(amax))
    return lo, hi


def requant_arrays(op: Op, ctx: EmitContext) -> tuple[str, str, int]:
    """C names of the per-channel multiplier / shift arrays and their length."""
    in_scale, _ = qp(ctx.tensors[op.inputs[0]])
    out_scale, _ = qp(ctx.tensors[op.outputs[0]])
    pairs = [
        quantize_multiplier(float(in_scale) * float(np.float32(ws)) / float(out_scale))
        for ws in op.attr("w_scale")
    ]
    mult = ctx.weights.add(f"{op.name}_mult", np.array([m for m, _ in pairs]), np.int32)
    shift = ctx.weights.add(f"{op.name}_shift", np.array([s for _, s in pairs]), np.int32)
    return mult, shift, len(pairs)


def bias(op: Op, ctx: EmitContext) -> str:
    """C name of the int32 bias array, or ``"0"`` (NULL) without one."""
    return ctx.weights.add(f"{op.name}_B", op.weights["B"], np.int32) if "B" in op.weights else "0"


def gemm_rounding(op: Op) -> int:
    """1 when LiteRT runs ``op`` as a GEMM (ruy: conv with groups == 1, fully connected), whose
    requantisation rounds ties upward (``k_q_mul_up``); 0 for its direct kernels (depthwise),
    which round ties away from zero as tflite::MultiplyByQuantizedMultiplier."""
    return 1 if op.kind == "dense" or int(op.attr("groups", 1)) == 1 else 0


def mean_multiplier(in_scale: float, out_scale: float, n: int) -> tuple[int, int]:
    """``(m, s)`` of MEAN over ``n`` elements (QuantizedMeanOrSum, ``1/n`` folded in)."""
    m, s = quantize_multiplier(in_scale / out_scale)
    shift = min(n.bit_length() - 1, 32, 31 + s)
    return (m << shift) // n, s - shift


#: The fields of ``k_q_requant_params`` (kernels_q8.h), a row of the record each.
_REQUANT_ROWS = (("n", "a_zp", "b_zp", "out_zp"), ("a_m", "a_s", "b_m", "b_s", "m", "s"))


def requant_record(fields: Mapping[str, int], clamp: tuple[int, int] = (Q_MIN, Q_MAX)) -> list[str]:
    """The ``k_q_requant_params q`` record (kernels_q8.h) of the ``fields`` the kernel reads
    (``n``, zero points ``a_zp`` / ``b_zp`` / ``out_zp``, rescales ``(a_m, a_s)``, ``(b_m, b_s)``,
    ``(m, s)``; the others stay 0) and the clamp ``[act_min, act_max]``."""
    rows = [[(k, fields[k]) for k in row if k in fields] for row in _REQUANT_ROWS]
    rows.append([("act_min", clamp[0]), ("act_max", clamp[1])])
    return record("k_q_requant_params", "q", [row for row in rows if row])


def requant_call(op: Op, ctx: EmitContext, lo: int, hi: int) -> list[str]:
    """``k_q_requant`` of ``x`` into ``y``: ``M = s_in / s_out``, clamped to ``[lo, hi]``."""
    x, y = op.inputs[0], op.outputs[0]
    si, zi = qp(ctx.tensors[x])
    so, zo = qp(ctx.tensors[y])
    m, s = quantize_multiplier(si / so)
    fields = {"n": ctx.tensors[y].size, "a_zp": zi, "out_zp": zo, "m": m, "s": s}
    q = requant_record(fields, (lo, hi))
    return block(q, f"k_q_requant(&q, {ctx.p8(x)}, {ctx.p8(y)})")
