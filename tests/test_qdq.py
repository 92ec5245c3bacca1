"""QDQ ONNX (onnxruntime.quantization.quantize_static) lowered to the int8 kernels.

``models/resnet_tv_28_qdq.onnx`` (models/make_exported.py: per-channel int8 weights, int8
activations) is imported by ``splitter.importers.onnx_qdq``, its generated C run on the host and
on two emulated F405 boards, and compared with onnxruntime's output of the same QDQ file.

Where the results differ and why: onnxruntime runs a QDQ graph as written (DequantizeLinear,
float32 Conv / Gemm / Add / GlobalAveragePool, QuantizeLinear rounding ``x / s`` half to even);
the int8 kernels follow TFLite's integer arithmetic (exact int32 accumulation, the rescale
``s_in * s_w / s_out`` as a Q31 fixed-point multiplier with ties rounded away from zero or, in
LiteRT's GEMM path, upward). A value whose float result lies within float32 rounding of a
half-step rounds differently, so each requantising op may differ from onnxruntime by one
quantisation step (measured on 16 seeded inputs: 0.2 % of the first conv's outputs, 13 of 512
global-pool outputs); a layer of several such ops (a residual super-node) may reach two, and
the logits stay within one step (measured: 143 of 640 logits of 64 seeded inputs differ by one
step, none by more). The QuantizeLinear of the float input differs by one step where ``x / s`` is
within rounding of a half-step: onnxruntime divides in float32 and rounds half to even, the
kernel (LiteRT's QUANTIZE) divides in double and rounds half away from zero.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_codegen_support import build_host, planner
from test_e2e_support import MODELS, cli, qemu_pids, random_input, reference, shared_build

from splitter.cli import main
from splitter.codegen.model_c import generate_device_c
from splitter.importers import load_chain, onnx_qdq
from splitter.slicing.validate import OnnxRunner

MODEL = "resnet_tv_28_qdq.onnx"
FLOAT_MODEL = "resnet_tv_28.onnx"


def logits_step() -> float:
    """The output's quantisation step (scale of the final QuantizeLinear)."""
    inits = onnx.load(MODELS / MODEL).graph.initializer
    return float(next(numpy_helper.to_array(i) for i in inits if i.name == "logits_scale"))


def test_int8_kinds_cover_every_lowered_operator() -> None:
    """``splitter ops`` lists INT8_KINDS: exactly the operators the lowering accepts."""
    assert set(onnx_qdq.INT8_KINDS) == onnx_qdq.COMPUTE_OPS | onnx_qdq.QDQ_OPS


def test_qdq_imports_as_int8_ops() -> None:
    chain = load_chain(MODELS / MODEL)
    graph = chain.graph
    assert graph is not None
    kinds = [op.kind for op in graph.ops]
    assert kinds[0] == "quantize" and kinds[-1] == "dequantize"
    assert kinds.count("conv2d") == 9 and kinds.count("add") == 3 and "mean" in kinds
    for op in graph.ops:
        assert (op.source_nodes and not op.source_nodes[0].endswith("DequantizeLinear")) or (
            op.kind == "dequantize"
        )
        if op.kind in ("conv2d", "dense"):
            w = op.weights["W"]
            assert w.dtype == np.int8 and op.weights["B"].dtype == np.int32
            assert len(op.attr("w_scale")) == w.shape[0]  # per output channel
    conv = graph.tensors[graph.ops[1].outputs[0]]
    assert conv.dtype == "int8" and conv.shape == (1, 28, 28, 8)  # held NHWC
    assert graph.tensors["input"].shape == (1, 3, 28, 28)  # the float input keeps NCHW


def test_int8_tensors_cross_links_at_a_quarter_of_the_float_bytes() -> None:
    """Every layer boundary of the QDQ model carries 1 byte per element, the float model 4."""
    q = load_chain(MODELS / MODEL)
    f = load_chain(MODELS / FLOAT_MODEL)
    inner_q = [layer.cost.out_bytes for layer in q.layers if layer.output.dtype == "int8"]
    conv_f = [layer.cost.out_bytes for layer in f.layers if layer.kind in ("conv2d", "super")]
    assert inner_q[1:5] == [b // 4 for b in conv_f[:4]]
    assert all(layer.output.nbytes == layer.output.size for layer in q.layers[1:-1])


def _host_run(exe: Path, row: int, data: bytes, work: Path, dtype: str, n: int) -> np.ndarray:
    (work / "in.bin").write_bytes(data)
    res = subprocess.run([str(exe), str(row), str(work / "in.bin"), str(work / "out.bin")],
                         capture_output=True, text=True, check=False)  # fmt: skip
    assert res.returncode == 0, res.stderr
    out = np.frombuffer((work / "out.bin").read_bytes(), dtype=dtype)
    assert out.size == n
    return out


def test_host_c_within_one_step_of_onnxruntime(tmp_path: Path) -> None:
    """Split in two sub-models on one device (the int8 boundary crosses the arena as bytes):
    the boundary equals onnxruntime's int8 tensor within one step (NHWC order), the logits are
    within one step of onnxruntime's on 24 seeded inputs, and most are bit-exact."""
    chain = load_chain(MODELS / MODEL)
    n = len(chain)
    cut = 4  # after the second residual stage: int8 1x14x14x16
    gen = generate_device_c(chain, [(0, 0, cut), (1, cut + 1, n - 1)], "solo", planner=planner())
    exe = build_host(gen, tmp_path)
    mid = chain.layers[cut].output
    ref = OnnxRunner(MODELS / MODEL, probes=[mid.name])
    step = logits_step()
    diffs, mid_exact = [], []
    rng = np.random.default_rng(0)
    for _ in range(24):
        x = rng.standard_normal((1, 3, 28, 28)).astype(np.float32)
        env = ref.run({"input": x})
        got_mid = _host_run(exe, 0, x.tobytes(), tmp_path, "int8", mid.size)
        want_mid = env[mid.name].transpose(0, 2, 3, 1).ravel()
        mid_exact.append(np.mean(got_mid == want_mid))
        y = _host_run(exe, 1, want_mid.tobytes(), tmp_path, "<f4", 10)
        diffs.append(np.rint(np.abs(y - env["logits"].ravel()) / step))
    d = np.concatenate(diffs)
    assert d.max() <= 1
    assert (d == 0).mean() > 0.7
    assert min(mid_exact) > 0.97  # one-step differences carried through four layers


def check_layers(path: Path, work: Path, runs: int, seed: int) -> dict[str, float]:
    """Every layer of ``path`` alone, fed onnxruntime's own input for it: the worst difference
    from onnxruntime per layer (int8: in quantisation steps; float: absolute), checked against
    one step per single-op layer, two per super-node (two chained requantisations on its
    longest path), none for dequantize."""
    chain = load_chain(path)
    rs = [(k, j, j) for k, j in enumerate(range(1, len(chain)))]
    exe = build_host(generate_device_c(chain, rs, "solo", planner=planner()), work)
    names = [chain.layers[j].output.name for _, j, _ in rs]
    ref = OnnxRunner(path, probes=names[:-1])
    entry = chain.layers[0].output
    worst = dict.fromkeys(range(1, len(chain)), 0.0)
    rng = np.random.default_rng(seed)
    for _ in range(runs):
        x = rng.standard_normal(entry.shape).astype(np.float32)
        env = ref.run({entry.name: x}) | {entry.name: x}
        for k, j, _ in rs:
            src, want = env[chain.layers[j - 1].output.name], env[chain.layers[j].output.name]
            src = src.transpose(0, 2, 3, 1) if src.dtype == np.int8 and src.ndim == 4 else src
            want = want.transpose(0, 2, 3, 1) if want.dtype == np.int8 and want.ndim == 4 else want
            got = _host_run(exe, k, np.ascontiguousarray(src).tobytes(), work,
                            want.dtype.str, want.size)  # fmt: skip
            diff = np.abs(got.astype(np.float64) - want.ravel().astype(np.float64))
            worst[j] = max(worst[j], float(diff.max()))
    for j, w in worst.items():
        layer = chain.layers[j]
        bound = {"dequantize": 0, "super": 2}.get(layer.kind, 1)
        assert w <= bound, (layer.name, layer.kind, w)
    return {chain.layers[j].kind: w for j, w in worst.items()}


def test_each_layer_within_one_step_per_requantising_op(tmp_path: Path) -> None:
    """Per-channel weights (the shipped model): conv, residual super-nodes, mean, dense."""
    kinds = check_layers(MODELS / MODEL, tmp_path, runs=6, seed=1)
    assert {"quantize", "conv2d", "super", "mean", "dense", "dequantize"} <= set(kinds)


def per_tensor_qdq(work: Path) -> Path:
    """A small float CNN (conv + ReLU, max pool, depthwise conv + ReLU, residual add, average
    pool, global pool, flatten, MatMul) through quantize_static with per-tensor weights."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )

    rng = np.random.default_rng(0)

    def const(name: str, shape: tuple[int, ...], s: float = 0.3) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * s).astype(np.float32), name)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["r1"], name="relu1"),
        node("MaxPool", ["r1"], ["p1"], name="pool1", kernel_shape=[2, 2], strides=[2, 2]),
        node("Conv", ["p1", "W2", "B2"], ["c2"], name="dw", pads=[1, 1, 1, 1], group=8),
        node("Relu", ["c2"], ["r2"], name="relu2"),
        node("Add", ["r2", "p1"], ["a"], name="res"),
        node("AveragePool", ["a"], ["p2"], name="pool2", kernel_shape=[2, 2], strides=[2, 2]),
        node("GlobalAveragePool", ["p2"], ["g"], name="gap"),
        node("Flatten", ["g"], ["f"], name="flat"),
        node("MatMul", ["f", "W3"], ["y"], name="fc"),
    ]
    inits = [const("W1", (8, 3, 3, 3)), const("B1", (8,), 0.1), const("W2", (8, 1, 3, 3))]
    inits += [const("B2", (8,), 0.1), const("W3", (8, 5))]
    graph = helper.make_graph(
        nodes,
        "qdq_per_tensor",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 12, 12])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 5])],
        inits,
    )
    float_path, qdq_path = work / "float.onnx", work / "qdq.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), float_path)
    samples = [{"x": rng.standard_normal((1, 3, 12, 12)).astype(np.float32)} for _ in range(8)]

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.it = iter(samples)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.it, None)

    quantize_static(str(float_path), str(qdq_path), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    per_channel=False)  # fmt: skip
    return qdq_path


def test_per_tensor_qdq_with_pools_and_matmul(tmp_path: Path) -> None:
    path = per_tensor_qdq(tmp_path)
    graph = load_chain(path).graph
    assert graph is not None
    assert all(len(op.attr("w_scale")) == 1 for op in graph.ops if op.kind in ("conv2d", "dense"))
    kinds = check_layers(path, tmp_path / "c", runs=8, seed=2)
    assert {"conv2d", "super", "avgpool", "mean", "dense"} <= set(kinds)
    assert "maxpool" in [op.kind for op in graph.ops]  # joined into the conv's layer


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.toolchain
def test_qdq_runs_int8_on_two_emulated_boards(tmp_path_factory: pytest.TempPathFactory) -> None:
    out = shared_build(tmp_path_factory, MODEL, "e2e_qdq2.toml", "qdq")
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b"]
    link = plan["submodels"][0]["outputs"][0]
    assert link["dtype"] == "int8" and plan["submodels"][0]["out_bytes"] == np.prod(link["shape"])
    assert json.loads((out / "validation.json").read_text())["passed"] is True
    sub = onnx.load(out / plan["submodels"][1]["file"])  # keeps the QDQ form
    assert sub.graph.node[0].op_type == "DequantizeLinear" or any(
        n.op_type == "DequantizeLinear" and n.input[0] == link["name"] for n in sub.graph.node
    )
    assert sub.graph.input[0].type.tensor_type.elem_type == TensorProto.INT8
    tmp = tmp_path_factory.mktemp("qdq_io")
    x = random_input((1, 3, 28, 28), seed=5)
    np.save(tmp / "x.npy", x)
    proc = cli("run", str(out), "--input", str(tmp / "x.npy"), "--emulate",
               "--output", str(tmp / "y.npy"))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert f"<= {1.01 * logits_step():g}" in proc.stdout  # run's check: one output step
    y = np.load(tmp / "y.npy")
    assert float(np.max(np.abs(y - reference(MODEL, x)))) <= 1.01 * logits_step()
    assert qemu_pids(str(out)) == []


def test_unsupported_qdq_node_is_listed_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A Sigmoid between DequantizeLinear and QuantizeLinear runs on the float kernel only on
    tensors whose NCHW and NHWC orders agree; on a 1x4x2x2 tensor it is refused."""
    s = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    z = numpy_helper.from_array(np.array(0, np.int8), "z")
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q0"),
        helper.make_node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq0"),
        helper.make_node("Sigmoid", ["xd"], ["y0"], name="gate"),
        helper.make_node("QuantizeLinear", ["y0", "s", "z"], ["yq"], name="q1"),
        helper.make_node("DequantizeLinear", ["yq", "s", "z"], ["y"], name="dq1"),
    ]
    graph = helper.make_graph(
        nodes,
        "qdq_sigmoid",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 2, 2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 2, 2])],
        [s, z],
    )
    path = tmp_path / "bad.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    with pytest.raises(SystemExit) as info:
        main(["inspect", str(path)])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2 and len(err.splitlines()) == 1
    assert str(path) in err and "gate" in err and "Sigmoid" in err and "NHWC" in err
