"""Time of ``splitter compile``: MobileNetV2-1.0-224 into 3 sub-models, and ``make demo``.

Target (issue 4): compile under 5 s on the 2-core machine, validation included; firmware
generation (the C generator, on by default, ``--no-firmware`` turns it off) for MobileNetV2
under 5 s on its own. The board file has three equal devices that each hold ~40 % of the
weights, so the optimal plan has 3 sub-models. Measured in-process after one warm-up run
(module imports excluded), median of :data:`RUNS` runs without firmware and of
:data:`FW_RUNS` runs with it, per step (import, plan, slice, validate on 8 seeded inputs,
firmware, write; ``write_s`` includes ``firmware_s``). The demo is ``make demo``'s compile
(models/mobilenet_v1_025.onnx on models/boards/demo.toml, firmware on), timed the same way.

Usage: ``.venv/bin/python benchmarks/compile_speed.py``; writes
``benchmarks/results/compile_speed.json`` (``compile_speed.md`` there has the before/after
table). The model is built by ``models/build.py`` when missing.
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
MODEL = "mobilenet_v2_224"
RUNS = 5
FW_RUNS = 3
TARGET_S = 5.0
FIRMWARE_TARGET_S = 5.0
SUBMODELS = 3
DEMO_MODEL = ROOT / "models" / "mobilenet_v1_025.onnx"
DEMO_BOARDS = ROOT / "models" / "boards" / "demo.toml"


def ensure_model() -> Path:
    """``models/mobilenet_v2_224.onnx``, built by models/build.py when missing."""
    spec = importlib.util.spec_from_file_location("models_build", ROOT / "models" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["models_build"] = module  # dataclasses in build.py look their module up
    spec.loader.exec_module(module)
    path: Path = module.ensure_model(MODEL)
    return path


def boards_for(model: Path, out: Path) -> Path:
    """Three equal devices, each with ~40 % of the model's weights (so 3 sub-models)."""
    from splitter.importers import load_chain

    costs = load_chain(model).costs
    share = max(0.4 * sum(c.flash for c in costs), 1.01 * max(c.flash for c in costs))
    ram = 1.1 * max(c.ram for c in costs) + 1024
    lines = ["[link]", "baud = 921600"]
    for k in range(SUBMODELS):
        lines += [
            "[[device]]",
            f'name = "m{k}"',
            f'part = {{ name = "M{k}", flash_kib = {share / 1024:.3f}, ram_kib = {ram / 1024:.3f},'
            f' clock_mhz = {80 + 40 * k}, cpm = 6, family = "F4" }}',
        ]
    path = out / "boards.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def time_once(
    model: Path, boards: Path, out: Path, firmware: bool = False, submodels: int | None = SUBMODELS
) -> dict[str, float]:
    """Seconds per step and in total of one compile (validation on)."""
    from splitter.compile import CompileOptions, compile_model

    start = time.perf_counter()
    result = compile_model(model, boards, out, CompileOptions(force=True, firmware=firmware))
    total = time.perf_counter() - start
    if submodels is not None:
        assert len(result.submodels) == submodels, result.plan.submodels
    assert result.validation is not None and result.validation.passed
    if firmware:
        assert (out / "firmware" / "wiring.json").is_file(), "no firmware generated"
    return {**{f"{k}_s": v for k, v in result.timings.items()}, "total_s": total}


def median_of(runs: list[dict[str, float]]) -> dict[str, float]:
    """Per-key median of several :func:`time_once` results, rounded to 0.1 ms."""
    return {k: round(statistics.median(r[k] for r in runs), 4) for k in runs[0]}


def timed(
    model: Path,
    boards: Path,
    out: Path,
    n: int,
    firmware: bool = False,
    submodels: int | None = SUBMODELS,
) -> dict[str, float]:
    """Median of ``n`` compiles after one warm-up compile."""
    time_once(model, boards, out, firmware, submodels)
    return median_of([time_once(model, boards, out, firmware, submodels) for _ in range(n)])


def weights_mib(out: Path) -> float:
    """Size of every generated ``model.c`` (MiB): the weights text dominates it."""
    return round(sum(p.stat().st_size for p in out.glob("firmware/*/model.c")) / 2**20, 2)


def main() -> int:
    """Run the benchmark, print and store the figures."""
    model = ensure_model()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        boards = boards_for(model, work)
        median = timed(model, boards, work / "out", RUNS)
        with_fw = timed(model, boards, work / "out-fw", FW_RUNS, firmware=True)
        model_c_mib = weights_mib(work / "out-fw")
        demo = timed(DEMO_MODEL, DEMO_BOARDS, work / "demo", FW_RUNS, firmware=True, submodels=None)
    result = {
        "benchmark": "splitter compile MobileNetV2-1.0-224 into 3 sub-models, validation on",
        "model": MODEL,
        "submodels": SUBMODELS,
        "validation_inputs": 8,
        "runs": RUNS,
        "median_s": median,
        "target_s": TARGET_S,
        "meets_target": median["total_s"] < TARGET_S,
        "with_firmware": {
            "runs": FW_RUNS,
            "median_s": with_fw,
            "model_c_mib": model_c_mib,
            "firmware_target_s": FIRMWARE_TARGET_S,
            "firmware_meets_target": with_fw["firmware_s"] < FIRMWARE_TARGET_S,
        },
        "demo": {
            "command": "make demo (mobilenet_v1_025.onnx, models/boards/demo.toml, firmware on)",
            "runs": FW_RUNS,
            "median_s": demo,
        },
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "compile_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
