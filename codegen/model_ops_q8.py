"""C emitters of the int8 (full-integer TFLite) ops, calling ``kernels_q8.c`` (NHWC, batch 1).

Same shape as :mod:`codegen.model_ops`: :data:`Q8_EMITTERS` maps a canonical op kind to a
``check(op, tensors) -> reason | None`` list and an ``emit(op, ctx) -> list[str]``. An op is
quantised (:func:`is_quantised`) when any of its activations is int8.

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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from math import prod

import numpy as np

from codegen.model_ops import EmitContext, _ints, _pad4, ohwi
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


def _round_away(x: float) -> int:
    """std::round: half away from zero."""
    return math.floor(abs(x) + 0.5) * (1 if x >= 0 else -1)


def _qp(spec: TensorSpec) -> tuple[float, int]:
    """(scale as float32, zero point) of a per-tensor quantised tensor."""
    assert spec.quant is not None
    return float(np.float32(spec.quant.scale[0])), int(spec.quant.zero_point[0])


def act_range(op: Op, out: TensorSpec, act: str | None = None) -> tuple[int, int]:
    """int8 clamp of a fused activation: ``zp + round(f / scale)`` (float32 division)."""
    scale, zp = _qp(out)
    act = op.attr("act") if act is None else act

    def quant(f: float) -> int:
        return zp + _round_away(float(np.float32(f) / np.float32(scale)))

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


def is_quantised(op: Op, tensors: Mapping[str, TensorSpec]) -> bool:
    """True when any activation of ``op`` is int8 (the op runs on the int8 kernels)."""
    return any(tensors[n].dtype == "int8" for n in (*op.inputs, *op.outputs) if n in tensors)


# ------------------------------------------------------------------------- checks ----


def _per_tensor_int8(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    for name in (*op.inputs, *op.outputs):
        spec = tensors[name]
        if spec.dtype not in ("int8", "float32"):
            return f"tensor {name} is {spec.dtype} (int8 and float32 only)"
        if spec.dtype == "int8" and (spec.quant is None or len(spec.quant.scale) != 1):
            return f"int8 tensor {name} is not quantised per tensor"
    return None


def _all_int8(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    for name in (*op.inputs, *op.outputs):
        if tensors[name].dtype != "int8":
            return f"tensor {name} is {tensors[name].dtype} in an int8 op"
    return None


def _act_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if op.attr("act") not in (None, "relu", "relu6", "clip"):
        return f"fused activation {op.attr('act')!r} on an int8 op"
    return None


def _weights_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    w = op.weights.get("W")
    if w is None or np.asarray(w).dtype != np.int8:
        return "int8 op needs int8 weights W"
    scales = op.attr("w_scale") or ()
    if len(scales) not in (1, np.asarray(w).shape[0]):
        return f"{len(scales)} weight scales for {np.asarray(w).shape[0]} output channels"
    if any(int(z) != 0 for z in op.attr("w_zero_point") or ()):
        return "non-zero weight zero points"
    b = op.weights.get("B")
    if b is not None and np.asarray(b).dtype != np.int32:
        return f"bias is {np.asarray(b).dtype} (int32 only)"
    if set(op.weights) - {"W", "B"}:
        return f"unexpected constants {sorted(set(op.weights) - {'W', 'B'})}"
    return None


def _no_weights(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    return f"constant operand {sorted(op.weights)} of an int8 op" if op.weights else None


def _same_shapes(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if len(op.inputs) != 2:
        return "int8 binary op needs two activation operands"
    shapes = {tensors[n].shape for n in (*op.inputs, *op.outputs)}
    return None if len(shapes) == 1 else f"broadcast {sorted(shapes)} (same shapes only)"


def _same_quant(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    quants = {tensors[n].quant for n in (*op.inputs, *op.outputs)}
    return None if len(quants) == 1 else "inputs and output quantised differently"


def _rank4(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    for name in (op.inputs[0], op.outputs[0]):
        shape = tensors[name].shape
        if len(shape) != 4 or shape[0] != 1:
            return f"tensor {name} shape {shape} is not NHWC with batch 1"
    return None


def _mean_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    rank = len(tensors[op.inputs[0]].shape)
    axes = sorted(int(a) % rank for a in op.attr("axes", range(rank)))
    if axes != list(range(axes[0], axes[-1] + 1)):
        return f"mean over non-contiguous axes {axes}"
    return None


def _softmax_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    shape = tensors[op.inputs[0]].shape
    if int(op.attr("axis", -1)) % len(shape) != len(shape) - 1:
        return "int8 softmax over an axis other than the last"
    return None


def _quantize_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if tensors[op.outputs[0]].dtype != "int8":
        return f"quantize to {tensors[op.outputs[0]].dtype} (int8 only)"
    return None


def _dequantize_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    x, y = tensors[op.inputs[0]], tensors[op.outputs[0]]
    if x.dtype != "int8" or y.dtype != "float32":
        return f"dequantize {x.dtype} -> {y.dtype} (int8 -> float32 only)"
    return None


def _pad_ok(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    if any(int(p) < 0 for p in op.attr("pads", ())):
        return "negative pads (cropping)"
    if len(tensors[op.inputs[0]].shape) > 4:
        return "pad of rank > 4"
    return None


# -------------------------------------------------------------------------- emitters ----


def _p(ctx: EmitContext, name: str) -> str:
    """``(int8_t *)(A8 + <byte offset>)`` of activation ``name``."""
    return f"(int8_t *)(A8 + {ctx.offsets[name]})"


def _fp(ctx: EmitContext, name: str) -> str:
    """``(void *)(A8 + <byte offset>)`` of a float activation (any alignment)."""
    return f"(void *)(A8 + {ctx.offsets[name]})"


def _requant_arrays(op: Op, ctx: EmitContext) -> tuple[str, str, int]:
    """C names of the per-channel multiplier / shift arrays and their length."""
    in_scale, _ = _qp(ctx.tensors[op.inputs[0]])
    out_scale, _ = _qp(ctx.tensors[op.outputs[0]])
    pairs = [
        quantize_multiplier(float(in_scale) * float(np.float32(ws)) / float(out_scale))
        for ws in op.attr("w_scale")
    ]
    mult = ctx.weights.add(f"{op.name}_mult", np.array([m for m, _ in pairs]), np.int32)
    shift = ctx.weights.add(f"{op.name}_shift", np.array([s for _, s in pairs]), np.int32)
    return mult, shift, len(pairs)


def _bias(op: Op, ctx: EmitContext) -> str:
    return ctx.weights.add(f"{op.name}_B", op.weights["B"], np.int32) if "B" in op.weights else "0"


def gemm_rounding(op: Op) -> int:
    """1 when LiteRT runs ``op`` as a GEMM (ruy: conv with groups == 1, fully connected), whose
    requantisation rounds ties upward (``k_q_mul_up``); 0 for its direct kernels (depthwise),
    which round ties away from zero as tflite::MultiplyByQuantizedMultiplier."""
    return 1 if op.kind == "dense" or int(op.attr("groups", 1)) == 1 else 0


def _emit_conv(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    _, h, w, c = ctx.shape(x)
    _, oh, ow, o = ctx.shape(y)
    _, in_zp = _qp(ctx.tensors[x])
    _, out_zp = _qp(ctx.tensors[y])
    wt = np.asarray(op.weights["W"])
    wn = ctx.weights.add(f"{op.name}_W", ohwi(wt), np.int8)
    bn = _bias(op, ctx)
    mult, shift, nq = _requant_arrays(op, ctx)
    kh, kw = wt.shape[2:]
    sh, sw = op.attr("strides", (1, 1))
    pads = op.attr("pads", (0, 0, 0, 0))
    dh, dw = op.attr("dilations", (1, 1))
    geo = _ints((kh, kw, sh, sw, pads[0], pads[1], dh, dw, int(op.attr("groups", 1))))
    lo, hi = act_range(op, ctx.tensors[y])
    return [
        f"k_q_conv2d({_p(ctx, x)}, {h}, {w}, {c}, {in_zp}, {wn}, {bn}, {_p(ctx, y)}, {oh}, "
        f"{ow}, {o}, {geo}, {mult}, {shift}, {nq}, {gemm_rounding(op)}, {out_zp}, {lo}, {hi});"
    ]


def _emit_dense(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    wt = np.asarray(op.weights["W"])
    out, inn = wt.shape
    _, in_zp = _qp(ctx.tensors[x])
    _, out_zp = _qp(ctx.tensors[y])
    wn = ctx.weights.add(f"{op.name}_W", wt, np.int8)
    bn = _bias(op, ctx)
    mult, shift, nq = _requant_arrays(op, ctx)
    lo, hi = act_range(op, ctx.tensors[y])
    return [
        f"k_q_dense({_p(ctx, x)}, {inn}, {in_zp}, {wn}, {bn}, {_p(ctx, y)}, {out}, {mult}, "
        f"{shift}, {nq}, {gemm_rounding(op)}, {out_zp}, {lo}, {hi});"
    ]


def _emit_add(op: Op, ctx: EmitContext) -> list[str]:
    a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
    (sa, za), (sb, zb) = _qp(ctx.tensors[a]), _qp(ctx.tensors[b])
    so, zo = _qp(ctx.tensors[y])
    twice_max = 2.0 * max(sa, sb)
    m1, s1 = quantize_multiplier(sa / twice_max)
    m2, s2 = quantize_multiplier(sb / twice_max)
    mo, s_o = quantize_multiplier(twice_max / float(np.float32(2**20) * np.float32(so)))
    lo, hi = act_range(op, ctx.tensors[y])
    n = ctx.tensors[y].size
    return [
        f"k_q_add({_p(ctx, a)}, {za}, {m1}, {s1}, {_p(ctx, b)}, {zb}, {m2}, {s2}, "
        f"{_p(ctx, y)}, {n}, {mo}, {s_o}, {zo}, {lo}, {hi});"
    ]


def _emit_mul(op: Op, ctx: EmitContext) -> list[str]:
    a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
    (sa, za), (sb, zb) = _qp(ctx.tensors[a]), _qp(ctx.tensors[b])
    so, zo = _qp(ctx.tensors[y])
    m, s = quantize_multiplier(float(np.float32(sa) * np.float32(sb) / np.float32(so)))
    lo, hi = act_range(op, ctx.tensors[y])
    n = ctx.tensors[y].size
    return [
        f"k_q_mul_ew({_p(ctx, a)}, {za}, {_p(ctx, b)}, {zb}, {_p(ctx, y)}, {n}, {m}, {s}, "
        f"{zo}, {lo}, {hi});"
    ]


def _requant_call(op: Op, ctx: EmitContext, lo: int, hi: int) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    si, zi = _qp(ctx.tensors[x])
    so, zo = _qp(ctx.tensors[y])
    m, s = quantize_multiplier(si / so)
    n = ctx.tensors[y].size
    return [f"k_q_requant({_p(ctx, x)}, {zi}, {_p(ctx, y)}, {n}, {m}, {s}, {zo}, {lo}, {hi});"]


def _emit_relu_like(op: Op, ctx: EmitContext) -> list[str]:
    lo, hi = act_range(op, ctx.tensors[op.outputs[0]], act=op.kind)
    return _requant_call(op, ctx, lo, hi)


def _pool_args(op: Op, ctx: EmitContext) -> str:
    x, y = op.inputs[0], op.outputs[0]
    _, h, w, c = ctx.shape(x)
    _, oh, ow, _ = ctx.shape(y)
    kh, kw = op.attr("kernel")
    sh, sw = op.attr("strides", (1, 1))
    pt, pl = op.attr("pads", (0, 0, 0, 0))[:2]
    lo, hi = act_range(op, ctx.tensors[y])
    return (
        f"{_p(ctx, x)}, {h}, {w}, {c}, {_p(ctx, y)}, {oh}, {ow}, "
        f"{_ints((kh, kw, sh, sw, pt, pl, lo, hi))}"
    )


def _emit_maxpool(op: Op, ctx: EmitContext) -> list[str]:
    return [f"k_q_maxpool({_pool_args(op, ctx)});"]


def _emit_avgpool(op: Op, ctx: EmitContext) -> list[str]:
    return [f"k_q_avgpool({_pool_args(op, ctx)});"]


def mean_multiplier(in_scale: float, out_scale: float, n: int) -> tuple[int, int]:
    """``(m, s)`` of MEAN over ``n`` elements (QuantizedMeanOrSum, ``1/n`` folded in)."""
    m, s = quantize_multiplier(in_scale / out_scale)
    shift = min(n.bit_length() - 1, 32, 31 + s)
    return (m << shift) // n, s - shift


def _emit_mean(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    shape = ctx.shape(x)
    rank = len(shape)
    axes = sorted(int(a) % rank for a in op.attr("axes", range(rank)))
    outer, red = prod(shape[: axes[0]]), prod(shape[axes[0] : axes[-1] + 1])
    inner = prod(shape[axes[-1] + 1 :])
    si, zi = _qp(ctx.tensors[x])
    so, zo = _qp(ctx.tensors[y])
    m, s = mean_multiplier(si, so, red)
    return [f"k_q_mean({_p(ctx, x)}, {outer}, {red}, {inner}, {zi}, {_p(ctx, y)}, {m}, {s}, {zo});"]


def _c_float(v: float) -> str:
    text = f"{float(np.float32(v)):.9g}"
    return text + ("f" if "." in text or "e" in text else ".0f")


def _emit_lut_act(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    si, zi = _qp(ctx.tensors[x])
    so, zo = _qp(ctx.tensors[y])
    fn = "K_ACT_TANH" if op.kind == "tanh" else "K_ACT_SIGMOID"
    inv = float(np.float32(1.0) / np.float32(so))
    n = ctx.tensors[y].size
    return [
        f"k_q_lut_act({_p(ctx, x)}, {_p(ctx, y)}, {n}, {fn}, {_c_float(si)}, {zi}, "
        f"{_c_float(inv)}, {zo});"
    ]


def _emit_softmax(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    shape = ctx.shape(x)
    si, _ = _qp(ctx.tensors[x])
    so, zo = _qp(ctx.tensors[y])
    beta = float(np.float32(si) * np.float32(op.attr("beta", 1.0)))
    n = shape[-1]
    return [
        f"k_q_softmax({_p(ctx, x)}, {prod(shape) // n}, {n}, {_c_float(beta)}, {_p(ctx, y)}, "
        f"{_c_float(so)}, {zo});"
    ]


def _emit_pad(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    rank = len(ctx.shape(x))
    begins = [0] * (4 - rank) + [int(p) for p in op.attr("pads")[:rank]]
    so, zo = _qp(ctx.tensors[y])
    value = zo + _round_away(float(np.float32(op.attr("value", 0.0)) / np.float32(so)))
    return [
        "{",
        f"    static const int xs[4] = {{{_ints(_pad4(ctx.shape(x)))}}};",
        f"    static const int ys[4] = {{{_ints(_pad4(ctx.shape(y)))}}};",
        f"    static const int bg[4] = {{{_ints(begins)}}};",
        f"    k_q_pad({_p(ctx, x)}, xs, {_p(ctx, y)}, ys, bg, {max(Q_MIN, min(Q_MAX, value))});",
        "}",
    ]


def _emit_concat(op: Op, ctx: EmitContext) -> list[str]:
    y = op.outputs[0]
    ys = ctx.shape(y)
    axis = int(op.attr("axis", 1)) % len(ys)
    outer, ytot, lines, yoff = prod(ys[:axis]), prod(ys[axis:]), [], 0
    for name in op.inputs:
        xn = prod(ctx.shape(name)[axis:])
        lines.append(
            f"k_q_concat_part({_p(ctx, name)}, {outer}, {xn}, {_p(ctx, y)}, {ytot}, {yoff});"
        )
        yoff += xn
    return lines


def _emit_reshape(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    if ctx.offsets[x] == ctx.offsets[y]:
        return [f"/* {op.name}: reshape, zero-copy */"]
    return [f"k_q_copy({_p(ctx, x)}, {_p(ctx, y)}, {ctx.tensors[x].size}); /* reshape */"]


def _emit_quantize(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    if ctx.tensors[x].dtype == "int8":
        return _requant_call(op, ctx, Q_MIN, Q_MAX)
    so, zo = _qp(ctx.tensors[y])
    n = ctx.tensors[y].size
    return [f"k_q_quantize({_fp(ctx, x)}, {_p(ctx, y)}, {n}, {float(so)!r}, {zo});"]


def _emit_dequantize(op: Op, ctx: EmitContext) -> list[str]:
    x, y = op.inputs[0], op.outputs[0]
    si, zi = _qp(ctx.tensors[x])
    n = ctx.tensors[y].size
    return [f"k_q_dequantize({_p(ctx, x)}, {_fp(ctx, y)}, {n}, {_c_float(si)}, {zi});"]


Check = Callable[[Op, Mapping[str, TensorSpec]], "str | None"]
Emit = Callable[[Op, EmitContext], list[str]]


@dataclass(frozen=True)
class Q8Handler:
    """How one quantised op kind is checked and emitted."""

    emit: Emit
    checks: tuple[Check, ...] = ()


_ELEMENTWISE = (_all_int8, _no_weights)

#: Canonical op kind -> int8 handler (kinds absent here have no int8 kernel).
Q8_EMITTERS: Mapping[str, Q8Handler] = {
    "conv2d": Q8Handler(_emit_conv, (_all_int8, _weights_ok, _act_ok, _rank4)),
    "dense": Q8Handler(_emit_dense, (_all_int8, _weights_ok, _act_ok)),
    "add": Q8Handler(_emit_add, (*_ELEMENTWISE, _same_shapes, _act_ok)),
    "mul": Q8Handler(_emit_mul, (*_ELEMENTWISE, _same_shapes, _act_ok)),
    "maxpool": Q8Handler(_emit_maxpool, (*_ELEMENTWISE, _same_quant, _rank4, _act_ok)),
    "avgpool": Q8Handler(_emit_avgpool, (*_ELEMENTWISE, _same_quant, _rank4, _act_ok)),
    "mean": Q8Handler(_emit_mean, (*_ELEMENTWISE, _mean_ok)),
    **{k: Q8Handler(_emit_relu_like, _ELEMENTWISE) for k in ("relu", "relu6")},
    **{k: Q8Handler(_emit_lut_act, _ELEMENTWISE) for k in ("tanh", "sigmoid")},
    "softmax": Q8Handler(_emit_softmax, (*_ELEMENTWISE, _softmax_ok)),
    "pad": Q8Handler(_emit_pad, (*_ELEMENTWISE, _pad_ok)),
    "concat": Q8Handler(_emit_concat, (*_ELEMENTWISE, _same_quant)),
    "reshape": Q8Handler(_emit_reshape, _ELEMENTWISE),
    "quantize": Q8Handler(_emit_quantize, (_no_weights, _quantize_ok)),
    "dequantize": Q8Handler(_emit_dequantize, (_no_weights, _dequantize_ok)),
}


def check(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Why the int8 kernels cannot run ``op`` (``None`` when they can)."""
    handler = Q8_EMITTERS.get(op.kind)
    if handler is None:
        return "no int8 kernel for this op kind"
    for chk in (_per_tensor_int8, *handler.checks):
        reason = chk(op, tensors)
        if reason:
            return reason
    return None


def emit(op: Op, ctx: EmitContext) -> list[str]:
    """The C statements running quantised ``op`` with its tensors at ``ctx.offsets``."""
    return [f"/* {op.name}: {op.kind} (int8) */", *Q8_EMITTERS[op.kind].emit(op, ctx)]
