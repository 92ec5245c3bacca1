"""``boards.toml`` parser: the devices a network is split over and their UART links.

Shape (every other key is an error naming the key)::

    [link]
    baud = 115200        # default 115200: every link's rate unless given below
    host_baud = 115200   # optional: the host link's rate (ST-LINK virtual COM port on a board)
    board_baud = 4000000 # optional: every board-to-board link's rate
    bits_per_byte = 10   # default 10 (8N1 framing); the thesis's figures use 8
    retransmit = 0.0     # default 0: retransmission budget, extra wire bytes as a fraction of
                         #   a clean transfer's (splitter.cost.wire); e.g. 0.05 on a noisy line
    kind = "uart"        # default "uart": the link's peripheral (splitter.hardware.links)

    [[link.pair]]                 # optional, any number: one board-to-board link's own rate
    devices = ["a", "b"]          # two different devices of this file, in either order
    baud = 2000000

    [[device]]
    name = "h7"              # unique, [a-z0-9_-]{1,64}
    board = "nucleo-h743zi"  # a board definition (board_catalog.toml): part, HSE, USARTs, pins
    mcu = "STM32H743ZI"      # a catalog part (optional with board: must then be the board's),
                             #   or instead: part = { name = ..., flash_kib = ..., ram_kib = ...,
                             #   clock_mhz = ..., cpm = ..., family = "H7" }
    flash = "75%"            # optional, default "100%"
    ram = "100%"             # optional, default "100%"
    clock_mhz = 480          # optional: the clock the firmware sets up (default the part's
                             #   catalog clock, which is also its maximum)
    cpm = 6                  # optional override of the part's cycles per MAC
    cpm_by_class = { conv = 5.1, depthwise = 6.0, dense = 4.2, other = 3.0 }  # optional
    port = "/dev/ttyACM0"    # optional
    probe = "066DFF..."      # optional probe serial number for flashing

    [calibration.real.STM32H743ZI]   # written by `splitter calibrate` (bench over --port)
    factor = 1.12                    # measured / estimated cycles, every class not listed
    by_class = { conv = 1.08, depthwise = 1.31 }   # optional, per op class
    fit = "per-class NNLS over 5 sub-models on 2 devices"   # optional: how it was fitted
    error_pct = 2.4                  # optional: largest |residual| of the fit, %
    bench = "out/bench.json"         # optional: the bench it came from

    [calibration.emulated.STM32F405RG]   # from a bench under QEMU (`bench --emulate`)
    factor = 0.047

A calibration belongs to a part, not a device: every device of the part gets the same factors.
A plan predicting real boards uses ``[calibration.real.*]`` only, a prediction of an emulated
run (``--emulated``) ``[calibration.emulated.*]`` only (:func:`for_prediction`).

Size strings: ``"NN%"`` of the part (0 < NN <= 100, no space before ``%``), ``"NNN KiB"``
absolute, ``"-NN KiB"`` = the part's size minus a reserve. ``KB`` is read as KiB (1024 bytes)
because the thesis writes sizes such as ``"-70 KB"`` in KiB; ``MiB``/``MB`` are 1024 KiB.

Checked here, at plan time, for every device on a board or a catalog part
(``board_catalog.device_wiring``): the clock tree reaches ``clock_mhz`` (else one line naming the
part's maximum), and every USART the device may use (the first N of its list for N devices: the
host plus N - 1 peers) gets a valid baud-rate divisor within 2 % for the rate of each link it
may carry (the first, the host link's rate; the others, every board-to-board rate of the
device: ``board_baud`` and its ``[[link.pair]]`` rates), else one line naming the link, the
USART's limit and the nearest valid rates; on a board, the host link's baud rate is at most
what its ST-LINK's virtual COM port carries (``board_catalog.STLINKS``, one line naming the
limit). Only the host link is checked against the ST-LINK: board-to-board links are wired
USART to USART. Board
names match in any case and by alias; the device keeps the catalog's spelling. Inline parts
(``part = {...}``, which also describe hypothetical parts for planning studies) get the same
checks when firmware is generated for them.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from splitter.errors import BoardFileError
from splitter.hardware.board_catalog import check_host_baud, device_wiring, get_board
from splitter.hardware.catalog import get_part, part_from_table
from splitter.hardware.families import family_for
from splitter.hardware.links import DEFAULT_KIND, LINK_KINDS, link_kind
from splitter.inputs import parse_toml, read_input_text
from splitter.ir import CALIBRATION_KINDS, Boards, Calibration, Device, LinkSpec, PairBaud, Part
from splitter.names import DEVICE_NAME, PORT, PROBE, problem

TOP_KEYS = ("link", "device", "calibration")
LINK_KEYS = ("baud", "bits_per_byte", "retransmit", "kind", "host_baud", "board_baud", "pair")
PAIR_KEYS = ("devices", "baud")
DEVICE_KEYS = (
    "name", "board", "mcu", "part", "flash", "ram", "clock_mhz", "cpm", "cpm_by_class", "port",
    "probe",
)  # fmt: skip
CALIBRATION_KEYS = ("factor", "by_class", "fit", "error_pct", "bench")
PART_REQUIRED = ("name", "flash_kib", "ram_kib", "clock_mhz", "cpm", "family")
PART_OPTIONAL = ("fpu", "flash_origin", "ram_regions", "usarts", "source")
CPM_CLASSES = ("conv", "depthwise", "dense", "other")
NAME_RE = DEVICE_NAME  # full match only (splitter.names)
SIZE_RE = re.compile(
    r"^(?P<neg>-)?(?P<num>\d+(?:\.\d+)?)(?:(?P<pct>%)|\s?(?P<unit>[KkMm]i?[Bb]|B|bytes)?)$"
)
SIZE_FIX = (
    "write 'NN%' (no space), 'NNN KiB', '-NN KiB' (part minus a reserve) or a number of bytes"
)
#: Upper bounds of the numbers a boards file gives (beyond any real STM32 by far; they keep
#: later arithmetic finite): key -> largest accepted value.
MAXIMA = {
    "clock_mhz": 10_000.0,
    "cpm": 1e6,
    "flash_kib": float(1 << 22),
    "ram_kib": float(1 << 22),
    "baud": max(k.max_rate for k in LINK_KINDS.values()),
    "host_baud": max(k.max_rate for k in LINK_KINDS.values()),
    "board_baud": max(k.max_rate for k in LINK_KINDS.values()),
    "bits_per_byte": 64,
}
#: Largest address of a 32-bit Cortex-M memory map.
ADDRESS_MAX = (1 << 32) - 1


def load_boards(path: str | Path) -> Boards:
    """Parse a boards.toml file into :class:`Boards` (devices in file order)."""
    p = Path(path)
    text = read_input_text(p, "board file", error=BoardFileError)
    return boards_from_dict(parse_toml(text, str(p), error=BoardFileError), str(p))


def boards_from_dict(data: Mapping[str, Any], where: str = "boards.toml") -> Boards:
    """Build :class:`Boards` from the parsed TOML mapping (``where`` names it in errors)."""
    _no_extra_keys(data, TOP_KEYS, where, "top level")
    link = _parse_link(data.get("link", {}), where)
    raw_devices = data.get("device")
    if not raw_devices:
        raise BoardFileError(
            f"{where}: no [[device]] entries; add at least one [[device]] with name and mcu"
        )
    if not isinstance(raw_devices, list):
        raise BoardFileError(f"{where}: 'device' must be an array of tables; write [[device]]")
    devices: list[Device] = []
    seen: dict[str, int] = {}
    for index, raw in enumerate(raw_devices):
        dev = _parse_device(raw, index, where)
        if dev.name in seen:
            raise BoardFileError(
                f"{where}: device[{index}] name '{dev.name}' duplicates device[{seen[dev.name]}]; "
                "give every device a unique name"
            )
        seen[dev.name] = index
        devices.append(dev)
    link = replace(link, pairs=_parse_pairs(data.get("link", {}).get("pair"), devices, where))
    for dev in devices:
        if dev.board is not None or _in_catalog(dev.part):
            check_device_links(dev, link, devices, where)
    calibrations = _parse_calibrations(data.get("calibration", {}), where)
    boards = Boards(devices=tuple(devices), link=link, source_path=where, calibrations=calibrations)
    return for_prediction(boards, emulated=False)


def for_prediction(boards: Boards, emulated: bool) -> Boards:
    """``boards`` predicting real runs (``emulated=False``: each device gets its part's
    ``[calibration.real.PART]``) or emulated runs (``[calibration.emulated.PART]`` only and the
    emulator's clock, :mod:`splitter.cost.calibration`); a part without one stays uncalibrated."""
    kind = "emulated" if emulated else "real"
    table = {c.part: c for c in boards.calibrations if c.kind == kind}
    devices = tuple(
        replace(d, calibration=table.get(d.part.name), emulated=emulated) for d in boards.devices
    )
    return replace(boards, devices=devices)


def calibration_label(devices: Iterable[Device]) -> str:
    """Which calibration the devices' estimates use: ``"none"``, ``"emulated"``, ``"real"``, or
    e.g. ``"real (STM32F405RG); none (STM32F446RE)"`` when only some parts have one."""
    by_part: dict[str, str] = {}
    for d in devices:
        by_part.setdefault(d.part.name, d.calibration_label)
    labels = set(by_part.values())
    if len(labels) == 1:
        return labels.pop()
    return "; ".join(f"{v} ({k})" for k, v in by_part.items())


def _parse_calibrations(raw: Any, where: str) -> tuple[Calibration, ...]:
    """Every ``[calibration.KIND.PART]`` table (KIND in :data:`CALIBRATION_KINDS`)."""
    fix = "write [calibration.real.PART] or [calibration.emulated.PART] tables"
    if not isinstance(raw, dict):
        raise BoardFileError(f"{where}: 'calibration' must be a table; {fix}")
    _no_extra_keys(raw, CALIBRATION_KINDS, where, "[calibration]")
    out = []
    for kind, parts in raw.items():
        if not isinstance(parts, dict):
            raise BoardFileError(f"{where}: calibration.{kind} must be a table; {fix}")
        for part, table in parts.items():
            out.append(_parse_calibration(kind, part, table, where))
    return tuple(out)


def _parse_calibration(kind: str, part: str, table: Any, where: str) -> Calibration:
    ctx = f"[calibration.{kind}.{part}]"
    if not isinstance(table, dict):
        raise BoardFileError(f"{where}: {ctx} must be a table with factor = ...")
    _no_extra_keys(table, CALIBRATION_KEYS, where, ctx)
    if "factor" not in table:
        raise BoardFileError(f"{where}: {ctx} lacks factor; add factor = (measured / estimated)")
    by_class = table.get("by_class", {})
    if not isinstance(by_class, dict):
        raise BoardFileError(f"{where}: {ctx} by_class must be an inline table {{ conv = 1.1 }}")
    _no_extra_keys(by_class, CPM_CLASSES, where, f"{ctx} by_class")
    err = table.get("error_pct")
    for key in ("fit", "bench"):
        if not isinstance(table.get(key, ""), str):
            raise BoardFileError(f"{where}: {ctx} {key} = {table[key]!r}; must be a string")
    return Calibration(
        kind=kind,
        part=part,
        factor=_positive_float(table["factor"], where, f"{ctx} factor", top=MAXIMA["cpm"]),
        by_class={
            k: _positive_float(v, where, f"{ctx} by_class.{k}", top=MAXIMA["cpm"])
            for k, v in by_class.items()
        },
        fit=str(table.get("fit", "")),
        error_pct=None if err is None else _non_negative(err, where, f"{ctx} error_pct"),
        bench=str(table.get("bench", "")),
    )


def _non_negative(value: Any, where: str, key: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value < math.inf:
        raise BoardFileError(f"{where}: {key} = {value!r}; must be a finite number >= 0")
    return float(value)


def _in_catalog(part: Part) -> bool:
    """Whether ``part`` is a catalog part (inline ``part = {...}`` tables are not)."""
    try:
        return get_part(part.name) == part
    except BoardFileError:
        return False


def check_device_links(dev: Device, link: LinkSpec, devices: Sequence[Device], where: str) -> None:
    """Plan-time checks of the real board: the clock tree reaches ``dev.clock_hz``, the host
    link's USART (the first) divides ``link.host_rate`` validly and, on a board, its ST-LINK
    carries it; each USART a board-to-board link may use (the next ``len(devices) - 1``: which
    one a peer gets depends on the plan) divides every rate the device's board-to-board links
    may run at (:func:`device_rates`) validly (the link kind's rate check)."""
    ctx = f"{where}: device '{dev.name}'"
    try:
        wiring = device_wiring(dev.part, dev.board, dev.clock_hz, ctx)
    except BoardFileError as exc:
        msg = str(exc)
        raise BoardFileError(msg if msg.startswith(where) else f"{ctx}: {msg}") from None
    host_key = link.rate_key(None)
    if wiring.board is not None:
        check_host_baud(wiring.board, link.host_rate, ctx, host_key)
    family, kind = family_for(dev.part.family), link_kind(link.kind)
    usarts = [u for u, _base in wiring.usarts[: len(devices)]]
    kind.check_rate(family, usarts[0], wiring.tree, link.host_rate,
                    f"{ctx} host link ({usarts[0]})", host_key)  # fmt: skip
    for usart in usarts[1:]:
        for rate, what, key in device_rates(dev.name, link, devices):
            kind.check_rate(family, usart, wiring.tree, rate, f"{ctx} {what} ({usart})", key)


def device_rates(
    name: str, link: LinkSpec, devices: Sequence[Device]
) -> list[tuple[int, str, str]]:
    """``(baud, link, key)`` of every board-to-board link device ``name`` may have: one per
    ``[[link.pair]]`` naming it and, when some peer has none, ``board_baud`` (or ``baud``)."""
    out = []
    for p in link.pairs:
        if name in p.devices:
            peer = p.devices[1] if p.devices[0] == name else p.devices[0]
            out.append((p.baud, f"link to '{peer}'", link.rate_key(name, peer)))
    paired = {d for p in link.pairs if name in p.devices for d in p.devices}
    others = [d.name for d in devices if d.name not in paired and d.name != name]
    if others:
        out.append((link.board_rate, "board-to-board links", link.rate_key(name, others[0])))
    return out


def _no_extra_keys(
    table: Mapping[str, Any], allowed: tuple[str, ...], where: str, ctx: str
) -> None:
    extra = [k for k in table if k not in allowed]
    if extra:
        raise BoardFileError(
            f"{where}: {ctx}: unknown key(s) {', '.join(map(repr, extra))}; "
            f"allowed keys are {', '.join(allowed)}"
        )


def _positive_int(value: Any, where: str, key: str, default: int) -> int:
    if value is None:
        return default
    top = int(MAXIMA[key.rsplit(" ", 1)[-1]])
    if isinstance(value, bool) or not isinstance(value, int) or not 0 < value <= top:
        raise BoardFileError(f"{where}: {key} = {value!r}; must be an integer in 1..{top}")
    return value


def _parse_link(raw: Any, where: str) -> LinkSpec:
    if not isinstance(raw, dict):
        raise BoardFileError(f"{where}: 'link' must be a table; write [link]")
    _no_extra_keys(raw, LINK_KEYS, where, "[link]")
    kind = raw.get("kind", DEFAULT_KIND)
    if kind not in LINK_KINDS:
        raise BoardFileError(
            f"{where}: [link] kind = {kind!r}; use one of {', '.join(map(repr, LINK_KINDS))}"
        )
    lk = link_kind(kind)
    baud = _positive_int(raw.get("baud"), where, "[link] baud", 115200)
    bpb = _positive_int(
        raw.get("bits_per_byte"), where, "[link] bits_per_byte", lk.default_bits_per_byte
    )
    rho = raw.get("retransmit", 0.0)
    if rho != 0:
        rho = _positive_float(rho, where, "[link] retransmit", top=100.0)
    return LinkSpec(
        baud=baud,
        bits_per_byte=bpb,
        retransmit=float(rho),
        kind=kind,
        host_baud=_positive_int(raw.get("host_baud"), where, "[link] host_baud", 0),
        board_baud=_positive_int(raw.get("board_baud"), where, "[link] board_baud", 0),
    )


#: The fix every malformed ``[[link.pair]]`` names.
PAIR_FIX = '; write [[link.pair]] devices = ["a", "b"] baud = 4000000'


def _parse_pairs(raw: Any, devices: Sequence[Device], where: str) -> tuple[PairBaud, ...]:
    """The ``[[link.pair]]`` tables: two different devices of the file, once each, and a baud."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise BoardFileError(f"{where}: [link] pair must be an array of tables{PAIR_FIX}")
    names = [d.name for d in devices]
    out: list[PairBaud] = []
    for i, table in enumerate(raw):
        ctx = f"[[link.pair]] #{i + 1}"
        pair = _parse_pair(table, names, where, ctx)
        if any(set(p.devices) == set(pair.devices) for p in out):
            a, b = pair.devices
            raise BoardFileError(
                f"{where}: {ctx} gives the link {a}-{b} a second baud; keep one [[link.pair]] "
                "per pair of devices"
            )
        out.append(pair)
    return tuple(out)


def _parse_pair(table: Any, names: Sequence[str], where: str, ctx: str) -> PairBaud:
    """One ``[[link.pair]]``: ``devices``, two different devices of ``names``, and ``baud``."""
    if not isinstance(table, dict):
        raise BoardFileError(f"{where}: {ctx} must be a table{PAIR_FIX}")
    _no_extra_keys(table, PAIR_KEYS, where, ctx)
    pair = table.get("devices")
    if not isinstance(pair, list) or len(pair) != 2 or not all(isinstance(x, str) for x in pair):
        raise BoardFileError(f"{where}: {ctx} devices = {pair!r}; name two devices{PAIR_FIX}")
    for x in pair:
        if x not in names:
            raise BoardFileError(
                f"{where}: {ctx} names device {x!r}, which the file does not have; use two of "
                f"{', '.join(names)}"
            )
    if pair[0] == pair[1]:
        raise BoardFileError(
            f"{where}: {ctx} pairs device {pair[0]!r} with itself; a link joins two different "
            f"devices (of {', '.join(names)})"
        )
    if "baud" not in table:
        raise BoardFileError(f"{where}: {ctx} lacks baud; add baud = 4000000")
    return PairBaud((pair[0], pair[1]), _positive_int(table["baud"], where, f"{ctx} baud", 0))


def _parse_device(raw: Any, index: int, where: str) -> Device:
    ctx = f"device[{index}]"
    if not isinstance(raw, dict):
        raise BoardFileError(f"{where}: {ctx} must be a table; write [[device]]")
    _no_extra_keys(raw, DEVICE_KEYS, where, ctx)
    name = raw.get("name")
    bad = problem(DEVICE_NAME, name, f"{ctx} name")
    if bad:
        raise BoardFileError(f"{where}: {bad}")
    assert isinstance(name, str)
    ctx = f"device[{index}] '{name}'"
    part = _device_part(raw, where, ctx)
    # the catalog's spelling: "NUCLEO-F446RE" and aliases name the same board
    board = get_board(raw["board"], where).name if "board" in raw else None
    clock = _positive_float(raw.get("clock_mhz", part.clock_mhz), where, f"{ctx} clock_mhz")
    cpm = _positive_float(raw.get("cpm", part.cpm), where, f"{ctx} cpm")
    return Device(
        name=name,
        part=part,
        flash_bytes=parse_size(raw.get("flash", "100%"), part.flash_kib, where, f"{ctx} flash"),
        ram_bytes=parse_size(raw.get("ram", "100%"), part.ram_kib, where, f"{ctx} ram"),
        clock_hz=clock * 1e6,
        cpm=cpm,
        port=_opt_str(raw.get("port"), where, f"{ctx} port", PORT),
        probe=_opt_str(raw.get("probe"), where, f"{ctx} probe", PROBE),
        cpm_by_class=_cpm_by_class(raw.get("cpm_by_class"), where, ctx),
        board=board,
    )


def _device_part(raw: Mapping[str, Any], where: str, ctx: str) -> Part:
    if "board" in raw:
        board = get_board(raw["board"], f"{where}: {ctx} board")
        if "part" in raw or raw.get("mcu", board.part) != board.part:
            raise BoardFileError(
                f"{where}: {ctx} board {board.name} carries {board.part}; drop mcu / part or "
                f'write mcu = "{board.part}"'
            )
        return get_part(board.part)
    has_mcu, has_part = "mcu" in raw, "part" in raw
    if has_mcu == has_part:
        raise BoardFileError(
            f'{where}: {ctx} needs exactly one of mcu = "<catalog part>" or part = {{...}}; '
            "keep one"
        )
    if has_mcu:
        try:
            return get_part(raw["mcu"])
        except BoardFileError as exc:
            raise BoardFileError(f"{where}: {ctx} mcu: {exc}") from None
    table = raw["part"]
    if not isinstance(table, dict):
        raise BoardFileError(f"{where}: {ctx} part must be an inline table {{ name = ..., ... }}")
    _no_extra_keys(table, PART_REQUIRED + PART_OPTIONAL, where, f"{ctx} part")
    missing = [k for k in PART_REQUIRED if k not in table]
    if missing:
        raise BoardFileError(f"{where}: {ctx} part lacks {', '.join(missing)}; add them")
    for key in ("flash_kib", "ram_kib", "clock_mhz", "cpm"):
        _positive_float(table[key], where, f"{ctx} part.{key}")
    _check_part_types(table, where, f"{ctx} part")
    return part_from_table(table["name"], table, where)


def _check_part_types(table: Mapping[str, Any], where: str, ctx: str) -> None:
    """The optional keys of an inline part have the catalog's types and ranges."""
    for key in ("name", "family", "fpu", "source"):
        if key in table and not isinstance(table[key], str):
            raise BoardFileError(f"{where}: {ctx}.{key} = {table[key]!r}; must be a string")
    if "flash_origin" in table:
        _address(table["flash_origin"], where, f"{ctx}.flash_origin")
    usarts = table.get("usarts", [])
    if not isinstance(usarts, list) or not all(isinstance(u, str) for u in usarts):
        raise BoardFileError(
            f'{where}: {ctx}.usarts = {usarts!r}; must be a list of USART names, e.g. ["USART3"]'
        )
    regions = table.get("ram_regions", [])
    fix = 'write ram_regions = [["DTCM", 0x20000000, 128], ...] (name, origin, size KiB)'
    if not isinstance(regions, list):
        raise BoardFileError(f"{where}: {ctx}.ram_regions = {regions!r}; {fix}")
    for i, region in enumerate(regions):
        key = f"{ctx}.ram_regions[{i}]"
        if not isinstance(region, list) or len(region) != 3 or not isinstance(region[0], str):
            raise BoardFileError(f"{where}: {key} = {region!r}; {fix}")
        _address(region[1], where, f"{key} origin")
        _positive_float(region[2], where, f"{key} size", top=MAXIMA["ram_kib"])


def _address(value: Any, where: str, key: str) -> int:
    """An integer address of the 32-bit memory map."""
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= ADDRESS_MAX:
        raise BoardFileError(
            f"{where}: {key} = {value!r}; must be an integer address in 0..0x{ADDRESS_MAX:X}"
        )
    return value


def _positive_float(value: Any, where: str, key: str, top: float | None = None) -> float:
    """A finite number in (0, top]; ``top`` defaults to :data:`MAXIMA` of ``key``'s last word."""
    name = key.rsplit(".", 1)[-1].rsplit(" ", 1)[-1]
    top = top if top is not None else MAXIMA.get(name, MAXIMA["cpm"])
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)
        or not 0 < value <= top
    ):
        raise BoardFileError(
            f"{where}: {key} = {value!r}; must be a finite positive number at most {top:g}"
        )
    return float(value)


def _opt_str(value: Any, where: str, key: str, pattern: re.Pattern[str]) -> str | None:
    """``None`` when absent, else a string fully matching ``pattern`` (splitter.names)."""
    if value is None:
        return None
    bad = problem(pattern, value, key)
    if bad:
        raise BoardFileError(f"{where}: {bad}")
    return str(value)


def _cpm_by_class(value: Any, where: str, ctx: str) -> dict[str, float]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BoardFileError(
            f"{where}: {ctx} cpm_by_class must be an inline table like "
            "{ conv = 5.1, dense = 4.2 }"
        )
    _no_extra_keys(value, CPM_CLASSES, where, f"{ctx} cpm_by_class")
    return {k: _positive_float(v, where, f"{ctx} cpm_by_class.{k}") for k, v in value.items()}


def parse_size(text: Any, part_kib: float, where: str, key: str) -> int:
    """Usable bytes from a size string: ``"NN%"``, ``"NNN KiB"`` or ``"-NN KiB"`` (reserve).

    ``NN%`` gives ``floor(part * NN / 100)`` bytes; ``-NN KiB`` gives ``part - NN KiB``; the result
    must be positive and at most the part's size. Units in any case: ``KiB`` = ``KB`` = ``kB``
    = 1024 bytes (the thesis's usage, and ST datasheets' "Kbytes"), ``MiB`` = ``MB`` = 1024 KiB;
    a number alone (``256000`` or ``"256000"``, or with ``B``) is bytes.
    """
    part_bytes = round(part_kib * 1024)
    if isinstance(text, int) and not isinstance(text, bool):
        text = str(text)
    m = SIZE_RE.match(text) if isinstance(text, str) else None
    if m is None:
        raise BoardFileError(f"{where}: {key} = {text!r} is not a size; {SIZE_FIX}")
    num = float(m["num"])
    if m["pct"]:
        if m["neg"] or not 0 < num <= 100:
            raise BoardFileError(
                f"{where}: {key} = {text!r}: a percentage must be in (0, 100]; {SIZE_FIX}"
            )
        return int(part_bytes * num / 100)
    unit = (m["unit"] or "B").lower()
    scale = {"mib": 1 << 20, "mb": 1 << 20, "kib": 1024, "kb": 1024}.get(unit, 1)
    amount = round(num * scale)
    size = part_bytes - amount if m["neg"] else amount
    if m["neg"] and size <= 0:
        raise BoardFileError(
            f"{where}: {key} = {text!r} reserves {amount / 1024:g} KiB but the part has only "
            f'{part_kib:g} KiB; reserve less (e.g. "-{part_kib / 2:g} KiB") or give a size in '
            f"(0, {part_kib:g}] KiB"
        )
    if not 0 < size <= part_bytes:
        raise BoardFileError(
            f"{where}: {key} = {text!r} gives {size / 1024:g} KiB but the part has "
            f"{part_kib:g} KiB; give a size in (0, {part_kib:g}] KiB"
        )
    return size
