"""PEX partial execution: the least peak activation memory of a graph run channel by channel.

Liberis & Lane, "PEX: Memory-efficient microcontroller deep learning through partial execution"
(``../shared/papers/pex-partial-execution.md``, section 3). Operators are of two kinds (3.1):

* **aggregating** (A-type: convolutions with ``groups == 1``, dense): they can *generate* one
  output channel at a time from their full input, or *accumulate* one input channel's
  contribution into their full output;
* **channel-wise** (C-type: depthwise convolutions, pooling, element-wise activations and
  binary ops, per-channel batch norm, spatial pad): channel ``c`` of the output needs only
  channel ``c`` of the input (a full second operand is read one channel at a time, a view).

A **partial execution loop** is a run of consecutive ops ``s..e`` of the schedule, over the
``C`` channels of the tensors that flow between them: ``s`` generates (A) or slices its full
input (C), the ops in between continue channel by channel (C), and ``e`` accumulates into its
full output (A) or writes its channel of the full output (C). Each inner tensor is produced by
one op and consumed only by the next, so only one channel of it ever exists (``K`` channels per
iteration, default 1; the paper's Remark 4). Every op executes exactly the MACs it would
otherwise: zero computational overhead.

Memory model (the paper's section 3.2, on a fixed topological order of the graph's ops):

* ordinary step ``k``: ``sum`` of the bytes of every tensor live at op ``k`` (inputs, outputs
  and anything produced earlier and consumed later, graph inputs and outputs included);
* loop ``s..e``: the same sum over the tensors live anywhere in ``s..e`` except the inner ones,
  plus ``K * bytes(t) / C`` for each inner tensor ``t``; when ``e`` accumulates, its output
  counts ``numel * accumulator_bytes`` (32-bit accumulators for integer models, the paper's
  section 3.4; the paper's own figures use the output's own width).

:func:`partial_schedule` finds the least peak by dynamic programming over the schedule
positions (``best[k]`` = least peak of running ops ``0..k-1``; an ordinary step or a loop ending
at ``e`` extends it: ``best[e+1] = min(max(best[s], step))``), then, within that peak, the
schedule with the fewest loops (the paper's preference for the simpler schedule). For a fixed op
order it is exact: a loop's inner tensors exist only inside it, so choices never change the
memory of other steps. With ``everywhere=True`` it keeps, within that peak, the schedule of least
total memory (``sum`` over ops of the bytes live while the op runs): every loop that lowers
memory somewhere, not only at the peak, which is what a plan split over several boards needs
(each board's share has its own peak).

:class:`LoopRules` narrows which ops may start, continue and end a loop (the planner passes the
ops the generated C can run partially, ``EXECUTABLE``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from splitter.cost.handlers import handler
from splitter.cost.memory import step_scratch
from splitter.cost.rows import loop_windows, row_bytes, row_geometry
from splitter.ir import Graph, Op, TensorSpec
from splitter.ops import ACTIVATIONS

#: Channel-wise kinds besides the activations and depthwise convolutions (see module docstring).
_CHANNELWISE = frozenset(
    {"maxpool", "avgpool", "global_avgpool", "add", "sub", "mul", "div", "batchnorm", "pad"}
)
AGGREGATE, CHANNELWISE = "aggregate", "channelwise"


@dataclass(frozen=True)
class LoopRules:
    """Which ops may start, run inside (channel-wise) and end a loop; None: any op of the role."""

    start: Callable[[Op, Graph], bool] | None = None
    middle: Callable[[Op, Graph], bool] | None = None
    end: Callable[[Op, Graph], bool] | None = None


@dataclass(frozen=True)
class Loop:
    """A partial execution loop over ops ``first..last`` (schedule indices) and ``channels``."""

    first: int
    last: int
    channels: int  # (a row loop: the last op's output rows)
    memory: int  # bytes while the loop runs
    by: str = "channel"  # or "row" (:mod:`splitter.cost.rows`)
    step: int = 1  # channels per iteration (``channels_per_step``)
    band: int = 1  # a row loop's output rows per iteration


@dataclass(frozen=True)
class PartialSchedule:
    """The answer: ordinary peak, partial-execution peak and the loops that reach it."""

    ordinary_peak: int  # bytes, every op run whole
    peak: int  # bytes, with the loops
    loops: tuple[Loop, ...]
    op_names: tuple[str, ...]

    def describe(self, loop: Loop) -> str:
        """``conv_a -> dw_b -> conv_c over 96 channels``."""
        names = self.op_names[loop.first : loop.last + 1]
        return f"{' -> '.join(names)} over {loop.channels} {loop.by}s"


def channel_axis(spec: TensorSpec, layout: str) -> int:
    """The channel axis of an activation: 1 in NCHW (rank >= 3), the last one otherwise (int8
    tensors are NHWC in any graph: ``splitter.importers.onnx_qdq``)."""
    if layout != "NHWC" and spec.dtype != "int8" and len(spec.shape) >= 3:
        return 1
    return len(spec.shape) - 1


def partial_role(op: Op, tensors: Mapping[str, TensorSpec], layout: str) -> str:
    """``"aggregate"``, ``"channelwise"`` or ``""`` (must run whole), by the rules above."""
    if op.kind == "dense":
        return AGGREGATE
    if op.kind == "conv2d":
        groups = int(op.attrs.get("groups", 1) or 1)
        if groups == 1:
            return AGGREGATE
        spec_in, spec_out = tensors[op.inputs[0]], tensors[op.outputs[0]]
        c_in = spec_in.shape[channel_axis(spec_in, layout)]
        c_out = spec_out.shape[channel_axis(spec_out, layout)]
        return CHANNELWISE if groups == c_in == c_out else ""
    if op.kind in ACTIVATIONS or op.kind in _CHANNELWISE:
        if op.kind == "pad" and not _pads_keep_channels(op, tensors, layout):
            return ""
        return CHANNELWISE
    return ""


def _pads_keep_channels(op: Op, tensors: Mapping[str, TensorSpec], layout: str) -> bool:
    """A pad is channel-wise only when it adds no channels."""
    spec = tensors[op.inputs[0]]
    out = tensors[op.outputs[0]]
    axis = channel_axis(spec, layout)
    return spec.shape[axis] == out.shape[axis]


def partial_schedule(
    graph: Graph,
    itemsize_of: Callable[[TensorSpec], int],
    *,
    ops: Sequence[Op] | None = None,
    channels_per_step: int = 1,
    accumulator_bytes: int | None = None,
    rules: LoopRules | None = None,
    everywhere: bool = False,
    row_rule: Callable[[Op, Graph], bool] | None = None,
    wide: bool = False,
) -> PartialSchedule:
    """The least-peak partial execution schedule of ``ops`` (default: the whole graph).

    ``itemsize_of(spec)`` gives an activation's bytes per element; ``accumulator_bytes`` the
    bytes per element of an accumulating loop's output (None: the output's own width, as the
    paper's figures count it); ``rules`` narrows the loops; ``everywhere`` keeps every loop
    that lowers memory within the least peak (module docstring); ``row_rule`` (which ops may
    stream rows) adds row loops (:mod:`splitter.cost.rows`) to the candidates, so the schedule
    of least peak mixes channel and row loops as each group is best served; their bands of
    rows, with ``wide``, as :func:`_widened` allows (else one row per iteration).
    """
    seq = tuple(graph.ops if ops is None else ops)
    live = _Liveness(seq, graph, itemsize_of)
    steps = [live.step(k) for k in range(len(seq))]
    candidates = _loops(seq, graph, live, channels_per_step, accumulator_bytes)
    if rules is not None:
        candidates = _allowed(seq, graph, candidates, rules)
    if row_rule is not None:
        for first, group in _row_loops(seq, graph, live, row_rule).items():
            candidates.setdefault(first, []).extend(group)
    peak = _least_peak(steps, candidates)
    loops = (_least_total if everywhere else _fewest_loops)(steps, candidates, peak)
    loops = _widened(loops, seq, live, peak) if wide else loops
    return PartialSchedule(max(steps, default=0), peak, loops, tuple(op.name for op in seq))


#: Output rows per iteration a row loop may take (:func:`_widened`), largest first.
BANDS = (16, 8, 4, 2)


def _widened(
    loops: Sequence[Loop], ops: Sequence[Op], live: _Liveness, peak: int
) -> tuple[Loop, ...]:
    """The schedule's row loops in the widest band of :data:`BANDS` whose memory stays within
    ``peak`` (the schedule's least peak): fewer, longer calls cost less per MAC (one GEMM
    set-up, one depthwise ring and its constants, one window slide per band instead of per
    row), and a plan on boards that hold the peak holds them. A loop at the peak keeps one
    row per iteration; where a board needs a loop's one-row memory, the planner plans
    without bands (:mod:`splitter.partition.partial`)."""
    out = []
    for lp in loops:
        if lp.by == "row":
            for band in (b for b in BANDS if b < lp.channels):
                memory = _row_loop_memory(ops, lp.first, lp.last, live, band)
                if memory <= peak:
                    lp = Loop(lp.first, lp.last, lp.channels, memory, "row", band=band)
                    break
        out.append(lp)
    return tuple(out)


def _allowed(
    ops: Sequence[Op], graph: Graph, candidates: Mapping[int, Sequence[Loop]], rules: LoopRules
) -> dict[int, list[Loop]]:
    """The candidate loops whose every op ``rules`` accepts in its place."""

    def ok(rule: Callable[[Op, Graph], bool] | None, op: Op) -> bool:
        return rule is None or rule(op, graph)

    kept: dict[int, list[Loop]] = {}
    for s, group in candidates.items():
        for lp in group:
            inside = ops[lp.first + 1 : lp.last]
            ends = ok(rules.start, ops[lp.first]) and ok(rules.end, ops[lp.last])
            if ends and all(ok(rules.middle, op) for op in inside):
                kept.setdefault(s, []).append(lp)
    return kept


def _least_total(
    steps: Sequence[int], candidates: Mapping[int, Sequence[Loop]], peak: int
) -> tuple[Loop, ...]:
    """Within ``peak``, the schedule of least ``sum`` of per-op memory (a loop counts its memory
    once per op), then of fewest loops."""
    inf = (1 << 62, 0)
    cost: list[tuple[int, int]] = [(0, 0)] + [inf] * len(steps)
    back: list[tuple[int, Loop | None]] = [(0, None)] * (len(steps) + 1)
    for k, memory in enumerate(steps):
        if cost[k] == inf:
            continue
        total, count = cost[k]
        if memory <= peak and (total + memory, count) < cost[k + 1]:
            cost[k + 1], back[k + 1] = (total + memory, count), (k, None)
        for loop in candidates.get(k, ()):
            end = loop.last + 1
            value = (total + loop.memory * (end - k), count + 1)
            if loop.memory <= peak and value < cost[end]:
                cost[end], back[end] = value, (k, loop)
    return _walk_back(back, len(steps))


def _walk_back(back: Sequence[tuple[int, Loop | None]], n: int) -> tuple[Loop, ...]:
    """The loops on the back-pointer path from position ``n`` to 0, in schedule order."""
    loops: list[Loop] = []
    pos = n
    while pos > 0:
        pos, taken = back[pos]
        if taken is not None:
            loops.append(taken)
    return tuple(reversed(loops))


def _least_peak(steps: Sequence[int], candidates: Mapping[int, Sequence[Loop]]) -> int:
    """``best[e+1] = min(best[e+1], max(best[s], memory of the step or loop s..e))``."""
    best = [0] + [1 << 62] * len(steps)
    for k, memory in enumerate(steps):
        best[k + 1] = min(best[k + 1], max(best[k], memory))
        for loop in candidates.get(k, ()):
            best[loop.last + 1] = min(best[loop.last + 1], max(best[k], loop.memory))
    return best[len(steps)]


def _fewest_loops(
    steps: Sequence[int], candidates: Mapping[int, Sequence[Loop]], peak: int
) -> tuple[Loop, ...]:
    """Among schedules whose every step stays within ``peak``, one with the fewest loops."""
    inf = 1 << 62
    count = [0] + [inf] * len(steps)
    back: list[tuple[int, Loop | None]] = [(0, None)] * (len(steps) + 1)
    for k, memory in enumerate(steps):
        if count[k] == inf:
            continue
        if memory <= peak and count[k] < count[k + 1]:
            count[k + 1], back[k + 1] = count[k], (k, None)
        for loop in candidates.get(k, ()):
            end = loop.last + 1
            if loop.memory <= peak and count[k] + 1 < count[end]:
                count[end], back[end] = count[k] + 1, (k, loop)
    return _walk_back(back, len(steps))


class _Liveness:
    """Live intervals of the activations over the schedule, in op indices."""

    def __init__(
        self, ops: Sequence[Op], graph: Graph, itemsize_of: Callable[[TensorSpec], int]
    ) -> None:
        self.tensors = graph.tensors
        self.itemsize_of = itemsize_of
        last = len(ops) - 1
        self.start: dict[str, int] = {}
        self.end: dict[str, int] = {}
        self.consumers: dict[str, list[int]] = {}
        for k, op in enumerate(ops):
            for name in op.inputs:
                self.start.setdefault(name, 0)  # produced before these ops: live from the start
                self.end[name] = max(self.end.get(name, k), k)
                self.consumers.setdefault(name, []).append(k)
            for name in op.outputs:
                self.start[name] = k
                self.end.setdefault(name, k)
        self.kept = set(graph.outputs)
        for name in self.kept & set(self.start):
            self.end[name] = last

    def nbytes(self, name: str) -> int:
        spec = self.tensors[name]
        return spec.size * self.itemsize_of(spec)

    def live_in(self, first: int, last: int) -> list[str]:
        """Tensors live at some op of ``first..last``."""
        return [t for t in self.start if self.start[t] <= last and self.end[t] >= first]

    def step(self, k: int) -> int:
        """Bytes live at op ``k`` run whole."""
        return sum(self.nbytes(t) for t in self.live_in(k, k))


def _loops(
    ops: Sequence[Op],
    graph: Graph,
    live: _Liveness,
    per_step: int,
    accumulator_bytes: int | None,
) -> dict[int, list[Loop]]:
    """Every valid loop, by its first op (module docstring gives the rules)."""
    roles = [partial_role(op, graph.tensors, graph.layout) for op in ops]
    found: dict[int, list[Loop]] = {}
    for s, role in enumerate(roles):
        if not role:
            continue
        channels = _channels(graph, ops[s].outputs[0])
        inner: list[str] = []
        for e in range(s + 1, len(ops)):
            link = ops[e - 1].outputs[0]
            if not _passes(ops, e, link, live, graph, channels, roles[e - 1], s):
                break
            inner.append(link)
            if roles[e]:
                memory = _loop_memory(ops, s, e, inner, channels, live, per_step, roles[e],
                                      accumulator_bytes)  # fmt: skip
                step = min(per_step, channels)
                found.setdefault(s, []).append(Loop(s, e, channels, memory, step=step))
            if roles[e] != CHANNELWISE:
                break
    return found


def _channels(graph: Graph, name: str) -> int:
    spec = graph.tensors[name]
    return int(spec.shape[channel_axis(spec, graph.layout)])


def _passes(
    ops: Sequence[Op],
    e: int,
    link: str,
    live: _Liveness,
    graph: Graph,
    channels: int,
    prev_role: str,
    s: int,
) -> bool:
    """Can ``link`` (output of op ``e-1``) flow one channel at a time into op ``e``?"""
    if len(ops[e - 1].outputs) != 1 or link in live.kept:
        return False
    if live.consumers.get(link) != [e] or ops[e].inputs[0] != link:
        return False
    if e - 1 > s and prev_role != CHANNELWISE:
        return False  # an accumulating op ends its loop
    return _channels(graph, link) == channels


def _loop_memory(
    ops: Sequence[Op],
    s: int,
    e: int,
    inner: Sequence[str],
    channels: int,
    live: _Liveness,
    per_step: int,
    last_role: str,
    accumulator_bytes: int | None,
) -> int:
    """Bytes while loop ``s..e`` runs (module docstring, memory model), with the scratch block of
    its kernels when it runs ``per_step > 1`` channels at a time
    (:func:`splitter.cost.memory.step_scratch`)."""
    inner_set = set(inner)
    total = 0
    for name in live.live_in(s, e):
        if name in inner_set:
            total += -(-live.nbytes(name) * min(per_step, channels) // channels)
        elif last_role == AGGREGATE and accumulator_bytes and name in ops[e].outputs:
            total += live.tensors[name].size * accumulator_bytes
        else:
            total += live.nbytes(name)
    return total + step_scratch(ops[s : e + 1], live.tensors, channels, per_step, live.itemsize_of)


def _row_loops(
    ops: Sequence[Op], graph: Graph, live: _Liveness, rule: Callable[[Op, Graph], bool]
) -> dict[int, list[Loop]]:
    """Every row loop (two ops or more, each inner tensor consumed only by the next op), by
    its first op, with its memory: the tensors live in it, inner ones as their row windows, and
    its ops' one scratch block (the largest, live over the whole loop, ``splitter.cost.memory``)."""
    found: dict[int, list[Loop]] = {}
    able = [rule(op, graph) and row_geometry(op, graph.tensors) is not None for op in ops]
    for s in range(len(ops)):
        if not able[s]:
            continue
        for e in range(s + 1, len(ops)):
            link = ops[e - 1].outputs[0]
            chained = len(ops[e - 1].outputs) == 1 and link not in live.kept
            if not (able[e] and chained and live.consumers.get(link) == [e]):
                break
            if ops[e].inputs[0] != link:
                break
            memory = _row_loop_memory(ops, s, e, live)
            rows = int(graph.tensors[ops[e].outputs[0]].shape[1])
            found.setdefault(s, []).append(Loop(s, e, rows, memory, "row"))
    return found


def _row_loop_memory(ops: Sequence[Op], s: int, e: int, live: _Liveness, band: int = 1) -> int:
    """Bytes while row loop ``s..e`` runs in bands of ``band`` rows: the tensors live in it,
    inner ones as their row windows (:func:`splitter.cost.rows.loop_windows`), and its ops' one
    scratch block (the largest, live over the whole loop, ``splitter.cost.memory``)."""
    windows = loop_windows(ops[s : e + 1], live.tensors, band)
    assert windows is not None
    inner = {op.outputs[0]: rows for op, rows in zip(ops[s:e], windows[0], strict=True)}
    memory = 0
    for name in live.live_in(s, e):
        spec = live.tensors[name]
        if name in inner:
            memory += inner[name] * row_bytes(spec, live.itemsize_of(spec))
        else:
            memory += live.nbytes(name)
    return memory + max(_row_scratch(op, live, band) for op in ops[s : e + 1])


def _row_scratch(op: Op, live: _Liveness, band: int) -> int:
    """Scratch bytes op's kernel asks for in a row loop of ``band`` rows per iteration
    (``OpHandler.row_scratch_bytes``)."""
    ins = [live.tensors[n] for n in op.inputs]
    out = live.tensors[op.outputs[0]]
    return handler(op).row_scratch_bytes(op, ins, out, live.itemsize_of(out), band)
