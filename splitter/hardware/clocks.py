"""Clock trees of the real parts: oscillator -> PLL -> SYSCLK, buses, flash wait states, power.

Every STM32 boots from an internal RC oscillator (F4/F7/G0 HSI 16 MHz, H7 HSI 64 MHz, L4 MSI
4 MHz); the catalog's clock needs the PLL. :func:`plan_clock` computes, in Python, the PLL
factors (a small exhaustive search under the reference manual's VCO input / output limits), the
bus prescalers (each bus at most its datasheet maximum), the flash wait states, voltage scaling
and over-drive / boost, and returns a :class:`ClockTree` whose :attr:`ClockTree.steps` the
firmware's ``clock_init()`` executes in order (``startup.c.j2`` only loops over them). Every
value cites its reference-manual (RM) section in the rule that produces it.

The emulator build (QEMU, ``splitter/hardware/qemu.py``) skips all of this: QEMU does not model
RCC and runs its SoC at a fixed clock (``EMULATOR.clock_hz``).

A family's rules are one :class:`ClockRules` subclass (``F4Clock``, ``F7Clock``, ``H7Clock``,
``L4Clock``, ``G0Clock``) held by the family class in ``families.py`` (``Family.clock``).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from functools import cache
from typing import ClassVar

from splitter.errors import BoardFileError

MHZ = 1_000_000


class ClockError(BoardFileError):
    """The part (or its family) cannot run at the clock a board file asks for."""


@dataclass(frozen=True)
class Osc:
    """The PLL's input: ``HSE`` (``bypass`` = an external clock such as the ST-LINK's MCO, else
    a crystal), ``HSI`` / ``HSI16`` or ``MSI``, at ``hz``."""

    name: str
    hz: int
    bypass: bool = False

    @property
    def label(self) -> str:
        """``"HSE 8 MHz (bypass)"``."""
        kind = " (bypass)" if self.name == "HSE" and self.bypass else ""
        kind = " (crystal)" if self.name == "HSE" and not self.bypass else kind
        return f"{self.name} {self.hz / MHZ:g} MHz{kind}"


@dataclass(frozen=True)
class Step:
    """One step of ``clock_init()``.

    ``op`` = ``"set"``: ``*addr = (*addr & ~mask) | value``; ``"wait"``: poll until
    ``(*addr & mask) == value``; ``"delay"``: ``value`` iterations of an empty volatile loop.
    """

    op: str
    addr: int
    mask: int
    value: int
    comment: str
    #: ``"wait"`` only: what it waits for (a key of :data:`WAITS`) and how many polls it makes
    #: before giving up (:func:`bound`; 0 until then)
    kind: str = ""
    polls: int = 0

    @property
    def status_bit(self) -> int:
        """The :data:`CLOCK_STATUS` flag a timeout of this wait reports."""
        return WAITS[self.kind].flag

    @property
    def timeout_note(self) -> str:
        """``"at most 100 ms"``: the wait's timeout, for the generated comment."""
        return f"at most {WAITS[self.kind].timeout_s * 1000:g} ms"

    @property
    def addr_hex(self) -> str:
        return f"0x{self.addr:08X}"

    @property
    def mask_hex(self) -> str:
        return f"0x{self.mask:08X}"

    @property
    def value_hex(self) -> str:
        return f"0x{self.value:08X}"


def _set(addr: int, shift: int, width: int, value: int, comment: str) -> Step:
    """Write ``value`` into bit field ``[shift + width - 1 : shift]`` of ``addr``."""
    mask = ((1 << width) - 1) << shift
    return Step("set", addr, mask, (value << shift) & mask, comment)


def _wait(addr: int, shift: int, width: int, value: int, comment: str, kind: str) -> Step:
    """Poll until field ``[shift + width - 1 : shift]`` of ``addr`` reads ``value``; ``kind``
    (a key of :data:`WAITS`) sets its timeout and the status flag it reports."""
    mask = ((1 << width) - 1) << shift
    return Step("wait", addr, mask, (value << shift) & mask, comment, kind)


@dataclass(frozen=True)
class Wait:
    """One kind of clock start-up wait: the ``splitter_clock_status`` flag its timeout sets and
    the timeout. The timeouts are ST's own (STM32CubeF4 HAL: ``HSE_STARTUP_TIMEOUT`` 100 ms in
    ``stm32f4xx_hal_conf.h``, ``HSI_TIMEOUT_VALUE`` and ``PLL_TIMEOUT_VALUE`` 2 ms in
    ``stm32f4xx_hal_rcc.h``, ``PWR_OVERDRIVE_TIMEOUT_VALUE`` 1000 ms in
    ``stm32f4xx_hal_pwr_ex.h``), except the clock switch (HAL 5 s; a switch completes within a
    few cycles of both clocks, RM0090 6.3.3, so 100 ms) and the flash latency read-back (the
    HAL reads it once; 2 ms)."""

    flag: int
    timeout_s: float
    what: str


#: Wait kind -> flag and timeout. Flag 1 is the only one clock_init() recovers from (it falls
#: back to the internal oscillator); after any other the sequence stops where it is.
WAITS: Mapping[str, Wait] = {
    "hse": Wait(1, 0.100, "HSE did not start: fell back to the internal oscillator"),
    "pll": Wait(2, 0.002, "PLL did not lock: clock_init() stopped before the switch"),
    "power": Wait(4, 1.000, "voltage scaling / over-drive / supply not ready: stopped"),
    "switch": Wait(8, 0.100, "the system clock switch did not complete: stopped"),
    "flash": Wait(16, 0.002, "the flash latency did not read back: stopped"),
    "osc": Wait(32, 0.002, "the internal oscillator (HSI16) did not start: stopped"),
}
#: Set with flag 1 when the internal oscillator cannot reach the planned clock through the PLL:
#: the fallback runs at the internal oscillator's own frequency (the baud divisors then do not
#: match; no catalog part needs it, every catalog clock is reachable from its HSI / HSI16).
CLOCK_SLOW = 64
#: Every ``splitter_clock_status`` flag: bit -> meaning (``clock_status.h`` defines the same).
CLOCK_STATUS: Mapping[int, str] = {
    **{w.flag: w.what for w in WAITS.values()},
    CLOCK_SLOW: "the fallback runs at the internal oscillator, below the planned clock",
}
#: Fewest CPU cycles one poll of a wait takes (a peripheral load, mask, compare, branch, count,
#: branch: at least 4 cycles on Cortex-M0+/M4/M7/M33), so ``polls`` = timeout x f_cpu / 4
#: polls last at least the timeout.
POLL_CYCLES_MIN = 4


def bound(steps: Iterable[Step], reset_hz: int, sysclk_hz: int) -> tuple[Step, ...]:
    """``steps`` with each wait's ``polls = ceil(timeout x f / POLL_CYCLES_MIN)``, ``f`` the
    clock it runs at: the reset oscillator until the switch, for the switch wait the faster of
    the reset oscillator and the new SYSCLK (it may already run at either)."""
    out = []
    for s in steps:
        if s.op == "wait":
            f = max(reset_hz, sysclk_hz) if s.kind == "switch" else reset_hz
            polls = math.ceil(WAITS[s.kind].timeout_s * f / POLL_CYCLES_MIN)
            s = replace(s, polls=polls)
        out.append(s)
    return tuple(out)


@dataclass(frozen=True)
class Pll:
    """PLL factors: ``f_vco = f_in * n / m``, ``f_out = f_vco / div`` (P on F4/F7/H7, R on
    L4/G0); ``q`` the 48 MHz-domain divider where the family requires a legal one."""

    m: int
    n: int
    div: int
    q: int
    f_in_hz: int
    f_ref_hz: Fraction
    f_vco_hz: Fraction

    @property
    def out_hz(self) -> Fraction:
        return self.f_vco_hz / self.div


@dataclass(frozen=True)
class ClockTree:
    """The real part's clocks after ``clock_init()``: ``bus_hz`` maps ``"AHB"``, ``"APB1"``,
    ``"APB2"`` (and H7 ``"APB3"``, ``"APB4"``) to Hz; the USARTs' kernel clocks are their APB's."""

    osc: Osc
    pll: Pll | None
    sysclk_hz: int
    bus_hz: Mapping[str, int]
    wait_states: int
    steps: tuple[Step, ...]
    notes: tuple[str, ...] = field(default=())
    #: with an HSE: the tree ``clock_init()`` runs instead when the HSE does not start (from the
    #: internal oscillator, the same SYSCLK and buses unless ``fallback_slow``), and the steps
    #: that switch the HSE off first
    fallback: ClockTree | None = None
    fallback_slow: bool = False
    hse_off: tuple[Step, ...] = ()

    @property
    def summary(self) -> str:
        """``"HSE 8 MHz (bypass), PLL M=4 N=480 /2: 480 MHz, 4 flash wait states, ..."``."""
        via = "" if self.pll is None else f", PLL M={self.pll.m} N={self.pll.n} /{self.pll.div}"
        return (
            f"{self.osc.label}{via}: {self.sysclk_hz / MHZ:g} MHz, {self.wait_states} flash "
            f"wait states, " + ", ".join(f"{k} {v / MHZ:g} MHz" for k, v in self.bus_hz.items())
        )


@dataclass(frozen=True)
class PllLimits:
    """Legal PLL factors and frequencies of one family (RM section in the subclass)."""

    m: range
    n: range
    div: tuple[int, ...]
    ref_hz: tuple[int, int]  # VCO input (after M)
    vco_hz: tuple[int, int]  # VCO output
    prefer_ref_hz: int  # the RM's recommended VCO input (jitter), ties broken towards it


@cache
def search_pll(f_in: int, target: int, lim: PllLimits) -> tuple[int, int, int] | None:
    """``(m, n, div)`` with ``f_in * n / (m * div) == target`` exactly, every factor and the
    VCO input / output in ``lim``; among them the VCO input nearest ``lim.prefer_ref_hz``, then
    the smallest ``m``, ``n``, ``div``. ``None`` when no factors give ``target`` exactly."""
    best: tuple[tuple[Fraction, int, int, int], tuple[int, int, int]] | None = None
    for m in lim.m:
        ref = Fraction(f_in, m)
        if not lim.ref_hz[0] <= ref <= lim.ref_hz[1]:
            continue
        for div in lim.div:
            n = Fraction(target * div) / ref
            if n.denominator != 1 or int(n) not in lim.n:
                continue
            vco = ref * n
            if not lim.vco_hz[0] <= vco <= lim.vco_hz[1]:
                continue
            key = (abs(ref - lim.prefer_ref_hz), m, int(n), div)
            if best is None or key < best[0]:
                best = (key, (m, int(n), div))
    return None if best is None else best[1]


def _prescaler(f: int, f_max: int, choices: Iterable[int]) -> int:
    """The smallest divider in ``choices`` that brings ``f`` to at most ``f_max``."""
    for d in choices:
        if f // d <= f_max and f % d == 0:
            return d
    raise ClockError(f"no bus prescaler brings {f / MHZ:g} MHz under {f_max / MHZ:g} MHz")


def _wait_states(hclk: int, table: tuple[int, ...]) -> int:
    """Wait states: the index of the first upper bound (MHz, inclusive) ``hclk`` fits under."""
    for ws, top in enumerate(table):
        if hclk <= top * MHZ:
            return ws
    raise ClockError(f"{hclk / MHZ:g} MHz is above every flash wait-state row")


#: AHB / APB prescaler encodings shared by F4/F7/L4 (RM0090 6.3.3): APB 0b1xx = /2^(xx+1),
#: AHB 0b1xxx = /2, /4, ... /512 (without /32).
APB_CODE = {1: 0, 2: 4, 4: 5, 8: 6, 16: 7}
AHB_CODE = {1: 0, 2: 8, 4: 9, 8: 10, 16: 11}


class ClockRules:
    """Clock-tree rules of one family; :meth:`plan` returns the :class:`ClockTree`."""

    manual: ClassVar[str]
    limits: ClassVar[PllLimits]
    reset_osc: ClassVar[Osc]  # the oscillator running after reset
    pll_osc: ClassVar[Osc]  # the internal oscillator the PLL uses when the board gives no HSE
    max_hz: ClassVar[int]  # the family's highest SYSCLK
    rcc: ClassVar[int]  # RCC base (RCC_CR at offset 0)

    def plan(self, part: str, part_max_hz: int, target_hz: int, hse: Osc | None) -> ClockTree:
        """The tree reaching ``target_hz`` exactly (``hse`` from the board, else the internal
        oscillator); ClockError naming the maximum when the part cannot run that fast. With an
        HSE, :attr:`ClockTree.fallback` is the same clock planned from the internal oscillator
        (``clock_init()`` runs it when the HSE does not start), or the internal oscillator alone
        (``fallback_slow``) when no PLL setting reaches ``target_hz`` from it."""
        top = min(part_max_hz, self.max_for(part))
        manual = self.manual_for(part)
        if target_hz > top:
            raise ClockError(
                f"{part}: clock {target_hz / MHZ:g} MHz is above the part's maximum "
                f"{top / MHZ:g} MHz ({manual}); set clock_mhz <= {top / MHZ:g}"
            )
        planned = self.plan_from(part, hse or self.pll_osc, target_hz, top)
        if hse is None:
            return planned
        try:
            fallback, slow = self.plan_from(part, self.pll_osc, target_hz, top), False
        except ClockError:
            osc = self.pll_osc
            fallback, slow = self._bounded(self.tree(part, osc, None, osc.hz)), True
        return replace(planned, fallback=fallback, fallback_slow=slow, hse_off=self.hse_off())

    def hse_off(self) -> tuple[Step, ...]:
        """HSEON off, then HSEBYP (writable only with the HSE off): RCC_CR bits 16 and 18 in
        every family here (RM0090 6.3.1, RM0410 5.3.1, RM0433 8.7.2, RM0351 6.4.1, RM0444
        5.4.1, RM0440 7.4.1, RM0438 9.8.1, RM0456 11.8.1)."""
        rcc = self.rcc
        return (
            _set(rcc, 16, 1, 0, "RCC_CR.HSEON = 0: the HSE did not start"),
            _set(rcc, 18, 1, 0, "RCC_CR.HSEBYP = 0 (writable with the HSE off)"),
        )

    def _bounded(self, tree: ClockTree) -> ClockTree:
        return replace(tree, steps=bound(tree.steps, self.reset_osc.hz, tree.sysclk_hz))

    def plan_from(self, part: str, osc: Osc, target_hz: int, top: int) -> ClockTree:
        """The tree reaching ``target_hz`` from ``osc``, its waits bounded (:func:`bound`)."""
        manual = self.manual_for(part)
        if target_hz == osc.hz:
            return self._bounded(self.tree(part, osc, None, target_hz))
        factors = search_pll(osc.hz, target_hz, self.limits_for(part))
        if factors is None:
            raise ClockError(
                f"{part}: no PLL setting gives exactly {target_hz / MHZ:g} MHz from "
                f"{osc.label} ({manual} PLL limits); set clock_mhz to a whole number of MHz "
                f"up to the maximum {top / MHZ:g}"
            )
        m, n, div = factors
        ref = Fraction(osc.hz, m)
        q = max(2, math.ceil(ref * n / (48 * MHZ)))
        pll = Pll(m, n, div, min(q, 15), osc.hz, ref, ref * n)
        return self._bounded(self.tree(part, osc, pll, target_hz))

    def limits_for(self, part: str) -> PllLimits:
        """The PLL limits of ``part`` (a family's variants differ)."""
        return self.limits

    def max_for(self, part: str) -> int:
        """The family variant's highest SYSCLK."""
        return self.max_hz

    def manual_for(self, part: str) -> str:
        return self.manual

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        raise NotImplementedError


# ------------------------------------------------------------------------- F4 / F7 -----------
class F4Clock(ClockRules):
    """STM32F4 (RM0090 F405/407, RM0368 F401, RM0390 F446).

    * PLL (RM0090 6.3.2 RCC_PLLCFGR): M 2..63, N 50..432 (F401: VCO >= 192 MHz, RM0368
      6.3.2), P in {2, 4, 6, 8}; VCO input 1-2 MHz, 2 MHz recommended against jitter; VCO
      output 100-432 MHz. Q: the 48 MHz clock must not exceed 48 MHz (Q >= 2).
    * Buses (DS8626 / DS10086 / DS10693 general operating conditions): APB1 <= 42 MHz and
      APB2 <= 84 MHz (F401/F405); F446: 45 / 90 MHz.
    * Flash wait states (RM0090 3.5.1 table 10, 2.7-3.6 V): one per 30 MHz of HCLK; F401
      (RM0368 3.4 table 6): 30 / 64 / 84 MHz.
    * Voltage: F405 VOS (PWR_CR bit 14) resets to scale 1 (RM0090 5.4.1), F401 to scale 2, enough
      for 84 MHz (RM0368 5.1.4), F446 to scale 1; above 168 MHz the F446 needs over-drive
      (RM0390 5.1.4: set ODEN, wait ODRDY, set ODSWEN, wait ODSWRDY).
    * FLASH_ACR: prefetch (bit 8), instruction (9) and data (10) caches on (RM0090 3.9.1).
    """

    manual = "RM0090"
    limits = PllLimits(range(2, 64), range(50, 433), (2, 4, 6, 8), (MHZ, 2 * MHZ),
                       (100 * MHZ, 432 * MHZ), 2 * MHZ)  # fmt: skip
    reset_osc = Osc("HSI", 16 * MHZ)
    pll_osc = Osc("HSI", 16 * MHZ)
    max_hz = 180 * MHZ
    rcc = 0x4002_3800
    flash_acr = 0x4002_3C00
    pwr = 0x4000_7000
    acr_extra: tuple[tuple[int, str], ...] = (
        (8, "PRFTEN: prefetch on"), (9, "ICEN: instruction cache on"), (10, "DCEN: data cache on")
    )  # fmt: skip
    overdrive_above_hz = 168 * MHZ

    def _variant(self, part: str) -> tuple[tuple[int, int], tuple[int, ...], int]:
        """``((APB1 max, APB2 max) MHz, wait-state table, VCO minimum)`` of the part."""
        if part.startswith("STM32F401") or part.startswith("STM32F411"):
            return (42, 84), (30, 64, 90), 192 * MHZ
        if part.startswith("STM32F446") or part.startswith("STM32F42"):
            return (45, 90), tuple(range(30, 211, 30)), self.limits.vco_hz[0]
        return (42, 84), tuple(range(30, 181, 30)), self.limits.vco_hz[0]

    def limits_for(self, part: str) -> PllLimits:
        lim = self.limits
        vco = (self._variant(part)[2], lim.vco_hz[1])
        return PllLimits(lim.m, lim.n, lim.div, lim.ref_hz, vco, lim.prefer_ref_hz)

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        (apb1_max, apb2_max), ws_table, _ = self._variant(part)
        d1 = _prescaler(sysclk, apb1_max * MHZ, APB_CODE)
        d2 = _prescaler(sysclk, apb2_max * MHZ, APB_CODE)
        ws = _wait_states(sysclk, ws_table)
        rcc, steps = self.rcc, []
        if osc.name == "HSE":
            if osc.bypass:
                steps.append(_set(rcc, 18, 1, 1, "RCC_CR.HSEBYP: external clock (RM0090 6.3.1)"))
            steps += [
                _set(rcc, 16, 1, 1, "RCC_CR.HSEON (RM0090 6.3.1)"),
                _wait(rcc, 17, 1, 1, "RCC_CR.HSERDY", "hse"),
            ]
        steps.append(_set(rcc + 0x40, 28, 1, 1, "RCC_APB1ENR.PWREN (RM0090 6.3.13)"))
        if pll is not None:
            steps += self.pll_steps(osc, pll)
        steps += self.overdrive_steps(sysclk)
        steps += [
            _set(self.flash_acr, 0, 4, ws, f"FLASH_ACR.LATENCY = {ws} WS ({self.ws_ref})"),
            _wait(self.flash_acr, 0, 4, ws, "FLASH_ACR.LATENCY read back (RM0090 3.5.1)", "flash"),
            *(_set(self.flash_acr, b, 1, 1, f"FLASH_ACR.{c}") for b, c in self.acr_extra),
            _set(rcc + 0x08, 4, 4, 0, "RCC_CFGR.HPRE = /1 (RM0090 6.3.3)"),
            _set(rcc + 0x08, 10, 3, APB_CODE[d1], f"RCC_CFGR.PPRE1 = /{d1}: APB1 <= limit"),
            _set(rcc + 0x08, 13, 3, APB_CODE[d2], f"RCC_CFGR.PPRE2 = /{d2}: APB2 <= limit"),
        ]
        sw = 2 if pll is not None else (1 if osc.name == "HSE" else 0)
        steps += [
            _set(rcc + 0x08, 0, 2, sw, "RCC_CFGR.SW: system clock switch (RM0090 6.3.3)"),
            _wait(rcc + 0x08, 2, 2, sw, "RCC_CFGR.SWS follows SW", "switch"),
        ]
        buses = {"AHB": sysclk, "APB1": sysclk // d1, "APB2": sysclk // d2}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))

    ws_ref = "RM0090 3.5.1 table 10, 2.7-3.6 V"

    def pll_steps(self, osc: Osc, pll: Pll) -> list[Step]:
        """RCC_PLLCFGR (RM0090 6.3.2): PLLM[5:0], PLLN[14:6], PLLP[17:16] = P/2 - 1, PLLSRC
        bit 22 (1 = HSE), PLLQ[27:24]; then PLLON (CR bit 24), wait PLLRDY (bit 25)."""
        rcc = self.rcc
        value = (
            pll.m | pll.n << 6 | (pll.div // 2 - 1) << 16 | (osc.name == "HSE") << 22 | pll.q << 24
        )
        return [
            Step("set", rcc + 0x04, 0x0F43_7FFF, value,
                 f"RCC_PLLCFGR: M={pll.m} N={pll.n} P={pll.div} Q={pll.q} src={osc.name} "
                 f"(VCO in {float(pll.f_ref_hz) / MHZ:g} MHz, out "
                 f"{float(pll.f_vco_hz) / MHZ:g} MHz; RM0090 6.3.2)"),
            _set(rcc, 24, 1, 1, "RCC_CR.PLLON"),
            _wait(rcc, 25, 1, 1, "RCC_CR.PLLRDY", "pll"),
        ]  # fmt: skip

    def overdrive_steps(self, sysclk: int) -> list[Step]:
        """Over-drive above 168 MHz (F446, RM0390 5.1.4; F7 above 180 MHz, RM0410 4.1.4), in the
        manual's order: with the PLL on and the system still on HSI / HSE, ODEN (PWR_CR bit 16),
        wait ODRDY (PWR_CSR bit 16), ODSWEN (bit 17), wait ODSWRDY (bit 17); then wait states,
        prescalers and the switch. VOS keeps its reset value (scale 1, or scale 2 on the F401
        which suffices up to 84 MHz)."""
        steps: list[Step] = []
        if sysclk > self.overdrive_above_hz:
            steps += [
                _set(self.pwr, 16, 1, 1, "PWR_CR.ODEN: over-drive (RM0390 5.1.4)"),
                _wait(self.pwr + 0x04, 16, 1, 1, "PWR_CSR.ODRDY", "power"),
                _set(self.pwr, 17, 1, 1, "PWR_CR.ODSWEN: switch to over-drive"),
                _wait(self.pwr + 0x04, 17, 1, 1, "PWR_CSR.ODSWRDY", "power"),
            ]
        return steps


class F7Clock(F4Clock):
    """STM32F7 (RM0410 F76x/77x, RM0385 F74x/75x): the F4's RCC and PLL (RM0410 5.3.2: M
    2..63, N 50..432, P 2..8 even, VCO input 1-2 MHz, output 100-432 MHz); APB1 <= 54 MHz,
    APB2 <= 108 MHz (DS11532 6.3.1); wait states one per 30 MHz at 2.7-3.6 V (RM0410 3.3.2
    table 7); over-drive above 180 MHz (RM0410 4.1.4, PWR_CR1 / PWR_CSR1 bits 16-17); FLASH_ACR
    prefetch (bit 8) and ART accelerator (bit 9, RM0410 3.3.2). The Cortex-M7 I- and D-caches
    are enabled by ``startup.c`` (ARMv7-M ARM B2.2.7; RM0410 2.1.2 / PM0253 4.8.4)."""

    manual = "RM0410"
    max_hz = 216 * MHZ
    overdrive_above_hz = 180 * MHZ
    acr_extra = ((8, "PRFTEN: prefetch on"), (9, "ARTEN: ART accelerator on"))
    ws_ref = "RM0410 3.3.2 table 7, 2.7-3.6 V"

    def _variant(self, part: str) -> tuple[tuple[int, int], tuple[int, ...], int]:
        return (54, 108), tuple(range(30, 241, 30)), self.limits.vco_hz[0]


# ------------------------------------------------------------------------- H7 ----------------
class H7Clock(ClockRules):
    """STM32H743/753 (RM0433 rev 7) and H723/733 (RM0468).

    * Supply (RM0433 6.8.4 PWR_CR3): the Nucleo-144 H7 boards feed VCORE from the LDO: write
      LDOEN (bit 1), clear BYPASS (bit 0) and SCUEN (bit 2), then wait ACTVOSRDY (PWR_CSR1
      bit 13); the supply configuration is write-once per power-up.
    * Voltage scaling (RM0433 6.6.2): VOS1 (PWR_D3CR.VOS = 0b11, wait VOSRDY bit 13) up to
      400 MHz; VOS0 (over-drive: SYSCFG_PWRCR.ODEN bit 0 with SYSCFG's clock on, RCC_APB4ENR
      bit 1, wait VOSRDY) for 480 MHz (H743 rev V, DS12110 table 23). H723 (RM0468 6.8.6):
      VOS0 is PWR_D3CR.VOS = 0b00, written directly; 550 MHz also needs the CPUFREQ_BOOST
      option bit (RM0468 4.4.8), which the firmware does not program.
    * PLL1 (RM0433 8.7.13 / 8.5.5): DIVM1 1..63 (RCC_PLLCKSELR[9:4]), input range PLL1RGE,
      wide VCO 192-960 MHz (PLL1VCOSEL = 0), DIVN1 4..512, DIVP1 even 2..128; 2 MHz reference.
    * Buses: D1CPRE /1, HPRE so that the AXI / AHB clock is <= 240 MHz (H723: 275 MHz), every
      APB (D1PPRE, D2PPRE1/2, D3PPRE) <= 120 MHz (H723: 137.5 MHz) (DS12110 table 23).
    * Flash (RM0433 4.3.8 table 17, VOS0/1): LATENCY and WRHIGHFREQ by AXI clock.
    """

    manual = "RM0433"
    limits = PllLimits(range(1, 64), range(4, 513), tuple(range(2, 129, 2)), (MHZ, 16 * MHZ),
                       (192 * MHZ, 960 * MHZ), 2 * MHZ)  # fmt: skip
    reset_osc = Osc("HSI", 64 * MHZ)
    pll_osc = Osc("HSI", 64 * MHZ)
    max_hz = 550 * MHZ
    rcc = 0x5802_4400
    pwr = 0x5802_4800
    syscfg = 0x5800_0400
    flash_acr = 0x5200_2000
    #: (upper AXI MHz, LATENCY, WRHIGHFREQ), RM0433 table 17 (VOS0 / VOS1)
    flash_rows = ((70, 0, 0), (140, 1, 1), (185, 2, 1), (210, 2, 2), (225, 3, 2), (240, 4, 2))
    #: RM0468 table 16 (H72x/73x, VOS0)
    flash_rows_h72 = ((70, 0, 0), (140, 1, 1), (210, 2, 2), (275, 3, 3))

    @staticmethod
    def h72(part: str) -> bool:
        """H72x/H73x (RM0468): DIVP1 may be 1; VOS0 is PWR_D3CR.VOS = 0b00 (no SYSCFG ODEN)."""
        return part.startswith("STM32H72") or part.startswith("STM32H73")

    def limits_for(self, part: str) -> PllLimits:
        lim = self.limits
        if not self.h72(part):
            return lim
        return PllLimits(lim.m, lim.n, (1, *lim.div), lim.ref_hz, lim.vco_hz, lim.prefer_ref_hz)

    def max_for(self, part: str) -> int:
        return self.max_hz if self.h72(part) else 480 * MHZ

    def manual_for(self, part: str) -> str:
        return "RM0468" if self.h72(part) else self.manual

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        h72 = self.h72(part)
        hclk_max, apb_max = (275 * MHZ, 137_500_000) if h72 else (240 * MHZ, 120 * MHZ)
        hpre = _prescaler(sysclk, hclk_max, AHB_CODE)
        hclk = sysclk // hpre
        dp = _prescaler(hclk, apb_max, APB_CODE)
        rows = self.flash_rows_h72 if h72 else self.flash_rows
        row = next((r for r in rows if hclk <= r[0] * MHZ), None)
        if row is None:
            raise ClockError(f"{part}: AXI clock {hclk / MHZ:g} MHz above the flash table")
        _, ws, wrhf = row
        rcc, pwr = self.rcc, self.pwr
        vos0 = sysclk > 400 * MHZ
        steps = [
            Step("set", pwr + 0x0C, 0x7, 0x2,
                 "PWR_CR3: LDOEN, no bypass, SCUEN cleared: LDO supply (RM0433 6.8.4)"),
            _wait(pwr + 0x04, 13, 1, 1, "PWR_CSR1.ACTVOSRDY (RM0433 6.8.2)", "power"),
            _set(pwr + 0x18, 14, 2, 3, "PWR_D3CR.VOS = scale 1 (RM0433 6.8.6)"),
            _wait(pwr + 0x18, 13, 1, 1, "PWR_D3CR.VOSRDY", "power"),
        ]  # fmt: skip
        if vos0 and h72:
            steps += [
                _set(pwr + 0x18, 14, 2, 0, "PWR_D3CR.VOS = 0b00: VOS0 (RM0468 6.8.6)"),
                _wait(pwr + 0x18, 13, 1, 1, "PWR_D3CR.VOSRDY at VOS0", "power"),
            ]
        elif vos0:
            steps += [
                _set(rcc + 0xF4, 1, 1, 1, "RCC_APB4ENR.SYSCFGEN (RM0433 8.7.48)"),
                _set(self.syscfg + 0x2C, 0, 1, 1, "SYSCFG_PWRCR.ODEN: VOS0 (RM0433 12.3.10)"),
                _wait(pwr + 0x18, 13, 1, 1, "PWR_D3CR.VOSRDY at VOS0 (RM0433 6.6.2)", "power"),
            ]
        if osc.name == "HSE":
            if osc.bypass:
                steps.append(_set(rcc, 18, 1, 1, "RCC_CR.HSEBYP: ST-LINK MCO (RM0433 8.7.2)"))
            steps += [
                _set(rcc, 16, 1, 1, "RCC_CR.HSEON"),
                _wait(rcc, 17, 1, 1, "RCC_CR.HSERDY", "hse"),
            ]
        if pll is not None:
            steps += self.pll_steps(osc, pll)
        steps += [
            Step("set", self.flash_acr, 0x3F, ws | wrhf << 4,
                 f"FLASH_ACR: LATENCY {ws} WS, WRHIGHFREQ {wrhf} for AXI {hclk / MHZ:g} MHz "
                 "(RM0433 4.3.8 table 17)"),
            _wait(self.flash_acr, 0, 4, ws, "FLASH_ACR.LATENCY read back (RM0433 4.3.8)", "flash"),
            Step("set", rcc + 0x18, 0xF7F, AHB_CODE[hpre] | APB_CODE[dp] << 4,
                 f"RCC_D1CFGR: D1CPRE /1, HPRE /{hpre}, D1PPRE /{dp} (RM0433 8.7.8)"),
            Step("set", rcc + 0x1C, 0x770, APB_CODE[dp] << 4 | APB_CODE[dp] << 8,
                 f"RCC_D2CFGR: D2PPRE1 /{dp}, D2PPRE2 /{dp} (RM0433 8.7.9)"),
            _set(rcc + 0x20, 4, 3, APB_CODE[dp], f"RCC_D3CFGR: D3PPRE /{dp} (RM0433 8.7.10)"),
        ]  # fmt: skip
        sw = 3 if pll is not None else (2 if osc.name == "HSE" else 0)
        steps += [
            _set(rcc + 0x10, 0, 3, sw, "RCC_CFGR.SW (RM0433 8.7.7)"),
            _wait(rcc + 0x10, 3, 3, sw, "RCC_CFGR.SWS follows SW", "switch"),
        ]
        buses = {"AHB": hclk} | {b: hclk // dp for b in ("APB1", "APB2", "APB3", "APB4")}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))

    def pll_steps(self, osc: Osc, pll: Pll) -> list[Step]:
        """RCC_PLLCKSELR (PLLSRC[1:0]: 0 HSI, 2 HSE; DIVM1[9:4]), RCC_PLLCFGR (PLL1RGE[3:2] by
        reference: [1, 2) / [2, 4) / [4, 8) / [8, 16] MHz = 0..3; PLL1VCOSEL bit 1 = 0 wide;
        FRACEN off; DIVP1EN bit 16 only), RCC_PLL1DIVR (N-1 [8:0], P-1 [15:9], Q-1 [22:16],
        R-1 [30:24]), then PLL1ON (CR bit 24), wait PLL1RDY (25). RM0433 8.7.11-8.7.13."""
        rcc = self.rcc
        rge = next((i for i, top in enumerate((2, 4, 8)) if pll.f_ref_hz < top * MHZ), 3)
        src = 2 if osc.name == "HSE" else 0
        divr = (pll.n - 1) | (pll.div - 1) << 9 | (pll.q - 1) << 16 | 1 << 24
        return [
            Step("set", rcc + 0x28, 0x3F3, src | pll.m << 4,
                 f"RCC_PLLCKSELR: PLLSRC {osc.name}, DIVM1 = {pll.m} (RM0433 8.7.11)"),
            Step("set", rcc + 0x2C, 0x0007_000F, rge << 2 | 1 << 16,
                 f"RCC_PLLCFGR: PLL1RGE {rge} ({float(pll.f_ref_hz) / MHZ:g} MHz in), wide VCO, "
                 "DIVP1EN (RM0433 8.7.12)"),
            Step("set", rcc + 0x30, 0x7F7F_FFFF, divr,
                 f"RCC_PLL1DIVR: N={pll.n} P={pll.div} Q={pll.q} R=2, VCO "
                 f"{float(pll.f_vco_hz) / MHZ:g} MHz (RM0433 8.7.13)"),
            _set(rcc, 24, 1, 1, "RCC_CR.PLL1ON"),
            _wait(rcc, 25, 1, 1, "RCC_CR.PLL1RDY", "pll"),
        ]  # fmt: skip


# ------------------------------------------------------------------------- L4 / G0 -----------
class L4Clock(ClockRules):
    """STM32L4 (RM0351, RM0394 L41x-L45x) and L4+ (RM0432 L4Rx/L4Sx).

    * Source: HSI16 (RCC_CR.HSION bit 8, HSIRDY bit 10; RM0351 6.4.1): +-1 % over temperature,
      better for UART than the reset MSI 4 MHz.
    * PLL (RM0351 6.4.4 RCC_PLLCFGR): PLLSRC[1:0] (2 = HSI16, 3 = HSE), PLLM[6:4] = M-1 (M 1..8;
      L4+ [7:4], 1..16), PLLN[14:8] 8..86 (L4+ 8..127), PLLR[26:25] (R = 2, 4, 6, 8) with PLLREN
      bit 24; VCO input 4-16 MHz (L4+: 2.66-16), output 64-344 MHz; R output <= 80 MHz (L4+:
      120 MHz).
    * Voltage range 1 (PWR_CR1.VOS = 01, reset value; RM0351 5.1.7); L4+ above 80 MHz in range 1
      boost mode: PWR_CR5.R1MODE = 0 (RM0432 5.1.8), entered with AHB /2 for at least 1 us
      around the switch (RM0432 6.2.9).
    * Flash (RM0351 3.3.3 table 11: 16 MHz per wait state in range 1; RM0432 3.3.3 table 12:
      20 MHz per wait state in boost mode); FLASH_ACR prefetch (bit 8), I-cache (9), D-cache (10).
    * APB1 / APB2 / AHB at the system clock (max 80 / 120 MHz, DS11912, DS12023).
    """

    manual = "RM0351"
    limits = PllLimits(range(1, 9), range(8, 87), (2, 4, 6, 8), (4 * MHZ, 16 * MHZ),
                       (64 * MHZ, 344 * MHZ), 16 * MHZ)  # fmt: skip
    limits_plus = PllLimits(range(1, 17), range(8, 128), (2, 4, 6, 8), (2_660_000, 16 * MHZ),
                            (64 * MHZ, 344 * MHZ), 16 * MHZ)  # fmt: skip
    reset_osc = Osc("MSI", 4 * MHZ)
    pll_osc = Osc("HSI16", 16 * MHZ)
    max_hz = 120 * MHZ
    rcc = 0x4002_1000
    pwr = 0x4000_7000
    flash_acr = 0x4002_2000

    @staticmethod
    def plus(part: str) -> bool:
        """L4+ parts: L4R, L4S, L4P, L4Q (RM0432)."""
        return part[:8] in ("STM32L4R", "STM32L4S", "STM32L4P", "STM32L4Q")

    def limits_for(self, part: str) -> PllLimits:
        return self.limits_plus if self.plus(part) else self.limits

    def max_for(self, part: str) -> int:
        return self.max_hz if self.plus(part) else 80 * MHZ

    def manual_for(self, part: str) -> str:
        return "RM0432" if self.plus(part) else self.manual

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        plus = self.plus(part)
        boost = plus and sysclk > 80 * MHZ
        ws = _wait_states(sysclk, tuple(range(20 if plus else 16, 121, 20 if plus else 16)))
        rcc, acr = self.rcc, self.flash_acr
        steps = [_set(rcc + 0x58, 28, 1, 1, "RCC_APB1ENR1.PWREN (RM0351 6.4.19)")]
        if boost:
            steps.append(_set(self.pwr + 0x80, 8, 1, 0, "PWR_CR5.R1MODE = 0: boost (RM0432 5.4.6)"))
        if osc.name == "HSE":
            if osc.bypass:
                steps.append(_set(rcc, 18, 1, 1, "RCC_CR.HSEBYP (RM0351 6.4.1)"))
            steps += [
                _set(rcc, 16, 1, 1, "RCC_CR.HSEON"),
                _wait(rcc, 17, 1, 1, "RCC_CR.HSERDY", "hse"),
            ]
        else:
            steps += [
                _set(rcc, 8, 1, 1, "RCC_CR.HSION: HSI16 (RM0351 6.4.1)"),
                _wait(rcc, 10, 1, 1, "RCC_CR.HSIRDY", "osc"),
            ]
        steps += [
            Step("set", acr, 0x70F, ws | 0x700,
                 f"FLASH_ACR: LATENCY {ws} WS, PRFTEN, ICEN, DCEN (RM0351 3.7.1; "
                 f"{'RM0432 table 12 boost' if plus else 'RM0351 table 11 range 1'})"),
            _wait(acr, 0, 4, ws, "FLASH_ACR.LATENCY read back (RM0351 3.3.3)", "flash"),
            Step("set", rcc + 0x08, 0x3F00, 0, "RCC_CFGR: PPRE1 = PPRE2 = /1 (RM0351 6.4.3)"),
        ]  # fmt: skip
        if pll is not None:
            steps += self.pll_steps(osc, pll, plus)
        sw = 3 if pll is not None else (2 if osc.name == "HSE" else 1)
        if boost:
            steps.append(_set(rcc + 0x08, 4, 4, 8, "RCC_CFGR.HPRE = /2 around the switch "
                                                   "(RM0432 6.2.9)"))  # fmt: skip
        steps += [
            _set(rcc + 0x08, 0, 2, sw, "RCC_CFGR.SW (RM0351 6.4.3)"),
            _wait(rcc + 0x08, 2, 2, sw, "RCC_CFGR.SWS follows SW", "switch"),
        ]
        if boost:
            steps += [
                Step("delay", 0, 0, 200, "at least 1 us at AHB /2 (RM0432 6.2.9)"),
                _set(rcc + 0x08, 4, 4, 0, "RCC_CFGR.HPRE = /1"),
            ]
        buses = {"AHB": sysclk, "APB1": sysclk, "APB2": sysclk}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))

    def pll_steps(self, osc: Osc, pll: Pll, plus: bool) -> list[Step]:
        rcc = self.rcc
        src = 3 if osc.name == "HSE" else 2
        value = src | (pll.m - 1) << 4 | pll.n << 8 | 1 << 24 | (pll.div // 2 - 1) << 25
        mask = 0x0700_7FF3 if plus else 0x0700_7F73
        return [
            Step("set", rcc + 0x0C, mask, value,
                 f"RCC_PLLCFGR: src {osc.name}, M={pll.m} N={pll.n} R={pll.div}, PLLREN (VCO "
                 f"{float(pll.f_vco_hz) / MHZ:g} MHz; {'RM0432' if plus else 'RM0351'} 6.4.4)"),
            _set(rcc, 24, 1, 1, "RCC_CR.PLLON"),
            _wait(rcc, 25, 1, 1, "RCC_CR.PLLRDY", "pll"),
        ]  # fmt: skip


class G0Clock(ClockRules):
    """STM32G0 (RM0444 rev 5).

    * PLL (RM0444 5.4.4 RCC_PLLCFGR): PLLSRC[1:0] (2 = HSI16, 3 = HSE), PLLM[6:4] = M-1 (1..8),
      PLLN[14:8] 8..86, PLLR[31:29] = R-1 (2..8) with PLLREN bit 28; VCO input 2.66-16 MHz,
      output 64-344 MHz (RM0444 5.2.4); PLLRCLK <= 64 MHz.
    * Voltage range 1 (PWR_CR1.VOS = 01, the reset value) allows 64 MHz (RM0444 4.1.4).
    * Flash (RM0444 3.3.4 table 8, range 1): 0 WS <= 24 MHz, 1 WS <= 48, 2 WS <= 64; FLASH_ACR
      LATENCY[2:0], PRFTEN bit 8, ICEN bit 9; read back before raising the clock.
    * One APB, PPRE /1 (RM0444 5.4.3).
    """

    manual = "RM0444"
    limits = PllLimits(range(1, 9), range(8, 87), tuple(range(2, 9)), (2_660_000, 16 * MHZ),
                       (64 * MHZ, 344 * MHZ), 16 * MHZ)  # fmt: skip
    reset_osc = Osc("HSI16", 16 * MHZ)
    pll_osc = Osc("HSI16", 16 * MHZ)
    max_hz = 64 * MHZ
    rcc = 0x4002_1000
    flash_acr = 0x4002_2000

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        ws = _wait_states(sysclk, (24, 48, 64))
        rcc, acr = self.rcc, self.flash_acr
        steps: list[Step] = []
        if osc.name == "HSE":
            if osc.bypass:
                steps.append(_set(rcc, 18, 1, 1, "RCC_CR.HSEBYP (RM0444 5.4.1)"))
            steps += [
                _set(rcc, 16, 1, 1, "RCC_CR.HSEON"),
                _wait(rcc, 17, 1, 1, "RCC_CR.HSERDY", "hse"),
            ]
        steps += [
            Step("set", acr, 0x307, ws | 0x300,
                 f"FLASH_ACR: LATENCY {ws} WS, PRFTEN, ICEN (RM0444 3.7.1, table 8 range 1)"),
            _wait(acr, 0, 3, ws, "FLASH_ACR.LATENCY read back (RM0444 3.3.4)", "flash"),
            Step("set", rcc + 0x08, 0x7F00, 0, "RCC_CFGR: HPRE = PPRE = /1 (RM0444 5.4.3)"),
        ]  # fmt: skip
        if pll is not None:
            src = 3 if osc.name == "HSE" else 2
            value = src | (pll.m - 1) << 4 | pll.n << 8 | 1 << 28 | (pll.div - 1) << 29
            steps += [
                Step("set", rcc + 0x0C, 0xF000_7F73, value,
                     f"RCC_PLLCFGR: src {osc.name}, M={pll.m} N={pll.n} R={pll.div}, PLLREN "
                     f"(VCO {float(pll.f_vco_hz) / MHZ:g} MHz; RM0444 5.4.4)"),
                _set(rcc, 24, 1, 1, "RCC_CR.PLLON"),
                _wait(rcc, 25, 1, 1, "RCC_CR.PLLRDY", "pll"),
            ]  # fmt: skip
        sw = 2 if pll is not None else (1 if osc.name == "HSE" else 0)
        steps += [
            _set(rcc + 0x08, 0, 3, sw, "RCC_CFGR.SW (RM0444 5.4.3)"),
            _wait(rcc + 0x08, 3, 3, sw, "RCC_CFGR.SWS follows SW", "switch"),
        ]
        buses = {"AHB": sysclk, "APB1": sysclk, "APB2": sysclk}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))
