"""STM32U5 (RM0456 rev 4): the family and its clock rules (Cortex-M33 at up to 160 MHz).

TrustZone is left off (TZEN = 0, the factory state): peripherals are reached through their
non-secure addresses. The core supply stays on the LDO (PWR_CR3.REGSEL = 0, its reset value,
RM0456 10.10.3): the SMPS of the "Q" parts saves power but is not needed to run; the firmware
does not switch to it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
)
from splitter.hardware.clocks import _wait_states as wait_states
from splitter.hardware.cores import CORES
from splitter.hardware.families.base import Family, RegWrite, Usart


class U5Clock(ClockRules):
    """STM32U5 (RM0456 rev 4; the register sequence is the one of OpenOCD's
    ``target/stm32u5x.cfg`` ``stm32u5x_clock_config``).

    * Reset: MSIS 4 MHz (RM0456 11.4.1); the PLL runs from HSI16 (RCC_CR.HSION bit 8, HSIRDY
      bit 10, 11.8.1). RCC at 0x4602_0C00; SW in RCC_CFGR1[1:0] (0 MSIS, 1 HSI16, 2 HSE, 3
      PLL1), SWS [3:2] (11.8.8); HPRE RCC_CFGR2[3:0], PPRE1 [6:4], PPRE2 [10:8] (11.8.9), PPRE3
      RCC_CFGR3[6:4] (11.8.10), all /1 (160 MHz buses, DS13737 table 24).
    * PLL1 (11.8.11 RCC_PLL1CFGR at 0x28): PLL1SRC[1:0] (2 HSI16, 3 HSE), PLL1RGE[3:2] (2:
      4-8 MHz input, 3: 8-16 MHz), PLL1M[11:8] = M-1 (1..16), PLL1MBOOST[15:12] = 0 (EPOD
      booster input = the PLL1 source, <= 16 MHz), PLL1REN bit 18; RCC_PLL1DIVR at 0x34
      (11.8.14): N-1 [8:0] (4..512), P-1 [15:9], Q-1 [22:16], R-1 [30:24]; VCO input 4-16 MHz,
      output 128-544 MHz (11.4.6).
    * Power (RM0456 10.5.4, 10.10.4 PWR_VOSR at 0x4602_080C): the PWR clock (RCC_AHB3ENR.PWREN
      bit 2, 11.8.28), range 1 (VOS[17:16] = 11, wait VOSRDY bit 15) above 110 MHz, range 2
      (10) above 55 MHz; above 55 MHz the EPOD booster (BOOSTEN bit 18, wait BOOSTRDY bit 14,
      once the PLL1 source is selected).
    * Flash (RM0456 7.3.3 table 54, range 1): 32 MHz per wait state (4 WS at 160 MHz), range 2:
      25 MHz; FLASH_ACR at 0x4002_2000 LATENCY[3:0], PRFTEN bit 8 (7.9.1).
    """

    manual = "RM0456"
    limits = PllLimits(range(1, 17), range(4, 513), (2, 4, 6, 8), (4 * MHZ, 16 * MHZ),
                       (128 * MHZ, 544 * MHZ), 16 * MHZ)  # fmt: skip
    reset_osc = Osc("MSIS", 4 * MHZ)
    pll_osc = Osc("HSI16", 16 * MHZ)
    max_hz = 160 * MHZ
    rcc = 0x4602_0C00
    pwr = 0x4602_0800
    flash_acr = 0x4002_2000

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        vos = 3 if sysclk > 110 * MHZ else (2 if sysclk > 55 * MHZ else 1)
        boost = sysclk > 55 * MHZ
        ws = wait_states(sysclk, tuple(range(32, 161, 32)) if vos == 3 else (25, 50, 75, 100))
        rcc, vosr = self.rcc, self.pwr + 0x0C
        steps = [
            _set(rcc + 0x94, 2, 1, 1, "RCC_AHB3ENR.PWREN (RM0456 11.8.28)"),
            _set(vosr, 16, 2, vos, f"PWR_VOSR.VOS = {vos:02b}: range {4 - vos} (RM0456 10.10.4)"),
            _wait(vosr, 15, 1, 1, "PWR_VOSR.VOSRDY", "power"),
        ]
        steps += self.osc_on(osc, "RM0456 11.8.1")
        steps += [
            Step("set", self.flash_acr, 0x10F, ws | 0x100,
                 f"FLASH_ACR: LATENCY {ws} WS, PRFTEN (RM0456 7.9.1; table 54 range "
                 f"{4 - vos})"),
            _wait(self.flash_acr, 0, 4, ws, "FLASH_ACR.LATENCY read back (RM0456 7.3.3)",
                  "flash"),
            Step("set", rcc + 0x20, 0x77F, 0, "RCC_CFGR2: HPRE = PPRE1 = PPRE2 = /1 (RM0456 "
                                              "11.8.9)"),
            _set(rcc + 0x24, 4, 3, 0, "RCC_CFGR3.PPRE3 = /1 (RM0456 11.8.10)"),
        ]  # fmt: skip
        if pll is not None:
            steps += self.pll_steps(osc, pll, boost)
        sw = 3 if pll is not None else (2 if osc.name == "HSE" else 1)
        steps += [
            _set(rcc + 0x1C, 0, 2, sw, "RCC_CFGR1.SW (RM0456 11.8.8)"),
            _wait(rcc + 0x1C, 2, 2, sw, "RCC_CFGR1.SWS follows SW", "switch"),
        ]
        buses = {"AHB": sysclk, "APB1": sysclk, "APB2": sysclk, "APB3": sysclk}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))

    def pll_steps(self, osc: Osc, pll: Pll, boost: bool) -> list[Step]:
        """RCC_PLL1CFGR (source, input range, M, MBOOST /1, PLL1REN), the EPOD booster when
        ``boost``, RCC_PLL1DIVR, then PLL1ON (RCC_CR bit 24), wait PLL1RDY (25)."""
        rcc = self.rcc
        src = 3 if osc.name == "HSE" else 2
        rge = 3 if pll.f_ref_hz >= 8 * MHZ else 2
        cfgr = src | rge << 2 | (pll.m - 1) << 8 | 1 << 18
        divr = (pll.n - 1) | (pll.div - 1) << 9 | (pll.div - 1) << 16 | (pll.div - 1) << 24
        steps = [
            Step("set", rcc + 0x28, 0x0007_FF1F, cfgr,
                 f"RCC_PLL1CFGR: src {osc.name}, range {rge}, M={pll.m}, MBOOST /1, PLL1REN "
                 f"({float(pll.f_ref_hz) / MHZ:g} MHz in; RM0456 11.8.11)"),
        ]  # fmt: skip
        if boost:
            vosr = self.pwr + 0x0C
            steps += [
                _set(vosr, 18, 1, 1, "PWR_VOSR.BOOSTEN: EPOD booster (RM0456 10.10.4)"),
                _wait(vosr, 14, 1, 1, "PWR_VOSR.BOOSTRDY", "power"),
            ]
        return [
            *steps,
            Step("set", rcc + 0x34, 0x7F7F_FFFF, divr,
                 f"RCC_PLL1DIVR: N={pll.n} P=Q=R={pll.div}, VCO {float(pll.f_vco_hz) / MHZ:g} "
                 "MHz (RM0456 11.8.14)"),
            _set(rcc, 24, 1, 1, "RCC_CR.PLL1ON"),
            _wait(rcc, 25, 1, 1, "RCC_CR.PLL1RDY", "pll"),
        ]  # fmt: skip


class STM32U5(Family):
    """STM32U5: RM0456 rev 4: Cortex-M33 with FPU and DSP; RCC at 0x4602_0C00 (non-secure),
    AHB2ENR1 0x8C (GPIO), APB1ENR1 0x9C, APB2ENR 0xA4, APB3ENR 0xA8 (11.8.29-11.8.35), GPIOA at
    0x4202_0000 (2.3.2), MSIS 4 MHz after reset (11.4.1), USART bases (2.3.2: LPUART1 at
    0x4600_2400 on APB3), IRQs (table 125: USART1-3 61-63, UART4-5 64-65, LPUART1 66), AFs from
    DS13737 table 27; USART1 on PA9/PA10 is the Nucleo-U575ZI-Q's ST-LINK virtual COM port
    (UM2861 6.9)."""

    name = "U5"
    manual = "RM0456"
    iwdg_base = 0x4000_3000
    lsi_hz = 32_000
    #: checked against ST's own sources (RM0456's IWDG chapter section numbers not re-read):
    #: CMSIS ``stm32u575xx.h`` IWDG_BASE_NS = 0x4000_0000 + 0x3000, IWDG_PR_PR 4 bits: HAL
    #: ``stm32u5xx_hal_iwdg.h`` IWDG_PRESCALER_4 .. IWDG_PRESCALER_1024 (PR = 8); LSI_VALUE
    #: 32000 (``stm32u5xx.h``). HAL_IWDG_Init also writes EWCR = EWIC (early wake-up off, its
    #: reset state) and waits EWU with PVU|RVU|WVU; splitter leaves EWCR and the window (WINR
    #: resets to 0xFFF: no window) at reset, so EWU never sets and the same sequence serves
    iwdg_max_pr = 8
    iwdg_source = (
        "RM0456 IWDG chapter; ST stm32u575xx.h (non-secure IWDG at 0x4000_3000, 4-bit PR to "
        "/1024) and stm32u5xx_hal_iwdg.c; LSI 32 kHz (LSI_VALUE)"
    )
    core = CORES["cortex-m33"]
    fpus = ("fpv5-sp-d16",)
    usart_layout = "isr_rdr_tdr"
    reset_clock_hz = 4_000_000
    openocd_target = "target/stm32u5x.cfg"
    rcc = 0x4602_0C00
    gpio = 0x4202_0000
    gpio_en = 0x8C
    clock = U5Clock()
    apb2_enr = 0xA4
    apb3_enr = 0xA8
    flash_miss_rate = 0.10
    flash_miss_source = "RM0456 7.3.3 (prefetch, ICACHE off)"
    usart_table: ClassVar[Mapping[str, Usart]] = MappingProxyType(
        {  # base, RCC register, bit, IRQ, TX/RX, AF
            "USART1": Usart(0x4001_3800, 0xA4, 14, 61, "PA9/PA10", 7),
            "USART2": Usart(0x4000_4400, 0x9C, 17, 62, "PA2/PA3", 7),
            "USART3": Usart(0x4000_4800, 0x9C, 18, 63, "PB10/PB11", 7),
            "UART4": Usart(0x4000_4C00, 0x9C, 19, 64, "PA0/PA1", 8),
            "UART5": Usart(0x4000_5000, 0x9C, 20, 65, "PC12/PD2", 8),
            "LPUART1": Usart(0x4600_2400, 0xA8, 6, 66, "PG7/PG8", 8),
        }
    )

    def usart_bus(self, usart: str) -> str:
        """APB2 (USART1), APB3 (LPUART1) or APB1 (RCC_CCIPR1/3 reset selection = PCLK, RM0456
        11.8.41 / 11.8.43)."""
        en = self.usart_table[usart].en_reg
        return {self.apb2_enr: "APB2", self.apb3_enr: "APB3"}.get(en, "APB1")

    def power_writes(self, pins: Sequence[str]) -> list[RegWrite]:
        """Port G is supplied by VDDIO2, isolated until PWR_SVMCR.IO2SV (bit 29) is set with the
        PWR clock on (RCC_AHB3ENR.PWREN bit 2) (RM0456 10.10.5)."""
        if not any(p.startswith("PG") for p in pins):
            return []
        return [
            RegWrite(f"0x{self.rcc + 0x94:08X}", "0x00000000", "0x00000004", "RCC: clock PWR"),
            RegWrite("0x46020810", "0x00000000", "0x20000000",
                     "PWR_SVMCR.IO2SV: VDDIO2 valid, port G powered"),
        ]  # fmt: skip
