"""One definition per canonical op kind: :data:`OPS`, the table every other op table follows.

An :class:`OpDef` says what the rest of the pipeline needs to know about a kind without running
it: the attributes importers fill, whether it is an element-wise activation (and so may be fused
into a producer's ``attrs["act"]``), whether it hosts such a fused activation, which layer a
directly following op of this kind joins in the chain, whether it is a zero-cost view, which
source operators map to it, and which ``(layout, dtype)`` pairs have C kernels.

Derived here (and re-exported by :mod:`splitter.ir`): :data:`OP_KINDS`, :data:`ACTIVATIONS`,
:data:`ACT_HOSTS`, :data:`FUSED_ACT_ATTRS`, :data:`ZERO_COST_KINDS`, :data:`POOL_KINDS`. Tables
that hold code (cost handlers, emitters, importer converters) cannot live here without reversing
the pipeline's imports; ``tests/test_ops_table.py`` checks every such table against :data:`OPS`.

This module imports nothing from splitter: it is the bottom of the import graph.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

#: The kernel variants: float32 NCHW (ONNX, ``kernels.c``), float32 NHWC (TFLite,
#: ``kernels_nhwc.c`` for the spatial kernels, layout-free ones shared) and int8 NHWC
#: (full-integer TFLite, ``kernels_q8.c``).
F32_NCHW = ("NCHW", "float32")
F32_NHWC = ("NHWC", "float32")
I8_NHWC = ("NHWC", "int8")
FLOAT = frozenset({F32_NCHW, F32_NHWC})
ALL = frozenset({F32_NCHW, F32_NHWC, I8_NHWC})

#: Layer kinds a pooling op right after them joins (the thesis's fused conv + pool block).
_POOL_HOSTS = frozenset({"conv2d", "dense", "add"})


@dataclass(frozen=True)
class OpDef:
    """What is known about one canonical op kind.

    * ``attrs``: the attribute names importers fill (``"act"`` = hosts a fused activation);
    * ``activation``: element-wise activation that :mod:`~splitter.importers.onnx_fuse` folds
      into a directly preceding act host as ``attrs["act"] = kind``, carrying ``attrs`` along;
    * ``joins``: layer kinds a single op of this kind directly after them joins in the chain
      (pools into conv / dense / add, softmax into dense; ``splitter.graph.chain``);
    * ``pool``: a pooling op (a layer joins at most one);
    * ``zero_cost``: a view of the same bytes (zero MACs, aliased in the arena);
    * ``onnx`` / ``tflite``: the source operators whose converters produce this kind;
    * ``kernels``: ``(layout, dtype)`` pairs with a C kernel and an emitter.
    """

    kind: str
    attrs: tuple[str, ...] = ()
    activation: bool = False
    joins: frozenset[str] = frozenset()
    pool: bool = False
    zero_cost: bool = False
    onnx: tuple[str, ...] = ()
    tflite: tuple[str, ...] = ()
    kernels: frozenset[tuple[str, str]] = frozenset()

    @property
    def act_host(self) -> bool:
        """True when the op may carry a fused activation in ``attrs["act"]``."""
        return "act" in self.attrs

    def has_kernel(self, layout: str, dtype: str) -> bool:
        """True when a C kernel runs this kind in ``layout`` (``""`` = NCHW) and ``dtype``."""
        return (layout or "NCHW", dtype) in self.kernels


def _act(kind: str, attrs: tuple[str, ...] = (), **kw: object) -> OpDef:
    """An element-wise activation: float kernels in both layouts unless ``kernels`` is given."""
    kw.setdefault("kernels", FLOAT)
    return OpDef(kind, attrs, activation=True, **kw)  # type: ignore[arg-type]


_DEFS = (
    # y = conv(x, W) + B, W (O, I/groups, kh, kw); groups == C is a depthwise conv
    OpDef(
        "conv2d",
        ("kernel", "strides", "pads", "dilations", "groups", "act"),
        onnx=("Conv",),
        tflite=("CONV_2D", "DEPTHWISE_CONV_2D"),
        kernels=ALL,
    ),
    # y = x @ W.T + B, W (out, in); x flattened to (1, in)
    OpDef(
        "dense",
        ("act",),
        onnx=("Gemm", "MatMul"),
        tflite=("FULLY_CONNECTED",),
        kernels=ALL,
    ),
    OpDef("matmul", ("act",), onnx=("Gemm", "MatMul"), kernels=FLOAT),  # both operands activations
    OpDef(
        "maxpool",
        ("kernel", "strides", "pads", "act"),
        joins=_POOL_HOSTS,
        pool=True,
        onnx=("MaxPool", "GlobalMaxPool"),
        tflite=("MAX_POOL_2D",),
        kernels=ALL,
    ),
    OpDef(
        "avgpool",
        ("kernel", "strides", "pads", "count_include_pad", "act"),
        joins=_POOL_HOSTS,
        pool=True,
        onnx=("AveragePool",),
        tflite=("AVERAGE_POOL_2D",),
        kernels=ALL,
    ),
    OpDef(
        "global_avgpool",
        ("act",),
        joins=_POOL_HOSTS,
        pool=True,
        onnx=("GlobalAveragePool",),
        kernels=frozenset({F32_NCHW}),
    ),
    OpDef(
        "mean",
        ("axes", "keepdims", "act"),
        onnx=("ReduceMean",),
        tflite=("MEAN",),
        kernels=ALL,
    ),
    # broadcasting binary ops; a constant operand is weights["C"]
    OpDef("add", ("act",), onnx=("Add", "Sum"), tflite=("ADD",), kernels=ALL),
    OpDef("sub", ("act",), onnx=("Sub",), tflite=("SUB",), kernels=FLOAT),
    OpDef("mul", ("act",), onnx=("Mul",), tflite=("MUL",), kernels=ALL),
    OpDef("div", ("act",), onnx=("Div",), tflite=("DIV",), kernels=FLOAT),
    OpDef("concat", ("axis",), onnx=("Concat",), tflite=("CONCATENATION",), kernels=ALL),
    _act("relu", onnx=("Relu", "Clip"), tflite=("RELU",), kernels=ALL),
    _act("relu6", onnx=("Clip",), tflite=("RELU6",), kernels=ALL),
    _act("clip", ("act_min", "act_max"), onnx=("Clip",), tflite=("RELU_N1_TO_1",)),
    _act("leaky_relu", ("alpha",), onnx=("LeakyRelu", "PRelu"), tflite=("LEAKY_RELU",)),
    _act("sigmoid", onnx=("Sigmoid",), tflite=("LOGISTIC",), kernels=ALL),
    _act("tanh", onnx=("Tanh",), tflite=("TANH",), kernels=ALL),
    _act("hardswish", onnx=("HardSwish",), tflite=("HARD_SWISH",)),
    _act("hardsigmoid", ("alpha", "beta"), onnx=("HardSigmoid",)),
    _act("erf", onnx=("Erf",)),
    # x / 2 * (1 + erf(x / sqrt 2)) (ONNX Gelu, opset 20; torch's exported Div-Erf-Add-Mul-Mul)
    _act("gelu", onnx=("Gelu",)),
    # x / 2 * (1 + tanh(sqrt(2 / pi) * (x + 0.044715 x^3))) (Gelu approximate="tanh")
    _act("gelu_tanh", onnx=("Gelu",)),
    # y = x / (bias + alpha / size * sum of x^2 over `size` neighbours along `axis`) ** beta
    OpDef(
        "lrn",
        ("size", "alpha", "beta", "bias", "axis"),
        onnx=("LRN",),
        tflite=("LOCAL_RESPONSE_NORMALIZATION",),
        kernels=ALL,
    ),
    OpDef(
        "softmax",
        ("axis",),
        joins=frozenset({"dense"}),
        onnx=("Softmax",),
        tflite=("SOFTMAX",),
        kernels=ALL,
    ),
    # y = x * weights["scale"] + weights["shift"] per channel (axis 1; an unfused BN)
    OpDef("batchnorm", ("act",), onnx=("BatchNormalization",), kernels=frozenset({F32_NCHW})),
    # pads in ONNX order: begins of every axis, then ends
    OpDef("pad", ("pads", "value"), onnx=("Pad",), tflite=("PAD", "PADV2"), kernels=ALL),
    # reflect / edge / wrap padding (ONNX Pad modes); a per-axis index gather
    OpDef("pad_mode", ("pads", "mode"), onnx=("Pad",), kernels=frozenset({F32_NCHW})),
    # y[i] = x[starts[d] + i[d] * steps[d]] on every axis d, i[d] < len(range(starts, ends,
    # steps)) (Slice, normalised as Python's slice.indices; Split: one slice per output)
    OpDef(
        "slice", ("starts", "ends", "steps"), onnx=("Slice", "Split"), kernels=frozenset({F32_NCHW})
    ),
    # ONNX Resize (nearest: an index gather; linear: bilinear over the last two axes); the
    # per-axis source coordinates follow coord_mode / nearest_mode and the per-axis scales
    # (given, or out / in from sizes) of the ONNX spec; sizes = the output shape
    OpDef(
        "resize",
        ("mode", "coord_mode", "nearest_mode", "scales", "sizes"),
        onnx=("Resize",),
        kernels=frozenset({F32_NCHW}),
    ),
    OpDef(
        "reshape",
        ("shape",),
        zero_cost=True,
        onnx=("Reshape", "Flatten", "Squeeze", "Unsqueeze", "Cast"),
        tflite=("RESHAPE", "SQUEEZE", "EXPAND_DIMS"),
        kernels=ALL,
    ),
    OpDef("transpose", ("perm",), onnx=("Transpose",), tflite=("TRANSPOSE",), kernels=FLOAT),
    # perm: the transpose from the float tensor's layout to the int8 tensor's (None: same
    # layout; (0, 2, 3, 1) at a QDQ ONNX graph's NCHW input, int8 tensors being NHWC)
    OpDef(
        "quantize",
        ("perm",),
        onnx=("QuantizeLinear",),
        tflite=("QUANTIZE",),
        kernels=frozenset({I8_NHWC}),
    ),
    OpDef(
        "dequantize",
        ("perm",),
        onnx=("DequantizeLinear",),
        tflite=("DEQUANTIZE",),
        kernels=frozenset({I8_NHWC}),
    ),
)

#: Canonical op kind -> its definition, in a fixed order.
OPS: Mapping[str, OpDef] = MappingProxyType({d.kind: d for d in _DEFS})

#: Canonical op kinds and the attributes each one carries (importers fill exactly these).
OP_KINDS: Mapping[str, tuple[str, ...]] = MappingProxyType({k: d.attrs for k, d in OPS.items()})

#: Element-wise activations an op may carry in ``attrs["act"]`` (and standalone kinds).
ACTIVATIONS: tuple[str, ...] = tuple(k for k, d in OPS.items() if d.activation)

#: Op kinds that may carry a fused activation (``"act"`` among their attributes).
ACT_HOSTS: frozenset[str] = frozenset(k for k, d in OPS.items() if d.act_host)

#: Attributes a fused activation brings into its host (``act_min``, ``alpha``, ...).
FUSED_ACT_ATTRS: frozenset[str] = frozenset(a for k in ACTIVATIONS for a in OPS[k].attrs)

#: Op kinds whose only effect is a new view of the same bytes (zero cost, zero-copy).
ZERO_COST_KINDS: frozenset[str] = frozenset(k for k, d in OPS.items() if d.zero_cost)

#: Pooling kinds (a chain layer joins at most one, after a host in ``OpDef.joins``).
POOL_KINDS: frozenset[str] = frozenset(k for k, d in OPS.items() if d.pool)


def kinds_with_kernel(layout: str, dtype: str) -> frozenset[str]:
    """Op kinds whose :attr:`OpDef.kernels` include ``(layout, dtype)``."""
    return frozenset(k for k, d in OPS.items() if d.has_kernel(layout, dtype))
