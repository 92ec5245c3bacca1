"""The planner's estimates for a compiled plan: per sub-model compute, per link transfer.

Everything comes from the plan manifest (``OUT/plan.json``, :mod:`splitter.manifest`: per
sub-model the planner's MACs, total and split by op class, and the boundary tensors) plus the
board file; nothing is re-imported. The times use the partition engine's own formulas:

* compute of sub-model ``k`` on device ``i``: ``layer_time(cost_k, device_i)`` with ``cost_k`` the
  sub-model's summed MACs, i.e. ``MAC_k * CpM_i / f_i`` (thesis eq. 6) or, with a calibrated
  ``cpm_by_class``, ``sum_c MAC_kc * CpM_ic / f_i`` (``splitter.partition.problem.layer_time``,
  linear in the MACs, so the sum over the layers equals the time of the summed cost);
* transfer of ``B`` bytes over a link: ``W * bits_per_byte / baud`` with ``W`` the bytes the
  protocol puts on the wire for them (:mod:`splitter.cost.wire`: framing, TIMING records, ACKs,
  retransmission budget) for a plan made with the wire link model, ``W = B`` for one made with
  the thesis's (SPEC.md, Links). The ``i``-th transfer of an inference (host -> first is 0)
  carries ``i`` TIMING records. The host's transfers are always in the estimated latency: the
  bench measures them.

Without a board file (``--target``, else the manifest's ``boards_path``) the devices the plan was
made for are taken from the manifest (the estimate then says so).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitter.cost.wire import LinkModel
from splitter.errors import InputFileError
from splitter.inputs import parse_json, read_input_text
from splitter.ir import Boards, Device, LayerCost, LinkSpec
from splitter.manifest import PlanManifest, tensor_bytes

HOST = "host"


@dataclass(frozen=True)
class SubModelCost:
    """MACs of one sub-model (total and by op class), as the planner counted them."""

    index: int
    device: str
    macs: int
    macs_by_class: dict[str, int]

    @property
    def cost(self) -> LayerCost:
        """The sub-model's summed MACs as a :class:`LayerCost` (for ``layer_time``)."""
        return LayerCost(macs=self.macs, macs_by_class=tuple(sorted(self.macs_by_class.items())))


def find_target(manifest: PlanManifest, target: str | Path | None) -> Path | None:
    """The board file: ``target`` if given, else the manifest's (if it still exists)."""
    if target is not None:
        return Path(target)
    recorded = Path(manifest.boards_path)
    return recorded if recorded.is_file() else None


def load_devices(
    manifest: PlanManifest, target: Path | None
) -> tuple[dict[str, Device], LinkSpec, str]:
    """Devices by name, link settings and where they came from.

    From the board file when there is one (e.g. a calibrated one), else the devices the plan
    was made for, as the manifest records them (clock, CpM, per-class CpM, budgets).
    """
    from splitter.hardware.boards import load_boards

    if target is not None:
        boards: Boards = load_boards(target)
        return {d.name: d for d in boards.devices}, boards.link, str(target)
    from splitter.hardware.catalog import get_part

    devices = {
        d.name: Device(
            name=d.name,
            part=get_part(d.mcu),
            flash_bytes=d.flash_budget,
            ram_bytes=d.ram_budget,
            clock_hz=d.clock_hz,
            cpm=d.cpm,
            port=d.port,
            cpm_by_class=dict(d.cpm_by_class),
        )
        for d in manifest.devices
    }
    link = LinkSpec(
        baud=manifest.baud, bits_per_byte=manifest.bits_per_byte, retransmit=manifest.retransmit
    )
    return devices, link, "the plan's devices in plan.json (its board file is gone)"


def submodel_costs(manifest: PlanManifest) -> list[SubModelCost]:
    """Per sub-model MACs (total and by op class) from the manifest."""
    return [
        SubModelCost(s.index, s.device, s.macs, dict(s.macs_by_class)) for s in manifest.submodels
    ]


def compute_seconds(cost: SubModelCost, device: Device) -> float:
    """``layer_time(cost_k, device)`` (planner's formula, see the module docstring)."""
    from splitter.partition.problem import layer_time

    return layer_time(cost.cost, device)


def link_transfers(manifest: PlanManifest) -> list[dict[str, Any]]:
    """Every transfer of one inference in order: host -> first, k -> k+1, last -> host.

    Each entry: ``from``, ``to``, ``submodel`` (the receiving sub-model; the last one's own index
    for the result) and ``bytes`` (the boundary tensors' size from the manifest).
    """
    subs = manifest.submodels
    out = []
    for k, sub in enumerate(subs):
        nbytes = sum(tensor_bytes(t) or 0 for t in sub.inputs)
        src = HOST if k == 0 else subs[k - 1].device
        out.append({"from": src, "to": sub.device, "submodel": k, "bytes": nbytes})
    last = subs[-1]
    nbytes = sum(tensor_bytes(t) or 0 for t in last.outputs)
    out.append({"from": last.device, "to": HOST, "submodel": len(subs) - 1, "bytes": nbytes})
    return out


def estimate(
    manifest: PlanManifest,
    target: Path | None,
    costs: Sequence[SubModelCost] | None = None,
) -> dict[str, Any]:
    """The ``estimate`` object of bench.json (see the module docstring for the formulas)."""
    devices, link, source = load_devices(manifest, target)
    costs = list(costs) if costs is not None else submodel_costs(manifest)
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
    model = LinkModel(wire=manifest.link_model == "wire")
    wires = [model.transfer(t["bytes"], i, link) for i, t in enumerate(link_transfers(manifest))]
    links = [
        {**t, "wire_bytes": w.total, "seconds": w.seconds(link)}
        for t, w in zip(link_transfers(manifest), wires, strict=True)
    ]
    return {
        "source": source,
        "formulas": "compute = sum MAC*CpM/f (per class when calibrated); link = W*bits/baud, "
        f"W = {'bytes on the wire' if model.wire else 'B'}",
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
        "plan_latency_s": manifest.latency_s,
        "plan_throughput_per_s": manifest.throughput_per_s,
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
    if not Path(path).exists():
        raise InputFileError(f"{path}: {what} missing; {fix}")
    data = parse_json(read_input_text(path, what), str(path))
    if not isinstance(data, dict):
        raise InputFileError(f"{path}: {what} is not a JSON object; {fix}")
    return data
