"""SIGINT and SIGTERM at any moment of a real ``splitter compile`` exit 130 / 143 with the one
line ``splitter: interrupted``: never an error that blames the model, the boards file or the
cut, and ``OUT`` stays the previous output or the complete new one."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from crash_support import snapshot

ROOT = Path(__file__).resolve().parents[1]
MODEL = str(ROOT / "models" / "tiny_cnn.onnx")
BOARDS = str(ROOT / "models" / "boards" / "e2e_tiny2.toml")
SPLITTER = str(Path(sys.executable).parent / "splitter")

#: (signal, seconds after the command's first progress line): from the model import to the last
#: file written. (A signal while the Python interpreter itself starts, before any of splitter's
#: code runs, gets Python's default behaviour: docs/robustness.md; on a loaded machine that
#: window is long enough for a fixed delay from the start to land in it.)
#: when the signals land, as fractions of the reference compile's wall time (so the points span
#: the compile on a fast and on a loaded machine alike), alternating SIGINT and SIGTERM
FRACTIONS = (0.0, 0.05, 0.15, 0.3, 0.45, 0.6, 0.75, 0.9)


def _compile(out: Path, *extra: str) -> list[str]:
    return [SPLITTER, "compile", MODEL, "--target", BOARDS, "-o", str(out), *extra]


@pytest.mark.slow
def test_signals_at_many_moments_of_a_compile(tmp_path: Path) -> None:
    out, previous_copy = tmp_path / "out", tmp_path / "previous"
    subprocess.run(_compile(previous_copy, "--no-firmware"), check=True, capture_output=True)
    # the new output at OUT's own path: compile_commands.json names the project directory
    start = time.monotonic()
    subprocess.run(_compile(out), check=True, capture_output=True)
    duration = time.monotonic() - start
    previous, new = snapshot(previous_copy), snapshot(out)
    points = [
        (signal.SIGINT if k % 2 == 0 else signal.SIGTERM, f * duration)
        for k, f in enumerate(FRACTIONS)
    ]
    subprocess.run(["rm", "-rf", str(out)], check=True)
    interrupted = 0
    for signum, delay in points:
        subprocess.run(["cp", "-a", str(previous_copy), str(out)], check=True)
        env = {**os.environ, "SPLITTER_PROGRESS": "plain"}  # one line per step on stderr
        proc = subprocess.Popen(
            _compile(out), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env
        )
        assert proc.stderr is not None
        first = proc.stderr.readline()  # the CLI is running: "splitter: importing tiny_cnn.onnx"
        time.sleep(delay)
        proc.send_signal(signum)
        _, stderr = proc.communicate(timeout=120)
        lines = (first + stderr).decode().splitlines()
        name = signal.Signals(signum).name
        where = f"{name} at {delay:.2f} s: exit {proc.returncode}, {lines[-3:]}"
        if proc.returncode == 0:  # the compile was over before the signal
            assert snapshot(out) == new, where
        else:
            interrupted += 1
            assert proc.returncode == 128 + signum, where
            assert first.startswith(b"splitter: importing"), where
            assert lines[-1] == "splitter: interrupted", where
            assert not any("error" in line for line in lines), where
            assert snapshot(out) in (previous, new), where
        subprocess.run(["rm", "-rf", str(out)], check=True)
    assert interrupted >= len(points) // 2


def test_ctrl_c_while_onnxruntime_loads_is_not_blamed_on_the_cut(tmp_path: Path) -> None:
    """Issue 30: a SIGINT that lands while onnxruntime initialises a session during validation
    made the session fail with onnxruntime's own error ("initialization failed"), and splitter
    reported "the cut produced an invalid model" with exit code 2. Here the first session of
    the validation takes a real SIGINT and then fails as onnxruntime does: the report must be
    the interruption (exit 130), not the cut."""
    script = textwrap.dedent(
        f"""
        import signal, sys
        import onnxruntime
        from onnxruntime.capi.onnxruntime_pybind11_state import Fail

        real_init = onnxruntime.InferenceSession.__init__

        def init(self, *args, **kwargs):
            try:  # the signal arrives while the session loads...
                signal.raise_signal(signal.SIGINT)
            except KeyboardInterrupt:
                pass  # ...and the runtime, not Python, ends the load
            raise Fail("[ONNXRuntimeError] : 1 : FAIL : initialization failed")

        onnxruntime.InferenceSession.__init__ = init
        sys.argv = ["splitter", "compile", {MODEL!r}, "--target", {BOARDS!r},
                    "-o", {str(tmp_path / "out")!r}]
        from splitter.entry import main
        main()
        """
    )
    proc = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=tmp_path
    )
    assert proc.returncode == 130, proc.stderr
    assert proc.stderr.splitlines()[-1] == "splitter: interrupted"
    assert "invalid model" not in proc.stderr
    assert not (tmp_path / "out").exists()
