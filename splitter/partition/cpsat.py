"""OR-Tools CP-SAT model of the same problem, both objectives.

Variables: ``x[j][i]`` (layer ``j`` on device ``i``), exactly one per layer, fixed to 0 where the
layer alone does not fit; constraint (4) ``sum_j FLASH_j x[j][i] <= FLASH_i``; (5) by the fixing.
Times are integers in units of ``scale`` seconds (``scale`` chosen so the largest possible value
is about 1e7 units: CP-SAT stalls on much larger coefficients; rounding error per term is at most
half a unit, and the exact warm-started polish below removes its effect on the answer).

* latency: ``sum_ij L_ij x_ij + sum_j comm_j b_j`` with ``b_j = [layer j and j+1 differ]``;
* energy: ``sum_ij e_ij x_ij + sum_ij ce_ij s_ij`` (the problem's energy tables, ``s_ji`` as
  below), with the latency and waiting-time bounds as constraints when given;
* throughput: exact channelling of ``S_i`` (``x_ji and not x_{j+1,i}``), ``R'_i`` (``x_{j+1,i}``,
  not ``x_ji``, and device ``i`` used at some layer ``<= j``), ``L*_i`` (layers not on ``i``
  strictly between its first and last layer), ``Q_i = L_i + S_i + R'_i``, a one-hot bottleneck
  ``y_i`` (``Q_i`` maximal, strictly above devices of smaller index, as ``argmax``), and
  ``W >= Q_i + L*_i`` when ``y_i``; minimise ``W``.

The answer is re-evaluated in floating point, then ``splitter.partition.solve`` polishes it with an
exact search warm-started from it (dp for latency, fs or bnb for throughput), which removes the
integer rounding and applies the SPEC.md tie rule, so every exact solver returns the same plan.
"""

from __future__ import annotations

import math
import select
import signal
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from ortools.sat.python import cp_model

from splitter.partition.base import SolverResult
from splitter.partition.problem import Problem

UNITS = 1e7


def _scale(problem: Problem) -> float:
    worst = float(problem.t.max(axis=1).sum() + problem.comm.sum()) * 2
    return worst / UNITS if worst > 0 else 1.0


@dataclass(frozen=True)
class CpsatModel:
    """A built CP-SAT model and its ``x[j][i]`` variables."""

    model: cp_model.CpModel
    x: list[list[cp_model.IntVar]]


def build_cpsat(problem: Problem, objective: str) -> CpsatModel:
    """The CP-SAT model of ``problem`` for ``objective`` (see the module docstring)."""
    n, d = problem.n, problem.d
    scale = _scale(problem)
    ti = [[round(problem.t_list[j][i] / scale) for i in range(d)] for j in range(n)]
    ci = [round(c / scale) for c in problem.comm_list]
    m = cp_model.CpModel()
    x = [[m.new_bool_var(f"x{j}_{i}") for i in range(d)] for j in range(n)]
    for j in range(n):
        m.add_exactly_one(x[j])
        for i in range(d):
            if not problem.allowed[j, i]:
                m.add(x[j][i] == 0)
    for i in range(d):
        m.add(sum(int(problem.flash[j]) * x[j][i] for j in range(n)) <= int(problem.dev_flash[i]))
    if objective == "latency":
        _latency_objective(m, x, ti, ci)
    elif objective == "throughput":
        m.minimize(_waiting_var(m, x, ti, ci))
    else:
        _energy_objective(m, x, problem, ti, ci, scale)
    return CpsatModel(m, x)


def _energy_scale(problem: Problem) -> float:
    """Joules per integer unit of the energy objective (as :func:`_scale` for seconds)."""
    assert problem.e_list is not None and problem.ce_list is not None
    worst = sum(max(row) for row in problem.e_list) + sum(max(row) for row in problem.ce_list)
    return 2 * worst / UNITS if worst > 0 else 1.0


def _energy_objective(
    m: cp_model.CpModel, x: list, problem: Problem, ti: list, ci: list, scale: float
) -> None:
    """Minimise ``E = sum e[j][i] x_ji + sum ce[j][i] s_ji`` (the problem's energy tables),
    with ``I <= max_latency_s`` and ``W <= max_waiting_s`` when bounded. The bounds are
    relaxed by one unit per term (``n`` or ``2n`` units), so rounding never cuts a feasible
    assignment; the exact polish of ``splitter.partition.solve`` settles the answer."""
    n, d = len(x), len(x[0])
    assert problem.e_list is not None and problem.ce_list is not None
    unit = _energy_scale(problem)
    ei = [[round(problem.e_list[j][i] / unit) for i in range(d)] for j in range(n)]
    cei = [[round(problem.ce_list[j][i] / unit) for i in range(d)] for j in range(n)]
    s = _sends(m, x)
    if math.isfinite(problem.max_latency_s):
        latency = sum(ti[j][i] * x[j][i] for j in range(n) for i in range(d)) + sum(
            ci[j] * s[j][i] for j in range(n - 1) for i in range(d)
        )
        m.add(latency <= math.ceil(problem.max_latency_s / scale) + n)
    if math.isfinite(problem.max_waiting_s):
        w = _waiting_var(m, x, ti, ci, s)
        m.add(w <= math.ceil(problem.max_waiting_s / scale) + 2 * n)
    m.minimize(
        sum(ei[j][i] * x[j][i] for j in range(n) for i in range(d))
        + sum(cei[j][i] * s[j][i] for j in range(n - 1) for i in range(d))
    )


def solve_cpsat(problem: Problem, objective: str, **options: object) -> SolverResult:
    """Solve with CP-SAT; options ``time_limit`` (s, default 60), ``workers`` (default 2),
    ``stop`` (a ``threading.Event``: the search ends, not proved, soon after it is set),
    ``model`` (a :class:`CpsatModel` built beforehand by :func:`build_cpsat`) and
    ``on_progress`` (called with a line at each improving solution: best, bound, gap)."""
    n, d = problem.n, problem.d
    built = options.get("model")
    if not isinstance(built, CpsatModel):
        built = build_cpsat(problem, objective)
    m, x = built.model, built.x
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(options.get("time_limit", 60.0))  # type: ignore[arg-type]
    solver.parameters.num_workers = int(options.get("workers", 2))  # type: ignore[call-overload]
    report = options.get("on_progress")
    if objective == "energy":
        unit, label = _energy_scale(problem), "J"
    else:
        unit, label = _scale(problem), "s"
    callback = None if not callable(report) else _Reporter(report, unit, label)
    status = solve_stoppable(solver, m, options.get("stop"), callback)
    nodes = int(solver.num_branches)
    if status == cp_model.INFEASIBLE:
        return SolverResult(None, nodes, optimal=True)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return SolverResult(None, nodes, optimal=False)
    a = tuple(next(i for i in range(d) if solver.value(x[j][i])) for j in range(n))
    optimal = status == cp_model.OPTIMAL
    gap = None
    if not optimal:
        obj, bound = solver.objective_value, solver.best_objective_bound
        gap = (obj - bound) / obj if obj > 0 else 0.0
    return SolverResult(a, nodes, optimal=optimal, gap=gap)


class _Reporter(cp_model.CpSolverSolutionCallback):
    """Reports each improving solution: objective and bound in seconds, and the gap."""

    def __init__(self, report: Callable[[str], None], scale: float, unit: str = "s") -> None:
        super().__init__()
        self.report, self.scale, self.unit = report, scale, unit

    def on_solution_callback(self) -> None:
        best, bound = self.objective_value, self.best_objective_bound
        gap = (best - bound) / best if best > 0 else 0.0
        self.report(
            f"cpsat: best {best * self.scale:.6g} {self.unit}, "
            f"bound {bound * self.scale:.6g} {self.unit}, "
            f"gap {gap:.1%}"
        )


def solve_stoppable(
    solver: cp_model.CpSolver,
    m: cp_model.CpModel,
    stop: object = None,
    callback: cp_model.CpSolverSolutionCallback | None = None,
) -> object:
    """``solver.solve(m)``, ended early when ``stop`` (a ``threading.Event``) is set or on Ctrl-C.

    CP-SAT catches SIGINT itself by default and then ends the search as if its time limit had
    passed, so a Ctrl-C during a solve would quietly yield a plan. Its catching is turned off here;
    Python's own handler then runs only once ``solve`` returns, so a watcher thread reads Python's
    signal wake-up fd (possible in the main thread only) and calls ``stop_search``; the
    ``KeyboardInterrupt`` follows as soon as ``solve`` returns. In another thread (the portfolio
    race), the main thread is interrupted and sets ``stop``.
    """
    solver.parameters.catch_sigint_signal = False
    if isinstance(stop, threading.Event) and stop.is_set():
        return cp_model.UNKNOWN
    done = threading.Event()
    with _sigint_wakeup() as wake:

        def watch() -> None:
            while not done.is_set():
                if (wake is not None and _sigint_arrived(wake)) or (
                    isinstance(stop, threading.Event) and stop.wait(0 if wake else 0.005)
                ):
                    # repeated: a stop_search before the search has started is forgotten
                    while not done.wait(0.01):
                        solver.stop_search()
                    return
                if wake is None and stop is None:
                    return

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            return solver.solve(m, callback)
        finally:
            done.set()
            watcher.join()


@contextmanager
def _sigint_wakeup() -> Iterator[socket.socket | None]:
    """A socket that receives the number of every signal Python catches during the block
    (``signal.set_wakeup_fd``); ``None`` outside the main thread, where it cannot be set."""
    if threading.current_thread() is not threading.main_thread():
        yield None
        return
    r, w = socket.socketpair()
    r.setblocking(False)
    w.setblocking(False)
    previous = signal.set_wakeup_fd(w.fileno(), warn_on_full_buffer=False)
    try:
        yield r
    finally:
        signal.set_wakeup_fd(previous)
        r.close()
        w.close()


def _sigint_arrived(wake: socket.socket) -> bool:
    """Whether a SIGINT was written to ``wake`` (waits up to 5 ms for one)."""
    if not select.select([wake], [], [], 0.005)[0]:
        return False
    try:
        got = wake.recv(64)
        return signal.SIGINT in got or signal.SIGTERM in got
    except BlockingIOError:
        return False


def _sends(m: cp_model.CpModel, x: list[list[cp_model.IntVar]]) -> list[list[cp_model.IntVar]]:
    """``s[j][i] = x[j][i] and not x[j+1][i]``: device ``i`` sends layer ``j``'s output."""
    n, d = len(x), len(x[0])
    s = [[m.new_bool_var(f"s{j}_{i}") for i in range(d)] for j in range(n - 1)]
    for j in range(n - 1):
        for i in range(d):
            m.add_bool_and([x[j][i], x[j + 1][i].negated()]).only_enforce_if(s[j][i])
            m.add_bool_or([x[j][i].negated(), x[j + 1][i]]).only_enforce_if(s[j][i].negated())
    return s


def _latency_objective(m: cp_model.CpModel, x: list, ti: list, ci: list) -> None:
    """Minimise ``I = L + T`` (eq. 13)."""
    n, d = len(x), len(x[0])
    s = _sends(m, x)
    compute = sum(ti[j][i] * x[j][i] for j in range(n) for i in range(d))
    transfer = sum(ci[j] * s[j][i] for j in range(n - 1) for i in range(d))
    m.minimize(compute + transfer)


def _prefix_or(m: cp_model.CpModel, lits: list, name: str) -> list:
    """``out[k] = lits[0] or ... or lits[k]``."""
    out = [lits[0]]
    for k in range(1, len(lits)):
        v = m.new_bool_var(f"{name}{k}")
        m.add_max_equality(v, [out[-1], lits[k]])
        out.append(v)
    return out


def _waiting_var(
    m: cp_model.CpModel, x: list, ti: list, ci: list, s: list | None = None
) -> cp_model.IntVar:
    """The variable ``W`` of eq. 17 as SPEC.md reads it (channelled exactly)."""
    n, d = len(x), len(x[0])
    s = _sends(m, x) if s is None else s
    big = sum(max(row) for row in ti) + 2 * sum(ci) + 1
    q, w_terms = [], []
    for i in range(d):
        col = [x[j][i] for j in range(n)]
        before = _prefix_or(m, col, f"b{i}_")
        after = list(reversed(_prefix_or(m, col[::-1], f"a{i}_")))
        recv = []
        for j in range(n - 1):  # R'_i: layer j+1 on i received from j, i used at or before j
            r = m.new_bool_var(f"r{j}_{i}")
            m.add_bool_and([x[j + 1][i], x[j][i].negated(), before[j]]).only_enforce_if(r)
            m.add_bool_or([x[j + 1][i].negated(), x[j][i], before[j].negated()]).only_enforce_if(
                r.negated()
            )
            recv.append(r)
        inter = []
        for j in range(n):  # L*_i: layer j between i's first and last, on device k != i
            for k in range(d):
                if k == i:
                    continue
                z = m.new_bool_var(f"z{j}_{i}_{k}")
                m.add_bool_and([before[j], after[j], x[j][k]]).only_enforce_if(z)
                m.add_bool_or(
                    [before[j].negated(), after[j].negated(), x[j][k].negated()]
                ).only_enforce_if(z.negated())
                inter.append(ti[j][k] * z)
        qi = m.new_int_var(0, big, f"q{i}")
        m.add(
            qi
            == sum(ti[j][i] * x[j][i] for j in range(n))
            + sum(ci[j] * s[j][i] for j in range(n - 1))
            + sum(ci[j] * recv[j] for j in range(n - 1))
        )
        q.append(qi)
        w_terms.append(sum(inter))
    y = [m.new_bool_var(f"y{i}") for i in range(d)]
    m.add_exactly_one(y)
    w = m.new_int_var(0, 2 * big, "W")
    for i in range(d):
        for k in range(d):
            if k < i:
                m.add(q[i] >= q[k] + 1).only_enforce_if(y[i])
            elif k > i:
                m.add(q[i] >= q[k]).only_enforce_if(y[i])
        m.add(w >= q[i] + w_terms[i]).only_enforce_if(y[i])
    return w
