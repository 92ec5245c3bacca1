"""Branch and Bound (thesis section 4.3) for latency and throughput, with ordering heuristics.

Layers are the variables, devices the values. Variable orders (``var_order``):

* ``input``  - layer 0, 1, 2, ... (prefix order; enables the strongest bounds below);
* ``degree`` - the layer with most unassigned chain neighbours (ties: larger FLASH_j, index);
* ``mrv``    - minimum remaining values: fewest devices it still fits (ties: degree, index);
* ``flash``  - largest FLASH_j first (static).

Value orders (``val_order``): ``fastest`` (smallest ``L_ij``), ``lcv`` (least constraining: the
device whose remaining flash still fits the most unassigned layers afterwards), ``free_flash``
(most free flash first), ``index``.

Bounds (lower bounds on the minimised value, all admissible):

* latency, thesis (``bound="thesis"``): compute time so far plus, for each unassigned layer, its
  minimum ``L_ij`` over devices (ignores communication); transfers between two assigned
  neighbours on different devices are added too, since they are certain;
* latency, ``bound="strong"`` (default, prefix order only): cost of the prefix plus ``h[j][i]``, the
  exact cost-to-go from layer ``j`` on device ``i`` when flash is ignored (a backward DP, includes
  transfers);
* throughput, prefix order: ``max_i (L_i + S_i + R'_i)`` over the prefix (SPEC.md: it never
  decreases as the prefix grows and ``W`` is at least its final value); other orders use
  ``max_i (L_i + S_i)`` over the transfers already certain, which stays admissible. Both are
  raised by a balance bound: the unassigned MACs must go somewhere, so
  ``max_i Q_i >= T`` where ``sum_i s_i * max(0, T - Q_i) = MAC_rest`` and ``s_i`` is device
  ``i``'s fastest MAC rate.

Ties follow SPEC.md through the shared :func:`~splitter.partition.problem.better`; a branch is only
cut when it cannot beat the incumbent even on the tie rule.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from splitter.errors import SolverError
from splitter.partition.base import Incumbent, SolverResult
from splitter.partition.problem import TOL, Problem, is_feasible, meets_bounds, value_of

VAR_ORDERS = ("input", "degree", "mrv", "flash")
#: seconds between two progress lines (option ``on_progress``)
REPORT_S = 0.5
#: nodes between two looks at the clock and the stop event: a node costs 3-10 us (more on a
#: loaded machine), so a time limit or a stop is honoured within about a millisecond (1024
#: nodes let auto's 10 ms probe run 12-32 ms under load, 2026-11-24)
CHECK_NODES = 128
VAL_ORDERS = ("fastest", "lcv", "free_flash", "index")
BOUNDS = ("strong", "thesis")


class _Stop(Exception):
    """Node or time limit reached."""


def cost_to_go(problem: Problem) -> list[list[float]]:
    """``h[j][i]``: least latency of layers ``j+1..n-1`` given layer ``j`` on device ``i``.

    Backward DP ignoring flash (RAM/flash of single layers honoured):
    ``h[j][i] = min_k (comm_j [k != i] + L_{j+1,k} + h[j+1][k])``, ``h[n-1][i] = 0``.
    """
    n, d, t, comm = problem.n, problem.d, problem.t_list, problem.comm_list
    inf = float("inf")
    h = [[0.0] * d for _ in range(n)]
    for j in range(n - 2, -1, -1):
        nxt = [t[j + 1][k] + h[j + 1][k] if problem.allowed[j + 1, k] else inf for k in range(d)]
        best_nxt = min(nxt)
        h[j] = [min(nxt[i], comm[j] + best_nxt) for i in range(d)]
    return h


def energy_cost_to_go(problem: Problem) -> list[list[float]]:
    """``g[j][i]``: least energy of layers ``j+1..n-1`` given layer ``j`` on device ``i``.

    Backward DP ignoring flash and the bounds (single layers' RAM and flash honoured), with
    ``e`` and ``ce`` of :func:`~splitter.partition.problem.energy_tables`:
    ``g[j][i] = min(e_{j+1,i} + g[j+1][i], ce_ji + min_k (e_{j+1,k} + g[j+1][k]))``
    (``ce >= 0``, so the second term may range over every ``k``), ``g[n-1][i] = 0``.
    """
    n, d = problem.n, problem.d
    e, ce = problem.e_list, problem.ce_list
    assert e is not None and ce is not None
    inf = float("inf")
    g = [[0.0] * d for _ in range(n)]
    for j in range(n - 2, -1, -1):
        nxt = [e[j + 1][k] + g[j + 1][k] if problem.allowed[j + 1, k] else inf for k in range(d)]
        best_nxt = min(nxt)
        g[j] = [min(nxt[i], ce[j][i] + best_nxt) for i in range(d)]
    return g


def mac_rates(problem: Problem) -> list[float]:
    """``s_i = max_j MAC_j / L_ij``: no layer runs on device ``i`` faster than ``MAC_j / s_i``."""
    rates = []
    for i in range(problem.d):
        r = [c.macs / problem.t_list[j][i] for j, c in enumerate(problem.costs) if c.macs > 0]
        rates.append(max(r) if r else float("inf"))
    return rates


def balance_bound(q: list[float], rates: list[float], macs_left: float) -> float:
    """Least ``T`` with ``sum_i rates_i * max(0, T - q_i) >= macs_left`` (water filling)."""
    if macs_left <= 0:
        return 0.0
    pairs = sorted(zip(q, rates, strict=True))
    rate_sum, level, filled = 0.0, pairs[0][0], 0.0
    for k, (qk, rk) in enumerate(pairs):
        if k > 0:
            step = (qk - level) * rate_sum
            if filled + step >= macs_left:
                break
            filled += step
            level = qk
        if rk == float("inf"):
            return level
        rate_sum += rk
    return level + (macs_left - filled) / rate_sum


class BranchAndBound:
    """One search; :meth:`run` returns a :class:`SolverResult`."""

    def __init__(self, problem: Problem, objective: str, **options: object) -> None:
        self.p = problem
        self.objective = objective
        self.var_order = str(options.get("var_order", "input"))
        self.val_order = str(options.get("val_order", "fastest"))
        self.bound = str(options.get("bound", "strong"))
        self.node_limit = int(options.get("node_limit", 0) or 0)  # type: ignore[call-overload]
        limit = options.get("time_limit")
        self.deadline = time.perf_counter() + float(limit) if limit else None  # type: ignore[arg-type]
        #: a ``threading.Event`` another thread sets to stop the search (the auto portfolio)
        self.stop = options.get("stop")
        #: called about every :data:`REPORT_S` seconds with a progress line (nodes, best, gap)
        self.on_progress = options.get("on_progress")
        self.last_report = time.perf_counter()
        self._check_options()
        n, d = problem.n, problem.d
        self.inc = Incumbent()
        init = options.get("incumbent")
        if init is not None:
            a0 = tuple(int(x) for x in init)  # type: ignore[attr-defined]
            if objective != "energy" or (is_feasible(problem, a0) and meets_bounds(problem, a0)):
                self.inc.offer(value_of(problem, a0, objective), a0)
        self.nodes = 0
        self.visits = [[0] * d for _ in range(n)]  # nodes per (layer, device): the heatmap
        self.a = [-1] * n
        self.rem = [int(x) for x in problem.dev_flash]
        self.flash = [int(x) for x in problem.flash]
        self.allowed = problem.allowed.tolist()
        self.min_t = [min(problem.t_list[j][i] for i in range(d) if self.allowed[j][i])
                      for j in range(n)]  # fmt: skip
        self.min_rest = [sum(self.min_t[j:]) for j in range(n + 1)]
        self.macs = [c.macs for c in problem.costs]
        self.rates = mac_rates(problem)
        self.h = cost_to_go(problem) if self.bound == "strong" else None
        self.g = energy_cost_to_go(problem) if objective == "energy" else None
        if objective == "energy" and self.h is None:
            self.h = cost_to_go(problem)  # the latency bound's pruning needs it
        self.stopped = False

    def _check_options(self) -> None:
        for name, value, allowed in (
            ("var_order", self.var_order, VAR_ORDERS),
            ("val_order", self.val_order, VAL_ORDERS),
            ("bound", self.bound, BOUNDS),
        ):
            if value not in allowed:
                raise SolverError(f"bnb: {name} '{value}' unknown; use one of {', '.join(allowed)}")
        if self.objective == "energy" and self.var_order != "input":
            raise SolverError(
                f"bnb: the energy objective is searched in input order; drop --var-order "
                f"{self.var_order} (or use --solver cpsat or fs)"
            )

    def run(self) -> SolverResult:
        """Search; proved optimal unless a node or time limit stopped it."""
        try:
            if self.var_order == "input":
                self._prefix_search()
            else:
                self._generic_search()
        except _Stop:
            self.stopped = True
        search = tuple(tuple(row) for row in self.visits)
        gap = self.gap() if self.stopped else None
        return SolverResult(
            self.inc.assignment, self.nodes, optimal=not self.stopped, gap=gap, search=search
        )

    def gap(self) -> float | None:
        """Relative gap ``(value - root bound) / value`` of the incumbent (None without one).

        Root bound: latency ``min_i (L_0i + h[0][i])`` (the flash-free cost-to-go, so a lower
        bound); throughput the balance bound with nothing assigned (all MACs still to place).
        """
        if self.inc.assignment is None or self.inc.value <= 0:
            return None
        p = self.p
        if self.objective == "latency":
            h = self.h if self.h is not None else cost_to_go(p)
            lower = min(p.t_list[0][i] + h[0][i] for i in range(p.d) if self.allowed[0][i])
        elif self.objective == "energy":
            assert self.g is not None and p.e_list is not None
            lower = min(p.e_list[0][i] + self.g[0][i] for i in range(p.d) if self.allowed[0][i])
        else:
            lower = balance_bound([0.0] * p.d, self.rates, float(sum(self.macs)))
        return max(0.0, (self.inc.value - lower) / self.inc.value)

    # --- shared helpers ---

    def _tick(self) -> None:
        self.nodes += 1
        if self.node_limit and self.nodes > self.node_limit:
            raise _Stop
        if self.nodes % CHECK_NODES == 0:
            if (self.deadline is not None and time.perf_counter() > self.deadline) or (
                self.stop is not None and self.stop.is_set()  # type: ignore[attr-defined]
            ):
                raise _Stop
            if self.on_progress is not None:
                self._report()

    def _report(self) -> None:
        """A progress line at most every :data:`REPORT_S` seconds."""
        now = time.perf_counter()
        if now - self.last_report < REPORT_S:
            return
        self.last_report = now
        line = f"bnb: {self.nodes:,} nodes"
        if self.inc.assignment is not None:
            gap = self.gap()
            line += f", best {self.inc.value:.6g} s" + ("" if gap is None else f", gap {gap:.1%}")
        self.on_progress(line)  # type: ignore[operator]

    def _values(self, j: int) -> list[int]:
        """Devices layer ``j`` may take now, in value order."""
        t = self.p.t_list[j]
        legal = [i for i in range(self.p.d) if self.allowed[j][i] and self.flash[j] <= self.rem[i]]
        if self.val_order == "fastest" and self.objective == "energy":
            e = self.p.e_list[j]  # type: ignore[index]
            legal.sort(key=lambda i: (e[i], i))
        elif self.val_order == "fastest":
            legal.sort(key=lambda i: (t[i], i))
        elif self.val_order == "free_flash":
            legal.sort(key=lambda i: (-self.rem[i], i))
        elif self.val_order == "lcv":
            legal.sort(key=lambda i: (self._loss(j, i), t[i], i))
        return legal

    def _loss(self, j: int, i: int) -> int:
        """Unassigned layers that fit device ``i`` now but not after ``j`` takes its flash."""
        rem, after = self.rem[i], self.rem[i] - self.flash[j]
        return sum(
            1
            for k in range(self.p.n)
            if self.a[k] < 0 and k != j and self.allowed[k][i] and after < self.flash[k] <= rem
        )

    def _prune(self, bound: float) -> bool:
        """Cut when even the lower bound loses to the incumbent beyond the tie tolerance."""
        return self.inc.assignment is not None and bound > self.inc.value * (1 + TOL)

    def _leaf(self) -> None:
        self.inc.offer(value_of(self.p, self.a, self.objective), self.a)

    # --- prefix order (var_order = "input") ---

    def _prefix_search(self) -> None:
        d = self.p.d
        self.compute = [0.0] * d
        self.qx = [0.0] * d  # S_i + R'_i so far
        self.used = [0] * d  # layers on device i so far
        self.flash_left = sum(self.flash)
        self.macs_left = float(sum(self.macs))
        if self.objective == "throughput":
            self.q = [0.0] * d  # Q_i = L_i + S_i + R'_i of the prefix
            self.rq = 0.0  # sum_i s_i Q_i
            self.finite_rates = all(r < float("inf") for r in self.rates)
            self.rate_sum = sum(self.rates)
            if self.flash_left <= sum(self.rem):
                self._prefix_throughput(0, 0)
        elif self.objective == "energy":
            self._prefix_energy(0, 0.0, 0.0, 0)
        else:
            self._prefix(0, 0.0, 0)

    def _prefix_energy(self, j: int, energy: float, latency: float, nsub: int) -> None:
        """Prefix search for the energy objective (module docstring of the problem's energy
        tables): bound = energy of the prefix + :func:`energy_cost_to_go`; a branch is also cut
        when its latency (prefix + flash-free cost-to-go) or its ``max_i Q_i`` (never
        decreasing with the prefix, a lower bound of ``W``) exceeds the problem's bound."""
        p = self.p
        if j == p.n:
            if meets_bounds(p, self.a):
                self._leaf()
            return
        e, ce, t, comm = p.e_list, p.ce_list, p.t_list, p.comm_list
        assert e is not None and ce is not None and self.g is not None
        prev = self.a[j - 1] if j > 0 else -1
        for i in self._values(j):
            self._tick()
            self.visits[j][i] += 1
            change = prev >= 0 and prev != i
            step_e = e[j][i] + (ce[j - 1][prev] if change else 0.0)
            step_l = t[j][i] + (comm[j - 1] if change else 0.0)
            k = nsub + (1 if change or j == 0 else 0)
            self._assign_prefix(j, i, prev, change)
            bound = energy + step_e + self.g[j][i]
            if (
                self.flash_left <= sum(self.rem)
                and self._within_bounds(j, i, latency + step_l)
                and not self._prune(bound)
                and not self._hopeless(bound, j, k)
            ):
                self._prefix_energy(j + 1, energy + step_e, latency + step_l, k)
            self._unassign_prefix(j, i, prev, change)

    def _within_bounds(self, j: int, i: int, latency: float) -> bool:
        """Whether some completion of the prefix (layer ``j`` on ``i``, its latency so far
        ``latency``) may still meet the latency and waiting-time bounds."""
        p = self.p
        if math.isfinite(p.max_latency_s):
            assert self.h is not None
            if latency + self.h[j][i] > p.max_latency_s * (1 + TOL):
                return False
        if math.isfinite(p.max_waiting_s):
            top = max(c + x for c, x in zip(self.compute, self.qx, strict=True))
            if top > p.max_waiting_s * (1 + TOL):
                return False
        return True

    def _prefix_bound(self, j: int, cost: float, i: int) -> float:
        if self.objective == "latency":
            if self.h is not None:
                return cost + self.h[j][i]
            return cost + self.min_rest[j + 1]
        q = [c + x for c, x in zip(self.compute, self.qx, strict=True)]
        top = max(q)
        # the water level exceeds max(q) only if filling every device up to max(q) cannot absorb
        # the remaining MACs; otherwise skip the water filling (same bound, cheaper)
        if sum(r * (top - qk) for r, qk in zip(self.rates, q, strict=True)) >= self.macs_left:
            return top
        return max(top, balance_bound(q, self.rates, self.macs_left))

    def _hopeless(self, bound: float, j: int, nsub: int) -> bool:
        """True when a prefix ``a[:j+1]`` with lower bound ``bound`` cannot beat the incumbent:
        the bound reaches its value (within TOL) and no completion wins the tie
        (:meth:`_tie_hopeless`)."""
        inc = self.inc
        return (
            inc.assignment is not None
            and bound >= inc.value * (1 - TOL)
            and self._tie_hopeless(j, nsub)
        )

    def _tie_hopeless(self, j: int, nsub: int) -> bool:
        """True when no completion of ``a[:j+1]`` can win a tie against the incumbent."""
        best = self.inc.assignment
        assert best is not None
        if nsub > self.inc.nsub:
            return True
        if nsub < self.inc.nsub:
            return False
        prefix, ref = self.a[: j + 1], list(best[: j + 1])
        return prefix > ref

    def _prefix(self, j: int, cost: float, nsub: int) -> None:
        n, t, comm = self.p.n, self.p.t_list, self.p.comm_list
        if j == n:
            self._leaf()
            return
        prev = self.a[j - 1] if j > 0 else -1
        for i in self._values(j):
            self._tick()
            self.visits[j][i] += 1
            change = prev >= 0 and prev != i
            step = t[j][i] + (comm[j - 1] if change else 0.0)
            k = nsub + (1 if change or j == 0 else 0)
            self._assign_prefix(j, i, prev, change)
            bound = self._prefix_bound(j, cost + step, i)
            if (
                self.flash_left <= sum(self.rem)
                and not self._prune(bound)
                and not self._hopeless(bound, j, k)
            ):
                self._prefix(j + 1, cost + step, k)
            self._unassign_prefix(j, i, prev, change)

    def _prefix_throughput(self, j: int, nsub: int) -> None:
        """:meth:`_prefix` for throughput, the hot loop of the exact polish of CP-SAT answers.

        The same nodes, bound and cuts as the generic loop, with the work of a node cut down:
        ``Q_i = L_i + S_i + R'_i`` and ``sum_i s_i Q_i`` are kept up to date (not rebuilt), the
        water filling runs only when ``sum_i s_i (max Q - Q_i) < MAC_rest`` (otherwise its level
        is at most ``max Q``), and the flash test ``flash_left <= sum(rem)`` is left out since
        both sides drop by ``FLASH_j`` at every assignment (constraint (1), checked before any
        search). A rounding drift of the running sums can only lower the bound: still admissible.
        """
        p = self.p
        if j == p.n:
            self._leaf()
            return
        a, q, used, rem, rates, inc = self.a, self.q, self.used, self.rem, self.rates, self.inc
        prev = a[j - 1] if j > 0 else -1
        t_j = p.t_list[j]
        comm = p.comm_list[j - 1] if j > 0 else 0.0
        fj, mj = self.flash[j], self.macs[j]
        if self.val_order == "index":
            ok = self.allowed[j]
            values = [i for i in range(len(rem)) if ok[i] and fj <= rem[i]]
        else:
            values = self._values(j)
        visits = self.visits[j]
        for i in values:
            self._tick()
            visits[i] += 1
            change = prev >= 0 and prev != i
            k = nsub + (1 if change or j == 0 else 0)
            a[j] = i
            rem[i] -= fj
            self.macs_left -= mj
            step_i = t_j[i] + (comm if change and used[i] else 0.0)
            q[i] += step_i
            self.rq += rates[i] * step_i
            if change:
                q[prev] += comm
                self.rq += rates[prev] * comm
            used[i] += 1
            bound = max(q)
            left = self.macs_left
            if self.finite_rates and bound * self.rate_sum - self.rq < left:
                bound = max(bound, balance_bound(q, rates, left))
            if not (inc.assignment is not None and bound > inc.value * (1 + TOL)):
                # _prune and _hopeless written out: this hot loop calls no method for them
                hopeless = (
                    inc.assignment is not None
                    and bound >= inc.value * (1 - TOL)
                    and self._tie_hopeless(j, k)
                )
                if not hopeless:
                    self._prefix_throughput(j + 1, k)
            used[i] -= 1
            if change:
                q[prev] -= comm
                self.rq -= rates[prev] * comm
            q[i] -= step_i
            self.rq -= rates[i] * step_i
            self.macs_left += mj
            rem[i] += fj
            a[j] = -1

    def _assign_prefix(self, j: int, i: int, prev: int, change: bool) -> None:
        self.a[j] = i
        self.rem[i] -= self.flash[j]
        self.flash_left -= self.flash[j]
        self.macs_left -= self.macs[j]
        self.compute[i] += self.p.t_list[j][i]
        if change:
            c = self.p.comm_list[j - 1]
            self.qx[prev] += c
            if self.used[i]:
                self.qx[i] += c
        self.used[i] += 1

    def _unassign_prefix(self, j: int, i: int, prev: int, change: bool) -> None:
        self.used[i] -= 1
        if change:
            c = self.p.comm_list[j - 1]
            self.qx[prev] -= c
            if self.used[i]:
                self.qx[i] -= c
        self.compute[i] -= self.p.t_list[j][i]
        self.macs_left += self.macs[j]
        self.flash_left += self.flash[j]
        self.rem[i] += self.flash[j]
        self.a[j] = -1

    # --- any variable order ---

    def _generic_search(self) -> None:
        self.static = sorted(range(self.p.n), key=lambda j: (-self.flash[j], j))
        self._generic(0)

    def _select(self) -> int:
        free = [j for j in range(self.p.n) if self.a[j] < 0]
        if self.var_order == "flash":
            return next(j for j in self.static if self.a[j] < 0)
        deg: Callable[[int], int] = lambda j: sum(  # noqa: E731
            1 for k in (j - 1, j + 1) if 0 <= k < self.p.n and self.a[k] < 0
        )
        if self.var_order == "degree":
            return min(free, key=lambda j: (-deg(j), -self.flash[j], j))
        legal = lambda j: sum(  # noqa: E731
            1 for i in range(self.p.d) if self.allowed[j][i] and self.flash[j] <= self.rem[i]
        )
        return min(free, key=lambda j: (legal(j), -deg(j), j))

    def _generic_bound(self) -> float:
        n, d, t, comm, a = self.p.n, self.p.d, self.p.t_list, self.p.comm_list, self.a
        compute, sends = [0.0] * d, [0.0] * d
        rest, macs_left = 0.0, 0.0
        for j in range(n):
            if a[j] < 0:
                rest += self.min_t[j]
                macs_left += self.macs[j]
                continue
            compute[a[j]] += t[j][a[j]]
            if j + 1 < n and a[j + 1] >= 0 and a[j + 1] != a[j]:
                sends[a[j]] += comm[j]
        if self.objective == "latency":
            return sum(compute) + sum(sends) + rest
        q = [compute[i] + sends[i] for i in range(d)]
        return max(max(q), balance_bound(q, self.rates, macs_left))

    def _generic(self, depth: int) -> None:
        if depth == self.p.n:
            self._leaf()
            return
        j = self._select()
        for i in self._values(j):
            self._tick()
            self.visits[j][i] += 1
            self.a[j] = i
            self.rem[i] -= self.flash[j]
            if self._alive() and not self._prune(self._generic_bound()):
                self._generic(depth + 1)
            self.rem[i] += self.flash[j]
            self.a[j] = -1

    def _alive(self) -> bool:
        """Forward check: every unassigned layer still fits some device, flash totals allow it."""
        left = 0
        for k in range(self.p.n):
            if self.a[k] >= 0:
                continue
            left += self.flash[k]
            if not any(
                self.allowed[k][i] and self.flash[k] <= self.rem[i] for i in range(self.p.d)
            ):
                return False
        return left <= sum(self.rem)


def solve_bnb(problem: Problem, objective: str, **options: object) -> SolverResult:
    """Branch and Bound; options ``var_order``, ``val_order``, ``bound``, ``node_limit``,
    ``time_limit`` (s), ``incumbent`` (a starting assignment), ``stop`` (a
    ``threading.Event``: the search ends, not proved, soon after it is set) and ``on_progress``
    (called with a line: nodes, best value, gap to the root bound)."""
    return BranchAndBound(problem, objective, **options).run()
