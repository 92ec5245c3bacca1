"""Element-wise ops: binary add / sub / mul / div, the activations, an unfused batchnorm."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod

import numpy as np

from codegen.ops.base import (
    ACT_CODES,
    Q8_ELEMENTWISE,
    EmitContext,
    OpEmitter,
    act_args,
    act_ok,
    act_params,
    ints,
    pad4,
    q8_act_ok,
    rank4_or_less,
)
from codegen.ops.literals import c_float
from codegen.ops.quant import act_range, qp, quantize_multiplier, requant_call
from splitter.ir import Op, TensorSpec


def bcast_strides(shape: Sequence[int], out: Sequence[int]) -> list[int]:
    """Element strides of ``shape`` broadcast to rank-4 ``out`` (0 on broadcast axes)."""
    s = pad4(shape)
    strides, acc = [0, 0, 0, 0], 1
    for d in range(3, -1, -1):
        strides[d] = 0 if s[d] == 1 and out[d] != 1 else acc
        acc *= s[d]
    return strides


def _operands(op: Op, ctx: EmitContext) -> list[tuple[str, tuple[int, ...]]]:
    """(C pointer, shape) of both operands in order; a constant is weights['C']."""
    acts = [(ctx.ptr(n), ctx.shape(n)) for n in op.inputs]
    if len(acts) == 2:
        return acts
    cval = np.asarray(op.weights["C"], dtype=np.float32)
    const = (ctx.const(op, "C"), tuple(int(d) for d in cval.shape))
    return [const, acts[0]] if op.attr("const_first", False) else [acts[0], const]


def two_operands(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Two activations, or one and a constant ``weights['C']`` of rank <= 4."""
    if len(op.inputs) == 1 and "C" not in op.weights:
        return "one activation operand and no constant weights['C']"
    if "C" in op.weights and np.asarray(op.weights["C"]).ndim > 4:
        return "constant operand of rank > 4"
    return rank4_or_less(op, tensors)


def same_shapes(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Two activation operands and an output of one shape (the int8 kernels do not broadcast)."""
    if len(op.inputs) != 2:
        return "int8 binary op needs two activation operands"
    shapes = {tensors[n].shape for n in (*op.inputs, *op.outputs)}
    return None if len(shapes) == 1 else f"broadcast {sorted(shapes)} (same shapes only)"


class _Binary(OpEmitter):
    """``k_binary``: ``a OP b`` broadcast over a rank-4 view, then the fused activation."""

    code = ""
    float_checks = (two_operands, act_ok)
    int8_checks = (*Q8_ELEMENTWISE, same_shapes, q8_act_ok)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        y = op.outputs[0]
        ys = pad4(ctx.shape(y))
        (a, ash), (b, bsh) = _operands(op, ctx)
        return [
            "{",
            f"    static const int as[4] = {{{ints(bcast_strides(ash, ys))}}};",
            f"    static const int bs[4] = {{{ints(bcast_strides(bsh, ys))}}};",
            f"    static const int ys[4] = {{{ints(ys)}}};",
            f"    k_binary({self.code}, {a}, as, {b}, bs, {ctx.ptr(y)}, ys, {act_args(op)});",
            "}",
        ]


class Add(_Binary):
    """ADD; int8 as reference_integer_ops::Add (inputs shifted left by 20, rescaled)."""

    kind, code = "add", "K_ADD"

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        (sa, za), (sb, zb) = qp(ctx.tensors[a]), qp(ctx.tensors[b])
        so, zo = qp(ctx.tensors[y])
        twice_max = 2.0 * max(sa, sb)
        m1, s1 = quantize_multiplier(sa / twice_max)
        m2, s2 = quantize_multiplier(sb / twice_max)
        mo, s_o = quantize_multiplier(twice_max / float(np.float32(2**20) * np.float32(so)))
        lo, hi = act_range(op, ctx.tensors[y])
        n = ctx.tensors[y].size
        return [
            f"k_q_add({ctx.p8(a)}, {za}, {m1}, {s1}, {ctx.p8(b)}, {zb}, {m2}, {s2}, "
            f"{ctx.p8(y)}, {n}, {mo}, {s_o}, {zo}, {lo}, {hi});"
        ]


class Sub(_Binary):
    """SUB (float only)."""

    kind, code = "sub", "K_SUB"


class Mul(_Binary):
    """MUL; int8 ``M = s_1 s_2 / s_out`` in float32 (mul.cc)."""

    kind, code = "mul", "K_MUL"

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        (sa, za), (sb, zb) = qp(ctx.tensors[a]), qp(ctx.tensors[b])
        so, zo = qp(ctx.tensors[y])
        m, s = quantize_multiplier(float(np.float32(sa) * np.float32(sb) / np.float32(so)))
        lo, hi = act_range(op, ctx.tensors[y])
        n = ctx.tensors[y].size
        return [
            f"k_q_mul_ew({ctx.p8(a)}, {za}, {ctx.p8(b)}, {zb}, {ctx.p8(y)}, {n}, {m}, {s}, "
            f"{zo}, {lo}, {hi});"
        ]


class Div(_Binary):
    """DIV (float only)."""

    kind, code = "div", "K_DIV"


class _Activation(OpEmitter):
    """A standalone activation: ``k_act(x, y, n, K_ACT_<kind>, p0, p1)``."""

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        p0, p1 = act_params(op, op.kind)
        n = ctx.tensors[x].size
        return [
            f"k_act({ctx.ptr(x)}, {ctx.ptr(y)}, {n}, {ACT_CODES[op.kind]}, {c_float(p0)}, "
            f"{c_float(p1)});"
        ]


class _ClampActivation(_Activation):
    """relu / relu6 in int8: a requantisation clamped to the activation's range (ReluX)."""

    int8_checks = Q8_ELEMENTWISE

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        lo, hi = act_range(op, ctx.tensors[op.outputs[0]], act=op.kind)
        return requant_call(op, ctx, lo, hi)


class _LutActivation(_Activation):
    """tanh / sigmoid in int8: dequantise, the float function, requantise (``k_q_lut_act``)."""

    int8_checks = Q8_ELEMENTWISE

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        si, zi = qp(ctx.tensors[x])
        so, zo = qp(ctx.tensors[y])
        inv = float(np.float32(1.0) / np.float32(so))
        n = ctx.tensors[y].size
        return [
            f"k_q_lut_act({ctx.p8(x)}, {ctx.p8(y)}, {n}, {ACT_CODES[op.kind]}, {c_float(si)}, "
            f"{zi}, {c_float(inv)}, {zo});"
        ]


class Relu(_ClampActivation):
    """``max(x, 0)``."""

    kind = "relu"


class Relu6(_ClampActivation):
    """``min(max(x, 0), 6)``."""

    kind = "relu6"


class Clip(_Activation):
    """``min(max(x, act_min), act_max)``."""

    kind = "clip"


class LeakyRelu(_Activation):
    """``x if x > 0 else alpha * x``."""

    kind = "leaky_relu"


class Sigmoid(_LutActivation):
    """``1 / (1 + exp(-x))``."""

    kind = "sigmoid"


class Tanh(_LutActivation):
    """``tanh(x)``."""

    kind = "tanh"


class HardSwish(_Activation):
    """``x * clip(x / 6 + 1/2, 0, 1)``."""

    kind = "hardswish"


class HardSigmoid(_Activation):
    """``clip(alpha * x + beta, 0, 1)``."""

    kind = "hardsigmoid"


def scale_and_shift(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Constants ``scale`` and ``shift`` and an input with a channel axis."""
    if "scale" not in op.weights or "shift" not in op.weights:
        return "batchnorm needs weights scale and shift"
    if len(tensors[op.inputs[0]].shape) < 2:
        return "batchnorm input without a channel axis"
    return None


class BatchNorm(OpEmitter):
    """``y[c] = x[c] * scale[c] + shift[c]`` over axis 1; a fused activation runs in place."""

    kind = "batchnorm"
    float_checks = (scale_and_shift, act_ok)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        shape = ctx.shape(x)
        c, hw = shape[1], prod(shape[2:])
        sc, sh = ctx.const(op, "scale"), ctx.const(op, "shift")
        lines = [f"k_batchnorm({ctx.ptr(x)}, {c}, {hw}, {sc}, {sh}, {ctx.ptr(y)});"]
        if op.attr("act") is not None:
            lines.append(f"k_act({ctx.ptr(y)}, {ctx.ptr(y)}, {prod(shape)}, {act_args(op)});")
        return lines
