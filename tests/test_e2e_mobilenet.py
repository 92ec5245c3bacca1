"""MobileNet v1 0.25 compiled, built, run and benched on two emulated STM32F405 boards.

The model is ``models/mobilenet_v1_025_64.onnx``: the MobileNet v1 0.25 network at 64x64 input
(the 128x128 one cannot run on QEMU's F405, see models/boards/e2e_mobilenet.toml). Its weights
(1.87 MB float32) exceed one board's 1 MiB of flash, so models/boards/e2e_mobilenet64.toml's
two boards must share it. The wall time of compile + build + run + bench is recorded in
benchmarks/e2e_emulated.md (not asserted here).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper
from test_e2e_support import (
    BOARDS,
    MODELS,
    TOL,
    cli,
    qemu_pids,
    random_input,
    reference,
    shared_build,
)

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

MODEL = "mobilenet_v1_025_64.onnx"
BOARD_FILE = "e2e_mobilenet64.toml"
#: Flash of one emulated STM32F405 (QEMU netduinoplus2), bytes.
F405_FLASH = 1024 * 1024


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_build(tmp_path_factory, MODEL, BOARD_FILE, "mobilenet64")


def _weight_shapes(path: Path) -> dict[str, tuple[int, ...]]:
    """Initializer shapes of an ONNX file by name, the ReLU6 bounds left out."""
    inits = onnx.load(str(path)).graph.initializer
    return {
        t.name: tuple(numpy_helper.to_array(t).shape)
        for t in inits
        if not t.name.endswith((".min", ".max"))
    }


def test_mobilenet64_has_the_weights_of_mobilenet_v1_025() -> None:
    """Same layers and weight shapes as the 128x128 model; the classifier is the FC form."""
    small = _weight_shapes(MODELS / MODEL)
    full = _weight_shapes(MODELS / "mobilenet_v1_025.onnx")
    body = {k: v for k, v in full.items() if not k.startswith("conv_preds")}
    assert {k: v for k, v in small.items() if not k.startswith("fc.")} == body
    assert small["fc.weight"] + (1, 1) == full["conv_preds.weight"] == (1000, 256, 1, 1)
    assert sum(int(np.prod(s)) for s in small.values()) == 478_280


def test_mobilenet64_needs_both_boards(out: Path) -> None:
    """More weights than one F405's flash; each board's share fits its own."""
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b"]
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    weights = [int(d["weights_bytes"]) for d in wiring["devices"]]
    assert len(weights) == 2 and sum(weights) > F405_FLASH
    assert all(0 < w < F405_FLASH for w in weights)


def test_mobilenet64_run_and_bench(out: Path, tmp_path: Path) -> None:
    x = random_input((1, 3, 64, 64), seed=64)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
              "--output", str(tmp_path / "y.npy"), "--model", str(MODELS / MODEL))  # fmt: skip
    assert run.returncode == 0, run.stderr
    y = np.load(tmp_path / "y.npy")
    assert y.shape == (1, 1000)
    assert float(np.max(np.abs(y - reference(MODEL, x)))) <= TOL
    bench = cli("bench", str(out), "--emulate", "--icount", "-n", "2", "--json", "--input",
                str(tmp_path / "x.npy"), "--target", str(BOARDS / BOARD_FILE))  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    b = json.loads(bench.stdout)
    assert [d["device"] for d in b["devices"]] == ["a", "b"]
    classes = set()
    for d in b["devices"]:
        for sub in d["submodels"]:
            assert len(sub["cycles"]) == 2 and len(set(sub["cycles"])) == 1  # icount: exact
            assert sub["cycles"][0] > 0
            classes |= set(sub["macs_by_class"])
    assert {"conv", "depthwise", "dense"} <= classes
    assert b["throughput"]["per_s"] > 0
    assert qemu_pids(str(out)) == []
