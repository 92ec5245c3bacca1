"""boards.toml parser and MCU catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from splitter.errors import BoardFileError
from splitter.hardware.boards import load_boards
from splitter.hardware.catalog import get_part, parts

ROOT = Path(__file__).resolve().parents[1]
THESIS = json.loads(
    (
        Path(__file__).resolve().parents[1] / "models" / "profiles" / "thesis_profiles.json"
    ).read_text()
)["mcus"]


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "boards.toml"
    path.write_text(text)
    return path


def test_catalog_matches_thesis_table_2() -> None:
    for name, row in THESIS.items():
        part = get_part(name)
        assert (part.flash_kib, part.ram_kib, part.clock_mhz, part.cpm) == (
            row["flash_kb"], row["ram_kb"], row["mhz"], row["cpm"],
        ), name  # fmt: skip
    assert len(parts()) == 13


def test_catalog_extra_parts_and_layouts() -> None:
    f405 = get_part("STM32F405RG")
    assert (f405.flash_kib, f405.ram_kib, f405.clock_mhz, f405.cpm) == (1024, 192, 168, 9)
    assert f405.ram_regions[0] == ("SRAM12", 0x2000_0000, 128 * 1024)
    assert ("CCM", 0x1000_0000, 64 * 1024) in f405.ram_regions
    assert f405.usarts[0] == ("USART1", 0x4001_1000) and f405.family == "F4"
    assert get_part("STM32F767ZI").family == "F7"
    f746 = get_part("STM32F746NG")  # DS10916: 1 MiB flash, 320 KiB SRAM, 216 MHz, single FPU
    assert (f746.flash_kib, f746.ram_kib, f746.clock_mhz) == (1024, 320, 216)
    assert f746.fpu == "fpv5-sp-d16"
    assert f746.ram_regions[0] == ("DTCM_SRAM12", 0x2000_0000, 320 * 1024)
    assert get_part("STM32G071RB").family == "G0" and get_part("STM32G071RB").fpu == ""
    for part in parts():
        assert part.source and part.ram_regions and part.usarts
        assert part.family == ("L4" if part.name.startswith("STM32L4") else part.name[5:7])


def test_catalog_unknown_part_suggests_close_matches() -> None:
    with pytest.raises(BoardFileError, match="did you mean STM32H743ZI"):
        get_part("STM32H743Z")
    assert get_part("stm32f446re").name == "STM32F446RE"


INLINE_PART = (  # a TOML inline table must stay on one line
    'part = { name = "my-board", flash_kib = 8192, ram_kib = 4096, clock_mhz = 400, cpm = 6, '
    'family = "H7" }'
)


def test_full_board_file(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        """
[link]
baud = 921600
bits_per_byte = 8

[[device]]
name = "h7"
mcu = "STM32H743ZI"
flash = "75%"
ram = "512 KiB"
clock_mhz = 400
cpm = 5.5
port = "/dev/ttyACM0"
probe = "066DFF555"
cpm_by_class = { conv = 5.1, depthwise = 6.0, dense = 4.2, other = 3.0 }

[[device]]
name = "g0-a"
mcu = "STM32G071RB"
flash = "-70 KB"

[[device]]
name = "g0-b"
mcu = "STM32G071RB"

[[device]]
name = "custom"
@INLINE@
""".replace("@INLINE@", INLINE_PART),
    )
    boards = load_boards(path)
    assert (boards.link.baud, boards.link.bits_per_byte) == (921600, 8)
    h7, g0a, g0b, custom = boards.devices
    assert h7.flash_bytes == 1536 * 1024 and h7.ram_bytes == 512 * 1024
    assert h7.clock_hz == 400e6 and h7.cpm == 5.5 and h7.port == "/dev/ttyACM0"
    assert h7.probe == "066DFF555" and h7.cpm_by_class["dense"] == 4.2
    assert g0a.flash_bytes == 58 * 1024 and g0b.flash_bytes == 128 * 1024
    assert g0a.ram_bytes == 36 * 1024 and g0a.cpm == 307
    assert custom.part.name == "my-board" and custom.flash_bytes == 8192 * 1024
    assert boards.source_path == str(path)


def test_defaults(tmp_path: Path) -> None:
    boards = load_boards(_write(tmp_path, '[[device]]\nname = "a"\nmcu = "STM32F401RE"\n'))
    assert (boards.link.baud, boards.link.bits_per_byte) == (115200, 10)
    assert boards.devices[0].flash_bytes == 512 * 1024


BAD = [
    ('[[device]]\nname = "a"\nmcu = "STM32F999XX"\n', "mcu"),
    (
        '[[device]]\nname = "a"\nmcu = "STM32F401RE"\n'
        '[[device]]\nname = "a"\nmcu = "STM32F401RB"\n',
        "duplicates",
    ),
    ('[[device]]\nname = "a"\nmcu = "STM32F401RE"\nflash = "75 %"\n', "flash"),
    ('[[device]]\nname = "a"\nmcu = "STM32F401RE"\nflash = "-1 MiB"\n', "512 KiB"),
    ('[[device]]\nname = "a"\nmcu = "STM32F401RE"\nram = "200%"\n', "ram"),
    ('[link]\nbaud = 0\n[[device]]\nname = "a"\nmcu = "STM32F401RE"\n', "baud"),
    ('[link]\nbaud = -9600\n[[device]]\nname = "a"\nmcu = "STM32F401RE"\n', "baud"),
    ("[link]\nbaud = 9600\n", "no \\[\\[device\\]\\]"),
    ('[[device]]\nname = "a"\nmcu = "STM32F401RE"\nspeed = 3\n', "'speed'"),
    ('[link]\nparity = "none"\n[[device]]\nname = "a"\nmcu = "STM32F401RE"\n', "'parity'"),
    ('[[device]]\nname = "A b"\nmcu = "STM32F401RE"\n', "name"),
    ('[[device]]\nname = "a"\n', "exactly one of mcu"),
    ('[[device]]\nname = "a"\npart = { name = "x", flash_kib = 8 }\n', "lacks"),
    ('[[device]]\nname = "a"\nmcu = "STM32F401RE"\ncpm_by_class = { gemm = 3 }\n', "'gemm'"),
    ('[[device]]\nname = "a"\nmcu = "STM32F401RE"\ncpm = 0\n', "cpm"),
    ("[[device]\n", "TOML"),
]


@pytest.mark.parametrize(("text", "needle"), BAD)
def test_bad_board_files(tmp_path: Path, text: str, needle: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(BoardFileError, match=needle) as info:
        load_boards(path)
    message = str(info.value)
    assert str(path) in message and "\n" not in message


def test_missing_board_file(tmp_path: Path) -> None:
    with pytest.raises(BoardFileError, match="not found"):
        load_boards(tmp_path / "nope.toml")


@pytest.mark.parametrize("path", sorted((ROOT / "models" / "boards").glob("*.toml")))
def test_shipped_board_files_parse(path: Path) -> None:
    assert load_boards(path).devices
