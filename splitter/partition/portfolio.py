"""The ``auto`` solver: a portfolio of the exact solvers, the first proof wins.

No single exact solver is fastest everywhere (``benchmarks/results/solvers.md``): ``bnb`` proves
most chains in well under a millisecond but needs minutes on a few throughput instances CP-SAT
proves in 0.1 s (MobileNet v1 0.30 over H743 + F446 + F401 + H723: bnb over 5 s, cpsat 0.08 s),
and ``dp`` is the only one that proves large latency instances. So ``auto`` runs:

1. a **probe**: ``bnb`` alone for at most :data:`PROBE_S` seconds (most instances end here,
   proved, at bnb's speed); chains over :data:`BNB_MAX_LAYERS` layers skip it and go to ``dp``
   (latency) or ``cpsat`` (throughput) directly;
2. otherwise, for throughput, a **race**: ``cpsat`` in a thread against ``bnb`` (warm-started
   from the probe's incumbent) in this one, the first to prove its answer stops the other (a
   ``threading.Event`` both poll; CP-SAT's search releases the GIL, so both make progress on
   two cores); for latency ``dp`` alone (CP-SAT and bnb never beat it on large latency
   instances, measured).

Hence ``auto``'s time is at most ``PROBE_S`` plus the winner's time under contention; the
benchmark (``benchmarks/solvers.py``) checks it stays within 2x the fastest exact solver.
"""

from __future__ import annotations

import threading
import time
from dataclasses import replace

from splitter.partition.base import SolverResult
from splitter.partition.bnb import solve_bnb
from splitter.partition.cpsat import build_cpsat, solve_cpsat
from splitter.partition.dp import solve_dp
from splitter.partition.problem import Problem, better, count_runs, meets_bounds, value_of

#: seconds ``bnb`` runs alone before the race starts
PROBE_S = 0.01
#: the time limit ``auto`` uses when none is given (as dp and cpsat)
DEFAULT_TIME_LIMIT = 60.0
#: ``bnb`` recurses once per layer: beyond this many layers it is left out of the portfolio
#: (Python's recursion limit; such chains are dp's and CP-SAT's anyway)
BNB_MAX_LAYERS = 300
#: options only ``bnb`` takes
BNB_OPTIONS = ("var_order", "val_order", "bound", "node_limit", "on_progress")


def solve_auto(problem: Problem, objective: str, **options: object) -> tuple[str, SolverResult]:
    """Run the portfolio; the name of the solver whose answer is returned, and that answer."""
    limit = float(options.get("time_limit") or DEFAULT_TIME_LIMIT)  # type: ignore[arg-type]
    deadline = time.perf_counter() + limit
    bnb_opts = {k: v for k, v in options.items() if k in BNB_OPTIONS}
    if problem.n > BNB_MAX_LAYERS:
        report = {k: v for k, v in options.items() if k == "on_progress"}
        if objective == "latency":
            return "dp", solve_dp(problem, objective, time_limit=limit, **report)
        return "cpsat", solve_cpsat(problem, objective, time_limit=limit, **report)
    probe = solve_bnb(problem, objective, time_limit=min(PROBE_S, limit), **bnb_opts)
    if probe.optimal:
        return "bnb", probe
    left = max(deadline - time.perf_counter(), 1e-3)
    start: dict[str, object] = {} if probe.assignment is None else {"incumbent": probe.assignment}
    if objective == "latency":
        # not warm-started: the probe's incumbent changes dp's deepening targets and measured
        # slower (n = 50, d = 4: 6541 nodes against 4493)
        result = solve_dp(
            problem, objective, time_limit=left, on_progress=options.get("on_progress")
        )
        return "dp", _with_nodes(result, probe.nodes)
    name, result = race(problem, objective, left, start, bnb_opts)
    return name, _with_nodes(result, probe.nodes)


def race(
    problem: Problem,
    objective: str,
    time_limit: float,
    start: dict[str, object],
    bnb_opts: dict[str, object],
) -> tuple[str, SolverResult]:
    """``cpsat`` (in a thread) against ``bnb`` (here); the first proof wins and stops the other.

    When neither proves within ``time_limit``, the better answer (SPEC.md tie rule) is returned
    with the gap of :func:`_better_of`.
    """
    stop_bnb, stop_cpsat = threading.Event(), threading.Event()
    box: dict[str, SolverResult | BaseException] = {}
    # built here, before bnb starts: building is Python and would share the GIL with bnb; the
    # search itself runs in C++ without it
    model = build_cpsat(problem, objective)

    def run_cpsat() -> None:
        try:
            box["cpsat"] = solve_cpsat(
                problem, objective, time_limit=time_limit, stop=stop_cpsat, model=model,
                on_progress=bnb_opts.get("on_progress"),
            )  # fmt: skip
        except BaseException as exc:  # re-raised in the caller's thread
            box["cpsat"] = exc
        finally:
            res = box.get("cpsat")
            if isinstance(res, SolverResult) and res.optimal:
                stop_bnb.set()

    thread = threading.Thread(target=run_cpsat, name="splitter-cpsat", daemon=True)
    thread.start()
    try:
        bnb = solve_bnb(
            problem, objective, time_limit=time_limit, stop=stop_bnb, **start, **bnb_opts
        )
    finally:
        if not stop_bnb.is_set():
            stop_cpsat.set()  # bnb finished first (or failed): CP-SAT is no longer needed
        thread.join()
    cp = box["cpsat"]
    if isinstance(cp, BaseException):
        raise cp
    if bnb.optimal:
        return "bnb", bnb
    if cp.optimal:
        return "cpsat", cp
    return _better_of(problem, objective, bnb, cp)


def _better_of(
    problem: Problem, objective: str, bnb: SolverResult, cp: SolverResult
) -> tuple[str, SolverResult]:
    """Neither proved: the better assignment (SPEC.md tie rule) and a conservative gap.

    For bnb's answer ``v_b`` both bounds apply: its own root bound (``bnb.gap``) and CP-SAT's,
    whose gap ``(v_c - LB) / v_c`` is at least ``(v_b - LB) / v_b`` when ``v_b <= v_c``; the
    smaller of the two is therefore still an upper bound on the gap to the best bound known.
    """
    gaps = [g for g in (bnb.gap, cp.gap) if g is not None]
    bnb_gap = min(gaps) if gaps else None
    if cp.assignment is None or (
        objective == "energy" and not meets_bounds(problem, cp.assignment)
    ):  # CP-SAT's bounds are relaxed by the rounding: its answer may miss them
        return "bnb", replace(bnb, gap=bnb_gap)
    if bnb.assignment is None:
        return "cpsat", cp
    vb, vc = (value_of(problem, a, objective) for a in (bnb.assignment, cp.assignment))
    if better(vb, count_runs(bnb.assignment), bnb.assignment, vc, count_runs(cp.assignment),
              cp.assignment):  # fmt: skip
        return "bnb", replace(bnb, gap=bnb_gap)
    return "cpsat", cp


def _with_nodes(result: SolverResult, extra: int) -> SolverResult:
    """``result`` with the probe's nodes counted too."""
    return replace(result, nodes=result.nodes + extra)
