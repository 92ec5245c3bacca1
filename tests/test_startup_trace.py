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

import math
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import pytest
from startup_tables import (
    BRR_OFFSET,
    DECODERS,
    GPIO,
    HSE_BOARDS,
    HSE_CR,
    HSE_TIMEOUT_S,
    MODELS,
    PARTS,
    PLL_INTERNAL,
    PLL_TIMEOUT_S,
    POLL_CYCLES,
    RESET_HZ,
    Model,
    brr,
)
from test_firmware_render import standin_model

from splitter.codegen import firmware as F
from splitter.hardware.catalog import get_part, parts
from splitter.hardware.families import family_for

unicorn = pytest.importorskip("unicorn")
from unicorn import UC_ARCH_ARM, UC_MODE_MCLASS, UC_MODE_THUMB, Uc, arm_const  # noqa: E402

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
    "cortex-m33": "UC_CPU_ARM_CORTEX_M33",
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
    #: ready flags ``(status address, bit)`` that never come (an HSE that does not start, a
    #: PLL that does not lock), and how often each such register was read
    stuck: frozenset[tuple[int, int]] = frozenset()
    stuck_reads: dict[int, int] = field(default_factory=dict)

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
            if on and (r.status, r.status_bit) not in self.stuck:
                value |= 1 << r.status_bit
        if any(addr == a for a, _ in self.stuck):
            self.stuck_reads[addr] = self.stuck_reads.get(addr, 0) + 1
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
    return elf, family.core.name


def _symbols(elf: Path) -> dict[str, int]:
    from elftools.elf.elffile import ELFFile

    with elf.open("rb") as fh:
        tab = ELFFile(fh).get_section_by_name(".symtab")
        return {s.name: s["st_value"] for s in tab.iter_symbols() if s.name}


def _run(elf: Path, core: str, trace: Trace, limit: int = MAX_INSTRUCTIONS) -> Uc:
    """Load the ELF's segments, map the peripheral and system spaces as MMIO, run Reset_Handler
    until ``harness_done``."""
    from elftools.elf.elffile import ELFFile

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
    uc.emu_start(sym["Reset_Handler"] | 1, done, count=limit)
    pc = uc.reg_read(arm_const.UC_ARM_REG_PC)
    assert pc == done, (
        f"stopped at 0x{pc:08X} before harness_done (a wait loop that never ended?); "
        f"last writes {[(hex(a), hex(v)) for a, v in trace.writes[-4:]]}"
    )
    return uc


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
    table = boards()
    assert set(traced) <= set(table)
    for b in table.values():
        if b.name in traced:
            assert traced[b.name] == b.part
            continue
        # a board of its own only for its ST-LINK (nucleo-h743zi2): wired as a traced one
        twin = table[PARTS[b.part].board or ""]
        assert (twin.usarts, twin.pins, twin.hse) == (b.usarts, b.pins, b.hse), b.name


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
    acr = {"F4": 0x4002_3C00, "F7": 0x4002_3C00, "H7": 0x5200_2000, "H7AB": 0x5200_2000}.get(
        family, 0x4002_2000
    )
    cfgr = {"H7": 0x5802_4410, "H7AB": 0x5802_4410, "U5": 0x4602_0C1C}.get(
        family, 0x4002_3808 if family in ("F4", "F7") else 0x4002_1008
    )
    sw_mask = 0x7 if family in ("H7", "H7AB", "G0") else 0x3
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
            if pin.startswith("PG") and family in ("L4", "L5"):  # VDDIO2 before port G is used
                iosv = trace.index(lambda a, v: a == 0x4000_7004 and v >> 9 & 1)
                assert iosv < trace.index(lambda a, _v, g=gpio: a == g)


@pytest.mark.parametrize(("board", "supply"), [("nucleo-h7a3zi-q", 0b000100), (None, 0b000010)])
def test_h7a3_selects_its_supply_once_before_voltage_scaling(
    board: str | None, supply: int, arm_gcc: None, tmp_path: Path
) -> None:
    """STM32H7A3: PWR_CR3's supply bits are written once after power-on (RM0455 PWR_CR3,
    write-once), first, before PWR_SRDCR.VOS and before any oscillator or PLL is touched, as
    ST's ``SystemClock_Config`` for the NUCLEO-H7A3ZI-Q calls ``HAL_PWREx_ConfigSupply`` first.
    The board is wired for the direct SMPS (UM2408 table 10): SMPSEN alone (0b000100), LDOEN
    cleared from its reset value; a bare part gets the LDO (LDOEN alone, 0b000010), the only
    supply of the parts without SMPS. Then VOS0 (0b11) for 280 MHz."""
    elf, core = _build("STM32H7A3ZI", board, tmp_path)
    trace = Trace(MODELS["H7AB"])
    _run(elf, core, trace)
    cr3, srdcr, rcc_cr = 0x5802_480C, 0x5802_4818, 0x5802_4400
    supply_writes = [v for a, v in trace.writes if a == cr3]
    assert len(supply_writes) == 1 and supply_writes[0] & 0x3F == supply, supply_writes
    first_rcc = trace.index(lambda a, _v: a == rcc_cr or 0x5802_4410 <= a <= 0x5802_4430)
    assert trace.index(lambda a, _v: a == cr3) < trace.index(lambda a, _v: a == srdcr) < first_rcc
    assert _field(trace.regs, srdcr, 14, 2) == 0b11


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


def _clock_status(uc: Uc, elf: Path) -> int:
    """``splitter_clock_status`` read from the emulated RAM."""
    return int.from_bytes(uc.mem_read(_symbols(elf)["splitter_clock_status"], 4), "little")


def _per_poll(uc: Uc, trace: Trace, addr: int) -> list[int]:
    """Count instructions until the 12th read of ``addr`` (then drop the hook): the instruction
    counts at each read, from which the instructions one poll takes follow."""
    seen: list[int] = []
    count = [0]

    def code(_uc: Uc, _a: int, _s: int, _d: object) -> None:
        count[0] += 1
        if trace.stuck_reads.get(addr, 0) > len(seen):
            seen.append(count[0])
            if len(seen) >= 12:
                _uc.hook_del(handle)

    handle = uc.hook_add(unicorn.UC_HOOK_CODE, code)
    return seen


def _stuck_run(
    elf: Path, core: str, trace: Trace, polls: int, stuck_addr: int
) -> tuple[Uc, list[int]]:
    """Run startup with ``trace``'s stuck flags; the instruction limit allows ``polls`` polls
    of up to 12 instructions on top of the normal run."""
    from unittest import mock

    hooks: list[list[int]] = []
    real_start = Uc.emu_start

    def start(uc: Uc, begin: int, until: int, timeout: int = 0, count: int = 0) -> None:
        hooks.append(_per_poll(uc, trace, stuck_addr))
        real_start(uc, begin, until, timeout, count)

    with mock.patch.object(Uc, "emu_start", start):
        uc = _run(elf, core, trace, limit=MAX_INSTRUCTIONS + 12 * polls)
    return uc, hooks[0]


@pytest.mark.slow
@pytest.mark.parametrize("family", sorted(HSE_BOARDS))
def test_hse_never_ready_falls_back_to_hsi(
    family: str, arm_gcc: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 24: a board whose HSE never starts (HSERDY never set) leaves the HSE wait after
    its 100 ms timeout (ST HAL ``HSE_STARTUP_TIMEOUT``), switches the HSE off, reaches the
    planned clock from the internal oscillator (PLL source HSI / HSI16, the same SYSCLK and
    BRRs as the row of :data:`PARTS`) and reports ``splitter_clock_status == 1``."""
    from splitter.hardware.board_catalog import boards
    from splitter.hardware.clocks import Osc

    part, board, mhz, bypass = HSE_BOARDS[family]
    table = boards()
    hse = Osc("HSE", mhz * 1_000_000, bypass)
    monkeypatch.setitem(table, board, replace(table[board], hse=hse))
    elf, core = _build(part, board, tmp_path)
    cr = HSE_CR[family]
    polls = math.ceil(HSE_TIMEOUT_S * RESET_HZ[family] / POLL_CYCLES)
    trace = Trace(MODELS[family], stuck=frozenset({(cr, 17)}))
    uc, seen = _stuck_run(elf, core, trace, polls, cr)
    # the wait gave up after exactly its poll count (plus the RCC_CR read-modify-writes)
    reads = trace.stuck_reads[cr]
    assert polls <= reads <= polls + 16, (reads, polls)
    per_poll = (seen[11] - seen[6]) / 5
    assert per_poll >= POLL_CYCLES  # so the real wait lasts at least the 100 ms
    seconds = polls * per_poll / RESET_HZ[family]  # at one cycle per instruction
    assert HSE_TIMEOUT_S <= seconds <= 4 * HSE_TIMEOUT_S, seconds
    assert _clock_status(uc, elf) == 1
    regs = trace.regs
    assert _field(regs, cr, 16, 1) == 0 and _field(regs, cr, 18, 1) == 0, "HSEON/HSEBYP off"
    addr, shift, width, value, source = PLL_INTERNAL[family]
    assert _field(regs, addr, shift, width) == value, source
    clocks = DECODERS[family](regs, 0)
    assert clocks["SYSCLK"] == get_part(part).clock_mhz * 1e6
    for usart, base, _bus, want, _en, _pins in PARTS[part].usarts:
        assert regs.get(base + BRR_OFFSET[family]) == want, f"{usart}: BRR as with the HSE"


@pytest.mark.parametrize("family", ["F4", "L4"])
def test_pll_lock_timeout_is_reported(family: str, arm_gcc: None, tmp_path: Path) -> None:
    """A PLL that never locks: the wait gives up after 2 ms (HAL ``PLL_TIMEOUT_VALUE``), the
    system clock is not switched to the PLL and ``splitter_clock_status == 2``."""
    part = {"F4": "STM32F405RG", "L4": "STM32L452RE"}[family]
    elf, core = _build(part, None, tmp_path)
    cr = HSE_CR[family]
    polls = math.ceil(PLL_TIMEOUT_S * RESET_HZ[family] / POLL_CYCLES)
    trace = Trace(MODELS[family], stuck=frozenset({(cr, 25)}))
    uc = _run(elf, core, trace, limit=MAX_INSTRUCTIONS + 12 * polls)
    assert polls <= trace.stuck_reads[cr] <= polls + 16
    assert _clock_status(uc, elf) == 2
    cfgr = cr + 0x08
    assert _field(trace.regs, cfgr, 0, 2) != {"F4": 2, "L4": 3}[family], "not switched to PLL"


def test_status_flags_match_the_header() -> None:
    """``clock_status.h`` defines the flags :data:`splitter.hardware.clocks.CLOCK_STATUS`
    documents, with the same values."""
    import re
    from importlib import resources

    from splitter.hardware.clocks import CLOCK_STATUS, WAITS

    text = resources.files("splitter.firmware_templates").joinpath("clock_status.h").read_text()
    defined = {int(v) for v in re.findall(r"#define SPLITTER_CLOCK_\w+ (\d+)u", text)}
    assert defined == set(CLOCK_STATUS)
    assert WAITS["hse"].flag == 1 and WAITS["pll"].flag == 2
    assert WAITS["hse"].timeout_s == HSE_TIMEOUT_S and WAITS["pll"].timeout_s == PLL_TIMEOUT_S
