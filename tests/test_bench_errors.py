"""Bad input to ``splitter bench`` / ``splitter calibrate``: one line, exit 2, no stray QEMU."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np
import pytest
from test_e2e_support import BOARDS, MODELS, cli, qemu_pids

from splitter.compile import CompileOptions, compile_model

pytestmark = [pytest.mark.qemu]


@pytest.fixture(scope="module")
def out(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A compiled (not built) tiny-CNN plan over two boards: every error comes before a build."""
    target = tmp_path_factory.mktemp("bench_err") / "out"
    compile_model(MODELS / "tiny_cnn.onnx", BOARDS / "e2e_tiny2.toml", target, CompileOptions())
    return target


def one_line_exit_2(proc: object) -> str:
    """The single stderr line of a failed command (asserting exit code 2)."""
    assert getattr(proc, "returncode", None) == 2, getattr(proc, "stderr", "")
    lines = str(getattr(proc, "stderr", "")).strip().splitlines()
    assert len(lines) == 1, lines
    assert "Traceback" not in lines[0]
    return lines[0]


def test_unreachable_port_names_device_and_port(out: Path) -> None:
    port = "socket://127.0.0.1:1"
    line = one_line_exit_2(cli("bench", str(out), "-n", "1", "--port", f"a={port}",
                               "--port", f"b={port}"))  # fmt: skip
    assert "127.0.0.1:1" in line and "device a" in line


def test_missing_serial_device(out: Path) -> None:
    line = one_line_exit_2(cli("bench", str(out), "-n", "1", "--port", "a=/dev/ttyNOPE0",
                               "--port", "b=/dev/ttyNOPE1"))  # fmt: skip
    assert "/dev/ttyNOPE0" in line


def test_port_missing_for_a_host_facing_board(out: Path) -> None:
    line = one_line_exit_2(cli("bench", str(out), "-n", "1", "--port", "a=socket://127.0.0.1:1"))
    assert "b" in line and "--port" in line


def test_neither_port_nor_emulate(out: Path) -> None:
    proc = cli("bench", str(out), "-n", "1")
    assert proc.returncode == 2 and "--emulate" in proc.stderr


def test_qemu_missing_prints_the_install_command(out: Path, tmp_path: Path) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    env = {**os.environ, "PATH": str(empty)}
    assert shutil.which("qemu-system-arm", path=env["PATH"]) is None
    line = one_line_exit_2(cli("bench", str(out), "--emulate", "-n", "1", env=env))
    assert "qemu-system-arm" in line
    assert "apt-get install --no-install-recommends qemu-system-arm" in line
    assert qemu_pids(str(out)) == []


def test_input_of_the_wrong_shape(out: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad.npy"
    np.save(bad, np.zeros((1, 1, 27, 28), dtype=np.float32))
    line = one_line_exit_2(cli("bench", str(out), "--emulate", "-n", "1", "--input", str(bad)))
    assert "shape" in line and "(1, 1, 28, 28)" in line
    assert qemu_pids(str(out)) == []


def test_bench_without_a_plan(tmp_path: Path) -> None:
    line = one_line_exit_2(cli("bench", str(tmp_path), "--emulate", "-n", "1"))
    assert "plan.json" in line


def test_calibrate_without_bench_json(out: Path) -> None:
    line = one_line_exit_2(cli("calibrate", str(out)))
    assert "bench.json" in line and "splitter bench" in line


def test_calibrate_needs_a_board_file(out: Path, tmp_path: Path) -> None:
    copy = tmp_path / "copy"
    shutil.copytree(out, copy)
    plan = json.loads((copy / "plan.json").read_text())
    plan["boards_path"] = str(tmp_path / "moved.toml")  # the board file is gone
    (copy / "plan.json").write_text(json.dumps(plan))
    (copy / "bench.json").write_text('{"runs": 0, "emulated": true, "devices": []}')
    line = one_line_exit_2(cli("calibrate", str(copy)))
    assert "plan.json: edited since splitter wrote it" in line  # files.sha256 first
    line = one_line_exit_2(cli("calibrate", str(copy), "--allow-edited"))
    assert "--target" in line
