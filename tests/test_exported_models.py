"""Real-exporter models (models/make_exported.py) split over two emulated STM32F405 boards.

Each model is compiled over two boards (the flash budgets of ``models/boards/e2e_exported_*.toml``
force a split), validated against onnxruntime by ``compile``, its firmware built with
arm-none-eabi-gcc, and one inference run over real QEMUs; the boards' output must equal
onnxruntime's within the end-to-end tolerance.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from test_e2e_support import MODELS, TOL, cli, qemu_pids, random_input, reference, shared_build

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

#: model file -> (board file, input shape, what makes it a real exporter's graph)
EXPORTED = {
    "mobilenet_v3_small_025.onnx": ("e2e_exported_mnv3.toml", (1, 3, 64, 64), "HardSwish"),
    "resnet_tv_28.onnx": ("e2e_exported_resnet.toml", (1, 3, 28, 28), "Gemm"),
    "mobilenet_v2_035_keras.onnx": ("e2e_exported_mnv2.toml", (1, 32, 32, 3), "Transpose"),
}


def test_exported_models_are_what_the_exporters_wrote() -> None:
    """Producer fields and a characteristic op of each exporter (no hand-written stand-ins)."""
    producers = {}
    for name, (_, shape, op) in EXPORTED.items():
        model = onnx.load(MODELS / name)
        producers[name] = model.producer_name
        dims = [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim]
        assert tuple(dims) == shape
        assert op in {n.op_type for n in model.graph.node}
    assert producers == {
        "mobilenet_v3_small_025.onnx": "pytorch",
        "resnet_tv_28.onnx": "pytorch",
        "mobilenet_v2_035_keras.onnx": "tf2onnx",
    }


@pytest.mark.parametrize("model", sorted(EXPORTED))
def test_exported_model_runs_split_on_emulated_boards(
    model: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    boards, shape, _ = EXPORTED[model]
    out = shared_build(tmp_path_factory, model, boards, Path(model).stem)
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b"]
    validation = json.loads((out / "validation.json").read_text())
    assert validation["passed"] is True and len(validation["samples"]) >= 8
    tmp = tmp_path_factory.mktemp("io")
    x = random_input(shape, seed=5)
    np.save(tmp / "x.npy", x)
    proc = cli("run", str(out), "--input", str(tmp / "x.npy"), "--emulate",
               "--output", str(tmp / "y.npy"), "--model", str(MODELS / model))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    y = np.load(tmp / "y.npy")
    assert y.shape == (1, 10)
    assert float(np.max(np.abs(y - reference(model, x)))) <= TOL
    assert qemu_pids(str(out)) == []
