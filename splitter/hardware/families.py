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

Adding a family: one subclass here and one entry in :data:`FAMILIES` plus its rows in
``tests/test_families.py`` (see CONTRIBUTING.md); nothing else in the tree is keyed by family.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import ClassVar, NamedTuple

from splitter.errors import BoardFileError
from splitter.hardware.clocks import (
    ClockRules,
    ClockTree,
    F4Clock,
    F7Clock,
    G0Clock,
    H7Clock,
    L4Clock,
    Osc,
)

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
    core: ClassVar[str]  # gcc -mcpu
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
    iwdg_base: ClassVar[int]  # independent watchdog: KR 0x00, PR 0x04, RLR 0x08, SR 0x0C
    lsi_hz: ClassVar[int]  # nominal LSI RC frequency, the IWDG's clock
    iwdg_source: ClassVar[str]  # where the two come from

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
        return not self.core.startswith("cortex-m0")

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
                f"part {part}: fpu '{fpu}' is not on family {self.name} ({self.core}); "
                f'use {known} or ""'
            )

    def cpu_flags(self, fpu: str) -> str:
        """gcc flags: ``-mcpu=<core> -mthumb`` plus hard float with ``-mfpu`` when ``fpu``."""
        if fpu:
            return f"-mcpu={self.core} -mthumb -mfpu={fpu} -mfloat-abi=hard"
        return f"-mcpu={self.core} -mthumb -mfloat-abi=soft"

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

    def clock_tree(self, part: str, part_max_hz: int, target_hz: int, hse: Osc | None) -> ClockTree:
        """The real part's clock tree reaching ``target_hz`` (see ``clocks.py``)."""
        return self.clock.plan(part, part_max_hz, target_hz, hse)


def _set_bit(addr: int, bit: int, comment: str) -> RegWrite:
    return RegWrite(f"0x{addr:08X}", "0x00000000", f"0x{1 << bit:08X}", comment)


class STM32F4(Family):
    """STM32F401/405/446...: Cortex-M4F, old USART (SR/DR), HSI 16 MHz after reset.

    RM0090 rev 19: RCC at 0x4002_3800 (2.3), AHB1ENR 0x30 / APB1ENR 0x40 / APB2ENR 0x44
    (6.3.10, 6.3.13, 6.3.14), GPIOA at 0x4002_0000 (2.3, 8.4), HSI 16 MHz (6.2.2), USART bases
    (2.3), IRQs (table 61), AF7 USART1-3 / AF8 UART4-5, USART6 (DS8626 table 9); IWDG at
    0x4000_3000 (2.3), clocked by the 32 kHz LSI (6.2.5; 21.3, table 107).
    """

    name = "F4"
    manual = "RM0090"
    core = "cortex-m4"
    fpus: ClassVar[tuple[str, ...]] = ("fpv4-sp-d16",)
    usart_layout = "sr_dr"
    reset_clock_hz = 16_000_000
    openocd_target = "target/stm32f4x.cfg"
    rcc = 0x4002_3800
    gpio = 0x4002_0000
    gpio_en = 0x30
    clock: ClassVar[ClockRules] = F4Clock()
    apb2_enr = 0x44
    iwdg_base = 0x4000_3000
    lsi_hz = 32_000
    iwdg_source = "RM0090 2.3, 6.2.5, 21.3 table 107"
    usart_table: ClassVar[Mapping[str, Usart]] = MappingProxyType(
        {  # base, RCC register, bit, IRQ, TX/RX, AF
            "USART1": Usart(0x4001_1000, 0x44, 4, 37, "PA9/PA10", 7),
            "USART2": Usart(0x4000_4400, 0x40, 17, 38, "PA2/PA3", 7),
            "USART3": Usart(0x4000_4800, 0x40, 18, 39, "PB10/PB11", 7),
            "UART4": Usart(0x4000_4C00, 0x40, 19, 52, "PA0/PA1", 8),
            "UART5": Usart(0x4000_5000, 0x40, 20, 53, "PC12/PD2", 8),
            "USART6": Usart(0x4001_1400, 0x44, 5, 71, "PC6/PC7", 8),
        }
    )


def _nucleo144(table: Mapping[str, Usart]) -> Mapping[str, Usart]:
    """Nucleo-144 boards route USART3 to PD8/PD9, the ST-LINK virtual COM port (UM1974 6.9)."""
    return MappingProxyType({**table, "USART3": table["USART3"]._replace(pins="PD8/PD9")})


class STM32F7(STM32F4):
    """STM32F7: the F4's RCC, GPIO, USART bases, IRQs and AFs (RM0410 rev 4: 2.2, 5.3.10/13/14,
    table 40), Cortex-M7, the new USART (ISR/RDR/TDR, RM0410 34.8), HSI 16 MHz (5.2.2); the
    F4's IWDG address and 32 kHz LSI (RM0410 2.2 memory map, 5.2, IWDG chapter)."""

    name = "F7"
    manual = "RM0410"
    core = "cortex-m7"
    fpus = ("fpv5-sp-d16", "fpv5-d16")  # F74x/F75x single, F76x/F77x double precision
    usart_layout = "isr_rdr_tdr"
    openocd_target = "target/stm32f7x.cfg"
    clock = F7Clock()
    usart_table = _nucleo144(STM32F4.usart_table)
    iwdg_source = "RM0410 2.2 memory map, 5.2 LSI, Independent watchdog (IWDG) chapter"


class STM32H7(Family):
    """STM32H7: RM0433 rev 7: RCC at 0x5802_4400, AHB4ENR 0xE0 / APB1LENR 0xE8 / APB2ENR 0xF0
    (8.7.43, 8.7.45, 8.7.47), GPIOA at 0x5802_0000 (2.3.2), HSI 64 MHz after reset (8.5.2);
    the F4's USART bases and IRQ numbers (2.3.2, table 145); USART6 on AF7 here (DS12110
    table 9); Nucleo-144 USART3 on PD8/PD9; IWDG1 at 0x5800_4800 (2.3.2, D3 domain) on the
    32 kHz LSI (8.5, IWDG chapter)."""

    name = "H7"
    manual = "RM0433"
    core = "cortex-m7"
    fpus = ("fpv5-d16",)
    usart_layout = "isr_rdr_tdr"
    reset_clock_hz = 64_000_000
    openocd_target = "target/stm32h7x.cfg"
    rcc = 0x5802_4400
    gpio = 0x5802_0000
    gpio_en = 0xE0
    clock = H7Clock()
    apb2_enr = 0xF0
    iwdg_base = 0x5800_4800
    lsi_hz = 32_000
    iwdg_source = "RM0433 2.3.2 memory map (IWDG1), 8.5 LSI, Independent watchdog (IWDG) chapter"
    usart_table = _nucleo144(
        {
            name: u._replace(
                en_reg=0xF0 if u.en_reg == 0x44 else 0xE8,  # APB2ENR / APB1LENR, same bits
                af=7 if name == "USART6" else u.af,
            )
            for name, u in STM32F4.usart_table.items()
        }
    )


class STM32L4(Family):
    """STM32L4 and L4+: RM0351 rev 9 / RM0432: RCC at 0x4002_1000, AHB2ENR 0x4C /
    APB1ENR1 0x58 / APB1ENR2 0x5C / APB2ENR 0x60 (6.4.17, 6.4.19-21), GPIOA at 0x4800_0000,
    MSI 4 MHz after reset (6.2.3), USART bases (2.2.2), IRQs (table 58); LPUART1 has
    ``BRR = 256 f / baud`` (38.4.4) and is on PG7/PG8 on the Nucleo-144 (UM2179); IWDG at
    0x4000_3000 (2.2.2) on the 32 kHz LSI (6.2, IWDG chapter)."""

    name = "L4"
    manual = "RM0351"
    core = "cortex-m4"
    fpus = ("fpv4-sp-d16",)
    usart_layout = "isr_rdr_tdr"
    reset_clock_hz = 4_000_000
    openocd_target = "target/stm32l4x.cfg"
    rcc = 0x4002_1000
    gpio = 0x4800_0000
    gpio_en = 0x4C
    clock = L4Clock()
    apb2_enr = 0x60
    iwdg_base = 0x4000_3000
    lsi_hz = 32_000
    iwdg_source = "RM0351 2.2.2 memory map, 6.2 LSI, Independent watchdog (IWDG) chapter"
    usart_table: ClassVar[Mapping[str, Usart]] = MappingProxyType(
        {  # base, RCC register, bit, IRQ, TX/RX, AF
            "USART1": Usart(0x4001_3800, 0x60, 14, 37, "PA9/PA10", 7),
            **{  # APB1ENR1: the F4's bits, IRQs, pins and AFs
                n: STM32F4.usart_table[n]._replace(en_reg=0x58)
                for n in ("USART2", "USART3", "UART4", "UART5")
            },
            "LPUART1": Usart(0x4000_8000, 0x5C, 0, 70, "PG7/PG8", 8),
        }
    )

    def power_writes(self, pins: Sequence[str]) -> list[RegWrite]:
        """Port G is supplied by VDDIO2, isolated until PWR_CR2.IOSV (bit 9) is set, with the
        PWR clock on (RCC_APB1ENR1.PWREN bit 28) (RM0432 5.1.3 / 5.4.2, RM0351 5.1.3 / 5.4.2)."""
        if not any(p.startswith("PG") for p in pins):
            return []
        return [
            _set_bit(self.rcc + 0x58, 28, "RCC: clock PWR"),
            _set_bit(0x4000_7004, 9, "PWR_CR2.IOSV: VDDIO2 valid, port G powered"),
        ]


class STM32G0(Family):
    """STM32G0: RM0444 rev 5: RCC at 0x4002_1000, IOPENR 0x34 / APBENR1 0x3C / APBENR2 0x40
    (5.4.13, 5.4.15, 5.4.16), GPIOA at 0x5000_0000 (IOPORT, 2.2), HSISYS 16 MHz after reset
    (5.2), Cortex-M0+ without FPU, USART IRQs (table 44: USART3 and USART4 share IRQ 29), AF
    numbers from DS12232 tables 13-14; IWDG at 0x4000_3000 (2.2) on the 32 kHz LSI (5.2,
    IWDG chapter)."""

    name = "G0"
    manual = "RM0444"
    core = "cortex-m0plus"
    fpus = ("",)
    usart_layout = "isr_rdr_tdr"
    reset_clock_hz = 16_000_000
    openocd_target = "target/stm32g0x.cfg"
    rcc = 0x4002_1000
    gpio = 0x5000_0000
    gpio_en = 0x34
    clock = G0Clock()
    apb2_enr = 0x40  # one APB; the clock tree gives APB1 = APB2
    iwdg_base = 0x4000_3000
    lsi_hz = 32_000
    iwdg_source = "RM0444 2.2 memory map, 5.2 LSI, Independent watchdog (IWDG) chapter"
    usart_table: ClassVar[Mapping[str, Usart]] = MappingProxyType(
        {  # base, RCC register, bit, IRQ, TX/RX, AF
            "USART1": Usart(0x4001_3800, 0x40, 14, 27, "PA9/PA10", 1),
            "USART2": Usart(0x4000_4400, 0x3C, 17, 28, "PA2/PA3", 1),
            "USART3": Usart(0x4000_4800, 0x3C, 18, 29, "PB10/PB11", 4),
            "USART4": Usart(0x4000_4C00, 0x3C, 19, 29, "PA0/PA1", 4),
        }
    )


#: Every supported family by the name catalog parts give in ``family = "..."``.
FAMILIES: Mapping[str, Family] = MappingProxyType(
    {f.name: f for f in (STM32F4(), STM32F7(), STM32H7(), STM32L4(), STM32G0())}
)


def family_for(name: str) -> Family:
    """The family ``name`` (``"F4"``, ``"H7"``...); BoardFileError naming the known ones."""
    family = FAMILIES.get(name)
    if family is None:
        raise BoardFileError(
            f"unknown family '{name}'; known families: {', '.join(FAMILIES)} "
            "(add one to splitter/hardware/families.py, see CONTRIBUTING.md)"
        )
    return family
