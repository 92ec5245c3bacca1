"""Models with several outputs and a dynamic batch: import, slicing, validation.

The chain carries one tensor between layers; the extra graph outputs leave the last sub-model
(``splitter.manifest.submodel_boundaries``), and the
validation compares every graph output by name (it crashed with a broadcasting error when the
last sub-model exposed only one of two outputs of different sizes). The firmware sends every
output (tests/test_e2e_multi_output.py runs one on emulated boards).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from splitter.cli import main
from splitter.errors import ValidationError
from splitter.importers import load_chain, load_model
from splitter.ir import TensorSpec
from splitter.slicing.boundaries import cuts_from_ranges
from splitter.slicing.onnx_slice import slice_onnx
from splitter.slicing.validate import require_pass, validate_chain, validate_models

BOARDS = Path(__file__).resolve().parent.parent / "models" / "boards" / "demo.toml"


def two_outputs(path: Path, batch: int | str = 1) -> Path:
    """``x1 * 2 -> conv -> relu -> global pool -> flatten -> (matmul y1 (3), matmul y2 (5))``;
    ``batch`` ``"N"`` makes the batch dimension dynamic."""
    rng = np.random.default_rng(3)

    def const(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array(rng.standard_normal(shape).astype(np.float32), name)

    nodes = [
        helper.make_node("Mul", ["x1", "two"], ["s"], name="scale"),
        helper.make_node("Conv", ["s", "W"], ["c"], name="conv", pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"], name="relu"),
        helper.make_node("GlobalAveragePool", ["r"], ["g"], name="gap"),
        helper.make_node("Flatten", ["g"], ["f"], name="flat"),
        helper.make_node("MatMul", ["f", "A"], ["y1"], name="head1"),
        helper.make_node("MatMul", ["f", "B"], ["y2"], name="head2"),
    ]
    ins = [helper.make_tensor_value_info("x1", TensorProto.FLOAT, [batch, 2, 8, 8])]
    outs = [
        helper.make_tensor_value_info("y1", TensorProto.FLOAT, [batch, 3]),
        helper.make_tensor_value_info("y2", TensorProto.FLOAT, [batch, 5]),
    ]
    inits = [numpy_helper.from_array(np.float32(2.0), "two"), const("W", (4, 2, 3, 3))]
    inits += [const("A", (4, 3)), const("B", (4, 5))]
    graph = helper.make_graph(nodes, "two_io", ins, outs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def test_split_of_two_output_model_validates(tmp_path: Path) -> None:
    path = two_outputs(tmp_path / "m.onnx")
    chain = load_chain(path)
    ranges = [(0, 0, 1), (1, 2, len(chain) - 1)]
    cuts = cuts_from_ranges(chain, ranges, ["a", "b"])
    assert cuts[0].input_names == ["x1"] and cuts[1].output_names == ["y1", "y2"]
    subs = slice_onnx(load_model(path), cuts)
    assert [t.name for t in subs[1].outputs] == ["y1", "y2"]
    report = validate_models(load_model(path), [(s.file_name, s.data) for s in subs])
    require_pass(report, path)
    assert [(s.name, s.shape) for s in report.outputs] == [("y1", (1, 3)), ("y2", (1, 5))]
    assert [b.submodel for b in report.boundaries] == [0]


def cli(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Exit code and stdout + stderr of ``splitter <args>``."""
    with pytest.raises(SystemExit) as info:
        main(args)
    captured = capsys.readouterr()
    return int(info.value.code or 0), captured.out + captured.err


def test_compile_dynamic_batch_two_outputs_with_input_shape(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = two_outputs(tmp_path / "dyn.onnx", batch="N")
    out = tmp_path / "out"
    args = ["compile", str(path), "--target", str(BOARDS), "-o", str(out), "--json"]
    args += ["--input-shape", "x1=1x2x8x8"]
    code, text = cli(args, capsys)
    assert code == 0, text
    plan = json.loads((out / "plan.json").read_text())
    assert [t["name"] for t in plan["submodels"][0]["inputs"]] == ["x1"]
    assert [t["shape"] for t in plan["submodels"][-1]["outputs"]] == [[1, 3], [1, 5]]
    for sub in plan["submodels"]:
        model = onnx.load(out / sub["file"])
        dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        assert dims[0] == 1  # --input-shape written into every sub-model
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    last = [s for d in wiring["devices"] for s in d["submodels"] if s["is_last"]]
    assert [t["name"] for t in last[0]["outputs"]] == ["y1", "y2"]


def test_two_input_two_output_model_compiles_and_validates(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Several graph inputs (issue 29; refused before): the op chain's input layer hands both
    to the first sub-model, the last writes both outputs, validation passes."""
    path = two_outputs(tmp_path / "m.onnx")
    model = onnx.load(path)
    model.graph.input.append(helper.make_tensor_value_info("x2", TensorProto.FLOAT, [1, 2, 8, 8]))
    model.graph.node[0].input[1] = "x2"
    onnx.save(model, path)
    out = tmp_path / "out"
    code, text = cli(["compile", str(path), "--target", str(BOARDS), "-o", str(out)], capsys)
    assert code == 0, text
    plan = json.loads((out / "plan.json").read_text())
    assert [t["name"] for t in plan["submodels"][0]["inputs"]] == ["x1", "x2"]
    assert [t["name"] for t in plan["submodels"][-1]["outputs"]] == ["y1", "y2"]
    assert "passed" in text


class _Fixed:
    """A runner returning fixed arrays (what validate_chain sees of a runtime)."""

    def __init__(self, ins: list[str], outs: dict[str, np.ndarray]) -> None:
        self.inputs = tuple(TensorSpec(n, (1, 2)) for n in ins)
        self.outputs = tuple(TensorSpec(n, v.shape) for n, v in outs.items())
        self.values = outs

    def run(self, feeds: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return dict(self.values)


def test_validation_names_a_graph_output_the_sub_models_do_not_produce() -> None:
    """The last sub-model writes one of two outputs of different sizes: a one-line
    ValidationError naming the missing output, not numpy's broadcasting error."""
    y1, y2 = np.zeros((1, 3), np.float32), np.zeros((1, 5), np.float32)
    original = _Fixed(["x"], {"y1": y1, "y2": y2})
    chain = [_Fixed(["x"], {"h": np.zeros((1, 4), np.float32)}), _Fixed(["h"], {"y2": y2})]
    feeds = [{"x": np.zeros((1, 2), np.float32)}]
    with pytest.raises(ValidationError, match="'y1' is not produced by the sub-models") as info:
        validate_chain(original, chain, feeds, ["s0"])
    assert "\n" not in str(info.value)
