"""Plain-Python views of ONNX nodes and the shared state of one import.

The importer reads the protobuf once into :class:`OnnxNode` records (stable node names, decoded
attributes) and an :class:`ImportContext` (constant values, inferred shapes, element types), so the
folding, conversion and fusion passes never touch protobuf objects again.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import helper

from splitter.errors import ShapeError, escaped, quoted

#: ONNX's default operator-set domain, spelled both ways the spec allows.
DEFAULT_DOMAINS = frozenset({"", "ai.onnx"})

Shape = tuple[int | None, ...]


class Unsupported(Exception):  # internal signal, never reaches a user
    """Raised by a converter: this node cannot be mapped; the message says why."""


@dataclass(frozen=True)
class OnnxNode:
    """One ONNX node: stable unique ``name``, op type, domain, tensor names, decoded attributes."""

    name: str
    op_type: str
    domain: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)

    @property
    def label(self) -> str:
        """``OpType (node name)`` as error messages list it."""
        op = self.op_type if self.domain in DEFAULT_DOMAINS else f"{self.domain}.{self.op_type}"
        return f"{escaped(op)} ({escaped(self.name)})"

    def attr(self, key: str, default: Any = None) -> Any:
        """Attribute ``key`` (strings decoded to ``str``) or ``default``."""
        return self.attrs.get(key, default)

    def input(self, i: int) -> str:
        """Name of input ``i``, ``""`` when the optional input is absent."""
        return self.inputs[i] if i < len(self.inputs) else ""


def _decode(value: Any) -> Any:
    """Turn protobuf attribute values into plain Python (bytes -> str, repeated -> tuple)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def read_nodes(graph: onnx.GraphProto) -> list[OnnxNode]:
    """The graph's nodes with stable unique names.

    A node keeps its own name; an unnamed node is called ``<OpType>_<k>`` with ``k`` counting the
    unnamed nodes of that type in file order; a repeated name gets ``_<n>`` appended. The same
    names appear in ``Op.source_nodes``, ``Op.name`` and every error message.
    """
    taken = {n.name for n in graph.node if n.name}
    used: set[str] = set()
    counters: dict[str, int] = {}
    nodes = []
    for proto in graph.node:
        name = proto.name
        if not name:
            while True:
                k = counters.get(proto.op_type, 0)
                counters[proto.op_type] = k + 1
                name = f"{proto.op_type}_{k}"
                if name not in taken and name not in used:
                    break
        base, n = name, 1
        while name in used:
            name, n = f"{base}_{n}", n + 1
        used.add(name)
        attrs = {a.name: _decode(helper.get_attribute_value(a)) for a in proto.attribute}
        nodes.append(
            OnnxNode(
                name=name,
                op_type=proto.op_type,
                domain=proto.domain,
                inputs=tuple(proto.input),
                outputs=tuple(proto.output),
                attrs=attrs,
            )
        )
    return nodes


@dataclass
class ImportContext:
    """What the passes share: constants, inferred shapes and element types, the opset, the file."""

    path: str
    opset: int
    consts: dict[str, np.ndarray]
    shapes: dict[str, Shape | None]
    elem_types: dict[str, int]
    initializer_protos: dict[str, onnx.TensorProto] = field(default_factory=dict)
    #: tensors read by some remaining node or listed as graph outputs
    consumed: set[str] = field(default_factory=set)

    def is_const(self, name: str) -> bool:
        """True for an initializer or a folded constant."""
        return name in self.consts

    def const(self, name: str) -> np.ndarray:
        """The value of constant tensor ``name`` (raise :class:`Unsupported` when not constant)."""
        try:
            return self.consts[name]
        except KeyError:
            raise Unsupported(f"input {quoted(name)} must be a constant") from None

    def is_static(self, name: str) -> bool:
        """True when tensor ``name`` is a constant or has a fully known inferred shape."""
        shape = self.shapes.get(name)
        return name in self.consts or (shape is not None and all(d is not None for d in shape))

    def shape(self, name: str) -> tuple[int, ...]:
        """The static shape of tensor ``name``; :class:`ShapeError` when inference left it open."""
        if name in self.consts:
            return tuple(int(d) for d in self.consts[name].shape)
        shape = self.shapes.get(name)
        if shape is None or any(d is None for d in shape):
            raise ShapeError(
                f"{self.path}: shape of tensor {quoted(name)} is unknown after shape inference "
                f"(got {shape_text(shape)}); shapes must follow from static input shapes "
                "and constant shape arguments: give --input-shape NAME=1x49x10x1"
            )
        return tuple(int(d) for d in shape if d is not None)

    def dtype(self, name: str) -> str:
        """Numpy dtype name of tensor ``name`` (``float32`` when the model does not say)."""
        elem = self.elem_types.get(name, onnx.TensorProto.FLOAT)
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem)).name)


def shape_text(shape: Shape | None) -> str:
    """``1x?x10`` style text of a possibly partial shape (``unknown`` for ``None``)."""
    if shape is None:
        return "unknown"
    return "x".join("?" if d is None else str(d) for d in shape) or "scalar"
