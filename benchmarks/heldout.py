"""The kernel cost model on models it never saw: estimate vs emulator, per kernel and per loop.

The cost table (``splitter/cost/kernel_costs.json``, ``make costs``) is fitted on every layer of
``models/`` and a grid of random shapes (``splitter.measure.kernel_grid``). The models here
(``benchmarks/heldout/``, written by ``benchmarks/heldout_models.py`` with the real TensorFlow
converter and tf2onnx) are kept out of that fit; two of their architectures (SqueezeNet, a
VGG-style CNN) have no relative in ``models/`` at all. For each model:

1. its chain is costed twice, as the planner does: every op run whole, and with the PEX loops
   the planner would add (``splitter.cost.pex_chain.partial_chain``: channel loops in float
   NCHW and int8, row loops in int8);
2. every layer that fits the emulated F405 is compiled by the project's generator and run
   under ``qemu-system-arm -M netduinoplus2 -icount shift=0`` with a probe before each op and
   each loop (``splitter.measure.kernel_table.measure_chain``: instructions = SysTick ticks /
   0.168, exact);
3. each op's and loop's estimate is compared with its count: ``planner`` is what the planner
   uses (:func:`splitter.cost.kernels.op_instructions`, a measured count when the table holds
   the same shape, else the fit), ``fit`` the per-kernel fit alone (every shape as if never
   measured). Error = estimate / measured - 1.

Then the finding of issue 25 end to end: ``mnv2_035_96_int8.tflite`` planned by ``splitter
compile`` on ``benchmarks/heldout/two_f405_ram16.toml`` (two F405s, 16 KiB of RAM kept back),
built, and benched emulated (``benchmarks/costs.py``'s ``plan_pair`` / ``measure_pair``):
predicted vs measured SysTick ticks per sub-model, and the instructions per MAC with and
without the loops.

Usage: ``.venv/bin/python benchmarks/heldout.py [--build M4F.dsp]`` ->
``benchmarks/results/heldout.{json,md}``.
"""

from __future__ import annotations

import argparse
import datetime
import json
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from splitter.cost.kernels import term_instructions  # noqa: E402
from splitter.cost.pex_chain import partial_chain  # noqa: E402
from splitter.graph.chain import build_chain  # noqa: E402
from splitter.importers import load_model  # noqa: E402
from splitter.ir import Chain  # noqa: E402
from splitter.measure import kernel_table as kt  # noqa: E402

HELDOUT = ROOT / "benchmarks" / "heldout"
RESULTS = ROOT / "benchmarks" / "results"
#: model file -> what it holds out
MODELS = {
    "mnv2_035_96_int8.tflite": "MobileNetV2 0.35 at 96x96, int8 (issue 25's finding): shapes "
    "models/ lacks (models/ has the 1.0/224 int8 and a 0.35/32 float one)",
    "squeezenet_64_int8.tflite": "SqueezeNet 1.1 half width, 64x64, int8: architecture left out",
    "squeezenet_64_float.tflite": "the same in float32 (TFLite, NHWC): architecture left out",
    "vgg_48_int8.tflite": "VGG-style CNN (5x5 and 3x3 convs, max pools), 48x48, int8: "
    "architecture left out",
    "mnv2_035_64_float.onnx": "MobileNetV2 0.35 at 64x64, float32 tf2onnx (NCHW): shapes "
    "models/ lacks",
    "squeezenet_64_float.onnx": "SqueezeNet through tf2onnx (float32 NCHW): architecture left out",
    "vgg_48_float.onnx": "VGG-style CNN through tf2onnx (float32 NCHW): architecture left out",
}
FINDING = ("mnv2_035_96_int8.tflite", "two_f405_ram16.toml")


def chains_of(path: Path) -> list[Chain]:
    """The model's chain run op by op, and with its PEX loops when the planner adds any."""
    chain = build_chain(load_model(path).graph)
    looped = partial_chain(chain)
    return [chain] if looped is chain else [chain, looped]


def group_of(sample: kt.OpSample) -> str:
    """The sample's kernel class (its first term's variant) or loop kind."""
    if sample.op.startswith(kt.LOOP):
        dtype = sample.terms[0].variant.rsplit("/", 1)[-1]
        row = any(t.variant.startswith("pex.row.") for t in sample.terms)
        return f"PEX {'row' if row else 'channel'} loop, {dtype}"
    return sample.terms[0].variant


def rows_of(model: str, samples: Sequence[kt.OpSample], build: str) -> list[dict[str, Any]]:
    """One row per measured op or loop: measured, planner estimate, fit-only estimate."""
    table = kt.KERNEL_TABLE
    measured = json.loads(table.read_text())["builds"][build].get("measured", {})
    rows = []
    for s in samples:
        if s.op == kt.SUBMODEL or s.instructions <= 0:
            continue
        fit = sum(term_instructions(t, build) for t in s.terms)
        planner = float(measured.get(s.signature, fit))
        rows.append({"model": model, "layer": s.layer, "op": s.op, "group": group_of(s),
                     "measured": round(s.instructions), "planner": round(planner),
                     "fit": round(fit), "in_table": s.signature in measured,
                     "planner_error": round(planner / s.instructions - 1, 4),
                     "fit_error": round(fit / s.instructions - 1, 4)})  # fmt: skip
    return rows


def stats(rows: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    """Count, median and max |error| of ``key``."""
    errs = [abs(r[key]) for r in rows]
    if not errs:
        return {"n": 0}
    return {"n": len(errs), "median": round(statistics.median(errs), 4),
            "max": round(max(errs), 4)}  # fmt: skip


def networks(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per model and chain (op by op, with loops): the sums of measured and estimated."""
    out = []
    for model in sorted({r["model"] for r in rows}):
        sel = [r for r in rows if r["model"] == model]
        m = sum(r["measured"] for r in sel)
        p, f = sum(r["planner"] for r in sel), sum(r["fit"] for r in sel)
        out.append({"model": model, "measured": m, "planner": p, "fit": f,
                    "planner_error": round(p / m - 1, 4),
                    "fit_error": round(f / m - 1, 4)})  # fmt: skip
    return out


def finding() -> dict[str, Any]:
    """Issue 25's pair end to end (module docstring)."""
    import costs

    model, boards = (HELDOUT / n for n in FINDING)
    with tempfile.TemporaryDirectory() as tmp:
        pair = costs.plan_pair(model, boards, Path(tmp))
        if "rows" not in pair:
            return pair
        got = costs.measure_pair(Path(tmp))
    if "ticks" not in got:
        return {**pair, **got}
    return costs.with_measured(pair, got["ticks"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--build", default="M4F.dsp")
    parser.add_argument("--only", default="")
    parser.add_argument(
        "--render", action="store_true", help="rewrite heldout.md from heldout.json (no measuring)"
    )
    args = parser.parse_args()
    if args.render:
        result = json.loads((RESULTS / "heldout.json").read_text())
        result["summary"] = summarise(result["rows"])
        write(result)
        return
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="heldout-") as tmp:
        for name in MODELS:
            if args.only not in name:
                continue
            for k, chain in enumerate(chains_of(HELDOUT / name)):
                label = name + (" (PEX loops)" if k else "")
                got = kt.measure_chain(chain, args.build, Path(tmp))
                rows += rows_of(label, got, args.build)
                print(f"{label}: {len(got)} samples", file=sys.stderr)
    result = {"date": datetime.date.today().isoformat(), "build": args.build,
              "models": MODELS, "summary": summarise(rows), "networks": networks(rows),
              "finding": finding() if not args.only else {}, "rows": rows}  # fmt: skip
    write(result)


def summarise(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per kernel class and loop kind (and over all): count, median and max |error| of the
    planner's estimate and of the fit, and the class's share of the measured instructions."""
    total = sum(r["measured"] for r in rows) or 1
    out: dict[str, Any] = {}
    for g in ["all", *sorted({r["group"] for r in rows})]:
        sel = [r for r in rows if g == "all" or r["group"] == g]
        share = round(sum(r["measured"] for r in sel) / total, 4)
        out[g] = {"planner": stats(sel, "planner_error"), "fit": stats(sel, "fit_error"),
                  "share": share}  # fmt: skip
    return out


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:+.1f}%"


def write(result: dict[str, Any]) -> None:
    """benchmarks/results/heldout.json and heldout.md."""
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "heldout.json").write_text(json.dumps(result, indent=1) + "\n")
    lines = [
        "# Kernel cost model on held-out models (estimate vs emulator)",
        "",
        f"Generated by `benchmarks/heldout.py` on {result['date']}, build `{result['build']}` "
        "(code for a Cortex-M4 with the DSP int8 kernels, run on QEMU netduinoplus2 with "
        "`-icount shift=0`: instructions counted exactly, per op and per PEX loop). None of "
        "these models is in `models/`, so none was in the cost table's fit; error = estimate / "
        "measured - 1. `planner` = what the planner uses (a measured count where the table "
        "holds the same shape, else the fit); `fit` = the per-kernel fit alone.",
        "",
        "Held-out models (`benchmarks/heldout/`, written by `benchmarks/heldout_models.py`):",
        "",
        *[f"- `{k}`: {v}" for k, v in result["models"].items()],
        "",
        "| kernel class or loop kind | n | share of instructions | planner median abs "
        "| planner max abs | fit median abs | fit max abs |",
        "|---|---:|---:|---:|---:|---:|---:|",
    ]
    for g, s in result["summary"].items():
        p, f = s["planner"], s["fit"]
        if not p.get("n"):
            continue
        lines.append(f"| {g} | {p['n']} | {100 * s['share']:.2f}% | {100 * p['median']:.1f}% "
                     f"| {100 * p['max']:.1f}% | {100 * f['median']:.1f}% "
                     f"| {100 * f['max']:.1f}% |")  # fmt: skip
    lines += ["", "Whole networks (sum over the measured layers):", "",
              "| model | measured instructions | planner | error | fit | error |",
              "|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for n in result["networks"]:
        lines.append(f"| {n['model']} | {n['measured']:,} | {n['planner']:,} "
                     f"| {_pct(n['planner_error'])} | {n['fit']:,} "
                     f"| {_pct(n['fit_error'])} |")  # fmt: skip
    lines += _finding_lines(result.get("finding") or {})
    lines += ["", "Every op and loop:", "",
              "| model | layer | op / loop | class | measured | planner | error | fit | error |",
              "|---|---:|---|---|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in result["rows"]:
        lines.append(f"| {r['model']} | {r['layer']} | {r['op']} | {r['group']} "
                     f"| {r['measured']:,} | {r['planner']:,} | {_pct(r['planner_error'])} "
                     f"| {r['fit']:,} | {_pct(r['fit_error'])} |")  # fmt: skip
    (RESULTS / "heldout.md").write_text("\n".join(lines) + "\n")


def _finding_lines(found: dict[str, Any]) -> list[str]:
    if not found:
        return []
    head = ["", f"Issue 25's finding: `{FINDING[0]}` on `{FINDING[1]}` (`splitter compile`, "
            "built, benched emulated, one inference; SysTick ticks = 0.168 x instructions):",
            ""]  # fmt: skip
    if "rows" not in found:
        return [*head, f"not run: {found.get('skipped')}"]
    lines = [*head, "| sub-model | device | PEX loops | MACs | measured ticks | predicted "
             "| error | instructions / MAC |",
             "|---:|---|---:|---:|---:|---:|---:|---:|"]  # fmt: skip
    for r in found["rows"]:
        ipm = r["measured_ticks"] / 0.168 / max(1, r["macs"])
        lines.append(f"| {r['submodel']} | {r['device']} | {r['pex_loops']} | {r['macs']:,} "
                     f"| {r['measured_ticks']:,} | {r['predicted_ticks']:,} "
                     f"| {_pct(r['error'])} | {ipm:.2f} |")  # fmt: skip
    return lines


if __name__ == "__main__":
    main()
