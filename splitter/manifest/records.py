"""The plan manifest's records: what ``plan.json`` holds, as frozen dataclasses.

``splitter plan --json`` prints a :class:`PlanManifest` and ``splitter compile`` writes it as
``OUT/plan.json``; for the same inputs both are the same object. ``build``, ``run``, ``bench``,
``calibrate`` and ``flash`` read it with :func:`splitter.manifest.read_manifest` and take every
number the planner had from it (no key guessing, no re-import of the model).

Each field's JSON form is derived from the field itself (:mod:`splitter.manifest.codec`); a
field whose key, place or reading differs from the default carries a :class:`JsonSpec` in its
metadata (:func:`js`), and a key computed from the record (``layers``, ``links``...) is a
:class:`Derived` of its class. The invariants live in :mod:`splitter.manifest.checks`.

Timing of the solver run (``solve_time_s``) is deliberately not part of the manifest: the
manifest is a pure function of the model, the boards and the options, so its hash (the firmware's
plan tag, :func:`splitter.protocol.plan_hash`) is reproducible.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import MISSING, dataclass, field
from typing import Any, ClassVar

from splitter.errors import InputFileError
from splitter.ir import Chain, LinkSpec, TensorSpec

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


# --- how a field maps to JSON -----------------------------------------------------------------


@dataclass(frozen=True)
class JsonSpec:
    """How one field differs from the default JSON form (its name as key, its value converted
    by its type, required on read):

    * ``key``: another key; ``group``: inside a nested object of that key (written where its
      first field is, and only when that first field is not at its default);
    * ``optional``: an absent key reads as the field's default (plans written before it);
      ``omit_default``: not written while at its default (earlier plans' hashes unchanged);
      ``fallback``: an absent key reads as that other key's value;
    * ``sort``: a name -> value map read back sorted by name; ``empty_as_null``: an empty map is
      written as ``null``;
    * ``write`` / ``read``: the value's own conversion, when its type does not say it.
    """

    key: str | None = None
    group: str | None = None
    optional: bool = False
    omit_default: bool = False
    fallback: str | None = None
    sort: bool = False
    empty_as_null: bool = False
    write: Callable[[Any], Any] | None = None
    read: Callable[[Any], Any] | None = None


def js(default: Any = MISSING, *, factory: Any = MISSING, **spec: Any) -> Any:
    """A dataclass field with a :class:`JsonSpec` (``default`` / ``factory`` as ``field``)."""
    meta = {"json": JsonSpec(**spec)}
    if factory is not MISSING:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class Derived:
    """A JSON key computed from the record, written right after field ``after``'s key (in its
    group); ``check``: on read it must equal the value recomputed from the parsed record."""

    key: str
    after: str
    value: Callable[[Any], Any]
    check: bool = False


#: Name -> number maps (op class -> MACs, build -> instructions...) read back sorted by name.
SORTED = {"sort": True}


def calibration_label(value: Any) -> str:
    """A device's calibration kind: ``none``, ``emulated`` or ``real`` (ValueError otherwise)."""
    if value not in ("none", "emulated", "real"):
        raise ValueError(f"calibration {value!r} is not none, emulated or real")
    return str(value)


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
    granularity: str = js("supernode", omit_default=True, optional=True)


@dataclass(frozen=True, kw_only=True)
class DeviceEntry:
    """One device of the board file: budgets (usable FLASH_i, RAM_i), totals and times."""

    name: str
    index: int
    mcu: str
    port: str | None
    clock_hz: float
    cpm: float
    #: calibrated cycles per MAC by op class (sorted by class), empty when not calibrated
    cpm_by_class: tuple[tuple[str, float], ...] = js((), **SORTED)
    flash_budget: int
    ram_budget: int
    flash_used: int
    ram_used: int
    compute_s: float
    send_s: float
    recv_s: float
    intermediate_s: float
    #: firmware code besides the weights and RAM besides the arena (``splitter.cost.code``;
    #: 0 for layer profiles, which get no firmware)
    code_bytes: int = js(0, optional=True)
    runtime_ram_bytes: int = js(0, optional=True)
    #: the RAM region the arena is linked into and its size ("" / 0 for layer profiles)
    ram_region: str = js("", optional=True)
    ram_region_bytes: int = js(0, optional=True)
    #: which calibration ``compute_s`` used: "none", "emulated" or "real"
    #: (``[calibration.KIND.PART]`` of the board file), its default factor and per-class factors
    calibration: str = js("none", optional=True, read=calibration_label)
    calibration_factor: float = js(1.0, optional=True)
    calibration_by_class: tuple[tuple[str, float], ...] = js((), optional=True, **SORTED)
    #: what ``compute_s`` describes and how it was estimated: a real core from the kernel cost
    #: table and the CPI model, or cycles per MAC (``splitter.partition.problem.compute_label``)
    compute_model: str = js("", optional=True)

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

    def memory_line(self) -> str:
        """The device's one flash and one RAM figure, as ``plan``, ``report`` and ``build``
        show them: the whole image (weights + code; arena + runtime) against what it may take
        (the flash budget; the RAM budget within the region the linker puts the arena in)."""
        region = f", {self.ram_region}" if self.ram_region else ""
        return (
            f"{self.name}: flash {self.flash_total}/{self.flash_budget} B (weights "
            f"{self.flash_used} + code {self.code_bytes}), RAM {self.ram_total}/{self.ram_limit} B"
            f" (arena {self.ram_used} + runtime {self.runtime_ram_bytes}{region})"
        )


@dataclass(frozen=True, kw_only=True)
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
    macs_by_class: tuple[tuple[str, int], ...] = js(**SORTED)
    out_bytes: int
    compute_s: float
    transfer_s: float
    #: plans written before the wire model carried ``out_bytes`` only
    wire_bytes: int = js(0, fallback="out_bytes")
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    #: kernel-table instructions of the sub-model's layers per build, for the device's real
    #: core and for the emulator (``splitter.cost.kernels``); empty for layer profiles
    instructions: tuple[tuple[str, float], ...] = js((), optional=True, **SORTED)
    #: PEX partial execution loops the sub-model runs (``"a -> b -> c over 96 channels"``) and
    #: its RAM with every op run whole (``ram_bytes`` counts the loops); empty / 0 without loops
    #: (the JSON's ``partial_execution`` object, absent then)
    loops: tuple[str, ...] = js((), group="partial_execution", optional=True)
    ram_whole_bytes: int = js(0, group="partial_execution", optional=True)

    JSON_DERIVED: ClassVar[tuple[Derived, ...]] = (
        Derived("layers", "last_name", lambda s: s.layers, check=True),
        Derived("saved_bytes", "ram_whole_bytes", lambda s: s.ram_whole_bytes - s.ram_bytes),
    )

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
        from splitter.manifest.codec import encode

        return encode(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Transfer:
        """Parse :meth:`to_dict`'s object."""
        from splitter.manifest.codec import decode

        return decode(cls, d)


@dataclass(frozen=True)
class LinkBaud:
    """One link of the plan and its rate: ``a`` -> ``b`` (``"host"`` for the host), what it
    carries (``"input"``, ``"output"``, ``"sub-model k"`` for sub-model ``k``'s output,
    ``"result"`` for the return link of ``--result-on head``)."""

    a: str
    b: str
    baud: int
    carries: str


@dataclass(frozen=True)
class HostIO:
    """The host's transfers of one inference: the input to the first sub-model, the output
    from the last; ``counted``: part of ``latency_s`` (off with ``--no-host-io`` and for layer
    profiles, as in the thesis)."""

    counted: bool = False
    input: Transfer = Transfer()
    output: Transfer = Transfer()

    JSON_DERIVED: ClassVar[tuple[Derived, ...]] = (
        Derived("seconds", "counted", lambda h: h.seconds),
    )

    @property
    def seconds(self) -> float:
        """Input + output seconds."""
        return self.input.seconds + self.output.seconds


@dataclass(frozen=True)
class Headline:
    """Latency and throughput of one way of running the plan (``PlanManifest.product`` and
    ``.harness``, computed by :func:`splitter.partition.planner.headlines`); throughput ``None``
    when no device does anything (unbounded)."""

    latency_s: float = 0.0
    throughput_per_s: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """``{"latency_s", "throughput_per_s"}``."""
        from splitter.manifest.codec import encode

        return encode(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Headline:
        """Parse :meth:`to_dict`'s object."""
        from splitter.manifest.codec import decode

        return decode(cls, d)


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

    JSON_DERIVED: ClassVar[tuple[Derived, ...]] = (
        Derived("memory_bytes", "activation_bytes", lambda r: r.memory_bytes),
    )

    @property
    def memory_bytes(self) -> int:
        """Weights + activations: what the segment occupies of the RAM region."""
        return self.weights_bytes + self.activation_bytes


@dataclass(frozen=True, kw_only=True)
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
    extflash: tuple[tuple[str, Any], ...] = js(empty_as_null=True)
    #: how ``load_s`` brings the weights in (``splitter.segments.build.load_rate``)
    load_via: str = ""
    rows: tuple[SegmentEntry, ...]

    JSON_DERIVED: ClassVar[tuple[Derived, ...]] = (
        Derived("load_s", "load_via", lambda s: s.load_s),
        Derived("compute_s", "load_via", lambda s: s.compute_s),
    )

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
    power otherwise. The JSON form is derived from the fields."""

    total_j: float
    model: str
    devices: tuple[DeviceEnergy, ...]

    def to_dict(self) -> dict[str, Any]:
        """The JSON object of ``plan.json``'s ``energy`` key."""
        from splitter.manifest.codec import encode

        return encode(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Energy:
        """Parse :meth:`to_dict`'s object."""
        from splitter.manifest.codec import decode

        return decode(cls, d)


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
        from splitter.manifest.codec import encode

        return encode(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> LayerSplitEntry:
        """Parse a ``layer_splits`` entry."""
        from splitter.manifest.codec import decode

        return decode(cls, d)


@dataclass(frozen=True, kw_only=True)
class PlanManifest:
    """The plan as every later stage sees it; see the module docstring.

    A manifest is frozen and versioned (:data:`SCHEMA`). :meth:`check` re-checks its own
    invariants without trusting the writer (:mod:`splitter.manifest.checks`): sub-model layer
    ranges are contiguous and cover the chain (layer 0, the input layer, to ``n - 1``), every
    device index exists, per-device totals are the sums (FLASH, SPEC.md (4)) and maxima (RAM,
    SPEC.md (5)) of their sub-models and fit the device's budget, and the boundary tensors chain
    (sub-model ``k``'s output is ``k + 1``'s input). An unknown schema or a failing check is a
    :class:`ManifestError` (one line, exit code 2). The fields are in ``plan.json``'s key order.
    """

    schema: str = SCHEMA
    model: ModelInfo
    boards_path: str
    baud: int = js(group="link")
    bits_per_byte: int = js(group="link")
    #: link model (:class:`splitter.cost.wire.LinkModel`): "wire" (the protocol's bytes) or
    #: "payload" (the thesis's), and the retransmission budget of the board file
    link_model: str = js("payload", group="link", key="model", optional=True)
    retransmit: float = js(0.0, group="link", optional=True)
    #: the host link's and the board-to-board links' rates when the boards file gives them
    #: (``[link] host_baud`` / ``board_baud`` / ``[[link.pair]]``; 0: ``baud``, not written)
    host_baud: int = js(0, group="link", omit_default=True, optional=True)
    board_baud: int = js(0, group="link", omit_default=True, optional=True)
    #: every link of the plan with its rate, when some rate differs from ``baud`` (empty, not
    #: written, when every link runs at ``baud``)
    link_bauds: tuple[LinkBaud, ...] = js(
        (), group="link", key="links", omit_default=True, optional=True
    )
    objective: str
    solver: str
    optimal: bool
    gap: float | None
    nodes: int
    latency_s: float
    host_io: HostIO = js(factory=lambda: HostIO(), optional=True)
    throughput_per_s: float | None  # None: unbounded (zero waiting time)
    throughput_ref9_per_s: float | None
    waiting_s: float
    #: the product: the first board makes the input itself (a sensor) and the last board uses
    #: the output, no PC; the PC harness: ``splitter run`` / ``bench`` sending each input from
    #: the host and receiving the output (``None`` in plans written before them)
    product: Headline | None = js(None, omit_default=True, optional=True)
    harness: Headline | None = js(None, omit_default=True, optional=True)
    bottleneck_device: str
    assignment: tuple[int, ...]
    #: the times predict a run on the emulator (``--emulated``: QEMU's clock, emulated
    #: calibrations) rather than on the parts (``"prediction": "emulator"`` / ``"boards"``)
    emulated: bool = js(
        False,
        key="prediction",
        optional=True,
        write=lambda e: "emulator" if e else "boards",
        read=lambda v: str(v) == "emulator",
    )
    devices: tuple[DeviceEntry, ...]
    submodels: tuple[SubModelEntry, ...]
    #: LO-SC segments of a segmented device (``splitter segment``, ``plan --segments``); None
    #: for a split plan, whose JSON then has no ``segments`` key (earlier hashes unchanged)
    segments: Segments | None = js(None, omit_default=True, optional=True)
    #: energy of one inference; None when a device's part has no energy data (the JSON then
    #: has no ``energy`` key)
    energy: Energy | None = js(None, omit_default=True, optional=True)
    #: layers split into output-channel slices (issue 27); empty for a plan without, whose
    #: JSON then has no ``layer_splits`` key (earlier hashes unchanged)
    layer_splits: tuple[LayerSplitEntry, ...] = js((), omit_default=True, optional=True)

    #: ``links`` is checked against the sub-models by :meth:`from_dict`
    JSON_DERIVED: ClassVar[tuple[Derived, ...]] = (
        Derived("calibration", "emulated", lambda m: m.calibration),
        Derived("links", "submodels", lambda m: m.links()),
    )

    @property
    def host_rate(self) -> int:
        """The host link's baud."""
        return self.host_baud or self.baud

    @property
    def board_rate(self) -> int:
        """The board-to-board links' baud."""
        return self.board_baud or self.baud

    @property
    def link_spec(self) -> LinkSpec:
        """The links the plan was costed with (each rate as plan.json records it)."""
        return LinkSpec(
            baud=self.baud,
            bits_per_byte=self.bits_per_byte,
            retransmit=self.retransmit,
            host_baud=self.host_baud,
            board_baud=self.board_baud,
        )

    def rates_text(self) -> str:
        """The links' rates in one phrase: ``"115200 baud"`` when every link runs at ``baud``,
        else each link of the plan with its rate (``"host to a 115200, a to b 4000000, ..."``)."""
        if not self.link_bauds:
            return f"{self.baud} baud"
        each = ", ".join(f"{x.a} to {x.b} {x.baud}" for x in self.link_bauds)
        return f"host link {self.host_rate} baud, board-to-board {self.board_rate} baud ({each})"

    @property
    def calibration(self) -> str:
        """Which calibration the compute times use: "none", "emulated", "real", or per part
        (``"real (STM32F405RG); none (STM32F446RE)"``) when only some parts have one."""
        by_part = dict.fromkeys((d.mcu, d.calibration) for d in self.devices)
        labels = {label for _, label in by_part}
        if len(labels) == 1:
            return labels.pop()
        return "; ".join(f"{label} ({mcu})" for mcu, label in by_part)

    def headline_lines(self) -> list[str]:
        """The product's and the PC harness's latency and throughput, one labelled line each
        (:func:`splitter.partition.planner.headlines`); none for plans written before them."""
        if self.product is None or self.harness is None:
            return []
        p, h = self.product, self.harness

        def rate(x: float | None) -> str:
            return "unbounded" if x is None else f"{x:.3f}/s"

        io = self.host_io
        n_in = len(self.submodels[0].inputs) if self.submodels else 1
        what = "input" if n_in == 1 else f"of {n_in} inputs"
        return [
            f"product (first board fed locally, no PC): latency {p.latency_s * 1e3:.3f} ms, "
            f"throughput {rate(p.throughput_per_s)}",
            f"PC harness (host sends the {io.input.bytes} B {what} at {self.host_rate} baud): "
            f"latency {h.latency_s * 1e3:.3f} ms, throughput {rate(h.throughput_per_s)}",
        ]

    @property
    def prediction_note(self) -> str:
        """One line: which runs the compute times predict and which calibration they use."""
        what = "an emulated run (QEMU)" if self.emulated else "a run on the parts"
        return f"compute times predict {what}; calibration: {self.calibration}"

    # --- views ------------------------------------------------------------------------------

    @property
    def input(self) -> TensorSpec:
        """The graph input: the first sub-model's first input (``submodels[0].inputs``: all of
        them, for a model with several)."""
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
        from splitter.manifest.checks import problems

        problem = next(iter(problems(self)), None)
        if problem is not None:
            raise ManifestError(f"{where}: {problem}; re-run `splitter compile`")
        return self

    # --- JSON (splitter.manifest.codec) -----------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """The JSON object (key order fixed; ``links`` derived for readers of the file)."""
        from splitter.manifest.codec import encode

        return encode(self)

    def to_json(self, indent: int | None = 2) -> str:
        """:meth:`to_dict` as JSON text (what ``plan --json`` prints and ``plan.json`` holds)."""
        from splitter.manifest.codec import manifest_json

        return manifest_json(self, indent)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], where: str = MANIFEST_FILE) -> PlanManifest:
        """Parse and :meth:`check` a manifest object; ManifestError on any problem."""
        from splitter.manifest.codec import parse_manifest

        return parse_manifest(data, where)

    @classmethod
    def from_json(cls, text: str, where: str = MANIFEST_FILE) -> PlanManifest:
        """Parse JSON text (see :meth:`from_dict`)."""
        from splitter.manifest.codec import read_manifest_text

        return read_manifest_text(text, where)


#: File name of the wiring description inside ``OUT/firmware`` (``splitter.codegen.firmware``).
WIRING_FILE = "firmware/wiring.json"


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
