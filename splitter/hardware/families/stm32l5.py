"""STM32L5 (RM0438 rev 7): the family and its clock rules (Cortex-M33 at up to 110 MHz).

TrustZone is left off (option bit TZEN = 0, the factory state, RM0438 3.2): every peripheral is
then non-secure and reached through its non-secure address (0x4xxx_xxxx), as used here.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from splitter.hardware.clocks import MHZ, ClockTree, Osc, Pll, PllLimits, Step, _set, _wait
from splitter.hardware.clocks import _wait_states as wait_states
from splitter.hardware.cores import CORES
from splitter.hardware.families.base import Usart
from splitter.hardware.families.stm32l4 import STM32L4, L4Clock


class L5Clock(L4Clock):
    """STM32L5 (RM0438 rev 7).

    * Reset: MSI 4 MHz (RM0438 9.2.3); the PLL runs from HSI16 (RCC_CR.HSION bit 8, HSIRDY
      bit 10, 9.8.1); SW 00 MSI, 01 HSI16, 10 HSE, 11 PLL (9.8.3).
    * PLL (9.8.4 RCC_PLLCFGR): the L4+'s fields: PLLSRC[1:0] (2 HSI16, 3 HSE), PLLM[7:4] = M-1
      (1..16), PLLN[14:8] 8..127, PLLREN bit 24, PLLR[26:25]; VCO input 4-16 MHz, output
      64-344 MHz (9.2.4).
    * Voltage (RM0438 8.2.4, 8.6.1 PWR_CR1.VOS[10:9]): range 2 after reset (26 MHz at most),
      range 1 up to 80 MHz, range 0 (VOS = 00) up to 110 MHz; after the write, wait until
      PWR_SR2.VOSF (bit 10) reads 0 (8.6.10).
    * Flash (RM0438 6.3.3 table 37, range 0): 20 MHz per wait state (5 WS at 110 MHz);
      FLASH_ACR LATENCY[3:0] (6.9.1).
    * AHB / APB1 / APB2 at SYSCLK (110 MHz maximum, DS12736 table 23).
    """

    manual = "RM0438"
    limits = PllLimits(range(1, 17), range(8, 128), (2, 4, 6, 8), (4 * MHZ, 16 * MHZ),
                       (64 * MHZ, 344 * MHZ), 16 * MHZ)  # fmt: skip
    max_hz = 110 * MHZ
    variant = None  # one line, one manual

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        vos = 0 if sysclk > 80 * MHZ else (1 if sysclk > 26 * MHZ else 2)
        ws = wait_states(sysclk, (20, 40, 60, 80, 100, 110) if vos == 0 else (20, 40, 60, 80))
        rcc, acr, pwr = self.rcc, self.flash_acr, self.pwr
        steps = [
            _set(rcc + 0x58, 28, 1, 1, "RCC_APB1ENR1.PWREN (RM0438 9.8.19)"),
            _set(pwr, 9, 2, vos, f"PWR_CR1.VOS = range {vos} (RM0438 8.6.1)"),
            _wait(pwr + 0x14, 10, 1, 0, "PWR_SR2.VOSF = 0: voltage reached (RM0438 8.6.10)",
                  "power"),
        ]  # fmt: skip
        steps += self.osc_on(osc, "RM0438 9.8.1")
        steps += [
            _set(acr, 0, 4, ws, f"FLASH_ACR.LATENCY = {ws} WS (RM0438 6.9.1; table 37 range "
                                f"{vos})"),
            _wait(acr, 0, 4, ws, "FLASH_ACR.LATENCY read back (RM0438 6.3.3)", "flash"),
            Step("set", rcc + 0x08, 0x3FF0, 0, "RCC_CFGR: HPRE = PPRE1 = PPRE2 = /1 (RM0438 "
                                               "9.8.3)"),
        ]  # fmt: skip
        if pll is not None:
            steps += self.pll_steps(osc, pll, True)
        sw = 3 if pll is not None else (2 if osc.name == "HSE" else 1)
        steps += [
            _set(rcc + 0x08, 0, 2, sw, "RCC_CFGR.SW (RM0438 9.8.3)"),
            _wait(rcc + 0x08, 2, 2, sw, "RCC_CFGR.SWS follows SW", "switch"),
        ]
        buses = {"AHB": sysclk, "APB1": sysclk, "APB2": sysclk}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))


class STM32L5(STM32L4):
    """STM32L5: RM0438 rev 7: Cortex-M33 with FPU and DSP; the L4's RCC register map at the
    non-secure RCC 0x4002_1000 (AHB2ENR 0x4C, APB1ENR1 0x58, APB1ENR2 0x5C, APB2ENR 0x60:
    9.8.15-9.8.21), GPIOA at 0x4202_0000 (non-secure, 2.3.2), MSI 4 MHz after reset (9.2.3),
    USART bases (2.3.2), IRQs (table 108: USART1-3 61-63, UART4-5 64-65, LPUART1 66), AFs as the
    L4's (DS12736 table 22); LPUART1 on PG7/PG8 (port G on VDDIO2, PWR_CR2.IOSV, 8.6.2) is the
    Nucleo-L552ZE-Q's ST-LINK virtual COM port (UM2581 6.9)."""

    name = "L5"
    manual = "RM0438"
    #: checked against ST's own sources (RM0438's IWDG chapter section numbers not re-read):
    #: CMSIS ``stm32l552xx.h`` IWDG_BASE_NS = APB1PERIPH_BASE_NS (0x4000_0000) + 0x3000, the
    #: address with TrustZone off, IWDG_PR_PR 3 bits (/4../256); HAL ``stm32l5xx_hal_iwdg.c``:
    #: 0xCCCC, 0x5555, PR, RLR, wait PVU|RVU|WVU; ``LSI_VALUE`` 32000
    iwdg_source = (
        "RM0438 IWDG chapter; ST stm32l552xx.h (non-secure IWDG at 0x4000_3000, 3-bit PR) and "
        "stm32l5xx_hal_iwdg.c; LSI 32 kHz (LSI_VALUE)"
    )
    core = CORES["cortex-m33"]
    fpus = ("fpv5-sp-d16",)
    reset_clock_hz = 4_000_000
    openocd_target = "target/stm32l5x.cfg"
    gpio = 0x4202_0000
    clock = L5Clock()
    flash_miss_rate = 0.10
    flash_miss_source = "RM0438 7.2 (ICACHE off)"
    usart_table: ClassVar[Mapping[str, Usart]] = MappingProxyType(
        {  # base, RCC register, bit, IRQ, TX/RX, AF
            "LPUART1": Usart(0x4000_8000, 0x5C, 0, 66, "PG7/PG8", 8),
            "USART1": Usart(0x4001_3800, 0x60, 14, 61, "PA9/PA10", 7),
            "USART2": Usart(0x4000_4400, 0x58, 17, 62, "PA2/PA3", 7),
            "USART3": Usart(0x4000_4800, 0x58, 18, 63, "PB10/PB11", 7),
            "UART4": Usart(0x4000_4C00, 0x58, 19, 64, "PA0/PA1", 8),
            "UART5": Usart(0x4000_5000, 0x58, 20, 65, "PC12/PD2", 8),
        }
    )
