"""Energy and price data of the parts (``energy.toml``), keyed by part name.

Each part has two rows of its datasheet's supply-current tables: Run mode (code from flash, the
accelerator / caches on, peripherals off) and Sleep mode (CPU stopped by WFI, clocks on, so a
UART interrupt wakes it: what a board draws while it waits on a link). From a row
``(I mA at f MHz)`` the current per MHz is ``I / f`` and a device clocked at ``f_i`` draws

    ``P = V_DD * (I / f) * f_i``    (W; the datasheets' Run and Sleep currents grow linearly
                                     with the clock above a few MHz, which is why they quote
                                     uA/MHz)

Prices are the list price of one board carrying the part, with the source and the date taken.
Nothing here is a default: a part without a row is refused by whoever needs it
(:func:`energy_of`, :func:`price_of` raise a one-line error naming the file and the fix).
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from splitter.errors import BoardFileError
from splitter.ir import Device

ENERGY_FILE = "energy.toml"
#: what a plan says in place of its energy when a part has no row in :data:`ENERGY_FILE`
NO_ENERGY = "energy: not computed (a part has no energy data in splitter/hardware/energy.toml)"


@dataclass(frozen=True)
class PartEnergy:
    """The datasheet rows of one part (see the module docstring)."""

    part: str
    vdd_v: float
    run_ma: float
    run_mhz: float
    wait_ma: float
    wait_mhz: float
    run_table: str
    wait_table: str
    regulator: str = "LDO"
    checked: bool = False
    run_source_url: str = ""
    wait_source_url: str = ""

    @property
    def run_checked(self) -> bool:
        """True once the Run figure was read on a copy of the datasheet (``run_source_url``)."""
        return bool(self.run_source_url)

    @property
    def wait_checked(self) -> bool:
        """True once the Sleep figure was read on a copy of the datasheet."""
        return bool(self.wait_source_url)

    @property
    def run_ua_per_mhz(self) -> float:
        """Run-mode current per MHz, ``1000 * run_ma / run_mhz`` (uA/MHz)."""
        return 1000.0 * self.run_ma / self.run_mhz

    @property
    def wait_ua_per_mhz(self) -> float:
        """Sleep-mode (waiting on a link) current per MHz, ``1000 * wait_ma / wait_mhz``."""
        return 1000.0 * self.wait_ma / self.wait_mhz

    def run_w(self, clock_hz: float) -> float:
        """Run-mode power at ``clock_hz``: ``V_DD * run_ua_per_mhz * 1e-6 * f_MHz`` (W)."""
        return self.vdd_v * self.run_ua_per_mhz * 1e-6 * clock_hz / 1e6

    def wait_w(self, clock_hz: float) -> float:
        """Sleep-mode power at ``clock_hz`` (W), as :meth:`run_w`."""
        return self.vdd_v * self.wait_ua_per_mhz * 1e-6 * clock_hz / 1e6


@dataclass(frozen=True)
class PartPrice:
    """The list price of one board carrying ``part``."""

    part: str
    board: str
    usd: float
    source: str
    date: str


_ENERGY_KEYS = ("vdd_v", "run_ma", "run_mhz", "wait_ma", "wait_mhz", "run_table", "wait_table")


def energy_from_table(name: str, table: Mapping[str, Any], where: str) -> PartEnergy:
    """A :class:`PartEnergy` from a ``[energy.NAME]`` table; one-line BoardFileError if bad."""
    missing = [k for k in _ENERGY_KEYS if k not in table]
    if missing:
        raise BoardFileError(f"{where}: energy.{name}: missing {', '.join(missing)}; add them")
    nums = {}
    for key in ("vdd_v", "run_ma", "run_mhz", "wait_ma", "wait_mhz"):
        nums[key] = _positive(table[key], where, f"energy.{name}.{key}")
    if nums["vdd_v"] > 5.5 or nums["run_ma"] > 2000 or nums["wait_ma"] > nums["run_ma"] * 2:
        raise BoardFileError(
            f"{where}: energy.{name}: vdd {nums['vdd_v']} V, run {nums['run_ma']} mA, sleep "
            f"{nums['wait_ma']} mA is not an MCU's; give the datasheet's typical mA"
        )
    run_url, wait_url = (str(table.get(k, "")) for k in ("run_source_url", "wait_source_url"))
    checked = bool(table.get("checked", False))
    if checked and not (run_url and wait_url):
        raise BoardFileError(
            f"{where}: energy.{name}: checked = true needs run_source_url and wait_source_url "
            "(the pages the Run and Sleep figures were read on); add them or set checked = false"
        )
    return PartEnergy(
        part=name,
        run_table=str(table["run_table"]),
        wait_table=str(table["wait_table"]),
        regulator=str(table.get("regulator", "LDO")),
        checked=checked,
        run_source_url=run_url,
        wait_source_url=wait_url,
        **nums,
    )


def price_from_table(name: str, table: Mapping[str, Any], where: str) -> PartPrice:
    """A :class:`PartPrice` from a ``[prices.NAME]`` table (``usd`` > 0 and < 100000)."""
    if "usd" not in table:
        raise BoardFileError(f"{where}: prices.{name}: no usd; add usd = the board's price")
    usd = _positive(table["usd"], where, f"prices.{name}.usd")
    if usd >= 100_000:
        raise BoardFileError(
            f"{where}: prices.{name}.usd = {usd:g} is not a board's price; give it in USD"
        )
    return PartPrice(
        part=name,
        board=str(table.get("board", name)),
        usd=usd,
        source=str(table.get("source", "user")),
        date=str(table.get("date", "")),
    )


def _positive(value: Any, where: str, key: str) -> float:
    """``value`` as a finite float > 0, else a one-line BoardFileError naming ``key``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or float(value) <= 0:
        raise BoardFileError(f"{where}: {key} = {value!r}; give a positive number")
    return float(value)


@cache
def _data() -> tuple[dict[str, PartEnergy], dict[str, PartPrice]]:
    text = resources.files("splitter.hardware").joinpath(ENERGY_FILE).read_text("utf-8")
    raw = tomllib.loads(text)
    energy = {n: energy_from_table(n, t, ENERGY_FILE) for n, t in raw.get("energy", {}).items()}
    prices = {n: price_from_table(n, t, ENERGY_FILE) for n, t in raw.get("prices", {}).items()}
    return energy, prices


def energies() -> dict[str, PartEnergy]:
    """Every shipped ``[energy.NAME]`` row, by part name."""
    return dict(_data()[0])


def prices() -> dict[str, PartPrice]:
    """Every shipped ``[prices.NAME]`` row, by part name."""
    return dict(_data()[1])


def energy_of(part: str) -> PartEnergy:
    """The energy data of ``part``; BoardFileError (one line, the fix) when it has none."""
    found = _data()[0].get(part)
    if found is None:
        raise BoardFileError(
            f"{ENERGY_FILE}: part {part} has no energy data, so no energy can be computed for "
            f"it; add [energy.{part}] (Run and Sleep rows of its datasheet) to "
            "splitter/hardware/energy.toml, or plan with --objective latency or throughput"
        )
    return found


def price_of(part: str) -> PartPrice:
    """The shipped list price of a board carrying ``part``; BoardFileError when unknown."""
    found = _data()[1].get(part)
    if found is None:
        raise BoardFileError(
            f"{ENERGY_FILE}: part {part} has no list price; give one in --parts FILE "
            f"([prices.{part}] usd = ...)"
        )
    return found


def device_powers(devices: tuple[Device, ...]) -> tuple[tuple[float, ...], tuple[float, ...]]:
    """``(run W, wait W)`` of each device at its clock (:meth:`PartEnergy.run_w`); empty
    tuples when any device's part has no energy data (the energy objective then refuses it)."""
    table = _data()[0]
    if any(dev.part.name not in table for dev in devices):
        return (), ()
    rows = [table[dev.part.name] for dev in devices]
    return (
        tuple(r.run_w(d.clock_hz) for r, d in zip(rows, devices, strict=True)),
        tuple(r.wait_w(d.clock_hz) for r, d in zip(rows, devices, strict=True)),
    )


def missing_energy(devices: tuple[Device, ...]) -> list[str]:
    """Parts of ``devices`` without energy data, in order, once each."""
    table = _data()[0]
    return list(dict.fromkeys(d.part.name for d in devices if d.part.name not in table))
