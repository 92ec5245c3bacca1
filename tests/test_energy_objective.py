"""The energy objective (issue 26): every exact solver agrees with Full Search on small random
instances, with and without a latency or waiting-time bound, and the energy figures agree."""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_partition_property import instances

from splitter.errors import BoardFileError, InfeasibleError, SolverError
from splitter.ir import Boards, Device, LayerCost, LinkSpec, Part
from splitter.partition import make_problem, solve, verify
from splitter.partition.problem import (
    Problem,
    close,
    energy_tables,
    energy_value,
    evaluate,
    value_of,
)


def _with_powers(problem: Problem, run_w: list[float], wait_w: list[float]) -> Problem:
    """``problem`` with the given per-device powers (the catalog parts' come from energy.toml;
    the random instances' parts are made up)."""
    e, ce = energy_tables(problem.t, problem.comm, run_w, wait_w)
    return replace(problem, run_w=tuple(run_w), wait_w=tuple(wait_w), e_list=e, ce_list=ce)


def _outcome(problem: Problem, solver: str, **options: object):
    """(energy, sub-models, plan), or None when no plan meets the constraints and bounds."""
    try:
        plan = solve(problem, "energy", solver, **options)
    except InfeasibleError:
        return None
    verify(plan, problem)
    subs = [(s.device_index, s.first, s.last) for s in plan.submodels]
    return plan.energy_j, subs, plan


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(), data=st.data())
def test_energy_solvers_agree_with_full_search(inst, data) -> None:
    costs, boards = inst
    d = len(boards.devices)
    run_w = [data.draw(st.floats(0.005, 0.6)) for _ in range(d)]
    wait_w = [r * data.draw(st.floats(0.05, 0.9)) for r in run_w]
    problem = _with_powers(make_problem(costs, boards), run_w, wait_w)
    bound = data.draw(st.sampled_from(["none", "latency", "waiting"]))
    options: dict[str, object] = {}
    if bound != "none":
        try:
            fastest = solve(problem, "latency" if bound == "latency" else "throughput", "fs")
        except InfeasibleError:
            return
        best = fastest.latency_s if bound == "latency" else 1 / fastest.throughput_per_s
        key = "max_latency_s" if bound == "latency" else "max_waiting_s"
        options[key] = best * data.draw(st.sampled_from([0.9, 1.0, 1.05, 1.5]))
    ref = _outcome(problem, "fs", **options)
    for solver, extra in (("bnb", {}), ("cpsat", {"workers": 1, "time_limit": 5.0}), ("auto", {})):
        got = _outcome(problem, solver, **options, **extra)
        assert (got is None) == (ref is None), (solver, bound)
        if ref is None:
            continue
        assert close(got[0], ref[0]), (solver, got[0], ref[0])
        assert got[1] == ref[1], solver
        assert got[2].optimal


def test_energy_value_equals_the_breakdown() -> None:
    """Under the payload-only link model the solvers' energy equals the per-board breakdown:
    ``sum_i P_i (L_i + S_i) + p_i (I - L_i - S_i)``, worked by hand for two boards."""
    part = Part("P", 64, 64, 80.0, 9.0, "F4")
    devs = (Device("a", part, 65536, 65536, 80e6, 9.0), Device("b", part, 65536, 65536, 40e6, 9.0))
    costs = [LayerCost(flash=10, ram=10, macs=8000, out_bytes=100)] * 2
    problem = _with_powers(
        make_problem(costs, Boards(devs, LinkSpec(baud=8000))), [1.0, 0.5], [0.2, 0.1]
    )
    # layer times 8000 * 9 / 80e6 = 0.0009 s on a, 0.0018 s on b; 100 B * 10 / 8000 = 0.125 s
    a = (0, 1)
    latency = 0.0009 + 0.125 + 0.0018
    hand = 1.0 * (0.0009 + 0.125) + 0.2 * (latency - 0.0009 - 0.125)
    hand += 0.5 * 0.0018 + 0.1 * (latency - 0.0018)
    ev = evaluate(problem, a)
    assert ev.energy_j == pytest.approx(hand, rel=1e-12)
    assert energy_value(problem, a) == pytest.approx(hand, rel=1e-12)
    assert value_of(problem, a, "energy") == pytest.approx(hand, rel=1e-12)
    assert [sum(row) for row in ev.energy_by_device] == pytest.approx(
        [1.0 * (0.0009 + 0.125) + 0.2 * 0.0018, 0.5 * 0.0018 + 0.1 * (0.0009 + 0.125)]
    )


def test_energy_objective_refuses_a_part_without_energy_data() -> None:
    part = Part("STM32X999ZZ", 64, 64, 80.0, 9.0, "F4")
    boards = Boards((Device("a", part, 65536, 65536, 80e6, 9.0),), LinkSpec())
    problem = make_problem([LayerCost(flash=10, ram=10, macs=10, out_bytes=4)], boards)
    with pytest.raises(
        BoardFileError, match=r"STM32X999ZZ has no energy data.*\[energy\.STM32X999ZZ\]"
    ):
        solve(problem, "energy")
    assert solve(problem, "latency").energy_j is None  # other objectives plan without it


def test_bounds_belong_to_the_energy_objective_and_unreachable_ones_say_the_best() -> None:
    part = Part("P", 64, 64, 80.0, 9.0, "F4")
    boards = Boards((Device("a", part, 65536, 65536, 80e6, 9.0),), LinkSpec())
    problem = make_problem([LayerCost(flash=10, ram=10, macs=80_000, out_bytes=4)], boards)
    with pytest.raises(SolverError, match="--objective energy only"):
        solve(problem, "latency", max_latency_s=1.0)
    problem = _with_powers(problem, [0.1], [0.01])
    # 80000 MACs * 9 cycles / 80 MHz = 9 ms: a 1 ms bound cannot be met
    with pytest.raises(
        InfeasibleError, match=r"latency at most 0.001 s asked, every plan takes at least 0.009 s"
    ):
        solve(problem, "energy", max_latency_s=0.001)
