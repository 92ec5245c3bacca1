"""Operator granularity: a chain of fused op groups in a chosen topological order.

At ``--granularity op`` no branch is collapsed: every op (after the same fusions as the super-node
chain: zero-cost views into their producer, a pool into a directly preceding conv / dense / add, a
softmax into a dense) is one layer, and the cut after layer ``j`` carries **every tensor live
across it** (issue 15): the tensors produced at or before ``j`` that a later layer reads or that
are graph outputs. Its transfer bytes ``OUT_j`` are their total, and the RAM of a layer holds the
tensors it only passes on:

* ``OUT_j = sum_{t in live(j)} bytes(t)``;
* ``RAM_j = sum_{t in live(j - 1)} bytes(t) + extra_j``: the tensors received (skip tensors held
  untouched included) packed at the bottom, and above them what the layer's ops write
  (:mod:`splitter.cost.oparena`, the layout the firmware generator uses).

For a model without branches every live set is the one output, so the chain is the super-node
chain layer for layer, costs included (``tests/test_graph_opchain.py``).

**Order.** Any topological order of the groups is a valid chain; the one kept minimises, lexico-
graphically, the peak live bytes over the cuts and then their sum. Exact search: dynamic
programming over the down-sets of the group DAG (the state after a prefix is the set of groups
run, and the live bytes depend on that set only), keeping per state the Pareto front of
``(peak, sum)`` (both only grow along a path, so a dominated pair never becomes optimal). The
down-sets of a graph whose branches rejoin at single-tensor cuts add up region by region (not
multiply), so this stays small for residual, Inception and DenseNet graphs; past
:data:`EXACT_STATES` states it gives up and the better of the model's own order and a greedy list
schedule (run next the ready group that leaves the fewest live bytes; ties by file order) is used.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from splitter import ops as op_table
from splitter.cost.code import arena_itemsize
from splitter.cost.handlers import op_flash
from splitter.cost.layer import ItemsizeOf, op_macs, table_instructions
from splitter.cost.oparena import plan_op_layer
from splitter.ir import Graph, Layer, LayerCost, Op
from splitter.ops import ZERO_COST_KINDS

#: Down-sets the exact order search may visit before falling back to the heuristics.
EXACT_STATES = 50_000

#: A Pareto entry of the order search: (peak, sum, live bytes, previous state, its entry, group).
_Entry = tuple[int, int, int, int, int, int]


@dataclass(frozen=True)
class OpGroup:
    """Ops fused into one layer: ``reads`` are the distinct tensors it reads from earlier
    layers (first-read order), ``output`` the one tensor it hands on. The input group of a
    model with several graph inputs hands on all of them: ``output`` the first, ``more`` the
    others (graph order)."""

    ops: tuple[Op, ...]
    kind: str
    reads: tuple[str, ...]
    output: str
    pooled: bool = False
    more: tuple[str, ...] = ()

    @property
    def outputs(self) -> tuple[str, ...]:
        """Every tensor the group hands on: ``output``, then ``more``."""
        return (self.output, *self.more)


def fuse_ops(graph: Graph) -> list[OpGroup]:
    """The input group followed by one group per op, with the super-node chain's fusions
    (:mod:`splitter.graph.chain`) applied where the fused tensor has no other reader.

    With several graph inputs the input group hands on every one (``OpGroup.more``) and no op
    joins it: the cut after it carries them all, as any cut carries its live tensors."""
    entry, *others = graph.inputs
    readers: dict[str, int] = {}
    for op in graph.ops:
        for name in dict.fromkeys(op.inputs):
            readers[name] = readers.get(name, 0) + 1
    groups = [OpGroup((), "input", (), entry, more=tuple(others))]
    owner = {entry: 0}  # exported tensor -> its group
    for op in graph.ops:
        reads = tuple(dict.fromkeys(op.inputs))
        host = _host(op, reads, groups, owner, readers, set(graph.outputs))
        if host is None:
            owner[op.outputs[0]] = len(groups)
            groups.append(OpGroup((op,), op.kind, reads, op.outputs[0]))
            continue
        prev = groups[host]
        pooled = prev.pooled or op.kind in op_table.POOL_KINDS
        groups[host] = replace(prev, ops=(*prev.ops, op), output=op.outputs[0], pooled=pooled)
        del owner[prev.output]
        owner[op.outputs[0]] = host
    return groups


def _host(
    op: Op,
    reads: tuple[str, ...],
    groups: Sequence[OpGroup],
    owner: Mapping[str, int],
    readers: Mapping[str, int],
    outputs: set[str],
) -> int | None:
    """The group ``op`` joins, or None: it must read only that group's output, which nobody
    else reads and which is no graph output, and the kinds must fuse."""
    if len(reads) != 1 or reads[0] not in owner or readers[reads[0]] != 1:
        return None
    if reads[0] in outputs or len(op.outputs) != 1:
        return None
    index = owner[reads[0]]
    prev = groups[index]
    if prev.more:  # the input group of several graph inputs hands them on unchanged
        return None
    if op.kind in ZERO_COST_KINDS:
        return index
    if op.kind in op_table.POOL_KINDS:
        ok = prev.kind in op_table.OPS[op.kind].joins and not prev.pooled
        return index if ok else None
    if op.kind == "softmax":
        ok = prev.kind in op_table.OPS["softmax"].joins and prev.ops[-1].kind != "softmax"
        return index if ok else None
    return None


# --- order --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Dag:
    """Groups as bits: ``preds[g]`` mask of producers of its reads, ``readers[t]`` mask of the
    groups reading ``t``, ``size[t]`` bytes, ``kept`` the graph outputs (live to the end)."""

    groups: tuple[OpGroup, ...]
    preds: tuple[int, ...]
    readers: Mapping[str, int]
    size: Mapping[str, int]
    kept: frozenset[str]

    def step(self, done: int, live: int, g: int) -> int:
        """Live bytes after running group ``g`` once the groups in ``done`` have run."""
        now = done | (1 << g)
        group = self.groups[g]
        for out in group.outputs:
            if out in self.kept or self.readers.get(out, 0) & ~now:
                live += self.size[out]
        for t in group.reads:
            if t not in self.kept and not self.readers[t] & ~now:
                live -= self.size[t]
        return live


def _dag(groups: Sequence[OpGroup], graph: Graph, nbytes: Callable[[str], int]) -> _Dag:
    producer = {out: i for i, g in enumerate(groups) for out in g.outputs}
    readers: dict[str, int] = {}
    preds = []
    for i, g in enumerate(groups):
        mask = 0
        for t in g.reads:
            readers[t] = readers.get(t, 0) | (1 << i)
            if t in producer:
                mask |= 1 << producer[t]
        preds.append(mask)
    size = {out: nbytes(out) for g in groups for out in g.outputs}
    size.update({t: nbytes(t) for g in groups for t in g.reads})
    return _Dag(tuple(groups), tuple(preds), readers, size, frozenset(graph.outputs))


def order_cost(dag: _Dag, order: Sequence[int]) -> tuple[int, int]:
    """``(peak, sum)`` of the live bytes at the cuts between consecutive groups of ``order``."""
    done, live, cuts = 0, 0, []
    for g in order:
        live = dag.step(done, live, g)
        done |= 1 << g
        cuts.append(live)
    inner = cuts[:-1]
    return (max(inner, default=0), sum(inner))


def greedy_order(dag: _Dag) -> list[int]:
    """List schedule: run next the ready group leaving the fewest live bytes (file order ties)."""
    n = len(dag.groups)
    done, live = 0, 0
    order: list[int] = []
    while len(order) < n:
        ready = [g for g in range(n) if not done >> g & 1 and dag.preds[g] & ~done == 0]
        best = min(ready, key=lambda g: (dag.step(done, live, g), g))
        live = dag.step(done, live, best)
        done |= 1 << best
        order.append(best)
    return order


def exact_order(dag: _Dag, limit: int = EXACT_STATES) -> list[int] | None:
    """The order minimising ``(peak, sum)`` (module docstring), or None past ``limit`` states."""
    n = len(dag.groups)
    level: dict[int, list[_Entry]] = {1: [(0, 0, dag.step(0, 0, 0), -1, -1, 0)]}
    history: list[dict[int, list[_Entry]]] = [level]
    seen = 1
    for _ in range(n - 1):
        nxt: dict[int, list[_Entry]] = {}
        for done, entries in level.items():
            for k, (peak, total, live, *_rest) in enumerate(entries):
                cut_peak, cut_total = max(peak, live), total + live
                for g in range(n):
                    if done >> g & 1 or dag.preds[g] & ~done:
                        continue
                    after = dag.step(done, live, g)
                    entry = (cut_peak, cut_total, after, done, k, g)
                    _pareto(nxt.setdefault(done | 1 << g, []), entry)
        seen += len(nxt)
        if seen > limit:
            return None
        history.append(nxt)
        level = nxt
    return _backtrack(history, n)


def _pareto(front: list[_Entry], new: _Entry) -> None:
    """Add ``new`` to ``front`` unless an entry with peak and sum both <= exists; drop the
    entries it dominates. The same state has the same live bytes, so only (peak, sum) count."""
    for old in front:
        if old[0] <= new[0] and old[1] <= new[1]:
            return
    front[:] = [old for old in front if not (new[0] <= old[0] and new[1] <= old[1])]
    front.append(new)


def _backtrack(history: list[dict[int, list[_Entry]]], n: int) -> list[int]:
    """The groups along the lexicographically smallest ``(peak, sum)`` entry of the full set."""
    (final,) = history[-1].values()
    k = min(range(len(final)), key=lambda i: (final[i][0], final[i][1], i))
    state = (1 << n) - 1
    order = []
    for depth in range(n - 1, -1, -1):
        _peak, _total, _live, prev, prev_k, g = history[depth][state][k]
        order.append(g)
        state, k = prev, prev_k
    return order[::-1]


def choose_order(
    groups: Sequence[OpGroup], graph: Graph, nbytes: Callable[[str], int]
) -> list[int]:
    """Group indices in the order of the op chain (module docstring)."""
    dag = _dag(groups, graph, nbytes)
    exact = exact_order(dag) if len(groups) > 1 else list(range(len(groups)))
    if exact is not None:
        return exact
    own = list(range(len(groups)))
    greedy = greedy_order(dag)
    return greedy if order_cost(dag, greedy) < order_cost(dag, own) else own


# --- layers -------------------------------------------------------------------------------


def build_op_layers(graph: Graph, itemsize_of: ItemsizeOf) -> list[Layer]:
    """The costed op-granularity layers of ``graph``, layer 0 the input layer (handing on every
    graph input)."""
    tensors = graph.tensors

    def nbytes(name: str) -> int:
        return tensors[name].size * itemsize_of(tensors[name])

    groups = fuse_ops(graph)
    order = [groups[i] for i in choose_order(groups, graph, nbytes)]
    lives = live_sets(order, graph)
    layers = []
    before: tuple[str, ...] = tuple(graph.inputs)
    for index, (group, live) in enumerate(zip(order, lives, strict=True)):
        entering = group.reads[0] if group.reads else graph.inputs[0]
        planned = plan_op_layer(group.ops, before, live, tensors, itemsize_of)
        ram = planned.size
        # the compaction the firmware runs (its arena's element sizes, when not ``itemsize_of``)
        if itemsize_of is not arena_itemsize:
            planned = plan_op_layer(group.ops, before, live, tensors, arena_itemsize)
        moves = planned.moves
        before = live
        layers.append(
            Layer(
                index=index,
                name=graph.inputs[0] if group.kind == "input" else group.ops[0].name,
                kind=group.kind,
                ops=group.ops,
                input=tensors[entering],
                output=tensors[group.output],
                cost=_group_cost(
                    group, graph, ram, sum(map(nbytes, live)), tuple(m[1:] for m in moves)
                ),
                live=tuple(tensors[t] for t in live),
                reads=tuple(tensors[t] for t in group.reads),
            )
        )
    return layers


def live_sets(order: Sequence[OpGroup], graph: Graph) -> list[tuple[str, ...]]:
    """Per position, the tensors live across the cut after it, in production order; after the
    last group, the graph outputs in the graph's order."""
    last_read: dict[str, int] = {}
    for pos, group in enumerate(order):
        for t in group.reads:
            last_read[t] = pos
    end = len(order)
    for t in graph.outputs:
        last_read[t] = end
    produced: list[str] = []
    out = []
    for pos, group in enumerate(order):
        produced.extend(group.outputs)
        out.append(tuple(t for t in produced if last_read.get(t, -1) > pos))
    out[-1] = tuple(graph.outputs)
    return out


def _group_cost(
    group: OpGroup,
    graph: Graph,
    ram: int,
    out_bytes: int,
    moved: Sequence[tuple[int, int, int]] = (),
) -> LayerCost:
    """FLASH_j and MAC_j of the group's ops (handlers), RAM_j of the chain's arena plan
    (:mod:`splitter.cost.oparena`), OUT_j the live bytes after it, and the kernel cost
    table's instructions of its ops (as the super-node chain's layers) plus those of the
    compaction ``memmove`` s after them (``moved``: ``(from, to, bytes)`` of each; a layer
    split's last input slice and its concat move the slices' bytes, 8 KiB on ``dw_wide_qdq``:
    ~33,000 instructions, as many as the slice copies themselves)."""
    tensors = graph.tensors
    classes: dict[str, int] = {}
    for op in group.ops:
        cls, macs = op_macs(op, tensors)
        if macs:
            classes[cls] = classes.get(cls, 0) + macs
    return LayerCost(
        flash=sum(op_flash(op) for op in group.ops),
        ram=ram,
        macs=sum(classes.values()),
        out_bytes=out_bytes,
        macs_by_class=tuple(sorted(classes.items())),
        instructions=()
        if graph.layout is None
        else table_instructions(group.ops, tensors, graph.layout, moved),
    )
