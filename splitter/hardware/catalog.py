"""The MCU catalog: ``catalog.toml`` (data, one table per part) loaded into :class:`Part` objects.

Boards are data (esptool's ``CHIP_DEFS``): adding a part is adding a table to ``catalog.toml``
with its datasheet / reference-manual citation; no code changes.
"""

from __future__ import annotations

import difflib
import tomllib
from functools import cache
from importlib import resources
from typing import Any

from splitter.errors import BoardFileError
from splitter.ir import Part

CATALOG_FILE = "catalog.toml"
CORES = ("cortex-m0plus", "cortex-m4", "cortex-m7")
USART_LAYOUTS = ("sr_dr", "isr_rdr_tdr")


@cache
def _catalog() -> dict[str, Part]:
    text = resources.files("splitter.hardware").joinpath(CATALOG_FILE).read_text("utf-8")
    data = tomllib.loads(text)
    return {name: part_from_table(name, table) for name, table in data["parts"].items()}


def part_from_table(name: str, table: dict[str, Any], where: str = CATALOG_FILE) -> Part:
    """Build a :class:`Part` from a catalog table (sizes in KiB, region sizes in KiB)."""
    core = str(table.get("core", "cortex-m4"))
    if core not in CORES:
        raise BoardFileError(f"{where}: part {name}: core '{core}' unknown; use one of {CORES}")
    layout = str(table.get("usart_layout", "sr_dr"))
    if layout not in USART_LAYOUTS:
        raise BoardFileError(
            f"{where}: part {name}: usart_layout '{layout}' unknown; use one of {USART_LAYOUTS}"
        )
    regions = tuple(
        (str(r[0]), int(r[1]), round(float(r[2]) * 1024)) for r in table.get("ram_regions", ())
    )
    return Part(
        name=name,
        flash_kib=float(table["flash_kib"]),
        ram_kib=float(table["ram_kib"]),
        clock_mhz=float(table["clock_mhz"]),
        cpm=float(table["cpm"]),
        core=core,
        fpu=str(table.get("fpu", "")),
        flash_origin=int(table.get("flash_origin", 0x0800_0000)),
        ram_regions=regions,
        usart_layout=layout,
        usarts=tuple((str(u[0]), int(u[1])) for u in table.get("usarts", ())),
        source=str(table.get("source", "")),
    )


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


def get_part(name: str) -> Part:
    """The catalog part ``name`` (exact, else case-insensitive).

    Raises BoardFileError naming close matches when it is unknown.
    """
    cat = _catalog()
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
