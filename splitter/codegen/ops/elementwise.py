"""Element-wise ops: binary add / sub / mul / div, the activations, an unfused batchnorm."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from math import prod

import numpy as np

from splitter.codegen.ops.base import (
    ACT_CODES,
    Q8_ELEMENTWISE,
    EmitContext,
    OpEmitter,
    act_args,
    act_ok,
    act_params,
    act_record,
    block,
    ints,
    pad4,
    q8_act_ok,
    rank4_or_less,
    record,
)
from splitter.codegen.ops.formulas import BATCHNORM_MACS_PER_ELEMENT, Shape, act_macs
from splitter.codegen.ops.literals import c_float
from splitter.codegen.ops.opdef import ALL, F32_NCHW, FLOAT, OpDef, activation
from splitter.codegen.ops.quant import (
    act_range,
    qp,
    quantize_multiplier,
    requant_call,
    requant_record,
)
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
    """``k_binary``: ``a OP b`` broadcast over a rank-4 view, then the fused activation.

    add / sub / mul / div with numpy broadcasting (a constant operand is ``weights["C"]``).

    MACs: one per output element ``+ act``.
    """

    code = ""
    float_checks = (two_operands, act_ok)
    int8_checks = (*Q8_ELEMENTWISE, same_shapes, q8_act_ok)

    def infer_shape(self, op: Op, in_shapes: Sequence[Shape], layout: str) -> Shape:
        shapes = [tuple(s) for s in in_shapes]
        if "C" in op.weights:
            shapes.append(tuple(op.weights["C"].shape))
        return tuple(int(d) for d in np.broadcast_shapes(*shapes))

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return out.size + act_macs(op, out)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        y = op.outputs[0]
        ys = pad4(ctx.shape(y))
        (a, ash), (b, bsh) = _operands(op, ctx)
        rows: list[list[tuple[str, object]]] = [
            [("op", self.code)],
            [("as", f"{{{ints(bcast_strides(ash, ys))}}}")],
            [("bs", f"{{{ints(bcast_strides(bsh, ys))}}}")],
            [("ys", f"{{{ints(ys)}}}")],
            [("act", act_record(op))],
        ]
        params = record("k_binary_params", "p", rows)
        return block(params, f"k_binary(&p, {a}, {b}, {ctx.ptr(y)})")


class _QBinary(_Binary):
    """A binary op with an int8 kernel ``q_fn(&q, a, b, y)``: the operands' and the output's
    zero points, the rescales of :meth:`rescales` and the fused activation's clamp."""

    q_fn = ""

    def rescales(self, sa: float, sb: float, so: float) -> dict[str, int]:
        """The ``k_q_requant_params`` rescale fields of operand scales ``sa``, ``sb`` (float32)
        and output scale ``so``."""
        raise NotImplementedError

    def emit_int8(self, op: Op, ctx: EmitContext) -> list[str]:
        a, b, y = op.inputs[0], op.inputs[1], op.outputs[0]
        (sa, za), (sb, zb) = qp(ctx.tensors[a]), qp(ctx.tensors[b])
        so, zo = qp(ctx.tensors[y])
        fields = {"n": ctx.tensors[y].size, "a_zp": za, "b_zp": zb, "out_zp": zo}
        q = requant_record({**fields, **self.rescales(sa, sb, so)}, act_range(op, ctx.tensors[y]))
        return block(q, f"{self.q_fn}(&q, {ctx.p8(a)}, {ctx.p8(b)}, {ctx.p8(y)})")


class Add(_QBinary):
    """ADD; int8 as reference_integer_ops::Add (inputs shifted left by 20, rescaled):
    ``M_i = s_i / (2 max(s_1, s_2))``, ``M_out = 2 max(s_1, s_2) / (2^20 s_out)`` (add.cc)."""

    # broadcasting binary ops; a constant operand is weights["C"]
    order = 80
    definition = OpDef("add", ("act",), onnx=("Add", "Sum"), tflite=("ADD",), kernels=ALL)
    code = "K_ADD"
    q_fn = "k_q_add"

    def rescales(self, sa: float, sb: float, so: float) -> dict[str, int]:
        twice_max = 2.0 * max(sa, sb)
        (m1, s1), (m2, s2) = (
            quantize_multiplier(sa / twice_max),
            quantize_multiplier(sb / twice_max),
        )
        mo, s_o = quantize_multiplier(twice_max / float(np.float32(2**20) * np.float32(so)))
        return {"a_m": m1, "a_s": s1, "b_m": m2, "b_s": s2, "m": mo, "s": s_o}


class Sub(_Binary):
    """SUB (float only)."""

    order = 90
    definition = OpDef("sub", ("act",), onnx=("Sub",), tflite=("SUB",), kernels=FLOAT)
    code = "K_SUB"


class Mul(_QBinary):
    """MUL; int8 ``M = s_1 s_2 / s_out`` in float32 (mul.cc)."""

    order = 100
    definition = OpDef("mul", ("act",), onnx=("Mul",), tflite=("MUL",), kernels=ALL)
    code = "K_MUL"
    q_fn = "k_q_mul_ew"

    def rescales(self, sa: float, sb: float, so: float) -> dict[str, int]:
        m, s = quantize_multiplier(float(np.float32(sa) * np.float32(sb) / np.float32(so)))
        return {"m": m, "s": s}


class Div(_Binary):
    """DIV (float only)."""

    order = 110
    definition = OpDef("div", ("act",), onnx=("Div",), tflite=("DIV",), kernels=FLOAT)
    code = "K_DIV"


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
        rows: list[list[tuple[str, object]]] = [
            [("n", ctx.tensors[y].size), ("fn", ACT_CODES[op.kind])],
            [("in_scale", c_float(si)), ("in_zp", zi)],
            [("out_inv_scale", c_float(inv)), ("out_zp", zo)],
        ]
        params = record("k_q_float_params", "p", rows)
        return block(params, f"k_q_lut_act(&p, {ctx.p8(x)}, {ctx.p8(y)})")


def _activation(
    name: str, definition: OpDef, base: type[_Activation], formula: str, order: int
) -> type[_Activation]:
    """The op class ``name`` of standalone activation ``definition``: ``formula`` on the float
    path, the int8 path (if any) of ``base``; shape and MACs element-wise (one per element);
    ``order``: its place in ``splitter ops``."""
    ns = {"definition": definition, "__doc__": formula, "__module__": __name__, "order": order}
    return type(name, (base,), ns)


Relu = _activation(
    "Relu",
    activation("relu", onnx=("Relu", "Clip"), tflite=("RELU",), kernels=ALL),
    _ClampActivation,
    "``max(x, 0)``.",
    130,
)
Relu6 = _activation(
    "Relu6",
    activation("relu6", onnx=("Clip",), tflite=("RELU6",), kernels=ALL),
    _ClampActivation,
    "``min(max(x, 0), 6)``.",
    140,
)
Clip = _activation(
    "Clip",
    activation("clip", ("act_min", "act_max"), onnx=("Clip",), tflite=("RELU_N1_TO_1",)),
    _Activation,
    "``min(max(x, act_min), act_max)``.",
    150,
)
LeakyRelu = _activation(
    "LeakyRelu",
    activation("leaky_relu", ("alpha",), onnx=("LeakyRelu", "PRelu"), tflite=("LEAKY_RELU",)),
    _Activation,
    "``x if x > 0 else alpha * x``.",
    160,
)
Sigmoid = _activation(
    "Sigmoid",
    activation("sigmoid", onnx=("Sigmoid",), tflite=("LOGISTIC",), kernels=ALL),
    _LutActivation,
    "``1 / (1 + exp(-x))``.",
    170,
)
Tanh = _activation(
    "Tanh",
    activation("tanh", onnx=("Tanh",), tflite=("TANH",), kernels=ALL),
    _LutActivation,
    "``tanh(x)``.",
    180,
)
HardSwish = _activation(
    "HardSwish",
    activation("hardswish", onnx=("HardSwish",), tflite=("HARD_SWISH",)),
    _Activation,
    "``x * clip(x / 6 + 1/2, 0, 1)``.",
    190,
)
HardSigmoid = _activation(
    "HardSigmoid",
    activation("hardsigmoid", ("alpha", "beta"), onnx=("HardSigmoid",)),
    _Activation,
    "``clip(alpha * x + beta, 0, 1)``.",
    200,
)
Erf = _activation(
    "Erf", activation("erf", onnx=("Erf",)), _Activation, "``erf(x)`` (``k_erff``).", 210
)
Gelu = _activation(
    "Gelu",
    activation("gelu", onnx=("Gelu",)),
    _Activation,
    "``x / 2 * (1 + erf(x / sqrt 2))``.",
    220,
)
GeluTanh = _activation(
    "GeluTanh",
    activation("gelu_tanh", onnx=("Gelu",)),
    _Activation,
    "``x / 2 * (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3)))``.",
    230,
)


def scale_and_shift(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Constants ``scale`` and ``shift`` and an input with a channel axis."""
    if "scale" not in op.weights or "shift" not in op.weights:
        return "batchnorm needs weights scale and shift"
    if len(tensors[op.inputs[0]].shape) < 2:
        return "batchnorm input without a channel axis"
    return None


class BatchNorm(OpEmitter):
    """``y[c] = x[c] * scale[c] + shift[c]`` over axis 1; a fused activation runs in place.

    Unfused batchnorm ``x*scale + shift``: :data:`BATCHNORM_MACS_PER_ELEMENT` per element
    ``+ act``.
    """

    # y = x * weights["scale"] + weights["shift"] per channel (axis 1; an unfused BN)
    order = 260
    definition = OpDef(
        "batchnorm", ("act",), onnx=("BatchNormalization",), kernels=frozenset({F32_NCHW})
    )
    float_checks = (scale_and_shift, act_ok)

    def macs(self, op: Op, ins: Sequence[TensorSpec], out: TensorSpec) -> int:
        return BATCHNORM_MACS_PER_ELEMENT * out.size + act_macs(op, out)

    def emit_float(self, op: Op, ctx: EmitContext) -> list[str]:
        x, y = op.inputs[0], op.outputs[0]
        shape = ctx.shape(x)
        c, hw = shape[1], prod(shape[2:])
        sc, sh = ctx.const(op, "scale"), ctx.const(op, "shift")
        lines = [f"k_batchnorm({ctx.ptr(x)}, {c}, {hw}, {sc}, {sh}, {ctx.ptr(y)});"]
        if op.attr("act") is not None:
            lines.append(f"k_act({ctx.ptr(y)}, {ctx.ptr(y)}, {prod(shape)}, {act_args(op)});")
        return lines
