"""Exact latency: label setting over the layers, pruned by a Lagrangian bound (resource-constrained
shortest path, the flash of every device being a resource).

The latency problem (SPEC.md, objective 1) is a shortest path through the layered graph whose node
``(j, i)`` means "layer ``j`` on device ``i``" (cost ``L_ij``, eq. 6) with an arc cost ``comm_j``
wherever consecutive layers change device (eq. 13), subject to the knapsack constraints (4)
``sum FLASH_j x_ji <= FLASH_i``. Constraint (5) only forbids nodes (``problem.allowed``).

**Bound.** For multipliers ``lam >= 0`` (one per *binding* device: a device the layers that fit it
could overflow), ``h_lam[j][i]`` is the least penalised cost of layers ``j+1..n-1`` after ``(j, i)``
with ``L_ik + lam_k FLASH_j`` per node (a plain backward DP, :func:`penalised_tables`). A label at
``(j, i)`` with latency ``c`` and flash ``u_k`` used on device ``k`` can only be completed within
``w_k <= min(FLASH_k - u_k, R_k)`` more bytes, ``R_k`` being the flash of the remaining layers that
fit ``k``, so every feasible completion has latency at least

    ``c + h_lam[j][i] - sum_k lam_k (FLASH_k - e_k)``,   ``e_k = max(u_k, FLASH_k - R_k)``

(Lagrangian relaxation of (4); Fisher, "The Lagrangian relaxation method for solving integer
programming problems", Management Science 27, 1981). ``lam`` is the optimal dual of the path
formulation, found exactly by column generation over paths with the GLOP LP solver
(:func:`lagrangian_dual`); its root value is the LP bound.

**Search.** Labels are extended layer by layer (vectorised with numpy). A label is cut when its
bound exceeds a *limit*; within the labels of one layer on one device, ``A`` dominates ``B`` when
``e_A <= e_B`` on every binding device and either ``A`` is no worse on latency, sub-model count and
lexicographic rank (so every completion of ``B`` is matched by one of ``A`` that wins or ties under
the SPEC.md tie rule) or ``A`` is cheaper by more than the tie tolerance. The limit grows from just
above the LP bound (iterative deepening: a pass that finds a plan has seen every plan within its
limit, so its best is optimal) and never exceeds the best plan a heuristic found (Lagrangian
penalty repair and a beam of the same search), so the last pass always succeeds.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from ortools.linear_solver import pywraplp

from splitter.errors import SolverError
from splitter.partition.base import Incumbent, SolverResult
from splitter.partition.problem import TOL, Problem, count_runs, is_feasible, value_of

#: deepening limits (see ``_Search.next_target``): shares of the gap, doubled after each failure
FIRST_STEP, DEEPEN_SHARE = 2e-4, 1 / 16
BEAM_WIDTH = 16
COLGEN_MAX_ITERATIONS = 300
#: layers with at most this many labels are filtered with one (k, k) dominance matrix
WHOLE_LAYER_DOMINANCE = 384
DEFAULT_TIME_LIMIT = 60.0


@dataclass(frozen=True)
class Tables:
    """Everything the passes share: bound tables and the binding-device data."""

    binding: np.ndarray  # (m,) device indices whose flash can overflow
    caps: np.ndarray  # (m,) their FLASH_i
    rest: np.ndarray  # (n, m) R_k after layer j: flash of layers > j that fit device k
    h0: np.ndarray  # (n, d) cost-to-go ignoring flash (lam = 0)
    hlam: np.ndarray  # (n, d) penalised cost-to-go
    lam: np.ndarray  # (m,) multipliers of the binding devices
    onehot: np.ndarray  # (d, m) device i is binding device k
    lower: float  # max of the Lagrangian root bounds (a lower bound on the optimum)


def solve_dp(problem: Problem, objective: str, **options: object) -> SolverResult:
    """Exact minimum latency; ``objective`` must be ``"latency"``.

    Options: ``time_limit`` (seconds, default 60, as cpsat; the incumbent is returned, not proved
    optimal, when it passes), ``incumbent`` (a feasible assignment to start from), ``stop`` (a
    ``threading.Event``: the search ends as at the time limit soon after it is set; the
    ``auto`` portfolio's race), ``slow_after`` / ``on_slow`` (seconds, a callable: called once
    when the search has run that long without ending; the race starts CP-SAT then).
    """
    if objective != "latency":
        raise SolverError("dp solves latency only; use --solver bnb or cpsat for throughput")
    limit_s = float(options.get("time_limit") or DEFAULT_TIME_LIMIT)  # type: ignore[arg-type]
    deadline = time.perf_counter() + limit_s
    inc = Incumbent()
    start = options.get("incumbent")
    tables, columns = build_tables(problem)
    report = options.get("on_progress")
    stop = options.get("stop")
    search = _Search(
        problem, tables, deadline, on_progress=report if callable(report) else None,
        stop=stop if isinstance(stop, threading.Event) else None,
    )  # fmt: skip
    on_slow, slow_after = options.get("on_slow"), options.get("slow_after")
    if callable(on_slow) and isinstance(slow_after, (int, float)):
        search.slow_at, search.on_slow = time.perf_counter() + slow_after, on_slow
    try:
        starts = [tuple(int(x) for x in start)] if start is not None else []  # type: ignore[attr-defined]
        for a in [*starts, *columns, *repair_paths(problem, tables)]:
            if is_feasible(problem, a):
                inc.offer(value_of(problem, a, "latency"), a)
        beam = search.label_pass(inc.value, beam=BEAM_WIDTH)
        if beam is not None:
            inc.offer(value_of(problem, beam, "latency"), beam)
        found = search.deepen(inc)
    except _Stop:
        return SolverResult(inc.assignment, search.nodes, optimal=False, gap=_gap(inc, tables))
    return SolverResult(found, nodes=search.nodes, optimal=True)


def _gap(inc: Incumbent, tables: Tables) -> float | None:
    if inc.assignment is None or inc.value <= 0:
        return None
    return max(0.0, (inc.value - tables.lower) / inc.value)


class _Stop(Exception):
    """The time limit passed."""


@dataclass
class _Search:
    """The passes over one problem, counting the labels they create (the solver's nodes)."""

    problem: Problem
    tables: Tables
    deadline: float | None
    nodes: int = 0
    on_progress: Callable[[str], None] | None = None
    stop: threading.Event | None = None
    slow_at: float | None = None
    on_slow: Callable[[], object] | None = None

    def check_time(self) -> None:
        """Raise :class:`_Stop` once the deadline has passed or ``stop`` is set; call
        ``on_slow`` once past ``slow_at``."""
        now = time.perf_counter()
        if self.deadline is not None and now > self.deadline:
            raise _Stop
        if self.stop is not None and self.stop.is_set():
            raise _Stop
        if self.slow_at is not None and now > self.slow_at and self.on_slow is not None:
            self.slow_at = None
            self.on_slow()

    def deepen(self, inc: Incumbent) -> tuple[int, ...] | None:
        """Passes with growing limits until one finds a plan within its limit: that is optimal.

        A pass with limit ``L`` explores every label whose bound is at most ``L (1 + 8 TOL)``,
        so it sees every plan of latency up to that, ties included; if its best plan is within
        ``L (1 + 3 TOL)``, every plan tied with it was inside the limit too. A pass that finds
        nothing proves the optimum exceeds ``L``. Once the limit passes ``ceiling`` (no plan
        costs more) it becomes infinite; finding nothing then proves infeasibility.
        """
        problem, lower = self.problem, self.tables.lower
        t_max = np.where(problem.allowed, problem.t, 0.0).max(axis=1)
        ceiling = float(t_max.sum() + problem.comm.sum())
        failed = 0
        while True:
            target = self.next_target(lower, inc, failed, ceiling)
            found = self.label_pass(target)
            if found is not None:
                value = value_of(problem, found, "latency")
                if value <= target * (1 + 3 * TOL) + 1e-300:
                    return found
                inc.offer(value, found)
                continue
            if target == float("inf"):
                return None
            lower = max(lower, target)
            failed += 1
            if self.on_progress is not None and inc.assignment is not None:
                gap = (inc.value - lower) / inc.value if inc.value > 0 else 0.0
                self.on_progress(f"dp: best {inc.value:.6g} s, bound {lower:.6g} s, gap {gap:.1%}")

    @staticmethod
    def next_target(lower: float, inc: Incumbent, failed: int, ceiling: float) -> float:
        """The next pass's limit after ``failed`` passes that found nothing.

        With an incumbent: ``lower + DEEPEN_SHARE 2^failed (UB - lower)``, the incumbent itself
        once that reaches it (that pass always succeeds). Without one:
        ``lower (1 + FIRST_STEP 2^failed)``, infinite once above ``ceiling`` (no plan costs
        more).
        """
        if inc.assignment is None:
            span = max(abs(lower), 1e-9 * ceiling, 1e-300)
            target = lower + FIRST_STEP * 2.0**failed * span
            return float("inf") if target > ceiling else target
        target = lower + DEEPEN_SHARE * 2.0**failed * max(inc.value - lower, 0.0)
        return inc.value if target >= inc.value * (1 - 4 * TOL) else target

    def label_pass(self, limit: float, beam: int | None = None) -> tuple[int, ...] | None:
        """One forward pass keeping the labels whose bounds are within ``limit``.

        With ``beam``, also at most ``beam`` labels per layer (those of least bound): a
        heuristic. Returns the best plan found, None if none.
        """
        problem, tables = self.problem, self.tables
        cut = limit * (1 + 8 * TOL) + 1e-300 if limit < float("inf") else float("inf")
        m = len(tables.binding)
        labels = _Labels(
            np.array([-1]), np.zeros(1), np.zeros(1, dtype=np.int64),
            np.zeros((1, m), dtype=np.int64), np.array([-1]), np.zeros(1),
        )  # fmt: skip
        history: list[_Labels] = []
        for j in range(problem.n):
            self.check_time()
            children = _extend(problem, tables, labels, j, cut)
            self.nodes += len(children.dev)
            if beam is not None:
                children = _least_bound(children, 4 * beam)
            children = children.take(self.undominated(children, j, TOL * cut))
            if beam is not None:
                children = _least_bound(children, beam)
            if len(children.dev) == 0:
                return None
            history.append(children)
            labels = children
        return _best_final(problem, history)

    def undominated(self, labels: _Labels, j: int, margin: float) -> np.ndarray:
        """Positions of the labels no label of the same device dominates (module docstring).

        Dominance is a strict partial order (transitive, irreflexive), so dropping every
        dominated label at once keeps a dominating label for each dropped one.
        """
        eff = np.maximum(labels.used, self.tables.caps - self.tables.rest[j])
        if len(labels.dev) <= WHOLE_LAYER_DOMINANCE:  # one matrix for the layer: fewer calls
            same = labels.dev[:, None] == labels.dev[None, :]
            rank = np.arange(len(labels.dev))
            dominated = (same & _dominance_matrix(labels.cost, labels.nsub, eff, rank, margin)).any(
                axis=0
            )
            return np.flatnonzero(~dominated)
        keep = np.ones(len(labels.dev), dtype=bool)
        for i in np.unique(labels.dev):
            g = np.flatnonzero(labels.dev == i)
            if len(g) < 2:
                continue
            # by cost: a label dominates only labels of no lower cost, so each block of rows
            # is compared with the labels from its least cost on
            g = g[np.argsort(labels.cost[g], kind="stable")]
            c, ns, e = labels.cost[g], labels.nsub[g], eff[g]
            dominated = np.zeros(len(g), dtype=bool)
            for lo in range(0, len(g), 256):
                self.check_time()
                start = int(np.searchsorted(c, c[lo], side="left"))
                block = _dominance_matrix(c, ns, e, g, margin, slice(lo, lo + 256), start)
                dominated[start:] |= block.any(axis=0)
            keep[g[dominated]] = False
        return np.flatnonzero(keep)


# --- bound tables ------------------------------------------------------------------------------


def build_tables(problem: Problem) -> tuple[Tables, list[tuple[int, ...]]]:
    """Bound tables for ``problem`` and the paths column generation produced."""
    flash = problem.flash.astype(np.int64)
    need = (problem.allowed * flash[:, None]).sum(axis=0)
    binding = np.flatnonzero(need > problem.dev_flash)
    caps = problem.dev_flash[binding].astype(np.int64)
    fits = problem.allowed[:, binding] * flash[:, None]  # (n, m)
    suffix = np.cumsum(fits[::-1], axis=0)[::-1]
    rest = np.vstack([suffix[1:], np.zeros((1, len(binding)), dtype=np.int64)])
    h0, root0, _ = penalised_tables(problem, np.zeros(problem.d))
    lam, lower, columns = lagrangian_dual(problem, binding)
    pen = np.zeros(problem.d)
    pen[binding] = lam
    hlam, _, _ = penalised_tables(problem, pen)
    onehot = (np.arange(problem.d)[:, None] == binding[None, :]).astype(np.int64)
    tables = Tables(binding, caps, rest, h0, hlam, lam, onehot, max(root0, lower))
    return tables, columns


def penalised_tables(
    problem: Problem, pen: np.ndarray
) -> tuple[np.ndarray, float, tuple[int, ...]]:
    """Backward DP with node costs ``L_ji + pen_i FLASH_j`` (``inf`` where layer ``j`` alone does
    not fit device ``i``).

    ``h[j][i] = min_k (comm_j [k != i] + c_{j+1,k} + h[j+1][k])``, ``h[n-1][i] = 0``; returns ``h``,
    the root value ``min_i (c_0i + h[0][i])`` and a path attaining it (a least penalised path).
    """
    n, d = problem.n, problem.d
    cost = np.where(problem.allowed, problem.t + pen[None, :] * problem.flash[:, None], np.inf)
    h = np.zeros((n, d))
    choice = np.zeros((n, d), dtype=np.int64)
    stay = np.arange(d)
    for j in range(n - 2, -1, -1):
        nxt = cost[j + 1] + h[j + 1]
        k = int(np.argmin(nxt))
        move = problem.comm[j] + nxt[k]
        switch = move < nxt
        h[j] = np.where(switch, move, nxt)
        choice[j] = np.where(switch, k, stay)
    root = cost[0] + h[0]
    i = int(np.argmin(root))
    path = [i]
    for j in range(n - 1):
        i = int(choice[j][i])
        path.append(i)
    return h, float(root[path[0]]), tuple(path)


def lagrangian_dual(
    problem: Problem, binding: np.ndarray
) -> tuple[np.ndarray, float, list[tuple[int, ...]]]:
    """Optimal multipliers of the binding flash constraints, by column generation over paths.

    Master LP (Dantzig-Wolfe): ``min sum_p c_p z_p`` subject to ``sum_p (U_pk / FLASH_k) z_p <= 1``
    for every binding device ``k`` and ``sum_p z_p = 1``, ``z >= 0`` (rows scaled by the
    capacity); a path's flash ``U_pk`` and latency ``c_p``. Pricing is :func:`penalised_tables`
    with ``pen_k = -pi_k / FLASH_k`` (``pi`` the duals of the capacity rows). Every priced
    ``lam`` gives the valid bound ``root(lam) - sum_k lam_k FLASH_k``; the best is returned
    with its ``lam``. Only the strength of the bound depends on the LP's accuracy, not its validity.
    """
    m = len(binding)
    _, root0, path0 = penalised_tables(problem, np.zeros(problem.d))
    if m == 0:
        return np.zeros(0), root0, [path0]
    caps = problem.dev_flash[binding].astype(float)
    flash = problem.flash.astype(float)
    lp = pywraplp.Solver.CreateSolver("GLOP")
    rows = [lp.Constraint(-lp.infinity(), 1.0) for _ in range(m)]
    convex = lp.Constraint(1.0, 1.0)
    obj = lp.Objective()
    artificial = lp.NumVar(0.0, lp.infinity(), "artificial")
    convex.SetCoefficient(artificial, 1.0)
    obj.SetCoefficient(artificial, 10.0 * float(problem.t.max(axis=1).sum() + problem.comm.sum()))
    obj.SetMinimization()
    best_lam, best_lb, columns = np.zeros(m), root0, [path0]
    slot = {int(dev): k for k, dev in enumerate(binding)}
    for it in range(COLGEN_MAX_ITERATIONS):
        if lp.Solve() != pywraplp.Solver.OPTIMAL:
            break
        lam = np.maximum(0.0, -np.array([r.dual_value() for r in rows])) / caps
        pen = np.zeros(problem.d)
        pen[binding] = lam
        _, root, path = penalised_tables(problem, pen)
        bound = root - float(lam @ caps)
        if bound > best_lb:
            best_lam, best_lb = lam, bound
        reduced = root - convex.dual_value()
        lp_value = obj.Value()
        if reduced >= -1e-9 * abs(lp_value) or best_lb >= lp_value - 1e-9 * abs(lp_value):
            break
        use = np.zeros(m)
        for j, dev in enumerate(path):
            if dev in slot:
                use[slot[dev]] += flash[j]
        column = lp.NumVar(0.0, lp.infinity(), f"p{it}")
        for k in range(m):
            rows[k].SetCoefficient(column, use[k] / caps[k])
        convex.SetCoefficient(column, 1.0)
        obj.SetCoefficient(column, value_of(problem, path, "latency"))
        columns.append(path)
    return best_lam, best_lb, columns


def repair_paths(problem: Problem, tables: Tables, rounds: int = 12) -> list[tuple[int, ...]]:
    """Feasible plans from least penalised paths, raising the penalty of overfull devices.

    Starts from ``lam`` (the dual optimum) and multiplies the penalty of every device a path
    overfills by 2 (or sets it to the median layer's latency per byte when it is zero) until
    the path fits; a cheap primal heuristic (Lagrangian heuristic, Fisher 1981).
    """
    pen = np.zeros(problem.d)
    pen[tables.binding] = tables.lam
    sized = problem.flash[problem.flash > 0]
    typical = float(np.median(sized)) if len(sized) else 1.0
    scale = float(problem.t.mean()) / max(1.0, typical)
    found = []
    for _ in range(rounds):
        _, _, path = penalised_tables(problem, pen)
        if is_feasible(problem, path):
            found.append(path)
            break
        used = np.zeros(problem.d, dtype=np.int64)
        np.add.at(used, np.array(path), problem.flash)
        over = used > problem.dev_flash
        pen = np.where(over, np.where(pen > 0, pen * 2.0, scale), pen)
    return found


# --- the label pass ----------------------------------------------------------------------------


@dataclass
class _Labels:
    """The labels of one layer, in lexicographic order of their prefixes (rank = position)."""

    dev: np.ndarray  # (k,)
    cost: np.ndarray  # (k,) latency of the prefix
    nsub: np.ndarray  # (k,) sub-models of the prefix
    used: np.ndarray  # (k, m) flash used on the binding devices
    parent: np.ndarray  # (k,) index into the previous layer's labels
    bound: np.ndarray  # (k,) Lagrangian bound of the best completion

    def take(self, idx: np.ndarray) -> _Labels:
        """The labels at positions ``idx`` (increasing, so the order is kept)."""
        return _Labels(
            self.dev[idx], self.cost[idx], self.nsub[idx], self.used[idx], self.parent[idx],
            self.bound[idx],
        )  # fmt: skip


def _least_bound(labels: _Labels, width: int) -> _Labels:
    """At most ``width`` labels, those of least bound, in their order (the beam heuristic)."""
    if len(labels.dev) <= width:
        return labels
    return labels.take(np.sort(np.argsort(labels.bound, kind="stable")[:width]))


def _extend(problem: Problem, tables: Tables, labels: _Labels, j: int, cut: float) -> _Labels:
    """Every label extended by layer ``j`` on every device it fits, less those the bounds cut.

    Child cost ``c + L_ji + comm_{j-1} [i != dev]`` (eq. 13); cut when ``c + h0[j][i]`` or the
    Lagrangian bound (module docstring) exceeds ``cut``, or a binding device overflows. Children
    come out parent-major, device-minor: lexicographic order again.
    """
    d = problem.d
    devices = np.arange(d)
    moved = labels.dev[:, None] != devices[None, :]  # (k, d)
    cost = labels.cost[:, None] + problem.t[j][None, :]
    if j > 0:
        cost = cost + moved * problem.comm[j - 1]
    ok = problem.allowed[j][None, :] & (cost + tables.h0[j][None, :] <= cut)
    used = labels.used[:, None, :] + tables.onehot * int(problem.flash[j])  # (k, d, m)
    ok &= (used <= tables.caps).all(axis=2)
    eff = np.maximum(used, tables.caps - tables.rest[j])
    bound = cost + tables.hlam[j][None, :] - (tables.caps - eff) @ tables.lam
    slack_eps = 1e-12 * (abs(cut) + float(tables.lam @ tables.caps)) if cut < np.inf else 0.0
    ok &= bound <= cut + slack_eps
    rows, cols = np.nonzero(ok)
    return _Labels(
        cols, cost[rows, cols], labels.nsub[rows] + moved[rows, cols], used[rows, cols], rows,
        bound[rows, cols],
    )  # fmt: skip


def _dominance_matrix(
    cost: np.ndarray,
    nsub: np.ndarray,
    eff: np.ndarray,
    rank: np.ndarray,
    margin: float,
    rows: slice = slice(None),
    start: int = 0,
) -> np.ndarray:
    """``D[a, b]``: label ``rows[a]`` dominates label ``start + b`` (same device assumed; module
    docstring): ``eff_a <= eff_b`` everywhere and either ``cost_b - cost_a > margin`` or ``a``
    no worse on cost, sub-models and rank. The flash columns are compared one at a time into
    the 2-D result (a 3-D comparison reduced over its short last axis took most of a plan's
    time on four boards)."""
    c, ns, r = cost[rows, None], nsub[rows, None], rank[rows, None]
    cb, nb, rb = cost[None, start:], nsub[None, start:], rank[None, start:]
    out = (cb - c > margin) | ((c <= cb) & (ns <= nb) & (r < rb))
    mine = eff[rows]
    for k in range(eff.shape[1]):
        out &= mine[:, k, None] <= eff[None, start:, k]
    return out


def _best_final(problem: Problem, history: list[_Labels]) -> tuple[int, ...] | None:
    """The best complete plan under the SPEC.md tie rule among the last layer's labels."""
    last = history[-1]
    best = float(last.cost.min())
    inc = Incumbent()
    for idx in np.flatnonzero(last.cost <= best * (1 + 4 * TOL) + 1e-300):
        a = _backtrack(history, int(idx))
        inc.offer(value_of(problem, a, "latency"), a, count_runs(a))
    return inc.assignment


def _backtrack(history: list[_Labels], idx: int) -> tuple[int, ...]:
    out = []
    for labels in reversed(history):
        out.append(int(labels.dev[idx]))
        idx = int(labels.parent[idx])
    return tuple(reversed(out))
