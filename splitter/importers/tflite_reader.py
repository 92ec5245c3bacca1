"""Low-level reading of a TFLite flatbuffer with the ``tflite`` package (schema accessors).

Turns subgraph 0 of a ``.tflite`` file into plain Python values: per-tensor name, shape, shape
signature, dtype, quantisation and constant data, and per-operator builtin name, tensor indices
and the raw options table. :mod:`splitter.importers.tflite_import` builds the canonical graph
from these. Schema reference: tensorflow/compiler/mlir/lite/schema/schema.fbs.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import tflite
from tflite.utils import BUILTIN_OPCODE2NAME

from splitter.errors import UnsupportedOpError, quoted
from splitter.ir import QuantParams

#: TFLite ``TensorType`` enum value -> numpy dtype name (types splitter can hold as numpy arrays).
TENSOR_DTYPES: dict[int, str] = {
    0: "float32",
    1: "float16",
    2: "int32",
    3: "uint8",
    4: "int64",
    6: "bool",
    7: "int16",
    9: "int8",
    10: "float64",
    12: "uint64",
    15: "uint32",
    16: "uint16",
}

#: ``TensorType`` names, for error messages about types splitter cannot hold.
TENSOR_TYPE_NAMES: dict[int, str] = {
    v: k for k, v in vars(tflite.TensorType).items() if not k.startswith("_") and isinstance(v, int)
}

TFLITE_IDENTIFIER = b"TFL3"


@dataclass(frozen=True)
class TensorInfo:
    """One tensor of the subgraph: ``data`` is its constant value (shaped) or ``None``."""

    index: int
    name: str
    shape: tuple[int, ...]
    signature: tuple[int, ...]
    dtype: str
    quant: QuantParams | None
    data: np.ndarray | None
    type_code: int = 0  # TFLite TensorType enum value

    @property
    def is_const(self) -> bool:
        """A constant (weight, bias, axes...) rather than an activation."""
        return self.data is not None


@dataclass(frozen=True)
class OperatorInfo:
    """One operator: builtin name (``CUSTOM:<code>`` for custom ops), tensor indices, options."""

    index: int
    builtin: str
    inputs: tuple[int, ...]  # -1 = optional input absent
    outputs: tuple[int, ...]
    options: Any  # flatbuffers Table of the builtin options, or None


def has_identifier(buf: bytes) -> bool:
    """A TFLite flatbuffer carries the file identifier ``TFL3`` at bytes 4..8."""
    return len(buf) >= 8 and buf[4:8] == TFLITE_IDENTIFIER


def tensor_names(subgraph: Any) -> list[str]:
    """Unique names of a subgraph's tensors, by tensor index.

    A tensor keeps its name from the file; a name the file repeats (or an empty name) gets
    ``":<index>"`` appended on every occurrence (so ``"x"`` at tensors 3 and 7 becomes ``"x:3"``
    and ``"x:7"``), following the convention of :mod:`splitter.ir`.
    """
    raw = [_decode(subgraph.Tensors(i).Name()) for i in range(subgraph.TensorsLength())]
    counts = Counter(raw)
    return [f"{name}:{i}" if (counts[name] > 1 or not name) else name for i, name in enumerate(raw)]


def builtin_name(model: Any, opcode_index: int) -> str:
    """The builtin operator name of an opcode (``max`` of the deprecated int8 and the int32 code,
    as the TFLite schema v3a prescribes); custom ops are ``CUSTOM:<custom_code>``."""
    code = model.OperatorCodes(opcode_index)
    value = max(int(code.BuiltinCode()), int(code.DeprecatedBuiltinCode()))
    name = BUILTIN_OPCODE2NAME.get(value, f"BUILTIN_{value}")
    if name == "CUSTOM":
        return f"CUSTOM:{_decode(code.CustomCode())}"
    return name


def read_operators(model: Any, subgraph: Any) -> list[OperatorInfo]:
    """Every operator of ``subgraph`` in file (execution) order."""
    ops = []
    for i in range(subgraph.OperatorsLength()):
        op = subgraph.Operators(i)
        ins = tuple(int(x) for x in op.InputsAsNumpy()) if op.InputsLength() else ()
        outs = tuple(int(x) for x in op.OutputsAsNumpy()) if op.OutputsLength() else ()
        ops.append(OperatorInfo(i, builtin_name(model, op.OpcodeIndex()), ins, outs, _options(op)))
    return ops


def read_tensors(model: Any, subgraph: Any, buf: bytes) -> list[TensorInfo]:
    """Every tensor of ``subgraph`` with its unique name, quantisation and constant data."""
    names = tensor_names(subgraph)
    out = []
    for i in range(subgraph.TensorsLength()):
        t = subgraph.Tensors(i)
        shape = tuple(int(d) for d in t.ShapeAsNumpy()) if t.ShapeLength() else ()
        sig = tuple(int(d) for d in t.ShapeSignatureAsNumpy()) if t.ShapeSignatureLength() else ()
        dtype = TENSOR_DTYPES.get(int(t.Type()), "")
        raw = _buffer_bytes(model, int(t.Buffer()), buf)
        data = None
        if raw is not None:
            if t.Sparsity() is not None:
                raise UnsupportedOpError(
                    f"<model>: tensor {quoted(names[i])} is sparse (TFLite sparsity encoding); "
                    "re-export the model with dense weights"
                )
            data = _const_array(names[i], raw, dtype, int(t.Type()), shape)
        info = TensorInfo(i, names[i], shape, sig or shape, dtype, _quant(t), data, int(t.Type()))
        out.append(info)
    return out


def unsupported_dtype_error(tensor_name: str, type_code: int, path: str) -> UnsupportedOpError:
    """Error for a tensor type numpy/splitter cannot hold (INT4, STRING, RESOURCE...)."""
    tname = TENSOR_TYPE_NAMES.get(type_code, str(type_code))
    return UnsupportedOpError(
        f"{path}: tensor {quoted(tensor_name)} has unsupported type {tname}; "
        "re-export the model with float32 or int8 tensors"
    )


def _decode(raw: bytes | None) -> str:
    return raw.decode("utf-8", errors="replace") if raw else ""


def _options(op: Any) -> Any:
    """The builtin options table (callers wrap it in the right ``*Options`` class)."""
    if op.BuiltinOptionsType() == 0:
        return None
    return op.BuiltinOptions()


def _buffer_bytes(model: Any, index: int, buf: bytes) -> bytes | None:
    """Bytes of buffer ``index``: inline ``data`` or, for >2 GB files, ``offset``/``size`` into the
    file; ``None`` when empty (buffer 0 is the schema's always-empty sentinel)."""
    if index <= 0:
        return None
    b = model.Buffers(index)
    if b.DataLength() > 0:
        return bytes(b.DataAsNumpy().tobytes())
    offset, size = int(b.Offset()), int(b.Size())
    if offset > 1 and size > 0:
        if offset + size > len(buf):
            raise ValueError(f"buffer {index} extends past the end of the file")
        return buf[offset : offset + size]
    return None


def _const_array(
    name: str, raw: bytes, dtype: str, type_code: int, shape: tuple[int, ...]
) -> np.ndarray:
    if not dtype:
        raise unsupported_dtype_error(name, type_code, "<model>")
    arr = np.frombuffer(raw, dtype=np.dtype(dtype).newbyteorder("<"))
    expected = int(np.prod(shape)) if shape else 1
    if arr.size != expected:
        raise ValueError(
            f"constant {quoted(name)} holds {arr.size} values, shape {shape} needs {expected}"
        )
    return arr.astype(dtype).reshape(shape)


def _quant(t: Any) -> QuantParams | None:
    """Affine quantisation ``real = scale * (q - zero_point)``; per-channel along
    ``quantized_dimension`` when there is more than one scale."""
    q = t.Quantization()
    if q is None or q.ScaleLength() == 0:
        return None
    scale = tuple(float(s) for s in q.ScaleAsNumpy())
    zp = tuple(int(z) for z in q.ZeroPointAsNumpy()) if q.ZeroPointLength() else (0,) * len(scale)
    axis = int(q.QuantizedDimension()) if len(scale) > 1 else None
    return QuantParams(scale, zp, axis)


# --- structure checks (before any index is followed) ---------------------------------------------

#: Builtin operator -> the ``BuiltinOptions`` union member its options must be (schema.fbs), for
#: the operators whose name does not spell it (``CONV_2D`` -> ``Conv2DOptions`` is derived);
#: ``None``: the operator takes no options.
_OPTIONS_OF = {
    "AVERAGE_POOL_2D": "Pool2DOptions",
    "MAX_POOL_2D": "Pool2DOptions",
    "MEAN": "ReducerOptions",
    "PADV2": "PadV2Options",
    "LOGISTIC": None,
    "RELU": None,
    "RELU6": None,
    "RELU_N1_TO_1": None,
    "TANH": None,
}
_OPTION_CODES = {
    k: v
    for k, v in vars(tflite.BuiltinOptions).items()
    if not k.startswith("_") and isinstance(v, int)
}
_OPTION_NAMES = {v: k for k, v in _OPTION_CODES.items()}


def expected_options(builtin: str) -> int | None:
    """The ``builtin_options_type`` code operator ``builtin`` carries (0 = none), or ``None``
    when splitter does not know the operator."""
    if builtin in _OPTIONS_OF:
        name = _OPTIONS_OF[builtin]
        return 0 if name is None else _OPTION_CODES.get(name)
    camel = "".join(w.capitalize() if not w[0].isdigit() else w.upper() for w in builtin.split("_"))
    return _OPTION_CODES.get(f"{camel}Options")


def _vector_fits(tab: Any, field: int, elem_bytes: int, size: int) -> bool:
    """Whether the vector in vtable slot ``field`` (4 + 2 * field index, schema order) of a
    flatbuffers table lies inside the file: ``start + length * elem_bytes <= size``."""
    o = tab.Offset(field)
    if o == 0:
        return True
    start = tab.Vector(o)
    return start >= 0 and start + tab.VectorLen(o) * elem_bytes <= size


#: (label, vtable slot, element bytes) of every vector the importer reads, per table.
_MODEL_VECTORS = (("operator_codes", 6, 4), ("subgraphs", 8, 4), ("buffers", 12, 4))
_SUBGRAPH_VECTORS = (("tensors", 4, 4), ("inputs", 6, 4), ("outputs", 8, 4), ("operators", 10, 4))
_TENSOR_VECTORS = (("shape", 4, 4), ("name", 10, 1), ("shape_signature", 18, 4))
_OPERATOR_VECTORS = (("inputs", 6, 4), ("outputs", 8, 4), ("intermediates", 20, 4))
_QUANT_VECTORS = (("scale", 8, 4), ("zero_point", 10, 8))


def _vectors_problem(
    what: str, table: Any, vectors: tuple[tuple[str, int, int], ...], size: int
) -> str | None:
    for label, field, elem in vectors:
        if not _vector_fits(table._tab, field, elem, size):
            return f"{what}.{label}: its length runs past the end of the file"
    return None


def structure_problem(
    model: Any, sg: Any, size: int, supported: frozenset[str] = frozenset()
) -> str | None:
    """The first index or length of ``model`` (subgraph ``sg``) that points outside the file or
    its tables, or ``None``: vector lengths, tensor ``buffer`` indices, operator
    ``opcode_index`` / tensor indices / ``builtin_options_type``, graph inputs and outputs.
    Checked before anything is read through them (flatbuffers accessors do not check). The
    options type is matched to the operator only for the ``supported`` operators (the others are
    reported, all together, as unsupported)."""
    found = _vectors_problem("model", model, _MODEL_VECTORS, size) or _vectors_problem(
        "subgraph 0", sg, _SUBGRAPH_VECTORS, size
    )
    if found:
        return found
    n_tensors, n_buffers = sg.TensorsLength(), model.BuffersLength()
    for i in range(n_tensors):
        t = sg.Tensors(i)
        q = t.Quantization()
        found = _vectors_problem(f"tensor #{i}", t, _TENSOR_VECTORS, size) or (
            None
            if q is None
            else _vectors_problem(f"tensor #{i}.quantization", q, _QUANT_VECTORS, size)
        )
        if found:
            return found
        if not 0 <= t.Buffer() < n_buffers:
            return f"tensor #{i}.buffer = {t.Buffer()}, the file has {n_buffers} buffers"
    for k in range(sg.OperatorsLength()):
        found = _operator_problem(model, sg.Operators(k), k, n_tensors, size, supported)
        if found:
            return found
    ios = [int(x) for x in (sg.InputsAsNumpy() if sg.InputsLength() else ())]
    ios += [int(x) for x in (sg.OutputsAsNumpy() if sg.OutputsLength() else ())]
    bad = next((x for x in ios if not 0 <= x < n_tensors), None)
    if bad is not None:
        return f"subgraph 0 inputs / outputs name tensor {bad}, the subgraph has {n_tensors}"
    return None


def _operator_problem(
    model: Any, op: Any, k: int, n_tensors: int, size: int, supported: frozenset[str]
) -> str | None:
    """The first bad index, length or options type of operator ``k``, or ``None``."""
    found = _vectors_problem(f"operator #{k}", op, _OPERATOR_VECTORS, size)
    if found:
        return found
    if not 0 <= op.OpcodeIndex() < model.OperatorCodesLength():
        n_codes = model.OperatorCodesLength()
        return f"operator #{k}.opcode_index = {op.OpcodeIndex()}, the file has {n_codes} opcodes"
    ins = [int(x) for x in op.InputsAsNumpy()] if op.InputsLength() else []
    outs = [int(x) for x in op.OutputsAsNumpy()] if op.OutputsLength() else []
    if any(not -1 <= x < n_tensors for x in ins) or any(not 0 <= x < n_tensors for x in outs):
        return f"operator #{k}: tensor index outside 0..{n_tensors - 1}"
    code = int(op.BuiltinOptionsType())
    builtin = builtin_name(model, op.OpcodeIndex())
    want = expected_options(builtin) if builtin in supported else None
    if code not in _OPTION_NAMES and code != 0:
        return f"operator #{k} ({builtin}).builtin_options_type = {code} is no BuiltinOptions type"
    if want is not None and code not in (0, want):
        return (
            f"operator #{k} ({builtin}).builtin_options_type = {_OPTION_NAMES.get(code, code)}, "
            f"{builtin} takes {_OPTION_NAMES.get(want, 'none')}"
        )
    return None


#: Zero-point range of each quantised integer type (the type's own range).
_ZERO_POINT_RANGE = {
    "int8": (-128, 127),
    "uint8": (0, 255),
    "int16": (-32768, 32767),
    "int32": (-(2**31), 2**31 - 1),
}


def quant_problem(t: TensorInfo) -> str | None:
    """A quantisation that cannot describe real values (``real = scale * (q - zero_point)``,
    TFLite quantisation spec): a scale that is not finite and positive, a zero point outside the
    tensor type's range, or per-channel parameters whose count is not the channel count."""
    q = t.quant
    if q is None:
        return None
    bad = next((s for s in q.scale if not (math.isfinite(s) and s > 0)), None)
    if bad is not None:
        return f"tensor {quoted(t.name)}: quantization scale {bad!r} is not a finite number > 0"
    low, high = _ZERO_POINT_RANGE.get(t.dtype, (-(2**63), 2**63 - 1))
    zp = next((z for z in q.zero_point if not low <= z <= high), None)
    if zp is not None:
        name = quoted(t.name)
        return f"tensor {name}: quantization zero_point {zp} is outside {t.dtype}'s {low}..{high}"
    if len(q.zero_point) != len(q.scale):
        counts = f"{len(q.scale)} quantization scales but {len(q.zero_point)} zero points"
        return f"tensor {quoted(t.name)}: {counts}"
    if len(q.scale) > 1 and (
        q.axis is None or not 0 <= q.axis < len(t.shape) or t.shape[q.axis] != len(q.scale)
    ):
        return (
            f"tensor {quoted(t.name)}: {len(q.scale)} per-channel scales along quantized_dimension "
            f"{q.axis}, shape {t.shape}"
        )
    return None
