"""A mixed QDQ graph: int8 ops with a float op left between DequantizeLinear and QuantizeLinear.

``models/tiny_cnn_qdq.onnx`` is ``tiny_cnn.onnx`` quantised by splitter's own ``--quantize int8``
(``models/make_qdq.py``: onnxruntime's ``quantize_static``, QDQ, QInt8, per-channel), exactly as
the QDQ importer's error message advises. onnxruntime leaves the final Softmax in float:
``dense (int8) -> DequantizeLinear -> Softmax -> QuantizeLinear -> DequantizeLinear``. splitter
runs the Softmax on the float kernel between a ``dequantize`` and a ``quantize``.

Tolerance (``splitter.device.run.output_tolerance``): each requantising int8 op may differ from
onnxruntime by one step (``tests/test_qdq.py`` says why); the logits ``dense`` writes are within
one step ``s_in`` of onnxruntime's (measured: 59 of 64 seeded inputs have a one-step difference
somewhere, none more), and Softmax moves by at most ``1/2 * s_in`` for that (its Jacobian's
row sums are ``2 y_i (1 - y_i) <= 1/2``), plus one output step ``s_out`` of the final
QuantizeLinear: ``s_out + s_in / 2``. Fed onnxruntime's own logits the float island is exact.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from test_codegen_support import build_host, planner
from test_e2e_support import MODELS, cli, qemu_pids, random_input, reference
from test_qdq import _host_run

from splitter.codegen.model_c import generate_device_c
from splitter.compile import CompileOptions, compile_model
from splitter.device.run import output_tolerance
from splitter.importers import load_chain
from splitter.slicing.validate import OnnxRunner
from splitter.toolchain.build import run_make

MODEL = "tiny_cnn_qdq.onnx"
#: two whole STM32F405s; ``--objective throughput`` pipelines the model over both
BOARDS = """[link]
baud = 921600

[[device]]
name = "a"
mcu = "STM32F405RG"

[[device]]
name = "b"
mcu = "STM32F405RG"
"""


def _scales() -> tuple[float, float]:
    """(step of the logits ``dense`` writes, step of the softmax output)."""
    inits = {i.name: i for i in onnx.load(MODELS / MODEL).graph.initializer}
    value = onnx.numpy_helper.to_array
    return float(value(inits["dense/out_scale"])), float(value(inits["softmax/out_scale"]))


def test_float_softmax_sits_between_dequantize_and_quantize() -> None:
    graph = load_chain(MODELS / MODEL).graph
    assert graph is not None
    kinds = [op.kind for op in graph.ops]
    assert kinds[-5:] == ["dense", "dequantize", "softmax", "quantize", "dequantize"]
    soft = next(op for op in graph.ops if op.kind == "softmax")
    assert graph.tensors[soft.inputs[0]].dtype == "float32"
    assert graph.tensors[soft.outputs[0]].dtype == "float32"
    quant = graph.ops[kinds.index("softmax") + 1]
    assert graph.tensors[quant.outputs[0]].dtype == "int8"  # softmax/out_QuantizeLinear_Output
    s_in, s_out = _scales()
    assert output_tolerance(MODELS / MODEL) == pytest.approx(1.01 * (s_out + 0.5 * s_in))


def test_host_c_float_island_exact_and_output_within_tolerance(tmp_path: Path) -> None:
    """Host build, two sub-models: int8 ``input .. dense`` and the float island. The logits are
    within one step of onnxruntime's; fed onnxruntime's logits the island is bit-exact; the
    whole output is within ``output_tolerance``."""
    chain = load_chain(MODELS / MODEL)
    names = [layer.name for layer in chain.layers]
    cut = names.index("dense")
    rows = [(0, 0, cut), (1, cut + 1, len(chain) - 1)]
    exe = build_host(generate_device_c(chain, rows, "solo", planner=planner()), tmp_path)
    mid = chain.layers[cut].output.name
    ref = OnnxRunner(MODELS / MODEL, probes=[mid])
    s_out = _scales()[1]
    tol = output_tolerance(MODELS / MODEL)
    rng = np.random.default_rng(0)
    worst = 0.0
    for _ in range(16):
        x = rng.standard_normal((1, 1, 28, 28)).astype(np.float32)
        env = ref.run({"input": x})
        logits = _host_run(exe, 0, x.tobytes(), tmp_path, "int8", 10)
        assert np.abs(logits.astype(int) - env[mid].ravel().astype(int)).max() <= 1
        exact = _host_run(exe, 1, env[mid].ravel().tobytes(), tmp_path, "<f4", 10)
        assert np.array_equal(exact, env["softmax/out"].ravel())
        y = _host_run(exe, 1, logits.tobytes(), tmp_path, "<f4", 10)
        worst = max(worst, float(np.abs(y - env["softmax/out"].ravel()).max()))
    assert worst <= tol
    assert worst > s_out  # the bound one output step alone would give is not enough


@pytest.mark.slow
@pytest.mark.qemu
@pytest.mark.toolchain
def test_qdq_tiny_cnn_with_float_softmax_runs_on_two_emulated_f405s(tmp_path: Path) -> None:
    boards = tmp_path / "two_f405.toml"
    boards.write_text(BOARDS)
    opts = CompileOptions(objective="throughput", force=True)
    result = compile_model(MODELS / MODEL, boards, tmp_path / "out", opts)
    out = result.out_dir
    assert result.firmware == "generated in firmware/"
    assert result.validation is not None and result.validation.passed  # sub-models vs whole
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b"]
    assert plan["submodels"][0]["outputs"][0]["dtype"] == "int8"
    for dev in ("a", "b"):
        run_make(out / "firmware" / dev, emulator=True)
    tol = output_tolerance(MODELS / MODEL)
    for seed in (5, 6):
        x = random_input((1, 1, 28, 28), seed=seed)
        np.save(tmp_path / "x.npy", x)
        proc = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
                   "--output", str(tmp_path / "y.npy"))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        assert f"<= {tol:g}" in proc.stdout  # run's own check, the same bound
        y = np.load(tmp_path / "y.npy")
        assert float(np.max(np.abs(y - reference(MODEL, x)))) <= tol
    assert qemu_pids(str(out)) == []


def test_two_float_ops_reading_one_dequantize_share_it(tmp_path: Path) -> None:
    """A DequantizeLinear read by a Softmax and a Sigmoid becomes one ``dequantize``; a float op
    reading another float op's output needs none; the sub-models validate against
    onnxruntime."""
    from onnx import TensorProto, helper, numpy_helper

    s = numpy_helper.from_array(np.array(0.05, np.float32), "s")
    z = numpy_helper.from_array(np.array(0, np.int8), "z")
    u = numpy_helper.from_array(np.array(1 / 256, np.float32), "u")
    node = helper.make_node
    nodes = [
        node("QuantizeLinear", ["x", "s", "z"], ["xq"], name="q0"),
        node("DequantizeLinear", ["xq", "s", "z"], ["xd"], name="dq0"),
        node("Softmax", ["xd"], ["p"], name="soft"),
        node("Sigmoid", ["xd"], ["g0"], name="gate"),
        node("Tanh", ["g0"], ["g"], name="squash"),
        node("QuantizeLinear", ["p", "u", "z"], ["pq"], name="q1"),
        node("DequantizeLinear", ["pq", "u", "z"], ["y"], name="dq1"),
    ]
    graph = helper.make_graph(
        nodes,
        "two_float_ops",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 6]),
         helper.make_tensor_value_info("g", TensorProto.FLOAT, [1, 6])],
        [s, z, u],
    )  # fmt: skip
    path = tmp_path / "two.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    chain = load_chain(path)
    assert chain.graph is not None
    ops = chain.graph.ops
    kinds = [op.kind for op in ops]
    assert kinds.count("dequantize") == 2  # dq0 once, dq1 at the output
    assert [op.outputs[0] for op in ops if op.kind == "dequantize"] == ["xd", "y"]
    assert {"softmax", "sigmoid", "tanh", "quantize"} <= set(kinds)
    boards = tmp_path / "b.toml"
    boards.write_text(BOARDS)
    n = len(chain)
    opts = CompileOptions(firmware=False, assignment=(0,) * (n - 1) + (1,))
    result = compile_model(path, boards, tmp_path / "o", opts)
    assert result.validation is not None and result.validation.passed
