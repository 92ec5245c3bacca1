"""LO-SC: cut a chain into segments run one after the other on ONE device (Capogrosso et al.).

Local-Only Split Computing (``../shared/papers/lo-sc-local-only-split-computing.md``, section III)
places layers ``l = 0..L-1`` into ordered segments ``s``, each of which must fit the device's memory
``M(s)`` and time ``T(s)``, minimising eq. (9): the sum over used segments of the output size of
the segment's last layer (the bytes carried from one segment to the next, plus the final output).

The paper's MILP (eqs. 1-9) with ``x[l, s]`` (layer ``l`` in segment ``s``), ``u[s]`` (segment
used), ``i[s]`` (index of its last layer) and ``y[s]`` (that layer's output size) is encoded here
in an equivalent, smaller form for CP-SAT:

* ``x[l][s]`` booleans, exactly one per layer (eq. 1);
* the segment index of a layer ``g_l = sum_s s * x[l][s]`` with ``g_0 = 0`` and
  ``g_{l+1} - g_l in {0, 1}``: segments are used from the first one on without gaps (eqs. 4-5)
  and layers run in order (eq. 6);
* ``b_l = g_{l+1} - g_l`` is 1 exactly when layer ``l`` is the last layer of its segment, so
  ``sum_s y[s] = sum_{l < L-1} OUT_l * b_l + OUT_{L-1}`` (eqs. 7-9);
* memory (eq. 2) ``sum_l MEM_l x[l][s] + PEAK_k x[k][s] <= M`` for every layer ``k``: the paper's
  additive memory (weights) plus, as a generalisation for microcontrollers, the largest working
  buffer of any one layer of the segment (``PEAK``; all zero gives the paper's model exactly);
* time (eq. 3) ``sum_l T_l x[l][s] <= T`` when a time cap is given, in integer microseconds
  rounded up, so an answer feasible for the solver is feasible for the exact times.

CP-SAT proves the optimum (status OPTIMAL) or reports that no segmentation exists (INFEASIBLE).
It runs one worker with a fixed seed, so among equal optima the same instance always gets the
same answer (``plan --segments`` and ``segment -o`` agree).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from ortools.sat.python import cp_model

from splitter.errors import InfeasibleError
from splitter.partition.cpsat import solve_stoppable


@dataclass(frozen=True)
class SegmentProblem:
    """One device's LO-SC instance: per-layer sizes and the per-segment caps."""

    memory: tuple[int, ...]  # MEM_l: bytes layer l adds to its segment (its weights)
    output: tuple[int, ...]  # OUT_l: bytes of layer l's output
    memory_cap: int  # M(s): bytes a segment may occupy (the same for every segment)
    peak: tuple[int, ...] = ()  # PEAK_l: working bytes while layer l runs (default 0)
    time: tuple[float, ...] = ()  # T_l seconds (default 0)
    time_cap: float | None = None  # T(s) seconds, None = no time constraint
    names: tuple[str, ...] = ()  # layer names, for messages

    def __post_init__(self) -> None:
        n = len(self.memory)
        if n == 0:
            raise InfeasibleError("the layer chain is empty; give a model with layers")
        for name in ("output", "peak", "time", "names"):
            values = getattr(self, name)
            if values and len(values) != n:
                raise ValueError(f"{name} has {len(values)} entries for {n} layers")

    @property
    def n(self) -> int:
        """Number of layers ``L``."""
        return len(self.memory)

    def peak_of(self, j: int) -> int:
        """``PEAK_l`` (0 when not given)."""
        return self.peak[j] if self.peak else 0

    def label(self, j: int) -> str:
        """``layer 3 'conv_1'`` (the name when given)."""
        return f"layer {j} '{self.names[j]}'" if self.names else f"layer {j}"

    def time_of(self, j: int) -> float:
        """``T_l`` (0 when not given)."""
        return self.time[j] if self.time else 0.0


@dataclass(frozen=True)
class Segmentation:
    """An answer: segments as inclusive ``(first, last)`` layer ranges, in execution order."""

    segments: tuple[tuple[int, int], ...]
    carried_bytes: int  # eq. (9): sum of the output sizes of every segment's last layer
    optimal: bool

    def memory(self, problem: SegmentProblem) -> list[int]:
        """Bytes each segment occupies: ``sum MEM_l + max PEAK_l`` over its layers."""
        return [segment_memory(problem, a, b) for a, b in self.segments]


def segment_memory(problem: SegmentProblem, first: int, last: int) -> int:
    """``sum_{l=first..last} MEM_l + max_{l=first..last} PEAK_l``."""
    layers = range(first, last + 1)
    return sum(problem.memory[j] for j in layers) + max(problem.peak_of(j) for j in layers)


def segment_time(problem: SegmentProblem, first: int, last: int) -> float:
    """``sum_{l=first..last} T_l``."""
    return sum(problem.time_of(j) for j in range(first, last + 1))


def carried(problem: SegmentProblem, cuts: Sequence[int]) -> int:
    """Eq. (9) for segments ending at ``cuts`` (last layers, ascending) plus the final layer."""
    ends = [*cuts, problem.n - 1]
    return sum(problem.output[j] for j in ends)


def solve_segments(problem: SegmentProblem, time_limit: float = 60.0) -> Segmentation:
    """The optimal LO-SC segmentation by CP-SAT (see the module docstring for the model).

    Raises :class:`InfeasibleError` when a layer alone exceeds a cap (naming it) or CP-SAT proves
    no segmentation exists.
    """
    _check_layers_fit(problem)
    n = problem.n
    m = cp_model.CpModel()
    x = [[m.new_bool_var(f"x{j}_{s}") for s in range(n)] for j in range(n)]
    g = [m.new_int_var(0, n - 1, f"g{j}") for j in range(n)]
    for j in range(n):
        m.add_exactly_one(x[j])
        m.add(g[j] == sum(s * x[j][s] for s in range(n)))
    m.add(g[0] == 0)
    b = [m.new_bool_var(f"b{j}") for j in range(n - 1)]
    for j in range(n - 1):
        m.add(g[j + 1] - g[j] == b[j])
    _memory_constraints(m, x, problem)
    _time_constraints(m, x, problem)
    m.minimize(sum(problem.output[j] * b[j] for j in range(n - 1)))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    # one worker, fixed seed: the same instance gives the same answer among equal optima, so
    # `plan --segments --json` and `segment -o OUT` write the same plan.json (and plan hash)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = 0
    status = solve_stoppable(solver, m)
    if status == cp_model.INFEASIBLE:
        raise InfeasibleError(_infeasible_message(problem))
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise InfeasibleError(
            f"no segmentation found within {time_limit:g} s; raise the time limit"
        )
    cuts = [j for j in range(n - 1) if solver.value(b[j])]
    return Segmentation(_ranges(cuts, n), carried(problem, cuts), status == cp_model.OPTIMAL)


def _memory_constraints(
    m: cp_model.CpModel, x: list[list[cp_model.IntVar]], problem: SegmentProblem
) -> None:
    """Eq. (2), with the largest working buffer of the segment's layers added (``PEAK``)."""
    n = problem.n
    for s in range(n):
        load = sum(problem.memory[j] * x[j][s] for j in range(n))
        peaks = sorted({problem.peak_of(j) for j in range(n)})
        if peaks == [0]:
            m.add(load <= problem.memory_cap)
            continue
        for k in range(n):
            m.add(load + problem.peak_of(k) * x[k][s] <= problem.memory_cap)


def _time_constraints(
    m: cp_model.CpModel, x: list[list[cp_model.IntVar]], problem: SegmentProblem
) -> None:
    """Eq. (3) in integer microseconds: ``T_l`` rounded up, ``T(s)`` rounded down."""
    if problem.time_cap is None:
        return
    n = problem.n
    t_us = [math.ceil(problem.time_of(j) * 1e6) for j in range(n)]
    cap_us = math.floor(problem.time_cap * 1e6)
    for s in range(n):
        m.add(sum(t_us[j] * x[j][s] for j in range(n)) <= cap_us)


def _check_layers_fit(problem: SegmentProblem) -> None:
    """A layer that alone exceeds a cap can never be placed: say which."""
    for j in range(problem.n):
        mem = segment_memory(problem, j, j)
        if mem > problem.memory_cap:
            raise InfeasibleError(
                f"{problem.label(j)} alone needs {mem} B, more than a segment's "
                f"{problem.memory_cap} B; use a board with more memory"
            )
        if problem.time_cap is not None and problem.time_of(j) > problem.time_cap:
            raise InfeasibleError(
                f"{problem.label(j)} alone takes {problem.time_of(j):.6f} s, more than a segment's "
                f"{problem.time_cap:.6f} s; raise the segment time cap"
            )


def _infeasible_message(problem: SegmentProblem) -> str:
    return (
        f"no segmentation satisfies memory {problem.memory_cap} B"
        + ("" if problem.time_cap is None else f" and time {problem.time_cap:.6f} s")
        + " per segment; raise the caps"
    )


def _ranges(cuts: Sequence[int], n: int) -> tuple[tuple[int, int], ...]:
    """Inclusive layer ranges between consecutive cuts (a cut is a segment's last layer)."""
    starts = [0, *(c + 1 for c in cuts)]
    ends = [*cuts, n - 1]
    return tuple(zip(starts, ends, strict=True))
