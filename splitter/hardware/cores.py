"""Arm Cortex-M cores as objects: every fact splitter needs about a core, in one place.

As esptool's chip classes carry every constant of their chip, a :class:`Core` carries its gcc
flags, whether it has the Armv7E-M DSP extension (the int8 ``_dsp`` kernels run there, ``_plain``
elsewhere), its DWT cycle counter and L1 caches, the name the measured cost tables key it by
(``"M4F"``...), its modelled cycles per instruction with the document it comes from, and how
its instruction counts are measured (the emulator build). A family (``families.py``) names its
core; nothing else in the tree is keyed by core name.

Adding a core: one :class:`Core` in :data:`CORES`; then its family and the tables (CONTRIBUTING).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

from splitter.errors import BoardFileError


@dataclass(frozen=True)
class Core:
    """One Cortex-M core.

    ``name`` is gcc's ``-mcpu``; ``key`` the cost tables' name of it (``code_sizes.json`` and
    ``kernel_costs.json``); ``dsp``: the Armv7E-M DSP extension (SMLAD, SXTB16...); ``dwt``:
    the DWT cycle counter (not on ARMv6-M); ``caches``: L1 I/D caches the start-up enables;
    ``cpi`` the zero-wait cycles per instruction of the kernels' mix (``splitter.cost.cpi``),
    ``cpi_source`` its documents; ``measured_as``: the kernel-table build whose instruction
    counts this core's code has (its own build where the emulator runs it, else the build of
    the same ISA and kernels it shares), ``build_family`` the family whose flags compile its
    own build (empty when it has none of its own).
    """

    name: str
    key: str
    dsp: bool
    dwt: bool
    caches: bool
    cpi: float
    cpi_source: str
    measured_as: str
    build_family: str = ""

    @property
    def isa(self) -> str:
        """The int8 kernel variant its code uses: ``"dsp"`` or ``"plain"``."""
        return "dsp" if self.dsp else "plain"

    @property
    def build(self) -> str:
        """``"<key>.<isa>"``: the cost tables' build of code generated for this core."""
        return f"{self.key}.{self.isa}"

    def cpu_flags(self, fpu: str) -> str:
        """gcc flags: ``-mcpu=<core> -mthumb`` plus hard float with ``-mfpu`` when ``fpu``."""
        if fpu:
            return f"-mcpu={self.name} -mthumb -mfpu={fpu} -mfloat-abi=hard"
        return f"-mcpu={self.name} -mthumb -mfloat-abi=soft"


#: Every core a family uses, by gcc ``-mcpu``. CPI figures: ``splitter.cost.cpi``'s docstring
#: derives them; measurement: ``splitter.measure.kernel_table``'s docstring.
CORES: Mapping[str, Core] = MappingProxyType(
    {
        c.name: c
        for c in (
            Core(
                "cortex-m0plus", "M0+", dsp=False, dwt=False, caches=False, cpi=1.45,
                cpi_source="Arm DDI 0484C 3.3", measured_as="M0+.plain", build_family="G0",
            ),
            Core(
                "cortex-m4", "M4F", dsp=True, dwt=True, caches=False, cpi=1.39,
                cpi_source="Arm DDI 0439B 3.3.1, 7.2.3", measured_as="M4F.dsp",
                build_family="F4",
            ),
            Core(
                "cortex-m33", "M33", dsp=True, dwt=True, caches=False, cpi=1.16,
                cpi_source="Arm Cortex-M33 TRM (Arm 100230) 1.2: three-stage pipeline, DSP "
                "extension; Dhrystone M33/M4 1.50/1.25 DMIPS/MHz (Arm's product pages)",
                measured_as="M4F.dsp",
            ),
            Core(
                "cortex-m7", "M7", dsp=True, dwt=True, caches=True, cpi=0.81,
                cpi_source="Arm DDI 0489F 1.2; Dhrystone M7/M4 2.14/1.25 DMIPS/MHz",
                measured_as="M4F.dsp",
            ),
        )
    }
)  # fmt: skip


def core_for(name: str) -> Core:
    """The core gcc calls ``name``; BoardFileError naming the known ones (no fallback)."""
    core = CORES.get(name)
    if core is None:
        raise BoardFileError(
            f"unknown core '{name}'; known cores: {', '.join(CORES)} "
            "(add one to splitter/hardware/cores.py, see CONTRIBUTING.md)"
        )
    return core
