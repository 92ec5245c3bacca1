"""Solver conformance (one test over every solver), evaluation formulas, verify, limits."""

from __future__ import annotations

import dataclasses

import pytest
from partition_helpers import CASES, case_boards, thesis_costs

from splitter.errors import InfeasibleError, SolverError
from splitter.ir import Boards, Device, LayerCost, LinkSpec, Part
from splitter.partition import SOLVERS, evaluate, make_plan, make_problem, solve, verify
from splitter.partition.base import SolverResult
from splitter.partition.problem import better, layer_time

PART = Part("P", 64, 64, 1.0, 1.0, "F4")


def _boards(*flash: int, clock: tuple[float, ...] = (), bpb: int = 8, baud: int = 8) -> Boards:
    devs = tuple(
        Device(f"d{i}", PART, f, 1 << 20, clock[i] if clock else 1.0, 1.0)
        for i, f in enumerate(flash)
    )
    return Boards(devs, LinkSpec(baud=baud, bits_per_byte=bpb))


def test_equation_17_hand_computed() -> None:
    """A on d0, B on d1, C on d0 (thesis Figure 1): every term by hand.

    1 MAC = 1 s on each device (f = 1 Hz, CpM = 1); a byte costs 1 s (baud 8, 8 bits per byte).
    Layers: MAC 2, 3, 4 and OUT 1, 2, 5.  d0: L = 2 + 4 = 6, S = 1 (A's output), R' = 2 (B's
    output into its second sub-model), L* = 3 (B).  d1: L = 3, S = 2, R' = 0.
    Latency = 9 + 1 + 2 = 12; ib = d0 (9 > 5); W = 6 + 1 + 2 + 3 = 12; ref [9]: max(7, 5) = 7.
    """
    costs = [LayerCost(flash=1, ram=1, macs=m, out_bytes=o) for m, o in ((2, 1), (3, 2), (4, 5))]
    problem = make_problem(costs, _boards(100, 100))
    ev = evaluate(problem, (0, 1, 0))
    assert ev.compute == (6.0, 3.0) and ev.send == (1.0, 2.0) and ev.recv == (2.0, 0.0)
    assert ev.inter == (3.0, 0.0) and ev.bottleneck == 0
    assert ev.latency_s == 12.0 and ev.waiting_s == 12.0 and ev.ref9_waiting_s == 7.0
    assert ev.sub_compute == (2.0, 3.0, 4.0) and ev.sub_transfer == (1.0, 2.0, 0.0)
    assert ev.flash_used == (2, 1) and ev.feasible


def test_constraint_4_and_5_violations_are_reported() -> None:
    costs = [LayerCost(flash=60, ram=10, macs=1, out_bytes=1)] * 2
    problem = make_problem(costs, _boards(100, 100))
    ev = evaluate(problem, (0, 0))
    assert not ev.feasible and "exceeds by 20 B" in ev.violations[0]


def test_layer_time_per_class_cycles() -> None:
    """sum_c MAC_c * CpM_c / f, falling back to CpM for missing classes."""
    dev = Device("a", PART, 1, 1, 10.0, 3.0, cpm_by_class={"conv": 2.0})
    cost = LayerCost(macs=10, macs_by_class=(("conv", 6), ("dense", 4)))
    assert layer_time(cost, dev) == pytest.approx((6 * 2 + 4 * 3) / 10)
    assert layer_time(LayerCost(macs=10), dev) == pytest.approx(3.0)


def test_tie_rule() -> None:
    assert better(1.0, 3, (0, 1, 0), 1.0 + 1e-12, 1, (0, 0, 0)) is False
    assert better(1.0 + 1e-12, 1, (0, 0, 1), 1.0, 2, (0, 0, 0))
    assert better(1.0, 2, (0, 0, 1), 1.0, 2, (0, 1, 1))
    assert better(0.5, 9, (1, 1, 1), 1.0, 1, (0, 0, 0))


@pytest.mark.parametrize("solver", sorted(SOLVERS))
def test_solver_conformance(solver: str) -> None:
    """Every solver: a verified plan on kws_cnn, nodes counted, optimal flag as it claims."""
    case = next(c for c in CASES if c["model"] == "kws_cnn")
    problem = make_problem(thesis_costs("kws_cnn"), case_boards(case))
    _fn, objectives, exact = SOLVERS[solver]
    for objective in objectives:
        plan = solve(problem, objective, solver)
        verify(plan, problem)
        assert plan.solver == solver and plan.objective == objective
        assert plan.nodes > 0 and plan.solve_time_s >= 0
        assert plan.optimal is exact
        if exact and objective != "energy":  # energy: tests/test_energy_objective.py
            key = "latency_s" if objective == "latency" else "throughput_per_s"
            assert getattr(plan, key) == pytest.approx(case[key], rel=1e-6)
    if "throughput" not in objectives:
        with pytest.raises(SolverError, match="throughput"):
            solve(problem, "throughput", solver)


def test_verify_rejects_a_tampered_plan() -> None:
    case = next(c for c in CASES if c["model"] == "tiny_cnn")
    problem = make_problem(thesis_costs("tiny_cnn"), case_boards(case))
    plan = solve(problem, "latency", "dp")
    with pytest.raises(SolverError, match="latency"):
        verify(dataclasses.replace(plan, latency_s=plan.latency_s * 0.9), problem)
    with pytest.raises(SolverError, match="runs"):
        verify(dataclasses.replace(plan, submodels=plan.submodels[:1]), problem)
    bad = (0,) * problem.n  # 74.85 KiB of weights on a 58 KiB device
    with pytest.raises(SolverError, match=r"\(4\)"):
        verify(make_plan(problem, "latency", "x", SolverResult(bad, 1, True), 0.0), problem)


def test_full_search_refuses_large_instances() -> None:
    problem = make_problem([LayerCost(macs=1)] * 40, _boards(100, 100))
    with pytest.raises(SolverError, match=r"dp .*bnb or cpsat"):
        solve(problem, "latency", "fs")


def test_infeasible_packing_is_explained() -> None:
    """(1)-(3) hold but no packing exists: two 60-byte layers, two 100-byte devices, one fits only
    one layer by RAM."""
    costs = [LayerCost(flash=60, ram=10, macs=1, out_bytes=1)] * 3
    problem = make_problem(costs, _boards(100, 100))
    for solver in ("fs", "bnb", "dp", "cpsat"):
        with pytest.raises(InfeasibleError, match=r"do not pack into the devices"):
            solve(problem, "latency", solver)


def test_ds_finds_nothing_is_not_a_proof() -> None:
    costs = [LayerCost(flash=60, ram=10, macs=1, out_bytes=1)] * 3
    problem = make_problem(costs, _boards(100, 100))
    with pytest.raises(SolverError, match="not a proof"):
        solve(problem, "latency", "ds")


def test_dp_agrees_with_cpsat_on_a_longer_chain() -> None:
    """n = 60 layers, 3 devices, the fastest one's flash binding: dp and cpsat agree exactly."""
    import random

    rng = random.Random(7)
    costs = [
        LayerCost(
            flash=rng.randint(0, 400), ram=1, macs=rng.randint(1, 50), out_bytes=rng.randint(1, 9)
        )
        for _ in range(60)
    ]
    total = sum(c.flash for c in costs)
    boards = _boards(total // 2, total // 2, total, clock=(4, 2, 1), baud=8000)
    problem = make_problem(costs, boards)
    a = solve(problem, "latency", "dp")
    b = solve(problem, "latency", "cpsat", time_limit=30)
    assert a.optimal and b.optimal
    assert a.latency_s == pytest.approx(b.latency_s, rel=1e-9)
    assert a.assignment == b.assignment
