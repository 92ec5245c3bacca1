"""The independent watchdog (IWDG): prescaler and reload for a timeout on a family's part.

Every family here has the same IWDG (RM0090 21.3-21.4; the "Independent watchdog (IWDG)"
chapters of RM0410, RM0433, RM0351, RM0444, RM0440, RM0438, RM0455, RM0456): a 12-bit
down-counter clocked by the LSI RC (:attr:`splitter.hardware.families.Family.lsi_hz`) through a
prescaler ``/4 .. /256`` (``IWDG_PR = 0 .. 6``; the U5's 4-bit PR goes on to ``/1024``, ``PR =
8``: :attr:`~splitter.hardware.families.Family.iwdg_max_pr`), reloaded with ``RL``
(``IWDG_RLR``, 0 .. 0xFFF) on each refresh. The timeout is

    t = 4 * 2**PR * (RL + 1) / f_LSI        (RM0090 21.3, table 107)

so 0.125 ms (``/4``, ``RL = 0``) to 32768 ms (``/256``, ``RL = 0xFFF``) at 32 kHz, 131072 ms with
``/1024``. The LSI is an
RC oscillator: its frequency varies by part and temperature (e.g. 17 to 47 kHz on the F405,
DS8626, LSI oscillator characteristics), so the real timeout lies around the nominal one
computed here.
"""

from __future__ import annotations

from dataclasses import dataclass

from splitter.hardware.families import Family

#: IWDG_KR keys (RM0090 21.4.1): start the counter, unlock PR / RLR, reload.
KEY_START = 0xCCCC
KEY_UNLOCK = 0x5555
KEY_RELOAD = 0xAAAA
#: Largest reload value (12 bits), RM0090 21.4.3; the largest prescaler code is the family's
#: ``iwdg_max_pr`` (``/256`` = 6, RM0090 21.4.2; U5 ``/1024`` = 8).
MAX_RL = 0xFFF


@dataclass(frozen=True)
class Iwdg:
    """An IWDG setting: ``IWDG_PR = pr``, ``IWDG_RLR = rl`` at ``base``, clocked at ``lsi_hz``."""

    base: int
    pr: int
    rl: int
    lsi_hz: int

    @property
    def divider(self) -> int:
        """The prescaler's division: ``4 * 2**PR``."""
        return 4 << self.pr

    @property
    def timeout_ms(self) -> float:
        """``4 * 2**PR * (RL + 1) / f_LSI`` in ms (module docstring)."""
        return self.divider * (self.rl + 1) * 1000 / self.lsi_hz


def iwdg_range_ms(family: Family) -> tuple[float, float]:
    """Shortest and longest timeout of ``family``'s IWDG at its nominal LSI (ms)."""
    top = (4 << family.iwdg_max_pr) * (MAX_RL + 1)
    return 4 * 1000 / family.lsi_hz, top * 1000 / family.lsi_hz


def iwdg_setting(family: Family, ms: float) -> Iwdg | None:
    """The finest prescaler whose 12-bit reload reaches ``ms``, and ``RL = round(ms * f_LSI /
    (1000 * divider)) - 1``; ``None`` when ``ms`` is outside :func:`iwdg_range_ms`."""
    low, high = iwdg_range_ms(family)
    if not low <= ms <= high:
        return None
    ticks = ms * family.lsi_hz / 1000
    for pr in range(family.iwdg_max_pr + 1):
        rl = max(round(ticks / (4 << pr)) - 1, 0)
        if rl <= MAX_RL:
            return Iwdg(family.iwdg_base, pr, rl, family.lsi_hz)
    return None  # unreachable: high is reached with the largest prescaler
