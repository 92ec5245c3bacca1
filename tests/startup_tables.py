"""Reference-manual tables for the real-board startup trace (``test_startup_trace.py``).

Written by hand from the reference manuals (RM) and board user manuals (UM), not from
splitter's code: per family, the model of the ready bits the emulated RCC / PWR / FLASH answer
with, a decoder that computes SYSCLK and the bus clocks from the final register values, and per
catalog part the register fields the startup must leave (each with its RM section), the USART
kernel clock and BRR of each link, and the pins and alternate functions.

A row of :data:`PARTS` is ``Expect(board, sysclk, fields, usarts)``:
``fields`` = ``(address, shift, width, value, source)``; ``usarts`` = ``(name, base, bus, BRR
at 115200 baud (hand-computed: bus clock / 115200, LPUART 256 x), rcc enable (address, bit),
((pin, af), (pin, af)))`` for link 0 (host, the board's ST-LINK
virtual COM port) and link 1 (to the second device).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass

MHZ = 1_000_000
BAUD = 115200


# ------------------------------------------------------------------ ready-bit models ---------
@dataclass(frozen=True)
class Ready:
    """``status`` bit reads 1 once ``(reg[ctrl] & ctrl_mask) == ctrl_mask`` (``ctrl_mask`` 0:
    once ``ctrl`` has been written at all)."""

    ctrl: int
    ctrl_mask: int
    status: int
    status_bit: int


@dataclass(frozen=True)
class Follows:
    """``reg[addr]`` bits ``[dst + width - 1 : dst]`` read as bits ``[src + width - 1 : src]``
    (SWS follows SW once the switch is done)."""

    addr: int
    src: int
    dst: int
    width: int


@dataclass(frozen=True)
class Model:
    ready: tuple[Ready, ...]
    follows: tuple[Follows, ...]
    reset: Mapping[int, int]  # reset values the firmware reads back before writing


F4_RCC, F4_PWR = 0x4002_3800, 0x4000_7000
H7_RCC, H7_PWR = 0x5802_4400, 0x5802_4800
L4_RCC, L4_PWR = 0x4002_1000, 0x4000_7000

MODELS = {
    # RM0090 6.3.1 RCC_CR: HSEON 16 -> HSERDY 17, PLLON 24 -> PLLRDY 25; 6.3.3 SWS[3:2] = SW;
    # RM0390 5.4.1/5.4.2 PWR_CR ODEN 16 -> PWR_CSR ODRDY 16, ODSWEN 17 -> ODSWRDY 17
    "F4": Model(
        (
            Ready(F4_RCC, 1 << 16, F4_RCC, 17),
            Ready(F4_RCC, 1 << 24, F4_RCC, 25),
            Ready(F4_RCC, 1 << 0, F4_RCC, 1),
            Ready(F4_PWR, 1 << 16, F4_PWR + 4, 16),
            Ready(F4_PWR, 1 << 17, F4_PWR + 4, 17),
        ),
        (Follows(F4_RCC + 0x08, 0, 2, 2),),
        {F4_RCC: 0x0000_0083, F4_RCC + 0x04: 0x2400_3010},  # RM0090 6.3.1, 6.3.2 reset values
    ),
    # RM0433 8.7.2 RCC_CR: HSEON 16 -> HSERDY 17, PLL1ON 24 -> PLL1RDY 25; 8.7.7 SWS[5:3] = SW;
    # 6.8.2 PWR_CSR1.ACTVOSRDY 13 after the PWR_CR3 supply write; 6.8.6 PWR_D3CR.VOSRDY 13
    "H7": Model(
        (
            Ready(H7_RCC, 1 << 16, H7_RCC, 17),
            Ready(H7_RCC, 1 << 24, H7_RCC, 25),
            Ready(H7_PWR + 0x0C, 0, H7_PWR + 0x04, 13),
            Ready(H7_PWR + 0x18, 0, H7_PWR + 0x18, 13),
        ),
        (Follows(H7_RCC + 0x10, 0, 3, 3),),
        {H7_PWR + 0x0C: 0x0000_0006, H7_PWR + 0x18: 0x0000_4000, 0x5200_2000: 0x0000_0037},
    ),
    # RM0351 6.4.1 RCC_CR: HSION 8 -> HSIRDY 10, HSEON 16 -> HSERDY 17, PLLON 24 -> PLLRDY 25;
    # 6.4.3 SWS[3:2] = SW
    "L4": Model(
        (
            Ready(L4_RCC, 1 << 8, L4_RCC, 10),
            Ready(L4_RCC, 1 << 16, L4_RCC, 17),
            Ready(L4_RCC, 1 << 24, L4_RCC, 25),
        ),
        (Follows(L4_RCC + 0x08, 0, 2, 2),),
        {L4_RCC: 0x0000_0063, L4_RCC + 0x0C: 0x0000_1000, L4_PWR + 0x80: 0x0000_0100},
    ),
    # RM0444 5.4.1 RCC_CR: HSEON 16 -> HSERDY 17, PLLON 24 -> PLLRDY 25; 5.4.3 SWS[5:3] = SW
    "G0": Model(
        (Ready(L4_RCC, 1 << 16, L4_RCC, 17), Ready(L4_RCC, 1 << 24, L4_RCC, 25)),
        (Follows(L4_RCC + 0x08, 0, 3, 3),),
        {L4_RCC: 0x0000_0500, L4_RCC + 0x0C: 0x0000_1000, 0x4002_2000: 0x0000_0600},
    ),
}
MODELS["F7"] = MODELS["F4"]
# RM0455 (H7A3/B3; its text was not reachable here, see the STM32H7A3ZI row of PARTS, so these
# name registers, not sections): the H743's RCC ready bits and SWS; PWR_CSR1.ACTVOSRDY (13)
# once PWR_CR3 is written, PWR_SRDCR.VOSRDY (13) once PWR_SRDCR is written. PWR_CR3 of the -Q
# parts resets with SMPSEN and LDOEN both set (0x06: the SMPS feeding the LDO; STM32CubeH7
# stm32h7xx_hal_pwr_ex.c compares the register with the requested supply for that reason), so
# a supply write that does not clear LDOEN shows in the final value; FLASH_ACR resets to 0x13
# (ST's STM32H7A3 SVD).
MODELS["H7AB"] = Model(
    MODELS["H7"].ready,
    MODELS["H7"].follows,
    {H7_PWR + 0x0C: 0x0000_0006, H7_PWR + 0x18: 0x0000_4000, 0x5200_2000: 0x0000_0013},
)
U5_RCC, U5_PWR = 0x4602_0C00, 0x4602_0800
# RM0440 7.4.1 RCC_CR: HSION 8 -> HSIRDY 10, HSEON 16 -> HSERDY 17, PLLON 24 -> PLLRDY 25;
# 7.4.3 SWS[3:2] = SW; reset values 7.4.1 (HSI16 on and ready), 7.4.4, 6.4.6 (R1MODE = 1),
# 5.7.1 (ICEN, DCEN)
MODELS["G4"] = Model(
    MODELS["L4"].ready,
    (Follows(L4_RCC + 0x08, 0, 2, 2),),
    {L4_RCC: 0x0000_0500, L4_RCC + 0x0C: 0x0000_1000, L4_PWR + 0x80: 0x0000_0100,
     0x4002_2000: 0x0000_0600},
)  # fmt: skip
# RM0438 9.8.1 (as RM0351 6.4.1), 9.8.3 SWS; 8.6.1 PWR_CR1 resets to VOS = 10 (range 2);
# PWR_SR2.VOSF (8.6.10) reads 0: the voltage is reached at once
MODELS["L5"] = Model(
    MODELS["L4"].ready,
    (Follows(L4_RCC + 0x08, 0, 2, 2),),
    {L4_RCC: 0x0000_0063, L4_RCC + 0x0C: 0x0000_1000, L4_PWR: 0x0000_0400},
)
# RM0456 11.8.1 RCC_CR: HSION 8 -> HSIRDY 10, HSEON 16 -> HSERDY 17, PLL1ON 24 -> PLL1RDY 25;
# 11.8.8 RCC_CFGR1 SWS[3:2] = SW; 10.10.4 PWR_VOSR: VOSRDY 15 once VOS is written, BOOSTRDY 14
# once BOOSTEN (18) is set; RCC_CR resets with MSIS on and ready (11.8.1)
MODELS["U5"] = Model(
    (
        Ready(U5_RCC, 1 << 8, U5_RCC, 10),
        Ready(U5_RCC, 1 << 16, U5_RCC, 17),
        Ready(U5_RCC, 1 << 24, U5_RCC, 25),
        Ready(U5_PWR + 0x0C, 0, U5_PWR + 0x0C, 15),
        Ready(U5_PWR + 0x0C, 1 << 18, U5_PWR + 0x0C, 14),
    ),
    (Follows(U5_RCC + 0x1C, 0, 2, 2),),
    {U5_RCC: 0x0000_0035},
)


def field(regs: Mapping[int, int], addr: int, shift: int, width: int) -> int:
    return (regs.get(addr, 0) >> shift) & ((1 << width) - 1)


# ------------------------------------------------------------------ clock decoders -----------
def _apb(code: int) -> int:
    """RM0090 6.3.3: PPRE 0xx = /1, 100 = /2, 101 = /4, 110 = /8, 111 = /16."""
    return 1 if code < 4 else 2 ** (code - 3)


def _ahb(code: int) -> int:
    """RM0090 6.3.3: HPRE 0xxx = /1, 1000 = /2, 1001 = /4 ... (no /32)."""
    return 1 if code < 8 else [2, 4, 8, 16, 64, 128, 256, 512][code - 8]


def decode_f4(regs: Mapping[int, int], hse: int) -> dict[str, float]:
    """RM0090 6.3.2-6.3.3: f = src * PLLN / PLLM / PLLP with PLLP = 2 (field + 1)."""
    pll = F4_RCC + 0x04
    src = hse if field(regs, pll, 22, 1) else 16 * MHZ
    m, n, p = field(regs, pll, 0, 6), field(regs, pll, 6, 9), 2 * (field(regs, pll, 16, 2) + 1)
    sw = field(regs, F4_RCC + 0x08, 0, 2)
    sys = {0: 16 * MHZ, 1: hse, 2: src * n / m / p}[sw]
    cfgr = F4_RCC + 0x08
    hclk = sys / _ahb(field(regs, cfgr, 4, 4))
    return {
        "SYSCLK": sys,
        "APB1": hclk / _apb(field(regs, cfgr, 10, 3)),
        "APB2": hclk / _apb(field(regs, cfgr, 13, 3)),
    }


def decode_h7(regs: Mapping[int, int], hse: int) -> dict[str, float]:
    """RM0433 8.7.11-8.7.13: f = src / DIVM1 * (DIVN1 + 1) / (DIVP1 + 1); 8.7.8-8.7.10."""
    src = {0: 64 * MHZ, 2: hse}[field(regs, H7_RCC + 0x28, 0, 2)]
    m = field(regs, H7_RCC + 0x28, 4, 6)
    divr = H7_RCC + 0x30
    n, p = field(regs, divr, 0, 9) + 1, field(regs, divr, 9, 7) + 1
    sys = {0: 64 * MHZ, 2: hse, 3: src / m * n / p}[field(regs, H7_RCC + 0x10, 0, 3)]
    d1 = H7_RCC + 0x18
    hclk = sys / _ahb(field(regs, d1, 8, 4)) / _ahb(field(regs, d1, 0, 4))
    return {
        "SYSCLK": sys,
        "APB1": hclk / _apb(field(regs, H7_RCC + 0x1C, 4, 3)),
        "APB2": hclk / _apb(field(regs, H7_RCC + 0x1C, 8, 3)),
    }


def decode_l4(regs: Mapping[int, int], hse: int, g0: bool = False) -> dict[str, float]:
    """RM0351 6.4.4 (PLLM[6:4] or L4+ [7:4] = M - 1, PLLN[14:8], PLLR[26:25] = R/2 - 1) and
    RM0444 5.4.4 (PLLR[31:29] = R - 1); SW: L4 0 MSI 1 HSI16 2 HSE 3 PLL, G0 0 HSISYS 1 HSE
    2 PLL."""
    pll = L4_RCC + 0x0C
    src = {2: 16 * MHZ, 3: hse}[field(regs, pll, 0, 2)]
    m = field(regs, pll, 4, 3 if g0 else 4) + 1
    n = field(regs, pll, 8, 7)
    r = field(regs, pll, 29, 3) + 1 if g0 else 2 * (field(regs, pll, 25, 2) + 1)
    f_pll = src / m * n / r
    sw = field(regs, L4_RCC + 0x08, 0, 3 if g0 else 2)
    # L4 / L5 / G4 (RM0351 6.4.3, RM0438 9.8.3, RM0440 7.4.3): 0 MSI 4 MHz, 1 HSI16, 2 HSE, 3 PLL
    sys = ({0: 16 * MHZ, 1: hse, 2: f_pll} if g0 else {0: 4 * MHZ, 1: 16 * MHZ, 2: hse, 3: f_pll})[
        sw
    ]
    cfgr = L4_RCC + 0x08
    hclk = sys / _ahb(field(regs, cfgr, 8 if g0 else 4, 4))
    if g0:
        return {"SYSCLK": sys, "APB1": hclk / _apb(field(regs, cfgr, 12, 3)), "APB2": hclk}
    return {
        "SYSCLK": sys,
        "APB1": hclk / _apb(field(regs, cfgr, 8, 3)),
        "APB2": hclk / _apb(field(regs, cfgr, 11, 3)),
    }


def decode_u5(regs: Mapping[int, int], hse: int) -> dict[str, float]:
    """RM0456 11.8.11 / 11.8.14: f = src / (PLL1M + 1) * (PLL1N + 1) / (PLL1R + 1); SW in
    RCC_CFGR1[1:0] (0 MSIS 4 MHz, 1 HSI16, 2 HSE, 3 PLL1); HPRE / PPRE1 / PPRE2 in RCC_CFGR2
    (11.8.9), PPRE3 in RCC_CFGR3 (11.8.10)."""
    cfgr = U5_RCC + 0x28
    src = {2: 16 * MHZ, 3: hse}.get(field(regs, cfgr, 0, 2), 0)
    m = field(regs, cfgr, 8, 4) + 1
    divr = U5_RCC + 0x34
    n, r = field(regs, divr, 0, 9) + 1, field(regs, divr, 24, 7) + 1
    sw = field(regs, U5_RCC + 0x1C, 0, 2)
    sys = {0: 4 * MHZ, 1: 16 * MHZ, 2: hse, 3: src / m * n / r}[sw]
    hclk = sys / _ahb(field(regs, U5_RCC + 0x20, 0, 4))
    return {
        "SYSCLK": sys,
        "APB1": hclk / _apb(field(regs, U5_RCC + 0x20, 4, 3)),
        "APB2": hclk / _apb(field(regs, U5_RCC + 0x20, 8, 3)),
        "APB3": hclk / _apb(field(regs, U5_RCC + 0x24, 4, 3)),
    }


DECODERS: dict[str, Callable[[Mapping[int, int], int], dict[str, float]]] = {
    "F4": decode_f4,
    "F7": decode_f4,
    "H7": decode_h7,
    "H7AB": decode_h7,  # RM0455: the same PLL and prescaler fields (RCC_CDCFGR1/2 at 0x18/0x1C)
    "L4": decode_l4,
    "G0": lambda regs, hse: decode_l4(regs, hse, g0=True),
    "G4": decode_l4,
    "L5": decode_l4,
    "U5": decode_u5,
}


# ------------------------------------------------------------------ per part -----------------
@dataclass(frozen=True)
class Expect:
    board: str | None
    hse: int  # Hz of the board's HSE (0: none)
    sysclk: int
    fields: tuple[tuple[int, int, int, int, str], ...]
    usarts: tuple[tuple[str, int, str, int, tuple[int, int], tuple[tuple[str, int], ...]], ...]


def brr(fck: float, lp: bool = False) -> int:
    """RM0090 30.6.3 (USARTDIV = f / baud, 16x) / RM0351 38.4.4 (LPUART: 256 f / baud)."""
    return round((256 if lp else 1) * fck / BAUD)


F4_ACR = 0x4002_3C00
F4_PLL = F4_RCC + 0x04
F4_CFGR = F4_RCC + 0x08
_F405_CLOCK = (
    (F4_PLL, 0, 6, 8, "RM0090 6.3.2: PLLM = 8, 2 MHz VCO input (recommended)"),
    (F4_PLL, 6, 9, 168, "RM0090 6.3.2: PLLN = 168, VCO 336 MHz"),
    (F4_PLL, 16, 2, 0, "RM0090 6.3.2: PLLP = 2 -> 168 MHz"),
    (F4_PLL, 22, 1, 0, "RM0090 6.3.2: PLLSRC = HSI"),
    (F4_ACR, 0, 4, 5, "RM0090 3.5.1 table 10: 5 WS at 150-168 MHz, 2.7-3.6 V"),
    (F4_ACR, 8, 3, 7, "RM0090 3.9.1: PRFTEN, ICEN, DCEN"),
    (F4_CFGR, 10, 3, 5, "RM0090 6.3.3: PPRE1 = /4 (APB1 42 MHz max)"),
    (F4_CFGR, 13, 3, 4, "RM0090 6.3.3: PPRE2 = /2 (APB2 84 MHz max)"),
    (F4_CFGR, 0, 2, 2, "RM0090 6.3.3: SW = PLL"),
    (F4_RCC + 0x40, 28, 1, 1, "RM0090 6.3.13: PWREN"),
)
_F401_CLOCK = (
    (F4_PLL, 0, 6, 8, "RM0368 6.3.2: PLLM = 8, 2 MHz VCO input"),
    (F4_PLL, 6, 9, 168, "RM0368 6.3.2: PLLN = 168, VCO 336 MHz (192-432)"),
    (F4_PLL, 16, 2, 1, "RM0368 6.3.2: PLLP = 4 -> 84 MHz"),
    (F4_ACR, 0, 4, 2, "RM0368 3.4 table 6: 2 WS at 64-84 MHz, 2.7-3.6 V"),
    (F4_CFGR, 10, 3, 4, "RM0368 6.3.3: PPRE1 = /2 (APB1 42 MHz max)"),
    (F4_CFGR, 13, 3, 0, "RM0368 6.3.3: PPRE2 = /1 (APB2 84 MHz)"),
    (F4_CFGR, 0, 2, 2, "RM0368 6.3.3: SW = PLL"),
)


def _f4_links(apb1_brr: int, apb2_brr: int) -> tuple:
    """Nucleo-64: USART2 on PA2/PA3 (ST-LINK VCP, UM1724 6.8), USART1 on PA9/PA10, AF7."""
    return (
        ("USART2", 0x4000_4400, "APB1", apb1_brr, (F4_RCC + 0x40, 17), (("PA2", 7), ("PA3", 7))),
        ("USART1", 0x4001_1000, "APB2", apb2_brr, (F4_RCC + 0x44, 4), (("PA9", 7), ("PA10", 7))),
    )


def _h7_links(apb1_brr: int) -> tuple:
    """Nucleo-144: USART3 on PD8/PD9 (ST-LINK VCP, UM2407 6.9), USART2 on PD5/PD6, AF7."""
    return (
        ("USART3", 0x4000_4800, "APB1", apb1_brr, (H7_RCC + 0xE8, 18), (("PD8", 7), ("PD9", 7))),
        ("USART2", 0x4000_4400, "APB1", apb1_brr, (H7_RCC + 0xE8, 17), (("PD5", 7), ("PD6", 7))),
    )


L4_ACR = 0x4002_2000
L4_PLL = L4_RCC + 0x0C
_L4_80 = (
    (L4_PLL, 0, 2, 2, "RM0394 6.4.4: PLLSRC = HSI16"),
    (L4_PLL, 4, 3, 0, "RM0394 6.4.4: PLLM = 1 (16 MHz VCO input, 4-16)"),
    (L4_PLL, 8, 7, 10, "RM0394 6.4.4: PLLN = 10, VCO 160 MHz (64-344)"),
    (L4_PLL, 24, 3, 1, "RM0394 6.4.4: PLLREN, PLLR = 2 -> 80 MHz"),
    (L4_ACR, 0, 3, 4, "RM0394 3.3.3 table 9: 4 WS at 64-80 MHz, range 1"),
    (L4_ACR, 8, 3, 7, "RM0394 3.7.1: PRFTEN, ICEN, DCEN"),
    (L4_RCC + 0x08, 0, 2, 3, "RM0394 6.4.3: SW = PLL"),
)

U5_PLL1, U5_DIVR = U5_RCC + 0x28, U5_RCC + 0x34
_U5_160 = (
    (U5_RCC + 0x94, 2, 1, 1, "RM0456 11.8.28: RCC_AHB3ENR.PWREN"),
    (U5_PWR + 0x0C, 16, 2, 3, "RM0456 10.10.4: PWR_VOSR.VOS = 11, range 1 above 110 MHz"),
    (U5_PWR + 0x0C, 18, 1, 1, "RM0456 10.5.4 / 10.10.4: BOOSTEN above 55 MHz"),
    (U5_PLL1, 0, 2, 2, "RM0456 11.8.11: PLL1SRC = HSI16"),
    (U5_PLL1, 2, 2, 3, "RM0456 11.8.11: PLL1RGE = 8-16 MHz input"),
    (U5_PLL1, 8, 4, 0, "RM0456 11.8.11: PLL1M = 1"),
    (U5_PLL1, 12, 4, 0, "RM0456 11.8.11: PLL1MBOOST = /1 (EPOD input 16 MHz)"),
    (U5_PLL1, 18, 1, 1, "RM0456 11.8.11: PLL1REN"),
    (U5_DIVR, 0, 9, 19, "RM0456 11.8.14: PLL1N = 20, VCO 320 MHz (128-544)"),
    (U5_DIVR, 24, 7, 1, "RM0456 11.8.14: PLL1R = 2 -> 160 MHz"),
    (0x4002_2000, 0, 4, 4, "RM0456 7.3.3 table 54: 4 WS at 128-160 MHz, range 1"),
    (0x4002_2000, 8, 1, 1, "RM0456 7.9.1: PRFTEN"),
    (U5_RCC + 0x1C, 0, 2, 3, "RM0456 11.8.8: RCC_CFGR1.SW = PLL1"),
)

PARTS: dict[str, Expect] = {
    "STM32F405RG": Expect(
        None, 0, 168 * MHZ, _F405_CLOCK,
        (("USART1", 0x4001_1000, "APB2", 729, (F4_RCC + 0x44, 4), (("PA9", 7), ("PA10", 7))),
         ("USART2", 0x4000_4400, "APB1", 365, (F4_RCC + 0x40, 17), (("PA2", 7), ("PA3", 7)))),
    ),
    "STM32F401RE": Expect("nucleo-f401re", 0, 84 * MHZ, _F401_CLOCK, _f4_links(365, 729)),
    "STM32F401RB": Expect(None, 0, 84 * MHZ, _F401_CLOCK, _f4_links(365, 729)),
    "STM32F446RE": Expect(
        "nucleo-f446re", 0, 180 * MHZ,
        (
            (F4_PLL, 0, 6, 8, "RM0390 6.3.2: PLLM = 8, 2 MHz VCO input"),
            (F4_PLL, 6, 9, 180, "RM0390 6.3.2: PLLN = 180, VCO 360 MHz"),
            (F4_PLL, 16, 2, 0, "RM0390 6.3.2: PLLP = 2 -> 180 MHz"),
            (F4_PWR, 16, 2, 3, "RM0390 5.1.4 / 5.4.1: ODEN + ODSWEN, over-drive above 168 MHz"),
            (F4_ACR, 0, 4, 5, "RM0390 3.4 table 5: 5 WS at 150-180 MHz, 2.7-3.6 V"),
            (F4_CFGR, 10, 3, 5, "RM0390 6.3.3: PPRE1 = /4 (APB1 45 MHz max)"),
            (F4_CFGR, 13, 3, 4, "RM0390 6.3.3: PPRE2 = /2 (APB2 90 MHz max)"),
            (F4_CFGR, 0, 2, 2, "RM0390 6.3.3: SW = PLL"),
        ),
        _f4_links(391, 781),  # 45 MHz / 115200 = 390.6, 90 MHz: 781.25
    ),
    "STM32F767ZI": Expect(
        "nucleo-f767zi", 8 * MHZ, 216 * MHZ,
        (
            (F4_RCC, 16, 3, 0b101, "RM0410 5.3.1: HSEON + HSEBYP (ST-LINK MCO, UM1974 6.7.1)"),
            (F4_PLL, 0, 6, 4, "RM0410 5.3.2: PLLM = 4, 2 MHz VCO input"),
            (F4_PLL, 6, 9, 216, "RM0410 5.3.2: PLLN = 216, VCO 432 MHz"),
            (F4_PLL, 16, 2, 0, "RM0410 5.3.2: PLLP = 2 -> 216 MHz"),
            (F4_PLL, 22, 1, 1, "RM0410 5.3.2: PLLSRC = HSE"),
            (F4_PWR, 16, 2, 3, "RM0410 4.1.4 / 4.4.1: ODEN + ODSWEN above 180 MHz"),
            (F4_ACR, 0, 4, 7, "RM0410 3.3.2 table 7: 7 WS at 210-216 MHz, 2.7-3.6 V"),
            (F4_ACR, 8, 2, 3, "RM0410 3.7.1: PRFTEN, ARTEN"),
            (F4_CFGR, 10, 3, 5, "RM0410 5.3.3: PPRE1 = /4 (APB1 54 MHz max)"),
            (F4_CFGR, 13, 3, 4, "RM0410 5.3.3: PPRE2 = /2 (APB2 108 MHz max)"),
            (F4_CFGR, 0, 2, 2, "RM0410 5.3.3: SW = PLL"),
            (0xE000_ED14, 16, 2, 3, "PM0253 4.3.7: CCR.DC + CCR.IC, M7 caches on"),
        ),
        (("USART3", 0x4000_4800, "APB1", 469, (F4_RCC + 0x40, 18), (("PD8", 7), ("PD9", 7))),
         ("USART2", 0x4000_4400, "APB1", 469, (F4_RCC + 0x40, 17), (("PD5", 7), ("PD6", 7)))),
    ),
    "STM32F746NG": Expect(
        "stm32f746g-disco", 25 * MHZ, 216 * MHZ,
        (
            (F4_RCC, 16, 3, 0b001, "RM0385 5.3.1: HSEON, no bypass (UM1907: 25 MHz crystal X2)"),
            (F4_PLL, 0, 6, 25, "RM0385 5.3.2: PLLM = 25, 1 MHz VCO input (1-2 MHz)"),
            (F4_PLL, 6, 9, 432, "RM0385 5.3.2: PLLN = 432, VCO 432 MHz"),
            (F4_PLL, 16, 2, 0, "RM0385 5.3.2: PLLP = 2 -> 216 MHz"),
            (F4_PLL, 22, 1, 1, "RM0385 5.3.2: PLLSRC = HSE"),
            (F4_PWR, 16, 2, 3, "RM0385 4.1.4 / 4.4.1: ODEN + ODSWEN above 180 MHz"),
            (F4_ACR, 0, 4, 7, "RM0385 3.3.2: 7 WS at 210-216 MHz, 2.7-3.6 V"),
            (F4_CFGR, 10, 3, 5, "RM0385 5.3.3: PPRE1 = /4 (APB1 54 MHz max)"),
            (F4_CFGR, 13, 3, 4, "RM0385 5.3.3: PPRE2 = /2 (APB2 108 MHz max)"),
            (F4_CFGR, 0, 2, 2, "RM0385 5.3.3: SW = PLL"),
            (0xE000_ED14, 16, 2, 3, "PM0253 4.3.7: CCR.DC + CCR.IC, M7 caches on"),
        ),
        (("USART1", 0x4001_1000, "APB2", 938, (F4_RCC + 0x44, 4), (("PA9", 7), ("PB7", 7))),
         ("USART6", 0x4001_1400, "APB2", 938, (F4_RCC + 0x44, 5), (("PC6", 8), ("PC7", 8)))),
    ),
    "STM32H743ZI": Expect(
        "nucleo-h743zi", 8 * MHZ, 480 * MHZ,
        (
            (H7_PWR + 0x0C, 0, 3, 0b010, "RM0433 6.8.4: PWR_CR3 LDOEN, no bypass, SCUEN cleared"),
            (H7_PWR + 0x18, 14, 2, 3, "RM0433 6.8.6: VOS1 before over-drive"),
            (0x5800_042C, 0, 1, 1, "RM0433 12.3.10: SYSCFG_PWRCR.ODEN -> VOS0 for 480 MHz"),
            (H7_RCC + 0xF4, 1, 1, 1, "RM0433 8.7.48: SYSCFGEN"),
            (H7_RCC, 16, 3, 0b101, "RM0433 8.7.2: HSEON + HSEBYP (UM2407 6.8.1 ST-LINK MCO)"),
            (H7_RCC + 0x28, 0, 2, 2, "RM0433 8.7.11: PLLSRC = HSE"),
            (H7_RCC + 0x28, 4, 6, 4, "RM0433 8.7.11: DIVM1 = 4, 2 MHz reference"),
            (H7_RCC + 0x2C, 1, 3, 0b010, "RM0433 8.7.12: PLL1RGE = 2-4 MHz, wide VCO"),
            (H7_RCC + 0x2C, 16, 1, 1, "RM0433 8.7.12: DIVP1EN"),
            (H7_RCC + 0x30, 0, 9, 479, "RM0433 8.7.13: DIVN1 = 480, VCO 960 MHz"),
            (H7_RCC + 0x30, 9, 7, 1, "RM0433 8.7.13: DIVP1 = 2 -> 480 MHz"),
            (0x5200_2000, 0, 4, 4, "RM0433 4.3.8 table 17: 4 WS at 225-240 MHz AXI"),
            (0x5200_2000, 4, 2, 2, "RM0433 4.3.8 table 17: WRHIGHFREQ = 2"),
            (H7_RCC + 0x18, 0, 4, 8, "RM0433 8.7.8: HPRE = /2, AXI 240 MHz"),
            (H7_RCC + 0x18, 4, 3, 4, "RM0433 8.7.8: D1PPRE = /2, APB3 120 MHz"),
            (H7_RCC + 0x18, 8, 4, 0, "RM0433 8.7.8: D1CPRE = /1"),
            (H7_RCC + 0x1C, 4, 3, 4, "RM0433 8.7.9: D2PPRE1 = /2, APB1 120 MHz"),
            (H7_RCC + 0x1C, 8, 3, 4, "RM0433 8.7.9: D2PPRE2 = /2, APB2 120 MHz"),
            (H7_RCC + 0x20, 4, 3, 4, "RM0433 8.7.10: D3PPRE = /2, APB4 120 MHz"),
            (H7_RCC + 0x10, 0, 3, 3, "RM0433 8.7.7: SW = PLL1"),
            (0xE000_ED14, 16, 2, 3, "PM0253 4.3.7: CCR.DC + CCR.IC, M7 caches on"),
        ),
        _h7_links(1042),  # 120 MHz / 115200 = 1041.7
    ),
    "STM32H723ZG": Expect(
        "nucleo-h723zg", 8 * MHZ, 550 * MHZ,
        (
            (H7_PWR + 0x0C, 1, 1, 1, "RM0468 6.8.4: PWR_CR3.LDOEN"),
            (H7_PWR + 0x18, 14, 2, 0, "RM0468 6.8.6: VOS0 (0b00 on H72x/H73x)"),
            (H7_RCC, 16, 3, 0b101, "RM0468 7.7.2: HSEON + HSEBYP"),
            (H7_RCC + 0x28, 4, 6, 4, "RM0468 7.7.11: DIVM1 = 4, 2 MHz reference"),
            (H7_RCC + 0x30, 0, 9, 274, "RM0468 7.7.13: DIVN1 = 275, VCO 550 MHz"),
            (H7_RCC + 0x30, 9, 7, 0, "RM0468 7.7.13: DIVP1 = 1 -> 550 MHz"),
            (0x5200_2000, 0, 4, 3, "RM0468 4.3.8 table 16: 3 WS at 210-275 MHz AXI, VOS0"),
            (0x5200_2000, 4, 2, 3, "RM0468 4.3.8 table 16: WRHIGHFREQ = 3"),
            (H7_RCC + 0x18, 0, 4, 8, "RM0468 7.7.8: HPRE = /2, AXI 275 MHz"),
            (H7_RCC + 0x1C, 4, 3, 4, "RM0468 7.7.9: D2PPRE1 = /2, APB1 137.5 MHz"),
            (H7_RCC + 0x10, 0, 3, 3, "RM0468 7.7.7: SW = PLL1"),
            (0xE000_ED14, 16, 2, 3, "PM0253 4.3.7: CCR.DC + CCR.IC"),
        ),
        _h7_links(1194),  # 137.5 MHz / 115200 = 1193.6
    ),
    # NUCLEO-H7A3ZI-Q: STM32CubeH7 Projects/NUCLEO-H7A3ZI-Q/Templates SystemClock_Config (direct
    # SMPS, VOS0, HSE bypass 8 MHz, PLLM 4, PLLN 280, PLLP 2, APB /2, FLASH_LATENCY_6).
    # RM0455's own text is not reachable here (2026-11-27: the search corpora docs / pages / code
    # / issues and GitHub file search hold no copy of RM0455, only its title and links), so its
    # section numbers are given only where a third party quotes them with the revision:
    # "RM0455 Rev 3 6.8.6" for PWR_SRDCR.VOS (stm32h7xx-hal src/pwr.rs, commit 0007f30) and
    # "RM0455 Rev 10 Table 16. FLASH recommended number of wait states and programming delay"
    # with its VOS0-VOS3 rows (embassy-stm32 src/rcc/h7.rs, commit 2db4d01; stm32h7xx-hal
    # src/rcc). Every other row names its RM0455 register, with "section not read"; its
    # address, offset and field are those of ST's stm32h7a3xxq.h (cmsis_device_h7 13ba9da).
    "STM32H7A3ZI": Expect(
        "nucleo-h7a3zi-q", 8 * MHZ, 280 * MHZ,
        (
            (H7_PWR + 0x0C, 0, 6, 0b000100,
             "RM0455 PWR_CR3 (section not read): SMPSEN only, LDOEN cleared (HAL "
             "PWR_DIRECT_SMPS_SUPPLY; UM2408 table 10: the board's VCORE comes from the direct "
             "SMPS)"),
            (H7_PWR + 0x18, 14, 2, 0b11,
             "RM0455 Rev 3 6.8.6 PWR_SRDCR (as stm32h7xx-hal quotes it): VOS = 0b11 is VOS0"),
            (H7_RCC, 16, 3, 0b101,
             "RM0455 RCC_CR (section not read): HSEON + HSEBYP (UM2408: STLINK-V3E MCO)"),
            (H7_RCC + 0x28, 0, 2, 2, "RM0455 RCC_PLLCKSELR (section not read): PLLSRC = HSE"),
            (H7_RCC + 0x28, 4, 6, 4,
             "RM0455 RCC_PLLCKSELR (section not read): DIVM1 = 4, 2 MHz reference"),
            (H7_RCC + 0x2C, 1, 3, 0b010,
             "RM0455 RCC_PLLCFGR (section not read): PLL1RGE = 2-4 MHz, wide VCO"),
            (H7_RCC + 0x2C, 16, 1, 1, "RM0455 RCC_PLLCFGR (section not read): DIVP1EN"),
            (H7_RCC + 0x30, 0, 9, 279,
             "RM0455 RCC_PLL1DIVR (section not read): DIVN1 = 280, VCO 560 MHz, the top of "
             "DS13195 Rev 8 Table 55's wide VCO range (128-560 MHz, input 2-16 MHz)"),
            (H7_RCC + 0x30, 9, 7, 1,
             "RM0455 RCC_PLL1DIVR (section not read): DIVP1 = 2 -> 280 MHz"),
            (0x5200_2000, 0, 4, 6,
             "RM0455 Rev 10 Table 16 (as embassy-stm32 quotes it): 6 WS at 253-280 MHz AXI, "
             "VOS0"),
            (0x5200_2000, 4, 2, 3, "RM0455 Rev 10 Table 16 (as quoted): WRHIGHFREQ = 3"),
            (H7_RCC + 0x18, 0, 4, 0,
             "RM0455 RCC_CDCFGR1 (section not read): HPRE = /1, AXI 280 MHz (DS13195 Rev 8 "
             "Table 23: 280 MHz at VOS0)"),
            (H7_RCC + 0x18, 4, 3, 4,
             "RM0455 RCC_CDCFGR1 (section not read): CDPPRE = /2, APB3 140 MHz"),
            (H7_RCC + 0x18, 8, 4, 0,
             "RM0455 RCC_CDCFGR1 (section not read): CDCPRE = /1, CPU 280 MHz"),
            (H7_RCC + 0x1C, 4, 3, 4,
             "RM0455 RCC_CDCFGR2 (section not read): CDPPRE1 = /2, APB1 140 MHz (DS13195 Rev 8 "
             "Table 23: APB 140 MHz at VOS0)"),
            (H7_RCC + 0x1C, 8, 3, 4,
             "RM0455 RCC_CDCFGR2 (section not read): CDPPRE2 = /2, APB2 140 MHz"),
            (H7_RCC + 0x20, 4, 3, 4,
             "RM0455 RCC_SRDCFGR (section not read): SRDPPRE = /2, APB4 140 MHz"),
            (H7_RCC + 0x10, 0, 3, 3, "RM0455 RCC_CFGR (section not read): SW = PLL1"),
            (0xE000_ED14, 16, 2, 3, "PM0253 4.3.7: CCR.DC + CCR.IC, M7 caches on"),
        ),
        _h7_links(1215),  # 140 MHz / 115200 = 1215.3
    ),
    "STM32L4R5ZI": Expect(
        "nucleo-l4r5zi", 0, 120 * MHZ,
        (
            (L4_PLL, 0, 2, 2, "RM0432 6.4.4: PLLSRC = HSI16"),
            (L4_PLL, 4, 4, 0, "RM0432 6.4.4: PLLM = 1"),
            (L4_PLL, 8, 7, 15, "RM0432 6.4.4: PLLN = 15, VCO 240 MHz"),
            (L4_PLL, 24, 3, 1, "RM0432 6.4.4: PLLREN, PLLR = 2 -> 120 MHz"),
            (L4_PWR + 0x80, 8, 1, 0, "RM0432 5.4.6: PWR_CR5.R1MODE = 0, range 1 boost"),
            (L4_PWR + 0x04, 9, 1, 1, "RM0432 5.4.2: PWR_CR2.IOSV, VDDIO2 for port G (LPUART1)"),
            (L4_ACR, 0, 4, 5, "RM0432 3.3.3 table 12: 5 WS at 100-120 MHz, boost"),
            (L4_RCC + 0x08, 4, 4, 0, "RM0432 6.4.3: HPRE back to /1 after the switch"),
            (L4_RCC + 0x08, 0, 2, 3, "RM0432 6.4.3: SW = PLL"),
        ),
        (("LPUART1", 0x4000_8000, "APB1", 266667, (L4_RCC + 0x5C, 0), (("PG7", 8), ("PG8", 8))),
         ("USART2", 0x4000_4400, "APB1", 1042, (L4_RCC + 0x58, 17), (("PD5", 7), ("PD6", 7)))),
    ),
    "STM32L452RE": Expect(
        "nucleo-l452re", 0, 80 * MHZ, _L4_80,
        (("USART2", 0x4000_4400, "APB1", 694, (L4_RCC + 0x58, 17), (("PA2", 7), ("PA3", 7))),
         ("USART1", 0x4001_3800, "APB2", 694, (L4_RCC + 0x60, 14), (("PA9", 7), ("PA10", 7)))),
    ),
    "STM32L433RC": Expect(
        "nucleo-l433rc-p", 0, 80 * MHZ, _L4_80,
        (("LPUART1", 0x4000_8000, "APB1", 177778, (L4_RCC + 0x5C, 0), (("PA2", 8), ("PA3", 8))),
         ("USART1", 0x4001_3800, "APB2", 694, (L4_RCC + 0x60, 14), (("PA9", 7), ("PA10", 7)))),
    ),
    "STM32L412KB": Expect(
        "nucleo-l412kb", 0, 80 * MHZ, _L4_80,
        (("USART2", 0x4000_4400, "APB1", 694, (L4_RCC + 0x58, 17), (("PA2", 7), ("PA15", 3))),
         ("USART1", 0x4001_3800, "APB2", 694, (L4_RCC + 0x60, 14), (("PA9", 7), ("PA10", 7)))),
    ),
    "STM32G071RB": Expect(
        "nucleo-g071rb", 0, 64 * MHZ,
        (
            (L4_PLL, 0, 2, 2, "RM0444 5.4.4: PLLSRC = HSI16"),
            (L4_PLL, 4, 3, 0, "RM0444 5.4.4: PLLM = 1"),
            (L4_PLL, 8, 7, 8, "RM0444 5.4.4: PLLN = 8, VCO 128 MHz"),
            (L4_PLL, 28, 4, 0b0011, "RM0444 5.4.4: PLLREN, PLLR = 2 -> 64 MHz"),
            (L4_ACR, 0, 3, 2, "RM0444 3.3.4 table 8: 2 WS at 48-64 MHz, range 1"),
            (L4_ACR, 8, 2, 3, "RM0444 3.7.1: PRFTEN, ICEN"),
            (L4_RCC + 0x08, 0, 3, 2, "RM0444 5.4.3: SW = PLLRCLK"),
        ),
        (("USART2", 0x4000_4400, "APB1", 556, (L4_RCC + 0x3C, 17), (("PA2", 1), ("PA3", 1))),
         ("USART1", 0x4001_3800, "APB1", 556, (L4_RCC + 0x40, 14), (("PA9", 1), ("PA10", 1)))),
    ),
    "STM32F411RE": Expect(
        "nucleo-f411re", 0, 100 * MHZ,
        (
            (F4_PLL, 0, 6, 8, "RM0383 6.3.2: PLLM = 8, 2 MHz VCO input"),
            (F4_PLL, 6, 9, 100, "RM0383 6.3.2: PLLN = 100, VCO 200 MHz (100-432)"),
            (F4_PLL, 16, 2, 0, "RM0383 6.3.2: PLLP = 2 -> 100 MHz"),
            (F4_PWR, 14, 2, 3, "RM0383 5.4.1: VOS = scale 1 above 84 MHz"),
            (F4_ACR, 0, 4, 3, "RM0383 3.4 table 5: 3 WS at 90-100 MHz, 2.7-3.6 V"),
            (F4_CFGR, 10, 3, 4, "RM0383 6.3.3: PPRE1 = /2 (APB1 50 MHz max)"),
            (F4_CFGR, 13, 3, 0, "RM0383 6.3.3: PPRE2 = /1 (APB2 100 MHz)"),
            (F4_CFGR, 0, 2, 2, "RM0383 6.3.3: SW = PLL"),
        ),
        _f4_links(434, 868),  # 50 MHz / 115200 = 434.0, 100 MHz: 868.1
    ),
    "STM32F746ZG": Expect(
        "nucleo-f746zg", 8 * MHZ, 216 * MHZ,
        (
            (F4_RCC, 16, 3, 0b101, "RM0385 5.3.1: HSEON + HSEBYP (ST-LINK MCO, UM1974 6.7.1)"),
            (F4_PLL, 0, 6, 4, "RM0385 5.3.2: PLLM = 4, 2 MHz VCO input"),
            (F4_PLL, 6, 9, 216, "RM0385 5.3.2: PLLN = 216, VCO 432 MHz"),
            (F4_PLL, 22, 1, 1, "RM0385 5.3.2: PLLSRC = HSE"),
            (F4_PWR, 16, 2, 3, "RM0385 4.1.4 / 4.4.1: ODEN + ODSWEN above 180 MHz"),
            (F4_ACR, 0, 4, 7, "RM0385 3.3.2: 7 WS at 210-216 MHz, 2.7-3.6 V"),
            (F4_CFGR, 10, 3, 5, "RM0385 5.3.3: PPRE1 = /4 (APB1 54 MHz max)"),
            (F4_CFGR, 13, 3, 4, "RM0385 5.3.3: PPRE2 = /2 (APB2 108 MHz max)"),
            (F4_CFGR, 0, 2, 2, "RM0385 5.3.3: SW = PLL"),
            (0xE000_ED14, 16, 2, 3, "PM0253 4.3.7: CCR.DC + CCR.IC, M7 caches on"),
        ),
        (("USART3", 0x4000_4800, "APB1", 469, (F4_RCC + 0x40, 18), (("PD8", 7), ("PD9", 7))),
         ("USART2", 0x4000_4400, "APB1", 469, (F4_RCC + 0x40, 17), (("PD5", 7), ("PD6", 7)))),
    ),
    "STM32L476RG": Expect(
        "nucleo-l476rg", 0, 80 * MHZ,
        (
            (L4_PLL, 0, 2, 2, "RM0351 6.4.4: PLLSRC = HSI16"),
            (L4_PLL, 4, 3, 0, "RM0351 6.4.4: PLLM = 1 (16 MHz VCO input, 4-16)"),
            (L4_PLL, 8, 7, 10, "RM0351 6.4.4: PLLN = 10, VCO 160 MHz (64-344)"),
            (L4_PLL, 24, 3, 1, "RM0351 6.4.4: PLLREN, PLLR = 2 -> 80 MHz"),
            (L4_ACR, 0, 3, 4, "RM0351 3.3.3 table 11: 4 WS at 64-80 MHz, range 1"),
            (L4_RCC + 0x08, 0, 2, 3, "RM0351 6.4.3: SW = PLL"),
        ),
        (("USART2", 0x4000_4400, "APB1", 694, (L4_RCC + 0x58, 17), (("PA2", 7), ("PA3", 7))),
         ("USART1", 0x4001_3800, "APB2", 694, (L4_RCC + 0x60, 14), (("PA9", 7), ("PA10", 7)))),
    ),
    "STM32G474RE": Expect(
        "nucleo-g474re", 24 * MHZ, 170 * MHZ,
        (
            (L4_RCC, 16, 3, 0b001, "RM0440 7.4.1: HSEON, no bypass (UM2505: 24 MHz crystal X3)"),
            (L4_PLL, 0, 2, 3, "RM0440 7.4.4: PLLSRC = HSE"),
            (L4_PLL, 4, 4, 5, "RM0440 7.4.4: PLLM = 6, 4 MHz VCO input (2.66-16)"),
            (L4_PLL, 8, 7, 85, "RM0440 7.4.4: PLLN = 85, VCO 340 MHz (96-344)"),
            (L4_PLL, 24, 3, 1, "RM0440 7.4.4: PLLREN, PLLR = 2 -> 170 MHz"),
            (L4_PWR + 0x80, 8, 1, 0, "RM0440 6.4.6: PWR_CR5.R1MODE = 0, range 1 boost"),
            (L4_ACR, 0, 4, 4, "RM0440 5.3.3 table 29: 4 WS at 136-170 MHz, range 1 boost"),
            (L4_ACR, 8, 3, 7, "RM0440 5.7.1: PRFTEN, ICEN, DCEN"),
            (L4_RCC + 0x08, 4, 4, 0, "RM0440 7.4.3: HPRE back to /1 after the switch"),
            (L4_RCC + 0x08, 0, 2, 3, "RM0440 7.4.3: SW = PLL"),
        ),
        # LPUART1: 256 x 170 MHz / 115200 = 377777.8; USART1: 170 MHz / 115200 = 1475.7
        (("LPUART1", 0x4000_8000, "APB1", 377778, (L4_RCC + 0x5C, 0), (("PA2", 12), ("PA3", 12))),
         ("USART1", 0x4001_3800, "APB2", 1476, (L4_RCC + 0x60, 14), (("PC4", 7), ("PC5", 7)))),
    ),
    "STM32L552ZE": Expect(
        "nucleo-l552ze-q", 0, 110 * MHZ,
        (
            (L4_PLL, 0, 2, 2, "RM0438 9.8.4: PLLSRC = HSI16"),
            (L4_PLL, 4, 4, 3, "RM0438 9.8.4: PLLM = 4, 4 MHz VCO input (4-16)"),
            (L4_PLL, 8, 7, 55, "RM0438 9.8.4: PLLN = 55, VCO 220 MHz (64-344)"),
            (L4_PLL, 24, 3, 1, "RM0438 9.8.4: PLLREN, PLLR = 2 -> 110 MHz"),
            (L4_PWR, 9, 2, 0, "RM0438 8.6.1: PWR_CR1.VOS = 00, range 0 for 110 MHz"),
            (L4_PWR + 0x04, 9, 1, 1, "RM0438 8.6.2: PWR_CR2.IOSV, VDDIO2 for port G (LPUART1)"),
            (L4_ACR, 0, 4, 5, "RM0438 6.3.3 table 37: 5 WS at 100-110 MHz, range 0"),
            (L4_RCC + 0x08, 0, 2, 3, "RM0438 9.8.3: SW = PLL"),
        ),
        # LPUART1: 256 x 110 MHz / 115200 = 244444.4; USART2: 110 MHz / 115200 = 954.9
        (("LPUART1", 0x4000_8000, "APB1", 244444, (L4_RCC + 0x5C, 0), (("PG7", 8), ("PG8", 8))),
         ("USART2", 0x4000_4400, "APB1", 955, (L4_RCC + 0x58, 17), (("PD5", 7), ("PD6", 7)))),
    ),
    "STM32U575ZI": Expect(
        "nucleo-u575zi-q", 0, 160 * MHZ,
        _U5_160,
        (("USART1", 0x4001_3800, "APB2", 1389, (U5_RCC + 0xA4, 14), (("PA9", 7), ("PA10", 7))),
         ("USART2", 0x4000_4400, "APB1", 1389, (U5_RCC + 0x9C, 17), (("PD5", 7), ("PD6", 7)))),
    ),
    "STM32U585AI": Expect(
        None, 0, 160 * MHZ,
        _U5_160,
        (("USART1", 0x4001_3800, "APB2", 1389, (U5_RCC + 0xA4, 14), (("PA9", 7), ("PA10", 7))),
         ("USART2", 0x4000_4400, "APB1", 1389, (U5_RCC + 0x9C, 17), (("PA2", 7), ("PA3", 7)))),
    ),
}  # fmt: skip

#: Per family: GPIO port A base and the RCC register/bit base of the GPIO clock enables
#: (RM0090 2.3 / 6.3.10, RM0433 2.3.2 / 8.7.43, RM0351 2.2.2 / 6.4.17, RM0444 2.2 / 5.4.13).
GPIO = {
    "F4": (0x4002_0000, F4_RCC + 0x30),
    "F7": (0x4002_0000, F4_RCC + 0x30),
    "H7": (0x5802_0000, H7_RCC + 0xE0),
    "H7AB": (0x5802_0000, H7_RCC + 0xE0),  # RM0455: the H743's GPIO map and RCC_AHB4ENR
    "L4": (0x4800_0000, L4_RCC + 0x4C),
    "G0": (0x5000_0000, L4_RCC + 0x34),
    "G4": (0x4800_0000, L4_RCC + 0x4C),  # RM0440 2.2.2 / 7.4.15
    "L5": (0x4202_0000, L4_RCC + 0x4C),  # RM0438 2.3.2 / 9.8.15 (non-secure)
    "U5": (0x4202_0000, U5_RCC + 0x8C),  # RM0456 2.3.2 / 11.8.29 (non-secure)
}
#: BRR offset per USART layout (RM0090 30.6.3 SR/DR layout: 0x08; RM0410 34.8.4 and the newer
#: USARTs: 0x0C).
BRR_OFFSET = {"F4": 0x08, "F7": 0x0C, "H7": 0x0C, "H7AB": 0x0C, "L4": 0x0C, "G0": 0x0C,
              "G4": 0x0C, "L5": 0x0C, "U5": 0x0C}  # fmt: skip

# ------------------------------------------------------------------ clock start-up timeouts ---
#: Per family: the oscillator running from reset, the clock every wait before the switch polls
#: at (RM0090 6.2.2 HSI 16 MHz; RM0410 5.2.2 HSI 16 MHz; RM0433 8.5.2 HSI 64 MHz; RM0351 6.2.3
#: MSI 4 MHz; RM0444 5.2 HSISYS 16 MHz).
RESET_HZ = {
    "F4": 16 * MHZ,
    "F7": 16 * MHZ,
    "H7": 64 * MHZ,
    "H7AB": 64 * MHZ,
    "L4": 4 * MHZ,
    "G0": 16 * MHZ,
    "G4": 16 * MHZ,
    "L5": 4 * MHZ,
    "U5": 4 * MHZ,
}  # RM0440 7.2.2, RM0438 9.2.3, RM0456 11.4.1 fmt: skip
#: Per family: RCC_CR (HSEON bit 16, HSERDY 17, HSEBYP 18 in all of them: RM0090 6.3.1,
#: RM0433 8.7.2, RM0351 6.4.1, RM0444 5.4.1) and the PLL source field reading "internal
#: oscillator" ``(address, shift, width, value, source)``.
HSE_CR = {"F4": F4_RCC, "F7": F4_RCC, "H7": H7_RCC, "H7AB": H7_RCC, "L4": L4_RCC, "G0": L4_RCC,
          "G4": L4_RCC, "L5": L4_RCC, "U5": U5_RCC}  # fmt: skip
PLL_INTERNAL = {
    "F4": (F4_RCC + 0x04, 22, 1, 0, "RM0090 6.3.2: PLLSRC = 0, HSI"),
    "F7": (F4_RCC + 0x04, 22, 1, 0, "RM0410 5.3.2: PLLSRC = 0, HSI"),
    "H7": (H7_RCC + 0x28, 0, 2, 0, "RM0433 8.7.11: PLLSRC = 0b00, HSI"),
    "H7AB": (H7_RCC + 0x28, 0, 2, 0, "RM0455 RCC_PLLCKSELR: PLLSRC = 0b00, HSI"),
    "L4": (L4_RCC + 0x0C, 0, 2, 2, "RM0351 6.4.4: PLLSRC = 0b10, HSI16"),
    "G0": (L4_RCC + 0x0C, 0, 2, 2, "RM0444 5.4.4: PLLSRC = 0b10, HSI16"),
    "G4": (L4_RCC + 0x0C, 0, 2, 2, "RM0440 7.4.4: PLLSRC = 0b10, HSI16"),
    "L5": (L4_RCC + 0x0C, 0, 2, 2, "RM0438 9.8.4: PLLSRC = 0b10, HSI16"),
    "U5": (U5_RCC + 0x28, 0, 2, 2, "RM0456 11.8.11: PLL1SRC = 0b10, HSI16"),
}
#: One board per family traced with an HSE that never starts ``(part, board, HSE MHz, bypass)``:
#: the Nucleo-144 boards' own 8 MHz ST-LINK MCO (UM1974 6.7.1, UM2407 6.8.1); on the
#: Nucleo-64 boards the same MCO once SB16/SB50 are closed (UM1724 6.7.1).
HSE_BOARDS = {
    "F4": ("STM32F446RE", "nucleo-f446re", 8, True),
    "F7": ("STM32F767ZI", "nucleo-f767zi", 8, True),
    "H7": ("STM32H743ZI", "nucleo-h743zi", 8, True),
    "H7AB": ("STM32H7A3ZI", "nucleo-h7a3zi-q", 8, True),
    "L4": ("STM32L452RE", "nucleo-l452re", 8, True),
    "G0": ("STM32G071RB", "nucleo-g071rb", 8, True),
    "G4": ("STM32G474RE", "nucleo-g474re", 24, False),  # its own 24 MHz crystal (UM2505)
    "L5": ("STM32L552ZE", "nucleo-l552ze-q", 8, True),
    "U5": ("STM32U575ZI", "nucleo-u575zi-q", 8, True),
}
#: HSE start-up timeout (ST's STM32Cube HAL ``HSE_STARTUP_TIMEOUT``, 100 ms) and PLL lock
#: timeout (``PLL_TIMEOUT_VALUE``, 2 ms), and the fewest cycles a poll takes (a load, a
#: compare, two branches, a count).
HSE_TIMEOUT_S, PLL_TIMEOUT_S, POLL_CYCLES = 0.100, 0.002, 4
