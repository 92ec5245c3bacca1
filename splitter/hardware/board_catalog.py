"""Board definitions (``board_catalog.toml``): a Nucleo board is a part plus its wiring.

``board = "nucleo-h743zi"`` in a boards.toml ``[[device]]`` selects the part, the HSE the clock
tree starts from, the USARTs in link order (the first is the ST-LINK virtual COM port, the
host-facing link over the USB cable), their pins where the board routes them away from the
family's default, and where each pin is on the headers (for ``WIRING.md``).

:func:`device_wiring` is the one place that decides which USARTs and pins a device uses and its
real-board clock tree; the boards parser (plan time) and the firmware generator both call it.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources

from splitter.errors import BoardFileError
from splitter.hardware.catalog import get_part
from splitter.hardware.clocks import MHZ, ClockTree, Osc
from splitter.hardware.extflash import ExtFlashSpec, parse_spec
from splitter.hardware.families import family_for
from splitter.ir import Part

BOARD_FILE = "board_catalog.toml"


@dataclass(frozen=True)
class Board:
    """One board of :data:`BOARD_FILE` (see its header for the fields)."""

    name: str
    part: str
    hse: Osc | None
    usarts: tuple[str, ...]
    pins: Mapping[str, str]
    headers: Mapping[str, str]
    source: str
    #: the external flash the part maps at boot (``[boards.NAME.extflash]``), None without one
    extflash: ExtFlashSpec | None = None

    @property
    def vcp(self) -> str:
        """The USART wired to the ST-LINK virtual COM port."""
        return self.usarts[0]


@cache
def boards() -> dict[str, Board]:
    """Every board by name, checked against the catalog and the families."""
    text = resources.files("splitter.hardware").joinpath(BOARD_FILE).read_text("utf-8")
    out = {}
    for name, t in tomllib.loads(text)["boards"].items():
        part = get_part(t["part"])
        family = family_for(part.family)
        for usart in t["usarts"]:
            family.check_usart(usart, part.name)
        hse = Osc("HSE", int(t["hse_mhz"] * MHZ), bool(t["hse_bypass"])) if t["hse_mhz"] else None
        ext = t.get("extflash")
        spec = None if ext is None else parse_spec(ext, part.family, f"{BOARD_FILE} {name}")
        out[name] = Board(
            name, part.name, hse, tuple(t["usarts"]), dict(t["pins"]), dict(t["headers"]),
            t["source"], spec,
        )  # fmt: skip
    return out


def get_board(name: object, where: str) -> Board:
    """The board ``name``; BoardFileError listing the known boards otherwise."""
    table = boards()
    if isinstance(name, str) and name in table:
        return table[name]
    raise BoardFileError(
        f"{where}: unknown board {name!r}; known boards: {', '.join(table)} "
        f'(splitter/hardware/{BOARD_FILE}); or give mcu = "<part>" without board'
    )


@dataclass(frozen=True)
class Wiring:
    """What a device's firmware uses on the real board: the clock tree, the USARTs in link order
    (``(name, base)``), their TX/RX pins with AF, and where the pins are on the headers."""

    tree: ClockTree
    usarts: tuple[tuple[str, int], ...]
    routes: Mapping[str, tuple[tuple[str, int], ...]]
    pins: Mapping[str, str]  # board routing, "TX/RX" per USART it overrides
    headers: Mapping[str, str]
    board: Board | None

    def pin_text(self, usart: str) -> str:
        """``"PG14/PG9"``, or with header places ``"PG14 (Arduino D1) / PG9 (Arduino D0)"``."""
        parts = []
        for pin, _af in self.routes[usart]:
            where = self.headers.get(pin)
            parts.append(f"{pin} ({where})" if where else pin)
        return " / ".join(parts) if self.headers else "/".join(p for p, _ in self.routes[usart])


def device_wiring(part: Part, board: str | None, clock_hz: float, where: str) -> Wiring:
    """The real-board wiring of a device: its clock tree (ClockError when the part cannot
    reach ``clock_hz``) and its USARTs (the board's order, else the part's catalog order)."""
    family = family_for(part.family)
    b = get_board(board, where) if board is not None else None
    target = round(clock_hz)
    tree = family.clock_tree(part.name, round(part.clock_mhz * MHZ), target, b.hse if b else None)
    if b is not None:
        names: tuple[str, ...] = b.usarts
    else:
        names = tuple(u for u, _ in part.usarts) or family.usarts
    for u in names:
        family.check_usart(u, part.name)
    pins = dict(b.pins) if b else {}
    return Wiring(
        tree=tree,
        usarts=tuple((u, family.usart_base[u]) for u in names),
        routes={u: family.route(u, pins.get(u)) for u in names},
        pins=pins,
        headers=dict(b.headers) if b else {},
        board=b,
    )
