"""A non-F405 part under emulation: the bench says so, calibration uses the emulated clock."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
from test_e2e_support import cli, gone, planner_errors, qemu_pids, shared_build

from splitter.hardware.boards import load_boards

pytestmark = [pytest.mark.slow, pytest.mark.qemu, pytest.mark.toolchain]

MODEL = "tiny_cnn.onnx"
BOARD_FILE = "e2e_tiny_mixed.toml"


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return shared_build(tmp_path_factory, MODEL, BOARD_FILE, "mixed")


def test_f446_is_benched_as_an_f405_and_calibrated_at_its_own_clock(
    out: Path, tmp_path: Path
) -> None:
    proc = cli("bench", str(out), "--emulate", "-n", "1", "--json", "--no-pipeline")
    assert proc.returncode == 0, proc.stderr
    b = json.loads(proc.stdout)
    assert "STM32F446RE" in b["note"] and "emulated as an F405" in b["note"]
    assert [d["part"] for d in b["devices"]] == ["STM32F405RG", "STM32F446RE"]
    assert all(d["clock_hz"] == 168e6 for d in b["devices"])
    assert b["throughput"]["why_not_pipelined"] == "--no-pipeline"
    assert qemu_pids(str(out)) == []
    # the board file came from plan.json (no --target): the estimate uses the F446's 180 MHz
    est = {d["device"]: d["clock_hz"] for d in b["estimate"]["devices"]}
    assert est == {"a": 168e6, "b": 180e6}
    assert b["estimate"]["prediction"] == "emulator"
    cal = tmp_path / "cal.toml"
    proc = cli("calibrate", str(out), "-o", str(cal))
    assert proc.returncode == 0, proc.stderr
    data = tomllib.loads(cal.read_text())
    # each part its own emulated table, fitted exactly on its one sub-model (said so, no error
    # figure); the devices keep their clocks (the F446's 180 MHz): emulated predictions count
    # at the emulator's 168 MHz whatever the part
    tables = data["calibration"]["emulated"]
    assert sorted(tables) == ["STM32F405RG", "STM32F446RE"]
    assert all("error_pct" not in t for t in tables.values())
    assert [d.clock_hz for d in load_boards(cal).devices] == [168e6, 180e6]
    errors = planner_errors(out, cal, MODEL)
    assert max(abs(e) for e in errors.values()) <= 1e-3, errors  # 6 significant digits


def test_bench_refuses_boards_running_another_plan(
    out: Path, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The boards (QEMUs of the mixed plan) answer PING with another plan hash than OUT's."""
    from splitter.toolchain.emulator import Emulation

    tiny = shared_build(tmp_path_factory, MODEL, "e2e_tiny2.toml", "tiny_other")
    with Emulation(out, icount=True) as emu:
        pids = emu.pids
        ports = [f"--port={name}={url}" for name, url in emu.endpoints.items()]
        proc = cli("bench", str(tiny), "-n", "1", *ports)
    assert gone(pids)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "firmware is for plan" in lines[0] and "device a" in lines[0]
