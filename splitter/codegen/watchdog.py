"""``compile --watchdog-ms N``: the IWDG setting of each device's firmware, checked against what
the part's IWDG reaches and how often the runtime kicks it.

The firmware starts the IWDG in ``board_init()`` right after the clock start-up (``startup.c``,
``watchdog.c``) and kicks it in the runtime's loop and in every wait for a byte (``runtime.c``,
``uart.c``). The longest stretch without a kick (:func:`kick_gap_s`) is the longest of: one
SysTick period while idle (``wfi`` wakes on its wrap, ``2**24`` core cycles, ``timer.c``), one
frame written without reading (``(MAX_PAYLOAD + OVERHEAD) * 10 / baud`` at 8N1), the longest
sub-model run on the device (the plan's ``compute_s``). The timeout must be at least twice that
(the LSI runs up to ~1.5x fast, ``splitter/hardware/watchdog.py``) and within the IWDG's range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from splitter.errors import BoardFileError
from splitter.hardware.families import Family
from splitter.hardware.watchdog import iwdg_range_ms, iwdg_setting
from splitter.protocol import MAX_PAYLOAD, OVERHEAD

#: SysTick counts 2**24 core cycles per wrap (timer.c SYST_RELOAD + 1).
SYSTICK_WRAP_CYCLES = 1 << 24
#: Bits per byte on the link (8N1).
BITS_PER_BYTE = 10
#: The timeout must exceed the longest gap between kicks by this factor.
MARGIN = 2


@dataclass(frozen=True)
class WatchdogContext:
    """What config.h prints for the IWDG: the requested and the programmed timeout (ms), the
    registers, and the wait bound for the register update (``IWDG_SR``, one ms of spins)."""

    ms: int
    timeout_ms: float
    base_hex: str
    pr: int
    rl: int
    lsi_hz: int
    sr_spins: int
    source: str


def kick_gap_s(clock_hz: int, baud: int, busy_s: float) -> tuple[float, str]:
    """The longest time between two kicks (s) and what sets it (module docstring)."""
    gaps = {
        "the SysTick wake-up while idle": SYSTICK_WRAP_CYCLES / clock_hz,
        "one frame written": (MAX_PAYLOAD + OVERHEAD) * BITS_PER_BYTE / baud,
        "its longest sub-model run": busy_s,
    }
    what = max(gaps, key=lambda k: gaps[k])
    return gaps[what], what


def watchdog_context(
    device: str,
    part: str,
    family: Family,
    ms: int,
    *,
    clock_hz: int,
    baud: int,
    busy_s: float = 0.0,
) -> WatchdogContext | None:
    """The IWDG setting of ``device`` for ``--watchdog-ms ms`` (``None`` when ``ms`` is 0);
    BoardFileError naming the device, the range and the fix when ``ms`` is out of it."""
    if ms == 0:
        return None
    gap, why = kick_gap_s(clock_hz, baud, busy_s)
    low = max(math.ceil(MARGIN * gap * 1000), math.ceil(iwdg_range_ms(family)[0]))
    high = math.floor(iwdg_range_ms(family)[1])
    setting = iwdg_setting(family, ms)
    if setting is None or not low <= ms <= high:
        fix = f"use --watchdog-ms {low} to {high}" if low <= high else "drop --watchdog-ms"
        raise BoardFileError(
            f"device {device} ({part}): --watchdog-ms {ms} is outside {low}..{high} ms: its IWDG "
            f"reaches {high} ms at most (LSI {family.lsi_hz / 1000:g} kHz, {family.iwdg_source}) "
            f"and the runtime kicks it every {gap * 1000:.0f} ms ({why}); {fix}"
        )
    return WatchdogContext(
        ms=ms,
        timeout_ms=round(setting.timeout_ms, 1),
        base_hex=f"0x{setting.base:08X}",
        pr=setting.pr,
        rl=setting.rl,
        lsi_hz=setting.lsi_hz,
        sr_spins=clock_hz // 1000,
        source=family.iwdg_source,
    )
