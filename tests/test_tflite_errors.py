"""Bad TFLite input: each case is one SplitterError with a one-line message, never a traceback.

Bad files are made from the real converter-made models by flatbuffer edits (opcode, shape
signature) or by cutting / corrupting bytes.
"""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import tflite
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_tflite_support import (
    MODELS,
    OpDef,
    TensorDef,
    build_model,
    opcode_index_of,
    set_opcode,
    set_shape_signature,
)

from splitter.errors import InputFileError, ShapeError, SplitterError, UnsupportedOpError
from splitter.importers.tflite_import import load_tflite

FLOAT = MODELS / "tiny_cnn_float.tflite"
SINE = MODELS / "sine_float.tflite"


def _write(tmp_path: Path, data: bytes | bytearray, name: str = "bad.tflite") -> Path:
    p = tmp_path / name
    p.write_bytes(bytes(data))
    return p


def _one_line(e: pytest.ExceptionInfo[SplitterError], path: Path) -> str:
    msg = str(e.value)
    assert "\n" not in msg and str(path) in msg
    return msg


def _op_indices(buf: bytes, opcode_index: int) -> list[int]:
    sg = tflite.Model.GetRootAs(buf, 0).Subgraphs(0)
    return [i for i in range(sg.OperatorsLength()) if sg.Operators(i).OpcodeIndex() == opcode_index]


def test_unsupported_ops_all_listed_in_one_error(tmp_path: Path) -> None:
    """LOGISTIC -> EXP (47) and MUL -> SIN (66): both named, with every operator index."""
    buf = bytearray(FLOAT.read_bytes())
    logistic, mul = opcode_index_of(bytes(buf), "LOGISTIC"), opcode_index_of(bytes(buf), "MUL")
    set_opcode(buf, logistic, 47)
    set_opcode(buf, mul, 66)
    p = _write(tmp_path, buf)
    with pytest.raises(UnsupportedOpError) as e:
        load_tflite(p)
    msg = _one_line(e, p)
    expected = [f"EXP (operator #{i})" for i in _op_indices(bytes(buf), logistic)]
    expected += [f"SIN (operator #{i})" for i in _op_indices(bytes(buf), mul)]
    assert len(expected) == 2
    for item in expected:
        assert item in msg
    assert isinstance(e.value, NotImplementedError)


def test_unsupported_ops_in_int8_model_edited_everywhere(tmp_path: Path) -> None:
    """Every CONV_2D of the int8 model renamed to TRANSPOSE_CONV: all four listed."""
    buf = bytearray((MODELS / "tiny_cnn_int8.tflite").read_bytes())
    conv = opcode_index_of(bytes(buf), "CONV_2D")
    set_opcode(buf, conv, 67)
    p = _write(tmp_path, buf)
    with pytest.raises(UnsupportedOpError) as e:
        load_tflite(p)
    msg = _one_line(e, p)
    indices = _op_indices(bytes(buf), conv)
    assert len(indices) == 3
    assert msg.count("TRANSPOSE_CONV (operator #") == len(indices)


@pytest.mark.parametrize("fraction", [0.02, 0.1, 0.3, 0.5, 0.7, 0.9, 0.99])
def test_truncated_file(tmp_path: Path, fraction: float) -> None:
    data = FLOAT.read_bytes()
    p = _write(tmp_path, data[: int(len(data) * fraction)])
    with pytest.raises(InputFileError) as e:
        load_tflite(p)
    _one_line(e, p)


@pytest.mark.parametrize(
    "data",
    [b"", b"TFL3", b"not a model at all, just text\n" * 4, b"\x08\x00\x00\x00ONNX" + bytes(64)],
    ids=["empty", "short", "text", "wrong-identifier"],
)
def test_not_a_tflite_file(tmp_path: Path, data: bytes) -> None:
    p = _write(tmp_path, data)
    with pytest.raises(InputFileError) as e:
        load_tflite(p)
    assert "TFL3" in _one_line(e, p)


def test_corrupt_root_offset(tmp_path: Path) -> None:
    buf = bytearray(FLOAT.read_bytes())
    buf[0:4] = b"\xf0\xff\xff\x7f"
    p = _write(tmp_path, buf)
    with pytest.raises(InputFileError) as e:
        load_tflite(p)
    assert "corrupt" in _one_line(e, p)


def test_missing_file(tmp_path: Path) -> None:
    p = tmp_path / "nope.tflite"
    with pytest.raises(InputFileError) as e:
        load_tflite(p)
    _one_line(e, p)


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(data=st.data())
def test_random_byte_corruption_never_crashes(tmp_path: Path, data: st.DataObject) -> None:
    """Overwriting random bytes gives a Graph or a SplitterError, never another exception."""
    buf = bytearray(SINE.read_bytes())
    for _ in range(data.draw(st.integers(1, 8))):
        buf[data.draw(st.integers(8, len(buf) - 1))] = data.draw(st.integers(0, 255))
    p = _write(tmp_path, buf)
    try:
        load_tflite(p)
    except SplitterError as e:
        assert "\n" not in str(e)


def test_dynamic_non_batch_dim_needs_input_shape(tmp_path: Path) -> None:
    buf = bytearray(SINE.read_bytes())
    set_shape_signature(buf, 0, 1, -1)  # input signature [-1, 1] -> [-1, -1]
    p = _write(tmp_path, buf)
    with pytest.raises(ShapeError) as e:
        load_tflite(p)
    msg = _one_line(e, p)
    assert "--input-shape serving_default_dense_input:0=1x1" in msg
    g = load_tflite(p, input_shapes={"serving_default_dense_input:0": (3, 1)})
    assert g.tensors[g.outputs[0]].shape == (3, 1)


def test_input_shape_override_errors(tmp_path: Path) -> None:
    with pytest.raises(ShapeError, match="unknown input"):
        load_tflite(SINE, input_shapes={"nope": (1, 1)})
    with pytest.raises(ShapeError, match="does not fit"):
        load_tflite(SINE, input_shapes={"serving_default_dense_input:0": (1, 2)})
    with pytest.raises(ShapeError, match="does not fit"):
        load_tflite(FLOAT, input_shapes={"serving_default_mfcc:0": (2, 49, 10, 1)})


def test_inconsistent_stored_shape_is_reported(tmp_path: Path) -> None:
    """An output whose stored shape disagrees with what its op computes: ShapeError."""
    buf = bytearray(SINE.read_bytes())
    sg = tflite.Model.GetRootAs(bytes(buf), 0).Subgraphs(0)
    out = sg.Operators(0).Outputs(0)
    t = sg.Tensors(out)
    struct.pack_into("<i", buf, t._tab.Vector(t._tab.Offset(4)) + 4, 17)  # shape [1, 16] -> [1, 17]
    p = _write(tmp_path, buf)
    with pytest.raises(ShapeError) as e:
        load_tflite(p)
    assert "(1, 17)" in _one_line(e, p)


def test_unsupported_tensor_type(tmp_path: Path) -> None:
    """A COMPLEX64 constant cannot be held: UnsupportedOpError naming the tensor and type."""
    c = np.ones((1, 4), np.complex64)
    tensors = [TensorDef("x", (1, 4)), TensorDef("c", (1, 4), c), TensorDef("y", (1, 4))]
    path = tmp_path / "complex.tflite"
    path.write_bytes(build_model(tensors, [OpDef(0, (0, 1), (2,))], (0,), (2,)))  # 0 = ADD
    with pytest.raises(UnsupportedOpError) as e:
        load_tflite(path)
    assert "tensor 'c' has unsupported type COMPLEX64" in _one_line(e, path)
