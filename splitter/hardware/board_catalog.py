"""Board definitions (``board_catalog.toml``): a Nucleo board is a part plus its wiring.

``board = "nucleo-h743zi"`` in a boards.toml ``[[device]]`` selects the part, the HSE the clock
tree starts from, the USARTs in link order (the first is the ST-LINK virtual COM port, the
host-facing link over the USB cable), their pins where the board routes them away from the
family's default, and where each pin is on the headers (for ``WIRING.md``).

:func:`device_wiring` is the one place that decides which USARTs and pins a device uses and its
real-board clock tree; the boards parser (plan time) and the firmware generator both call it.
"""

from __future__ import annotations

import difflib
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from splitter.errors import BoardFileError
from splitter.hardware.catalog import get_part
from splitter.hardware.clocks import MHZ, ClockTree, Osc
from splitter.hardware.extflash import ExtFlashSpec, parse_spec
from splitter.hardware.families import family_for
from splitter.ir import Part

BOARD_FILE = "board_catalog.toml"


@dataclass(frozen=True)
class StLink:
    """The on-board ST-LINK's virtual COM port: the fastest host link it carries."""

    version: str
    max_baud: int
    source: str


#: ST-LINK versions on the boards of :data:`BOARD_FILE` (``stlink = "V2-1"`` / ``"V3"``): the
#: highest virtual COM port baud rate.
#:
#: V3 (STLINK-V3E on MB1363 / MB1364 / MB1367 / MB1549 boards, an STM32F723 bridge): ST's
#: STLINK-V3MINI product page (st.com/en/development-tools/stlink-v3mini.html, "Virtual COM
#: port (VCP) specific features: ... VCP frequency up to 15 MHz"); UM2448 (the STLINK-V3SET
#: manual) gives the VCP "732-16000000 baud" and RN0093 (ST-LINK firmware release notes) a
#: minimum of 2931 baud in high-performance mode, both as blackmagic-debug quotes them
#: (src/platforms/stlinkv3/README.md); neither document's text was reachable here. 15 Mbaud,
#: the lower of ST's two figures, is the limit.
#:
#: V2-1 (on Nucleo-64 MB1136, Nucleo-144 MB1137, Discovery boards): NOT FOUND. No ST document
#: reachable here states its VCP maximum: on 2026-11-27 the search corpora (docs, pages,
#: issues, code) and the GitHub file search held TN1235 "Overview of ST-LINK derivatives" only
#: as its title and URL (its text, which other projects quote for USB product ids, was not
#: stored), no text of UM1724 / UM1974 / UM2179 on the VCP's baud rates, and no text of
#: RN0093 on the V2-1. So 2 Mbaud is a bound derived from the bridge, not a quoted one: the
#: V2-1 is an STM32F103CBT6 whose VCP lines go to its USART2 on the 36 MHz APB1 (the Nucleo-64
#: MB1136 schematic, not re-read here), with 16x oversampling only (RM0008 USART: baud =
#: f_PCLK / USARTDIV, USARTDIV >= 16), hence at most 36 MHz / 16 = 2.25 Mbaud; users report a
#: NUCLEO-F767ZI's VCP failing above 2.25 Mbaud (forums.mbed.com "NUCLEO-F767ZI - USART
#: Problem when baud rate higher than 2.25 MHz") and an ST-LINK VCP losing characters at
#: 1 843 200 baud but not at 1 228 800 (community.st.com thread 44053, a user's report);
#: 2 Mbaud is the largest standard rate below the bound.
STLINKS: Mapping[str, StLink] = {
    "V2-1": StLink("V2-1", 2_000_000, "ST-LINK/V2-1: its STM32F103 bridge's VCP USART reaches "
                   "36 MHz / 16 = 2.25 Mbaud; no ST document found states a figure"),
    "V3": StLink("V3", 15_000_000, "ST STLINK-V3MINI product page: VCP frequency up to 15 MHz "
                 "(UM2448 gives 16 Mbaud for the STLINK-V3SET)"),
}  # fmt: skip


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
    #: the on-board ST-LINK (its virtual COM port carries the host link)
    stlink: StLink = STLINKS["V2-1"]
    #: other names of the same board (the name without its -Q / -P suffix, ...)
    aliases: tuple[str, ...] = ()
    #: the VCORE supply its regulator pins are wired for (``ClockRules.supplies``), None: the
    #: family's default
    supply: str | None = None

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
        stlink = STLINKS.get(t["stlink"])
        if stlink is None or name != name.lower():
            raise BoardFileError(
                f"{BOARD_FILE}: board {name}: stlink = {t['stlink']!r} (use one of "
                f"{', '.join(STLINKS)}) and the name in lower case"
            )
        supply = t.get("supply")
        family.clock.with_supply(supply, f"{BOARD_FILE} board {name} ({part.name})")
        out[name] = Board(
            name, part.name, hse, tuple(t["usarts"]), dict(t["pins"]), dict(t["headers"]),
            t["source"], spec, stlink, tuple(t.get("aliases", ())), supply,
        )  # fmt: skip
    return out


@cache
def board_names() -> dict[str, str]:
    """Every name a board is known by (its own and its aliases, lower case) -> the board."""
    out: dict[str, str] = {}
    for name, b in boards().items():
        for n in (name, *b.aliases):
            if n.lower() in out:
                raise BoardFileError(f"{BOARD_FILE}: board name {n} is given twice")
            out[n.lower()] = name
    return out


def get_board(name: object, where: str) -> Board:
    """The board ``name``, in any case, or one of its aliases (``NUCLEO-F446RE``,
    ``nucleo-l552ze`` for ``nucleo-l552ze-q``); BoardFileError with a "did you mean" and the
    known boards otherwise."""
    table, names = boards(), board_names()
    if isinstance(name, str) and name.strip().lower() in names:
        return table[names[name.strip().lower()]]
    close = difflib.get_close_matches(str(name).lower(), list(names), n=1, cutoff=0.6)
    did_you_mean = f"did you mean {names[close[0]]}? " if close else ""
    raise BoardFileError(
        f"{where}: unknown board {name!r}; {did_you_mean}known boards: {', '.join(table)} "
        f'(splitter boards lists them; splitter/hardware/{BOARD_FILE}); or give mcu = "<part>" '
        "without board"
    )


def check_host_baud(board: Board, baud: int, where: str, key: str = "[link] baud") -> None:
    """BoardFileError when ``baud`` is above what ``board``'s ST-LINK virtual COM port carries
    (:data:`STLINKS`), naming the limit and the boards-file ``key`` to set."""
    limit = board.stlink
    if baud > limit.max_baud:
        raise BoardFileError(
            f"{where}: the host link runs over {board.name}'s ST-LINK/{limit.version} virtual "
            f"COM port, which carries at most {limit.max_baud} baud ({limit.source}); set "
            f"{key} <= {limit.max_baud}"
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
    hse, supply = (b.hse, b.supply) if b else (None, None)
    tree = family.clock_tree(part.name, round(part.clock_mhz * MHZ), target, hse, supply)
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


def board_listing() -> list[dict[str, Any]]:
    """Every board as a record (``splitter boards``): name, aliases, part, family, core, the
    ST-LINK and its fastest host link, the USARTs (virtual COM port first), the HSE, source."""
    out: list[dict[str, Any]] = []
    for b in boards().values():
        family = family_for(get_part(b.part).family)
        out.append(
            {
                "name": b.name,
                "aliases": list(b.aliases),
                "part": b.part,
                "family": family.name,
                "core": family.core.name,
                "stlink": b.stlink.version,
                "max_host_baud": b.stlink.max_baud,
                "usarts": list(b.usarts),
                "hse": b.hse.label if b.hse else None,
                "supply": b.supply,
                "source": b.source,
            }
        )
    return out
