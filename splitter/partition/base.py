"""What every solver returns, and the incumbent every solver keeps (SPEC.md Ties)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from splitter.partition.problem import better, count_runs


@dataclass(frozen=True)
class SolverResult:
    """A solver's raw answer: ``assignment`` is None when it found no feasible candidate.

    ``optimal`` means proved optimal (or, with no assignment, proved infeasible); ``gap`` is the
    relative optimality gap a time limit left, when known. ``search[j][i]`` counts the nodes
    that assigned layer ``j`` to device ``i`` (branch and bound records it; the thesis's heatmaps).
    """

    assignment: tuple[int, ...] | None
    nodes: int
    optimal: bool
    gap: float | None = None
    search: tuple[tuple[int, ...], ...] | None = field(default=None, compare=False, repr=False)


class Incumbent:
    """The best candidate so far under :func:`~splitter.partition.problem.better`."""

    def __init__(self) -> None:
        self.value = float("inf")
        self.nsub = 0
        self.assignment: tuple[int, ...] | None = None

    def offer(self, value: float, assignment: Sequence[int], nsub: int | None = None) -> bool:
        """Keep ``assignment`` if it beats the incumbent; True when it did."""
        k = count_runs(assignment) if nsub is None else nsub
        if self.assignment is None or better(
            value, k, assignment, self.value, self.nsub, self.assignment
        ):
            self.value, self.nsub, self.assignment = value, k, tuple(assignment)
            return True
        return False
