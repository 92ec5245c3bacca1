"""The ``auto`` solver: a portfolio of the exact solvers, the first proof wins.

No single exact solver is fastest everywhere (``benchmarks/results/solvers.md``): ``bnb`` proves
most chains in well under a millisecond but needs minutes on a few throughput instances CP-SAT
proves in 0.1 s (MobileNet v1 0.30 over H743 + F446 + F401 + H723: bnb over 5 s, cpsat 0.08 s),
and ``dp`` is the only one that proves large latency instances. So ``auto`` runs:

1. a **probe**: ``bnb`` alone for at most :data:`PROBE_S` seconds (most instances end here,
   proved, at bnb's speed); chains over :data:`BNB_MAX_LAYERS` layers skip it and go to ``dp``
   (latency) or ``cpsat`` (throughput) directly;
2. otherwise a **race**: ``cpsat`` in a thread against, in this one, ``bnb`` (throughput,
   warm-started from the probe's incumbent) or ``dp`` (latency: neither CP-SAT nor bnb beat it
   on the large latency instances of the benchmark), the first to prove its answer stops the
   other (a ``threading.Event`` both poll; CP-SAT's search releases the GIL, so both make
   progress on two cores). For latency, dp runs alone for :data:`DP_HEAD_START_S` first and
   CP-SAT then joins on one worker (two workers beside dp on two cores made dp 3x slower):
   on tight flash dp can fail to close its gap where CP-SAT proves in 0.1 s (MLPerf VWW int8
   over four F405s cut to 84 KiB, ``models/boards/split_ad4.toml``: dp over 60 s).

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
#: seconds ``dp`` runs alone on a latency instance before CP-SAT joins the race: most latency
#: instances dp proves within it (``benchmarks/results/solvers.md``), undisturbed
DP_HEAD_START_S = 1.0
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
        # dp not warm-started: the probe's incumbent changes its deepening targets and measured
        # slower (n = 50, d = 4: 6541 nodes against 4493)
        dp_opts = {k: v for k, v in options.items() if k == "on_progress"}
        name, result = race(problem, objective, left, {}, dp_opts, main="dp")
        return name, _with_nodes(result, probe.nodes)
    name, result = race(problem, objective, left, start, bnb_opts)
    return name, _with_nodes(result, probe.nodes)


def race(
    problem: Problem,
    objective: str,
    time_limit: float,
    start: dict[str, object],
    main_opts: dict[str, object],
    main: str = "bnb",
) -> tuple[str, SolverResult]:
    """``cpsat`` (in a thread) against ``main`` (``bnb`` or ``dp``, here); the first proof wins
    and stops the other.

    When neither proves within ``time_limit``, the better answer (SPEC.md tie rule) is returned
    with the gap of :func:`_better_of`.
    """
    stop_main, stop_cpsat = threading.Event(), threading.Event()
    box: dict[str, SolverResult | BaseException] = {}
    deadline = time.perf_counter() + time_limit
    latency = main == "dp"
    # bnb: built here, before bnb starts: building is Python and would share the GIL with bnb;
    # the search itself runs in C++ without it. dp: built in the thread, only once dp is slow
    model = None if latency else build_cpsat(problem, objective)

    def run_cpsat() -> None:
        try:
            box["cpsat"] = solve_cpsat(
                problem, objective, time_limit=max(deadline - time.perf_counter(), 1e-3),
                stop=stop_cpsat, model=model or build_cpsat(problem, objective),
                workers=1 if latency else 2, on_progress=main_opts.get("on_progress"),
            )  # fmt: skip
        except BaseException as exc:  # re-raised in the caller's thread
            box["cpsat"] = exc
        finally:
            res = box.get("cpsat")
            if isinstance(res, SolverResult) and res.optimal:
                stop_main.set()

    thread = threading.Thread(target=run_cpsat, name="splitter-cpsat", daemon=True)
    if latency:  # dp alone for its head start, then CP-SAT on one worker beside it
        extra: dict[str, object] = {"slow_after": DP_HEAD_START_S, "on_slow": thread.start}
        solver = solve_dp
    else:
        thread.start()
        extra, solver = {}, solve_bnb
    try:
        ours = solver(
            problem, objective, time_limit=time_limit, stop=stop_main, **start, **main_opts,
            **extra,
        )  # fmt: skip
    finally:
        if not stop_main.is_set():
            stop_cpsat.set()  # main finished first (or failed): CP-SAT is no longer needed
        if thread.ident is not None:
            thread.join()
    cp = box.get("cpsat")
    if isinstance(cp, BaseException):
        raise cp
    if ours.optimal or cp is None:
        return main, ours
    if cp.optimal:
        return "cpsat", cp
    return _better_of(problem, objective, ours, cp, main)


def _better_of(
    problem: Problem, objective: str, ours: SolverResult, cp: SolverResult, main: str
) -> tuple[str, SolverResult]:
    """Neither proved: the better assignment (SPEC.md tie rule) and a conservative gap.

    For ``main``'s answer ``v_b`` both bounds apply: its own (``ours.gap``) and CP-SAT's,
    whose gap ``(v_c - LB) / v_c`` is at least ``(v_b - LB) / v_b`` when ``v_b <= v_c``; the
    smaller of the two is therefore still an upper bound on the gap to the best bound known.
    """
    gaps = [g for g in (ours.gap, cp.gap) if g is not None]
    our_gap = min(gaps) if gaps else None
    if cp.assignment is None or (
        objective == "energy" and not meets_bounds(problem, cp.assignment)
    ):  # CP-SAT's bounds are relaxed by the rounding: its answer may miss them
        return main, replace(ours, gap=our_gap)
    if ours.assignment is None:
        return "cpsat", cp
    vb, vc = (value_of(problem, a, objective) for a in (ours.assignment, cp.assignment))
    if better(vb, count_runs(ours.assignment), ours.assignment, vc, count_runs(cp.assignment),
              cp.assignment):  # fmt: skip
        return main, replace(ours, gap=our_gap)
    return "cpsat", cp


def _with_nodes(result: SolverResult, extra: int) -> SolverResult:
    """``result`` with the probe's nodes counted too."""
    return replace(result, nodes=result.nodes + extra)
