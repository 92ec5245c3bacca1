"""Calibrate on one model, predict every other model: |error| per device on emulated boards.

For every (model, board file) that runs on the emulator (the end-to-end cases of ``tests/``):
``splitter compile`` + ``make EMULATOR=1`` + ``splitter bench --emulate --icount -n 1`` (cycles
under ``-icount shift=0`` are deterministic, one run is the measurement). Then, for every case
``S`` as the calibration source, the emulated calibration ``splitter calibrate`` fits from
``S``'s bench (:func:`splitter.bench.calibrate.fit_all`, factors per part, per op class when
``S``'s sub-models identify the classes) is put into every other case ``T``'s board file, and
the planner's compute time per device of ``T``'s plan, predicting an emulated run
(:func:`splitter.bench.estimate.compute_seconds` with ``for_prediction(..., emulated=True)``),
is compared with ``T``'s measured cycles: ``error = 100 (predicted - measured) / measured``.

The factors are fitted without the refusal limit (so every source gets a prediction), and the
table says whether ``splitter calibrate`` at its default ``--max-error`` would have refused
that source. The uncalibrated estimate's error is reported alongside.

Usage: ``PYTHONPATH=. .venv/bin/python benchmarks/calibration.py [WORK_DIR]``; writes
``benchmarks/results/calibration.json`` and ``calibration.md``. Builds are kept in WORK_DIR
(default: a temporary directory) and reused when it is given again.
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import tempfile
import time
import tomllib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from test_e2e_support import BOARDS, compile_and_build  # noqa: E402

from splitter.bench.calibrate import (  # noqa: E402
    MAX_ERROR_PCT,
    CalibrationRefused,
    PartFit,
    calibrated_text,
    fit_parts,
    load_bench,
)
from splitter.bench.estimate import compute_seconds, submodel_costs  # noqa: E402
from splitter.bench.results import write_bench  # noqa: E402
from splitter.bench.runner import BenchConfig, bench  # noqa: E402
from splitter.hardware.boards import boards_from_dict, for_prediction, load_boards  # noqa: E402
from splitter.manifest import read_manifest  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
TARGET_PCT = 10.0
#: (model, board file): the emulated end-to-end cases of tests/
CASES = (
    ("tiny_cnn.onnx", "e2e_tiny2.toml"),
    ("kws_cnn.onnx", "e2e_kws3.toml"),
    ("kws_ds_cnn.onnx", "e2e_dscnn2.toml"),
    ("mobilenet_v1_025_64.onnx", "e2e_mobilenet64.toml"),
    ("mobilenet_v3_small_025.onnx", "e2e_exported_mnv3.toml"),
    ("resnet_tv_28.onnx", "e2e_exported_resnet.toml"),
    ("mobilenet_v2_035_keras.onnx", "e2e_exported_mnv2.toml"),
    ("resnet_tv_28_qdq.onnx", "e2e_qdq2.toml"),
    ("mlperf_kws_ds_cnn_int8.tflite", "mlperf_kws2.toml"),
    ("mlperf_vww_mobilenet_v1_025_int8.tflite", "mlperf_vww2.toml"),
    ("mlperf_ic_resnet8_int8.tflite", "mlperf_ic2.toml"),
    ("mlperf_ad_autoencoder_int8.tflite", "mlperf_ad2.toml"),
    ("pex_irb_48.onnx", "e2e_pex.toml"),
)


def measure(model: str, boards: str, work: Path) -> Path:
    """OUT of ``model`` on ``boards`` with its ``bench.json`` (built and benched once)."""
    out = work / f"{Path(model).stem}-{Path(boards).stem}"
    if not (out / "bench.json").exists():
        compile_and_build(model, boards, out)
        cfg = BenchConfig(runs=1, emulate=True, icount=True, pipeline=False)
        write_bench(out, bench(out, cfg))
    return out


def calibration_of(out: Path, boards: str) -> tuple[list[PartFit], str | None]:
    """The emulated factors ``splitter calibrate`` fits from ``out``'s bench (the planner's
    per-layer estimate), and its refusal at the default limit."""
    return pooled_calibration([(out, boards)])


def pooled_calibration(sources: list[tuple[Path, str]]) -> tuple[list[PartFit], str | None]:
    """The emulated factors ``splitter calibrate OUT --also ...`` fits from the pooled benches
    of ``sources`` (OUT, board file), and its refusal at the default limit."""
    by_part: dict[str, list[Any]] = {}
    for k, (out, boards) in enumerate(sources):
        prefix = f"{out.name}/" if k else ""
        for part, subs in load_bench(out, BOARDS / boards).measured("emulated", prefix).items():
            by_part.setdefault(part, []).extend(subs)
    try:
        fit_parts(by_part, "emulated", MAX_ERROR_PCT, "bench.json")
        refused = None
    except CalibrationRefused as exc:
        refused = str(exc).split(": ", 1)[1]
    return fit_parts(by_part, "emulated", math.inf, "bench.json"), refused


def device_errors(out: Path, boards: str, fits: list[PartFit]) -> dict[str, float]:
    """Per device of ``out``'s plan: predicted (emulated run) vs measured compute, %."""
    text = calibrated_text((BOARDS / boards).read_text(), fits, "source") if fits else None
    parsed = boards_from_dict(tomllib.loads(text)) if text else load_boards(BOARDS / boards)
    devices = {d.name: d for d in for_prediction(parsed, emulated=True).devices}
    costs = {c.index: c for c in submodel_costs(read_manifest(out))}
    data = json.loads((out / "bench.json").read_text())
    errors = {}
    for d in data["devices"]:
        if not d["submodels"]:
            continue
        measured = sum(s["cycles"][0] for s in d["submodels"]) / float(d["clock_hz"])
        dev = devices[d["device"]]
        predicted = sum(compute_seconds(costs[int(s["index"])], dev) for s in d["submodels"])
        errors[d["device"]] = 100.0 * (predicted - measured) / measured
    return errors


def run(work: Path) -> dict[str, Any]:
    """Measure every case, then every source x target prediction."""
    outs, failed = {}, {}
    for model, boards in CASES:
        t0 = time.perf_counter()
        try:
            outs[model] = measure(model, boards, work)
        except Exception as exc:  # a case that does not build or run is reported, not hidden
            failed[model] = f"{type(exc).__name__}: {exc}"[:300]
        print(f"{model}: {time.perf_counter() - t0:.1f} s", flush=True)
    boards_of = dict(CASES)
    uncalibrated = {m: device_errors(o, boards_of[m], []) for m, o in outs.items()}
    sources = []
    for src, out in outs.items():
        fits, refused = calibration_of(out, boards_of[src])
        targets = {
            tgt: device_errors(o, boards_of[tgt], fits) for tgt, o in outs.items() if tgt != src
        }
        errs = [abs(e) for t in targets.values() for e in t.values()]
        sources.append(
            {
                "source": src,
                "factors": [f.calibration().__dict__ | {"by_class": f.by_class} for f in fits],
                "refused_at_default": refused,
                "targets": targets,
                "max_abs_error_pct": max(errs),
                "median_abs_error_pct": statistics.median(errs),
                "devices_within_target": sum(e <= TARGET_PCT for e in errs),
                "devices": len(errs),
            }
        )
    held_out = []
    for tgt, out in outs.items():
        others = [(o, boards_of[m]) for m, o in outs.items() if m != tgt]
        fits, refused = pooled_calibration(others)
        errs = device_errors(out, boards_of[tgt], fits)
        held_out.append({"held_out": tgt, "refused_at_default": refused, "errors": errs,
                         "factors": [f.calibration().__dict__ | {"by_class": f.by_class}
                                     for f in fits],
                         "max_abs_error_pct": max(abs(e) for e in errs.values())})  # fmt: skip
    return {
        "date": time.strftime("%Y-%m-%d"),
        "estimate": estimate_name(),
        "target_pct": TARGET_PCT,
        "failed": failed,
        "uncalibrated": uncalibrated,
        "sources": sources,
        "leave_one_out": held_out,
    }


def estimate_name() -> str:
    """Which compute estimate the planner of this tree uses for these models."""
    from splitter.ir import LayerCost

    if hasattr(LayerCost(), "instructions"):
        return (
            "kernel cost table (splitter/cost/kernel_costs.json: instructions per kernel "
            "variant, fitted on a shape grid plus the measured shapes of the layers of models/, "
            "so these models are largely in-sample)"
        )
    return "flat cycles per MAC of the catalog (9 for the F405), no per-kernel model"


def markdown(result: dict[str, Any]) -> str:
    """The results as a Markdown page."""
    lines = [
        "# Calibrate on one model, predict every other model (emulated F405 boards)",
        "",
        f"Generated by `benchmarks/calibration.py` on {result['date']}. Cycles: QEMU "
        "netduinoplus2 under `-icount shift=0` (deterministic). Error per device = planner's "
        "compute time with the source's emulated calibration (plan --emulated) vs measured, %. "
        f"Target: |error| <= {result['target_pct']:g} % for every device.",
        "",
        f"Estimate calibrated: {result['estimate']}.",
        "",
        "| calibrated on | factors (STM32F405RG) | refused by default? | devices within "
        f"{result['target_pct']:g} % | median abs error % | max abs error % |",
        "|---|---|---|---|---|---|",
    ]
    for s in result["sources"]:
        f = s["factors"][0] if s["factors"] else {}
        fac = f"{f.get('factor', 0):.4g}" + (
            " (" + ", ".join(f"{c} {v:.3g}" for c, v in f.get("by_class", {}).items()) + ")"
            if f.get("by_class")
            else " (one factor)"
        )
        refused = "yes: " + s["refused_at_default"][:90] if s["refused_at_default"] else "no"
        lines.append(
            f"| {s['source']} | {fac} | {refused} | {s['devices_within_target']}/{s['devices']} "
            f"| {s['median_abs_error_pct']:.1f} | {s['max_abs_error_pct']:.1f} |"
        )
    lines += [
        "",
        "## Leave one model out",
        "",
        "Calibrated on the pooled benches of every other case (`splitter calibrate OUT --also "
        "...`), predicting the held-out case's devices:",
        "",
        "| held out | factors (STM32F405RG) | refused by default? | error per device % | "
        "max abs error % |",
        "|---|---|---|---|---|",
    ]
    for h in result.get("leave_one_out", []):
        f = h["factors"][0] if h["factors"] else {}
        fac = f"{f.get('factor', 0):.4g}" + (
            " (" + ", ".join(f"{c} {v:.3g}" for c, v in f.get("by_class", {}).items()) + ")"
            if f.get("by_class")
            else " (one factor)"
        )
        refused = "yes: " + h["refused_at_default"][:90] if h["refused_at_default"] else "no"
        errs = ", ".join(f"{d} {e:+.1f}" for d, e in h["errors"].items())
        lines.append(f"| {h['held_out']} | {fac} | {refused} | {errs} | "
                     f"{h['max_abs_error_pct']:.1f} |")  # fmt: skip
    lines += ["", "Uncalibrated estimate (no factors) vs measured, per device, %:", ""]
    for model, errs in result["uncalibrated"].items():
        lines.append(f"- {model}: " + ", ".join(f"{d} {e:+.0f}" for d, e in errs.items()))
    if result["failed"]:
        lines += ["", "Cases that did not build or run:", ""]
        lines += [f"- {m}: {why}" for m, why in result["failed"].items()]
    lines += ["", "Per source, per target, per device (error %):", ""]
    for s in result["sources"]:
        lines.append(f"- **{s['source']}**: " + "; ".join(
            f"{t} " + ", ".join(f"{d} {e:+.1f}" for d, e in errs.items())
            for t, errs in s["targets"].items()))  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    if len(sys.argv) > 1:
        work = Path(sys.argv[1])
        work.mkdir(parents=True, exist_ok=True)
        result = run(work)
    else:
        with tempfile.TemporaryDirectory() as tmp:
            result = run(Path(tmp))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "calibration.json").write_text(json.dumps(result, indent=1) + "\n")
    (RESULTS / "calibration.md").write_text(markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    main()
