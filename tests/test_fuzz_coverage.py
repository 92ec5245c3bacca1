"""The short, deterministic run of the coverage-guided fuzzers (``benchmarks/fuzz.py``, atheris)
and the replay of every crash they found (``tests/fuzz_crashes/``, minimised by libFuzzer).

``make fuzz`` runs the long campaign; here each target runs a fixed number of executions from a
fixed seed, so a change that makes a reader raise something other than a ``SplitterError`` on
the seeds or their nearest mutations fails the suite."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import fuzz_targets
import pytest

ROOT = Path(__file__).resolve().parents[1]
CRASHES = Path(__file__).parent / "fuzz_crashes"

#: executions per target in the suite (the importers run a model import per execution)
RUNS = {"onnx": 40, "tflite": 300, "boards": 400, "profile": 400, "plan": 300, "wiring": 400,
        "frames": 3000}  # fmt: skip


def _fuzz(target: str) -> subprocess.Popen[str]:
    cmd = [
        sys.executable,
        str(ROOT / "benchmarks" / "fuzz.py"),
        target,
        "--runs",
        str(RUNS[target]),
    ]
    return subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=ROOT
    )


@pytest.mark.slow
def test_short_fuzz_run_of_every_target() -> None:
    pytest.importorskip("atheris", reason="pip install atheris (make venv installs it)")
    targets = list(RUNS)
    for pair in (targets[k : k + 2] for k in range(0, len(targets), 2)):  # two at a time
        procs = {t: _fuzz(t) for t in pair}
        for target, p in procs.items():
            out = p.communicate()[0]
            assert p.returncode == 0, f"{target}:\n{out}"
            assert f"{target}: {RUNS[target]} executions" in out, out


@pytest.mark.parametrize(
    "crash", sorted(CRASHES.glob("*-*")) if CRASHES.is_dir() else [], ids=lambda p: p.name
)
def test_fuzz_crash_stays_fixed(crash: Path) -> None:
    """Each minimised crash (``<target>-crash-<sha1>``) now fails only as a SplitterError."""
    target = crash.name.split("-", 1)[0]
    fuzz_targets.TARGETS[target](crash.read_bytes())


def test_targets_reject_garbage_as_users_errors() -> None:
    """Every target takes empty and random bytes without crashing (no fuzzer needed)."""
    for target, fn in fuzz_targets.TARGETS.items():
        for data in (b"", b"\x00" * 17, bytes(range(256)), b"{" * 50):
            fn(data)
        assert fuzz_targets.seeds(target), target
