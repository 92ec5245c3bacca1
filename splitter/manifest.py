"""The plan manifest: the one record every stage after planning reads (``plan.json``).

``splitter plan --json`` prints it and ``splitter compile`` writes it as ``OUT/plan.json``; for
the same inputs both are the same object. ``build``, ``run``, ``bench``, ``calibrate`` and
``flash`` read it with :func:`read_manifest` and take every number the planner had from it
(no key guessing, no re-import of the model).

A manifest is frozen and versioned (:data:`SCHEMA`). :meth:`PlanManifest.check` re-checks its
own invariants without trusting the writer: sub-model layer ranges are contiguous and cover the
chain (layer 0, the input layer, to ``n - 1``), every device index exists, per-device totals are
the sums (FLASH, SPEC.md (4)) and maxima (RAM, SPEC.md (5)) of their sub-models and fit the
device's budget, and the boundary tensors chain (sub-model ``k``'s output is ``k + 1``'s input).
An unknown schema or a failing check is a :class:`ManifestError` (one line, exit code 2).

Timing of the solver run (``solve_time_s``) is deliberately not part of the manifest: the
manifest is a pure function of the model, the boards and the options, so its hash (the firmware's
plan tag, :func:`splitter.protocol.plan_hash`) is reproducible.
"""

from __future__ import annotations

import itertools
import json
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from splitter import names
from splitter.errors import InputFileError
from splitter.inputs import check_depth, read_input_text
from splitter.ir import Chain, QuantParams, TensorSpec

#: Schema name and version of the manifest; a reader refuses any other.
SCHEMA = "splitter.plan/1"
#: File name of the manifest inside a compile output directory.
MANIFEST_FILE = "plan.json"
#: Peer name of the host that sends the graph input and reads the graph output.
HOST = "host"

_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")


class ManifestError(InputFileError):
    """``plan.json`` has an unknown schema version, is malformed or fails its own check."""


def safe_name(text: str) -> str:
    """``text`` with every run of characters outside ``[A-Za-z0-9_.-]`` replaced by ``_``."""
    return _UNSAFE.sub("_", text).strip("_") or "device"


def submodel_io(chain: Chain, first: int, last: int) -> tuple[TensorSpec, TensorSpec]:
    """The tensors entering and leaving layers ``first..last`` of ``chain``.

    The input is ``layers[first].input`` (for ``first == 0`` the graph input,
    ``layers[0].input``, which differs from ``layers[0].output`` when a zero-cost reshape or
    transpose right after the input joined the input layer; a layer profile's input layer has
    only ``output``) and the output is ``layers[last].output``. A layer profile has no tensor
    names linking its rows, so there the input is ``layers[first - 1].output``, the tensor whose
    ``OUT_j`` bytes the planner sends over the link.
    """
    head = chain.layers[first]
    if first == 0 or head.input is None:
        entering = chain.layers[0].input or chain.layers[0].output
    elif chain.graph is None:
        entering = chain.layers[first - 1].output
    else:
        entering = head.input
    return entering, chain.layers[last].output


def submodel_boundaries(
    chain: Chain, first: int, last: int
) -> tuple[tuple[TensorSpec, ...], tuple[TensorSpec, ...]]:
    """Every tensor entering and leaving layers ``first..last``: :func:`submodel_io`, plus, for a
    model with several inputs or outputs, the other graph inputs on the first sub-model
    (``first == 0``) and the other graph outputs on the last (``last == len(chain) - 1``), in the
    graph's order. The chain carries one tensor between layers, so those extra tensors must be
    read and written by the first and last sub-models (the slicer reports a plan that puts them
    elsewhere).

    In an operator-granularity chain a cut carries every live tensor: the inputs are
    ``layers[first - 1].live`` and the outputs ``layers[last].live`` (the graph outputs after the
    last layer), in the chain's fixed order, so sub-model ``k``'s outputs are ``k + 1``'s inputs
    name for name."""
    entering, leaving = submodel_io(chain, first, last)
    ins: tuple[TensorSpec, ...] = (entering,)
    outs: tuple[TensorSpec, ...] = (leaving,)
    graph = chain.graph
    if graph is None:
        return ins, outs
    if first > 0 and chain.layers[first - 1].live:
        ins = chain.layers[first - 1].live
    if chain.layers[last].live:
        outs = chain.layers[last].live
    if first == 0 and len(graph.inputs) > 1:
        ins = tuple(graph.tensors[n] for n in graph.inputs)
    if last == len(chain) - 1 and len(graph.outputs) > 1:
        outs = tuple(graph.tensors[n] for n in graph.outputs)
    return ins, outs


# --- records --------------------------------------------------------------------------------


@dataclass(frozen=True)
class ModelInfo:
    """The model the plan is for: name, resolved path, format and the user's import options."""

    name: str
    path: str
    format: str  # "onnx" | "tflite" | "profile"
    layers: int
    layout: str = ""
    input_shapes: tuple[tuple[str, tuple[int, ...]], ...] = ()
    activation_bytes: int | None = None
    #: chain granularity (``splitter.graph.chain.GRANULARITIES``); written only when not the
    #: default ``"supernode"``, so earlier plans (and their hashes) stay as they were
    granularity: str = "supernode"


@dataclass(frozen=True)
class DeviceEntry:
    """One device of the board file: budgets (usable FLASH_i, RAM_i), totals and times."""

    name: str
    index: int
    mcu: str
    port: str | None
    clock_hz: float
    cpm: float
    flash_budget: int
    ram_budget: int
    flash_used: int
    ram_used: int
    compute_s: float
    send_s: float
    recv_s: float
    intermediate_s: float
    #: calibrated cycles per MAC by op class (sorted by class), empty when not calibrated
    cpm_by_class: tuple[tuple[str, float], ...] = ()
    #: firmware code besides the weights and RAM besides the arena (``splitter.cost.code``;
    #: 0 for layer profiles, which get no firmware)
    code_bytes: int = 0
    runtime_ram_bytes: int = 0
    #: the RAM region the arena is linked into and its size ("" / 0 for layer profiles)
    ram_region: str = ""
    ram_region_bytes: int = 0
    #: which calibration ``compute_s`` used: "none", "emulated" or "real"
    #: (``[calibration.KIND.PART]`` of the board file), its default factor and per-class factors
    calibration: str = "none"
    calibration_factor: float = 1.0
    calibration_by_class: tuple[tuple[str, float], ...] = ()
    #: what ``compute_s`` describes and how it was estimated: a real core from the kernel cost
    #: table and the CPI model, or cycles per MAC (``splitter.partition.problem.compute_label``)
    compute_model: str = ""

    @property
    def flash_total(self) -> int:
        """Weights + code: the flash the device's image takes."""
        return self.flash_used + self.code_bytes

    @property
    def ram_total(self) -> int:
        """Arena + runtime RAM."""
        return self.ram_used + self.runtime_ram_bytes

    @property
    def ram_limit(self) -> int:
        """The RAM the image may take: the budget, within the arena's region when known."""
        return min(self.ram_budget, self.ram_region_bytes or self.ram_budget)


@dataclass(frozen=True)
class SubModelEntry:
    """One sub-model: where it runs, which layers, its costs and its boundary tensors.

    ``flash_bytes = sum FLASH_j``, ``ram_bytes = max RAM_j`` and ``macs = sum MAC_j`` over layers
    ``first..last``; ``macs_by_class`` splits ``macs`` by op class (``conv``, ``depthwise``,
    ``dense``, ``other``); ``compute_s`` is eq. 7 and ``transfer_s`` the time to send its output
    (0 for the last, whose output goes to the host: :attr:`PlanManifest.host_out_s`);
    ``wire_bytes`` the bytes that transfer puts on the wire (payload, framing, ACKs and the
    retransmission budget, :mod:`splitter.cost.wire`; ``out_bytes`` under the thesis's model).
    """

    index: int
    device: str
    device_index: int
    mcu: str
    first: int
    last: int
    first_name: str
    last_name: str
    file: str | None
    flash_bytes: int
    ram_bytes: int
    macs: int
    macs_by_class: tuple[tuple[str, int], ...]
    out_bytes: int
    compute_s: float
    transfer_s: float
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    #: kernel-table instructions of the sub-model's layers per build, for the device's real
    #: core and for the emulator (``splitter.cost.kernels``); empty for layer profiles
    instructions: tuple[tuple[str, float], ...] = ()
    wire_bytes: int = 0
    #: PEX partial execution loops the sub-model runs (``"a -> b -> c over 96 channels"``) and
    #: its RAM with every op run whole (``ram_bytes`` counts the loops); empty / 0 without loops
    loops: tuple[str, ...] = ()
    ram_whole_bytes: int = 0

    @property
    def layers(self) -> int:
        """Number of layers, ``last - first + 1``."""
        return self.last - self.first + 1


@dataclass(frozen=True)
class Transfer:
    """One transfer: tensor bytes, bytes on the wire (:mod:`splitter.cost.wire`), seconds."""

    bytes: int = 0
    wire_bytes: int = 0
    seconds: float = 0.0

    def to_dict(self) -> dict[str, Any]:
        """``{"bytes", "wire_bytes", "seconds"}``."""
        return {"bytes": self.bytes, "wire_bytes": self.wire_bytes, "seconds": self.seconds}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Transfer:
        """Parse :meth:`to_dict`'s object."""
        return cls(int(d["bytes"]), int(d["wire_bytes"]), float(d["seconds"]))


@dataclass(frozen=True)
class HostIO:
    """The host's transfers of one inference: the input to the first sub-model, the output
    from the last; ``counted``: part of ``latency_s`` (off with ``--no-host-io`` and for layer
    profiles, as in the thesis)."""

    counted: bool = False
    input: Transfer = Transfer()
    output: Transfer = Transfer()

    @property
    def seconds(self) -> float:
        """Input + output seconds."""
        return self.input.seconds + self.output.seconds


@dataclass(frozen=True)
class SegmentEntry:
    """One LO-SC segment of a segmented device (``splitter segment``): its units (a layer, or
    ``layer/part`` for a slice of one) from layer ``first`` to ``last``, its weights (offset in
    ``weights.bin``), its activations, ``memory_bytes = weights_bytes + activation_bytes``, the
    bytes its last unit carries to the next segment, and the estimated seconds to load its
    weights (:attr:`Segments.load_via`: the host streaming them, ``weights_bytes x bits_per_byte
    / baud``, or a memory-mapped external flash read) and to compute it."""

    index: int
    first: int
    last: int
    first_name: str
    last_name: str
    units: tuple[str, ...]
    blob_offset: int
    weights_bytes: int
    activation_bytes: int
    carried_bytes: int
    load_s: float
    compute_s: float

    @property
    def memory_bytes(self) -> int:
        """Weights + activations: what the segment occupies of the RAM region."""
        return self.weights_bytes + self.activation_bytes


@dataclass(frozen=True)
class Segments:
    """LO-SC segments (Capogrosso et al.) run one after another on ``device``, in one RAM region
    of ``region_bytes`` (the sub-model's ``ram_bytes``); the weights (``weights_bytes``, the
    file ``weights.bin``) come from outside internal flash: the host streams them, or the part
    reads them from the memory-mapped external flash ``extflash`` (``{name, origin, bytes}``);
    ``load_via`` says which the load times assume."""

    device: str
    region_bytes: int
    weights_bytes: int
    carried_bytes: int
    optimal: bool
    extflash: tuple[tuple[str, Any], ...]
    rows: tuple[SegmentEntry, ...]
    #: how ``load_s`` brings the weights in (``splitter.segment_build.load_rate``)
    load_via: str = ""

    @property
    def load_s(self) -> float:
        """Seconds to load every segment's weights once (one inference)."""
        return sum(r.load_s for r in self.rows)

    @property
    def compute_s(self) -> float:
        """Seconds computing every segment once."""
        return sum(r.compute_s for r in self.rows)


@dataclass(frozen=True)
class DeviceEnergy:
    """One device's energy of one inference (J) and the powers it was computed with (W)."""

    name: str
    mcu: str
    run_w: float
    wait_w: float
    compute_j: float
    transfer_j: float
    wait_j: float
    run_table: str
    wait_table: str

    @property
    def total_j(self) -> float:
        """``compute_j + transfer_j + wait_j``."""
        return self.compute_j + self.transfer_j + self.wait_j


@dataclass(frozen=True)
class Energy:
    """Energy of one inference of the plan (``splitter.partition.problem.energy_breakdown``):
    every board powered for the latency, at run power while computing or sending, at sleep
    power otherwise. The JSON form is derived from the fields (:func:`_record_dict`)."""

    total_j: float
    model: str
    devices: tuple[DeviceEnergy, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``plan.json``'s ``energy`` key."""
        return {
            "total_j": self.total_j,
            "model": self.model,
            "devices": [_record_dict(d) for d in self.devices],
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Energy:
        """Parse :meth:`to_dict`'s object."""
        devices = tuple(DeviceEnergy(**_record_args(DeviceEnergy, x)) for x in d["devices"])
        return cls(float(d["total_j"]), str(d["model"]), devices)


def _record_dict(record: Any) -> dict[str, Any]:
    """A flat record's fields as a JSON object (the codec derived from the dataclass)."""
    return {f.name: getattr(record, f.name) for f in fields(record)}


def _record_args(cls: Any, d: Mapping[str, Any]) -> dict[str, Any]:
    """The constructor arguments of flat record ``cls`` from its JSON object, each converted
    to its field's type (``str`` or ``float``)."""
    return {f.name: (str if f.type == "str" else float)(d[f.name]) for f in fields(cls)}


@dataclass(frozen=True)
class LayerSplitEntry:
    """A layer split inside the plan (issue 27, :mod:`splitter.partition.layer_split`): op
    ``layer`` (``channels`` output channels) in ``slices`` slices of channel ``ranges``, slice
    ``i`` on device ``devices[i]``; ``carried_bytes`` what the cuts from its first slice to its
    concat send over links (the shared input and the slices done so far)."""

    layer: str
    channels: int
    slices: int
    ranges: tuple[tuple[int, int], ...]
    devices: tuple[str, ...]
    carried_bytes: int

    def describe(self) -> str:
        """One line for ``plan`` and report.md: the layer, its slices and their devices."""
        where = ", ".join(
            f"{r0}-{r1 - 1} on {dev}"
            for (r0, r1), dev in zip(self.ranges, self.devices, strict=True)
        )
        return (
            f"layer {self.layer} split into {self.slices} slices of its {self.channels} output "
            f"channels ({where}); the cuts between its slices carry {self.carried_bytes} B"
        )

    def to_dict(self) -> dict[str, Any]:
        """The ``layer_splits`` entry of plan.json (docs/split-layer.md)."""
        return {
            "layer": self.layer,
            "channels": self.channels,
            "slices": self.slices,
            "ranges": [list(r) for r in self.ranges],
            "devices": list(self.devices),
            "carried_bytes": self.carried_bytes,
        }

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LayerSplitEntry:
        """Parse a ``layer_splits`` entry."""
        return cls(
            layer=str(d["layer"]),
            channels=int(d["channels"]),
            slices=int(d["slices"]),
            ranges=tuple((int(a), int(b)) for a, b in d["ranges"]),
            devices=tuple(str(x) for x in d["devices"]),
            carried_bytes=int(d["carried_bytes"]),
        )


@dataclass(frozen=True)
class PlanManifest:
    """The plan as every later stage sees it; see the module docstring."""

    model: ModelInfo
    boards_path: str
    baud: int
    bits_per_byte: int
    objective: str
    solver: str
    optimal: bool
    gap: float | None
    nodes: int
    latency_s: float
    throughput_per_s: float | None  # None: unbounded (zero waiting time)
    throughput_ref9_per_s: float | None
    waiting_s: float
    bottleneck_device: str
    assignment: tuple[int, ...]
    devices: tuple[DeviceEntry, ...]
    submodels: tuple[SubModelEntry, ...]
    schema: str = field(default=SCHEMA)
    #: the times predict a run on the emulator (``--emulated``: QEMU's clock, emulated
    #: calibrations) rather than on the parts
    emulated: bool = False

    @property
    def calibration(self) -> str:
        """Which calibration the compute times use: "none", "emulated", "real", or per part
        (``"real (STM32F405RG); none (STM32F446RE)"``) when only some parts have one."""
        by_part = dict.fromkeys((d.mcu, d.calibration) for d in self.devices)
        labels = {label for _, label in by_part}
        if len(labels) == 1:
            return labels.pop()
        return "; ".join(f"{label} ({mcu})" for mcu, label in by_part)

    @property
    def prediction_note(self) -> str:
        """One line: which runs the compute times predict and which calibration they use."""
        what = "an emulated run (QEMU)" if self.emulated else "a run on the parts"
        return f"compute times predict {what}; calibration: {self.calibration}"

    #: link model (:class:`splitter.cost.wire.LinkModel`): "wire" (the protocol's bytes) or
    #: "payload" (the thesis's), and the retransmission budget of the board file
    link_model: str = "payload"
    retransmit: float = 0.0
    host_io: HostIO = field(default_factory=lambda: HostIO())
    #: LO-SC segments of a segmented device (``splitter segment``, ``plan --segments``); None
    #: for a split plan, whose JSON then has no ``segments`` key (earlier hashes unchanged)
    segments: Segments | None = None
    #: energy of one inference; None when a device's part has no energy data (the JSON then
    #: has no ``energy`` key)
    energy: Energy | None = None
    #: layers split into output-channel slices (issue 27); empty for a plan without, whose
    #: JSON then has no ``layer_splits`` key (earlier hashes unchanged)
    layer_splits: tuple[LayerSplitEntry, ...] = ()

    # --- views ------------------------------------------------------------------------------

    @property
    def input(self) -> TensorSpec:
        """The graph input: the first sub-model's first input."""
        return self.submodels[0].inputs[0]

    @property
    def output(self) -> TensorSpec:
        """The graph output: the last sub-model's first output."""
        return self.submodels[-1].outputs[0]

    def device(self, name: str) -> DeviceEntry:
        """The device called ``name`` (ManifestError when the plan has none)."""
        for dev in self.devices:
            if dev.name == name:
                return dev
        raise ManifestError(f"{MANIFEST_FILE}: no device {name!r}; re-run `splitter compile`")

    def device_totals(self) -> dict[str, tuple[int, int]]:
        """Per device name with sub-models: ``(FLASH_i, RAM_i)`` = (sum, max) over them."""
        out: dict[str, tuple[int, int]] = {}
        for sub in self.submodels:
            flash, ram = out.get(sub.device, (0, 0))
            out[sub.device] = (flash + sub.flash_bytes, max(ram, sub.ram_bytes))
        return out

    def links(self) -> dict[str, Any]:
        """Per device, in execution order, what it receives and sends and from/to whom.

        Sub-model ``k`` receives its inputs from the device of ``k - 1`` (the host for ``k = 0``)
        and sends its outputs to the device of ``k + 1`` (the host for the last).
        """
        subs = self.submodels
        events: dict[str, list[dict[str, Any]]] = {d.name: [] for d in self.devices}
        for k, sub in enumerate(subs):
            prev = subs[k - 1].device if k > 0 else HOST
            nxt = subs[k + 1].device if k + 1 < len(subs) else HOST
            own = events.setdefault(sub.device, [])
            own += [_event("receive", prev, k, t) for t in sub.inputs]
            own += [_event("send", nxt, k, t) for t in sub.outputs]
        return {
            name: {
                "receives_from": [e["peer"] for e in evs if e["direction"] == "receive"],
                "sends_to": [e["peer"] for e in evs if e["direction"] == "send"],
                "events": evs,
            }
            for name, evs in events.items()
        }

    # --- checking ---------------------------------------------------------------------------

    def check(self, where: str = MANIFEST_FILE) -> PlanManifest:
        """Raise :class:`ManifestError` naming the first broken invariant; return ``self``."""
        problem = next(iter(_problems(self)), None)
        if problem is not None:
            raise ManifestError(f"{where}: {problem}; re-run `splitter compile`")
        return self

    # --- JSON -------------------------------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (key order fixed; ``links`` derived for readers of the file)."""
        m = self.model
        return {
            "schema": self.schema,
            "model": {
                "name": m.name,
                "path": m.path,
                "format": m.format,
                "layers": m.layers,
                "layout": m.layout,
                "input_shapes": {k: list(v) for k, v in m.input_shapes},
                "activation_bytes": m.activation_bytes,
                **({} if m.granularity == "supernode" else {"granularity": m.granularity}),
            },
            "boards_path": self.boards_path,
            "link": {
                "baud": self.baud,
                "bits_per_byte": self.bits_per_byte,
                "model": self.link_model,
                "retransmit": self.retransmit,
            },
            "objective": self.objective,
            "solver": self.solver,
            "optimal": self.optimal,
            "gap": self.gap,
            "nodes": self.nodes,
            "latency_s": self.latency_s,
            "host_io": {
                "counted": self.host_io.counted,
                "seconds": self.host_io.seconds,
                "input": self.host_io.input.to_dict(),
                "output": self.host_io.output.to_dict(),
            },
            "throughput_per_s": self.throughput_per_s,
            "throughput_ref9_per_s": self.throughput_ref9_per_s,
            "waiting_s": self.waiting_s,
            "bottleneck_device": self.bottleneck_device,
            "assignment": list(self.assignment),
            "prediction": "emulator" if self.emulated else "boards",
            "calibration": self.calibration,
            "devices": [_device_dict(d) for d in self.devices],
            "submodels": [_submodel_dict(s) for s in self.submodels],
            "links": self.links(),
            **({} if self.segments is None else {"segments": _segments_dict(self.segments)}),
            **({} if self.energy is None else {"energy": self.energy.to_dict()}),
            **(
                {"layer_splits": [e.to_dict() for e in self.layer_splits]}
                if self.layer_splits
                else {}
            ),
        }

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text (what ``plan --json`` prints and ``plan.json`` holds)."""
        return json.dumps(self.to_dict(), indent=indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = MANIFEST_FILE) -> PlanManifest:
        """Parse and :meth:`check` a manifest object; ManifestError on any problem."""
        if not isinstance(data, Mapping):
            raise ManifestError(f"{where}: not a JSON object; re-run `splitter compile`")
        schema = data.get("schema")
        if schema != SCHEMA:
            raise ManifestError(
                f"{where}: unknown plan schema {schema!r} (this splitter reads {SCHEMA!r}); "
                "re-run `splitter compile` with this version"
            )
        try:
            manifest = _parse(data)
        except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
            raise ManifestError(
                f"{where}: malformed plan ({type(exc).__name__}: {exc}); re-run `splitter compile`"
            ) from None
        problem = next(iter(_problems(manifest)), None)
        if problem is None and data.get("links") != manifest.links():
            problem = "links disagree with the sub-models"
        if problem is not None:
            raise ManifestError(f"{where}: {problem}; re-run `splitter compile`")
        return manifest

    @classmethod
    def from_json(cls, text: str, where: str = MANIFEST_FILE) -> PlanManifest:
        """Parse JSON text (see :meth:`from_dict`)."""
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as exc:
            raise ManifestError(
                f"{where}: not valid JSON ({exc}); re-run `splitter compile`"
            ) from None
        check_depth(data, where, error=ManifestError)  # and no NUL in a key or string
        return cls.from_dict(data, where)


def read_manifest(out_dir: str | Path) -> PlanManifest:
    """``OUT/plan.json`` as a checked :class:`PlanManifest`, or a one-line error with the fix."""
    path = Path(out_dir) / MANIFEST_FILE
    if not path.exists():
        raise ManifestError(
            f"{path}: missing, so {out_dir} is not a `splitter compile` output; "
            f"run `splitter compile MODEL --target BOARDS.toml -o {out_dir}`"
        )
    text = read_input_text(path, "plan", error=ManifestError, generated=True)
    return PlanManifest.from_json(text, str(path))


#: File name of the wiring description inside ``OUT/firmware`` (``splitter.codegen.firmware``).
WIRING_FILE = "firmware/wiring.json"

_HASH = re.compile(r"[0-9a-f]{16}")


def read_wiring(out_dir: str | Path) -> dict[str, Any]:
    """``OUT/firmware/wiring.json`` validated against its schema, or a one-line
    :class:`ManifestError` naming the file, the field and the fix.

    Checked before anything is built, flashed or run: a JSON object with ``plan_hash`` (16 hex
    digits), ``baud`` (> 0), ``first_device`` / ``last_device`` (device names),
    ``emulated_as_f405`` (text), and a non-empty ``devices`` list whose entries have a unique
    ``name`` fully matching :data:`splitter.names.DEVICE_NAME` (it names a directory under
    ``OUT/firmware``), a unique ``index >= 0``, a ``part`` matching
    :data:`splitter.names.PART_NAME`, integer ``weights_bytes`` / ``arena_bytes`` >= 0, a
    ``clock_hz`` object of positive integers, and ``links`` / ``submodels`` lists of objects
    (links: integer ``index``, ``peer_index`` >= -1, boolean ``server``, ``peer`` "host" or a
    device name).
    """
    path = Path(out_dir) / WIRING_FILE
    if not path.exists():
        raise ManifestError(
            f"{path}: missing, {out_dir} has no firmware (compiled with --no-firmware?); "
            "re-run `splitter compile` without --no-firmware"
        )
    text = read_input_text(path, "wiring description", error=ManifestError, generated=True)
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise ManifestError(f"{path}: not valid JSON ({exc}); re-run `splitter compile`") from None
    check_depth(data, str(path), error=ManifestError)
    problem = _wiring_problem(data) or _link_problem(data)
    if problem is None and (Path(out_dir) / MANIFEST_FILE).exists():
        problem = _parts_problem(data, read_manifest(out_dir))
    if problem is not None:
        raise ManifestError(f"{path}: {problem}; re-run `splitter compile`")
    return dict(data)


def _link_problem(data: dict[str, Any]) -> str | None:
    """Each link between two devices is one serial line: the peer lists the link back, and
    exactly one end is the server (a TCP listener in the emulator, the side that answers
    first on a board)."""
    by_name = {d["name"]: d for d in data["devices"]}
    for dev in data["devices"]:
        for k, ln in enumerate(dev["links"]):
            if ln["peer"] == HOST:
                continue
            peer = by_name.get(ln["peer"])
            back = [b for b in (peer or {}).get("links", []) if b.get("peer") == dev["name"]]
            if not back:
                return f"devices[{dev['index']}].links[{k}]: peer {ln['peer']!a} has no link back"
            if all(b.get("server") == ln["server"] for b in back):
                side = "server" if ln["server"] else "client"
                return (
                    f"devices[{dev['index']}].links[{k}].server: both ends of the link "
                    f"{dev['name']!a} - {ln['peer']!a} are {side}s"
                )
    return None


def _parts_problem(data: dict[str, Any], manifest: PlanManifest) -> str | None:
    """Every device of wiring.json has the part plan.json planned for it."""
    planned = {d.name: d.mcu for d in manifest.devices}
    for dev in data["devices"]:
        if dev["name"] not in planned:
            return f"devices[{dev['index']}].name: {dev['name']!a} is not a device of plan.json"
        if dev["part"] != planned[dev["name"]]:
            return (
                f"devices[{dev['index']}].part: {dev['part']!a}, but plan.json plans "
                f"{planned[dev['name']]!a} for device {dev['name']!a}"
            )
    return None


def _is_int(x: object, low: int) -> bool:
    return isinstance(x, int) and not isinstance(x, bool) and x >= low


def _wiring_problem(data: object) -> str | None:
    """The first schema violation of a wiring.json object, or ``None``."""
    if not isinstance(data, dict):
        return "not a JSON object"
    for key, ok in (
        ("plan_hash", lambda v: names.matches(_HASH, v)),
        ("baud", lambda v: _is_int(v, 1)),
        ("first_device", lambda v: names.matches(names.DEVICE_NAME, v)),
        ("last_device", lambda v: names.matches(names.DEVICE_NAME, v)),
        ("emulated_as_f405", lambda v: names.matches(names.TEXT, v)),
        ("devices", lambda v: isinstance(v, list) and len(v) > 0),
    ):
        if key not in data:
            return f"no key {key!r}"
        if not ok(data[key]):
            return f"{key} = {_shown(data[key])} is malformed"
    seen_names: set[str] = set()
    seen_index: set[int] = set()
    for k, dev in enumerate(data["devices"]):
        problem = _wiring_device_problem(dev)
        if problem is not None:
            return f"devices[{k}]: {problem}"
        if dev["name"] in seen_names or dev["index"] in seen_index:
            return f"devices[{k}]: name or index repeats an earlier device"
        seen_names.add(dev["name"])
        seen_index.add(dev["index"])
    if not {data["first_device"], data["last_device"]} <= seen_names:
        return "first_device / last_device is not one of the devices"
    return None


def _wiring_device_problem(dev: object) -> str | None:
    if not isinstance(dev, dict):
        return "not a JSON object"
    for key in ("name", "index", "part", "weights_bytes", "arena_bytes", "clock_hz", "links"):
        if key not in dev:
            return f"no key {key!r}"
    bad = names.problem(names.DEVICE_NAME, dev["name"], "name") or names.problem(
        names.PART_NAME, dev["part"], "part"
    )
    if bad is not None:
        return bad
    if not all(_is_int(dev[k], 0) for k in ("index", "weights_bytes", "arena_bytes")):
        return "index, weights_bytes and arena_bytes must be integers >= 0"
    clocks = dev["clock_hz"]
    if not isinstance(clocks, dict) or not all(_is_int(v, 1) for v in clocks.values()):
        return "clock_hz must map targets to positive integers"
    if not isinstance(dev.get("submodels", []), list) or not all(
        isinstance(s, dict) for s in dev.get("submodels", [])
    ):
        return "submodels must be a list of objects"
    links = dev["links"]
    if not isinstance(links, list) or not links:
        return "links must be a non-empty list"
    for ln in links:
        if not (
            isinstance(ln, dict)
            and _is_int(ln.get("index"), 0)
            and _is_int(ln.get("peer_index"), -1)
            and isinstance(ln.get("server"), bool)
            and (ln.get("peer") == HOST or names.matches(names.DEVICE_NAME, ln.get("peer")))
        ):
            return f"link {_shown(ln)} lacks an integer index / peer_index, server or peer"
    return None


def _shown(value: object) -> str:
    """A value of a tampered file as a short, one-line, ASCII message fragment."""
    text = ascii(value)
    return text if len(text) <= 60 else text[:57] + "..."


# --- invariants ------------------------------------------------------------------------------


def _problems(m: PlanManifest) -> list[str]:
    """Every broken invariant of ``m`` (empty when it is consistent)."""
    out = _range_problems(m) or _name_problems(m)
    if out:
        return out
    n_dev = len(m.devices)
    for d in m.devices:
        if not 0 <= d.index < n_dev or m.devices[d.index] is not d:
            out.append(f"device {d.name} has index {d.index}, listed at another position")
    for s in m.submodels:
        if not 0 <= s.device_index < n_dev or m.devices[s.device_index].name != s.device:
            out.append(f"sub-model {s.index}: device {s.device!r} is not device {s.device_index}")
    if out:
        return out
    totals = m.device_totals()
    for d in m.devices:
        flash, ram = totals.get(d.name, (0, 0))
        if (d.flash_used, d.ram_used) != (flash, ram):
            out.append(
                f"device {d.name}: totals {d.flash_used} B FLASH / {d.ram_used} B RAM but its "
                f"sub-models sum to {flash} / {ram}"
            )
        if d.flash_total > d.flash_budget or d.ram_total > d.ram_limit:
            out.append(
                f"device {d.name}: needs {d.flash_total} B FLASH / {d.ram_total} B RAM, budget "
                f"{d.flash_budget} / {d.ram_limit}"
            )
    out += _boundary_problems(m)
    return out or _segment_problems(m)


def _segment_problems(m: PlanManifest) -> list[str]:
    """Segments: one device hosting the whole chain as one sub-model; numbered in order, layer
    ranges in order from layer 0 to the last (consecutive segments may share a sliced layer);
    weights laid out back to back in ``weights.bin``; each within the region, the sub-model's
    RAM; every segment but the last carries its last unit's output to the next."""
    seg = m.segments
    if seg is None:
        return []
    if len(m.submodels) != 1 or m.submodels[0].device != seg.device or not seg.rows:
        return [f"segments: expected one sub-model on device {seg.device!r} and a segment"]
    sub = m.submodels[0]
    if seg.region_bytes != sub.ram_bytes:
        return [f"segments: region {seg.region_bytes} B but the sub-model's RAM {sub.ram_bytes} B"]
    at, offset = 0, 0
    for k, r in enumerate(seg.rows):
        if r.index != k or r.first not in (at, at + 1) or r.last < r.first or not r.units:
            return [f"segment {k}: layers {r.first}..{r.last} do not follow layer {at}"]
        if r.blob_offset != offset:
            return [f"segment {k}: weights at {r.blob_offset} in weights.bin, expected {offset}"]
        if r.memory_bytes > seg.region_bytes:
            return [f"segment {k}: {r.memory_bytes} B exceed the region's {seg.region_bytes} B"]
        at, offset = r.last, offset + r.weights_bytes
    if seg.rows[0].first != 0 or at != m.model.layers - 1 or offset != seg.weights_bytes:
        return [f"segments: cover layers {seg.rows[0].first}..{at} and {offset} B of weights"]
    return []


def _name_problems(m: PlanManifest) -> list[str]:
    """Device and part names and ports fully matching :mod:`splitter.names`; sub-model files only
    ``submodels/<file>`` (a path that cannot leave ``OUT``)."""
    found = [
        names.problem(names.DEVICE_NAME, d.name, f"device {d.index} name")
        or names.problem(names.PART_NAME, d.mcu, f"device {d.index} mcu")
        or (None if d.port is None else names.problem(names.PORT, d.port, f"device {d.index} port"))
        for d in m.devices
    ]
    found += [
        names.problem(names.SUBMODEL_FILE, s.file, f"sub-model {s.index} file")
        for s in m.submodels
        if s.file is not None
    ]
    return [p for p in found if p is not None]


def _range_problems(m: PlanManifest) -> list[str]:
    """Sub-models numbered in order, contiguous, covering ``0..layers-1``; assignment agrees."""
    n = m.model.layers
    if not m.submodels:
        return ["no sub-models"]
    expect = 0
    for k, s in enumerate(m.submodels):
        if s.index != k or s.first != expect or s.last < s.first:
            return [f"sub-model {k}: layers {s.first}..{s.last}, expected to start at {expect}"]
        if sum(c for _, c in s.macs_by_class) > s.macs:
            return [f"sub-model {k}: MACs by class exceed its {s.macs} MACs"]
        expect = s.last + 1
    if expect != n:
        return [f"sub-models cover layers 0..{expect - 1} of {n}"]
    per_layer = [s.device_index for s in m.submodels for _ in range(s.layers)]
    if list(m.assignment) != per_layer:
        return ["assignment disagrees with the sub-models' layer ranges"]
    return []


def _boundary_problems(m: PlanManifest) -> list[str]:
    """Every sub-model has boundary tensors; ``k``'s outputs are ``k + 1``'s inputs."""
    subs = m.submodels
    for s in subs:
        if not s.inputs or not s.outputs:
            return [f"sub-model {s.index}: no boundary tensors"]
    for a, b in itertools.pairwise(subs):
        sent, read = [t.name for t in a.outputs], [t.name for t in b.inputs]
        if sent != read:
            return [f"sub-model {a.index} sends {sent}, sub-model {b.index} reads {read}"]
    return []


# --- (de)serialisation helpers ----------------------------------------------------------------


def _event(direction: str, peer: str, submodel: int, spec: TensorSpec) -> dict[str, Any]:
    return {
        "direction": direction,
        "peer": peer,
        "submodel": submodel,
        "tensor": spec.name,
        "bytes": tensor_bytes(spec),
    }


def tensor_bytes(spec: TensorSpec) -> int | None:
    """``prod(shape) * itemsize``, or ``None`` for a dtype numpy does not know."""
    return None if spec.dtype.startswith("tflite_type_") else spec.nbytes


def tensor_dict(spec: TensorSpec) -> dict[str, Any]:
    """Name, shape, dtype, bytes and quantisation (scale, zero point, axis) of a tensor."""
    quant = None
    if spec.quant is not None:
        quant = {
            "scale": list(spec.quant.scale),
            "zero_point": list(spec.quant.zero_point),
            "axis": spec.quant.axis,
        }
    return {
        "name": spec.name,
        "shape": list(spec.shape),
        "dtype": spec.dtype,
        "bytes": tensor_bytes(spec),
        "quant": quant,
    }


def _tensor(data: Mapping[str, Any]) -> TensorSpec:
    q = data.get("quant")
    quant = None
    if q is not None:
        axis = q.get("axis")
        quant = QuantParams(
            tuple(float(s) for s in q["scale"]),
            tuple(int(z) for z in q["zero_point"]),
            None if axis is None else int(axis),
        )
    shape = tuple(int(d) for d in data["shape"])
    spec = TensorSpec(str(data["name"]), shape, str(data["dtype"]), quant)
    if data.get("bytes") != tensor_bytes(spec):
        raise ValueError(f"tensor {spec.name}: bytes {data.get('bytes')} != shape x itemsize")
    return spec


def _device_dict(d: DeviceEntry) -> dict[str, Any]:
    return {
        "name": d.name,
        "index": d.index,
        "mcu": d.mcu,
        "port": d.port,
        "clock_hz": d.clock_hz,
        "cpm": d.cpm,
        "cpm_by_class": dict(d.cpm_by_class),
        "flash_budget": d.flash_budget,
        "ram_budget": d.ram_budget,
        "flash_used": d.flash_used,
        "ram_used": d.ram_used,
        "compute_s": d.compute_s,
        "send_s": d.send_s,
        "recv_s": d.recv_s,
        "intermediate_s": d.intermediate_s,
        "code_bytes": d.code_bytes,
        "runtime_ram_bytes": d.runtime_ram_bytes,
        "ram_region": d.ram_region,
        "ram_region_bytes": d.ram_region_bytes,
        "calibration": d.calibration,
        "calibration_factor": d.calibration_factor,
        "calibration_by_class": dict(d.calibration_by_class),
        "compute_model": d.compute_model,
    }


def _submodel_dict(s: SubModelEntry) -> dict[str, Any]:
    return {
        "index": s.index,
        "device": s.device,
        "device_index": s.device_index,
        "mcu": s.mcu,
        "first": s.first,
        "last": s.last,
        "first_name": s.first_name,
        "last_name": s.last_name,
        "layers": s.layers,
        "file": s.file,
        "flash_bytes": s.flash_bytes,
        "ram_bytes": s.ram_bytes,
        "macs": s.macs,
        "macs_by_class": dict(s.macs_by_class),
        "out_bytes": s.out_bytes,
        "compute_s": s.compute_s,
        "transfer_s": s.transfer_s,
        "wire_bytes": s.wire_bytes,
        "inputs": [tensor_dict(t) for t in s.inputs],
        "outputs": [tensor_dict(t) for t in s.outputs],
        "instructions": dict(s.instructions),
        **_partial_dict(s),
    }


def _partial_dict(s: SubModelEntry) -> dict[str, Any]:
    """``{"partial_execution": {loops, ram_whole_bytes, saved_bytes}}`` when it runs loops."""
    if not s.loops:
        return {}
    saved = s.ram_whole_bytes - s.ram_bytes
    return {
        "partial_execution": {
            "loops": list(s.loops),
            "ram_whole_bytes": s.ram_whole_bytes,
            "saved_bytes": saved,
        }
    }


def _segments_dict(seg: Segments) -> dict[str, Any]:
    """The ``segments`` object of a segmented plan (docs/plan-manifest.md)."""
    return {
        "device": seg.device,
        "region_bytes": seg.region_bytes,
        "weights_bytes": seg.weights_bytes,
        "carried_bytes": seg.carried_bytes,
        "optimal": seg.optimal,
        "extflash": dict(seg.extflash) if seg.extflash else None,
        "load_via": seg.load_via,
        "load_s": seg.load_s,
        "compute_s": seg.compute_s,
        "rows": [
            {
                "index": r.index,
                "first": r.first,
                "last": r.last,
                "first_name": r.first_name,
                "last_name": r.last_name,
                "units": list(r.units),
                "blob_offset": r.blob_offset,
                "weights_bytes": r.weights_bytes,
                "activation_bytes": r.activation_bytes,
                "memory_bytes": r.memory_bytes,
                "carried_bytes": r.carried_bytes,
                "load_s": r.load_s,
                "compute_s": r.compute_s,
            }
            for r in seg.rows
        ],
    }


def _parse_segments(d: Mapping[str, Any]) -> Segments:
    ext = d["extflash"]
    rows = tuple(
        SegmentEntry(
            index=int(r["index"]),
            first=int(r["first"]),
            last=int(r["last"]),
            first_name=str(r["first_name"]),
            last_name=str(r["last_name"]),
            units=tuple(str(u) for u in r["units"]),
            blob_offset=int(r["blob_offset"]),
            weights_bytes=int(r["weights_bytes"]),
            activation_bytes=int(r["activation_bytes"]),
            carried_bytes=int(r["carried_bytes"]),
            load_s=float(r["load_s"]),
            compute_s=float(r["compute_s"]),
        )
        for r in d["rows"]
    )
    return Segments(
        device=str(d["device"]),
        region_bytes=int(d["region_bytes"]),
        weights_bytes=int(d["weights_bytes"]),
        carried_bytes=int(d["carried_bytes"]),
        optimal=bool(d["optimal"]),
        extflash=() if ext is None else tuple((str(k), v) for k, v in dict(ext).items()),
        rows=rows,
        load_via=str(d["load_via"]),
    )


def _parse(data: Mapping[str, Any]) -> PlanManifest:
    m = data["model"]
    model = ModelInfo(
        name=str(m["name"]),
        path=str(m["path"]),
        format=str(m["format"]),
        layers=int(m["layers"]),
        layout=str(m["layout"]),
        input_shapes=tuple(
            (str(k), tuple(int(d) for d in v)) for k, v in dict(m["input_shapes"]).items()
        ),
        activation_bytes=None if m["activation_bytes"] is None else int(m["activation_bytes"]),
        granularity=str(m.get("granularity", "supernode")),
    )
    return PlanManifest(
        model=model,
        boards_path=str(data["boards_path"]),
        baud=int(data["link"]["baud"]),
        bits_per_byte=int(data["link"]["bits_per_byte"]),
        objective=str(data["objective"]),
        solver=str(data["solver"]),
        optimal=bool(data["optimal"]),
        gap=_opt_float(data["gap"]),
        nodes=int(data["nodes"]),
        latency_s=float(data["latency_s"]),
        throughput_per_s=_opt_float(data["throughput_per_s"]),
        throughput_ref9_per_s=_opt_float(data["throughput_ref9_per_s"]),
        waiting_s=float(data["waiting_s"]),
        bottleneck_device=str(data["bottleneck_device"]),
        assignment=tuple(int(a) for a in data["assignment"]),
        devices=tuple(_parse_device(d) for d in data["devices"]),
        submodels=tuple(_parse_submodel(s) for s in data["submodels"]),
        schema=str(data["schema"]),
        emulated=str(data.get("prediction", "boards")) == "emulator",
        segments=None if data.get("segments") is None else _parse_segments(data["segments"]),
        energy=None if data.get("energy") is None else Energy.from_dict(data["energy"]),
        layer_splits=tuple(LayerSplitEntry.from_dict(e) for e in data.get("layer_splits", ())),
        **_parse_host_io(data),
    )


def _parse_host_io(data: Mapping[str, Any]) -> dict[str, Any]:
    """The link model keys (absent in plans written before them: the thesis's model)."""
    link, host = data["link"], data.get("host_io")
    out: dict[str, Any] = {
        "link_model": str(link.get("model", "payload")),
        "retransmit": float(link.get("retransmit", 0.0)),
    }
    if host is not None:
        out["host_io"] = HostIO(
            bool(host["counted"]),
            Transfer.from_dict(host["input"]),
            Transfer.from_dict(host["output"]),
        )
    return out


def _parse_device(d: Mapping[str, Any]) -> DeviceEntry:
    return DeviceEntry(
        name=str(d["name"]),
        index=int(d["index"]),
        mcu=str(d["mcu"]),
        port=None if d["port"] is None else str(d["port"]),
        clock_hz=float(d["clock_hz"]),
        cpm=float(d["cpm"]),
        cpm_by_class=tuple(sorted((str(k), float(v)) for k, v in dict(d["cpm_by_class"]).items())),
        flash_budget=int(d["flash_budget"]),
        ram_budget=int(d["ram_budget"]),
        flash_used=int(d["flash_used"]),
        ram_used=int(d["ram_used"]),
        compute_s=float(d["compute_s"]),
        send_s=float(d["send_s"]),
        recv_s=float(d["recv_s"]),
        intermediate_s=float(d["intermediate_s"]),
        code_bytes=int(d.get("code_bytes", 0)),
        runtime_ram_bytes=int(d.get("runtime_ram_bytes", 0)),
        ram_region=str(d.get("ram_region", "")),
        ram_region_bytes=int(d.get("ram_region_bytes", 0)),
        calibration=_calibration_label(d.get("calibration", "none")),
        calibration_factor=float(d.get("calibration_factor", 1.0)),
        calibration_by_class=tuple(
            sorted((str(k), float(v)) for k, v in dict(d.get("calibration_by_class", {})).items())
        ),
        compute_model=str(d.get("compute_model", "")),
    )


def _calibration_label(value: Any) -> str:
    if value not in ("none", "emulated", "real"):
        raise ValueError(f"calibration {value!r} is not none, emulated or real")
    return str(value)


def _parse_submodel(s: Mapping[str, Any]) -> SubModelEntry:
    entry = SubModelEntry(
        index=int(s["index"]),
        device=str(s["device"]),
        device_index=int(s["device_index"]),
        mcu=str(s["mcu"]),
        first=int(s["first"]),
        last=int(s["last"]),
        first_name=str(s["first_name"]),
        last_name=str(s["last_name"]),
        file=None if s["file"] is None else str(s["file"]),
        flash_bytes=int(s["flash_bytes"]),
        ram_bytes=int(s["ram_bytes"]),
        macs=int(s["macs"]),
        macs_by_class=tuple(sorted((str(k), int(v)) for k, v in dict(s["macs_by_class"]).items())),
        out_bytes=int(s["out_bytes"]),
        compute_s=float(s["compute_s"]),
        transfer_s=float(s["transfer_s"]),
        inputs=tuple(_tensor(t) for t in s["inputs"]),
        outputs=tuple(_tensor(t) for t in s["outputs"]),
        wire_bytes=int(s.get("wire_bytes", s["out_bytes"])),
        loops=tuple(str(x) for x in dict(s.get("partial_execution") or {}).get("loops", ())),
        ram_whole_bytes=int(dict(s.get("partial_execution") or {}).get("ram_whole_bytes", 0)),
        instructions=tuple(
            sorted((str(k), float(v)) for k, v in dict(s.get("instructions", {})).items())
        ),
    )
    if int(s["layers"]) != entry.layers:
        raise ValueError(f"sub-model {entry.index}: layers {s['layers']} != last - first + 1")
    return entry


def _opt_float(x: Any) -> float | None:
    return None if x is None else float(x)


def finite_or_none(x: float) -> float | None:
    """JSON has no infinity: an unbounded throughput (zero waiting time) becomes ``None``."""
    return None if math.isinf(x) or math.isnan(x) else x


def submodel_file(index: int, device: str, suffix: str) -> str:
    """``submodels/NN_<device><suffix>``: where compile writes sub-model ``index``."""
    return f"submodels/{index:02d}_{safe_name(device)}{suffix}"


def model_format(chain: Chain) -> str:
    """``"onnx"``, ``"tflite"`` or ``"profile"`` (a layer profile has no graph)."""
    return chain.graph.source_format if chain.graph is not None else "profile"


def file_suffix(fmt: str) -> str | None:
    """Sub-model file suffix for a model format (``None``: profiles are not sliced)."""
    return {"onnx": ".onnx", "tflite": ".tflite"}.get(fmt)


def input_shapes_tuple(
    shapes: Mapping[str, Sequence[int]] | None,
) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """The user's ``--input-shape`` overrides in a canonical (sorted, hashable) form."""
    return tuple(sorted((k, tuple(int(d) for d in v)) for k, v in (shapes or {}).items()))
