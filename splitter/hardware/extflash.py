"""A board's external flash: the (Q)SPI NOR flash the part maps into its address space at boot.

A board of ``board_catalog.toml`` may declare ``[boards.NAME.extflash]`` (see the catalog's
header): the controller, the flash part, the memory-mapped window, the pins, the read command.
``splitter segment`` then links the LO-SC weights into that window (the part's build reads them
in place) and ``startup.c`` runs :func:`init_steps` in ``board_init()``, after the clock tree:
the STM32F7 QUADSPI (RM0385 / RM0410, chapter "Quad-SPI interface (QUADSPI)") put in
memory-mapped mode with the flash's quad I/O fast read. The emulator build leaves it out: QEMU's
F405 (netduinoplus2) has no QUADSPI, and the host streams the weights there instead.

Register values (each step's comment names its register and field):

* RCC: GPIO port clocks in ``RCC_AHB1ENR`` (0x30, bit n = port n), ``RCC_AHB3ENR.QSPIEN``
  (0x38, bit 1; RM0385 5.3.12);
* each pin: ``GPIOx_MODER`` = 0b10 (alternate function), ``OSPEEDR`` = 0b11 (very high: the
  clock runs at up to 108 MHz), ``PUPDR`` = 0b01 (pull-up) on NCS only, so the flash stays
  deselected before the pin is driven, else 0b00; ``AFR`` = the board's AF (RM0385 6.4);
* ``QUADSPI_CR`` (0xA000_1000): ``PRESCALER[31:24] = ceil(HCLK / f_max) - 1`` so that
  ``f_QSPI = HCLK / (PRESCALER + 1) <= f_max`` (the datasheet's limit for the read command);
  ``SSHIFT`` (bit 4) = 1: sample half a cycle later, for the board's trace delays (as ST's BSP for
  the board); then ``EN`` (bit 0) once DCR is set;
* ``QUADSPI_DCR`` (0x04): ``FSIZE[20:16] = log2(bytes) - 1`` (the flash has ``2^(FSIZE+1)``
  bytes), ``CSHT[10:8] = ceil(tSHSL x f_QSPI) - 1`` (chip select high for ``CSHT + 1`` cycles
  between commands, at least the datasheet's ``tSHSL``), ``CKMODE`` (bit 0) = 0: CLK low while
  idle (SPI mode 0);
* wait ``QUADSPI_SR.BUSY`` (0x08, bit 5) = 0: ``CCR`` may only be written when not busy;
* ``QUADSPI_CCR`` (0x14): ``FMODE[27:26]`` = 0b11 memory-mapped, ``DMODE[25:24]`` = 0b11 data
  on four lines, ``DCYC[22:18]`` = the command's dummy cycles, ``ADSIZE[13:12]`` = 0b10
  (24-bit address, flash <= 16 MiB) else 0b11, ``ADMODE[11:10]`` = 0b11 address on four lines,
  ``IMODE[9:8]`` = 0b01 instruction on one line, ``INSTRUCTION[7:0]`` = the read command
  (1-4-4: the flash's quad I/O fast read, no quad-enable bit needed on the N25Q128A).

First of all, the MPU (PM0253, MPU registers; ST AN4760 "Quad-SPI interface on STM32", AN4838
"Managing memory protection unit in STM32 MCUs"): the Cortex-M7 reads ahead speculatively from
Normal memory, and the QUADSPI window (256 MiB at 0x9000_0000) is Normal memory in the default
map, while the flash fills only ``FSIZE``: an access beyond it stalls the bus. Region 0 covers
the whole window as strongly ordered, no access, execute never (``MPU_RASR`` = XN | AP 000 |
TEX 000 C 0 B 0 | SIZE 27 | ENABLE: no speculative access); region 1, which wins where they
overlap, opens the flash itself read-only (AP 110), Normal write-through cacheable (TEX 000 C 1
B 0), execute never, ``SIZE = log2(bytes) - 1``; ``MPU_CTRL`` = ENABLE | PRIVDEFENA (the default
map everywhere else; the firmware runs privileged).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from splitter.errors import BoardFileError
from splitter.hardware.clocks import MHZ, Step

#: STM32F7 QUADSPI register block and its bits (RM0385 / RM0410 QUADSPI register map).
QUADSPI = 0xA000_1000
#: RCC registers of the F7 (RM0385 5.3): AHB1ENR (GPIO ports), AHB3ENR (QSPIEN bit 1).
F7_RCC = 0x4002_3800
F7_GPIO = 0x4002_0000
#: Cortex-M7 MPU registers (PM0253): MPU_CTRL, MPU_RNR, MPU_RBAR, MPU_RASR
MPU_CTRL, MPU_RNR, MPU_RBAR, MPU_RASR = 0xE000_ED94, 0xE000_ED98, 0xE000_ED9C, 0xE000_EDA0
#: the QUADSPI memory-mapped window: 256 MiB from 0x9000_0000 (RM0385 2.2 memory map)
WINDOW_BYTES = 1 << 28
SIGNALS = ("CLK", "NCS", "IO0", "IO1", "IO2", "IO3")


@dataclass(frozen=True)
class ExtFlashSpec:
    """``[boards.NAME.extflash]`` of the board catalog (see its header for the fields)."""

    name: str
    chip: str
    origin: int
    size: int  # bytes
    pins: tuple[tuple[str, str, int], ...]  # (signal, pin, AF)
    max_hz: int
    read_cmd: int
    dummy_cycles: int
    cs_high_ns: float
    openocd_board: str
    cubeprog_loader: str
    source: str


def parse_spec(t: Mapping[str, Any], family: str, where: str) -> ExtFlashSpec:
    """The checked spec of a board's ``extflash`` table (BoardFileError naming the field)."""
    from splitter.hardware.families import FAMILIES, family_for

    qspi = family_for(family).qspi  # the family's controller and window (Family.qspi)
    if qspi is None:
        known = ", ".join(f.name for f in FAMILIES.values() if f.qspi)
        raise BoardFileError(
            f"{where}: extflash on a {family} part; splitter configures the QUADSPI of "
            f"{known} parts only"
        )
    controller, window = qspi
    pins = []
    for sig in SIGNALS:
        text = str(t["pins"].get(sig, ""))
        pin, _, af = text.partition(":")
        if not pin or not af.isdigit():
            raise BoardFileError(f'{where}: extflash pins: {sig} = "PIN:AF" missing, e.g. "PB2:9"')
        pins.append((sig, pin, int(af)))
    size = int(t["size_mib"]) * 1024 * 1024
    if t["name"] != controller or int(t["origin"]) != window or size & (size - 1):
        raise BoardFileError(
            f"{where}: extflash must be {controller} at 0x{window:08X} with a power-of-two size"
        )
    return ExtFlashSpec(
        name=str(t["name"]), chip=str(t["chip"]), origin=int(t["origin"]), size=size,
        pins=tuple(pins), max_hz=int(t["max_mhz"] * MHZ), read_cmd=int(t["read_cmd"]),
        dummy_cycles=int(t["dummy_cycles"]), cs_high_ns=float(t["cs_high_ns"]),
        openocd_board=str(t["openocd_board"]), cubeprog_loader=str(t["cubeprog_loader"]),
        source=str(t["source"]),
    )  # fmt: skip


@dataclass(frozen=True)
class QspiTiming:
    """The controller settings :func:`init_steps` derives from HCLK and the flash's limits."""

    prescaler: int  # f_QSPI = HCLK / (prescaler + 1)
    qspi_hz: float
    fsize: int  # 2^(fsize + 1) bytes
    csht: int  # chip select high for csht + 1 cycles


def timing(spec: ExtFlashSpec, hclk_hz: int) -> QspiTiming:
    """``PRESCALER = ceil(HCLK / f_max) - 1``, ``FSIZE = log2(bytes) - 1``,
    ``CSHT = max(ceil(tSHSL x f_QSPI) - 1, 0)`` (module docstring)."""
    prescaler = math.ceil(hclk_hz / spec.max_hz) - 1
    if not 0 <= prescaler <= 255:
        raise BoardFileError(f"{spec.name}: HCLK {hclk_hz} Hz needs a prescaler beyond 255")
    f = hclk_hz / (prescaler + 1)
    csht = max(math.ceil(round(spec.cs_high_ns * 1e-9 * f, 9)) - 1, 0)
    return QspiTiming(prescaler, f, spec.size.bit_length() - 2, min(csht, 7))


def _field(addr: int, shift: int, width: int, value: int, comment: str) -> Step:
    mask = ((1 << width) - 1) << shift
    return Step("set", addr, mask, (value << shift) & mask, comment)


def _gpio_steps(spec: ExtFlashSpec) -> list[Step]:
    """Port clocks, then per pin speed, pull, AF and finally alternate-function mode."""
    ports = sorted({ord(pin[1]) - ord("A") for _s, pin, _af in spec.pins})
    mask = sum(1 << p for p in ports)
    names = "/".join(chr(ord("A") + p) for p in ports)
    steps = [
        Step("set", F7_RCC + 0x30, mask, mask, f"RCC_AHB1ENR: GPIO{names} clocks (RM0385 5.3.10)"),
        _field(F7_RCC + 0x38, 1, 1, 1, "RCC_AHB3ENR.QSPIEN: QUADSPI clock (RM0385 5.3.12)"),
    ]
    for sig, pin, af in spec.pins:
        port, num = ord(pin[1]) - ord("A"), int(pin[2:])
        base = F7_GPIO + 0x400 * port
        pull = 1 if sig == "NCS" else 0
        steps += [
            _field(base + 0x08, 2 * num, 2, 3, f"{pin} {sig}: OSPEEDR very high (RM0385 6.4.3)"),
            _field(base + 0x0C, 2 * num, 2, pull,
                   f"{pin} {sig}: PUPDR {'pull-up' if pull else 'none'} (RM0385 6.4.4)"),
            _field(base + 0x20 + 4 * (num // 8), 4 * (num % 8), 4, af,
                   f"{pin} {sig}: AF{af} QUADSPI (RM0385 6.4.9/10, DS10916 alternate functions)"),
            _field(base, 2 * num, 2, 2, f"{pin} {sig}: MODER alternate function (RM0385 6.4.1)"),
        ]  # fmt: skip
    return steps


def _rasr(size_bytes: int, ap: int, c: int, enable: int = 1) -> int:
    """``MPU_RASR``: XN (bit 28), AP[26:24], TEX[21:19] = 0, C (17), B (16) = 0, SIZE[5:1] =
    ``log2(bytes) - 1``, ENABLE (0)."""
    return 1 << 28 | ap << 24 | c << 17 | (size_bytes.bit_length() - 2) << 1 | enable


def mpu_steps(spec: ExtFlashSpec) -> list[Step]:
    """Regions 0 (the window: no access) and 1 (the flash: read-only), then the MPU on."""
    full = 0xFFFF_FFFF
    return [
        Step("set", MPU_RNR, full, 0, "MPU_RNR = 0 (PM0253 MPU_RNR)"),
        Step("set", MPU_RBAR, full, spec.origin, f"MPU_RBAR = 0x{spec.origin:08X}, the window"),
        Step("set", MPU_RASR, full, _rasr(WINDOW_BYTES, 0, 0),
             "MPU_RASR: 256 MiB strongly ordered, no access, XN: no speculative reads "
             "(AN4760, AN4838)"),
        Step("set", MPU_RNR, full, 1, "MPU_RNR = 1"),
        Step("set", MPU_RBAR, full, spec.origin, f"MPU_RBAR = 0x{spec.origin:08X}, the flash"),
        Step("set", MPU_RASR, full, _rasr(spec.size, 0b110, 1),
             f"MPU_RASR: {spec.size >> 20} MiB Normal write-through, read-only, XN "
             "(PM0253 MPU_RASR)"),
        Step("set", MPU_CTRL, full, 0b101, "MPU_CTRL = ENABLE | PRIVDEFENA (PM0253 MPU_CTRL)"),
    ]  # fmt: skip


def init_steps(spec: ExtFlashSpec, hclk_hz: int) -> tuple[Step, ...]:
    """The register steps of ``extflash_init()`` (module docstring gives every value): the
    MPU, the pins, the QUADSPI."""
    t = timing(spec, hclk_hz)
    addr_size = 2 if spec.size <= 1 << 24 else 3
    ccr = (
        spec.read_cmd | 1 << 8 | 3 << 10 | addr_size << 12 | spec.dummy_cycles << 18 | 3 << 24
        | 3 << 26
    )  # fmt: skip
    mhz = t.qspi_hz / MHZ
    return (
        *mpu_steps(spec),
        *_gpio_steps(spec),
        Step("set", QUADSPI, 0xFFFF_FFFF, t.prescaler << 24 | 1 << 4,
             f"QUADSPI_CR: PRESCALER = {t.prescaler} ({hclk_hz / MHZ:g} MHz HCLK / "
             f"{t.prescaler + 1} = {mhz:g} MHz <= {spec.chip} {spec.max_hz / MHZ:g} MHz), "
             "SSHIFT = 1, EN = 0 (RM0385 QUADSPI_CR)"),
        Step("set", QUADSPI + 0x04, 0xFFFF_FFFF, t.fsize << 16 | t.csht << 8,
             f"QUADSPI_DCR: FSIZE = {t.fsize} ({spec.size >> 20} MiB = 2^{t.fsize + 1} B), "
             f"CSHT = {t.csht} ({t.csht + 1} cycles >= tSHSL {spec.cs_high_ns:g} ns), "
             "CKMODE = 0 (RM0385 QUADSPI_DCR)"),
        _field(QUADSPI, 0, 1, 1, "QUADSPI_CR.EN: enable (RM0385 QUADSPI_CR)"),
        Step("wait", QUADSPI + 0x08, 1 << 5, 0,
             "QUADSPI_SR.BUSY = 0: CCR is writable (RM0385 QUADSPI_CCR)"),
        Step("set", QUADSPI + 0x14, 0xFFFF_FFFF, ccr,
             f"QUADSPI_CCR: FMODE = 3 memory-mapped, 1-4-4 read 0x{spec.read_cmd:02X} "
             f"({spec.chip} quad I/O fast read), {spec.dummy_cycles} dummy cycles, "
             f"{24 if addr_size == 2 else 32}-bit address (RM0385 QUADSPI_CCR)"),
    )  # fmt: skip
