"""Clock trees of the real parts: oscillator -> PLL -> SYSCLK, buses, flash wait states, power.

Every STM32 boots from an internal RC oscillator (F4/F7/G0/G4 HSI 16 MHz, H7 HSI 64 MHz, L4/L5
MSI 4 MHz, U5 MSIS 4 MHz); the catalog's clock needs the PLL. :func:`plan_clock` computes, in
Python, the PLL factors (a small exhaustive search under the reference manual's VCO input /
output limits), the bus prescalers (each bus at most its datasheet maximum), the flash wait
states, voltage scaling and over-drive / boost, and returns a :class:`ClockTree` whose
:attr:`ClockTree.steps` the firmware's ``clock_init()`` executes in order (``startup.c.j2`` only
loops over them). Every value cites its reference-manual (RM) section in the rule that produces
it. Every wait is bounded (:data:`WAITS`, :func:`bound`); with an HSE the tree carries the same
clock planned from the internal oscillator, which ``clock_init()`` runs when the HSE does not
start, and ``splitter_clock_status`` (``clock_status.h``) says what happened.

The emulator build (QEMU, ``splitter/hardware/qemu.py``) skips all of this: QEMU does not model
RCC and runs its SoC at a fixed clock (``EMULATOR.clock_hz``).

A family's rules are one :class:`ClockRules` subclass (``F4Clock``, ``F7Clock``, ``H7Clock``,
``L4Clock``, ``G0Clock``), in the family's own module of ``splitter/hardware/families/`` beside
the family class that holds it (``Family.clock``); this module has what they share.
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


@dataclass(frozen=True)
class Variant:
    """A later line of a family with its own reference manual, PLL limits and highest SYSCLK
    (the L4+ of the L4, the H72x/73x of the H743), known by its part numbers' prefixes."""

    prefixes: tuple[str, ...]
    manual: str
    limits: PllLimits
    max_hz: int


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
    max_hz: ClassVar[int]  # the family's highest SYSCLK (of its parts outside the variant)
    #: the family's later line with other limits (:meth:`variant_of`); None: one line
    variant: ClassVar[Variant | None] = None
    rcc: ClassVar[int]  # RCC base (RCC_CR at offset 0)
    #: the VCORE supply configurations the firmware can select, the default (a bare part's) first;
    #: empty where the family's supply needs no choice or splitter writes one fixed setting. A
    #: board's ``supply`` (how its regulator pins are wired) picks one (:meth:`with_supply`).
    supplies: ClassVar[tuple[str, ...]] = ()

    def __init__(self, supply: str = "") -> None:
        self.supply = supply or (self.supplies[0] if self.supplies else "")

    def with_supply(self, supply: str | None, part: str) -> ClockRules:
        """These rules with the VCORE supply ``supply`` (None: unchanged); ClockError naming the
        family's supplies when it has no such one."""
        if supply is None or supply == self.supply:
            return self
        if supply not in self.supplies:
            known = ", ".join(self.supplies) or "none (the family's supply is fixed)"
            raise ClockError(
                f"{part}: supply = {supply!r} is not a VCORE supply of its family "
                f"({self.manual_for(part)}); use one of: {known}"
            )
        return type(self)(supply)

    def plan(
        self,
        part: str,
        part_max_hz: int,
        target_hz: int,
        hse: Osc | None,
        supply: str | None = None,
    ) -> ClockTree:
        """The tree reaching ``target_hz`` exactly (``hse`` from the board, else the internal
        oscillator; ``supply`` the board's VCORE supply, :meth:`with_supply`); ClockError naming
        the maximum when the part cannot run that fast. With an HSE,
        :attr:`ClockTree.fallback` is the same clock planned from the internal oscillator
        (``clock_init()`` runs it when the HSE does not start), or the internal oscillator alone
        (``fallback_slow``) when no PLL setting reaches ``target_hz`` from it."""
        rules = self.with_supply(supply, part)
        if rules is not self:
            return rules.plan(part, part_max_hz, target_hz, hse)
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

    def hse_on(self, osc: Osc, cite: str) -> list[Step]:
        """HSEBYP when the board's HSE is an external clock, HSEON, then wait HSERDY: RCC_CR bits
        18, 16 and 17, as :meth:`hse_off`; ``cite`` the manual's RCC_CR section, which the
        steps' comments name."""
        rcc = self.rcc
        bypass = [_set(rcc, 18, 1, 1, f"RCC_CR.HSEBYP ({cite})")] if osc.bypass else []
        return [
            *bypass,
            _set(rcc, 16, 1, 1, f"RCC_CR.HSEON ({cite})"),
            _wait(rcc, 17, 1, 1, "RCC_CR.HSERDY", "hse"),
        ]

    def hsi16_on(self, cite: str) -> list[Step]:
        """HSION, then wait HSIRDY: RCC_CR bits 8 and 10 where the HSI16 is not the reset clock
        (RM0351 6.4.1, RM0438 9.8.1, RM0456 11.8.1); ``cite`` the manual's RCC_CR section."""
        rcc = self.rcc
        return [
            _set(rcc, 8, 1, 1, f"RCC_CR.HSION: HSI16 ({cite})"),
            _wait(rcc, 10, 1, 1, "RCC_CR.HSIRDY", "osc"),
        ]

    def osc_on(self, osc: Osc, cite: str) -> list[Step]:
        """The PLL's oscillator started: :meth:`hse_on` for an HSE, else :meth:`hsi16_on`."""
        return self.hse_on(osc, cite) if osc.name == "HSE" else self.hsi16_on(cite)

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

    def variant_of(self, part: str) -> Variant | None:
        """:attr:`variant` when ``part`` is one of its parts, else None."""
        variant = self.variant
        return variant if variant is not None and part.startswith(variant.prefixes) else None

    def limits_for(self, part: str) -> PllLimits:
        """The PLL limits of ``part``: its variant's, else the family's."""
        variant = self.variant_of(part)
        return self.limits if variant is None else variant.limits

    def max_for(self, part: str) -> int:
        """The highest SYSCLK of ``part``: its variant's, else the family's."""
        variant = self.variant_of(part)
        return self.max_hz if variant is None else variant.max_hz

    def manual_for(self, part: str) -> str:
        """The reference manual of ``part``: its variant's, else the family's."""
        variant = self.variant_of(part)
        return self.manual if variant is None else variant.manual

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        raise NotImplementedError
