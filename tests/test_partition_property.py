"""Property test: every exact solver agrees with Full Search on small random instances."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from splitter.errors import InfeasibleError, SolverError
from splitter.ir import Boards, Device, LayerCost, LinkSpec, Part
from splitter.partition import make_problem, solve, verify
from splitter.partition.bnb import VAL_ORDERS, VAR_ORDERS
from splitter.partition.problem import close, count_runs

HEURISTICS = list(itertools.product(VAR_ORDERS, VAL_ORDERS))


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[LayerCost], Boards]:
    n = draw(st.integers(1, 9))
    d = draw(st.integers(1, 3))
    costs = [
        LayerCost(
            flash=draw(st.integers(0, 60)) * 256,
            ram=draw(st.integers(1, 40)) * 256,
            macs=draw(st.integers(0, 200)) * 1000,
            out_bytes=draw(st.integers(1, 64)) * 16,
        )
        for _ in range(n)
    ]
    devices = []
    for i in range(d):
        flash = draw(st.integers(20, 260)) * 256
        ram = draw(st.integers(12, 48)) * 256
        part = Part(f"P{i}", flash / 1024, ram / 1024, 80.0, 9.0, "F4")
        devices.append(
            Device(
                name=f"d{i}",
                part=part,
                flash_bytes=flash,
                ram_bytes=ram,
                clock_hz=draw(st.sampled_from([16e6, 64e6, 80e6, 480e6])),
                cpm=draw(st.sampled_from([1.0, 6.0, 9.0, 307.0])),
            )
        )
    baud = draw(st.sampled_from([9600, 115200, 921600]))
    return costs, Boards(tuple(devices), LinkSpec(baud=baud, bits_per_byte=10))


def _outcome(problem, objective, solver, **options):
    """(value, submodels) of a plan, or None when infeasible."""
    try:
        plan = solve(problem, objective, solver, **options)
    except InfeasibleError:
        return None
    verify(plan, problem)
    value = plan.latency_s if objective == "latency" else 1 / plan.throughput_per_s
    return value, [(s.device_index, s.first, s.last) for s in plan.submodels], plan


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(), heuristic=st.sampled_from(HEURISTICS), data=st.data())
def test_exact_solvers_agree_with_full_search(inst, heuristic, data) -> None:
    costs, boards = inst
    problem = make_problem(costs, boards)
    for objective in ("latency", "throughput"):
        ref = _outcome(problem, objective, "fs")
        runs = [("bnb", {"var_order": heuristic[0], "val_order": heuristic[1]})]
        runs.append(("cpsat", {"workers": 1, "time_limit": 5.0}))
        if objective == "latency":
            runs.append(("dp", {}))
            runs.append(
                ("bnb", {"bound": "thesis", "val_order": data.draw(st.sampled_from(VAL_ORDERS))})
            )
        for solver, options in runs:
            got = _outcome(problem, objective, solver, **options)
            assert (got is None) == (ref is None), (solver, options, objective)
            if ref is None:
                continue
            assert close(got[0], ref[0]), (solver, options, objective, got[0], ref[0])
            assert got[2].optimal
            assert got[1] == ref[1], (solver, options, objective)
        try:
            ds = _outcome(problem, objective, "ds")
        except SolverError:
            ds = None  # found nothing: allowed, DS is a heuristic
        if ds is not None:
            assert ref is not None
            assert ds[0] >= ref[0] * (1 - 1e-9)
            assert not ds[2].optimal


def test_fs_ties_prefer_fewer_submodels_then_lexicographic() -> None:
    """Two identical devices: the tie rule picks one sub-model on device 0."""
    part = Part("P", 64, 64, 80.0, 9.0, "F4")
    dev = [Device(f"d{i}", part, 65536, 65536, 80e6, 9.0) for i in range(2)]
    boards = Boards(tuple(dev), LinkSpec())
    problem = make_problem([LayerCost(flash=10, ram=10, macs=1000, out_bytes=4)] * 4, boards)
    for solver in ("fs", "bnb", "dp", "cpsat"):
        plan = solve(problem, "latency", solver)
        assert plan.assignment == (0, 0, 0, 0), solver
    assert count_runs((0, 1, 1, 0)) == 3


@pytest.mark.parametrize("var_order", VAR_ORDERS)
def test_bnb_heuristics_return_tie_ranked_plan_on_prefix_ties(var_order: str) -> None:
    """Every variable order finds the optimum value on a case with a forced split."""
    part = Part("P", 64, 64, 80.0, 9.0, "F4")
    dev = [Device(f"d{i}", part, 3000, 65536, 80e6 * (i + 1), 9.0) for i in range(2)]
    problem = make_problem(
        [LayerCost(flash=1000, ram=10, macs=5000 * (j + 1), out_bytes=8) for j in range(5)],
        Boards(tuple(dev), LinkSpec()),
    )
    ref = solve(problem, "throughput", "fs")
    got = solve(problem, "throughput", "bnb", var_order=var_order)
    assert close(1 / got.throughput_per_s, 1 / ref.throughput_per_s)
