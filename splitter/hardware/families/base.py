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
* :meth:`Family.board_init_writes` (RCC, power and GPIO setup at boot) and
  :meth:`Family.usart_bus` (the bus clocking each USART); the divisor formulas and their checks
  are the UART link kind's (:mod:`splitter.hardware.links.uart`; :meth:`Family.brr` and
  :meth:`Family.check_baud` delegate to it);
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
from splitter.hardware.links.uart import UART, Baud, baud_valid, brr

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
        """Raise BoardFileError unless ``usart`` is one of :attr:`usarts` (the UART link's
        :meth:`~splitter.hardware.links.uart.Uart.check_peripheral`)."""
        UART.check_peripheral(self, usart, part)

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
        """The UART link's baud-rate register (:func:`splitter.hardware.links.uart.brr`)."""
        return brr(usart, clock_hz, baud)

    def usart_bus(self, usart: str) -> str:
        """``"APB2"`` or ``"APB1"``: the bus clock that feeds ``usart`` with the reset kernel-clock
        selection (RCC_DCKCFGR2 / D2CCIP2R / CCIPR = PCLK; RM0410 5.3.28, RM0433 8.7.21,
        RM0351 6.4.27, RM0444 5.4.19)."""
        return "APB2" if self.usart_table[usart].en_reg == self.apb2_enr else "APB1"

    @classmethod
    def baud_valid(cls, usart: str, fck: int, baud: int) -> Baud | None:
        """The UART link's checked divisor (:func:`splitter.hardware.links.uart.baud_valid`)."""
        return baud_valid(usart, fck, baud)

    def check_baud(self, usart: str, tree: ClockTree, baud: int, link: str) -> Baud:
        """The UART link's rate check on this family (:meth:`~splitter.hardware.links.uart.Uart.
        check_rate`)."""
        return UART.check_rate(self, usart, tree, baud, link)

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
