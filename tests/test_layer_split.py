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
from splitter.partition.planner import build_manifest
from splitter.slicing.split_source import split_loaded
from splitter.slicing.validate import make_runner

ROOT = Path(__file__).resolve().parents[1]
MODELS = ROOT / "models"
BOARDS = MODELS / "boards"
AD = "mlperf_ad_autoencoder_int8.tflite"
#: one wide 7x7 depthwise conv, float and QDQ int8 (models/make_dw_wide.py)
DW, DW_QDQ = "dw_wide.onnx", "dw_wide_qdq.onnx"


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


def _same_outputs(loaded: LoadedModel, split: LoadedModel, *, exact: bool) -> None:
    """The real runtime on the rewritten bytes vs the user's file on seeded inputs: equal
    (``exact``: int8, and a QDQ model's dequantised output) or float within 1e-5."""
    ref, got = make_runner(loaded.path, loaded.suffix), make_runner(split.data, split.suffix)
    spec = ref.inputs[0]
    for x in _inputs(spec.shape, spec.dtype):
        a, b = ref.run({spec.name: x}), got.run({spec.name: x})
        for key, want in a.items():
            if exact or want.dtype == np.int8:
                assert np.array_equal(want, b[key]) and len(set(want.ravel().tolist())) > 1
            else:
                assert float(np.max(np.abs(want - b[key]))) <= 1e-5
    assert split.data != loaded.data


@pytest.mark.parametrize(
    ("model", "name", "k"),
    [
        ("tiny_cnn.onnx", "conv3", 3),
        ("tiny_cnn.onnx", "dense", 2),
        ("tiny_cnn_float.tflite", "conv_2d_2", 3),
        ("tiny_cnn_int8.tflite", "conv_2d_2", 3),
        (AD, "fully_connected_9", 4),
        # depthwise: float ONNX, float TFLite, int8 TFLite per-channel and per-tensor weights
        (DW, "dw", 3),
        ("tiny_cnn_float.tflite", "depthwise_conv_2d_1", 2),
        ("mlperf_kws_ds_cnn_int8.tflite", "depthwise_conv_2d_1", 3),
        ("tiny_cnn_int8_fio.tflite", "depthwise_conv_2d_2", 3),
        # QDQ int8 ONNX: depthwise, conv, dense (per-channel weight scales)
        (DW_QDQ, "dw", 3),
        ("tiny_cnn_qdq.onnx", "conv3", 3),
        ("tiny_cnn_qdq.onnx", "dense", 2),
    ],
)
def test_rewritten_file_computes_what_the_file_computes(model: str, name: str, k: int) -> None:
    """onnxruntime / LiteRT on the rewritten bytes vs the user's file: int8 (TFLite or QDQ)
    bit-exact, float within 1e-5."""
    loaded, split = _split(model, name, k)
    _same_outputs(loaded, split, exact="qdq" in model)


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
        ("tiny_cnn_int8.tflite", "depthwise_conv_2d_1:9", "has 8 output channels; give K from 1"),
        (DW_QDQ, "gap:2", "gap cannot be split (it is a mean op, without output channels"),
        (DW_QDQ, "flat:2", "flat cannot be split (it is a reshape op"),
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


def test_split_graph_slices_a_depthwise_conv_by_channels() -> None:
    """Each slice of a depthwise conv reads a ``slice`` of its own input channels and is a
    depthwise conv of its channels; the slices' weights are the op's rows."""
    graph = load_model(MODELS / DW).graph
    dw = next(op for op in graph.ops if op.name == "dw")
    split = split_graph(graph, resolve_splits(graph, {"dw": 3}, DW))
    by = {op.name: op for op in split.ops}
    ranges = slice_ranges(512, 3)
    for i, (r0, r1) in enumerate(ranges):
        cut, conv = by[f"dw.in{i}"], by[f"dw.slice{i}"]
        assert cut.kind == "slice" and cut.inputs == dw.inputs and conv.inputs[0] == cut.outputs[0]
        assert cut.attrs["starts"] == (0, r0, 0, 0) and cut.attrs["ends"] == (1, r1, 4, 4)
        assert conv.attrs["groups"] == r1 - r0
        assert np.array_equal(conv.weights["W"], dw.weights["W"][r0:r1])
    names = [op.name for op in split.ops]
    assert names.index("dw.in2") < names.index("dw.slice2") < names.index("dw.concat")


def test_split_graph_slices_a_qdq_depthwise_conv_in_nhwc() -> None:
    """A QDQ graph's int8 tensors are NHWC: the input slice and the concat use the last axis;
    every slice keeps the output's quantisation and cuts the per-channel weight scales."""
    graph = load_model(MODELS / DW_QDQ).graph
    dw = next(op for op in graph.ops if op.name == "dw")
    split = split_graph(graph, resolve_splits(graph, {"dw": 2}, DW_QDQ))
    by = {op.name: op for op in split.ops}
    assert by["dw.in1"].attrs["starts"] == (0, 0, 0, 256) and by["dw.concat"].attrs["axis"] == 3
    out = graph.tensors[dw.outputs[0]]
    for i in range(2):
        assert split.tensors[by[f"dw.slice{i}"].outputs[0]].quant == out.quant
        assert split.tensors[by[f"dw.in{i}"].outputs[0]].quant == graph.tensors[dw.inputs[0]].quant
    assert (
        by["dw.slice0"].attrs["w_scale"] + by["dw.slice1"].attrs["w_scale"] == dw.attrs["w_scale"]
    )


def _grouped_model(path: Path) -> Path:
    """A float ONNX model: Conv 8->16 (1x1), grouped Conv 16->16 3x3 of 4 groups, Relu, global
    average pool (a QDQ model's outputs are rank <= 3)."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(27)
    inits = [
        numpy_helper.from_array(rng.standard_normal((16, 8, 1, 1)).astype(np.float32), "a.W"),
        numpy_helper.from_array(rng.standard_normal((16, 4, 3, 3)).astype(np.float32), "g.W"),
        numpy_helper.from_array(rng.standard_normal(16).astype(np.float32), "g.B"),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "a.W"], ["a/out"], name="a", kernel_shape=[1, 1]),
        helper.make_node(
            "Conv",
            ["a/out", "g.W", "g.B"],
            ["g/out"],
            name="g",
            group=4,
            kernel_shape=[3, 3],
            pads=[1, 1, 1, 1],
        ),
        helper.make_node("Relu", ["g/out"], ["g/relu"], name="g_relu"),
        helper.make_node("GlobalAveragePool", ["g/relu"], ["gap/out"], name="gap"),
        helper.make_node("Flatten", ["gap/out"], ["y"], name="flat"),
    ]
    graph = helper.make_graph(
        nodes,
        "grouped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 5, 5])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 16])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    path.write_bytes(model.SerializeToString())
    return path


def test_grouped_conv_splits_at_group_boundaries(tmp_path: Path) -> None:
    """A conv of 4 groups (4 channels each) in 2 slices: 2 whole groups per slice, each reading
    its 8 input channels; onnxruntime agrees on the float file and on its QDQ int8 form
    (bit-exact); K above the groups is refused naming them."""
    from splitter.errors import SplitRequestError
    from splitter.slicing.quantize import quantize_int8

    path = _grouped_model(tmp_path / "grouped.onnx")
    loaded = load_model(path)
    (split,) = resolve_splits(loaded.graph, {"g": 2}, "grouped")
    assert split.ranges == ((0, 8), (8, 16))
    graph = split_graph(loaded.graph, [split])
    by = {op.name: op for op in graph.ops}
    assert [by[f"g.in{i}"].attrs["starts"][1] for i in range(2)] == [0, 8]
    assert [by[f"g.slice{i}"].attrs["groups"] for i in range(2)] == [2, 2]
    _same_outputs(loaded, split_loaded(loaded, [split]), exact=False)
    np.save(
        tmp_path / "cal.npy", np.random.default_rng(0).standard_normal((8, 1, 8, 5, 5), np.float32)
    )
    qdq = load_model(quantize_int8(path, tmp_path / "cal.npy", tmp_path / "grouped_qdq.onnx"))
    (qsplit,) = resolve_splits(qdq.graph, {"g": 2}, "grouped_qdq")
    _same_outputs(qdq, split_loaded(qdq, [qsplit]), exact=True)
    with pytest.raises(SplitRequestError, match=r"g is a conv of 4 groups .* give K from 1 to 4"):
        resolve_splits(loaded.graph, {"g": 5}, "grouped")


@pytest.mark.parametrize(("model", "name"), [(DW, "dw"), (DW_QDQ, "dw"), (DW_QDQ, "head")])
def test_rewritten_split_reimports_to_the_split_graph(
    model: str, name: str, tmp_path: Path
) -> None:
    """The rewritten ONNX file (float or QDQ) imports to the split graph: same op names and
    kinds in the same order, same tensor shapes (the sub-models are cut from it by name)."""
    _, split = _split(model, name, 2)
    path = tmp_path / f"x{split.suffix}"
    path.write_bytes(split.data)
    again = load_model(path).graph
    assert [(op.name, op.kind) for op in again.ops] == [
        (op.name, op.kind) for op in split.graph.ops
    ]
    for op in split.graph.ops:
        assert again.tensors[op.outputs[0]].shape == split.graph.tensors[op.outputs[0]].shape


@pytest.mark.parametrize(
    ("model", "boards"), [(DW, "split_dw3.toml"), (DW_QDQ, "split_dw_qdq4.toml")]
)
def test_a_depthwise_layer_no_board_holds_is_split(model: str, boards: str) -> None:
    """dw_wide (float, and QDQ int8) on boards that hold every layer but its depthwise conv:
    no plan without a split; the planner splits the depthwise conv over several boards."""
    chain = build_chain(load_model(MODELS / model).graph)
    board_file = _boards(boards)
    opts = CompileOptions(emulated=True)
    with pytest.raises((InfeasibleError, SolverError)):
        make_plan(chain, board_file, opts)  # type: ignore[arg-type]
    planned, plan, splits = make_split_plan(chain, board_file, opts)  # type: ignore[arg-type]
    assert [s.op for s in splits] == ["dw"] and splits[0].ranges[-1][1] == 512
    m = build_manifest(plan, planned, board_file, model_path="m", boards_path="b", splits=splits)  # type: ignore[arg-type]
    (entry,) = m.to_dict()["layer_splits"]
    assert len(set(entry["devices"])) > 1 and entry["carried_bytes"] > 0


def test_dw_wide_is_what_its_script_builds() -> None:
    """models/dw_wide.onnx is byte for byte models/make_dw_wide.py's float model."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("make_dw_wide", MODELS / "make_dw_wide.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.build().SerializeToString() == (MODELS / DW).read_bytes()
