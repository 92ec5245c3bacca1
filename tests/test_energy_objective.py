"""The energy objective (issue 26): every exact solver agrees with Full Search on small random
instances, with and without a latency or waiting-time bound, and the energy figures agree."""

from __future__ import annotations

import itertools
import math
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


def _brute_force(problem: Problem, max_latency_s: float, max_waiting_s: float) -> float | None:
    """The least energy over every one of the ``d^n`` assignments, each evaluated from scratch
    by :func:`evaluate` (memory constraints, latency ``I``, waiting time ``W`` and the per-board
    breakdown ``sum_i P_i (L_i + S_i) + p_i (I - L_i - S_i)``), not by the solvers' tables."""
    best = None
    for a in itertools.product(range(problem.d), repeat=problem.n):
        ev = evaluate(problem, a)
        if not ev.feasible or ev.energy_j is None:
            continue
        if ev.latency_s > max_latency_s * (1 + 1e-9) or ev.waiting_s > max_waiting_s * (1 + 1e-9):
            continue
        best = ev.energy_j if best is None else min(best, ev.energy_j)
    return best


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(inst=instances(), data=st.data())
def test_energy_optimum_equals_brute_force_over_assignments(inst, data) -> None:
    """Every solver's energy optimum equals the least energy found by enumerating all
    assignments and evaluating each one independently (:func:`_brute_force`), with no bound, a
    latency bound or a waiting-time bound drawn around the feasible range."""
    costs, boards = inst
    d = len(boards.devices)
    run_w = [data.draw(st.floats(0.005, 0.6)) for _ in range(d)]
    wait_w = [r * data.draw(st.floats(0.05, 0.9)) for r in run_w]
    problem = _with_powers(make_problem(costs, boards), run_w, wait_w)
    bound = data.draw(st.sampled_from(["none", "latency", "waiting"]))
    caps = {"max_latency_s": math.inf, "max_waiting_s": math.inf}
    if bound != "none":
        times = [
            (ev.latency_s, ev.waiting_s)
            for a in itertools.product(range(d), repeat=problem.n)
            if (ev := evaluate(problem, a)).feasible
        ]
        if not times:
            return
        k = 0 if bound == "latency" else 1
        lo, hi = min(x[k] for x in times), max(x[k] for x in times)
        key = "max_latency_s" if bound == "latency" else "max_waiting_s"
        caps[key] = lo + data.draw(st.sampled_from([0.0, 0.3, 0.7])) * (hi - lo)
    want = _brute_force(problem, caps["max_latency_s"], caps["max_waiting_s"])
    options = {k: v for k, v in caps.items() if math.isfinite(v)}
    for solver, extra in (("fs", {}), ("bnb", {}), ("cpsat", {"workers": 1, "time_limit": 5.0}),
                          ("auto", {})):  # fmt: skip
        got = _outcome(problem, solver, **options, **extra)
        assert (got is None) == (want is None), (solver, bound, want)
        if want is not None:
            assert got[0] == pytest.approx(want, rel=1e-9, abs=1e-15), (solver, bound)
            assert evaluate(problem, got[2].assignment).energy_j == pytest.approx(want, rel=1e-9)


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


def test_plan_cli_objective_energy_with_a_latency_bound(capsys, tmp_path) -> None:
    """``splitter plan --objective energy --max-latency-ms``: the plan meets the bound, its
    energy is no more than the latency plan's, and plan.json carries the breakdown."""
    import json
    from pathlib import Path

    from splitter.cli import main

    root = Path(__file__).resolve().parent.parent
    model = str(root / "models" / "mlperf_kws_ds_cnn_int8.tflite")
    boards = str(root / "models" / "boards" / "mlperf_kws2.toml")

    def plan(*args: str) -> dict:
        with pytest.raises(SystemExit) as exc:
            main(["plan", model, "--target", boards, "--json", *args])
        out = capsys.readouterr()
        assert exc.value.code == 0, out.err
        return json.loads(out.out)

    fast = plan()
    frugal = plan("--objective", "energy", "--max-latency-ms", "900")
    assert frugal["objective"] == "energy" and frugal["latency_s"] <= 0.9
    assert frugal["energy"]["total_j"] <= fast["energy"]["total_j"] * (1 + 1e-9)
    rows = frugal["energy"]["devices"]
    assert sum(d["compute_j"] + d["transfer_j"] + d["wait_j"] for d in rows) == pytest.approx(
        frugal["energy"]["total_j"]
    )
    for args in (["--max-latency-ms", "-1"], ["--min-throughput", "nan"]):
        with pytest.raises(SystemExit) as exc:
            main(["plan", model, "--target", boards, "--objective", "energy", *args])
        err = capsys.readouterr().err.strip()
        assert exc.value.code == 2 and len(err.splitlines()) == 1 and "give a number > 0" in err
    with pytest.raises(SystemExit) as exc:
        main(["plan", model, "--target", boards, "--max-latency-ms", "900"])
    assert exc.value.code == 2 and "--objective energy only" in capsys.readouterr().err


def test_plan_and_compile_print_the_energy_per_board(capsys, tmp_path) -> None:
    """``plan`` and ``compile`` print the energy of one inference, total and per board
    (compute, transfer, waiting), the same figures as plan.json's ``energy``."""
    import json
    from pathlib import Path

    from splitter.cli import main

    root = Path(__file__).resolve().parent.parent
    model = str(root / "models" / "tiny_cnn.onnx")
    boards = str(root / "tests" / "report_boards.toml")
    out = tmp_path / "out"
    texts = []
    for args in (["plan", model, "-t", boards], ["compile", model, "-t", boards, "-o", str(out),
                                                 "--no-firmware", "--no-validate"]):  # fmt: skip
        with pytest.raises(SystemExit) as exc:
            main(args)
        captured = capsys.readouterr()
        assert exc.value.code == 0, captured.err
        texts.append(captured.out)
    energy = json.loads((out / "plan.json").read_text())["energy"]
    boards_line = ", ".join(
        f"{d['name']} {1e3 * (d['compute_j'] + d['transfer_j'] + d['wait_j']):.3f} (compute "
        f"{1e3 * d['compute_j']:.3f}, transfer {1e3 * d['transfer_j']:.3f}, waiting "
        f"{1e3 * d['wait_j']:.3f})"
        for d in energy["devices"]
    )
    line = f"energy per inference {1e3 * energy['total_j']:.3f} mJ: {boards_line} mJ"
    for text in texts:
        assert line in " ".join(text.split()), text
