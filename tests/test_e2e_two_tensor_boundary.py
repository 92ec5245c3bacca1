"""A cut carrying two tensors between two emulated boards, one passed through (issue 15, item 3).

An early-exit network: ``conv1 -> a``; an exit head on ``a`` gives output ``exit``; the main
path ``conv2 -> pool -> fc`` on ``a`` gives output ``y``. The chain builder collapses the branch
into one super-node, so the chain here is grouped by hand, as an operator-granularity order
would cut it: layer 1 = conv1 + the exit head, layer 2 = conv2 + pool, layer 3 = fc. Board ``a``
runs layers 0-1 and sends both live tensors ``(a, exit)`` over the a-b link (tensor index 0 and
1); board ``b`` runs layers 2-3 and sends the host ``exit`` unchanged from where it received it
(a pass-through slot, no copy) and ``y``. Everything else is the real pipeline: plan manifest,
ONNX slicing with several inputs/outputs, validation with onnxruntime tensor by tensor, the
firmware generator, arm-none-eabi-gcc, QEMU and ``splitter run``.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper
from test_e2e_support import BOARDS, TOL, cli, qemu_pids, random_input

from splitter.codegen.firmware import generate_firmware
from splitter.compile import CompileOptions, make_manifest, plan_from_assignment
from splitter.cost.layer import layer_cost
from splitter.hardware.boards import load_boards
from splitter.importers import load_model
from splitter.ir import Chain, Graph, Layer
from splitter.slicing.boundaries import cuts_from_manifest
from splitter.slicing.onnx_slice import slice_onnx
from splitter.slicing.validate import require_pass, validate_models
from splitter.toolchain.build import run_make

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

BOARD_FILE = BOARDS / "e2e_tiny2.toml"
#: layers of the hand-made chain by op name (layer 0 is the input)
LAYERS = (("conv1", "exit_gap", "exit_flat", "exit_fc"), ("conv2", "gap", "flat"), ("fc",))


def early_exit(path: Path) -> Path:
    """The early-exit model (module docstring), seeded random weights, outputs (exit, y)."""
    rng = np.random.default_rng(7)

    def w(name: str, shape: tuple[int, ...]) -> onnx.TensorProto:
        return numpy_helper.from_array((0.3 * rng.standard_normal(shape)).astype(np.float32), name)

    node = helper.make_node
    nodes = [
        node("Conv", ["x", "W1", "B1"], ["c1"], name="conv1", pads=[1, 1, 1, 1]),
        node("Relu", ["c1"], ["a"], name="relu1"),
        node("GlobalAveragePool", ["a"], ["ga"], name="exit_gap"),
        node("Flatten", ["ga"], ["fa"], name="exit_flat"),
        node("Gemm", ["fa", "E", "EB"], ["exit"], name="exit_fc", transB=1),
        node("Conv", ["a", "W2", "B2"], ["c2"], name="conv2", pads=[1, 1, 1, 1]),
        node("Relu", ["c2"], ["r2"], name="relu2"),
        node("GlobalAveragePool", ["r2"], ["g2"], name="gap"),
        node("Flatten", ["g2"], ["f2"], name="flat"),
        node("Gemm", ["f2", "D", "DB"], ["y"], name="fc", transB=1),
    ]
    inits = [w("W1", (4, 1, 3, 3)), w("B1", (4,)), w("E", (3, 4)), w("EB", (3,))]
    inits += [w("W2", (8, 4, 3, 3)), w("B2", (8,)), w("D", (5, 8)), w("DB", (5,))]
    value = helper.make_tensor_value_info
    graph = helper.make_graph(
        nodes,
        "early_exit",
        [value("x", TensorProto.FLOAT, [1, 1, 12, 12])],
        [value("exit", TensorProto.FLOAT, [1, 3]), value("y", TensorProto.FLOAT, [1, 5])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    onnx.save(model, path)
    return path


def hand_chain(graph: Graph) -> Chain:
    """The chain grouped as :data:`LAYERS`, costed like the chain builder (``layer_cost``)."""
    by_name = {op.name: op for op in graph.ops}
    t = graph.tensors
    x = t[graph.inputs[0]]
    layers = [Layer(0, "x", "input", (), x, x, layer_cost((), t, x.name, x.name, _f32))]
    prev = x.name
    for j, names in enumerate(LAYERS, start=1):
        ops = tuple(by_name[n] for n in names)
        out = "a" if j == 1 else ops[-1].outputs[0]
        outs = ("a", "exit") if j == 1 else ("exit", "y") if j == len(LAYERS) else None
        cost = layer_cost(ops, t, prev, out, _f32, out_names=outs)
        kind = "super" if len(ops) > 1 else ops[0].kind
        layers.append(Layer(j, names[0], kind, ops, t[prev], t[out], cost))
        prev = out
    return Chain(graph.name, tuple(layers), graph=graph, source_path=graph.source_path)


def _f32(_spec: object) -> int:
    return 4


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """plan.json, validated sub-models and the firmware built for the emulator."""
    root = tmp_path_factory.mktemp("two_tensor")
    model = early_exit(root / "early_exit.onnx")
    loaded = load_model(model)
    chain = hand_chain(loaded.graph)
    boards = load_boards(BOARD_FILE)
    plan = plan_from_assignment(chain, boards, (0, 0, 1, 1))
    manifest = make_manifest(plan, chain, boards, model, BOARD_FILE, CompileOptions())
    t = loaded.graph.tensors
    s0, s1 = manifest.submodels
    live = (t["a"], t["exit"])  # both tensors live across the cut
    subs = (
        dataclasses.replace(s0, outputs=live),
        dataclasses.replace(s1, inputs=live, outputs=(t["exit"], t["y"])),
    )
    manifest = dataclasses.replace(manifest, submodels=subs)
    sliced = slice_onnx(loaded, cuts_from_manifest(manifest))
    report = validate_models(loaded, [(s.file_name, s.data) for s in sliced])
    require_pass(report, model)
    assert [(b.submodel, b.name) for b in report.boundaries] == [(0, "a"), (0, "exit")]
    out = root / "out"
    out.mkdir()
    (out / "plan.json").write_text(manifest.to_json() + "\n")
    generate_firmware(out, chain, boards, manifest)
    for dev in ("a", "b"):
        run_make(out / "firmware" / dev, emulator=True)
    return out


def test_firmware_tables_carry_two_tensors_and_a_pass_through(out: Path) -> None:
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    (sa,) = wiring["devices"][0]["submodels"]
    (sb,) = wiring["devices"][1]["submodels"]
    assert [t["name"] for t in sa["outputs"]] == ["a", "exit"]
    assert [(t["name"], t["nbytes"]) for t in sb["inputs"]] == [("a", 4 * 4 * 144), ("exit", 12)]
    assert [t["name"] for t in sb["outputs"]] == ["exit", "y"]
    assert sb["inputs"][1] == sb["outputs"][0]  # one slot: received and sent in place
    main_c = (out / "firmware" / "b" / "plan.c").read_text()
    assert "2u, 2u, sm_01_in, sm_01_out, sm_01" in main_c


def test_run_equals_onnxruntime(out: Path, tmp_path: Path) -> None:
    x = random_input((1, 1, 12, 12), seed=11)
    np.save(tmp_path / "x.npy", x)
    proc = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
               "--output", str(tmp_path / "y.npz"), "--json")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    res = json.loads(proc.stdout)
    assert [t["submodel"] for t in res["timings"]] == [0, 1]
    got = np.load(tmp_path / "y.npz")
    model = json.loads((out / "plan.json").read_text())["model"]["path"]
    sess = ort.InferenceSession(model, providers=["CPUExecutionProvider"])
    ref = dict(zip(["exit", "y"], sess.run(None, {"x": x}), strict=True))
    for name in ("exit", "y"):
        assert float(np.max(np.abs(got[name] - ref[name]))) <= TOL
    assert qemu_pids(str(out)) == []
