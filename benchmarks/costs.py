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
import hashlib
import json
import shutil
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitter.bench.runner import BenchConfig, bench  # noqa: E402
from splitter.compile import CompileOptions, compile_model  # noqa: E402
from splitter.cost.kernels import (  # noqa: E402
    layer_ops_instructions,
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


#: board files planned with ``--partial-execution on`` (loops wherever they lower a layer's RAM,
#: so the PEX loop kernels of float and int8 models are measured); every other file at ``auto``
PEX_ON = frozenset({"e2e_pex.toml"})


def firmware_key(model: Path, firmware: Path) -> str:
    """SHA-256 of what decides the instructions each sub-model runs under ``-icount``: the
    model file (the bench's seeded input), every device's generated ``model.c`` / ``model.h``
    and ``Makefile`` (compile flags). The kernels are the same for every pair of one run."""
    h = hashlib.sha256(model.read_bytes())
    for dev in sorted(p for p in firmware.iterdir() if p.is_dir()):
        for name in ("model.c", "model.h", "Makefile"):
            h.update(name.encode() + b"\0" + (dev / name).read_bytes())
    return h.hexdigest()[:20]


def plan_pair(model: Path, boards: Path, work: Path) -> dict[str, Any]:
    """Compile one pair (no build): the firmware key and per sub-model the predictions, or
    the reason the pair cannot run emulated."""
    out = work / "out"
    try:
        misfit = emulator_misfit(model, boards)
        if misfit is not None:
            return {"skipped": misfit}
        pex = "on" if boards.name in PEX_ON else "auto"
        opts = CompileOptions(force=True, validate=False, partial_execution=pex)
        res = compile_model(model, boards, out, opts)
    except (SplitterError, OSError) as exc:
        return {"skipped": str(exc).splitlines()[0][:200]}
    dtype, layout = _dtype_layout(res.chain)
    devices = res.boards.devices
    tensors = res.chain.graph.tensors
    rows = []
    for entry in res.plan.submodels:
        device = devices[entry.device_index]
        build = part_build_key(device.part, emulated=True)
        layers = res.chain.layers[entry.first : entry.last + 1]
        instr = submodel_overhead(build) + sum(
            dict(layer.cost.instructions).get(build, 0.0) for layer in layers
        )
        fit_only = submodel_overhead(build) + sum(
            layer_ops_instructions(layer, tensors, layout, build, measured=False)
            for layer in layers
        )
        macs = sum(layer.cost.macs for layer in layers)
        old = macs * device.cpm / device.clock_hz * EMULATOR.clock_hz
        rows.append({
            "submodel": entry.index, "device": device.name, "part": device.part.name,
            "build": build, "dtype": dtype, "layout": layout,
            "pex_loops": sum(len(layer.loops) for layer in layers),
            "layers": [entry.first, entry.last], "macs": macs,
            "predicted_ticks": round(instr * TICKS_PER_INSTRUCTION),
            "fit_only_ticks": round(fit_only * TICKS_PER_INSTRUCTION),
            "catalog_cpm_ticks": round(old),
        })  # fmt: skip
    key = firmware_key(model, out / "firmware")
    return {"rows": rows, "firmware": key, "partial_execution": pex}


def measure_pair(work: Path) -> dict[str, Any]:
    """Build every device of a compiled pair for the emulator and bench one inference:
    ``{"ticks": {sub-model index: SysTick ticks}}`` or the reason it did not run."""
    out = work / "out"
    try:
        wiring = json.loads((out / "firmware" / "wiring.json").read_text())
        for dev in wiring["devices"]:
            run_make(out / "firmware" / dev["name"], emulator=True)
        result = bench(out, BenchConfig(runs=1, emulate=True, icount=True, timeout=900,
                                        pipeline=False, warmup=0))  # fmt: skip
    except (SplitterError, OSError) as exc:
        return {"skipped": str(exc).splitlines()[0][:200]}
    finally:
        shutil.rmtree(out / "firmware", ignore_errors=True)
    ticks = {str(s["index"]): int(s["cycles"][0]) for d in result["devices"]
             for s in d["submodels"]}  # fmt: skip
    return {"ticks": ticks}


def with_measured(pair: dict[str, Any], ticks: dict[str, int]) -> dict[str, Any]:
    """The pair's rows with the measured ticks and the errors against them."""
    rows = []
    for r in pair["rows"]:
        meas = ticks.get(str(r["submodel"]))
        if not meas:
            continue
        rows.append({**r, "measured_ticks": meas,
                     "error": round(r["predicted_ticks"] / meas - 1, 4),
                     "fit_only_error": round(r["fit_only_ticks"] / meas - 1, 4),
                     "catalog_cpm_error": round(r["catalog_cpm_ticks"] / meas - 1, 4)})  # fmt: skip
    return {**pair, "rows": rows}


def summary(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Median and max |error| overall, per (dtype, layout) and over the sub-models with PEX
    loops."""

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
    for dt in sorted({r["dtype"] for r in rows if r.get("pex_loops")}):
        out[f"PEX loops, {dt}"] = stats(
            [r for r in rows if r.get("pex_loops") and r["dtype"] == dt]
        )
    return out


RULE = (
    "Pairs: every model of `models/` (`*.onnx`, `*.tflite`) x every board file of "
    "`models/boards/`. A pair is measured when `splitter compile` plans it (all board files at "
    "`--partial-execution auto`, `e2e_pex.toml` at `on`: loops wherever they lower a layer's "
    "RAM) and every device's firmware builds for and runs on the emulated F405 "
    "(QEMU netduinoplus2, 1 MiB flash, 128 KiB RAM); any other part runs there as the F405 "
    "with its own core's int8 kernel variant (build `M4F.<isa>`). Every other pair is listed "
    "with the reason. Identical firmware (same model, same generated `model.c` / `model.h` / "
    "`Makefile` on every device) is benched once and its sub-models are counted once in the "
    "statistics; the pairs sharing it are listed as such."
)


def write(results: dict[str, Any], name: str = "costs") -> None:
    """benchmarks/results/NAME.json and NAME.md."""
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / f"{name}.json").write_text(json.dumps(results, indent=1) + "\n")
    pairs = results["pairs"]
    ran = [p for p in pairs if "rows" in p]
    distinct = [p for p in ran if "same_firmware_as" not in p]
    boards_ran = sorted({p["boards"] for p in ran})
    lines = [
        "# Kernel cost table vs the emulated bench (no calibration)",
        "",
        f"Generated by `benchmarks/costs.py` on {results['date']}. QEMU netduinoplus2, "
        "`-icount shift=0`, one inference (instruction counts are deterministic). "
        "Predicted = the plan's table instructions x 0.168 ticks (SysTick of the 168 MHz core "
        "counts 0.168 per instruction under `-icount shift=0`); error = predicted / measured - 1. "
        "`catalog cpm` is the flat cycles-per-MAC estimate the planner used before, in the "
        "same ticks.",
        "",
        RULE,
        "",
        f"{len(pairs)} pairs: {len(ran)} measured ({len(distinct)} distinct firmware, "
        f"{results['summary']['all'].get('n', 0)} distinct sub-models), "
        f"{len(pairs) - len(ran)} not runnable emulated. Board files with a measured pair: "
        f"{len(boards_ran)} ({', '.join(b.removesuffix('.toml') for b in boards_ran)}).",
        "",
        "The table answers with the measured count when an op's exact shape was measured "
        "(every layer of `models/` that fits the emulator is, and every PEX loop of them), else "
        "with the per-kernel fit; `fit only` predicts every op from the fits alone (shapes as if "
        "never measured).",
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
    head = (
        "| model | boards | sub-model | device (part, build) | PEX loops | MACs | measured ticks | "
    )
    lines += [
        "",
        "Distinct firmware:",
        "",
        head + "predicted | error | fit only |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|---:|",
    ]
    for p in distinct:
        for r in p["rows"]:
            lines.append(f"| {p['model']} | {p['boards']} | {r['submodel']} | {r['device']} "
                         f"({r['part']}, {r['build']}) | {r.get('pex_loops', 0)} | {r['macs']} | "
                         f"{r['measured_ticks']} | {r['predicted_ticks']} | {r['error']:+.2%} | "
                         f"{r['fit_only_error']:+.2%} |")  # fmt: skip
    same = [p for p in ran if "same_firmware_as" in p]
    lines += ["", f"Pairs with the firmware of an earlier pair ({len(same)}; same errors):", ""]
    lines += [f"- {p['model']} on {p['boards']}: as {p['same_firmware_as']}" for p in same]
    skipped = [p for p in pairs if "skipped" in p]
    lines += ["", f"Pairs not runnable emulated ({len(skipped)}; the planner, the emulator's "
              "memory or the build refuses them):", ""]  # fmt: skip
    lines += [f"- {p['model']} on {p['boards']}: {p['skipped']}" for p in skipped]
    (RESULTS / f"{name}.md").write_text("\n".join(lines) + "\n")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="models whose file name contains this")
    ap.add_argument("--boards", default="", help="board files whose name contains one of these "
                    "(comma-separated)")  # fmt: skip
    ap.add_argument("--name", default="costs", help="results file stem")
    ap.add_argument("--jobs", type=int, default=2, help="pairs compiled / benched at a time "
                    "(each bench runs one QEMU at a time: the devices take turns)")  # fmt: skip
    ap.add_argument("--reuse", nargs="*", default=[], metavar="STEM",
                    help="take the measured ticks of identical firmware (same key) from these "
                    "results files instead of running it again")  # fmt: skip
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
    pairs = run_pairs([(m, b) for b in boards for m in models], args.jobs, args.reuse, args.name)
    write(_results(pairs), args.name)
    print((RESULTS / f"{args.name}.md").read_text())


def _known_ticks(stems: list[str]) -> dict[str, dict[str, int]]:
    """firmware key -> measured ticks per sub-model, from earlier results files."""
    known: dict[str, dict[str, int]] = {}
    for stem in stems:
        for pair in json.loads((RESULTS / f"{stem}.json").read_text())["pairs"]:
            if pair.get("firmware") and pair.get("rows") and "same_firmware_as" not in pair:
                known[pair["firmware"]] = {str(r["submodel"]): r["measured_ticks"]
                                           for r in pair["rows"]}  # fmt: skip
    return known


def run_pairs(todo: list[tuple[Path, Path]], jobs: int, reuse: list[str],
              name: str) -> list[dict[str, Any]]:  # fmt: skip
    """Compile every pair (``jobs`` processes), then build and bench each distinct firmware
    once; a pair whose firmware equals an earlier one's gets its measured ticks, marked
    ``same_firmware_as`` (the emulator under ``-icount`` is deterministic)."""
    known = _known_ticks(reuse)
    t0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="splitter-costs-bench-") as tmp, \
            ProcessPoolExecutor(max_workers=jobs) as pool:  # fmt: skip
        works = [Path(tmp) / str(k) for k in range(len(todo))]
        planned = list(pool.map(plan_pair, *zip(*todo, strict=True), works))
        print(f"compiled {len(todo)} pairs in {time.monotonic() - t0:.0f} s", flush=True)
        first: dict[str, int] = {}
        for k, pair in enumerate(planned):
            key = pair.get("firmware")
            if key is None or key in known or key in first:
                shutil.rmtree(works[k], ignore_errors=True)
            else:
                first[key] = k
        order = sorted(first.values(), key=lambda k: sum(r["predicted_ticks"]
                                                         for r in planned[k]["rows"]))  # fmt: skip
        futures = {k: pool.submit(measure_pair, works[k]) for k in order}
        for k in order:
            got = futures[k].result()
            known[planned[k]["firmware"]] = got.get("ticks", {})
            if "skipped" in got:
                planned[k] = {"skipped": got["skipped"]}
            m, b = todo[k]
            print(f"{m.name} on {b.name}: {got.get('skipped') or got['ticks']}", flush=True)
    pairs = []
    for k, ((model, board), pair) in enumerate(zip(todo, planned, strict=True)):
        out = {"model": model.name, "boards": board.name, **pair}
        key = pair.get("firmware")
        if key is not None:
            if first.get(key, k) != k:
                m, b = todo[first[key]]
                out["same_firmware_as"] = f"{m.name} on {b.name}"
            if not known.get(key):
                out = {
                    "model": model.name,
                    "boards": board.name,
                    "skipped": "the firmware did not build or run (see the first pair)",
                }
            else:
                out = with_measured(out, known[key])
        pairs.append(out)
    print(f"done in {time.monotonic() - t0:.0f} s", flush=True)
    return pairs


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
    rows = [r for p in pairs if "same_firmware_as" not in p for r in p.get("rows", [])]
    return {"date": time.strftime("%Y-%m-%d"), "pairs": pairs, "summary": summary(rows)}


if __name__ == "__main__":
    main()
