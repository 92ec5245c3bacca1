"""STM32L4 / L4+ (RM0351, RM0394, RM0432): the family and its clock rules."""

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
    Variant,
    _set,
    _wait,
    _wait_states,
)
from splitter.hardware.cores import CORES
from splitter.hardware.families.base import Family, RegWrite, Usart, _set_bit
from splitter.hardware.families.stm32f4 import STM32F4


class L4Clock(ClockRules):
    """STM32L4 (RM0351, RM0394 L41x-L45x) and L4+ (RM0432 L4Rx/L4Sx).

    * Source: HSI16 (RCC_CR.HSION bit 8, HSIRDY bit 10; RM0351 6.4.1): +-1 % over temperature,
      better for UART than the reset MSI 4 MHz.
    * PLL (RM0351 6.4.4 RCC_PLLCFGR): PLLSRC[1:0] (2 = HSI16, 3 = HSE), PLLM[6:4] = M-1 (M 1..8;
      L4+ [7:4], 1..16), PLLN[14:8] 8..86 (L4+ 8..127), PLLR[26:25] (R = 2, 4, 6, 8) with PLLREN
      bit 24; VCO input 4-16 MHz (L4+: 2.66-16), output 64-344 MHz; R output <= 80 MHz (L4+:
      120 MHz).
    * Voltage range 1 (PWR_CR1.VOS = 01, reset value; RM0351 5.1.7); L4+ above 80 MHz in range 1
      boost mode: PWR_CR5.R1MODE = 0 (RM0432 5.1.8), entered with AHB /2 for at least 1 us
      around the switch (RM0432 6.2.9).
    * Flash (RM0351 3.3.3 table 11: 16 MHz per wait state in range 1; RM0432 3.3.3 table 12:
      20 MHz per wait state in boost mode); FLASH_ACR prefetch (bit 8), I-cache (9), D-cache (10).
    * APB1 / APB2 / AHB at the system clock (max 80 / 120 MHz, DS11912, DS12023).
    """

    manual = "RM0351"
    limits = PllLimits(range(1, 9), range(8, 87), (2, 4, 6, 8), (4 * MHZ, 16 * MHZ),
                       (64 * MHZ, 344 * MHZ), 16 * MHZ)  # fmt: skip
    reset_osc = Osc("MSI", 4 * MHZ)
    pll_osc = Osc("HSI16", 16 * MHZ)
    max_hz = 80 * MHZ
    #: the L4+ (RM0432): L4R, L4S, L4P, L4Q
    variant: ClassVar[Variant | None] = Variant(
        ("STM32L4R", "STM32L4S", "STM32L4P", "STM32L4Q"),
        "RM0432",
        PllLimits(
            range(1, 17),
            range(8, 128),
            (2, 4, 6, 8),
            (2_660_000, 16 * MHZ),
            (64 * MHZ, 344 * MHZ),
            16 * MHZ,
        ),
        120 * MHZ,
    )
    rcc = 0x4002_1000
    pwr = 0x4000_7000
    flash_acr = 0x4002_2000

    def plus(self, part: str) -> bool:
        """An L4+ part (:attr:`variant`, RM0432)."""
        return self.variant_of(part) is not None

    #: the comments of :meth:`tree`'s steps: register, fields and the manual's section (the G4,
    #: whose RCC and boost switch are the L4+'s, names its own manual)
    text: ClassVar[Mapping[str, str]] = MappingProxyType({
        "pwren": "RCC_APB1ENR1.PWREN (RM0351 6.4.19)",
        "r1mode": "PWR_CR5.R1MODE = 0: boost (RM0432 5.4.6)",
        "acr": "FLASH_ACR: LATENCY {ws} WS, PRFTEN, ICEN, DCEN (RM0351 3.7.1; {table})",
        "acr_wait": "FLASH_ACR.LATENCY read back (RM0351 3.3.3)",
        "ppre": "RCC_CFGR: PPRE1 = PPRE2 = /1 (RM0351 6.4.3)",
        "hpre2": "RCC_CFGR.HPRE = /2 around the switch (RM0432 6.2.9)",
        "sw": "RCC_CFGR.SW (RM0351 6.4.3)",
        "delay": "at least 1 us at AHB /2 (RM0432 6.2.9)",
    })  # fmt: skip

    def boost(self, part: str, sysclk: int) -> bool:
        """Range 1 boost mode: an L4+ above 80 MHz (RM0432 5.1.8)."""
        return self.plus(part) and sysclk > 80 * MHZ

    def flash_rows(self, part: str, boost: bool) -> tuple[tuple[int, ...], str]:
        """The wait-state table (upper MHz of each LATENCY) and its name: 16 MHz a wait state in
        range 1 (RM0351 table 11), 20 in the L4+'s boost mode (RM0432 table 12)."""
        if self.plus(part):
            return tuple(range(20, 121, 20)), "RM0432 table 12 boost"
        return tuple(range(16, 121, 16)), "RM0351 table 11 range 1"

    def osc_steps(self, osc: Osc) -> list[Step]:
        """The PLL's oscillator started (RM0351 6.4.1): the HSE, else the HSI16 (MSI at reset)."""
        if osc.name != "HSE":
            return self.hsi16_on("RM0351 6.4.1")
        rcc = self.rcc
        bypass = [_set(rcc, 18, 1, 1, "RCC_CR.HSEBYP (RM0351 6.4.1)")] if osc.bypass else []
        return [*bypass, _set(rcc, 16, 1, 1, "RCC_CR.HSEON"),
                _wait(rcc, 17, 1, 1, "RCC_CR.HSERDY", "hse")]  # fmt: skip

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        """PWR clock, boost mode (:meth:`boost`), the oscillator, flash latency, APB /1, the PLL,
        then the switch, with AHB /2 for at least 1 us around it in boost mode (class
        docstring; the G4's the same, RM0440 7.2.7)."""
        boost = self.boost(part, sysclk)
        rows, table = self.flash_rows(part, boost)
        ws = _wait_states(sysclk, rows)
        rcc, acr, text = self.rcc, self.flash_acr, self.text
        steps = [_set(rcc + 0x58, 28, 1, 1, text["pwren"])]
        if boost:
            steps.append(_set(self.pwr + 0x80, 8, 1, 0, text["r1mode"]))
        steps += self.osc_steps(osc)
        steps += [
            Step("set", acr, 0x70F, ws | 0x700, text["acr"].format(ws=ws, table=table)),
            _wait(acr, 0, 4, ws, text["acr_wait"], "flash"),
            Step("set", rcc + 0x08, 0x3F00, 0, text["ppre"]),
        ]
        if pll is not None:
            steps += self.pll_steps(osc, pll, self.wide_pllm(part))
        sw = 3 if pll is not None else (2 if osc.name == "HSE" else 1)
        if boost:
            steps.append(_set(rcc + 0x08, 4, 4, 8, text["hpre2"]))
        steps += [
            _set(rcc + 0x08, 0, 2, sw, text["sw"]),
            _wait(rcc + 0x08, 2, 2, sw, "RCC_CFGR.SWS follows SW", "switch"),
        ]
        if boost:
            steps += [
                Step("delay", 0, 0, 200, text["delay"]),
                _set(rcc + 0x08, 4, 4, 0, "RCC_CFGR.HPRE = /1"),
            ]
        buses = {"AHB": sysclk, "APB1": sysclk, "APB2": sysclk}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))

    def wide_pllm(self, part: str) -> bool:
        """RCC_PLLCFGR.PLLM is 4 bits wide ([7:4], the L4+'s, RM0432 6.4.4), else 3 ([6:4])."""
        return self.plus(part)

    def pll_steps(self, osc: Osc, pll: Pll, plus: bool) -> list[Step]:
        rcc = self.rcc
        src = 3 if osc.name == "HSE" else 2
        value = src | (pll.m - 1) << 4 | pll.n << 8 | 1 << 24 | (pll.div // 2 - 1) << 25
        mask = 0x0700_7FF3 if plus else 0x0700_7F73
        return [
            Step("set", rcc + 0x0C, mask, value,
                 f"RCC_PLLCFGR: src {osc.name}, M={pll.m} N={pll.n} R={pll.div}, PLLREN (VCO "
                 f"{float(pll.f_vco_hz) / MHZ:g} MHz; {'RM0432' if plus else 'RM0351'} 6.4.4)"),
            _set(rcc, 24, 1, 1, "RCC_CR.PLLON"),
            _wait(rcc, 25, 1, 1, "RCC_CR.PLLRDY", "pll"),
        ]  # fmt: skip


class STM32L4(Family):
    """STM32L4 and L4+: RM0351 rev 9 / RM0432: RCC at 0x4002_1000, AHB2ENR 0x4C /
    APB1ENR1 0x58 / APB1ENR2 0x5C / APB2ENR 0x60 (6.4.17, 6.4.19-21), GPIOA at 0x4800_0000,
    MSI 4 MHz after reset (6.2.3), USART bases (2.2.2), IRQs (table 58); LPUART1 has
    ``BRR = 256 f / baud`` (38.4.4) and is on PG7/PG8 on the Nucleo-144 (UM2179)."""

    name = "L4"
    manual = "RM0351"
    iwdg_base = 0x4000_3000
    lsi_hz = 32_000
    iwdg_source = "RM0351 2.2.2 memory map, 6.2 LSI, Independent watchdog (IWDG) chapter"
    core = CORES["cortex-m4"]
    flash_miss_rate = 0.05
    flash_miss_source = "RM0351 3.3.4"
    fpus = ("fpv4-sp-d16",)
    usart_layout = "isr_rdr_tdr"
    reset_clock_hz = 4_000_000
    openocd_target = "target/stm32l4x.cfg"
    rcc = 0x4002_1000
    gpio = 0x4800_0000
    gpio_en = 0x4C
    clock = L4Clock()
    apb2_enr = 0x60
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
