"""The MobileNet-class end-to-end test: compiled, built, run and benched on two emulated boards.

MobileNet v1 0.25 itself cannot run on the emulated F405 (128 KiB SRAM; its input alone is
192 KiB, conv_pw_1 needs 384 KiB): :func:`test_mobilenet_v1_025_does_not_fit_emulated_f405`
checks compile says so. The depthwise-separable KWS DS-CNN (4.8 M MACs: conv, depthwise, dense)
runs instead, split by models/boards/e2e_dscnn2.toml. The time of compile + build + run + bench is
recorded in benchmarks/e2e_emulated.md (not asserted here).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
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

MODEL = "kws_ds_cnn.onnx"
BOARD_FILE = "e2e_dscnn2.toml"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_build(tmp_path_factory, MODEL, BOARD_FILE, "dscnn")


def test_mobilenet_v1_025_does_not_fit_emulated_f405(tmp_path: Path) -> None:
    model, boards = MODELS / "mobilenet_v1_025.onnx", BOARDS / "e2e_mobilenet.toml"
    out = tmp_path / "o"
    proc = cli("compile", str(model), "--target", str(boards), "-o", str(out), "--no-validate")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    # with partial execution (auto) the first layers are one loop group, named after conv1
    assert len(lines) == 1 and "RAM" in lines[0] and "(conv1)" in lines[0]
    assert not out.exists()


def test_dscnn_split_uses_depthwise_layers_on_both_boards(out: Path) -> None:
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b"]


def test_dscnn_run_and_bench(out: Path, tmp_path: Path) -> None:
    x = random_input((1, 1, 49, 10), seed=21)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
              "--output", str(tmp_path / "y.npy"), "--model", str(MODELS / MODEL))  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert float(np.max(np.abs(np.load(tmp_path / "y.npy") - reference(MODEL, x)))) <= TOL
    bench = cli("bench", str(out), "--emulate", "-n", "2", "--json", "--input",
                str(tmp_path / "x.npy"), "--target", str(BOARDS / BOARD_FILE))  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    b = json.loads(bench.stdout)
    classes = set()
    for d in b["devices"]:
        for sub in d["submodels"]:
            assert len(set(sub["cycles"])) == 1 and sub["cycles"][0] > 0
            classes |= set(sub["macs_by_class"])
    assert {"conv", "depthwise", "dense"} <= classes
    assert b["throughput"]["per_s"] > 0
    assert qemu_pids(str(out)) == []
