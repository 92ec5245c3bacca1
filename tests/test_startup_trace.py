"""Real-board startup verified without hardware: the generated startup code run in unicorn.

For every catalog part (on its Nucleo board where there is one), a two-device plan is rendered
(the part hosts sub-models 0 and 2, an F405 sub-model 1: the part has a host link and a link to
the other board); the part's real-board ``startup.c``, ``uart.c`` and ``timer.c`` are
cross-compiled with arm-none-eabi-gcc for its core, with a 6-line ``main`` that calls
``board_init()`` (clock tree, caches, GPIO, power) and ``link_init()`` (BRR, USART enable). The
ELF runs in the unicorn engine (an instruction-level ARM emulator) with the peripheral space
modelled by ``tests/startup_tables.py``: registers hold what is written, ready flags (HSERDY,
PLLRDY, VOSRDY, ODRDY, ...) read as set once their enable bit is written, SWS follows SW. Every
peripheral write is recorded, and the final register values are checked against the tables
written from the reference manuals: PLL factors, wait states, voltage scaling / over-drive /
boost, VDDIO2, RCC enables, GPIO mode / AF / speed / pull-up, BRR, and the SYSCLK decoded from
the registers equals the catalog clock. A wait loop that never ends (a ready flag the model does
not set, a wrong address) fails the test through the instruction limit.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from startup_tables import BRR_OFFSET, DECODERS, GPIO, MODELS, PARTS, Model, brr
from test_firmware_render import standin_model

from splitter.codegen import firmware as F
from splitter.hardware.catalog import get_part, parts
from splitter.hardware.families import family_for

unicorn = pytest.importorskip("unicorn")
from unicorn import arm_const  # noqa: E402

pytestmark = pytest.mark.toolchain

HARNESS = """#include "config.h"
LINK_TABLES
void board_init(void);
void link_init(void);
void __attribute__((noinline)) harness_done(void) { __asm volatile("nop"); }
int main(void) { board_init(); link_init(); harness_done(); for (;;) { } }
"""
LDSCRIPT = """ENTRY(Reset_Handler)
MEMORY {{ FLASH (rx) : ORIGIN = {flash:#x}, LENGTH = 64K
          RAM (rwx) : ORIGIN = {ram:#x}, LENGTH = 16K }}
_estack = ORIGIN(RAM) + LENGTH(RAM);
SECTIONS {{
  .isr_vector : {{ KEEP(*(.isr_vector)) }} > FLASH
  .text : {{ *(.text .text.*) *(.rodata .rodata.*) }} > FLASH
  _sidata = LOADADDR(.data);
  .data : ALIGN(4) {{ _sdata = .; *(.data .data.*) . = ALIGN(4); _edata = .; }} > RAM AT> FLASH
  .bss (NOLOAD) : ALIGN(4) {{ _sbss = .; *(.bss .bss.* COMMON) . = ALIGN(4); _ebss = .; }} > RAM
}}
"""
CPU = {
    "cortex-m0plus": "UC_CPU_ARM_CORTEX_M0",
    "cortex-m4": "UC_CPU_ARM_CORTEX_M4",
    "cortex-m7": "UC_CPU_ARM_CORTEX_M7",
}
MAX_INSTRUCTIONS = 2_000_000


@dataclass
class Trace:
    """Peripheral register file and the ordered writes ``(addr, value)``."""

    model: Model
    regs: dict[int, int] = field(default_factory=dict)
    writes: list[tuple[int, int]] = field(default_factory=list)
    written: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.regs.update(self.model.reset)

    def read(self, addr: int) -> int:
        value = self.regs.get(addr, 0)
        for r in self.model.ready:
            on = addr == r.status and (
                r.ctrl in self.written
                if r.ctrl_mask == 0
                else (self.regs.get(r.ctrl, 0) & r.ctrl_mask) == r.ctrl_mask
            )
            if on:
                value |= 1 << r.status_bit
        for f in self.model.follows:
            if addr == f.addr:
                mask = (1 << f.width) - 1
                value = (value & ~(mask << f.dst)) | (((value >> f.src) & mask) << f.dst)
        return value

    def write(self, addr: int, value: int) -> None:
        """Store ``value`` without the read-only status bits (ready flags, SWS)."""
        for r in self.model.ready:
            if addr == r.status:
                value &= ~(1 << r.status_bit)
        for f in self.model.follows:
            if addr == f.addr:
                value &= ~(((1 << f.width) - 1) << f.dst)
        self.regs[addr] = value
        self.writes.append((addr, value))
        self.written.add(addr)

    def index(self, pred: Callable[[int, int], bool]) -> int:
        """Position of the first write matching ``pred(addr, value)``."""
        return next(i for i, (a, v) in enumerate(self.writes) if pred(a, v))


def _build(part_name: str, board: str | None, tmp: Path, baud: int = 115200) -> tuple[Path, str]:
    """Render the plan, cross-compile the part's startup + UART + timer + harness; the ELF."""
    part = get_part(part_name)
    nb = 64
    subs0 = [(0, 0, nb, nb, nb), (2, 0, nb, nb, nb)]
    subs1 = [(1, 0, nb, nb, nb)]
    devs = [
        F.DeviceSpec("d0", 0, part, standin_model(subs0), 16, 2 * nb, subs0, board=board),
        F.DeviceSpec("d1", 1, get_part("STM32F405RG"), standin_model(subs1), 8, 2 * nb, subs1),
    ]
    ctx = F.build_plan_context(devs, [0, 1, 0], "0123456789abcdef", baud=baud)
    fw = F.render_firmware(tmp, ctx) / "d0"
    (fw / "harness.c").write_text(HARNESS)
    ram = part.ram_regions[0][1] if part.ram_regions else 0x2000_0000
    (fw / "h.ld").write_text(LDSCRIPT.format(flash=part.flash_origin, ram=ram))
    family = family_for(part.family)
    flags = family.cpu_flags(part.fpu).split()
    elf = fw / "startup.elf"
    cmd = ["arm-none-eabi-gcc", *flags, "-std=c99", "-O2", "-ffreestanding", "-nostdlib",
           "-DEMULATOR=0", "-I.", "-Th.ld", "startup.c", "uart.c", "timer.c", "watchdog.c",
           "harness.c", "-lgcc", "-o", str(elf)]  # fmt: skip
    proc = subprocess.run(cmd, cwd=fw, capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    return elf, family.core


def _symbols(elf: Path) -> dict[str, int]:
    from elftools.elf.elffile import ELFFile

    with elf.open("rb") as fh:
        tab = ELFFile(fh).get_section_by_name(".symtab")
        return {s.name: s["st_value"] for s in tab.iter_symbols() if s.name}


def _run(elf: Path, core: str, trace: Trace) -> None:
    """Load the ELF's segments, map the peripheral and system spaces as MMIO, run Reset_Handler
    until ``harness_done``."""
    from elftools.elf.elffile import ELFFile
    from unicorn import UC_ARCH_ARM, UC_MODE_MCLASS, UC_MODE_THUMB, Uc

    uc = Uc(UC_ARCH_ARM, UC_MODE_THUMB | UC_MODE_MCLASS)
    uc.ctl_set_cpu_model(getattr(arm_const, CPU[core]))
    with elf.open("rb") as fh:
        segs = [
            (s["p_paddr"], s.data())
            for s in ELFFile(fh).iter_segments()
            if s["p_type"] == "PT_LOAD"
        ]
    sym = _symbols(elf)
    mapped: set[int] = set()
    for addr, data in segs:
        for page in range(addr & ~0xFFFF, addr + len(data) + 0x10000, 0x10000):
            if page not in mapped:
                uc.mem_map(page, 0x10000)
                mapped.add(page)
        uc.mem_write(addr, data)
    ram = (sym["_estack"] - 0x4000) & ~0xFFFF
    for page in range(ram, sym["_estack"] + 0x10000, 0x10000):
        if page not in mapped:
            uc.mem_map(page, 0x10000)
            mapped.add(page)

    def rd(_uc: object, offset: int, _size: int, base: int) -> int:
        return trace.read(base + offset)

    def wr(_uc: object, offset: int, _size: int, value: int, base: int) -> None:
        trace.write(base + offset, value)

    # peripherals, the F7 QUADSPI registers (a board with external flash), the system space
    for base, size in ((0x4000_0000, 0x2000_0000), (0xA000_0000, 0x2000), (0xE000_0000, 0x10_0000)):
        uc.mmio_map(base, size, rd, base, wr, base)
    uc.reg_write(arm_const.UC_ARM_REG_SP, sym["_estack"])
    done = sym["harness_done"] & ~1  # Thumb symbols carry bit 0
    uc.emu_start(sym["Reset_Handler"] | 1, done, count=MAX_INSTRUCTIONS)
    pc = uc.reg_read(arm_const.UC_ARM_REG_PC)
    assert pc == done, (
        f"stopped at 0x{pc:08X} before harness_done (a wait loop that never ended?); "
        f"last writes {[(hex(a), hex(v)) for a, v in trace.writes[-4:]]}"
    )


def _field(regs: dict[int, int], addr: int, shift: int, width: int) -> int:
    return (regs.get(addr, 0) >> shift) & ((1 << width) - 1)


@pytest.fixture(scope="module")
def arm_gcc() -> None:
    if shutil.which("arm-none-eabi-gcc") is None:
        pytest.skip("arm-none-eabi-gcc is not installed (make test installs it)")


def test_every_catalog_part_has_a_row() -> None:
    assert set(PARTS) == {p.name for p in parts()}


def test_every_board_of_the_catalog_is_traced_with_its_part() -> None:
    """Each board of ``board_catalog.toml`` is some row's board (its routing and HSE are what
    the trace runs), on the part it carries; a part without a board runs bare."""
    from splitter.hardware.board_catalog import boards

    traced = {e.board: name for name, e in PARTS.items() if e.board is not None}
    assert traced == {b.name: b.part for b in boards().values()}


@pytest.mark.parametrize("name", sorted(PARTS))
def test_startup_trace(name: str, arm_gcc: None, tmp_path: Path) -> None:
    exp = PARTS[name]
    family = get_part(name).family
    elf, core = _build(name, exp.board, tmp_path)
    trace = Trace(MODELS[family])
    _run(elf, core, trace)
    regs = trace.regs
    # the clock tree, field by field, against the reference manuals
    for addr, shift, width, value, source in exp.fields:
        got = _field(regs, addr, shift, width)
        assert got == value, f"{name}: 0x{addr:08X}[{shift + width - 1}:{shift}] = {got}; {source}"
    # SYSCLK and bus clocks decoded from the registers: the catalog clock
    clocks = DECODERS[family](regs, exp.hse)
    assert clocks["SYSCLK"] == exp.sysclk == get_part(name).clock_mhz * 1e6
    # flash wait states are raised before the switch to the PLL (RM0090 3.5.1 and the like)
    acr = {"F4": 0x4002_3C00, "F7": 0x4002_3C00, "H7": 0x5200_2000}.get(family, 0x4002_2000)
    cfgr = {"H7": 0x5802_4410}.get(family, 0x4002_3808 if family in ("F4", "F7") else 0x4002_1008)
    sw_mask = 0x7 if family in ("H7", "G0") else 0x3
    assert trace.index(lambda a, _v: a == acr) < trace.index(
        lambda a, v: a == cfgr and (v & sw_mask) != 0
    )
    # over-drive (F446, F767): ready before the switch to the PLL (RM0390 5.1.4, RM0410 4.1.4)
    if family in ("F4", "F7") and _field(regs, 0x4000_7000, 17, 1):
        odsw = trace.index(lambda a, v: a == 0x4000_7000 and v >> 17 & 1)
        pllon = trace.index(lambda a, v: a == 0x4002_3800 and v >> 24 & 1)
        assert pllon < odsw < trace.index(lambda a, v: a == cfgr and (v & sw_mask) != 0)
    # each link: RCC enable before its BRR, BRR (hand-computed), pins in AF mode with their AF
    gpio_a, gpio_en = GPIO[family]
    for usart, base, bus, want_brr, (en_addr, en_bit), pins in exp.usarts:
        lp = usart.startswith("LPUART")
        assert want_brr == brr(clocks[bus], lp), f"{name} {usart}: table BRR vs decoded {bus}"
        brr_addr = base + BRR_OFFSET[family]
        assert regs.get(brr_addr) == want_brr, f"{name} {usart}: BRR {regs.get(brr_addr)}"
        assert regs[en_addr] >> en_bit & 1, f"{name} {usart}: RCC enable bit {en_bit}"
        assert trace.index(lambda a, v, ea=en_addr, b=en_bit: a == ea and v >> b & 1) < (
            trace.index(lambda a, _v, ba=brr_addr: a == ba)
        )
        for pin, af in pins:
            port, num = ord(pin[1]) - ord("A"), int(pin[2:])
            gpio = gpio_a + 0x400 * port
            assert regs[gpio_en] >> port & 1, f"{name} {pin}: GPIO{pin[1]} clock"
            assert _field(regs, gpio, 2 * num, 2) == 2, f"{name} {pin}: MODER alternate function"
            assert _field(regs, gpio + 0x08, 2 * num, 2) == 1, f"{name} {pin}: OSPEEDR medium"
            assert _field(regs, gpio + 0x0C, 2 * num, 2) == 1, f"{name} {pin}: PUPDR pull-up"
            afr = gpio + 0x20 + 4 * (num // 8)
            assert _field(regs, afr, 4 * (num % 8), 4) == af, f"{name} {pin}: AF{af}"
            if pin.startswith("PG") and family == "L4":  # VDDIO2 valid before port G is used
                iosv = trace.index(lambda a, v: a == 0x4000_7004 and v >> 9 & 1)
                assert iosv < trace.index(lambda a, _v, g=gpio: a == g)


def test_over8_at_4_mbaud(arm_gcc: None, tmp_path: Path) -> None:
    """F405 at 4 Mbaud: USART1 on APB2 (84 MHz) divides by 21 at 16x oversampling; USART2 on
    APB1 (42 MHz) needs 8x: USARTDIV = 2 x 42 MHz / 4 Mbaud = 21, BRR = 0x12 (mantissa 1,
    fraction 21 & 15 >> 1 = 2), CR1.OVER8 (bit 15) written before UE (RM0090 30.3.4, 30.6.3)."""
    elf, core = _build("STM32F405RG", None, tmp_path, baud=4_000_000)
    trace = Trace(MODELS["F4"])
    _run(elf, core, trace)
    usart1, usart2 = 0x4001_1000, 0x4000_4400
    assert trace.regs[usart1 + 0x08] == 21 and not trace.regs[usart1 + 0x0C] >> 15 & 1
    assert trace.regs[usart2 + 0x08] == 0x12 and trace.regs[usart2 + 0x0C] >> 15 & 1
    over8 = trace.index(lambda a, v: a == usart2 + 0x0C and v >> 15 & 1)
    enable = trace.index(lambda a, v: a == usart2 + 0x0C and v >> 13 & 1)  # UE
    assert over8 < enable and trace.regs[usart2 + 0x0C] >> 13 & 1
