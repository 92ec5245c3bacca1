"""Per-device C for the sub-models a device hosts: weights in flash, one function per sub-model.

``generate_device_c(chain, layer_ranges, device_name)`` renders ``model.h`` / ``model.c`` for one
device. Every sub-model becomes ``int sm_<NN>(float *arena)`` calling the kernels of
``splitter/firmware_templates/kernels``: float32 NCHW (ONNX, batch 1), float32 NHWC (TFLite, through
``kernels_nhwc.c``) and int8 NHWC (full-integer TFLite, ``kernels_q8.c``, emitted by
:mod:`splitter.codegen.ops`), with each activation at a byte offset in the device's one static
arena (4 bytes per float32 element, 1 per int8 one), laid out by the ARENA RULE
(``docs/arena.md``):

* layer ``j`` is planned by ``plan_layer_memory`` (input at 0, output last, ``size = RAM_j``);
* the device arena is ``A = max_j RAM_j`` over the layers it hosts (SPEC.md constraint (5));
* layers alternate ping-pong: input at the bottom -> planned offsets, output moved to
  ``A - out_bytes``; input at the top -> mirrored offsets ``off' = A - off - bytes`` so the output
  lands at 0; a sub-model's received input sits at offset 0.

The weights bytes are ``sum(nbytes)`` of every ``Op.weights`` array plus, for int8 weights, an
int32 multiplier and an int32 shift per weight scale (FLASH_j, ``splitter.cost.handlers.
op_flash``), emitted as ``const`` arrays in section ``.weights`` with no padding and checked
layer by layer against the estimate; :class:`GeneratedC` reports both numbers so the estimator
and the build can be compared byte for byte.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from splitter.codegen import ops as emitters
from splitter.codegen.escape import c_comment
from splitter.codegen.ops.base import EmitContext
from splitter.codegen.ops.literals import WeightTable
from splitter.codegen.ops.q8_variants import isa_of
from splitter.codegen.pex import emit_layer as emit_pex_layer
from splitter.codegen.pex import placed_offsets as pex_offsets
from splitter.codegen.slots import SubModelSlots, TensorSlot
from splitter.cost.handlers import op_flash
from splitter.cost.oparena import LayerArena, plan_op_layer
from splitter.errors import UnsupportedOpError
from splitter.ir import Chain, Layer, Op, SubModel, TensorSpec
from splitter.manifest import submodel_boundaries
from splitter.ops import kinds_with_kernel

#: Where the kernel library lives (copied verbatim into every firmware project).
KERNELS_DIR = Path(__file__).resolve().parent.parent / "firmware_templates" / "kernels"

#: Bytes of one float32 activation / weight element (the only type the float kernels handle).
FLOAT_BYTES = 4


class LayerMemoryLike(Protocol):
    """What ``splitter.cost.memory.plan_layer_memory`` returns (the ARENA RULE)."""

    @property
    def size(self) -> int: ...
    @property
    def offsets(self) -> Mapping[str, int]: ...
    @property
    def sizes(self) -> Mapping[str, int]: ...


Planner = Callable[..., Any]
RangeLike = SubModel | tuple[int, int] | tuple[int, int, int]


@dataclass(frozen=True)
class GeneratedC:
    """C sources of one device and the byte counts they allocate.

    ``submodels`` rows are ``(index, input_offset, input_bytes, output_offset, output_bytes)``
    of the main (chain) input and output with offsets in bytes from the start of the arena;
    ``slots`` place every boundary tensor of each sub-model (plan.json's ``inputs`` /
    ``outputs``), what the firmware tables list.
    """

    files: dict[str, str]
    weights_bytes: int
    arena_bytes: int
    submodels: list[tuple[int, int, int, int, int]] = field(default_factory=list)
    slots: list[SubModelSlots] = field(default_factory=list)


def kernel_sources() -> dict[str, str]:
    """The kernel library files (``kernels*.h``, ``kernels*.c``, ``k_libc.c``) by file name.

    ``k_libc.c`` holds weak ``memcpy``/``memset``/``memmove`` for ``-nostdlib`` builds only.
    """
    return {p.name: p.read_text() for p in sorted(KERNELS_DIR.glob("*.[ch]"))}


def default_planner() -> Planner:
    """``splitter.cost.memory.plan_layer_memory``, the one ARENA RULE implementation."""
    from splitter.cost.memory import plan_layer_memory

    return plan_layer_memory


def float_itemsize(spec: TensorSpec) -> int:
    """Element size the kernels use: 1 byte for int8 tensors (``kernels_q8.c``), else 4 (the
    float kernels keep float32 activations)."""
    return 1 if spec.dtype == "int8" else FLOAT_BYTES


# --------------------------------------------------------------------------- checks ----


def _normalise_ranges(layer_ranges: Sequence[RangeLike]) -> list[tuple[int, int, int]]:
    """``(index, first, last)`` for every range; plain ``(first, last)`` get indices 0, 1, ..."""
    out: list[tuple[int, int, int]] = []
    for k, r in enumerate(layer_ranges):
        if isinstance(r, SubModel):
            out.append((r.index, r.first, r.last))
        elif len(r) == 3:
            out.append((int(r[0]), int(r[1]), int(r[2])))
        else:
            out.append((k, int(r[0]), int(r[1])))
    return out


def missing_ops(chain: Chain, ranges: Sequence[RangeLike]) -> list[str]:
    """Every op (and tensor type) of the given layer ranges the float kernels cannot run.

    Returns ``"<op name> (<kind>): <reason>"`` strings, empty when all is supported.
    """
    problems: list[str] = []
    graph = chain.graph
    if graph is None:
        return [f"{chain.name}: a layer profile has no ops; import the model file instead"]
    if graph.layout not in LAYOUTS:
        problems.append(f"{chain.name}: {graph.layout} layout (the kernels are NCHW or NHWC)")
    for _, first, last in _normalise_ranges(ranges):
        for layer in chain.layers[first : last + 1]:
            problems.extend(_layer_problems(layer, graph.tensors))
            problems.extend(_layout_problems(layer, graph.layout))
    return problems


#: Layouts the kernels handle ("" = unknown, treated as NCHW).
LAYOUTS = ("NCHW", "NHWC", "")

#: Op kinds whose float kernels assume the channel axis 1 (NCHW only; splitter/ops.py).
NCHW_ONLY_KINDS = kinds_with_kernel("NCHW", "float32") - kinds_with_kernel("NHWC", "float32")


def _layout_problems(layer: Layer, layout: str) -> list[str]:
    """Ops of an NHWC layer whose kernel exists in NCHW only."""
    if layout != "NHWC":
        return []
    return [
        f"{op.name} ({op.kind}): no NHWC kernel (channel axis 1 only)"
        for op in layer.ops
        if op.kind in NCHW_ONLY_KINDS
    ]


def _layer_problems(layer: Layer, tensors: Mapping[str, TensorSpec]) -> list[str]:
    """Unsupported kinds, variants and non-float32 tensors / weights of one layer."""
    problems = []
    for spec in (layer.input, layer.output):
        if spec is not None and not _tensor_ok(spec):
            problems.append(
                f"{spec.name}: {spec.dtype} tensor (the kernels run float32 and per-tensor int8)"
            )
    for op in layer.ops:
        reason = check_op(op, tensors)
        if reason:
            problems.append(f"{op.name} ({op.kind}): {reason}")
    return problems


def _tensor_ok(spec: TensorSpec) -> bool:
    """float32, or int8 quantised per tensor (``kernels_q8.c``)."""
    if spec.dtype == "int8":
        return spec.quant is not None and len(spec.quant.scale) == 1
    return spec.dtype == "float32"


def check_op(op: Op, tensors: Mapping[str, TensorSpec]) -> str | None:
    """Why no kernel runs ``op``: the int8 kernels for quantised ops, else the float ones."""
    return emitters.check(op, tensors)


def emit_op(op: Op, ctx: EmitContext) -> list[str]:
    """The C statements of ``op`` (int8 kernels for quantised ops, else float)."""
    return emitters.emit(op, ctx)


def check_supported(chain: Chain, ranges: Sequence[RangeLike]) -> None:
    """Raise one :class:`UnsupportedOpError` listing every problem :func:`missing_ops` finds."""
    problems = missing_ops(chain, ranges)
    if problems:
        src = chain.source_path or chain.name
        raise UnsupportedOpError(
            f"{src}: the C kernels cannot run {len(problems)} op(s): "
            + "; ".join(problems)
            + "; choose a plan without them or a float32 / int8 model of supported ops"
        )


# ---------------------------------------------------------------------------- arena ----


def layer_memory(layer: Layer, chain: Chain, planner: Planner) -> LayerMemoryLike:
    """The ARENA RULE plan of one layer (layer 0: one buffer, input == output); in an
    operator-granularity chain the op layer plan (:func:`op_layer_memory`)."""
    assert chain.graph is not None
    if chain.granularity == "op":
        return op_layer_memory(layer, chain)
    if layer.kind == "input" or not layer.ops:
        return _InputMemory(layer.output)
    assert layer.input is not None
    loops = {"loops": layer.loops} if layer.loops else {}  # PEX: planned with its loops
    return planner(
        list(layer.ops),
        chain.graph.tensors,
        layer.input.name,
        layer.output.name,
        float_itemsize,
        **loops,
    )


@dataclass(frozen=True)
class _InputMemory:
    """RAM_0: the input tensor alone at offset 0."""

    spec: TensorSpec

    @property
    def size(self) -> int:
        return self.spec.size * float_itemsize(self.spec)

    @property
    def offsets(self) -> Mapping[str, int]:
        return {self.spec.name: 0}

    @property
    def sizes(self) -> Mapping[str, int]:
        return {self.spec.name: self.size}


def check_costs_match(
    chain: Chain, ranges: Sequence[RangeLike], planner: Planner | None = None
) -> None:
    """Raise when a layer's planned RAM_j / FLASH_j is not what the generator allocates.

    The plan's estimates must be the generator's numbers (issue 5); they differ when the chain
    was costed with ``--activation-bytes`` other than the dtype's size, since the kernels keep
    float32 / int8 activations. Layers with zero cost (hand-built chains) are not checked.
    FLASH_j is what :func:`generate_device_c` emits for the layer (float32 weights as they are;
    int8 weights, int32 biases and 8 bytes of int32 multiplier + shift per weight scale).
    """
    plan = planner or default_planner()
    for _, first, last in _normalise_ranges(ranges):
        for layer in chain.layers[first : last + 1]:
            _check_cost(chain, layer, "RAM", layer_memory(layer, chain, plan).size, _RAM_BUT)
            _check_cost(
                chain, layer, "FLASH", layer_flash(layer), "its weights are {} B; " + _REIMPORT
            )


#: What the generator allocates when a layer's RAM_j estimate differs, and why.
_RAM_BUT = (
    "the C kernels need {} B; they keep float32 / int8 activations, so plan without "
    "--activation-bytes"
)
#: The remedy when a layer's FLASH_j estimate is not the generator's weight bytes.
_REIMPORT = "re-import the model so costs and weights agree"


def _check_cost(chain: Chain, layer: Layer, what: str, actual: int, but: str) -> None:
    """Raise when the layer's planned ``what`` (``"RAM"`` / ``"FLASH"``, bytes) is set and is not
    ``actual``; ``but`` (with ``{}`` for ``actual``) says what the generator has instead."""
    costed = layer.cost.ram if what == "RAM" else layer.cost.flash
    if costed and costed != actual:
        raise UnsupportedOpError(
            f"{chain.source_path or chain.name}: layer {layer.index} ({layer.name}) is costed "
            f"at {what} {costed} B but {but.format(actual)}"
        )


def layer_flash(layer: Layer) -> int:
    """Bytes of ``.weights`` arrays the generator emits for ``layer``: ``sum(op_flash(op))``, the
    FLASH_j formula of :func:`splitter.cost.handlers.op_flash` (written there once)."""
    return sum(op_flash(op) for op in layer.ops)


def device_arena_bytes(
    chain: Chain, layer_ranges: Sequence[RangeLike], planner: Planner | None = None
) -> int:
    """``A_i = max RAM_j`` over every layer of every range the device hosts."""
    plan = planner or default_planner()
    sizes = [
        layer_memory(chain.layers[j], chain, plan).size
        for _, first, last in _normalise_ranges(layer_ranges)
        for j in range(first, last + 1)
    ]
    return max(sizes, default=0)


def placed_offsets(mem: LayerMemoryLike, layer: Layer, arena: int, at_top: bool) -> dict[str, int]:
    """Byte offsets of one layer's tensors in an arena of ``arena`` bytes (ping-pong rule).

    Bottom: planned offsets, output moved to ``arena - out_bytes``. Top: every offset mirrored,
    ``off' = arena - off - bytes``, so the input sits at the top and the output at 0.
    """
    offs = dict(mem.offsets)
    out = layer.output.name
    offs[out] = arena - mem.sizes[out]
    if at_top:
        offs = {name: arena - off - mem.sizes[name] for name, off in offs.items()}
    return offs


# ------------------------------------------------------------------------ generation ----


#: Boundary tensor names of a sub-model: ``(inputs, outputs)`` in plan.json order.
BoundaryNames = tuple[Sequence[str], Sequence[str]]


def generate_device_c(
    chain: Chain,
    layer_ranges: Sequence[RangeLike],
    device_name: str,
    *,
    planner: Planner | None = None,
    core: str | None = None,
    boundaries: Mapping[int, BoundaryNames] | None = None,
) -> GeneratedC:
    """C sources (``model.h``, ``model.c``) for the sub-models ``layer_ranges`` of one device.

    ``core`` (gcc ``-mcpu``, e.g. ``"cortex-m0plus"``) picks the int8 kernel variants
    (:func:`splitter.codegen.ops.q8_variants.isa_of`; ``None``: the DSP ones).

    ``layer_ranges`` items are :class:`SubModel`, ``(first, last)`` (numbered 0, 1, ... in order)
    or ``(index, first, last)``; function ``sm_<index:02d>`` runs layers ``first..last``.
    ``boundaries[index]`` names the sub-model's input and output tensors (plan.json; default
    :func:`splitter.manifest.submodel_boundaries`); see :func:`side_offsets` for the tensors
    besides the chain's. Raises :class:`UnsupportedOpError` listing every op the kernels lack.
    """
    check_supported(chain, layer_ranges)
    plan = planner or default_planner()
    ranges = _normalise_ranges(layer_ranges)
    check_costs_match(chain, ranges, plan)
    arena = device_arena_bytes(chain, ranges, plan)
    isa = isa_of(core)
    weights = WeightTable()
    bodies: list[str] = []
    rows: list[tuple[int, int, int, int, int]] = []
    slots: list[SubModelSlots] = []
    top = arena
    for index, first, last in ranges:
        if chain.granularity == "op":
            body, row = _op_submodel_function(chain, (index, first, last), weights, isa)
            slots.append(_packed_slots(chain, (index, first, last), boundaries))
        else:
            given = (boundaries or {}).get(index)
            names = given or _default_names(chain, first, last)
            side = side_offsets(chain, names, arena)
            body, row, last_offs = _submodel_function(
                chain, (index, first, last), arena, plan, weights, isa, side
            )
            slots.append(_slots(chain, (index, first, last), names, row, last_offs, side))
        bodies.append(body)
        rows.append(row)
        top = max([top, *(t.offset + t.nbytes for t in (*slots[-1].inputs, *slots[-1].outputs))])
    files = {
        "model.h": _header(device_name, top, weights.nbytes, ranges),
        "model.c": _source(device_name, chain, top, weights, bodies, ranges, rows),
    }
    return GeneratedC(files, weights.nbytes, top, rows, slots)


def _default_names(chain: Chain, first: int, last: int) -> BoundaryNames:
    ins, outs = submodel_boundaries(chain, first, last)
    return [t.name for t in ins], [t.name for t in outs]


def _nbytes(chain: Chain, name: str) -> int:
    """Arena bytes of activation ``name`` (:func:`float_itemsize` per element)."""
    assert chain.graph is not None
    spec = chain.graph.tensors[name]
    return spec.size * float_itemsize(spec)


def side_offsets(chain: Chain, names: BoundaryNames, arena: int) -> dict[str, int]:
    """Arena offsets of the sub-model's pass-through tensors (inputs that are also outputs).

    The layers' ping-pong plans (module docstring) use ``[0, arena)``; a pass-through tensor must
    survive the whole sub-model, so each gets its own block above: ``arena + sum of the 4-aligned
    sizes of the pass-through tensors before it``. It is received there and sent from there (no
    copy); when it is also the chain's input of the sub-model its first layer reads it there.
    """
    ins, outs = names
    offsets: dict[str, int] = {}
    top = arena
    for name in ins:
        if name in outs and name not in offsets:
            offsets[name] = top
            top += -(-_nbytes(chain, name) // 4) * 4
    return offsets


def _slots(
    chain: Chain,
    span: tuple[int, int, int],
    names: BoundaryNames,
    row: tuple[int, int, int, int, int],
    last_offs: Mapping[str, int],
    side: Mapping[str, int],
) -> SubModelSlots:
    """Every boundary tensor's slot: the chain's input at 0 and output where the last layer left
    it, pass-through tensors in their side blocks, and further outputs (a graph's other outputs)
    where the last layer's plan keeps them live to its end (produced and never read there).
    :class:`UnsupportedOpError` for any other tensor (an input read besides the chain's)."""
    index, first, last = span
    _, in_off, _, out_off, _ = row
    main_in, main_out = submodel_boundaries(chain, first, last)[0][0], chain.layers[last].output
    ops = chain.layers[last].ops
    read = {n for op in ops for n in op.inputs}

    def slot(name: str, where: str) -> TensorSlot:
        if name in side:
            return TensorSlot(name, side[name], _nbytes(chain, name))
        if where == "in" and name == main_in.name:
            return TensorSlot(name, in_off, _nbytes(chain, name))
        if where == "out" and name == main_out.name:
            return TensorSlot(name, out_off, _nbytes(chain, name))
        if where == "out" and name in last_offs and name not in read:
            return TensorSlot(name, last_offs[name], _nbytes(chain, name))
        raise UnsupportedOpError(
            f"{chain.source_path or chain.name}: sub-model {index} (layers {first}..{last}) "
            f"{'reads' if where == 'in' else 'writes'} tensor '{name}' besides the chain's "
            f"'{main_in.name if where == 'in' else main_out.name}'; the firmware generator "
            "places only pass-through tensors and outputs of the last layer there; cut elsewhere"
        )

    ins, outs = names
    return SubModelSlots(
        index, tuple(slot(n, "in") for n in ins), tuple(slot(n, "out") for n in outs)
    )


def _submodel_function(
    chain: Chain,
    span: tuple[int, int, int],
    arena: int,
    planner: Planner,
    weights: WeightTable,
    isa: str,
    side: Mapping[str, int] | None = None,
) -> tuple[str, tuple[int, int, int, int, int], dict[str, int]]:
    """C function of sub-model ``span = (index, first, last)``, its ``(index, in_off,
    in_bytes, out_off, out_bytes)`` and the last layer's tensor offsets; ``isa`` the int8
    kernel variant, ``side`` the pass-through tensors' offsets (:func:`side_offsets`)."""
    assert chain.graph is not None
    index, first, last = span
    tensors = chain.graph.tensors
    lines: list[str] = []
    at_top = False
    first_layer = chain.layers[first]
    in_spec = first_layer.output if first_layer.input is None else first_layer.input
    out_off = 0
    offs: dict[str, int] = {}
    for j in range(first, last + 1):
        layer = chain.layers[j]
        if layer.kind == "input" or not layer.ops:
            name = c_comment(layer.name)
            lines.append(f"    /* layer {j}: {name} (input, already at offset 0) */")
            continue
        mem = layer_memory(layer, chain, planner)
        offs = placed_offsets(mem, layer, arena, at_top) | dict(side or {})
        if layer.loops:  # int8 accumulators: the result's offset (splitter/codegen/pex.py)
            offs = pex_offsets(layer, offs, mem.sizes, tensors)
        label = f"{c_comment(layer.name)} ({c_comment(layer.op_label)})"
        lines.append(f"    /* layer {j}: {label}, RAM {mem.size} B */")
        before = weights.nbytes
        layout = chain.graph.layout or "NCHW"
        if layer.loops:
            ctx = EmitContext(offs, tensors, weights, layout, isa)
            lines.extend("    " + s for s in emit_pex_layer(layer, ctx))
        for op in () if layer.loops else layer.ops:
            ctx = EmitContext(offs, tensors, weights, layout, isa)
            lines.extend("    " + s for s in emit_op(op, ctx))
        _check_emitted_flash(chain, layer, weights.nbytes - before)
        out_off = offs[layer.output.name]
        at_top = not at_top
    out_spec = chain.layers[last].output
    fn = f"int sm_{index:02d}(float *arena)\n{{\n    float *A = arena;\n"
    fn += "    unsigned char *A8 = (unsigned char *)arena;\n"
    fn += "\n".join(lines) + "\n    (void)A;\n    (void)A8;\n    return 0;\n}\n"
    in_bytes = in_spec.size * float_itemsize(in_spec)
    row = (index, 0, in_bytes, out_off, out_spec.size * float_itemsize(out_spec))
    return fn, row, offs


# ------------------------------------------------------------- op granularity ----


def op_layer_memory(layer: Layer, chain: Chain) -> LayerArena:
    """The plan of an operator-granularity layer (:mod:`splitter.cost.oparena`): the tensors
    crossing the cut before it packed from 0 in order, its own blocks above, then compaction."""
    assert chain.graph is not None
    j = layer.index
    before = [t.name for t in chain.layers[j - 1].boundary] if j else list(chain.graph.inputs)
    after = [t.name for t in layer.boundary]
    return plan_op_layer(layer.ops, before, after, chain.graph.tensors, float_itemsize)


def _op_submodel_function(
    chain: Chain, span: tuple[int, int, int], weights: WeightTable, isa: str
) -> tuple[str, tuple[int, int, int, int, int]]:
    """C function of sub-model ``span`` of an operator-granularity chain and its table row.

    Every layer runs at the offsets of its own plan and ends with the ``memmove`` s packing the
    tensors live after it from offset 0 (:mod:`splitter.cost.oparena`), so the sub-model reads
    its inputs packed at 0 in plan.json order and leaves its outputs packed at 0: the row is
    ``(index, 0, bytes of all inputs, 0, bytes of all outputs)``."""
    assert chain.graph is not None
    index, first, last = span
    tensors = chain.graph.tensors
    lines: list[str] = []
    for j in range(first, last + 1):
        layer = chain.layers[j]
        mem = op_layer_memory(layer, chain)
        label = f"{c_comment(layer.name)} ({c_comment(layer.op_label)})"
        lines.append(f"    /* layer {j}: {label}, RAM {mem.size} B */")
        if layer.kind != "input":
            before = weights.nbytes
            for op in layer.ops:
                ctx = EmitContext(
                    dict(mem.offsets), tensors, weights, chain.graph.layout or "NCHW", isa
                )
                lines.extend("    " + s for s in emit_op(op, ctx))
            _check_emitted_flash(chain, layer, weights.nbytes - before)
        for name, src, dst, n in mem.moves:
            lines.append(
                f"    __builtin_memmove(A8 + {dst}u, A8 + {src}u, {n}u); /* {c_comment(name)} */"
            )
    entering = (
        chain.layers[first - 1].boundary
        if first
        else tuple(tensors[name] for name in chain.graph.inputs)
    )
    leaving = chain.layers[last].boundary
    fn = f"int sm_{index:02d}(float *arena)\n{{\n    float *A = arena;\n"
    fn += "    unsigned char *A8 = (unsigned char *)arena;\n"
    fn += "\n".join(lines) + "\n    (void)A;\n    (void)A8;\n    return 0;\n}\n"
    in_bytes = sum(t.size * float_itemsize(t) for t in entering)
    return fn, (index, 0, in_bytes, 0, sum(t.size * float_itemsize(t) for t in leaving))


def _packed_slots(
    chain: Chain, span: tuple[int, int, int], boundaries: Mapping[int, BoundaryNames] | None
) -> SubModelSlots:
    """Slots of an operator-granularity sub-model: its inputs, and its outputs, each packed from
    offset 0 in plan.json order (:func:`splitter.cost.oparena.packed`, no padding), as
    :func:`_op_submodel_function` leaves them; plan.json must list the chain's boundary tensors."""
    assert chain.graph is not None
    index, first, last = span
    tensors = chain.graph.tensors
    entering = (
        chain.layers[first - 1].boundary
        if first
        else tuple(tensors[name] for name in chain.graph.inputs)
    )
    leaving = chain.layers[last].boundary
    given = (boundaries or {}).get(index)
    if given is not None and (list(given[0]), list(given[1])) != (
        [t.name for t in entering],
        [t.name for t in leaving],
    ):
        raise UnsupportedOpError(
            f"{chain.source_path or chain.name}: sub-model {index}: plan.json's boundary tensors "
            "differ from the operator-granularity chain's; re-run compile"
        )

    def pack(specs: tuple[TensorSpec, ...]) -> tuple[TensorSlot, ...]:
        slots, top = [], 0
        for t in specs:
            nbytes = t.size * float_itemsize(t)
            slots.append(TensorSlot(t.name, top, nbytes))
            top += nbytes
        return tuple(slots)

    return SubModelSlots(index, pack(entering), pack(leaving))


def _check_emitted_flash(chain: Chain, layer: Layer, emitted: int) -> None:
    """FLASH_j estimate == the bytes just emitted for the layer (arena rule)."""
    _check_cost(chain, layer, "FLASH", emitted, "the generator emits {} B of weights; " + _REIMPORT)


def _guard(device_name: str) -> str:
    """A C identifier fragment from a device name (ASCII letters and digits, else ``_``)."""
    return "".join(ch.upper() if ch.isascii() and ch.isalnum() else "_" for ch in device_name)


def _header(device: str, arena: int, wbytes: int, ranges: list[tuple[int, int, int]]) -> str:
    """``model.h``: sizes, the sub-model table type and the ``sm_NN`` prototypes."""
    g = _guard(device)
    protos = "\n".join(f"int sm_{i:02d}(float *arena); /* layers {a}..{b} */" for i, a, b in ranges)
    who = c_comment(device)
    return f"""/* Generated by splitter (codegen/model_c.py) for device {who}. Do not edit. */
#ifndef MODEL_{g}_H
#define MODEL_{g}_H

#define MODEL_ARENA_BYTES {arena}u
#define MODEL_WEIGHTS_BYTES {wbytes}u
#define MODEL_NUM_SUBMODELS {len(ranges)}

/* One hosted sub-model: run(arena) reads in_bytes at arena+in_offset (bytes) and writes
 * out_bytes at arena+out_offset. */
typedef struct {{
    int index;
    int (*run)(float *arena);
    unsigned first_layer, last_layer;
    unsigned in_offset, in_bytes, out_offset, out_bytes;
}} model_submodel_t;

extern float model_arena[];
extern const model_submodel_t model_submodels[MODEL_NUM_SUBMODELS];

{protos}

#endif /* MODEL_{g}_H */
"""


def _source(
    device: str,
    chain: Chain,
    arena: int,
    weights: WeightTable,
    bodies: list[str],
    ranges: list[tuple[int, int, int]],
    rows: list[tuple[int, int, int, int, int]],
) -> str:
    """``model.c``: weights arrays, the arena, the sub-model functions and table."""
    table = ",\n".join(
        f"    {{{i}, sm_{i:02d}, {a}u, {b}u, {r[1]}u, {r[2]}u, {r[3]}u, {r[4]}u}}"
        for (i, a, b), r in zip(ranges, rows, strict=True)
    )
    floats = max(1, (arena + FLOAT_BYTES - 1) // FLOAT_BYTES)
    head = (
        f"/* Generated by splitter (codegen/model_c.py) for device {c_comment(device)}, "
        f"model {c_comment(chain.name)}. Do not edit. */\n"
        '#include "model.h"\n#include "kernels.h"\n#include "kernels_nhwc.h"\n'
        '#include "kernels_q8.h"\n\n'
        '#define WEIGHTS __attribute__((section(".weights"), aligned(4)))\n\n'
    )
    tail = (
        f"\nfloat model_arena[{floats}] __attribute__((aligned(8)));\n\n"
        + "\n".join(bodies)
        + f"\nconst model_submodel_t model_submodels[MODEL_NUM_SUBMODELS] = {{\n{table}\n}};\n"
    )
    # One join: the weights text is tens of MB for large models, so copy it once only.
    return "".join((head, weights.render(), tail))
