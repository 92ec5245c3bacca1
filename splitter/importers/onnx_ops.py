"""One converter per ONNX op type, mapping a node to canonical :class:`~splitter.ir.Op` values.

Each converter takes an :class:`OnnxNode` and the :class:`ImportContext` and returns the ops it
becomes, or raises :class:`Unsupported` with the reason (the importer collects every reason and
reports them together). :data:`CONVERTERS` is the one table of supported op types. Semantics
follow the ONNX operator specification (https://onnx.ai/onnx/operators/); the canonical forms are
those of :data:`splitter.ops.OP_KINDS`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from splitter.codegen.ops.opdef import SourceUnsupported
from splitter.errors import ShapeError, quoted
from splitter.importers.onnx_nodes import ImportContext, OnnxNode, Unsupported
from splitter.ir import Op

Converter = Callable[[OnnxNode, ImportContext], list[Op]]


def make_op(
    node: OnnxNode,
    kind: str,
    inputs: tuple[str, ...],
    attrs: Mapping[str, Any] | None = None,
    weights: Mapping[str, np.ndarray] | None = None,
) -> list[Op]:
    """The single op ``node`` becomes, writing its first output and named after it."""
    return [
        Op(
            name=node.name,
            kind=kind,
            inputs=inputs,
            outputs=(node.outputs[0],),
            attrs=dict(attrs or {}),
            weights=dict(weights or {}),
            source_nodes=(node.name,),
        )
    ]


def activation_inputs(node: OnnxNode, ctx: ImportContext) -> tuple[str, ...]:
    """The present, non-constant inputs of ``node``."""
    return tuple(i for i in node.inputs if i and not ctx.is_const(i))


def _single_input(node: OnnxNode, ctx: ImportContext) -> str:
    """The data input (input 0), which must be an activation."""
    x = node.inputs[0]
    if ctx.is_const(x):
        raise Unsupported("data input is a constant")
    return x


def _unused_extra_outputs(node: OnnxNode, ctx: ImportContext) -> None:
    """Reject nodes whose optional extra outputs (MaxPool indices, BN stats...) are consumed."""
    extra = [o for o in node.outputs[1:] if o and o in ctx.consumed]
    if extra:
        raise Unsupported(f"optional output(s) {', '.join(extra)} are used")


# --- convolution and pooling geometry -----------------------------------------------------------


def explicit_pads(
    node: OnnxNode,
    in_hw: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
) -> tuple[int, int, int, int]:
    """``(top, left, bottom, right)`` pads from ``pads`` or ``auto_pad``.

    ONNX Conv/pool spec: ``pads`` is ``(x1_begin, x2_begin, x1_end, x2_end)``. For ``SAME_*``
    ``out = ceil(in / s)`` and ``total = max(0, (out - 1) * s + (k - 1) * d + 1 - in)``; the odd
    pixel goes at the end for ``SAME_UPPER`` and at the beginning for ``SAME_LOWER``.
    """
    auto_pad = node.attr("auto_pad", "NOTSET")
    if auto_pad in ("NOTSET", ""):
        pads = tuple(int(p) for p in node.attr("pads", (0, 0, 0, 0)))
        return (pads[0], pads[1], pads[2], pads[3])
    if auto_pad == "VALID":
        return (0, 0, 0, 0)
    if auto_pad not in ("SAME_UPPER", "SAME_LOWER"):
        raise Unsupported(f"auto_pad={auto_pad}")
    begins, ends = [], []
    for size, k, s, d in zip(in_hw, kernel, strides, dilations, strict=True):
        total = max(0, (math.ceil(size / s) - 1) * s + (k - 1) * d + 1 - size)
        small, big = total // 2, total - total // 2
        begins.append(small if auto_pad == "SAME_UPPER" else big)
        ends.append(big if auto_pad == "SAME_UPPER" else small)
    return (begins[0], begins[1], ends[0], ends[1])


def check_features(node: OnnxNode, ctx: ImportContext, x: str, got: int, want: int) -> None:
    """ShapeError when input ``x`` has ``got`` channels/features but the weights need ``want``."""
    if got != want:
        raise ShapeError(
            f"{ctx.path}: {node.label}: input {quoted(x)} has {got} channels/features but the "
            f"weights expect {want}; fix --input-shape or the model"
        )


def _spatial(node: OnnxNode, ctx: ImportContext, x: str) -> tuple[int, int]:
    """``(H, W)`` of an NCHW input; only 2-D spatial ops are supported."""
    shape = ctx.shape(x)
    if len(shape) != 4:
        raise Unsupported(f"only 2-D (NCHW) inputs are supported, got rank {len(shape)}")
    return (shape[2], shape[3])


def conv(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Conv -> conv2d; ``W`` is already ``(O, I/groups, kh, kw)``, optional 1-D bias ``B``."""
    x = _single_input(node, ctx)
    w = ctx.const(node.inputs[1])
    in_hw = _spatial(node, ctx, x)
    kernel = tuple(int(k) for k in node.attr("kernel_shape", w.shape[2:]))
    strides = tuple(int(s) for s in node.attr("strides", (1, 1)))
    dilations = tuple(int(d) for d in node.attr("dilations", (1, 1)))
    groups = int(node.attr("group", 1))
    check_features(node, ctx, x, ctx.shape(x)[1], w.shape[1] * groups)
    weights = {"W": w}
    if node.input(2):
        weights["B"] = ctx.const(node.inputs[2]).reshape(-1)
    attrs = {
        "kernel": kernel,
        "strides": strides,
        "pads": explicit_pads(node, in_hw, kernel, strides, dilations),
        "dilations": dilations,
        "groups": groups,
        "act": None,
    }
    return make_op(node, "conv2d", (x,), attrs, weights)


def _pool_geometry(
    node: OnnxNode, ctx: ImportContext, x: str
) -> tuple[tuple[int, int], tuple[int, int], tuple[int, int, int, int]]:
    """``(kernel, strides, pads)`` of MaxPool/AveragePool, with ``ceil_mode`` as extra end pads.

    ``ceil_mode=1`` gives ``out = ceil((in + pads - k) / s) + 1``; padding the end by
    ``(out - 1) * s + k - (in + pads)`` makes the floor formula give the same ``out`` (the
    output shape comes from shape inference).
    """
    in_hw = _spatial(node, ctx, x)
    kernel = tuple(int(k) for k in node.attr("kernel_shape"))
    strides = tuple(int(s) for s in node.attr("strides", (1, 1)))
    if any(int(d) != 1 for d in node.attr("dilations", (1, 1))):
        raise Unsupported("dilated pooling")
    top, left, bottom, right = explicit_pads(node, in_hw, kernel, strides, (1, 1))
    if int(node.attr("ceil_mode", 0)):
        out_hw = ctx.shape(node.outputs[0])[2:]
        extra = [
            max(0, (o - 1) * s + k - (i + b + e))
            for o, s, k, i, b, e in zip(
                out_hw, strides, kernel, in_hw, (top, left), (bottom, right), strict=True
            )
        ]
        bottom, right = bottom + extra[0], right + extra[1]
    return (kernel[0], kernel[1]), (strides[0], strides[1]), (top, left, bottom, right)


def maxpool(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """MaxPool -> maxpool (ceil_mode folded into end pads; padded cells never win)."""
    x = _single_input(node, ctx)
    _unused_extra_outputs(node, ctx)
    kernel, strides, pads = _pool_geometry(node, ctx, x)
    attrs = {"kernel": kernel, "strides": strides, "pads": pads, "act": None}
    return make_op(node, "maxpool", (x,), attrs)


def avgpool(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """AveragePool -> avgpool; ``count_include_pad`` decides the divisor at padded borders."""
    x = _single_input(node, ctx)
    include = int(node.attr("count_include_pad", 0))
    if include and int(node.attr("ceil_mode", 0)):
        raise Unsupported("ceil_mode=1 with count_include_pad=1")
    kernel, strides, pads = _pool_geometry(node, ctx, x)
    attrs = {
        "kernel": kernel,
        "strides": strides,
        "pads": pads,
        "count_include_pad": bool(include),
        "act": None,
    }
    return make_op(node, "avgpool", (x,), attrs)


def global_avgpool(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """GlobalAveragePool -> global_avgpool (mean over H, W, keeping dims)."""
    x = _single_input(node, ctx)
    _spatial(node, ctx, x)
    return make_op(node, "global_avgpool", (x,), {"act": None})


def global_maxpool(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """GlobalMaxPool -> maxpool with a kernel covering the whole ``H x W``."""
    x = _single_input(node, ctx)
    h, w = _spatial(node, ctx, x)
    attrs = {"kernel": (h, w), "strides": (1, 1), "pads": (0, 0, 0, 0), "act": None}
    return make_op(node, "maxpool", (x,), attrs)


def reduce_mean(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """ReduceMean -> mean; ``axes`` from the attribute (opset < 18) or the constant input 1.

    Empty axes reduce every axis unless ``noop_with_empty_axes=1`` (then a zero-cost reshape).
    """
    x = _single_input(node, ctx)
    rank = len(ctx.shape(x))
    if node.input(1):
        axes = tuple(int(a) for a in ctx.const(node.inputs[1]).reshape(-1))
    else:
        axes = tuple(int(a) for a in node.attr("axes", ()))
    if not axes:
        if int(node.attr("noop_with_empty_axes", 0)):
            return make_op(node, "reshape", (x,), {"shape": ctx.shape(node.outputs[0])})
        axes = tuple(range(rank))
    attrs = {
        "axes": tuple(sorted(a % rank for a in axes)),
        "keepdims": bool(int(node.attr("keepdims", 1))),
        "act": None,
    }
    return make_op(node, "mean", (x,), attrs)


# --- dense layers --------------------------------------------------------------------------------


def gemm(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Gemm ``Y = alpha * A @ B' + beta * C`` with constant B -> dense.

    ``W = alpha * (B if transB else B.T)`` gives the canonical ``(out, in)``; ``B = beta * C``
    broadcast to ``(out,)``. Two activation operands become ``matmul`` when nothing is scaled.
    """
    a = _single_input(node, ctx)
    if int(node.attr("transA", 0)):
        raise Unsupported("transA=1")
    alpha, beta = float(node.attr("alpha", 1.0)), float(node.attr("beta", 1.0))
    if not ctx.is_const(node.inputs[1]):
        if node.input(2) or alpha != 1.0 or int(node.attr("transB", 0)):
            raise Unsupported("non-constant B with transB, alpha or C")
        return make_op(node, "matmul", (a, node.inputs[1]), {"act": None})
    b = ctx.const(node.inputs[1])
    w = b if int(node.attr("transB", 0)) else b.T
    if alpha != 1.0:
        w = w * np.asarray(alpha, dtype=w.dtype)
    check_features(node, ctx, a, ctx.shape(a)[-1], w.shape[1])
    weights = {"W": np.ascontiguousarray(w)}
    if node.input(2):
        c = ctx.const(node.inputs[2])
        if c.size not in (1, w.shape[0]) or (c.ndim == 2 and c.shape[0] != 1):
            raise Unsupported(f"C of shape {c.shape} is not a per-output bias")
        bias = np.broadcast_to(c.reshape(-1), (w.shape[0],)) * np.asarray(beta, dtype=c.dtype)
        weights["B"] = np.ascontiguousarray(bias, dtype=c.dtype)
    return make_op(node, "dense", (a,), {"act": None}, weights)


def matmul(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """MatMul: constant 2-D right operand -> dense with ``W = B.T``; two activations -> matmul.

    A dense on an input of shape ``(..., in)`` applies ``y = x @ W.T`` to every row.
    """
    a, b = node.inputs[0], node.inputs[1]
    if ctx.is_const(a):
        raise Unsupported("constant left operand")
    if not ctx.is_const(b):
        return make_op(node, "matmul", (a, b), {"act": None})
    w = ctx.const(b)
    if w.ndim != 2:
        raise Unsupported(f"constant right operand of rank {w.ndim} (need 2-D)")
    check_features(node, ctx, a, ctx.shape(a)[-1], w.shape[0])
    return make_op(node, "dense", (a,), {"act": None}, {"W": np.ascontiguousarray(w.T)})


# --- element-wise --------------------------------------------------------------------------------

_BINARY_KIND = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}


def binary(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Add/Sub/Mul/Div with numpy broadcasting.

    Two activations -> ``inputs=(a, b)``. One constant operand -> ``inputs=(x,)`` and
    ``weights["C"]`` (its own broadcastable shape), meaning ``x op C``; a constant *left*
    operand is fine for the commutative Add/Mul only.
    """
    kind = _BINARY_KIND[node.op_type]
    a, b = node.inputs[0], node.inputs[1]
    if not ctx.is_const(a) and not ctx.is_const(b):
        return make_op(node, kind, (a, b), {"act": None})
    if ctx.is_const(a):
        if kind in ("sub", "div"):
            raise Unsupported("constant left operand of a non-commutative op")
        a, b = b, a
    c = np.asarray(ctx.const(b))
    return make_op(node, kind, (a,), {"act": None}, {"C": c})


def sum_op(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Sum of two tensors -> add (as exported by old Caffe2/PyTorch converters); of one -> a
    zero-cost reshape."""
    present = [i for i in node.inputs if i]
    if len(present) == 1:
        x = _single_input(node, ctx)
        return make_op(node, "reshape", (x,), {"shape": ctx.shape(node.outputs[0])})
    if len(present) != 2:
        raise Unsupported(f"Sum of {len(present)} inputs (only 2 map to add)")
    return binary(replace(node, op_type="Add", inputs=tuple(present)), ctx)


def concat(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Concat -> concat(axis) with a non-negative axis; every input must be an activation."""
    if any(ctx.is_const(i) for i in node.inputs):
        raise Unsupported("constant input to Concat")
    rank = len(ctx.shape(node.outputs[0]))
    return make_op(node, "concat", tuple(node.inputs), {"axis": int(node.attr("axis")) % rank})


def _scalar(node: OnnxNode, ctx: ImportContext, index: int, default: float) -> float:
    """Constant scalar input ``index`` of ``node`` or ``default`` when absent."""
    if not node.input(index):
        return default
    value = ctx.const(node.inputs[index])
    if value.size != 1:
        raise Unsupported(f"input {index} must be a scalar")
    return float(value.reshape(-1)[0])


def clip(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Clip: bounds from inputs 1/2 (opset >= 11) or ``min``/``max`` attributes.

    ``(0, 6)`` -> relu6, ``(0, +inf)`` -> relu, anything else -> clip(act_min, act_max).
    """
    x = _single_input(node, ctx)
    lo = _scalar(node, ctx, 1, float(node.attr("min", -math.inf)))
    hi = _scalar(node, ctx, 2, float(node.attr("max", math.inf)))
    if lo == 0.0 and hi == 6.0:
        return make_op(node, "relu6", (x,))
    if lo == 0.0 and hi == math.inf:
        return make_op(node, "relu", (x,))
    return make_op(node, "clip", (x,), {"act_min": lo, "act_max": hi})


def _unary(kind: str) -> Converter:
    """Converter for a parameter-free element-wise op."""

    def convert(node: OnnxNode, ctx: ImportContext) -> list[Op]:
        return make_op(node, kind, (_single_input(node, ctx),))

    convert.__doc__ = f"-> {kind}"
    return convert


def leaky_relu(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """LeakyRelu -> leaky_relu(alpha), ONNX default alpha 0.01."""
    x = _single_input(node, ctx)
    return make_op(node, "leaky_relu", (x,), {"alpha": float(node.attr("alpha", 0.01))})


def prelu(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """PRelu with one constant slope for every channel -> leaky_relu(alpha=slope)."""
    x = _single_input(node, ctx)
    slope = ctx.const(node.inputs[1])
    if slope.size == 0 or not np.all(slope == slope.reshape(-1)[0]):
        raise Unsupported("per-channel slopes (only one shared slope maps to leaky_relu)")
    return make_op(node, "leaky_relu", (x,), {"alpha": float(slope.reshape(-1)[0])})


def hard_sigmoid(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """HardSigmoid ``max(0, min(1, alpha * x + beta))``, defaults alpha 0.2, beta 0.5."""
    x = _single_input(node, ctx)
    attrs = {"alpha": float(node.attr("alpha", 0.2)), "beta": float(node.attr("beta", 0.5))}
    return make_op(node, "hardsigmoid", (x,), attrs)


def softmax(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Softmax -> softmax(axis) over one axis.

    Before opset 13 ONNX flattens the input to 2-D at ``axis`` (default 1); that equals a
    one-axis softmax only when every axis between ``axis`` and the last one has size 1.
    """
    x = _single_input(node, ctx)
    shape = ctx.shape(x)
    rank = len(shape)
    if ctx.opset >= 13:
        return make_op(node, "softmax", (x,), {"axis": int(node.attr("axis", -1)) % rank})
    first = int(node.attr("axis", 1)) % rank
    inner = [i for i in range(first, rank) if shape[i] != 1]
    if len(inner) > 1:
        raise Unsupported(f"opset-{ctx.opset} softmax over several axes {shape[first:]}")
    return make_op(node, "softmax", (x,), {"axis": inner[0] if inner else rank - 1})


def batchnorm(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """BatchNormalization (inference) -> batchnorm with per-channel ``scale`` and ``shift``.

    ``scale = gamma / sqrt(var + eps)``, ``shift = beta - mean * scale`` (ONNX spec:
    ``y = (x - mean) / sqrt(var + eps) * gamma + beta``); computed in float64.
    """
    x = _single_input(node, ctx)
    if int(node.attr("training_mode", 0)):
        raise Unsupported("training_mode=1")
    _unused_extra_outputs(node, ctx)
    gamma, beta, mean, var = (ctx.const(n).astype(np.float64) for n in node.inputs[1:5])
    scale = gamma / np.sqrt(var + float(node.attr("epsilon", 1e-5)))
    shift = beta - mean * scale
    dtype = ctx.consts[node.inputs[1]].dtype
    weights = {"scale": scale.astype(dtype), "shift": shift.astype(dtype)}
    return make_op(node, "batchnorm", (x,), {}, weights)


def pad(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Pad -> pad(pads, value) (constant mode) or pad_mode(pads, mode) (reflect, edge, wrap),
    pads in ONNX order over every axis.

    ``pads``/``constant_value``/``axes`` come from inputs 1/2/3 (opset >= 11, ``axes`` >= 18).
    """
    x = _single_input(node, ctx)
    mode = node.attr("mode", "constant")
    if mode not in ("constant", "reflect", "edge", "wrap"):
        raise Unsupported(f"mode={mode} (constant, reflect, edge or wrap)")
    rank = len(ctx.shape(x))
    given = [int(p) for p in ctx.const(node.inputs[1]).reshape(-1)]
    axes = list(range(rank))
    if node.input(3):
        axes = [int(a) % rank for a in ctx.const(node.inputs[3]).reshape(-1)]
    pads = [0] * (2 * rank)
    for k, axis in enumerate(axes):
        pads[axis], pads[rank + axis] = given[k], given[len(axes) + k]
    if any(p < 0 for p in pads):
        raise Unsupported("negative pads (cropping)")
    if mode != "constant":
        for axis in range(rank):
            n = ctx.shape(x)[axis]
            if mode == "reflect" and max(pads[axis], pads[rank + axis]) >= n:
                raise Unsupported(
                    f"reflect pad of {max(pads[axis], pads[rank + axis])} on an axis of length {n}"
                )
        return make_op(node, "pad_mode", (x,), {"pads": tuple(pads), "mode": mode})
    value = _scalar(node, ctx, 2, 0.0)
    return make_op(node, "pad", (x,), {"pads": tuple(pads), "value": value})


def reshape(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Reshape/Flatten/Squeeze/Unsqueeze -> reshape(shape = static output shape), zero-cost."""
    x = _single_input(node, ctx)
    shape = ctx.shape(node.outputs[0])  # ShapeError names the tensor when it stayed dynamic
    for extra in node.inputs[1:]:
        if extra and not ctx.is_const(extra):
            raise Unsupported(f"shape/axes input {quoted(extra)} is not constant")
    return make_op(node, "reshape", (x,), {"shape": shape})


def transpose(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Transpose -> transpose(perm); the default perm reverses the axes. A transpose that only
    moves axes of length 1 keeps the bytes in order: a zero-cost reshape."""
    x = _single_input(node, ctx)
    shape = ctx.shape(x)
    perm = tuple(int(p) for p in node.attr("perm", tuple(reversed(range(len(shape))))))
    moved = [p for p in perm if shape[p] != 1]
    if moved == sorted(moved):
        return make_op(node, "reshape", (x,), {"shape": tuple(shape[p] for p in perm)})
    return make_op(node, "transpose", (x,), {"perm": perm})


def cast(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Cast of an activation to its own type -> zero-cost reshape; real conversions unsupported."""
    x = _single_input(node, ctx)
    if ctx.dtype(x) != ctx.dtype(node.outputs[0]):
        raise Unsupported(f"cast {ctx.dtype(x)} -> {ctx.dtype(node.outputs[0])}")
    return make_op(node, "reshape", (x,), {"shape": ctx.shape(node.outputs[0])})


def gelu(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Gelu (opset 20) -> gelu (``approximate="none"``) or gelu_tanh (``"tanh"``)."""
    x = _single_input(node, ctx)
    approx = node.attr("approximate", "none")
    if approx not in ("none", "tanh"):
        raise Unsupported(f"approximate={approx}")
    return make_op(node, "gelu" if approx == "none" else "gelu_tanh", (x,))


def _ints(ctx: ImportContext, name: str) -> list[int]:
    """A constant integer input as a list (``[]`` for an absent optional input)."""
    return [int(v) for v in ctx.const(name).reshape(-1)] if name else []


def slice_op(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Slice (inputs starts, ends, axes, steps; opset >= 10) -> slice with per-axis bounds
    normalised by Python's ``slice(start, end, step).indices(n)``, which clamps exactly as
    the ONNX spec does (negative indices counted from the end, out-of-range values clamped)."""
    x = _single_input(node, ctx)
    shape = ctx.shape(x)
    rank = len(shape)
    starts, ends = _ints(ctx, node.input(1)), _ints(ctx, node.input(2))
    axes = [a % rank for a in _ints(ctx, node.input(3))] or list(range(len(starts)))
    steps = _ints(ctx, node.input(4)) or [1] * len(starts)
    if 0 in steps:
        raise Unsupported("a step of 0")
    bounds = [(0, n, 1) for n in shape]
    for axis, a, b, st in zip(axes, starts, ends, steps, strict=True):
        bounds[axis] = slice(a, b, st).indices(shape[axis])
    attrs = {
        name: tuple(int(t[k]) for t in bounds) for k, name in enumerate(("starts", "ends", "steps"))
    }
    return make_op(node, "slice", (x,), attrs)


def split(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Split -> one slice per output along ``axis``, lengths from the inferred output shapes
    (``split`` input or attribute, or ``num_outputs`` / equal parts, as shape inference read
    them). Output ``k`` is op ``<node>`` for ``k = 0`` and ``<node>_<k>`` after."""
    x = _single_input(node, ctx)
    shape = ctx.shape(x)
    axis = int(node.attr("axis", 0)) % len(shape)
    ops, begin = [], 0
    for k, out in enumerate(node.outputs):
        length = ctx.shape(out)[axis] if out else 0
        starts = [0] * len(shape)
        ends = list(shape)
        starts[axis], ends[axis] = begin, begin + length
        begin += length
        if not out or out not in ctx.consumed:
            continue
        name = node.name if k == 0 else f"{node.name}_{k}"
        attrs = {"starts": tuple(starts), "ends": tuple(ends), "steps": (1,) * len(shape)}
        ops.append(Op(name, "slice", (x,), (out,), attrs, {}, (node.name,)))
    if begin != shape[axis]:
        raise Unsupported(f"parts of {begin} along axis {axis} of length {shape[axis]}")
    return ops


#: tf_half_pixel_for_nearest, tf_crop_and_resize and half_pixel_symmetric are left out
#: (onnxruntime, the reference validation runs, refuses the first).
_COORD_MODES = ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric")


def resize(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """Resize (opset >= 11) -> resize(mode, coord_mode, nearest_mode, scales, sizes).

    ``scales`` are the given ones (input 2, float32 as in the file), or ``sizes / n`` (exact)
    when input 3 gives sizes; ``sizes`` is the inferred output shape.
    Supported: modes nearest and linear, no antialias, the coordinate modes of
    ``_COORD_MODES``, ``axes`` (opset 18) and keep_aspect_ratio_policy ``stretch``.
    """
    x = _single_input(node, ctx)
    xs, ys = ctx.shape(x), ctx.shape(node.outputs[0])
    mode = node.attr("mode", "nearest")
    coord = node.attr("coordinate_transformation_mode", "half_pixel")
    if mode not in ("nearest", "linear"):
        raise Unsupported(f"mode={mode} (nearest or linear)")
    if coord not in _COORD_MODES:
        raise Unsupported(f"coordinate_transformation_mode={coord}")
    if int(node.attr("antialias", 0)):
        raise Unsupported("antialias=1")
    if node.attr("keep_aspect_ratio_policy", "stretch") != "stretch":
        raise Unsupported(f"keep_aspect_ratio_policy={node.attr('keep_aspect_ratio_policy')}")
    rank = len(xs)
    axes = [int(a) % rank for a in node.attr("axes", range(rank))]
    given = [float(v) for v in ctx.const(node.input(2)).reshape(-1)] if node.input(2) else []
    scales = [1.0] * rank
    if given:
        for axis, s in zip(axes, given, strict=True):
            scales[axis] = float(np.float32(s))
    else:
        for axis in axes:
            scales[axis] = ys[axis] / xs[axis]
    attrs = {
        "mode": mode,
        "coord_mode": coord,
        "nearest_mode": node.attr("nearest_mode", "round_prefer_floor"),
        "scales": tuple(scales),
        "sizes": tuple(int(d) for d in ys),
    }
    return make_op(node, "resize", (x,), attrs)


def lrn(node: OnnxNode, ctx: ImportContext) -> list[Op]:
    """LRN over the channel axis 1 -> lrn(size, alpha, beta, bias, axis=1):
    ``y = x / (bias + alpha / size * sum x[c']^2)^beta`` over
    ``c' in [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)]`` (ONNX LRN, opset 13);
    defaults alpha 1e-4, beta 0.75, bias 1."""
    x = _single_input(node, ctx)
    if len(ctx.shape(x)) < 3:
        raise Unsupported(f"LRN of a rank-{len(ctx.shape(x))} tensor (N, C, D1, ... expected)")
    attrs = {
        "size": int(node.attr("size")),
        "alpha": float(node.attr("alpha", 1e-4)),
        "beta": float(node.attr("beta", 0.75)),
        "bias": float(node.attr("bias", 1.0)),
        "axis": 1,
    }
    return make_op(node, "lrn", (x,), attrs)


def _declared(convert: Callable[[Any, Any], list[Op]]) -> Converter:
    """A converter an op class declares, its ``SourceUnsupported`` raised as ``Unsupported``."""

    def run(node: OnnxNode, ctx: ImportContext) -> list[Op]:
        try:
            return convert(node, ctx)
        except SourceUnsupported as why:
            raise Unsupported(str(why)) from None

    return run


def declared_converters() -> dict[str, Converter]:
    """The converters the op classes declare (``OpKind.onnx_converters``, splitter.codegen.ops)."""
    from splitter.codegen.ops import KINDS

    return {name: _declared(f) for k in KINDS.values() for name, f in k.onnx_converters.items()}


#: The supported ONNX op types (default domain) and their converters: this table, then the
#: converters the op classes declare.
CONVERTERS: Mapping[str, Converter] = {
    "Conv": conv,
    "Gemm": gemm,
    "MatMul": matmul,
    "MaxPool": maxpool,
    "AveragePool": avgpool,
    "GlobalAveragePool": global_avgpool,
    "GlobalMaxPool": global_maxpool,
    "ReduceMean": reduce_mean,
    "Add": binary,
    "Sub": binary,
    "Mul": binary,
    "Div": binary,
    "Sum": sum_op,
    "Concat": concat,
    "Relu": _unary("relu"),
    "Clip": clip,
    "Sigmoid": _unary("sigmoid"),
    "Tanh": _unary("tanh"),
    "HardSwish": _unary("hardswish"),
    "HardSigmoid": hard_sigmoid,
    "Erf": _unary("erf"),
    "Gelu": gelu,
    "Slice": slice_op,
    "Split": split,
    "Resize": resize,
    "LRN": lrn,
    "LeakyRelu": leaky_relu,
    "PRelu": prelu,
    "Softmax": softmax,
    "BatchNormalization": batchnorm,
    "Pad": pad,
    "Reshape": reshape,
    "Flatten": reshape,
    "Squeeze": reshape,
    "Unsqueeze": reshape,
    "Transpose": transpose,
    "Cast": cast,
    **declared_converters(),
}
