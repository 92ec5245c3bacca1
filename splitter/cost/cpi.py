"""Cycles per instruction of a real core: a *model*, written down with its sources.

The kernel table (:mod:`splitter.cost.kernels`) counts instructions on the emulator, which
runs one instruction per tick and models no pipeline, wait state or cache. A real STM32 takes

``cycles = instructions * CPI``, ``CPI = core_cpi + wait_states * miss_rate``

* ``core_cpi``: cycles per instruction of the core with zero-wait memory, for the instruction
  mix of the kernels (loads, multiply-accumulates, loop branches):

  - Cortex-M0+ (Arm DDI 0484C TRM, 3.3 "Instruction set summary" / ARMv6-M cycle table): ALU
    and single-cycle multiply 1 cycle, LDR/STR 2, branch taken 2, BL 3. The soft-float and
    int8 plain kernels are about 30 % loads and stores and 15 % taken branches:
    ``1 + 0.30 + 0.15 = 1.45``.
  - Cortex-M4 (Arm DDI 0439B TRM, 3.3.1 table 3-1): ALU, MUL, SMLAD 1 cycle, LDR 2 (1 when
    pipelined behind another load), STR 1, branch 1 + P (P = 1..3 pipeline refill), VFP
    VMLA/VFMA 3 (issue 1 when independent, Arm DDI 0439B 7.2.3 table 7-1). With about 30 %
    loads (half pipelined) and 12 % taken branches (refill 2): ``1 + 0.15 + 0.24 = 1.39``.
  - Cortex-M7 (Arm DDI 0489F TRM, 1.2 "dual-issue, six-stage superscalar pipeline"): two
    instructions per cycle when they pair (ALU + load, MAC + load), branch prediction. Arm's
    published Dhrystone ratio M7 / M4 is 2.14 / 1.25 DMIPS per MHz for the same program, so
    ``1.39 * 1.25 / 2.14 = 0.81``.

  - Cortex-M33 (Arm 100230 TRM 1.2: Armv8-M Mainline, three-stage pipeline, the DSP extension
    as the M4's): Arm's Dhrystone ratio M33 / M4 is 1.50 / 1.25 DMIPS per MHz, so
    ``1.39 * 1.25 / 1.50 = 1.16``. Its instruction counts are the ``M4F.dsp`` build's (same
    Thumb-2 + DSP kernels; ``benchmarks/m33_ipm.py`` measures the ``_dsp`` kernels built for
    the M33 on QEMU's mps2-an505 against the M4 build).

* ``wait_states``: the flash latency the firmware's clock set-up programs for the device's
  clock (:mod:`splitter.hardware.clocks`, from each family's reference-manual table).
* ``miss_rate``: fraction of instructions that stall on flash despite the family's
  accelerator, for kernel loops that fit its cache, plus weight reads:

  - F4 (RM0090 3.5.2 ART accelerator: 64 lines x 128 bit instruction cache, 8 lines data cache,
    prefetch) and F7 (RM0410 3.3.2 ART + the M7's 4-16 KiB L1 caches; ST AN4667 section 3): 0.05;
  - H7 (RM0433 2.1: 16 KiB L1 I-cache and D-cache on the AXI flash; ST AN4891 section 2): 0.02;
  - L4 (RM0351 3.3.4: prefetch, 1 KiB instruction cache, 256 B data cache): 0.05;
  - G0 (RM0444 3.3.4: prefetch and a 2 x 64-bit instruction cache, no data cache): 0.10;
  - G4 (RM0440 3.3.3: ART accelerator, 32 x 64-bit instruction cache, 8 x 64-bit data cache,
    as the L4's): 0.05;
  - L5 (RM0438 7.2: the 8 KiB ICACHE, left off by the firmware, so every miss waits): 0.10;
  - U5 (RM0456 7.3.3: prefetch; the 8 KiB ICACHE left off by the firmware): 0.10.

These figures are a model of a real core, derived from the documents above, not measured:
no real board has been benched for this table. Calibration against a real board
(``splitter calibrate`` over ``--port``) is what corrects them; the emulator needs none of it
(one instruction per tick, :data:`EMULATED_CPI`).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from splitter.errors import SplitterError
from splitter.ir import Device, Part

#: The emulator (QEMU ``-icount shift=0``): one instruction per nanosecond of virtual time.
EMULATED_INSTRUCTIONS_PER_S = 1e9
EMULATED_CPI = 1.0

# The figures live on the hardware objects: ``Core.cpi`` / ``Core.cpi_source``
# (splitter/hardware/cores.py) and ``Family.flash_miss_rate`` / ``Family.flash_miss_source``
# (each family's module of splitter/hardware/families/), with the sources above.


@dataclass(frozen=True)
class Cpi:
    """A device's modelled cycles per instruction and how it was obtained."""

    core: str
    family: str
    core_cpi: float
    wait_states: int
    miss_rate: float
    core_source: str
    miss_source: str

    @property
    def value(self) -> float:
        """``core_cpi + wait_states * miss_rate``."""
        return self.core_cpi + self.wait_states * self.miss_rate

    @property
    def label(self) -> str:
        """``"cortex-m4 CPI 1.39 + 5 flash WS x 0.05 = 1.64 (Arm DDI ...; F4 flash ...)"``."""
        return (
            f"{self.core} CPI {self.core_cpi:g} + {self.wait_states} flash WS x "
            f"{self.miss_rate:g} = {self.value:.3g} ({self.core_source}; {self.family} flash "
            f"{self.miss_source})"
        )


def wait_states(part: Part, clock_hz: float) -> int:
    """Flash wait states the firmware programs for ``part`` at ``clock_hz`` (clocks.py); at the
    family's highest clock when the clock set-up refuses that clock (an inline part faster than
    its family), 0 when it refuses that too."""
    from splitter.hardware.families import family_for

    family = family_for(part.family)
    top = round(part.clock_mhz * 1e6)
    for target in (round(clock_hz), min(top, family.clock.max_for(part.name))):
        try:
            return family.clock_tree(part.name, top, target, None).wait_states
        except SplitterError:
            continue
    return 0  # an inline part no clock set-up of its family reaches: no wait states modelled


@cache
def part_cpi(part: Part, clock_hz: float) -> Cpi:
    """The modelled CPI of ``part`` at ``clock_hz`` (module docstring)."""
    from splitter.hardware.families import family_for

    family = family_for(part.family)
    return Cpi(
        core=family.core.name,
        family=family.name,
        core_cpi=family.core.cpi,
        wait_states=wait_states(part, clock_hz),
        miss_rate=family.flash_miss_rate,
        core_source=family.core.cpi_source,
        miss_source=family.flash_miss_source,
    )


def device_cpi(device: Device) -> Cpi:
    """The modelled CPI of ``device`` (its part at its clock)."""
    return part_cpi(device.part, float(device.clock_hz))


def device_cpi_value(part: Part, clock_hz: float) -> float:
    """:attr:`Cpi.value` of :func:`part_cpi`."""
    return part_cpi(part, float(clock_hz)).value
