"""TFLite slicing: flatbuffers LiteRT loads and runs, bit-exact chains, no bloat."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest
from ai_edge_litert import schema_py_generated as schema
from ai_edge_litert.interpreter import Interpreter
from test_slice_helpers import tflite_cut_points
from tflite.Model import Model

from splitter.errors import ValidationError
from splitter.importers import load_chain, load_model
from splitter.importers.tflite_reader import tensor_names as importer_tensor_names
from splitter.ir import TensorSpec
from splitter.slicing.boundaries import Cut, cuts_from_ranges
from splitter.slicing.tflite_slice import (
    BUFFER_ALIGNMENT,
    load_tflite_model,
    slice_tflite,
    tensor_names,
)
from splitter.slicing.validate import require_pass, validate_models

MODELS = Path(__file__).resolve().parent.parent / "models"
#: MobileNetV2-1.0 224 int8 (4 MB, 314 M MACs): too slow for these per-model sweeps;
#: tests/test_pex_plan.py imports, plans, generates and runs it
#: two_inputs_int8 is cut and validated through its operator-granularity chain, the one chain
#: a model with several inputs plans on (tests/test_two_inputs.py); the cut points here are the
#: super-node chain's
TFLITE = sorted(
    p.name
    for p in MODELS.glob("*.tflite")
    if p.stem not in ("mobilenet_v2_224_int8", "two_inputs_int8")
)
#: allowed growth of the summed sub-model sizes: a few percent plus a constant per file
SIZE_SLACK, SIZE_PER_FILE = 0.03, 2048


def _cuts_at_every_point(path: Path) -> list[Cut]:
    _, model = load_tflite_model(path)
    names = tensor_names(model.subgraphs[0])
    points = tflite_cut_points(model.subgraphs[0])
    return [
        Cut(k, f"d{k % 2}", k % 2, k, k, (TensorSpec(names[a], ()),), (TensorSpec(names[b], ()),))
        for k, (a, b) in enumerate(itertools.pairwise(points))
    ]


@pytest.mark.parametrize("name", TFLITE)
def test_tensor_names_follow_the_importer_rule(name: str) -> None:
    data = (MODELS / name).read_bytes()
    reader = Model.GetRootAs(data, 0)
    _, model = load_tflite_model(MODELS / name)
    assert tensor_names(model.subgraphs[0]) == importer_tensor_names(reader.Subgraphs(0))


@pytest.mark.parametrize("name", TFLITE)
def test_cut_at_every_boundary_runs_in_litert_and_is_bit_exact(name: str) -> None:
    path = MODELS / name
    cuts = _cuts_at_every_point(path)
    assert len(cuts) >= 2
    subs = slice_tflite(load_model(path), cuts)
    for sub in subs:
        interpreter = Interpreter(model_content=sub.data)
        interpreter.allocate_tensors()
        runner = interpreter.get_signature_runner("serving_default")
        assert list(runner.get_input_details()) == [t.name for t in sub.inputs]
        assert list(runner.get_output_details()) == [t.name for t in sub.outputs]
    report = validate_models(load_model(path), [(s.file_name, s.data) for s in subs])
    require_pass(report, path)
    assert all(s.exact for s in report.outputs)


@pytest.mark.parametrize("name", TFLITE)
def test_summed_submodel_size_stays_close_to_the_original(name: str) -> None:
    path = MODELS / name
    subs = slice_tflite(load_model(path), _cuts_at_every_point(path))
    total = sum(len(s.data) for s in subs)
    assert total <= path.stat().st_size * (1 + SIZE_SLACK) + SIZE_PER_FILE * len(subs)


def test_submodel_structure_codes_buffers_quant_and_metadata() -> None:
    path = MODELS / "tiny_cnn_int8.tflite"
    _, original = load_tflite_model(path)
    subs = slice_tflite(load_model(path), _cuts_at_every_point(path))
    orig_codes = {
        (c.builtinCode, c.deprecatedBuiltinCode, c.version) for c in original.operatorCodes
    }
    orig_meta = {m.name for m in original.metadata or []}
    for sub in subs:
        model = schema.ModelT.InitFromPackedBuf(sub.data, 0)
        assert model.version == original.version
        assert not model.buffers[0].data  # the empty sentinel
        graph = model.subgraphs[0]
        used = {op.opcodeIndex for op in graph.operators}
        assert used == set(range(len(model.operatorCodes)))  # only the codes in use
        for code in model.operatorCodes:
            assert (code.builtinCode, code.deprecatedBuiltinCode, code.version) in orig_codes
        for tensor in graph.tensors:
            if tensor.buffer:  # constants: own aligned, non-empty buffer
                assert len(model.buffers[tensor.buffer].data) > 0
        assert all(
            t.quantization is not None and len(t.quantization.scale)
            for t in graph.tensors
            if t.type == schema.TensorType.INT8
        )
        meta = {m.name: m.buffer for m in model.metadata}
        assert orig_meta <= set(meta)
        plan = json.loads(bytes(model.buffers[meta[b"splitter"]].data))
        assert plan["splitter.submodel_index"] == str(sub.cut.index)
        assert sub.inputs[0].quant is not None  # int8 boundary keeps scale / zero point
    # buffers' data start on 16-byte boundaries, as the converter writes them
    for sub in subs:
        model = schema.Model.GetRootAs(sub.data, 0)
        for i in range(1, model.BuffersLength()):
            buf = model.Buffers(i)
            if buf.DataLength():
                start = buf._tab.Vector(buf._tab.Offset(4))
                assert start % BUFFER_ALIGNMENT == 0


def test_int8_model_in_two_bit_exact_submodels_from_the_chain() -> None:
    path = MODELS / "tiny_cnn_int8.tflite"
    chain = load_chain(path)
    half = len(chain) // 2
    cuts = cuts_from_ranges(chain, [(0, 0, half), (1, half + 1, len(chain) - 1)], ["a", "b"])
    subs = slice_tflite(load_model(path), cuts)
    assert subs[0].outputs[0].dtype == "int8"
    report = validate_models(load_model(path), [(s.file_name, s.data) for s in subs])
    require_pass(report, path)
    assert report.outputs[0].exact and report.outputs[0].dtype == "int8"


def test_cut_inside_a_branch_is_rejected() -> None:
    path = MODELS / "tiny_cnn_int8.tflite"
    _, model = load_tflite_model(path)
    names = tensor_names(model.subgraphs[0])
    graph = model.subgraphs[0]
    points = set(tflite_cut_points(graph))
    inside = next(int(op.outputs[0]) for op in graph.operators if int(op.outputs[0]) not in points)
    cuts = [
        Cut(0, "a", 0, 0, 0, (TensorSpec(names[graph.inputs[0]], ()),),
            (TensorSpec(names[inside], ()),)),
        Cut(1, "b", 1, 1, 1, (TensorSpec(names[inside], ()),),
            (TensorSpec(names[graph.outputs[0]], ()),)),
    ]  # fmt: skip
    with pytest.raises(ValidationError, match="does not separate the graph"):
        slice_tflite(load_model(path), cuts)
