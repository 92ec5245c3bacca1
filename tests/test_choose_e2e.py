"""The boards.toml ``splitter choose`` writes compiles, builds and, for an F405-only set, runs on
emulated boards (QEMU) and equals onnxruntime; a mixed set of another answer builds for the
parts with the real cross compiler."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from test_e2e_support import MODELS, TOL, cli, qemu_pids, random_input, reference

from splitter.compile import CompileOptions, compile_model
from splitter.hardware.boards import load_boards
from splitter.toolchain.build import run_make

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

F405_ONLY = '[[part]]\nname = "STM32F405RG"\n'
MIXED = "".join(
    f'[[part]]\nname = "{name}"\n' for name in ("STM32G071RB", "STM32F401RE", "STM32F446RE")
)


def _choose(tmp_path: Path, model: str, parts: str, *args: str) -> Path:
    (tmp_path / "parts.toml").write_text(parts)
    out = tmp_path / "choice"
    proc = cli("choose", str(MODELS / model), *args, "--parts", str(tmp_path / "parts.toml"),
               "--jobs", "1", "--no-front", "--json", "-o", str(out))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["proved_optimal"] is True
    return out / "boards.toml"


def test_f405_only_choice_compiles_builds_and_runs_on_qemu(tmp_path: Path) -> None:
    """MobileNet v1 0.25 at 64x64 holds more weights than one F405's flash: the answer is two
    F405 boards; their boards.toml compiles, builds for the emulator and runs under QEMU."""
    model = "mobilenet_v1_025_64.onnx"
    boards = _choose(tmp_path, model, F405_ONLY, "--latency-ms", "600000", "--max-boards", "3")
    assert [d.part.name for d in load_boards(boards).devices] == ["STM32F405RG"] * 2
    out = tmp_path / "out"
    compile_model(MODELS / model, boards, out, CompileOptions(force=True))
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    for dev in wiring["devices"]:
        assert run_make(out / "firmware" / dev["name"], emulator=True).exists()
    x = random_input((1, 3, 64, 64), seed=26)
    np.save(tmp_path / "x.npy", x)
    run = cli("run", str(out), "--input", str(tmp_path / "x.npy"), "--emulate",
              "--output", str(tmp_path / "y.npy"), "--model", str(MODELS / model))  # fmt: skip
    assert run.returncode == 0, run.stderr
    y = np.load(tmp_path / "y.npy")
    assert float(np.max(np.abs(y - reference(model, x)))) <= TOL
    assert qemu_pids(str(out)) == []


def test_mixed_choice_compiles_and_builds_for_the_parts(tmp_path: Path) -> None:
    boards = _choose(tmp_path, "mlperf_kws_ds_cnn_int8.tflite", MIXED, "--latency-ms", "300")
    out = tmp_path / "out"
    compile_model(MODELS / "mlperf_kws_ds_cnn_int8.tflite", boards, out, CompileOptions(force=True))
    plan = json.loads((out / "plan.json").read_text())
    assert plan["energy"]["total_j"] > 0 and plan["latency_s"] <= 0.3
    wiring = json.loads((out / "firmware" / "wiring.json").read_text())
    for dev in wiring["devices"]:
        assert run_make(out / "firmware" / dev["name"]).exists()
