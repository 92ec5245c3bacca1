"""STM32F4 (RM0090 F405/407, RM0368 F401/F411, RM0390 F446): the family and its clock rules."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from splitter.hardware.clocks import (
    APB_CODE,
    MHZ,
    ClockRules,
    ClockTree,
    Osc,
    Pll,
    PllLimits,
    Step,
    _prescaler,
    _set,
    _wait,
    _wait_states,
)
from splitter.hardware.cores import CORES
from splitter.hardware.families.base import Family, Usart


class F4Clock(ClockRules):
    """STM32F4 (RM0090 F405/407, RM0368 F401, RM0383 F411, RM0390 F446).

    * PLL (RM0090 6.3.2 RCC_PLLCFGR): M 2..63, N 50..432 (F401: VCO >= 192 MHz, RM0368
      6.3.2), P in {2, 4, 6, 8}; VCO input 1-2 MHz, 2 MHz recommended against jitter; VCO
      output 100-432 MHz. Q: the 48 MHz clock must not exceed 48 MHz (Q >= 2).
    * Buses (DS8626 / DS10086 / DS10693 general operating conditions): APB1 <= 42 MHz and
      APB2 <= 84 MHz (F401/F405); F446: 45 / 90 MHz; F411: 50 / 100 MHz (DS10314 table 14).
    * Flash wait states (RM0090 3.5.1 table 10, 2.7-3.6 V): one per 30 MHz of HCLK; F401
      (RM0368 3.4 table 6): 30 / 64 / 84 MHz.
    * Voltage: F405 VOS (PWR_CR bit 14) resets to scale 1 (RM0090 5.4.1), F401 to scale 2, enough
      for 84 MHz (RM0368 5.1.4), F446 to scale 1; above 168 MHz the F446 needs over-drive
      (RM0390 5.1.4: set ODEN, wait ODRDY, set ODSWEN, wait ODSWRDY).
    * FLASH_ACR: prefetch (bit 8), instruction (9) and data (10) caches on (RM0090 3.9.1).
    """

    manual = "RM0090"
    limits = PllLimits(range(2, 64), range(50, 433), (2, 4, 6, 8), (MHZ, 2 * MHZ),
                       (100 * MHZ, 432 * MHZ), 2 * MHZ)  # fmt: skip
    reset_osc = Osc("HSI", 16 * MHZ)
    pll_osc = Osc("HSI", 16 * MHZ)
    max_hz = 180 * MHZ
    rcc = 0x4002_3800
    flash_acr = 0x4002_3C00
    pwr = 0x4000_7000
    acr_extra: tuple[tuple[int, str], ...] = (
        (8, "PRFTEN: prefetch on"), (9, "ICEN: instruction cache on"), (10, "DCEN: data cache on")
    )  # fmt: skip
    overdrive_above_hz = 168 * MHZ

    def _variant(self, part: str) -> tuple[tuple[int, int], tuple[int, ...], int]:
        """``((APB1 max, APB2 max) MHz, wait-state table, VCO minimum)`` of the part."""
        if part.startswith("STM32F411"):  # RM0383 3.4 table 5, 6.3.2; DS10314 table 14
            return (50, 100), (30, 64, 90, 100), self.limits.vco_hz[0]
        if part.startswith("STM32F401"):
            return (42, 84), (30, 64, 90), 192 * MHZ
        if part.startswith("STM32F446") or part.startswith("STM32F42"):
            return (45, 90), tuple(range(30, 211, 30)), self.limits.vco_hz[0]
        return (42, 84), tuple(range(30, 181, 30)), self.limits.vco_hz[0]

    def limits_for(self, part: str) -> PllLimits:
        lim = self.limits
        vco = (self._variant(part)[2], lim.vco_hz[1])
        return PllLimits(lim.m, lim.n, lim.div, lim.ref_hz, vco, lim.prefer_ref_hz)

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        (apb1_max, apb2_max), ws_table, _ = self._variant(part)
        d1 = _prescaler(sysclk, apb1_max * MHZ, APB_CODE)
        d2 = _prescaler(sysclk, apb2_max * MHZ, APB_CODE)
        ws = _wait_states(sysclk, ws_table)
        rcc, steps = self.rcc, []
        if osc.name == "HSE":
            if osc.bypass:
                steps.append(_set(rcc, 18, 1, 1, "RCC_CR.HSEBYP: external clock (RM0090 6.3.1)"))
            steps += [
                _set(rcc, 16, 1, 1, "RCC_CR.HSEON (RM0090 6.3.1)"),
                _wait(rcc, 17, 1, 1, "RCC_CR.HSERDY", "hse"),
            ]
        steps.append(_set(rcc + 0x40, 28, 1, 1, "RCC_APB1ENR.PWREN (RM0090 6.3.13)"))
        if part.startswith("STM32F411") and sysclk > 84 * MHZ:
            # VOS resets to scale 2 (84 MHz); scale 1 before the PLL is on (RM0383 5.4.1)
            steps.append(_set(self.pwr, 14, 2, 3, "PWR_CR.VOS = scale 1 (RM0383 5.4.1)"))
        if pll is not None:
            steps += self.pll_steps(osc, pll)
        steps += self.overdrive_steps(sysclk)
        steps += [
            _set(self.flash_acr, 0, 4, ws, f"FLASH_ACR.LATENCY = {ws} WS ({self.ws_ref})"),
            _wait(self.flash_acr, 0, 4, ws, "FLASH_ACR.LATENCY read back (RM0090 3.5.1)", "flash"),
            *(_set(self.flash_acr, b, 1, 1, f"FLASH_ACR.{c}") for b, c in self.acr_extra),
            _set(rcc + 0x08, 4, 4, 0, "RCC_CFGR.HPRE = /1 (RM0090 6.3.3)"),
            _set(rcc + 0x08, 10, 3, APB_CODE[d1], f"RCC_CFGR.PPRE1 = /{d1}: APB1 <= limit"),
            _set(rcc + 0x08, 13, 3, APB_CODE[d2], f"RCC_CFGR.PPRE2 = /{d2}: APB2 <= limit"),
        ]
        sw = 2 if pll is not None else (1 if osc.name == "HSE" else 0)
        steps += [
            _set(rcc + 0x08, 0, 2, sw, "RCC_CFGR.SW: system clock switch (RM0090 6.3.3)"),
            _wait(rcc + 0x08, 2, 2, sw, "RCC_CFGR.SWS follows SW", "switch"),
        ]
        buses = {"AHB": sysclk, "APB1": sysclk // d1, "APB2": sysclk // d2}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))

    ws_ref = "RM0090 3.5.1 table 10, 2.7-3.6 V"

    def pll_steps(self, osc: Osc, pll: Pll) -> list[Step]:
        """RCC_PLLCFGR (RM0090 6.3.2): PLLM[5:0], PLLN[14:6], PLLP[17:16] = P/2 - 1, PLLSRC
        bit 22 (1 = HSE), PLLQ[27:24]; then PLLON (CR bit 24), wait PLLRDY (bit 25)."""
        rcc = self.rcc
        value = (
            pll.m | pll.n << 6 | (pll.div // 2 - 1) << 16 | (osc.name == "HSE") << 22 | pll.q << 24
        )
        return [
            Step("set", rcc + 0x04, 0x0F43_7FFF, value,
                 f"RCC_PLLCFGR: M={pll.m} N={pll.n} P={pll.div} Q={pll.q} src={osc.name} "
                 f"(VCO in {float(pll.f_ref_hz) / MHZ:g} MHz, out "
                 f"{float(pll.f_vco_hz) / MHZ:g} MHz; RM0090 6.3.2)"),
            _set(rcc, 24, 1, 1, "RCC_CR.PLLON"),
            _wait(rcc, 25, 1, 1, "RCC_CR.PLLRDY", "pll"),
        ]  # fmt: skip

    def overdrive_steps(self, sysclk: int) -> list[Step]:
        """Over-drive above 168 MHz (F446, RM0390 5.1.4; F7 above 180 MHz, RM0410 4.1.4), in the
        manual's order: with the PLL on and the system still on HSI / HSE, ODEN (PWR_CR bit 16),
        wait ODRDY (PWR_CSR bit 16), ODSWEN (bit 17), wait ODSWRDY (bit 17); then wait states,
        prescalers and the switch. VOS keeps its reset value (scale 1, or scale 2 on the F401
        which suffices up to 84 MHz)."""
        steps: list[Step] = []
        if sysclk > self.overdrive_above_hz:
            steps += [
                _set(self.pwr, 16, 1, 1, "PWR_CR.ODEN: over-drive (RM0390 5.1.4)"),
                _wait(self.pwr + 0x04, 16, 1, 1, "PWR_CSR.ODRDY", "power"),
                _set(self.pwr, 17, 1, 1, "PWR_CR.ODSWEN: switch to over-drive"),
                _wait(self.pwr + 0x04, 17, 1, 1, "PWR_CSR.ODSWRDY", "power"),
            ]
        return steps


class STM32F4(Family):
    """STM32F401/405/446...: Cortex-M4F, old USART (SR/DR), HSI 16 MHz after reset.

    RM0090 rev 19: RCC at 0x4002_3800 (2.3), AHB1ENR 0x30 / APB1ENR 0x40 / APB2ENR 0x44
    (6.3.10, 6.3.13, 6.3.14), GPIOA at 0x4002_0000 (2.3, 8.4), HSI 16 MHz (6.2.2), USART bases
    (2.3), IRQs (table 61), AF7 USART1-3 / AF8 UART4-5, USART6 (DS8626 table 9).
    """

    name = "F4"
    manual = "RM0090"
    core = CORES["cortex-m4"]
    flash_miss_rate = 0.05
    flash_miss_source = "RM0090 3.5.2 (ART)"
    fpus: ClassVar[tuple[str, ...]] = ("fpv4-sp-d16",)
    usart_layout = "sr_dr"
    reset_clock_hz = 16_000_000
    openocd_target = "target/stm32f4x.cfg"
    rcc = 0x4002_3800
    gpio = 0x4002_0000
    gpio_en = 0x30
    clock: ClassVar[ClockRules] = F4Clock()
    apb2_enr = 0x44
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
