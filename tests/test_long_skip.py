"""Cuts carrying several tensors (issue 15) on models/long_skip.onnx and resnet8.

* ``long_skip.onnx`` (a skip over 13 convolutions, ``models/make_long_skip.py``) is one
  1,080,768 B super-node: over four STM32F405 with 400 KiB of flash (``long_skip4.toml``) the
  super-node plan fails (a block needs more flash than any board); at ``--granularity op`` it
  splits over the four boards, every inner cut carrying the skip and the main path, validated
  tensor by tensor.
* resnet8 (ONNX and the MLPerf Tiny int8 TFLite) cut inside a residual block, and over three
  sub-models so that the middle one receives the skip tensor, does not use it and passes it on
  (ONNX: the tensor is both a graph input and a graph output; TFLite: the input tensor also
  listed as an output, which LiteRT returns unchanged).
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import pytest
from test_plan_cli import run_cli

from splitter.compile import CompileOptions, compile_model
from splitter.importers import load_chain
from splitter.slicing.validate import make_runner

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
LONG_SKIP = MODELS / "long_skip.onnx"
BOARDS4 = MODELS / "boards" / "long_skip4.toml"
LARGE = MODELS / "boards" / "zoo_large.toml"
KIB400 = 400 * 1024


def _make_script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_long_skip", MODELS / "make_long_skip.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["make_long_skip"] = module
    spec.loader.exec_module(module)
    return module


def test_long_skip_file_is_what_the_script_builds() -> None:
    assert _make_script().build().SerializeToString() == LONG_SKIP.read_bytes()
    model = onnx.load(LONG_SKIP)
    convs = [n for n in model.graph.node if n.op_type == "Conv"]
    assert len(convs) == 14  # stem + 13 under the skip
    supernode = load_chain(LONG_SKIP)
    block = max(supernode.layers, key=lambda layer: layer.cost.flash)
    assert block.kind == "super" and block.cost.flash == 13 * (9 * 48 * 48 + 48) * 4 > KIB400


def test_long_skip_needs_op_granularity_over_four_f405(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # without layer splits (issue 27's --split auto plans it by splitting a conv of the block)
    code, _out, err = run_cli(
        capsys, "plan", str(LONG_SKIP), "--target", str(BOARDS4), "--split", "off"
    )
    assert code == 2 and "more than any device" in err and "body_1..join" in err
    assert "what plans: --granularity auto" in err
    args = ["plan", str(LONG_SKIP), "--target", str(BOARDS4), "--granularity", "op", "--json"]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    plan = json.loads(out)
    assert plan["model"]["granularity"] == "op"
    subs = plan["submodels"]
    assert sorted(s["device"] for s in subs) == ["a", "b", "c", "d"]
    for sub in subs[1:]:
        assert sub["inputs"][0]["name"] == "stem/relu"  # the skip crosses
        assert len(sub["inputs"]) == 2
        assert sum(t["bytes"] for t in sub["inputs"]) == 2 * 48 * 8 * 8 * 4
    for dev in plan["devices"]:
        assert dev["flash_used"] + dev["code_bytes"] <= dev["flash_budget"] <= KIB400
    code, out, err = run_cli(capsys, *args[:-1])  # the table names the tensors of each cut
    assert code == 0, err
    assert "cut 0->1: 2 tensors (stem/relu, body_" in out


def test_long_skip_op_split_validates_every_tensor(tmp_path: Path) -> None:
    options = CompileOptions(firmware=False, granularity="auto")  # auto: the block fits no board
    result = compile_model(LONG_SKIP, BOARDS4, tmp_path / "out", options)
    assert result.chain.granularity == result.manifest.model.granularity == "op"
    report = result.validation
    assert report is not None and report.passed
    assert len(result.submodels) == 4
    hops = [(b.name, b.submodel) for b in report.boundaries]
    assert [k for _, k in hops] == [0, 0, 1, 1, 2, 2]
    assert all(name == "stem/relu" for name, _ in hops[::2])
    for stats in (*report.outputs, *report.boundaries):
        assert stats.max_abs <= 1e-5, stats


def _three_way(model: Path, tmp_path: Path) -> tuple[list[list[str]], object]:
    """resnet8 cut after the block's first conv and after its second: the middle sub-model
    holds the block input (the skip) without reading it."""
    chain = load_chain(model, granularity="op")
    kinds = [layer.kind for layer in chain.layers[:5]]
    assert kinds == ["input", "conv2d", "conv2d", "conv2d", "add"]  # stem, block, join
    assignment = tuple(0 if j <= 2 else 1 if j == 3 else 2 for j in range(len(chain)))
    options = CompileOptions(firmware=False, granularity="op", assignment=assignment)
    result = compile_model(model, LARGE, tmp_path / "out", options)
    inputs = [[t.name for t in s.inputs] for s in result.manifest.submodels]
    return inputs, result


@pytest.mark.parametrize("name", ["resnet8.onnx", "mlperf_ic_resnet8_int8.tflite"])
def test_resnet8_cut_inside_a_residual_block_passes_the_skip_through(
    name: str, tmp_path: Path
) -> None:
    inputs, result = _three_way(MODELS / name, tmp_path)
    assert len(inputs) == 3 and len(inputs[1]) == len(inputs[2]) == 2
    skip = inputs[1][0]
    assert inputs[2][0] == skip  # received by the middle one and sent on
    middle = result.submodels[1]  # type: ignore[attr-defined]
    assert skip in [t.name for t in middle.inputs] and skip in [t.name for t in middle.outputs]
    report = result.validation  # type: ignore[attr-defined]
    assert report.passed
    assert [(b.name, b.submodel) for b in report.boundaries][:3] == [
        (inputs[1][0], 0),
        (inputs[1][1], 0),
        (skip, 1),
    ]
    # the pass-through is real: the middle sub-model returns the tensor it was given
    runner = make_runner(middle.data, middle.suffix)
    rng = np.random.default_rng(0)
    feeds = {}
    for spec in runner.inputs:
        if spec.dtype == "int8":
            feeds[spec.name] = rng.integers(-128, 128, spec.shape, dtype=np.int8)
        else:
            feeds[spec.name] = rng.standard_normal(spec.shape).astype(spec.dtype)
    out = runner.run(feeds)
    np.testing.assert_array_equal(out[skip], feeds[skip])


def test_manifest_checks_every_boundary_tensor_in_order(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from splitter.manifest import ManifestError, PlanManifest

    args = ["plan", str(LONG_SKIP), "--target", str(BOARDS4), "--granularity", "op", "--json"]
    code, out, err = run_cli(capsys, *args)
    assert code == 0, err
    data = json.loads(out)
    assert PlanManifest.from_dict(data).model.granularity == "op"
    data["submodels"][2]["inputs"].reverse()  # same tensors, another order
    with pytest.raises(ManifestError, match=r"sub-model 1 sends \['stem/relu', .*reads \['body"):
        PlanManifest.from_dict(data)


def test_auto_granularity_splits_only_blocks_that_fit_no_board() -> None:
    from splitter.hardware.boards import load_boards
    from splitter.partition.granularity import auto_granularity

    four = load_boards(BOARDS4)
    assert auto_granularity(load_chain(LONG_SKIP), four).granularity == "op"
    large = load_boards(LARGE)  # resnet8's blocks fit: the thesis chain is kept
    assert auto_granularity(load_chain(MODELS / "resnet8.onnx"), large).granularity == "supernode"
    tiny = load_chain(MODELS / "tiny_cnn.onnx")  # no super-node: kept even when infeasible
    assert auto_granularity(tiny, load_boards(MODELS / "boards" / "e2e_tiny2.toml")) is tiny


def test_inspect_lists_the_tensors_of_every_cut(capsys: pytest.CaptureFixture[str]) -> None:
    model = str(MODELS / "resnet8.onnx")
    code, out, err = run_cli(capsys, "inspect", model, "--granularity", "op", "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["granularity"] == "op"
    block = doc["layers"][2]  # the first conv of the first residual block
    assert [t["name"] for t in block["crossing"]] == ["conv1_relu/out", "stage1_relu1/out"]
    assert block["out_bytes"] == sum(t["bytes"] for t in block["crossing"]) == 2 * 65536
    code, out, err = run_cli(capsys, "inspect", model)
    assert code == 0 and "crossing" not in out  # the default table is unchanged
