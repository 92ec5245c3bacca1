"""UART links: the STM32 USART / LPUART as the board-to-board and host link.

Everything splitter knows about a UART link that is not a per-family table: the divisor
formulas and their ranges (:func:`brr`, :func:`baud_valid`), the accepted baud error
(:data:`MAX_BAUD_ERROR`), the rates offered when one is refused (:data:`STANDARD_BAUDS`), the
8N1 framing (10 line bits per byte) and the firmware driver (``uart.c`` / ``uart.h``
implementing ``link.h``). The per-family facts (which USARTs, base addresses, IRQs, pins, the
register layout and the bus that clocks each) stay on the family
(:class:`~splitter.hardware.families.Family`: ``usart_table``, ``usart_layout``,
``usart_bus``); :class:`Uart` reads them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from splitter.errors import BoardFileError
from splitter.hardware.links.base import Baud, LinkKind

if TYPE_CHECKING:
    from splitter.hardware.clocks import ClockTree
    from splitter.hardware.families.base import Family

#: Standard rates offered when a baud rate is refused (the nearest valid ones are named).
STANDARD_BAUDS = (9600, 19200, 38400, 57600, 115200, 230400, 460800, 921600, 1_000_000,
                  2_000_000, 3_000_000, 4_000_000, 6_000_000, 8_000_000, 10_000_000)  # fmt: skip
#: Largest baud error accepted (RM0090 30.3.5: the receiver tolerates about 3.75 % in total
#: for both ends at 16x oversampling; 2 % per end leaves margin for the clocks themselves).
MAX_BAUD_ERROR = 0.02


def brr(usart: str, clock_hz: int, baud: int) -> int:
    """Baud-rate register: ``f_ck / baud`` (USART, 16x oversampling: RM0090 30.6.3 / RM0444
    33.8.5) or ``256 * f_ck / baud`` (LPUART, RM0351 38.4.4)."""
    scale = 256 if usart.startswith("LPUART") else 1
    return round(scale * clock_hz / baud)


def baud_valid(usart: str, fck: int, baud: int) -> Baud | None:
    """The divisor of ``baud`` if it is in range and within :data:`MAX_BAUD_ERROR`.

    USART, 16x oversampling (RM0090 30.6.3, RM0410 34.8.4): ``16 <= BRR <= 0xFFFF``, baud
    ``= f / BRR``; when that fails, 8x oversampling (OVER8, RM0090 30.3.4 / RM0410 34.5.4):
    ``USARTDIV = 2 f / baud >= 16`` (``f / baud >= 8``), ``BRR[15:4] = USARTDIV[15:4]``,
    ``BRR[2:0] = USARTDIV[3:0] >> 1``, baud ``= 2 f / USARTDIV`` (16x first: it tolerates
    more clock error). LPUART (RM0351 38.4.4 / 38.7.3): ``3 baud <= f <= 4096 baud`` and
    ``0x300 <= BRR <= 0xFFFFF``, baud ``= 256 f / BRR``.
    """
    div16 = brr(usart, fck, baud)
    if usart.startswith("LPUART"):
        ok = 3 * baud <= fck <= 4096 * baud and 0x300 <= div16 <= 0xFFFFF
        actual = 256 * fck / div16 if div16 else 0.0
    else:
        ok = 16 <= div16 <= 0xFFFF
        actual = fck / div16 if div16 else 0.0
    error = actual / baud - 1
    if ok and abs(error) <= MAX_BAUD_ERROR:
        return Baud(usart, fck, baud, div16, actual, error)
    if usart.startswith("LPUART"):
        return None
    div = round(2 * fck / baud)
    actual = 2 * fck / div if div else 0.0
    if not 16 <= div <= 0xFFFF or abs(actual / baud - 1) > MAX_BAUD_ERROR:
        return None
    brr8 = (div & ~0xF) | ((div & 0xF) >> 1)
    return Baud(usart, fck, baud, brr8, actual, actual / baud - 1, over8=True)


class Uart(LinkKind):
    """The USART / LPUART link, 8N1, interrupt-driven rings in the firmware (``uart.c``)."""

    name = "uart"
    firmware_sources = ("uart.c", "uart.h")
    max_rate = 100_000_000
    default_bits_per_byte = 10  # 8N1: start + 8 data + stop

    def peripherals(self, family: Family) -> tuple[str, ...]:
        """The USARTs of the family's ``usart_table``, in its order."""
        return tuple(family.usart_table)

    def check_peripheral(self, family: Family, name: str, part: str) -> None:
        """BoardFileError unless ``name`` is a USART of ``family``."""
        if name not in family.usart_table:
            raise BoardFileError(
                f"part {part}: {name} is not a USART of family {family.name} "
                f"({family.manual}); use one of {', '.join(self.peripherals(family))}"
            )

    def divisor(self, family: Family, name: str, clock_hz: int, rate: int) -> int:
        """:func:`brr` (the emulator's USART takes the 16x divisor unchecked)."""
        return brr(name, clock_hz, rate)

    def check_rate(
        self,
        family: Family,
        name: str,
        tree: ClockTree,
        rate: int,
        where: str,
        key: str = "[link] baud",
    ) -> Baud:
        """:func:`baud_valid` of ``name`` from its bus clock on ``tree`` (``family.usart_bus``);
        BoardFileError naming ``where``, the clock, the USART's limit (:func:`max_baud`), the
        nearest valid standard rates and the boards-file ``key`` to set."""
        fck = tree.bus_hz[family.usart_bus(name)]
        got = baud_valid(name, fck, rate)
        if got is not None:
            return got
        valid = [b for b in STANDARD_BAUDS if baud_valid(name, fck, b)]
        below = [b for b in valid if b < rate][-1:]
        above = [b for b in valid if b > rate][:1]
        nearest = " or ".join(str(b) for b in below + above) or "none"
        fix = f"set {key} = {(below + above)[0]}" if below + above else f"set {key}"
        top = max_baud(name, fck)
        raise BoardFileError(
            f"{where}: {name} cannot run {rate} baud from its {fck / 1e6:g} MHz clock (divisor "
            f"out of range or error over {MAX_BAUD_ERROR:.0%}; its limit is {top} baud, "
            f"{LIMIT_NOTE[name.startswith('LPUART')]}); nearest valid rates: {nearest}; {fix}"
        )


def max_baud(usart: str, fck: int) -> int:
    """The fastest rate ``usart`` makes from ``fck``: ``f / 8`` for a USART (8x oversampling,
    ``USARTDIV >= 16``, RM0090 30.3.4) and ``f / 3`` for an LPUART (``f >= 3 baud``, RM0351
    38.4.4), both with an exact divisor (error 0)."""
    return fck // 3 if usart.startswith("LPUART") else fck // 8


#: How :func:`max_baud` gets its limit, by ``is LPUART``.
LIMIT_NOTE = {False: "f/8 with 8x oversampling", True: "f/3"}


#: The one instance the families delegate to.
UART = Uart()
