"""The op kinds: one small class per canonical op kind, each registering itself in :data:`KINDS`.

Each class (on :class:`~splitter.codegen.ops.base.OpKind`) holds everything about its kind: its
``definition`` (:class:`~splitter.codegen.ops.opdef.OpDef`: attributes, source operators, which
``(layout, dtype)`` variants have kernels), its output shape, MACs and kernel scratch (the
convention of :mod:`splitter.codegen.ops.formulas`), and its code: the float32 calls
(``kernels.c``, NCHW; ``kernels_nhwc.c`` for the spatial kernels of NHWC graphs) and / or the
int8 calls (``kernels_q8.c``, NHWC); the base does the shared checks and picks the path.
:mod:`splitter.ops` (the op tables), :mod:`splitter.cost.handlers` (shapes, MACs, scratch) and
the C generator all read this registry. Adding an op: one class in a module here; the class
registers itself (CONTRIBUTING.md, "Adding an op").

This package sits below the graph and cost layers (``pyproject.toml``'s import contract): it
imports only the IR, the hardware facts and its own helpers.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Mapping
from types import MappingProxyType

from splitter.codegen.ops.base import REGISTERED, EmitContext, OpEmitter, OpKind, is_quantised
from splitter.ir import Op, TensorSpec


def _load_modules() -> tuple[type[OpKind], ...]:
    """Import every module of this package (each op class registers itself on subclassing,
    :data:`~splitter.codegen.ops.base.REGISTERED`) and return the op classes by
    :attr:`OpKind.order`, ties in module-name then definition order."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        importlib.import_module(f"{__name__}.{info.name}")
    seen: dict[str, type[OpKind]] = {}
    for cls in REGISTERED:
        if cls.kind in seen and seen[cls.kind] is not cls:
            raise TypeError(f"op kind {cls.kind!r}: {seen[cls.kind].__name__} and {cls.__name__}")
        seen[cls.kind] = cls
    return tuple(sorted(seen.values(), key=lambda c: (c.order, c.__module__, REGISTERED.index(c))))


_CLASSES: tuple[type[OpKind], ...] = _load_modules()

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
