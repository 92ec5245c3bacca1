"""Import + analysis time of ``splitter inspect`` on MobileNetV2-1.0-224 (target: under 1 s).

Times, in-process and after one warm-up run (module imports excluded), the work
``splitter inspect`` does before rendering: ``load_graph`` (ONNX import: shape inference, folding,
fusion) and ``build_chain`` (super-nodes, cost handlers, arena plans), plus the JSON report.
Reports the median of 5 runs of each stage and of the whole.

Usage: ``.venv/bin/python benchmarks/inspect_speed.py``, writes
``benchmarks/results/inspect_speed.json``. The model is built by ``models/build.py`` into
``models/`` when missing (it is not committed). For reference it also reports the wall time of the
whole ``splitter inspect --format json`` process (interpreter start and library imports included).
"""

from __future__ import annotations

import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
MODEL = "mobilenet_v2_224"
RUNS = 5
TARGET_S = 1.0


def ensure_model() -> Path:
    """``models/mobilenet_v2_224.onnx``, built by models/build.py when missing."""
    spec = importlib.util.spec_from_file_location("models_build", ROOT / "models" / "build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["models_build"] = module  # dataclasses in build.py look their module up
    spec.loader.exec_module(module)
    path: Path = module.ensure_model(MODEL)
    return path


def time_once(path: Path) -> dict[str, float]:
    """Seconds of import, analysis and report for one run."""
    from splitter.cost.layer_table import chain_report
    from splitter.graph.chain import build_chain
    from splitter.importers import load_graph

    t0 = time.perf_counter()
    graph = load_graph(path)
    t1 = time.perf_counter()
    chain = build_chain(graph, activation_bytes=1)
    t2 = time.perf_counter()
    chain_report(chain)
    t3 = time.perf_counter()
    return {"import_s": t1 - t0, "analysis_s": t2 - t1, "report_s": t3 - t2, "total_s": t3 - t0}


def cli_wall_once(path: Path) -> float:
    """Wall seconds of one ``splitter inspect MODEL --format json`` process."""
    exe = Path(sys.executable).parent / "splitter"
    t0 = time.perf_counter()
    subprocess.run(
        [str(exe), "inspect", str(path), "--format", "json"], check=True, capture_output=True
    )
    return time.perf_counter() - t0


def main() -> int:
    sys.path.insert(0, str(ROOT))
    path = ensure_model()
    time_once(path)  # warm-up: module imports and caches
    runs = [time_once(path) for _ in range(RUNS)]
    median = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    from splitter.importers import load_chain

    chain = load_chain(path, activation_bytes=1)
    result: dict[str, Any] = {
        "benchmark": "inspect_speed",
        "model": f"models/{MODEL}.onnx",
        "runs": RUNS,
        "median": {k: round(v, 4) for k, v in median.items()},
        "all_total_s": [round(r["total_s"], 4) for r in runs],
        "cli_process_wall_s_median": round(
            statistics.median(cli_wall_once(path) for _ in range(RUNS)), 4
        ),
        "target_s": TARGET_S,
        "meets_target": median["total_s"] < TARGET_S,
        "layers": len(chain),
        "ops": sum(len(layer.ops) for layer in chain.layers),
        "max_ram_bytes_int8": max(c.ram for c in chain.costs),
        "machine": {
            "python": platform.python_version(),
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
        },
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "inspect_speed.json").write_text(json.dumps(result, indent=2) + "\n")
    m = result["median"]
    print(
        f"{MODEL}: import {m['import_s']:.3f} s + analysis {m['analysis_s']:.3f} s + report "
        f"{m['report_s']:.4f} s = {m['total_s']:.3f} s (median of {RUNS}; target < {TARGET_S} s: "
        f"{'met' if result['meets_target'] else 'MISSED'}); {result['layers']} layers, "
        f"max RAM_j {result['max_ram_bytes_int8']:,} B at 8-bit activations; whole CLI process "
        f"{result['cli_process_wall_s_median']:.3f} s"
    )
    return 0 if result["meets_target"] else 1


if __name__ == "__main__":
    sys.exit(main())
