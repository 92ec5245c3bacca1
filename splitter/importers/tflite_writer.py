"""Write TFLite flatbuffers: the one writer the importer and the slicer share.

The ``tflite`` package the importer reads with has no builders, so models are written with the
flatbuffers object API generated from the TFLite schema (``ai_edge_litert.schema_py_generated``:
``*T`` classes that ``Pack`` themselves). Constant buffers are 16-byte aligned, as the TFLite
converter writes them (:class:`AlignedBufferT`).

:func:`with_tensor_shapes` is the importer's normalisation: the user's ``--input-shape`` and the
shapes it propagates written into each tensor's ``shape``. ``shape_signature`` is kept, so the
file still says which dimensions may vary while ``shape`` says what this load fixed them to
(LiteRT allocates ``shape``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import flatbuffers
import numpy as np
from ai_edge_litert import schema_py_generated as schema

from splitter.errors import UnsupportedOpError

#: Alignment of constant buffers; the TFLite converter aligns them to 16 bytes.
BUFFER_ALIGNMENT = 16
#: The TFLite flatbuffer file identifier (schema.fbs ``file_identifier``).
FILE_IDENTIFIER = b"TFL3"


class AlignedBufferT(schema.BufferT):
    """A ``BufferT`` whose data vector is aligned to :data:`BUFFER_ALIGNMENT` bytes."""

    def Pack(self, builder: flatbuffers.Builder) -> int:
        data = None
        if self.data is not None and len(self.data):
            raw = np.ascontiguousarray(self.data, dtype=np.uint8).tobytes()
            builder.StartVector(1, len(raw), BUFFER_ALIGNMENT)
            builder.head = builder.head - len(raw)
            builder.Bytes[builder.head : builder.head + len(raw)] = raw
            data = builder.EndVector()
        schema.BufferStart(builder)
        if data is not None:
            schema.BufferAddData(builder, data)
        return int(schema.BufferEnd(builder))


def pack_model(model: Any) -> bytes:
    """Serialise a ``schema.ModelT`` (buffers as :class:`AlignedBufferT`) with the TFL3 id."""
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=FILE_IDENTIFIER)
    return bytes(builder.Output())


def aligned(buffer: Any) -> AlignedBufferT:
    """``buffer`` (a ``schema.BufferT``) as an :class:`AlignedBufferT` with the same fields."""
    new = AlignedBufferT()
    new.__dict__.update(buffer.__dict__)
    return new


def with_tensor_shapes(data: bytes, shapes: Mapping[int, tuple[int, ...]], where: str) -> bytes:
    """``data`` with tensor ``i`` of subgraph 0 stored with shape ``shapes[i]``.

    ``data`` itself (the same bytes) when every stored shape already matches; otherwise the model
    is unpacked and packed again, everything else unchanged.
    """
    model = schema.ModelT.InitFromPackedBuf(data, 0)
    tensors = model.subgraphs[0].tensors or []
    changed = False
    for index, shape in shapes.items():
        tensor = tensors[index]
        stored = tuple(int(d) for d in (tensor.shape if tensor.shape is not None else ()))
        if stored != tuple(shape):
            tensor.shape = np.array(shape, dtype=np.int32)
            changed = True
    if not changed:
        return data
    if any(getattr(b, "offset", 0) for b in model.buffers or []):
        raise UnsupportedOpError(
            f"{where}: buffers stored outside the flatbuffer (>2 GB models) cannot be rewritten "
            "with the --input-shape; give a model with static input shapes"
        )
    model.buffers = [aligned(b) for b in model.buffers or []]
    return pack_model(model)
