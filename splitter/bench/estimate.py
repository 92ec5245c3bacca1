"""The planner's estimates for a compiled plan: per sub-model compute, per link transfer.

Everything comes from ``OUT`` itself plus the board file: the sub-model files
(``OUT/submodels/NN_<device>.onnx``) are imported with :func:`splitter.importers.load_chain`,
which gives each layer's :class:`~splitter.ir.LayerCost` (MACs split by op class), and the times
use the partition engine's own formulas:

* compute of sub-model ``k`` on device ``i``: ``sum_j layer_time(cost_j, device_i)``, i.e.
  ``MAC_j * CpM_i / f_i`` (thesis eq. 6) or, with a calibrated ``cpm_by_class``,
  ``sum_c MAC_jc * CpM_ic / f_i`` (``splitter.partition.problem.layer_time``);
* transfer of ``B`` bytes over a link: ``B * bits_per_byte / baud`` (SPEC.md, Links).

Without a board file the parts of ``OUT/firmware/wiring.json`` are looked up in the catalog with
their default clock and CpM (the estimate then says so).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitter.errors import InputFileError
from splitter.ir import Boards, Chain, Device, LinkSpec

#: plan.json keys that may name the board file compile used (newest first).
TARGET_KEYS = ("target", "boards_path", "boards")
HOST = "host"


@dataclass(frozen=True)
class SubModelCost:
    """MACs of one sub-model (total and by op class) from its file's layer chain."""

    index: int
    device: str
    macs: int
    macs_by_class: dict[str, int]
    chain: Chain


def find_target(plan: Mapping[str, Any], out_dir: Path, target: str | Path | None) -> Path | None:
    """The board file: ``target`` if given, else the one plan.json names (if it still exists)."""
    if target is not None:
        return Path(target)
    for key in TARGET_KEYS:
        value = plan.get(key)
        if isinstance(value, str) and value:
            for cand in (Path(value), Path(out_dir) / value):
                if cand.is_file():
                    return cand
    return None


def load_devices(
    plan: Mapping[str, Any], wiring: Mapping[str, Any], target: Path | None
) -> tuple[dict[str, Device], LinkSpec, str]:
    """Devices by name, link settings and where they came from (board file or catalog)."""
    from splitter.hardware.boards import load_boards

    if target is not None:
        boards: Boards = load_boards(target)
        return {d.name: d for d in boards.devices}, boards.link, str(target)
    from splitter.hardware.catalog import get_part

    devices = {}
    for d in wiring["devices"]:
        part = get_part(str(d["part"]))
        devices[d["name"]] = Device(
            name=d["name"],
            part=part,
            flash_bytes=round(part.flash_kib * 1024),
            ram_bytes=round(part.ram_kib * 1024),
            clock_hz=part.clock_mhz * 1e6,
            cpm=part.cpm,
        )
    link = LinkSpec(baud=int(wiring.get("baud", 115200)))
    return devices, link, "catalog defaults (pass --target BOARDS.toml for the board file's values)"


def submodel_costs(out_dir: Path, plan: Mapping[str, Any]) -> list[SubModelCost]:
    """Per sub-model MACs from ``OUT/submodels/*`` (layer 0 of each file is its input)."""
    from splitter.importers import load_chain

    costs = []
    for sub in plan.get("submodels", []):
        path = Path(out_dir) / str(sub.get("file", ""))
        if not path.is_file():
            raise InputFileError(f"{path}: sub-model file missing; re-run `splitter compile`")
        chain = load_chain(path)
        by_class: dict[str, int] = {}
        for layer in chain.layers:
            for cls, m in layer.cost.macs_by_class:
                by_class[cls] = by_class.get(cls, 0) + m
        macs = sum(layer.cost.macs for layer in chain.layers)
        costs.append(SubModelCost(int(sub["index"]), str(sub["device"]), macs, by_class, chain))
    return costs


def compute_seconds(cost: SubModelCost, device: Device) -> float:
    """``sum_j layer_time(cost_j, device)`` over the sub-model's layers (planner's formula)."""
    from splitter.partition.problem import layer_time

    return sum(layer_time(layer.cost, device) for layer in cost.chain.layers)


def link_transfers(plan: Mapping[str, Any]) -> list[dict[str, Any]]:
    """Every transfer of one inference in order: host -> first, k -> k+1, last -> host.

    Each entry: ``from``, ``to``, ``submodel`` (the receiving sub-model; the last one's own index
    for the result) and ``bytes`` (the boundary tensor's size from plan.json).
    """
    subs = plan.get("submodels", [])
    out = []
    for k, sub in enumerate(subs):
        nbytes = sum(int(t.get("bytes") or 0) for t in sub.get("inputs", []))
        src = HOST if k == 0 else str(subs[k - 1]["device"])
        out.append({"from": src, "to": str(sub["device"]), "submodel": k, "bytes": nbytes})
    last = subs[-1]
    nbytes = sum(int(t.get("bytes") or 0) for t in last.get("outputs", []))
    out.append(
        {"from": str(last["device"]), "to": HOST, "submodel": len(subs) - 1, "bytes": nbytes}
    )
    return out


def estimate(
    out_dir: Path,
    plan: Mapping[str, Any],
    wiring: Mapping[str, Any],
    target: Path | None,
    costs: Sequence[SubModelCost] | None = None,
) -> dict[str, Any]:
    """The ``estimate`` object of bench.json (see the module docstring for the formulas)."""
    devices, link, source = load_devices(plan, wiring, target)
    costs = list(costs) if costs is not None else submodel_costs(out_dir, plan)
    subs: list[dict[str, Any]] = []
    for c in costs:
        dev = _device(devices, c.device, source)
        seconds = compute_seconds(c, dev)
        subs.append(
            {
                "index": c.index,
                "device": c.device,
                "macs": c.macs,
                "macs_by_class": dict(sorted(c.macs_by_class.items())),
                "seconds": seconds,
                "cycles": seconds * dev.clock_hz,
            }
        )
    links = [
        {**t, "seconds": t["bytes"] * link.bits_per_byte / link.baud} for t in link_transfers(plan)
    ]
    return {
        "source": source,
        "formulas": "compute = sum MAC*CpM/f (per class when calibrated); link = B*bits/baud",
        "devices": [
            {
                "device": d.name,
                "clock_hz": d.clock_hz,
                "cpm": d.cpm,
                "cpm_by_class": dict(d.cpm_by_class),
            }
            for d in devices.values()
        ],
        "submodels": subs,
        "links": links,
        "latency_s": sum(s["seconds"] for s in subs) + sum(ln["seconds"] for ln in links),
        "plan_latency_s": plan.get("latency_s"),
        "plan_throughput_per_s": plan.get("throughput_per_s"),
    }


def _device(devices: Mapping[str, Device], name: str, source: str) -> Device:
    try:
        return devices[name]
    except KeyError:
        raise InputFileError(
            f"{source}: has no device {name!r} of plan.json; pass the board file the plan was "
            "compiled with (--target)"
        ) from None


def read_json(path: Path, what: str, fix: str) -> dict[str, Any]:
    """A JSON object from ``path`` or an :class:`InputFileError` naming ``fix``."""
    try:
        data = json.loads(Path(path).read_text())
    except FileNotFoundError:
        raise InputFileError(f"{path}: {what} missing; {fix}") from None
    except (OSError, json.JSONDecodeError) as exc:
        raise InputFileError(f"{path}: {what} unreadable ({exc}); {fix}") from None
    if not isinstance(data, dict):
        raise InputFileError(f"{path}: {what} is not a JSON object; {fix}")
    return data
