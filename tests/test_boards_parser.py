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
    assert len(parts()) == 21


#: Issue 31's parts: (flash KiB, RAM KiB, MHz, family, FPU), from their datasheets (DS13737
#: U575, DS13086 U585, DS12736 L552, DS12288 G474, DS10314 F411, DS10198 L476, DS10916 F746).
NEW_PARTS = {
    "STM32U575ZI": (2048, 784, 160, "U5", "fpv5-sp-d16"),
    "STM32U585AI": (2048, 784, 160, "U5", "fpv5-sp-d16"),
    "STM32L552ZE": (512, 256, 110, "L5", "fpv5-sp-d16"),
    "STM32G474RE": (512, 128, 170, "G4", "fpv4-sp-d16"),
    "STM32F411RE": (512, 128, 100, "F4", "fpv4-sp-d16"),
    "STM32L476RG": (1024, 128, 80, "L4", "fpv4-sp-d16"),
    "STM32F746ZG": (1024, 320, 216, "F7", "fpv5-sp-d16"),
}


@pytest.mark.parametrize("name", sorted(NEW_PARTS))
def test_issue_31_parts(name: str) -> None:
    p = get_part(name.lower())  # part names match in any case
    assert (p.flash_kib, p.ram_kib, p.clock_mhz, p.family, p.fpu) == NEW_PARTS[name]
    assert p.name == name and p.ram_regions[0][1] == 0x2000_0000


def test_h7a3_memories() -> None:
    """STM32H7A3ZI (DS13195, RM0455 memory map): 2 MiB flash, 280 MHz, the double-precision
    FPU; the arena in the 1 MiB AXI SRAM at 0x2400_0000 (STM32CubeH7's linker script for the
    NUCLEO-H7A3ZI-Q: RAM 0x24000000, 1024K), then DTCM, AHB SRAM1/2, SRD SRAM; ram_kib is every
    bank with the 64 KiB ITCM, the datasheet's ~1.4 MB."""
    p = get_part("stm32h7a3zi")
    assert (p.flash_kib, p.ram_kib, p.clock_mhz, p.family, p.fpu) == (
        2048, 1376, 280, "H7AB", "fpv5-d16",
    )  # fmt: skip
    assert p.ram_regions == (
        ("AXI_SRAM", 0x2400_0000, 1024 * 1024),
        ("DTCM", 0x2000_0000, 128 * 1024),
        ("AHB_SRAM12", 0x3000_0000, 128 * 1024),
        ("SRD_SRAM", 0x3800_0000, 32 * 1024),
    )
    assert sum(size for _n, _o, size in p.ram_regions) + 64 * 1024 == p.ram_kib * 1024


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
        # the family is the name's series, RM0455's H7A3/B3 line being "H7AB"
        series = "H7AB" if part.name.startswith(("STM32H7A", "STM32H7B")) else part.name[5:7]
        assert part.family == ("L4" if part.name.startswith("STM32L4") else series)


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


def _board_file(tmp_path: Path, board: str, baud: int = 115200) -> Path:
    return _write(tmp_path, f'[link]\nbaud = {baud}\n[[device]]\nname = "a"\nboard = "{board}"\n')


@pytest.mark.parametrize(
    ("written", "board"),
    [
        ("NUCLEO-F446RE", "nucleo-f446re"),  # as printed on the board
        ("Nucleo-H743ZI2", "nucleo-h743zi2"),
        ("nucleo-h743zi2", "nucleo-h743zi2"),
        ("NUCLEO-L433RC", "nucleo-l433rc-p"),  # an alias
    ],
)
def test_board_names_in_any_case_and_aliases(tmp_path: Path, written: str, board: str) -> None:
    """Issue 31: board names match in any case; the plan keeps the catalog's spelling."""
    dev = load_boards(_board_file(tmp_path, written)).devices[0]
    assert dev.board == board


def test_unknown_board_says_did_you_mean(tmp_path: Path) -> None:
    """``nucleo-f44re`` is refused with the nearest board and the list of known boards."""
    path = _board_file(tmp_path, "nucleo-f44re")
    with pytest.raises(BoardFileError) as info:
        load_boards(path)
    msg = str(info.value)
    assert "did you mean nucleo-f446re?" in msg and str(path) in msg and "\n" not in msg
    from splitter.hardware.board_catalog import boards

    assert all(name in msg for name in boards())


def test_h743zi_and_zi2_differ_by_their_stlink() -> None:
    """NUCLEO-H743ZI (MB1137, ST-LINK/V2-1, UM1974) and NUCLEO-H743ZI2 (MB1364, STLINK-V3E,
    UM2407): same part, wiring and HSE; the ST-LINK and so the host link limit differ."""
    from splitter.hardware.board_catalog import get_board

    zi, zi2 = get_board("nucleo-h743zi", "t"), get_board("nucleo-h743zi2", "t")
    assert (zi.part, zi.usarts, zi.pins, zi.hse) == (zi2.part, zi2.usarts, zi2.pins, zi2.hse)
    assert (zi.stlink.version, zi2.stlink.version) == ("V2-1", "V3")


@pytest.mark.parametrize(
    ("board", "baud", "limit"),
    [("nucleo-f446re", 3_000_000, 2_000_000), ("nucleo-h743zi", 4_000_000, 2_000_000),
     ("nucleo-h743zi2", 20_000_000, 15_000_000)],
)  # fmt: skip
def test_host_link_above_the_stlink_limit_is_refused(
    tmp_path: Path, board: str, baud: int, limit: int
) -> None:
    """Issue 31: a host link faster than the board's ST-LINK virtual COM port carries is refused
    in one line naming the limit (ST-LINK/V2-1: 2 Mbaud, STLINK-V3: 15 Mbaud)."""
    path = _board_file(tmp_path, board, baud)
    with pytest.raises(BoardFileError, match=f"at most {limit} baud") as info:
        load_boards(path)
    assert str(path) in str(info.value) and "\n" not in str(info.value)


def test_host_link_at_the_stlink_limit_is_accepted(tmp_path: Path) -> None:
    """The same H743 at 4 Mbaud: refused on the NUCLEO-H743ZI (V2-1), accepted on the ZI2 (V3):
    its USART3 divides 120 MHz APB1 by 30."""
    assert load_boards(_board_file(tmp_path, "nucleo-h743zi2", 4_000_000)).devices


def test_a_reserve_larger_than_the_part_says_so(tmp_path: Path) -> None:
    """``flash = "-600 KiB"`` on a 512 KiB part reserves more than there is: the message says
    that, and the value it suggests parses (it once said "gives -88 KiB")."""
    path = _write(tmp_path, '[[device]]\nname = "a"\nmcu = "STM32F401RE"\nflash = "-600 KiB"\n')
    with pytest.raises(BoardFileError) as info:
        load_boards(path)
    message = str(info.value)
    assert "reserves 600 KiB but the part has only 512 KiB" in message, message
    assert "-88" not in message and "\n" not in message and str(path) in message
    fixed = message.split('(e.g. "', 1)[1].split('"', 1)[0]
    path.write_text(f'[[device]]\nname = "a"\nmcu = "STM32F401RE"\nflash = "{fixed}"\n')
    assert load_boards(path).devices[0].flash_bytes == 256 * 1024
