"""The board's external flash set up at boot, verified without hardware (as the clock trees are).

The STM32F746G-DISCO's real-board ``startup.c`` (a two-device plan rendered as in
``test_startup_trace.py``) is cross-compiled with arm-none-eabi-gcc and run in unicorn with the
peripheral space and the QUADSPI registers modelled; the register writes of ``extflash_init()``
are checked against the tables below, written by hand from the reference manual RM0385
(QUADSPI, RCC, GPIO chapters), the Cortex-M7 programming manual PM0253 (MPU registers) with ST's
AN4760 / AN4838 (fence the QSPI window against speculative reads), the board's schematic
(MB1191: QSPI pins) and the Micron
N25Q128A datasheet (16 MiB, QUAD I/O FAST READ 0xEB up to 108 MHz with the default 10 dummy
cycles, tSHSL >= 20 ns), not from splitter's code. The emulator build must not contain it.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from startup_tables import DECODERS, MODELS
from test_startup_trace import Trace, _build, _field, _run

pytest.importorskip("unicorn")
pytestmark = pytest.mark.toolchain

BOARD, PART = "stm32f746g-disco", "STM32F746NG"
RCC = 0x4002_3800
QSPI = 0xA000_1000
CR, DCR, CCR = QSPI, QSPI + 0x04, QSPI + 0x14
#: (pin, AF, PUPDR) from the MB1191 schematic: CLK PB2, NCS PB6 (pulled up), IO0..IO3 PD11,
#: PD12, PE2, PD13; AF9 except NCS's AF10 (DS10916 alternate function table)
PINS = (("PB2", 9, 0), ("PB6", 10, 1), ("PD11", 9, 0), ("PD12", 9, 0), ("PE2", 9, 0),
        ("PD13", 9, 0))  # fmt: skip
MPU_CTRL, MPU_RNR, MPU_RBAR, MPU_RASR = 0xE000_ED94, 0xE000_ED98, 0xE000_ED9C, 0xE000_EDA0
#: the MPU writes in order (RBAR / RASR are banked by RNR): region 0 = the 256 MiB window,
#: strongly ordered, no access, XN (RASR: XN bit 28, AP 000, TEX/C/B 0, SIZE 27 -> 2^28, EN);
#: region 1 = the 16 MiB flash, read-only (AP 110), Normal write-through (C bit 17), XN, SIZE 23;
#: MPU_CTRL = ENABLE | PRIVDEFENA (PM0253)
MPU = (
    (MPU_RNR, 0), (MPU_RBAR, 0x9000_0000), (MPU_RASR, 0x1000_0037),
    (MPU_RNR, 1), (MPU_RBAR, 0x9000_0000), (MPU_RASR, 0x1602_002F),
    (MPU_CTRL, 0x5),
)  # fmt: skip
#: (address, shift, width, value, source)
FIELDS = (
    (RCC + 0x38, 1, 1, 1, "RM0385 5.3.12: RCC_AHB3ENR.QSPIEN"),
    (CR, 24, 8, 1, "RM0385 QUADSPI_CR: PRESCALER = 1, 216 / 2 = 108 MHz (N25Q128A 0xEB max)"),
    (CR, 4, 1, 1, "RM0385 QUADSPI_CR: SSHIFT, sample half a cycle later (ST BSP for MB1191)"),
    (CR, 0, 1, 1, "RM0385 QUADSPI_CR: EN"),
    (DCR, 16, 5, 23, "RM0385 QUADSPI_DCR: FSIZE = 23, 2^24 B = 16 MiB"),
    (DCR, 8, 3, 2, "RM0385 QUADSPI_DCR: CSHT = 2, 3 cycles of 9.26 ns >= tSHSL 20 ns"),
    (DCR, 0, 1, 0, "RM0385 QUADSPI_DCR: CKMODE = 0 (mode 0)"),
    (CCR, 26, 2, 3, "RM0385 QUADSPI_CCR: FMODE = memory-mapped"),
    (CCR, 24, 2, 3, "RM0385 QUADSPI_CCR: DMODE = four lines"),
    (CCR, 18, 5, 10, "N25Q128A: 10 dummy cycles for 0xEB (VCR reset value)"),
    (CCR, 14, 2, 0, "RM0385 QUADSPI_CCR: ABMODE = no alternate bytes"),
    (CCR, 12, 2, 2, "RM0385 QUADSPI_CCR: ADSIZE = 24-bit address (16 MiB)"),
    (CCR, 10, 2, 3, "RM0385 QUADSPI_CCR: ADMODE = four lines"),
    (CCR, 8, 2, 1, "RM0385 QUADSPI_CCR: IMODE = one line (extended SPI)"),
    (CCR, 0, 8, 0xEB, "N25Q128A: QUAD I/O FAST READ"),
    (CCR, 28, 4, 0, "RM0385 QUADSPI_CCR: SIOO, DHHC, DDRM off"),
)


@pytest.fixture(scope="module")
def trace(tmp_path_factory: pytest.TempPathFactory) -> tuple[Trace, Path]:
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed (make test installs it)")
    tmp = tmp_path_factory.mktemp("f746")
    elf, core = _build(PART, BOARD, tmp)
    t = Trace(MODELS["F7"])
    _run(elf, core, t)
    return t, elf.parent


def test_quadspi_registers_match_the_manuals(trace: tuple[Trace, Path]) -> None:
    t, _ = trace
    for addr, shift, width, value, source in FIELDS:
        got = _field(t.regs, addr, shift, width)
        assert got == value, f"0x{addr:08X}[{shift + width - 1}:{shift}] = {got}; {source}"
    hclk = DECODERS["F7"](t.regs, 25_000_000)["SYSCLK"]  # HPRE = /1: HCLK = SYSCLK
    f_qspi = hclk / (_field(t.regs, CR, 24, 8) + 1)
    assert f_qspi <= 108e6  # N25Q128A: 0xEB with 10 dummy cycles up to 108 MHz
    assert (_field(t.regs, DCR, 8, 3) + 1) / f_qspi >= 20e-9  # tSHSL


def test_quadspi_pins_are_routed(trace: tuple[Trace, Path]) -> None:
    t, _ = trace
    for pin, af, pull in PINS:
        port, num = ord(pin[1]) - ord("A"), int(pin[2:])
        gpio = 0x4002_0000 + 0x400 * port
        assert t.regs[RCC + 0x30] >> port & 1, f"{pin}: RCC_AHB1ENR GPIO{pin[1]}EN"
        assert _field(t.regs, gpio, 2 * num, 2) == 2, f"{pin}: MODER alternate function"
        assert _field(t.regs, gpio + 0x08, 2 * num, 2) == 3, f"{pin}: OSPEEDR very high"
        assert _field(t.regs, gpio + 0x0C, 2 * num, 2) == pull, f"{pin}: PUPDR"
        afr = gpio + 0x20 + 4 * (num // 8)
        assert _field(t.regs, afr, 4 * (num % 8), 4) == af, f"{pin}: AF{af}"


def test_mpu_fences_the_window(trace: tuple[Trace, Path]) -> None:
    """The MPU writes, in order, and before the flash is mapped (CCR)."""
    t, _ = trace
    mpu = [(a, v) for a, v in t.writes if MPU_CTRL <= a <= MPU_RASR]
    assert mpu == list(MPU)
    enabled = t.index(lambda a, v: a == MPU_CTRL and v & 1)
    assert enabled < t.index(lambda a, _v: a == CCR)


def test_quadspi_write_order(trace: tuple[Trace, Path]) -> None:
    """Clock enabled before the first QUADSPI write; the prescaler set after the switch to
    the PLL it divides; DCR before EN; CCR (memory-mapped) last, after EN."""
    t, _ = trace
    qspien = t.index(lambda a, v: a == RCC + 0x38 and v >> 1 & 1)
    first = t.index(lambda a, _v: QSPI <= a < QSPI + 0x40)
    pll = t.index(lambda a, v: a == RCC + 0x08 and v & 3 == 2)
    dcr = t.index(lambda a, _v: a == DCR)
    enable = t.index(lambda a, v: a == CR and v & 1)
    ccr = t.index(lambda a, _v: a == CCR)
    assert pll < qspien < first < dcr < enable < ccr
    assert [a for a, _ in t.writes].count(CCR) == 1


def test_emulator_build_leaves_it_out(trace: tuple[Trace, Path]) -> None:
    """EMULATOR=1 preprocesses extflash_init() away (QEMU's F405 has no QUADSPI)."""
    _, fw = trace
    cmd = ["arm-none-eabi-gcc", "-E", "-DEMULATOR=1", "-I.", "startup.c"]
    emu = subprocess.run(cmd, cwd=fw, capture_output=True, text=True, check=True).stdout
    part = subprocess.run([*cmd[:2], "-DEMULATOR=0", *cmd[3:]], cwd=fw, capture_output=True,
                          text=True, check=True).stdout  # fmt: skip
    assert "extflash_init" not in emu and "0xA0001014u" not in emu
    assert "extflash_init();" in part and "0x0F282DEBu" in part
    assert "QEMU's STM32F405 has no QUADSPI" in (fw / "startup.c").read_text()
