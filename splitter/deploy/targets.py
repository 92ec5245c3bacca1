"""Which boards to flash with which images: a compile output ``OUT`` read against boards.toml.

The plan manifest ``OUT/plan.json`` (written by ``splitter compile``, read with
:func:`splitter.manifest.read_manifest`) names the boards file it was planned for
(``boards_path``); ``OUT/firmware/wiring.json`` lists the devices that got a firmware project
and the part each was generated for. The boards file (``--target``, else ``boards_path``) gives
each device's probe serial. Every device with firmware must be in the boards file with the same
part, and the link speed must be the one the firmware was generated for; otherwise the images
would not run on the boards (a mismatch is a one-line error, nothing is flashed).

The images are the part build of each device project (``make`` without ``EMULATOR``):
``OUT/firmware/<device>/build/part/firmware.elf`` and ``firmware.bin`` (``objcopy -O binary``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitter.deploy.flash import ExtFlashImage, FlashTarget
from splitter.errors import BoardFileError, InputFileError
from splitter.hardware.board_catalog import get_board
from splitter.hardware.boards import load_boards
from splitter.ir import Boards, Device
from splitter.manifest import PlanManifest, read_manifest, read_wiring
from splitter.outputs import contained

#: The part build's images inside a device project (see splitter/firmware_templates/Makefile.j2).
PART_BUILD = Path("build") / "part"


@dataclass(frozen=True)
class FlashJob:
    """A compile output resolved for flashing: the boards file used and one target per device."""

    out_dir: Path
    boards_path: Path
    targets: tuple[FlashTarget, ...]


def load_job(out_dir: str | Path, boards_path: str | Path | None = None) -> FlashJob:
    """Read ``OUT`` and the boards file; one :class:`FlashTarget` per device with firmware."""
    out = Path(out_dir).absolute()
    _require_dir(out)
    plan = read_manifest(out)
    wiring = read_wiring(out)
    boards_file = _boards_file(out, plan, boards_path)
    boards = load_boards(boards_file)
    devices = _wired_devices(wiring, out)
    check_matches(boards, devices, int(wiring.get("baud", boards.link.host_rate)), out)
    by_name = {d.name: d for d in boards.devices}
    targets = []
    for entry in devices:
        device = by_name[entry["name"]]
        images = contained(out, f"firmware/{device.name}/{PART_BUILD}")
        targets.append(
            FlashTarget(
                device=device.name,
                mcu=device.part.name,
                probe=device.probe,
                elf=images / "firmware.elf",
                binary=images / "firmware.bin",
                flash_origin=device.part.flash_origin,
                family=device.part.family,
                port=device.port,
                extflash=extflash_image(plan, device),
            )
        )
    return FlashJob(out, boards_file, tuple(targets))


def extflash_image(plan: PlanManifest, device: Device) -> ExtFlashImage | None:
    """The device's weights in external flash (a segmented plan's ``segments.extflash``), with
    the programming setup of its catalog board when that board declares this flash."""
    seg = plan.segments
    if seg is None or seg.device != device.name or not seg.extflash:
        return None
    ext = dict(seg.extflash)
    spec = get_board(device.board, device.name).extflash if device.board else None
    known = spec is not None and spec.origin == int(ext["origin"])
    return ExtFlashImage(
        name=str(ext["name"]),
        origin=int(ext["origin"]),
        bytes=seg.weights_bytes,
        openocd_board=spec.openocd_board if known and spec else None,
        cubeprog_loader=spec.cubeprog_loader if known and spec else None,
    )


def _require_dir(out: Path) -> None:
    if not out.is_dir():
        raise InputFileError(
            f"{out}: no such directory; run `splitter compile MODEL --target BOARDS.toml -o {out}`"
        )


def _boards_file(out: Path, plan: PlanManifest, given: str | Path | None) -> Path:
    """``--target`` when given, else the boards file plan.json was compiled against."""
    if given is not None:
        return Path(given)
    recorded = plan.boards_path
    if not Path(recorded).is_file():
        raise BoardFileError(
            f"{recorded}: board file {out} was compiled with no longer exists; "
            "pass --target BOARDS.toml"
        )
    return Path(recorded)


def _wired_devices(wiring: dict[str, Any], out: Path) -> list[dict[str, Any]]:
    """The devices of wiring.json (those hosting a sub-model), each with ``name`` and ``part``."""
    devices = wiring.get("devices")
    if not isinstance(devices, list) or not devices or not all(map(_is_device, devices)):
        raise InputFileError(
            f"{out}/firmware/wiring.json: no devices with name and part; re-run `splitter compile`"
        )
    return devices


def _is_device(entry: object) -> bool:
    return isinstance(entry, dict) and "name" in entry and "part" in entry


def check_matches(boards: Boards, devices: list[dict[str, Any]], baud: int, out: Path) -> None:
    """Every device with firmware is in ``boards`` with the same part; the baud rates agree
    (the host link's, and each board-to-board link's that wiring.json records)."""
    where = boards.source_path
    by_name = {d.name: d for d in boards.devices}
    missing = [d["name"] for d in devices if d["name"] not in by_name]
    if missing:
        raise BoardFileError(
            f"{where}: no device named {', '.join(missing)}, but {out} has firmware for "
            f"{', '.join(d['name'] for d in devices)}; pass the boards file {out} was compiled "
            "with (--target), or re-run `splitter compile` with this one"
        )
    for entry in devices:
        part = by_name[entry["name"]].part.name
        if part.upper() != str(entry["part"]).upper():
            raise BoardFileError(
                f"{where}: device {entry['name']} is a {part}, but {out} was compiled for a "
                f"{entry['part']}; re-run `splitter compile` with this boards file"
            )
    if boards.link.host_rate != baud:
        raise BoardFileError(
            f"{where}: host link baud is {boards.link.host_rate}, but the firmware in {out} talks "
            f"at {baud}; re-run `splitter compile` with this boards file"
        )
    for entry in devices:
        for ln in entry.get("links", []):
            peer = ln.get("peer")
            if peer in by_name and "baud" in ln:  # wiring.json from before per-link rates: none
                rate = boards.link.pair_rate(entry["name"], peer)
                if rate != ln["baud"]:
                    raise BoardFileError(
                        f"{where}: link {entry['name']}-{peer} runs at {rate} baud, but the "
                        f"firmware in {out} talks at {ln['baud']}; re-run `splitter compile` "
                        "with this boards file"
                    )
