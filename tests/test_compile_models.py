"""``compile`` end to end on every reference model, two board files each, validation on."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from ai_edge_litert.interpreter import Interpreter
from test_slice_helpers import can_force_split, ensure_model, sized_boards

from splitter.compile import CompileOptions, compile_model
from splitter.importers import load_chain

MODELS = Path(__file__).resolve().parent.parent / "models"
#: MobileNetV2-1.0 224 int8 (4 MB, 314 M MACs): too slow for these per-model sweeps;
#: tests/test_pex_plan.py imports, plans, generates and runs it
ALL = sorted(p.name for p in MODELS.glob("*.onnx")) + sorted(
    p.name for p in MODELS.glob("*.tflite") if p.stem != "mobilenet_v2_224_int8"
)
NO_FW = CompileOptions(firmware=False)


def _compile(tmp_path: Path, name: str, kind: str, options: CompileOptions = NO_FW):  # type: ignore[no-untyped-def]
    chain = load_chain(MODELS / name)
    target = tmp_path / f"{kind}.toml"
    target.write_text(sized_boards(chain, kind))
    return compile_model(MODELS / name, target, tmp_path / "out", options)


def _file_io(
    path: Path,
) -> tuple[list[tuple[str, list[int], str]], list[tuple[str, list[int], str]]]:
    """(name, shape, dtype) of a sub-model file's inputs and outputs, read by its runtime."""
    if path.suffix == ".onnx":
        model = onnx.load(str(path))
        inits = {t.name for t in model.graph.initializer}

        def info(v: onnx.ValueInfoProto) -> tuple[str, list[int], str]:
            t = v.type.tensor_type
            dtype = np.dtype(onnx.helper.tensor_dtype_to_np_dtype(t.elem_type)).name
            dims = [d.dim_value for d in t.shape.dim]
            if dtype == "int8" and len(dims) == 4:  # held NHWC on the boards (onnx_qdq)
                dims = [dims[p] for p in (0, 2, 3, 1)]
            return v.name, dims, dtype

        ins = [info(v) for v in model.graph.input if v.name not in inits]
        return ins, [info(v) for v in model.graph.output]
    interp = Interpreter(model_path=str(path))
    sig = interp.get_signature_runner("serving_default")

    def detail(d: dict) -> tuple[str, list[int], str]:  # type: ignore[type-arg]
        return d["name"], [int(x) for x in d["shape"]], np.dtype(d["dtype"]).name

    ins = [detail(d) for d in interp.get_input_details()]
    outs = [detail(d) for d in interp.get_output_details()]
    assert list(sig.get_input_details()) == [n for n, _, _ in ins]
    return ins, outs


def _check_output_dir(result) -> None:  # type: ignore[no-untyped-def]
    """plan.json boundary tensors == the files' inputs/outputs; chain of boundaries closes."""
    import json

    out = result.out_dir
    plan = json.loads((out / "plan.json").read_text())
    assert json.loads((out / "validation.json").read_text())["passed"] is True
    report = result.validation
    rows = len(report.outputs) + len(report.boundaries)
    assert (out / "report.md").read_text().count("| yes |") == rows
    # one entry per boundary tensor (a multi-tensor cut, e.g. across a layer split, has several)
    assert sorted({b.submodel for b in report.boundaries}) == list(range(len(result.submodels) - 1))
    subs = plan["submodels"]
    assert len(subs) == len(result.plan.submodels)
    for k, entry in enumerate(subs):
        ins, outs = _file_io(out / entry["file"])
        assert [(t["name"], t["shape"], t["dtype"]) for t in entry["inputs"]] == ins
        assert [(t["name"], t["shape"], t["dtype"]) for t in entry["outputs"]] == outs
        for t in entry["inputs"] + entry["outputs"]:
            assert t["bytes"] == int(np.prod(t["shape"])) * np.dtype(t["dtype"]).itemsize
        if k:
            assert subs[k - 1]["outputs"] == entry["inputs"]  # what is sent is what is received
    for name, link in plan["links"].items():
        mine = [s for s in subs if s["device"] == name]  # one event per boundary tensor
        assert len(link["receives_from"]) == sum(len(s["inputs"]) for s in mine)
        assert len(link["sends_to"]) == sum(len(s["outputs"]) for s in mine)


@pytest.mark.parametrize("kind", ["fastslow", "three"])
@pytest.mark.parametrize("name", ALL)
def test_compile_validates_every_model_on_two_board_files(
    tmp_path: Path, name: str, kind: str
) -> None:
    result = _compile(tmp_path, name, kind)
    assert result.validation is not None and result.validation.passed
    if can_force_split(result.chain, 2 if kind == "fastslow" else 3):
        assert len(result.submodels) >= 2
        if kind == "three" and len(result.chain) >= 3:
            assert len({s.cut.device for s in result.submodels}) >= 2
    _check_output_dir(result)


# tiny_cnn_int8 no longer alternates on these boards: with each device's firmware code counted
# exactly, its optimal plan is one cut (the second link's code costs more than it saves)
@pytest.mark.parametrize("name", ["mobilenet_v1_025.onnx"])
def test_one_device_runs_two_non_adjacent_submodels(tmp_path: Path, name: str) -> None:
    import json

    result = _compile(tmp_path, name, "fastslow")
    devices = [s.cut.device for s in result.submodels]
    assert len(devices) > len(set(devices)), devices
    links = json.loads((result.out_dir / "plan.json").read_text())["links"]
    revisited = next(d for d in devices if devices.count(d) > 1)
    other = next(d for d in devices if d != revisited)
    assert links[revisited]["sends_to"][0] == other
    assert links[revisited]["receives_from"][1] == other


def test_mobilenet_v2_in_at_least_three_submodels_with_super_nodes(tmp_path: Path) -> None:
    ensure_model("mobilenet_v2_224")
    result = _compile(tmp_path, "mobilenet_v2_224.onnx", "three")
    assert len(result.submodels) >= 3
    assert any(layer.kind == "super" for layer in result.chain.layers)
    assert result.validation is not None and result.validation.outputs[0].max_abs == 0.0


def test_int8_tflite_in_two_bit_exact_submodels(tmp_path: Path) -> None:
    result = _compile(tmp_path, "tiny_cnn_int8.tflite", "fastslow")
    assert len(result.submodels) >= 2
    assert all(s.inputs[0].dtype == "int8" for s in result.submodels)
    stats = result.validation.outputs[0]
    assert stats.dtype == "int8" and stats.exact and stats.max_abs == 0.0


#: shipped board files meant for tiny_cnn (their header comment says so)
TINY_BOARDS = sorted(
    p.name for p in (MODELS / "boards").glob("*.toml") if "tiny_cnn" in p.read_text()
)


@pytest.mark.parametrize("boards", TINY_BOARDS)
def test_shipped_board_files_with_firmware(tmp_path: Path, boards: str) -> None:
    result = compile_model(MODELS / "tiny_cnn.onnx", MODELS / "boards" / boards, tmp_path / "o")
    assert result.validation is not None and result.validation.passed
    assert result.firmware == "generated in firmware/"
    assert (result.out_dir / "firmware").is_dir()
    _check_output_dir(result)


@pytest.mark.parametrize("name", ["resnet8.onnx", "tiny_cnn_int8.tflite"])
def test_input_layer_alone_on_a_device_passes_the_tensor_through(tmp_path: Path, name: str) -> None:
    n = len(load_chain(MODELS / name))
    options = CompileOptions(firmware=False, assignment=(0,) + (1,) * (n - 1))
    result = _compile(tmp_path, name, "fastslow", options)
    assert [(s.cut.first, s.cut.last) for s in result.submodels] == [(0, 0), (1, n - 1)]
    assert result.submodels[0].op_count == 0
    _check_output_dir(result)
