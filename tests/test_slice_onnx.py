"""ONNX slicing: checker-clean, runnable sub-models that chain back to the original exactly."""

from __future__ import annotations

import itertools
from pathlib import Path

import onnx
import onnxruntime as ort
import pytest
from test_slice_helpers import RESIDUAL_CUTS, cuts_between, residual_cnn

from splitter.errors import ShapeError, ValidationError
from splitter.importers import LoadedModel, load_chain, load_model
from splitter.ir import Graph
from splitter.slicing.boundaries import cuts_from_ranges
from splitter.slicing.onnx_slice import slice_onnx
from splitter.slicing.validate import require_pass, validate_models

MODELS = Path(__file__).resolve().parent.parent / "models"


@pytest.fixture
def residual_path(tmp_path: Path) -> Path:
    path = tmp_path / "residual.onnx"
    onnx.save(residual_cnn(), str(path))
    return path


def test_every_submodel_passes_full_check_and_opens_in_onnxruntime(residual_path: Path) -> None:
    subs = slice_onnx(load_model(residual_path), cuts_between(RESIDUAL_CUTS, [0, 1, 0, 1, 0]))
    assert [s.file_name for s in subs] == [
        "00_dev0.onnx", "01_dev1.onnx", "02_dev0.onnx", "03_dev1.onnx", "04_dev0.onnx",
    ]  # fmt: skip
    for sub, (a, b) in zip(subs, itertools.pairwise(RESIDUAL_CUTS), strict=True):
        model = onnx.load_from_string(sub.data)
        onnx.checker.check_model(model, full_check=True)
        session = ort.InferenceSession(sub.data, providers=["CPUExecutionProvider"])
        assert [i.name for i in session.get_inputs()] == [a[0]]
        assert [o.name for o in session.get_outputs()] == [b[0]]
        assert sub.inputs[0].shape == a[1] and sub.outputs[0].shape == b[1]


def test_submodels_keep_opset_ir_metadata_and_only_used_initializers(residual_path: Path) -> None:
    original = residual_cnn()
    subs = slice_onnx(load_model(residual_path), cuts_between(RESIDUAL_CUTS, [0, 1, 0, 1, 0]))
    models = [onnx.load_from_string(s.data) for s in subs]
    assert [sorted(i.name for i in m.graph.initializer) for m in models] == [
        ["b1", "w1"], ["b2", "w2"], [], [], ["bf", "wf"],
    ]  # fmt: skip
    for k, model in enumerate(models):
        assert model.ir_version == original.ir_version
        assert list(model.opset_import) == list(original.opset_import)
        props = {p.key: p.value for p in model.metadata_props}
        assert props["author"] == "tests"
        assert props["splitter.submodel_index"] == str(k)
        assert props["splitter.device"] == f"dev{[0, 1, 0, 1, 0][k]}"
        assert props["splitter.first_layer"] == props["splitter.last_layer"] == str(k)
        io = {v.name for v in model.graph.input} | {v.name for v in model.graph.output}
        assert not io & {v.name for v in model.graph.value_info}
    # every intermediate tensor has a shape (full value_info)
    assert {v.name for v in models[1].graph.value_info} == {"c2", "s1"}


def test_chain_of_submodels_is_bit_exact(residual_path: Path) -> None:
    subs = slice_onnx(load_model(residual_path), cuts_between(RESIDUAL_CUTS, [0, 1, 0, 1, 0]))
    report = validate_models(load_model(residual_path), [(s.file_name, s.data) for s in subs])
    require_pass(report, residual_path)
    assert report.outputs[0].max_abs == 0.0 and len(report.samples) == 8


def test_ir3_model_lists_initializers_as_inputs(tmp_path: Path) -> None:
    path = tmp_path / "old.onnx"
    onnx.save(residual_cnn(ir_version=3, opset=8), str(path))
    # the importer refuses opset 8, so the slicer's own IR < 4 handling is tested on a
    # LoadedModel made by hand (the serialised file, no graph)
    old = LoadedModel(path, "onnx", path.read_bytes(), Graph("old", (), {}, (), ()))
    subs = slice_onnx(old, cuts_between(RESIDUAL_CUTS, [0, 1, 0, 1, 0]))
    first = onnx.load_from_string(subs[0].data)
    assert first.ir_version == 3
    assert {v.name for v in first.graph.input} == {"x", "w1", "b1"}
    assert [t.name for t in subs[0].inputs] == ["x"]  # initializers are not boundary tensors
    report = validate_models(old, [(s.file_name, s.data) for s in subs])
    require_pass(report, path)


def test_input_layer_alone_becomes_a_passthrough_submodel(residual_path: Path) -> None:
    points = [RESIDUAL_CUTS[0], RESIDUAL_CUTS[0], RESIDUAL_CUTS[-1]]
    subs = slice_onnx(load_model(residual_path), cuts_between(points, [1, 0]))
    first = onnx.load_from_string(subs[0].data)
    assert len(first.graph.node) == 0
    assert subs[0].inputs == subs[0].outputs == subs[1].inputs  # names kept across the cut
    onnx.checker.check_model(first, full_check=True)
    report = validate_models(load_model(residual_path), [(s.file_name, s.data) for s in subs])
    require_pass(report, residual_path)


def test_cut_inside_a_branch_is_rejected(residual_path: Path) -> None:
    # c2 is inside the residual block: Add also reads r1, which the second part never receives
    points = [RESIDUAL_CUTS[0], ("c2", (1, 8, 8, 8)), RESIDUAL_CUTS[-1]]
    with pytest.raises(ValidationError, match="does not separate the graph"):
        slice_onnx(load_model(residual_path), cuts_between(points, [0, 1]))


def test_unknown_boundary_tensor_is_a_shape_error(residual_path: Path) -> None:
    points = [RESIDUAL_CUTS[0], ("nope", (1,)), RESIDUAL_CUTS[-1]]
    with pytest.raises(ShapeError, match="'nope' is not in"):
        slice_onnx(load_model(residual_path), cuts_between(points, [0, 1]))


@pytest.mark.parametrize("name", sorted(p.name for p in MODELS.glob("*.onnx")))
def test_reference_model_split_in_three_at_chain_boundaries_is_exact(name: str) -> None:
    path = MODELS / name
    chain = load_chain(path)
    n = len(chain)
    bounds = [0, n // 3, 2 * n // 3, n]
    ranges = [(k % 2, bounds[k], bounds[k + 1] - 1) for k in range(3)]
    subs = slice_onnx(load_model(path), cuts_from_ranges(chain, ranges, ["a", "b"]))
    for sub in subs:
        onnx.checker.check_model(onnx.load_from_string(sub.data), full_check=True)
    report = validate_models(load_model(path), [(s.file_name, s.data) for s in subs])
    require_pass(report, path)
    assert all(s.max_abs == 0.0 for s in report.outputs)
    total = sum(len(s.data) for s in subs)
    assert total <= path.stat().st_size * 1.02 + 4096 * len(subs)
