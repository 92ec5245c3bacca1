"""Link bytes: payload vs bytes on the wire, predicted vs counted; host I/O in the latency.

Two parts, written to benchmarks/results/wire.md and wire.json:

1. planned (no boards): for every (model, board file) below, ``splitter plan``'s transfers,
   payload vs bytes on the wire (splitter/cost/wire.py), the overhead in %, and the host's input
   and output transfer time against the latency with and without it (``--no-host-io``);
2. counted (``--measure``): the end-to-end builds on emulated boards (compile + ``make
   EMULATOR=1``), one ``splitter bench --emulate`` run each: the bytes counted on every link
   (board to board by the fault proxy, host links by a byte counter) against the prediction.

Usage: ``.venv/bin/python benchmarks/wire.py [--measure]``.
"""

from __future__ import annotations

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
from splitter.partition.report import build_manifest, plan_chain  # noqa: E402

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


def measured(model: str, boards_file: str, tmp: Path) -> dict[str, Any]:
    """One emulated bench run: counted bytes per link against the estimate's."""
    from test_e2e_support import compile_and_build

    from splitter.bench.runner import BenchConfig, bench

    out = compile_and_build(model, boards_file, tmp / model.split(".")[0])
    result = bench(out, BenchConfig(runs=1, warmup=1, emulate=True, pipeline=False))
    rows = []
    for got, est in zip(result["links"], result["estimate"]["links"], strict=True):
        rows.append(
            {"from": got["from"], "to": got["to"], "payload": got["bytes"],
             "predicted": est["wire_bytes"], "counted": got["wire_bytes"][0],
             "by": got["measured_by"]}
        )  # fmt: skip
    return {"model": model, "boards": boards_file, "links": rows}


def markdown(plans: list[dict[str, Any]], counts: list[dict[str, Any]]) -> str:
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
    if counts:
        lines += ["", "## Counted on emulated boards (one inference, `splitter bench --emulate`)",
                  "", "Board-to-board links counted by the fault proxy (splitter/bench/faults.py), "
                  "host links by a byte counter on the host's transport.", "",
                  "| model | link | payload B | predicted wire B | counted B | by |",
                  "|---|---|---:|---:|---:|---|"]  # fmt: skip
        for c in counts:
            for r in c["links"]:
                lines.append(f"| {c['model']} | {r['from']} -> {r['to']} | {r['payload']} | "
                             f"{r['predicted']:g} | {r['counted']} | {r['by']} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    """Run, print and write benchmarks/results/wire.{md,json}."""
    plans = [planned(m, b) for m, b in PLANNED]
    counts: list[dict[str, Any]] = []
    if "--measure" in sys.argv[1:]:
        with tempfile.TemporaryDirectory() as tmp:
            counts = [measured(m, b, Path(tmp)) for m, b in MEASURED]
    text = markdown(plans, counts)
    results = ROOT / "benchmarks" / "results"
    (results / "wire.md").write_text(text)
    data = {"planned": plans, "counted": counts}
    (results / "wire.json").write_text(json.dumps(data, indent=1) + "\n")
    print(text)


if __name__ == "__main__":
    main()
