"""Time of ``splitter compile`` for MobileNetV2-1.0-224 into 3 sub-models, validation included.

Target (issue 4): under 5 s on the 2-core machine. The board file has three equal devices that
each hold ~40 % of the weights, so the optimal plan has 3 sub-models. Measured in-process after
one warm-up run (module imports excluded), median of 5 runs, per step (import, plan, slice,
validate on 8 seeded inputs, write); firmware generation is a separate stage (C generator,
``--no-firmware`` turns it off) and is timed once on its own for reference.

Usage: ``.venv/bin/python benchmarks/compile_speed.py``; writes
``benchmarks/results/compile_speed.json``. The model is built by ``models/build.py`` when missing.
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
TARGET_S = 5.0
SUBMODELS = 3


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
            f" clock_mhz = {80 + 40 * k}, cpm = 6 }}",
        ]
    path = out / "boards.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def time_once(model: Path, boards: Path, out: Path, firmware: bool = False) -> dict[str, float]:
    """Seconds per step and in total of one compile (validation on)."""
    from splitter.compile import CompileOptions, compile_model

    start = time.perf_counter()
    result = compile_model(model, boards, out, CompileOptions(force=True, firmware=firmware))
    total = time.perf_counter() - start
    assert len(result.submodels) == SUBMODELS, result.plan.submodels
    assert result.validation is not None and result.validation.passed
    return {**{f"{k}_s": v for k, v in result.timings.items()}, "total_s": total}


def main() -> int:
    """Run the benchmark, print and store the figures."""
    model = ensure_model()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        boards = boards_for(model, work)
        time_once(model, boards, work / "out")  # warm-up
        runs = [time_once(model, boards, work / "out") for _ in range(RUNS)]
        with_firmware = time_once(model, boards, work / "out-fw", firmware=True)
    median = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    result = {
        "benchmark": "splitter compile MobileNetV2-1.0-224 into 3 sub-models, validation on",
        "model": MODEL,
        "submodels": SUBMODELS,
        "validation_inputs": 8,
        "runs": RUNS,
        "median_s": {k: round(v, 4) for k, v in median.items()},
        "target_s": TARGET_S,
        "meets_target": median["total_s"] < TARGET_S,
        "with_firmware_once_s": {k: round(v, 4) for k, v in with_firmware.items()},
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "compile_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    print(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
