"""The MCU catalog: ``catalog.toml`` (data, one table per part) loaded into :class:`Part` objects.

Boards are data (esptool's ``CHIP_DEFS``): adding a part of a known family is adding a table to
``catalog.toml`` with its ``family`` and its datasheet / reference-manual citation; no code
changes. Family facts (core, USART layout and bases, IRQs, pins) live in
``splitter/hardware/families.py``.
"""

from __future__ import annotations

import difflib
import tomllib
from functools import cache
from importlib import resources
from typing import Any

from splitter.errors import BoardFileError
from splitter.hardware.families import FAMILIES, Family, family_for
from splitter.ir import Part
from splitter.names import PART_NAME, TEXT, problem

CATALOG_FILE = "catalog.toml"


@cache
def _catalog() -> dict[str, Part]:
    text = resources.files("splitter.hardware").joinpath(CATALOG_FILE).read_text("utf-8")
    data = tomllib.loads(text)
    return {name: part_from_table(name, table) for name, table in data["parts"].items()}


def part_from_table(name: object, table: dict[str, Any], where: str = CATALOG_FILE) -> Part:
    """Build a :class:`Part` from a catalog table (sizes in KiB, region sizes in KiB).

    ``family`` is required and must be a key of :data:`~splitter.hardware.families.FAMILIES`;
    ``fpu`` defaults to the family's (``""`` = none); ``usarts`` lists USART names in
    preference order (default: every USART of the family), their bases come from the family.
    ``name`` must fully match :data:`splitter.names.PART_NAME` and ``source`` be one printable
    line (:data:`splitter.names.TEXT`): both reach generated files.
    """
    bad = problem(PART_NAME, name, "part name") or problem(
        TEXT, table.get("source", ""), f"part {name} source"
    )
    if bad:
        raise BoardFileError(f"{where}: {bad}")
    assert isinstance(name, str)
    family = _family(name, table, where)
    fpu = str(table.get("fpu", family.fpus[0]))
    usarts = table.get("usarts", family.usarts)
    if not all(isinstance(u, str) for u in usarts):
        raise BoardFileError(
            f"{where}: part {name}: usarts = {usarts!r}; list USART names in preference order, "
            f'e.g. ["{family.usarts[1]}", "{family.usarts[0]}"] (the family gives their bases)'
        )
    try:
        family.check_fpu(fpu, name)
        for usart in usarts:
            family.check_usart(str(usart), name)
    except BoardFileError as exc:
        raise BoardFileError(f"{where}: {exc}") from None
    regions = tuple(
        (str(r[0]), int(r[1]), round(float(r[2]) * 1024)) for r in table.get("ram_regions", ())
    )
    return Part(
        name=name,
        flash_kib=float(table["flash_kib"]),
        ram_kib=float(table["ram_kib"]),
        clock_mhz=float(table["clock_mhz"]),
        cpm=float(table["cpm"]),
        family=family.name,
        fpu=fpu,
        flash_origin=int(table.get("flash_origin", 0x0800_0000)),
        ram_regions=regions,
        usarts=tuple((u, family.usart_base[u]) for u in usarts),
        source=str(table.get("source", "")),
    )


def _family(name: str, table: dict[str, Any], where: str) -> Family:
    """The part's family, or a one-line BoardFileError naming the file, part and families."""
    if "family" not in table:
        raise BoardFileError(
            f"{where}: part {name}: no family; add family = one of {', '.join(FAMILIES)}"
        )
    try:
        return family_for(str(table["family"]))
    except BoardFileError as exc:
        raise BoardFileError(f"{where}: part {name}: {exc}") from None


def parts() -> list[Part]:
    """Every catalog part, in catalog file order."""
    return list(_catalog().values())


def part_names() -> list[str]:
    """Names of every catalog part, in catalog file order."""
    return list(_catalog())


def close_matches(name: str) -> list[str]:
    """Catalog names that look like ``name`` (case-insensitive), best first."""
    upper = {n.upper(): n for n in _catalog()}
    hits = difflib.get_close_matches(name.upper(), list(upper), n=3, cutoff=0.6)
    return [upper[h] for h in hits]


def get_part(name: object) -> Part:
    """The catalog part ``name`` (exact, else case-insensitive).

    Raises BoardFileError naming close matches when it is unknown.
    """
    cat = _catalog()
    bad = problem(PART_NAME, name, "mcu")
    if bad:
        raise BoardFileError(f"{CATALOG_FILE}: {bad}")
    assert isinstance(name, str)
    if name in cat:
        return cat[name]
    for key, part in cat.items():
        if key.upper() == name.upper():
            return part
    hint = close_matches(name)
    did_you_mean = f"did you mean {', '.join(hint)}? " if hint else ""
    raise BoardFileError(
        f"{CATALOG_FILE}: unknown MCU part '{name}'; {did_you_mean}"
        "known parts: " + ", ".join(cat) + "; or describe it inline with part = {...}"
    )
