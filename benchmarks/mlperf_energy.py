"""The energy model against MLPerf Tiny's measured energy on the NUCLEO-L4R5ZI (X-CUBE-AI).

MLPerf Tiny v1.0, closed division, STMicroelectronics, NUCLEO_L4R5ZI (github.com/mlcommons/
tiny_results_v1.0, ``closed/STMicroelectronics/results/NUCLEO_L4R5ZI/<kws|vww|ic|ad>/``):
``performance/results.txt`` "Median throughput" and ``energy/results.txt`` "Median energy
cost" per inference. For each benchmark the model's energy at MLPerf's published latency is
``P_run x latency`` with ``P_run = V_DD x (I/f) x f`` of ``splitter/hardware/energy.toml``
(one board computing the whole time): how far the power model lands from a measured figure,
not a tuned match. Beside it, splitter's own prediction for the model alone on an L4R5 (its
latency from the kernel cost table and its energy per inference, host I/O not counted: MLPerf
times the inference only).

A second table puts splitter's predicted latency of one L4R5 at 120 MHz (the real-core model:
kernel cost table instructions x the part's cycles per instruction and flash wait states,
:mod:`splitter.cost.cpi`; no host I/O) next to the latencies MLPerf Tiny measured on the same
board: X-CUBE-AI 10.2 (v1.3 closed, STMicroelectronics NUCLEO_L4R5ZI-P) and TensorFlow Lite
for Microcontrollers 2.3.1 (v0.5 closed, the reference submission on the Nucleo-L4R5ZI,
``closed/reference/results/Nucleo-L4R5ZI/<task>/performance/results.txt``). A prediction
against measurements: splitter's kernels have not run on an L4R5 here.

Writes benchmarks/results/mlperf_energy.md and .json.
Run: ``.venv/bin/python benchmarks/mlperf_energy.py``
"""

from __future__ import annotations

import datetime
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitter.hardware.boards import boards_from_dict  # noqa: E402
from splitter.hardware.catalog import get_part  # noqa: E402
from splitter.hardware.energy import energy_of  # noqa: E402
from splitter.importers import load_chain  # noqa: E402
from splitter.partition.planner import plan_chain  # noqa: E402

PART = "STM32L4R5ZI"
SOURCE = (
    "MLPerf Tiny v1.0 closed, STMicroelectronics NUCLEO_L4R5ZI (X-CUBE-AI), "
    "github.com/mlcommons/tiny_results_v1.0 closed/STMicroelectronics/results/NUCLEO_L4R5ZI/"
    "<task>/performance/results.txt (median throughput) and energy/results.txt (median energy)"
)
#: task -> (model shipped in models/, median throughput /s, median energy uJ per inference)
PUBLISHED = {
    "kws": ("mlperf_kws_ds_cnn_int8.tflite", 13.323, 3371.738),
    "vww": ("mlperf_vww_mobilenet_v1_025_int8.tflite", 4.339, 10066.628),
    "ic": ("mlperf_ic_resnet8_int8.tflite", 4.407, 10681.623),
    "ad": ("mlperf_ad_autoencoder_int8.tflite", 131.950, 322.977),
}


#: task -> median throughput /s measured by MLPerf Tiny on the L4R5 (module docstring)
XCUBE_V13 = {"kws": 23.032, "vww": 11.181, "ic": 6.036, "ad": 208.608}
TFLM_V05 = {"kws": 5.497, "vww": 1.665, "ic": 1.420, "ad": 99.487}
LATENCY_SOURCE = (
    "X-CUBE-AI: MLPerf Tiny v1.3 closed, github.com/mlcommons/tiny_results_v1.3 "
    "closed/STMicroelectronics/results/NUCLEO_L4R5ZI-P/<task>/performance/results.txt; "
    "TFLM 2.3.1: MLPerf Tiny v0.5 closed reference, github.com/mlcommons/tiny_results_v0.5 "
    "closed/reference/results/Nucleo-L4R5ZI/<task>/performance/results.txt (median throughput)"
)


def rows() -> list[dict[str, object]]:
    """One row per task (module docstring)."""
    part = get_part(PART)
    run_w = energy_of(PART).run_w(part.clock_mhz * 1e6)
    boards = boards_from_dict({"device": [{"name": "l4r5", "mcu": PART}]}, "mlperf")
    out = []
    for task, (model, rate, energy_uj) in PUBLISHED.items():
        latency = 1.0 / rate
        at_latency = run_w * latency * 1e6
        plan = plan_chain(load_chain(ROOT / "models" / model), boards, "latency", host_io=False)
        assert plan.energy_j is not None
        out.append(
            {
                "task": task,
                "model": model,
                "mlperf_latency_ms": latency * 1e3,
                "mlperf_energy_uj": energy_uj,
                "mlperf_power_mw": energy_uj / latency / 1e3,
                "model_power_mw": run_w * 1e3,
                "model_energy_at_mlperf_latency_uj": at_latency,
                "error_pct": 100 * (at_latency - energy_uj) / energy_uj,
                "splitter_latency_ms": plan.latency_s * 1e3,
                "xcube_v13_latency_ms": 1e3 / XCUBE_V13[task],
                "tflm_v05_latency_ms": 1e3 / TFLM_V05[task],
                "splitter_energy_uj": plan.energy_j * 1e6,
            }
        )
    return out


def markdown(table: list[dict[str, object]], date: str) -> str:
    """The side-by-side table."""
    lines = [
        "# Energy model vs MLPerf Tiny (NUCLEO-L4R5ZI, X-CUBE-AI)",
        "",
        f"Computed {date}. Source of the measured figures: {SOURCE}. Model power: "
        f"{PART} Run mode at 120 MHz, 3.3 V, from `splitter/hardware/energy.toml` "
        "(110 uA/MHz, LDO). `benchmarks/mlperf_energy.py` regenerates it.",
        "",
        "| task | MLPerf latency ms | MLPerf energy uJ | MLPerf power mW | model power mW "
        "| model energy at MLPerf latency uJ | error | splitter latency ms (its kernels) "
        "| splitter energy uJ |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for r in table:
        lines.append(
            f"| {r['task']} | {r['mlperf_latency_ms']:.2f} | {r['mlperf_energy_uj']:.1f} | "
            f"{r['mlperf_power_mw']:.2f} | {r['model_power_mw']:.2f} | "
            f"{r['model_energy_at_mlperf_latency_uj']:.1f} | {r['error_pct']:+.1f} % | "
            f"{r['splitter_latency_ms']:.1f} | {r['splitter_energy_uj']:.1f} |"
        )
    return "\n".join([*lines, "", *latency_markdown(table)]) + "\n"


def latency_markdown(table: list[dict[str, object]]) -> list[str]:
    """The prediction table: splitter's predicted latency on one L4R5 against MLPerf's
    measured X-CUBE-AI and TFLM latencies (module docstring)."""
    lines = [
        "## Predicted latency on one L4R5 at 120 MHz against MLPerf Tiny's measurements",
        "",
        f"Measured figures: {LATENCY_SOURCE}. splitter: predicted (not measured) by the "
        "real-core model for its own kernels.",
        "",
        "| task | splitter predicted ms | X-CUBE-AI 10.2 measured ms | TFLM 2.3.1 measured ms "
        "| splitter / X-CUBE-AI | splitter / TFLM |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in table:
        ours, xc, tf = (
            float(r[k])  # type: ignore[arg-type]
            for k in ("splitter_latency_ms", "xcube_v13_latency_ms", "tflm_v05_latency_ms")
        )
        ratios = f"{ours / xc:.2f} | {ours / tf:.2f}"
        lines.append(f"| {r['task']} | {ours:.1f} | {xc:.1f} | {tf:.1f} | {ratios} |")
    return lines


def main() -> None:
    table = rows()
    date = datetime.date.today().isoformat()
    out = ROOT / "benchmarks" / "results"
    (out / "mlperf_energy.json").write_text(
        json.dumps({"date": date, "source": SOURCE, "rows": table}, indent=2)
    )
    (out / "mlperf_energy.md").write_text(markdown(table, date))
    print(markdown(table, date))


if __name__ == "__main__":
    main()
