"""What PEX partial execution costs in time: instructions of the same network run op by op and
with its channel loops on one emulated STM32F405 (QEMU netduinoplus2, ``-icount shift=0``).

The network is ``models/pex_irb_48.onnx`` quantised to int8 (QDQ, onnxruntime's
``quantize_static`` as tests/test_pex_plan.py does): in int8 its largest layer (119,808 B) fits
the F405's arena region run op by op, so both schedules run on the same board (in float32 only
the loops fit). Both are compiled (``--partial-execution off`` / ``on``), built and benched with
``splitter bench --emulate`` (SysTick at 168 MHz under ``-icount shift=0``: instructions =
ticks / 0.168, as benchmarks/kernels.py). Same MACs; the planner picks row loops here, which
call the ops' own tuned kernels one output row at a time (channel loops call the tuned
one-channel kernels of ``kernels_q8_pex.c``).

Then a network that fits only with partial execution: ``benchmarks/heldout/
mnv2_035_96_int8.tflite`` (MobileNetV2 0.35 at 96x96, int8, the real TensorFlow converter) on
two F405s with 16 KiB of RAM kept back each (``two_f405_ram16.toml``: no plan without loops),
compiled, built and benched emulated (``benchmarks/costs.py``'s ``plan_pair`` /
``measure_pair``), against the same network on two F405s with all their RAM (no loops needed,
none added): instructions per MAC of each and their ratio. And per loop kind, on the ``_dsp``
build (``M4F.dsp``): every loop of the model's looped chain as planned on those boards
(``plan_partial``: every loop that lowers a layer's RAM, row loops in bands of rows when that
plan fits) measured op by op under QEMU (``splitter.measure.kernel_table.
measure_chain``) against the same ops run whole: the ratio of their instructions (same MACs).

Usage: ``.venv/bin/python benchmarks/pex.py`` -> ``benchmarks/results/pex.{md,json}``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
TICKS_PER_INSTRUCTION = 0.168  # SysTick at the 168 MHz core clock / the 1 GHz icount clock
ONE_BOARD = '[link]\nbaud = 115200\n\n[[device]]\nname = "a"\nmcu = "STM32F405RG"\n'


def _splitter(*args: str) -> str:
    """Run ``python -m splitter ARGS`` from the repository root; its stdout (exit 0 required)."""
    cmd = [sys.executable, "-m", "splitter", *args]
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, check=False)
    if proc.returncode != 0:
        sys.exit(f"{' '.join(args[:2])}: {proc.stderr.strip()}")
    return proc.stdout


def quantise(work: Path) -> Path:
    """``pex_irb_48.onnx`` as QDQ int8 (per-channel weights, 8 seeded calibration inputs)."""
    from onnxruntime.quantization import (
        CalibrationDataReader,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    rng = np.random.default_rng(16)
    data = iter([rng.standard_normal((1, 3, 48, 48)).astype(np.float32) for _ in range(8)])

    class Reader(CalibrationDataReader):
        def get_next(self) -> dict[str, np.ndarray] | None:
            x = next(data, None)
            return None if x is None else {"input": x}

    pre, out = work / "pre.onnx", work / "pex_irb_48_qdq.onnx"
    quant_pre_process(str(ROOT / "models" / "pex_irb_48.onnx"), str(pre), skip_symbolic_shape=True)
    quantize_static(str(pre), str(out), Reader(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QInt8, weight_type=QuantType.QInt8,
                    per_channel=True)  # fmt: skip
    return out


def row(model: Path, boards: Path, mode: str, work: Path) -> dict[str, object]:
    """Compile with ``--partial-execution mode``, build, bench: RAM, MACs, instructions."""
    out = work / mode
    _splitter("compile", str(model), "--target", str(boards), "-o", str(out), "--force",
              "--partial-execution", mode)  # fmt: skip
    _splitter("build", str(out), "--emulator")
    bench = json.loads(_splitter("bench", str(out), "--emulate", "-n", "1", "--json",
                                 "--no-pipeline", "--timeout", "300"))  # fmt: skip
    plan = json.loads((out / "plan.json").read_text())
    ticks = sum(int(sub["cycles"][0]) for d in bench["devices"] for sub in d["submodels"])
    macs = sum(int(s["macs"]) for s in plan["submodels"])
    return {
        "mode": mode,
        "ram_bytes": max(int(s["ram_bytes"]) for s in plan["submodels"]),
        "loops": sum(
            len(s.get("partial_execution", {}).get("loops", [])) for s in plan["submodels"]
        ),
        "macs": macs,
        "instructions": round(ticks / TICKS_PER_INSTRUCTION),
        "instr_per_mac": round(ticks / TICKS_PER_INSTRUCTION / macs, 3),
    }


HELDOUT = ROOT / "benchmarks" / "heldout"
#: the network that fits only with loops, and its boards (benchmarks/heldout.py's finding)
FITS_ONLY_WITH_PEX = ("mnv2_035_96_int8.tflite", "two_f405_ram16.toml")
BUILD = "M4F.dsp"


def network(boards: Path, work: Path) -> dict[str, object]:
    """The held-out network compiled for ``boards`` (default ``--partial-execution auto``),
    built and benched emulated: loops, MACs, instructions per MAC."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import costs

    model = HELDOUT / FITS_ONLY_WITH_PEX[0]
    pair = costs.plan_pair(model, boards, work)
    if "rows" not in pair:
        sys.exit(f"{boards.name}: {pair.get('skipped')}")
    got = costs.measure_pair(work)
    if "ticks" not in got:
        sys.exit(f"{boards.name}: {got.get('skipped')}")
    ticks = sum(got["ticks"].values())
    macs = sum(int(r["macs"]) for r in pair["rows"])
    return {"boards": boards.name, "submodels": len(pair["rows"]),
            "loops": sum(int(r["pex_loops"]) for r in pair["rows"]), "macs": macs,
            "instructions": round(ticks / TICKS_PER_INSTRUCTION),
            "instr_per_mac": round(ticks / TICKS_PER_INSTRUCTION / macs, 3)}  # fmt: skip


def loop_kinds(work: Path) -> list[dict[str, object]]:
    """Per loop kind (channel, row), and for the whole network: the instructions of the
    held-out network's looped chain as the planner plans it on its boards (``plan_partial``:
    every loop that lowers a layer's RAM, row loops in bands of rows when that plan fits) and
    of the same ops
    run whole, each op and loop measured alone on :data:`BUILD` (``kernel_table.
    measure_chain``; a sub-model's own entry left out), and their MACs."""
    from splitter.cost.kernels import op_instructions
    from splitter.graph.chain import build_chain
    from splitter.hardware.boards import load_boards
    from splitter.importers import load_model
    from splitter.measure import kernel_table as kt
    from splitter.partition.partial import plan_partial

    chain = build_chain(load_model(HELDOUT / FITS_ONLY_WITH_PEX[0]).graph)
    looped, _plan = plan_partial(chain, load_boards(HELDOUT / FITS_ONLY_WITH_PEX[1]))
    whole = {
        s.op: s.instructions for s in kt.measure_chain(chain, BUILD, work) if s.op != kt.SUBMODEL
    }
    # ops the emulated F405 cannot hold run whole: the table's estimate (the network row only)
    tensors, layout = chain.graph.tensors, chain.graph.layout or "NHWC"  # type: ignore[union-attr]
    guess = {op.name: op_instructions(op, tensors, layout, BUILD)
             for layer in chain.layers for op in layer.ops if op.name not in whole}  # fmt: skip
    sums: dict[str, list[float]] = {}
    for s in kt.measure_chain(looped, BUILD, work):
        if s.op == kt.SUBMODEL:
            continue
        names: tuple[str, ...] = (s.op,)
        by = "op"
        if s.op.startswith(kt.LOOP):
            loop = next(lp for lp in looped.layers[s.layer].loops if kt.LOOP + lp.ops[0] == s.op)
            names, by = loop.ops, loop.by
        kinds = [by, "network"] if all(name in whole for name in names) else ["network"]
        for kind in kinds:
            acc = sums.setdefault(kind, [0, 0.0, 0.0])
            acc[0] += 1 if kind == by else 0
            acc[1] += s.instructions
            acc[2] += sum(whole.get(name, guess.get(name, 0.0)) for name in names)
    total = sum(layer.cost.macs for layer in chain.layers)
    estimated = f"{len(guess)} ({', '.join(sorted(guess))})"
    return [{"kind": by, "loops": int(n), "looped": round(a), "whole": round(b),
             "ratio": round(a / b, 3), "macs": total if by == "network" else None,
             "whole_estimated": estimated if by == "network" else None}
            for by, (n, a, b) in sorted(sums.items()) if by != "op"]  # fmt: skip


def main() -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        boards = work / "one.toml"
        boards.write_text(ONE_BOARD)
        model = quantise(work)
        for mode in ("off", "on"):
            rows.append(row(model, boards, mode, work))
            print(rows[-1])
        nets = [network(HELDOUT / FITS_ONLY_WITH_PEX[1], work / "pex")]
        print(nets)
        kinds = loop_kinds(work)
        print(kinds)
    RESULTS.mkdir(exist_ok=True)
    doc = {"pex_irb_48": rows, "fits_only_with_pex": nets, "loop_kinds": kinds}
    (RESULTS / "pex.json").write_text(json.dumps(doc, indent=2) + "\n")
    (RESULTS / "pex.md").write_text("\n".join(report(rows, nets, kinds)) + "\n")


def report(rows: list[dict[str, object]], nets: list[dict[str, object]],
           kinds: list[dict[str, object]]) -> list[str]:  # fmt: skip
    """The markdown of ``benchmarks/results/pex.md``."""
    lines = [
        f"# PEX partial execution on emulated STM32F405s ({time.strftime('%Y-%m-%d')})",
        "",
        "`benchmarks/pex.py`; instructions under QEMU -icount (not cycles), code for the",
        "Cortex-M4F with the DSP int8 kernels (`_dsp`, the loops' `kernels_q8_pex.c`).",
        "",
        "models/pex_irb_48.onnx quantised to QDQ int8 on one F405, run op by op and with the",
        "planner's loops (row loops here):",
        "",
        "| partial execution | arena B | loops | MACs | instructions | instructions / MAC |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['mode']} | {r['ram_bytes']} | {r['loops']} | {r['macs']} | {r['instructions']} "
        f"| {r['instr_per_mac']} |"
        for r in rows
    ]
    net = next(k for k in kinds if k["kind"] == "network")
    whole_ipm = float(str(net["whole"])) / float(str(net["macs"]))
    e2e = nets[0]
    lines += [
        "",
        f"A network that fits only with partial execution: `benchmarks/heldout/"
        f"{FITS_ONLY_WITH_PEX[0]}` on `{FITS_ONLY_WITH_PEX[1]}` (two F405s, 16 KiB kept back",
        "each: no plan without loops; its largest layer run whole needs more RAM than an F405",
        "has), compiled, built and benched emulated, one inference:",
        "",
        "| boards | sub-models | PEX loops | MACs | instructions | instructions / MAC |",
        "|---|---:|---:|---:|---:|---:|",
        f"| {e2e['boards']} | {e2e['submodels']} | {e2e['loops']} | {e2e['macs']} "
        f"| {e2e['instructions']} | {e2e['instr_per_mac']} |",
        "",
        "The same network without loops cannot run on an F405, so each op is measured alone",
        f"under QEMU ({BUILD}, `kernel_table.measure_chain`), and so is each op and loop of its",
        "looped chain as planned (every loop that lowers a layer's RAM, `plan_partial`; row",
        "loops in bands of rows when that plan fits): per loop kind, the loops against the",
        "same ops run whole (same MACs; only loops whose every op fits",
        "the emulator run whole), and the network's sum over every op and loop (the ops too",
        f"large for the emulator run whole: {net['whole_estimated']}, at the kernel table's",
        "estimate):",
        "",
        "| loop kind | loops | instructions, looped | instructions, ops run whole | ratio |",
        "|---|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {k['kind']} | {k['loops'] if k['kind'] != 'network' else ''} | {k['looped']} "
        f"| {k['whole']} | {k['ratio']} |"
        for k in kinds
    ]
    ratio = float(str(e2e["instr_per_mac"])) / whole_ipm
    lines += [
        "",
        f"Op by op without loops: {whole_ipm:.3f} instructions per MAC; the looped chain op",
        f"by op: {float(str(net['looped'])) / float(str(net['macs'])):.3f} "
        f"(**{net['ratio']}x**); the planned network with its loops, end to end (sub-model",
        f"overhead and all): {e2e['instr_per_mac']}, {ratio:.2f}x the op-by-op figure.",
    ]
    return lines


if __name__ == "__main__":
    main()
