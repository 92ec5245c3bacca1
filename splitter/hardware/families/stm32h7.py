"""STM32H7 (RM0433 H743/753, RM0468 H723/733): the family and its clock rules."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from splitter.hardware.clocks import (
    AHB_CODE,
    APB_CODE,
    MHZ,
    ClockError,
    ClockRules,
    ClockTree,
    Osc,
    Pll,
    PllLimits,
    Step,
    Variant,
    _prescaler,
    _set,
    _wait,
)
from splitter.hardware.cores import CORES
from splitter.hardware.families.base import Family, _nucleo144
from splitter.hardware.families.stm32f4 import STM32F4


class H7Clock(ClockRules):
    """STM32H743/753 (RM0433 rev 7) and H723/733 (RM0468).

    * Supply (RM0433 6.8.4 PWR_CR3): the Nucleo-144 H7 boards feed VCORE from the LDO: write
      LDOEN (bit 1), clear BYPASS (bit 0) and SCUEN (bit 2), then wait ACTVOSRDY (PWR_CSR1
      bit 13); the supply configuration is write-once per power-up.
    * Voltage scaling (RM0433 6.6.2): VOS1 (PWR_D3CR.VOS = 0b11, wait VOSRDY bit 13) up to
      400 MHz; VOS0 (over-drive: SYSCFG_PWRCR.ODEN bit 0 with SYSCFG's clock on, RCC_APB4ENR
      bit 1, wait VOSRDY) for 480 MHz (H743 rev V, DS12110 table 23). H723 (RM0468 6.8.6):
      VOS0 is PWR_D3CR.VOS = 0b00, written directly; 550 MHz also needs the CPUFREQ_BOOST
      option bit (RM0468 4.4.8), which the firmware does not program.
    * PLL1 (RM0433 8.7.13 / 8.5.5): DIVM1 1..63 (RCC_PLLCKSELR[9:4]), input range PLL1RGE,
      wide VCO 192-960 MHz (PLL1VCOSEL = 0), DIVN1 4..512, DIVP1 even 2..128; 2 MHz reference.
    * Buses: D1CPRE /1, HPRE so that the AXI / AHB clock is <= 240 MHz (H723: 275 MHz), every
      APB (D1PPRE, D2PPRE1/2, D3PPRE) <= 120 MHz (H723: 137.5 MHz) (DS12110 table 23).
    * Flash (RM0433 4.3.8 table 17, VOS0/1): LATENCY and WRHIGHFREQ by AXI clock.
    """

    manual = "RM0433"
    limits = PllLimits(range(1, 64), range(4, 513), tuple(range(2, 129, 2)), (MHZ, 16 * MHZ),
                       (192 * MHZ, 960 * MHZ), 2 * MHZ)  # fmt: skip
    reset_osc = Osc("HSI", 64 * MHZ)
    pll_osc = Osc("HSI", 64 * MHZ)
    max_hz = 480 * MHZ
    #: H72x/H73x (RM0468): DIVP1 may be 1; 550 MHz
    variant: ClassVar[Variant | None] = Variant(
        ("STM32H72", "STM32H73"),
        "RM0468",
        PllLimits(
            limits.m, limits.n, (1, *limits.div), limits.ref_hz, limits.vco_hz, limits.prefer_ref_hz
        ),
        550 * MHZ,
    )
    rcc = 0x5802_4400
    pwr = 0x5802_4800
    syscfg = 0x5800_0400
    flash_acr = 0x5200_2000
    #: (upper AXI MHz, LATENCY, WRHIGHFREQ), RM0433 table 17 (VOS0 / VOS1)
    flash_rows = ((70, 0, 0), (140, 1, 1), (185, 2, 1), (210, 2, 2), (225, 3, 2), (240, 4, 2))
    #: RM0468 table 16 (H72x/73x, VOS0)
    flash_rows_h72 = ((70, 0, 0), (140, 1, 1), (210, 2, 2), (275, 3, 3))
    #: the comments the RCC / FLASH steps carry into ``clock_init()``: register, fields and the
    #: manual's section (a variant with other register names or sections overrides them)
    text: ClassVar[Mapping[str, str]] = MappingProxyType({
        "hsebyp": "RCC_CR.HSEBYP: ST-LINK MCO (RM0433 8.7.2)",
        "acr_wait": "FLASH_ACR.LATENCY read back (RM0433 4.3.8)",
        "cpu": "RCC_D1CFGR: D1CPRE /1, HPRE /{hpre}, D1PPRE /{dp} (RM0433 8.7.8)",
        "apb12": "RCC_D2CFGR: D2PPRE1 /{dp}, D2PPRE2 /{dp} (RM0433 8.7.9)",
        "apb4": "RCC_D3CFGR: D3PPRE /{dp} (RM0433 8.7.10)",
        "sw": "RCC_CFGR.SW (RM0433 8.7.7)",
        "pllcksel": "RCC_PLLCKSELR: PLLSRC {src}, DIVM1 = {m} (RM0433 8.7.11)",
        "pllcfgr": "RCC_PLLCFGR: PLL1RGE {rge} ({ref:g} MHz in), wide VCO, DIVP1EN (RM0433 8.7.12)",
        "divr": "RCC_PLL1DIVR: N={n} P={p} Q={q} R=2, VCO {vco:g} MHz (RM0433 8.7.13)",
    })  # fmt: skip

    def h72(self, part: str) -> bool:
        """H72x/H73x (:attr:`variant`, RM0468): VOS0 is PWR_D3CR.VOS = 0b00 (no SYSCFG ODEN)."""
        return self.variant_of(part) is not None

    def bus_max(self, part: str) -> tuple[int, int]:
        """The AXI / AHB and the APB maxima (DS12110 table 23; H723: DS13313)."""
        return (275 * MHZ, 137_500_000) if self.h72(part) else (240 * MHZ, 120 * MHZ)

    def flash_row(self, part: str, hclk: int, sysclk: int) -> tuple[int, int, str]:
        """``(LATENCY, WRHIGHFREQ, table)`` for an AXI clock ``hclk`` (RM0433 table 17 / RM0468
        table 16, VOS0 / VOS1 rows)."""
        rows = self.flash_rows_h72 if self.h72(part) else self.flash_rows
        row = next((r for r in rows if hclk <= r[0] * MHZ), None)
        if row is None:
            raise ClockError(f"{part}: AXI clock {hclk / MHZ:g} MHz above the flash table")
        return row[1], row[2], "RM0433 4.3.8 table 17"

    def power_steps(self, part: str, sysclk: int) -> list[Step]:
        """Supply (PWR_CR3), voltage scaling to VOS1 and, above 400 MHz, VOS0 (class docstring)."""
        rcc, pwr = self.rcc, self.pwr
        steps = [
            Step("set", pwr + 0x0C, 0x7, 0x2,
                 "PWR_CR3: LDOEN, no bypass, SCUEN cleared: LDO supply (RM0433 6.8.4)"),
            _wait(pwr + 0x04, 13, 1, 1, "PWR_CSR1.ACTVOSRDY (RM0433 6.8.2)", "power"),
            _set(pwr + 0x18, 14, 2, 3, "PWR_D3CR.VOS = scale 1 (RM0433 6.8.6)"),
            _wait(pwr + 0x18, 13, 1, 1, "PWR_D3CR.VOSRDY", "power"),
        ]  # fmt: skip
        if sysclk > 400 * MHZ and self.h72(part):
            steps += [
                _set(pwr + 0x18, 14, 2, 0, "PWR_D3CR.VOS = 0b00: VOS0 (RM0468 6.8.6)"),
                _wait(pwr + 0x18, 13, 1, 1, "PWR_D3CR.VOSRDY at VOS0", "power"),
            ]
        elif sysclk > 400 * MHZ:
            steps += [
                _set(rcc + 0xF4, 1, 1, 1, "RCC_APB4ENR.SYSCFGEN (RM0433 8.7.48)"),
                _set(self.syscfg + 0x2C, 0, 1, 1, "SYSCFG_PWRCR.ODEN: VOS0 (RM0433 12.3.10)"),
                _wait(pwr + 0x18, 13, 1, 1, "PWR_D3CR.VOSRDY at VOS0 (RM0433 6.6.2)", "power"),
            ]
        return steps

    def tree(self, part: str, osc: Osc, pll: Pll | None, sysclk: int) -> ClockTree:
        hclk_max, apb_max = self.bus_max(part)
        hpre = _prescaler(sysclk, hclk_max, AHB_CODE)
        hclk = sysclk // hpre
        dp = _prescaler(hclk, apb_max, APB_CODE)
        ws, wrhf, table = self.flash_row(part, hclk, sysclk)
        rcc = self.rcc
        steps = self.power_steps(part, sysclk)
        if osc.name == "HSE":
            if osc.bypass:
                steps.append(_set(rcc, 18, 1, 1, self.text["hsebyp"]))
            steps += [
                _set(rcc, 16, 1, 1, "RCC_CR.HSEON"),
                _wait(rcc, 17, 1, 1, "RCC_CR.HSERDY", "hse"),
            ]
        if pll is not None:
            steps += self.pll_steps(osc, pll)
        steps += [
            Step("set", self.flash_acr, 0x3F, ws | wrhf << 4,
                 f"FLASH_ACR: LATENCY {ws} WS, WRHIGHFREQ {wrhf} for AXI {hclk / MHZ:g} MHz "
                 f"({table})"),
            _wait(self.flash_acr, 0, 4, ws, self.text["acr_wait"], "flash"),
            Step("set", rcc + 0x18, 0xF7F, AHB_CODE[hpre] | APB_CODE[dp] << 4,
                 self.text["cpu"].format(hpre=hpre, dp=dp)),
            Step("set", rcc + 0x1C, 0x770, APB_CODE[dp] << 4 | APB_CODE[dp] << 8,
                 self.text["apb12"].format(dp=dp)),
            _set(rcc + 0x20, 4, 3, APB_CODE[dp], self.text["apb4"].format(dp=dp)),
        ]  # fmt: skip
        sw = 3 if pll is not None else (2 if osc.name == "HSE" else 0)
        steps += [
            _set(rcc + 0x10, 0, 3, sw, self.text["sw"]),
            _wait(rcc + 0x10, 3, 3, sw, "RCC_CFGR.SWS follows SW", "switch"),
        ]
        buses = {"AHB": hclk} | {b: hclk // dp for b in ("APB1", "APB2", "APB3", "APB4")}
        return ClockTree(osc, pll, sysclk, buses, ws, tuple(steps))

    def pll_steps(self, osc: Osc, pll: Pll) -> list[Step]:
        """RCC_PLLCKSELR (PLLSRC[1:0]: 0 HSI, 2 HSE; DIVM1[9:4]), RCC_PLLCFGR (PLL1RGE[3:2] by
        reference: [1, 2) / [2, 4) / [4, 8) / [8, 16] MHz = 0..3; PLL1VCOSEL bit 1 = 0 wide;
        FRACEN off; DIVP1EN bit 16 only), RCC_PLL1DIVR (N-1 [8:0], P-1 [15:9], Q-1 [22:16],
        R-1 [30:24]), then PLL1ON (CR bit 24), wait PLL1RDY (25). RM0433 8.7.11-8.7.13."""
        rcc = self.rcc
        rge = next((i for i, top in enumerate((2, 4, 8)) if pll.f_ref_hz < top * MHZ), 3)
        src = 2 if osc.name == "HSE" else 0
        divr = (pll.n - 1) | (pll.div - 1) << 9 | (pll.q - 1) << 16 | 1 << 24
        return [
            Step("set", rcc + 0x28, 0x3F3, src | pll.m << 4,
                 self.text["pllcksel"].format(src=osc.name, m=pll.m)),
            Step("set", rcc + 0x2C, 0x0007_000F, rge << 2 | 1 << 16,
                 self.text["pllcfgr"].format(rge=rge, ref=float(pll.f_ref_hz) / MHZ)),
            Step("set", rcc + 0x30, 0x7F7F_FFFF, divr,
                 self.text["divr"].format(n=pll.n, p=pll.div, q=pll.q,
                                          vco=float(pll.f_vco_hz) / MHZ)),
            _set(rcc, 24, 1, 1, "RCC_CR.PLL1ON"),
            _wait(rcc, 25, 1, 1, "RCC_CR.PLL1RDY", "pll"),
        ]  # fmt: skip


class STM32H7(Family):
    """STM32H7: RM0433 rev 7: RCC at 0x5802_4400, AHB4ENR 0xE0 / APB1LENR 0xE8 / APB2ENR 0xF0
    (8.7.43, 8.7.45, 8.7.47), GPIOA at 0x5802_0000 (2.3.2), HSI 64 MHz after reset (8.5.2);
    the F4's USART bases and IRQ numbers (2.3.2, table 145); USART6 on AF7 here (DS12110
    table 9); Nucleo-144 USART3 on PD8/PD9."""

    name = "H7"
    manual = "RM0433"
    iwdg_base = 0x5800_4800
    lsi_hz = 32_000
    iwdg_source = "RM0433 2.3.2 memory map (IWDG1), 8.5 LSI, Independent watchdog (IWDG) chapter"
    core = CORES["cortex-m7"]
    flash_miss_rate = 0.02
    flash_miss_source = "RM0433 2.1, AN4891"
    fpus = ("fpv5-d16",)
    usart_layout = "isr_rdr_tdr"
    reset_clock_hz = 64_000_000
    openocd_target = "target/stm32h7x.cfg"
    rcc = 0x5802_4400
    gpio = 0x5802_0000
    gpio_en = 0xE0
    clock = H7Clock()
    apb2_enr = 0xF0
    usart_table = _nucleo144(
        {
            name: u._replace(
                en_reg=0xF0 if u.en_reg == 0x44 else 0xE8,  # APB2ENR / APB1LENR, same bits
                af=7 if name == "USART6" else u.af,
            )
            for name, u in STM32F4.usart_table.items()
        }
    )
