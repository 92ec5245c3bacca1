"""The full crash sweep: every file operation of ``compile`` (with firmware), ``segment`` and
``build``, plus SIGKILLs spread over each command's run time; after each kill ``OUT`` must be
byte for byte the previous output or the complete new one (``tests/crash_support.py``).

    python benchmarks/kill_test.py [--timed N] [--report benchmarks/results/kill_test.md]

The suite's ``tests/test_crash_safety.py`` runs a sample of these points. Exit code 1 when any
``OUT`` was torn.
"""

from __future__ import annotations

import argparse
import datetime
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from crash_support import Sweep, run_forked  # noqa: E402
from test_crash_safety import build_sweep, compile_sweep, segment_sweep  # noqa: E402

from splitter import outputs  # noqa: E402


def sweep_all(sweep: Sweep, timed: int) -> float:
    """Every crash point and ``timed`` SIGKILLs spread over a complete run (timed on a second
    run, when the compiler cache is warm as in every later run); the run's seconds."""
    sweep.reference()
    sweep.restore()
    start = time.monotonic()
    run_forked(sweep.argv)
    seconds = time.monotonic() - start
    for n in range(1, sweep.points + 1):
        outcome = sweep.kill(f"op {n}", crash_at=n)
        if outcome.code != outputs.CRASH_EXIT:
            outcome.state += f" (exit {outcome.code})"
    for k in range(timed):
        sweep.kill(f"{seconds * (k + 0.5) / timed:.2f} s", kill_after=seconds * (k + 0.5) / timed)
    return seconds


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--timed", type=int, default=20, help="SIGKILLs per command")
    ap.add_argument("--report", type=Path, default=None)
    ap.add_argument("--commands", default="compile,segment,build", help="comma-separated")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kill-test-"))
    cached_compiler(tmp)
    rows, torn = [], []
    sweeps = {"compile": compile_sweep, "segment": segment_sweep, "build": build_sweep}
    for make in (sweeps[c] for c in a.commands.split(",")):
        sweep = make(tmp)
        seconds = sweep_all(sweep, a.timed)
        states = [o.state for o in sweep.outcomes]
        row = (
            sweep.name,
            sweep.points,
            len(sweep.outcomes) - sweep.points,
            states.count("previous"),
            states.count("new"),
            len(states) - states.count("previous") - states.count("new"),
            round(seconds, 1),
        )
        rows.append(row)
        torn += [
            f"{sweep.name} {o.point}: {o.state}"
            for o in sweep.outcomes
            if o.state not in ("previous", "new")
        ]
        print(f"{sweep.name}: {row[1]} crash points, {row[2]} timed kills: {row[3]} previous, "
              f"{row[4]} new, {row[5]} torn (a complete run: {row[6]} s)")  # fmt: skip
    total = sum(r[1] + r[2] for r in rows)
    print(f"{total} kill points, {len(torn)} torn")
    for line in torn:
        print(f"  {line}")
    if a.report is not None:
        write_report(a.report, rows, total, torn)
    shutil.rmtree(tmp, ignore_errors=True)
    return 1 if torn else 0


def cached_compiler(tmp: Path) -> None:
    """arm-none-eabi-gcc through ccache when installed (as tests/conftest.py does), so the
    repeated builds of the sweep compile each source once."""
    ccache = shutil.which("ccache")
    if ccache is None:
        return
    (tmp / "bin").mkdir()
    (tmp / "bin" / "arm-none-eabi-gcc").symlink_to(ccache)
    os.environ["PATH"] = f"{tmp / 'bin'}{os.pathsep}{os.environ['PATH']}"
    os.environ["CCACHE_DIR"] = str(tmp / "ccache")
    os.environ["CCACHE_NOHASHDIR"] = "1"


def write_report(path: Path, rows: list[tuple[object, ...]], total: int, torn: list[str]) -> None:
    """``benchmarks/results/kill_test.md``."""
    lines = [
        f"# Kill test, {datetime.date.today().isoformat()}",
        "",
        "`python benchmarks/kill_test.py` (tests/crash_support.py): tiny_cnn.onnx on",
        "models/boards/e2e_tiny2.toml; `compile` with firmware over an output compiled without it,",
        "`segment -o` over another segmentation, `build --no-emulator` of a fresh compile output.",
        "Each command is ended at every file operation (`SPLITTER_CRASH_AT`, `os._exit`) and by",
        "SIGKILL to its process group at times spread over a complete run; then OUT is compared,",
        "file by file (SHA-256) and directory by directory, with the previous and the new output.",
        "",
        "| command | crash points | timed kills | OUT previous | OUT new | torn | complete run s |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    lines += ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]
    lines += ["", f"{total} kill points, {len(torn)} torn."]
    lines += [f"- {t}" for t in torn]
    path.write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    sys.exit(main())
