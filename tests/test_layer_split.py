"""Split inside a layer (issue 27): the graph rewrite, the same rewrite in the model file, the
op chain's costs of a split, the planner's choice of ``k`` and the ``--split-layer`` errors.

The rewritten files run in the real runtimes (onnxruntime, LiteRT) against the user's file:
float within 1e-5, int8 bit-exact. The planner's tests call the real planning pipeline
(:func:`splitter.compile.make_plan`: reserves repair, PEX) on the shipped models.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from splitter.compile import CompileOptions, make_plan, make_split_plan
from splitter.errors import InfeasibleError, SolverError
from splitter.graph.chain import build_chain
from splitter.graph.split import LayerSplit, resolve_splits, slice_ranges, split_graph
from splitter.hardware.boards import for_prediction, load_boards
from splitter.importers import LoadedModel, load_model
from splitter.partition.report import build_manifest
from splitter.slicing.split_source import split_loaded
from splitter.slicing.validate import make_runner

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
BOARDS = MODELS / "boards"
AD = "mlperf_ad_autoencoder_int8.tflite"


def _split(model: str, name: str, k: int) -> tuple[LoadedModel, LoadedModel]:
    loaded = load_model(MODELS / model)
    return loaded, split_loaded(loaded, resolve_splits(loaded.graph, {name: k}, model))


def _inputs(spec_shape: tuple[int, ...], dtype: str, n: int = 4) -> list[np.ndarray]:
    rng = np.random.default_rng(27)
    if dtype == "int8":
        return [rng.integers(-128, 128, size=spec_shape).astype(np.int8) for _ in range(n)]
    return [rng.standard_normal(spec_shape).astype(np.float32) for _ in range(n)]


def test_slice_ranges_are_balanced_and_cover_the_channels() -> None:
    assert slice_ranges(48, 3) == ((0, 16), (16, 32), (32, 48))
    assert slice_ranges(10, 4) == ((0, 2), (2, 5), (5, 7), (7, 10))
    assert slice_ranges(5, 5) == tuple((i, i + 1) for i in range(5))


def test_split_graph_slices_a_float_conv() -> None:
    graph = load_model(MODELS / "tiny_cnn.onnx").graph
    conv3 = next(op for op in graph.ops if op.name == "conv3")
    split = split_graph(graph, resolve_splits(graph, {"conv3": 3}, "tiny"))
    names = [op.name for op in split.ops]
    at = names.index("conv3.slice0")
    assert names[at : at + 4] == ["conv3.slice0", "conv3.slice1", "conv3.slice2", "conv3.concat"]
    slices = split.ops[at : at + 3]
    assert all(op.inputs == conv3.inputs for op in slices)
    assert np.array_equal(np.concatenate([op.weights["W"] for op in slices]), conv3.weights["W"])
    assert np.array_equal(np.concatenate([op.weights["B"] for op in slices]), conv3.weights["B"])
    assert [split.tensors[op.outputs[0]].shape for op in slices] == [(1, 16, 3, 3)] * 3
    concat = split.ops[at + 3]
    assert concat.outputs == conv3.outputs and concat.attrs["axis"] == 1
    assert split.outputs == graph.outputs and len(split.ops) == len(graph.ops) + 3


def test_split_graph_slices_per_channel_int8_quantisation() -> None:
    graph = load_model(MODELS / AD).graph
    fc = graph.ops[0]
    split = split_graph(graph, resolve_splits(graph, {fc.name: 2}, AD))
    a, b, cat = split.ops[:3]
    for key in ("w_scale", "w_zero_point", "b_scale"):
        assert len(fc.attrs[key]) == 128
        assert a.attrs[key] + b.attrs[key] == fc.attrs[key]
    out = graph.tensors[fc.outputs[0]]
    for op in (a, b):
        spec = split.tensors[op.outputs[0]]
        assert spec.shape == (1, 64) and spec.dtype == "int8" and spec.quant == out.quant
    assert cat.kind == "concat" and cat.attrs["axis"] == 1


@pytest.mark.parametrize(
    ("model", "name", "k"),
    [
        ("tiny_cnn.onnx", "conv3", 3),
        ("tiny_cnn.onnx", "dense", 2),
        ("tiny_cnn_float.tflite", "conv_2d_2", 3),
        ("tiny_cnn_int8.tflite", "conv_2d_2", 3),
        (AD, "fully_connected_9", 4),
    ],
)
def test_rewritten_file_computes_what_the_file_computes(model: str, name: str, k: int) -> None:
    """onnxruntime / LiteRT on the rewritten bytes vs the user's file: int8 bit-exact, float
    within 1e-5; and the rewritten file re-imports to the split graph's names and shapes."""
    loaded, split = _split(model, name, k)
    ref, got = make_runner(loaded.path, loaded.suffix), make_runner(split.data, split.suffix)
    spec = ref.inputs[0]
    for x in _inputs(spec.shape, spec.dtype):
        a, b = ref.run({spec.name: x}), got.run({spec.name: x})
        for key, want in a.items():
            if want.dtype == np.int8:
                assert np.array_equal(want, b[key])
            else:
                assert float(np.max(np.abs(want - b[key]))) <= 1e-5
    assert split.data != loaded.data


def test_rewritten_file_reimports_to_the_split_graph(tmp_path: Path) -> None:
    for model, name in (("tiny_cnn.onnx", "conv3"), (AD, "fully_connected_0")):
        _, split = _split(model, name, 2)
        path = tmp_path / f"x{split.suffix}"
        path.write_bytes(split.data)
        again = load_model(path).graph
        for t in (f"{op.outputs[0]}" for op in split.graph.ops if ".slice" in op.name):
            assert again.tensors[t].shape == split.graph.tensors[t].shape
        kinds = [op.kind for op in again.ops]
        assert kinds == [op.kind for op in split.graph.ops]


def test_op_chain_carries_the_shared_input_across_the_slices() -> None:
    """The cut after slice ``i`` carries the input (later slices read it) and slices 0..i."""
    graph = load_model(MODELS / "tiny_cnn.onnx").graph
    split = split_graph(graph, resolve_splits(graph, {"conv3": 3}, "tiny"))
    chain = build_chain(split, granularity="op")
    by = {layer.name: layer for layer in chain.layers}
    x = split.tensors["pool2/out"].nbytes
    y = split.tensors["conv3_relu/out.slice0"].nbytes  # 16 x 3 x 3 floats
    assert [t.name for t in by["conv3.slice0"].live] == ["pool2/out", "conv3_relu/out.slice0"]
    assert by["conv3.slice0"].cost.out_bytes == x + y
    assert by["conv3.slice1"].cost.out_bytes == x + 2 * y
    assert by["conv3.slice2"].cost.out_bytes == 3 * y  # the input is dead after the last slice
    assert by["conv3.concat"].cost.out_bytes == 3 * y
    whole = next(op for op in graph.ops if op.name == "conv3")
    flash = sum(by[f"conv3.slice{i}"].cost.flash for i in range(3))
    assert flash == sum(int(w.nbytes) for w in whole.weights.values())


def _boards(name: str) -> object:
    return for_prediction(load_boards(BOARDS / name), True)


def test_no_split_needed_leaves_the_plan_unchanged() -> None:
    """tiny_cnn on e2e_tiny2.toml: every layer fits a board, so no split is tried and the plan
    is the one make_plan gives (same chain, same assignment, same latency); plan.json has no
    ``layer_splits`` key."""
    loaded = load_model(MODELS / "tiny_cnn.onnx")
    chain = build_chain(loaded.graph)
    boards = _boards("e2e_tiny2.toml")
    opts = CompileOptions(emulated=True)
    planned, plan, splits = make_split_plan(chain, boards, opts)  # type: ignore[arg-type]
    ref_chain, ref = make_plan(chain, boards, opts)  # type: ignore[arg-type]
    assert splits == () and planned is ref_chain
    assert plan.assignment == ref.assignment and plan.latency_s == ref.latency_s
    m = build_manifest(plan, planned, boards, model_path="m", boards_path="b")  # type: ignore[arg-type]
    assert "layer_splits" not in m.to_dict()


def test_a_layer_no_board_holds_is_split_with_the_best_k() -> None:
    """tiny_cnn on three 72 KiB F405s: conv3 fits no board; the plan splits it, and its latency
    is the best over every k the planner considers (2..3, each planned here)."""
    loaded = load_model(MODELS / "tiny_cnn.onnx")
    chain = build_chain(loaded.graph)
    boards = _boards("split_tiny3.toml")
    opts = CompileOptions(emulated=True)
    with pytest.raises(InfeasibleError):
        make_plan(chain, boards, opts)  # type: ignore[arg-type]
    planned, plan, splits = make_split_plan(chain, boards, opts)  # type: ignore[arg-type]
    assert [s.op for s in splits] == ["conv3"] and planned.granularity == "op"
    latencies = []
    for k in (2, 3):
        split = LayerSplit("conv3", 48, slice_ranges(48, k))
        one = build_chain(split_graph(loaded.graph, [split]), granularity="op")
        try:
            latencies.append(make_plan(one, boards, opts)[1].latency_s)  # type: ignore[arg-type]
        except (InfeasibleError, SolverError):
            continue
    assert latencies and plan.latency_s == pytest.approx(min(latencies), rel=1e-12)
    m = build_manifest(plan, planned, boards, model_path="m", boards_path="b", splits=splits)  # type: ignore[arg-type]
    (entry,) = m.to_dict()["layer_splits"]
    assert entry["layer"] == "conv3" and len(entry["devices"]) == entry["slices"]
    assert len(set(entry["devices"])) > 1 and entry["carried_bytes"] > 0
    assert entry["ranges"][0][0] == 0 and entry["ranges"][-1][1] == 48


def test_user_override_splits_a_layer_that_fits() -> None:
    loaded = load_model(MODELS / "tiny_cnn.onnx")
    chain = build_chain(loaded.graph)
    opts = CompileOptions(emulated=True, split_layers={"conv2": 2})
    planned, _plan, splits = make_split_plan(chain, _boards("e2e_tiny2.toml"), opts)  # type: ignore[arg-type]
    assert [(s.op, s.slices) for s in splits] == [("conv2", 2)]
    assert [layer.name for layer in planned.layers][2:5] == [
        "conv2.slice0",
        "conv2.slice1",
        "conv2.concat",
    ]


def _plan_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "splitter", "plan", *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        check=False,
        timeout=300,
    )


@pytest.mark.parametrize(
    ("model", "request_", "said"),
    [
        ("tiny_cnn.onnx", "pool1:2", "pool1 cannot be split (it is a maxpool op"),
        ("tiny_cnn.onnx", "conv3:49", "conv3 has 48 output channels; give K from 1 to 48"),
        ("tiny_cnn.onnx", "nosuch:2", "no layer 'nosuch'"),
        ("tiny_cnn_int8.tflite", "depthwise_conv_2d_1:2", "grouped or depthwise conv"),
    ],
)
def test_split_request_that_cannot_be_split_is_one_line_exit_2(
    model: str, request_: str, said: str
) -> None:
    proc = _plan_cli(
        str(MODELS / model), "--target", str(BOARDS / "e2e_tiny2.toml"), "--split-layer", request_
    )
    assert proc.returncode == 2, proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in proc.stderr
    if "no layer" not in said:
        assert "splittable layers:" in lines[0] or "give K" in lines[0]


def test_malformed_split_request_is_a_usage_error() -> None:
    proc = _plan_cli(
        str(MODELS / "tiny_cnn.onnx"), "--target", str(BOARDS / "e2e_tiny2.toml"),
        "--split-layer", "conv3",
    )  # fmt: skip
    assert proc.returncode == 2 and "is not NAME:K" in proc.stderr


def test_plan_cli_reports_the_split() -> None:
    proc = _plan_cli(
        str(MODELS / "tiny_cnn.onnx"), "--target", str(BOARDS / "e2e_tiny2.toml"),
        "--split-layer", "conv2:2", "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    m = json.loads(proc.stdout)
    (entry,) = m["layer_splits"]
    assert (
        entry["layer"] == "conv2"
        and entry["slices"] == 2
        and entry["ranges"] == [[0, 16], [16, 32]]
    )
    text = _plan_cli(
        str(MODELS / "tiny_cnn.onnx"), "--target", str(BOARDS / "e2e_tiny2.toml"),
        "--split-layer", "conv2:2",
    )  # fmt: skip
    assert "layer conv2 split into 2 slices of its 32 output channels" in text.stdout


def test_search_keeps_a_split_only_when_it_improves_the_objective() -> None:
    """``--split search`` on tiny_cnn / e2e_tiny2 (throughput): the heaviest op (conv2) split
    in two is planned too; the plan kept is the better one, never worse than the whole chain."""
    loaded = load_model(MODELS / "tiny_cnn.onnx")
    chain = build_chain(loaded.graph)
    boards = _boards("e2e_tiny2.toml")
    base = CompileOptions(emulated=True, objective="throughput", split="off")
    _c, whole, none = make_split_plan(chain, boards, base)  # type: ignore[arg-type]
    assert none == ()
    search = CompileOptions(emulated=True, objective="throughput", split="search")
    _c2, found, splits = make_split_plan(chain, boards, search)  # type: ignore[arg-type]
    split = LayerSplit("conv2", 32, slice_ranges(32, 2))
    two = build_chain(split_graph(loaded.graph, [split]), granularity="op")
    alt = make_plan(two, boards, base)[1]  # type: ignore[arg-type]
    best = max(whole.throughput_per_s, alt.throughput_per_s)
    assert found.throughput_per_s == pytest.approx(best, rel=1e-12)
    assert (splits != ()) == (alt.throughput_per_s > whole.throughput_per_s)


def test_no_plan_even_with_a_split_says_what_was_tried(tmp_path: Path) -> None:
    boards = tmp_path / "one.toml"
    boards.write_text('[[device]]\nname = "a"\nmcu = "STM32F405RG"\nflash = "60 KiB"\n')
    proc = _plan_cli(str(MODELS / "tiny_cnn.onnx"), "--target", str(boards))
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "conv3 split into 2..2 slices: no plan either" in line
