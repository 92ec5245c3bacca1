"""Solver benchmark: wall time, nodes and proof of every solver on thesis and synthetic instances.

Writes benchmarks/results/solvers.md and solvers.json.
Run: ``.venv/bin/python benchmarks/solvers.py``
(``--quick`` skips the largest synthetic instances).

Instances:
* the eight thesis profiles (``thesis_profiles.json``) on a device pair from the catalog,
  ``bits_per_byte = 8`` as in the thesis;
* synthetic CNN-like chains, n = 50, 200, 1000 layers on d = 2, 4, 8 catalog devices (seeded):
  flash per layer log-uniform, total flash 1.5x the fastest device's flash so that device's flash
  binds; RAM below every device's; MACs log-uniform; output bytes log-uniform;
* throughput n = 60, d = 4 (the issue's target);
* MobileNet v1 0.30 over four boards (H743ZI + F446RE + F401RE + H723ZG), both objectives: the
  instance where ``bnb`` alone needs minutes and CP-SAT 0.1 s (issue 17).
Solvers that would refuse (fs above its limit, ds above its node estimate) or that a time limit
stops are recorded as such.

The portfolio check: on every instance and objective, ``auto``'s wall time must be at most
``AUTO_FACTOR`` times the fastest exact solver's that proved optimality, plus ``AUTO_SLACK_S``
(timer and scheduling resolution: the fastest answers take 0.2-0.5 ms). The table shows the
ratio; ``--check`` exits 1 when a row fails.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from splitter.errors import SolverError  # noqa: E402
from splitter.hardware.catalog import get_part  # noqa: E402
from splitter.importers import load_chain  # noqa: E402
from splitter.ir import Boards, Device, LayerCost, LinkSpec  # noqa: E402
from splitter.partition import SOLVERS, make_problem, solve  # noqa: E402
from splitter.partition.ds import DS_LIMIT, ds_node_estimate  # noqa: E402
from splitter.partition.fs import FS_LIMIT  # noqa: E402

PROFILES = ROOT / "models" / "profiles" / "thesis_profiles.json"
THESIS_PAIRS = {
    "mobilenet_v1_025": ("STM32H743ZI", "STM32F446RE"),
    "mobilenet_v1_030": ("STM32H743ZI", "STM32F401RE"),
    "mobilenet_v1_035": ("STM32H743ZI", "STM32L4R5ZI"),
    "yamnet_256": ("STM32H723ZG", "STM32L4R5ZI"),
    "voxceleb": ("STM32H723ZG", "STM32F446RE"),
    "kws_cnn": ("STM32L433RC", "STM32L412KB"),
    "kws_ds_cnn": ("STM32F446RE", "STM32L412KB"),
    "tiny_cnn": ("STM32G071RB", "STM32G071RB"),
}
SYNTH_PARTS = (
    "STM32H743ZI", "STM32F446RE", "STM32L4R5ZI", "STM32F401RE",
    "STM32H723ZG", "STM32L452RE", "STM32L433RC", "STM32G071RB",
)  # fmt: skip
FOUR_BOARDS = ("STM32H743ZI", "STM32F446RE", "STM32F401RE", "STM32H723ZG")
TIME_LIMIT = 10.0
REPEATS = 3
#: runs when the first takes under FAST_S seconds: on a shared 2-core machine one scheduling
#: delay of tens of ms decides a median of 3 such runs (2026-11-24: auto's ratio on n=50 d=8
#: measured 2.35 and 2.9 in two full runs, 1.2-1.5 when re-timed alone)
FAST_REPEATS = 7
FAST_S = 0.1
EXACT = ("fs", "bnb", "dp", "cpsat")
AUTO_FACTOR = 2.0
AUTO_SLACK_S = 0.001
LOAD_AT_START = os.getloadavg()[0]


def device(name: str, mcu: str, flash_bytes: int | None = None) -> Device:
    part = get_part(mcu)
    return Device(
        name=name,
        part=part,
        flash_bytes=flash_bytes if flash_bytes is not None else round(part.flash_kib * 1024),
        ram_bytes=round(part.ram_kib * 1024),
        clock_hz=part.clock_mhz * 1e6,
        cpm=part.cpm,
    )


def thesis_instances() -> list[tuple[str, list[LayerCost], Boards]]:
    out = []
    for model, (a, b) in THESIS_PAIRS.items():
        chain = load_chain(f"{PROFILES}#{model}")
        flash = 58 * 1024 if model == "tiny_cnn" else None  # the thesis's "-70 KB" reserve
        boards = Boards((device("a", a, flash), device("b", b, flash)), LinkSpec(115200, 8))
        out.append((f"{model} ({a}+{b})", list(chain.costs), boards))
    return out


def four_board_instance() -> tuple[str, list[LayerCost], Boards]:
    """MobileNet v1 0.30 (thesis profile) over four catalog boards, 8N1 framing."""
    chain = load_chain(f"{PROFILES}#mobilenet_v1_030")
    devs = tuple(device(f"d{i}", part) for i, part in enumerate(FOUR_BOARDS))
    return (
        f"mobilenet_v1_030 ({'+'.join(FOUR_BOARDS)})",
        list(chain.costs),
        Boards(devs, LinkSpec(115200, 10)),
    )


def synthetic(n: int, d: int, seed: int = 1) -> tuple[str, list[LayerCost], Boards]:
    rng = random.Random(seed * 1000 + n * 10 + d)
    costs = [
        LayerCost(
            flash=int(10 ** rng.uniform(2, 4.5)),
            ram=int(10 ** rng.uniform(3, 4.4)),
            macs=int(10 ** rng.uniform(4, 6.5)),
            out_bytes=int(10 ** rng.uniform(2, 4)),
        )
        for _ in range(n)
    ]
    total = sum(c.flash for c in costs)
    devs = [device(f"d{i}", SYNTH_PARTS[i]) for i in range(d)]
    fastest = min(range(d), key=lambda i: devs[i].cpm / devs[i].clock_hz)
    scale = 1.5 * devs[fastest].flash_bytes / total
    costs = [LayerCost(max(0, int(c.flash * scale)), c.ram, c.macs, c.out_bytes) for c in costs]
    if sum(c.flash for c in costs) > sum(dv.flash_bytes for dv in devs):
        costs = [LayerCost(c.flash // 2, c.ram, c.macs, c.out_bytes) for c in costs]
    return f"synthetic n={n} d={d}", costs, Boards(tuple(devs), LinkSpec(115200, 10))


def run_one(name: str, costs: list[LayerCost], boards: Boards, objective: str, solver: str) -> dict:
    problem = make_problem(costs, boards)
    row: dict = {"instance": name, "n": problem.n, "d": problem.d, "objective": objective,
                 "solver": solver}  # fmt: skip
    if solver == "fs" and problem.d**problem.n > FS_LIMIT:
        return {**row, "status": "refused (d^n above limit)"}
    if solver == "ds" and ds_node_estimate(problem.n, problem.d) > DS_LIMIT:
        return {**row, "status": "refused (node estimate above limit)"}
    options = {"time_limit": TIME_LIMIT} if solver in ("cpsat", "bnb", "dp", "auto") else {}
    walls = []
    repeats = REPEATS
    while len(walls) < repeats:  # the median; one run when it takes over a second
        start = time.perf_counter()
        try:
            plan = solve(problem, objective, solver, **options)
        except SolverError as exc:
            return {**row, "status": f"error: {exc}"}
        walls.append(time.perf_counter() - start)
        if walls[-1] > 1.0:
            break
        if len(walls) == 1 and walls[0] < FAST_S:
            repeats = FAST_REPEATS
    wall = sorted(walls)[len(walls) // 2]
    value = plan.latency_s if objective == "latency" else plan.throughput_per_s
    return {**row, "status": "ok", "wall_s": wall, "nodes": plan.nodes, "optimal": plan.optimal,
            "value": value, "gap": plan.gap, "picked": plan.solver}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="skip n = 1000")
    ap.add_argument("--check", action="store_true", help="exit 1 unless auto is within 2x")
    args = ap.parse_args()
    rows = []
    for name, costs, boards in [*thesis_instances(), four_board_instance()]:
        for objective in ("latency", "throughput"):
            for solver in ("fs", "ds", "bnb", "dp", "cpsat", "auto"):
                if objective not in SOLVERS.get(solver, (None, ("latency", "throughput")))[1]:
                    continue
                rows.append(run_one(name, costs, boards, objective, solver))
                print(rows[-1], flush=True)
                write(rows)
    sizes = [(n, d) for n in (50, 200, 1000) for d in (2, 4, 8) if not (args.quick and n == 1000)]
    name, costs, boards = synthetic(60, 4)
    for solver in ("ds", "bnb", "cpsat", "auto"):
        rows.append(run_one(name, costs, boards, "throughput", solver))
        print(rows[-1], flush=True)
        write(rows)
    for n, d in sizes:
        name, costs, boards = synthetic(n, d)
        for solver in ("ds", "dp", "cpsat", "auto"):
            rows.append(run_one(name, costs, boards, "latency", solver))
            print(rows[-1], flush=True)
            write(rows)
    write(rows)
    failed = [r for r in auto_checks(rows) if not r["ok"]]
    for r in failed:
        print(f"auto too slow: {r}", file=sys.stderr)
    if args.check and failed:
        sys.exit(1)


def auto_checks(rows: list[dict]) -> list[dict]:
    """Per instance and objective: auto's wall time against the fastest proved exact solver."""
    checks = []
    for r in rows:
        if r["solver"] != "auto" or r["status"] != "ok":
            continue
        peers = [
            p for p in rows
            if p["instance"] == r["instance"] and p["objective"] == r["objective"]
            and p["solver"] in EXACT and p["status"] == "ok" and p["optimal"]
        ]  # fmt: skip
        if not peers:
            continue
        best = min(peers, key=lambda p: p["wall_s"])
        limit = AUTO_FACTOR * best["wall_s"] + AUTO_SLACK_S
        checks.append({"instance": r["instance"], "objective": r["objective"],
                       "auto_s": r["wall_s"], "fastest": best["solver"],
                       "fastest_s": best["wall_s"], "ratio": r["wall_s"] / best["wall_s"],
                       "ok": r["wall_s"] <= limit and r["optimal"]})  # fmt: skip
    return checks


def write(rows: list[dict]) -> None:
    out = ROOT / "benchmarks" / "results"
    out.mkdir(parents=True, exist_ok=True)
    checks = auto_checks(rows)
    (out / "solvers.json").write_text(json.dumps({"rows": rows, "auto_checks": checks}, indent=1))
    lines = [
        "# Solver benchmark (benchmarks/solvers.py)",
        "",
        f"Measured {time.strftime('%Y-%m-%d')}; machine: 2 cores shared with other jobs (load "
        f"average {LOAD_AT_START:.1f} at the start). Time limit {TIME_LIMIT:.0f} s for "
        "bnb/cpsat/dp/auto; wall time is the "
        f"median of {REPEATS} runs ({FAST_REPEATS} when the first takes under "
        f"{FAST_S * 1e3:g} ms, one run when it takes over 1 s). "
        "`auto` picks: " + ", ".join(sorted({r["picked"] for r in rows if r.get("picked")})) + ".",
        "",
        "| instance | objective | solver | status | wall s | nodes | proved optimal | value |",
        "|---|---|---|---|---:|---:|---|---:|",
    ]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['instance']} | {r['objective']} | {r['solver']} | {r['status']} "
                         "| | | | |")  # fmt: skip
            continue
        solver = r["solver"] + (f" ({r['picked']})" if r["solver"] == "auto" else "")
        opt = "yes" if r["optimal"] else ("no" + (f", gap {r['gap']:.2%}" if r["gap"] else ""))
        lines.append(
            f"| {r['instance']} | {r['objective']} | {solver} | ok | {r['wall_s']:.4f} | "
            f"{r['nodes']} | {opt} | {r['value']:.6f} |"
        )
    lines += [
        "",
        f"## auto against the fastest exact solver (limit {AUTO_FACTOR:g}x + "
        f"{AUTO_SLACK_S * 1e3:g} ms)",
        "",
        "| instance | objective | auto s | fastest exact | its s | ratio | within limit |",
        "|---|---|---:|---|---:|---:|---|",
    ]
    for c in checks:
        lines.append(
            f"| {c['instance']} | {c['objective']} | {c['auto_s']:.4f} | {c['fastest']} "
            f"| {c['fastest_s']:.4f} | {c['ratio']:.2f} | {'yes' if c['ok'] else 'NO'} |"
        )
    (out / "solvers.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
