"""The op kinds: one small class per canonical op kind, registered explicitly in :data:`KINDS`.

Each class (on :class:`~splitter.codegen.ops.base.OpKind`) holds everything about its kind: its
``definition`` (:class:`~splitter.codegen.ops.opdef.OpDef`: attributes, source operators, which
``(layout, dtype)`` variants have kernels), its output shape, MACs and kernel scratch (the
convention of :mod:`splitter.codegen.ops.formulas`), and its code: the float32 calls
(``kernels.c``, NCHW; ``kernels_nhwc.c`` for the spatial kernels of NHWC graphs) and / or the
int8 calls (``kernels_q8.c``, NHWC); the base does the shared checks and picks the path.
:mod:`splitter.ops` (the op tables), :mod:`splitter.cost.handlers` (shapes, MACs, scratch) and
the C generator all read this registry. Adding an op: one class in a module here and one line
below (CONTRIBUTING.md, "Adding an op").

This package sits below the graph and cost layers (``pyproject.toml``'s import contract): it
imports only the IR, the hardware facts and its own helpers.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from splitter.codegen.ops.base import EmitContext, OpEmitter, OpKind, is_quantised
from splitter.codegen.ops.conv import Conv2D
from splitter.codegen.ops.dense import Dense, MatMul
from splitter.codegen.ops.elementwise import (
    Add,
    BatchNorm,
    Clip,
    Div,
    Erf,
    Gelu,
    GeluTanh,
    HardSigmoid,
    HardSwish,
    LeakyRelu,
    Mul,
    Relu,
    Relu6,
    Sigmoid,
    Sub,
    Tanh,
)
from splitter.codegen.ops.gather import PadMode, Resize, Slice
from splitter.codegen.ops.lrn import LRN
from splitter.codegen.ops.pool import AvgPool, GlobalAvgPool, MaxPool, Mean
from splitter.codegen.ops.shape import Concat, Dequantize, Pad, Quantize, Reshape, Transpose
from splitter.codegen.ops.softmax import Softmax
from splitter.ir import Op, TensorSpec

_CLASSES: tuple[type[OpKind], ...] = (
    Conv2D,
    Dense,
    MatMul,
    MaxPool,
    AvgPool,
    GlobalAvgPool,
    Mean,
    Add,
    Sub,
    Mul,
    Div,
    Concat,
    Relu,
    Relu6,
    Clip,
    LeakyRelu,
    Sigmoid,
    Tanh,
    HardSwish,
    HardSigmoid,
    Erf,
    Gelu,
    GeluTanh,
    LRN,
    Softmax,
    BatchNorm,
    Pad,
    PadMode,
    Slice,
    Resize,
    Reshape,
    Transpose,
    Quantize,
    Dequantize,
)

#: Canonical op kind -> its op class instance, in the order of ``splitter ops``.
KINDS: Mapping[str, OpKind] = MappingProxyType({cls.kind: cls() for cls in _CLASSES})

#: The name :data:`KINDS` had when its classes only emitted code.
EMITTERS: Mapping[str, OpKind] = KINDS

__all__ = [
    "EMITTERS",
    "KINDS",
    "EmitContext",
    "OpEmitter",
    "OpKind",
    "check",
    "emit",
    "is_quantised",
]


def check(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Why no kernel runs ``op`` (``None`` when one does)."""
    emitter = EMITTERS.get(op.kind)
    if emitter is None:
        dtype = "int8" if is_quantised(op, tensors) else "float32"
        return f"no {dtype} kernel for this op kind"
    return emitter.check(op, tensors)


def emit(op: Op, ctx: EmitContext) -> list[str]:
    """The C statements running ``op`` with its tensors at ``ctx.offsets``."""
    return EMITTERS[op.kind].emit(op, ctx)
