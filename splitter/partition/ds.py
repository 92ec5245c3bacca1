"""Dichotomic Search (thesis section 4.2, Algorithms 2 and 3); not guaranteed optimal.

Reading of the thesis used here:

* for each device ``dev`` the root candidate assigns every layer to ``dev``;
* a node keeps a contiguous block of layers on ``dev`` (the whole chain at the root); its
  children reassign ``ceil(size / 2)`` consecutive layers of that block (its first or its last
  ``ceil(size / 2)``) to each other device, leaving the other half on ``dev`` as the child's
  block; the tree is explored depth first;
* a node is a leaf when one layer is left on ``dev``;
* every node is checked for feasibility and compared with the incumbent; when ``n`` is not a power
  of two or the number of layers on ``dev`` is odd, the *reversed* candidate (the device list of
  the assignment in reverse layer order) is evaluated too.

With two devices the tree has about ``2n`` nodes per root (linear in ``n``, thesis Table 1).
"""

from __future__ import annotations

from splitter.errors import SolverError
from splitter.partition.base import Incumbent, SolverResult
from splitter.partition.problem import Problem, is_feasible, meets_bounds, value_of

#: Largest estimated node count Dichotomic Search accepts.
DS_LIMIT = 2_000_000


def ds_node_estimate(n: int, d: int) -> int:
    """Nodes of the bisection trees: ``d * sum_t (2 (d - 1))^t`` for depth ``t <= ceil(log2 n)``."""
    depth = max(0, (n - 1).bit_length())
    branching = 2 * (d - 1)
    return d * sum(branching**t for t in range(depth + 1))


def solve_ds(
    problem: Problem, objective: str, *, limit: int = DS_LIMIT, time_limit: float | None = None
) -> SolverResult:
    """Dichotomic Search; ``assignment`` is None when no visited candidate is feasible.

    ``time_limit`` is accepted for the common solver interface, unused: ``limit`` bounds the work.
    """
    n, d = problem.n, problem.d
    estimate = ds_node_estimate(n, d)
    if estimate > limit:
        raise SolverError(
            f"dichotomic search would visit about {estimate:.3g} nodes with {d} devices "
            f"(limit {limit:.3g}); use --solver dp (latency), bnb or cpsat"
        )
    inc = Incumbent()
    nodes = 0
    power_of_two = n & (n - 1) == 0

    def visit(cand: list[int]) -> None:
        nonlocal nodes
        nodes += 1
        if is_feasible(problem, cand) and (objective != "energy" or meets_bounds(problem, cand)):
            inc.offer(value_of(problem, cand, objective), cand)

    def recursion(cand: list[int], dev: int, lo: int, hi: int) -> None:
        visit(cand)
        if not power_of_two or (hi - lo) % 2 == 1:
            visit(cand[::-1])
        size = hi - lo
        if size <= 1:
            return
        moved = (size + 1) // 2
        for first_half in (True, False):
            a, b = (lo, lo + moved) if first_half else (hi - moved, hi)
            rest = (lo + moved, hi) if first_half else (lo, hi - moved)
            for other in range(d):
                if other == dev:
                    continue
                child = cand[:a] + [other] * (b - a) + cand[b:]
                recursion(child, dev, *rest)

    for dev in range(d):
        recursion([dev] * n, dev, 0, n)
    return SolverResult(inc.assignment, nodes=nodes, optimal=False)
