"""Cut a TFLite flatbuffer into sub-model flatbuffers at the plan's boundary tensors.

No official tool exists, so the sub-models are rebuilt with the flatbuffers object API generated
from the TFLite schema (``ai_edge_litert.schema_py_generated``, the same schema the ``tflite``
package's builders come from, with ``*T`` classes that ``Pack`` themselves). For each cut:

* operators: walk back from the output tensors to the input tensors (as ``onnx.utils.Extractor``
  does), keeping the original operator order, which is topological;
* tensors: those the kept operators touch, renumbered in original order, with shape, type,
  quantisation parameters, sparsity and shape signature unchanged;
* buffers: buffer 0 is the empty sentinel the schema requires; only buffers holding a kept
  constant's data follow (16-byte aligned, as the TFLite converter writes them); activations point
  at buffer 0;
* operator codes: only those used, with ``deprecated_builtin_code``, ``builtin_code``,
  ``custom_code`` and ``version`` copied;
* one ``serving_default`` signature naming the new inputs/outputs, the original ``version``,
  ``description`` and metadata entries (e.g. ``min_runtime_version``) plus a ``splitter`` metadata
  entry holding the plan's facts as JSON.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from ai_edge_litert import schema_py_generated as schema

from splitter.errors import InputFileError, ShapeError, UnsupportedOpError, ValidationError
from splitter.importers import LoadedModel
from splitter.importers.tflite_writer import BUFFER_ALIGNMENT, pack_model
from splitter.importers.tflite_writer import FILE_IDENTIFIER as _FILE_IDENTIFIER
from splitter.importers.tflite_writer import AlignedBufferT as _AlignedBufferT
from splitter.inputs import MODEL_MAX_BYTES, read_input_file
from splitter.ir import QuantParams, TensorSpec
from splitter.slicing.boundaries import Cut, SlicedModel

__all__ = ["BUFFER_ALIGNMENT", "load_tflite_model", "slice_tflite", "tensor_names"]

_SIGNATURE_KEY = "serving_default"
#: TensorType enum value -> numpy dtype name (schema.fbs TensorType)
_DTYPES = {
    schema.TensorType.FLOAT32: "float32",
    schema.TensorType.FLOAT16: "float16",
    schema.TensorType.INT32: "int32",
    schema.TensorType.UINT8: "uint8",
    schema.TensorType.INT64: "int64",
    schema.TensorType.BOOL: "bool",
    schema.TensorType.INT16: "int16",
    schema.TensorType.INT8: "int8",
    schema.TensorType.FLOAT64: "float64",
    schema.TensorType.UINT32: "uint32",
    schema.TensorType.UINT16: "uint16",
}


@dataclass(frozen=True)
class _Source:
    """The unpacked original model and lookups over its main subgraph."""

    model: Any  # schema.ModelT
    names: list[str]  # unique tensor names, index = tensor index
    index_of: dict[str, int]
    producer: dict[int, int]  # tensor index -> operator index
    path: str


def tensor_names(subgraph: Any) -> list[str]:
    """Unique tensor names of a ``SubGraphT``, by tensor index.

    The importer's rule (:func:`splitter.importers.tflite_reader.tensor_names`, which reads the
    ``tflite`` package's ``SubGraph``): the tensor's name, with ``":<index>"`` appended on every
    occurrence of a name the file repeats, and on an empty name.
    """
    raw = [_decode(t.name) for t in (subgraph.tensors or [])]
    counts = Counter(raw)
    return [f"{n}:{i}" if (counts[n] > 1 or not n) else n for i, n in enumerate(raw)]


def load_tflite_model(path: str | Path, data: bytes | None = None) -> tuple[bytes, Any]:
    """Bytes and unpacked ``ModelT`` of ``path`` (or of ``data`` read from it), or a one-line
    :class:`InputFileError`."""
    if data is None:
        data = read_input_file(path, "TFLite model", MODEL_MAX_BYTES)
    try:
        if data[4:8] != _FILE_IDENTIFIER:
            raise ValueError("no TFL3 file identifier")
        return data, schema.ModelT.InitFromPackedBuf(data, 0)
    except Exception as exc:
        raise InputFileError(
            f"{path}: cannot read TFLite model ({exc}); give a valid .tflite"
        ) from exc


def slice_tflite(model: LoadedModel, cuts: Sequence[Cut]) -> list[SlicedModel]:
    """Serialised sub-model flatbuffers of ``model`` (see :func:`splitter.importers.load_model`),
    one per cut."""
    src = _source(model.path, model.data)
    return [_slice_one(src, cut) for cut in cuts]


def _source(path: str | Path, data: bytes) -> _Source:
    _, model = load_tflite_model(path, data)
    if not model.subgraphs:
        raise InputFileError(f"{path}: TFLite model has no subgraph; give a converted model")
    if len(model.subgraphs) > 1:
        raise UnsupportedOpError(
            f"{path}: {len(model.subgraphs)} subgraphs (control flow); splitter slices "
            "single-subgraph models only"
        )
    main = model.subgraphs[0]
    if _reads_from_offsets(model):
        raise UnsupportedOpError(f"{path}: buffers stored outside the flatbuffer (>2 GB models)")
    names = tensor_names(main)
    producer = {t: i for i, op in enumerate(main.operators or []) for t in _ids(op.outputs)}
    return _Source(model, names, {n: i for i, n in enumerate(names)}, producer, str(path))


def _reads_from_offsets(model: Any) -> bool:
    return any(getattr(b, "offset", 0) for b in model.buffers or [])


def _slice_one(src: _Source, cut: Cut) -> SlicedModel:
    """Build and pack one sub-model."""
    ins = [_tensor_index(src, name, cut) for name in cut.input_names]
    outs = [_tensor_index(src, name, cut) for name in cut.output_names]
    ops = _reachable_ops(src, ins, outs)
    _check_closed(src, ops, set(ins), cut)
    model = _build_model(src, ops, ins, outs, cut)
    data = pack_model(model)
    sub = model.subgraphs[0]
    names = [_decode(t.name) for t in sub.tensors]
    return SlicedModel(
        cut=cut,
        data=data,
        suffix=".tflite",
        inputs=tuple(_spec(sub.tensors[i], names[i]) for i in sub.inputs),
        outputs=tuple(_spec(sub.tensors[i], names[i]) for i in sub.outputs),
        op_count=len(sub.operators or []),
    )


def _tensor_index(src: _Source, name: str, cut: Cut) -> int:
    if name not in src.index_of:
        raise ShapeError(
            f"sub-model {cut.file_stem}: tensor '{name}' is not in {src.path}; the chain and "
            "the model file disagree (re-import the model)"
        )
    return src.index_of[name]


def _reachable_ops(src: _Source, ins: list[int], outs: list[int]) -> list[int]:
    """Indices of the operators needed to compute ``outs`` from ``ins``, in original order."""
    operators = src.model.subgraphs[0].operators or []
    stop, seen, stack = set(ins), set(), [t for t in outs if t not in ins]
    while stack:
        tensor = stack.pop()
        op = src.producer.get(tensor)
        if tensor in stop or op is None or op in seen:
            continue
        seen.add(op)
        stack.extend(_ids(operators[op].inputs))
    return sorted(seen)


def _is_constant(src: _Source, tensor: int) -> bool:
    """A tensor whose data lives in a non-empty buffer (weights, biases, shape vectors)."""
    t = src.model.subgraphs[0].tensors[tensor]
    buf = src.model.buffers[t.buffer] if t.buffer < len(src.model.buffers or []) else None
    return bool(t.buffer) and buf is not None and buf.data is not None and len(buf.data) > 0


def _check_closed(src: _Source, ops: list[int], ins: set[int], cut: Cut) -> None:
    """Raise if a kept operator reads a tensor the sub-model neither computes nor receives."""
    operators = src.model.subgraphs[0].operators
    known = set(ins)
    for i in ops:
        for t in _ids(operators[i].inputs):
            variable = src.model.subgraphs[0].tensors[t].isVariable
            if t not in known and not _is_constant(src, t) and not variable:
                raise ValidationError(
                    f"sub-model {cut.file_stem}: operator {i} reads '{src.names[t]}' from "
                    f"outside layers {cut.first}..{cut.last}; the boundary {cut.input_names} "
                    "does not separate the graph"
                )
        known.update(_ids(operators[i].outputs))


def _build_model(src: _Source, ops: list[int], ins: list[int], outs: list[int], cut: Cut) -> Any:
    """A new ``ModelT`` holding only what operators ``ops`` need."""
    orig, main = src.model, src.model.subgraphs[0]
    used = sorted(set(ins) | set(outs) | {t for i in ops for t in _op_tensors(main.operators[i])})
    tmap = {old: new for new, old in enumerate(used)}
    buffers: list[Any] = [_AlignedBufferT()]
    bmap: dict[int, int] = {}
    tensors = [_copy_tensor(src, t, buffers, bmap) for t in used]
    codes: dict[int, int] = {}
    operators = [_copy_operator(main.operators[i], tmap, codes) for i in ops]
    sub = schema.SubGraphT()
    sub.tensors, sub.operators, sub.name = tensors, operators, cut.file_stem
    sub.inputs, sub.outputs = [tmap[t] for t in ins], [tmap[t] for t in outs]
    model = schema.ModelT()
    model.version, model.description = orig.version, orig.description
    model.operatorCodes = [orig.operatorCodes[old] for old in sorted(codes, key=codes.__getitem__)]
    model.subgraphs, model.buffers = [sub], buffers
    model.metadata = _copy_metadata(orig, buffers, bmap, cut)
    model.signatureDefs = [_signature(sub)]
    return model


def _op_tensors(op: Any) -> list[int]:
    return _ids(op.inputs) + _ids(op.outputs) + _ids(op.intermediates)


def _copy_tensor(src: _Source, t: int, buffers: list[Any], bmap: dict[int, int]) -> Any:
    """The tensor with its buffer index remapped (constants get their own copied buffer)."""
    tensor = src.model.subgraphs[0].tensors[t]
    new = schema.TensorT()
    new.__dict__.update(tensor.__dict__)
    new.name = src.names[t]
    new.buffer = (
        _copy_buffer(src.model, tensor.buffer, buffers, bmap) if _is_constant(src, t) else 0
    )
    return new


def _copy_buffer(orig: Any, old: int, buffers: list[Any], bmap: dict[int, int]) -> int:
    """Index of buffer ``old`` in the new model, copying it on first use."""
    if old not in bmap:
        buf = _AlignedBufferT()
        buf.data = orig.buffers[old].data
        bmap[old] = len(buffers)
        buffers.append(buf)
    return bmap[old]


def _copy_operator(op: Any, tmap: dict[int, int], codes: dict[int, int]) -> Any:
    """The operator with tensor indices and opcode index remapped (``-1`` = optional, kept)."""
    new = schema.OperatorT()
    new.__dict__.update(op.__dict__)
    new.opcodeIndex = codes.setdefault(op.opcodeIndex, len(codes))
    new.inputs = [tmap[t] if t >= 0 else -1 for t in _raw(op.inputs)]
    new.outputs = [tmap[t] if t >= 0 else -1 for t in _raw(op.outputs)]
    new.intermediates = [tmap[t] for t in _ids(op.intermediates)] or None
    return new


def _copy_metadata(orig: Any, buffers: list[Any], bmap: dict[int, int], cut: Cut) -> list[Any]:
    """Original metadata entries (their buffers copied) plus a ``splitter`` JSON entry."""
    entries = []
    for meta in orig.metadata or []:
        if _decode(meta.name) == "splitter":
            continue
        new = schema.MetadataT()
        new.name, new.buffer = meta.name, _copy_buffer(orig, meta.buffer, buffers, bmap)
        entries.append(new)
    plan = _AlignedBufferT()
    plan.data = np.frombuffer(json.dumps(cut.metadata(), sort_keys=True).encode(), np.uint8)
    buffers.append(plan)
    own = schema.MetadataT()
    own.name, own.buffer = "splitter", len(buffers) - 1
    entries.append(own)
    return entries


def _signature(sub: Any) -> Any:
    """A ``serving_default`` signature mapping each input/output name to its tensor."""

    def tensor_map(index: int) -> Any:
        entry = schema.TensorMapT()
        entry.name, entry.tensorIndex = _decode(sub.tensors[index].name), index
        return entry

    sig = schema.SignatureDefT()
    sig.inputs = [tensor_map(i) for i in sub.inputs]
    sig.outputs = [tensor_map(i) for i in sub.outputs]
    sig.signatureKey, sig.subgraphIndex = _SIGNATURE_KEY, 0
    return sig


def _spec(tensor: Any, name: str) -> TensorSpec:
    """A :class:`TensorSpec` (with quantisation) from a ``TensorT``."""
    dtype = _DTYPES.get(tensor.type, f"tflite_type_{tensor.type}")
    shape = tuple(int(d) for d in (tensor.shape if tensor.shape is not None else ()))
    return TensorSpec(name=name, shape=shape, dtype=dtype, quant=_quant(tensor.quantization))


def _quant(q: Any) -> QuantParams | None:
    if q is None or q.scale is None or len(q.scale) == 0:
        return None
    zero = q.zeroPoint if q.zeroPoint is not None else [0] * len(q.scale)
    axis = int(q.quantizedDimension) if len(q.scale) > 1 else None
    return QuantParams(tuple(float(s) for s in q.scale), tuple(int(z) for z in zero), axis)


def _raw(values: Any) -> list[int]:
    return [] if values is None else [int(v) for v in values]


def _ids(values: Any) -> list[int]:
    """Tensor indices without the ``-1`` placeholder of omitted optional inputs."""
    return [v for v in _raw(values) if v >= 0]


def _decode(name: Any) -> str:
    if name is None:
        return ""
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else str(name)
