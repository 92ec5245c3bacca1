"""Layer splits (issue 27) on emulated STM32F405s: the planner's choice, its time, estimate vs run.

Two cases, each ``compile`` (library, the planner choosing the splits and their ``k``), ``make
EMULATOR=1`` per device, then one ``splitter bench --emulate --icount -n 1 --json``:

* ``tiny_cnn.onnx`` (float) on ``models/boards/split_tiny3.toml`` (three F405s, 72 KiB flash);
* ``mlperf_ad_autoencoder_int8.tflite`` on ``models/boards/split_ad4.toml`` (four, 84 KiB);
* ``dw_wide.onnx`` (float, a depthwise split) on ``models/boards/split_dw3.toml``;
* ``dw_wide_qdq.onnx`` (QDQ int8 ONNX, a depthwise split) on ``models/boards/split_dw_qdq4.toml``.

Per case: the splits (layer, k, devices, bytes their cuts carry), the planning time (wall, on the
machine as loaded when run), and per sub-model the estimated compute against the emulated run's,
per link the planned bytes against the bytes the bench counted; for a plan on an
operator-granularity chain, per layer the estimated instructions of its ops and of its compaction
``memmove`` s against the kernel table harness's counts (:func:`layer_lines`).

Usage: ``.venv/bin/python benchmarks/split_layer.py [MODEL ...]``; writes
``benchmarks/results/split_layer.md``. Given model names, only their cases are run and their
sections replaced (each section carries its own date); the other sections are kept.
"""

from __future__ import annotations

import datetime
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

from splitter.compile import CompileOptions, compile_model  # noqa: E402
from splitter.ir import Chain  # noqa: E402
from splitter.toolchain.build import run_make  # noqa: E402

CASES: tuple[tuple[str, str, dict[str, int]], ...] = (
    ("tiny_cnn.onnx", "split_tiny3.toml", {}),
    ("mlperf_ad_autoencoder_int8.tflite", "split_ad4.toml", {}),
    ("dw_wide.onnx", "split_dw3.toml", {}),
    ("dw_wide_qdq.onnx", "split_dw_qdq4.toml", {}),
    # k fixed at 3: slice shapes no chain the kernel table measured has (its split chains cut
    # dw in two), so every estimate of the split comes from the fits
    ("dw_wide_qdq.onnx", "split_dw_qdq4.toml", {"dw": 3}),
)
#: the kernel cost table's build an emulated F405 runs
BUILD = "M4F.dsp"
HEADER = [
    "# Layer splits on emulated STM32F405s",
    "",
    "Measured by `benchmarks/split_layer.py` (QEMU netduinoplus2, `-icount`, calibration none: "
    "the kernel cost table's estimate); each section gives its date.",
    "",
]


def heading(model: str, boards: str, split: dict[str, int]) -> str:
    """The case's section heading."""
    fixed = "".join(f" with --split-layer {k}:{n}" for k, n in split.items())
    return f"## {model} on {boards}{fixed}"


def run_case(model: str, boards: str, split: dict[str, int], work: Path) -> list[str]:
    """Compile, build, bench one case; its Markdown lines."""
    out = work / (Path(model).stem + "".join(f"_{k}{n}" for k, n in split.items()))
    start = time.perf_counter()
    result = compile_model(
        ROOT / "models" / model, ROOT / "models" / "boards" / boards, out,
        CompileOptions(force=True, split_layers=split),
    )  # fmt: skip
    seconds = time.perf_counter() - start
    for dev in json.loads((out / "firmware" / "wiring.json").read_text())["devices"]:
        run_make(out / "firmware" / dev["name"], emulator=True)
    proc = subprocess.run(
        [sys.executable, "-m", "splitter", "bench", str(out), "--emulate", "--icount", "-n", "1",
         "--json", "--target", str(ROOT / "models" / "boards" / boards)],
        capture_output=True, text=True, check=True, cwd=ROOT,
    )  # fmt: skip
    bench = json.loads(proc.stdout)
    today = datetime.date.today().isoformat()
    lines = [heading(model, boards, split), "", f"Measured {today}.", ""]
    lines += [f"- {e.describe()}" for e in result.manifest.layer_splits]
    lines += [
        f"- compile (plan over every k, slice, validate, firmware) {seconds:.1f} s; "
        f"timings {', '.join(f'{k} {v:.1f} s' for k, v in result.timings.items())}",
        f"- validation passed: {result.validation.passed if result.validation else 'skipped'}",
        "",
        "| sub-model | device | layers | estimated compute ms | measured ms | error % |",
        "|---:|---|---|---:|---:|---:|",
    ]
    predicted = {s["index"]: s["seconds"] for s in bench["estimate"]["submodels"]}
    subs = {s.index: s for s in result.manifest.submodels}
    for dev in bench["devices"]:
        for sub in dev["submodels"]:
            measured = sorted(sub["cycles"])[len(sub["cycles"]) // 2] / dev["clock_hz"]
            est, s = predicted[sub["index"]], subs[sub["index"]]
            lines.append(
                f"| {sub['index']} | {dev['device']} | {s.first}-{s.last} ({s.first_name}.."
                f"{s.last_name}) | {est * 1e3:.3f} | {measured * 1e3:.3f} "
                f"| {100 * (est - measured) / measured:+.1f} |"
            )
    lines += ["", "| link | planned bytes | counted by the bench |", "|---|---:|---:|"]
    for planned, got in zip(bench["estimate"]["links"], bench["links"], strict=True):
        lines.append(f"| {got['from']} -> {got['to']} | {planned['bytes']} | {got['bytes']} |")
    if result.manifest.layer_splits and result.chain.granularity == "op":
        lines += ["", *layer_lines(result.chain, work / "layers")]
    return [*lines, ""]


def layer_lines(chain: Chain, work: Path) -> list[str]:
    """Per layer of the plan's chain: the planner's instructions (``M4F.dsp``, the emulated
    F405's build) for its ops and for its compaction ``memmove`` s, against the counts of the
    kernel table's harness (``splitter.measure.kernel_table.measure_chain``: each layer alone
    under ``-icount``, a probe before each op and before the moves)."""
    from splitter.cost.kernels import moves_instructions, op_instructions
    from splitter.measure.kernel_table import MOVES_OP, SUBMODEL, layer_moves, measure_chain

    assert chain.graph is not None
    tensors, layout = chain.graph.tensors, chain.graph.layout or "NCHW"
    work.mkdir(parents=True, exist_ok=True)
    got: dict[tuple[int, str], float] = {}
    for s in measure_chain(chain, BUILD, work):
        if s.op != SUBMODEL:
            got[(s.layer, s.op)] = got.get((s.layer, s.op), 0.0) + s.instructions
    lines = [
        f"Per layer (instructions, build `{BUILD}`; measured: each layer alone in the kernel "
        "table's harness, a probe before each op and before the compaction moves):",
        "",
        "| layer | ops estimated | fit only | ops measured | error % | fit error % "
        "| moves (bytes) | moves estimated | moves measured |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for j, layer in enumerate(chain.layers):
        if not layer.ops:
            continue
        est = sum(op_instructions(op, tensors, layout, BUILD) for op in layer.ops)
        fit = sum(op_instructions(op, tensors, layout, BUILD, measured=False) for op in layer.ops)
        meas = sum(v for (k, op), v in got.items() if k == j and op != MOVES_OP)
        moved = layer_moves(chain, j)
        err, fit_err = (f"{100 * (e / meas - 1):+.1f}" if meas else "-" for e in (est, fit))
        nbytes = sum(n for _, _, n in moved)
        lines.append(
            f"| {layer.name} | {est:,.0f} | {fit:,.0f} | {meas:,.0f} | {err} | {fit_err} "
            f"| {len(moved)} ({nbytes:,}) "
            f"| {moves_instructions(moved, BUILD):,.0f} | {got.get((j, MOVES_OP), 0.0):,.0f} |"
        )
    return lines


def _sections(text: str) -> dict[str, list[str]]:
    """The ``## `` sections of a results page by heading (the header dropped)."""
    out: dict[str, list[str]] = {}
    current: list[str] | None = None
    for line in text.splitlines():
        if line.startswith("## "):
            current = out.setdefault(line, [])
        if current is not None:
            current.append(line)
    return out


def main() -> None:
    """Run the cases (all, or those named on the command line) and write the results page."""
    only = set(sys.argv[1:])
    target = ROOT / "benchmarks" / "results" / "split_layer.md"
    old = _sections(target.read_text()) if target.exists() else {}
    lines = list(HEADER)
    with tempfile.TemporaryDirectory() as tmp:
        for model, boards, split in CASES:
            if only and model not in only:
                lines += old.get(heading(model, boards, split), [])
                continue
            lines += run_case(model, boards, split, Path(tmp))
    target.write_text("\n".join(lines).rstrip() + "\n")
    print(target.read_text())


if __name__ == "__main__":
    main()
