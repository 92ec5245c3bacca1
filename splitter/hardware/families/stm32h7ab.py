"""STM32H7A3 / H7B3 / H7B0 (RM0455): the H7 family's RCC, GPIO, USARTs and IWDG with their own
power, voltage scaling, flash and bus rules.

A family of its own rather than a third variant inside ``H7Clock``: its voltage scaling is a
different register with the opposite encoding (PWR_SRDCR.VOS = 0b11 is VOS0, the highest; on the
H743 PWR_D3CR.VOS = 0b11 is VOS1 and VOS0 needs SYSCFG's over-drive), its "-Q" parts carry an
SMPS whose wiring the board decides, and its flash and bus limits are others. Everything else
is inherited from :mod:`splitter.hardware.families.stm32h7` (one place per fact): RCC at
0x5802_4400 with the H743's register offsets (RCC_CR, CFGR 0x10, CDCFGR1/2 and SRDCFGR at
0x18-0x20 where the H743 has D1/D2/D3CFGR, PLLCKSELR 0x28, PLLCFGR 0x2C, PLL1DIVR 0x30,
AHB4ENR 0xE0, APB1LENR 0xE8, APB2ENR 0xF0), GPIOA at 0x5802_0000, HSI 64 MHz after reset, the
USART bases, IRQs and AF7 pins, IWDG1 at 0x5800_4800. Every one of these addresses, offsets and
bit positions was checked against ST's device header ``stm32h7a3xxq.h`` (STMicroelectronics/
cmsis_device_h7, commit 13ba9da): RCC_BASE, PWR_BASE, GPIOA_BASE, FLASH_R_BASE, USART3_BASE,
IWDG1_BASE, the RCC_TypeDef / PWR_TypeDef offsets (PWR CSR1 0x04, CR3 0x0C, SRDCR 0x18), the
CDCFGR1/2, SRDCFGR and FLASH_ACR (LATENCY[3:0], WRHIGHFREQ[5:4]) fields, USART3_IRQn 39,
USART6_IRQn 71.

RM0455 itself was not available here: on 2026-11-27 the search corpora (docs, pages, code,
issues) and the GitHub file search held no copy of its text, only its title and links (and a
58 MB PDF other projects keep out of git). So the comments name RM0455's registers, and give a
section or table number only where a third party quotes one with its revision: "RM0455 Rev 3
6.8.6" for the PWR_SRDCR.VOS encoding (stm32h7xx-hal ``src/pwr.rs``, commit 0007f30) and
"RM0455 Rev 10 Table 16. FLASH recommended number of wait states and programming delay" with
its VOS0-VOS3 rows (embassy-stm32 ``src/rcc/h7.rs``, commit 2db4d01; the same rows in
stm32h7xx-hal). The PWR_CR3 supply bits, the RCC_PLL1DIVR / PLLCFGR / CDCFGRx fields, the VOS
maximum frequencies and the USART BRR formula carry no RM0455 section: none was found.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import ClassVar

from splitter.hardware.clocks import MHZ, ClockError, PllLimits, Step, _set, _wait
from splitter.hardware.families.stm32h7 import STM32H7, H7Clock

#: VCORE supply -> PWR_CR3 supply bits (SMPSLEVEL[5:4], SMPSEXTHP 3, SMPSEN 2, LDOEN 1, BYPASS
#: 0): STM32CubeH7 ``stm32h7xx_hal_pwr_ex.h`` ``PWR_LDO_SUPPLY`` = LDOEN and, on the SMPS
#: parts, ``PWR_DIRECT_SMPS_SUPPLY`` = SMPSEN; ``HAL_PWREx_ConfigSupply`` writes them under
#: ``PWR_SUPPLY_CONFIG_MASK`` (0x3F) and waits PWR_CSR1.ACTVOSRDY.
SUPPLY_BITS: Mapping[str, int] = MappingProxyType({"ldo": 0x2, "direct-smps": 0x4})


class H7ABClock(H7Clock):
    """STM32H7A3/B3 (RM0455 rev 10; DS13195 for the limits; the register sequence is the one of
    STM32CubeH7 ``Projects/NUCLEO-H7A3ZI-Q/Templates/Src/main.c`` ``SystemClock_Config``).

    * Supply (PWR_CR3 at 0x5802_480C, write-once after power-on): the board's wiring decides
      (:data:`SUPPLY_BITS`); the NUCLEO-H7A3ZI-Q is wired for the direct SMPS (UM2408 table 10,
      the ST article "How to unbrick an STM32H7 after setting the wrong power mode"), and ST's
      template selects it first, ``HAL_PWREx_ConfigSupply(PWR_DIRECT_SMPS_SUPPLY)``, before
      any voltage-scaling change. A part without a board gets the LDO, the only supply of the
      non-Q parts. Then wait PWR_CSR1.ACTVOSRDY (bit 13).
    * Voltage scaling (PWR_SRDCR at 0x5802_4818, VOS[15:14], VOSRDY bit 13): ST's
      ``stm32h7xx_hal_pwr.h`` for parts with PWR_SRDCR, and "RM0455 Rev 3 6.8.6" as
      stm32h7xx-hal quotes it: VOS0 = 0b11, VOS1 = 0b10, VOS2 = 0b01, VOS3 = 0b00. VOS0 above
      225 MHz (up to 280 MHz), VOS1 up to 225 MHz: the highest AXI clocks of the VOS0 / VOS1
      rows of RM0455 Rev 10 Table 16 as embassy-stm32 quotes it (VOS2 160 MHz, VOS3 88 MHz
      there; not used here).
    * PLL1: the H743's registers (DIVM1 1..63, DIVN1 4..512, even DIVP1) with the wide VCO
      (PLLCFGR.VCOSEL = 0) limits of DS13195 Rev 8 Table 55 "PLL characteristics (wide VCO
      frequency range)" (p. 111): input 2-16 MHz, VCO 128-560 MHz (the H743's wide VCO goes to
      836 MHz; this part's stops at 560, the VCO ST's template runs at for 280 MHz).
    * Buses: CPU and AXI / AHB (HPRE) up to 280 MHz at VOS0, 225 MHz at VOS1, every APB
      (CDPPRE, CDPPRE1/2, SRDPPRE) up to 140 / 112.5 MHz, the USARTs' kernel clock up to
      280 / 225 MHz: DS13195 Rev 8 Table 23 "Maximum allowed clock frequencies" and Table 24
      "Supply voltage and maximum frequency configuration" (VOS0 280, VOS1 225, VOS2 160, VOS3
      88 MHz), p. 83-84 (ST's template: HCLK 280 MHz, APB /2 = 140 MHz). The USARTs' kernel
      clock is their APB's (RCC_CDCCIP2R resets to PCLK). DS13195 was read on the copy in
      github.com/MaleBenAttia/st_datasheets153 (commit defa71a6, outJason/H7/stm32h7a3ag), the
      tables extracted from ST's PDF (the PDF itself is not in that copy's snapshot here).
    * Flash (RM0455 Rev 10 Table 16 "FLASH recommended number of wait states and programming
      delay", read as embassy-stm32 and stm32h7xx-hal quote its rows, not in RM0455 itself;
      FLASH_ACR LATENCY[3:0], WRHIGHFREQ[5:4]): VOS0 42 MHz per wait state (6 WS, WRHIGHFREQ 3
      at 252-280 MHz), VOS1 38 MHz per wait state up to 225 MHz.
    """

    manual = "RM0455"
    limits = PllLimits(range(1, 64), range(4, 513), tuple(range(2, 129, 2)), (2 * MHZ, 16 * MHZ),
                       (128 * MHZ, 560 * MHZ), 2 * MHZ)  # fmt: skip
    max_hz = 280 * MHZ
    supplies = tuple(SUPPLY_BITS)
    variant = None  # one line, one manual
    #: (upper AXI MHz, LATENCY, WRHIGHFREQ), RM0455 Rev 10 Table 16's VOS0 and VOS1 rows as
    #: embassy-stm32 src/rcc/h7.rs (2db4d01) quotes them
    flash_vos0 = ((42, 0, 0), (84, 1, 0), (126, 2, 1), (168, 3, 1), (210, 4, 2), (252, 5, 2),
                  (280, 6, 3))  # fmt: skip
    flash_vos1 = ((38, 0, 0), (76, 1, 0), (114, 2, 1), (152, 3, 1), (190, 4, 2), (225, 5, 2))
    text: ClassVar[Mapping[str, str]] = MappingProxyType({
        "hsebyp": "RCC_CR.HSEBYP: ST-LINK MCO (RM0455 RCC_CR)",
        "acr_wait": "FLASH_ACR.LATENCY read back (RM0455 FLASH_ACR)",
        "cpu": "RCC_CDCFGR1: CDCPRE /1, HPRE /{hpre}, CDPPRE /{dp} (RM0455 RCC_CDCFGR1)",
        "apb12": "RCC_CDCFGR2: CDPPRE1 /{dp}, CDPPRE2 /{dp} (RM0455 RCC_CDCFGR2)",
        "apb4": "RCC_SRDCFGR: SRDPPRE /{dp} (RM0455 RCC_SRDCFGR)",
        "sw": "RCC_CFGR.SW (RM0455 RCC_CFGR)",
        "pllcksel": "RCC_PLLCKSELR: PLLSRC {src}, DIVM1 = {m} (RM0455 RCC_PLLCKSELR)",
        "pllcfgr": "RCC_PLLCFGR: PLL1RGE {rge} ({ref:g} MHz in), wide VCO, DIVP1EN (RM0455 "
                   "RCC_PLLCFGR)",
        "divr": "RCC_PLL1DIVR: N={n} P={p} Q={q} R=2, VCO {vco:g} MHz (RM0455 RCC_PLL1DIVR)",
    })  # fmt: skip

    def bus_max(self, part: str) -> tuple[int, int]:
        """AXI / AHB 280 MHz, APB 140 MHz at VOS0 (DS13195 Rev 8 Table 23, class docstring)."""
        return 280 * MHZ, 140 * MHZ

    @staticmethod
    def vos0(sysclk: int) -> bool:
        """VOS0 above VOS1's 225 MHz (class docstring)."""
        return sysclk > 225 * MHZ

    def flash_row(self, part: str, hclk: int, sysclk: int) -> tuple[int, int, str]:
        """``(LATENCY, WRHIGHFREQ, table)``: the row of RM0455 table 16 for the AXI clock at the
        voltage scale :meth:`vos0` picks."""
        vos0 = self.vos0(sysclk)
        rows = self.flash_vos0 if vos0 else self.flash_vos1
        row = next((r for r in rows if hclk <= r[0] * MHZ), None)
        if row is None:
            raise ClockError(f"{part}: AXI clock {hclk / MHZ:g} MHz above RM0455 table 16")
        return row[1], row[2], f"RM0455 table 16, VOS{0 if vos0 else 1}"

    def power_steps(self, part: str, sysclk: int) -> list[Step]:
        """The supply first (written once, before any VOS change), then VOS0 / VOS1."""
        pwr = self.pwr
        vos, scale = (3, 0) if self.vos0(sysclk) else (2, 1)
        bits = SUPPLY_BITS[self.supply]
        return [
            Step("set", pwr + 0x0C, 0x3F, bits,
                 f"PWR_CR3: {self.supply} supply (SMPSLEVEL, SMPSEXTHP, SMPSEN, LDOEN, BYPASS = "
                 f"0x{bits:02X}), as HAL_PWREx_ConfigSupply (RM0455 PWR_CR3)"),
            _wait(pwr + 0x04, 13, 1, 1, "PWR_CSR1.ACTVOSRDY (RM0455 PWR_CSR1)", "power"),
            _set(pwr + 0x18, 14, 2, vos,
                 f"PWR_SRDCR.VOS = 0b{vos:02b}: VOS{scale} (RM0455 PWR_SRDCR)"),
            _wait(pwr + 0x18, 13, 1, 1, "PWR_SRDCR.VOSRDY", "power"),
        ]  # fmt: skip


class STM32H7AB(STM32H7):
    """STM32H7A3/B3/B0: RM0455 rev 10, Cortex-M7 at up to 280 MHz with the double-precision FPU
    (DS13195 Rev 8 Table 24); the H743's RCC, GPIO, USART and IWDG map (module docstring);
    Nucleo-144 USART3 on PD8/PD9 (UM2408, the ST-LINK virtual COM port)."""

    name = "H7AB"
    manual = "RM0455"
    iwdg_source = (
        "RM0455 memory map (IWDG1 at 0x5800_4800, as stm32h7a3xxq.h), LSI 32 kHz, IWDG chapter"
    )
    flash_miss_source = "RM0455 (AXI flash interface, no ART), AN4891"
    clock = H7ABClock()
