"""STM32F7 (RM0410 F76x/77x, RM0385 F74x/75x): the F4 with a Cortex-M7, the newer USART, QUADSPI."""

from __future__ import annotations

from splitter.hardware.clocks import (
    MHZ,
)
from splitter.hardware.cores import CORES
from splitter.hardware.families.base import _nucleo144
from splitter.hardware.families.stm32f4 import STM32F4, F4Clock


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


class STM32F7(STM32F4):
    """STM32F7: the F4's RCC, GPIO, USART bases, IRQs and AFs (RM0410 rev 4: 2.2, 5.3.10/13/14,
    table 40), Cortex-M7, the new USART (ISR/RDR/TDR, RM0410 34.8), HSI 16 MHz (5.2.2)."""

    name = "F7"
    manual = "RM0410"
    core = CORES["cortex-m7"]
    flash_miss_rate = 0.05
    flash_miss_source = "RM0410 3.3.2, AN4667"
    qspi = ("QUADSPI", 0x9000_0000)  # RM0410 2.2.2 memory map, 14 QUADSPI
    fpus = ("fpv5-sp-d16", "fpv5-d16")  # F74x/F75x single, F76x/F77x double precision
    usart_layout = "isr_rdr_tdr"
    openocd_target = "target/stm32f7x.cfg"
    clock = F7Clock()
    usart_table = _nucleo144(STM32F4.usart_table)
