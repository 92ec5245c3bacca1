"""The small frozen intermediate representation every stage of splitter shares.

Data flow (one direction of imports): importers build a :class:`Graph` of :class:`Op` over
:class:`TensorSpec`; ``splitter.graph`` turns it into a :class:`Chain` of :class:`Layer`; the
cost model attaches a :class:`LayerCost` to every layer; the partition engine only ever sees
``LayerCost`` values; slicing and codegen read layers, ops and tensor names.

Conventions (importers must follow them, codegen relies on them):

* Tensor names are the **original model's tensor names** (for TFLite, the tensor's name, made
  unique by appending ``":<index>"`` when the file repeats a name), so a chain boundary can be cut
  in the original file.
* Shapes are the source model's shapes, batch dimension included (``(1, 3, 224, 224)`` for an ONNX
  NCHW image); :attr:`Graph.layout` says ``"NCHW"`` (ONNX) or ``"NHWC"`` (TFLite) or ``""``
  (profiles, unknown).
* ``Op.kind`` is one of :data:`splitter.ops.OP_KINDS` (one op class per kind in
  :mod:`splitter.codegen.ops`).
  Weights are numpy arrays in ``Op.weights`` in a canonical form: conv ``W`` is
  ``(O, I/groups, kh, kw)``, dense ``W`` is ``(out, in)``, biases ``B`` are 1-D.
  Attribute names are listed in :data:`splitter.ops.OP_KINDS`.
* A fused element-wise activation is ``attrs["act"]`` in :data:`splitter.ops.ACTIVATIONS`
  (``None`` for none),
  with ``attrs["act_min"]/["act_max"]`` for ``"clip"``. A pooling fused after a conv is a second
  ``Op`` in the same :class:`Layer`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from math import prod
from typing import Any

import numpy as np


@dataclass(frozen=True)
class QuantParams:
    """Affine quantisation: ``real = scale * (q - zero_point)``, per tensor or per ``axis``."""

    scale: tuple[float, ...]
    zero_point: tuple[int, ...]
    axis: int | None = None


@dataclass(frozen=True)
class TensorSpec:
    """A tensor's name, static shape and element type (numpy dtype name, e.g. ``"float32"``)."""

    name: str
    shape: tuple[int, ...]
    dtype: str = "float32"
    quant: QuantParams | None = None

    @property
    def size(self) -> int:
        """Number of elements, ``prod(shape)``."""
        return int(prod(self.shape))

    @property
    def itemsize(self) -> int:
        """Bytes per element of :attr:`dtype`."""
        return int(np.dtype(self.dtype).itemsize)

    @property
    def nbytes(self) -> int:
        """Bytes of the tensor: ``prod(shape) * itemsize``."""
        return self.size * self.itemsize


@dataclass(frozen=True, eq=False)
class Op:
    """One canonical operator.

    ``inputs``/``outputs`` name activation tensors (constants live in ``weights``);
    ``source_nodes`` are the names of the original model's nodes this op stands for (a Conv with a
    folded BatchNormalization and a fused Relu lists all three), used by slicing and reports.
    """

    name: str
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: Mapping[str, Any] = field(default_factory=dict)
    weights: Mapping[str, np.ndarray] = field(default_factory=dict)
    source_nodes: tuple[str, ...] = ()

    def attr(self, key: str, default: Any = None) -> Any:
        """Attribute ``key`` or ``default``."""
        return self.attrs.get(key, default)


@dataclass(frozen=True, eq=False)
class Graph:
    """A model as a DAG of canonical ops in topological order."""

    name: str
    ops: tuple[Op, ...]
    tensors: Mapping[str, TensorSpec]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    layout: str = ""  # "NCHW", "NHWC" or "" (unknown)
    source_format: str = ""  # "onnx", "tflite", "profile"
    source_path: str = ""
    metadata: Mapping[str, str] = field(default_factory=dict)

    def tensor(self, name: str) -> TensorSpec:
        """The spec of tensor ``name``."""
        return self.tensors[name]


@dataclass(frozen=True)
class LayerCost:
    """Per-layer costs of SPEC.md: FLASH_j, RAM_j, MAC_j and OUT_j, all in bytes / MACs.

    Supports ``+`` for convenience; note that RAM is **not** additive on a device (SPEC.md (5)):
    ``a + b`` takes ``max`` of the RAM fields and the second operand's ``out_bytes``.
    """

    flash: int = 0
    ram: int = 0
    macs: int = 0
    out_bytes: int = 0
    #: ``macs`` split by op class (``"conv"``, ``"depthwise"``, ``"dense"``, ``"other"``), sorted by
    #: class name; used by calibrated per-class cycles-per-MAC. Empty for profiles.
    macs_by_class: tuple[tuple[str, int], ...] = ()
    #: instructions of the project's kernels running the layer, per build of the kernel cost
    #: table (``"M4F.dsp"``, ...: ``splitter.cost.kernels``), sorted; empty for profiles, which
    #: keep the flat cycles-per-MAC model
    instructions: tuple[tuple[str, float], ...] = ()

    def __add__(self, other: LayerCost) -> LayerCost:
        classes: dict[str, int] = dict(self.macs_by_class)
        for cls, macs in other.macs_by_class:
            classes[cls] = classes.get(cls, 0) + macs
        instr: dict[str, float] = dict(self.instructions)
        for build, n in other.instructions:
            instr[build] = instr.get(build, 0.0) + n
        return LayerCost(
            flash=self.flash + other.flash,
            ram=max(self.ram, other.ram),
            macs=self.macs + other.macs,
            out_bytes=other.out_bytes,
            macs_by_class=tuple(sorted(classes.items())),
            instructions=tuple(sorted(instr.items())),
        )


@dataclass(frozen=True)
class ChannelLoop:
    """A PEX partial execution loop inside a layer (``splitter.cost.pex``): the ops ``ops`` (names,
    in schedule order) run one channel at a time over ``channels`` channels; the first generates
    (or slices its full input), the last accumulates into (or writes a channel of) its full
    output, only one channel of every tensor between them exists.

    ``by == "row"``: a row loop (:mod:`splitter.cost.rows`) instead: the ops stream output rows,
    every tensor between them held as a window of rows; ``channels`` is then the last op's
    output rows, computed ``band`` rows per iteration (each op called once per iteration for
    the rows it still misses: :func:`splitter.cost.rows.band_schedule`).

    ``step``: channels per iteration of a channel loop (``splitter.cost.pex_chain.loop_steps``;
    int8 only): every inner tensor holds ``step`` channels, the last iteration the
    ``channels % step`` left."""

    ops: tuple[str, ...]
    channels: int
    by: str = "channel"
    step: int = 1
    band: int = 1


@dataclass(frozen=True, eq=False)
class Layer:
    """One element of the chain: the input layer, one fused op group, or a super-node.

    ``kind`` is ``"input"``, a canonical op kind, or ``"super"`` (a collapsed single-entry /
    single-exit region; ``ops`` then holds its inner ops in a valid schedule order).
    ``input``/``output`` are the single tensors crossing the boundaries before and after it in a
    super-node chain. In an operator-granularity chain (``splitter.graph.opchain``) ``live`` holds
    every tensor crossing the cut after the layer (skip tensors included, a fixed order) and
    ``reads`` every tensor the layer reads from earlier layers (``input`` is the first).
    """

    index: int
    name: str
    kind: str
    ops: tuple[Op, ...]
    input: TensorSpec | None
    output: TensorSpec
    cost: LayerCost
    #: partial execution loops (``splitter.cost.pex_chain``); ``cost.ram`` then counts them
    loops: tuple[ChannelLoop, ...] = ()
    #: RAM_j with every op run whole, when ``loops`` lowered it (0: no loops)
    whole_ram: int = 0
    live: tuple[TensorSpec, ...] = ()
    reads: tuple[TensorSpec, ...] = ()

    @property
    def boundary(self) -> tuple[TensorSpec, ...]:
        """The tensors crossing the cut after this layer: ``live``, or the output alone."""
        return self.live or (self.output,)

    @property
    def op_label(self) -> str:
        """What ``inspect`` prints in the op column: the kind, or ``super(k ops)``, with
        ``pex`` when the layer runs partial execution loops."""
        label = f"super({len(self.ops)} ops)" if self.kind == "super" else self.kind
        return f"{label} pex" if self.loops else label


@dataclass(frozen=True, eq=False)
class Chain:
    """A model as a strict sequence of layers; layer 0 is the explicit input layer."""

    name: str
    layers: tuple[Layer, ...]
    graph: Graph | None = None  # None for layer profiles (no ops, no weights)
    source_path: str = ""
    #: "supernode" (branches collapsed, one tensor per cut) or "op" (one layer per fused op
    #: group, every live tensor crosses a cut; ``splitter.graph.opchain``)
    granularity: str = "supernode"

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def costs(self) -> tuple[LayerCost, ...]:
        """The per-layer costs the partition engine consumes."""
        return tuple(layer.cost for layer in self.layers)


# --- Hardware and plans (data only; the catalog, boards.toml parser and solvers build them) ---


@dataclass(frozen=True)
class Part:
    """An MCU part: catalog entry or inline ``part = {...}`` in boards.toml.

    ``flash_kib``/``ram_kib``/``clock_mhz``/``cpm`` are the thesis's Table 2 figures for thesis
    parts. ``family`` names the part's STM32 family (``"F4"``, ``"H7"``...; the core, USART
    layout, IRQs and pins come from ``splitter.hardware.families``). ``ram_regions`` is
    ``((name, origin, size_bytes), ...)`` with the region the arena goes in first.
    """

    name: str
    flash_kib: float
    ram_kib: float
    clock_mhz: float
    cpm: float
    family: str
    fpu: str = ""  # "" (none) | "fpv4-sp-d16" | "fpv5-d16" | "fpv5-sp-d16"
    flash_origin: int = 0x0800_0000
    ram_regions: tuple[tuple[str, int, int], ...] = ()
    usarts: tuple[tuple[str, int], ...] = ()  # ((name, base address), ...) in preference order
    source: str = ""  # datasheet / reference manual the numbers come from


#: What a calibration was measured on: "emulated" (QEMU, only predicts emulated runs) or "real".
CALIBRATION_KINDS = ("emulated", "real")


@dataclass(frozen=True)
class Calibration:
    """Correction of the compute estimate for one part, from ``splitter calibrate``.

    ``predicted cycles = sum_c factor_c * estimated cycles_c`` over op classes ``c``, with
    ``factor_c = by_class.get(c, factor)``: measured / estimated, fitted on a bench of ``kind``
    ("emulated": QEMU, used only to predict emulated runs; "real": boards over ``--port``).
    ``fit`` says how it was fitted and ``error_pct`` is its largest |residual| over the bench's
    sub-models (``None`` when the fit is exactly determined and so cannot be checked).
    """

    kind: str
    part: str
    factor: float
    by_class: Mapping[str, float] = field(default_factory=dict)
    fit: str = ""
    error_pct: float | None = None
    bench: str = ""

    def of(self, cls: str | None) -> float:
        """The factor of op class ``cls`` (``None``: MACs no class accounts for)."""
        return self.by_class.get(cls, self.factor) if cls is not None else self.factor


@dataclass(frozen=True)
class Device:
    """One board of boards.toml: a part plus the usable memory and speed the planner uses."""

    name: str
    part: Part
    flash_bytes: int  # usable FLASH_i after the user's reserve
    ram_bytes: int  # usable RAM_i
    clock_hz: float  # f_i
    cpm: float  # CpM_i (cycles per MAC)
    port: str | None = None
    probe: str | None = None
    #: optional calibrated cycles-per-MAC per op class ("conv", "depthwise", "dense", "other")
    cpm_by_class: Mapping[str, float] = field(default_factory=dict)
    #: the board definition (``splitter/hardware/board_catalog.toml``), e.g. "nucleo-h743zi"
    board: str | None = None
    #: the calibration of the device's part the estimate uses (``None``: uncalibrated); its
    #: ``kind`` matches ``emulated`` (:func:`splitter.hardware.boards.for_prediction`)
    calibration: Calibration | None = None
    #: predict a run on the emulator (QEMU) rather than on the part
    emulated: bool = False

    @property
    def calibration_label(self) -> str:
        """``"none"``, ``"emulated"`` or ``"real"``: which calibration the estimate uses."""
        return self.calibration.kind if self.calibration is not None else "none"


@dataclass(frozen=True)
class LinkSpec:
    """The boards' links (``kind``: UART today, :mod:`splitter.hardware.links`): sending B bytes
    takes ``B * bits_per_byte / baud`` seconds (SPEC.md, Links).

    ``retransmit`` is the retransmission budget of the wire model (:mod:`splitter.cost.wire`):
    expected extra bytes as a fraction of a clean transfer's (0: a clean line).
    """

    baud: int = 115200
    bits_per_byte: int = 10
    retransmit: float = 0.0
    #: the link's peripheral kind (``[link] kind``; :mod:`splitter.hardware.links`)
    kind: str = "uart"
    #: ``[link] host_baud``: the host link's rate (0: ``baud``)
    host_baud: int = 0
    #: ``[link] board_baud``: every board-to-board link's rate (0: ``baud``)
    board_baud: int = 0
    #: ``[[link.pair]]``: rates of named board-to-board links, overriding ``board_baud``
    pairs: tuple[PairBaud, ...] = ()

    @property
    def host_rate(self) -> int:
        """The host link's baud: ``host_baud``, else ``baud``."""
        return self.host_baud or self.baud

    @property
    def board_rate(self) -> int:
        """A board-to-board link's baud without a ``[[link.pair]]``: ``board_baud``, else
        ``baud``."""
        return self.board_baud or self.baud

    def pair_rate(self, a: str, b: str) -> int:
        """The baud of the link between devices ``a`` and ``b`` (either order)."""
        for p in self.pairs:
            if set(p.devices) == {a, b}:
                return p.baud
        return self.board_rate

    def rate_key(self, a: str | None, b: str | None = None) -> str:
        """The boards-file key that sets the rate of the host link (``a`` None) or of the link
        between devices ``a`` and ``b``: what a refusal tells the user to change."""
        if a is None or b is None:
            return "[link] host_baud" if self.host_baud else "[link] baud"
        for p in self.pairs:
            if set(p.devices) == {a, b}:
                return f'baud of [[link.pair]] devices = ["{p.devices[0]}", "{p.devices[1]}"]'
        return "[link] board_baud" if self.board_baud else "[link] baud"

    def at(self, baud: int) -> LinkSpec:
        """This link at one rate everywhere (what one transfer's time is computed from)."""
        return LinkSpec(baud, self.bits_per_byte, self.retransmit, self.kind)

    @property
    def host(self) -> LinkSpec:
        """The host link (:meth:`at` :attr:`host_rate`)."""
        return self.at(self.host_rate)

    def between(self, a: str, b: str) -> LinkSpec:
        """The link between devices ``a`` and ``b`` (:meth:`at` :meth:`pair_rate`)."""
        return self.at(self.pair_rate(a, b))


@dataclass(frozen=True)
class PairBaud:
    """One ``[[link.pair]]`` of a boards file: the baud of the link between two devices."""

    devices: tuple[str, str]
    baud: int


@dataclass(frozen=True)
class FirmwareUse:
    """How the boards' firmware is used (``compile --app`` / ``--result-on``): what the planner
    counts besides the model. ``app``: ``harness`` (the PC drives the chain), ``standalone``
    (the head feeds itself from ``samples`` compiled-in inputs) or ``library`` (the product's
    own ``main()``, clocks and UARTs); ``result_on``: the board that gets each result, ``tail``
    or ``head`` (a return link from the tail to the head)."""

    app: str = "harness"
    result_on: str = "tail"
    samples: int = 0  # standalone: sample inputs compiled into the head board

    @property
    def returns(self) -> bool:
        """Whether results travel back to the head board (a return link, when it is not the
        tail)."""
        return self.app != "harness" and self.result_on == "head"


@dataclass(frozen=True)
class Boards:
    """A parsed boards.toml: the devices in file order and the link settings."""

    devices: tuple[Device, ...]
    link: LinkSpec
    source_path: str = ""
    #: every ``[calibration.KIND.PART]`` table of the file, whichever the devices use
    calibrations: tuple[Calibration, ...] = ()
    #: what the firmware holds besides the model (``compile --app``); the default: the harness
    firmware: FirmwareUse = field(default_factory=FirmwareUse)


@dataclass(frozen=True)
class SubModel:
    """A maximal run ``first..last`` (inclusive, chain layer indices) on one device."""

    index: int
    device_index: int
    first: int
    last: int


@dataclass(frozen=True)
class Plan:
    """A solved (or evaluated) assignment of chain layers to devices.

    ``assignment[j]`` is the device index of layer ``j``; ``submodels`` are its maximal runs in
    topological order. Objective values follow SPEC.md (latency eq. 13, throughput eq. 17 as read
    there, reference-[9] throughput ``1 / max_i (L_i + S_i)``).
    """

    objective: str  # "latency" | "throughput" | "energy"
    solver: str
    optimal: bool
    nodes: int
    solve_time_s: float
    assignment: tuple[int, ...]
    submodels: tuple[SubModel, ...]
    latency_s: float
    throughput_per_s: float
    throughput_ref9_per_s: float
    gap: float | None = None  # relative optimality gap when a time limit stopped the solver
    #: energy of one inference (J), when every device's part has energy data
    energy_j: float | None = None
    #: nodes per (layer, device) of a branch-and-bound search, when one ran (report heatmaps)
    search: tuple[tuple[int, ...], ...] | None = field(default=None, compare=False, repr=False)
    #: a proved lower bound on the minimised value (latency, waiting time or energy) of every
    #: plan that fits, when the planner has one (the proved optimum of its relaxation with the
    #: lower-bound firmware reserves): a plan not proved optimal still proves that no plan
    #: reaches below it
    value_bound: float | None = field(default=None, compare=False)
