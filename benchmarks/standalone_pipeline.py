"""Pipelining measured: standalone chains vs the same chains in harness mode vs equation 17.

For each case the same plan (``CompileOptions.assignment``, emulator prediction) is compiled
twice, built with arm-none-eabi-gcc and run on emulated STM32F405s (QEMU netduinoplus2,
``-icount shift=0``, so compute time is instruction-counted; the UARTs run at QEMU's speed):

* harness: ``splitter bench OUT --emulate`` (the host sends input k+1 as soon as the head took
  input k, a second thread collects results: its pipelined throughput);
* standalone: the head feeds its compiled-in samples by itself; the throughput is read from the
  host arrival times of the tail's console lines, ``(n - 1) / (t_last - t_first)`` over ``n``
  results after ``WARMUP`` (no byte is sent from the PC);
* equation 17: the plan's ``throughput_per_s`` (SPEC.md objective 2, emulator clock, link
  estimate ``bytes * 10 / baud``) and the older ``W = max_i(L_i + S_i)`` (ref. [9]).

Usage: ``python benchmarks/standalone_pipeline.py [N [CASE]]`` (CASE: a substring of the
case names, e.g. ``"3 boards"``); writes
``benchmarks/results/standalone_pipeline.{json,md}``.
"""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from splitter.compile import CompileOptions, compile_model
from splitter.device.console import Console
from splitter.toolchain import emulator as E
from splitter.toolchain.build import run_make

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
WARMUP = 3
BOARDS = "[link]\nbaud = 115200\n" + "".join(
    f'\n[[device]]\nname = "{n}"\nmcu = "STM32F405RG"\n' for n in ("a", "b", "c")
)
#: name -> (model, per-layer device assignment)
CASES = {
    "tiny_cnn.onnx, 2 boards": ("tiny_cnn.onnx", (0, 0, 1, 1, 1)),
    "tiny_cnn.onnx, 3 boards": ("tiny_cnn.onnx", (0, 0, 1, 2, 2)),
}


def build(tmp: Path, model: str, assignment: tuple[int, ...], app: str) -> Path:
    """Compile (emulator prediction) and build every board's emulator ELF; OUT."""
    x = np.random.default_rng(0).standard_normal((4, 1, 1, 28, 28)).astype(np.float32)
    np.save(tmp / "x.npy", x)
    (tmp / "boards.toml").write_text(BOARDS)
    opts = CompileOptions(
        assignment=assignment, validate=False, force=True, emulated=True, app=app,
        input_files=(str(tmp / "x.npy"),),
    )  # fmt: skip
    res = compile_model(ROOT / "models" / model, tmp / "boards.toml", tmp / app, opts)
    for d in sorted((res.out_dir / "firmware").iterdir()):
        if d.is_dir():
            run_make(d, emulator=True)
    return res.out_dir


def harness_rate(out: Path, runs: int) -> dict[str, object]:
    """``splitter bench --emulate --json``: sequential and pipelined inferences per second."""
    cmd = [sys.executable, "-m", "splitter", "bench", str(out), "--emulate", "-n", str(runs)]
    cmd += ["--timeout", "600", "--json"]
    failures: list[str] = []
    for _ in range(3):  # a run can fail on a loaded machine (see the results file)
        r = subprocess.run(cmd, capture_output=True, text=True, check=False, cwd=ROOT)
        if r.returncode == 0:
            throughput = json.loads(r.stdout)["throughput"]
            pipe = throughput.get("pipelined") or {}
            return {
                "pipelined_per_s": pipe.get("per_s"),
                "pipelined_steady_per_s": pipe.get("steady_per_s"),
                "why_not_pipelined": throughput.get("why_not_pipelined"),
                "failed_attempts": failures,
            }
        failures.append(r.stderr.strip().splitlines()[-1])
    return {"pipelined_per_s": None, "pipelined_steady_per_s": None, "failed_attempts": failures}


def standalone_rate(out: Path, runs: int) -> dict[str, object]:
    """Steady results per second on the tail's console (host arrival times)."""
    tail = json.loads((out / "firmware" / "wiring.json").read_text())["last_device"]
    with E.Emulation(out, icount=True) as emu, Console(emu.endpoints) as con:
        res = con.wait_results(tail, WARMUP + runs, timeout=600)[WARMUP : WARMUP + runs]
    span = res[-1].at - res[0].at
    return {"results": len(res), "seconds": span, "per_s": (len(res) - 1) / span}


def main(runs: int, only: str = "") -> None:
    rows: list[dict[str, Any]] = []
    for name, (model, assignment) in CASES.items():
        if only not in name:
            continue
        with tempfile.TemporaryDirectory(prefix="splitter-pipe-") as td:
            tmp = Path(td)
            h = build(tmp, model, assignment, "harness")
            s = build(tmp, model, assignment, "standalone")
            plan = json.loads((h / "plan.json").read_text())
            row = {
                "case": name,
                "eq17_per_s": plan["throughput_per_s"],
                "ref9_per_s": plan["throughput_ref9_per_s"],
                "harness": harness_rate(h, runs),
                "standalone": standalone_rate(s, runs),
            }
        print(json.dumps(row))
        rows.append(row)
    date = datetime.date.today().isoformat()
    for row in rows:
        row.update(date=date, runs=runs, load=os.getloadavg())
    rows = merged(rows)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "standalone_pipeline.json").write_text(
        json.dumps({"date": date, "rows": rows}, indent=2) + "\n"
    )
    lines = [
        "# Standalone vs harness throughput on emulated F405s (benchmarks/standalone_pipeline.py)",
        "",
        "QEMU netduinoplus2 with -icount shift=0, the row's number of inferences after "
        f"{WARMUP} warm-up, on a 2-core machine shared with other jobs (wall-clock rates move "
        "with the load: the load average at the end of each row's run is given). Equation 17 is "
        "the plan's prediction for the emulator (instruction-counted compute, links at bytes x "
        "10 / baud; QEMU's UARTs run faster than the baud).",
        "",
        "| chain | measured | runs | load avg (1/5/15 min) | standalone /s | harness pipelined /s "
        "| harness pipelined, steady /s | eq. 17 /s | ref. [9] /s |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        hr: Any = r["harness"]
        sr: Any = r["standalone"]
        load = "/".join(f"{x:.1f}" for x in r["load"]) if r.get("load") else "8-20 (noted)"
        lines.append(
            f"| {r['case']} | {r['date']} | {r['runs']} | {load} | {sr['per_s']:.2f} "
            f"| {_f(hr['pipelined_per_s'])} | {_f(hr['pipelined_steady_per_s'])} "
            f"| {r['eq17_per_s']:.2f} | {r['ref9_per_s']:.2f} |"
        )
    (RESULTS / "standalone_pipeline.md").write_text("\n".join(lines) + "\n")


def merged(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``rows`` and the rows of the results file for the cases not run now (each keeps its own
    date, number of runs and load), in :data:`CASES` order."""
    path = RESULTS / "standalone_pipeline.json"
    old = json.loads(path.read_text()) if path.exists() else {"rows": []}
    by_case = {
        str(r["case"]): {"date": old.get("date"), "runs": old.get("runs"), **r} for r in old["rows"]
    }
    by_case.update({str(r["case"]): r for r in rows})
    return [by_case[name] for name in CASES if name in by_case]


def _f(v: object) -> str:
    return f"{v:.2f}" if isinstance(v, float) else "-"


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 20, sys.argv[2] if len(sys.argv) > 2 else "")
