"""Tiny-CNN over two emulated F405 boards: run vs onnxruntime, deterministic bench, calibration.

One compiled and built OUT per module (models/boards/e2e_tiny2.toml: conv1-2 on ``a``,
conv3-softmax on ``b``); every CLI call is a real subprocess booting real QEMUs.
"""

from __future__ import annotations

import json
import os
import tomllib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from test_e2e_support import (
    BOARDS,
    MODELS,
    TOL,
    cli,
    gone,
    planner_errors,
    qemu_pids,
    random_input,
    reference,
    shared_build,
)

from splitter.cost.wire import wire

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

MODEL = "tiny_cnn.onnx"
BOARD_FILE = "e2e_tiny2.toml"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_build(tmp_path_factory, MODEL, BOARD_FILE, "tiny")


@pytest.fixture(scope="module")
def benches(out: Path) -> list[dict[str, Any]]:
    """Two ``splitter bench --emulate --icount -n 2 --json`` runs (each boots its own QEMUs)."""
    results = []
    for _ in range(2):
        proc = cli("bench", str(out), "--emulate", "--icount", "-n", "2", "--json",
                   "--target", str(BOARDS / BOARD_FILE))  # fmt: skip
        assert proc.returncode == 0, proc.stderr
        results.append(json.loads(proc.stdout))
        assert qemu_pids(str(out)) == []
    return results


def test_plan_splits_over_both_boards(out: Path) -> None:
    plan = json.loads((out / "plan.json").read_text())
    assert [s["device"] for s in plan["submodels"]] == ["a", "b"]


def test_run_equals_onnxruntime(out: Path, tmp_path: Path) -> None:
    x = random_input((1, 1, 28, 28), seed=3)
    np.save(tmp_path / "x.npy", x)
    proc = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
               "--output", str(tmp_path / "y.npy"), "--model", str(MODELS / MODEL))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    y = np.load(tmp_path / "y.npy")
    assert float(np.max(np.abs(y - reference(MODEL, x)))) <= TOL
    assert qemu_pids(str(out)) == []


def test_bench_json_shape(out: Path, benches: list[dict[str, Any]]) -> None:
    b = benches[0]
    assert b["runs"] == 2 and b["emulated"] is True
    assert "emulated" in b["note"] and "F405" in b["note"]
    assert [d["device"] for d in b["devices"]] == ["a", "b"]
    for d in b["devices"]:
        for sub in d["submodels"]:
            assert len(sub["cycles"]) == 2 and all(c > 0 for c in sub["cycles"])
    pairs = [(ln["from"], ln["to"]) for ln in b["links"]]
    assert pairs == [("host", "a"), ("a", "b"), ("b", "host")]
    assert [ln["bytes"] for ln in b["links"]] == [3136, 3200, 40]
    for ln in b["links"]:
        assert len(ln["seconds"]) == 2 and all(s > 0 for s in ln["seconds"])
    assert b["links"][1]["measured_by"] == "proxy"
    assert len(b["latency_s"]) == 2 and min(b["latency_s"]) > 0
    assert {"submodels", "links", "latency_s"} <= set(b["estimate"])
    assert (b["estimate"]["prediction"], b["estimate"]["calibration"]) == ("emulator", "none")
    # one sub-model per device and distinct first/last boards: inputs are pipelined
    assert b["throughput"]["mode"] == "pipelined"
    assert b["throughput"]["pipelined"]["inputs"] == 2 and b["throughput"]["per_s"] > 0
    on_disk = json.loads((out / "bench.json").read_text())
    assert on_disk["devices"] == benches[1]["devices"]


def test_bench_cycles_identical_on_two_runs(benches: list[dict[str, Any]]) -> None:
    cycles = [[s["cycles"] for d in b["devices"] for s in d["submodels"]] for b in benches]
    assert cycles[0] == cycles[1]
    for per_sub in cycles[0]:
        assert len(set(per_sub)) == 1  # identical within a bench too (-icount shift=0)


def test_calibrate_refuses_what_its_data_contradicts(
    out: Path, benches: list[dict[str, Any]], tmp_path: Path
) -> None:
    """``a`` and ``b`` are both F405s; two sub-models cannot identify three classes, so one
    factor must explain both, and the two boards' measured / predicted ratios differ (by about
    10 % with the flat per-MAC estimate, less with the kernel cost table): beyond a 0.001 %
    limit, refused, nothing written. A real calibration of emulated data is refused whatever
    the limit."""
    cal = tmp_path / "calibrated.toml"
    for extra, why in ((["--max-error", "0.001"], "are both STM32F405RG"),
                       (["--kind", "real", "--max-error", "50"], "never a real one")):  # fmt: skip
        proc = cli("calibrate", str(out), "-o", str(cal), *extra)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and why in lines[0] and "bench.json" in lines[0], lines
        assert not cal.exists()


def test_emulated_calibration_predicts_emulated_runs_only(
    out: Path, benches: list[dict[str, Any]], tmp_path: Path
) -> None:
    cal = tmp_path / "calibrated.toml"
    proc = cli("calibrate", str(out), "-o", str(cal), "--max-error", "15", "--json")
    assert proc.returncode == 0, proc.stderr
    (part,) = json.loads(proc.stdout)["parts"]
    assert (part["part"], part["kind"], part["devices"]) == ("STM32F405RG", "emulated", ["a", "b"])
    assert 0 < part["error_pct"] <= 15 and "one factor for all classes" in part["method"]
    assert list(tomllib.loads(cal.read_text())["calibration"]) == ["emulated"]
    # one sub-model per device: each device's error is its sub-model's residual
    errors = planner_errors(
        out, cal, MODEL
    )  # factors written with 6 significant digits (errors in %)
    assert max(abs(e) for e in errors.values()) == pytest.approx(
        part["error_pct"], rel=1e-4, abs=1e-3
    )
    # the same file predicting the real parts ignores the emulated factors: a real core's
    # cycles at 168 MHz against the emulator's 1 instruction per ns
    assert min(planner_errors(out, cal, MODEL, emulated=False).values()) > 100
    labels = {}
    for extra in ([], ["--emulated"]):
        plan = cli("plan", str(MODELS / MODEL), "--target", str(cal), "--json", *extra)
        assert plan.returncode == 0, plan.stderr
        labels[bool(extra)] = json.loads(plan.stdout)["calibration"]
    assert labels == {False: "none", True: "emulated"}
    again = cli("compile", str(MODELS / MODEL), "--target", str(cal), "-o",
                str(tmp_path / "recompiled"), "--no-validate", "--emulated")  # fmt: skip
    assert again.returncode == 0, again.stderr
    assert "calibration: emulated" in again.stdout


def test_bench_over_ports_derives_board_link_time(out: Path) -> None:
    """The real-board path (--port): boards already running (here QEMUs started by the test),
    no proxy between them, so the a -> b time is derived from the latency."""
    from splitter.toolchain.emulator import Emulation

    with Emulation(out, icount=True) as emu:
        pids = emu.pids
        ports = [f"--port={name}={url}" for name, url in emu.endpoints.items()]
        proc = cli("bench", str(out), "-n", "2", "--json", *ports)
    assert proc.returncode == 0, proc.stderr
    assert gone(pids)
    b = json.loads(proc.stdout)
    assert b["emulated"] is False
    link = b["links"][1]
    assert (link["from"], link["to"], link["measured_by"]) == ("a", "b", "derived")
    assert all(s is not None and s > 0 for s in link["seconds"])  # 3200 B take time
    assert all(c > 0 for d in b["devices"] for s in d["submodels"] for c in s["cycles"])
    # those "boards" were QEMUs: a real calibration of their cycles is refused, nothing written
    cal = cli("calibrate", str(out), "-o", str(out / "real.toml"))
    assert cal.returncode == 2 and not (out / "real.toml").exists()
    assert "cycles per MAC, fewer than a real Cortex-M can" in cal.stderr


def test_bench_and_calibrate_human_output(out: Path, tmp_path: Path) -> None:
    wide = {**os.environ, "COLUMNS": "120"}  # rich wraps table cells to the terminal width
    proc = cli("bench", str(out), "--emulate", "-n", "1", "--no-pipeline", env=wide)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "estimated vs measured" in text and "error %" in text
    assert "sub-model 0 on a (compute)" in text and "link a -> b (3200 B, proxy)" in text
    assert f"link a -> b: 3200 B payload, {wire(3200, 1).clean} B on the wire predicted, " in text
    assert "throughput (sequential)" in text and "wrote" in text
    assert "the estimate predicts an emulated run; calibration: none" in text
    cal = cli("calibrate", str(out), "-o", str(tmp_path / "c.toml"), "--max-error", "15", env=wide)
    assert cal.returncode == 0, cal.stderr
    assert "emulated calibration: measured / estimated" in cal.stdout and "fit error" in cal.stdout
    assert "wrote" in cal.stdout and "only to predict emulated runs" in cal.stdout
    assert qemu_pids(str(out)) == []
