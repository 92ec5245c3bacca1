"""KWS-CNN over three emulated boards, one of them hosting two non-adjacent sub-models.

models/boards/e2e_kws3.toml limits flash so the plan is d0: conv1 | d1: conv2 | d2: linear |
d0: fc1..softmax. Checks: the run equals onnxruntime, two benches give identical cycles, and
the calibrated board file makes the planner predict every device's compute within 2 %.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_e2e_support import (
    BOARDS,
    MODELS,
    TOL,
    cli,
    planner_errors,
    qemu_pids,
    reference,
    shared_build,
)

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

MODEL = "kws_cnn.onnx"
BOARD_FILE = "e2e_kws3.toml"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_build(tmp_path_factory, MODEL, BOARD_FILE, "kws")


@pytest.fixture(scope="module")
def benches(out: Path) -> list[dict[str, Any]]:
    results = []
    for _ in range(2):
        proc = cli("bench", str(out), "--emulate", "--icount", "-n", "2", "--json",
                   "--target", str(BOARDS / BOARD_FILE))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        results.append(json.loads(proc.stdout))
        assert qemu_pids(str(out)) == []
    return results


def test_one_device_hosts_two_non_adjacent_submodels(out: Path) -> None:
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["d0", "d1", "d2", "d0"]


def test_run_equals_onnxruntime(out: Path, tmp_path: Path) -> None:
    x = np.random.default_rng(5).standard_normal((1, 1, 49, 10)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    proc = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
               "--output", str(tmp_path / "y.npy"), "--model", str(MODELS / MODEL))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    y = np.load(tmp_path / "y.npy")
    assert float(np.max(np.abs(y - reference(MODEL, x)))) <= TOL
    assert qemu_pids(str(out)) == []


def test_bench_cycles_identical_on_two_runs(benches: list[dict[str, Any]]) -> None:
    cycles = [
        {s["index"]: s["cycles"] for d in b["devices"] for s in d["submodels"]} for b in benches
    ]
    assert sorted(cycles[0]) == [0, 1, 2, 3]
    assert cycles[0] == cycles[1]
    assert all(len(set(c)) == 1 for c in cycles[0].values())


def test_bench_links_follow_the_plan(benches: list[dict[str, Any]]) -> None:
    b = benches[0]
    pairs = [(ln["from"], ln["to"]) for ln in b["links"]]
    assert pairs == [("host", "d0"), ("d0", "d1"), ("d1", "d2"), ("d2", "d0"), ("d0", "host")]
    assert [ln["measured_by"] for ln in b["links"]] == ["host", "proxy", "proxy", "proxy", "host"]
    assert b["throughput"]["mode"] == "sequential"
    assert "d0" in b["throughput"]["why_not_pipelined"]


def test_per_class_calibration_over_three_identical_parts(
    out: Path, benches: list[dict[str, Any]], tmp_path: Path
) -> None:
    """Four sub-models on three F405s give four equations for the classes conv, dense and
    other: the part gets one fit over the three devices, per class when the weighted NNLS gives
    every class a positive factor, otherwise one factor with the reason (since the loop cost
    model of issue 25 the uncalibrated estimate is within 5 % and the small "other" class is
    fitted to zero: the one-factor fallback). The planner then predicts every device within
    the fit's error."""
    cal = tmp_path / "calibrated.toml"
    proc = cli("calibrate", str(out), "-o", str(cal), "--json", "--max-error", "30")
    assert proc.returncode == 0, proc.stderr
    (part,) = json.loads(proc.stdout)["parts"]
    assert part["devices"] == ["d0", "d1", "d2"]
    if "per-class NNLS" in part["method"]:
        assert set(part["by_class"]) == {"conv", "dense", "other"}
    else:
        assert "not per class: the per-class fit gives" in part["method"], part["method"]
        assert part["by_class"] == {}
    errors = planner_errors(out, cal, MODEL)
    assert set(errors) == {"d0", "d1", "d2"}
    assert max(abs(e) for e in errors.values()) <= part["error_pct"] + 0.01, errors  # 6 digits
