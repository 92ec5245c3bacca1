"""STM32 families as classes, one module per family (see :mod:`splitter.hardware.families.base`).

:data:`FAMILIES` maps the family name a catalog part gives (``family = "F4"``) to its one
instance; :func:`family_for` refuses an unknown name, there is no fallback family.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from splitter.errors import BoardFileError
from splitter.hardware.families.base import USART_LAYOUTS, Family, RegWrite, Usart
from splitter.hardware.families.stm32f4 import STM32F4
from splitter.hardware.families.stm32f7 import STM32F7
from splitter.hardware.families.stm32g0 import STM32G0
from splitter.hardware.families.stm32g4 import STM32G4
from splitter.hardware.families.stm32h7 import STM32H7
from splitter.hardware.families.stm32h7ab import STM32H7AB
from splitter.hardware.families.stm32l4 import STM32L4
from splitter.hardware.families.stm32l5 import STM32L5
from splitter.hardware.families.stm32u5 import STM32U5
from splitter.hardware.links.uart import MAX_BAUD_ERROR, STANDARD_BAUDS, Baud

__all__ = [
    "FAMILIES",
    "MAX_BAUD_ERROR",
    "STANDARD_BAUDS",
    "USART_LAYOUTS",
    "Baud",
    "Family",
    "RegWrite",
    "Usart",
    "family_for",
]

#: Every supported family by the name catalog parts give in ``family = "..."``.
FAMILIES: Mapping[str, Family] = MappingProxyType(
    {
        f.name: f
        for f in (
            STM32F4(),
            STM32F7(),
            STM32H7(),
            STM32L4(),
            STM32G0(),
            STM32G4(),
            STM32L5(),
            STM32U5(),
            STM32H7AB(),
        )
    }
)


def family_for(name: str) -> Family:
    """The family ``name`` (``"F4"``, ``"H7"``...); BoardFileError naming the known ones."""
    family = FAMILIES.get(name)
    if family is None:
        raise BoardFileError(
            f"unknown family '{name}'; known families: {', '.join(FAMILIES)} "
            "(add a module to splitter/hardware/families/, see CONTRIBUTING.md)"
        )
    return family
