"""STM32G4 (RM0440 rev 7): the family and its clock rules (Cortex-M4F at up to 170 MHz)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import ClassVar

from splitter.hardware.clocks import MHZ, Osc, PllLimits, Step
from splitter.hardware.cores import CORES
from splitter.hardware.families.base import RegWrite, Usart
from splitter.hardware.families.stm32l4 import STM32L4, L4Clock


class G4Clock(L4Clock):
    """STM32G4 (RM0440 rev 7).

    * Reset: HSI16 (RM0440 7.2.2); SW 01 HSI16, 10 HSE, 11 PLL (7.4.3 RCC_CFGR).
    * PLL (7.4.4 RCC_PLLCFGR): PLLSRC[1:0] (2 HSI16, 3 HSE), PLLM[7:4] = M-1 (1..16),
      PLLN[14:8] 8..127, PLLREN bit 24, PLLR[26:25] (R = 2, 4, 6, 8); VCO input 2.66-16 MHz,
      output 96-344 MHz (7.2.4); PLLRCLK <= 170 MHz.
    * Voltage (RM0440 6.1.5): range 1 boost (PWR_CR5.R1MODE = 0, 6.4.6) above 150 MHz, entered
      with AHB /2 around the switch for at least 1 us (7.2.7), as the L4+.
    * Flash (RM0440 5.3.3 table 29): range 1 boost 34 MHz per wait state, range 1 normal 30;
      FLASH_ACR LATENCY[3:0], PRFTEN bit 8, ICEN 9, DCEN 10 (5.7.1).
    * AHB / APB1 / APB2 at SYSCLK (170 MHz maximum, DS12288 table 21).
    """

    manual = "RM0440"
    limits = PllLimits(range(1, 17), range(8, 128), (2, 4, 6, 8), (2_660_000, 16 * MHZ),
                       (96 * MHZ, 344 * MHZ), 16 * MHZ)  # fmt: skip
    reset_osc = Osc("HSI16", 16 * MHZ)
    pll_osc = Osc("HSI16", 16 * MHZ)
    max_hz = 170 * MHZ
    boost_above_hz = 150 * MHZ
    variant = None  # one line, one manual

    text: ClassVar[Mapping[str, str]] = MappingProxyType({
        "pwren": "RCC_APB1ENR1.PWREN (RM0440 7.4.19)",
        "r1mode": "PWR_CR5.R1MODE = 0: boost (RM0440 6.4.6)",
        "acr": "FLASH_ACR: LATENCY {ws} WS, PRFTEN, ICEN, DCEN (RM0440 5.7.1; {table})",
        "acr_wait": "FLASH_ACR.LATENCY read back (RM0440 5.3.3)",
        "ppre": "RCC_CFGR: PPRE1 = PPRE2 = /1 (RM0440 7.4.3)",
        "hpre2": "RCC_CFGR.HPRE = /2 around the switch (RM0440 7.2.7)",
        "sw": "RCC_CFGR.SW (RM0440 7.4.3)",
        "delay": "at least 1 us at AHB /2 (RM0440 7.2.7)",
    })  # fmt: skip

    def boost(self, part: str, sysclk: int) -> bool:
        """Range 1 boost mode above 150 MHz (RM0440 6.1.5)."""
        return sysclk > self.boost_above_hz

    def flash_rows(self, part: str, boost: bool) -> tuple[tuple[int, ...], str]:
        """RM0440 table 29: 34 MHz a wait state in range 1 boost mode, 30 in range 1."""
        if boost:
            return tuple(range(34, 171, 34)), "table 29 range 1 boost"
        return tuple(range(30, 171, 30)), "table 29 range 1"

    def osc_steps(self, osc: Osc) -> list[Step]:
        """The HSE when the board gives one; the HSI16 runs from reset (RM0440 7.2.2)."""
        return self.hse_on(osc, "RM0440 7.4.1") if osc.name == "HSE" else []

    def wide_pllm(self, part: str) -> bool:
        """PLLM[7:4] (RM0440 7.4.4)."""
        return True


class STM32G4(STM32L4):
    """STM32G4: RM0440 rev 7: the L4's RCC map (RCC at 0x4002_1000, AHB2ENR 0x4C, APB1ENR1 0x58,
    APB1ENR2 0x5C, APB2ENR 0x60: 7.4.15-7.4.21) and GPIO (0x4800_0000, 2.2.2), HSI16 16 MHz after
    reset (7.2.2), USART bases (2.2.2), IRQs (table 97: USART1-3 37-39, UART4-5 52-53, LPUART1
    91), AFs from DS12288 table 13 (UART4/5 AF5, LPUART1 on PA2/PA3 AF12, the Nucleo-G474RE's
    ST-LINK virtual COM port, UM2505 6.8)."""

    name = "G4"
    manual = "RM0440"
    #: checked against ST's own sources (RM0440's IWDG chapter section numbers not re-read):
    #: CMSIS ``stm32g474xx.h`` IWDG_BASE = APB1PERIPH_BASE + 0x3000 = 0x4000_3000, IWDG_PR_PR
    #: 3 bits (/4../256); HAL ``stm32g4xx_hal_iwdg.c`` HAL_IWDG_Init: 0xCCCC, 0x5555, PR, RLR,
    #: wait PVU|RVU|WVU; ``LSI_VALUE`` 32000 (``stm32g4xx_hal_conf_template.h``)
    iwdg_source = (
        "RM0440 IWDG chapter; ST stm32g474xx.h (IWDG at 0x4000_3000, 3-bit PR) and "
        "stm32g4xx_hal_iwdg.c; LSI 32 kHz (LSI_VALUE)"
    )
    core = CORES["cortex-m4"]
    fpus = ("fpv4-sp-d16",)
    reset_clock_hz = 16_000_000
    openocd_target = "target/stm32g4x.cfg"
    clock = G4Clock()
    flash_miss_rate = 0.05
    flash_miss_source = "RM0440 3.3.3 (ART accelerator)"
    usart_table: ClassVar[Mapping[str, Usart]] = MappingProxyType(
        {  # base, RCC register, bit, IRQ, TX/RX, AF
            "LPUART1": Usart(0x4000_8000, 0x5C, 0, 91, "PA2/PA3", 12),
            "USART1": Usart(0x4001_3800, 0x60, 14, 37, "PC4/PC5", 7),
            "USART2": Usart(0x4000_4400, 0x58, 17, 38, "PA2/PA3", 7),
            "USART3": Usart(0x4000_4800, 0x58, 18, 39, "PB10/PB11", 7),
            "UART4": Usart(0x4000_4C00, 0x58, 19, 52, "PC10/PC11", 5),
            "UART5": Usart(0x4000_5000, 0x58, 20, 53, "PC12/PD2", 5),
        }
    )

    def power_writes(self, pins: Sequence[str]) -> list[RegWrite]:
        """None: the G4 has no separately supplied I/O port (RM0440 6.1: VDDIO2 is an L4/L5
        feature)."""
        return []
