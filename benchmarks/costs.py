"""Kernel cost table alone (no calibration) vs the emulated bench, per sub-model.

For every model of ``models/`` on every board file of ``models/boards/`` that compiles and
builds for the emulator (as ``benchmarks/e2e_emulated.py`` runs them): ``splitter compile``
(library), ``make EMULATOR=1`` per device, ``splitter bench --emulate --icount -n 1`` (cycles
under ``-icount shift=0`` are deterministic). Per sub-model:

* measured = the bench's cycles (SysTick ticks of the emulated 168 MHz core around the
  sub-model call, ``splitter.bench``);
* predicted = ``0.168 * (c_submodel + sum of the layers' table instructions)`` for the build the
  emulator runs (``M4F.<isa of the part's core>``, ``splitter.cost.kernels.build_key``);
* the old estimate (catalog cycles per MAC, what the planner used before the table) in the same
  ticks, ``MACs * cpm / f * 168 MHz``, for comparison.

Pairs that the planner or the build refuses (the model does not fit the boards, more links
than the emulator has) are listed as skipped. Usage:
``.venv/bin/python benchmarks/costs.py [--budget MINUTES] [--only MODEL_SUBSTRING]`` ->
``benchmarks/results/costs.{json,md}``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitter.bench.runner import BenchConfig, bench  # noqa: E402
from splitter.compile import CompileOptions, compile_model  # noqa: E402
from splitter.cost.kernels import (  # noqa: E402
    ops_instructions,
    part_build_key,
    submodel_overhead,
)
from splitter.errors import SplitterError  # noqa: E402
from splitter.hardware.qemu import EMULATOR  # noqa: E402
from splitter.link.build import run_make  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
MODELS = ROOT / "models"
BOARDS = MODELS / "boards"
TICKS_PER_INSTRUCTION = EMULATOR.clock_hz / 1e9


def _dtype_layout(chain: Any) -> tuple[str, str]:
    graph = chain.graph
    int8 = any(t.dtype == "int8" for t in graph.tensors.values())
    return ("int8" if int8 else "float32"), (graph.layout or "NCHW")


def emulator_misfit(model: Path, boards: Path) -> str | None:
    """Why no plan of ``model`` on ``boards`` can run emulated, before compiling: a layer whose
    RAM exceeds the emulated F405's, or more weights than the boards' emulated flash."""
    from splitter.hardware.boards import load_boards
    from splitter.importers import load_chain

    chain = load_chain(str(model))
    ram, flash = EMULATOR.ram[1], EMULATOR.flash[1]
    worst = max(layer.cost.ram for layer in chain.layers)
    if worst > ram:
        return f"a layer needs {worst / 1024:.0f} KiB of RAM, the emulated F405 has {ram // 1024}"
    devices = len(load_boards(boards).devices)
    weights = sum(layer.cost.flash for layer in chain.layers)
    if weights > devices * flash:
        return f"{weights / 2**20:.2f} MiB of weights, {devices} emulated F405s hold {devices} MiB"
    return None


def one_pair(model: Path, boards: Path, work: Path) -> dict[str, Any]:
    """Compile, build, bench one pair; its rows or the reason it was skipped."""
    out = work / "out"
    try:
        misfit = emulator_misfit(model, boards)
        if misfit is not None:
            return {"skipped": misfit}
        res = compile_model(model, boards, out, CompileOptions(force=True, validate=False))
        wiring = json.loads((out / "firmware" / "wiring.json").read_text())
        for dev in wiring["devices"]:
            run_make(out / "firmware" / dev["name"], emulator=True)
        result = bench(out, BenchConfig(runs=1, emulate=True, icount=True, timeout=600,
                                        pipeline=False, warmup=0))  # fmt: skip
    except (SplitterError, OSError) as exc:
        return {"skipped": str(exc).splitlines()[0][:200]}
    dtype, layout = _dtype_layout(res.chain)
    devices = {d.name: d for d in res.boards.devices}
    rows = []
    for d in result["devices"]:
        device = devices[d["device"]]
        build = part_build_key(device.part, emulated=True)
        for sub in d["submodels"]:
            entry = res.plan.submodels[sub["index"]]
            layers = res.chain.layers[entry.first : entry.last + 1]
            instr = submodel_overhead(build) + sum(
                dict(layer.cost.instructions).get(build, 0.0) for layer in layers
            )
            ops = [op for layer in layers for op in layer.ops]
            tensors = res.chain.graph.tensors
            fit_only = submodel_overhead(build) + ops_instructions(
                ops, tensors, layout, build, measured=False
            )
            macs = sum(layer.cost.macs for layer in layers)
            old = macs * device.cpm / device.clock_hz * EMULATOR.clock_hz
            meas = int(sub["cycles"][0])
            pred = instr * TICKS_PER_INSTRUCTION
            rows.append({
                "submodel": sub["index"], "device": d["device"], "part": device.part.name,
                "build": build, "dtype": dtype, "layout": layout,
                "layers": [entry.first, entry.last], "macs": macs,
                "measured_ticks": meas, "predicted_ticks": round(pred),
                "error": round(pred / meas - 1, 4) if meas else None,
                "fit_only_ticks": round(fit_only * TICKS_PER_INSTRUCTION),
                "fit_only_error": round(fit_only * TICKS_PER_INSTRUCTION / meas - 1, 4)
                if meas else None,
                "catalog_cpm_ticks": round(old),
                "catalog_cpm_error": round(old / meas - 1, 4) if meas else None,
            })  # fmt: skip
    return {"rows": rows}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and max |error| overall and per (dtype, layout)."""

    def stats(sel: list[dict[str, Any]]) -> dict[str, Any]:
        errs = [abs(r["error"]) for r in sel if r["error"] is not None]
        old = [abs(r["catalog_cpm_error"]) for r in sel if r["catalog_cpm_error"] is not None]
        fit = [abs(r["fit_only_error"]) for r in sel if r["fit_only_error"] is not None]
        if not errs:
            return {"n": 0}
        return {"n": len(errs), "median_abs_error": round(statistics.median(errs), 4),
                "max_abs_error": round(max(errs), 4),
                "fit_only_median_abs_error": round(statistics.median(fit), 4),
                "fit_only_max_abs_error": round(max(fit), 4),
                "catalog_cpm_median_abs_error": round(statistics.median(old), 4)}  # fmt: skip

    groups = sorted({(r["dtype"], r["layout"]) for r in rows})
    out = {"all": stats(rows)}
    for dt, lay in groups:
        out[f"{dt} {lay}"] = stats([r for r in rows if (r["dtype"], r["layout"]) == (dt, lay)])
    return out


def write(results: dict[str, Any], name: str = "costs") -> None:
    """benchmarks/results/NAME.json and NAME.md."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    rows = [r for p in results["pairs"] for r in p.get("rows", [])]
    lines = [
        "# Kernel cost table vs the emulated bench (no calibration)",
        "",
        f"Generated by `benchmarks/costs.py` on {results['date']}: every model of `models/` on "
        "every board file of `models/boards/` that compiles and builds for the emulator; "
        "QEMU netduinoplus2, `-icount shift=0`, one inference (cycles are deterministic). "
        "Predicted = table instructions x 0.168 ticks; error = predicted / measured - 1. "
        "`catalog cpm` is the flat cycles-per-MAC estimate the planner used before, in the "
        "same ticks.",
        "",
        "The table answers with the measured count when an op's exact shape was measured "
        "(every layer of `models/` that fits the emulator is), else with the per-kernel fit; "
        "`fit only` predicts every op from the fits alone (shapes as if never measured).",
        "",
        "| group | sub-models | median abs error | max abs error | fit only: median | "
        "fit only: max | catalog cpm median abs error |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for group, s in results["summary"].items():
        if s["n"]:
            old = s["catalog_cpm_median_abs_error"]
            lines.append(f"| {group} | {s['n']} | {s['median_abs_error']:.2%} | "
                         f"{s['max_abs_error']:.2%} | {s['fit_only_median_abs_error']:.2%} | "
                         f"{s['fit_only_max_abs_error']:.2%} | {old:.0%} |")  # fmt: skip
    head = "| model | boards | sub-model | device (part, build) | MACs | measured ticks | "
    lines += [
        "",
        head + "predicted | error | fit only |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for p in results["pairs"]:
        for r in p.get("rows", []):
            lines.append(f"| {p['model']} | {p['boards']} | {r['submodel']} | {r['device']} "
                         f"({r['part']}, {r['build']}) | {r['macs']} | {r['measured_ticks']} | "
                         f"{r['predicted_ticks']} | {r['error']:+.2%} | "
                         f"{r['fit_only_error']:+.2%} |")  # fmt: skip
    skipped = [p for p in results["pairs"] if "skipped" in p]
    lines += ["", f"Skipped pairs ({len(skipped)}; the planner or the build refuses them):", ""]
    lines += [f"- {p['model']} on {p['boards']}: {p['skipped']}" for p in skipped]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")
    del rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--budget", type=float, default=0.0, help="stop after this many minutes")
    ap.add_argument("--only", default="", help="models whose file name contains this")
    ap.add_argument("--boards", default="", help="board files whose name contains one of these "
                    "(comma-separated)")  # fmt: skip
    ap.add_argument("--name", default="costs", help="results file stem")
    ap.add_argument("--combine", nargs="*", metavar="STEM",
                    help="merge these results files into NAME, no new runs")  # fmt: skip
    args = ap.parse_args()
    if args.combine:
        combine(args.combine, args.name)
        return
    models = sorted(p for p in [*MODELS.glob("*.onnx"), *MODELS.glob("*.tflite")]
                    if args.only in p.name)  # fmt: skip
    wanted = args.boards.split(",")
    boards = sorted(p for p in BOARDS.glob("*.toml") if any(w in p.name for w in wanted))
    t0 = time.monotonic()
    pairs = []
    # board files in the outer loop: with a --budget every model gets some board files
    todo = [(m, b) for b in boards for m in models]
    with tempfile.TemporaryDirectory(prefix="splitter-costs-bench-") as tmp:
        for k, (model, board) in enumerate(todo):
            if args.budget and time.monotonic() - t0 > args.budget * 60:
                pairs.append({"model": model.name, "boards": board.name,
                              "skipped": "not run (--budget reached)"})  # fmt: skip
                continue
            work = Path(tmp) / str(k)
            work.mkdir()
            t1 = time.monotonic()
            pair = {"model": model.name, "boards": board.name, **one_pair(model, board, work)}
            pairs.append(pair)
            errs = [f"{r['error']:+.1%}" for r in pair.get("rows", [])]
            print(f"{model.name} on {board.name} ({time.monotonic() - t1:.0f} s): "
                  f"{errs or pair.get('skipped')}", flush=True)  # fmt: skip
            write(_results(pairs), args.name)
    write(_results(pairs), args.name)
    print((RESULTS / f"{args.name}.md").read_text())


def _rank(pair: dict[str, Any]) -> int:
    """2: ran; 1: refused for a reason; 0: not run (budget)."""
    return 2 if "rows" in pair else 0 if pair["skipped"].startswith("not run") else 1


def combine(stems: list[str], name: str) -> None:
    """Merge results files: per (model, boards) the first pair that ran, else the first one
    refused for a reason, else 'not run'."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for stem in stems:
        for pair in json.loads((RESULTS / f"{stem}.json").read_text())["pairs"]:
            key = (pair["model"], pair["boards"])
            if key not in merged or _rank(pair) > _rank(merged[key]):
                merged[key] = pair
    write(_results(sorted(merged.values(), key=lambda p: (p["boards"], p["model"]))), name)


def _results(pairs: list[dict[str, Any]]) -> dict[str, Any]:
    rows = [r for p in pairs for r in p.get("rows", [])]
    return {"date": time.strftime("%Y-%m-%d"), "pairs": pairs, "summary": summary(rows)}


if __name__ == "__main__":
    main()
