"""One converter per TFLite builtin operator, registered explicitly in :data:`CONVERTERS`.

Each converter reads the operator's inputs (activation shapes propagated so far, constants from
the file) and options, and returns a :class:`Converted`: the canonical op kind and attributes of
:data:`splitter.ops.OP_KINDS`, the activation inputs, the weights in canonical layout and the
**inferred** output shape (checked against the file, or used when shapes are overridden).

Formulas follow the TFLite reference kernels (tensorflow/lite/kernels/internal/reference/ and
tensorflow/lite/kernels/padding.h).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np
import tflite

from splitter.errors import ShapeError, UnsupportedOpError
from splitter.importers.tflite_reader import OperatorInfo, TensorInfo
from splitter.ir import QuantParams

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Weight:
    """A constant in canonical layout; ``quant.axis`` is already mapped to that layout."""

    array: np.ndarray
    quant: QuantParams | None
    tensor: str  # original tensor name


@dataclass(frozen=True)
class Converted:
    """What a converter returns for one operator."""

    kind: str
    attrs: dict[str, Any]
    inputs: tuple[int, ...]  # activation tensor indices
    out_shape: Shape
    weights: dict[str, Weight] = field(default_factory=dict)


@dataclass(frozen=True)
class Node:
    """An operator with its tensors resolved; ``shape(i)`` is the propagated activation shape."""

    op: OperatorInfo
    tensors: list[TensorInfo]
    shapes: Mapping[int, Shape]

    def t(self, k: int) -> TensorInfo | None:
        """Input ``k`` (``None`` when absent / optional)."""
        if k >= len(self.op.inputs) or self.op.inputs[k] < 0:
            return None
        return self.tensors[self.op.inputs[k]]

    def shape(self, k: int) -> Shape:
        """Shape of activation input ``k``."""
        return self.shapes[self.op.inputs[k]]

    def const(self, k: int) -> np.ndarray:
        """Constant data of input ``k``; a ShapeError when it is computed at run time."""
        t = self.t(k)
        if t is None or t.data is None:
            raise ShapeError(
                f"operator #{self.op.index} ({self.op.builtin}): input {k} must be a constant "
                "(dynamic shapes/axes are not supported); re-export with static shapes"
            )
        return t.data

    def opts(self, cls: type) -> Any:
        """The builtin options as ``cls`` (a ``tflite.*Options`` class), or ``None``."""
        if self.op.options is None:
            return None
        o = cls()
        o.Init(self.op.options.Bytes, self.op.options.Pos)
        return o


# --- shared formulas ---------------------------------------------------------------------------


def same_pads(in_size: int, kernel: int, stride: int, dilation: int = 1) -> tuple[int, int]:
    """(before, after) padding of TFLite/TensorFlow ``SAME`` along one axis.

    ``out = ceil(in / stride)``, ``eff_k = (kernel - 1) * dilation + 1``,
    ``total = max((out - 1) * stride + eff_k - in, 0)``, ``before = total // 2`` and the odd
    pixel goes after (tensorflow/lite/kernels/padding.h, ``ComputePaddingWithOffset``).
    """
    out = -(-in_size // stride)
    eff_k = (kernel - 1) * dilation + 1
    total = max((out - 1) * stride + eff_k - in_size, 0)
    return total // 2, total - total // 2


def explicit_pads(
    padding: int,
    hw: tuple[int, int],
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int] = (1, 1),
) -> tuple[int, int, int, int]:
    """Pads ``(top, left, bottom, right)`` for ``Padding.SAME`` (0) or ``Padding.VALID`` (1)."""
    if padding == tflite.Padding.VALID:
        return (0, 0, 0, 0)
    top, bottom = same_pads(hw[0], kernel[0], strides[0], dilations[0])
    left, right = same_pads(hw[1], kernel[1], strides[1], dilations[1])
    return (top, left, bottom, right)


def window_out(in_size: int, kernel: int, stride: int, pad: int, dilation: int = 1) -> int:
    """Output size of a strided window: ``(in + pad - ((k - 1) * d + 1)) // stride + 1``."""
    return (in_size + pad - ((kernel - 1) * dilation + 1)) // stride + 1


def spatial_out(
    hw: tuple[int, int],
    kernel: tuple[int, int],
    strides: tuple[int, int],
    pads: tuple[int, int, int, int],
    dilations: tuple[int, int] = (1, 1),
) -> tuple[int, int]:
    """``(out_h, out_w)`` of a conv/pool with explicit pads ``(top, left, bottom, right)``."""
    return (
        window_out(hw[0], kernel[0], strides[0], pads[0] + pads[2], dilations[0]),
        window_out(hw[1], kernel[1], strides[1], pads[1] + pads[3], dilations[1]),
    )


def fused_act(code: int) -> dict[str, Any]:
    """``attrs`` for TFLite's ``ActivationFunctionType`` (RELU_N1_TO_1 is a clip to [-1, 1]).

    Fused TANH and SIGN_BIT are rejected: TFLite's kernels do not apply them (CONV_2D and ADD
    silently compute no activation, FULLY_CONNECTED refuses the model; checked with LiteRT in
    tests/test_tflite_ops.py), so no faithful reading exists.
    """
    acts: dict[int, dict[str, Any]] = {
        0: {"act": None},
        1: {"act": "relu"},
        2: {"act": "clip", "act_min": -1.0, "act_max": 1.0},
        3: {"act": "relu6"},
    }
    if code not in acts:
        name = {4: "TANH", 5: "SIGN_BIT"}.get(code, str(code))
        raise UnsupportedOpError(
            f"fused activation {name} is not applied by TFLite's kernels; re-export the model "
            "with a separate activation operator"
        )
    return dict(acts[code])


def _weight(t: TensorInfo, perm: tuple[int, ...] | None = None) -> Weight:
    """Constant ``t`` transposed by ``perm``; a per-channel axis moves with it."""
    assert t.data is not None
    arr = t.data if perm is None else np.ascontiguousarray(t.data.transpose(perm))
    q = t.quant
    if q is not None and q.axis is not None and perm is not None:
        q = QuantParams(q.scale, q.zero_point, perm.index(q.axis))
    return Weight(arr, q, t.name)


def _norm_axis(axis: int, rank: int) -> int:
    return axis + rank if axis < 0 else axis


def _bias(n: Node, k: int, out: dict[str, Weight]) -> None:
    t = n.t(k)
    if t is not None and t.data is not None:
        out["B"] = _weight(t)


def _window(
    n: Node,
    padding: int,
    x: Shape,
    kernel: tuple[int, int],
    strides: tuple[int, int],
    dilations: tuple[int, int] = (1, 1),
) -> tuple[tuple[int, int, int, int], tuple[int, int]]:
    """Pads and output ``(h, w)`` of a window over the NHWC input ``x``
    (:func:`explicit_pads`, :func:`spatial_out`); a ShapeError unless kernel, strides and
    dilations are all >= 1 and the output is not empty (a corrupt file must not divide by 0)."""
    where = f"operator #{n.op.index} ({n.op.builtin})"
    if min(*kernel, *strides, *dilations) < 1:
        raise ShapeError(
            f"{where}: kernel {kernel}, strides {strides} and dilations {dilations} must all be "
            ">= 1; the file is corrupt, re-export the model"
        )
    pads = explicit_pads(padding, (x[1], x[2]), kernel, strides, dilations)
    out = spatial_out((x[1], x[2]), kernel, strides, pads, dilations)
    if min(out) < 1:
        raise ShapeError(
            f"{where}: a {kernel[0]}x{kernel[1]} window over a {x[1]}x{x[2]} input gives an "
            f"empty {out[0]}x{out[1]} output; the file is corrupt, re-export the model"
        )
    return pads, out


# --- converters --------------------------------------------------------------------------------


def conv_2d(n: Node) -> Converted:
    """CONV_2D: filter OHWI ``(O, kh, kw, I)`` -> canonical ``(O, I, kh, kw)``, ``groups = C / I``;
    output ``(N, out_h, out_w, O)``."""
    o = n.opts(tflite.Conv2DOptions)
    x, w = n.shape(0), n.const(1).shape
    strides, dil = (o.StrideH(), o.StrideW()), (o.DilationHFactor(), o.DilationWFactor())
    kernel = (w[1], w[2])
    pads, (oh, ow) = _window(n, o.Padding(), x, kernel, strides, dil)
    weights = {"W": _weight(_t(n, 1), (0, 3, 1, 2))}
    _bias(n, 2, weights)
    attrs: dict[str, Any] = {"kernel": kernel, "strides": strides, "pads": pads, "dilations": dil}
    attrs |= {"groups": x[3] // w[3], **fused_act(o.FusedActivationFunction())}
    return Converted("conv2d", attrs, (n.op.inputs[0],), (x[0], oh, ow, w[0]), weights)


def depthwise_conv_2d(n: Node) -> Converted:
    """DEPTHWISE_CONV_2D: filter ``(1, kh, kw, C*m)`` -> canonical ``(C*m, 1, kh, kw)``,
    ``groups = C``; output ``(N, out_h, out_w, C*m)``."""
    o = n.opts(tflite.DepthwiseConv2DOptions)
    x, w = n.shape(0), n.const(1).shape
    strides, dil = (o.StrideH(), o.StrideW()), (o.DilationHFactor(), o.DilationWFactor())
    kernel = (w[1], w[2])
    pads, (oh, ow) = _window(n, o.Padding(), x, kernel, strides, dil)
    weights = {"W": _weight(_t(n, 1), (3, 0, 1, 2))}
    _bias(n, 2, weights)
    attrs: dict[str, Any] = {"kernel": kernel, "strides": strides, "pads": pads, "dilations": dil}
    attrs |= {"groups": x[3], "depth_multiplier": w[3] // x[3]}
    attrs |= fused_act(o.FusedActivationFunction())
    return Converted("conv2d", attrs, (n.op.inputs[0],), (x[0], oh, ow, w[3]), weights)


def fully_connected(n: Node) -> Converted:
    """FULLY_CONNECTED: ``W (out, in)``; output ``x.shape[:-1] + (out,)`` with ``keep_num_dims``,
    else ``(size(x) / in, out)``. A run-time (non-constant) W is rejected: it would be
    ``x @ W.T`` of two activations, which no canonical kind expresses."""
    o = n.opts(tflite.FullyConnectedOptions)
    act = fused_act(o.FusedActivationFunction() if o else 0)
    keep = bool(o.KeepNumDims()) if o else False
    x = n.shape(0)
    wt = _t(n, 1)
    out_f, in_f = wt.shape[0], wt.shape[-1]
    out = (*x[:-1], out_f) if keep else (prod(x) // in_f, out_f)
    if wt.data is None:
        raise UnsupportedOpError(
            "FULLY_CONNECTED with run-time weights is not supported; re-export with constant "
            "weights or use BATCH_MATMUL"
        )
    weights = {"W": _weight(wt)}
    _bias(n, 2, weights)
    return Converted("dense", act, (n.op.inputs[0],), out, weights)


def _pool(n: Node, kind: str) -> Converted:
    o = n.opts(tflite.Pool2DOptions)
    x = n.shape(0)
    kernel, strides = (o.FilterHeight(), o.FilterWidth()), (o.StrideH(), o.StrideW())
    pads, (oh, ow) = _window(n, o.Padding(), x, kernel, strides)
    attrs: dict[str, Any] = {"kernel": kernel, "strides": strides, "pads": pads}
    if kind == "avgpool":
        attrs["count_include_pad"] = False  # TFLite averages over the in-bounds taps only
    attrs |= fused_act(o.FusedActivationFunction())
    return Converted(kind, attrs, (n.op.inputs[0],), (x[0], oh, ow, x[3]))


def average_pool_2d(n: Node) -> Converted:
    """AVERAGE_POOL_2D: output ``(N, out_h, out_w, C)``; padded taps are not counted."""
    return _pool(n, "avgpool")


def max_pool_2d(n: Node) -> Converted:
    """MAX_POOL_2D: output ``(N, out_h, out_w, C)``."""
    return _pool(n, "maxpool")


def mean(n: Node) -> Converted:
    """MEAN over constant ``axes``; reduced axes kept as 1 with ``keep_dims``, else dropped."""
    x = n.shape(0)
    axes = tuple(sorted({_norm_axis(int(a), len(x)) for a in n.const(1).reshape(-1)}))
    o = n.opts(tflite.ReducerOptions)
    keep = bool(o.KeepDims()) if o else False
    out = tuple(1 if i in axes else d for i, d in enumerate(x) if keep or i not in axes)
    return Converted("mean", {"axes": axes, "keepdims": keep, "act": None}, (n.op.inputs[0],), out)


def _binary(n: Node, kind: str, opts_cls: type | None) -> Converted:
    """Broadcast element-wise op; a constant operand becomes ``weights["C"]``."""
    o = n.opts(opts_cls) if opts_cls is not None else None
    attrs = fused_act(o.FusedActivationFunction() if o else 0)
    a, b = _t(n, 0), _t(n, 1)
    if a.is_const and b.is_const:
        raise ShapeError(f"operator #{n.op.index} ({n.op.builtin}): both operands are constants")
    if a.is_const or b.is_const:
        const, act_i = (a, 1) if a.is_const else (b, 0)
        attrs["const_first"] = a.is_const
        out = tuple(np.broadcast_shapes(n.shape(act_i), const.shape))
        return Converted(kind, attrs, (n.op.inputs[act_i],), out, {"C": _weight(const)})
    out = tuple(np.broadcast_shapes(n.shape(0), n.shape(1)))
    return Converted(kind, attrs, (n.op.inputs[0], n.op.inputs[1]), out)


def add(n: Node) -> Converted:
    """ADD: ``a + b`` (NumPy broadcasting)."""
    return _binary(n, "add", tflite.AddOptions)


def sub(n: Node) -> Converted:
    """SUB: ``a - b`` (NumPy broadcasting)."""
    return _binary(n, "sub", tflite.SubOptions)


def mul(n: Node) -> Converted:
    """MUL: ``a * b`` (NumPy broadcasting)."""
    return _binary(n, "mul", tflite.MulOptions)


def div(n: Node) -> Converted:
    """DIV: ``a / b`` (NumPy broadcasting)."""
    return _binary(n, "div", tflite.DivOptions)


def concatenation(n: Node) -> Converted:
    """CONCATENATION along ``axis``: output dim ``axis`` is the sum of the inputs' dims (a fused
    activation is rejected, as TFLite's concatenation kernel does)."""
    o = n.opts(tflite.ConcatenationOptions)
    if any(_t(n, k).is_const for k in range(len(n.op.inputs))):
        raise ShapeError(
            f"operator #{n.op.index} (CONCATENATION): constant operands are not supported; "
            "re-export the model without constant concatenation inputs"
        )
    shapes = [n.shape(k) for k in range(len(n.op.inputs))]
    axis = _norm_axis(int(o.Axis()), len(shapes[0]))
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    if o.FusedActivationFunction() != 0:
        raise UnsupportedOpError(
            f"operator #{n.op.index} (CONCATENATION) has fused activation "
            f"{o.FusedActivationFunction()}, which TFLite's kernels reject; re-export the model"
        )
    attrs = {"axis": axis, "act": None}
    return Converted("concat", attrs, n.op.inputs, tuple(out))


def _reshape_to(n: Node, shape: Shape) -> Converted:
    return Converted("reshape", {"shape": shape}, (n.op.inputs[0],), shape)


def reshape(n: Node) -> Converted:
    """RESHAPE to the constant shape input (or ``new_shape`` option); one ``-1`` is resolved
    from the element count."""
    x = n.shape(0)
    t = n.t(1)
    if t is not None and t.data is not None:
        target = [int(d) for d in t.data.reshape(-1)]
    else:
        o = n.opts(tflite.ReshapeOptions)
        if o is None or o.NewShapeLength() == 0:
            return _reshape_to(n, n.tensors[n.op.outputs[0]].shape)
        target = [int(d) for d in o.NewShapeAsNumpy()]
    if -1 in target:
        known = prod(d for d in target if d != -1)
        target[target.index(-1)] = prod(x) // known if known else 0
    return _reshape_to(n, tuple(target))


def squeeze(n: Node) -> Converted:
    """SQUEEZE the listed size-1 axes (all size-1 axes when none are listed)."""
    x = n.shape(0)
    o = n.opts(tflite.SqueezeOptions)
    dims = [int(d) for d in o.SqueezeDimsAsNumpy()] if o and o.SqueezeDimsLength() else []
    axes = {_norm_axis(d, len(x)) for d in dims} or {i for i, d in enumerate(x) if d == 1}
    return _reshape_to(n, tuple(d for i, d in enumerate(x) if i not in axes))


def expand_dims(n: Node) -> Converted:
    """EXPAND_DIMS: a size-1 axis inserted at the constant ``axis``."""
    x = list(n.shape(0))
    axis = int(n.const(1).reshape(-1)[0])
    x.insert(axis + len(x) + 1 if axis < 0 else axis, 1)
    return _reshape_to(n, tuple(x))


def softmax(n: Node) -> Converted:
    """SOFTMAX over the last axis, ``exp(beta * x) / sum``; shape unchanged."""
    o = n.opts(tflite.SoftmaxOptions)
    x = n.shape(0)
    attrs = {"axis": len(x) - 1, "beta": float(o.Beta()) if o else 1.0}
    return Converted("softmax", attrs, (n.op.inputs[0],), x)


def _unary(kind: str, **attrs: Any) -> Callable[[Node], Converted]:
    def convert(n: Node) -> Converted:
        return Converted(kind, dict(attrs), (n.op.inputs[0],), n.shape(0))

    convert.__doc__ = f"Element-wise ``{kind}``; shape unchanged."
    return convert


def leaky_relu(n: Node) -> Converted:
    """LEAKY_RELU: ``x if x > 0 else alpha * x``."""
    o = n.opts(tflite.LeakyReluOptions)
    return Converted("leaky_relu", {"alpha": float(o.Alpha())}, (n.op.inputs[0],), n.shape(0))


def pad(n: Node) -> Converted:
    """PAD / PADV2: constant paddings ``(rank, 2)`` -> ONNX order ``begins..., ends...``;
    output ``dim + before + after``. ``value`` is the real pad value (PADV2's constant,
    dequantised; 0 for PAD)."""
    x = n.shape(0)
    p = n.const(1).reshape(len(x), 2).astype(int)
    pads = tuple(int(v) for v in p[:, 0]) + tuple(int(v) for v in p[:, 1])
    value = 0.0
    t = n.t(2)
    if t is not None and t.data is not None:
        v = float(t.data.reshape(-1)[0])
        q = t.quant
        value = q.scale[0] * (v - q.zero_point[0]) if q is not None else v
    out = tuple(int(d + b + e) for d, b, e in zip(x, p[:, 0], p[:, 1], strict=True))
    return Converted("pad", {"pads": pads, "value": value}, (n.op.inputs[0],), out)


def slice_(n: Node) -> Converted:
    """SLICE by the constants ``begin`` and ``size`` (``-1``: to the end) -> slice with per-axis
    ``starts = begin``, ``ends = begin + size``, steps 1 (the ONNX Slice bounds)."""
    x = n.shape(0)
    begin = [int(v) for v in n.const(1).reshape(-1)]
    size = [int(v) for v in n.const(2).reshape(-1)]
    ends = [d if s < 0 else b + s for d, b, s in zip(x, begin, size, strict=True)]
    if any(not 0 <= b <= e <= d for b, e, d in zip(begin, ends, x, strict=True)):
        raise ShapeError(f"operator #{n.op.index} (SLICE): begin {begin} size {size} of {x}")
    attrs = {"starts": tuple(begin), "ends": tuple(ends), "steps": (1,) * len(x)}
    out = tuple(e - b for b, e in zip(begin, ends, strict=True))
    return Converted("slice", attrs, (n.op.inputs[0],), out)


def transpose(n: Node) -> Converted:
    """TRANSPOSE by the constant ``perm``: ``out[i] = x[perm[i]]``."""
    x = n.shape(0)
    perm = tuple(int(p) for p in n.const(1).reshape(-1))
    return Converted("transpose", {"perm": perm}, (n.op.inputs[0],), tuple(x[p] for p in perm))


def local_response_normalization(n: Node) -> Converted:
    """LOCAL_RESPONSE_NORMALIZATION over the last axis, ``y = x / (bias + alpha * sum x^2)^beta``
    over ``[c - radius, c + radius]`` (TFLite's reference kernel) -> lrn(size = 2 radius + 1,
    alpha = alpha * size): the canonical alpha is divided by the window size, as ONNX's."""
    o = n.opts(tflite.LocalResponseNormalizationOptions)
    x = n.shape(0)
    radius, bias, alpha, beta = (
        (int(o.Radius()), float(o.Bias()), float(o.Alpha()), float(o.Beta())) if o else (0, 0, 0, 0)
    )
    size = 2 * radius + 1
    attrs = {"size": size, "alpha": alpha * size, "beta": beta, "bias": bias, "axis": len(x) - 1}
    return Converted("lrn", attrs, (n.op.inputs[0],), x)


def _t(n: Node, k: int) -> TensorInfo:
    t = n.t(k)
    if t is None:
        raise ShapeError(f"operator #{n.op.index} ({n.op.builtin}): input {k} is missing")
    return t


def declared_converters() -> dict[str, Callable[[Node], Converted]]:
    """The converters the op classes declare (``OpKind.tflite_converters``)."""
    from splitter.codegen.ops import KINDS

    return {name: f for k in KINDS.values() for name, f in k.tflite_converters.items()}


#: TFLite builtin name -> converter: this table, then the converters the op classes declare
#: (a new op declares its converter on its class, CONTRIBUTING.md "Adding an op").
CONVERTERS: Mapping[str, Callable[[Node], Converted]] = {
    "CONV_2D": conv_2d,
    "DEPTHWISE_CONV_2D": depthwise_conv_2d,
    "FULLY_CONNECTED": fully_connected,
    "AVERAGE_POOL_2D": average_pool_2d,
    "MAX_POOL_2D": max_pool_2d,
    "MEAN": mean,
    "ADD": add,
    "SUB": sub,
    "MUL": mul,
    "DIV": div,
    "CONCATENATION": concatenation,
    "RESHAPE": reshape,
    "SQUEEZE": squeeze,
    "EXPAND_DIMS": expand_dims,
    "SOFTMAX": softmax,
    "LOGISTIC": _unary("sigmoid"),
    "TANH": _unary("tanh"),
    "RELU": _unary("relu"),
    "RELU6": _unary("relu6"),
    "RELU_N1_TO_1": _unary("clip", act_min=-1.0, act_max=1.0),
    "HARD_SWISH": _unary("hardswish"),
    "LEAKY_RELU": leaky_relu,
    "LOCAL_RESPONSE_NORMALIZATION": local_response_normalization,
    "PAD": pad,
    "PADV2": pad,
    "TRANSPOSE": transpose,
    "SLICE": slice_,
    "QUANTIZE": _unary("quantize", perm=None),
    "DEQUANTIZE": _unary("dequantize", perm=None),
    **declared_converters(),
}
