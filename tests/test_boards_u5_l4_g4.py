"""Issue 31: one split over the boards people buy, a NUCLEO-U575ZI-Q (Cortex-M33), a
NUCLEO-L476RG and a NUCLEO-G474RE (``models/boards/u575_l476_g474.toml``), compiles and builds.

MLPerf Tiny's visual wake words model (int8 TFLite) is planned over the three boards (each lends
it at most 130 KiB of flash, so all three hold a part), validated against LiteRT by
``compile``, and every device's firmware is cross-built for its real part with
arm-none-eabi-gcc; ``check_builds`` (``test_firmware_fit.py``) compares each ELF with
``plan.json``: weights and arena equal to the plan, code within the size table's 2 %.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from test_firmware_fit import check_builds

from splitter.cli import main
from splitter.manifest import read_manifest

ROOT = Path(__file__).resolve().parents[1]
pytestmark = [pytest.mark.toolchain, pytest.mark.slow]


def test_u575_l476_g474_split_compiles_and_builds(tmp_path: Path) -> None:
    out = tmp_path / "out"
    model = ROOT / "models" / "mlperf_vww_mobilenet_v1_025_int8.tflite"
    boards = ROOT / "models" / "boards" / "u575_l476_g474.toml"
    args = ["compile", str(model), "--target", str(boards), "-o", str(out)]
    with pytest.raises(SystemExit) as info:
        main(args)
    assert info.value.code in (0, None)
    manifest = read_manifest(out)
    used = {s.device for s in manifest.submodels}
    assert used == {"u5", "l4", "g4"}
    assert {d.mcu for d in manifest.devices} == {"STM32U575ZI", "STM32L476RG", "STM32G474RE"}
    assert check_builds(out, tmp_path / "cache") == 3


@pytest.mark.parametrize(
    ("board", "device"),
    [('board = "NUCLEO-L552ZE-Q"', "l5"), ('board = "nucleo-f411re"', "f4"),
     ('board = "nucleo-f746zg"', "f7"), ('mcu = "STM32U585AI"', "u5"),
     ('board = "NUCLEO-H7A3ZI-Q"', "h7")],
)  # fmt: skip
def test_other_new_parts_build_as_planned(tmp_path: Path, board: str, device: str) -> None:
    """The other new parts, each alone with MLPerf Tiny's keyword-spotting model (int8): the
    firmware cross-builds, weights and arena equal the plan, code within the size table's 2 %."""
    target = tmp_path / "boards.toml"
    target.write_text(f'[link]\nbaud = 115200\n[[device]]\nname = "{device}"\n{board}\n')
    out = tmp_path / "out"
    model = ROOT / "models" / "mlperf_kws_ds_cnn_int8.tflite"
    with pytest.raises(SystemExit) as info:
        main(["compile", str(model), "--target", str(target), "-o", str(out)])
    assert info.value.code in (0, None)
    assert check_builds(out, tmp_path / "cache") == 1
