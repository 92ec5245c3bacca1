"""STM32 families (splitter/hardware/families.py) and the emulator description (qemu.py).

Unit facts per family against the reference manuals, and the refusal of an unknown family in a
catalog part or a board file (one line, exit 2 from the CLI).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from splitter.cli import main
from splitter.errors import BoardFileError
from splitter.hardware.boards import load_boards
from splitter.hardware.catalog import part_from_table, parts
from splitter.hardware.families import FAMILIES, USART_LAYOUTS, Family, family_for
from splitter.hardware.qemu import EMULATOR

ROOT = Path(__file__).resolve().parents[1]

#: One row per family: name, core, layout, reset clock (Hz), OpenOCD script, {USART: IRQ}
#: (RM0090 table 61, RM0410 table 40, RM0433 table 145, RM0351 table 58, RM0444 table 44).
FACTS = {
    "F4": ("cortex-m4", "sr_dr", 16_000_000, "stm32f4x", {"USART1": 37, "USART6": 71}),
    "F7": ("cortex-m7", "isr_rdr_tdr", 16_000_000, "stm32f7x", {"USART3": 39, "UART4": 52}),
    "H7": ("cortex-m7", "isr_rdr_tdr", 64_000_000, "stm32h7x", {"USART3": 39, "USART6": 71}),
    "L4": ("cortex-m4", "isr_rdr_tdr", 4_000_000, "stm32l4x", {"USART2": 38, "LPUART1": 70}),
    "G0": ("cortex-m0plus", "isr_rdr_tdr", 16_000_000, "stm32g0x", {"USART2": 28, "USART4": 29}),
    # RM0440 table 97, RM0438 table 108, RM0456 table 125
    "G4": ("cortex-m4", "isr_rdr_tdr", 16_000_000, "stm32g4x", {"USART1": 37, "LPUART1": 91}),
    "L5": ("cortex-m33", "isr_rdr_tdr", 4_000_000, "stm32l5x", {"USART1": 61, "LPUART1": 66}),
    "U5": ("cortex-m33", "isr_rdr_tdr", 4_000_000, "stm32u5x", {"USART1": 61, "LPUART1": 66}),
    # RM0455 (H7A3/B3): the H7 vector table's USART IRQs (stm32h7a3xxq.h USART3_IRQn 39, 71)
    "H7AB": ("cortex-m7", "isr_rdr_tdr", 64_000_000, "stm32h7x", {"USART3": 39, "USART6": 71}),
}
#: Per family, the RCC enable write of one USART and the AFR write of its TX pin:
#: (usart, (rcc addr, set), (afr addr, clear, set)).
INIT = {
    # RM0090 6.3.13 APB1ENR.USART2EN bit 17; PA2 AF7 in GPIOA_AFRL (0x4002_0020)
    "F4": ("USART2", ("0x40023840", "0x00020000"), ("0x40020020", "0x00000F00", "0x00000700")),
    # RM0410 5.3.13 APB1ENR.USART3EN bit 18; PD8 AF7 in GPIOD_AFRH (0x4002_0C24)
    "F7": ("USART3", ("0x40023840", "0x00040000"), ("0x40020C24", "0x0000000F", "0x00000007")),
    # RM0433 8.7.47 APB2ENR.USART6EN bit 5 at 0x5802_44F0; PC6 AF7 in GPIOC_AFRL (0x5802_0820)
    "H7": ("USART6", ("0x580244F0", "0x00000020"), ("0x58020820", "0x0F000000", "0x07000000")),
    # RM0351 6.4.20 APB1ENR2.LPUART1EN bit 0 at 0x4002_105C; PG7 AF8 in GPIOG_AFRL (0x4800_1820)
    "L4": ("LPUART1", ("0x4002105C", "0x00000001"), ("0x48001820", "0xF0000000", "0x80000000")),
    # RM0444 5.4.15 APBENR1.USART2EN bit 17 at 0x4002_103C; PA2 AF1 in GPIOA_AFRL (0x5000_0020)
    "G0": ("USART2", ("0x4002103C", "0x00020000"), ("0x50000020", "0x00000F00", "0x00000100")),
    # RM0440 7.4.20 APB1ENR2.LPUART1EN bit 0; PA2 AF12 in GPIOA_AFRL (0x4800_0020, DS12288)
    "G4": ("LPUART1", ("0x4002105C", "0x00000001"), ("0x48000020", "0x00000F00", "0x00000C00")),
    # RM0438 9.8.20 APB1ENR2.LPUART1EN bit 0; PG7 AF8 in GPIOG_AFRL (0x4202_1820, non-secure)
    "L5": ("LPUART1", ("0x4002105C", "0x00000001"), ("0x42021820", "0xF0000000", "0x80000000")),
    # RM0456 11.8.34 APB2ENR.USART1EN bit 14 at 0x4602_0CA4; PA9 AF7 in GPIOA_AFRH (0x4202_0024)
    "U5": ("USART1", ("0x46020CA4", "0x00004000"), ("0x42020024", "0x000000F0", "0x00000070")),
    # RM0455 RCC_APB1LENR.USART3EN bit 18 at 0x5802_44E8; PD8 AF7 in GPIOD_AFRH (0x5802_0C24,
    # DS13195 alternate functions; UM2408: the ST-LINK virtual COM port)
    "H7AB": ("USART3", ("0x580244E8", "0x00040000"), ("0x58020C24", "0x0000000F", "0x00000007")),
}


def test_every_family_has_a_row() -> None:
    assert set(FAMILIES) == set(FACTS) == set(INIT)


@pytest.mark.parametrize("name", sorted(FACTS))
def test_family_facts(name: str) -> None:
    fam = family_for(name)
    core, layout, reset, ocd, irqs = FACTS[name]
    assert (fam.name, fam.core.name, fam.usart_layout, fam.reset_clock_hz) == (
        name,
        core,
        layout,
        reset,
    )
    assert fam.openocd_target == f"target/{ocd}.cfg" and fam.usart_layout in USART_LAYOUTS
    for usart, irq in irqs.items():
        assert fam.irq[usart] == irq
    for u in fam.usart_table.values():
        assert all(
            p[0] == "P" and p[1].isupper() and 0 <= int(p[2:]) < 16 for p in u.pins.split("/")
        )
        assert 0 <= u.en_bit < 32 and 0 <= u.af < 16
    assert fam.has_dwt == (core != "cortex-m0plus")


@pytest.mark.parametrize("name", sorted(INIT))
def test_board_init_writes(name: str) -> None:
    usart, (rcc, bit), afr = INIT[name]
    writes = family_for(name).board_init_writes([usart])
    # L4 / L5 LPUART1 on PG7/PG8: PWREN, then PWR_CR2.IOSV (bit 9, RM0432 5.4.2, RM0438 8.6.2)
    power = (
        [("0x40021058", "0x10000000"), ("0x40007004", "0x00000200")] if name in ("L4", "L5") else []
    )
    assert [(w.addr, w.set) for w in writes[: len(power)]] == power
    first = writes[len(power)]
    assert (first.addr, first.clear, first.set) == (rcc, "0x00000000", bit)
    assert afr in {(w.addr, w.clear, w.set) for w in writes}
    # USART clock, then per pin: port clock, MODER, OSPEEDR, PUPDR, AFR
    assert len(writes) == len(power) + 1 + 2 * 5


def test_vcore_supply_is_a_board_choice_only_where_the_family_offers_one() -> None:
    """H7AB (RM0455): ``supply`` picks the LDO (default, the non-SMPS parts' only supply) or the
    direct SMPS (NUCLEO-H7A3ZI-Q, UM2408 table 10); any other name, or a supply on a family
    whose supply splitter does not choose, is refused naming the choices."""
    from splitter.hardware.clocks import ClockError

    h7ab = family_for("H7AB").clock
    assert h7ab.supplies == ("ldo", "direct-smps") and h7ab.supply == "ldo"
    assert h7ab.with_supply(None, "X") is h7ab
    assert h7ab.with_supply("direct-smps", "X").supply == "direct-smps"
    with pytest.raises(ClockError, match=r"supply = 'smps-1v8'.*use one of: ldo, direct-smps"):
        h7ab.with_supply("smps-1v8", "X")
    with pytest.raises(ClockError, match=r"not a VCORE supply of its family \(RM0090\)"):
        family_for("F4").clock.with_supply("ldo", "X")


def test_h7a3_voltage_scale_and_flash_rows_follow_the_clock() -> None:
    """STM32H7A3 (RM0455 rev 10 table 16, read as the stm32h7xx-hal and embassy-stm32 HALs quote
    it; its 280 MHz row is ST's own template's FLASH_LATENCY_6): 280 MHz needs VOS0
    (PWR_SRDCR.VOS = 0b11) and 6 wait states, WRHIGHFREQ 3; 200 MHz runs at VOS1 (0b10, up to
    225 MHz) with 5 wait states (190-225 MHz row), WRHIGHFREQ 2; APB at most 140 MHz
    (DS13195)."""
    h7ab = family_for("H7AB")
    for mhz, vos, ws, wrhf, apb in ((280, 0b11, 6, 3, 140), (200, 0b10, 5, 2, 100)):
        tree = h7ab.clock_tree("STM32H7A3ZI", 280_000_000, mhz * 1_000_000, None)
        steps = {(s.op, s.addr): s for s in tree.steps}
        assert steps["set", 0x5802_4818].value == vos << 14
        assert steps["set", 0x5200_2000].value == ws | wrhf << 4 and tree.wait_states == ws
        assert tree.bus_hz["APB1"] == apb * 1_000_000


def test_board_init_refuses_a_usart_the_family_lacks() -> None:
    with pytest.raises(BoardFileError, match="USART6 is not a USART of family G0"):
        family_for("G0").board_init_writes(["USART6"])


def test_brr() -> None:
    """USART: round(f / baud) (RM0090 30.6.3); LPUART: round(256 f / baud) (RM0351 38.4.4)."""
    assert Family.brr("USART2", 16_000_000, 115200) == 139
    assert Family.brr("USART1", 168_000_000, 115200) == 1458
    assert Family.brr("LPUART1", 4_000_000, 115200) == 8889


def test_cpu_flags() -> None:
    assert family_for("F4").cpu_flags("fpv4-sp-d16") == (
        "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard"
    )
    assert family_for("G0").cpu_flags("") == "-mcpu=cortex-m0plus -mthumb -mfloat-abi=soft"
    with pytest.raises(BoardFileError, match="fpu 'fpv5-d16' is not on family F4"):
        family_for("F4").check_fpu("fpv5-d16", "X")


def test_catalog_parts_belong_to_known_families() -> None:
    for part in parts():
        fam = family_for(part.family)
        assert all(fam.usart_base[u] == base for u, base in part.usarts), part.name


def test_emulator_is_a_catalog_part_of_its_family() -> None:
    by_name = {p.name: p for p in parts()}
    part = by_name[EMULATOR.part]
    assert part.family == EMULATOR.family.name and EMULATOR.is_native(part)
    assert all(EMULATOR.family.usart_base[u] == base for u, base in EMULATOR.usarts)
    assert EMULATOR.title == "QEMU netduinoplus2 (STM32F405)" and EMULATOR.short == "F405"


def test_unknown_family_in_catalog_part_is_one_line() -> None:
    table = {"flash_kib": 64, "ram_kib": 16, "clock_mhz": 48, "cpm": 20, "family": "X9"}
    with pytest.raises(BoardFileError) as info:
        part_from_table("STM32X999ZZ", table, "catalog.toml")
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("catalog.toml: part STM32X999ZZ: unknown family 'X9'")
    assert "known families: F4, F7, H7, L4, G0" in msg


def test_catalog_part_without_family_is_refused() -> None:
    with pytest.raises(BoardFileError, match="part P: no family; add family = one of F4"):
        part_from_table("P", {"flash_kib": 64, "ram_kib": 16, "clock_mhz": 48, "cpm": 20})


def test_unknown_family_in_board_file_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    boards = tmp_path / "boards.toml"
    boards.write_text(
        '[[device]]\nname = "a"\npart = { name = "STM32X999ZZ", flash_kib = 2048, '
        'ram_kib = 768, clock_mhz = 160, cpm = 9, family = "X9" }\n'
    )
    with pytest.raises(BoardFileError, match="part STM32X999ZZ: unknown family 'X9'"):
        load_boards(boards)
    with pytest.raises(SystemExit) as info:
        main(["plan", str(ROOT / "models" / "tiny_cnn.onnx"), "--target", str(boards)])
    err = capsys.readouterr().err.strip()
    assert info.value.code == 2
    assert len(err.splitlines()) == 1
    assert str(boards) in err and "STM32X999ZZ" in err and "known families: F4, F7" in err
