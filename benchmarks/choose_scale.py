"""Scale of ``splitter choose``: the full catalog, up to 6 boards, MobileNet-class models.

For each case: the number of candidate sets (multisets of up to 6 of the catalog's priced board
types), how many the bounds settle without a solve (memory, the target's bound, after the answer
in the search order), the solves and the wall time until the answer is proved, and the answer.
The Pareto front is not computed (``front=False``): this measures the time to a proved answer.

Writes benchmarks/results/choose_scale.md and choose_scale.json.
Run: ``.venv/bin/python benchmarks/choose_scale.py [--jobs N]`` (default: every core).
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitter.choose import Target, choose  # noqa: E402

#: (model, target, minimise): MobileNet-class models, throughput targets (at 115200 baud the
#: host's input transfer alone takes seconds, so a latency target hardly tells parts apart)
#: that the cheapest board misses, so the proof has cheaper sets to exhaust
#: the last number is --max-boards: energy minimisation solves every set whose energy bound is
#: below the best found (about 1,750 sets at 6 boards here: hours on 2 cores), so it runs at 3
CASES = [
    ("mobilenet_v1_025_64.onnx", Target("throughput", 20.0), "price", 6),
    ("mobilenet_v1_025_64.onnx", Target("throughput", 50.0), "price", 6),
    ("mlperf_vww_mobilenet_v1_025_int8.tflite", Target("throughput", 10.0), "price", 6),
    ("mlperf_vww_mobilenet_v1_025_int8.tflite", Target("throughput", 10.0), "boards", 6),
    ("mlperf_vww_mobilenet_v1_025_int8.tflite", Target("throughput", 10.0), "energy", 3),
]


def run_case(
    model: str, target: Target, minimise: str, max_boards: int, jobs: int
) -> dict[str, object]:
    """One search, its statistics and answer."""
    start = time.perf_counter()
    result = choose(ROOT / "models" / model, target, max_boards=max_boards, minimise=minimise,
                    jobs=jobs, front=False, time_limit=60.0)  # fmt: skip
    wall = time.perf_counter() - start
    s, a = result.stats, result.answer
    assert a is not None
    return {
        "model": model,
        "target": target.describe(),
        "minimise": minimise,
        "max_boards": max_boards,
        "types": len(result.candidates),
        "sets": s.sets,
        "pruned_memory": s.pruned["memory"],
        "pruned_target": s.pruned["target"],
        "after_answer": s.pruned["order"],
        "solved": s.solved_to_answer,
        "pruned_fraction": s.pruned_fraction,
        "seconds_to_proved_answer": s.seconds_to_answer,
        "wall_s_with_import": wall,
        "answer": result.label(a),
        "price_usd": a.price,
        "latency_ms": None if a.latency_s is None else a.latency_s * 1e3,
        "throughput_per_s": a.throughput_per_s,
        "least_energy_mj": None if a.least_energy_j is None else a.least_energy_j * 1e3,
        "proved": result.proved,
    }


def markdown(rows: list[dict[str, object]], jobs: int, date: str) -> str:
    """The results table."""
    lines = [
        "# `splitter choose` at scale",
        "",
        f"Measured {date} on this machine (2 cores shared with other jobs), `--jobs {jobs}`, "
        "the full catalog's priced board types, up to `max` boards; the time is until "
        "the answer is proved (no Pareto front). `benchmarks/choose_scale.py` regenerates it.",
        "",
        "| model | target | minimise | max | sets | memory | target bound | after answer | solved "
        "| no solve | time to proof s | answer | price | throughput /s | energy mJ | proved |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        lines.append(
            f"| {r['model']} | {r['target']} | {r['minimise']} | {r['max_boards']} | "
            f"{r['sets']} | "
            f"{r['pruned_memory']} | {r['pruned_target']} | {r['after_answer']} | {r['solved']} | "
            f"{100 * float(r['pruned_fraction']):.2f} % | "  # type: ignore[arg-type]
            f"{float(r['seconds_to_proved_answer']):.1f} | "  # type: ignore[arg-type]
            f"{r['answer']} | ${float(r['price_usd']):.2f} | "  # type: ignore[arg-type]
            f"{float(r['throughput_per_s'] or 0):.2f} | "  # type: ignore[arg-type]
            f"{float(r['least_energy_mj'] or 0):.2f} | {r['proved']} |"  # type: ignore[arg-type]
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args()
    rows = []
    for model, target, minimise, max_boards in CASES:
        rows.append(run_case(model, target, minimise, max_boards, args.jobs))
        print(json.dumps(rows[-1]), flush=True)
    date = datetime.date.today().isoformat()
    out = ROOT / "benchmarks" / "results"
    (out / "choose_scale.json").write_text(
        json.dumps({"date": date, "jobs": args.jobs, "rows": rows}, indent=2)
    )
    (out / "choose_scale.md").write_text(markdown(rows, args.jobs, date))


if __name__ == "__main__":
    main()
