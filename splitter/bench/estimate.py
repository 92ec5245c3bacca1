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

Without a board file (``--target``, else the manifest's ``boards_path``) the devices the plan
was made for are taken from the manifest (the estimate then says so).

A bench under the emulator is predicted as an emulated run (the emulator's clock and the parts'
``[calibration.emulated.*]`` factors), a bench over ``--port`` as a run on the parts
(``[calibration.real.*]``); the estimate names the calibration it used per device
(:mod:`splitter.cost.calibration`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from splitter.cost.calibration import timing_clock_hz
from splitter.cost.wire import LinkModel
from splitter.errors import InputFileError
from splitter.inputs import parse_json, read_input_text
from splitter.ir import Boards, Calibration, Device, LayerCost, LinkSpec
from splitter.manifest import DeviceEntry, PlanManifest, tensor_bytes

HOST = "host"


@dataclass(frozen=True)
class SubModelCost:
    """MACs of one sub-model (total and by op class) and its kernel-table instructions, as the
    planner counted them (plan.json; the model is not re-imported)."""

    index: int
    device: str
    macs: int
    macs_by_class: dict[str, int]
    #: the kernel cost table's instructions of the sub-model per build (plan.json)
    instructions: tuple[tuple[str, float], ...] = ()

    @property
    def cost(self) -> LayerCost:
        """The sub-model's summed MACs and instructions as a :class:`LayerCost`."""
        return LayerCost(
            macs=self.macs,
            macs_by_class=tuple(sorted(self.macs_by_class.items())),
            instructions=self.instructions,
        )

    def estimated_cycles(self, device: Device) -> dict[str | None, float]:
        """Uncalibrated cycles by op class on ``device`` of the sub-model's summed costs
        (:func:`splitter.partition.problem.estimated_cycles`; the table's instructions are
        shared over the classes by the sub-model's MACs, the planner does so per layer)."""
        from splitter.partition.problem import estimated_cycles

        return estimated_cycles(self.cost, device)


def find_target(manifest: PlanManifest, target: str | Path | None) -> Path | None:
    """The board file: ``target`` if given, else the manifest's (if it still exists)."""
    if target is not None:
        return Path(target)
    recorded = Path(manifest.boards_path)
    return recorded if recorded.is_file() else None


def load_devices(
    manifest: PlanManifest, target: Path | None, emulated: bool = False
) -> tuple[dict[str, Device], LinkSpec, str]:
    """Devices by name, link settings and where they came from, predicting an emulated run or
    one on the parts (``emulated``).

    From the board file when there is one (e.g. a calibrated one), else the devices the plan
    was made for, as the manifest records them (clock, CpM, per-class CpM, budgets, and its
    calibrations when the plan predicted the same kind of run).
    """
    from splitter.hardware.boards import for_prediction, load_boards

    if target is not None:
        boards: Boards = for_prediction(load_boards(target), emulated)
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
            calibration=_manifest_calibration(d) if manifest.emulated == emulated else None,
            emulated=emulated,
        )
        for d in manifest.devices
    }
    link = LinkSpec(
        baud=manifest.baud, bits_per_byte=manifest.bits_per_byte, retransmit=manifest.retransmit
    )
    return devices, link, "the plan's devices in plan.json (its board file is gone)"


def _manifest_calibration(d: DeviceEntry) -> Calibration | None:
    """The calibration the plan used for device ``d`` (``None``: uncalibrated)."""
    if d.calibration == "none":
        return None
    by_class = dict(d.calibration_by_class)
    return Calibration(d.calibration, d.mcu, d.calibration_factor, by_class, "from plan.json")


def submodel_costs(manifest: PlanManifest) -> list[SubModelCost]:
    """Per sub-model MACs (total and by op class) and instructions from the manifest."""
    return [
        SubModelCost(s.index, s.device, s.macs, dict(s.macs_by_class), s.instructions)
        for s in manifest.submodels
    ]


def compute_seconds(cost: SubModelCost, device: Device) -> float:
    """``layer_time`` of the sub-model's summed costs (the planner's formula, see the module
    docstring)."""
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
    emulated: bool = False,
) -> dict[str, Any]:
    """The ``estimate`` object of bench.json (see the module docstring for the formulas)."""
    from splitter.hardware.boards import calibration_label

    devices, link, source = load_devices(manifest, target, emulated)
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
                "cycles": seconds * timing_clock_hz(dev),
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
        "formulas": "compute = sum_c k_c MAC_c CpM/f (k_c: the part's calibration, 1 without); "
        f"link = W*bits/baud, W = {'bytes on the wire' if model.wire else 'B'}",
        "prediction": "emulator" if emulated else "boards",
        "calibration": calibration_label(devices.values()),
        "devices": [
            {
                "device": d.name,
                "clock_hz": d.clock_hz,
                "cpm": d.cpm,
                "cpm_by_class": dict(d.cpm_by_class),
                "calibration": d.calibration_label,
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
