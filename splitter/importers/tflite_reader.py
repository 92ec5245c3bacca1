"""Low-level reading of a TFLite flatbuffer with the ``tflite`` package (schema accessors).

Turns subgraph 0 of a ``.tflite`` file into plain Python values: per-tensor name, shape, shape
signature, dtype, quantisation and constant data, and per-operator builtin name, tensor indices
and the raw options table. :mod:`splitter.importers.tflite_import` builds the canonical graph
from these. Schema reference: tensorflow/compiler/mlir/lite/schema/schema.fbs.
"""

from __future__ import annotations

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
