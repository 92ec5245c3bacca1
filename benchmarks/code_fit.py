"""How close the planner's firmware code figure is to the real ELF, over every plan that fits.

For every model in ``models/`` and every board file in ``models/boards/``, the plan (if it fits:
the defaults, PEX loops where no plan fits without them, else ``--granularity auto``'s op chain,
as ``tests/test_firmware_fit.py`` sweeps) is compiled and every device's part firmware built
with arm-none-eabi-gcc; the table lists the plan's ``code_bytes`` against the ELF's code
(``.isr_vector`` + ``.text`` + ``.rodata`` + ``.data``), and the runtime RAM against ``.data``
+ ``.bss`` + the 2 KiB stack. Writes
``benchmarks/results/code_fit.md``. The assertions are in ``tests/test_firmware_fit.py``.

Usage: ``python benchmarks/code_fit.py`` (a few minutes: every device is built).
"""

from __future__ import annotations

import datetime
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from splitter.compile import CompileOptions, compile_model  # noqa: E402
from splitter.errors import SplitterError  # noqa: E402
from splitter.hardware.boards import load_boards  # noqa: E402
from splitter.importers import load_chain  # noqa: E402
from splitter.ir import Chain  # noqa: E402
from splitter.manifest import read_manifest  # noqa: E402
from splitter.partition.granularity import auto_granularity  # noqa: E402
from splitter.partition.partial import plan_partial  # noqa: E402
from splitter.toolchain.build import build_all  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results" / "code_fit.md"


def _fitting_granularity(chain: Chain, path: Path) -> str | None:
    """``"supernode"`` when the defaults plan ``chain`` on ``path`` (PEX loops if needed), else
    ``"auto"`` when ``--granularity auto``'s op chain plans, else ``None``."""
    boards = load_boards(path)
    for granularity, candidate in (("supernode", chain), ("auto", None)):
        if candidate is None:
            candidate = auto_granularity(chain, boards)
            if candidate is chain:
                return None
        try:
            plan_partial(candidate, boards, "auto")
        except SplitterError:
            continue
        return granularity
    return None


def main() -> None:
    """Build every fitting plan and write the table."""
    rows = []
    models = sorted([*(ROOT / "models").glob("*.onnx"), *(ROOT / "models").glob("*.tflite")])
    with tempfile.TemporaryDirectory() as tmp:
        for model in models:
            chain = load_chain(model)
            for boards in sorted((ROOT / "models" / "boards").glob("*.toml")):
                granularity = _fitting_granularity(chain, boards)
                if granularity is None:
                    continue
                out = Path(tmp) / f"{model.stem}-{boards.stem}"
                opts = CompileOptions(validate=False, granularity=granularity)
                try:
                    result = compile_model(model, boards, out, opts)
                except SplitterError:
                    continue  # firmware refused at compile (baud, routing, ops)
                if not result.firmware.startswith("generated"):
                    continue
                manifest = read_manifest(out)
                for b in build_all(out, emulator=False):
                    d = manifest.device(b.device)
                    err = (b.code_bytes - d.code_bytes) / b.code_bytes
                    rows.append(
                        f"| {model.name} | {boards.stem} | {b.device} ({b.part}) | "
                        f"{d.code_bytes} | {b.code_bytes} | {err:+.2%} | "
                        f"{d.runtime_ram_bytes} | {b.runtime_ram_bytes} |"
                    )
                    print(rows[-1], flush=True)
    worst = max(abs(float(r.split("|")[6].strip().rstrip("%"))) for r in rows)
    text = [
        f"# Planned vs built firmware code ({datetime.date.today()})",
        "",
        f"{len(rows)} device images; largest code gap {worst:.2f} %.",
        "",
        "| model | boards | device | code plan | code ELF | gap | runtime RAM plan | ELF |",
        "|---|---|---|---:|---:|---:|---:|---:|",
        *rows,
    ]
    RESULTS.write_text("\n".join(text) + "\n")
    print(f"wrote {RESULTS}: {len(rows)} images, largest gap {worst:.2f} %")


if __name__ == "__main__":
    main()
