"""STM32G0 (RM0444): the family and its clock rules."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from splitter.hardware.clocks import (
    MHZ,
    ClockRules,
    ClockTree,
    Osc,
    Pll,
    PllLimits,
    Step,
    _set,
    _wait,
    _wait_states,
)
from splitter.hardware.cores import CORES
from splitter.hardware.families.base import Family, Usart


class G0Clock(ClockRules):
    """STM32G0 (RM0444 rev 5).

    * PLL (RM0444 5.4.4 RCC_PLLCFGR): PLLSRC[1:0] (2 = HSI16, 3 = HSE), PLLM[6:4] = M-1 (1..8),
      PLLN[14:8] 8..86, PLLR[31:29] = R-1 (2..8) with PLLREN bit 28; VCO input 2.66-16 MHz,
      output 64-344 MHz (RM0444 5.2.4); PLLRCLK <= 64 MHz.
    * Voltage range 1 (PWR_CR1.VOS = 01, the reset value) allows 64 MHz (RM0444 4.1.4).
    * Flash (RM0444 3.3.4 table 8, range 1): 0 WS <= 24 MHz, 1 WS <= 48, 2 WS <= 64; FLASH_ACR
      LATENCY[2:0], PRFTEN bit 8, ICEN bit 9; read back before raising the clock.
    * One APB, PPRE /1 (RM0444 5.4.3).
    """

    manual = "RM0444"
    limits = PllLimits(range(1, 9), range(8, 87), tuple(range(2, 9)), (2_660_000, 16 * MHZ),
                       (64 * MHZ, 344 * MHZ), 16 * MHZ)  # fmt: skip
    reset_osc = Osc("HSI16", 16 * MHZ)
    pll_osc = Osc("HSI16", 16 * MHZ)
    max_hz = 64 * MHZ
    rcc = 0x4002_1000
    flash_acr = 0x4002_2000

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        ws = _wait_states(sysclk, (24, 48, 64))
        rcc, acr = self.rcc, self.flash_acr
        steps: list[Step] = []
        if osc.name == "HSE":
            if osc.bypass:
                steps.append(_set(rcc, 18, 1, 1, "RCC_CR.HSEBYP (RM0444 5.4.1)"))
            steps += [
                _set(rcc, 16, 1, 1, "RCC_CR.HSEON"),
                _wait(rcc, 17, 1, 1, "RCC_CR.HSERDY", "hse"),
            ]
        steps += [
            Step("set", acr, 0x307, ws | 0x300,
                 f"FLASH_ACR: LATENCY {ws} WS, PRFTEN, ICEN (RM0444 3.7.1, table 8 range 1)"),
            _wait(acr, 0, 3, ws, "FLASH_ACR.LATENCY read back (RM0444 3.3.4)", "flash"),
            Step("set", rcc + 0x08, 0x7F00, 0, "RCC_CFGR: HPRE = PPRE = /1 (RM0444 5.4.3)"),
        ]  # fmt: skip
        if pll is not None:
            src = 3 if osc.name == "HSE" else 2
            value = src | (pll.m - 1) << 4 | pll.n << 8 | 1 << 28 | (pll.div - 1) << 29
            steps += [
                Step("set", rcc + 0x0C, 0xF000_7F73, value,
                     f"RCC_PLLCFGR: src {osc.name}, M={pll.m} N={pll.n} R={pll.div}, PLLREN "
                     f"(VCO {float(pll.f_vco_hz) / MHZ:g} MHz; RM0444 5.4.4)"),
                _set(rcc, 24, 1, 1, "RCC_CR.PLLON"),
                _wait(rcc, 25, 1, 1, "RCC_CR.PLLRDY", "pll"),
            ]  # fmt: skip
        sw = 2 if pll is not None else (1 if osc.name == "HSE" else 0)
        steps += [
            _set(rcc + 0x08, 0, 3, sw, "RCC_CFGR.SW (RM0444 5.4.3)"),
            _wait(rcc + 0x08, 3, 3, sw, "RCC_CFGR.SWS follows SW", "switch"),
        ]
        buses = {"AHB": sysclk, "APB1": sysclk, "APB2": sysclk}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))


class STM32G0(Family):
    """STM32G0: RM0444 rev 5: RCC at 0x4002_1000, IOPENR 0x34 / APBENR1 0x3C / APBENR2 0x40
    (5.4.13, 5.4.15, 5.4.16), GPIOA at 0x5000_0000 (IOPORT, 2.2), HSISYS 16 MHz after reset
    (5.2), Cortex-M0+ without FPU, USART IRQs (table 44: USART3 and USART4 share IRQ 29), AF
    numbers from DS12232 tables 13-14."""

    name = "G0"
    manual = "RM0444"
    core = CORES["cortex-m0plus"]
    flash_miss_rate = 0.10
    flash_miss_source = "RM0444 3.3.4"
    fpus = ("",)
    usart_layout = "isr_rdr_tdr"
    reset_clock_hz = 16_000_000
    openocd_target = "target/stm32g0x.cfg"
    rcc = 0x4002_1000
    gpio = 0x5000_0000
    gpio_en = 0x34
    clock = G0Clock()
    apb2_enr = 0x40  # one APB; the clock tree gives APB1 = APB2
    usart_table: ClassVar[Mapping[str, Usart]] = MappingProxyType(
        {  # base, RCC register, bit, IRQ, TX/RX, AF
            "USART1": Usart(0x4001_3800, 0x40, 14, 27, "PA9/PA10", 1),
            "USART2": Usart(0x4000_4400, 0x3C, 17, 28, "PA2/PA3", 1),
            "USART3": Usart(0x4000_4800, 0x3C, 18, 29, "PB10/PB11", 4),
            "USART4": Usart(0x4000_4C00, 0x3C, 19, 29, "PA0/PA1", 4),
        }
    )
