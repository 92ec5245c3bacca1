"""The partition engine: solvers behind one interface (``solve``) and a ``SOLVERS`` table.

``solve(problem, objective, solver)`` checks the global constraints (1)-(3) first, runs the
solver, turns its answer into a :class:`~splitter.ir.Plan` and re-checks that plan against the
problem with :func:`verify`, trusting nothing the solver computed.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from splitter.errors import InfeasibleError, SolverError
from splitter.ir import Plan, SubModel
from splitter.partition.base import SolverResult
from splitter.partition.bnb import solve_bnb
from splitter.partition.constraints import check_global, explain_infeasible
from splitter.partition.cpsat import solve_cpsat
from splitter.partition.dp import solve_dp
from splitter.partition.ds import solve_ds
from splitter.partition.fs import FS_LIMIT, solve_fs
from splitter.partition.portfolio import solve_auto
from splitter.partition.problem import (
    OBJECTIVES,
    Evaluation,
    Problem,
    bounded,
    close,
    evaluate,
    make_problem,
    meets_bounds,
    runs,
    value_of,
    with_bounds,
)

SolverFn = Callable[..., SolverResult]

#: solver name -> (function, objectives it supports, exact?)
SOLVERS: dict[str, tuple[SolverFn, tuple[str, ...], bool]] = {
    "fs": (solve_fs, OBJECTIVES, True),
    "ds": (solve_ds, OBJECTIVES, False),
    "bnb": (solve_bnb, OBJECTIVES, True),
    "dp": (solve_dp, ("latency",), True),
    "cpsat": (solve_cpsat, OBJECTIVES, True),
}
SOLVER_NAMES = ("auto", *SOLVERS)
#: seconds the latency tie-break polish of a CP-SAT answer may take (dp warm-started from the
#: optimal incumbent; past it the answer is returned not proved in the SPEC.md sense). CP-SAT
#: answers latency only when dp has not ended within its head start in the ``auto`` race, on
#: instances where the polish can stall too: four identical 84 KiB F405s
#: (``models/boards/split_ad4.toml``) took it 17 s per solve, 120 s for one ``plan``
POLISH_DP_S = 3.0

__all__ = [
    "SOLVERS",
    "SOLVER_NAMES",
    "Evaluation",
    "Problem",
    "evaluate",
    "make_problem",
    "solve",
    "verify",
]


def solve(
    problem: Problem, objective: str = "latency", solver: str = "auto", **options: object
) -> Plan:
    """Solve ``problem`` for ``objective`` ("latency" | "throughput" | "energy") with ``solver``.

    ``energy`` minimises the energy of one inference (:func:`~splitter.partition.problem.
    energy_tables`) under the optional bounds ``max_latency_s`` (latency ``I``) and
    ``max_waiting_s`` (waiting time ``W = 1 / throughput``) given as options.

    ``auto`` is the portfolio of :mod:`splitter.partition.portfolio` (a bnb probe, then a race of
    the exact solvers); the plan names the solver whose answer it is.

    Raises :class:`InfeasibleError` (with the failing constraint, numbers and fix) when no
    assignment is feasible, :class:`SolverError` when the solver cannot handle the instance.
    """
    if objective not in OBJECTIVES:
        raise SolverError(f"objective '{objective}' unknown; use latency, throughput or energy")
    if solver != "auto" and solver not in SOLVERS:
        raise SolverError(f"solver '{solver}' unknown; use one of {', '.join(SOLVER_NAMES)}")
    if solver != "auto" and objective not in SOLVERS[solver][1]:
        raise SolverError(f"solver {solver} does not solve {objective}; use bnb, cpsat or fs")
    problem, options = _energy_problem(problem, objective, options)
    check_global(problem)
    start = time.perf_counter()
    if solver == "auto":
        name, result = solve_auto(problem, objective, **options)
    else:
        if solver in ("fs", "ds"):  # no progress to report: bounded by a candidate count
            options = {k: v for k, v in options.items() if k != "on_progress"}
        name, result = solver, SOLVERS[solver][0](problem, objective, **options)
    if name == "cpsat" and result.assignment is not None and result.optimal:
        result = _tie_break(problem, objective, result)
    elapsed = time.perf_counter() - start
    if result.assignment is None:
        if result.optimal and bounded(problem):
            raise InfeasibleError(_bound_message(problem))
        if result.optimal:
            raise InfeasibleError(explain_infeasible(problem))
        raise SolverError(
            f"solver {name} found no feasible assignment (not a proof of infeasibility); "
            "use an exact solver: dp, bnb or cpsat"
        )
    plan = make_plan(problem, objective, name, result, elapsed)
    verify(plan, problem)
    return plan


def _energy_problem(
    problem: Problem, objective: str, options: dict[str, object]
) -> tuple[Problem, dict[str, object]]:
    """Take the options ``max_latency_s`` / ``max_waiting_s`` (bounds of the energy objective)
    into the problem; refuse the energy objective when a device has no energy data, and the
    bounds with any other objective."""
    caps = {k: options[k] for k in ("max_latency_s", "max_waiting_s") if options.get(k) is not None}
    rest = {k: v for k, v in options.items() if k not in ("max_latency_s", "max_waiting_s")}
    if objective != "energy":
        if caps:
            raise SolverError(
                "a latency or throughput bound applies to --objective energy only; drop it"
            )
        return problem, rest
    if not problem.run_w:
        from splitter.hardware.energy import energy_of, missing_energy

        energy_of(missing_energy(problem.boards.devices)[0])  # raises naming the part
    cap = caps.get("max_latency_s")
    if cap is not None:  # the bound is on the reported latency, which counts the host's I/O
        cap = float(cap) - host_constant(problem)  # type: ignore[arg-type]
    return with_bounds(problem, cap, caps.get("max_waiting_s")), rest  # type: ignore[arg-type]


def host_constant(problem: Problem) -> float:
    """Seconds of the host's input and output transfers (without TIMING records) that the
    reported latency counts and the solvers' latency leaves out; 0 without ``host_io``."""
    if not problem.link_model.host_io:
        return 0.0
    link, model = problem.host_link, problem.link_model
    inp = problem.transfer(model.input_bytes, 0).seconds(link)
    return inp + problem.transfer(model.output_bytes, 0).seconds(link)


def _bound_message(problem: Problem) -> str:
    """Why no assignment meets the energy objective's bounds: the best reachable figure."""
    where = problem.boards.source_path or "boards"
    free = with_bounds(problem)
    parts = []
    for objective, cap, what in (
        ("latency", problem.max_latency_s, "latency"),
        ("throughput", problem.max_waiting_s, "waiting time (1 / throughput)"),
    ):
        if cap != float("inf"):
            best = solve(free, objective, "auto", time_limit=10.0)
            # the solvers' optimum (no TIMING records) is a lower bound of every plan's figure
            value = value_of(free, best.assignment, objective)
            extra = host_constant(problem) if objective == "latency" else 0.0
            value, asked = value + extra, cap + extra
            claim = "every plan takes at least" if best.optimal else "the best plan found takes"
            parts.append(f"{what} at most {asked:.6g} s asked, {claim} {value:.6g} s")
    return f"{where}: no plan meets the bound: {'; '.join(parts)}; relax the bound or add boards"


def _tie_break(problem: Problem, objective: str, result: SolverResult) -> SolverResult:
    """Apply the SPEC.md tie rule to an optimal CP-SAT answer (warm-started exact search)."""
    assert result.assignment is not None
    if objective == "latency":
        polished = solve_dp(problem, objective, incumbent=result.assignment, time_limit=POLISH_DP_S)
    elif problem.d**problem.n <= FS_LIMIT // 8:
        polished = solve_fs(problem, objective)
    else:
        # the incumbent is optimal already: the whole tree under it is searched whatever the
        # value order, so use the cheapest one ("index": no sorting per node)
        polished = solve_bnb(
            problem, objective, incumbent=result.assignment, node_limit=2_000_000, val_order="index"
        )
    nodes = result.nodes + polished.nodes
    if polished.assignment is None or not polished.optimal:
        # CP-SAT proved optimality on integer-rounded times only: without the exact polish the
        # answer is not proved optimal in the SPEC.md sense
        return SolverResult(result.assignment, nodes, False, result.gap, polished.search)
    return SolverResult(polished.assignment, nodes, True, result.gap, polished.search)


def make_plan(
    problem: Problem, objective: str, solver: str, result: SolverResult, elapsed: float
) -> Plan:
    """The :class:`Plan` of a solver result, every figure recomputed by :func:`evaluate`."""
    assert result.assignment is not None
    ev = evaluate(problem, result.assignment)
    return Plan(
        objective=objective,
        solver=solver,
        optimal=result.optimal,
        nodes=result.nodes,
        solve_time_s=elapsed,
        assignment=ev.assignment,
        submodels=tuple(
            SubModel(index=k, device_index=dev, first=first, last=last)
            for k, (dev, first, last) in enumerate(ev.submodels)
        ),
        latency_s=ev.latency_s,
        throughput_per_s=ev.throughput_per_s,
        throughput_ref9_per_s=ev.throughput_ref9_per_s,
        gap=result.gap,
        energy_j=ev.energy_j,
        search=result.search,
    )


def verify(plan: Plan, problem: Problem) -> Evaluation:
    """Re-check ``plan`` against ``problem`` without trusting the solver; SolverError if wrong.

    Checks: one device per layer, sub-models = the maximal runs of the assignment, constraints
    (4)-(5) on every device, and the reported latency / throughputs equal a fresh evaluation.
    """
    if len(plan.assignment) != problem.n:
        raise SolverError(f"plan assigns {len(plan.assignment)} layers, the chain has {problem.n}")
    ev = evaluate(problem, plan.assignment)
    subs = tuple((s.device_index, s.first, s.last) for s in plan.submodels)
    if subs != tuple(runs(plan.assignment)) or any(
        s.index != k for k, s in enumerate(plan.submodels)
    ):
        raise SolverError(f"plan sub-models {subs} are not the runs of its assignment")
    if not ev.feasible:
        raise SolverError(f"plan violates constraints: {'; '.join(ev.violations)}")
    if plan.objective == "energy" and not meets_bounds(problem, plan.assignment):
        raise SolverError("plan misses the energy objective's latency or waiting-time bound")
    if (plan.energy_j is None) != (ev.energy_j is None) or (
        plan.energy_j is not None
        and ev.energy_j is not None
        and not (plan.energy_j == ev.energy_j or close(plan.energy_j, ev.energy_j))
    ):
        raise SolverError(f"plan reports energy {plan.energy_j} J, evaluation gives {ev.energy_j}")
    for label, got, want in (
        ("latency", plan.latency_s, ev.latency_s),
        ("throughput", plan.throughput_per_s, ev.throughput_per_s),
        ("reference-[9] throughput", plan.throughput_ref9_per_s, ev.throughput_ref9_per_s),
    ):
        if not (got == want or close(got, want)):
            raise SolverError(f"plan reports {label} {got}, evaluation gives {want}")
    return ev
