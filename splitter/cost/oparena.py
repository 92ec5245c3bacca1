"""The arena of one operator-granularity layer: live tensors packed at the bottom, then compacted.

In a super-node chain one tensor crosses each cut and a layer's arena is planned on its own
(:mod:`splitter.cost.memory`, ping-pong between the two ends of the device arena). At
``--granularity op`` several tensors cross a cut and a skip tensor stays untouched for many
layers, so an op-granularity layer ``j`` keeps this layout (``docs/arena.md``, op granularity):

1. the tensors live across the cut before it, ``live(j - 1)``, lie **packed from offset 0 in the
   chain's order** (a sub-model receives its inputs exactly there, in plan.json order);
2. the blocks the layer's ops produce (outputs, inner tensors of a fused group, kernel scratch)
   are placed above ``L_in = sum bytes(live(j - 1))`` by the arena rule's first fit over the
   group's op steps (a block lives from its op to its last reader in the group, the group's
   output to the end; a zero-cost view shares its source's block when the source is produced
   in the group, else it is a copy with its own block; nothing overlaps the inputs);
3. after the ops, ``live(j)`` is compacted down to offsets ``0, b_1, b_1 + b_2 ...`` in order with
   ``memmove`` (every tensor moves down: what stays was above the dropped inputs, the output was
   above everything, so moving in increasing order never overwrites a tensor still to move).

So ``RAM_j = L_in + extra_j`` with ``extra_j`` the top of step 2 (held skip tensors included in
``L_in``: a sub-model holds what it passes on), and a device hosting layers ``J`` needs
``max_{j in J} RAM_j`` (SPEC.md constraint (5)). For a chain without branches, ``L_in`` is the
layer's one input and this is the arena rule's ``in + scratch + out``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from splitter.cost.handlers import handler
from splitter.ir import Op, TensorSpec
from splitter.ops import ZERO_COST_KINDS

#: A compaction move after a layer: (tensor name, from offset, to offset, bytes).
Move = tuple[str, int, int, int]


@dataclass(frozen=True)
class LayerArena:
    """One op-granularity layer's plan: ``size`` (= RAM_j), every tensor's ``offsets`` and
    ``sizes`` while it runs (scratch as ``"<op name>:scratch"``) and the compaction ``moves``."""

    size: int
    offsets: Mapping[str, int]
    sizes: Mapping[str, int]
    moves: tuple[Move, ...]


def packed(names: Sequence[str], nbytes: Callable[[str], int]) -> dict[str, int]:
    """Offsets of ``names`` packed from 0 in order (a view listed twice keeps its first)."""
    offsets: dict[str, int] = {}
    top = 0
    for name in names:
        offsets[name] = top
        top += nbytes(name)
    return offsets


def plan_op_layer(
    ops: Sequence[Op],
    live_in: Sequence[str],
    live_out: Sequence[str],
    tensors: Mapping[str, TensorSpec],
    itemsize_of: Callable[[TensorSpec], int],
) -> LayerArena:
    """The layout of the module docstring for a layer running ``ops``."""

    def nbytes(name: str) -> int:
        return tensors[name].size * itemsize_of(tensors[name])

    offsets = packed(live_in, nbytes)
    sizes = {name: nbytes(name) for name in live_in}
    base = sum(sizes.values())
    # a view of the one incoming tensor, which dies here, is the same bytes at offset 0
    dying = live_in[0] if len(live_in) == 1 and live_in[0] not in live_out else None
    blocks, alias = _group_blocks(ops, dying, set(live_out), tensors, itemsize_of)
    top = base
    placed: list[tuple[int, int, int, int]] = []  # (offset, bytes, start, end)
    for name, nb, start, end in blocks:
        offset = _first_fit(nb, start, placed, base)
        placed.append((offset, nb, start, end))
        offsets[name], sizes[name] = offset, nb
        top = max(top, offset + nb)
    for name, source in alias.items():
        offsets[name], sizes[name] = offsets[source], nbytes(name)
    moves = compaction(
        [
            (name, offsets[name], dst, nbytes(name))
            for name, dst in packed(live_out, nbytes).items()
        ],
        top,
    )
    staged = max((dst + n for _, _, dst, n in moves), default=0)
    return LayerArena(max(top, staged), offsets, sizes, moves)


def compaction(wanted: Sequence[Move], top: int) -> tuple[Move, ...]:
    """The ``memmove`` s bringing each ``(name, from, to, bytes)`` of ``wanted`` to its place.

    In increasing ``to`` order, each move is safe when its target overlaps no tensor still to
    move (always so when the order of the sources is that of the targets, module docstring);
    otherwise every tensor goes through a staging area from ``top`` up first."""
    moves = sorted((m for m in wanted if m[1] != m[2]), key=lambda m: m[2])
    safe = all(
        later[1] + later[3] <= dst or src_end <= later[1]
        for k, (_, _, dst, n) in enumerate(moves)
        for src_end in (dst + n,)
        for later in moves[k + 1 :]
    )
    if safe:
        return tuple(moves)
    staging = []
    cursor = top
    for name, src, _dst, n in moves:
        staging.append((name, src, cursor, n))
        cursor += n
    back = [
        (name, stage[2], dst, n) for (name, _s, dst, n), stage in zip(moves, staging, strict=True)
    ]
    return tuple(staging + back)


def _group_blocks(
    ops: Sequence[Op],
    dying: str | None,
    live_out: set[str],
    tensors: Mapping[str, TensorSpec],
    itemsize_of: Callable[[TensorSpec], int],
) -> tuple[list[tuple[str, int, int, int]], dict[str, str]]:
    """``(name, bytes, first step, last step)`` of every block the ops produce, in step order,
    and the views sharing a block (view -> block or ``dying`` input)."""
    last = len(ops) - 1
    alias: dict[str, str] = {}
    spans: dict[str, list[int]] = {}
    sizes: dict[str, int] = {}
    order: list[str] = []
    for k, op in enumerate(ops):
        for name in op.inputs:
            root = alias.get(name, name)
            if root in spans:
                spans[root][1] = max(spans[root][1], k)
        out = tensors[op.outputs[0]]
        ins = [tensors[n] for n in op.inputs]
        scratch = handler(op).scratch_bytes(op, ins, out, itemsize_of(out))
        if scratch:
            order.append(f"{op.name}:scratch")
            spans[order[-1]], sizes[order[-1]] = [k, k], scratch
        for name in op.outputs:
            source = alias.get(op.inputs[0], op.inputs[0]) if op.inputs else ""
            if op.kind in ZERO_COST_KINDS and (source in spans or (source and source == dying)):
                alias[name] = source
                continue
            order.append(name)
            spans[name], sizes[name] = [k, k], tensors[name].size * itemsize_of(tensors[name])
    for name in live_out:
        root = alias.get(name, name)
        if root in spans:
            spans[root][1] = last
    return [(n, sizes[n], spans[n][0], spans[n][1]) for n in order], alias


def _first_fit(
    nbytes: int, start: int, placed: Sequence[tuple[int, int, int, int]], base: int
) -> int:
    """Lowest offset >= ``base`` where ``nbytes`` overlap no placed block live at ``start``
    (blocks come in step order, so a placed block overlaps in time iff it lives at ``start``)."""
    busy = sorted((off, nb) for off, nb, _s, end in placed if end >= start)
    offset = base
    for off, nb in busy:
        if offset + nbytes <= off:
            break
        offset = max(offset, off + nb)
    return offset
