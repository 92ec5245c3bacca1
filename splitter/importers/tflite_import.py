"""TFLite importer: subgraph 0 of a ``.tflite`` flatbuffer to a canonical :class:`Graph` (NHWC).

Parsing uses the ``tflite`` package (generated schema accessors); each builtin operator has one
converter in :mod:`splitter.importers.tflite_ops`. Conventions (see :mod:`splitter.ir`):

* tensor names are :func:`tensor_names` (file names, ``":<index>"`` appended to repeated names);
* weights keep their stored dtype (int8 weights, int32 biases) in canonical layout (conv
  ``(O, I/groups, kh, kw)``, dense ``(out, in)``); each weight ``K`` also has
  ``attrs["k_scale"]``, ``attrs["k_zero_point"]`` (tuples, empty when not quantised) and
  ``attrs["k_axis"]`` (per-channel axis **in the canonical layout**, else ``None``) and
  ``attrs["weight_tensors"][K]`` is its original tensor name;
* ``Op.name`` is ``<builtin>_<i>`` and ``Op.source_nodes`` is ``("op<i>", "<BUILTIN>")`` where
  ``i`` is the operator index in the file; a ``DEQUANTIZE`` of a constant (float16 weights) is
  folded into its consumer, whose weight keeps the stored dtype and whose ``source_nodes`` gain
  ``("op<j>", "DEQUANTIZE")``;
* every op's output shape is inferred from its inputs (formulas in ``tflite_ops``) and checked
  against the shape stored in the file.

A ``-1`` batch dimension in an input's ``shape_signature`` takes the stored shape (batch 1, what
the TFLite interpreter allocates by default); any other dynamic dimension needs ``input_shapes``
(the CLI's ``--input-shape``), and shapes are then propagated through the graph.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import tflite

from splitter.errors import (
    InputFileError,
    ShapeError,
    SplitterError,
    UnsupportedOpError,
    escaped,
    quoted,
)
from splitter.importers.tflite_ops import CONVERTERS, Converted, Node, Shape
from splitter.importers.tflite_reader import (
    OperatorInfo,
    TensorInfo,
    has_identifier,
    quant_problem,
    read_operators,
    read_tensors,
    structure_problem,
    tensor_names,
    unsupported_dtype_error,
)
from splitter.importers.tflite_writer import with_tensor_shapes
from splitter.inputs import MODEL_MAX_BYTES, read_input_file
from splitter.ir import Graph, Op, TensorSpec
from splitter.ops import OP_KINDS

__all__ = ["SUPPORTED_OPS", "import_tflite", "load_tflite", "tensor_names"]

#: Builtin operator names this importer converts.
SUPPORTED_OPS = tuple(sorted(CONVERTERS))

#: Exceptions the flatbuffers accessors raise on corrupt or truncated bytes.
_CORRUPT = (
    IndexError,
    struct.error,
    ValueError,
    TypeError,
    UnicodeDecodeError,
    AttributeError,
    OverflowError,
    KeyError,
)


def load_tflite(
    path: str | Path, *, input_shapes: Mapping[str, tuple[int, ...]] | None = None
) -> Graph:
    """Import subgraph 0 of the TFLite model at ``path`` as a canonical NHWC :class:`Graph`.

    ``input_shapes`` maps input tensor names to static shapes for dynamic dimensions.
    Raises :class:`InputFileError` (missing, corrupt, truncated, not TFLite),
    :class:`UnsupportedOpError` (listing every unsupported operator) or :class:`ShapeError`.
    """
    return import_tflite(path, input_shapes=input_shapes, normalise=False)[1]


def import_tflite(
    path: str | Path,
    *,
    input_shapes: Mapping[str, tuple[int, ...]] | None = None,
    normalise: bool = True,
) -> tuple[bytes, Graph]:
    """:func:`load_tflite` plus the normalised flatbuffer it imported.

    The flatbuffer is the file's with the shapes the importer computed from ``input_shapes``
    written into every graph input and operator output whose stored shape differs
    (:func:`~splitter.importers.tflite_writer.with_tensor_shapes`); the file's own bytes when
    none does (or ``normalise`` is False).
    """
    p = Path(path)
    buf = _read_bytes(p)
    try:
        graph, shapes = _convert(p, buf, input_shapes or {})
        if not normalise:
            return buf, graph
        return with_tensor_shapes(buf, _changed(_tensor_shapes(buf), shapes), str(p)), graph
    except SplitterError:
        raise
    except _CORRUPT as e:
        detail = " ".join(f"{type(e).__name__}: {e}".split())
        raise InputFileError(
            f"{p}: corrupt or truncated TFLite file ({detail}); re-export or re-download the model"
        ) from None


def _read_bytes(p: Path) -> bytes:
    buf = read_input_file(p, "TFLite model", MODEL_MAX_BYTES)
    if not has_identifier(buf):
        raise InputFileError(
            f"{p}: not a TFLite flatbuffer (no 'TFL3' file identifier); give a .tflite model "
            "written by the TensorFlow Lite converter"
        )
    return buf


def _changed(stored: list[Shape], shapes: Mapping[int, Shape]) -> dict[int, Shape]:
    """The entries of ``shapes`` that differ from the ``stored`` shape of their tensor."""
    return {i: s for i, s in shapes.items() if tuple(stored[i]) != tuple(s)}


def _tensor_shapes(buf: bytes) -> list[Shape]:
    """The stored ``shape`` of every tensor of subgraph 0."""
    sg = tflite.Model.GetRootAs(buf, 0).Subgraphs(0)
    return [
        tuple(int(d) for d in sg.Tensors(i).ShapeAsNumpy()) if sg.Tensors(i).ShapeLength() else ()
        for i in range(sg.TensorsLength())
    ]


def _convert(
    p: Path, buf: bytes, input_shapes: Mapping[str, tuple[int, ...]]
) -> tuple[Graph, dict[int, Shape]]:
    """The graph and the static shape of every graph input and operator output, by index."""
    model = tflite.Model.GetRootAs(buf, 0)
    if model.SubgraphsLength() == 0:
        raise InputFileError(f"{p}: TFLite model has no subgraph; re-export the model")
    sg = model.Subgraphs(0)
    problem = structure_problem(model, sg, len(buf), frozenset(CONVERTERS))
    if problem is not None:
        raise InputFileError(f"{p}: corrupt TFLite file: {problem}; re-export the model")
    try:
        tensors = read_tensors(model, sg, buf)
    except UnsupportedOpError as e:
        raise UnsupportedOpError(str(e).replace("<model>", str(p))) from None
    problem = next((q for q in map(quant_problem, tensors) if q is not None), None)
    if problem is not None:
        raise InputFileError(f"{p}: {problem}; re-export or re-quantise the model")
    ops = read_operators(model, sg)
    _check_ops(p, ops, len(tensors))
    ops, folded = _fold_const_dequantize(tensors, ops)
    g_inputs = [int(i) for i in sg.InputsAsNumpy()] if sg.InputsLength() else []
    g_outputs = [int(i) for i in sg.OutputsAsNumpy()] if sg.OutputsLength() else []
    g_inputs = [i for i in g_inputs if not tensors[i].is_const]
    shapes = _input_shapes(p, tensors, g_inputs, input_shapes)
    graph_ops = [_convert_op(p, o, tensors, shapes, bool(input_shapes), folded) for o in ops]
    for i in g_outputs:
        if i in g_inputs:
            raise InputFileError(
                f"{p}: graph output {quoted(tensors[i].name)} is a graph input, so the model "
                "computes nothing for it; re-export the model"
            )
        if i not in shapes:
            raise InputFileError(f"{p}: graph output {quoted(tensors[i].name)} is never computed")
    specs = {tensors[i].name: _spec(p, tensors[i], s) for i, s in shapes.items()}
    graph = Graph(
        name=p.stem,
        ops=tuple(graph_ops),
        tensors=specs,
        inputs=tuple(tensors[i].name for i in g_inputs),
        outputs=tuple(tensors[i].name for i in g_outputs),
        layout="NHWC",
        source_format="tflite",
        source_path=str(p),
        metadata=_metadata(model, sg),
    )
    return graph, shapes


def _check_ops(p: Path, ops: list[OperatorInfo], n_tensors: int) -> None:
    """Raise once listing every unsupported operator; reject empty graphs and bad indices."""
    if not ops:
        raise InputFileError(f"{p}: subgraph 0 has no operators (empty graph); give a real model")
    bad = [
        f"{escaped(o.builtin)} (operator #{o.index})" for o in ops if o.builtin not in CONVERTERS
    ]
    if bad:
        raise UnsupportedOpError(
            f"{p}: unsupported TFLite operators: {', '.join(bad)}; supported are "
            f"{', '.join(SUPPORTED_OPS)} (re-export without them or give a layer profile)"
        )
    for o in ops:
        if any(i >= n_tensors for i in o.inputs + o.outputs) or len(o.outputs) != 1:
            raise InputFileError(
                f"{p}: operator #{o.index} ({escaped(o.builtin)}) has bad tensor indices or "
                f"{len(o.outputs)} outputs; the file is corrupt, re-export the model"
            )


def _input_shapes(
    p: Path,
    tensors: list[TensorInfo],
    inputs: list[int],
    overrides: Mapping[str, tuple[int, ...]],
) -> dict[int, Shape]:
    """Static shapes of the graph inputs (stored shape, or the override for dynamic dims)."""
    by_name = {tensors[i].name: i for i in inputs}
    unknown = sorted(set(overrides) - set(by_name))
    if unknown:
        raise ShapeError(
            f"{p}: --input-shape names unknown input(s) {', '.join(unknown)}; "
            f"the model's inputs are {', '.join(by_name)}"
        )
    shapes: dict[int, Shape] = {}
    for name, i in by_name.items():
        t = tensors[i]
        if name in overrides:
            shapes[i] = _checked_override(p, t, tuple(int(d) for d in overrides[name]))
            continue
        dynamic = [k for k, d in enumerate(t.signature) if d < 0]
        if (dynamic and dynamic != [0]) or any(d <= 0 for d in t.shape[1:]):
            example = "x".join(str(d if d > 0 else 1) for d in t.signature)
            raise ShapeError(
                f"{p}: input {quoted(name)} has dynamic shape {_sig(t.signature)}; give "
                f"--input-shape {name}={example} (with your real sizes)"
            )
        shapes[i] = (max(t.shape[0], 1), *t.shape[1:]) if t.shape else ()
    return shapes


def _checked_override(p: Path, t: TensorInfo, shape: Shape) -> Shape:
    ok = len(shape) == len(t.signature) and all(
        s > 0 and (d < 0 or d == s) for s, d in zip(shape, t.signature, strict=False)
    )
    if not ok:
        raise ShapeError(
            f"{p}: --input-shape {escaped(t.name)}={'x'.join(map(str, shape))} does not fit the "
            f"model's shape {_sig(t.signature)}; only dimensions shown as ? may change"
        )
    return shape


def _sig(sig: tuple[int, ...]) -> str:
    return "(" + ", ".join("?" if d < 0 else str(d) for d in sig) + ")"


def _fold_const_dequantize(
    tensors: list[TensorInfo], ops: list[OperatorInfo]
) -> tuple[list[OperatorInfo], dict[int, OperatorInfo]]:
    """Fold ``DEQUANTIZE(constant)`` (float16 / int8 stored weights) into its consumers.

    The dequantized tensor becomes a constant holding the **stored** data, dtype and
    quantisation (so FLASH counts the stored bytes); the folded operator is returned by output
    tensor index so its consumers can list it in ``source_nodes``. Tensors are updated in place.
    """
    kept, folded = [], {}
    for o in ops:
        src = tensors[o.inputs[0]] if o.inputs and o.inputs[0] >= 0 else None
        if o.builtin == "DEQUANTIZE" and src is not None and src.data is not None:
            out = o.outputs[0]
            tensors[out] = replace(tensors[out], data=src.data, dtype=src.dtype, quant=src.quant)
            folded[out] = o
        else:
            kept.append(o)
    return kept, folded


def _convert_op(
    p: Path,
    o: OperatorInfo,
    tensors: list[TensorInfo],
    shapes: dict[int, Shape],
    free: bool,
    folded: dict[int, OperatorInfo],
) -> Op:
    """Convert one operator, check its inferred output shape and record it in ``shapes``."""
    for i in o.inputs:
        if i >= 0 and not tensors[i].is_const and i not in shapes:
            raise InputFileError(
                f"{p}: operator #{o.index} ({escaped(o.builtin)}) reads tensor "
                f"{quoted(tensors[i].name)} that is neither a constant, a graph input nor computed "
                "before; re-export the model"
            )
    try:
        conv = CONVERTERS[o.builtin](Node(o, tensors, shapes))
    except ShapeError as e:
        raise ShapeError(f"{p}: {e}") from None
    except UnsupportedOpError as e:
        where = (
            ""
            if str(e).startswith("operator #")
            else f"operator #{o.index} ({escaped(o.builtin)}): "
        )
        raise UnsupportedOpError(f"{p}: {where}{e}") from None
    out = tensors[o.outputs[0]]
    if _disagrees(conv.out_shape, out, free):
        raise ShapeError(
            f"{p}: operator #{o.index} ({escaped(o.builtin)}) output {quoted(out.name)} is "
            f"stored as {out.shape} but computes to {conv.out_shape}; the file is inconsistent, "
            "re-export it"
        )
    shapes[o.outputs[0]] = conv.out_shape
    op = _make_op(o, conv, tensors)
    extra = [(f"op{folded[i].index}", "DEQUANTIZE") for i in o.inputs if i in folded]
    if extra:
        op = replace(op, source_nodes=op.source_nodes + tuple(x for pair in extra for x in pair))
    return op


def _disagrees(inferred: Shape, out: TensorInfo, free: bool) -> bool:
    """Inferred and stored output shapes differ: on any dimension, or, when input shapes were
    overridden (``free``), on a dimension the file's ``shape_signature`` marks static."""
    if len(inferred) != len(out.shape):
        return True
    sig = out.signature if len(out.signature) == len(out.shape) else out.shape
    return any(
        a != s and not (free and d < 0) for a, s, d in zip(inferred, out.shape, sig, strict=True)
    )


def _make_op(o: OperatorInfo, conv: Converted, tensors: list[TensorInfo]) -> Op:
    attrs: dict[str, Any] = dict(conv.attrs)
    if "act" in OP_KINDS[conv.kind]:
        attrs.setdefault("act", None)
    for key, w in conv.weights.items():
        k = key.lower()
        attrs[f"{k}_scale"] = w.quant.scale if w.quant else ()
        attrs[f"{k}_zero_point"] = w.quant.zero_point if w.quant else ()
        attrs[f"{k}_axis"] = w.quant.axis if w.quant else None
    if conv.weights:
        attrs["weight_tensors"] = {k: w.tensor for k, w in conv.weights.items()}
    return Op(
        name=f"{o.builtin.lower()}_{o.index}",
        kind=conv.kind,
        inputs=tuple(tensors[i].name for i in conv.inputs),
        outputs=(tensors[o.outputs[0]].name,),
        attrs=attrs,
        weights={k: w.array for k, w in conv.weights.items()},
        source_nodes=(f"op{o.index}", o.builtin),
    )


def _spec(p: Path, t: TensorInfo, shape: Shape) -> TensorSpec:
    if not t.dtype:
        raise unsupported_dtype_error(t.name, t.type_code, str(p))
    return TensorSpec(t.name, shape, t.dtype, t.quant)


def _metadata(model: Any, sg: Any) -> dict[str, str]:
    desc = model.Description()
    return {
        "tflite_schema_version": str(model.Version()),
        "description": desc.decode("utf-8", errors="replace") if desc else "",
        "subgraph": (sg.Name() or b"").decode("utf-8", errors="replace"),
        "subgraphs": str(model.SubgraphsLength()),
    }
