"""Compute time of a layer on a device: the estimate by op class, times the part's calibration.

``t = sum_c k_c * e_c / f`` with, per op class ``c`` (``conv``, ``depthwise``, ``dense``,
``other``, and ``None`` for MACs no class accounts for):

* ``e_c`` the *estimated* cycles (:func:`estimated_cycles`): today ``MAC_c * CpM_i`` (thesis
  eq. 6, with the board file's ``cpm_by_class`` when it gives one);
* ``k_c`` the calibration's correction factor of the device's part (measured / estimated,
  :class:`splitter.ir.Calibration`; 1 when uncalibrated). A calibration multiplies whatever
  the estimate is, so it composes with any estimate that splits its cycles by class;
* ``f`` the clock the cycles count at (:func:`timing_clock_hz`): the device's ``f_i``, or for a
  prediction of an emulated run the emulator's SysTick clock (under QEMU every device is the
  same emulated 168 MHz F405, whatever part it stands for, ``splitter.hardware.qemu``).

Which calibration a device carries (emulated runs only get an emulated one, real runs a real
one) is decided when the board file is read (:func:`splitter.hardware.boards.for_prediction`).
"""

from __future__ import annotations

from collections.abc import Mapping

from splitter.hardware.qemu import EMULATOR
from splitter.ir import Calibration, Device, LayerCost


def estimated_cycles(cost: LayerCost, device: Device) -> dict[str | None, float]:
    """Uncalibrated cycles of ``cost`` on ``device`` by op class (``None``: unclassified MACs).

    ``MAC_c * cpm_by_class.get(c, CpM_i)`` per class, ``(MAC - sum_c MAC_c) * CpM_i`` for the
    rest (profiles have no classes: all their MACs are in ``None``).
    """
    out: dict[str | None, float] = {}
    classified = 0
    for cls, macs in cost.macs_by_class:
        out[cls] = out.get(cls, 0.0) + macs * device.cpm_by_class.get(cls, device.cpm)
        classified += macs
    rest = max(0, cost.macs - classified)
    if rest or not out:
        out[None] = rest * device.cpm
    return out


def calibrated_cycles(
    by_class: Mapping[str | None, float], calibration: Calibration | None
) -> float:
    """``sum_c k_c * e_c`` (``k_c = 1`` without a calibration)."""
    if calibration is None:
        return float(sum(by_class.values()))
    return float(sum(calibration.of(c) * e for c, e in by_class.items()))


def timing_clock_hz(device: Device) -> float:
    """The clock the device's cycles count at: the emulator's when predicting an emulated run."""
    return float(EMULATOR.clock_hz) if device.emulated else device.clock_hz


def compute_seconds(cost: LayerCost, device: Device) -> float:
    """``sum_c k_c * e_c / f`` (module docstring)."""
    return calibrated_cycles(estimated_cycles(cost, device), device.calibration) / timing_clock_hz(
        device
    )
