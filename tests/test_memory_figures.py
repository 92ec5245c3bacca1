"""One flash and one RAM figure per device, the same in plan, report and build (issue 29).

The figure is the device's whole image: flash = weights + code against the flash budget, RAM =
arena + runtime against the RAM budget within the region the linker puts the arena in (an
H743's 512 KiB AXI SRAM, not its 1 MiB total). ``plan`` prints it (table and ``memory`` lines),
``report.md`` and ``report.html`` show it, and ``build`` compares the ELF with it against the same
limits (weights and arena exact, code and runtime as ``tests/test_firmware_fit.py`` bounds them).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

import splitter
from splitter.cli import cli
from splitter.compile import CompileOptions
from splitter.cost.code import arena_region
from splitter.errors import InfeasibleError

ROOT = Path(__file__).resolve().parents[1]
BOARD_FILES = sorted((ROOT / "models" / "boards").glob("*.toml"))
#: a small float and a small int8 model: every shipped boards file plans one of them or both,
#: but for split_dw_qdq4.toml's 43 KiB boards, whose code leaves tiny_cnn_int8's weights no room:
#: its own model (a split layer) then
MODELS = [ROOT / "models" / "tiny_cnn.onnx", ROOT / "models" / "tiny_cnn_int8.tflite",
          ROOT / "models" / "dw_wide_qdq.onnx"]  # fmt: skip


def _text(path: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", path.read_text()))


@pytest.mark.parametrize("boards", BOARD_FILES, ids=[p.stem for p in BOARD_FILES])
def test_plan_and_report_show_the_same_figure(boards: Path, tmp_path: Path) -> None:
    """Over every shipped boards file: each device's figure in ``plan``'s printout, in
    ``report.md`` and in ``report.html`` is the manifest's, and its RAM limit is the budget
    within the arena's region."""
    planned = 0
    for model in MODELS:
        out = tmp_path / model.stem
        opts = CompileOptions(firmware=False, validate=False, force=True)
        try:
            result = splitter.compile_model(model, boards, out, opts)
        except InfeasibleError:
            continue
        planned += 1
        m = result.manifest
        printed = CliRunner().invoke(cli, ["plan", str(model), "--target", str(boards)]).output
        report_md = (out / "report.md").read_text()
        page = _text(out / "report.html")
        loaded = splitter.load_boards(boards)
        for dev, part_dev in zip(m.devices, loaded.devices, strict=True):
            region = arena_region(part_dev.part)[2]
            assert dev.ram_limit == min(part_dev.ram_bytes, region)
            if dev.name not in m.device_totals():
                continue
            line = dev.memory_line()
            assert f"memory {line}" in printed.replace("\n", " ") or f"memory {line}" in printed
            assert f"- memory {line}" in report_md
            assert f"{dev.flash_total} / {dev.flash_budget}" in page
            assert f"{dev.ram_total} / {dev.ram_limit}" in page
        break  # one model per boards file keeps the sweep short
    assert planned, f"{boards.name}: neither model plans; pick a model that does"


@pytest.mark.slow
@pytest.mark.toolchain
def test_build_measures_against_the_same_figure(tmp_path: Path) -> None:
    """The demo (an H743 whose arena is linked into the 512 KiB AXI SRAM, and an L4R5): the build
    table's budgets are the plan's, weights and arena are the plan's exactly, and the totals
    are within the code / runtime estimates' tolerance of the plan's figure."""
    from splitter.toolchain.build import build_all

    model, boards = ROOT / "models" / "mobilenet_v1_025.onnx", ROOT / "models/boards/demo.toml"
    result = splitter.compile_model(model, boards, tmp_path / "o", CompileOptions(samples=1))
    m = result.manifest
    h7 = m.device("h7")
    assert h7.ram_limit == 512 * 1024 and h7.ram_region == "AXI_SRAM"
    for b in build_all(tmp_path / "o", emulator=False):
        dev = m.device(b.device)
        assert (b.flash_budget, b.ram_budget) == (dev.flash_budget, dev.ram_limit)
        assert (b.weights_actual, b.arena_actual) == (dev.flash_used, dev.ram_used)
        assert abs(b.flash_total - dev.flash_total) <= 0.02 * dev.code_bytes
        assert 0 <= dev.ram_total - b.ram_total <= 64
