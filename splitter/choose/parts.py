"""The board types ``splitter choose`` may buy: catalog parts with a price (and energy data).

By default every catalog part with a shipped list price (``splitter/hardware/energy.toml``);
``--parts FILE`` gives the user's own list instead::

    [[part]]
    name = "STM32F446RE"     # a catalog part (required)
    price = 12.50            # optional: the user's unit price in USD (default: the list price)
    board = "nucleo-f446re"  # optional: the board definition the written boards.toml names
    max = 2                  # optional: buy at most this many of it (default: --max-boards)

Every number is checked (finite, > 0, sane); an empty list, an unknown part or a part with no
price is a one-line error naming the file, the entry and the fix.
"""

from __future__ import annotations

import math
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitter.errors import BoardFileError, InputFileError
from splitter.hardware.board_catalog import boards as board_definitions
from splitter.hardware.catalog import get_part, part_names
from splitter.hardware.energy import PartEnergy, energies, prices
from splitter.ir import Part

#: a unit price above this (USD) is taken for a typo
MAX_PRICE = 100_000.0
PART_KEYS = ("name", "price", "board", "max")


@dataclass(frozen=True)
class Candidate:
    """One board type: the part, the board definition it sits on (``None``: the bare part, as
    the emulated F405), the unit price with its source and date, its energy data (``None``:
    none known) and how many may be bought."""

    part: Part
    board: str | None
    board_label: str
    price_usd: float
    price_source: str
    price_date: str
    energy: PartEnergy | None
    max_count: int | None = None

    @property
    def name(self) -> str:
        """The part's name."""
        return self.part.name


def _board_of(part: str) -> str | None:
    """The board definition (``board_catalog.toml``) carrying ``part``, if any."""
    return next((b.name for b in board_definitions().values() if b.part == part), None)


def catalog_candidates() -> tuple[list[Candidate], list[str]]:
    """Every catalog part with a list price, and the notes of the parts left out (no price)."""
    listed, out, notes = prices(), [], []
    for name in part_names():
        price = listed.get(name)
        if price is None:
            notes.append(
                f"{name}: no list price in splitter/hardware/energy.toml (give one in --parts)"
            )
            continue
        out.append(
            Candidate(
                part=get_part(name),
                board=_board_of(name),
                board_label=price.board,
                price_usd=price.usd,
                price_source=price.source,
                price_date=price.date,
                energy=energies().get(name),
            )
        )
    return out, notes


def load_parts_file(path: str | Path) -> list[Candidate]:
    """The user's list of board types (module docstring); InputFileError on any problem."""
    where = str(path)
    try:
        data = tomllib.loads(Path(path).read_text("utf-8"))
    except FileNotFoundError:
        raise InputFileError(
            f"{where}: no such file; give a TOML file of [[part]] tables"
        ) from None
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise InputFileError(f"{where}: not a readable TOML file ({exc}); fix its syntax") from None
    extra = sorted(set(data) - {"part"})
    if extra:
        raise InputFileError(f"{where}: unknown key {extra[0]!r}; list parts as [[part]] tables")
    rows = data.get("part", [])
    if not isinstance(rows, list) or not rows:
        raise InputFileError(
            f'{where}: the part list is empty; add [[part]] tables, e.g. name = "STM32F446RE"'
        )
    out = [_candidate(row, k, where) for k, row in enumerate(rows)]
    names = [c.name for c in out]
    dup = next((n for n in names if names.count(n) > 1), None)
    if dup is not None:
        raise InputFileError(f"{where}: part {dup} is listed twice; keep one [[part]] for it")
    return out


def _candidate(row: Any, k: int, where: str) -> Candidate:
    """One ``[[part]]`` table as a :class:`Candidate`."""
    ctx = f"{where}: part[{k}]"
    if not isinstance(row, dict) or "name" not in row:
        raise InputFileError(f'{ctx}: needs name = "STM32..." (a catalog part)')
    extra = sorted(set(row) - set(PART_KEYS))
    if extra:
        raise InputFileError(f"{ctx}: unknown key {extra[0]!r}; use {', '.join(PART_KEYS)}")
    try:
        part = get_part(row["name"])
    except BoardFileError as exc:
        raise InputFileError(f"{ctx}: {exc}") from None
    listed = prices().get(part.name)
    if "price" in row:
        price = _number(row["price"], f"{ctx} price", MAX_PRICE)
        source, date = "user (--parts)", ""
    elif listed is not None:
        price, source, date = listed.usd, listed.source, listed.date
    else:
        raise InputFileError(f"{ctx}: {part.name} has no list price; add price = USD")
    board = row.get("board", _board_of(part.name))
    if board is not None and board not in board_definitions():
        known = ", ".join(board_definitions())
        raise InputFileError(f"{ctx}: board {board!r} unknown; use one of {known} or leave it out")
    count = row.get("max")
    if count is not None and (not isinstance(count, int) or isinstance(count, bool) or count < 1):
        raise InputFileError(f"{ctx}: max = {count!r}; give a whole number >= 1")
    return Candidate(
        part=part,
        board=board,
        board_label=board or (listed.board if listed else part.name),
        price_usd=price,
        price_source=source,
        price_date=date,
        energy=energies().get(part.name),
        max_count=count,
    )


def _number(value: Any, what: str, top: float) -> float:
    """A finite number in (0, top], else InputFileError naming ``what``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or not math.isfinite(float(value)) or not 0 < float(value) <= top:
        raise InputFileError(f"{what} = {value!r}; give a number > 0 and at most {top:g}")
    return float(value)
