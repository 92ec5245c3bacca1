"""What one op kind is, without running it: :class:`OpDef` (its facts) and :class:`Kernel` (a C
kernel it calls, named by its symbol).

Every op class of :mod:`splitter.codegen.ops` carries its ``definition``; :mod:`splitter.ops`
derives the op tables from the registry there. This module imports nothing from splitter.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The kernel variants: float32 NCHW (ONNX, ``kernels.c``), float32 NHWC (TFLite,
#: ``kernels_nhwc.c`` for the spatial kernels, layout-free ones shared) and int8 NHWC
#: (full-integer TFLite, ``kernels_q8.c``).
F32_NCHW = ("NCHW", "float32")
F32_NHWC = ("NHWC", "float32")
I8_NHWC = ("NHWC", "int8")
FLOAT = frozenset({F32_NCHW, F32_NHWC})
ALL = frozenset({F32_NCHW, F32_NHWC, I8_NHWC})

#: Layer kinds a pooling op right after them joins (the thesis's fused conv + pool block).
POOL_HOSTS = frozenset({"conv2d", "dense", "add"})


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


class SourceUnsupported(Exception):  # internal signal, never reaches a user
    """Raised by a converter an op class declares (``OpKind.onnx_converters``): this source
    node cannot be mapped; the message says why (the importer reports it as its own
    ``Unsupported``, with every other unsupported node)."""


@dataclass(frozen=True)
class Kernel:
    """A C kernel: its ``symbol`` (the key every table names it by) and the header of
    ``splitter/firmware_templates/kernels/`` that declares it (``tests/test_ops_table.py``
    checks that it does)."""

    symbol: str
    header: str = "kernels.h"

    def __call__(self, *args: object) -> str:
        """The C call ``symbol(args...)`` (without the ``;``)."""
        return f"{self.symbol}({', '.join(str(a) for a in args)})"


def activation(kind: str, attrs: tuple[str, ...] = (), **kw: object) -> OpDef:
    """An element-wise activation's definition: float kernels in both layouts unless
    ``kernels`` is given."""
    kw.setdefault("kernels", FLOAT)
    return OpDef(kind, attrs, activation=True, **kw)  # type: ignore[arg-type]
