"""Validation: error metrics, input generation and loading, and that a wrong split fails."""

from __future__ import annotations

import math
from pathlib import Path

import flatbuffers
import numpy as np
import onnx
import pytest
from ai_edge_litert import schema_py_generated as schema
from onnx import numpy_helper
from test_slice_helpers import RESIDUAL_CUTS, cuts_between, residual_cnn

from splitter.errors import InputFileError, ValidationError
from splitter.importers import load_chain, load_model
from splitter.ir import TensorSpec
from splitter.slicing.boundaries import cuts_from_ranges
from splitter.slicing.onnx_slice import slice_onnx
from splitter.slicing.tflite_slice import slice_tflite
from splitter.slicing.validate import (
    compare,
    float_range_from_metadata,
    load_input_file,
    random_inputs,
    require_pass,
    validate_models,
)

MODELS = Path(__file__).resolve().parent.parent / "models"


def test_metrics_against_hand_computed_values() -> None:
    ref, got = np.array([1.0, 2.0, -4.0], np.float32), np.array([1.0, 2.5, -4.0], np.float32)
    s = compare("y", [ref], [got])
    assert s.max_abs == 0.5
    assert s.max_rel == 0.25  # 0.5 / |2|
    assert math.isclose(s.rmse, math.sqrt(0.25 / 3))
    assert math.isclose(s.cosine, (1 + 5 + 16) / (math.sqrt(21) * math.sqrt(23.25)))
    assert not s.exact and not s.passed  # 0.5 > 1e-5
    tiny = compare("y", [ref], [ref + np.float32(1e-6)])
    assert tiny.passed and not tiny.exact


def test_integer_outputs_must_be_bit_exact() -> None:
    ref = np.array([[-128, 0, 127]], np.int8)
    assert compare("q", [ref], [ref.copy()]).passed
    off_by_one = ref.copy()
    off_by_one[0, 1] = 1
    stats = compare("q", [ref], [off_by_one])
    assert not stats.passed and stats.max_abs == 1.0


def test_random_inputs_are_seeded_and_span_the_input_range() -> None:
    specs = [TensorSpec("q", (1, 64, 64), "int8"), TensorSpec("x", (1, 4096), "float32")]
    a, b = random_inputs(specs, 8, seed=3), random_inputs(specs, 8, seed=3)
    assert len(a) == 8
    assert all(np.array_equal(x["q"], y["q"]) for x, y in zip(a, b, strict=True))
    q = np.stack([s["q"] for s in a])
    assert q.dtype == np.int8 and q.min() == -128 and q.max() == 127
    x = np.concatenate([s["x"].ravel() for s in a])
    assert x.dtype == np.float32 and abs(x.mean()) < 0.05 and abs(x.std() - 1) < 0.05
    ranged = random_inputs(specs[1:], 2, float_range=(0.0, 1.0))
    assert all(s["x"].min() >= 0.0 and s["x"].max() <= 1.0 for s in ranged)


def test_input_file_shape_dtype_and_stacks(tmp_path: Path) -> None:
    spec = TensorSpec("x", (1, 3, 8, 8), "float32")
    one, stack = tmp_path / "one.npy", tmp_path / "stack.npy"
    np.save(one, np.zeros((1, 3, 8, 8), np.float32))
    np.save(stack, np.zeros((5, 3, 8, 8), np.float32))
    assert len(load_input_file(one, spec)) == 1
    assert [a.shape for a in load_input_file(stack, spec)] == [(1, 3, 8, 8)] * 5
    bad_shape, bad_dtype, junk = tmp_path / "s.npy", tmp_path / "d.npy", tmp_path / "j.npy"
    np.save(bad_shape, np.zeros((1, 3, 8, 9), np.float32))
    np.save(bad_dtype, np.zeros((1, 3, 8, 8), np.float64))
    junk.write_bytes(b"not numpy")
    with pytest.raises(InputFileError, match=r"needs shape \[1, 3, 8, 8\]"):
        load_input_file(bad_shape, spec)
    with pytest.raises(InputFileError, match="needs dtype float32, the file has float64"):
        load_input_file(bad_dtype, spec)
    with pytest.raises(InputFileError, match=r"cannot read \.npy"):
        load_input_file(junk, spec)


def test_user_input_files_are_added_to_the_samples(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(residual_cnn(), str(path))
    extra = tmp_path / "in.npy"
    np.save(extra, np.ones((2, 3, 8, 8), np.float32))
    subs = slice_onnx(load_model(path), cuts_between(RESIDUAL_CUTS, [0, 1, 0, 1, 0]))
    report = validate_models(
        load_model(path), [(s.file_name, s.data) for s in subs], input_files=[extra]
    )
    assert len(report.samples) == 10 and report.samples[-1].startswith("file:")
    assert report.to_dict()["outputs"][0]["per_sample_max_abs"] == [0.0] * 10


def _flip_first_weight_onnx(data: bytes) -> bytes:
    model = onnx.load_from_string(data)
    init = model.graph.initializer[0]
    array = numpy_helper.to_array(init).copy()
    array.flat[0] = -array.flat[0] + 1.0
    init.CopyFrom(numpy_helper.from_array(array, init.name))
    return model.SerializeToString()


def test_corrupted_onnx_submodel_fails_validation(tmp_path: Path) -> None:
    path = MODELS / "resnet8.onnx"
    chain = load_chain(path)
    mid = len(chain) // 2
    cuts = cuts_from_ranges(chain, [(0, 0, mid), (1, mid + 1, len(chain) - 1)], ["a", "b"])
    subs = [(s.file_name, s.data) for s in slice_onnx(load_model(path), cuts)]
    intact = validate_models(load_model(path), subs)
    require_pass(intact, path)
    assert [(b.submodel, b.max_abs) for b in intact.boundaries] == [(0, 0.0)]
    subs[1] = (subs[1][0], _flip_first_weight_onnx(subs[1][1]))
    report = validate_models(load_model(path), subs)
    assert not report.passed and report.boundaries[0].passed  # sub-model 0 is still right
    with pytest.raises(ValidationError, match="do not reproduce output") as info:
        require_pass(report, path)
    assert "\n" not in str(info.value)


def test_corrupted_int8_tflite_submodel_fails_validation() -> None:
    path = MODELS / "tiny_cnn_int8.tflite"
    chain = load_chain(path)
    cuts = cuts_from_ranges(chain, [(0, 0, 2), (1, 3, len(chain) - 1)], ["a", "b"])
    subs = [(s.file_name, s.data) for s in slice_tflite(load_model(path), cuts)]
    require_pass(validate_models(load_model(path), subs), path)
    # negate the int8 weights of the first operator (a convolution) of the first sub-model
    model = schema.ModelT.InitFromPackedBuf(subs[0][1], 0)
    graph = model.subgraphs[0]
    weights = model.buffers[graph.tensors[graph.operators[0].inputs[1]].buffer]
    weights.data = (-weights.data.view(np.int8).astype(np.int16)).clip(-127, 127).astype(np.int8)
    weights.data = weights.data.view(np.uint8)
    builder = flatbuffers.Builder(1024)
    builder.Finish(model.Pack(builder), file_identifier=b"TFL3")
    subs[0] = (subs[0][0], bytes(builder.Output()))
    report = validate_models(load_model(path), subs)
    assert not report.passed and not report.outputs[0].exact
    assert not report.boundaries[0].passed and report.boundaries[0].submodel == 0
    with pytest.raises(ValidationError, match="bit-exact required") as info:
        require_pass(report, path)
    assert "first divergence: sub-model 00_a.tflite" in str(info.value)


def test_float_input_range_from_model_metadata() -> None:
    assert float_range_from_metadata({"input_range": "0,1"}) == (0.0, 1.0)
    assert float_range_from_metadata({"splitter.input_range": "[-1, 1]"}) == (-1.0, 1.0)
    assert float_range_from_metadata({"author": "x"}) is None
    with pytest.raises(InputFileError, match="not 'low,high'"):
        float_range_from_metadata({"input_range": "1,0"}, "m.onnx")
