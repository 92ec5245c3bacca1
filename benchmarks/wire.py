"""Link bytes: payload vs bytes on the wire, predicted vs counted; host I/O in the latency.

Two parts, written to benchmarks/results/wire.md and wire.json:

1. planned (no boards): for every (model, board file) below, ``splitter plan``'s transfers,
   payload vs bytes on the wire (splitter/cost/wire.py), the overhead in %, and the host's input
   and output transfer time against the latency with and without it (``--no-host-io``);
2. exhaustive check: the solvers leave the TIMING records out (their count depends on the
   boundary's position); for the small cases below every assignment whose firmware fits is
   evaluated with the records and host I/O, and the best is compared with the planner's plan;
3. counted (``--measure``): the end-to-end builds on emulated boards (compile + ``make
   EMULATOR=1``), one ``splitter bench --emulate`` run each: the bytes counted on every link
   (board to board by the fault proxy, host links by a byte counter) against the prediction.

Usage: ``.venv/bin/python benchmarks/wire.py [--measure]``.
"""

from __future__ import annotations

import itertools
import json
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from splitter.hardware.boards import load_boards  # noqa: E402
from splitter.importers import load_chain  # noqa: E402
from splitter.partition.planner import build_manifest, plan_chain  # noqa: E402

MODELS, BOARDS = ROOT / "models", ROOT / "models" / "boards"
PLANNED = (
    ("tiny_cnn.onnx", "e2e_tiny2.toml"),
    ("kws_cnn.onnx", "e2e_kws3.toml"),
    ("kws_ds_cnn.onnx", "e2e_dscnn2.toml"),
    ("resnet_tv_28_qdq.onnx", "e2e_qdq2.toml"),
    ("mobilenet_v1_025_64.onnx", "e2e_mobilenet64.toml"),
    ("mlperf_kws_ds_cnn_int8.tflite", "mlperf_kws2.toml"),
    ("mlperf_ic_resnet8_int8.tflite", "mlperf_ic2.toml"),
    ("mlperf_vww_mobilenet_v1_025_int8.tflite", "mlperf_vww2.toml"),
    ("mlperf_ad_autoencoder_int8.tflite", "mlperf_ad2.toml"),
)
EXHAUSTIVE = (
    ("tiny_cnn.onnx", "e2e_tiny2.toml"),
    ("kws_cnn.onnx", "e2e_kws3.toml"),
    ("resnet_tv_28_qdq.onnx", "e2e_qdq2.toml"),
    ("mlperf_ad_autoencoder_int8.tflite", "mlperf_ad2.toml"),
    ("tiny_cnn.onnx", "m0_m4_m7.toml"),
    ("kws_cnn.onnx", "m0_m4_m7.toml"),
    ("tiny_cnn.onnx", "three_small_middle.toml"),
)
MEASURED = (
    ("tiny_cnn.onnx", "e2e_tiny2.toml"),
    ("kws_cnn.onnx", "e2e_kws3.toml"),
    ("kws_ds_cnn.onnx", "e2e_dscnn2.toml"),
)


def planned(model: str, boards_file: str) -> dict[str, Any]:
    """One plan's transfers (payload, wire) and its latency with and without host I/O."""
    boards, chain = load_boards(BOARDS / boards_file), load_chain(MODELS / model)
    out: dict[str, Any] = {"model": model, "boards": boards_file}
    for host_io in (True, False):
        plan = plan_chain(chain, boards, host_io=host_io)
        m = build_manifest(
            plan, chain, boards, model_path=MODELS / model, boards_path=BOARDS / boards_file,
            host_io=host_io,
        )  # fmt: skip
        out["latency_s" if host_io else "latency_no_host_io_s"] = m.latency_s
        if host_io:
            io = m.host_io
            out["host_io_s"] = io.seconds
            transfers = [("host", m.submodels[0].device, io.input.bytes, io.input.wire_bytes)]
            for k, s in enumerate(m.submodels):
                to = m.submodels[k + 1].device if k + 1 < len(m.submodels) else "host"
                transfers.append((s.device, to, s.out_bytes, s.wire_bytes))
            out["transfers"] = [
                {"from": a, "to": b, "payload": p, "wire": w} for a, b, p, w in transfers
            ]
    return out


def exhaustive(model: str, boards_file: str) -> list[dict[str, Any]]:
    """Per objective: the planner's plan against the best of every assignment that fits."""
    from splitter.ir import Plan, SubModel
    from splitter.partition.planner import _overflows, chain_problem
    from splitter.partition.problem import better, evaluate

    boards, chain = load_boards(BOARDS / boards_file), load_chain(MODELS / model)
    problem = chain_problem(chain, boards, upper=False)
    rows = []
    for objective in ("latency", "throughput"):
        plan = plan_chain(chain, boards, objective)
        best: tuple[float, int, tuple[int, ...]] | None = None
        for a in itertools.product(range(problem.d), repeat=problem.n):
            ev = evaluate(problem, a)
            if not ev.feasible:
                continue
            subs = tuple(SubModel(k, d, f, last) for k, (d, f, last) in enumerate(ev.submodels))
            if _overflows(chain, boards, Plan(objective, "fs", True, 1, 0.0, a, subs, 0, 0, 0)):
                continue
            cand = (ev.value(objective), len(subs), a)
            if best is None or better(*cand, *best):
                best = cand
        assert best is not None
        rows.append(
            {"model": model, "boards": boards_file, "objective": objective,
             "assignments": problem.d**problem.n,
             "plan": evaluate(problem, plan.assignment).value(objective), "best": best[0],
             "same": tuple(plan.assignment) == best[2]}
        )  # fmt: skip
    return rows


def measured(model: str, boards_file: str, tmp: Path) -> dict[str, Any]:
    """Emulated inferences (up to 3, until one has no retransmission): counted bytes per link
    and direction against the prediction (tests/test_wire_bytes.py's helpers)."""
    from contextlib import ExitStack

    from test_e2e_support import compile_and_build
    from test_wire_bytes import one_counted_run, predicted_bytes

    from splitter.bench.runner import BenchConfig, open_session, random_input
    from splitter.device.host import to_wire
    from splitter.manifest import read_manifest

    out = compile_and_build(model, boards_file, tmp / model.split(".")[0])
    want, _ = predicted_bytes(out)
    plan = read_manifest(out)
    x = to_wire(random_input(plan.input, 0))
    runs = []
    with ExitStack() as stack:
        s = open_session(stack, out, BenchConfig(runs=1, emulate=True, icount=False), plan)
        for _ in range(3):
            runs.append(one_counted_run(s, x, plan.output.nbytes))
            if runs[-1][1] == 0:
                break
    got = runs[-1][0]
    rows = [
        {"from": a, "to": b, "predicted": n, "counted": got[(a, b)]} for (a, b), n in want.items()
    ]
    return {"model": model, "boards": boards_file, "directions": rows,
            "resent_per_run": [r[1] for r in runs]}  # fmt: skip


def markdown(
    plans: list[dict[str, Any]], checks: list[dict[str, Any]], counts: list[dict[str, Any]]
) -> str:
    """The results page."""
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    lines = [f"# Link bytes: payload vs wire ({day}, `benchmarks/wire.py`)", "",
             "Wire = payload + framing (10 B per frame), chunk headers (12 B per chunk of at most "
             "1012 B), the TIMING frame with its 12 B records, and one 10 B ACK per frame back "
             "(docs/protocol.md; splitter/cost/wire.py); 115200 baud 8N1 (10 bits per byte).", "",
             "## Planned transfers", "",
             "| model | boards | transfer | payload B | wire B | overhead % |",
             "|---|---|---|---:|---:|---:|"]  # fmt: skip
    for p in plans:
        for t in p["transfers"]:
            over = 100.0 * (t["wire"] - t["payload"]) / t["payload"] if t["payload"] else 0.0
            lines.append(f"| {p['model']} | {p['boards']} | {t['from']} -> {t['to']} | "
                         f"{t['payload']} | {t['wire']} | {over:+.1f} |")  # fmt: skip
    lines += ["", "## Host I/O in the latency", "",
              "| model | boards | latency s | without host I/O s | host I/O s | share % |",
              "|---|---|---:|---:|---:|---:|"]  # fmt: skip
    for p in plans:
        share = 100.0 * p["host_io_s"] / p["latency_s"]
        cells = (p["latency_s"], p["latency_no_host_io_s"], p["host_io_s"])
        nums = " | ".join(f"{x:.4f}" for x in cells)
        lines.append(f"| {p['model']} | {p['boards']} | {nums} | {share:.1f} |")
    lines += ["", "## The planner's plan against every assignment (TIMING records included)", "",
              "Value: latency (s) or waiting time (s) with the TIMING records and host I/O, as "
              "plan.json reports them; only assignments whose firmware fits.", "",
              "| model | boards | objective | assignments | plan | best | same plan |",
              "|---|---|---|---:|---:|---:|---|"]  # fmt: skip
    for c in checks:
        same = "yes" if c["same"] else "NO"
        head = f"| {c['model']} | {c['boards']} | {c['objective']} | {c['assignments']}"
        lines.append(f"{head} | {c['plan']:.6f} | {c['best']:.6f} | {same} |")
    if counts:
        lines += ["", "## Counted on emulated boards (one inference without retransmission)",
                  "", "Per direction (a transfer's frames one way, its ACKs the other): board-to-"
                  "board links counted by the fault proxy (splitter/bench/faults.py), host links "
                  "by a byte counter on the host's transport. Frames sent again per run (a "
                  "loaded machine can starve a QEMU past its peer's ACK timeout) are listed; "
                  "the counts are those of the last run, which had none.", "",
                  "| model | from -> to | predicted B | counted B | frames sent again per run |",
                  "|---|---|---:|---:|---|"]  # fmt: skip
        for c in counts:
            for r in c["directions"]:
                lines.append(f"| {c['model']} | {r['from']} -> {r['to']} | {r['predicted']} | "
                             f"{r['counted']} | {c['resent_per_run']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run, print and write benchmarks/results/wire.{md,json}."""
    plans = [planned(m, b) for m, b in PLANNED]
    checks = [row for m, b in EXHAUSTIVE for row in exhaustive(m, b)]
    counts: list[dict[str, Any]] = []
    if "--measure" in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            counts = [measured(m, b, Path(tmp)) for m, b in MEASURED]
    text = markdown(plans, checks, counts)
    results = ROOT / "benchmarks" / "results"
    (results / "wire.md").write_text(text)
    data = {"planned": plans, "exhaustive": checks, "counted": counts}
    (results / "wire.json").write_text(json.dumps(data, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
