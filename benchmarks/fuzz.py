"""Coverage-guided fuzzing of splitter's readers with atheris (libFuzzer for Python).

    python benchmarks/fuzz.py TARGET [--seconds S | --runs N] [--seed K] [--report FILE]

TARGET is one of ``tests/fuzz_targets.py``'s ``TARGETS`` (onnx, tflite, boards, profile, plan,
wiring, frames) or ``all``. splitter's modules are imported under ``atheris.instrument_imports``
so libFuzzer sees their branch coverage and keeps every input that reaches a new edge; the
corpus starts from the target's seeds (``models/``, a compile output, the boards cases of
``tests/fuzz_cases.py``). One process per target. A crash (an exception other than a
``SplitterError``, or a broken invariant) is written to ``tests/fuzz_crashes/<target>-crash-*``
and kept with a hand-minimised copy (``<target>-*-minimised``; libFuzzer's ``-minimize_crash``
re-executes ``argv[0]``, which a Python script is not); ``tests/test_fuzz_coverage.py`` replays
every file there.

``make fuzz`` runs every target for ``FUZZ_SECONDS`` (default 60) and writes the executions
per second, the coverage (libFuzzer's ``cov``: instrumented edges reached; ``ft``: features;
line coverage of the reader's files when the final corpus is replayed) and the crashes per
target to ``benchmarks/results/fuzz.md``. The suite's short run (``tests/test_fuzz_coverage.py``)
uses ``--runs`` and a fixed ``--seed``.
"""

from __future__ import annotations

import argparse
import datetime
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
CRASHES = TESTS / "fuzz_crashes"
#: target -> the modules instrumented for it (and everything of splitter they import)
MODULES = {
    "onnx": ["splitter.importers.onnx_import", "splitter.slicing.onnx_slice"],
    "tflite": ["splitter.importers.tflite_import", "splitter.slicing.tflite_slice"],
    "boards": ["splitter.hardware.boards"],
    "profile": ["splitter.importers.profile"],
    "plan": ["splitter.manifest"],
    "wiring": ["splitter.manifest"],
    "frames": ["splitter.protocol"],
}
TARGET_NAMES = tuple(MODULES)
#: target -> the source files whose line coverage the final corpus is measured on
COVERED = {
    "onnx": ["splitter/importers/onnx_*.py"],
    "tflite": ["splitter/importers/tflite_*.py"],
    "boards": ["splitter/hardware/boards.py"],
    "profile": ["splitter/importers/profile.py"],
    "plan": ["splitter/manifest/*.py"],
    "wiring": ["splitter/manifest/*.py"],
    "frames": ["splitter/protocol.py"],
}


def child(target: str, libfuzzer_args: list[str]) -> None:
    """In the fuzzing process: instrument splitter, seed the corpus, run libFuzzer."""
    import atheris

    sys.path.insert(0, str(TESTS))
    import importlib

    with atheris.instrument_imports(include=["splitter"]):
        for module in MODULES[target]:
            importlib.import_module(module)
    import fuzz_targets

    corpus = Path(os.environ.get("SPLITTER_FUZZ_CORPUS") or tempfile.mkdtemp(prefix="fuzz-"))
    for k, seed in enumerate(fuzz_targets.seeds(target)):
        (corpus / f"seed{k}").write_bytes(seed)
    target_fn = fuzz_targets.TARGETS[target]
    minimising = any(a.startswith("-minimize_crash") for a in libfuzzer_args)
    atheris.Setup([sys.argv[0], *libfuzzer_args, *([] if minimising else [str(corpus)])], target_fn)
    atheris.Fuzz()


#: libFuzzer's status lines: ``#1234 NEW cov: 812 ft: 2031 corp: ...`` and the final stats
_STATUS = re.compile(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+)")
_STAT = re.compile(r"^stat::(\w+):\s+(\d+)")


def run(target: str, seconds: float | None, runs: int | None, seed: int) -> dict[str, object]:
    """Fuzz ``target`` in a child process; its numbers (and the crash file, if any)."""
    CRASHES.mkdir(exist_ok=True)
    args = [f"-seed={seed}", "-timeout=20", "-rss_limit_mb=3072", "-print_final_stats=1"]
    args += [f"-artifact_prefix={CRASHES}/{target}-", "-max_len=200000"]
    args += [f"-runs={runs}"] if runs is not None else [f"-max_total_time={int(seconds or 60)}"]
    start = time.monotonic()
    corpus = Path(tempfile.mkdtemp(prefix=f"fuzz-{target}-"))
    env = {**os.environ, "PYTHONPATH": str(ROOT), "SPLITTER_FUZZ_CORPUS": str(corpus)}
    proc = subprocess.run(
        [sys.executable, __file__, "--child", target, *args],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env=env,
    )
    wall = time.monotonic() - start
    lines = replay_coverage(target, corpus) if proc.returncode == 0 else None
    corpus_size = len(list(corpus.iterdir()))
    shutil.rmtree(corpus, ignore_errors=True)
    stats = {m[1]: int(m[2]) for m in map(_STAT.match, proc.stderr.splitlines()) if m}
    status = [m for m in map(_STATUS.match, proc.stderr.splitlines()) if m]
    crash = re.search(r"Test unit written to (\S+)", proc.stderr)
    return {
        "target": target,
        "code": proc.returncode,
        "execs": stats.get("number_of_executed_units", 0),
        "execs_per_s": stats.get("average_exec_per_sec", 0),
        "cov": int(status[-1][2]) if status else 0,
        "corpus": corpus_size,
        "lines": lines,
        "ft": int(status[-1][3]) if status else 0,
        "seconds": round(wall, 1),
        "crash": crash[1] if crash else None,
        "tail": proc.stderr.strip().splitlines()[-25:] if proc.returncode else [],
    }


def replay_coverage(target: str, corpus: Path) -> float | None:
    """Line coverage (%, coverage.py) of :data:`COVERED` files when the final corpus is replayed
    through the target without instrumentation; ``None`` without coverage.py."""
    included = [str(ROOT / g) for g in COVERED[target]]
    code = (
        "import sys, io, coverage, pathlib\n"
        f"cov = coverage.Coverage(data_file=None, include={included!r})\n"
        "cov.start()\n"
        f"sys.path.insert(0, {str(TESTS)!r})\n"
        "import fuzz_targets\n"
        f"fn = fuzz_targets.TARGETS[{target!r}]\n"
        f"for p in sorted(pathlib.Path({str(corpus)!r}).iterdir()):\n"
        "    fn(p.read_bytes())\n"
        "cov.stop()\n"
        "print(round(cov.report(file=io.StringIO()), 1))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
    try:
        return float(proc.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return None


def report(results: list[dict[str, object]], path: Path) -> None:
    """``benchmarks/results/fuzz.md``: one row per target."""
    day = datetime.date.today().isoformat()
    lines = [
        f"# Coverage-guided fuzzing (atheris), {day}",
        "",
        "`make fuzz` (benchmarks/fuzz.py): each target fuzzed in its own process, corpus seeded",
        "from models/, a compile output and tests/fuzz_cases.py. cov: instrumented edges of",
        "splitter's code reached (libFuzzer), ft: coverage features; line coverage: coverage.py",
        "over the reader's own files when the final corpus is replayed.",
        "",
        "| target | seconds | executions | exec/s | cov | ft | corpus | line coverage % | crash |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---|",
    ]
    for r in results:
        crash = Path(str(r["crash"])).name if r["crash"] else "none"
        lines.append(
            f"| {r['target']} | {r['seconds']} | {r['execs']} | {r['execs_per_s']} | "
            f"{r['cov']} | {r['ft']} | {r['corpus']} | {r['lines']} | {crash} |"
        )
    path.write_text("\n".join(lines) + "\n")


def main() -> int:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3:])
        return 0
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("target", choices=[*TARGET_NAMES, "all"])
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--runs", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--report", type=Path, default=None)
    a = ap.parse_args()
    targets = TARGET_NAMES if a.target == "all" else (a.target,)
    results = []
    for t in targets:
        r = run(t, a.seconds, a.runs, a.seed)
        results.append(r)
        print(
            f"{t}: {r['execs']} executions in {r['seconds']} s ({r['execs_per_s']}/s), "
            f"cov {r['cov']}, ft {r['ft']}, corpus {r['corpus']}, lines {r['lines']} %, "
            f"crash {r['crash'] or 'none'}"
        )
        for line in r["tail"]:  # type: ignore[attr-defined]
            print(f"    {line}")
    if a.report is not None:
        report(results, a.report)
    return 1 if any(r["code"] for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
