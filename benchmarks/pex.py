"""What PEX partial execution costs in time: instructions of the same network run op by op and
with its channel loops on one emulated STM32F405 (QEMU netduinoplus2, ``-icount shift=0``).

The network is ``models/pex_irb_48.onnx`` quantised to int8 (QDQ, onnxruntime's
``quantize_static`` as tests/test_pex_plan.py does): in int8 its largest layer (119,808 B) fits
the F405's arena region run op by op, so both schedules run on the same board (in float32 only
the loops fit). Both are compiled (``--partial-execution off`` / ``on``), built and benched with
``splitter bench --emulate`` (SysTick at 168 MHz under ``-icount shift=0``: instructions =
ticks / 0.168, as benchmarks/kernels.py). Same MACs; the loops call the generic int8 kernels
once per channel (no DSP variant, no im2col) where the ops run whole use the tuned ones.

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
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "pex.json").write_text(json.dumps(rows, indent=2) + "\n")
    lines = [
        f"# PEX partial execution on one emulated STM32F405 ({time.strftime('%Y-%m-%d')})",
        "",
        "`benchmarks/pex.py`: models/pex_irb_48.onnx quantised to QDQ int8, run op by op and with",
        "its channel loops; instructions under QEMU -icount (not cycles).",
        "",
        "| partial execution | arena B | loops | MACs | instructions | instructions / MAC |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    lines += [
        f"| {r['mode']} | {r['ram_bytes']} | {r['loops']} | {r['macs']} | {r['instructions']} "
        f"| {r['instr_per_mac']} |"
        for r in rows
    ]
    (RESULTS / "pex.md").write_text("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
