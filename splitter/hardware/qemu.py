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


def bare_metal_startup(entry: str) -> str:
    """C text of a minimal bare-metal start-up for :data:`EMULATOR`, shared by the kernel
    harnesses run on it (``benchmarks/kernels.py``, ``tests/test_kernels_q8_opt.py``): copy
    ``.data``, zero ``.bss``, grant CP10/CP11 (the FPU, ARMv7-M ARM B3.2.20 CPACR), enable
    USART1 (UE | TE, RM0090 30.6.4) for the harness's output, call ``entry()``; and the 16-word
    vector table. ``entry`` must be declared before this text."""
    return (
        "extern unsigned _sidata, _sdata, _edata, _sbss, _ebss, _estack;\n"
        "void reset_handler(void)\n{\n"
        "    unsigned *s = &_sidata, *d = &_sdata;\n"
        "    while (d < &_edata) *d++ = *s++;\n"
        "    for (d = &_sbss; d < &_ebss;) *d++ = 0;\n"
        "    *(volatile unsigned *)0xE000ED88u |= 0xFu << 20; /* CPACR: CP10/CP11 full */\n"
        '    __asm volatile("dsb\\n isb");\n'
        "    *(volatile unsigned *)0x4001100Cu = (1u << 13) | (1u << 3); /* USART1_CR1 */\n"
        f"    {entry}();\n"
        "    for (;;) {}\n}\n"
        "void default_handler(void) { for (;;) {} }\n"
        '__attribute__((section(".isr_vector"), used)) void (*const vectors[16])(void) = {\n'
        "    (void (*)(void))&_estack, reset_handler, default_handler, default_handler,\n"
        "    default_handler, default_handler, default_handler, 0, 0, 0, 0, default_handler,\n"
        "    default_handler, 0, default_handler, default_handler,\n};\n"
    )


def bare_metal_linker() -> str:
    """The linker script of :func:`bare_metal_startup`: :data:`EMULATOR`'s flash and RAM,
    vectors first, ``.weights`` with the read-only data."""
    (flash, flash_len), (ram, ram_len) = EMULATOR.flash, EMULATOR.ram
    return f"""
MEMORY {{ FLASH (rx) : ORIGIN = {flash:#x}, LENGTH = {flash_len // 1024}K
         RAM (rwx) : ORIGIN = {ram:#x}, LENGTH = {ram_len // 1024}K }}
_estack = ORIGIN(RAM) + LENGTH(RAM);
SECTIONS {{
  .isr_vector : {{ KEEP(*(.isr_vector)) }} > FLASH
  .text : {{ *(.text*) *(.rodata*) *(.weights*) . = ALIGN(4); }} > FLASH
  _sidata = LOADADDR(.data);
  .data : {{ _sdata = .; *(.data*) . = ALIGN(4); _edata = .; }} > RAM AT> FLASH
  .bss (NOLOAD) : {{ _sbss = .; *(.bss*) *(COMMON) . = ALIGN(4); _ebss = .; }} > RAM
}}
"""
