"""Time ``inspect`` + ``plan`` of the nine onnx-wheel zoo graphs and ``compile`` of four of them.

The graphs are ``onnx/backend/test/data/light/light_*.onnx`` (opset 9, upgraded on load); the
boards are ``models/boards/zoo_large.toml``. ``inspect + plan`` = ``load_chain`` + the ``dp``
latency plan, in process; ``compile`` = ``compile_model`` without firmware on the graph with
seeded random weights (``tests/test_zoo_graphs.py``'s ``random_weights``), validation included.
One run each (AlexNet, the first, also pays the library imports: a few tenths of a second).

Usage: ``.venv/bin/python benchmarks/zoo.py``; writes ``benchmarks/results/zoo.md``.
"""

from __future__ import annotations

import datetime
import sys
import tempfile
import time
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from test_zoo_graphs import BOARDS, COMPILED, ZOO, random_weights, zoo_path  # noqa: E402

from splitter.compile import CompileOptions, compile_model, make_plan  # noqa: E402
from splitter.hardware.boards import load_boards  # noqa: E402
from splitter.importers import load_chain  # noqa: E402


def main() -> None:
    rows = ["| graph | layers | weights (MB) | inspect + plan (s) | compile, validated (s) |",
            "|---|---|---|---|---|"]  # fmt: skip
    boards = load_boards(BOARDS)
    for name in ZOO:
        start = time.perf_counter()
        chain = load_chain(zoo_path(name))
        make_plan(chain, boards, CompileOptions())
        planned = time.perf_counter() - start
        flash = sum(c.flash for c in chain.costs) / 1e6
        compiled = "-"
        if name in COMPILED:
            with tempfile.TemporaryDirectory() as tmp:
                model = Path(tmp) / f"{name}.onnx"
                random_weights(zoo_path(name), model)
                start = time.perf_counter()
                compile_model(model, BOARDS, Path(tmp) / "out", CompileOptions(firmware=False))
                compiled = f"{time.perf_counter() - start:.1f}"
        rows.append(f"| {name} | {len(chain)} | {flash:.1f} | {planned:.2f} | {compiled} |")
        print(rows[-1], flush=True)
    day = datetime.date.today().isoformat()
    text = [f"# onnx-wheel zoo graphs (onnx {onnx.__version__}), measured {day}", "", *rows, ""]
    (ROOT / "benchmarks" / "results" / "zoo.md").write_text("\n".join(text))


if __name__ == "__main__":
    main()
