"""The one emulated board: QEMU's ``netduinoplus2`` (an STM32F405RG).

Every module that needs a fact of the emulator (firmware generation, the QEMU launcher, the
build's overflow message, bench and calibration clocks, templates through the render context)
reads :data:`EMULATOR`; nothing else spells the machine, its part or its clock.

Facts (QEMU 7.2 ``hw/arm/netduinoplus2.c`` and ``hw/arm/stm32f405_soc.c``, RM0090 rev 19 2.3):
the SoC runs at a fixed 168 MHz SYSCLK whatever RCC says; 1 MiB flash at 0x0800_0000; SRAM1
112 KiB + SRAM2 16 KiB contiguous at 0x2000_0000 (CCM is not modelled as RAM for us); the
USARTs in ``-serial`` order are USART1, USART2, USART3, UART4, UART5, USART6 (SR/DR layout).
"""

from __future__ import annotations

from dataclasses import dataclass

from splitter.hardware.families import FAMILIES, Family
from splitter.ir import Part


@dataclass(frozen=True)
class EmulatedBoard:
    """A QEMU machine that stands in for every part: its SoC's family, clock, memory and USARTs.

    ``usarts`` are ``(name, base)`` in QEMU's ``-serial`` order: link ``k`` of a device is the
    ``k``-th one. ``flash``/``ram`` are ``(origin, bytes)``.
    """

    machine: str
    chip: str  # the SoC QEMU models, e.g. "STM32F405"
    part: str  # the catalog part that runs natively on it
    family: Family
    fpu: str
    clock_hz: int
    flash: tuple[int, int]
    ram: tuple[int, int]
    usarts: tuple[tuple[str, int], ...]

    @property
    def short(self) -> str:
        """``"F405"`` from ``"STM32F405"`` (as reports say "emulated as an F405")."""
        return self.chip.removeprefix("STM32")

    @property
    def title(self) -> str:
        """``"QEMU netduinoplus2 (STM32F405)"``."""
        return f"QEMU {self.machine} ({self.chip})"

    def is_native(self, part: Part) -> bool:
        """Whether ``part`` is the emulated chip itself (others run as it with their own code)."""
        return self.short.upper() in part.name.upper()


_F4 = FAMILIES["F4"]

#: QEMU's netduinoplus2, used by ``splitter emulate``/``run --emulate``/``bench --emulate``.
EMULATOR = EmulatedBoard(
    machine="netduinoplus2",
    chip="STM32F405",
    part="STM32F405RG",
    family=_F4,
    fpu="fpv4-sp-d16",
    clock_hz=168_000_000,
    flash=(0x0800_0000, 1024 * 1024),
    ram=(0x2000_0000, 128 * 1024),  # SRAM1 112 KiB + SRAM2 16 KiB, contiguous
    usarts=tuple(
        (name, _F4.usart_base[name])
        for name in ("USART1", "USART2", "USART3", "UART4", "UART5", "USART6")
    ),
)
