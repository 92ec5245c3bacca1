"""Compute time of a layer on a device: the estimate by op class, times the part's calibration.

``t = sum_c k_c * e_c / f`` (:func:`splitter.partition.problem.layer_time`) with, per op class
``c`` (``conv``, ``depthwise``, ``dense``, ``other``, and ``None`` for MACs no class accounts
for):

* ``e_c`` the *estimated* cycles (:func:`splitter.partition.problem.estimated_cycles`): the
  kernel cost table's instructions x the core's CPI (or the emulator's 1 instruction per ns),
  split by the layer's MACs per class (:func:`split_by_macs`); for layer profiles and a board
  file's own ``cpm`` / ``cpm_by_class``, ``MAC_c * CpM_i`` (thesis eq. 6, :func:`flat_cycles`);
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


def flat_cycles(cost: LayerCost, device: Device) -> dict[str | None, float]:
    """Thesis eq. 6 cycles of ``cost`` on ``device`` by op class (``None``: unclassified MACs).

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


def split_by_macs(cycles: float, cost: LayerCost) -> dict[str | None, float]:
    """``cycles`` shared over ``cost``'s op classes in proportion to their MACs (all in ``None``
    when the layer counts no MACs)."""
    if cost.macs <= 0:
        return {None: cycles}
    out: dict[str | None, float] = {c: cycles * m / cost.macs for c, m in cost.macs_by_class}
    rest = cost.macs - sum(m for _, m in cost.macs_by_class)
    if rest > 0:
        out[None] = cycles * rest / cost.macs
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
