"""A simulated pipelined run of ``N`` inferences under the execution model of SPEC.md eq. 17.

The model (thesis section 3.2, Figure 2b, as SPEC.md reads equation 17):

* a device does one thing at a time: compute a sub-model, send its output over a link (the
  sender is busy, ``S_i``), or receive into one of its sub-models other than its first (the
  receiver is busy too, ``R'_i``); the input of a device's first sub-model arrives while it is
  idle, into a buffer, so it does not keep the device busy;
* no overlap (the thesis's fix to reference [9]): once a device starts its first sub-model of
  inference ``m`` it serves only inference ``m`` until its last sub-model of ``m`` has run and
  sent its output; inferences enter in order and the source always has the next one ready.

So, with ``start`` and ``end`` times per task, sub-model ``k`` of inference ``m`` starts at
``max(arrival of its input, free_m-1(dev))`` when ``k`` is its device's first sub-model and at the
arrival of its input otherwise; its output takes ``transfer_k`` seconds on the link.

Closed form: in one inference alone, device ``i`` is held from the start of its first sub-model
to the end of its last send, ``span_i = L_i + S_i + R'_i + L*_i + X_i`` where ``X_i`` is the link
time between two *other* devices inside that range. The steady-state waiting time of the
simulation is ``max_i span_i`` (the device self-loops are the critical cycles of the max-plus
system). Equation 17 (``W = L_ib + S_ib + R'_ib + L*_ib``, ``ib = argmax_i L_i + S_i + R'_i``)
equals it exactly when ``X_ib = 0`` and no other device is held longer than ``ib``
(:func:`eq17_applies`); that holds for every plan whose devices each run one sub-model and for
the thesis's reference cases. Otherwise eq. 17 is optimistic and the report says so.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise

from splitter.partition.problem import close


@dataclass(frozen=True)
class Stage:
    """One sub-model in pipeline order: its device, compute time and output transfer time."""

    device: int
    compute_s: float
    transfer_s: float  # 0 for the last sub-model


@dataclass(frozen=True)
class Task:
    """One bar of the Gantt chart."""

    device: int
    inference: int
    stage: int
    kind: str  # "compute" | "send"
    start: float
    end: float
    receiver: int | None = None  # for a send: the receiving device


@dataclass(frozen=True)
class Simulation:
    """The tasks of ``N`` inferences and the measured waiting time (steady state)."""

    tasks: tuple[Task, ...]
    completions: tuple[float, ...]  # end of the last sub-model, per inference
    waiting_s: float  # steady-state time between two completions
    latency_s: float  # completion of the first inference (the pipeline empty)

    @property
    def throughput_per_s(self) -> float:
        """``1 / W`` of the simulation."""
        return 1.0 / self.waiting_s if self.waiting_s > 0 else float("inf")


def _firsts_lasts(stages: Sequence[Stage]) -> tuple[dict[int, int], dict[int, int]]:
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for k, s in enumerate(stages):
        first.setdefault(s.device, k)
        last[s.device] = k
    return first, last


class _Timeline:
    """Busy intervals of one device, sorted and disjoint; ``append_only`` never fills gaps."""

    def __init__(self, append_only: bool) -> None:
        self.starts: list[float] = []
        self.ends: list[float] = []
        self.append_only = append_only
        self.tail = 0.0  # end of the last task, zero-length ones included

    def free_from(self, t: float, dur: float) -> float:
        """The earliest start ``>= t`` at which ``[start, start + dur)`` is free."""
        if self.append_only:
            return max(t, self.tail)
        k = bisect.bisect_right(self.ends, t)
        while k < len(self.starts):
            if t + dur <= self.starts[k] and (dur > 0 or t < self.starts[k]):
                return t
            t = max(t, self.ends[k])
            k += 1
        return t

    def take(self, start: float, end: float) -> None:
        """Mark ``[start, end)`` busy (zero-length tasks take no time but end a held range)."""
        self.tail = max(self.tail, end)
        if end <= start:
            return
        k = bisect.bisect_right(self.starts, start)
        self.starts.insert(k, start)
        self.ends.insert(k, end)


def _place(lines: Sequence[_Timeline], ready: float, dur: float) -> float:
    """Earliest start ``>= ready`` free on every timeline of ``lines`` for ``dur`` seconds."""
    t = ready
    while True:
        nxt = max(line.free_from(t, dur) for line in lines)
        if nxt == t:
            return t
        t = nxt


def simulate(stages: Sequence[Stage], inferences: int, bottleneck: int | None = None) -> Simulation:
    """Run ``inferences`` inferences through ``stages`` (module docstring); all tasks returned.

    Tasks are placed in order (inference, then sub-model), each at the earliest time its input
    is there and its device(s) are free; the bottleneck device ``ib`` of eq. 17 only appends
    (it holds each inference from its first to its last sub-model), the others may fill a gap
    with a later inference's work. The waiting time is the interval between the last two
    completions (0 for one inference); :func:`steady_waiting` runs long enough for the steady
    state. ``bottleneck`` overrides ``ib`` (e.g. the plan's, which broke a tie of ``Q_i`` on
    per-layer sums).
    """
    if not stages or inferences < 1:
        raise ValueError("simulate needs at least one stage and one inference")
    first, _ = _firsts_lasts(stages)
    ib = eq17_terms(stages).bottleneck if bottleneck is None else bottleneck
    lines = {dev: _Timeline(append_only=dev == ib) for dev in first}
    tasks: list[Task] = []
    completions: list[float] = []
    for m in range(inferences):
        arrival = 0.0
        for k, s in enumerate(stages):
            start = _place([lines[s.device]], arrival, s.compute_s)
            end = start + s.compute_s
            lines[s.device].take(start, end)
            tasks.append(Task(s.device, m, k, "compute", start, end))
            arrival = end
            if k + 1 == len(stages):
                break
            receiver = stages[k + 1].device
            busy = [lines[s.device]]
            if first[receiver] != k + 1:
                busy.append(lines[receiver])  # R': the receiver is held too
            start = _place(busy, end, s.transfer_s)
            for line in busy:
                line.take(start, start + s.transfer_s)
            tasks.append(Task(s.device, m, k, "send", start, start + s.transfer_s, receiver))
            arrival = start + s.transfer_s
        completions.append(arrival)
    waiting = completions[-1] - completions[-2] if inferences > 1 else 0.0
    return Simulation(tuple(tasks), tuple(completions), waiting, completions[0])


def steady_waiting(
    stages: Sequence[Stage], max_inferences: int = 1024, bottleneck: int | None = None
) -> float:
    """The simulation's steady-state waiting time: the mean completion interval over one period
    of the completion pattern, once the last three periods repeat (intervals may cycle)."""
    n = max(32, 8 * len(stages))
    while True:
        c = simulate(stages, n, bottleneck).completions
        gaps = [b - a for a, b in pairwise(c)]
        for p in range(1, len(gaps) // 4 + 1):
            if all(close(gaps[-i], gaps[-i - p]) for i in range(1, 2 * p + 1)):
                return sum(gaps[-p:]) / p
        if n >= max_inferences:
            half = len(c) // 2
            return (c[-1] - c[half]) / (len(c) - 1 - half)
        n *= 2


def spans(stages: Sequence[Stage]) -> dict[int, float]:
    """``span_i``: how long device ``i`` is held by one inference alone (module docstring)."""
    first, last = _firsts_lasts(stages)
    out = {}
    for dev in first:
        lo, hi = first[dev], last[dev]
        held = sum(s.compute_s + s.transfer_s for s in stages[lo:hi])
        out[dev] = held + stages[hi].compute_s + stages[hi].transfer_s
    return out


@dataclass(frozen=True)
class Eq17Terms:
    """Per device ``Q_i = L_i + S_i + R'_i``, ``L*_i``, ``X_i``; ``ib`` and eq. 17's ``W``."""

    q: dict[int, float]
    inter: dict[int, float]
    other_links: dict[int, float]
    bottleneck: int
    waiting_s: float


def eq17_terms(stages: Sequence[Stage]) -> Eq17Terms:
    """SPEC.md eq. 17 from the stages (the same formulas as ``partition.problem.evaluate``)."""
    first, last = _firsts_lasts(stages)
    q = dict.fromkeys(first, 0.0)
    for k, s in enumerate(stages):
        q[s.device] += s.compute_s + s.transfer_s
        if k > 0 and first[s.device] != k:
            q[s.device] += stages[k - 1].transfer_s  # R'_i
    inter, other = {}, {}
    for dev in first:
        inside = range(first[dev] + 1, last[dev])
        inter[dev] = sum(stages[k].compute_s for k in inside if stages[k].device != dev)
        other[dev] = sum(
            stages[k].transfer_s
            for k in inside
            if stages[k].device != dev and stages[k + 1].device != dev
        )
    ib = max(sorted(q), key=lambda i: (q[i], -i))
    return Eq17Terms(q, inter, other, ib, q[ib] + inter[ib])


def eq17_applies(stages: Sequence[Stage]) -> bool:
    """True when eq. 17's ``W`` is the simulated steady state: ``X_ib = 0`` and every device's
    ``Q_i + L*_i + X_i`` is at most ``Q_ib + L*_ib`` (module docstring)."""
    t = eq17_terms(stages)
    if t.other_links[t.bottleneck] > 0:
        return False
    held = (t.q[i] + t.inter[i] + t.other_links[i] for i in t.q)
    return all(v <= t.waiting_s or close(v, t.waiting_s) for v in held)
