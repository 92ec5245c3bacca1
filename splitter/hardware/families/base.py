"""STM32 families as classes: every register address, IRQ number and pin splitter uses, per family.

As esptool keeps ``CHIP_DEFS = {"esp32": ESP32ROM, ...}``, one class per family holds the facts
of its reference manual (RM); subclasses override constants where the silicon differs (the F7
keeps the F4's RCC and GPIO map but has the newer USART). :data:`FAMILIES` maps the family name a
catalog part gives (``family = "F4"``) to its one instance; :func:`family_for` refuses an unknown
name, there is no fallback family.

A family supplies, for the firmware generator (``splitter/codegen/firmware.py``):

* the USARTs it knows: base address, RCC clock-enable bit, NVIC IRQ number, TX/RX pins of the
  usual LQFP64 / Nucleo routing and their alternate function (AF) number;
* the clock after reset, the clock-tree rules (:attr:`Family.clock`, ``clocks.py``: PLL,
  wait states, voltage) and the USART register layout;
* the core and FPU, hence the compiler flags; the OpenOCD target script for ``splitter flash``;
* :meth:`Family.board_init_writes` (RCC, power and GPIO setup at boot), :meth:`Family.brr` and
  :meth:`Family.check_baud` (divisor from the USART's bus clock, checked against its range);
* the independent watchdog's base address and the LSI frequency that clocks it
  (``splitter/hardware/watchdog.py``).

Each family is one module of this package (``stm32f4.py``, ...: its :class:`Family` subclass and
its clock rules); adding a family is one such module, its line in :data:`FAMILIES`
(``__init__.py``) and its rows in ``tests/test_families.py`` (see CONTRIBUTING.md); nothing else
in the tree is keyed by family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, NamedTuple

from splitter.errors import BoardFileError
from splitter.hardware.clocks import ClockRules, ClockTree, Osc
from splitter.hardware.cores import Core

#: USART register layouts: ``sr_dr`` = SR 0x00, DR 0x04, BRR 0x08, CR1 0x0C (F1/F2/F4, RM0090
#: 30.6); ``isr_rdr_tdr`` = CR1 0x00, BRR 0x0C, ISR 0x1C, RDR 0x24, TDR 0x28 (F0/F3/F7/G0/H7/L4,
#: e.g. RM0410 34.8, RM0444 33.8).
USART_LAYOUTS = ("sr_dr", "isr_rdr_tdr")


@dataclass(frozen=True)
class RegWrite:
    """``*addr = (*addr & ~clear) | set`` at boot of the real part (RCC and GPIO setup)."""

    addr: str
    clear: str
    set: str
    comment: str


#: Standard rates offered when a baud rate is refused (the nearest valid ones are named).
STANDARD_BAUDS = (9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600, 1_000_000,
                  2_000_000, 3_000_000, 4_000_000, 6_000_000, 8_000_000, 10_000_000)  # fmt: skip
#: Largest baud error accepted (RM0090 30.3.5: the receiver tolerates about 3.75 % in total
#: for both ends at 16x oversampling; 2 % per end leaves margin for the clocks themselves).
MAX_BAUD_ERROR = 0.02


@dataclass(frozen=True)
class Baud:
    """A checked divisor: ``brr`` for ``baud`` from a ``fck_hz`` kernel clock (``over8``: with
    8x oversampling, CR1.OVER8 = 1); ``actual`` is the rate it gives, ``error`` =
    ``actual / baud - 1``."""

    usart: str
    fck_hz: int
    baud: int
    brr: int
    actual: float
    error: float
    over8: bool = False


class Usart(NamedTuple):
    """One USART of a family: base address, RCC clock-enable register offset and bit, NVIC IRQ
    number, TX/RX pins (usual LQFP64 / Nucleo routing) and their alternate-function number."""

    base: int
    en_reg: int
    en_bit: int
    irq: int
    pins: str
    af: int


class Family:
    """Facts of one STM32 family; subclasses set every constant (see the module docstring).

    ``usart_table`` holds one :class:`Usart` row per USART the generator can drive on the
    family; ``gpio_en`` is the RCC offset of the GPIO clock-enable register (bit n = port n);
    GPIO port n is at ``gpio + 0x400 * n``.
    """

    name: ClassVar[str]
    manual: ClassVar[str]  # the reference manual the numbers come from
    core: ClassVar[Core]  # splitter.hardware.cores
    fpus: ClassVar[tuple[str, ...]]  # FPUs of the family's parts ("" = none), default first
    usart_layout: ClassVar[str]
    reset_clock_hz: ClassVar[int]
    openocd_target: ClassVar[str]
    rcc: ClassVar[int]
    gpio: ClassVar[int]
    gpio_en: ClassVar[int]
    usart_table: ClassVar[Mapping[str, Usart]]
    clock: ClassVar[ClockRules]
    apb2_enr: ClassVar[int]  # RCC offset of the APB2 enable register (its USARTs run on APB2)
    #: fraction of instructions stalling on flash wait states despite the family's accelerator
    #: (``splitter.cost.cpi``), and the reference-manual sections it is read from
    flash_miss_rate: ClassVar[float]
    flash_miss_source: ClassVar[str]
    #: the (Q)SPI controller a board's external flash is mapped through, and its memory-mapped
    #: window (``splitter/hardware/extflash.py``); None where splitter configures none
    qspi: ClassVar[tuple[str, int] | None] = None
    iwdg_base: ClassVar[int]  # independent watchdog: KR 0x00, PR 0x04, RLR 0x08, SR 0x0C
    lsi_hz: ClassVar[int]  # nominal LSI RC frequency, the IWDG's clock
    iwdg_source: ClassVar[str]  # where the two come from
    #: largest IWDG_PR code: 6 (``/256``, a 3-bit PR: RM0090 21.4.2) except where PR is wider
    iwdg_max_pr: ClassVar[int] = 6

    def __repr__(self) -> str:
        return f"<family {self.name}>"

    # -- facts derived from the constants ------------------------------------------------------
    @property
    def usarts(self) -> tuple[str, ...]:
        """The USARTs of :attr:`usart_table`, in its order."""
        return tuple(self.usart_table)

    @property
    def usart_base(self) -> Mapping[str, int]:
        """USART -> base address."""
        return {name: u.base for name, u in self.usart_table.items()}

    @property
    def irq(self) -> Mapping[str, int]:
        """USART -> NVIC IRQ number."""
        return {name: u.irq for name, u in self.usart_table.items()}

    @property
    def pins(self) -> Mapping[str, str]:
        """USART -> ``"TX/RX"`` pins."""
        return {name: u.pins for name, u in self.usart_table.items()}

    @property
    def has_dwt(self) -> bool:
        """The DWT cycle counter exists on Cortex-M3/M4/M7, not on M0/M0+ (ARMv6-M)."""
        return self.core.dwt

    def check_usart(self, usart: str, part: str) -> None:
        """Raise BoardFileError unless ``usart`` is one of :attr:`usarts`."""
        if usart not in self.usart_table:
            raise BoardFileError(
                f"part {part}: {usart} is not a USART of family {self.name} "
                f"({self.manual}); use one of {', '.join(self.usarts)}"
            )

    def check_fpu(self, fpu: str, part: str) -> None:
        """Raise BoardFileError unless ``fpu`` is an FPU of this family's parts (or none)."""
        if fpu not in (*self.fpus, ""):
            known = ", ".join(f for f in self.fpus if f) or "none"
            raise BoardFileError(
                f"part {part}: fpu '{fpu}' is not on family {self.name} ({self.core.name}); "
                f'use {known} or ""'
            )

    def cpu_flags(self, fpu: str) -> str:
        """gcc flags of the family's core (:meth:`Core.cpu_flags`)."""
        return self.core.cpu_flags(fpu)

    @staticmethod
    def brr(usart: str, clock_hz: int, baud: int) -> int:
        """Baud-rate register: ``f_ck / baud`` (USART, 16x oversampling: RM0090 30.6.3 / RM0444
        33.8.5) or ``256 * f_ck / baud`` (LPUART, RM0351 38.4.4)."""
        scale = 256 if usart.startswith("LPUART") else 1
        return round(scale * clock_hz / baud)

    def usart_bus(self, usart: str) -> str:
        """``"APB2"`` or ``"APB1"``: the bus clock that feeds ``usart`` with the reset kernel-clock
        selection (RCC_DCKCFGR2 / D2CCIP2R / CCIPR = PCLK; RM0410 5.3.28, RM0433 8.7.21,
        RM0351 6.4.27, RM0444 5.4.19)."""
        return "APB2" if self.usart_table[usart].en_reg == self.apb2_enr else "APB1"

    @classmethod
    def baud_valid(cls, usart: str, fck: int, baud: int) -> Baud | None:
        """The divisor of ``baud`` if it is in range and within :data:`MAX_BAUD_ERROR`.

        USART, 16x oversampling (RM0090 30.6.3, RM0410 34.8.4): ``16 <= BRR <= 0xFFFF``, baud
        ``= f / BRR``; when that fails, 8x oversampling (OVER8, RM0090 30.3.4 / RM0410 34.5.4):
        ``USARTDIV = 2 f / baud >= 16`` (``f / baud >= 8``), ``BRR[15:4] = USARTDIV[15:4]``,
        ``BRR[2:0] = USARTDIV[3:0] >> 1``, baud ``= 2 f / USARTDIV`` (16x first: it tolerates
        more clock error). LPUART (RM0351 38.4.4 / 38.7.3): ``3 baud <= f <= 4096 baud`` and
        ``0x300 <= BRR <= 0xFFFFF``, baud ``= 256 f / BRR``.
        """
        brr = cls.brr(usart, fck, baud)
        if usart.startswith("LPUART"):
            ok = 3 * baud <= fck <= 4096 * baud and 0x300 <= brr <= 0xFFFFF
            actual = 256 * fck / brr if brr else 0.0
        else:
            ok = 16 <= brr <= 0xFFFF
            actual = fck / brr if brr else 0.0
        error = actual / baud - 1
        if ok and abs(error) <= MAX_BAUD_ERROR:
            return Baud(usart, fck, baud, brr, actual, error)
        if usart.startswith("LPUART"):
            return None
        div = round(2 * fck / baud)
        actual = 2 * fck / div if div else 0.0
        if not 16 <= div <= 0xFFFF or abs(actual / baud - 1) > MAX_BAUD_ERROR:
            return None
        brr8 = (div & ~0xF) | ((div & 0xF) >> 1)
        return Baud(usart, fck, baud, brr8, actual, actual / baud - 1, over8=True)

    def check_baud(self, usart: str, tree: ClockTree, baud: int, link: str) -> Baud:
        """The checked divisor of ``usart`` at ``baud`` from ``tree``'s bus clock; BoardFileError
        naming ``link``, the clock and the nearest valid standard rates otherwise."""
        fck = tree.bus_hz[self.usart_bus(usart)]
        got = self.baud_valid(usart, fck, baud)
        if got is not None:
            return got
        valid = [b for b in STANDARD_BAUDS if self.baud_valid(usart, fck, b)]
        below = [b for b in valid if b < baud][-1:]
        above = [b for b in valid if b > baud][:1]
        nearest = " or ".join(str(b) for b in below + above) or "none"
        raise BoardFileError(
            f"{link}: {usart} cannot run {baud} baud from its {fck / 1e6:g} MHz clock (divisor "
            f"out of range or error over {MAX_BAUD_ERROR:.0%}); nearest valid rates: {nearest}; "
            "set [link] baud"
        )

    def route(self, usart: str, pins: str | None = None) -> tuple[tuple[str, int], ...]:
        """``((tx, af), (rx, af))``: the family's pins of ``usart``, or a board's ``"TX/RX"``
        where a pin may carry its own AF as ``"PA15:3"``."""
        u = self.usart_table[usart]
        out = []
        for pin in (pins or u.pins).split("/"):
            name, _, af = pin.partition(":")
            out.append((name, int(af) if af else u.af))
        return tuple(out)

    def board_init_writes(
        self, usarts: Sequence[str], pins: Mapping[str, str] | None = None
    ) -> tuple[RegWrite, ...]:
        """Register writes that clock the GPIO ports and USARTs and mux the pins (real part only).

        Per USART: RCC enable bit; per pin (``pins`` = a board's routing, else the family's):
        RCC GPIO port bit, MODER = 0b10 (alternate function, ``MODER[2p+1:2p]``), OSPEEDR =
        0b01 (medium speed: edges fast enough for 10 Mbit/s, little ringing on jumper wires),
        PUPDR = 0b01 (pull-up: the idle line is high, an unconnected RX reads idle rather than
        noise), AFR[p / 8] nibble ``p % 8`` = AF (RM0090 8.4.1-8.4.4, 8.4.9-10; the same GPIO
        layout in every family here). :meth:`power_writes` first where a port needs it.
        """
        writes: list[RegWrite] = []
        routes = {}
        for name in usarts:
            self.check_usart(name, self.name)
            routes[name] = self.route(name, (pins or {}).get(name))
        writes += self.power_writes([p for r in routes.values() for p, _ in r])
        for name, route in routes.items():
            u = self.usart_table[name]
            writes.append(_set_bit(self.rcc + u.en_reg, u.en_bit, f"RCC: clock {name}"))
            for pin, af in route:
                writes += self._pin_writes(pin, af)
        return tuple(writes)

    def power_writes(self, pins: Sequence[str]) -> list[RegWrite]:
        """Supply switches the pins need before use (none here; L4 overrides for VDDIO2)."""
        return []

    def _pin_writes(self, pin: str, af: int) -> list[RegWrite]:
        """Clock ``pin``'s port, set its mode to AF, medium speed, pull-up, AFR nibble ``af``."""
        port, num = ord(pin[1]) - ord("A"), int(pin[2:])
        base = self.gpio + 0x400 * port
        afr = base + 0x20 + 4 * (num // 8)
        shift = 4 * (num % 8)

        def two(off: int, value: int, what: str) -> RegWrite:
            return RegWrite(
                f"0x{base + off:08X}",
                f"0x{3 << (2 * num):08X}",
                f"0x{value << (2 * num):08X}",
                f"{pin}: {what}",
            )

        return [
            _set_bit(self.rcc + self.gpio_en, port, f"RCC: clock GPIO{pin[1]}"),
            two(0x00, 2, "MODER alternate function"),
            two(0x08, 1, "OSPEEDR medium speed"),
            two(0x0C, 1, "PUPDR pull-up"),
            RegWrite(
                f"0x{afr:08X}", f"0x{0xF << shift:08X}", f"0x{af << shift:08X}", f"{pin}: AF{af}"
            ),
        ]

    def clock_tree(
        self,
        part: str,
        part_max_hz: int,
        target_hz: int,
        hse: Osc | None,
        supply: str | None = None,
    ) -> ClockTree:
        """The real part's clock tree reaching ``target_hz`` (see ``clocks.py``) from the
        board's ``hse`` and VCORE ``supply`` (None: the family's default)."""
        return self.clock.plan(part, part_max_hz, target_hz, hse, supply)


def _set_bit(addr: int, bit: int, comment: str) -> RegWrite:
    return RegWrite(f"0x{addr:08X}", "0x00000000", f"0x{1 << bit:08X}", comment)


def _nucleo144(table: Mapping[str, Usart]) -> Mapping[str, Usart]:
    """Nucleo-144 boards route USART3 to PD8/PD9, the ST-LINK virtual COM port (UM1974 6.9)."""
    return MappingProxyType({**table, "USART3": table["USART3"]._replace(pins="PD8/PD9")})
