"""The arena rule: where every activation of one layer lives, and the layer's RAM_j.

Shared by the cost model (RAM_j = :attr:`LayerMemory.size`) and the C generator (the offsets), so
both give identical numbers (``docs/arena.md``):

* the layer's input tensor sits at offset 0;
* inner tensors (super-nodes, fused conv+pool) are placed first-fit by liveness in schedule order:
  a tensor is live from the op producing it to its last consumer inside the layer (skip tensors
  stay live; a tensor nobody inside the layer consumes stays live to the end); an op's outputs
  never overlap its inputs (no in-place kernels); zero-copy reshape outputs alias their input
  (same offset, no extra bytes), except that a layer output which would alias the layer input
  in a layer doing real work gets its own block (the reshape is then a copy);
* per-op scratch (``OpHandler.scratch_bytes``) is a block live only during that op;
* the layer's OUTPUT is placed last, above everything live from its producing op to the end, and
  at least at ``peak - out_bytes`` where ``peak`` is the top of every other block, so that
  ``size = output_offset + output_bytes`` covers the whole plan. A single-op layer therefore has
  ``RAM_j = in + scratch + out`` and the input layer ``RAM_0 = in`` (input == output).

Nothing is live above the output, so any arena ``A >= size`` can host the layer with the output
moved to ``A - out_bytes``.

A layer with partial execution loops (:class:`splitter.ir.ChannelLoop`, PEX) is planned by the
same rule with three changes per loop over ops ``s..e`` (``docs/arena.md``): a tensor between two
loop ops (an inner tensor) holds one channel, ``ceil(bytes / channels)``; every other tensor a
loop op reads or writes (the loop context) is live over all of ``s..e`` (it is read or written
again at every iteration); the full output of an accumulating last op (a conv with
``groups == 1`` or a dense) is live from ``s`` (zeroed, then accumulated) and, for an integer
output, holds 32-bit accumulators (``4 * elements``; the int8 result is requantised in place);
a channel loop's ops get no scratch block (its one-channel kernels need none). A channel loop of
``step`` channels per iteration (:attr:`splitter.ir.ChannelLoop.step`) holds ``step`` channels of
each inner tensor and one scratch block live over the whole loop, :func:`step_scratch`.
A row loop (``by == "row"``) has no accumulators: each inner tensor is its window of rows
(:func:`splitter.cost.rows.window_rows`, for the loop's band of rows), the loop context rule
is the same, and its ops' scratch (the tuned conv kernels' im2col columns, a banded
depthwise's line ring) is one block of the largest op's bytes, live over the whole loop (the
ops' calls alternate, never overlap).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from splitter.cost.handlers import handler
from splitter.cost.rows import loop_windows, row_bytes
from splitter.errors import ShapeError
from splitter.ir import ChannelLoop, Op, TensorSpec
from splitter.ops import ZERO_COST_KINDS


@dataclass(frozen=True)
class LayerMemory:
    """One layer's arena plan: ``size`` (= RAM_j) and each tensor's byte ``offsets``/``sizes``.

    Aliased reshape outputs share their source's offset; scratch blocks are named
    ``"<op name>:scratch"``.
    """

    size: int
    offsets: Mapping[str, int] = field(default_factory=dict)
    sizes: Mapping[str, int] = field(default_factory=dict)


@dataclass
class _Block:
    """A tensor's storage: bytes and live interval ``[start, end]`` in op indices."""

    name: str
    nbytes: int
    start: int
    end: int
    offset: int = -1

    @property
    def top(self) -> int:
        return self.offset + self.nbytes


def plan_layer_memory(
    layer_ops: Sequence[Op],
    tensors: Mapping[str, TensorSpec],
    input_name: str,
    output_name: str,
    itemsize_of: Callable[[TensorSpec], int],
    loops: Sequence[ChannelLoop] = (),
) -> LayerMemory:
    """Plan one layer's arena by the arena rule (module docstring); returns offsets and RAM_j.

    ``itemsize_of(spec)`` gives the bytes per element of an activation (the dtype's itemsize, or
    the user's ``--activation-bytes``); ``loops`` the layer's partial execution loops.
    """
    ops = tuple(layer_ops)
    spans = loop_spans(ops, loops)
    loop_bytes = _loop_bytes(ops, spans, loops, tensors, itemsize_of)

    def nbytes(name: str) -> int:
        if name in loop_bytes:
            return loop_bytes[name]
        spec = tensors[name]
        return spec.size * itemsize_of(spec)

    alias = {op.outputs[0]: op.inputs[0] for op in ops if op.kind in ZERO_COST_KINDS}

    def root(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    if root(output_name) == input_name and any(op.kind not in ZERO_COST_KINDS for op in ops):
        del alias[output_name]  # output must sit on top, not on the input: a copy, own block

    blocks = _live_blocks(ops, input_name, output_name, nbytes, root)
    _widen_for_loops(ops, spans, blocks, root, [loop.by == "row" for loop in loops])
    out_root = root(output_name)
    if out_root not in blocks:
        raise ShapeError(f"layer output '{output_name}' is not produced by the layer's ops")
    blocks[input_name].offset = 0
    placed: list[_Block] = [blocks[input_name]]
    order: list[tuple[int, int, _Block]] = []
    shared: dict[str, str] = {}  # a loop op's scratch name -> the loop's one block
    for k, op in enumerate(ops):
        for name in op.outputs:
            if name in alias or name == out_root or name not in blocks:
                continue
            block = blocks[name]
            order.append((block.start, k if block.start == k else -1, block))
        first, last = _scratch_span(k, spans, loops)
        if first < 0 or (first != last and first != k):
            continue  # (a row loop's scratch is placed at its first op)
        if first == last:
            scratch = _scratch(op, tensors, itemsize_of)
        else:
            loop = loops[[a for a, _b, _c in spans].index(first)]
            scratch = _loop_scratch(loop, ops[first : last + 1], tensors, itemsize_of)
            shared.update({f"{o.name}:scratch": f"{op.name}:scratch" for o in ops[k : last + 1]})
        if scratch:
            order.append((first, k, _Block(f"{op.name}:scratch", scratch, first, last)))
    for _start, _rank, block in sorted(order, key=lambda item: (item[0], item[1])):
        _first_fit(block, placed)  # in order of start (loop context first at its loop's start)
    size = blocks[input_name].nbytes
    if out_root != input_name:
        size = max(size, _place_output(blocks[out_root], placed))
    offsets = {b.name: b.offset for b in placed}
    sizes = {b.name: b.nbytes for b in placed}
    for name in alias:
        offsets[name], sizes[name] = offsets[root(name)], nbytes(name)
    for name, block_name in shared.items():
        if block_name in offsets:
            offsets[name], sizes[name] = offsets[block_name], sizes[block_name]
    return LayerMemory(size, MappingProxyType(offsets), MappingProxyType(sizes))


def _live_blocks(
    ops: Sequence[Op],
    input_name: str,
    output_name: str,
    nbytes: Callable[[str], int],
    root: Callable[[str], str],
) -> dict[str, _Block]:
    """Storage blocks (alias roots) with their live intervals in op indices."""
    last = len(ops) - 1
    blocks = {input_name: _Block(input_name, nbytes(input_name), 0, 0)}
    consumed: set[str] = set()
    for k, op in enumerate(ops):
        for name in op.inputs:
            r = root(name)
            if r not in blocks:
                raise ShapeError(
                    f"{op.name}: input '{name}' is neither the layer input '{input_name}' nor "
                    "produced inside the layer; the layer is not single-entry"
                )
            blocks[r].end = max(blocks[r].end, k)
            consumed.add(r)
        for name in op.outputs:
            if root(name) == name:
                blocks[name] = _Block(name, nbytes(name), k, k)
    for r, block in blocks.items():
        if r != input_name and (r not in consumed or r == root(output_name)):
            block.end = last  # the output and any unconsumed (graph output) tensor stay live
    return blocks


def loop_spans(ops: Sequence[Op], loops: Sequence[ChannelLoop]) -> list[tuple[int, int, int]]:
    """``(first, last, channels)`` op indices of each loop in ``ops``."""
    index = {op.name: k for k, op in enumerate(ops)}
    spans = []
    for loop in loops:
        missing = [n for n in (loop.ops[0], loop.ops[-1]) if n not in index]
        if missing:
            raise ShapeError(f"partial execution loop over {missing[0]}: op not in the layer")
        spans.append((index[loop.ops[0]], index[loop.ops[-1]], loop.channels))
    return spans


def accumulates(op: Op) -> bool:
    """An op ending a loop accumulates into its full output (conv ``groups == 1``, dense)."""
    return op.kind == "dense" or (op.kind == "conv2d" and int(op.attr("groups", 1) or 1) == 1)


def accumulator_itemsize(spec: TensorSpec, itemsize_of: Callable[[TensorSpec], int]) -> int:
    """Bytes per accumulator element: 4 (int32) for an integer output, else its own width (a
    float output accumulates in place)."""
    return 4 if spec.dtype in ("int8", "uint8") else itemsize_of(spec)


def _loop_bytes(
    ops: Sequence[Op],
    spans: Sequence[tuple[int, int, int]],
    loops: Sequence[ChannelLoop],
    tensors: Mapping[str, TensorSpec],
    itemsize_of: Callable[[TensorSpec], int],
) -> dict[str, int]:
    """Bytes of the tensors a loop resizes: one channel of an inner tensor, the accumulators;
    for a row loop each inner tensor's window of rows (:mod:`splitter.cost.rows`)."""
    out: dict[str, int] = {}
    for (s, e, channels), loop in zip(spans, loops, strict=True):
        if loop.by == "row":
            out.update(_window_bytes(ops[s : e + 1], tensors, itemsize_of, loop.band))
            continue
        for k in range(s, e):
            spec = tensors[ops[k].outputs[0]]
            out[spec.name] = (
                -(-spec.size // channels) * min(loop.step, channels) * itemsize_of(spec)
            )
        if accumulates(ops[e]):
            spec = tensors[ops[e].outputs[0]]
            out[spec.name] = spec.size * accumulator_itemsize(spec, itemsize_of)
    return out


def _window_bytes(
    ops: Sequence[Op],
    tensors: Mapping[str, TensorSpec],
    itemsize_of: Callable[[TensorSpec], int],
    band: int = 1,
) -> dict[str, int]:
    """Each inner tensor of a row loop over ``ops`` in bands of ``band`` rows: ``window rows *
    W * C * itemsize``."""
    found = loop_windows(ops, tensors, band)
    if found is None:
        raise ShapeError(f"row loop over {ops[0].name}..{ops[-1].name}: an op cannot stream rows")
    rows, _geoms = found
    out = {}
    for op, count in zip(ops[:-1], rows, strict=True):
        spec = tensors[op.outputs[0]]
        out[spec.name] = count * row_bytes(spec, itemsize_of(spec))
    return out


def _widen_for_loops(
    ops: Sequence[Op],
    spans: Sequence[tuple[int, int, int]],
    blocks: Mapping[str, _Block],
    root: Callable[[str], str],
    by_rows: Sequence[bool],
) -> None:
    """Every loop context tensor is live over its whole loop (read / written each iteration);
    so is every window of a row loop (it keeps rows from one output row to the next)."""
    for (s, e, _channels), rows in zip(spans, by_rows, strict=True):
        inner = {ops[k].outputs[0] for k in range(s, e)}
        for k in range(s, e + 1):
            for name in (*ops[k].inputs, *ops[k].outputs):
                block = blocks.get(root(name))
                if block is None or (name in inner and not rows):
                    continue
                block.end = max(block.end, e)
                if name in ops[e].outputs:
                    block.start = min(block.start, s)


def _scratch_span(
    k: int, spans: Sequence[tuple[int, int, int]], loops: Sequence[ChannelLoop]
) -> tuple[int, int]:
    """When op ``k``'s scratch block is live: at ``k`` alone; over its whole row loop (the loop's
    ops run interleaved, row after row, one call at a time: one block of the largest scratch
    serves them all); ``(-1, -1)`` inside a channel loop (its kernels, ``kernels_q8_pex.c`` and
    the generic ones, need no scratch)."""
    for (a, b, _c), loop in zip(spans, loops, strict=True):
        if a <= k <= b:
            return (a, b) if loop.by == "row" or loop.step > 1 else (-1, -1)
    return k, k


def slab_op(
    ops: Sequence[Op], k: int, g: int, tensors: Mapping[str, TensorSpec]
) -> tuple[Op, list[TensorSpec], TensorSpec] | None:
    """Op ``k`` of an int8 channel loop over ``ops`` as one iteration of ``g`` channels runs it
    with a whole-op tuned kernel (``splitter/codegen/pex.py``), with its input and output specs:
    the generating conv (``k == 0``, groups 1) as ``g`` output channels of its full input, a
    depthwise conv after the first op as a ``g``-channel depthwise on ``g``-channel NHWC slabs
    (``g > 1``; the last op's slab is then copied into channels ``c ..`` of its full output,
    :func:`slab_out_bytes`); None for the others (a depthwise reading a full tensor or on one
    channel runs plane by plane, the accumulating conv ``k_q_pex_accumulate_g``)."""
    op = ops[k]
    if op.kind != "conv2d" or "W" not in op.weights:
        return None
    groups = int(op.attr("groups", 1) or 1)
    x, y = tensors[op.inputs[0]], tensors[op.outputs[0]]
    y_g = replace(y, shape=(*y.shape[:3], g))
    w = op.weights["W"]
    if k == 0 and groups == 1 and k < len(ops) - 1:
        return replace(op, weights={**op.weights, "W": w[:g]}), [x], y_g
    if k == 0 or groups == 1 or g == 1:
        return None  # (one channel: the depthwise would be a groups-1 conv, rounding apart)
    sliced = replace(op, weights={**op.weights, "W": w[:g]}, attrs={**op.attrs, "groups": g})
    return sliced, [replace(x, shape=(*x.shape[:3], g))], y_g


def slab_out_bytes(ops: Sequence[Op], k: int, g: int, tensors: Mapping[str, TensorSpec]) -> int:
    """Bytes of the output slab a loop's last op writes in the loop's scratch block (after its
    kernel's own scratch, 4-aligned) before copying it into its full output: ``OH * OW * g``
    for a :func:`slab_op` depthwise ending the loop, else 0."""
    if k != len(ops) - 1 or slab_op(ops, k, g, tensors) is None:
        return 0
    spec = tensors[ops[k].outputs[0]]
    return int(spec.shape[1]) * int(spec.shape[2]) * g


def step_scratch(
    ops: Sequence[Op],
    tensors: Mapping[str, TensorSpec],
    channels: int,
    step: int,
    itemsize_of: Callable[[TensorSpec], int],
) -> int:
    """Scratch bytes of a channel loop over ``ops`` running ``step`` channels per iteration: one
    block for all its tuned kernel calls (they run one after another), the largest of its
    :func:`slab_op` ops' ``OpHandler.scratch_bytes`` (rounded up to 4) plus its
    :func:`slab_out_bytes`, at ``g = min(step, channels)`` and at the last iteration's
    ``g = channels % step``; 0 for ``step == 1``."""
    if step <= 1:
        return 0
    best = 0
    for g in {min(step, channels), channels % step or min(step, channels)}:
        for k in range(len(ops)):
            found = slab_op(ops, k, g, tensors)
            if found is not None:
                op, ins, out = found
                own = -(-handler(op).scratch_bytes(op, ins, out, itemsize_of(out)) // 4) * 4
                best = max(best, own + slab_out_bytes(ops, k, g, tensors))
    return best


def _scratch(op: Op, tensors: Mapping[str, TensorSpec], itemsize_of: Callable[..., int]) -> int:
    """Scratch bytes the op's kernel asks for."""
    ins = [tensors[n] for n in op.inputs]
    out = tensors[op.outputs[0]]
    return handler(op).scratch_bytes(op, ins, out, itemsize_of(out))


def _loop_scratch(
    loop: ChannelLoop,
    ops: Sequence[Op],
    tensors: Mapping[str, TensorSpec],
    itemsize_of: Callable[[TensorSpec], int],
) -> int:
    """The one scratch block of a loop over ``ops``: a row loop's largest op scratch (for its
    band of rows), a channel loop's :func:`step_scratch`."""
    if loop.by == "row":
        return max(_row_scratch(o, tensors, itemsize_of, loop.band) for o in ops)
    return step_scratch(ops, tensors, loop.channels, loop.step, itemsize_of)


def _row_scratch(
    op: Op, tensors: Mapping[str, TensorSpec], itemsize_of: Callable[..., int], band: int
) -> int:
    """Scratch bytes op's kernel asks for inside a row loop of ``band`` rows per iteration
    (``OpHandler.row_scratch_bytes``)."""
    ins = [tensors[n] for n in op.inputs]
    out = tensors[op.outputs[0]]
    return handler(op).row_scratch_bytes(op, ins, out, itemsize_of(out), band)


def _first_fit(block: _Block, placed: list[_Block]) -> None:
    """Put ``block`` at the lowest offset not overlapping a placed block live at the same time.

    Blocks are placed in order of their start, so a placed block overlaps in time iff it is
    still live at ``block.start``.
    """
    busy = sorted((b for b in placed if b.end >= block.start), key=lambda b: b.offset)
    offset = 0
    for b in busy:
        if offset + block.nbytes <= b.offset:
            break
        offset = max(offset, b.top)
    block.offset = offset
    placed.append(block)


def _place_output(block: _Block, placed: list[_Block]) -> int:
    """Place the output above all blocks live from its producer on; return ``offset + bytes``."""
    live_top = max((b.top for b in placed if b.end >= block.start), default=0)
    peak = max((b.top for b in placed), default=0)
    block.offset = max(live_top, peak - block.nbytes)
    placed.append(block)
    return block.top
