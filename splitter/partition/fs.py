"""Full Search (thesis section 4.1, Algorithm 1): every one of the ``d^n`` assignments.

Assignments are enumerated in lexicographic order (candidate ``p`` is ``p`` written in base ``d``,
most significant digit = layer 0) and evaluated in numpy blocks; the winner is chosen with the
shared tie rule among the candidates within 1e-9 of the block minimum.
"""

from __future__ import annotations

import numpy as np

from splitter.errors import SolverError
from splitter.partition.base import Incumbent, SolverResult
from splitter.partition.problem import TOL, Problem, value_of

#: Largest ``d^n`` Full Search accepts.
FS_LIMIT = 2_000_000
BLOCK = 1 << 15


def solve_fs(
    problem: Problem, objective: str, *, limit: int = FS_LIMIT, time_limit: float | None = None
) -> SolverResult:
    """Exact by enumeration; refuses instances with more than ``limit`` candidates.

    ``objective`` "energy" minimises the energy of one inference among the assignments that
    also meet the problem's latency and waiting-time bounds (:func:`~splitter.partition.
    problem.meets_bounds`).

    ``time_limit`` is accepted for the common solver interface, unused: ``limit`` bounds the work.
    """
    n, d = problem.n, problem.d
    total = d**n
    if total > limit:
        raise SolverError(
            f"full search would evaluate {d}^{n} = {total:.3g} candidates (limit {limit:.3g}); "
            "use --solver dp (latency), bnb or cpsat"
        )
    inc = Incumbent()
    powers = d ** np.arange(n - 1, -1, -1, dtype=np.int64)
    for start in range(0, total, BLOCK):
        idx = np.arange(start, min(total, start + BLOCK), dtype=np.int64)
        a = (idx[:, None] // powers[None, :]) % d
        value, feasible = _block_values(problem, a, objective)
        if not feasible.any():
            continue
        best = value[feasible].min()
        near = np.nonzero(feasible & (value <= best + TOL * abs(best)))[0]
        for k in near:  # lexicographic order, as in Algorithm 1
            cand = tuple(int(x) for x in a[k])
            inc.offer(value_of(problem, cand, objective), cand)
    return SolverResult(inc.assignment, nodes=total, optimal=True)


def _block_values(problem: Problem, a: np.ndarray, objective: str) -> tuple[np.ndarray, np.ndarray]:
    """Objective value and feasibility of a block of assignments (rows of ``a``)."""
    d = problem.d
    tt = problem.t[np.arange(problem.n)[None, :], a]  # (N, n) time of each layer where it runs
    boundary = a[:, :-1] != a[:, 1:]  # (N, n-1)
    sends = boundary * problem.comm[None, :-1]
    masks = [a == i for i in range(d)]
    feasible = problem.allowed[np.arange(problem.n)[None, :], a].all(axis=1)
    for i in range(d):
        feasible &= (masks[i] * problem.flash[None, :]).sum(axis=1) <= problem.dev_flash[i]
    latency = tt.sum(axis=1) + sends.sum(axis=1)
    if objective == "latency":
        return latency, feasible
    if objective == "throughput":
        return _waiting(problem, a, tt, sends, masks), feasible
    feasible &= latency <= problem.max_latency_s * (1 + TOL)
    if np.isfinite(problem.max_waiting_s):
        feasible &= _waiting(problem, a, tt, sends, masks) <= problem.max_waiting_s * (1 + TOL)
    return _energy(problem, a, boundary), feasible


def _energy(problem: Problem, a: np.ndarray, boundary: np.ndarray) -> np.ndarray:
    """Energy of a block: ``sum_j e[j][a_j] + sum_{a_j != a_j+1} ce[j][a_j]``."""
    assert problem.e_list is not None and problem.ce_list is not None
    cols = np.arange(problem.n)[None, :]
    e, ce = np.asarray(problem.e_list), np.asarray(problem.ce_list)
    sends = boundary * ce[cols[:, :-1], a[:, :-1]]
    return e[cols, a].sum(axis=1) + sends.sum(axis=1)


def _waiting(
    problem: Problem, a: np.ndarray, tt: np.ndarray, sends: np.ndarray, masks: list[np.ndarray]
) -> np.ndarray:
    """``W`` of each row of a block (eq. 17 as SPEC.md reads it)."""
    d = problem.d
    q = np.empty((a.shape[0], d))
    inter = np.empty((a.shape[0], d))
    for i, m in enumerate(masks):
        before = np.maximum.accumulate(m, axis=1)
        after = np.maximum.accumulate(m[:, ::-1], axis=1)[:, ::-1]
        s_i = (sends * m[:, :-1]).sum(axis=1)
        r_i = (sends * (m[:, 1:] & before[:, :-1])).sum(axis=1)
        q[:, i] = (tt * m).sum(axis=1) + s_i + r_i
        inter[:, i] = (tt * (before & after & ~m)).sum(axis=1)
    ib = q.argmax(axis=1)
    return q[np.arange(a.shape[0]), ib] + inter[np.arange(a.shape[0]), ib]
