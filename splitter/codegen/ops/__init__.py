"""C emitters: one small class per canonical op kind, registered explicitly in :data:`EMITTERS`.

Each class (on :class:`~splitter.codegen.ops.base.OpEmitter`) has the float32 code (``kernels.c``,
NCHW;
``kernels_nhwc.c`` for the spatial kernels of NHWC graphs) and / or the int8 code
(``kernels_q8.c``, NHWC) of its kind; the base does the shared checks and picks the path. Which
kinds have which kernels is declared in :data:`splitter.ops.OPS`; ``tests/test_ops_table.py``
checks this table against it. Adding an op: one class in a module here and one line below.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from splitter.codegen.ops.base import EmitContext, OpEmitter, is_quantised
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

_CLASSES: tuple[type[OpEmitter], ...] = (
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

#: Canonical op kind -> its emitter.
EMITTERS: Mapping[str, OpEmitter] = MappingProxyType({cls.kind: cls() for cls in _CLASSES})

__all__ = ["EMITTERS", "EmitContext", "OpEmitter", "check", "emit", "is_quantised"]


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
